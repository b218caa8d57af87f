//! The sampler on real code: C built with -O2 -fomit-frame-pointer in a
//! shared library, real timers and signals, real threads. Samples go to
//! the threads' rings in a shared segment; the tests drain them as the
//! collector would.

mod common;

use common::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strobe_core::clock::now_ns;
use strobe_core::thread::gettid;
use strobe_sampler::Sampler;
use strobe_wire::sample::decode_sample;
use strobe_wire::sample::TimerClock;
use strobe_wire::segment::{slot_state, Segment};

fn leaf_name(k: &Kept) -> Option<String> {
    frame_symbol(&k.frames, 0)
}

/// At least 99 in 100.
fn nearly_all(part: usize, whole: usize) -> bool {
    part * 100 >= whole * 99
}

#[test]
fn shares_match_cpu_time_and_stacks_are_complete_across_the_library_boundary() {
    let _turn = one_at_a_time();
    let w = load_workload();
    let seg = segment(4, 1 << 18);
    let collector = Background::start(seg);
    let sampler = Sampler::start(config(Some(250.0), Some(1000.0)), seg).unwrap();
    let slot = seg.claim_slot(gettid()).unwrap();
    sampler.register_current_thread(slot).unwrap();
    let (mut ns_a, mut ns_b) = (0u64, 0u64);
    (w.run_split)(1500.0, 0.7, &mut ns_a, &mut ns_b);
    sampler.unregister_current_thread();
    sampler.stop();
    let samples = collector.finish();
    let c = counters(seg, slot);
    assert_eq!(c.taken as usize, samples.len(), "every sample drained once");
    assert_eq!(c.lost_full, 0, "the collector kept up");
    let cpu: Vec<_> = samples
        .iter()
        .filter(|s| s.clock == TimerClock::ThreadCpu)
        .collect();
    let real: Vec<_> = samples
        .iter()
        .filter(|s| s.clock == TimerClock::Realtime)
        .collect();
    // 1500 ms of CPU time at 250 Hz: 375 expirations.
    let cpu_expirations = expirations(cpu.iter().copied());
    assert!(
        cpu.len() > 100 && cpu_expirations > 300,
        "{} CPU-time samples for {cpu_expirations} expirations",
        cpu.len()
    );
    assert!(real.len() > 300, "real-time samples: {}", real.len());

    let me = gettid();
    assert!(samples.iter().all(|s| s.tid == me));
    let (mut in_a, mut in_b) = (0usize, 0usize);
    for s in &cpu {
        match leaf_name(s).as_deref() {
            Some("work_a") => in_a += 1,
            Some("work_b") => in_b += 1,
            _ => {}
        }
    }
    let complete_all = samples.iter().filter(|s| s.complete).count();
    assert!(
        nearly_all(complete_all, samples.len()),
        "{complete_all} of {} samples reach the root",
        samples.len()
    );
    assert_eq!(
        c.incomplete as usize,
        samples.len() - complete_all,
        "the slot counts the incomplete ones"
    );
    let truth = ns_a as f64 / (ns_a + ns_b) as f64;
    let seen = in_a as f64 / (in_a + in_b) as f64;
    assert!(
        (seen - truth).abs() < 0.08,
        "work_a share {seen:.3} vs CPU truth {truth:.3} ({in_a}/{in_b})"
    );
    assert!(
        in_a + in_b > cpu.len() * 9 / 10,
        "most CPU samples land in the workers"
    );

    // Every stack through the workers reaches run_split and then the root.
    let through: Vec<_> = samples
        .iter()
        .filter(|s| matches!(leaf_name(s).as_deref(), Some("work_a" | "work_b")))
        .collect();
    let complete = through.iter().filter(|s| s.complete).count();
    assert!(
        nearly_all(complete, through.len()),
        "{complete} of {} complete",
        through.len()
    );
    for s in through.iter().take(50) {
        assert_eq!(
            frame_symbol(&s.frames, 1).as_deref(),
            Some("run_split"),
            "{:x?}",
            s.frames
        );
    }
}

