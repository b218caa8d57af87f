//! Counters that are not perf events: rusage fields, procfs/sysfs values
//! and `duration_time`.
//!
//! Owns reading them for the target (`getrusage` for the calling process
//! or thread, `/proc/<pid>/...` otherwise), the enable/disable/reset
//! bookkeeping that makes cumulative values count only while enabled
//! (value at read minus value at enable, accumulated over enabled
//! intervals), and the final `rusage` of a reaped child. Levels (`rss`,
//! `vm-size`, `threads`, `cpu-frequency`, `max-rss`) are read as they
//! are. A value that can no longer be read (the target is gone) keeps
//! its last reading.
//!
//! Never allocates on a read for the calling process or thread: files
//! are read into a buffer allocated at open, through paths formatted on
//! the stack. Two things do allocate: the buffer grows if a file is
//! larger than it (`/proc/cpuinfo` on a big machine, once), and the
//! rusage context-switch fields of *another* process list
//! `/proc/<pid>/task`.

use super::Reading;
use crate::catalog::{ProcField, RusageField};
use std::fmt::Write as _;
use strobe_core::thread::gettid;

/// What one soft counter reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SoftWhat {
    Rusage(RusageField),
    Proc(ProcField),
    Duration,
}

impl SoftWhat {
    fn is_gauge(self) -> bool {
        match self {
            SoftWhat::Rusage(f) => f.is_gauge(),
            SoftWhat::Proc(f) => f.is_gauge(),
            SoftWhat::Duration => false,
        }
    }
}

/// Whose values are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Whose {
    /// The calling process: `getrusage(RUSAGE_SELF)`, `/proc/self`.
    SelfProcess,
    /// A thread of the calling process: `getrusage(RUSAGE_THREAD)` when
    /// read from that thread, `/proc/self/task/<tid>` otherwise.
    SelfThread(libc::pid_t),
    /// Another process: `/proc/<pid>`.
    Process(libc::pid_t),
    /// A thread of another process: `/proc/<tid>/task/<tid>`.
    Thread(libc::pid_t),
}

struct Counter {
    spec: usize,
    what: SoftWhat,
    since: Option<u64>,
    enabled_acc: u64,
    baseline: u64,
    accum: u64,
    last: u64,
    /// Enabled time at the last reset (`duration_time` counts from it).
    reset_at: u64,
}

/// The soft counters of one [`super::Counters`].
pub(crate) struct Soft {
    whose: Whose,
    counters: Vec<Counter>,
    scratch: Vec<u8>,
    clk_tck: u64,
    final_rusage: Option<libc::rusage>,
}

/// A NUL-terminated path formatted on the stack.
struct CPath {
    buf: [u8; 128],
    len: usize,
}

impl CPath {
    fn new() -> CPath {
        CPath {
            buf: [0; 128],
            len: 0,
        }
    }

    fn ptr(&mut self) -> *const libc::c_char {
        self.buf[self.len] = 0;
        self.buf.as_ptr().cast()
    }
}

impl std::fmt::Write for CPath {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let b = s.as_bytes();
        if self.len + b.len() + 1 > self.buf.len() {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
        Ok(())
    }
}

