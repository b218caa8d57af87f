//! Unwinding kernel samples in the collector: framehop over the modules of
//! one process, read from their files, walking the copy of the user stack
//! that came with each sample.
//!
//! Owns the process's module list (from `/proc/PID/maps` when sampling
//! starts and from the ring's mapping records afterwards), reading each
//! module's unwind tables from its ELF file, and the walk itself, through
//! signal frames and CPython's perf trampolines too (known from the
//! process's perf map, `/tmp/perf-PID.map`, whose `py::` entries are
//! trampolines). Never reads the process's memory: only the copied stack
//! and files.

use crate::profile::Module;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Unwinder};
use std::ops::Range;

/// The sections of an ELF file framehop needs, by virtual address.
struct Sections {
    text: Option<(Range<u64>, Vec<u8>)>,
    eh_frame: Option<(Range<u64>, Vec<u8>)>,
    eh_frame_hdr: Option<(Range<u64>, Vec<u8>)>,
}

/// Reads `.text`, `.eh_frame` and `.eh_frame_hdr` of the ELF file at
/// `path`.
fn read_sections(path: &str) -> Option<Sections> {
    let elf = strobe_symbols::ElfFile::open_native(path)?;
    let section = |name: &str| {
        let s = elf.section(name)?;
        let data = elf.data(&s)?;
        Some((s.addr..s.addr + data.len() as u64, data.to_vec()))
    };
    Some(Sections {
        text: section(".text"),
        eh_frame: section(".eh_frame"),
        eh_frame_hdr: section(".eh_frame_hdr"),
    })
}

/// The two encodings of `mov $15 (rt_sigreturn), %rax|%eax` that, followed
/// by `syscall`, are the whole body of a signal restorer (glibc's and
/// musl's `__restore_rt`, Go's `runtime.sigreturn`).
const LOAD_RT_SIGRETURN: [&[u8]; 2] = [&[0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0], &[0xb8, 0x0f, 0, 0, 0]];
const SYSCALL: [u8; 2] = [0x0f, 0x05];

/// Where signal restorers lie in `text` (loaded at `avma`): for each, the
/// address of its first instruction (where a signal handler returns to)
/// and the address after its `syscall` (where a thread in `rt_sigreturn`
/// is sampled).
fn find_restorers(text: &[u8], avma: u64) -> Vec<(u64, u64)> {
    let mut found = Vec::new();
    for at in 0..text.len().saturating_sub(1) {
        if text[at..at + 2] != SYSCALL {
            continue;
        }
        for load in LOAD_RT_SIGRETURN {
            if text[..at].ends_with(load) {
                let start = (at - load.len()) as u64;
                found.push((avma + start, avma + at as u64 + 2));
            }
        }
    }
    found
}

/// Offsets in the `ucontext_t` a signal restorer finds at its stack
/// pointer (x86-64): `uc_mcontext` follows `uc_flags`, `uc_link` and
/// `uc_stack` (40 bytes), its general registers in the kernel's order
/// r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip.
const UC_RBP: u64 = 40 + 10 * 8;
const UC_RSP: u64 = 40 + 15 * 8;
const UC_RIP: u64 = 40 + 16 * 8;

/// The modules of one process and an unwinder over them.
pub struct ProcessUnwinder {
    unwinder: UnwinderX86_64<Vec<u8>>,
    cache: CacheX86_64,
    /// Signal restorers: (first instruction, after the syscall).
    restorers: Vec<(u64, u64)>,
    /// CPython's perf trampolines of the process.
    trampolines: Trampolines,
    /// Modules known, for the database.
    pub modules: Vec<Module>,
}

impl ProcessUnwinder {
    /// No module yet (a new image of `pid`: its mappings follow as
    /// records; `pid` ≤ 0: unknown).
    pub fn empty(pid: i32) -> ProcessUnwinder {
        ProcessUnwinder {
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            restorers: Vec::new(),
            trampolines: Trampolines {
                pid,
                ..Trampolines::default()
            },
            modules: Vec::new(),
        }
    }

    /// The modules mapped into `pid` now.
    pub fn for_process(pid: i32) -> ProcessUnwinder {
        let mut u = ProcessUnwinder::empty(pid);
        for m in strobe_symbols::proc_maps::executable_modules(pid) {
            u.add(m);
        }
        u
    }

