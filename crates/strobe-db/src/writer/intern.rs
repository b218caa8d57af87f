//! The writer's interning caches: strings, frames, call sites and whole
//! stacks.
//!
//! Owns the maps from a distinct value to its row id. The string, frame and
//! call-site maps grow only with the number of distinct values, never with
//! run length; the whole-stack shortcut map is capped at a fixed number of
//! entries and cleared when full (it only saves work: the call-site tree
//! stays the source of truth). They must never touch the database: the
//! writer inserts the row and records the id here.

use std::collections::HashMap;

use super::records::StackFrame;

/// Most whole stacks remembered by the shortcut cache.
pub(crate) const STACK_CACHE_CAP: usize = 16 * 1024;

/// The maps' hasher: foldhash's fast hasher with a fixed seed. The keys
/// are our own ids and pcs, so hash flooding is not a concern.
type Fast = foldhash::fast::FixedState;

/// Row-id caches for interned values.
#[derive(Debug, Default)]
pub(crate) struct InternCaches {
    strings: HashMap<String, i64, Fast>,
    frames: HashMap<(i64, u64), i64, Fast>,
    callsites: HashMap<(i64, i64), i64, Fast>,
    stacks: HashMap<Box<[StackFrame]>, i64, Fast>,
}

impl InternCaches {
    /// Row id of an interned string, if already written.
    #[inline]
    pub fn string(&self, s: &str) -> Option<i64> {
        self.strings.get(s).copied()
    }
    /// Records a newly written string.
    pub fn add_string(&mut self, s: &str, id: i64) {
        self.strings.insert(s.to_owned(), id);
    }
    /// Row id of a frame keyed by module row id (0 = none) and relative pc.
    #[inline]
    pub fn frame(&self, module: i64, pc: u64) -> Option<i64> {
        self.frames.get(&(module, pc)).copied()
    }
    /// Records a newly written frame.
    pub fn add_frame(&mut self, module: i64, pc: u64, id: i64) {
        self.frames.insert((module, pc), id);
    }
    /// Row id of the call site `parent` (0 = root) + `frame`.
    #[inline]
    pub fn callsite(&self, parent: i64, frame: i64) -> Option<i64> {
        self.callsites.get(&(parent, frame)).copied()
    }
    /// Records a newly written call site.
    pub fn add_callsite(&mut self, parent: i64, frame: i64, id: i64) {
        self.callsites.insert((parent, frame), id);
    }
    /// Leaf call site of a whole stack seen recently (0 = empty stack).
    #[inline]
    pub fn stack(&self, frames: &[StackFrame]) -> Option<i64> {
        self.stacks.get(frames).copied()
    }
    /// Remembers a whole stack; clears the shortcut map when it is full.
    pub fn add_stack(&mut self, frames: &[StackFrame], leaf: i64) {
        if self.stacks.len() >= STACK_CACHE_CAP {
            self.stacks.clear();
        }
        self.stacks.insert(frames.into(), leaf);
    }
    /// Number of cached values (strings, frames, call sites, whole stacks).
    pub fn sizes(&self) -> (usize, usize, usize, usize) {
        (
            self.strings.len(),
            self.frames.len(),
            self.callsites.len(),
            self.stacks.len(),
        )
    }
}
