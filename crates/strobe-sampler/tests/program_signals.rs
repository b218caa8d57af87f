//! The sampling signals belong to strobe, everything else about them to the
//! program: the program's own timers on the same signals reach the
//! program's handler, other senders of the signal meet the program's
//! disposition (ignored, handled with its mask, or the default action),
//! and the choice of free signals leaves alone those a program uses.
//!
//! Every test here changes process-wide dispositions: they take turns, and
//! each picks signals no other test of this binary uses.

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use strobe_core::thread::gettid;
use strobe_sampler::signals::{free_realtime_signals, program_action, set_program_action};
use strobe_sampler::{Sampler, SamplerConfig, TimerConfig};
use strobe_wire::sample::TimerClock;

const SI_QUEUE: i32 = -1;
const SI_TIMER: i32 = -2;
const SI_TKILL: i32 = -6;

/// The start of an x86-64 `siginfo_t` as a POSIX timer (or `sigqueue`)
/// fills it.
#[repr(C)]
struct TimerInfo {
    signo: i32,
    errno: i32,
    code: i32,
    _pad: i32,
    /// The timer id for SI_TIMER; the sender's pid for SI_QUEUE.
    id_or_pid: i32,
    /// Expirations merged into this signal for SI_TIMER.
    overrun: i32,
    value: usize,
}

/// `n` real-time signals no sampler of this process uses and nothing else
/// has claimed (call under the turn, and start a sampler on them before
/// giving it up).
fn fresh_signals(n: usize) -> Vec<i32> {
    let free = free_realtime_signals(n);
    assert_eq!(free.len(), n, "{n} free real-time signals");
    free
}

fn sampler_on(seg: &'static strobe_wire::segment::Segment, cpu: i32, real: Option<i32>) -> Sampler {
    let config = SamplerConfig {
        cputime: Some(TimerConfig {
            freq_hz: 250.0,
            signal: cpu,
        }),
        realtime: real.map(|signal| TimerConfig {
            freq_hz: 1000.0,
            signal,
        }),
        max_depth: 512,
    };
    Sampler::start(config, seg).unwrap()
}

fn action(handler: usize, flags: i32, mask: &[i32]) -> libc::sigaction {
    // SAFETY: sigaction is plain old data.
    let mut a: libc::sigaction = unsafe { std::mem::zeroed() };
    a.sa_sigaction = handler;
    a.sa_flags = flags;
    // SAFETY: a valid signal set inside `a`.
    unsafe { libc::sigemptyset(&mut a.sa_mask) };
    for &s in mask {
        // SAFETY: as above; `s` is a valid signal number.
        unsafe { libc::sigaddset(&mut a.sa_mask, s) };
    }
    a
}

/// Whether `signal` is blocked in the calling thread now.
fn blocked(signal: i32) -> bool {
    // SAFETY: sigset_t is plain old data filled by the call.
    let mut cur: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: querying the calling thread's mask into a valid set.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut cur) };
    // SAFETY: a valid set and signal number.
    unsafe { libc::sigismember(&cur, signal) == 1 }
}

// ---------------------------------------------------------------------------
// The program's own POSIX timers on strobe's sampling signals.

const THREAD_TIMER_VALUE: usize = 0x1234_5678;
const PROCESS_TIMER_VALUE: usize = 0x0bad_cafe_0000_0000;
static THREAD_TIMER_SIGNAL: AtomicI32 = AtomicI32::new(0);
static PROCESS_TIMER_SIGNAL: AtomicI32 = AtomicI32::new(0);
static THREAD_TIMER_CALLS: AtomicU64 = AtomicU64::new(0);
static THREAD_TIMER_OVERRUNS: AtomicU64 = AtomicU64::new(0);
static PROCESS_TIMER_CALLS: AtomicU64 = AtomicU64::new(0);
static PROCESS_TIMER_OVERRUNS: AtomicU64 = AtomicU64::new(0);
/// Calls with anything else: a signal of strobe's timers would land here.
static STRANGER_CALLS: AtomicU64 = AtomicU64::new(0);

