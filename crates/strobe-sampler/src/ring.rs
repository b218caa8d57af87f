//! A single-producer, single-consumer ring of variable-length records in
//! its own `mmap`'d, pre-faulted memory: the signal handler of one thread
//! writes, that thread's allocator thread reads.
//!
//! The producer side (`reserve`/`commit`) is async-signal-safe: no
//! allocation, no locks, no system calls. Memory is mapped and touched when
//! the ring is created (never in the handler): writing to never-touched
//! pages doubled the cost of a sample in our measurements.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

const HEADER: usize = 8;
const PADDING: u32 = 1 << 31;

#[repr(align(64))]
struct Padded(AtomicUsize);

/// The ring. Capacity is a power of two of at least one page.
pub struct Ring {
    base: *mut u8,
    capacity: usize,
    /// Producer position (bytes ever written).
    head: Padded,
    /// Consumer position (bytes ever consumed).
    tail: Padded,
}

// SAFETY: the producer and the consumer touch disjoint byte ranges, handed
// over through the acquire/release head and tail positions.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

/// Space handed to the producer by [`Ring::reserve`].
pub struct Reservation {
    ptr: *mut u8,
    capacity: usize,
    head: usize,
}

impl Reservation {
    /// The writable payload bytes (8-byte aligned).
    pub fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `reserve` checked that `capacity` bytes at `ptr` belong to
        // the producer until it commits.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.capacity) }
    }
}

fn align8(n: usize) -> usize {
    (n + 7) & !7
}

impl Ring {
    /// Maps and pre-faults a ring of at least `bytes` bytes.
    pub fn new(bytes: usize) -> io::Result<Ring> {
        let capacity = bytes.max(4096).next_power_of_two();
        // SAFETY: an anonymous private mapping with no address hint.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                capacity,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // Touch every page so the handler never takes a page fault here
        // (MAP_POPULATE is a hint the kernel may skip).
        for offset in (0..capacity).step_by(4096) {
            // SAFETY: offset < capacity, inside the fresh mapping.
            unsafe { std::ptr::write_volatile((base as *mut u8).add(offset), 0) };
        }
        Ok(Ring {
            base: base as *mut u8,
            capacity,
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
        })
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes written and not yet consumed.
    pub fn used(&self) -> usize {
        self.head.0.load(Ordering::Acquire) - self.tail.0.load(Ordering::Acquire)
    }

    /// The largest payload a reservation can hold.
    pub fn max_payload(&self) -> usize {
        self.capacity / 2 - HEADER
    }

    /// Reserves `len` contiguous payload bytes; `None` when the ring is too
    /// full. Producer only. Async-signal-safe.
    pub fn reserve(&self, len: usize) -> Option<Reservation> {
        if len > self.max_payload() {
            return None;
        }
        let need = align8(HEADER + len);
        let mut head = self.head.0.load(Ordering::Relaxed);
        let tail = self.tail.0.load(Ordering::Acquire);
        let pos = head & (self.capacity - 1);
        let to_end = self.capacity - pos;
        let total = if need > to_end { to_end + need } else { need };
        if self.capacity - (head - tail) < total {
            return None;
        }
        if need > to_end {
            // Mark the tail end of the ring as padding and start over at 0.
            // SAFETY: `pos` is 8-aligned and the free space covers it.
            unsafe { (self.base.add(pos) as *mut u32).write(to_end as u32 | PADDING) };
            head += to_end;
            self.head.0.store(head, Ordering::Release);
        }
        let pos = head & (self.capacity - 1);
        Some(Reservation {
            // SAFETY: pos + HEADER + len <= capacity, checked above.
            ptr: unsafe { self.base.add(pos + HEADER) },
            capacity: len,
            head,
        })
    }

    /// Publishes the first `len` bytes of a reservation. Producer only.
    /// Async-signal-safe.
    pub fn commit(&self, reservation: Reservation, len: usize) {
        let len = len.min(reservation.capacity);
        let pos = reservation.head & (self.capacity - 1);
        // SAFETY: the header slot precedes the reserved payload.
        unsafe { (self.base.add(pos) as *mut u32).write(len as u32) };
        self.head
            .0
            .store(reservation.head + align8(HEADER + len), Ordering::Release);
    }

    /// Hands every published record to `f`, oldest first, then frees their
    /// space. Consumer only. Returns the number of records.
    pub fn drain(&self, mut f: impl FnMut(&[u8])) -> usize {
        let mut tail = self.tail.0.load(Ordering::Relaxed);
        let head = self.head.0.load(Ordering::Acquire);
        let mut records = 0;
        while tail != head {
            let pos = tail & (self.capacity - 1);
            // SAFETY: positions between tail and head hold published records.
            let word = unsafe { (self.base.add(pos) as *const u32).read() };
            if word & PADDING != 0 {
                tail += (word & !PADDING) as usize;
                continue;
            }
            let len = word as usize;
            // SAFETY: a published record of `len` bytes follows its header.
            let payload = unsafe { std::slice::from_raw_parts(self.base.add(pos + HEADER), len) };
            f(payload);
            records += 1;
            tail += align8(HEADER + len);
        }
        self.tail.0.store(tail, Ordering::Release);
        records
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping created in `new`.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.capacity) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_out_in_order_across_wrap_arounds() {
        let ring = Ring::new(4096).unwrap();
        let mut next_in = 0u64;
        let mut next_out = 0u64;
        for round in 0..2_000 {
            let len = 8 + (round * 37) % 300;
            while let Some(mut r) = ring.reserve(len) {
                let bytes = r.bytes();
                bytes[..8].copy_from_slice(&next_in.to_le_bytes());
                ring.commit(r, len);
                next_in += 1;
                if next_in.is_multiple_of(5) {
                    break;
                }
            }
            ring.drain(|payload| {
                assert_eq!(payload.len(), len);
                assert_eq!(
                    u64::from_le_bytes(payload[..8].try_into().unwrap()),
                    next_out
                );
                next_out += 1;
            });
        }
        assert_eq!(next_in, next_out);
        assert!(next_in > 5_000);
    }

    #[test]
    fn full_ring_refuses_and_commit_can_shrink() {
        let ring = Ring::new(4096).unwrap();
        assert!(ring.reserve(ring.max_payload() + 1).is_none());
        let big = ring.reserve(1000).unwrap();
        ring.commit(big, 100);
        assert_eq!(
            ring.used(),
            112,
            "a commit shorter than its reservation frees the rest"
        );
        let mut n = 1;
        while let Some(r) = ring.reserve(100) {
            ring.commit(r, 100);
            n += 1;
        }
        assert_eq!(n, 4096 / 112, "each record takes align8(8 + 100) bytes");
        assert_eq!(ring.drain(|p| assert_eq!(p.len(), 100)), n);
        assert_eq!(ring.used(), 0);
    }

    #[test]
    fn concurrent_producer_and_consumer() {
        let ring = std::sync::Arc::new(Ring::new(8192).unwrap());
        let producer = {
            let ring = ring.clone();
            std::thread::spawn(move || {
                let mut i = 0u64;
                while i < 200_000 {
                    if let Some(mut r) = ring.reserve(16) {
                        r.bytes()[..8].copy_from_slice(&i.to_le_bytes());
                        ring.commit(r, 16);
                        i += 1;
                    }
                }
            })
        };
        let mut expected = 0u64;
        while expected < 200_000 {
            ring.drain(|p| {
                assert_eq!(u64::from_le_bytes(p[..8].try_into().unwrap()), expected);
                expected += 1;
            });
        }
        producer.join().unwrap();
    }
}
