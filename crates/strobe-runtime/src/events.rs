//! Writing the calling thread's events (thread life, regions, markers,
//! strings, tracing notifications, modules) into its event ring.
//!
//! Owns the calling thread's slot, the definition of a name in the
//! thread's ring the first time the thread uses it (with a cache of the
//! thread's recent names; the ids are the runtime's `strings`), and the
//! policy when a ring is full: lossless (the thread waits for the
//! collector, bounded by `wait_ns`, and every wait and drop is counted in
//! the segment) or discard. A thread writing an event that is interrupted
//! by a signal handler which writes one too drops the nested one (counted)
//! rather than corrupt the ring. Never runs in strobe's sampling handler.

use crate::state::Runtime;
use crate::strings::intern;
use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;
use strobe_core::clock::now_ns;
use strobe_wire::record::{event, event_flags, EventHead};

/// No slot claimed by this thread (yet).
pub const NO_SLOT: u32 = u32::MAX;

thread_local! {
    /// The calling thread's slot and the runtime generation it belongs to.
    static SLOT: Cell<(u32, u64)> = const { Cell::new((NO_SLOT, 0)) };
    /// Recently used names: pointer of the caller's string → interned id.
    static NAMES: RefCell<NameCache> = const { RefCell::new(NameCache::new()) };
}

const CACHE: usize = 64;