extern "C" fn program_timer_handler(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    _: *mut libc::c_void,
) {
    // SAFETY: an SA_SIGINFO handler gets a valid siginfo_t (128 bytes).
    let info = unsafe { &*(info as *const TimerInfo) };
    let ours = |value, timer_signal: &AtomicI32| {
        info.code == SI_TIMER
            && info.value == value
            && signal == timer_signal.load(Ordering::SeqCst)
    };
    let overrun = info.overrun.max(0) as u64;
    if ours(THREAD_TIMER_VALUE, &THREAD_TIMER_SIGNAL) {
        THREAD_TIMER_CALLS.fetch_add(1, Ordering::SeqCst);
        THREAD_TIMER_OVERRUNS.fetch_add(overrun, Ordering::SeqCst);
    } else if ours(PROCESS_TIMER_VALUE, &PROCESS_TIMER_SIGNAL) {
        PROCESS_TIMER_CALLS.fetch_add(1, Ordering::SeqCst);
        PROCESS_TIMER_OVERRUNS.fetch_add(overrun, Ordering::SeqCst);
    } else {
        STRANGER_CALLS.fetch_add(1, Ordering::SeqCst);
    }
}

/// A program timer on the monotonic clock: to thread `tid`, or to the
/// process when `tid` is `None`.
fn program_timer(signal: i32, value: usize, tid: Option<i32>) -> libc::timer_t {
    // SAFETY: sigevent is plain old data.
    let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
    event.sigev_notify = if tid.is_some() {
        libc::SIGEV_THREAD_ID
    } else {
        libc::SIGEV_SIGNAL
    };
    event.sigev_signo = signal;
    event.sigev_value = libc::sigval {
        sival_ptr: value as *mut libc::c_void,
    };
    event.sigev_notify_thread_id = tid.unwrap_or(0);
    let mut id: libc::timer_t = std::ptr::null_mut();
    // SAFETY: a valid sigevent and out-pointer.
    let rc = unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut id) };
    assert_eq!(rc, 0, "timer_create: {}", std::io::Error::last_os_error());
    id
}

fn arm(timer: libc::timer_t, period: Duration) {
    let ts = libc::timespec {
        tv_sec: period.as_secs() as libc::time_t,
        tv_nsec: period.subsec_nanos() as libc::c_long,
    };
    let spec = libc::itimerspec {
        it_interval: ts,
        it_value: ts,
    };
    // SAFETY: a live timer and a valid spec.
    let rc = unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) };
    assert_eq!(rc, 0);
}

