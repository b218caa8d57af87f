//! A signal handler that emplaces into the buffer the interrupted thread is
//! emplacing into must neither deadlock nor lose count: the re-entrant record
//! is dropped and reported, every other record is delivered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use strobe_buffer::{Buffer, BufferOptions, Context, Emplace, Kind, Policy};

static BUFFER: OnceLock<Buffer> = OnceLock::new();
static HANDLER_STORED: AtomicU64 = AtomicU64::new(0);
static HANDLER_DROPPED: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    if let Some(b) = BUFFER.get() {
        match b.emplace_bytes(1, Kind::Marker as u32, 0, &u64::MAX.to_ne_bytes(), &[]) {
            Emplace::Stored => HANDLER_STORED.fetch_add(1, Ordering::Relaxed),
            Emplace::Dropped => HANDLER_DROPPED.fetch_add(1, Ordering::Relaxed),
        };
    }
}

#[test]
fn reentrant_emplace_from_a_signal_handler_is_safe_and_counted() {
    let ctx = Context::create().unwrap();
    let totals = Arc::new(Mutex::new((0u64, 0u64, 0u64)));
    let t = totals.clone();
    let b = Buffer::create(
        &ctx,
        BufferOptions::new(4096, 2048, Policy::Lossless),
        move |d| {
            let mut t = t.lock().unwrap();
            for r in d.records {
                if r.payload_bytes() == u64::MAX.to_ne_bytes() {
                    t.1 += 1;
                } else {
                    t.0 += 1;
                }
            }
            t.2 += d.drop_count;
        },
    )
    .unwrap();
    BUFFER.set(b).unwrap();
    // SAFETY: installing a handler for SIGUSR1, which this test binary does
    // not otherwise use; the handler only calls the allocation-free emplace.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() };
    let me_id = me as usize;
    let done = std::sync::atomic::AtomicBool::new(false);
    let n = 300_000u64;
    let mut main_stored = 0u64;
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                // SAFETY: the target thread is alive until `done` is set
                // (the scope joins this thread before the test returns).
                unsafe { libc::pthread_kill(me_id as libc::pthread_t, libc::SIGUSR1) };
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
        });
        for i in 0..n {
            if b.emplace_bytes(1, Kind::Marker as u32, 0, &i.to_ne_bytes(), &[]) == Emplace::Stored
            {
                main_stored += 1;
            }
        }
        done.store(true, Ordering::Relaxed);
    });
    b.flush().unwrap();
    let (main_delivered, handler_delivered, drops) = *totals.lock().unwrap();
    let stored = HANDLER_STORED.load(Ordering::Relaxed);
    let dropped = HANDLER_DROPPED.load(Ordering::Relaxed);
    assert!(stored + dropped > 0, "no signal was handled");
    assert_eq!(main_stored, n, "the interrupted producer lost nothing");
    assert_eq!(main_delivered, n);
    assert_eq!(handler_delivered, stored);
    assert_eq!(drops, dropped, "re-entrant records are reported as drops");
    eprintln!("signals: {stored} records stored from the handler, {dropped} re-entrant drops");
}