    /// Adds a module (once).
    pub fn add(&mut self, m: Module) {
        if self.modules.iter().any(|k| k.text == m.text) {
            return;
        }
        if let Some(s) = read_sections(&m.path) {
            if let Some((svma, code)) = &s.text {
                let avma = svma.start.wrapping_add(m.bias);
                self.restorers.extend(find_restorers(code, avma));
            }
            let (text_svma, text) = s.text.map_or((None, None), |(r, d)| (Some(r), Some(d)));
            let (eh_svma, eh) = s.eh_frame.map_or((None, None), |(r, d)| (Some(r), Some(d)));
            let (hdr_svma, hdr) = s
                .eh_frame_hdr
                .map_or((None, None), |(r, d)| (Some(r), Some(d)));
            let info = ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma,
                text,
                eh_frame_svma: eh_svma,
                eh_frame: eh,
                eh_frame_hdr_svma: hdr_svma,
                eh_frame_hdr: hdr,
                ..Default::default()
            };
            self.unwinder.add_module(framehop::Module::new(
                m.path.clone(),
                m.text.clone(),
                m.bias,
                info,
            ));
        }
        self.modules.push(m);
    }

    /// [`ProcessUnwinder::unwind`] for a sample's registers and stack copy.
    pub fn unwind_sample(
        &mut self,
        s: &super::records::KernelSample<'_>,
        max: usize,
    ) -> (Vec<u64>, bool) {
        self.unwind(s.ip, s.sp, s.bp, s.stack, max)
    }

    /// Walks from the sampled registers through `stack` (the copy of the
    /// memory from `sp` up); returns the instruction pointer then the
    /// return addresses, innermost first, and whether the walk reached the
    /// outermost frame. A frame in a
    /// signal restorer continues with the interrupted code, whose
    /// registers the kernel saved on the stack; where that code's own
    /// stack is not in the copy (a handler on an alternate signal stack,
    /// as Go's always are) the walk ends there, incomplete.
    pub fn unwind(
        &mut self,
        ip: u64,
        sp: u64,
        bp: u64,
        stack: &[u8],
        max: usize,
    ) -> (Vec<u64>, bool) {
        let read = |addr: u64| -> Result<u64, ()> {
            let at = addr.checked_sub(sp).ok_or(())? as usize;
            let bytes = stack.get(at..at + 8).ok_or(())?;
            Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| ())?))
        };
        let mut regs = UnwindRegsX86_64::new(ip, sp, bp);
        let mut address = FrameAddress::from_instruction_pointer(ip);
        let mut out = Vec::new();
        loop {
            if out.len() == max {
                return (out, false);
            }
            out.push(address.address());
            if let Some(interrupted) = self.signal_frame(address, &regs, &read) {
                // Frames after the first are looked up one byte before
                // their address (the call instruction); a handler returns
                // to the restorer's first byte and the interrupted code
                // stopped at its instruction, so both are stored one past.
                if let FrameAddress::ReturnAddress(_) = address {
                    *out.last_mut().unwrap() += 1;
                }
                if out.len() == max {
                    return (out, false);
                }
                regs = interrupted;
                address = FrameAddress::from_instruction_pointer(regs.ip());
                out.push(regs.ip() + 1);
            }
            let next = if self.in_trampoline(address) {
                // `sub $8,%rsp; call *%rcx`: the caller's return address
                // lies 8 bytes above, its stack 16 bytes.
                let sp = regs.sp();
                read(sp.wrapping_add(8)).map(|ra| {
                    regs.set_sp(sp.wrapping_add(16));
                    Some(ra)
                })
            } else {
                self.unwinder
                    .unwind_frame(address, &mut regs, &mut self.cache, &mut |a| read(a))
                    .map_err(|_| ())
            };
            match next {
                Ok(Some(ra)) => match FrameAddress::from_return_address(ra) {
                    Some(ra) => address = ra,
                    None => return (out, false),
                },
                Ok(None) => return (out, true),
                Err(_) => return (out, false),
            }
        }
    }

    /// Whether `address` returns into a CPython perf trampoline (an
    /// address in no module that the perf map names `py::…`).
    fn in_trampoline(&mut self, address: FrameAddress) -> bool {
        let FrameAddress::ReturnAddress(ra) = address else {
            return false;
        };
        let at = ra.get();
        if self.trampolines.find(at) {
            return true;
        }
        // Not one seen yet: read what the map gained (at most every
        // RELOAD_EVERY), unless a module covers the address.
        self.trampolines.reload_due()
            && !self.modules.iter().any(|m| m.text.contains(&at))
            && self.trampolines.reload()
            && self.trampolines.find(at)
    }

    /// The registers of the code a signal interrupted, when `address` is in
    /// a signal restorer: sampled inside its `rt_sigreturn`, or returned to
    /// by a handler; the restorer's stack pointer then points at the
    /// `ucontext_t` the kernel saved.
    fn signal_frame(
        &self,
        address: FrameAddress,
        regs: &UnwindRegsX86_64,
        read: &impl Fn(u64) -> Result<u64, ()>,
    ) -> Option<UnwindRegsX86_64> {
        let at = address.address();
        let restorer = match address {
            FrameAddress::InstructionPointer(_) => self.restorers.iter().any(|r| r.1 == at),
            FrameAddress::ReturnAddress(_) => self.restorers.iter().any(|r| r.0 == at),
        };
        if !restorer {
            return None;
        }
        let uc = regs.sp();
        let ip = read(uc + UC_RIP).ok()?;
        let sp = read(uc + UC_RSP).ok()?;
        let bp = read(uc + UC_RBP).ok()?;
        (ip != 0 && sp != 0).then(|| UnwindRegsX86_64::new(ip, sp, bp))
    }
}

