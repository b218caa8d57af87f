//! Hand-off of blocks between producers and the delivery thread: the free
//! pool (empty blocks) and the ready queue (blocks waiting for their
//! callback, in submission order).
//!
//! Owns only the movement of block pointers. Both structures are bounded,
//! lock-free and allocation-free after construction: producers use them on
//! the slow path of emplace (once per block), and that path must not lock or
//! allocate either. A buffer creates at most as many blocks as the pool and
//! queue can hold, so pushes never find them full.

use crate::block::Block;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Empty blocks waiting to be taken by a producer. Order does not matter.
pub(crate) struct FreePool {
    slots: Box<[AtomicPtr<Block>]>,
}

impl FreePool {
    /// A pool holding `blocks` (boxed: each block's address is handed out
    /// as a raw pointer and must not move).
    #[allow(clippy::vec_box)]
    pub(crate) fn new(blocks: Vec<Box<Block>>) -> FreePool {
        let slots: Box<[AtomicPtr<Block>]> = blocks
            .into_iter()
            .map(|b| AtomicPtr::new(Box::into_raw(b)))
            .collect();
        FreePool { slots }
    }

    /// Takes an empty block, or `None` when every block is in use. `hint`
    /// spreads concurrent callers over the slots.
    #[inline]
    pub(crate) fn pop(&self, hint: usize) -> Option<NonNullBlock> {
        let n = self.slots.len();
        for i in 0..n {
            let slot = &self.slots[(hint + i) % n];
            if slot.load(Ordering::Relaxed).is_null() {
                continue;
            }
            let p = slot.swap(std::ptr::null_mut(), Ordering::Acquire);
            if let Some(b) = NonNullBlock::new(p) {
                return Some(b);
            }
        }
        None
    }

    /// Returns an empty block to the pool.
    pub(crate) fn push(&self, block: NonNullBlock) {
        loop {
            for slot in self.slots.iter() {
                if slot
                    .compare_exchange(
                        std::ptr::null_mut(),
                        block.as_ptr(),
                        Ordering::Release,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    return;
                }
            }
            // Unreachable while blocks ≤ slots; stay correct regardless.
            std::hint::spin_loop();
        }
    }
}

/// A raw pointer to a block owned by whoever holds this value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct NonNullBlock(std::ptr::NonNull<Block>);

// SAFETY: the pointer is an ownership token handed over through atomics.
unsafe impl Send for NonNullBlock {}

impl NonNullBlock {
    #[inline]
    pub(crate) fn new(p: *mut Block) -> Option<NonNullBlock> {
        std::ptr::NonNull::new(p).map(NonNullBlock)
    }
    #[inline]
    pub(crate) fn as_ptr(self) -> *mut Block {
        self.0.as_ptr()
    }
    /// The block, mutably.
    ///
    /// # Safety
    /// The caller owns the block (took it from a slot, the pool or the
    /// queue and has not handed it on).
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn get(&self) -> &mut Block {
        // SAFETY: ownership per the function contract; the pointer came from
        // `Box::into_raw` and is never freed while the buffer lives.
        unsafe { &mut *self.0.as_ptr() }
    }
}

#[repr(align(128))]
struct Padded<T>(T);

struct Cell {
    sequence: AtomicUsize,
    block: UnsafeCell<*mut Block>,
}

/// Full blocks in submission order: a bounded multi-producer queue
/// (Vyukov's sequence-numbered ring). Blocks submitted by one thread are
/// popped in the order that thread submitted them, which keeps each
/// producer's records in order.
pub(crate) struct ReadyQueue {
    cells: Box<[Cell]>,
    mask: usize,
    enqueue: Padded<AtomicUsize>,
    dequeue: Padded<AtomicUsize>,
}

// SAFETY: a cell's `block` is written only by the producer that claimed the
// cell's sequence number and read only by the consumer that claimed it
// afterwards; the sequence number's release/acquire orders the accesses.
unsafe impl Sync for ReadyQueue {}
// SAFETY: as above; the queue holds only ownership tokens.
unsafe impl Send for ReadyQueue {}

impl ReadyQueue {
    /// A queue with room for at least `capacity` blocks.
    pub(crate) fn new(capacity: usize) -> ReadyQueue {
        let size = (capacity * 2).next_power_of_two().max(2);
        let cells = (0..size)
            .map(|i| Cell {
                sequence: AtomicUsize::new(i),
                block: UnsafeCell::new(std::ptr::null_mut()),
            })
            .collect();
        ReadyQueue {
            cells,
            mask: size - 1,
            enqueue: Padded(AtomicUsize::new(0)),
            dequeue: Padded(AtomicUsize::new(0)),
        }
    }

    /// Appends a block. Never allocates or locks.
    pub(crate) fn push(&self, block: NonNullBlock) {
        let mut pos = self.enqueue.0.load(Ordering::Relaxed);
        loop {
            let cell = &self.cells[pos & self.mask];
            let seq = cell.sequence.load(Ordering::Acquire);
            let diff = seq as isize - pos as isize;
            if diff == 0 {
                match self.enqueue.0.compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: this thread claimed `pos`; no one else
                        // touches the cell until the sequence store below.
                        unsafe { *cell.block.get() = block.as_ptr() };
                        cell.sequence.store(pos + 1, Ordering::Release);
                        return;
                    }
                    Err(current) => pos = current,
                }
            } else if diff < 0 {
                // The consumer is still finishing this cell's previous lap
                // (the queue holds more cells than blocks exist): retry.
                std::hint::spin_loop();
                pos = self.enqueue.0.load(Ordering::Relaxed);
            } else {
                pos = self.enqueue.0.load(Ordering::Relaxed);
            }
        }
    }

    /// Takes the oldest block, if any.
    pub(crate) fn pop(&self) -> Option<NonNullBlock> {
        let mut pos = self.dequeue.0.load(Ordering::Relaxed);
        loop {
            let cell = &self.cells[pos & self.mask];
            let seq = cell.sequence.load(Ordering::Acquire);
            let diff = seq as isize - (pos + 1) as isize;
            if diff == 0 {
                match self.dequeue.0.compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: this thread claimed `pos` for reading; the
                        // producer's write happened before its release store
                        // of the sequence we acquired.
                        let p = unsafe { *cell.block.get() };
                        cell.sequence.store(pos + self.mask + 1, Ordering::Release);
                        return NonNullBlock::new(p);
                    }
                    Err(current) => pos = current,
                }
            } else if diff < 0 {
                return None;
            } else {
                pos = self.dequeue.0.load(Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_and_queue_hand_blocks_over() {
        let blocks: Vec<_> = (0..3).map(|_| Block::new(4096).unwrap()).collect();
        let pool = FreePool::new(blocks);
        let queue = ReadyQueue::new(3);
        let a = pool.pop(0).unwrap();
        let b = pool.pop(1).unwrap();
        let c = pool.pop(2).unwrap();
        assert!(pool.pop(0).is_none());
        queue.push(b);
        queue.push(a);
        queue.push(c);
        assert_eq!(queue.pop(), Some(b));
        assert_eq!(queue.pop(), Some(a));
        assert_eq!(queue.pop(), Some(c));
        assert_eq!(queue.pop(), None);
        for blk in [a, b, c] {
            pool.push(blk);
        }
        for _ in 0..3 {
            // SAFETY: test owns the blocks; reclaim them.
            drop(unsafe { Box::from_raw(pool.pop(0).unwrap().as_ptr()) });
        }
    }
}
