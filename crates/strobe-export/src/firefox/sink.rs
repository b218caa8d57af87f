//! The Firefox exporter's pass over the profile.
//!
//! Owns [`Fx`], the conversion's state as a sink of the profile's visit:
//! the processes and threads, each sample and region spooled into its
//! thread's columns as it arrives (samples first, then regions, whose
//! readers scan and sort meanwhile), the memory [`Limits`] and the counts
//! of what was written ([`FirefoxStats`]). It never writes the document
//! (that is `document`'s, once the visit ends) and never holds a row
//! after spooling it.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use strobe_db::visit::{
    Order, ProfileSink, RegionRow, Run, SampleEvent, SampleKind, Shift, Stacks, Stream,
    ThreadRecord,
};

use super::json::{put_f64, put_i64, put_ms, put_u64, sep, NS_PER_MS};
use super::thread::{
    FxThread, StackEntry, COLUMNS, M_DATA, M_END, M_START, R_NAME, R_PHASE, S_CPU, S_STACK, S_TIME,
    S_WEIGHT,
};
use crate::error::{ExportError, Result};
use crate::spool::Spool;
use crate::FastMap;

/// What a Firefox conversion wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirefoxStats {
    /// Threads.
    pub threads: u64,
    /// Samples (on-CPU samples; the samples tables).
    pub samples: u64,
    /// Markers (regions and instants).
    pub markers: u64,
    /// Off-CPU samples, written as `off-CPU` interval markers.
    pub off_cpu_markers: u64,
}

/// How much the exporter keeps in memory.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Bytes of one (thread, column) buffer before it is spilled.
    pub(super) chunk: usize,
    /// Bytes of all column buffers together before all are spilled.
    pub(super) budget: usize,
    /// Bytes of interned strings (all threads) before the string indexes
    /// are forgotten: later repeats of a string get a new entry in their
    /// thread's string array, which the format allows.
    pub(super) strings: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            chunk: 128 << 10,
            budget: 24 << 20,
            strings: 16 << 20,
        }
    }
}

/// A Firefox process.
pub(super) struct FxProcess {
    /// `exe (pid)`.
    pub(super) name: String,
    /// The pid, made unique (`pid.N` for repeats).
    pub(super) pid: String,
    /// Start (ns since the profile's start).
    pub(super) start: u64,
    /// Its threads, in creation order.
    pub(super) threads: Vec<usize>,
}

/// The conversion's state: the Firefox writer as a sink of the profile
/// (samples first, then regions, whose readers scan and sort meanwhile).
pub(super) struct Fx {
    pub(super) spool: Spool,
    pub(super) limits: Limits,
    /// Bytes of strings interned since they were last forgotten.
    pub(super) string_bytes: usize,
    pub(super) procs: Vec<FxProcess>,
    /// Process guid → (process, pid, clock shift); the last of a guid wins.
    pub(super) by_guid: HashMap<String, (usize, i64, Shift)>,
    pub(super) threads: Vec<FxThread>,
    /// tid → (guid, thread) of the threads with that tid.
    pub(super) index: FastMap<i64, Vec<(Arc<str>, usize)>>,
    pub(super) used_tids: HashMap<u32, u32>,
    /// The earliest process start (ns): time 0.
    pub(super) base: i64,
    /// What an on-CPU sample without a weight stands for (ns).
    pub(super) period: i64,
    pub(super) time_kind: SampleKind,
    /// The first process's name.
    pub(super) product: String,
    /// A region's arguments as text (reused).
    pub(super) args: String,
    pub(super) st: FirefoxStats,
}

/// tids).
fn unique_id(used: &mut HashMap<u32, u32>, id: u32) -> String {
    let n = used.entry(id).or_insert(0);
    let s = if *n == 0 {
        id.to_string()
    } else {
        format!("{id}.{n}")
    };
    *n += 1;
    s
}

impl Fx {
    /// An empty conversion within `limits`.
    pub(super) fn new(limits: Limits) -> Self {
        Fx {
            spool: Spool::new(limits.chunk, limits.budget),
            limits,
            string_bytes: 0,
            procs: Vec::new(),
            by_guid: HashMap::new(),
            threads: Vec::new(),
            index: FastMap::default(),
            used_tids: HashMap::new(),
            base: 0,
            period: 0,
            time_kind: SampleKind::Cpu,
            product: String::new(),
            args: String::new(),
            st: FirefoxStats::default(),
        }
    }

    /// Nanoseconds of a process's clock → nanoseconds since the start.
    #[inline]
    fn ts(&self, shift: Shift, ns: i64) -> u64 {
        (ns + shift - self.base).max(0) as u64
    }

