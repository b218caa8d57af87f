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
use std::hash::{BuildHasherDefault, Hasher};

use crate::writer::StackFrame;

/// Most whole stacks remembered by the shortcut cache.
pub(crate) const STACK_CACHE_CAP: usize = 16 * 1024;

/// A fast non-cryptographic hasher (the Fx multiply-rotate scheme). The
/// keys are our own ids and pcs, so hash flooding is not a concern.
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    #[inline]
    fn write_i64(&mut self, v: i64) {
        self.add(v as u64);
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
    #[inline]
    fn write_isize(&mut self, v: isize) {
        self.add(v as u64);
    }
    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.add(u64::from(v));
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

type Fast = BuildHasherDefault<FastHasher>;

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
