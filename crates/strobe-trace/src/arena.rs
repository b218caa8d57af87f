//! An append-only byte arena for NUL-terminated strings: bump allocation in
//! 64 KiB chunks, so storing a string costs no `malloc`.
//!
//! Owns its chunks. It must never move or free a chunk before it is dropped:
//! C code holds `char *` into them. Callers serialise `store`.

use std::mem::MaybeUninit;

/// Append-only byte arena: chunks are never moved or freed before the table.
pub(crate) struct Arena {
    chunks: Vec<(*mut MaybeUninit<u8>, usize)>,
    used: usize,
}

// SAFETY: the arena is only touched under its owner's insertion lock and in Drop.
unsafe impl Send for Arena {}

const CHUNK: usize = 64 * 1024;

impl Arena {
    /// An empty arena (allocates on first store).
    pub(crate) fn new() -> Self {
        Arena {
            chunks: Vec::new(),
            used: 0,
        }
    }

    /// Copies `s` plus a NUL into the arena and returns the copy's address.
    pub(crate) fn store(&mut self, s: &[u8]) -> *const u8 {
        let need = s.len() + 1;
        let fits = self
            .chunks
            .last()
            .is_some_and(|&(_, cap)| cap - self.used >= need);
        if !fits {
            let cap = need.max(CHUNK);
            let chunk: Box<[MaybeUninit<u8>]> = vec![MaybeUninit::uninit(); cap].into_boxed_slice();
            self.chunks
                .push((Box::into_raw(chunk) as *mut MaybeUninit<u8>, cap));
            self.used = 0;
        }
        let &(base, _) = self.chunks.last().expect("a chunk exists");
        // SAFETY: `base + used .. + need` lies inside the chunk (checked
        // above) and no published entry covers it yet.
        unsafe {
            let dst = base.add(self.used) as *mut u8;
            std::ptr::copy_nonoverlapping(s.as_ptr(), dst, s.len());
            *dst.add(s.len()) = 0;
            self.used += need;
            dst
        }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for &(base, cap) in &self.chunks {
            // SAFETY: created by Box::into_raw with this length; no borrow of
            // the table (hence of the chunk) outlives it.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(base, cap)) });
        }
    }
}