    /// Adds a thread (of a known process).
    fn add_thread(
        &mut self,
        guid: &str,
        tid: i64,
        name: String,
        start: u64,
        end: Option<u64>,
    ) -> Option<usize> {
        let &(process, pid, shift) = self.by_guid.get(guid)?;
        let t = self.threads.len();
        let col = self.spool.add_columns(COLUMNS);
        self.threads.push(FxThread {
            process,
            tid: unique_id(&mut self.used_tids, tid as u32),
            name,
            start,
            end,
            is_main: tid == pid,
            shift,
            col,
            strings: FastMap::default(),
            n_strings: 0,
            frames: FastMap::default(),
            func_names: Vec::new(),
            stack_rows: Vec::new(),
            stack_index: FastMap::default(),
            stacks: FastMap::default(),
            no_stack: StackEntry::none(),
            off_cpu_name: None,
            names: FastMap::default(),
            empty: None,
            samples: 0,
            off_cpu: 0,
            regions: 0,
            last_sample: 0,
        });
        self.procs[process].threads.push(t);
        let guid: Arc<str> = guid.into();
        let slot = self.index.entry(tid).or_default();
        match slot.iter_mut().find(|(g, _)| *g == guid) {
            Some(e) => e.1 = t,
            None => slot.push((guid, t)),
        }
        self.st.threads += 1;
        Some(t)
    }

    /// The thread `tid` of process `guid`, added (unnamed, start 0) the
    /// first time an event names a thread the threads table lacks.
    #[inline]
    fn thread_of(&mut self, guid: &Arc<str>, tid: i64) -> Option<usize> {
        if let Some(slot) = self.index.get_mut(&tid) {
            for (g, t) in slot.iter_mut() {
                if Arc::ptr_eq(g, guid) {
                    return Some(*t);
                }
                if **g == **guid {
                    // The input shares one Arc per process: compare
                    // pointers from now on.
                    *g = guid.clone();
                    return Some(*t);
                }
            }
        }
        self.add_thread(guid, tid, format!("thread {tid}"), 0, None)
    }

    /// Forgets every thread's string indexes once they hold too much.
    #[inline]
    fn bound_strings(&mut self) {
        if self.string_bytes > self.limits.strings {
            for t in &mut self.threads {
                t.strings = FastMap::default();
            }
            self.string_bytes = 0;
        }
    }

    /// The stack of call site `id` on thread `t` (see
    /// [`FxThread::stack`]).
    #[inline]
    fn stack(
        &mut self,
        stacks: &mut Stacks<'_>,
        t: usize,
        guid: &Arc<str>,
        id: Option<i64>,
        ns: Option<u64>,
    ) -> Result<(Option<u32>, Option<u32>, i32)> {
        self.threads[t].stack(
            &mut self.spool,
            &mut self.string_bytes,
            stacks,
            guid,
            id,
            ns,
        )
    }

    /// Appends the columns every marker has (data, end, start) to
    /// thread `t`; `end` `None` is an instant.
    #[inline]
    fn marker(
        &mut self,
        t: usize,
        start: u64,
        end: Option<u64>,
        data: impl FnOnce(&mut Vec<u8>),
    ) -> io::Result<()> {
        let th = &self.threads[t];
        let (col, n) = (th.col, th.off_cpu + th.regions);
        let s = &mut self.spool;
        s.write(col + M_DATA, |b| {
            sep(b, n);
            data(b);
        })?;
        s.write(col + M_END, |b| {
            sep(b, n);
            put_ms(b, end.unwrap_or(0));
        })?;
        s.write(col + M_START, |b| {
            sep(b, n);
            put_ms(b, start);
        })
    }

    /// The string index of region name `name` on thread `t`.
    #[inline]
    fn region_name(&mut self, t: usize, name: &Arc<str>) -> io::Result<u32> {
        self.threads[t].region_name(&mut self.spool, &mut self.string_bytes, name)
    }
}

impl ProfileSink for Fx {
    type Error = ExportError;

    fn order(&self) -> Order {
        Order::Sequence(&[Stream::Samples, Stream::Regions])
    }

    fn begin(&mut self, run: &Run) -> Result<()> {
        let base = run.first_start();
        self.base = base;
        self.period = run.period_ns;
        self.time_kind = run.time_kind;
        self.product = run
            .processes
            .first()
            .map(|q| q.short_name())
            .unwrap_or_else(|| "strobe".into());
        let mut used_pids = HashMap::new();
        for q in &run.processes {
            let shift = run.shifts.get(&q.guid).copied().unwrap_or_default();
            self.by_guid
                .insert(q.guid.clone(), (self.procs.len(), q.pid, shift));
            self.procs.push(FxProcess {
                name: format!("{} ({})", q.short_name(), q.pid),
                pid: unique_id(&mut used_pids, q.pid as u32),
                start: self.ts(shift, q.start.unwrap_or(base)),
                threads: Vec::new(),
            });
        }
        Ok(())
    }

    fn thread(&mut self, t: &ThreadRecord) -> Result<()> {
        let Some(&(_, _, shift)) = self.by_guid.get(&t.guid) else {
            return Ok(());
        };
        let name = t
            .name
            .clone()
            .unwrap_or_else(|| format!("thread {}", t.tid));
        let start = self.ts(shift, t.start.unwrap_or(self.base));
        let end = t.end.map(|e| self.ts(shift, e));
        self.add_thread(&t.guid, t.tid, name, start, end);
        Ok(())
    }

