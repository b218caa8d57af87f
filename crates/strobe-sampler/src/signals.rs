//! The sampling signals belong to strobe; everything else about them
//! belongs to the program.
//!
//! strobe keeps its handler installed for its sampling signals for the
//! life of the process. What the program asks for those signals (through
//! the runtime's `sigaction`/`signal` wrappers, or inherited across `exec`)
//! is recorded here as the program's disposition: `sigaction` reports it
//! back, and every signal that is not from one of strobe's timers is
//! delivered as the program asked: to its handler with its mask and flags,
//! ignored, or with the default action (which for a real-time signal
//! terminates the process, exactly as without strobe).
//!
//! The program's handlers of every other signal run with the sampling
//! signals blocked ([`program_sigaction`]): a sample never interrupts one
//! of them, so strobe's handler never runs on the small alternate stack a
//! program's fault handler uses (its frame would overflow it, and a fault
//! there, with the program's own fault signal blocked, kills the
//! process). The program never sees that addition: `sigaction` reports
//! the mask it asked for.
//!
//! Owns the program's dispositions, the real `sigaction`, the sampling
//! signals added to the program's handlers, and the choice of free
//! real-time signals. [`deliver_to_program`] runs in a signal handler:
//! atomics and async-signal-safe system calls only.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

/// One recorded disposition (a seqlock guards the multi-word copy).
struct ProgramAction {
    seq: AtomicU64,
    handler: AtomicUsize,
    flags: AtomicI32,
    mask: [AtomicU64; 16],
}

static ACTIONS: [ProgramAction; 65] = [const {
    ProgramAction {
        seq: AtomicU64::new(0),
        handler: AtomicUsize::new(0),
        flags: AtomicI32::new(0),
        mask: [const { AtomicU64::new(0) }; 16],
    }
}; 65];
/// Signals strobe samples with.
static OURS: [AtomicBool; 65] = [const { AtomicBool::new(false) }; 65];
/// Per signal: the sampling signals strobe added to the mask of the
/// program's handler (bits of the first mask word), to be taken out of
/// what `sigaction` reports.
static ADDED_TO_MASK: [AtomicU64; 65] = [const { AtomicU64::new(0) }; 65];
/// Serializes writers of [`ACTIONS`].
static WRITING: AtomicBool = AtomicBool::new(false);
/// The next `sigaction` after this library (libc's).
static REAL_SIGACTION: AtomicUsize = AtomicUsize::new(0);

type SigactionFn =
    unsafe extern "C" fn(libc::c_int, *const libc::sigaction, *mut libc::sigaction) -> libc::c_int;

/// Calls libc's `sigaction`, bypassing any interposed one (the runtime's
/// wrapper lives in the same library as this code).
///
/// # Safety
/// Same contract as `sigaction`.
pub unsafe fn real_sigaction(
    signal: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> libc::c_int {
    let mut f = REAL_SIGACTION.load(Ordering::Acquire);
    if f == 0 {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"sigaction".as_ptr()) } as usize;
        if f == 0 {
            f = libc::sigaction as *const () as usize;
        }
        REAL_SIGACTION.store(f, Ordering::Release);
    }
    // SAFETY: `f` is libc's sigaction.
    let f: SigactionFn = unsafe { std::mem::transmute(f) };
    // SAFETY: forwarding the caller's arguments.
    unsafe { f(signal, act, old) }
}

/// Whether strobe samples with `signal`. Async-signal-safe.
pub fn is_sampling_signal(signal: i32) -> bool {
    OURS.get(signal as usize)
        .is_some_and(|o| o.load(Ordering::Acquire))
}

/// The sampling signals as bits of a mask's first word.
fn sampling_bits() -> u64 {
    (1..65usize)
        .filter(|&s| OURS[s].load(Ordering::Acquire))
        .fold(0, |bits, s| bits | 1u64 << (s - 1))
}

/// Whether `handler` is a function (not the default or ignoring).
fn is_handler(handler: libc::sighandler_t) -> bool {
    handler != libc::SIG_DFL && handler != libc::SIG_IGN
}

