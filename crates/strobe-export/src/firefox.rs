//! Firefox Profiler output (processed profile JSON, version 55), written
//! in one streaming pass with bounded memory.
//!
//! Owns [`write_firefox`]: one Firefox process per profiled process, one
//! thread per thread with its on-CPU samples (stacks as labelled frames,
//! outermost first, each weighted by the time it stands for: weight type
//! `tracing-ms`), its off-CPU samples as `off-CPU` interval markers over
//! the blocked time (with the stack where the thread blocked) and its
//! regions as interval markers (instants for zero-length regions), in the
//! format profiler.firefox.com loads with "Load a profile from file". The
//! JSON is the one `fxprof-processed-profile` 0.8.1 writes for the same
//! profile, byte for byte, but the per-row columns (samples, markers,
//! strings) are formatted as the time-ordered inputs arrive and kept in a
//! [`Spool`] (memory up to a budget, then one anonymous temporary file),
//! then copied into the document thread by thread; only the tables that
//! grow with distinct stacks and frames stay in memory. It never holds a
//! trace, never formats a row through `serde_json::Value` and never
//! opens a named file.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::sync::Arc;

use serde_json::ser::{CompactFormatter, Formatter};
use strobe_db::visit::{
    Order, ProfileSink, RegionRow, ResolvedFrame, Run, SampleEvent, SampleKind, Shift, Stacks,
    Stream, ThreadRecord,
};
use strobe_db::Profile;

use crate::error::{ExportError, Result};
use crate::spool::Spool;

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

/// Nanoseconds per millisecond.
const NS_PER_MS: u64 = 1_000_000;

/// Integer millisecond weights for the samples of one stack of one thread
/// whose exact total stays within half a millisecond of the nanoseconds
/// it stands for: the format's sample weights are integers, so each
/// sample gets the change of the rounded running total.
#[derive(Default)]
struct MsCarry {
    /// Time of the stack's samples so far (ns).
    ns: u64,
    /// Milliseconds given to them so far.
    ms: u64,
}

impl MsCarry {
    fn add(&mut self, ns: u64) -> i32 {
        self.ns = self.ns.saturating_add(ns);
        let total = self.ns.saturating_add(NS_PER_MS / 2) / NS_PER_MS;
        let w = total.saturating_sub(self.ms);
        self.ms = total;
        i32::try_from(w).unwrap_or(i32::MAX)
    }
}

/// How much the exporter keeps in memory.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// Bytes of one (thread, column) buffer before it is spilled.
    chunk: usize,
    /// Bytes of all column buffers together before all are spilled.
    budget: usize,
    /// Bytes of interned strings (all threads) before the string indexes
    /// are forgotten: later repeats of a string get a new entry in their
    /// thread's string array, which the format allows.
    strings: usize,
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

/// Category indexes (meta.categories: Other, Samples, Off-CPU, Regions).
const CAT_SAMPLES: u64 = 1;
const CAT_OFF_CPU: u64 = 2;
const CAT_REGIONS: u64 = 3;

/// The spooled columns of a thread, from [`FxThread::col`] on. A
/// thread's markers are its off-CPU markers, then its regions: their
/// categories, and the off-CPU markers' names and phases, are one value
/// each, written from the counts; the regions' names and phases are
/// spooled apart.
const M_DATA: usize = 0;
const M_END: usize = 1;
const M_START: usize = 2;
const R_NAME: usize = 3;
const R_PHASE: usize = 4;
const S_STACK: usize = 5;
const S_TIME: usize = 6;
const S_WEIGHT: usize = 7;
const S_CPU: usize = 8;
const STRINGS: usize = 9;
const COLUMNS: usize = 10;

/// Most region names a thread remembers by pointer.
const NAME_CACHE: usize = 4096;

use crate::FastMap;

/// Appends an unsigned integer.
#[inline]
fn put_u64(b: &mut Vec<u8>, v: u64) {
    // Writing into a Vec cannot fail.
    let _ = CompactFormatter.write_u64(b, v);
}

