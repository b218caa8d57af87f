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

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as the kernel writes it: header (type, misc, size), then
    /// `body` (native-endian words).
    fn record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut r = kind.to_ne_bytes().to_vec();
        r.extend_from_slice(&misc.to_ne_bytes());
        r.extend_from_slice(&((8 + body.len()) as u16).to_ne_bytes());
        r.extend_from_slice(body);
        r
    }

    fn words(parts: &[u64]) -> Vec<u8> {
        parts.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    /// pid and tid in one word, as the kernel packs them.
    fn pid_tid(pid: u32, tid: u32) -> u64 {
        u64::from(pid) | u64::from(tid) << 32
    }

    /// A sample's body: ip, pid/tid, time, period, user registers (abi,
    /// bp, sp, ip; abi 0: none), the stack copy and its dynamic size.
    fn sample(period: u64, regs: bool, stack: &[u8], dyn_size: u64) -> Vec<u8> {
        let mut b = words(&[0x4000, pid_tid(10, 11), 5_000, period]);
        if regs {
            b.extend(words(&[2, 0xb0, 0x5000, 0x4010]));
        } else {
            b.extend(words(&[0]));
        }
        b.extend(words(&[stack.len() as u64]));
        if !stack.is_empty() {
            b.extend_from_slice(stack);
            b.extend(words(&[dyn_size]));
        }
        b
    }

    #[test]
    fn a_sample_decodes_with_its_registers_and_the_used_part_of_its_stack() {
        let stack: Vec<u8> = (0..32).collect();
        let r = record(RECORD_SAMPLE, 0, &sample(1_000_000, true, &stack, 24));
        let Some(Record::Sample(s)) = decode(&r) else {
            panic!("{:?}", decode(&r));
        };
        assert_eq!(
            (s.pid, s.tid, s.time_ns, s.period),
            (10, 11, 5_000, 1_000_000)
        );
        assert_eq!(
            (s.ip, s.sp, s.bp),
            (0x4010, 0x5000, 0xb0),
            "the user registers' ip"
        );
        assert_eq!(s.stack, &stack[..24]);
        assert_eq!(time_of(&r), 5_000);
        // A dynamic size past the copy: the copy.
        let r = record(RECORD_SAMPLE, 0, &sample(2, true, &stack, 1 << 40));
        let Some(Record::Sample(s)) = decode(&r) else {
            panic!()
        };
        assert_eq!(s.stack.len(), 32);
    }

    #[test]
    fn a_sample_without_user_registers_or_stack_keeps_its_ip() {
        let r = record(RECORD_SAMPLE, 0, &sample(7, false, &[], 0));
        let Some(Record::Sample(s)) = decode(&r) else {
            panic!()
        };
        assert_eq!((s.ip, s.sp, s.bp, s.stack.len()), (0x4000, 0, 0, 0));
    }

    #[test]
    fn a_context_switch_sample_is_told_apart_by_its_period() {
        let r = record(
            RECORD_SAMPLE,
            0,
            &sample(crate::kernel::perf::SWITCH_PERIOD, true, &[], 0),
        );
        assert!(matches!(decode(&r), Some(Record::SwitchSample(_))));
    }

    #[test]
    fn a_record_shorter_than_its_contents_is_refused_wherever_it_is_cut() {
        let stack = [9u8; 16];
        let records = [
            record(RECORD_SAMPLE, 0, &sample(3, true, &stack, 16)),
            record(RECORD_SAMPLE, 0, &sample(3, false, &[], 0)),
            record(RECORD_LOST, 0, &words(&[1, 2])),
            record(RECORD_FORK, 0, &words(&[pid_tid(1, 2), pid_tid(3, 4)])),
            record(RECORD_SWITCH, MISC_SWITCH_OUT, &words(&[pid_tid(1, 2), 3])),
            record(RECORD_COMM, 0, &words(&[pid_tid(1, 1)])),
        ];
        // The bytes each decoding reads: all of them, but for the fields
        // after a fork's tid and a comm's pid, which are not read.
        let needed = |r: &Vec<u8>| match u32::from_ne_bytes(r[..4].try_into().unwrap()) {
            RECORD_FORK => 20,
            RECORD_COMM => 12,
            _ => r.len(),
        };
        for r in &records {
            for cut in 0..=r.len() {
                assert_eq!(
                    decode(&r[..cut]).is_some(),
                    cut >= needed(r),
                    "cut at {cut} of {r:?}"
                );
            }
        }
        assert!(decode(&[]).is_none());
        assert_eq!(time_of(&[1, 2]), 0);
    }

    #[test]
    fn a_stack_size_past_the_record_is_refused_without_overflow() {
        let mut b = words(&[0x4000, pid_tid(1, 1), 1, 1, 0, u64::MAX]);
        b.extend(words(&[0; 4]));
        assert!(decode(&record(RECORD_SAMPLE, 0, &b)).is_none());
        let mut b = words(&[0x4000, pid_tid(1, 1), 1, 1, 0, 1 << 20]);
        b.extend(words(&[0; 4]));
        assert!(decode(&record(RECORD_SAMPLE, 0, &b)).is_none());
    }

    /// The path of a mapping record: NUL-terminated, padded to 8 bytes.
    fn path(text: &str) -> Vec<u8> {
        let mut b = text.as_bytes().to_vec();
        b.push(0);
        b.resize(b.len().next_multiple_of(8), 0);
        b
    }

    #[test]
    fn mappings_decode_with_their_path_and_whether_they_hold_code() {
        let mut b = words(&[pid_tid(10, 10), 0x1000, 0x2000, 0x300, 8, 9, 10]);
        b.extend_from_slice(&PROT_EXEC.to_ne_bytes());
        b.extend_from_slice(&2u32.to_ne_bytes());
        b.extend(path("/lib/libc.so.6"));
        b.extend(words(&[pid_tid(10, 10), 77]));
        let r = record(RECORD_MMAP2, 0, &b);
        let Some(Record::Mmap {
            pid,
            start,
            len,
            offset,
            executable,
            path: p,
        }) = decode(&r)
        else {
            panic!("{:?}", decode(&r));
        };
        assert_eq!(
            (pid, start, len, offset, executable),
            (10, 0x1000, 0x2000, 0x300, true)
        );
        assert_eq!(p, "/lib/libc.so.6");
        assert_eq!(time_of(&r), 77, "from the sample_id trailer");
        // Data, not code.
        let mut data = b.clone();
        data[56..60].copy_from_slice(&1u32.to_ne_bytes());
        let Some(Record::Mmap { executable, .. }) = decode(&record(RECORD_MMAP2, 0, &data)) else {
            panic!()
        };
        assert!(!executable);
        // The old record: always code.
        let mut old = words(&[pid_tid(4, 4), 0x1000, 0x10, 0]);
        old.extend(path("/bin/x"));
        let old = record(RECORD_MMAP, 0, &old);
        let Some(Record::Mmap {
            pid,
            executable,
            path: p,
            ..
        }) = decode(&old)
        else {
            panic!()
        };
        assert_eq!((pid, executable, p), (4, true, "/bin/x"));
        // A path without its terminator, or not UTF-8: refused.
        let mut open = words(&[pid_tid(4, 4), 0x1000, 0x10, 0]);
        open.extend_from_slice(b"/bin/x");
        assert!(decode(&record(RECORD_MMAP, 0, &open)).is_none());
        let mut bad = words(&[pid_tid(4, 4), 0x1000, 0x10, 0]);
        bad.extend_from_slice(b"\xff\xfe\0\0\0\0\0\0");
        assert!(decode(&record(RECORD_MMAP, 0, &bad)).is_none());
    }

    #[test]
    fn task_switch_comm_and_lost_records_decode() {
        let fork = record(
            RECORD_FORK,
            0,
            &words(&[pid_tid(20, 10), pid_tid(21, 10), 3]),
        );
        assert!(matches!(
            decode(&fork),
            Some(Record::Task {
                pid: 20,
                tid: 21,
                exit: false
            })
        ));
        let exit = record(
            RECORD_EXIT,
            0,
            &words(&[pid_tid(20, 10), pid_tid(20, 10), 3]),
        );
        assert!(matches!(
            decode(&exit),
            Some(Record::Task {
                pid: 20,
                tid: 20,
                exit: true
            })
        ));
        let out = record(
            RECORD_SWITCH,
            MISC_SWITCH_OUT | MISC_SWITCH_OUT_PREEMPT,
            &words(&[pid_tid(5, 6), 900]),
        );
        assert!(matches!(
            decode(&out),
            Some(Record::Switch {
                tid: 6,
                time_ns: 900,
                out: true,
                preempted: true
            })
        ));
        assert_eq!(time_of(&out), 900);
        let back = record(RECORD_SWITCH, 0, &words(&[pid_tid(5, 6), 901]));
        assert!(matches!(
            decode(&back),
            Some(Record::Switch {
                out: false,
                preempted: false,
                ..
            })
        ));
        let comm = record(RECORD_COMM, MISC_COMM_EXEC, &words(&[pid_tid(8, 8)]));
        assert!(matches!(
            decode(&comm),
            Some(Record::Comm { pid: 8, exec: true })
        ));
        let lost = record(RECORD_LOST, 0, &words(&[1, 12]));
        assert!(matches!(decode(&lost), Some(Record::Lost { lost: 12 })));
        assert!(
            decode(&record(99, 0, &words(&[1, 2]))).is_none(),
            "unknown type"
        );
    }
}
