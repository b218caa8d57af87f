//! Per-thread totals of an inherited process target, from the kernel's
//! `PERF_RECORD_READ` records written as each thread exits.
//!
//! Owns the ring those records land in and their decoding. `perf-event2`
//! cannot do this part: its `Sampler` maps the counter's own ring, and the
//! kernel refuses `mmap` on an inherited per-task event (`EINVAL`: "all
//! children writing to the same rb"). So a disabled `dummy` software event
//! on the same task (not inherited) is opened and mapped here with
//! `libc::mmap`, and every counter's output is redirected to it with the
//! `PERF_EVENT_IOC_SET_OUTPUT` ioctl; the counters carry `inherit_stat`,
//! which makes the kernel write one `PERF_RECORD_READ` (pid, tid, the
//! group's values with their ids) per counter into that ring when an
//! inherited copy exits. Each record holds the leader and the members
//! still attached when it is written, so the records of one thread are
//! merged by event id. (Linux 6.15–6.18 before the fix "perf/core: Fix
//! missing read event generation on task exit" writes none: then no
//! thread appears.)
//!
//! Never blocks and never writes to the ring but its tail pointer. The
//! ring holds about a thousand exits of a small group: callers that run
//! many short threads drain it periodically
//! ([`super::Counters::collect_thread_exits`]); records that did not fit
//! are counted as lost.

use super::Reading;
use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{fence, Ordering};

/// `PERF_EVENT_IOC_SET_OUTPUT` (`_IO('$', 5)`).
const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
const RECORD_LOST: u32 = 2;
const RECORD_READ: u32 = 8;
/// Data pages of the ring (a power of two): 256 KiB, within the default
/// `perf_event_mlock_kb` of 516.
const DATA_PAGES: usize = 64;

/// One exited thread's values, by spec index.
pub(crate) struct ThreadExit {
    pub pid: i32,
    pub tid: i32,
    pub values: Vec<Option<Reading>>,
}

pub(crate) struct ThreadExits {
    dummy: perf_event::Counter,
    map: *mut u8,
    map_len: usize,
    data_offset: usize,
    data_size: usize,
    /// Event id → spec index.
    ids: Vec<(u64, usize)>,
    specs: usize,
    pub exits: Vec<ThreadExit>,
    index: HashMap<(i32, i32), usize>,
    pub lost: u64,
    record: Vec<u8>,
}

// SAFETY: the mapping is owned by this value alone (no other pointer to
// it escapes), and the kernel side is safe to use from any thread.
unsafe impl Send for ThreadExits {}

impl ThreadExits {
    /// Opens the dummy event on `pid`, maps its ring and redirects every
    /// counter in `fds` to it. `ids` maps each counter's id to its spec.
    pub(crate) fn new(
        pid: libc::pid_t,
        fds: &[&perf_event::Counter],
        ids: Vec<(u64, usize)>,
        specs: usize,
    ) -> io::Result<ThreadExits> {
        let dummy = perf_event::Builder::new(perf_event::events::Software::DUMMY)
            .observe_pid(pid)
            .any_cpu()
            .enabled(false)
            .build()?;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let map_len = page * (1 + DATA_PAGES);
        // SAFETY: mapping a perf event fd as the kernel documents: 1 + 2^n
        // pages, shared, read-write so we can advance data_tail.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                dummy.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut me = ThreadExits {
            dummy,
            map: map.cast(),
            map_len,
            data_offset: page,
            data_size: page * DATA_PAGES,
            ids,
            specs,
            exits: Vec::new(),
            index: HashMap::new(),
            lost: 0,
            record: Vec::with_capacity(256),
        };
        // SAFETY: the first page is the perf_event_mmap_page; data_offset
        // (byte 1040) and data_size (1048) are u64 fields the kernel set
        // before mmap returned (zero on kernels older than 4.1).
        let (off, size) = unsafe {
            (
                std::ptr::read_volatile(me.map.add(1040).cast::<u64>()),
                std::ptr::read_volatile(me.map.add(1048).cast::<u64>()),
            )
        };
        if off != 0 && size != 0 {
            me.data_offset = off as usize;
            me.data_size = size as usize;
        }
        for c in fds {
            // SAFETY: both descriptors are open perf events; the ioctl takes
            // the output event's fd as its argument.
            let rc = unsafe { libc::ioctl(c.as_raw_fd(), IOC_SET_OUTPUT, me.dummy.as_raw_fd()) };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(me)
    }