/// Appends a signed integer.
#[inline]
fn put_i64(b: &mut Vec<u8>, v: i64) {
    let _ = CompactFormatter.write_i64(b, v);
}

/// Appends a finite float as serde_json writes it.
#[inline]
fn put_f64(b: &mut Vec<u8>, v: f64) {
    let _ = CompactFormatter.write_f64(b, v);
}

/// Nanoseconds as the format's float milliseconds: exactly what
/// `put_f64(ns as f64 / 1e6)` writes, without the float conversion.
/// Below 10^15 ns the decimal `ns / 10^6` has at most 15 significant
/// digits, so it is the shortest representation of the nearest double
/// and serde_json writes it in fixed notation (decimal exponents -5 to
/// 15), or as `Ne-6` for 1 to 9 ns.
#[inline]
fn put_ms(b: &mut Vec<u8>, ns: u64) {
    if ns >= 1_000_000_000_000_000 {
        put_f64(b, ns as f64 / NS_PER_MS as f64);
    } else if ns < 10 {
        if ns == 0 {
            b.extend_from_slice(b"0.0");
        } else {
            b.extend_from_slice(&[b'0' + ns as u8, b'e', b'-', b'6']);
        }
    } else {
        put_u64(b, ns / NS_PER_MS);
        let mut frac = ns % NS_PER_MS;
        if frac == 0 {
            b.extend_from_slice(b".0");
        } else {
            let mut digits = 6;
            while frac.is_multiple_of(10) {
                frac /= 10;
                digits -= 1;
            }
            let mut d = [b'0'; 7];
            d[0] = b'.';
            for k in (1..=digits).rev() {
                d[k] = b'0' + (frac % 10) as u8;
                frac /= 10;
            }
            b.extend_from_slice(&d[..=digits]);
        }
    }
}

/// Appends `s` as a JSON string, escaped as serde_json escapes it.
fn put_str(b: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    b.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &c) in bytes.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => &[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(c >> 4) as usize],
                HEX[(c & 15) as usize],
            ],
            _ => continue,
        };
        b.extend_from_slice(&bytes[start..i]);
        b.extend_from_slice(esc);
        start = i + 1;
    }
    b.extend_from_slice(&bytes[start..]);
    b.push(b'"');
}

/// A column value separator: nothing before a column's first value.
#[inline]
fn sep(b: &mut Vec<u8>, n: u64) {
    if n > 0 {
        b.push(b',');
    }
}

/// A Firefox process.
struct FxProcess {
    /// `exe (pid)`.
    name: String,
    /// The pid, made unique (`pid.N` for repeats).
    pid: String,
    /// Start (ns since the profile's start).
    start: u64,
    /// Its threads, in creation order.
    threads: Vec<usize>,
}

/// A thread's stack, interned: its stack-table row and the string of its
/// leaf frame ([`NONE`]: no frames), and the carry of its samples'
/// weights. Small, and kept in the map itself: looking a stack up is
/// most of a sample's cost (a cache miss).
struct StackEntry {
    stack: u32,
    leaf: u32,
    carry: MsCarry,
}

/// No stack-table row, no string.
const NONE: u32 = u32::MAX;

/// `NONE` as `None`.
#[inline]
fn opt(i: u32) -> Option<u32> {
    (i != NONE).then_some(i)
}