#[test]
fn a_recursion_200_deep_is_unwound_whole() {
    let _turn = one_at_a_time();
    let w = load_workload();
    let seg = segment(4, 1 << 18);
    let collector = Background::start(seg);
    let sampler = Sampler::start(config(None, Some(1000.0)), seg).unwrap();
    let slot = seg.claim_slot(gettid()).unwrap();
    sampler.register_current_thread(slot).unwrap();
    (w.recurse)(200, 400.0);
    sampler.unregister_current_thread();
    sampler.stop();
    let samples = collector.finish();
    assert_eq!(counters(seg, slot).lost_full, 0, "the collector kept up");
    let deep: Vec<_> = samples
        .into_iter()
        .filter(|s| {
            s.frames
                .iter()
                .skip(1)
                .any(|&f| symbol(f - 1).as_deref() == Some("recurse"))
        })
        .collect();
    assert!(deep.len() > 100, "{} samples in recurse", deep.len());
    let whole = deep
        .iter()
        .filter(|s| {
            s.complete
                && s.frames
                    .iter()
                    .skip(1)
                    .filter(|&&f| symbol(f - 1).as_deref() == Some("recurse"))
                    .count()
                    == 201
        })
        .count();
    assert!(
        nearly_all(whole, deep.len()),
        "{whole} of {} samples hold all 201 recurse frames",
        deep.len()
    );
}

#[test]
fn threads_sampled_in_waves_reuse_the_slots_the_collector_frees() {
    let _turn = one_at_a_time();
    let w = Arc::new(load_workload());
    // Fewer slots than threads: the later waves only run because the
    // collector gives ended slots back.
    const SLOTS: u32 = 16;
    let seg = segment(SLOTS, 1 << 18);
    let sampler = Sampler::start(config(None, Some(500.0)), seg).unwrap();
    let mut tids = HashSet::new();
    let mut samples = Vec::new();
    for wave in 0..4 {
        let handles: Vec<_> = (0..SLOTS)
            .map(|_| {
                let (sampler, w) = (sampler.clone(), w.clone());
                std::thread::spawn(move || {
                    let tid = gettid();
                    let slot = seg.claim_slot(tid).expect("a free slot");
                    sampler.register_current_thread(slot).unwrap();
                    (w.spin_ms)(60.0);
                    sampler.unregister_current_thread();
                    seg.end_slot(slot);
                    (tid, slot)
                })
            })
            .collect();
        let ended: Vec<(i32, u32)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let slots: HashSet<u32> = ended.iter().map(|&(_, slot)| slot).collect();
        assert_eq!(
            slots.len(),
            SLOTS as usize,
            "wave {wave}: one slot per thread"
        );
        // As the collector: drain every ended slot, then give it back.
        for (tid, slot) in ended {
            assert_eq!(
                seg.slot(slot).state.load(Ordering::SeqCst),
                slot_state::ENDED
            );
            assert_eq!(seg.slot(slot).tid.load(Ordering::SeqCst), tid);
            let got = drain(seg, slot);
            let c = counters(seg, slot);
            assert_eq!(
                c.taken as usize,
                got.len(),
                "wave {wave}, slot {slot}: every sample drained once"
            );
            assert_eq!(c.lost_full, 0, "wave {wave}, slot {slot}");
            assert!(
                got.iter().all(|s| s.tid == tid),
                "wave {wave}: slot {slot} holds only its thread's samples"
            );
            assert!(seg.free_slot(slot));
            tids.insert(tid);
            samples.extend(got);
        }
    }
    sampler.stop();
    assert_eq!(sampler.threads(), 64);
    assert_eq!(tids.len(), 64);
    assert_eq!(seg.slots_in_use(), SLOTS);
    assert_eq!(seg.header().slots_exhausted.load(Ordering::SeqCst), 0);
    let sampled_threads: HashSet<_> = samples.iter().map(|s| s.tid).collect();
    assert!(
        sampled_threads.len() >= 60,
        "{} of 64 threads sampled",
        sampled_threads.len()
    );
    let complete = samples.iter().filter(|s| s.complete).count();
    assert!(
        nearly_all(complete, samples.len()),
        "{complete}/{} complete (thread start reached)",
        samples.len()
    );
}

