//! Writing the calling thread's events (thread life, regions, markers,
//! strings, tracing notifications, modules) into its event ring.
//!
//! Owns the calling thread's slot, the process's string ids, and the
//! policy when a ring is full: lossless (the thread waits for the
//! collector, bounded by `wait_ns`, and every wait and drop is counted in
//! the segment) or discard. A thread writing an event that is interrupted
//! by a signal handler which writes one too drops the nested one (counted)
//! rather than corrupt the ring. Never runs in strobe's sampling handler.

use crate::state::Runtime;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
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

/// Interned names of one runtime: text → id (ids start at 1). Each
/// runtime (a forked child gets a new one) has its own table, so a lock
/// held by a thread of the parent at `fork` is never taken in the child.
#[derive(Default)]
pub struct Strings(Mutex<HashMap<&'static [u8], u32>>);

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

/// The process-wide id of `bytes` and its interned copy.
fn intern(strings: &Strings, bytes: &[u8]) -> (u32, &'static [u8]) {
    let mut table = strings.0.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((text, id)) = table.get_key_value(bytes) {
        return (*id, text);
    }
    let text: &'static [u8] = Box::leak(bytes.to_vec().into_boxed_slice());
    let id = table.len() as u32 + 1;
    table.insert(text, id);
    (id, text)
}
