//! Threads: the `pthread_create` wrapper, per-thread start and exit, and
//! threads that existed before the runtime started.
//!
//! Owns the thread trampoline (register, arm timers, run the program's start
//! routine), the thread-exit hook (a pthread key destructor, so it also runs
//! on `pthread_exit`), and the distinction between the program's threads
//! (sampled) and strobe's own (start routine inside this library: never
//! sampled). Never runs in a signal handler.

use crate::interpose::{real, RealFn};
use crate::state::{current, Runtime};
use std::sync::atomic::{AtomicU32, Ordering};
use strobe_core::thread::{gettid, register_current, ThreadRole};

static REAL_PTHREAD_CREATE: RealFn = RealFn::new(c"pthread_create");

type StartRoutine = extern "C" fn(*mut libc::c_void) -> *mut libc::c_void;

struct Trampoline {
    start: StartRoutine,
    arg: *mut libc::c_void,
}

/// The key whose destructor runs when a registered thread exits.
static EXIT_KEY: AtomicU32 = AtomicU32::new(u32::MAX);

/// Creates the thread-exit key (stage 1 of start-up).
pub fn init_exit_key() {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: valid out-pointer; the destructor is an extern "C" fn.
    if unsafe { libc::pthread_key_create(&mut key, Some(thread_exit_destructor)) } == 0 {
        EXIT_KEY.store(key, Ordering::Release);
    }
}

extern "C" fn thread_exit_destructor(_value: *mut libc::c_void) {
    let _ = std::panic::catch_unwind(|| {
        if let Some(rt) = current() {
            on_thread_exit(rt);
        }
    });
}

/// Interposes `pthread_create`: the new thread runs [`thread_start`] first.
///
/// # Safety
/// Same contract as `pthread_create`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: StartRoutine,
    arg: *mut libc::c_void,
) -> libc::c_int {
    let real_create = real!(
        REAL_PTHREAD_CREATE
            as fn(
                *mut libc::pthread_t,
                *const libc::pthread_attr_t,
                StartRoutine,
                *mut libc::c_void,
            ) -> libc::c_int
    );
    if current().is_none() {
        // SAFETY: forwarding the caller's arguments unchanged.
        return unsafe { real_create(thread, attr, start, arg) };
    }
    let trampoline = Box::into_raw(Box::new(Trampoline { start, arg }));
    // SAFETY: the trampoline box is handed to the new thread, which frees it.
    let rc = unsafe { real_create(thread, attr, thread_start, trampoline as *mut libc::c_void) };
    if rc != 0 {
        // SAFETY: the thread was not created; the box is still ours.
        drop(unsafe { Box::from_raw(trampoline) });
    }
    rc
}

extern "C" fn thread_start(p: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: `p` is the trampoline boxed by our pthread_create.
    let Trampoline { start, arg } = *unsafe { Box::from_raw(p as *mut Trampoline) };
    let _ = std::panic::catch_unwind(|| {
        if let Some(rt) = current() {
            on_thread_start(rt, Some(start as usize as u64));
        }
    });
    start(arg)
}

/// Registers the calling thread: strobe's own threads get an identity only;
/// the program's threads are also sampled and recorded.
pub fn on_thread_start(rt: &Runtime, start_routine: Option<u64>) {
    if start_routine.is_some_and(|a| rt.own_text.contains(&a)) {
        register_current(ThreadRole::Strobe);
        return;
    }
    let id = register_current(ThreadRole::Program);
    rt.recorder.thread_started(&id);
    if let Some(sampler) = &rt.sampler {
        if let Err(e) = sampler.register_current_thread() {
            crate::log::emit(&format!("thread {} is not sampled: {e}", id.tid));
        }
    }
    let key = EXIT_KEY.load(Ordering::Acquire);
    if key != u32::MAX {
        // SAFETY: a live key; any non-null value makes the destructor run.
        unsafe { libc::pthread_setspecific(key, std::ptr::dangling::<libc::c_void>()) };
    }
}

/// Unregisters the calling thread: its timers are deleted and its samples
/// flushed before it exits.
pub fn on_thread_exit(rt: &Runtime) {
    let Some(id) = strobe_core::thread::current() else {
        return;
    };
    if id.role != ThreadRole::Program {
        return;
    }
    if let Some(sampler) = &rt.sampler {
        sampler.unregister_current_thread();
    }
    rt.recorder.thread_ended(&id, thread_name(id.tid));
}

/// The kernel's name of thread `tid` of this process.
pub fn thread_name(tid: i32) -> String {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default()
}

/// Threads of this process other than the caller, by tid.
pub fn other_threads() -> Vec<i32> {
    let me = gettid();
    std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .filter(|&tid| tid != me)
                .collect()
        })
        .unwrap_or_default()
}

/// Samples threads that existed before stage 2 (started by other
/// libraries' constructors): they are registered by tid.
pub fn adopt_threads(rt: &Runtime, tids: &[i32]) {
    for &tid in tids {
        if let Some(sampler) = &rt.sampler {
            if sampler.register_thread(tid).is_ok() {
                rt.recorder.thread_adopted(tid);
            }
        }
    }
}
