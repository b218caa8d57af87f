//! Tests of contexts through the C entry points: counting a thread and a
//! process, derived metrics, groups in turn and the errors that name the
//! problem. They must never depend on hardware counters being present.

use super::Properties;
use super::*;
use crate::capi::status::last_error;
use crate::capi::types::{data_kind, feature_kind, flags, mode, target};
use std::ffi::{CStr, CString};

fn features(names: &[&CStr]) -> Vec<Feature> {
    names
        .iter()
        .map(|n| Feature {
            kind: feature_kind::METRIC,
            name: n.as_ptr(),
            parameters: std::ptr::null(),
            parameter_count: 0,
            data: Data::double(-1.0),
        })
        .collect()
}

/// Burns `ms` milliseconds of this thread's CPU time.
fn burn(ms: u64) {
    use strobe_core::clock::Clock;
    let end = Clock::ThreadCpu.read_ns() + ms * 1_000_000;
    let mut x = 0u64;
    while Clock::ThreadCpu.read_ns() < end {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

#[test]
fn counts_a_thread_and_derives_a_metric() {
    let mut f = features(&[c"task-clock", c"page-faults", c"cpu-utilisation"]);
    let mut ctx: *mut Context = std::ptr::null_mut();
    // SAFETY: a live feature array of C strings that outlives the context.
    let st = unsafe { strobe_metrics_open(f.as_mut_ptr(), 3, &mut ctx, 0, std::ptr::null()) };
    if st == Status::ERROR_UNAVAILABLE {
        eprintln!(
            "skipped: software perf events unavailable: {}",
            last_error().1
        );
        return;
    }
    assert_eq!(st, Status::SUCCESS, "{}", last_error().1);
    assert!(f.iter().all(|x| x.data.kind == data_kind::UNINIT));
    let mut n = 0;
    // SAFETY: `ctx` is open; `n` is writable.
    unsafe {
        assert_eq!(strobe_metrics_group_count(ctx, &mut n), Status::SUCCESS);
        assert_eq!(n, 1);
        assert_eq!(strobe_metrics_start(ctx, 0), Status::SUCCESS);
        burn(50);
        assert_eq!(strobe_metrics_get_data(ctx, 0), Status::SUCCESS);
        assert_eq!(strobe_metrics_get_metrics(ctx), Status::SUCCESS);
    }
    assert_eq!(f[0].data.kind, data_kind::INT64);
    let ns = f[0].data.as_f64().unwrap();
    assert!((40e6..2e9).contains(&ns), "task-clock {ns}");
    assert_eq!(f[2].data.kind, data_kind::DOUBLE);
    let util = f[2].data.as_f64().unwrap();
    assert!(util > 0.0 && util < 1.5, "cpu-utilisation {util}");
    // SAFETY: `ctx` is open, then closed; the second close is checked.
    unsafe {
        assert_eq!(strobe_metrics_close(ctx), Status::SUCCESS);
        assert_eq!(strobe_metrics_close(ctx), Status::ERROR_INVALID_ARGUMENT);
        assert_eq!(strobe_metrics_start(ctx, 0), Status::ERROR_INVALID_ARGUMENT);
    }
    assert!(last_error().1.contains("not an open context"));
}

#[test]
fn open_errors_name_the_problem() {
    let mut ctx: *mut Context = std::ptr::null_mut();
    let mut f = features(&[c"task-clock", c"no-such-counter-xyz"]);
    // SAFETY: live arrays of C strings.
    let st = unsafe { strobe_metrics_open(f.as_mut_ptr(), 2, &mut ctx, 0, std::ptr::null()) };
    assert_eq!(st, Status::ERROR_UNKNOWN_FEATURE);
    let msg = last_error().1;
    assert!(
        msg.starts_with("strobe_metrics_open: feature `no-such-counter-xyz`"),
        "{msg}"
    );
    assert!(ctx.is_null());

    f[1].kind = feature_kind::TRACE;
    // SAFETY: as above.
    let st = unsafe { strobe_metrics_open(f.as_mut_ptr(), 2, &mut ctx, 0, std::ptr::null()) };
    assert_eq!(st, Status::ERROR_NOT_SUPPORTED);

    let mut f = features(&[c"task-clock"]);
    let p = FeatureParameterHolder::new();
    f[0].parameters = &p.0;
    f[0].parameter_count = 1;
    // SAFETY: as above.
    let st = unsafe { strobe_metrics_open(f.as_mut_ptr(), 1, &mut ctx, 0, std::ptr::null()) };
    assert_eq!(st, Status::ERROR_NOT_SUPPORTED);

    let mut f = features(&[c"task-clock"]);
    // SAFETY: as above; null and bad arguments are checked.
    unsafe {
        assert_eq!(
            strobe_metrics_open(f.as_mut_ptr(), 0, &mut ctx, 0, std::ptr::null()),
            Status::ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            strobe_metrics_open(f.as_mut_ptr(), 1, std::ptr::null_mut(), 0, std::ptr::null()),
            Status::ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            strobe_metrics_open(f.as_mut_ptr(), 1, &mut ctx, 64, std::ptr::null()),
            Status::ERROR_INVALID_ARGUMENT
        );
        let props = Properties {
            reserved: [0, 1, 0, 0],
            ..Properties::default()
        };
        assert_eq!(
            strobe_metrics_open(f.as_mut_ptr(), 1, &mut ctx, 0, &props),
            Status::ERROR_INVALID_ARGUMENT
        );
        let props = Properties {
            flags: flags::INHERIT,
            ..Properties::default()
        };
        assert_eq!(
            strobe_metrics_open(f.as_mut_ptr(), 1, &mut ctx, 0, &props),
            Status::ERROR_INVALID_ARGUMENT
        );
        assert!(last_error().1.contains("TARGET_PROCESS"));
    }
}

#[test]
fn unavailable_counters_name_the_feature_that_needs_them() {
    let mut f = features(&[c"IPC"]);
    let mut ctx: *mut Context = std::ptr::null_mut();
    // SAFETY: a live feature array of C strings.
    let st = unsafe { strobe_metrics_open(f.as_mut_ptr(), 1, &mut ctx, 0, std::ptr::null()) };
    if st == Status::SUCCESS {
        eprintln!("this machine counts instructions and cycles; nothing to check");
        // SAFETY: `ctx` was just opened.
        unsafe { strobe_metrics_close(ctx) };
        return;
    }
    assert_eq!(st, Status::ERROR_UNAVAILABLE);
    let msg = last_error().1;
    assert!(msg.contains("feature `IPC` needs `"), "{msg}");
}

#[test]
fn process_target_with_inherit_and_soft_counters() {
    let mut f = features(&[
        c"task-clock",
        c"rusage/user-time/",
        c"duration_time",
        c"rusage/system-time/",
    ]);
    let mut ctx: *mut Context = std::ptr::null_mut();
    let props = Properties {
        target: target::PROCESS,
        flags: flags::INHERIT,
        ..Properties::default()
    };
    // SAFETY: live arrays of C strings; `ctx` used only when open.
    unsafe {
        let st = strobe_metrics_open(f.as_mut_ptr(), 4, &mut ctx, mode::SINGLEGROUP, &props);
        if st == Status::ERROR_UNAVAILABLE {
            eprintln!("skipped: {}", last_error().1);
            return;
        }
        assert_eq!(st, Status::SUCCESS, "{}", last_error().1);
        let mut n = 0;
        assert_eq!(strobe_metrics_group_count(ctx, &mut n), Status::SUCCESS);
        assert_eq!(n, 1);
        assert_eq!(strobe_metrics_start(ctx, ALL_GROUPS), Status::SUCCESS);
        std::thread::spawn(|| burn(40)).join().unwrap();
        assert_eq!(strobe_metrics_stop(ctx, ALL_GROUPS), Status::SUCCESS);
        assert_eq!(strobe_metrics_read(ctx, ALL_GROUPS), Status::SUCCESS);
        assert_eq!(strobe_metrics_close(ctx), Status::SUCCESS);
    }
    // task-clock follows the main thread and the threads it creates
    // (not this test's thread); rusage covers every thread.
    assert_eq!(f[0].data.kind, data_kind::INT64);
    // (The kernel splits CPU time into user and system by tick samples.)
    let cpu = f[1].data.as_f64().unwrap() + f[3].data.as_f64().unwrap();
    assert!(cpu >= 30e6, "rusage CPU time {cpu}");
    assert_eq!(f[2].data.kind, data_kind::INT64);
    assert!(f[2].data.as_f64().unwrap() >= 40e6);
}

struct FeatureParameterHolder(crate::capi::types::FeatureParameter);
impl FeatureParameterHolder {
    fn new() -> Self {
        FeatureParameterHolder(Default::default())
    }
}

#[test]
fn groups_are_checked_and_counted_in_turn() {
    let names = [
        CString::new("task-clock").unwrap(),
        CString::new("page-faults").unwrap(),
    ];
    let mut f = features(&[names[0].as_c_str(), names[1].as_c_str()]);
    let mut ctx: *mut Context = std::ptr::null_mut();
    let props = Properties {
        max_slots: 1,
        ..Properties::default()
    };
    // SAFETY: live arrays of C strings; `ctx` used only when open.
    unsafe {
        let st = strobe_metrics_open(f.as_mut_ptr(), 2, &mut ctx, mode::SINGLEGROUP, &props);
        if st == Status::ERROR_UNAVAILABLE {
            eprintln!("skipped: {}", last_error().1);
            return;
        }
        assert_eq!(st, Status::ERROR_GROUPS);
        let msg = last_error().1;
        assert!(msg.contains("need 2 groups"), "{msg}");
        assert!(msg.contains("group 1: page-faults"), "{msg}");

        assert_eq!(
            strobe_metrics_open(f.as_mut_ptr(), 2, &mut ctx, 0, &props),
            Status::SUCCESS
        );
        let mut n = 0;
        assert_eq!(strobe_metrics_group_count(ctx, &mut n), Status::SUCCESS);
        assert_eq!(n, 2);
        let mut g = Group::EMPTY;
        assert_eq!(strobe_metrics_get_group(ctx, 1, &mut g), Status::SUCCESS);
        assert_eq!((g.index, g.feature_count, g.context), (1, 1, ctx));
        assert_eq!(*g.features, f.as_mut_ptr().add(1));
        assert_eq!(
            strobe_metrics_get_group(ctx, 2, &mut g),
            Status::ERROR_INVALID_ARGUMENT
        );
        assert!(last_error().1.contains("has 2 groups"));
        // In turn: group 0 alone leaves group 1 without a value.
        assert_eq!(strobe_metrics_start(ctx, 0), Status::SUCCESS);
        burn(10);
        assert_eq!(strobe_metrics_get_data(ctx, 0), Status::SUCCESS);
        assert_eq!(f[0].data.kind, data_kind::INT64);
        assert_eq!(f[1].data.kind, data_kind::UNINIT);
        assert_eq!(strobe_metrics_group_start(&mut g), Status::SUCCESS);
        let v: Vec<u8> = vec![1; 1 << 20];
        std::hint::black_box(&v);
        assert_eq!(strobe_metrics_group_get_data(&mut g), Status::SUCCESS);
        assert_eq!(f[1].data.kind, data_kind::INT64);
        assert_eq!(strobe_metrics_close(ctx), Status::SUCCESS);
    }
}
