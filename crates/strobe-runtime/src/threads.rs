//! Threads: the `pthread_create` wrapper, per-thread start and exit, and
//! threads that existed before the runtime started.
//!
//! Owns the thread trampoline (claim a slot, arm timers, run the program's
//! start routine), the thread-exit hook (a pthread key destructor, so it
//! also runs on `pthread_exit`), and the distinction between the program's
//! threads (sampled) and strobe's own (tool plugins' threads: start routine
//! inside this library, never sampled). A thread's kernel name goes with
//! its start and its end records (the main thread has no end record).
//! Never runs in a signal handler.

use crate::events::{emit, my_slot};
use crate::interpose::{real, RealFn};
use crate::state::{current, Runtime};
use crate::thread_slot::{slot_of_current_thread, thread_name};
use std::sync::atomic::{AtomicU32, Ordering};
use strobe_core::clock::now_ns;
use strobe_core::thread::{gettid, register_current, ThreadRole};
use strobe_wire::record::event;

static REAL_PTHREAD_CREATE: RealFn = RealFn::new(c"pthread_create");

type StartRoutine = extern "C" fn(*mut libc::c_void) -> *mut libc::c_void;

struct Trampoline {
    start: StartRoutine,
    arg: *mut libc::c_void,
    /// The creator's causal delay count, which the new thread inherits.
    causal_local: Option<u64>,
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
        if let Some(rt) = crate::state::owned() {
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
    // A library may have been loaded since the last look: new threads
    // often run its code. A forked child's private segment is shared
    // first, while one thread alone writes to it.
    let _ = std::panic::catch_unwind(|| {
        if let Some(rt) = crate::state::owned() {
            crate::dormant::wake_and_report();
            crate::dl::refresh_modules(rt);
        }
    });
    let trampoline = Box::into_raw(Box::new(Trampoline {
        start,
        arg,
        causal_local: crate::causal::inheritable(),
    }));
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
    let Trampoline {
        start,
        arg,
        causal_local,
    } = *unsafe { Box::from_raw(p as *mut Trampoline) };
    let _ = std::panic::catch_unwind(|| {
        if let Some(rt) = current() {
            on_thread_start(rt, Some(start as usize as u64));
            crate::causal::inherit(causal_local);
        }
    });
    start(arg)
}

/// Registers the calling thread: strobe's own threads get an identity only;
/// the program's threads get a slot, a start event and timers.
pub fn on_thread_start(rt: &Runtime, start_routine: Option<u64>) {
    if start_routine.is_some_and(|a| rt.own_text.contains(&a)) {
        register_current(ThreadRole::Strobe);
        return;
    }
    register_current(ThreadRole::Program);
    // The thread may hold a slot already (stage 2 announces the modules,
    // an event of the calling thread, before registering it): never a
    // second slot and a second set of timers.
    let _ = slot_of_current_thread(rt);
    let key = EXIT_KEY.load(Ordering::Acquire);
    if key != u32::MAX {
        // SAFETY: a live key; any non-null value makes the destructor run.
        unsafe { libc::pthread_setspecific(key, std::ptr::dangling::<libc::c_void>()) };
    }
}

/// Unregisters the calling thread: its timers are deleted, its end and
/// name recorded, and its slot handed back for the collector to drain.
pub fn on_thread_exit(rt: &Runtime) {
    let Some(slot) = my_slot(rt) else {
        return;
    };
    // A joiner is about to wake: what this thread owes is paid first.
    crate::causal::before_waking();
    if let Some(sampler) = &rt.sampler {
        sampler.unregister_current_thread();
    }
    if let Some(counters) = &rt.counters {
        counters.close_for_current_thread(slot);
    }
    let mut bytes = strobe_core::clock::Clock::ThreadCpu
        .read_ns()
        .to_le_bytes()
        .to_vec();
    bytes.extend_from_slice(&thread_name());
    emit(rt, slot, event::THREAD_END, 0, now_ns(), &bytes);
    crate::events::clear_my_slot();
    rt.segment.end_slot(slot);
}

/// The kernel's name of thread `tid` of this process (empty when it
/// cannot be read).
fn name_of(tid: i32) -> Vec<u8> {
    let mut name = std::fs::read(format!("/proc/self/task/{tid}/comm")).unwrap_or_default();
    if name.last() == Some(&b'\n') {
        name.pop();
    }
    name
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
/// libraries' constructors): each gets a slot, registered by tid. Their
/// own events, if they make any, go to a slot they claim themselves.
pub fn adopt_threads(rt: &Runtime, tids: &[i32]) {
    for &tid in tids {
        let Some(slot) = rt.segment.claim_slot(tid) else {
            return;
        };
        // This thread is the slot's only writer until the thread ends.
        emit(rt, slot, event::THREAD_START, 0, now_ns(), &name_of(tid));
        if let Some(counters) = &rt.counters {
            counters.open_for_thread(slot, tid, |note| {
                emit(rt, slot, event::NOTE, 0, now_ns(), note)
            });
        }
        if let Some(sampler) = &rt.sampler {
            let _ = sampler.register_thread(tid, slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testing::{events, runtime, small, SMALL};
    use strobe_wire::config::RuntimeConfig;
    use strobe_wire::segment::{slot_state, Layout};

    /// The kernel's name of the calling thread, as `/proc` shows it.
    fn proc_name() -> Vec<u8> {
        let mut name = std::fs::read("/proc/thread-self/comm").unwrap();
        assert_eq!(name.pop(), Some(b'\n'));
        name
    }

    #[test]
    fn a_thread_claims_one_slot_and_announces_itself_once() {
        let rt = small();
        let slot = slot_of_current_thread(rt).unwrap();
        assert_eq!(slot_of_current_thread(rt), Some(slot), "no second slot");
        assert_eq!(rt.segment.slots_in_use(), 1);
        let s = rt.segment.slot(slot);
        assert_eq!(s.tid.load(Ordering::Relaxed), gettid());
        assert_eq!(s.state.load(Ordering::Relaxed), slot_state::LIVE);
        let got = events(rt, slot);
        assert_eq!(got.len(), 1, "{got:?}");
        let (head, name) = &got[0];
        assert_eq!((head.kind, head.arg), (event::THREAD_START, 0));
        assert_ne!(head.timestamp_ns, 0);
        assert_eq!(*name, proc_name());
        assert_eq!(*name, thread_name());
    }

    #[test]
    fn a_thread_that_ends_says_so_and_hands_its_slot_back() {
        let rt = small();
        let slot = slot_of_current_thread(rt).unwrap();
        events(rt, slot);
        let cpu_before = strobe_core::clock::Clock::ThreadCpu.read_ns();
        on_thread_exit(rt);
        let got = events(rt, slot);
        assert_eq!(got.len(), 1);
        let (head, bytes) = &got[0];
        assert_eq!(head.kind, event::THREAD_END);
        // As the collector reads it: CPU time, then the name.
        let cpu = u64::from_le_bytes(bytes[..8].try_into().unwrap());
        assert!(cpu >= cpu_before, "{cpu} < {cpu_before}");
        assert_eq!(&bytes[8..], proc_name());
        assert_eq!(
            rt.segment.slot(slot).state.load(Ordering::Relaxed),
            slot_state::ENDED
        );
        assert_eq!(my_slot(rt), None);
        // Twice is harmless: the thread has no slot any more.
        on_thread_exit(rt);
        assert!(events(rt, slot).is_empty());
    }

    #[test]
    fn a_thread_finds_no_slot_when_all_are_taken_and_gets_a_freed_one_later() {
        let rt = runtime(RuntimeConfig {
            layout: Layout { slots: 1, ..SMALL },
            ..RuntimeConfig::default()
        });
        assert_eq!(slot_of_current_thread(rt), Some(0));
        let other = std::thread::spawn(move || (gettid(), slot_of_current_thread(rt)));
        let (_, got) = other.join().unwrap();
        assert_eq!(got, None);
        assert_eq!(
            rt.segment.header().slots_exhausted.load(Ordering::Relaxed),
            1
        );
        // This thread ends; the collector drains and frees its slot.
        on_thread_exit(rt);
        assert_eq!(events(rt, 0).len(), 2, "start and end");
        assert!(rt.segment.free_slot(0));
        let later = std::thread::spawn(move || (gettid(), slot_of_current_thread(rt)));
        let (tid, got) = later.join().unwrap();
        assert_eq!(got, Some(0));
        assert_eq!(rt.segment.slot(0).tid.load(Ordering::Relaxed), tid);
        let got = events(rt, 0);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.kind, event::THREAD_START);
    }

    #[test]
    fn strobes_own_threads_get_no_slot() {
        let rt = small();
        let own = Runtime {
            own_text: 0x1000..0x2000,
            config: rt.config.clone(),
            segment: rt.segment,
            sampler: None,
            generation: rt.generation,
            strings: Default::default(),
            announced_modules: Default::default(),
            paused: Default::default(),
            pid: rt.pid,
            counters: None,
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                on_thread_start(&own, Some(0x1800));
                assert_eq!(my_slot(&own), None);
            });
            s.spawn(|| {
                // A start routine outside this library: the program's.
                on_thread_start(&own, Some(0x2000));
                assert!(my_slot(&own).is_some());
            });
        });
        assert_eq!(own.segment.slots_in_use(), 1);
    }

    #[test]
    fn threads_older_than_the_runtime_are_adopted_by_tid_while_slots_last() {
        let rt = runtime(RuntimeConfig {
            layout: Layout { slots: 2, ..SMALL },
            ..RuntimeConfig::default()
        });
        let me = gettid();
        // A tid with no thread behind it has no name to read.
        adopt_threads(rt, &[me, i32::MAX, i32::MAX - 1]);
        assert_eq!(rt.segment.slots_in_use(), 2);
        assert_eq!(
            rt.segment.header().slots_exhausted.load(Ordering::Relaxed),
            1
        );
        assert_eq!(rt.segment.slot(0).tid.load(Ordering::Relaxed), me);
        assert_eq!(rt.segment.slot(1).tid.load(Ordering::Relaxed), i32::MAX);
        let mine = events(rt, 0);
        assert_eq!(mine.len(), 1);
        assert_eq!(mine[0].0.kind, event::THREAD_START);
        assert_eq!(mine[0].1, proc_name());
        let gone = events(rt, 1);
        assert_eq!((gone[0].0.kind, gone[0].1.len()), (event::THREAD_START, 0));
        // Adopting is not the calling thread's own claim.
        assert_eq!(my_slot(rt), None);
    }

    #[test]
    fn the_other_threads_are_listed_without_the_caller() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let helper = std::thread::spawn(move || {
            tx.send(gettid()).unwrap();
            let _ = stop_rx.recv();
        });
        let helper_tid = rx.recv().unwrap();
        let others = other_threads();
        assert!(others.contains(&helper_tid));
        assert!(!others.contains(&gettid()));
        drop(stop_tx);
        helper.join().unwrap();
    }
}
