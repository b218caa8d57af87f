//! The sampler on real code: C built with -O2 -fomit-frame-pointer in a
//! shared library, real timers and signals, real threads.

mod common;

use common::*;
use std::sync::Arc;
use std::time::Duration;
use strobe_sampler::{Sampler, TimerClock};

fn leaf_name(k: &Kept) -> Option<String> {
    frame_symbol(&k.frames, 0)
}

#[test]
fn shares_match_cpu_time_and_stacks_are_complete_across_the_library_boundary() {
    let _turn = one_at_a_time();
    let w = load_workload();
    let sink = Arc::new(Collect::default());
    let sampler = Sampler::start(config(Some(250.0), Some(1000.0)), sink.clone()).unwrap();
    sampler.register_current_thread().unwrap();
    let (mut ns_a, mut ns_b) = (0u64, 0u64);
    (w.run_split)(1500.0, 0.7, &mut ns_a, &mut ns_b);
    sampler.unregister_current_thread();
    let stats = sampler.stop();
    let samples = sink.take();
    assert_eq!(stats.samples as usize, samples.len());
    let cpu: Vec<_> = samples
        .iter()
        .filter(|s| s.clock == TimerClock::ThreadCpu)
        .collect();
    let real: Vec<_> = samples
        .iter()
        .filter(|s| s.clock == TimerClock::Realtime)
        .collect();
    assert!(cpu.len() > 150, "CPU-time samples: {}", cpu.len());
    assert!(real.len() > 300, "real-time samples: {}", real.len());

    let me = strobe_core::thread::gettid();
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
        complete_all * 100 >= samples.len() * 99,
        "{complete_all} of {} samples reach the root",
        samples.len()
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
        complete * 100 >= through.len() * 99,
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
    let sink = Arc::new(Collect::default());
    let sampler = Sampler::start(config(None, Some(1000.0)), sink.clone()).unwrap();
    sampler.register_current_thread().unwrap();
    (w.recurse)(200, 400.0);
    sampler.unregister_current_thread();
    sampler.stop();
    let deep: Vec<_> = sink
        .take()
        .into_iter()
        .filter(|s| {
            s.frames
                .iter()
                .skip(1)
                .any(|&f| common::symbol(f - 1).as_deref() == Some("recurse"))
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
                    .filter(|&&f| common::symbol(f - 1).as_deref() == Some("recurse"))
                    .count()
                    == 201
        })
        .count();
    assert!(
        whole * 100 >= deep.len() * 99,
        "{whole} of {} samples hold all 201 recurse frames",
        deep.len()
    );
}

#[test]
fn threads_sampled_in_waves_across_several_allocators() {
    let _turn = one_at_a_time();
    let w = Arc::new(load_workload());
    let sink = Arc::new(Collect::default());
    let mut cfg = config(None, Some(500.0));
    cfg.allocator_size = 4;
    let sampler = Sampler::start(cfg, sink.clone()).unwrap();
    let mut tids = Vec::new();
    for _wave in 0..4 {
        let handles: Vec<_> = (0..16)
            .map(|_| {
                let sampler = sampler.clone();
                let w = w.clone();
                std::thread::spawn(move || {
                    sampler.register_current_thread().unwrap();
                    (w.spin_ms)(60.0);
                    sampler.unregister_current_thread();
                    strobe_core::thread::gettid()
                })
            })
            .collect();
        tids.extend(handles.into_iter().map(|h| h.join().unwrap()));
    }
    let stats = sampler.stop();
    let samples = sink.take();
    assert_eq!(stats.threads, 64);
    assert_eq!(
        stats.samples as usize,
        samples.len(),
        "every sample delivered once"
    );
    assert!(samples.iter().all(|s| tids.contains(&s.tid)));
    let sampled_threads: std::collections::HashSet<_> = samples.iter().map(|s| s.tid).collect();
    assert!(
        sampled_threads.len() >= 60,
        "{} of 64 threads sampled",
        sampled_threads.len()
    );
    let complete = samples.iter().filter(|s| s.complete).count();
    assert!(
        complete * 100 >= samples.len() * 99,
        "{complete}/{} complete (thread start reached)",
        samples.len()
    );
}

