//! Sampled stacks as Chrome CPU profiles: one `Profile` and its
//! `ProfileChunk` trace events per thread, the compact form of samples in
//! Chrome trace JSON (the form V8 and Chrome DevTools write, which the
//! Perfetto UI and speedscope import).
//!
//! Owns each thread's call tree (one node per distinct path of frame
//! names, numbered per thread, every parent written before its children
//! and every node before the first sample that names it), the samples and
//! time deltas (whole microseconds) waiting for their chunk, and the
//! `(idle)` samples that end a thread's on-CPU stretches. Never reads the
//! profile and never decides the document's layout: it is handed each
//! sample's frame names (outermost first, already quoted) and writes whole
//! events through [`EventSink`]. Memory: the call trees and their stacks'
//! leaves, plus at most [`PENDING`] samples waiting across all threads.

use std::io::Write as _;
use std::sync::Arc;

use crate::error::Result;
use crate::jsonw;
use crate::FastMap;

/// Where whole trace events go: [`EventSink::event`] gives the buffer for
/// one new event (separator written), [`EventSink::done`] ends it.
pub(crate) trait EventSink {
    fn event(&mut self) -> &mut Vec<u8>;
    fn done(&mut self) -> Result<()>;
}

/// Samples a thread gathers before they go out as one chunk.
const CHUNK: usize = 1 << 16;
/// Samples waiting across all threads before every thread's chunk goes out.
const PENDING: usize = 1 << 20;
/// The category Chrome gives its CPU profiles.
const CATEGORY: &str = "disabled-by-default-v8.cpu_profiler";
/// The frame of the samples a thread spent off the CPU.
const IDLE: &str = "\"(idle)\"";
/// The frame of a sample that has no stack.
const NO_STACK: &str = "\"[no stack]\"";
/// The key of that frame's leaf among the stacks' (no stack id is
/// negative).
const NO_STACK_KEY: (usize, i64) = (usize::MAX, i64::MIN);

/// One thread's profile.
struct Thread {
    pid: i64,
    tid: i64,
    /// The profile's id, unique in the document.
    id: u32,
    /// Node by (parent, quoted frame name); parent 0 is "none".
    tree: FastMap<(u32, Arc<str>), u32>,
    /// Leaf node by (process index, stack id).
    leaves: FastMap<(usize, i64), u32>,
    /// Nodes made so far (ids are 1 to `nodes`).
    nodes: u32,
    /// The `(idle)` node, once made.
    idle: u32,
    /// Nodes made since the last chunk, as JSON objects joined by commas.
    new_nodes: Vec<u8>,
    samples: Vec<u32>,
    deltas: Vec<i64>,
    /// Samples made so far.
    pushed: u64,
    /// The last sample's time, µs.
    last_us: i64,
    /// When the last sample's time on the CPU ends (its time plus its
    /// weight), and that weight, ns.
    busy_until: i64,
    last_weight: i64,
}