#[test]
fn the_programs_own_timers_on_the_sampling_signals_reach_its_handler_and_strobes_do_not() {
    let _turn = one_at_a_time();
    let w = load_workload();
    let signals = fresh_signals(2);
    let (cpu_signal, real_signal) = (signals[0], signals[1]);
    THREAD_TIMER_SIGNAL.store(real_signal, Ordering::SeqCst);
    PROCESS_TIMER_SIGNAL.store(cpu_signal, Ordering::SeqCst);
    let handler = program_timer_handler as *const () as usize;

    // One signal's handler was installed before strobe started (a library
    // constructor): strobe takes it over and records it as the program's.
    let before = action(handler, libc::SA_SIGINFO | libc::SA_RESTART, &[]);
    // SAFETY: installing a valid action; the old one is not wanted.
    let rc = unsafe { libc::sigaction(cpu_signal, &before, std::ptr::null_mut()) };
    assert_eq!(rc, 0);
    let seg = segment(4, 1 << 20);
    let sampler = sampler_on(seg, cpu_signal, Some(real_signal));
    assert_eq!(program_action(cpu_signal).sa_sigaction, handler);
    // SAFETY: sigaction is plain old data.
    let mut installed: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: querying only.
    unsafe { libc::sigaction(cpu_signal, std::ptr::null(), &mut installed) };
    assert_ne!(
        installed.sa_sigaction, handler,
        "strobe's handler is installed"
    );
    // The other is set while strobe runs (the runtime's sigaction wrapper
    // records it).
    set_program_action(real_signal, &action(handler, libc::SA_SIGINFO, &[]));

    let slot = seg.claim_slot(gettid()).unwrap();
    sampler.register_current_thread(slot).unwrap();
    let period = Duration::from_millis(4);
    let to_thread = program_timer(real_signal, THREAD_TIMER_VALUE, Some(gettid()));
    let to_process = program_timer(cpu_signal, PROCESS_TIMER_VALUE, None);
    let armed = Instant::now();
    arm(to_thread, period);
    arm(to_process, period);
    (w.spin_ms)(400.0);
    // SAFETY: deleting the timers created above, once each.
    unsafe {
        libc::timer_delete(to_thread);
        libc::timer_delete(to_process);
    }
    let elapsed = armed.elapsed();
    sampler.unregister_current_thread();
    sampler.stop();
    // A process-directed signal may still be on its way to another thread.
    std::thread::sleep(Duration::from_millis(20));

    let expirations = (elapsed.as_nanos() / period.as_nanos()) as u64;
    for (what, calls, overruns) in [
        (
            "thread-directed",
            &THREAD_TIMER_CALLS,
            &THREAD_TIMER_OVERRUNS,
        ),
        (
            "process-directed",
            &PROCESS_TIMER_CALLS,
            &PROCESS_TIMER_OVERRUNS,
        ),
    ] {
        let calls = calls.load(Ordering::SeqCst);
        let overruns = overruns.load(Ordering::SeqCst);
        assert!(
            calls >= expirations / 2,
            "{what} timer: the handler ran {calls} times for {expirations} expirations"
        );
        assert!(
            calls + overruns + 2 >= expirations * 9 / 10 && calls + overruns <= expirations + 2,
            "{what} timer: {calls} calls + {overruns} overruns for {expirations} expirations"
        );
    }
    assert_eq!(
        STRANGER_CALLS.load(Ordering::SeqCst),
        0,
        "strobe's timers never reach the program's handler"
    );

    let samples = drain(seg, slot);
    assert_eq!(counters(seg, slot).taken as usize, samples.len());
    // 400 ms of CPU time: 100 CPU-time expirations, 400 or more real-time.
    let of = |clock| samples.iter().filter(|s| s.clock == clock).count();
    assert!(
        of(TimerClock::ThreadCpu) > 20,
        "{} CPU-time samples",
        of(TimerClock::ThreadCpu)
    );
    assert!(
        of(TimerClock::Realtime) > 100,
        "{} real-time samples",
        of(TimerClock::Realtime)
    );
}

// ---------------------------------------------------------------------------
// Other senders of a sampling signal.

/// A signal blocked by the program's `sa_mask`.
const MASKED: i32 = libc::SIGUSR2;
static RAISED_CALLS: AtomicU64 = AtomicU64::new(0);
static RAISED_CODE: AtomicI32 = AtomicI32::new(0);
static RAISED_VALUE: AtomicU64 = AtomicU64::new(0);
static MASKED_INSIDE: AtomicBool = AtomicBool::new(false);
static SELF_BLOCKED_INSIDE: AtomicBool = AtomicBool::new(false);
static PLAIN_CALLS: AtomicU64 = AtomicU64::new(0);

extern "C" fn raised_handler(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    _: *mut libc::c_void,
) {
    // SAFETY: an SA_SIGINFO handler gets a valid siginfo_t.
    let info = unsafe { &*(info as *const TimerInfo) };
    RAISED_CODE.store(info.code, Ordering::SeqCst);
    RAISED_VALUE.store(info.value as u64, Ordering::SeqCst);
    MASKED_INSIDE.store(blocked(MASKED), Ordering::SeqCst);
    SELF_BLOCKED_INSIDE.store(blocked(signal), Ordering::SeqCst);
    RAISED_CALLS.fetch_add(1, Ordering::SeqCst);
}

extern "C" fn plain_handler(_signal: libc::c_int) {
    PLAIN_CALLS.fetch_add(1, Ordering::SeqCst);
}

