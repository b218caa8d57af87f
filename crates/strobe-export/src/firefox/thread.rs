//! A Firefox thread's tables and spooled columns.
//!
//! Owns [`FxThread`]: a thread's identity, the tables that grow with its
//! distinct strings, frames and stacks (kept in memory, bounded by them)
//! and the counts of its columns kept in the [`Spool`] (their layout:
//! [`COLUMNS`] from [`FxThread::col`] on); interning a string, a stack
//! (with the integer millisecond weights of its samples, [`MsCarry`]) or
//! a region name into them. It never writes the document and never reads
//! the profile: frames come from the caller.

use std::io;
use std::sync::Arc;

use strobe_db::visit::{ResolvedFrame, Shift, Stacks};

use super::json::{put_str, sep, NS_PER_MS};
use crate::error::Result;
use crate::spool::Spool;
use crate::FastMap;

/// The spooled columns of a thread, from [`FxThread::col`] on. A
/// thread's markers are its off-CPU markers, then its regions: their
/// categories, and the off-CPU markers' names and phases, are one value
/// each, written from the counts; the regions' names and phases are
/// spooled apart.
pub(super) const M_DATA: usize = 0;
pub(super) const M_END: usize = 1;
pub(super) const M_START: usize = 2;
pub(super) const R_NAME: usize = 3;
pub(super) const R_PHASE: usize = 4;
pub(super) const S_STACK: usize = 5;
pub(super) const S_TIME: usize = 6;
pub(super) const S_WEIGHT: usize = 7;
pub(super) const S_CPU: usize = 8;
pub(super) const STRINGS: usize = 9;
pub(super) const COLUMNS: usize = 10;

/// Most region names a thread remembers by pointer.
const NAME_CACHE: usize = 4096;

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

/// A thread's stack, interned: its stack-table row and the string of its
/// leaf frame ([`NONE`]: no frames), and the carry of its samples'
/// weights. Small, and kept in the map itself: looking a stack up is
/// most of a sample's cost (a cache miss).
pub(super) struct StackEntry {
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

impl StackEntry {
    /// No stack yet: samples without a call site.
    pub(super) fn none() -> Self {
        StackEntry {
            stack: NONE,
            leaf: NONE,
            carry: MsCarry::default(),
        }
    }
}

/// A Firefox thread: its identity, its in-memory tables (bounded by
/// distinct stacks, frames and strings) and the counts of its spooled
/// columns.
pub(super) struct FxThread {
    pub(super) process: usize,
    /// The tid, made unique (`tid.N` for repeats).
    pub(super) tid: String,
    pub(super) name: String,
    /// Register time (ns since the profile's start).
    pub(super) start: u64,
    /// Unregister time.
    pub(super) end: Option<u64>,
    pub(super) is_main: bool,
    /// The process's clock shift (ns).
    pub(super) shift: Shift,
    /// The first of its [`COLUMNS`] spool columns.
    pub(super) col: usize,
    /// String → index in its string array (forgotten past the budget).
    pub(super) strings: FastMap<Box<str>, u32>,
    pub(super) n_strings: u32,
    /// Frame label → frame index; frame `i` is function `i`.
    pub(super) frames: FastMap<Box<str>, u32>,
    /// Function `i`'s name (a string index).
    pub(super) func_names: Vec<u32>,
    /// Stack table rows: (prefix, frame).
    pub(super) stack_rows: Vec<(Option<u32>, u32)>,
    pub(super) stack_index: FastMap<(Option<u32>, u32), u32>,
    /// Call site id → interned stack.
    pub(super) stacks: FastMap<i64, StackEntry>,
    /// Samples without a call site.
    pub(super) no_stack: StackEntry,
    /// The `off-CPU` marker name, once interned.
    pub(super) off_cpu_name: Option<u32>,
    /// Region names by the address of the input's shared string (held,
    /// so that the address stays its own).
    pub(super) names: FastMap<usize, (Arc<str>, u32)>,
    /// The empty string (regions without arguments), once interned.
    pub(super) empty: Option<u32>,
    pub(super) samples: u64,
    /// Off-CPU markers, then regions.
    pub(super) off_cpu: u64,
    pub(super) regions: u64,
    /// Time of the last sample (ns), for the time deltas.
    pub(super) last_sample: u64,
}

impl FxThread {
    /// The index of `s` in this thread's string array, appending it when
    /// new.
    pub(super) fn intern(
        &mut self,
        spool: &mut Spool,
        string_bytes: &mut usize,
        s: &str,
    ) -> io::Result<u32> {
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

    /// The stack of call site `id` of process `guid` on this thread,
    /// interned the first time: its stack-table row, its leaf's string
    /// and, for an on-CPU sample of `ns` nanoseconds, its weight in ms.
    #[inline]
    pub(super) fn stack(
        &mut self,
        spool: &mut Spool,
        string_bytes: &mut usize,
        stacks: &mut Stacks<'_>,
        guid: &Arc<str>,
        id: Option<i64>,
        ns: Option<u64>,
    ) -> Result<(Option<u32>, Option<u32>, i32)> {
        let take = |e: &mut StackEntry| {
            (
                opt(e.stack),
                opt(e.leaf),
                ns.map_or(0, |ns| e.carry.add(ns)),
            )
        };
        let Some(id) = id else {
            return Ok(take(&mut self.no_stack));
        };
        if let Some(e) = self.stacks.get_mut(&id) {
            return Ok(take(e));
        }
        let frames = stacks.get(guid, id)?;
        let (stack, leaf) = self.intern_stack(spool, string_bytes, frames.iter().rev())?;
        let mut e = StackEntry {
            stack: stack.unwrap_or(NONE),
            leaf: leaf.unwrap_or(NONE),
            carry: MsCarry::default(),
        };
        let r = take(&mut e);
        self.stacks.insert(id, e);
        Ok(r)
    }

    /// The string index of region name `name`.
    #[inline]
    pub(super) fn region_name(
        &mut self,
        spool: &mut Spool,
        string_bytes: &mut usize,
        name: &Arc<str>,
    ) -> io::Result<u32> {
        let key = Arc::as_ptr(name) as *const u8 as usize;
        if let Some((_, i)) = self.names.get(&key) {
            return Ok(*i);
        }
        let i = self.intern(spool, string_bytes, name)?;
        if self.names.len() >= NAME_CACHE {
            self.names.clear();
        }
        self.names.insert(key, (name.clone(), i));
        Ok(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
