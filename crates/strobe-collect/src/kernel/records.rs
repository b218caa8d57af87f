//! The records of a kernel sampling ring, as [`super::perf::Events`]
//! configures them (`sample_type` IP | TID | TIME | PERIOD | REGS_USER |
//! STACK_USER, `sample_id_all` with TID | TIME): task-clock samples,
//! context-switch samples (period 1) and switch records.
//!
//! Owns decoding a record's bytes. Never trusts a length: a record that
//! does not hold what its header claims decodes to `None`.

/// A decoded record.
#[derive(Debug)]
pub enum Record<'a> {
    /// A sample of a thread's CPU time.
    Sample(KernelSample<'a>),
    /// A sample taken as a thread left its CPU (where it was).
    SwitchSample(KernelSample<'a>),
    /// A thread left its CPU (`out`; `preempted` when it could have gone
    /// on running) or came back to one.
    Switch {
        tid: i32,
        time_ns: u64,
        out: bool,
        preempted: bool,
    },
    /// A file mapped into a process (executable mappings matter).
    Mmap {
        pid: i32,
        start: u64,
        len: u64,
        offset: u64,
        executable: bool,
        path: &'a str,
    },
    /// The kernel dropped `lost` records (the ring was full).
    Lost { lost: u64 },
    /// A task started (a fork or a thread) or ended; a process when
    /// `pid == tid`.
    Task { pid: i32, tid: i32, exit: bool },
    /// A process's command name changed (`exec`, `prctl`).
    Comm { pid: i32, exec: bool },
}

/// One sample: where the thread was and a copy of the top of its stack.
#[derive(Debug, Clone, Copy)]
pub struct KernelSample<'a> {
    pub pid: i32,
    pub tid: i32,
    pub time_ns: u64,
    /// The task-clock time (ns) this sample stands for.
    pub period: u64,
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// The user stack from `sp` up (may be empty).
    pub stack: &'a [u8],
}

const RECORD_MMAP: u32 = 1;
const RECORD_LOST: u32 = 2;
const RECORD_COMM: u32 = 3;
const RECORD_EXIT: u32 = 4;
const RECORD_FORK: u32 = 7;
const RECORD_SAMPLE: u32 = 9;
const RECORD_MMAP2: u32 = 10;
const RECORD_SWITCH: u32 = 14;
/// `misc` bits of a SWITCH record: the task left its CPU; it was preempted.
const MISC_SWITCH_OUT: u16 = 1 << 13;
const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;
/// `misc` bit of a COMM record: the name changed because of `exec`.
const MISC_COMM_EXEC: u16 = 1 << 13;
/// `PROT_EXEC` in an MMAP2 record.
const PROT_EXEC: u32 = 4;

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn u32(&mut self) -> Option<u32> {
        let v = u32::from_ne_bytes(self.bytes.get(self.at..self.at + 4)?.try_into().ok()?);
        self.at += 4;
        Some(v)
    }
    fn u64(&mut self) -> Option<u64> {
        let v = u64::from_ne_bytes(self.bytes.get(self.at..self.at + 8)?.try_into().ok()?);
        self.at += 8;
        Some(v)
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let v = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(v)
    }
    /// A NUL-terminated string padded to 8 bytes.
    fn string(&mut self) -> Option<&'a str> {
        let rest = self.bytes.get(self.at..)?;
        let len = rest.iter().position(|&b| b == 0)?;
        let text = std::str::from_utf8(&rest[..len]).ok()?;
        self.at += (len + 1).next_multiple_of(8);
        Some(text)
    }
}

/// A kernel record's time: a sample's TIME field, or the `sample_id`
/// trailer's (every other record carries one, `sample_id_all`).
pub fn time_of(record: &[u8]) -> u64 {
    let word = |at: usize| {
        record
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_ne_bytes)
    };
    let kind = record
        .get(..4)
        .map_or(0, |b| u32::from_ne_bytes(b.try_into().unwrap_or_default()));
    if kind == RECORD_SAMPLE {
        word(24)
    } else {
        word(record.len().saturating_sub(8))
    }
}

/// Decodes one record (header included).
pub fn decode(bytes: &[u8]) -> Option<Record<'_>> {
    let mut r = Reader { bytes, at: 0 };
    let kind = r.u32()?;
    let misc = u16::from_ne_bytes(bytes.get(4..6)?.try_into().ok()?);
    r.at = 8;
    match kind {
        RECORD_SAMPLE => {
            let ip = r.u64()?;
            let (pid, tid) = (r.u32()? as i32, r.u32()? as i32);
            let time_ns = r.u64()?;
            let period = r.u64()?;
            let abi = r.u64()?;
            let (mut bp, mut sp, mut regs_ip) = (0, 0, ip);
            if abi != 0 {
                bp = r.u64()?;
                sp = r.u64()?;
                regs_ip = r.u64()?;
            }
            let size = r.u64()? as usize;
            let mut stack: &[u8] = &[];
            if size > 0 {
                let data = r.take(size)?;
                let dyn_size = r.u64()? as usize;
                stack = &data[..dyn_size.min(size)];
            }
            let sample = KernelSample {
                pid,
                tid,
                time_ns,
                period,
                ip: regs_ip,
                sp,
                bp,
                stack,
            };
            Some(if period == super::perf::SWITCH_PERIOD {
                Record::SwitchSample(sample)
            } else {
                Record::Sample(sample)
            })
        }
        RECORD_MMAP2 => {
            let pid = r.u32()? as i32;
            let _tid = r.u32()?;
            let (start, len, offset) = (r.u64()?, r.u64()?, r.u64()?);
            let _dev = r.u64()?;
            let _ino = r.u64()?;
            let _generation = r.u64()?;
            let prot = r.u32()?;
            let _flags = r.u32()?;
            let path = r.string()?;
            Some(Record::Mmap {
                pid,
                start,
                len,
                offset,
                executable: prot & PROT_EXEC != 0,
                path,
            })
        }
        RECORD_MMAP => {
            let pid = r.u32()? as i32;
            let _tid = r.u32()?;
            let (start, len, offset) = (r.u64()?, r.u64()?, r.u64()?);
            let path = r.string()?;
            Some(Record::Mmap {
                pid,
                start,
                len,
                offset,
                // MMAP (not MMAP2) records are for executable mappings.
                executable: true,
                path,
            })
        }
        RECORD_LOST => {
            let _id = r.u64()?;
            Some(Record::Lost { lost: r.u64()? })
        }
        RECORD_FORK | RECORD_EXIT => {
            let pid = r.u32()? as i32;
            let _ppid = r.u32()?;
            let tid = r.u32()? as i32;
            Some(Record::Task {
                pid,
                tid,
                exit: kind == RECORD_EXIT,
            })
        }
        RECORD_SWITCH => {
            // Only the `sample_id` trailer: pid, tid, time.
            let _pid = r.u32()?;
            let tid = r.u32()? as i32;
            Some(Record::Switch {
                tid,
                time_ns: r.u64()?,
                out: misc & MISC_SWITCH_OUT != 0,
                preempted: misc & MISC_SWITCH_OUT_PREEMPT != 0,
            })
        }
        RECORD_COMM => Some(Record::Comm {
            pid: r.u32()? as i32,
            exec: misc & MISC_COMM_EXEC != 0,
        }),
        _ => None,
    }
}
