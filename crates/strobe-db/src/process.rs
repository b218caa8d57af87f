//! What the writer records about the profiled process at start.
//!
//! Owns [`ProcessInfo`] (pid, ppid, start time, command line, environment)
//! and reading it for the calling process from `/proc`. It must never touch a
//! database.

/// The process a database describes (`rocpd_info_process`). Timestamps are
/// `CLOCK_MONOTONIC` nanoseconds, like every strobe timestamp, except
/// `start_unix_ns`, which only seeds the process uuid.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessInfo {
    /// OS process id.
    pub pid: u32,
    /// OS parent process id.
    pub ppid: u32,
    /// When the profiler runtime initialised (`init` column).
    pub init_ns: u64,
    /// Process start (`start` column).
    pub start_ns: u64,
    /// Process start on the realtime clock (Unix epoch ns): seeds the uuid.
    pub start_unix_ns: u64,
    /// Command line, arguments joined by spaces.
    pub command: String,
    /// Environment variables to record (`environment` JSON column). The
    /// runtime decides which ones; recording every variable may leak secrets.
    pub environment: Vec<(String, String)>,
}

impl ProcessInfo {
    /// Describes the calling process: pid and ppid, the start time from
    /// `/proc/self/stat` (ticks since boot, converted to the monotonic and
    /// realtime clocks), the command line from `/proc/self/cmdline`, and
    /// `environment` left empty.
    pub fn current() -> ProcessInfo {
        let pid = std::process::id();
        // SAFETY: getppid has no preconditions and cannot fail.
        let ppid = unsafe { libc::getppid() } as u32;
        let now_mono = strobe_core::clock::now_ns();
        let now_boot = strobe_core::clock::boottime_ns();
        let now_real = strobe_core::clock::realtime_ns();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        let start_boot = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| {
                // Fields after the parenthesised command; starttime is field 22.
                let rest = &s[s.rfind(')')? + 2..];
                rest.split_whitespace().nth(19)?.parse::<u64>().ok()
            })
            .map(|ticks| ticks.saturating_mul(1_000_000_000 / hz))
            .unwrap_or(now_boot);
        let age = now_boot.saturating_sub(start_boot);
        let command = std::fs::read("/proc/self/cmdline")
            .map(|b| {
                b.split(|c| *c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        ProcessInfo {
            pid,
            ppid,
            init_ns: now_mono,
            start_ns: now_mono.saturating_sub(age),
            start_unix_ns: now_real.saturating_sub(age),
            command,
            environment: Vec::new(),
        }
    }
}
