//! Per-thread POSIX timers (`timer_create` with `SIGEV_THREAD_ID`).
//!
//! Owns creating, arming, disarming and deleting one timer that delivers a
//! signal to one thread, carrying a pointer in the signal's value. Never
//! runs in a signal handler.

use std::io;

/// Which clock drives a timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimerClock {
    /// The target thread's CPU time: samples where CPU time goes. The kernel
    /// delivers these at most once per scheduler tick (250 Hz here).
    ThreadCpu,
    /// Elapsed time (`CLOCK_MONOTONIC`): also samples threads that wait.
    Realtime,
}

impl TimerClock {
    /// Both clocks.
    pub const ALL: [TimerClock; 2] = [TimerClock::ThreadCpu, TimerClock::Realtime];

    /// The name stored with samples.
    pub const fn name(self) -> &'static str {
        match self {
            TimerClock::ThreadCpu => "cputime",
            TimerClock::Realtime => "realtime",
        }
    }

    /// The clock id for a timer measuring thread `tid`: the kernel's
    /// per-thread CPU clock encoding `((~tid) << 3) | 6`, which works for
    /// any thread of this process, not only the caller.
    fn clock_id(self, tid: i32) -> libc::clockid_t {
        match self {
            TimerClock::ThreadCpu => ((!tid) << 3) | 6,
            TimerClock::Realtime => libc::CLOCK_MONOTONIC,
        }
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
        if unsafe { libc::timer_create(clock.clock_id(tid), &mut event, &mut id) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ThreadTimer {
            id,
            period_ns: period_ns.max(1),
        })
    }

    /// Starts (or restarts) periodic expiry.
    pub fn arm(&self) -> io::Result<()> {
        self.set(self.period_ns)
    }

    /// Stops expiry; the timer can be armed again.
    pub fn disarm(&self) -> io::Result<()> {
        self.set(0)
    }

    fn set(&self, period_ns: u64) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: timespec(period_ns),
            it_value: timespec(period_ns),
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