/// Sends `signal` to the calling thread with `sigqueue`'s code and a value
/// shaped like one of strobe's timer values.
fn queue_to_self(signal: i32, value: usize) {
    // SAFETY: siginfo_t is plain old data.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    {
        // SAFETY: the timer/queue view covers the first 32 of 128 bytes.
        let view = unsafe { &mut *(&mut info as *mut libc::siginfo_t as *mut TimerInfo) };
        view.signo = signal;
        view.code = SI_QUEUE;
        view.id_or_pid = std::process::id() as i32;
        view.value = value;
    }
    // SAFETY: rt_tgsigqueueinfo to this thread with a valid siginfo.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_rt_tgsigqueueinfo,
            std::process::id() as libc::c_int,
            gettid(),
            signal,
            &info as *const libc::siginfo_t,
        )
    };
    assert_eq!(
        rc,
        0,
        "rt_tgsigqueueinfo: {}",
        std::io::Error::last_os_error()
    );
}

#[test]
fn a_sampling_signal_from_elsewhere_meets_the_programs_disposition() {
    let _turn = one_at_a_time();
    let signal = fresh_signals(1)[0];
    let seg = segment(4, 1 << 16);
    let sampler = sampler_on(seg, signal, None);
    let slot = seg.claim_slot(gettid()).unwrap();
    // Sampled meanwhile: the signals below are told from the timer's.
    sampler.register_current_thread(slot).unwrap();

    // Ignored: dropped, the process goes on.
    set_program_action(signal, &action(libc::SIG_IGN, 0, &[]));
    for _ in 0..3 {
        // SAFETY: raising a signal whose handler is strobe's.
        assert_eq!(unsafe { libc::raise(signal) }, 0);
    }
    // SAFETY: as above, through pthread_kill.
    let rc = unsafe { libc::pthread_kill(libc::pthread_self(), signal) };
    assert_eq!(rc, 0);
    queue_to_self(signal, 0x5354_0000_0000_0000);
    assert_eq!(program_action(signal).sa_sigaction, libc::SIG_IGN);

    // Handled: the program's handler runs with its mask added, and the
    // thread's mask is back as it was afterwards.
    assert!(!blocked(MASKED) && !blocked(signal));
    set_program_action(
        signal,
        &action(
            raised_handler as *const () as usize,
            libc::SA_SIGINFO,
            &[MASKED],
        ),
    );
    // SAFETY: raising a signal whose handler is strobe's.
    assert_eq!(unsafe { libc::raise(signal) }, 0);
    assert_eq!(RAISED_CALLS.load(Ordering::SeqCst), 1);
    assert_eq!(RAISED_CODE.load(Ordering::SeqCst), SI_TKILL);
    assert!(
        MASKED_INSIDE.load(Ordering::SeqCst),
        "sa_mask applies in the handler"
    );
    assert!(
        SELF_BLOCKED_INSIDE.load(Ordering::SeqCst),
        "the signal itself is blocked in its handler"
    );
    assert!(
        !blocked(MASKED),
        "the program's sa_mask is lifted after the handler"
    );
    assert!(!blocked(signal));

    // SAFETY: as above, through pthread_kill.
    let rc = unsafe { libc::pthread_kill(libc::pthread_self(), signal) };
    assert_eq!(rc, 0);
    assert_eq!(RAISED_CALLS.load(Ordering::SeqCst), 2);

    // Not from a timer, though its value looks like one of strobe's
    // timers': the program's.
    let forged = 0x5354_0000_0000_0000;
    queue_to_self(signal, forged);
    assert_eq!(RAISED_CALLS.load(Ordering::SeqCst), 3);
    assert_eq!(RAISED_CODE.load(Ordering::SeqCst), SI_QUEUE);
    assert_eq!(RAISED_VALUE.load(Ordering::SeqCst), forged as u64);
    assert!(!blocked(MASKED));

    // A plain handler (no SA_SIGINFO), reset to the default after one
    // delivery (SA_RESETHAND).
    set_program_action(
        signal,
        &action(plain_handler as *const () as usize, libc::SA_RESETHAND, &[]),
    );
    // SAFETY: raising a signal whose handler is strobe's.
    assert_eq!(unsafe { libc::raise(signal) }, 0);
    assert_eq!(PLAIN_CALLS.load(Ordering::SeqCst), 1);
    assert_eq!(program_action(signal).sa_sigaction, libc::SIG_DFL);
    set_program_action(signal, &action(libc::SIG_IGN, 0, &[]));

    sampler.unregister_current_thread();
    sampler.stop();
    assert_eq!(
        RAISED_CALLS.load(Ordering::SeqCst),
        3,
        "strobe's timer signals never reached it"
    );
}

