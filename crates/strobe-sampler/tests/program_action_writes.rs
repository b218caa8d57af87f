//! Recording the program's disposition of a sampling signal (what the
//! runtime's `sigaction` wrapper does) while that signal arrives on the
//! same thread from the program's own timer: the handler reads the
//! disposition, so the write must never be interrupted half done (a reader
//! spinning on a half-done write in a handler on the writer's own thread
//! never sees it finish).
//!
//! A test binary of its own: when the write is not protected, a thread
//! stays stuck in the handler, spinning, until the process exits.

mod common;

use common::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use strobe_sampler::signals::{free_realtime_signals, set_program_action};
use strobe_sampler::{Sampler, SamplerConfig, TimerConfig};

static HANDLED: AtomicU64 = AtomicU64::new(0);

extern "C" fn program_handler(_signal: libc::c_int) {
    HANDLED.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn the_programs_disposition_can_be_set_while_its_signals_arrive() {
    let _turn = one_at_a_time();
    let signal = free_realtime_signals(1)[0];
    let seg = segment(4, 1 << 16);
    let config = SamplerConfig {
        cputime: Some(TimerConfig {
            freq_hz: 100.0,
            signal,
        }),
        realtime: None,
        max_depth: 64,
    };
    let sampler = Sampler::start(config, seg).unwrap();
    // SAFETY: sigaction is plain old data.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = program_handler as *const () as usize;
    set_program_action(signal, &action);

    const WRITES: u64 = 300_000;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: sigevent is plain old data.
        let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_signo = signal;
        event.sigev_notify_thread_id = strobe_core::thread::gettid();
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: a valid sigevent and out-pointer.
        let rc = unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer) };
        assert_eq!(rc, 0);
        let every = libc::timespec {
            tv_sec: 0,
            tv_nsec: 50_000,
        };
        let spec = libc::itimerspec {
            it_interval: every,
            it_value: every,
        };
        // SAFETY: a live timer and a valid spec.
        let rc = unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) };
        assert_eq!(rc, 0);
        for _ in 0..WRITES {
            set_program_action(signal, &action);
        }
        // SAFETY: deleting the timer created above, once.
        unsafe { libc::timer_delete(timer) };
        let _ = tx.send(());
    });
    let finished = rx.recv_timeout(Duration::from_secs(10)).is_ok();
    sampler.stop();
    assert!(
        finished,
        "{WRITES} writes of the disposition did not finish in 10 s: a handler \
         interrupted one half done and spins ({} signals handled)",
        HANDLED.load(Ordering::Relaxed)
    );
    assert!(
        HANDLED.load(Ordering::Relaxed) > 0,
        "the program's timer fired"
    );
}
