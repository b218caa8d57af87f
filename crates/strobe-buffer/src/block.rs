//! One block of buffer memory: the page-rounded payload arena and the tag
//! array that describes each record in it.
//!
//! Owns record placement (copying a payload in, bookkeeping of bytes used and
//! record count) and turning the tags back into [`RecordHeader`]s at delivery.
//! A block has exactly one owner at a time (a producer through its shard, the
//! ready queue, the delivery thread or the free pool); the owner mutates it
//! without synchronisation. Placing a record never allocates, locks or
//! formats. Memory is allocated and pre-faulted once, when the buffer is
//! created.
//!
//! Accounting follows seed 001: a record occupies its payload size rounded up
//! to 8 bytes (the alignment of every payload) in the arena; the per-record
//! tag (category, kind, operation, size) lives in a separate array and does
//! not count against the buffer size or the watermark. So a 4096-byte block
//! holds 512 eight-byte records, and a 48-byte watermark is reached by six.

use crate::page::page_size;
use crate::record::RecordHeader;
use std::alloc::{alloc, dealloc, Layout};
use std::ptr::NonNull;

/// Every payload starts on this boundary and occupies a multiple of it.
pub(crate) const RECORD_ALIGN: usize = 8;

/// The bytes a record of `size` payload bytes occupies in the arena (at
/// least 8, so an empty record still has a tag slot).
#[inline]
pub(crate) const fn footprint(size: usize) -> usize {
    if size == 0 {
        RECORD_ALIGN
    } else {
        (size + RECORD_ALIGN - 1) & !(RECORD_ALIGN - 1)
    }
}

/// Packs a record's description into one tag word:
/// bits 0–7 category, 8–15 kind, 16–31 payload size, 32–63 operation.
#[inline]
pub(crate) const fn tag(category: u32, kind: u32, operation: u32, size: usize) -> u64 {
    (category as u64 & 0xff)
        | ((kind as u64 & 0xff) << 8)
        | ((size as u64 & 0xffff) << 16)
        | ((operation as u64) << 32)
}

pub(crate) struct Block {
    arena: NonNull<u8>,
    tags: NonNull<u64>,
    capacity: usize,
    used: usize,
    count: usize,
}

// SAFETY: a block is plain memory with a single owner at a time; ownership is
// handed between threads only through atomics with acquire/release ordering
// (shard slots, the free pool, the ready queue).
unsafe impl Send for Block {}

impl Block {
    /// Allocates and pre-faults a block of `capacity` bytes (a multiple of
    /// the page size). Returns `None` when memory is exhausted.
    pub(crate) fn new(capacity: usize) -> Option<Box<Block>> {
        debug_assert!(capacity >= RECORD_ALIGN && capacity.is_multiple_of(RECORD_ALIGN));
        let page = page_size();
        let arena_layout = Layout::from_size_align(capacity, page).ok()?;
        let tag_layout = Layout::array::<u64>(capacity / RECORD_ALIGN).ok()?;
        // SAFETY: both layouts have non-zero size (capacity ≥ 8).
        let arena = NonNull::new(unsafe { alloc(arena_layout) })?;
        // SAFETY: as above.
        let tags = match NonNull::new(unsafe { alloc(tag_layout) } as *mut u64) {
            Some(t) => t,
            None => {
                // SAFETY: `arena` was allocated just above with this layout.
                unsafe { dealloc(arena.as_ptr(), arena_layout) };
                return None;
            }
        };
        // Pre-fault: touching memory for the first time on the hot path costs
        // a page fault per page (measured to double record cost, see
        // REFERENCE.md §8).
        // SAFETY: both regions were just allocated with exactly these sizes.
        unsafe {
            std::ptr::write_bytes(arena.as_ptr(), 0, capacity);
            std::ptr::write_bytes(tags.as_ptr(), 0, capacity / RECORD_ALIGN);
        }
        Some(Box::new(Block {
            arena,
            tags,
            capacity,
            used: 0,
            count: 0,
        }))
    }

    /// Arena bytes used by records.
    #[inline]
    pub(crate) fn used(&self) -> usize {
        self.used
    }

