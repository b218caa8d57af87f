//! Unwinding the interrupted thread's stack from a signal's `ucontext`.
//!
//! Runs inside the signal handler: no allocation, no locks, no formatting.
//! Stack reads are bounded to the sampled thread's stack range, so a
//! corrupt frame ends the walk instead of faulting.

use crate::snapshot::{with_snapshot, NativeCache};
use framehop::x86_64::UnwindRegsX86_64;
use framehop::Unwinder;

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
        let mut frames = snapshot.unwinder.iter_frames(
            regs.ip,
            UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
            cache,
            &mut read_stack,
        );
        let mut depth = 0;
        loop {
            if depth == out.len() {
                return Unwound {
                    depth,
                    complete: matches!(frames.next(), Ok(None)),
                };
            }
            match frames.next() {
                Ok(Some(frame)) => {
                    out[depth] = frame.address();
                    depth += 1;
                }
                Ok(None) => {
                    return Unwound {
                        depth,
                        complete: true,
                    }
                }
                Err(_) => {
                    return Unwound {
                        depth,
                        complete: false,
                    }
                }
            }
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