/// `sigaction` for a signal strobe does not sample with: installs what
/// the program asks, with the sampling signals added to a handler's mask,
/// and reports the previous action as the program installed it.
///
/// # Safety
/// Same contract as `sigaction`.
pub unsafe fn program_sigaction(
    signal: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> libc::c_int {
    let Some(added) = ADDED_TO_MASK.get(signal as usize).filter(|_| signal > 0) else {
        // SAFETY: forwarding the caller's arguments (libc reports EINVAL).
        return unsafe { real_sigaction(signal, act, old) };
    };
    let ours = sampling_bits();
    let added_before = added.load(Ordering::Acquire);
    // SAFETY: the caller's action, if any, is valid to read.
    let mut wanted = unsafe { act.as_ref() }.copied();
    let mut adding = 0;
    if let Some(action) = wanted.as_mut().filter(|a| is_handler(a.sa_sigaction)) {
        let words = mask_words_mut(&mut action.sa_mask);
        adding = ours & !words[0];
        words[0] |= adding;
    }
    let act = wanted
        .as_ref()
        .map_or(std::ptr::null(), |a| a as *const libc::sigaction);
    // SAFETY: `act` is null or our copy; `old` is the caller's.
    let rc = unsafe { real_sigaction(signal, act, old) };
    if rc != 0 {
        return rc;
    }
    // SAFETY: the caller's out-pointer, filled by libc.
    if let Some(old) = unsafe { old.as_mut() } {
        mask_words_mut(&mut old.sa_mask)[0] &= !added_before;
    }
    if wanted.is_some() {
        added.store(adding, Ordering::Release);
    }
    0
}

/// Adds the sampling signals to the mask of `signal`'s handler, if the
/// program has one installed (by a call strobe did not see: before the
/// samplers started, or through libc's `signal`).
pub fn mask_program_handler(signal: i32) {
    if !(1..65).contains(&signal) || is_sampling_signal(signal) {
        return;
    }
    // SAFETY: sigaction is plain old data.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: querying only.
    if unsafe { real_sigaction(signal, std::ptr::null(), &mut current) } != 0
        || !is_handler(current.sa_sigaction)
    {
        return;
    }
    let words = mask_words_mut(&mut current.sa_mask);
    let adding = sampling_bits() & !words[0];
    if adding == 0 {
        return;
    }
    words[0] |= adding;
    // SAFETY: re-installing the same handler with a larger mask.
    if unsafe { real_sigaction(signal, &current, std::ptr::null_mut()) } == 0 {
        ADDED_TO_MASK[signal as usize].fetch_or(adding, Ordering::AcqRel);
    }
}

/// The sampling signals [`mask_program_handlers`] last went through every
/// handler for. A forked child inherits the handlers as the parent left
/// them, and this with them.
static MASKED_FOR: AtomicU64 = AtomicU64::new(0);

/// [`mask_program_handler`] for every signal: once the sampling signals
/// are known. Done once per set of sampling signals in an address space:
/// a forked child sampling with its parent's signals finds every handler
/// masked already (and saves a system call per signal).
pub fn mask_program_handlers() {
    let bits = sampling_bits();
    if bits != 0 && MASKED_FOR.load(Ordering::Acquire) == bits {
        return;
    }
    for signal in 1..65 {
        if signal != libc::SIGKILL && signal != libc::SIGSTOP {
            mask_program_handler(signal);
        }
    }
    MASKED_FOR.store(bits, Ordering::Release);
}

fn mask_words_mut(set: &mut libc::sigset_t) -> &mut [u64; 16] {
    // SAFETY: glibc's sigset_t is 128 bytes (16 u64 words).
    unsafe { &mut *(set as *mut libc::sigset_t as *mut [u64; 16]) }
}

fn mask_words(set: &libc::sigset_t) -> &[u64; 16] {
    // SAFETY: glibc's sigset_t is 128 bytes (16 u64 words).
    unsafe { &*(set as *const libc::sigset_t as *const [u64; 16]) }
}

/// Records `action` as the program's disposition of `signal`.
pub fn set_program_action(signal: i32, action: &libc::sigaction) {
    let Some(slot) = ACTIONS.get(signal as usize) else {
        return;
    };
    // A handler on this thread reading the action (or resetting it) while
    // this write is half done would spin forever: no signal may interrupt
    // it here (glibc's internal signals 32 and 33 excepted).
    let mut all = [0u64; 16];
    all[0] = !(0b11u64 << 31);
    let mut saved = [0u64; 16];
    thread_mask(libc::SIG_BLOCK, &all, &mut saved);
    while WRITING
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
    slot.seq.fetch_add(1, Ordering::AcqRel);
    slot.handler.store(action.sa_sigaction, Ordering::Relaxed);
    slot.flags.store(action.sa_flags, Ordering::Relaxed);
    for (word, value) in slot.mask.iter().zip(mask_words(&action.sa_mask)) {
        word.store(*value, Ordering::Relaxed);
    }
    slot.seq.fetch_add(1, Ordering::AcqRel);
    WRITING.store(false, Ordering::Release);
    let mut ignored = [0u64; 16];
    thread_mask(libc::SIG_SETMASK, &saved, &mut ignored);
}

/// The program's disposition of `signal`. Async-signal-safe.
pub fn program_action(signal: i32) -> libc::sigaction {
    // SAFETY: sigaction is plain old data.
    let mut out: libc::sigaction = unsafe { std::mem::zeroed() };
    let Some(slot) = ACTIONS.get(signal as usize) else {
        return out;
    };
    loop {
        let before = slot.seq.load(Ordering::Acquire);
        if before & 1 == 1 {
            std::hint::spin_loop();
            continue;
        }
        out.sa_sigaction = slot.handler.load(Ordering::Relaxed);
        out.sa_flags = slot.flags.load(Ordering::Relaxed);
        // SAFETY: glibc's sigset_t is 16 u64 words.
        let words = unsafe { &mut *(&mut out.sa_mask as *mut libc::sigset_t as *mut [u64; 16]) };
        for (w, word) in words.iter_mut().zip(&slot.mask) {
            *w = word.load(Ordering::Relaxed);
        }
        if slot.seq.load(Ordering::Acquire) == before {
            return out;
        }
    }
}

/// strobe now owns `signal`; what was installed before is the program's.
pub(crate) fn take_over(signal: i32, previous: &libc::sigaction) {
    set_program_action(signal, previous);
    if let Some(o) = OURS.get(signal as usize) {
        o.store(true, Ordering::Release);
    }
}

/// Real-time signals whose disposition is still the default, highest
/// first, for the samplers to use (a program or library that already uses
/// one, or inherited it ignored, keeps it).
pub fn free_realtime_signals(wanted: usize) -> Vec<i32> {
    let (lo, hi) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    (lo..hi)
        .rev()
        .filter(|&s| {
            // SAFETY: sigaction is plain old data.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: querying only.
            let queried = unsafe { real_sigaction(s, std::ptr::null(), &mut old) } == 0;
            queried && old.sa_sigaction == libc::SIG_DFL && !is_sampling_signal(s)
        })
        .take(wanted)
        .collect()
}

/// Changes the calling thread's mask with the raw system call (the
/// runtime interposes the libc functions). Async-signal-safe.
fn thread_mask(how: libc::c_int, set: &[u64; 16], old: &mut [u64; 16]) {
    // SAFETY: rt_sigprocmask with the kernel's 8-byte mask size; both
    // pointers hold at least 8 bytes.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            how,
            set.as_ptr(),
            old.as_mut_ptr(),
            8usize,
        )
    };
}

