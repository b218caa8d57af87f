//! The kernel's sampling interface: `perf_event_open` software events that
//! copy the user registers and the top of the user stack of a thread into
//! ring buffers the collector maps: the task clock (CPU time) and, for
//! off-CPU time, context switches with their switch records.
//!
//! Owns the event attributes, opening one event per CPU, the mapped rings
//! and reading whole records out of them. Never interprets a record (see
//! [`super::records`]) and never runs in the profiled program.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};

/// `perf_event_attr` (the kernel's layout up to `sig_data`, 128 bytes).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period_or_freq: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
    aux_sample_size: u32,
    reserved_3: u32,
    sig_data: u64,
}

const _: () = assert!(std::mem::size_of::<Attr>() == 128);

const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_TASK_CLOCK`: CPU time of the monitored tasks.
const TASK_CLOCK: u64 = 1;
/// `PERF_COUNT_SW_CONTEXT_SWITCHES`: a task leaves its CPU.
const CONTEXT_SWITCHES: u64 = 3;
/// The sample period of the context-switch event: every switch. Its
/// samples are told from task-clock samples by this period (a clock
/// event's period is at least 10 µs).
pub const SWITCH_PERIOD: u64 = 1;
/// `PERF_FLAG_FD_CLOEXEC`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// Flag bits of `perf_event_attr`.
mod bit {
    pub const DISABLED: u64 = 1 << 0;
    pub const INHERIT: u64 = 1 << 1;
    pub const EXCLUDE_KERNEL: u64 = 1 << 5;
    pub const EXCLUDE_HV: u64 = 1 << 6;
    pub const EXCLUDE_CALLCHAIN_KERNEL: u64 = 1 << 21;
    pub const MMAP: u64 = 1 << 8;
    pub const COMM: u64 = 1 << 9;
    pub const FREQ: u64 = 1 << 10;
    pub const ENABLE_ON_EXEC: u64 = 1 << 12;
    pub const TASK: u64 = 1 << 13;
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    pub const MMAP2: u64 = 1 << 23;
    pub const USE_CLOCKID: u64 = 1 << 25;
    pub const CONTEXT_SWITCH: u64 = 1 << 26;
}

/// `sample_type` bits: what each sample record holds, in this order.
pub mod sample {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const PERIOD: u64 = 1 << 8;
    pub const REGS_USER: u64 = 1 << 12;
    pub const STACK_USER: u64 = 1 << 13;
}

/// The user registers copied with each sample (x86-64 `perf_regs` bits
/// BP = 6, SP = 7, IP = 8), in this order in the record.
pub const REGS_MASK: u64 = (1 << 6) | (1 << 7) | (1 << 8);

/// One sampling event per CPU for the calling thread and every task it
/// starts afterwards (`inherit`), enabled when the task that inherits it
/// calls `exec` (so the launcher itself is never sampled).
pub struct Events {
    rings: Vec<Ring>,
    /// Events of other threads, and context-switch events, that write
    /// into `rings` (kept open).
    _others: Vec<OwnedFd>,
    /// Why off-CPU time is not recorded although asked for.
    pub off_cpu_refused: Option<String>,
}

impl Events {
    /// Opens the events: CPU time (`task-clock`) at `freq_hz`, user space
    /// only, `stack_bytes` of user stack per sample, and with `off_cpu`
    /// where threads block (see [`Switches`]). Errors name the setting
    /// that forbids it.
    pub fn for_children(
        freq_hz: u64,
        stack_bytes: u32,
        ring_pages: usize,
        off_cpu: bool,
    ) -> io::Result<Events> {
        let extra = bit::DISABLED | bit::ENABLE_ON_EXEC;
        let attr = attributes(freq_hz, stack_bytes, extra);
        let mut switches = Switches::new(off_cpu, stack_bytes, extra, ring_pages);
        let mut rings = Vec::new();
        for cpu in cpus() {
            if let Some(fd) = open(&attr, 0, cpu)? {
                rings.push(Ring::map(fd, ring_pages)?);
                switches.open(0, cpu);
            }
        }
        if rings.is_empty() {
            return Err(io::Error::other("no CPU accepted a sampling event"));
        }
        Ok(switches.into_events(rings, Vec::new()))
    }

    /// Opens the events for every thread of the running process `pid`
    /// (and what they start from now on), enabled at once: one ring per
    /// CPU, the other threads' events writing into it.
    pub fn for_process(
        pid: i32,
        freq_hz: u64,
        stack_bytes: u32,
        ring_pages: usize,
        off_cpu: bool,
    ) -> io::Result<Events> {
        let attr = attributes(freq_hz, stack_bytes, 0);
        let mut switches = Switches::new(off_cpu, stack_bytes, 0, ring_pages);
        let cpus = cpus();
        let mut per_cpu: Vec<Option<Ring>> = cpus.iter().map(|_| None).collect();
        let mut others = Vec::new();
        let mut done: std::collections::HashSet<i32> = std::collections::HashSet::new();
        // Thread by thread (a thread started meanwhile by one already
        // opened inherits its events), until the task list stops growing.
        loop {
            let threads: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
                .map_err(|e| io::Error::new(e.kind(), format!("process {pid}: {e}")))?
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .filter(|tid| !done.contains(tid))
                .collect();
            if threads.is_empty() {
                break;
            }
            for tid in threads {
                done.insert(tid);
                for (slot, &cpu) in per_cpu.iter_mut().zip(&cpus) {
                    let Some(fd) = open(&attr, tid, cpu)? else {
                        continue;
                    };
                    match slot {
                        None => *slot = Some(Ring::map(fd, ring_pages)?),
                        Some(r) => {
                            set_output(&fd, r)?;
                            others.push(fd);
                        }
                    }
                    switches.open(tid, cpu);
                }
            }
        }
        let rings: Vec<Ring> = per_cpu.into_iter().flatten().collect();
        if rings.is_empty() {
            return Err(io::Error::other(format!(
                "process {pid} has no thread to sample"
            )));
        }
        Ok(switches.into_events(rings, others))
    }

    /// Opens the event for one thread, `tid`, enabled at once (a thread
    /// the in-program sampler cannot reach).
    pub fn for_thread(
        tid: i32,
        freq_hz: u64,
        stack_bytes: u32,
        ring_pages: usize,
    ) -> io::Result<Events> {
        let mut attr = attributes(freq_hz, stack_bytes, 0);
        attr.flags &= !bit::INHERIT;
        let fd = open(&attr, tid, -1)?
            .ok_or_else(|| io::Error::other(format!("thread {tid} has ended")))?;
        Ok(Events {
            rings: vec![Ring::map(fd, ring_pages)?],
            _others: Vec::new(),
            off_cpu_refused: None,
        })
    }

    /// The rings, one per CPU.
    pub fn rings(&mut self) -> &mut [Ring] {
        &mut self.rings
    }
}

/// `PERF_EVENT_IOC_SET_OUTPUT`.
const SET_OUTPUT: libc::c_ulong = 0x2405;

/// Sends the records of event `fd` into `ring` (same CPU, same clock).
fn set_output(fd: &OwnedFd, ring: &Ring) -> io::Result<()> {
    // SAFETY: PERF_EVENT_IOC_SET_OUTPUT between two perf event descriptors
    // this process owns.
    if unsafe { libc::ioctl(fd.as_raw_fd(), SET_OUTPUT, ring.fd.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Off-CPU time: a sample (user registers and stack) each time a task
/// leaves its CPU, plus switch-out and switch-in records (`context_switch`)
/// that say whether it blocked or was preempted and when it came back,
/// written into the task-clock rings. The switch happens in the kernel, so
/// the kernel only samples it where kernel sampling is allowed
/// (`perf_event_paranoid` ≤ 1, or `CAP_PERFMON`).
struct Switches {
    attr: Option<Attr>,
    ring_pages: usize,
    /// Rings of their own, one per CPU: a burst of context switches must
    /// not crowd the CPU-time samples out of theirs.
    rings: Vec<(i32, Ring)>,
    fds: Vec<OwnedFd>,
    refused: Option<String>,
}

/// User stack copied with a context-switch sample: less than a CPU-time
/// sample's (a program may switch 100 000 times a second).
const SWITCH_STACK_BYTES: u32 = 8192;

impl Switches {
    fn new(off_cpu: bool, stack_bytes: u32, extra: u64, ring_pages: usize) -> Switches {
        let attr = Attr {
            config: CONTEXT_SWITCHES,
            sample_period_or_freq: SWITCH_PERIOD,
            flags: (extra
                | bit::INHERIT
                | bit::EXCLUDE_HV
                | bit::EXCLUDE_CALLCHAIN_KERNEL
                | bit::SAMPLE_ID_ALL
                | bit::USE_CLOCKID
                | bit::CONTEXT_SWITCH),
            ..attributes(0, stack_bytes.min(SWITCH_STACK_BYTES), 0)
        };
        Switches {
            attr: off_cpu.then_some(attr),
            ring_pages,
            rings: Vec::new(),
            fds: Vec::new(),
            refused: None,
        }
    }

    /// Opens the switch event of task `pid` on `cpu` (into that CPU's
    /// switch ring). The first failure closes every switch event and is
    /// kept to be reported: off-CPU time is recorded for all or none.
    fn open(&mut self, pid: i32, cpu: i32) {
        let Some(attr) = &self.attr else {
            return;
        };
        let opened = open_one(attr, pid, cpu).and_then(|fd| {
            let Some(fd) = fd else {
                return Ok(());
            };
            match self.rings.iter().find(|(c, _)| *c == cpu) {
                Some((_, ring)) => {
                    set_output(&fd, ring)?;
                    self.fds.push(fd);
                }
                None => self.rings.push((cpu, Ring::map(fd, self.ring_pages)?)),
            }
            Ok(())
        });
        if let Err(e) = opened {
            self.attr = None;
            self.rings.clear();
            self.fds.clear();
            self.refused = Some(match e.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EPERM) => format!(
                    "off-CPU time is not recorded: the kernel refuses context-switch \
                     samples ({e}); set kernel.perf_event_paranoid to 1 or lower \
                     (sysctl -w kernel.perf_event_paranoid=1) or run with CAP_PERFMON"
                ),
                _ => format!("off-CPU time is not recorded: {e}"),
            });
        }
    }

    /// The events for `rings`: the CPU-time rings, then the switch rings.
    fn into_events(self, mut rings: Vec<Ring>, mut others: Vec<OwnedFd>) -> Events {
        rings.extend(self.rings.into_iter().map(|(_, ring)| ring));
        others.extend(self.fds);
        Events {
            rings,
            _others: others,
            off_cpu_refused: self.refused,
        }
    }
}

/// The CPUs to open events on: every possible one (numbering may have
/// holes; CPUs may come online later).
fn cpus() -> Vec<i32> {
    let listed = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    let mut cpus = Vec::new();
    for part in listed.trim().split(',').filter(|p| !p.is_empty()) {
        let (from, to) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(from), Ok(to)) = (from.parse::<i32>(), to.parse::<i32>()) {
            cpus.extend(from..=to);
        }
    }
    if cpus.is_empty() {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as i32;
        cpus.extend(0..n);
    }
    cpus
}

/// Whether samples may land in the kernel (CPU time in system calls,
/// attributed to the user stack that made the call): tried first, and
/// turned off for good when the kernel refuses it (`perf_event_paranoid`
/// ≥ 2 without privileges).
static KERNEL_TIME: AtomicBool = AtomicBool::new(true);

/// Whether the events opened so far also sample CPU time spent in system
/// calls.
pub fn sees_system_calls() -> bool {
    KERNEL_TIME.load(Ordering::Relaxed)
}

/// Opens one event for task `pid` (0 = the calling thread) on `cpu`;
/// `None` for an offline CPU or a thread that just ended.
fn open(attr: &Attr, pid: i32, cpu: i32) -> io::Result<Option<OwnedFd>> {
    if KERNEL_TIME.load(Ordering::Relaxed) {
        let mut with_kernel = *attr;
        with_kernel.flags = (attr.flags & !bit::EXCLUDE_KERNEL) | bit::EXCLUDE_CALLCHAIN_KERNEL;
        match open_one(&with_kernel, pid, cpu) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) => {
                KERNEL_TIME.store(false, Ordering::Relaxed);
            }
            other => return other,
        }
    }
    open_one(attr, pid, cpu).map_err(explain)
}

fn open_one(attr: &Attr, pid: i32, cpu: i32) -> io::Result<Option<OwnedFd>> {
    // SAFETY: perf_event_open with a valid attribute block.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const Attr,
            pid,
            cpu,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    } as i32;
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ESRCH) => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: a descriptor the kernel just returned.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// The sampling attributes with `extra` flags.
fn attributes(freq_hz: u64, stack_bytes: u32, extra: u64) -> Attr {
    Attr {
        kind: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<Attr>() as u32,
        config: TASK_CLOCK,
        sample_period_or_freq: freq_hz,
        sample_type: sample::IP
            | sample::TID
            | sample::TIME
            | sample::PERIOD
            | sample::REGS_USER
            | sample::STACK_USER,
        flags: extra
            | bit::INHERIT
            | bit::EXCLUDE_KERNEL
            | bit::EXCLUDE_HV
            | bit::MMAP
            | bit::MMAP2
            | bit::COMM
            | bit::TASK
            | bit::FREQ
            | bit::SAMPLE_ID_ALL
            | bit::USE_CLOCKID,
        sample_regs_user: REGS_MASK,
        sample_stack_user: stack_bytes,
        clockid: libc::CLOCK_MONOTONIC,
        ..Attr::default()
    }
}

/// An error of `perf_event_open` with what to do about it.
fn explain(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into());
            io::Error::new(
                e.kind(),
                format!(
                    "the kernel refuses sampling events ({e}); kernel.perf_event_paranoid is \
                     {paranoid}: set it to 2 or lower (`sysctl kernel.perf_event_paranoid=2`) \
                     or run with CAP_PERFMON"
                ),
            )
        }
        Some(libc::ENOSYS) | Some(libc::ENOENT) => io::Error::new(
            e.kind(),
            format!("this kernel has no perf events ({e}): kernel sampling is unavailable"),
        ),
        _ => e,
    }
}

/// One mapped ring buffer.
pub struct Ring {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
    data: *const u8,
    data_size: u64,
    /// A record that wrapped around the end, reassembled.
    scratch: Vec<u8>,
}

// SAFETY: the mapping is owned by this value and only read through `&mut`.
unsafe impl Send for Ring {}

const HEAD: usize = 1024;
const TAIL: usize = 1032;

impl Ring {
    /// Maps the event's ring with `pages` data pages, fewer when the
    /// locked-memory allowance (`perf_event_mlock_kb` per CPU, then
    /// `RLIMIT_MEMLOCK`) is spent.
    fn map(fd: OwnedFd, pages: usize) -> io::Result<Ring> {
        let mut pages = pages.next_power_of_two();
        loop {
            match Ring::map_pages(&fd, pages) {
                Ok((base, len, data, data_size)) => {
                    return Ok(Ring {
                        fd,
                        base,
                        len,
                        data,
                        data_size,
                        scratch: Vec::new(),
                    })
                }
                Err(e) if e.raw_os_error() == Some(libc::EPERM) && pages > 8 => pages /= 4,
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "cannot map a sampling ring ({e}): the locked-memory allowance for \
                             perf events is spent; raise `ulimit -l` or \
                             kernel.perf_event_mlock_kb"
                        ),
                    ))
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn map_pages(fd: &OwnedFd, pages: usize) -> io::Result<(*mut u8, usize, *const u8, u64)> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = page * (1 + pages);
        // SAFETY: mapping the event's ring as the perf ABI describes.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = base as *mut u8;
        // SAFETY: the data area follows the first page.
        Ok((base, len, unsafe { base.add(page) }, (page * pages) as u64))
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: `offset` is one of the metadata page's 8-aligned fields.
        unsafe { &*(self.base.add(offset) as *const AtomicU64) }
    }

    /// Calls `f` with every complete record (header included) and frees
    /// the space. Returns how many records there were.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let head = self.word(HEAD).load(Ordering::Acquire);
        let mut tail = self.word(TAIL).load(Ordering::Relaxed);
        let mut records = 0;
        while head.wrapping_sub(tail) >= 8 {
            let at = (tail % self.data_size) as usize;
            let mut header = [0u8; 8];
            self.copy_out(at, &mut header);
            let size = u16::from_ne_bytes([header[6], header[7]]) as u64;
            if size < 8 || head.wrapping_sub(tail) < size {
                break;
            }
            let end = at + size as usize;
            if end <= self.data_size as usize {
                // SAFETY: the record lies inside the data area.
                f(unsafe { std::slice::from_raw_parts(self.data.add(at), size as usize) });
            } else {
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.resize(size as usize, 0);
                self.copy_out(at, &mut scratch);
                f(&scratch);
                self.scratch = scratch;
            }
            tail += size;
            records += 1;
        }
        fence(Ordering::Release);
        self.word(TAIL).store(tail, Ordering::Release);
        records
    }

    /// Copies `out.len()` bytes from data offset `at`, wrapping.
    fn copy_out(&self, at: usize, out: &mut [u8]) {
        let size = self.data_size as usize;
        for (i, b) in out.iter_mut().enumerate() {
            // SAFETY: the index is reduced modulo the data area's size.
            *b = unsafe { *self.data.add((at + i) % size) };
        }
    }

    /// The event's descriptor (to poll).
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping this value owns.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}