/// How often, at most, the perf map is read again for an address no
/// module or known trampoline covers (a JIT's code would otherwise cost
/// a file open per frame).
const RELOAD_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// The address ranges of CPython's perf trampolines, read from the
/// process's perf map as it grows (the interpreter appends an entry per
/// code object it runs).
#[derive(Default)]
struct Trampolines {
    pid: i32,
    /// Sorted by start.
    ranges: Vec<Range<u64>>,
    /// Bytes of the map read so far (whole lines).
    read: u64,
    /// When the map was last read.
    last_reload: Option<std::time::Instant>,
}

impl Trampolines {
    /// Whether the map may be read again now (the pid is known and the
    /// last read is old enough).
    fn reload_due(&self) -> bool {
        self.pid > 0 && self.last_reload.is_none_or(|t| t.elapsed() >= RELOAD_EVERY)
    }

    fn find(&self, at: u64) -> bool {
        let i = self.ranges.partition_point(|r| r.start <= at);
        i > 0 && self.ranges[i - 1].contains(&at)
    }

    /// Reads what the map gained since the last read; whether it did.
    fn reload(&mut self) -> bool {
        use std::io::{Read, Seek};
        self.last_reload = Some(std::time::Instant::now());
        let path = strobe_symbols::perf_map::path(i64::from(self.pid));
        let Ok(mut f) = std::fs::File::open(&path) else {
            return false;
        };
        if f.metadata().map_or(true, |m| m.len() <= self.read)
            || f.seek(std::io::SeekFrom::Start(self.read)).is_err()
        {
            return false;
        }
        let mut text = String::new();
        if f.read_to_string(&mut text).is_err() {
            return false;
        }
        let whole = text.rfind('\n').map_or(0, |i| i + 1);
        let entries = text[..whole]
            .lines()
            .filter_map(strobe_symbols::perf_map::Entry::parse)
            .filter(|e| e.name.starts_with("py::"));
        self.ranges
            .extend(entries.map(|e| e.start..e.start.saturating_add(e.size)));
        self.read += whole as u64;
        self.ranges.sort_by_key(|r| r.start);
        whole > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restorers_are_found_in_both_encodings_and_nowhere_else() {
        let mut text = vec![0x90; 8];
        text.extend([0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05]);
        text.extend([0xb8, 0x0e, 0, 0, 0, 0x0f, 0x05]); // rt_sigprocmask
        text.extend([0xb8, 0x0f, 0, 0, 0, 0x0f, 0x05]);
        assert_eq!(
            find_restorers(&text, 0x1000),
            [(0x1008, 0x1011), (0x1018, 0x101f)]
        );
    }

    /// A stack copy starting at `sp` that holds, at `sp`, the `ucontext_t`
    /// of an interrupted `ip`, `sp` and `bp`.
    fn signal_stack(ip: u64, sp: u64, bp: u64) -> Vec<u8> {
        let mut stack = vec![0u8; 1024];
        for (at, v) in [(UC_RIP, ip), (UC_RSP, sp), (UC_RBP, bp)] {
            stack[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes());
        }
        stack
    }

    #[test]
    fn a_sample_in_rt_sigreturn_continues_with_the_interrupted_code() {
        let mut u = ProcessUnwinder::for_process(std::process::id() as i32);
        let &(_, after_syscall) = u.restorers.first().expect("libc's __restore_rt");
        let interrupted = u
            .modules
            .iter()
            .find(|m| m.path.contains("libc.so"))
            .map(|m| m.text.start + 0x100)
            .unwrap();
        // The interrupted code ran on another stack (not in the copy).
        let stack = signal_stack(interrupted, 0x7000_0000, 0x7000_0100);
        let (frames, complete) = u.unwind(after_syscall, 0x1000_0000, 0, &stack, 64);
        assert_eq!(frames, [after_syscall, interrupted + 1]);
        assert!(!complete);
        // Anywhere else the saved context is not looked for.
        let (frames, _) = u.unwind(after_syscall - 1, 0x1000_0000, 0, &stack, 64);
        assert_eq!(frames, [after_syscall - 1]);
    }
}