/// Signals whose default action is to do nothing.
fn default_ignores(signal: i32) -> bool {
    matches!(
        signal,
        libc::SIGCHLD | libc::SIGURG | libc::SIGWINCH | libc::SIGCONT
    )
}

/// Delivers a signal that did not come from strobe's timers as the program
/// asked. **Signal handler**: atomics and async-signal-safe calls only.
pub(crate) fn deliver_to_program(signal: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let action = program_action(signal);
    match action.sa_sigaction {
        libc::SIG_IGN => {}
        libc::SIG_DFL if default_ignores(signal) => {}
        libc::SIG_DFL => die_by_default(signal),
        handler => {
            if action.sa_flags & libc::SA_RESETHAND != 0 {
                // SAFETY: sigaction is plain old data; zero is SIG_DFL.
                let default: libc::sigaction = unsafe { std::mem::zeroed() };
                set_program_action(signal, &default);
            }
            let mut old = [0u64; 16];
            thread_mask(libc::SIG_BLOCK, mask_words(&action.sa_mask), &mut old);
            if action.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the program installed this handler with SA_SIGINFO.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(handler) };
                f(signal, info, ctx);
            } else {
                // SAFETY: the program installed this handler without SA_SIGINFO.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
                f(signal);
            }
            let mut ignored = [0u64; 16];
            thread_mask(libc::SIG_SETMASK, &old, &mut ignored);
        }
    }
}

/// The default action of a terminating signal: put the default back,
/// unblock it and send it to this thread again. **Signal handler.**
fn die_by_default(signal: i32) {
    // SAFETY: sigaction is plain old data; zero is SIG_DFL.
    let default: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: installing the default disposition.
    unsafe { real_sigaction(signal, &default, std::ptr::null_mut()) };
    let mut set = [0u64; 16];
    set[0] = 1u64 << (signal - 1);
    let mut old = [0u64; 16];
    thread_mask(libc::SIG_UNBLOCK, &set, &mut old);
    // SAFETY: tgkill to the calling thread; async-signal-safe.
    unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), libc::gettid(), signal) };
}