    fn sample(&mut self, s: &SampleEvent<'_>, stacks: &mut Stacks<'_>) -> Result<()> {
        let Some(t) = self.thread_of(s.guid, s.tid) else {
            return Ok(());
        };
        let shift = self.threads[t].shift;
        // The time of an on-CPU sample: the samples of the profile's time
        // kind (real-time samples where CPU-time ones exist are not CPU
        // time).
        let ns = (s.kind == self.time_kind).then(|| {
            if s.weight_ns > 0 {
                s.weight_ns
            } else {
                self.period.max(0) as u64
            }
        });
        // Every sample's stack is interned, kept or not (as the library
        // version of this exporter did: same tables, same JSON).
        let (stack, leaf, weight) = self.stack(stacks, t, s.guid, s.stack_id, ns)?;
        if s.kind == SampleKind::OffCpu {
            let th = &mut self.threads[t];
            if th.off_cpu_name.is_none() {
                let i = th.intern(&mut self.spool, &mut self.string_bytes, "off-CPU")?;
                th.off_cpu_name = Some(i);
            }
            let function = match leaf {
                Some(i) => i,
                None => th.intern(&mut self.spool, &mut self.string_bytes, "[no stack]")?,
            };
            let end = s
                .timestamp
                .saturating_add(s.weight_ns.min(i64::MAX as u64) as i64);
            let (start, end) = (self.ts(shift, s.timestamp), self.ts(shift, end));
            let blocked = s.weight_ns;
            debug_assert_eq!(self.threads[t].regions, 0, "off-CPU markers come first");
            self.marker(t, start, Some(end), |b| {
                b.extend_from_slice(br#"{"type":"StrobeOffCpu","#);
                if let Some(stack) = stack {
                    b.extend_from_slice(br#""cause":{"stack":"#);
                    put_u64(b, u64::from(stack));
                    b.extend_from_slice(b"},");
                }
                b.extend_from_slice(br#""function":"#);
                put_u64(b, u64::from(function));
                b.extend_from_slice(br#","blocked":"#);
                put_ms(b, blocked);
                b.push(b'}');
            })?;
            self.threads[t].off_cpu += 1;
            self.st.off_cpu_markers += 1;
            self.bound_strings();
            return Ok(());
        }
        let Some(ns) = ns else {
            return Ok(());
        };
        let time = self.ts(shift, s.timestamp);
        let th = &mut self.threads[t];
        let (col, n) = (th.col, th.samples);
        // Signed: a stream out of time order still gives exact times.
        let delta = time.wrapping_sub(th.last_sample) as i64;
        th.last_sample = time;
        th.samples += 1;
        let sp = &mut self.spool;
        sp.write(col + S_STACK, |b| {
            sep(b, n);
            match stack {
                Some(i) => put_u64(b, u64::from(i)),
                None => b.extend_from_slice(b"null"),
            }
        })?;
        sp.write(col + S_TIME, |b| {
            sep(b, n);
            if delta >= 0 {
                put_ms(b, delta as u64);
            } else {
                put_f64(b, delta as f64 / NS_PER_MS as f64);
            }
        })?;
        sp.write(col + S_WEIGHT, |b| {
            sep(b, n);
            put_i64(b, i64::from(weight));
        })?;
        sp.write(col + S_CPU, |b| {
            sep(b, n);
            put_u64(b, ns / 1000);
        })?;
        self.st.samples += 1;
        self.bound_strings();
        Ok(())
    }

    fn region(&mut self, r: &RegionRow) -> Result<()> {
        let Some(t) = self.thread_of(&r.guid, r.tid) else {
            return Ok(());
        };
        let name = self.region_name(t, &r.name)?;
        let th = &mut self.threads[t];
        let a = if r.args.is_empty() {
            match th.empty {
                Some(i) => i,
                None => {
                    let i = th.intern(&mut self.spool, &mut self.string_bytes, "")?;
                    th.empty = Some(i);
                    i
                }
            }
        } else {
            let args = &mut self.args;
            args.clear();
            for (k, (n, _, v)) in r.args.iter().enumerate() {
                if k > 0 {
                    args.push_str(", ");
                }
                args.push_str(n);
                args.push('=');
                args.push_str(v);
            }
            th.intern(&mut self.spool, &mut self.string_bytes, args)?
        };
        let (shift, col, n) = (th.shift, th.col, th.regions);
        let start = self.ts(shift, r.start);
        let end = (!r.is_marker()).then(|| self.ts(shift, r.end));
        self.marker(t, start, end, |b| {
            b.extend_from_slice(br#"{"type":"StrobeRegion","args":"#);
            put_u64(b, u64::from(a));
            b.push(b'}');
        })?;
        self.spool.write(col + R_NAME, |b| {
            sep(b, n);
            put_u64(b, u64::from(name));
        })?;
        self.spool.write(col + R_PHASE, |b| {
            sep(b, n);
            b.push(if end.is_some() { b'1' } else { b'0' });
        })?;
        self.threads[t].regions += 1;
        self.st.markers += 1;
        self.bound_strings();
        Ok(())
    }
}
