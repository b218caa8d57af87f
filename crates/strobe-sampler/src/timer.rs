//! Per-thread POSIX timers (`timer_create` with `SIGEV_THREAD_ID`).
//!
//! Owns creating, arming, disarming and deleting one timer that delivers a
//! signal to one thread, carrying a pointer in the signal's value. Never
//! runs in a signal handler.

use std::io;
use strobe_wire::sample::TimerClock;

/// The clock id for a timer on `clock` measuring thread `tid`: the
/// kernel's per-thread CPU clock encoding `((~tid) << 3) | 6`, which works
/// for any thread of this process, not only the caller.
fn clock_id(clock: TimerClock, tid: i32) -> libc::clockid_t {
    match clock {
        TimerClock::ThreadCpu => ((!tid) << 3) | 6,
        TimerClock::Realtime => libc::CLOCK_MONOTONIC,
    }
}

/// One timer targeting one thread. Deleted when dropped.
#[derive(Debug)]
pub struct ThreadTimer {
    id: libc::timer_t,
    period_ns: u64,
}

// SAFETY: a timer id is a kernel handle usable from any thread.
unsafe impl Send for ThreadTimer {}
// SAFETY: as above; settime/delete are thread-safe system calls.
unsafe impl Sync for ThreadTimer {}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// A uniformly drawn point in `1..=period_ns`: the first draw of a
/// generator seeded with the clock and a per-process counter
/// (statistically independent draws, nothing more is needed). A seeded
/// generator on the stack, not fastrand's thread-local one: this runs
/// before `main` (stage 2 arms the first timers) and allocates nothing.
fn first_expiry(period_ns: u64) -> u64 {
    static DRAWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = DRAWS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let seed = strobe_core::clock::now_ns() ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    fastrand::Rng::with_seed(seed).u64(1..=period_ns.max(1))
}

impl ThreadTimer {
    /// Creates a disarmed timer on `clock` that sends `signal` to thread
    /// `tid` with `value` as the signal's pointer value.
    pub fn create(
        clock: TimerClock,
        tid: i32,
        signal: i32,
        value: *mut libc::c_void,
        period_ns: u64,
    ) -> io::Result<ThreadTimer> {
        // SAFETY: sigevent is plain old data; zero is a valid start.
        let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_signo = signal;
        event.sigev_value = libc::sigval { sival_ptr: value };
        event.sigev_notify_thread_id = tid;
        let mut id: libc::timer_t = std::ptr::null_mut();
        // SAFETY: valid sigevent and out-pointer.
        if unsafe { libc::timer_create(clock_id(clock, tid), &mut event, &mut id) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ThreadTimer {
            id,
            period_ns: period_ns.max(1),
        })
    }

    /// Starts (or restarts) periodic expiry. The first expiry comes at a
    /// random point of the first period: a thread that lives less than a
    /// period is then sampled with the probability its time deserves, and
    /// one that lives 1.5 periods gets 1.5 samples on average, not always
    /// one (the sampled time of short threads would otherwise be cut to
    /// whole periods).
    pub fn arm(&self) -> io::Result<()> {
        self.set(first_expiry(self.period_ns), self.period_ns)
    }

    /// Stops expiry; the timer can be armed again.
    pub fn disarm(&self) -> io::Result<()> {
        self.set(0, 0)
    }

    fn set(&self, first_ns: u64, period_ns: u64) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: timespec(period_ns),
            it_value: timespec(first_ns),
        };
        // SAFETY: `id` is a live timer; spec is valid; old value not wanted.
        if unsafe { libc::timer_settime(self.id, 0, &spec, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for ThreadTimer {
    fn drop(&mut self) {
        // SAFETY: deleting the live timer we created, once.
        unsafe { libc::timer_delete(self.id) };
    }
}

impl ThreadTimer {
    /// Whether the timer is armed now.
    pub fn is_armed(&self) -> io::Result<bool> {
        // SAFETY: itimerspec is plain old data filled by the call.
        let mut spec: libc::itimerspec = unsafe { std::mem::zeroed() };
        // SAFETY: `id` is a live timer and `spec` a valid out-pointer.
        if unsafe { libc::timer_gettime(self.id, &mut spec) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(spec.it_value.tv_sec != 0 || spec.it_value.tv_nsec != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::first_expiry;

    #[test]
    fn first_expiries_spread_over_the_whole_period() {
        let period = 4_000_000;
        let draws: Vec<u64> = (0..4000).map(|_| first_expiry(period)).collect();
        assert!(draws.iter().all(|&d| (1..=period).contains(&d)));
        let mean = draws.iter().sum::<u64>() as f64 / draws.len() as f64;
        assert!((mean / period as f64 - 0.5).abs() < 0.05, "mean {mean}");
        let quarters = |q: u64| draws.iter().filter(|&&d| (d - 1) * 4 / period == q).count();
        for q in 0..4 {
            assert!((800..1200).contains(&quarters(q)), "quarter {q}");
        }
    }
}