#[test]
fn a_sampling_signal_from_elsewhere_with_the_default_disposition_acts_as_without_strobe() {
    let _turn = one_at_a_time();
    let signal = fresh_signals(1)[0];
    let seg = segment(4, 1 << 16);
    let sampler = sampler_on(seg, signal, None);
    assert_eq!(program_action(signal).sa_sigaction, libc::SIG_DFL);

    // A real-time signal's default action terminates: in a child, which
    // must die by that signal.
    // SAFETY: the child calls only async-signal-safe functions.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: in the child: raise, then _exit if it survived.
        unsafe {
            libc::raise(signal);
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == signal,
        "the child ended with status {status:#x}, not killed by signal {signal}"
    );

    // A signal whose default is to do nothing does nothing.
    let urgent = sampler_on(seg, libc::SIGURG, None);
    assert_eq!(program_action(libc::SIGURG).sa_sigaction, libc::SIG_DFL);
    // SAFETY: raising a signal whose handler is strobe's.
    assert_eq!(unsafe { libc::raise(libc::SIGURG) }, 0);
    urgent.stop();
    sampler.stop();
}

// ---------------------------------------------------------------------------
// Choosing signals.

extern "C" fn someone_elses_handler(_signal: libc::c_int) {}

#[test]
fn free_realtime_signals_leaves_alone_signals_already_in_use() {
    let _turn = one_at_a_time();
    let before = free_realtime_signals(64);
    assert!(before.len() >= 4, "{before:?}");
    assert!(
        before.windows(2).all(|p| p[0] > p[1]),
        "highest first: {before:?}"
    );
    assert!(before
        .iter()
        .all(|s| (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(s)));
    assert_eq!(free_realtime_signals(1), before[..1]);

    let (handled, ignored) = (before[0], before[1]);
    // SAFETY: installing valid actions on signals nothing else uses.
    unsafe {
        let h = action(someone_elses_handler as *const () as usize, 0, &[]);
        assert_eq!(libc::sigaction(handled, &h, std::ptr::null_mut()), 0);
        let i = action(libc::SIG_IGN, 0, &[]);
        assert_eq!(libc::sigaction(ignored, &i, std::ptr::null_mut()), 0);
    }
    let after = free_realtime_signals(64);
    assert!(
        !after.contains(&handled),
        "{handled} has a handler: {after:?}"
    );
    assert!(!after.contains(&ignored), "{ignored} is ignored: {after:?}");
    assert_eq!(after, before[2..]);
    assert_eq!(free_realtime_signals(1), before[2..3]);

    // Nor those strobe samples with.
    let seg = segment(4, 1 << 16);
    let sampler = sampler_on(seg, after[0], None);
    assert_eq!(free_realtime_signals(64), after[1..]);
    sampler.stop();

    // Given back, they are free again.
    // SAFETY: restoring the default action.
    unsafe {
        let d = action(libc::SIG_DFL, 0, &[]);
        assert_eq!(libc::sigaction(handled, &d, std::ptr::null_mut()), 0);
        assert_eq!(libc::sigaction(ignored, &d, std::ptr::null_mut()), 0);
    }
    let again = free_realtime_signals(64);
    assert!(
        again.contains(&handled) && again.contains(&ignored),
        "{again:?}"
    );
}