#[test]
fn a_thread_older_than_the_sampler_is_registered_by_tid() {
    let _turn = one_at_a_time();
    let w = Arc::new(load_workload());
    let (tx, rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let worker = {
        let w = w.clone();
        std::thread::spawn(move || {
            tx.send(strobe_core::thread::gettid()).unwrap();
            go_rx.recv().unwrap();
            (w.spin_ms)(300.0);
        })
    };
    let tid = rx.recv().unwrap();
    let sink = Arc::new(Collect::default());
    let sampler = Sampler::start(config(Some(250.0), None), sink.clone()).unwrap();
    sampler.register_thread(tid).unwrap();
    go_tx.send(()).unwrap();
    worker.join().unwrap();
    sampler.unregister(tid);
    sampler.stop();
    let samples = sink.take();
    assert!(samples.len() > 40, "{} samples", samples.len());
    assert!(samples.iter().all(|s| s.tid == tid));
    let complete = samples.iter().filter(|s| s.complete).count();
    assert!(
        complete * 100 >= samples.len() * 99,
        "{complete}/{} complete via the memory map",
        samples.len()
    );
}

#[test]
fn pause_stops_samples_and_resume_restarts_them() {
    let _turn = one_at_a_time();
    let w = load_workload();
    let sink = Arc::new(Collect::default());
    let sampler = Sampler::start(config(None, Some(1000.0)), sink.clone()).unwrap();
    sampler.register_current_thread().unwrap();
    (w.spin_ms)(100.0);
    sampler.pause();
    let paused_at = strobe_core::clock::now_ns();
    (w.spin_ms)(200.0);
    let resumed_at = strobe_core::clock::now_ns();
    sampler.resume();
    (w.spin_ms)(100.0);
    sampler.unregister_current_thread();
    sampler.stop();
    let samples = sink.take();
    // A signal already queued when pausing may still land within a millisecond.
    let during = samples
        .iter()
        .filter(|s| s.timestamp_ns > paused_at + 2_000_000 && s.timestamp_ns < resumed_at)
        .count();
    assert_eq!(during, 0);
    assert!(
        samples
            .iter()
            .filter(|s| s.timestamp_ns >= resumed_at)
            .count()
            > 10
    );
    assert!(
        samples
            .iter()
            .filter(|s| s.timestamp_ns < paused_at)
            .count()
            > 10
    );
}

#[test]
fn delay_and_duration_bound_the_sampling_window() {
    let _turn = one_at_a_time();
    let w = load_workload();
    let sink = Arc::new(Collect::default());
    let mut cfg = config(None, Some(1000.0));
    let t = cfg.realtime.as_mut().unwrap();
    t.delay_ns = 150_000_000;
    t.duration_ns = 150_000_000;
    let start = strobe_core::clock::now_ns();
    let sampler = Sampler::start(cfg, sink.clone()).unwrap();
    sampler.register_current_thread().unwrap();
    (w.spin_ms)(500.0);
    sampler.unregister_current_thread();
    sampler.stop();
    let samples = sink.take();
    assert!(samples.len() > 5, "{}", samples.len());
    // Timers are armed only once the delay has passed, so nothing comes
    // early (a tick of slack). They are disarmed by the allocator's control
    // loop (every 10 ms), which a loaded machine can delay: allow 150 ms
    // there; the run lasts at least 500 ms, so sampling must have stopped
    // well before its end.
    for s in &samples {
        let at = s.timestamp_ns - start;
        assert!(
            at + 5_000_000 >= 150_000_000 && at <= 450_000_000,
            "sample at {} ms",
            at / 1_000_000
        );
    }
}

#[test]
fn temporary_files_hold_samples_until_stop() {
    let _turn = one_at_a_time();
    let w = load_workload();
    let sink = Arc::new(Collect::default());
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(None, Some(1000.0));
    cfg.temp_dir = Some(dir.path().to_path_buf());
    let sampler = Sampler::start(cfg, sink.clone()).unwrap();
    sampler.register_current_thread().unwrap();
    (w.spin_ms)(200.0);
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        sink.0.lock().unwrap().is_empty(),
        "nothing delivered before stop"
    );
    sampler.unregister_current_thread();
    let stats = sampler.stop();
    let samples = sink.take();
    assert!(samples.len() > 100);
    assert_eq!(stats.samples as usize, samples.len());
    assert!(samples
        .windows(2)
        .all(|p| p[0].timestamp_ns <= p[1].timestamp_ns));
}

#[test]
fn libraries_loaded_and_unloaded_while_sampling() {
    let _turn = one_at_a_time();
    let w = Arc::new(load_workload());
    let sink = Arc::new(Collect::default());
    let sampler = Sampler::start(config(None, Some(2000.0)), sink.clone()).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = {
        let (sampler, w, stop) = (sampler.clone(), w.clone(), stop.clone());
        std::thread::spawn(move || {
            sampler.register_current_thread().unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                (w.spin_ms)(5.0);
            }
            sampler.unregister_current_thread();
        })
    };
    // A second copy of the library, loaded and unloaded over and over.
    let copy = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("libworkload-copy-{}.so", std::process::id()));
    std::fs::copy(workload_library(), &copy).unwrap();
    let path = std::ffi::CString::new(copy.to_str().unwrap()).unwrap();
    let began = std::time::Instant::now();
    let mut rounds = 0;
    while rounds < 100 || began.elapsed() < Duration::from_millis(300) {
        rounds += 1;
        // SAFETY: loading and unloading our own library, nothing kept.
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!h.is_null());
        sampler.modules_changed();
        assert!(strobe_sampler::modules()
            .iter()
            .any(|m| m.path == copy.to_str().unwrap()));
        // SAFETY: the handle is live and nothing from it is in use.
        unsafe { libc::dlclose(h) };
        sampler.modules_changed();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    worker.join().unwrap();
    let stats = sampler.stop();
    assert!(stats.samples > 50);
    assert!(!strobe_sampler::modules()
        .iter()
        .any(|m| m.path == copy.to_str().unwrap()));
}

#[test]
fn bad_configurations_are_refused() {
    let _turn = one_at_a_time();
    let sink = Arc::new(Collect::default());
    let mut cfg = config(Some(100.0), Some(100.0));
    cfg.realtime.as_mut().unwrap().signal = libc::SIGPROF;
    let err = Sampler::start(cfg, sink.clone()).err().unwrap();
    assert!(err.to_string().contains("both use signal 27"), "{err}");
    let err = Sampler::start(config(Some(0.0), None), sink.clone())
        .err()
        .unwrap();
    assert!(err.to_string().contains("not positive"));
    let mut cfg = config(Some(100.0), None);
    cfg.cputime.as_mut().unwrap().signal = 99;
    let err = Sampler::start(cfg, sink).err().unwrap();
    assert!(err.to_string().contains("out of range"), "{err}");
}