/// A direct-mapped cache of the names this thread used, keyed by the
/// caller's pointer and checked against the interned bytes.
struct NameCache {
    entries: [(usize, &'static [u8], u32, u64); CACHE],
}

impl NameCache {
    const fn new() -> NameCache {
        NameCache {
            entries: [(0, &[], 0, 0); CACHE],
        }
    }
}

/// The calling thread's slot in `rt`'s segment, if it has one.
pub fn my_slot(rt: &Runtime) -> Option<u32> {
    let (slot, generation) = SLOT.try_with(Cell::get).ok()?;
    (slot != NO_SLOT && generation == rt.generation).then_some(slot)
}

/// Records the calling thread's slot.
pub fn set_my_slot(rt: &Runtime, slot: u32) {
    let _ = SLOT.try_with(|c| c.set((slot, rt.generation)));
}

/// Forgets the calling thread's slot (it ended).
pub fn clear_my_slot() {
    let _ = SLOT.try_with(|c| c.set((NO_SLOT, 0)));
}

/// Writes one event of the calling thread into `slot`'s ring, stamped now:
/// with the time-stamp counter where the launcher said it is reliable (the
/// collector converts it), with `CLOCK_MONOTONIC` otherwise.
#[inline]
pub fn emit_now(rt: &Runtime, slot: u32, kind: u16, arg: u32, bytes: &[u8]) {
    emit_now2(rt, slot, kind, arg, bytes, &[]);
}

/// [`emit_now`] with the record's bytes in two parts (`bytes`, then
/// `more`).
#[inline]
pub fn emit_now2(rt: &Runtime, slot: u32, kind: u16, arg: u32, bytes: &[u8], more: &[u8]) {
    if rt.config.tsc {
        let ticks = strobe_core::clock::cycles();
        emit_with(rt, slot, kind, arg, ticks, event_flags::TSC, bytes, more);
    } else {
        emit_with(rt, slot, kind, arg, now_ns(), 0, bytes, more);
    }
}

/// Writes one event of the calling thread into `slot`'s ring, stamped
/// with time-stamp counter `ticks` (the collector converts them).
pub fn emit_ticks(rt: &Runtime, slot: u32, kind: u16, arg: u32, ticks: u64, bytes: &[u8]) {
    emit_with(rt, slot, kind, arg, ticks, event_flags::TSC, bytes, &[]);
}

/// Writes one event of the calling thread into `slot`'s ring.
pub fn emit(rt: &Runtime, slot: u32, kind: u16, arg: u32, timestamp_ns: u64, bytes: &[u8]) {
    emit_with(rt, slot, kind, arg, timestamp_ns, 0, bytes, &[]);
}

#[allow(clippy::too_many_arguments)]
fn emit_with(
    rt: &Runtime,
    slot: u32,
    kind: u16,
    arg: u32,
    timestamp_ns: u64,
    flags: u16,
    bytes: &[u8],
    more: &[u8],
) {
    if crate::dormant::is_dormant() {
        crate::dormant::wake();
    }
    let seg = rt.segment;
    let s = seg.slot(slot);
    if s.event_busy.swap(1, Ordering::Acquire) != 0 {
        seg.header().events_dropped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let head = EventHead {
        kind,
        flags,
        arg,
        timestamp_ns,
    };
    let ring = seg.event_ring(slot);
    let all: [&[u8]; 3] = [head.as_bytes(), bytes, more];
    // Most records have no second part: two copies, not three.
    let parts = if more.is_empty() { &all[..2] } else { &all[..] };
    let mut written = ring.push(parts);
    if !written {
        let len = parts.iter().map(|p| p.len()).sum::<usize>();
        written = len <= ring.max_payload()
            && rt.config.lossless
            && !crate::dormant::failed()
            && wait_for_room(rt, &ring, parts);
        if !written {
            seg.header().events_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    s.event_busy.store(0, Ordering::Release);
}

/// Waits (yielding the CPU a few times, then sleeping 20 µs at a time, at
/// most `wait_ns`) until the collector made room, then writes. Counted in
/// the segment.
fn wait_for_room(rt: &Runtime, ring: &strobe_wire::ring::ShmRing, parts: &[&[u8]]) -> bool {
    let seg = rt.segment;
    let start = now_ns();
    seg.header().event_waits.fetch_add(1, Ordering::Relaxed);
    let mut tries = 0u32;
    let ok = loop {
        tries += 1;
        if tries <= 64 {
            std::thread::yield_now();
        } else {
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 20_000,
            };
            // SAFETY: a valid timespec; the remainder is not wanted.
            unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
        }
        if ring.push(parts) {
            break true;
        }
        if now_ns() - start > rt.config.wait_ns {
            break false;
        }
    };
    seg.header()
        .event_wait_ns
        .fetch_add(now_ns() - start, Ordering::Relaxed);
    ok
}

/// The id of `name` for the calling thread, defining it in the thread's
/// ring the first time this thread uses it.
///
/// # Safety
/// `name` must point to a NUL-terminated string.
pub unsafe fn name_id(rt: &Runtime, slot: u32, name: *const libc::c_char) -> u32 {
    let key = name as usize;
    let index = (key >> 3) % CACHE;
    let hit = NAMES
        .try_with(|cache| {
            let cache = cache.borrow();
            let (k, text, id, generation) = cache.entries[index];
            // SAFETY: `name` is NUL-terminated (contract); comparing at most
            // text.len() + 1 bytes of it stops at its terminator or earlier.
            let same = k == key
                && generation == rt.generation
                && unsafe { libc::strncmp(name, text.as_ptr() as *const libc::c_char, text.len()) } == 0
                // SAFETY: the first text.len() bytes matched, so none was NUL.
                && unsafe { *name.add(text.len()) } == 0;
            same.then_some(id)
        })
        .ok()
        .flatten();
    if let Some(id) = hit {
        return id;
    }
    // SAFETY: NUL-terminated (contract).
    let bytes = unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes();
    let (id, text) = intern(&rt.strings, bytes);
    emit(rt, slot, event::STRING, id, 0, text);
    let _ = NAMES.try_with(|cache| {
        cache.borrow_mut().entries[index] = (key, text, id, rt.generation);
    });
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testing::{events, runtime, small, SMALL};
    use strobe_wire::config::RuntimeConfig;

    #[test]
    fn an_event_reaches_the_collector_as_written() {
        let rt = small();
        let slot = rt.segment.claim_slot(1).unwrap();
        emit(rt, slot, event::MARK, 42, 1234, b"payload");
        emit(rt, slot, event::NOTE, 0, 1235, b"");
        let got = events(rt, slot);
        assert_eq!(got.len(), 2);
        let (head, bytes) = &got[0];
        assert_eq!(
            (head.kind, head.flags, head.arg, head.timestamp_ns),
            (event::MARK, 0, 42, 1234)
        );
        assert_eq!(bytes, b"payload");
        assert_eq!((got[1].0.kind, got[1].1.len()), (event::NOTE, 0));
        assert_eq!(
            rt.segment.header().events_dropped.load(Ordering::Relaxed),
            0
        );
    }

    #[test]
    fn events_stamped_now_carry_ticks_only_where_the_launcher_said_so() {
        let rt = small();
        let slot = rt.segment.claim_slot(1).unwrap();
        let before = now_ns();
        emit_now(rt, slot, event::MARK, 1, b"");
        let after = now_ns();
        let (head, _) = events(rt, slot).remove(0);
        assert_eq!(head.flags, 0);
        assert!((before..=after).contains(&head.timestamp_ns));

        let rt = runtime(RuntimeConfig {
            layout: SMALL,
            tsc: true,
            ..RuntimeConfig::default()
        });
        let slot = rt.segment.claim_slot(1).unwrap();
        let before = strobe_core::clock::cycles();
        emit_now(rt, slot, event::MARK, 1, b"");
        emit_ticks(rt, slot, event::REGION_END, 0, 77, b"");
        let after = strobe_core::clock::cycles();
        let got = events(rt, slot);
        assert_eq!(got[0].0.flags, event_flags::TSC);
        assert!((before..=after).contains(&got[0].0.timestamp_ns));
        assert_eq!(
            (got[1].0.kind, got[1].0.flags, got[1].0.timestamp_ns),
            (event::REGION_END, event_flags::TSC, 77)
        );
    }

    #[test]
    fn a_record_in_two_parts_arrives_as_one() {
        let rt = small();
        let slot = rt.segment.claim_slot(1).unwrap();
        emit_now2(rt, slot, event::XPTI, 3, b"first-", b"second");
        emit_now2(rt, slot, event::XPTI, 4, b"alone", b"");
        let got = events(rt, slot);
        assert_eq!(got[0].1, b"first-second");
        assert_eq!(got[1].1, b"alone");
    }

    #[test]
    fn a_nested_writer_drops_its_event_and_counts_it() {
        let rt = small();
        let slot = rt.segment.claim_slot(1).unwrap();
        // A signal handler interrupting this thread while it writes.
        rt.segment.slot(slot).event_busy.store(1, Ordering::Relaxed);
        emit(rt, slot, event::MARK, 1, 1, b"nested");
        assert!(events(rt, slot).is_empty());
        assert_eq!(
            rt.segment.header().events_dropped.load(Ordering::Relaxed),
            1
        );
        // The interrupted writer finishes; the next event goes through.
        rt.segment.slot(slot).event_busy.store(0, Ordering::Relaxed);
        emit(rt, slot, event::MARK, 2, 2, b"");
        assert_eq!(events(rt, slot)[0].0.arg, 2);
        assert_eq!(rt.segment.slot(slot).event_busy.load(Ordering::Relaxed), 0);
    }

    /// Fills `slot`'s event ring; returns how many records it took.
    fn fill(rt: &Runtime, slot: u32) -> usize {
        let ring = rt.segment.event_ring(slot);
        let mut n = 0;
        while ring.push(&[&[0u8; 40]]) {
            n += 1;
        }
        n
    }

    #[test]
    fn a_full_ring_drops_at_once_under_the_discard_policy() {
        let rt = runtime(RuntimeConfig {
            layout: SMALL,
            lossless: false,
            ..RuntimeConfig::default()
        });
        let slot = rt.segment.claim_slot(1).unwrap();
        let filled = fill(rt, slot);
        emit(rt, slot, event::MARK, 9, 1, b"");
        let h = rt.segment.header();
        assert_eq!(h.events_dropped.load(Ordering::Relaxed), 1);
        assert_eq!(h.event_waits.load(Ordering::Relaxed), 0, "never waits");
        let got = events(rt, slot);
        assert_eq!(got.len(), filled, "only what was there before");
        assert!(got.iter().all(|(head, _)| head.kind != event::MARK));
    }

    #[test]
    fn a_record_larger_than_the_ring_is_dropped_without_waiting() {
        let rt = small();
        let slot = rt.segment.claim_slot(1).unwrap();
        let huge = vec![7u8; SMALL.event_ring_bytes as usize];
        emit(rt, slot, event::NOTE, 0, 1, &huge);
        let h = rt.segment.header();
        assert_eq!(h.events_dropped.load(Ordering::Relaxed), 1);
        assert_eq!(h.event_waits.load(Ordering::Relaxed), 0);
        assert!(events(rt, slot).is_empty());
    }

    #[test]
    fn a_lossless_writer_waits_for_the_collector_to_make_room() {
        let rt = runtime(RuntimeConfig {
            layout: SMALL,
            lossless: true,
            // Far longer than the test can take: the wait ends by room only.
            wait_ns: 60_000_000_000,
            ..RuntimeConfig::default()
        });
        let slot = rt.segment.claim_slot(1).unwrap();
        let filled = fill(rt, slot);
        std::thread::scope(|scope| {
            let collector = scope.spawn(|| {
                // Makes room only once the writer waits for it, then
                // drains until it has seen the record that waited.
                while rt.segment.header().event_waits.load(Ordering::Acquire) == 0 {
                    std::thread::yield_now();
                }
                let mut seen = 0usize;
                loop {
                    let got = events(rt, slot);
                    seen += got.len();
                    if got.iter().any(|(head, _)| head.kind == event::MARK) {
                        return seen;
                    }
                    std::thread::yield_now();
                }
            });
            emit(rt, slot, event::MARK, 5, 1, b"waited");
            assert_eq!(collector.join().unwrap(), filled + 1);
        });
        let h = rt.segment.header();
        assert_eq!(h.events_dropped.load(Ordering::Relaxed), 0);
        assert_eq!(h.event_waits.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_lossless_writer_gives_up_after_its_bound_and_counts_the_drop() {
        let rt = runtime(RuntimeConfig {
            layout: SMALL,
            lossless: true,
            wait_ns: 0,
            ..RuntimeConfig::default()
        });
        let slot = rt.segment.claim_slot(1).unwrap();
        fill(rt, slot);
        emit(rt, slot, event::MARK, 5, 1, b"");
        let h = rt.segment.header();
        assert_eq!(h.event_waits.load(Ordering::Relaxed), 1);
        assert_eq!(h.events_dropped.load(Ordering::Relaxed), 1);
        assert_eq!(rt.segment.slot(slot).event_busy.load(Ordering::Relaxed), 0);
    }

    /// The STRING records in `slot`'s ring: (id, text).
    fn strings_defined(rt: &Runtime, slot: u32) -> Vec<(u32, Vec<u8>)> {
        events(rt, slot)
            .into_iter()
            .filter(|(head, _)| head.kind == event::STRING)
            .map(|(head, bytes)| (head.arg, bytes))
            .collect()
    }

    #[test]
    fn a_name_is_defined_in_the_ring_before_its_first_use_and_then_cached() {
        let rt = small();
        let slot = rt.segment.claim_slot(1).unwrap();
        let name = c"compute";
        // SAFETY: NUL-terminated names.
        let first = unsafe { name_id(rt, slot, name.as_ptr()) };
        // SAFETY: as above.
        let again = unsafe { name_id(rt, slot, name.as_ptr()) };
        assert_eq!(first, again);
        assert_eq!(strings_defined(rt, slot), [(first, b"compute".to_vec())]);
        // The same text at another address has the same id.
        let copy = std::ffi::CString::new("compute").unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { name_id(rt, slot, copy.as_ptr()) }, first);
        let other = c"other";
        // SAFETY: as above.
        let second = unsafe { name_id(rt, slot, other.as_ptr()) };
        assert_ne!(second, first);
        assert!(strings_defined(rt, slot).contains(&(second, b"other".to_vec())));
    }

    #[test]
    fn a_buffer_reused_for_another_name_is_not_mistaken_for_the_first() {
        let rt = small();
        let slot = rt.segment.claim_slot(1).unwrap();
        let mut buffer = [0u8; 16];
        let mut id_of = |text: &[u8]| {
            buffer.fill(0);
            buffer[..text.len()].copy_from_slice(text);
            // SAFETY: the buffer is NUL-terminated (zeroed past the text).
            unsafe { name_id(rt, slot, buffer.as_ptr() as *const libc::c_char) }
        };
        let alpha = id_of(b"alpha");
        // A longer name that starts with the cached one.
        let alphabet = id_of(b"alphabet");
        let beta = id_of(b"beta");
        let alpha_again = id_of(b"alpha");
        assert_eq!(alpha, alpha_again);
        assert_ne!(alpha, beta);
        assert_ne!(alpha, alphabet);
        assert_ne!(beta, alphabet);
        let defined = strings_defined(rt, slot);
        for (id, text) in [
            (alpha, &b"alpha"[..]),
            (beta, b"beta"),
            (alphabet, b"alphabet"),
        ] {
            assert!(defined.contains(&(id, text.to_vec())), "{defined:?}");
        }
    }

    #[test]
    fn a_cached_name_of_an_earlier_runtime_is_defined_again() {
        let name = c"phase";
        let first = small();
        let slot = first.segment.claim_slot(1).unwrap();
        // SAFETY: NUL-terminated.
        unsafe { name_id(first, slot, name.as_ptr()) };
        // A forked child's runtime: same thread, same pointer, new table.
        let child = small();
        let slot = child.segment.claim_slot(1).unwrap();
        // SAFETY: NUL-terminated.
        let id = unsafe { name_id(child, slot, name.as_ptr()) };
        assert_eq!(strings_defined(child, slot), [(id, b"phase".to_vec())]);
    }

    #[test]
    fn a_threads_slot_belongs_to_one_runtime() {
        let rt = small();
        let other = small();
        assert_eq!(my_slot(rt), None);
        set_my_slot(rt, 3);
        assert_eq!(my_slot(rt), Some(3));
        assert_eq!(my_slot(other), None, "a slot of another generation");
        clear_my_slot();
        assert_eq!(my_slot(rt), None);
        // Each thread has its own.
        set_my_slot(rt, 1);
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(my_slot(rt), None));
        });
        assert_eq!(my_slot(rt), Some(1));
    }
}
