//! A single-producer, single-consumer ring of variable-length records in
//! shared memory: the producer is one thread of the profiled process (its
//! signal handler for samples, its own code for events), the consumer is
//! the collector, in another process.
//!
//! Owns the record framing (a `u32` length word, the payload, 8-byte
//! alignment, a padding word at the wrap) and the publication protocol
//! (the producer releases `head`, the consumer releases `tail`). The
//! producer side is async-signal-safe: no allocation, no lock, no system
//! call. The consumer never trusts what it reads: a malformed length stops
//! the drain and is reported, it never reads outside the ring.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of the length word before each payload.
const WORD: usize = 8;
/// Set in a length word that only pads the ring's end.
const PADDING: u64 = 1 << 63;

/// One ring: two indices and a power-of-two data area, all in memory that
/// outlives every use (a mapped segment).
#[derive(Clone, Copy)]
pub struct ShmRing {
    head: *const AtomicU64,
    tail: *const AtomicU64,
    data: *mut u8,
    capacity: usize,
}

// SAFETY: every access to the indices is atomic; the data area is written
// only by the single producer between reserve and commit and read by the
// single consumer between the published tail and head.
unsafe impl Send for ShmRing {}
// SAFETY: as above.
unsafe impl Sync for ShmRing {}

/// Space reserved by the producer, published by [`ShmRing::commit`].
pub struct Reservation {
    ptr: *mut u8,
    capacity: usize,
    head: u64,
}

impl Reservation {
    /// The reserved payload bytes.
    pub fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `reserve` checked that `capacity` bytes at `ptr` belong to
        // the producer until it commits.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.capacity) }
    }
}

/// The consumer met a length word that cannot be right (the producer's
/// memory was overwritten): the rest of the ring is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

fn align8(n: usize) -> usize {
    (n + 7) & !7
}

impl ShmRing {
    /// A ring over `capacity` bytes at `data` with indices `head`, `tail`.
    ///
    /// # Safety
    /// The pointers must stay valid (mapped) for every later use of the
    /// ring, `data` must be 8-aligned, `capacity` a power of two ≥ 64, and
    /// there must be one producer and one consumer at a time.
    pub unsafe fn new(
        head: *const AtomicU64,
        tail: *const AtomicU64,
        data: *mut u8,
        capacity: usize,
    ) -> ShmRing {
        debug_assert!(capacity.is_power_of_two() && capacity >= 64);
        ShmRing {
            head,
            tail,
            data,
            capacity,
        }
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: valid for the ring's life (constructor's contract).
        unsafe { &*self.head }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as above.
        unsafe { &*self.tail }
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes written and not yet consumed.
    pub fn used(&self) -> usize {
        let head = self.head().load(Ordering::Acquire);
        let tail = self.tail().load(Ordering::Acquire);
        head.wrapping_sub(tail).min(self.capacity as u64) as usize
    }

    /// The largest payload one record can hold.
    pub fn max_payload(&self) -> usize {
        self.capacity / 2 - WORD
    }

    /// Reserves `len` contiguous payload bytes; `None` when the ring is too
    /// full. Producer only. Async-signal-safe.
    #[inline]
    pub fn reserve(&self, len: usize) -> Option<Reservation> {
        if len > self.max_payload() {
            return None;
        }
        let need = align8(WORD + len) as u64;
        let mut head = self.head().load(Ordering::Relaxed);
        let tail = self.tail().load(Ordering::Acquire);
        let cap = self.capacity as u64;
        let pos = head & (cap - 1);
        let to_end = cap - pos;
        let total = if need > to_end { to_end + need } else { need };
        if cap - head.wrapping_sub(tail) < total {
            return None;
        }
        if need > to_end {
            // Mark the end of the ring as padding and start again at 0.
            // SAFETY: `pos` is 8-aligned and the free space covers it.
            unsafe { (self.data.add(pos as usize) as *mut u64).write_volatile(to_end | PADDING) };
            head += to_end;
            self.head().store(head, Ordering::Release);
        }
        let pos = (head & (cap - 1)) as usize;
        Some(Reservation {
            // SAFETY: pos + WORD + len <= capacity, checked above.
            ptr: unsafe { self.data.add(pos + WORD) },
            capacity: len,
            head,
        })
    }

    /// Publishes the first `len` bytes of a reservation. Producer only.
    /// Async-signal-safe.
    #[inline]
    pub fn commit(&self, reservation: Reservation, len: usize) {
        let len = len.min(reservation.capacity);
        let pos = (reservation.head & (self.capacity as u64 - 1)) as usize;
        // SAFETY: the length word precedes the reserved payload.
        unsafe { (self.data.add(pos) as *mut u64).write_volatile(len as u64) };
        self.head().store(
            reservation.head + align8(WORD + len) as u64,
            Ordering::Release,
        );
    }