    /// Records held.
    #[inline]
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Whether `footprint` more bytes fit.
    #[inline]
    pub(crate) fn fits(&self, footprint: usize) -> bool {
        self.used + footprint <= self.capacity
    }

    /// Places a record whose payload is `head` followed by `tail`.
    ///
    /// The caller has checked [`Block::fits`] for `footprint(head.len() +
    /// tail.len())`. Never allocates, locks or formats.
    #[inline]
    pub(crate) fn push(&mut self, tag: u64, head: &[u8], tail: &[u8]) {
        let size = head.len() + tail.len();
        let fp = footprint(size);
        debug_assert!(self.fits(fp));
        // SAFETY: `used + fp <= capacity` (checked by the caller), so the
        // destination range lies in the arena; the sources are caller slices
        // that cannot overlap the block's private arena. `count <
        // capacity / 8` because every record occupies at least 8 bytes (see
        // `footprint`), so the tag
        // index is in bounds.
        unsafe {
            let dst = self.arena.as_ptr().add(self.used);
            std::ptr::copy_nonoverlapping(head.as_ptr(), dst, head.len());
            if !tail.is_empty() {
                std::ptr::copy_nonoverlapping(tail.as_ptr(), dst.add(head.len()), tail.len());
            }
            *self.tags.as_ptr().add(self.count) = tag;
        }
        self.used += fp;
        self.count += 1;
    }

    /// Fills `out` with one header per record, payloads pointing into this
    /// block (valid until the block is reset).
    pub(crate) fn headers(&self, out: &mut Vec<RecordHeader>) {
        out.clear();
        // SAFETY: tags `0..count` were written by `push`.
        let tags = unsafe { std::slice::from_raw_parts(self.tags.as_ptr(), self.count) };
        let arena = self.arena.as_ptr();
        let mut offset = 0usize;
        // `extend` over an exact-size iterator reserves once and writes
        // without per-element capacity checks (this runs for every record on
        // the callback thread).
        out.extend(tags.iter().map(|&tag| {
            let size = ((tag >> 16) & 0xffff) as usize;
            // SAFETY: records were placed contiguously at footprints summing
            // to `used`, so `offset < used <= capacity`.
            let payload = unsafe { arena.add(offset) };
            offset += footprint(size);
            RecordHeader {
                category: (tag & 0xff) as u32,
                kind: ((tag >> 8) & 0xff) as u32,
                operation: (tag >> 32) as u32,
                size: size as u32,
                payload: payload as *const std::ffi::c_void,
            }
        }));
    }

    /// Forgets every record (the memory is reused).
    #[inline]
    pub(crate) fn reset(&mut self) {
        self.used = 0;
        self.count = 0;
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        let page = page_size();
        // SAFETY: the same layouts were used to allocate in `Block::new`,
        // which only returns blocks whose layouts were valid.
        unsafe {
            dealloc(
                self.arena.as_ptr(),
                Layout::from_size_align_unchecked(self.capacity, page),
            );
            dealloc(
                self.tags.as_ptr() as *mut u8,
                Layout::array::<u64>(self.capacity / RECORD_ALIGN).unwrap_unchecked(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_tags() {
        let mut block = Block::new(4096).unwrap();
        block.push(tag(1, 4, 3, 5), &[1, 2, 3], &[4, 5]);
        block.push(tag(3, 5, 7, 16), &[9; 16], &[]);
        assert_eq!(block.used(), 8 + 16);
        let mut headers = Vec::new();
        block.headers(&mut headers);
        assert_eq!(headers.len(), 2);
        assert_eq!(
            (headers[0].category, headers[0].kind, headers[0].operation),
            (1, 4, 3)
        );
        assert_eq!(headers[0].payload_bytes(), &[1, 2, 3, 4, 5]);
        assert_eq!(headers[1].payload_bytes(), &[9; 16]);
        assert_eq!(headers[1].payload as usize % 8, 0);
        block.reset();
        assert_eq!((block.used(), block.count()), (0, 0));
    }
}