/// Reads a whole file into `buf` (cleared first); false if it cannot be
/// opened or read. Grows `buf` only when the file is larger than it.
fn read_file(path: &mut CPath, buf: &mut Vec<u8>) -> bool {
    buf.clear();
    // SAFETY: `path.ptr()` is a NUL-terminated path in a live stack buffer.
    let fd = unsafe { libc::open(path.ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    let ok = loop {
        if buf.len() == buf.capacity() {
            buf.reserve(buf.capacity().max(4096));
        }
        let spare = buf.capacity() - buf.len();
        // SAFETY: the destination is the vector's spare capacity, `spare`
        // bytes long and owned by us; `fd` is open.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().add(buf.len()).cast(), spare) };
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            break false;
        }
        if n == 0 {
            break true;
        }
        // SAFETY: the kernel initialised `n` more bytes of the spare capacity.
        unsafe { buf.set_len(buf.len() + n as usize) };
    };
    // SAFETY: `fd` was opened above and is closed once.
    unsafe { libc::close(fd) };
    ok
}

/// The first unsigned integer after `key` on the line that starts with it.
fn keyed(buf: &[u8], key: &[u8]) -> Option<u64> {
    let mut rest = buf;
    loop {
        if rest.starts_with(key) {
            return first_number(&rest[key.len()..]);
        }
        let nl = rest.iter().position(|&b| b == b'\n')?;
        rest = &rest[nl + 1..];
    }
}

fn first_number(s: &[u8]) -> Option<u64> {
    let start = s.iter().position(|b| b.is_ascii_digit())?;
    let mut v: u64 = 0;
    for &b in &s[start..] {
        if !b.is_ascii_digit() {
            break;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

/// Field `n` (1-based, as proc(5) numbers them) of a `stat` file.
fn stat_field(buf: &[u8], n: usize) -> Option<u64> {
    if n < 3 {
        return None;
    }
    let close = buf.iter().rposition(|&b| b == b')')?;
    buf[close + 1..]
        .split(|&b| b == b' ' || b == b'\n')
        .filter(|t| !t.is_empty())
        .nth(n - 3)
        .and_then(first_number)
}

/// `cpu MHz` of processor `cpu` in `/proc/cpuinfo`.
fn cpuinfo_mhz(buf: &[u8], cpu: u64) -> Option<u64> {
    let mut current = None;
    for line in buf.split(|&b| b == b'\n') {
        if line.starts_with(b"processor") {
            current = first_number(line);
        } else if line.starts_with(b"cpu MHz") && current == Some(cpu) {
            return first_number(line);
        }
    }
    None
}

fn timeval_ns(t: libc::timeval) -> u64 {
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_usec as u64 * 1000)
}

fn rusage_value(r: &libc::rusage, f: RusageField) -> u64 {
    let n = |v: libc::c_long| v.max(0) as u64;
    match f {
        RusageField::UserTime => timeval_ns(r.ru_utime),
        RusageField::SystemTime => timeval_ns(r.ru_stime),
        RusageField::MaxRss => n(r.ru_maxrss),
        RusageField::MinFlt => n(r.ru_minflt),
        RusageField::MajFlt => n(r.ru_majflt),
        RusageField::VoluntarySwitches => n(r.ru_nvcsw),
        RusageField::InvoluntarySwitches => n(r.ru_nivcsw),
        RusageField::InBlock => n(r.ru_inblock),
        RusageField::OuBlock => n(r.ru_oublock),
    }
}

impl Soft {
    pub(crate) fn new(whose: Whose, counters: Vec<(usize, SoftWhat)>) -> Soft {
        // SAFETY: sysconf has no preconditions.
        let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        Soft {
            whose,
            counters: counters
                .into_iter()
                .map(|(spec, what)| Counter {
                    spec,
                    what,
                    since: None,
                    enabled_acc: 0,
                    baseline: 0,
                    accum: 0,
                    last: 0,
                    reset_at: 0,
                })
                .collect(),
            scratch: Vec::with_capacity(if whose == Whose::SelfProcess {
                4096
            } else {
                16384
            }),
            clk_tck: if tck > 0 { tck as u64 } else { 100 },
            final_rusage: None,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    /// The directory whose files are read.
    fn dir(&self, path: &mut CPath) {
        let _ = match self.whose {
            Whose::SelfProcess => write!(path, "/proc/self"),
            Whose::SelfThread(tid) => write!(path, "/proc/self/task/{tid}"),
            Whose::Process(pid) => write!(path, "/proc/{pid}"),
            Whose::Thread(tid) => write!(path, "/proc/{tid}/task/{tid}"),
        };
    }

    fn read_leaf(&mut self, leaf: &str) -> bool {
        let mut path = CPath::new();
        self.dir(&mut path);
        if write!(path, "/{leaf}").is_err() {
            return false;
        }
        read_file(&mut path, &mut self.scratch)
    }

    fn getrusage_now(&self) -> Option<libc::rusage> {
        let who = match self.whose {
            Whose::SelfProcess => libc::RUSAGE_SELF,
            Whose::SelfThread(tid) if tid == gettid() => libc::RUSAGE_THREAD,
            _ => return None,
        };
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `r` is a valid, writable rusage.
        let rc = unsafe { libc::getrusage(who, &mut r) };
        (rc == 0).then_some(r)
    }

    /// The current value of `what`, or None if it cannot be read now.
    fn current(&mut self, what: SoftWhat, now: u64) -> Option<u64> {
        match what {
            SoftWhat::Duration => Some(now),
            SoftWhat::Rusage(f) => {
                if let Some(r) = &self.final_rusage {
                    return Some(rusage_value(r, f));
                }
                if let Some(r) = self.getrusage_now() {
                    return Some(rusage_value(&r, f));
                }
                self.rusage_from_proc(f)
            }
            SoftWhat::Proc(f) => self.proc_value(f),
        }
    }

    fn rusage_from_proc(&mut self, f: RusageField) -> Option<u64> {
        let tck = self.clk_tck;
        let ns = |ticks: u64| ticks.saturating_mul(1_000_000_000) / tck;
        match f {
            RusageField::UserTime => {
                self.read_leaf("stat").then_some(())?;
                stat_field(&self.scratch, 14).map(ns)
            }
            RusageField::SystemTime => {
                self.read_leaf("stat").then_some(())?;
                stat_field(&self.scratch, 15).map(ns)
            }
            RusageField::MinFlt => {
                self.read_leaf("stat").then_some(())?;
                stat_field(&self.scratch, 10)
            }
            RusageField::MajFlt => {
                self.read_leaf("stat").then_some(())?;
                stat_field(&self.scratch, 12)
            }
            RusageField::MaxRss => {
                self.read_leaf("status").then_some(())?;
                keyed(&self.scratch, b"VmHWM:")
            }
            RusageField::InBlock => {
                self.read_leaf("io").then_some(())?;
                keyed(&self.scratch, b"read_bytes:").map(|b| b / 512)
            }
            RusageField::OuBlock => {
                self.read_leaf("io").then_some(())?;
                let w = keyed(&self.scratch, b"write_bytes:")?;
                let c = keyed(&self.scratch, b"cancelled_write_bytes:").unwrap_or(0);
                Some(w.saturating_sub(c) / 512)
            }
            RusageField::VoluntarySwitches | RusageField::InvoluntarySwitches => {
                let key: &[u8] = if f == RusageField::VoluntarySwitches {
                    b"voluntary_ctxt_switches:"
                } else {
                    b"nonvoluntary_ctxt_switches:"
                };
                match self.whose {
                    Whose::Process(pid) => self.sum_threads(pid, key),
                    _ => {
                        self.read_leaf("status").then_some(())?;
                        keyed(&self.scratch, key)
                    }
                }
            }
        }
    }

    /// Sums a status key over every thread of `pid` (allocates: lists
    /// the task directory).
    fn sum_threads(&mut self, pid: libc::pid_t, key: &[u8]) -> Option<u64> {
        let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
        let mut total = 0u64;
        let mut any = false;
        for entry in dir.flatten() {
            let Some(tid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            let mut path = CPath::new();
            if write!(path, "/proc/{pid}/task/{tid}/status").is_err() {
                continue;
            }
            if read_file(&mut path, &mut self.scratch) {
                if let Some(v) = keyed(&self.scratch, key) {
                    total += v;
                    any = true;
                }
            }
        }
        any.then_some(total)
    }

    fn proc_value(&mut self, f: ProcField) -> Option<u64> {
        let (leaf, key): (&str, &[u8]) = match f {
            ProcField::Rss => ("status", b"VmRSS:"),
            ProcField::VmSize => ("status", b"VmSize:"),
            ProcField::Threads => ("status", b"Threads:"),
            ProcField::VoluntaryCtxtSwitches => ("status", b"voluntary_ctxt_switches:"),
            ProcField::NonvoluntaryCtxtSwitches => ("status", b"nonvoluntary_ctxt_switches:"),
            ProcField::ReadBytes => ("io", b"read_bytes:"),
            ProcField::WriteBytes => ("io", b"write_bytes:"),
            ProcField::CpuFrequency => return self.cpu_mhz(),
        };
        self.read_leaf(leaf).then_some(())?;
        keyed(&self.scratch, key)
    }

    fn cpu_mhz(&mut self) -> Option<u64> {
        self.read_leaf("stat").then_some(())?;
        let cpu = stat_field(&self.scratch, 39)?;
        let mut path = CPath::new();
        if write!(
            path,
            "/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq"
        )
        .is_ok()
            && read_file(&mut path, &mut self.scratch)
        {
            if let Some(khz) = first_number(&self.scratch) {
                return Some(khz / 1000);
            }
        }
        let mut path = CPath::new();
        write!(path, "/proc/cpuinfo").ok()?;
        read_file(&mut path, &mut self.scratch).then_some(())?;
        cpuinfo_mhz(&self.scratch, cpu)
    }

    fn value_or_last(&mut self, i: usize, now: u64) -> u64 {
        let what = self.counters[i].what;
        match self.current(what, now) {
            Some(v) => {
                self.counters[i].last = v;
                v
            }
            None => self.counters[i].last,
        }
    }

    /// Starts counting now (values count from their current level).
    pub(crate) fn enable(&mut self, now: u64) {
        for i in 0..self.counters.len() {
            if self.counters[i].since.is_some() {
                continue;
            }
            let v = self.value_or_last(i, now);
            let c = &mut self.counters[i];
            c.baseline = v;
            c.since = Some(now);
        }
    }

    /// Starts counting now with cumulative values counted from zero: the
    /// whole life of a target that has just been created.
    pub(crate) fn enable_from_start(&mut self, now: u64) {
        for c in &mut self.counters {
            c.baseline = if c.what == SoftWhat::Duration { now } else { 0 };
            c.since = Some(now);
        }
    }

    /// Stops counting; values stay as they are.
    pub(crate) fn disable(&mut self, now: u64) {
        for i in 0..self.counters.len() {
            let Some(since) = self.counters[i].since else {
                continue;
            };
            let v = self.value_or_last(i, now);
            let c = &mut self.counters[i];
            c.enabled_acc += now.saturating_sub(since);
            if !c.what.is_gauge() {
                c.accum += v.saturating_sub(c.baseline);
            }
            c.since = None;
        }
    }

    /// Sets every count to zero. Enabled times keep their totals, as the
    /// kernel's `PERF_EVENT_IOC_RESET` leaves a perf event's times.
    pub(crate) fn reset(&mut self, now: u64) {
        for i in 0..self.counters.len() {
            let enabled = self.counters[i].since.is_some();
            let v = if enabled {
                self.value_or_last(i, now)
            } else {
                0
            };
            let c = &mut self.counters[i];
            c.accum = 0;
            c.reset_at = c.enabled_acc + c.since.map_or(0, |s| now.saturating_sub(s));
            if enabled {
                c.baseline = v;
            }
        }
    }

    /// Uses a reaped child's totals for the rusage fields from now on.
    pub(crate) fn apply_final_rusage(&mut self, r: &libc::rusage) {
        self.final_rusage = Some(*r);
    }

    /// Writes each soft counter's reading into `out` at its spec index.
    pub(crate) fn read_into(&mut self, now: u64, out: &mut [Reading]) {
        for i in 0..self.counters.len() {
            let v = self.value_or_last(i, now);
            let c = &self.counters[i];
            let enabled = c.enabled_acc + c.since.map_or(0, |s| now.saturating_sub(s));
            let raw = match c.what {
                SoftWhat::Duration => enabled.saturating_sub(c.reset_at),
                w if w.is_gauge() => v,
                _ => c.accum + c.since.map_or(0, |_| v.saturating_sub(c.baseline)),
            };
            out[c.spec] = Reading {
                raw,
                enabled_ns: enabled,
                running_ns: enabled,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers() {
        let stat = b"123 (a b) c) S 1 2 3 4 5 6 70 8 90 10 1100 1200 0 0 20 0 1 0 5 6 7\n";
        assert_eq!(stat_field(stat, 3), None); // `S` is not a number
        assert_eq!(stat_field(stat, 10), Some(70));
        assert_eq!(stat_field(stat, 12), Some(90));
        assert_eq!(stat_field(stat, 14), Some(1100));
        assert_eq!(stat_field(stat, 15), Some(1200));
        let status = b"Name:\tx\nVmRSS:\t  1234 kB\nThreads:\t3\n";
        assert_eq!(keyed(status, b"VmRSS:"), Some(1234));
        assert_eq!(keyed(status, b"Threads:"), Some(3));
        assert_eq!(keyed(status, b"VmHWM:"), None);
        let cpuinfo =
            b"processor\t: 0\ncpu MHz\t\t: 2596.130\n\nprocessor\t: 1\ncpu MHz\t\t: 3000.000\n";
        assert_eq!(cpuinfo_mhz(cpuinfo, 1), Some(3000));
    }

    #[test]
    fn enabled_intervals_accumulate() {
        let mut s = Soft::new(Whose::SelfProcess, vec![(0, SoftWhat::Duration)]);
        let mut out = [Reading::default()];
        s.read_into(10, &mut out);
        assert_eq!(out[0].running_ns, 0);
        s.enable(100);
        s.disable(150);
        s.enable(200);
        s.read_into(230, &mut out);
        assert_eq!(out[0].raw, 80);
        assert_eq!(out[0].enabled_ns, 80);
        s.reset(230);
        s.read_into(240, &mut out);
        assert_eq!(out[0].raw, 10);
        assert_eq!(out[0].enabled_ns, 90, "times keep their totals");
    }
}
