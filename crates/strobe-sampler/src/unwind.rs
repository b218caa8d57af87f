//! Unwinding the interrupted thread's stack from a signal's `ucontext`.
//!
//! Runs inside the signal handler: no allocation, no locks, no formatting.
//! Stack reads are bounded to the sampled thread's stack range, so a
//! corrupt frame ends the walk instead of faulting.
//!
//! Besides framehop's unwinding of modules (and frame pointers
//! elsewhere), it steps over CPython's perf trampolines (Python ≥ 3.12
//! with `PYTHONPERFSUPPORT`): copies of a four-instruction function in
//! anonymous memory, without frame pointer or unwind information, that
//! `strobe sample` asks the interpreter to put under every Python frame.
//! They are recognized by their code bytes, read with
//! `process_vm_readv` (a bad address is an error, never a fault), and
//! remembered in a small table so that a trampoline costs one system
//! call per distinct return address.

use crate::snapshot::{with_snapshot, NativeCache, Snapshot};
use framehop::x86_64::UnwindRegsX86_64;
use framehop::{FrameAddress, Unwinder};
use std::sync::atomic::{AtomicU64, Ordering};

/// The readable range of a thread's stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StackBounds {
    /// Lowest readable address.
    pub lo: u64,
    /// One past the highest readable address.
    pub hi: u64,
}

/// The registers unwinding starts from.
#[derive(Debug, Clone, Copy)]
pub struct StartRegs {
    /// Instruction pointer.
    pub ip: u64,
    /// Stack pointer.
    pub sp: u64,
    /// Frame pointer.
    pub bp: u64,
}

impl StartRegs {
    /// Reads the registers saved in a signal's context.
    ///
    /// # Safety
    /// `ctx` must be the third argument of an `SA_SIGINFO` handler.
    #[inline]
    pub unsafe fn from_ucontext(ctx: *const libc::c_void) -> StartRegs {
        // SAFETY: the kernel passes a valid ucontext_t to SA_SIGINFO handlers.
        let gregs = unsafe { &(*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs };
        StartRegs {
            ip: gregs[libc::REG_RIP as usize] as u64,
            sp: gregs[libc::REG_RSP as usize] as u64,
            bp: gregs[libc::REG_RBP as usize] as u64,
        }
    }
}

/// What an unwind produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unwound {
    /// Frames written (the first is the instruction pointer, the others
    /// return addresses).
    pub depth: usize,
    /// The walk reached the outermost frame (it was not cut short by the
    /// depth limit or an unreadable frame).
    pub complete: bool,
}

/// Unwinds from `regs` into `out`. Async-signal-safe.
pub fn unwind(
    regs: StartRegs,
    stack: StackBounds,
    cache: &mut NativeCache,
    out: &mut [u64],
) -> Unwound {
    if out.is_empty() {
        return Unwound {
            depth: 0,
            complete: false,
        };
    }
    let mut read_stack = |addr: u64| -> Result<u64, ()> {
        if !addr.is_multiple_of(8) || addr < stack.lo || addr.saturating_add(8) > stack.hi {
            return Err(());
        }
        // SAFETY: `addr` is aligned and inside the thread's mapped stack.
        Ok(unsafe { std::ptr::read_volatile(addr as *const u64) })
    };
    let walked = with_snapshot(|snapshot| {
        let mut regs = UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp);
        let mut address = FrameAddress::from_instruction_pointer(regs.ip());
        out[0] = regs.ip();
        let mut depth = 1;
        loop {
            let next = match address {
                FrameAddress::ReturnAddress(ra) if python_trampoline(snapshot, ra.get()) => {
                    // `sub $8,%rsp; call *%rcx`: the caller's return
                    // address lies 8 bytes above, its stack 16 bytes.
                    let sp = regs.sp();
                    read_stack(sp.wrapping_add(8)).map(|ra| {
                        regs.set_sp(sp.wrapping_add(16));
                        Some(ra)
                    })
                }
                _ => snapshot
                    .unwinder
                    .unwind_frame(address, &mut regs, cache, &mut read_stack)
                    .map_err(|_| ()),
            };
            let ra = match next {
                Ok(Some(ra)) => ra,
                Ok(None) => {
                    return Unwound {
                        depth,
                        complete: true,
                    }
                }
                Err(()) => {
                    return Unwound {
                        depth,
                        complete: false,
                    }
                }
            };
            let Some(next_address) = FrameAddress::from_return_address(ra) else {
                return Unwound {
                    depth,
                    complete: false,
                };
            };
            if depth == out.len() {
                return Unwound {
                    depth,
                    complete: false,
                };
            }
            out[depth] = ra;
            depth += 1;
            address = next_address;
        }
    });
    walked.unwrap_or_else(|| {
        out[0] = regs.ip;
        Unwound {
            depth: 1,
            complete: false,
        }
    })
}

/// CPython's x86-64 perf trampoline around a return address: `sub
/// $8,%rsp; call *%rcx` before it, `add $8,%rsp; ret` at it
/// (Python/asm_trampoline.S; an `endbr64` may precede).
const TRAMPOLINE: [u8; 11] = [
    0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3,
];
/// Where the return address lies in [`TRAMPOLINE`].
const TRAMPOLINE_RA: u64 = 6;

/// Return addresses in no module found to be inside a trampoline, and
/// found not to be (a JIT's code), direct-mapped: each costs its system
/// call once.
static TRAMPOLINES: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];
static NOT_TRAMPOLINES: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];

/// Whether `ra` returns into a CPython perf trampoline. Only addresses in
/// no module are looked at. **Signal handler**: no allocation, no lock.
fn python_trampoline(snapshot: &Snapshot, ra: u64) -> bool {
    let index = ((ra >> 4) as usize) % TRAMPOLINES.len();
    if TRAMPOLINES[index].load(Ordering::Relaxed) == ra {
        return true;
    }
    if NOT_TRAMPOLINES[index].load(Ordering::Relaxed) == ra || snapshot.in_module_text(ra) {
        return false;
    }
    let mut code = [0u8; TRAMPOLINE.len()];
    let found = read_own_memory(ra.wrapping_sub(TRAMPOLINE_RA), &mut code) && code == TRAMPOLINE;
    let table = if found {
        &TRAMPOLINES
    } else {
        &NOT_TRAMPOLINES
    };
    table[index].store(ra, Ordering::Relaxed);
    found
}

/// Reads `out.len()` bytes at `addr` of this process without faulting.
/// Async-signal-safe (one system call; the handler keeps `errno`).
fn read_own_memory(addr: u64, out: &mut [u8]) -> bool {
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: out.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: out.len(),
    };
    // SAFETY: `local` describes `out`, writable for its length; the kernel
    // checks `remote` and fails with EFAULT where it is not mapped.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    n == out.len() as isize
}