impl Thread {
    /// The node of `name` under `parent`, made (and queued for the next
    /// chunk) when new.
    fn node(&mut self, parent: u32, name: &Arc<str>) -> u32 {
        if let Some(&n) = self.tree.get(&(parent, name.clone())) {
            return n;
        }
        self.nodes += 1;
        let id = self.nodes;
        self.tree.insert((parent, name.clone()), id);
        let b = &mut self.new_nodes;
        if !b.is_empty() {
            b.push(b',');
        }
        b.extend_from_slice(br#"{"id":"#);
        jsonw::int(b, i64::from(id));
        if parent != 0 {
            b.extend_from_slice(br#","parent":"#);
            jsonw::int(b, i64::from(parent));
        }
        b.extend_from_slice(br#","callFrame":{"functionName":"#);
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(br#","scriptId":"0","url":"","lineNumber":-1,"columnNumber":-1}}"#);
        id
    }

    /// The leaf node of stack `names` (outermost first).
    fn leaf(&mut self, names: &[Arc<str>]) -> u32 {
        if names.is_empty() {
            return self.node(0, &Arc::from(NO_STACK));
        }
        names.iter().fold(0, |parent, name| self.node(parent, name))
    }

    fn push(&mut self, node: u32, at_us: i64) {
        self.samples.push(node);
        self.deltas.push(at_us - self.last_us);
        self.pushed += 1;
        self.last_us = at_us;
    }

    /// An `(idle)` sample where the last on-CPU stretch ended.
    fn push_idle(&mut self) {
        if self.idle == 0 {
            self.idle = self.node(0, &Arc::from(IDLE));
        }
        let at_us = self.busy_until.div_euclid(1000).max(self.last_us);
        self.push(self.idle, at_us);
    }

    /// The `ProfileChunk` event of the samples and nodes gathered since the
    /// last one (`end_us`: the profile's end, in the last chunk).
    fn chunk(&mut self, out: &mut impl EventSink, end_us: Option<i64>) -> Result<()> {
        if self.samples.is_empty() && self.new_nodes.is_empty() && end_us.is_none() {
            return Ok(());
        }
        let b = out.event();
        self.head(b, "ProfileChunk", self.last_us);
        b.extend_from_slice(br#","args":{"data":{"cpuProfile":{"nodes":["#);
        b.extend_from_slice(&self.new_nodes);
        b.extend_from_slice(br#"],"samples":["#);
        for (i, s) in self.samples.iter().enumerate() {
            if i > 0 {
                b.push(b',');
            }
            jsonw::int(b, i64::from(*s));
        }
        b.extend_from_slice(br#"]},"timeDeltas":["#);
        for (i, d) in self.deltas.iter().enumerate() {
            if i > 0 {
                b.push(b',');
            }
            jsonw::int(b, *d);
        }
        b.push(b']');
        if let Some(end) = end_us {
            b.extend_from_slice(br#","endTime":"#);
            jsonw::int(b, end);
        }
        b.extend_from_slice(b"}}}");
        self.new_nodes.clear();
        self.samples.clear();
        self.deltas.clear();
        out.done()
    }

    /// `{"ph":"P","name":…,"cat":…,"id":…,"pid":…,"tid":…,"ts":…`.
    fn head(&self, b: &mut Vec<u8>, name: &str, ts_us: i64) {
        b.extend_from_slice(br#"{"ph":"P","name":""#);
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(br#"","cat":""#);
        b.extend_from_slice(CATEGORY.as_bytes());
        // Ids are strings in hex, as Chrome writes them.
        let _ = write!(b, r#"","id":"0x{:x}","pid":"#, self.id);
        jsonw::int(b, self.pid);
        b.extend_from_slice(br#","tid":"#);
        jsonw::int(b, self.tid);
        b.extend_from_slice(br#","ts":"#);
        jsonw::int(b, ts_us);
    }
}

/// Every thread's CPU profile, written as the samples come.
#[derive(Default)]
pub(crate) struct CpuProfiles {
    threads: Vec<Thread>,
    index: FastMap<(i64, i64), usize>,
    pending: usize,
}

/// What the profiles wrote.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Written {
    /// Samples, `(idle)` ones included.
    pub samples: u64,
    /// Call-tree nodes.
    pub nodes: u64,
}

impl CpuProfiles {
    /// A sample of thread `(pid, tid)` at `at` ns on the document's time
    /// base, on the CPU for `weight` ns, whose stack is `stack` (process
    /// index, stack id; `None`: no stack) with frame names given by
    /// `names` (outermost first, quoted) when the thread meets that stack
    /// for the first time.
    pub(crate) fn sample(
        &mut self,
        out: &mut impl EventSink,
        (pid, tid): (i64, i64),
        stack: Option<(usize, i64)>,
        names: impl FnOnce() -> Result<Arc<[Arc<str>]>>,
        at: i64,
        weight: i64,
    ) -> Result<()> {
        let at_us = at.div_euclid(1000);
        let ti = match self.index.get(&(pid, tid)) {
            Some(&ti) => ti,
            None => {
                let th = Thread {
                    pid,
                    tid,
                    id: self.threads.len() as u32 + 1,
                    tree: FastMap::default(),
                    leaves: FastMap::default(),
                    nodes: 0,
                    idle: 0,
                    new_nodes: Vec::new(),
                    samples: Vec::new(),
                    deltas: Vec::new(),
                    pushed: 0,
                    last_us: at_us,
                    busy_until: at,
                    last_weight: 0,
                };
                let b = out.event();
                th.head(b, "Profile", at_us);
                b.extend_from_slice(br#","args":{"data":{"startTime":"#);
                jsonw::int(b, at_us);
                b.extend_from_slice(b"}}}");
                out.done()?;
                self.index.insert((pid, tid), self.threads.len());
                self.threads.push(th);
                self.threads.len() - 1
            }
        };
        let th = &mut self.threads[ti];
        // A sample without a stack has a leaf of its own too (looked up
        // like any other, not made again per sample).
        let key = stack.unwrap_or(NO_STACK_KEY);
        let node = match th.leaves.get(&key) {
            Some(&n) => n,
            None => {
                let n = match stack {
                    Some(_) => th.leaf(&names()?),
                    None => th.leaf(&[]),
                };
                th.leaves.insert(key, n);
                n
            }
        };
        // Off the CPU since the last sample's time ran out, for more than a
        // quarter of that time (timer signals arrive a little late; a
        // thread that waited or was preempted leaves a gap).
        if th.pushed > 0 && at > th.busy_until.saturating_add(th.last_weight / 4) {
            th.push_idle();
            self.pending += 1;
        }
        th.push(node, at_us);
        th.busy_until = at.saturating_add(weight);
        th.last_weight = weight;
        self.pending += 1;
        if th.samples.len() >= CHUNK {
            self.pending -= th.samples.len();
            th.chunk(out, None)?;
        }
        if self.pending >= PENDING {
            for th in &mut self.threads {
                th.chunk(out, None)?;
            }
            self.pending = 0;
        }
        Ok(())
    }

    /// Ends every profile: an `(idle)` sample where its last sample's time
    /// runs out, and the last chunk.
    pub(crate) fn finish(mut self, out: &mut impl EventSink) -> Result<Written> {
        let mut written = Written::default();
        for th in &mut self.threads {
            th.push_idle();
            let end = th.busy_until.div_euclid(1000).max(th.last_us);
            written.nodes += u64::from(th.nodes);
            written.samples += th.pushed;
            th.chunk(out, Some(end))?;
        }
        Ok(written)
    }
}
