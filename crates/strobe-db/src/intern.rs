//! The writer's interning caches: strings, frames and call sites.
//!
//! Owns the maps from a distinct value to its row id. They grow only with
//! the number of distinct strings, distinct (module, pc) frames and distinct
//! call-site tree nodes, never with run length. They must never touch the
//! database: the writer inserts the row and records the id here.

use std::collections::HashMap;

/// Row-id caches for interned values.
#[derive(Debug, Default)]
pub(crate) struct InternCaches {
    strings: HashMap<String, i64>,
    frames: HashMap<(i64, u64), i64>,
    callsites: HashMap<(i64, i64), i64>,
}

impl InternCaches {
    /// Row id of an interned string, if already written.
    pub fn string(&self, s: &str) -> Option<i64> {
        self.strings.get(s).copied()
    }
    /// Records a newly written string.
    pub fn add_string(&mut self, s: &str, id: i64) {
        self.strings.insert(s.to_owned(), id);
    }
    /// Row id of a frame keyed by module row id (0 = none) and relative pc.
    pub fn frame(&self, module: i64, pc: u64) -> Option<i64> {
        self.frames.get(&(module, pc)).copied()
    }
    /// Records a newly written frame.
    pub fn add_frame(&mut self, module: i64, pc: u64, id: i64) {
        self.frames.insert((module, pc), id);
    }
    /// Row id of the call site `parent` (0 = root) + `frame`.
    pub fn callsite(&self, parent: i64, frame: i64) -> Option<i64> {
        self.callsites.get(&(parent, frame)).copied()
    }
    /// Records a newly written call site.
    pub fn add_callsite(&mut self, parent: i64, frame: i64, id: i64) {
        self.callsites.insert((parent, frame), id);
    }
    /// Number of cached values (strings, frames, call sites).
    pub fn sizes(&self) -> (usize, usize, usize) {
        (self.strings.len(), self.frames.len(), self.callsites.len())
    }
}