/// A Firefox thread: its identity, its in-memory tables (bounded by
/// distinct stacks, frames and strings) and the counts of its spooled
/// columns.
struct FxThread {
    process: usize,
    /// The tid, made unique (`tid.N` for repeats).
    tid: String,
    name: String,
    /// Register time (ns since the profile's start).
    start: u64,
    /// Unregister time.
    end: Option<u64>,
    is_main: bool,
    /// The process's clock shift (ns).
    shift: Shift,
    /// The first of its [`COLUMNS`] spool columns.
    col: usize,
    /// String → index in its string array (forgotten past the budget).
    strings: FastMap<Box<str>, u32>,
    n_strings: u32,
    /// Frame label → frame index; frame `i` is function `i`.
    frames: FastMap<Box<str>, u32>,
    /// Function `i`'s name (a string index).
    func_names: Vec<u32>,
    /// Stack table rows: (prefix, frame).
    stack_rows: Vec<(Option<u32>, u32)>,
    stack_index: FastMap<(Option<u32>, u32), u32>,
    /// Call site id → interned stack.
    stacks: FastMap<i64, StackEntry>,
    /// Samples without a call site.
    no_stack: StackEntry,
    /// The `off-CPU` marker name, once interned.
    off_cpu_name: Option<u32>,
    /// Region names by the address of the input's shared string (held,
    /// so that the address stays its own).
    names: FastMap<usize, (Arc<str>, u32)>,
    /// The empty string (regions without arguments), once interned.
    empty: Option<u32>,
    samples: u64,
    /// Off-CPU markers, then regions.
    off_cpu: u64,
    regions: u64,
    /// Time of the last sample (ns), for the time deltas.
    last_sample: u64,
}

/// The conversion's state: the Firefox writer as a sink of the profile
/// (samples first, then regions, whose readers scan and sort meanwhile).
struct Fx {
    spool: Spool,
    limits: Limits,
    /// Bytes of strings interned since they were last forgotten.
    string_bytes: usize,
    procs: Vec<FxProcess>,
    /// Process guid → (process, pid, clock shift); the last of a guid wins.
    by_guid: HashMap<String, (usize, i64, Shift)>,
    threads: Vec<FxThread>,
    /// tid → (guid, thread) of the threads with that tid.
    index: FastMap<i64, Vec<(Arc<str>, usize)>>,
    used_tids: HashMap<u32, u32>,
    /// The earliest process start (ns): time 0.
    base: i64,
    /// What an on-CPU sample without a weight stands for (ns).
    period: i64,
    time_kind: SampleKind,
    /// The first process's name.
    product: String,
    /// A region's arguments as text (reused).
    args: String,
    st: FirefoxStats,
}

/// `id`, or `id.N` for its N-th repeat (the library's rule for pids and
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

impl FxThread {
    /// The index of `s` in this thread's string array, appending it when
    /// new.
    fn intern(&mut self, spool: &mut Spool, string_bytes: &mut usize, s: &str) -> io::Result<u32> {
        if let Some(&i) = self.strings.get(s) {
            return Ok(i);
        }
        let i = self.n_strings;
        self.n_strings += 1;
        spool.write(self.col + STRINGS, |b| {
            sep(b, u64::from(i));
            put_str(b, s);
        })?;
        // The string, its allocation and its table slot.
        *string_bytes += s.len() + 64;
        self.strings.insert(s.into(), i);
        Ok(i)
    }

    /// The stack-table row for `frames` (outermost first), interning
    /// frames and functions by label; also the leaf's string.
    fn intern_stack<'a>(
        &mut self,
        spool: &mut Spool,
        string_bytes: &mut usize,
        frames: impl Iterator<Item = &'a ResolvedFrame>,
    ) -> io::Result<(Option<u32>, Option<u32>)> {
        let mut prefix = None;
        let mut leaf = None;
        for f in frames {
            // `ResolvedFrame::display_name`, without a copy when symbolized.
            let label = match &f.function {
                Some(name) => std::borrow::Cow::Borrowed(&**name),
                None => std::borrow::Cow::Owned(f.display_name()),
            };
            let frame = match self.frames.get(&*label) {
                Some(&i) => i,
                None => {
                    let name = self.intern(spool, string_bytes, &label)?;
                    let i = self.func_names.len() as u32;
                    self.func_names.push(name);
                    self.frames.insert((*label).into(), i);
                    i
                }
            };
            leaf = Some(self.func_names[frame as usize]);
            let next = self.stack_rows.len() as u32;
            let row = *self.stack_index.entry((prefix, frame)).or_insert(next);
            if row == next {
                self.stack_rows.push((prefix, frame));
            }
            prefix = Some(row);
        }
        Ok((prefix, leaf))
    }
}

impl Fx {
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
            no_stack: StackEntry {
                stack: NONE,
                leaf: NONE,
                carry: MsCarry::default(),
            },
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

