//! Stage 2 of start-up, from the `__libc_start_main` wrapper just before
//! the program's `main`, and the start of a forked child's runtime: the
//! runtime is published around the segment stage 1 prepared (`start`),
//! then the sampler, the main thread, threads other libraries started,
//! tracing and tool plugins begin.
//!
//! Owns the order in which a new runtime's parts begin. Never runs in a
//! signal handler; creates no segment itself (`start` does).

use crate::interpose::{real, RealFn};
use crate::state::Runtime;
use std::sync::atomic::{AtomicUsize, Ordering};
use strobe_wire::config::RuntimeConfig;

type MainFn =
    extern "C" fn(libc::c_int, *mut *mut libc::c_char, *mut *mut libc::c_char) -> libc::c_int;

static REAL_LIBC_START_MAIN: RealFn = RealFn::new(c"__libc_start_main");
static PROGRAM_MAIN: AtomicUsize = AtomicUsize::new(0);

/// Interposes glibc's `__libc_start_main` to run stage 2 before `main`.
///
/// # Safety
/// Called by the program's `_start` with glibc's arguments.
#[no_mangle]
pub unsafe extern "C" fn __libc_start_main(
    main: MainFn,
    argc: libc::c_int,
    argv: *mut *mut libc::c_char,
    init: usize,
    fini: usize,
    rtld_fini: usize,
    stack_end: *mut libc::c_void,
) -> libc::c_int {
    PROGRAM_MAIN.store(main as usize, Ordering::SeqCst);
    let real_start = real!(
        REAL_LIBC_START_MAIN
            as fn(
                MainFn,
                libc::c_int,
                *mut *mut libc::c_char,
                usize,
                usize,
                usize,
                *mut libc::c_void,
            ) -> libc::c_int
    );
    // SAFETY: forwarding glibc's arguments with our main in place of the program's.
    unsafe { real_start(strobe_main, argc, argv, init, fini, rtld_fini, stack_end) }
}

extern "C" fn strobe_main(
    argc: libc::c_int,
    argv: *mut *mut libc::c_char,
    envp: *mut *mut libc::c_char,
) -> libc::c_int {
    let _ = std::panic::catch_unwind(stage2);
    // SAFETY: PROGRAM_MAIN holds the program's main, stored just before.
    let main: MainFn =
        unsafe { std::mem::transmute::<usize, MainFn>(PROGRAM_MAIN.load(Ordering::SeqCst)) };
    main(argc, argv, envp)
}

/// Stage 2: start collecting.
fn stage2() {
    let Some((config, segment)) = crate::start::prepared() else {
        return;
    };
    let older = crate::threads::other_threads();
    let rt = crate::state::publish(config.clone(), segment);
    begin(rt, &older);
    crate::tools::load();
}

/// What every new runtime does once published: the calling thread, the
/// threads that already exist, tracing, tool plugins.
pub fn begin(rt: &'static Runtime, older_threads: &[i32]) {
    crate::causal::begin(rt);
    crate::dl::announce_modules(rt);
    crate::threads::on_thread_start(rt, None);
    crate::threads::adopt_threads(rt, older_threads);
    if rt.config.tracing {
        crate::tracing::attach();
        crate::xpti_subscriber::announce(rt);
    }
}

/// In a forked child that follows: a new segment, a new runtime (reusing
/// the parent's samplers), this thread registered. With the runtime's own
/// sampler on, the segment stays private until the child records
/// something (`dormant`): its first sample wakes it. Without (kernel
/// sampling, or none), it is handed over at once, as the kernel's samples
/// of the child need the collector to know it.
pub fn start_child(config: RuntimeConfig, spare: Option<strobe_sampler::Spare>) {
    let own_sampler = config.cputime_hz > 0.0 || config.realtime_hz > 0.0;
    let Some((segment, collector)) = crate::start::create_child_segment(&config, own_sampler)
    else {
        return;
    };
    let rt = crate::state::publish(config, segment);
    if let (Some(sampler), Some(spare)) = (&rt.sampler, spare) {
        sampler.adopt(spare);
    }
    strobe_sampler::set_before_sample(Some(crate::dormant::wake));
    begin(rt, &[]);
    if let Some(collector) = collector {
        crate::dormant::enter(segment, collector);
    }
}