    /// Writes one record made of `parts` laid end to end; `false` when the
    /// ring is full. Producer only. Async-signal-safe.
    #[inline]
    pub fn push(&self, parts: &[&[u8]]) -> bool {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let Some(mut r) = self.reserve(len) else {
            return false;
        };
        let bytes = r.bytes();
        let mut at = 0;
        for p in parts {
            bytes[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        self.commit(r, len);
        true
    }

    /// Hands every published record to `f`, oldest first, then frees their
    /// space. Consumer only. Returns the number of records, or [`Corrupt`]
    /// (after skipping everything published) when a length word is
    /// impossible.
    pub fn drain(&self, mut f: impl FnMut(&[u8])) -> Result<usize, Corrupt> {
        let cap = self.capacity as u64;
        let mut tail = self.tail().load(Ordering::Relaxed);
        let head = self.head().load(Ordering::Acquire);
        let mut records = 0;
        let mut result = Ok(());
        while tail != head {
            if head.wrapping_sub(tail) > cap || tail & 7 != 0 {
                result = Err(Corrupt);
                break;
            }
            let pos = (tail & (cap - 1)) as usize;
            // SAFETY: pos is 8-aligned and below capacity.
            let word = unsafe { (self.data.add(pos) as *const u64).read_volatile() };
            if word & PADDING != 0 {
                let skip = word & !PADDING;
                if skip != cap - pos as u64 {
                    result = Err(Corrupt);
                    break;
                }
                tail = tail.wrapping_add(skip);
                continue;
            }
            let len = word as usize;
            if len > self.max_payload() || pos + WORD + len > self.capacity {
                result = Err(Corrupt);
                break;
            }
            // SAFETY: `len` bytes after the word lie inside the ring (checked).
            let payload = unsafe { std::slice::from_raw_parts(self.data.add(pos + WORD), len) };
            f(payload);
            records += 1;
            // Free-running indices: they wrap (the producer's may be anything).
            tail = tail.wrapping_add(align8(WORD + len) as u64);
        }
        if result.is_err() {
            tail = head;
        }
        self.tail().store(tail, Ordering::Release);
        result.map(|()| records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Owned {
        head: Box<AtomicU64>,
        tail: Box<AtomicU64>,
        data: Vec<u64>,
    }

    impl Owned {
        fn new(bytes: usize) -> Owned {
            Owned {
                head: Box::new(AtomicU64::new(0)),
                tail: Box::new(AtomicU64::new(0)),
                data: vec![0; bytes / 8],
            }
        }

        fn ring(&mut self) -> ShmRing {
            // SAFETY: the boxes and the vector outlive the ring in each test.
            unsafe {
                ShmRing::new(
                    &*self.head,
                    &*self.tail,
                    self.data.as_mut_ptr() as *mut u8,
                    self.data.len() * 8,
                )
            }
        }
    }

    #[test]
    fn records_come_out_in_order_across_wrap_arounds() {
        let mut owned = Owned::new(4096);
        let ring = owned.ring();
        let (mut next_in, mut next_out) = (0u64, 0u64);
        for round in 0..2_000 {
            let len = 8 + (round * 37) % 300;
            while let Some(mut r) = ring.reserve(len) {
                r.bytes()[..8].copy_from_slice(&next_in.to_le_bytes());
                ring.commit(r, len);
                next_in += 1;
                if next_in.is_multiple_of(5) {
                    break;
                }
            }
            ring.drain(|p| {
                assert_eq!(p.len(), len);
                assert_eq!(u64::from_le_bytes(p[..8].try_into().unwrap()), next_out);
                next_out += 1;
            })
            .unwrap();
        }
        assert_eq!(next_in, next_out);
        assert!(next_in > 5_000);
    }

    #[test]
    fn full_ring_refuses_and_commit_can_shrink() {
        let mut owned = Owned::new(4096);
        let ring = owned.ring();
        assert!(ring.reserve(ring.max_payload() + 1).is_none());
        let big = ring.reserve(1000).unwrap();
        ring.commit(big, 100);
        assert_eq!(ring.used(), 112, "align8(8 + 100)");
        let mut n = 1;
        while ring.push(&[&[7u8; 60], &[8u8; 40]]) {
            n += 1;
        }
        assert_eq!(n, 4096 / 112);
        assert_eq!(ring.drain(|p| assert_eq!(p.len(), 100)), Ok(n));
        assert_eq!(ring.used(), 0);
    }

    #[test]
    fn a_corrupt_length_word_stops_the_drain_without_reading_outside() {
        let mut owned = Owned::new(4096);
        let ring = owned.ring();
        assert!(ring.push(&[&[1u8; 16]]));
        owned.data[0] = 1 << 40;
        let ring = owned.ring();
        let mut seen = 0;
        assert_eq!(ring.drain(|_| seen += 1), Err(Corrupt));
        assert_eq!(seen, 0);
        assert_eq!(
            ring.used(),
            0,
            "the consumer skipped what it could not read"
        );
        assert!(ring.push(&[&[2u8; 16]]), "the ring is usable again");
    }

    #[test]
    fn concurrent_producer_and_consumer() {
        let mut owned = Owned::new(8192);
        let ring = owned.ring();
        let producer = std::thread::spawn(move || {
            let mut i = 0u64;
            while i < 200_000 {
                if ring.push(&[&i.to_le_bytes(), &[0u8; 8]]) {
                    i += 1;
                }
            }
        });
        let mut expected = 0u64;
        while expected < 200_000 {
            ring.drain(|p| {
                assert_eq!(u64::from_le_bytes(p[..8].try_into().unwrap()), expected);
                expected += 1;
            })
            .unwrap();
        }
        producer.join().unwrap();
        drop(owned);
    }
}
