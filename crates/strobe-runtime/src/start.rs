//! Start-up in two stages.
//!
//! * Stage 1 runs as this library's constructor (`.init_array`), before the
//!   program's `main` and possibly before other libraries are ready: it only
//!   reads the settings from the environment and creates the thread-exit
//!   key. It starts no thread.
//! * Stage 2 runs from the `__libc_start_main` wrapper, just before the
//!   program's `main`: the database, the sampler, the main thread's timers,
//!   and finalization at exit.
//!
//! Owns the ordering of start-up. Never runs in a signal handler.

use crate::interpose::{real, RealFn};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use strobe_core::settings::{Key, Settings, SettingsLoader};

/// Settings read by stage 1; `None` when they were invalid.
static SETTINGS: OnceLock<Option<Settings>> = OnceLock::new();

/// Stage 1: this library's constructor. **Runs before `main`**: no thread is
/// started here.
extern "C" fn stage1(
    _argc: libc::c_int,
    _argv: *const *const libc::c_char,
    _envp: *const *const libc::c_char,
) {
    let _ = std::panic::catch_unwind(|| {
        SETTINGS.get_or_init(|| match SettingsLoader::new().with_process_env().load() {
            Ok(settings) => {
                crate::log::set_verbosity(settings.int(Key::Verbose));
                for warning in settings.warnings() {
                    crate::log::emit(&format!("warning: {warning}"));
                }
                Some(settings)
            }
            Err(errors) => {
                for line in errors.to_string().lines() {
                    crate::log::emit(&format!("error: {line}"));
                }
                crate::log::emit("profiling is off for this process; fix the settings above");
                None
            }
        });
        crate::threads::init_exit_key();
    });
}

#[used]
#[link_section = ".init_array"]
static STAGE1: extern "C" fn(libc::c_int, *const *const libc::c_char, *const *const libc::c_char) =
    stage1;

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

/// Stage 2: start collecting, and finalize at exit.
fn stage2() {
    let Some(Some(settings)) = SETTINGS.get() else {
        return;
    };
    crate::fatal::install();
    crate::state::start(settings.clone());
    // SAFETY: registering an extern "C" fn with atexit.
    unsafe { libc::atexit(finalize_at_exit) };
}

extern "C" fn finalize_at_exit() {
    let _ = std::panic::catch_unwind(|| crate::state::finalize("exit"));
}