    /// The stack of call site `id` on thread `t`, interned the first
    /// time: its stack-table row, its leaf's string and, for an on-CPU
    /// sample of `ns` nanoseconds, its weight in ms.
    #[inline]
    fn stack(
        &mut self,
        stacks: &mut Stacks<'_>,
        t: usize,
        guid: &Arc<str>,
        id: Option<i64>,
        ns: Option<u64>,
    ) -> Result<(u32, u32, i32)> {
        let th = &mut self.threads[t];
        let take = |e: &mut StackEntry| (e.stack, e.leaf, ns.map_or(0, |ns| e.carry.add(ns)));
        let Some(id) = id else {
            return Ok(take(&mut th.no_stack));
        };
        if let Some(e) = th.stacks.get_mut(&id) {
            return Ok(take(e));
        }
        let frames = stacks.get(guid, id)?;
        let (stack, leaf) =
            th.intern_stack(&mut self.spool, &mut self.string_bytes, frames.iter().rev())?;
        let mut e = StackEntry {
            stack: stack.unwrap_or(NONE),
            leaf: leaf.unwrap_or(NONE),
            carry: MsCarry::default(),
        };
        let r = take(&mut e);
        th.stacks.insert(id, e);
        Ok(r)
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
        let th = &mut self.threads[t];
        let key = Arc::as_ptr(name) as *const u8 as usize;
        if let Some((_, i)) = th.names.get(&key) {
            return Ok(*i);
        }
        let i = th.intern(&mut self.spool, &mut self.string_bytes, name)?;
        if th.names.len() >= NAME_CACHE {
            th.names.clear();
        }
        th.names.insert(key, (name.clone(), i));
        Ok(i)
    }
}

/// Converts a profile to the Firefox Profiler's processed format.
pub fn write_firefox<W: Write>(p: &Profile, out: W) -> Result<FirefoxStats> {
    write_with(p, out, Limits::default())
}