#[test]
fn a_thread_older_than_the_sampler_is_registered_by_tid() {
    let _turn = one_at_a_time();
    let w = Arc::new(load_workload());
    let (tx, rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<(&'static Segment, u32)>();
    let worker = {
        let w = w.clone();
        std::thread::spawn(move || {
            tx.send(gettid()).unwrap();
            let (seg, slot) = go_rx.recv().unwrap();
            (w.spin_ms)(100.0);
            w.spin_until(3000.0, || counters(seg, slot).taken >= 40)
        })
    };
    let tid = rx.recv().unwrap();
    let seg = segment(4, 1 << 18);
    let sampler = Sampler::start(config(Some(250.0), None), seg).unwrap();
    let slot = seg.claim_slot(tid).unwrap();
    sampler.register_thread(tid, slot).unwrap();
    go_tx.send((seg, slot)).unwrap();
    let enough = worker.join().unwrap();
    sampler.unregister(tid);
    sampler.stop();
    let samples = drain(seg, slot);
    assert_eq!(counters(seg, slot).taken as usize, samples.len());
    assert!(
        enough,
        "{} samples in 3 s of CPU time at 250 Hz ({} expirations)",
        samples.len(),
        expirations(&samples)
    );
    assert!(samples.iter().all(|s| s.tid == tid));
    let complete = samples.iter().filter(|s| s.complete).count();
    assert!(
        nearly_all(complete, samples.len()),
        "{complete}/{} complete via the memory map",
        samples.len()
    );
}

#[test]
fn a_thread_with_a_small_alternate_signal_stack_is_sampled() {
    // Rust gives every thread an alternate signal stack of a few KiB for
    // its stack-overflow handler, C programs install ones of SIGSTKSZ:
    // unwinding needs more than that, on the thread's own stack.
    let _turn = one_at_a_time();
    let w = Arc::new(load_workload());
    let seg = segment(4, 1 << 18);
    let sampler = Sampler::start(config(Some(250.0), Some(1000.0)), seg).unwrap();
    let worker = {
        let (sampler, w) = (sampler.clone(), w.clone());
        std::thread::spawn(move || {
            let mut alternate = vec![0u8; libc::SIGSTKSZ];
            let small = libc::stack_t {
                ss_sp: alternate.as_mut_ptr().cast(),
                ss_flags: 0,
                ss_size: alternate.len(),
            };
            // SAFETY: stack_t is plain old data filled by the call.
            let mut previous: libc::stack_t = unsafe { std::mem::zeroed() };
            // SAFETY: the buffer outlives its use as the alternate stack:
            // the previous one is back before it is freed.
            assert_eq!(unsafe { libc::sigaltstack(&small, &mut previous) }, 0);
            let slot = seg.claim_slot(gettid()).unwrap();
            sampler.register_current_thread(slot).unwrap();
            (w.spin_ms)(200.0);
            sampler.unregister_current_thread();
            seg.end_slot(slot);
            // SAFETY: restoring the stack that was installed before.
            let rc = unsafe { libc::sigaltstack(&previous, std::ptr::null_mut()) };
            assert_eq!(rc, 0);
            drop(alternate);
            slot
        })
    };
    let slot = worker.join().expect("the thread survives its samples");
    sampler.stop();
    let samples = drain(seg, slot);
    assert_eq!(counters(seg, slot).taken as usize, samples.len());
    assert!(samples.len() > 100, "{} samples", samples.len());
    let complete = samples.iter().filter(|s| s.complete).count();
    assert!(
        nearly_all(complete, samples.len()),
        "{complete}/{} complete",
        samples.len()
    );
}

#[test]
fn pause_stops_samples_and_resume_restarts_them() {
    let _turn = one_at_a_time();
    let w = load_workload();
    let seg = segment(4, 1 << 18);
    let sampler = Sampler::start(config(None, Some(1000.0)), seg).unwrap();
    let slot = seg.claim_slot(gettid()).unwrap();
    sampler.register_current_thread(slot).unwrap();
    (w.spin_ms)(100.0);
    sampler.pause();
    let paused_at = now_ns();
    (w.spin_ms)(200.0);
    let resumed_at = now_ns();
    sampler.resume();
    (w.spin_ms)(100.0);
    sampler.unregister_current_thread();
    sampler.stop();
    let samples = drain(seg, slot);
    // A signal already queued when pausing may still land within a millisecond.
    let during = samples
        .iter()
        .filter(|s| s.timestamp_ns > paused_at + 2_000_000 && s.timestamp_ns < resumed_at)
        .count();
    assert_eq!(during, 0);
    let after = samples
        .iter()
        .filter(|s| s.timestamp_ns >= resumed_at)
        .count();
    assert!(after > 10, "{after} samples after resume");
    let before = samples
        .iter()
        .filter(|s| s.timestamp_ns < paused_at)
        .count();
    assert!(before > 10, "{before} samples before pause");
}

#[test]
fn stop_deletes_the_timers_and_restart_creates_them_again() {
    let _turn = one_at_a_time();
    let w = load_workload();
    let seg = segment(4, 1 << 18);
    let sampler = Sampler::start(config(Some(250.0), Some(1000.0)), seg).unwrap();
    let slot = seg.claim_slot(gettid()).unwrap();
    sampler.register_current_thread(slot).unwrap();
    let mut samples = Vec::new();
    let of = |samples: &[Kept], clock| samples.iter().filter(|s| s.clock == clock).count();
    let both = |samples: &mut Vec<Kept>| {
        samples.extend(drain(seg, slot));
        of(samples, TimerClock::ThreadCpu) >= 3 && of(samples, TimerClock::Realtime) >= 10
    };
    assert!(
        w.spin_until(3000.0, || both(&mut samples)),
        "before stop: {samples:?}"
    );
    sampler.stop();
    let stopped_at = now_ns();
    samples.extend(drain(seg, slot));
    (w.spin_ms)(150.0);
    assert_eq!(
        sleeps_interrupted(Duration::from_millis(50)),
        0,
        "no timer fires while stopped"
    );
    let during = drain(seg, slot);
    // A signal already queued when stopping may still land within a
    // millisecond.
    assert!(
        during
            .iter()
            .all(|s| s.timestamp_ns <= stopped_at + 2_000_000),
        "samples while stopped: {during:?}"
    );
    samples.extend(during);
    let kept = samples.len();

    sampler.restart();
    let mut after = Vec::new();
    let restarted = w.spin_until(3000.0, || both(&mut after));
    sampler.unregister_current_thread();
    sampler.stop();
    after.extend(drain(seg, slot));
    assert!(
        restarted,
        "after restart: {} CPU-time, {} real-time samples",
        of(&after, TimerClock::ThreadCpu),
        of(&after, TimerClock::Realtime)
    );
    assert_eq!(counters(seg, slot).taken as usize, kept + after.len());
}

#[test]
fn nothing_is_written_while_the_collector_says_not_to_sample() {
    let _turn = one_at_a_time();
    let w = load_workload();
    let seg = segment(4, 1 << 18);
    set_sampling(seg, false, false);
    let sampler = Sampler::start(config(Some(250.0), Some(1000.0)), seg).unwrap();
    let slot = seg.claim_slot(gettid()).unwrap();
    sampler.register_current_thread(slot).unwrap();

    // The timers fire and the handler runs (each real-time signal cuts a
    // sleep short), yet nothing is written.
    let interrupted = sleeps_interrupted(Duration::from_millis(200));
    (w.spin_ms)(100.0);
    assert!(
        interrupted > 50,
        "{interrupted} signals in 200 ms at 1000 Hz"
    );
    assert_eq!(counters(seg, slot), Counters::default());
    assert_eq!(seg.sample_ring(slot).used(), 0);

    // Each flag governs its own sampler.
    set_sampling(seg, true, false);
    let cpu_on = now_ns();
    assert!(
        w.spin_until(3000.0, || counters(seg, slot).taken >= 10),
        "CPU-time samples: {:?}",
        counters(seg, slot)
    );
    let cpu_off = now_ns();
    set_sampling(seg, false, true);
    let real_on = now_ns();
    let taken = counters(seg, slot).taken;
    assert!(
        w.spin_until(3000.0, || counters(seg, slot).taken >= taken + 50),
        "real-time samples: {:?}",
        counters(seg, slot)
    );
    sampler.unregister_current_thread();
    sampler.stop();

    let samples = drain(seg, slot);
    assert_eq!(counters(seg, slot).taken as usize, samples.len());
    assert!(samples.iter().all(|s| s.timestamp_ns >= cpu_on));
    let first: Vec<_> = samples
        .iter()
        .filter(|s| s.timestamp_ns < cpu_off)
        .collect();
    let second: Vec<_> = samples
        .iter()
        .filter(|s| s.timestamp_ns > real_on)
        .collect();
    assert!(first.len() >= 10, "{} CPU-time samples", first.len());
    assert!(first.iter().all(|s| s.clock == TimerClock::ThreadCpu));
    assert!(second.len() >= 50, "{} real-time samples", second.len());
    assert!(second.iter().all(|s| s.clock == TimerClock::Realtime));
}

#[test]
fn a_full_ring_counts_lost_samples_and_every_kept_sample_decodes() {
    let _turn = one_at_a_time();
    let w = load_workload();
    const MAX_DEPTH: usize = 64;
    let seg = segment(2, 4096);
    let mut cfg = config(None, Some(2000.0));
    // One sample's reservation (40 + 8 * max_depth bytes) must fit in half
    // of the 4096-byte ring.
    cfg.max_depth = MAX_DEPTH;
    let sampler = Sampler::start(cfg, seg).unwrap();
    let me = gettid();
    let slot = seg.claim_slot(me).unwrap();
    sampler.register_current_thread(slot).unwrap();
    let ring = seg.sample_ring(slot);
    let mut records = 0u64;
    let mut truncated = 0u64;
    let mut lost_before = 0;
    // Rounds of different depths (the deepest beyond max_depth), so that
    // records differ in length and the ring wraps at different places;
    // never drained while a round runs.
    for (round, depth) in [0, 10, 100, 3, 40, 200].into_iter().enumerate() {
        (w.recurse)(depth, 60.0);
        let lost = counters(seg, slot).lost_full;
        assert!(
            lost > lost_before,
            "round {round}: the full ring loses samples"
        );
        lost_before = lost;
        let mut check = |payload: &[u8]| {
            let s = decode_sample(payload).expect("every record decodes");
            assert_eq!(s.tid, me);
            assert_eq!(s.clock, TimerClock::Realtime);
            let depth = s.frames.len();
            assert!((1..=MAX_DEPTH).contains(&depth), "depth {depth}");
            assert_eq!(payload.len(), 40 + 8 * depth, "committed exactly");
            if !s.complete {
                truncated += 1;
            }
            records += 1;
        };
        // The thread drains its own ring here: its handler (the producer)
        // interrupts the consumer, which the ring allows.
        ring.drain(&mut check).expect("the ring is not corrupt");
    }
    sampler.unregister_current_thread();
    sampler.stop();
    ring.drain(|payload| {
        decode_sample(payload).expect("every record decodes");
        records += 1;
    })
    .expect("the ring is not corrupt");
    let c = counters(seg, slot);
    assert_eq!(c.taken, records, "every sample taken was drained whole");
    assert!(c.lost_full > 0);
    assert!(
        truncated > 0,
        "recursions deeper than max_depth are cut short"
    );
    assert!(c.incomplete >= truncated);
    assert_eq!(ring.used(), 0);
}

#[test]
fn libraries_loaded_and_unloaded_while_sampling() {
    let _turn = one_at_a_time();
    let w = Arc::new(load_workload());
    let seg = segment(4, 1 << 18);
    let collector = Background::start(seg);
    let sampler = Sampler::start(config(None, Some(2000.0)), seg).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (sampler, w, stop) = (sampler.clone(), w.clone(), stop.clone());
        std::thread::spawn(move || {
            let slot = seg.claim_slot(gettid()).unwrap();
            sampler.register_current_thread(slot).unwrap();
            while !stop.load(Ordering::Relaxed) {
                (w.spin_ms)(5.0);
            }
            sampler.unregister_current_thread();
            seg.end_slot(slot);
        })
    };
    // A second copy of the library, loaded and unloaded over and over.
    let copy = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("libworkload-copy-{}.so", std::process::id()));
    std::fs::copy(workload_library(), &copy).unwrap();
    let copy = copy.to_str().unwrap().to_owned();
    let path = std::ffi::CString::new(copy.clone()).unwrap();
    let began = std::time::Instant::now();
    let mut rounds = 0;
    while rounds < 100 || began.elapsed() < Duration::from_millis(300) {
        rounds += 1;
        // SAFETY: loading our own library; nothing from it is kept.
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!h.is_null());
        // As the runtime does: rebuild after dlopen, leave the module out
        // before dlclose, rebuild after it.
        strobe_sampler::snapshot::rebuild(None);
        let module = strobe_sampler::modules()
            .into_iter()
            .find(|m| m.path == copy)
            .expect("the copy is in the snapshot");
        strobe_sampler::snapshot::rebuild(Some(module.text.clone()));
        assert!(!strobe_sampler::modules().iter().any(|m| m.path == copy));
        // SAFETY: the handle is live and nothing from it is in use.
        unsafe { libc::dlclose(h) };
        strobe_sampler::snapshot::rebuild(None);
    }
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    sampler.stop();
    let samples = collector.finish();
    let c = total_counters(seg);
    assert_eq!(c.taken as usize, samples.len());
    assert!(samples.len() > 50, "{} samples", samples.len());
    let complete = samples.iter().filter(|s| s.complete).count();
    assert!(
        nearly_all(complete, samples.len()),
        "{complete}/{} complete while modules came and went",
        samples.len()
    );
    assert!(!strobe_sampler::modules().iter().any(|m| m.path == copy));
    assert!(
        strobe_sampler::snapshot::modules_seen()
            .iter()
            .any(|m| m.path == copy),
        "the history keeps unloaded modules"
    );
}

#[test]
fn bad_configurations_are_refused() {
    let _turn = one_at_a_time();
    let seg = segment(4, 1 << 16);
    let (cpu_signal, _) = signals();
    let mut cfg = config(Some(100.0), Some(100.0));
    cfg.realtime.as_mut().unwrap().signal = cpu_signal;
    let err = Sampler::start(cfg, seg).err().unwrap();
    assert!(
        err.to_string()
            .contains(&format!("both use signal {cpu_signal}")),
        "{err}"
    );
    for hz in [0.0, -5.0, f64::NAN, f64::INFINITY] {
        let err = Sampler::start(config(Some(hz), None), seg).err().unwrap();
        assert!(err.to_string().contains("not positive"), "{hz}: {err}");
        let err = Sampler::start(config(None, Some(hz)), seg).err().unwrap();
        assert!(err.to_string().contains("not positive"), "{hz}: {err}");
    }
    for signal in [0, 65, 99] {
        let mut cfg = config(Some(100.0), None);
        cfg.cputime.as_mut().unwrap().signal = signal;
        let err = Sampler::start(cfg, seg).err().unwrap();
        assert!(err.to_string().contains("out of range"), "{signal}: {err}");
    }
}
