//! Clocks: the timestamps every strobe record carries.
//!
//! Owns reading the kernel clocks (monotonic, realtime, boottime, CPU-time
//! clocks), the clock snapshot used to align processes and nodes, and the
//! hot-path timestamp. Everything here is async-signal-safe: it only calls
//! `clock_gettime` (served by the vDSO for the wall clocks) and never
//! allocates, locks or formats.
//!
//! **Hot-path timestamp.** [`now_ns`] reads `CLOCK_MONOTONIC`. We measured the
//! alternatives on the development machine (see `docs/clocks.md` and
//! `strobe-bench clocks`): `rdtsc` is cheaper but needs a calibration whose
//! error grows with run length and whose invariance a VM may not guarantee;
//! `CLOCK_MONOTONIC_COARSE` is cheaper still but only advances once per
//! kernel tick (4 ms here), far too coarse for regions. `CLOCK_MONOTONIC`
//! is exact, comparable across processes on one machine, and costs tens of
//! nanoseconds through the vDSO.

/// A kernel clock strobe can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Clock {
    /// `CLOCK_MONOTONIC`: never jumps; strobe's timestamp clock.
    Monotonic,
    /// `CLOCK_REALTIME`: wall-clock time since the Unix epoch.
    Realtime,
    /// `CLOCK_BOOTTIME`: monotonic including suspend; Perfetto's default.
    Boottime,
    /// `CLOCK_MONOTONIC_COARSE`: cheap, advances once per kernel tick.
    MonotonicCoarse,
    /// `CLOCK_PROCESS_CPUTIME_ID`: CPU time of the whole process.
    ProcessCpu,
    /// `CLOCK_THREAD_CPUTIME_ID`: CPU time of the calling thread.
    ThreadCpu,
}

impl Clock {
    /// The `clockid_t` the kernel knows this clock by.
    pub const fn id(self) -> libc::clockid_t {
        match self {
            Clock::Monotonic => libc::CLOCK_MONOTONIC,
            Clock::Realtime => libc::CLOCK_REALTIME,
            Clock::Boottime => libc::CLOCK_BOOTTIME,
            Clock::MonotonicCoarse => libc::CLOCK_MONOTONIC_COARSE,
            Clock::ProcessCpu => libc::CLOCK_PROCESS_CPUTIME_ID,
            Clock::ThreadCpu => libc::CLOCK_THREAD_CPUTIME_ID,
        }
    }

    /// Reads this clock in nanoseconds. Async-signal-safe.
    #[inline]
    pub fn read_ns(self) -> u64 {
        read_clock_ns(self.id())
    }
}

/// Reads any `clockid_t` in nanoseconds (0 if the kernel refuses the id).
/// Async-signal-safe.
#[inline]
pub fn read_clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// strobe's timestamp: `CLOCK_MONOTONIC` nanoseconds. Async-signal-safe.
#[inline]
pub fn now_ns() -> u64 {
    read_clock_ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME` nanoseconds since the Unix epoch.
#[inline]
pub fn realtime_ns() -> u64 {
    read_clock_ns(libc::CLOCK_REALTIME)
}

/// `CLOCK_BOOTTIME` nanoseconds.
#[inline]
pub fn boottime_ns() -> u64 {
    read_clock_ns(libc::CLOCK_BOOTTIME)
}

/// Whether the time-stamp counter can stand in for `CLOCK_MONOTONIC` on
/// hot paths: the CPU says it is invariant (`constant_tsc` and
/// `nonstop_tsc`) and the kernel keeps time with it (clocksource `tsc`,
/// which the kernel only keeps when the counters are synchronised).
pub fn tsc_is_reliable() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_default();
    if source.trim() != "tsc" {
        return false;
    }
    // The first processor's flags only: on a large machine the whole file
    // takes milliseconds to generate.
    use std::io::BufRead;
    let Ok(cpuinfo) = std::fs::File::open("/proc/cpuinfo") else {
        return false;
    };
    let flags = std::io::BufReader::new(cpuinfo)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// A time-stamp counter reading and the `CLOCK_MONOTONIC` time it
/// corresponds to (the counter read on both sides of the clock, averaged).
pub fn tsc_pair() -> (u64, u64) {
    let before = cycles();
    let ns = now_ns();
    let after = cycles();
    (before + (after - before) / 2, ns)
}

/// Raw time-stamp counter of the CPU (x86-64 `rdtsc`). Stored only where
/// the collector converts it to `CLOCK_MONOTONIC` against its own
/// readings ([`tsc_pair`]); otherwise for relative measurements of very
/// short intervals (benchmarks).
#[inline]
pub fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        now_ns()
    }
}

/// All wall clocks read back to back, so that timestamps of one clock can be
/// converted to another (processes on different nodes are aligned through
/// their realtime readings; Perfetto wants boottime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClockSnapshot {
    /// `CLOCK_MONOTONIC` ns.
    pub monotonic_ns: u64,
    /// `CLOCK_REALTIME` ns.
    pub realtime_ns: u64,
    /// `CLOCK_BOOTTIME` ns.
    pub boottime_ns: u64,
}

impl ClockSnapshot {
    /// Reads the three clocks. The monotonic clock is read twice around the
    /// others and the midpoint kept, halving the skew between readings.
    pub fn take() -> ClockSnapshot {
        let m0 = now_ns();
        let realtime_ns = realtime_ns();
        let boottime_ns = boottime_ns();
        let m1 = now_ns();
        ClockSnapshot {
            monotonic_ns: m0 + (m1 - m0) / 2,
            realtime_ns,
            boottime_ns,
        }
    }

    /// Converts a monotonic timestamp taken in this snapshot's process into
    /// realtime nanoseconds.
    pub fn monotonic_to_realtime(&self, t: u64) -> u64 {
        (t as i128 - self.monotonic_ns as i128 + self.realtime_ns as i128) as u64
    }

    /// Converts a monotonic timestamp into boottime nanoseconds.
    pub fn monotonic_to_boottime(&self, t: u64) -> u64 {
        (t as i128 - self.monotonic_ns as i128 + self.boottime_ns as i128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_never_goes_back() {
        let mut last = now_ns();
        for _ in 0..10_000 {
            let t = now_ns();
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn snapshot_converts_between_clocks() {
        let s = ClockSnapshot::take();
        let later = now_ns();
        let rt = s.monotonic_to_realtime(later);
        let real_now = realtime_ns();
        // Within 50 ms of each other (NTP slewing aside).
        assert!(
            (real_now as i128 - rt as i128).abs() < 50_000_000,
            "{real_now} vs {rt}"
        );
        assert!(s.monotonic_to_boottime(s.monotonic_ns) == s.boottime_ns);
        // Boot time never runs behind the monotonic clock; the snapshot's
        // monotonic value is the midpoint of two reads around it, so allow
        // for the reads themselves.
        assert!(
            s.boottime_ns + 1_000_000 >= s.monotonic_ns,
            "{} vs {}",
            s.boottime_ns,
            s.monotonic_ns
        );
    }

    #[test]
    fn cpu_clocks_advance_with_work() {
        let t0 = Clock::ThreadCpu.read_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let t1 = Clock::ThreadCpu.read_ns();
        assert!(t1 > t0);
        assert!(Clock::ProcessCpu.read_ns() >= t1 - t0);
    }
}