    fn head(&self) -> u64 {
        // SAFETY: data_head is the u64 at byte 1024 of the control page,
        // written by the kernel; read volatile, then fence so the data
        // reads below see what the kernel wrote before it.
        let h = unsafe { std::ptr::read_volatile(self.map.add(1024).cast::<u64>()) };
        fence(Ordering::Acquire);
        h
    }

    fn tail(&self) -> u64 {
        // SAFETY: data_tail is the u64 at byte 1032 of the control page;
        // only we write it.
        unsafe { std::ptr::read_volatile(self.map.add(1032).cast::<u64>()) }
    }

    fn set_tail(&mut self, t: u64) {
        fence(Ordering::Release);
        // SAFETY: as in `tail`; the fence orders our reads of the data
        // before the kernel may overwrite it.
        unsafe { std::ptr::write_volatile(self.map.add(1032).cast::<u64>(), t) }
    }

    /// Copies `len` bytes at ring position `pos` into `self.record`.
    fn copy_out(&mut self, pos: u64, len: usize) {
        self.record.clear();
        let size = self.data_size;
        let start = (pos % size as u64) as usize;
        let first = len.min(size - start);
        // SAFETY: both slices lie within the mapped data area
        // [data_offset, data_offset + data_size).
        unsafe {
            let base = self.map.add(self.data_offset);
            self.record
                .extend_from_slice(std::slice::from_raw_parts(base.add(start), first));
            self.record
                .extend_from_slice(std::slice::from_raw_parts(base, len - first));
        }
    }

    /// Decodes every record written since the last drain.
    pub(crate) fn drain(&mut self) {
        let head = self.head();
        let mut tail = self.tail();
        while tail + 8 <= head {
            self.copy_out(tail, 8);
            let kind = u32::from_ne_bytes(self.record[0..4].try_into().unwrap_or_default());
            let size =
                u16::from_ne_bytes(self.record[6..8].try_into().unwrap_or_default()) as usize;
            if size < 8 || tail + size as u64 > head {
                break;
            }
            self.copy_out(tail, size);
            match kind {
                RECORD_READ => self.read_record(),
                RECORD_LOST if size >= 24 => {
                    self.lost +=
                        u64::from_ne_bytes(self.record[16..24].try_into().unwrap_or_default());
                }
                _ => {}
            }
            tail += size as u64;
        }
        self.set_tail(tail);
    }

    /// `{ header; u32 pid, tid; u64 nr, time_enabled, time_running;
    /// { u64 value, id } values[nr] }`.
    fn read_record(&mut self) {
        let r = &self.record;
        let word = |at: usize| -> Option<u64> {
            r.get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_ne_bytes)
        };
        let (Some(ids), Some(nr), Some(en), Some(run)) = (word(8), word(16), word(24), word(32))
        else {
            return;
        };
        let pid = (ids & 0xffff_ffff) as u32 as i32;
        let tid = (ids >> 32) as u32 as i32;
        let pid_tid = if cfg!(target_endian = "little") {
            (pid, tid)
        } else {
            (tid, pid)
        };
        let row = match self.index.get(&pid_tid) {
            Some(&i) => i,
            None => {
                self.exits.push(ThreadExit {
                    pid: pid_tid.0,
                    tid: pid_tid.1,
                    values: vec![None; self.specs],
                });
                self.index.insert(pid_tid, self.exits.len() - 1);
                self.exits.len() - 1
            }
        };
        for k in 0..nr as usize {
            let (Some(value), Some(id)) = (word(40 + 16 * k), word(48 + 16 * k)) else {
                break;
            };
            if let Some(&(_, spec)) = self.ids.iter().find(|(i, _)| *i == id) {
                self.exits[row].values[spec] = Some(Reading {
                    raw: value,
                    enabled_ns: en,
                    running_ns: run,
                });
            }
        }
    }
}

impl Drop for ThreadExits {
    fn drop(&mut self) {
        // SAFETY: `map` is the mapping made in `new`, `map_len` long, and
        // is unmapped once.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}