/// [`write_firefox`] within `limits`.
fn write_with<W: Write>(p: &Profile, out: W, limits: Limits) -> Result<FirefoxStats> {
    let mut fx = Fx {
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
    };
    p.visit(&mut fx)?;
    let interval = fx.period as u64 as f64 / 1_000_000_000.0 * 1000.0;
    let product = std::mem::take(&mut fx.product);
    let mut out = BufWriter::with_capacity(256 << 10, out);
    write_document(&mut fx, &product, interval, &mut out)?;
    out.flush()?;
    Ok(fx.st)
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
        let stack = opt(stack);
        if s.kind == SampleKind::OffCpu {
            let th = &mut self.threads[t];
            if th.off_cpu_name.is_none() {
                let i = th.intern(&mut self.spool, &mut self.string_bytes, "off-CPU")?;
                th.off_cpu_name = Some(i);
            }
            let function = match opt(leaf) {
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

/// The marker schemas (`meta.markerSchema`) of the two marker types.
const OFF_CPU_SCHEMA: &str = r#"{"name":"StrobeOffCpu","display":["marker-chart","marker-table"],"chartLabel":"{marker.data.function}","tooltipLabel":"off-CPU: {marker.data.function}","tableLabel":"off-CPU: {marker.data.function}","description":"Time the thread spent blocked (off CPU), with the stack where it blocked","fields":[{"key":"function","label":"Blocked in","format":"unique-string","searchable":true},{"key":"blocked","label":"Blocked for","format":"milliseconds"}]}"#;
const REGION_SCHEMA: &str = r#"{"name":"StrobeRegion","display":["marker-chart","marker-table"],"chartLabel":"{marker.name}","tooltipLabel":"{marker.name}","tableLabel":"{marker.name} {marker.data.args}","description":"A strobe region (instrumented interval)","fields":[{"key":"args","label":"Arguments","format":"unique-string","searchable":true}]}"#;

/// Writes `n` copies of `v` as a JSON array's elements.
fn repeat(b: &mut Vec<u8>, v: &[u8], n: usize) {
    for k in 0..n {
        if k > 0 {
            b.push(b',');
        }
        b.extend_from_slice(v);
    }
}

/// Writes `n` copies of `v` as array elements after `before` elements,
/// through `b` (flushed to `out` as it fills; left holding the tail).
fn repeat_to<W: Write>(
    out: &mut W,
    b: &mut Vec<u8>,
    v: &[u8],
    n: u64,
    before: u64,
) -> io::Result<()> {
    for k in 0..n {
        sep(b, before + k);
        b.extend_from_slice(v);
        if b.len() >= 64 << 10 {
            out.write_all(b)?;
            b.clear();
        }
    }
    Ok(())
}

/// Writes the document: meta, then each thread (processes by start time
/// and pid; in each, the main thread first, then by start, name and tid)
/// with its in-memory tables and its spooled columns.
fn write_document<W: Write>(
    fx: &mut Fx,
    product: &str,
    interval: f64,
    out: &mut W,
) -> io::Result<()> {
    let mut b = Vec::with_capacity(64 << 10);
    b.extend_from_slice(br#"{"meta":{"categories":[{"name":"Other","color":"grey","subcategories":["Other"]},{"name":"Samples","color":"blue","subcategories":["Other"]},{"name":"Off-CPU","color":"grey","subcategories":["Other"]},{"name":"Regions","color":"yellow","subcategories":["Other"]}],"debug":false,"extensions":{"baseURL":[],"id":[],"length":0,"name":[]},"interval":"#);
    put_f64(&mut b, interval);
    b.extend_from_slice(br#","preprocessedProfileVersion":55,"processType":0,"product":"#);
    put_str(&mut b, product);
    b.extend_from_slice(
        r#","sampleUnits":{"eventDelay":"ms","threadCPUDelta":"µs","time":"ms"}"#.as_bytes(),
    );
    b.extend_from_slice(br#","startTime":0.0,"symbolicated":false,"pausedRanges":[],"version":24,"usesOnlyOneStackType":true,"sourceCodeIsNotOnSearchfox":true,"markerSchema":["#);
    let schemas: Vec<&str> = [
        (fx.st.off_cpu_markers > 0, OFF_CPU_SCHEMA),
        (fx.st.markers > 0, REGION_SCHEMA),
    ]
    .into_iter()
    .filter_map(|(used, s)| used.then_some(s))
    .collect();
    b.extend_from_slice(schemas.join(",").as_bytes());
    b.extend_from_slice(br#"]},"libs":[],"threads":["#);
    out.write_all(&b)?;
    let mut order: Vec<usize> = (0..fx.procs.len()).collect();
    order.sort_by(|&x, &y| {
        let (x, y) = (&fx.procs[x], &fx.procs[y]);
        x.start.cmp(&y.start).then_with(|| x.pid.cmp(&y.pid))
    });
    let mut first = true;
    for q in order {
        let mut threads = fx.procs[q].threads.clone();
        threads.sort_by(|&x, &y| {
            let (x, y) = (&fx.threads[x], &fx.threads[y]);
            (!x.is_main)
                .cmp(&!y.is_main)
                .then_with(|| x.start.cmp(&y.start))
                .then_with(|| x.name.cmp(&y.name))
                .then_with(|| x.tid.cmp(&y.tid))
        });
        for t in threads {
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            write_thread(fx, t, &mut b, out)?;
        }
    }
    out.write_all(br#"],"pages":[],"profilerOverhead":[],"counters":[]}"#)
}

/// Writes one thread's object.
fn write_thread<W: Write>(fx: &mut Fx, t: usize, b: &mut Vec<u8>, out: &mut W) -> io::Result<()> {
    let th = &fx.threads[t];
    let q = &fx.procs[th.process];
    let nf = th.func_names.len();
    b.clear();
    b.extend_from_slice(br#"{"frameTable":{"length":"#);
    put_u64(b, nf as u64);
    b.extend_from_slice(br#","address":["#);
    repeat(b, b"-1", nf);
    b.extend_from_slice(br#"],"inlineDepth":["#);
    repeat(b, b"0", nf);
    b.extend_from_slice(br#"],"category":["#);
    repeat(b, CAT_SAMPLES.to_string().as_bytes(), nf);
    b.extend_from_slice(br#"],"subcategory":["#);
    repeat(b, b"0", nf);
    b.extend_from_slice(br#"],"func":["#);
    for i in 0..nf {
        sep(b, i as u64);
        put_u64(b, i as u64);
    }
    b.extend_from_slice(br#"],"nativeSymbol":["#);
    repeat(b, b"null", nf);
    b.extend_from_slice(br#"],"innerWindowID":["#);
    repeat(b, b"0", nf);
    b.extend_from_slice(br#"],"line":["#);
    repeat(b, b"null", nf);
    b.extend_from_slice(br#"],"column":["#);
    repeat(b, b"null", nf);
    b.extend_from_slice(br#"]},"funcTable":{"length":"#);
    put_u64(b, nf as u64);
    b.extend_from_slice(br#","name":["#);
    for (i, n) in th.func_names.iter().enumerate() {
        sep(b, i as u64);
        put_u64(b, u64::from(*n));
    }
    b.extend_from_slice(br#"],"isJS":["#);
    repeat(b, b"false", nf);
    b.extend_from_slice(br#"],"relevantForJS":["#);
    repeat(b, b"false", nf);
    b.extend_from_slice(br#"],"resource":["#);
    repeat(b, b"-1", nf);
    b.extend_from_slice(br#"],"fileName":["#);
    repeat(b, b"null", nf);
    b.extend_from_slice(br#"],"lineNumber":["#);
    repeat(b, b"null", nf);
    b.extend_from_slice(br#"],"columnNumber":["#);
    repeat(b, b"null", nf);
    b.extend_from_slice(br#"]},"markers":{"length":"#);
    let (n_off, n_reg) = (th.off_cpu, th.regions);
    put_u64(b, n_off + n_reg);
    b.extend_from_slice(br#","category":["#);
    out.write_all(b)?;
    b.clear();
    let (cat_off, cat_reg) = (CAT_OFF_CPU.to_string(), CAT_REGIONS.to_string());
    repeat_to(out, b, cat_off.as_bytes(), n_off, 0)?;
    repeat_to(out, b, cat_reg.as_bytes(), n_reg, n_off)?;
    let col = th.col;
    let off_name = th.off_cpu_name.unwrap_or(0).to_string();
    for (key, c, off_value) in [
        ("data", M_DATA, None),
        ("endTime", M_END, None),
        ("name", R_NAME, Some(off_name.as_bytes())),
        ("phase", R_PHASE, Some(&b"1"[..])),
        ("startTime", M_START, None),
    ] {
        b.extend_from_slice(b"],\"");
        b.extend_from_slice(key.as_bytes());
        b.extend_from_slice(b"\":[");
        if let Some(v) = off_value {
            // The off-CPU markers' one value, then the regions' spooled
            // ones.
            repeat_to(out, b, v, n_off, 0)?;
            if n_off > 0 && n_reg > 0 {
                b.push(b',');
            }
        }
        out.write_all(b)?;
        b.clear();
        fx.spool.drain(col + c, out)?;
    }
    b.push(b']');
    let th = &fx.threads[t];
    let q_name = if th.is_main { &q.name } else { &th.name };
    b.extend_from_slice(br#"},"name":"#);
    put_str(b, q_name);
    b.extend_from_slice(br#","isMainThread":"#);
    b.extend_from_slice(if th.is_main { b"true" } else { b"false" });
    b.extend_from_slice(br#","nativeSymbols":{"length":0,"address":[],"functionSize":[],"libIndex":[],"name":[]},"pausedRanges":[],"pid":"#);
    put_str(b, &q.pid);
    b.extend_from_slice(br#","processName":"#);
    put_str(b, &q.name);
    b.extend_from_slice(br#","processShutdownTime":null,"processStartupTime":"#);
    put_ms(b, q.start);
    b.extend_from_slice(br#","processType":"default","registerTime":"#);
    put_ms(b, th.start);
    b.extend_from_slice(br#","resourceTable":{"length":0,"lib":[],"name":[],"host":[],"type":[]},"samples":{"length":"#);
    put_u64(b, th.samples);
    b.extend_from_slice(br#","weightType":"tracing-ms""#);
    for (key, c) in [
        ("stack", S_STACK),
        ("timeDeltas", S_TIME),
        ("weight", S_WEIGHT),
        ("threadCPUDelta", S_CPU),
    ] {
        b.extend_from_slice(b",\"");
        b.extend_from_slice(key.as_bytes());
        b.extend_from_slice(b"\":[");
        out.write_all(b)?;
        b.clear();
        fx.spool.drain(col + c, out)?;
        b.push(b']');
    }
    let th = &fx.threads[t];
    b.extend_from_slice(br#"},"stackTable":{"length":"#);
    put_u64(b, th.stack_rows.len() as u64);
    b.extend_from_slice(br#","prefix":["#);
    for (i, (prefix, _)) in th.stack_rows.iter().enumerate() {
        sep(b, i as u64);
        match prefix {
            Some(p) => put_u64(b, u64::from(*p)),
            None => b.extend_from_slice(b"null"),
        }
    }
    b.extend_from_slice(br#"],"frame":["#);
    for (i, (_, frame)) in th.stack_rows.iter().enumerate() {
        sep(b, i as u64);
        put_u64(b, u64::from(*frame));
    }
    b.extend_from_slice(br#"]},"stringArray":["#);
    out.write_all(b)?;
    b.clear();
    fx.spool.drain(col + STRINGS, out)?;
    let th = &fx.threads[t];
    b.extend_from_slice(br#"],"tid":"#);
    put_str(b, &th.tid);
    b.extend_from_slice(br#","unregisterTime":"#);
    match th.end {
        Some(e) => put_ms(b, e),
        None => b.extend_from_slice(b"null"),
    }
    b.extend_from_slice(br#","showMarkersInTimeline":false}"#);
    out.write_all(b)?;
    b.clear();
    Ok(())
}

/// The crate's test databases (shared with the `tests` directory).
#[cfg(test)]
#[path = "../tests/fixture/mod.rs"]
mod fixture;

#[cfg(test)]
mod tests {
    use super::*;

    /// The profile of ten processes (two nodes), as `limits` write it.
    fn convert(p: &Profile, limits: Limits) -> (FirefoxStats, Vec<u8>) {
        let mut out = Vec::new();
        let st = write_with(p, &mut out, limits).unwrap();
        (st, out)
    }

    fn ten_processes(dir: &std::path::Path) -> Profile {
        let files: Vec<_> = (0..10u32)
            .map(|k| {
                let f = dir.join(format!("app-{k}.db"));
                let node = if k < 7 { "node-a" } else { "node-b" };
                fixture::write_process(&f, 1000 + k, node, 4 + u64::from(k), 6);
                f
            })
            .collect();
        Profile::open_files(&files).unwrap()
    }

    #[test]
    fn spilled_columns_give_the_same_document() {
        let dir = tempfile::tempdir().unwrap();
        let p = ten_processes(dir.path());
        let (st, whole) = convert(&p, Limits::default());
        assert!(st.samples > 0 && st.markers > 0 && st.off_cpu_markers > 0);
        assert!(st.threads >= 20);
        // A few bytes per chunk: every column spills, one value at a
        // time; and a budget that spills them all again and again.
        for (chunk, budget) in [(1, usize::MAX), (64, 512), (1 << 20, 256)] {
            let limits = Limits {
                chunk,
                budget,
                ..Limits::default()
            };
            let (st2, spilled) = convert(&p, limits);
            assert_eq!(st2, st);
            assert!(
                spilled == whole,
                "chunk {chunk}, budget {budget}: the documents differ"
            );
        }
        let v: serde_json::Value = serde_json::from_slice(&whole).unwrap();
        let threads = v["threads"].as_array().unwrap();
        assert_eq!(threads.len() as u64, st.threads);
    }

    /// Every string a thread's tables point to, resolved, in table order.
    fn resolved(v: &serde_json::Value) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        for t in v["threads"].as_array().unwrap() {
            let strings = t["stringArray"].as_array().unwrap();
            let s = |i: &serde_json::Value| {
                strings[i.as_u64().unwrap() as usize]
                    .as_str()
                    .unwrap()
                    .to_string()
            };
            let mut r: Vec<String> = t["funcTable"]["name"]
                .as_array()
                .unwrap()
                .iter()
                .map(s)
                .collect();
            r.extend(t["markers"]["name"].as_array().unwrap().iter().map(s));
            for d in t["markers"]["data"].as_array().unwrap() {
                r.push(s(d.get("args").or_else(|| d.get("function")).unwrap()));
            }
            out.push(r);
        }
        out
    }

    #[test]
    fn forgotten_string_indexes_only_repeat_strings() {
        let dir = tempfile::tempdir().unwrap();
        let p = ten_processes(dir.path());
        let (st, whole) = convert(&p, Limits::default());
        let limits = Limits {
            strings: 0,
            ..Limits::default()
        };
        let (st2, small) = convert(&p, limits);
        assert_eq!(st2, st);
        assert!(small.len() > whole.len(), "strings are written again");
        let a: serde_json::Value = serde_json::from_slice(&whole).unwrap();
        let b: serde_json::Value = serde_json::from_slice(&small).unwrap();
        assert_eq!(resolved(&a), resolved(&b));
        // The frame and stack tables do not grow with repeats.
        for (x, y) in a["threads"]
            .as_array()
            .unwrap()
            .iter()
            .zip(b["threads"].as_array().unwrap())
        {
            assert_eq!(x["stackTable"], y["stackTable"]);
            assert_eq!(x["frameTable"]["length"], y["frameTable"]["length"]);
            assert_eq!(x["samples"], y["samples"]);
        }
    }

    #[test]
    fn ms_carry_keeps_each_stack_within_half_a_millisecond() {
        // 0.4 ms samples: integer weights 0 or 1 whose running total stays
        // the rounded exact time.
        let mut c = MsCarry::default();
        let w: Vec<i32> = (0..10).map(|_| c.add(400_000)).collect();
        assert_eq!(w.iter().sum::<i32>(), 4);
        let mut exact = 0u64;
        let mut given = 0i64;
        let mut c = MsCarry::default();
        for k in 0..1000u64 {
            let ns = 100_000 + (k * 7919) % 3_000_000;
            exact += ns;
            given += i64::from(c.add(ns));
            assert!((given as f64 - exact as f64 / 1e6).abs() <= 0.5);
        }
        // Whole milliseconds pass through unchanged.
        let mut c = MsCarry::default();
        assert_eq!((c.add(4_000_000), c.add(1_000_000)), (4, 1));
    }

    #[test]
    fn milliseconds_are_written_as_serde_json_writes_the_float() {
        let mut values: Vec<u64> = (0..2000).collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Every magnitude, and round numbers at each.
            let v = x >> (x % 64);
            values.extend([v, v / 1000 * 1000, v / 1_000_000 * 1_000_000]);
        }
        for p in 0..20 {
            let t = 10u64.pow(p);
            values.extend([t - 1, t, t + 1, t.saturating_mul(5), t.saturating_mul(15)]);
        }
        values.push(u64::MAX);
        for ns in values {
            let (mut fast, mut float) = (Vec::new(), Vec::new());
            put_ms(&mut fast, ns);
            put_f64(&mut float, ns as f64 / 1e6);
            assert_eq!(
                String::from_utf8(fast).unwrap(),
                String::from_utf8(float).unwrap(),
                "{ns} ns"
            );
        }
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        for s in [
            "plain",
            "",
            "quote \" and \\ backslash",
            "ctl \n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}",
            "ünïcödé ✓ µs",
        ] {
            let mut b = Vec::new();
            put_str(&mut b, s);
            assert_eq!(
                String::from_utf8(b).unwrap(),
                serde_json::to_string(s).unwrap()
            );
        }
    }
}
