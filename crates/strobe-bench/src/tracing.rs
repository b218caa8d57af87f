//! `strobe-bench tracing`: the seed 004 performance harness for
//! `strobe-trace` (same options and report as upstream's `run_test`).
//!
//! Semantic tests check the string table, events and notification counts
//! and print pass rates; performance tests measure the cost of each
//! framework operation and project events/second at a given overhead. This
//! module only measures and prints: it never asserts a timing.

use std::ffi::c_void;
use std::hint::black_box;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use strobe_trace::types::{activity, event_type, trace_point, StreamId};
use strobe_trace::{EventData, Framework, PayloadSpec};

/// Which family of tests to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TestType {
    /// Correctness of string table, events and notifications, with pass rates.
    Semantic,
    /// Cost of each operation and events/second projections.
    Performance,
}

/// Options of `strobe-bench tracing` (those of the seed's `run_test`).
#[derive(Debug, Args)]
pub struct TracingArgs {
    /// Number of trace points to create (10..=100000).
    #[arg(short = 't', long = "trace-points")]
    trace_points: usize,
    /// Test family: semantic or performance.
    #[arg(short = 'y', long = "type", value_enum)]
    test_type: TestType,
    /// Tests to run: a list "1,2,3" or a range "1:3:1" (start:end:step, inclusive).
    /// Semantic: 1 strings, 2 trace-point events, 3 notifications.
    /// Performance: 1 data structures, 2 instrumentation (composite cost and projections).
    #[arg(short = 'i', long = "test-id")]
    test_id: String,
    /// Thread counts: a list "0,1,2,4" or ranges "0:2:1,4:16:4"; 0 means serial
    /// (the calling thread).
    #[arg(short = 'n', long = "num-threads")]
    num_threads: String,
    /// Trace-point creation frequency in percent: each trace point is visited
    /// 100/f times.
    #[arg(short = 'f', long = "tp-frequency", default_value_t = 10.0)]
    tp_frequency: f64,
    /// Overhead budget in percent used for the events/second projection.
    #[arg(long = "overhead", default_value_t = 1.0)]
    overhead: f64,
}

/// Parses "1,2,5" and "a:b:s" items (inclusive ranges) into a list.
pub fn parse_list(spec: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parts: Vec<&str> = item.split(':').collect();
        match parts.as_slice() {
            [one] => out.push(
                one.parse()
                    .with_context(|| format!("`{item}` is not a number"))?,
            ),
            [a, b] | [a, b, _] => {
                let a: usize = a
                    .parse()
                    .with_context(|| format!("bad range start in `{item}`"))?;
                let b: usize = b
                    .parse()
                    .with_context(|| format!("bad range end in `{item}`"))?;
                let step: usize = match parts.get(2) {
                    Some(s) => s
                        .parse()
                        .with_context(|| format!("bad range step in `{item}`"))?,
                    None => 1,
                };
                if step == 0 || b < a {
                    bail!("range `{item}` must be start:end:step with start <= end and step > 0");
                }
                out.extend((a..=b).step_by(step));
            }
            _ => bail!("`{item}` is neither a number nor start:end:step"),
        }
    }
    if out.is_empty() {
        bail!("empty list `{spec}`: give e.g. 1,2 or 1:3:1");
    }
    Ok(out)
}

/// Entry point of the subcommand.
pub fn run(args: TracingArgs) -> Result<()> {
    if !(10..=100_000).contains(&args.trace_points) {
        bail!(
            "--trace-points must be in 10..=100000 (got {})",
            args.trace_points
        );
    }
    if !(args.tp_frequency > 0.0 && args.tp_frequency <= 100.0) {
        bail!(
            "--tp-frequency is a percentage in (0, 100] (got {})",
            args.tp_frequency
        );
    }
    if !(args.overhead > 0.0 && args.overhead <= 100.0) {
        bail!(
            "--overhead is a percentage in (0, 100] (got {})",
            args.overhead
        );
    }
    let tests = parse_list(&args.test_id)?;
    let threads = parse_list(&args.num_threads)?;
    let data = Data::new(args.trace_points, args.tp_frequency);
    match args.test_type {
        TestType::Semantic => {
            for t in tests {
                match t {
                    1 => semantic_strings(&data, &threads),
                    2 => semantic_events(&data, &threads),
                    3 => semantic_notifications(&data, &threads),
                    _ => bail!(
                        "semantic test ids are 1 (strings), 2 (events), 3 (notifications); got {t}"
                    ),
                }
            }
        }
        TestType::Performance => {
            for t in tests {
                match t {
                    1 => perf_data_structures(&data, &threads),
                    2 => perf_instrumentation(&data, &threads, args.overhead),
                    _ => bail!("performance test ids are 1 (data structures), 2 (instrumentation); got {t}"),
                }
            }
            perf_extras(&data);
            perf_c_abi();
        }
    }
    Ok(())
}

/// Inputs prepared before any timing: strings, payload parts, visit order.
struct Data {
    n: usize,
    visits_per_tp: usize,
    strings: Vec<String>,
    names: Vec<String>,
    files: Vec<String>,
    /// Random permutation-like visit sequence of length n * visits_per_tp.
    visits: Vec<u32>,
    /// Random lookup order over 0..n, length 2n.
    lookups: Vec<u32>,
}

/// xorshift64*: deterministic, allocation-free index shuffling.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

impl Data {
    fn new(n: usize, freq: f64) -> Self {
        let visits_per_tp = ((100.0 / freq).round() as usize).max(1);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let visits = (0..n * visits_per_tp)
            .map(|_| (rng.next() % n as u64) as u32)
            .collect();
        let lookups = (0..2 * n).map(|_| (rng.next() % n as u64) as u32).collect();
        Data {
            n,
            visits_per_tp,
            strings: (0..n).map(|i| format!("string_table_entry_{i}")).collect(),
            names: (0..n).map(|i| format!("function_{i}")).collect(),
            files: (0..100)
                .map(|i| format!("src/module_{i}/file_{i}.cpp"))
                .collect(),
            visits,
            lookups,
        }
    }

    fn spec(&self, i: usize) -> PayloadSpec<'_> {
        PayloadSpec::at(
            &self.names[i],
            &self.files[i % 100],
            i as u32 + 1,
            (i % 80) as u32,
        )
    }
}

/// CPU time of the calling thread in ns. Per-operation costs use it rather
/// than wall time so that a loaded machine (time slices given to other
/// processes) does not inflate them.
fn thread_cpu_ns() -> u64 {
    strobe_core::clock::read_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Splits `0..total` across `threads` (0 = serial on this thread), runs `f`
/// on each chunk after a barrier, and returns (sum of per-thread CPU ns,
/// wall ns).
fn run_split<F>(threads: usize, total: usize, f: F) -> (u128, u128)
where
    F: Fn(Range<usize>) + Sync,
{
    if threads == 0 {
        let wall = Instant::now();
        let t = thread_cpu_ns();
        f(0..total);
        let e = (thread_cpu_ns() - t) as u128;
        return (e, wall.elapsed().as_nanos());
    }
    let barrier = Barrier::new(threads);
    let chunk = total.div_ceil(threads);
    let wall = Instant::now();
    let per: Vec<u128> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|k| {
                let r = (k * chunk).min(total)..((k + 1) * chunk).min(total);
                let (f, barrier) = (&f, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let t = thread_cpu_ns();
                    f(r);
                    (thread_cpu_ns() - t) as u128
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("bench thread"))
            .collect()
    });
    (per.iter().sum(), wall.elapsed().as_nanos())
}

fn per_op(ns: u128, ops: usize) -> f64 {
    ns as f64 / ops.max(1) as f64
}

fn thread_label(t: usize) -> String {
    if t == 0 {
        "serial".into()
    } else {
        t.to_string()
    }
}

unsafe extern "C" fn noop_callback(
    _t: u16,
    _p: *mut EventData,
    _e: *mut EventData,
    _i: u64,
    _u: *const c_void,
) {
}

/// A framework with `n` unique events made (returns their unique ids).
fn populated(data: &Data) -> (Framework, StreamId, Vec<u64>) {
    let fw = Framework::new();
    let s = fw.register_stream(b"bench.stream").expect("stream");
    let uids = (0..data.n)
        .map(|i| {
            fw.make_event(&data.spec(i), event_type::ALGORITHM, activity::ACTIVE)
                .expect("event")
                .0
                .unique_id()
        })
        .collect();
    (fw, s, uids)
}

// ---- semantic tests ------------------------------------------------------

fn print_pass(title: &str, rows: &[(usize, usize, usize)]) {
    println!("\n{title}");
    println!(
        "{:>8} | {:>10} | {:>10} | {:>9}",
        "Threads", "Checks", "Passed", "Pass rate"
    );
    for &(t, checks, passed) in rows {
        println!(
            "{:>8} | {:>10} | {:>10} | {:>8.2}%",
            thread_label(t),
            checks,
            passed,
            100.0 * passed as f64 / checks.max(1) as f64
        );
    }
}

fn semantic_strings(data: &Data, threads: &[usize]) {
    let mut rows = Vec::new();
    let count = data.n.min(1000);
    for &t in threads {
        let fw = Framework::new();
        let ids: Vec<AtomicU64> = (0..count).map(|_| AtomicU64::new(u64::MAX)).collect();
        let passed = AtomicU64::new(0);
        let checks = AtomicU64::new(0);
        // Every thread inserts every string: ids must agree.
        let workers = t.max(1);
        run_split(t, workers, |r| {
            for _ in r {
                for (i, s) in data.strings[..count].iter().enumerate() {
                    let (id, stored) = fw.register_string(s.as_bytes()).expect("insert");
                    let prev = ids[i].compare_exchange(
                        u64::MAX,
                        id as u64,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                    let mut ok = prev.is_ok() || prev == Err(id as u64);
                    ok &= stored.to_bytes() == s.as_bytes();
                    ok &= fw.lookup_string(id).map(|c| c.as_ptr()) == Some(stored.as_ptr());
                    let (id2, stored2) = fw.register_string(s.as_bytes()).expect("again");
                    ok &= id2 == id && stored2.as_ptr() == stored.as_ptr();
                    checks.fetch_add(1, Ordering::Relaxed);
                    passed.fetch_add(ok as u64, Ordering::Relaxed);
                }
            }
        });
        let distinct: std::collections::HashSet<u64> =
            ids.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        let ok_distinct = distinct.len() == count && fw.strings().len() == count;
        rows.push((
            t,
            checks.into_inner() as usize + 1,
            passed.into_inner() as usize + ok_distinct as usize,
        ));
    }
    print_pass(
        &format!("Semantic test 1: string table ({} strings)", count),
        &rows,
    );
}

fn semantic_events(data: &Data, threads: &[usize]) {
    let mut rows = Vec::new();
    for &t in threads {
        let fw = Framework::new();
        let uids: Vec<AtomicU64> = (0..data.n).map(|_| AtomicU64::new(0)).collect();
        let checks = AtomicU64::new(0);
        let passed = AtomicU64::new(0);
        let workers = t.max(1);
        run_split(t, workers, |r| {
            for _ in r {
                for (i, slot) in uids.iter().enumerate() {
                    let spec = data.spec(i);
                    let (e1, i1) = fw
                        .make_event(&spec, event_type::ALGORITHM, activity::ACTIVE)
                        .expect("make");
                    let (e2, i2) = fw
                        .make_event(&spec, event_type::ALGORITHM, activity::ACTIVE)
                        .expect("make");
                    let uid = e1.unique_id();
                    let prev = slot.compare_exchange(0, uid, Ordering::Relaxed, Ordering::Relaxed);
                    let mut ok = std::ptr::eq(e1, e2) && i2 > i1;
                    ok &= prev.is_ok() || prev == Err(uid);
                    ok &= fw.find_event(uid).is_some_and(|f| std::ptr::eq(f, e1));
                    ok &= fw.register_payload(&spec).ok() == Some(uid);
                    let p = fw.query_payload(uid);
                    ok &= p.and_then(|p| p.name()).map(|c| c.to_bytes())
                        == Some(data.names[i].as_bytes());
                    ok &= p.and_then(|p| p.line()) == Some(i as u32 + 1);
                    checks.fetch_add(1, Ordering::Relaxed);
                    passed.fetch_add(ok as u64, Ordering::Relaxed);
                }
            }
        });
        // Instance numbers: every event visited 2 × workers times in all.
        let mut inst_ok = 0;
        for u in &uids {
            let e = fw.find_event(u.load(Ordering::Relaxed));
            inst_ok += e.is_some_and(|e| e.instance() == 2 * workers as u64) as usize;
        }
        rows.push((
            t,
            checks.into_inner() as usize + data.n,
            passed.into_inner() as usize + inst_ok,
        ));
    }
    print_pass(
        &format!("Semantic test 2: trace-point events ({} payloads)", data.n),
        &rows,
    );
}

fn semantic_notifications(data: &Data, threads: &[usize]) {
    let mut rows = Vec::new();
    for &t in threads {
        let (fw, s, uids) = populated(data);
        let counts: Arc<Vec<AtomicU64>> =
            Arc::new((0..=data.n).map(|_| AtomicU64::new(0)).collect());
        let c2 = counts.clone();
        fw.register_callback(s, trace_point::TASK_BEGIN, move |n| {
            if let Some(e) = n.event {
                c2[e.unique_id() as usize].fetch_add(1, Ordering::Relaxed);
            }
        })
        .expect("callback");
        let events: Vec<&EventData> = uids
            .iter()
            .map(|u| fw.find_event(*u).expect("event"))
            .collect();
        let total = data.visits.len();
        run_split(t, total, |r| {
            for v in r {
                let e = events[data.visits[v] as usize];
                let _ = fw.notify(
                    s,
                    trace_point::TASK_BEGIN,
                    None,
                    Some(e),
                    1,
                    std::ptr::null(),
                );
            }
        });
        // Expected count per event from the visit sequence.
        let mut expected = vec![0u64; data.n];
        for &v in &data.visits {
            expected[v as usize] += 1;
        }
        let passed = (0..data.n)
            .filter(|&i| counts[uids[i] as usize].load(Ordering::Relaxed) == expected[i])
            .count();
        rows.push((t, data.n, passed));
    }
    print_pass(
        &format!(
            "Semantic test 3: notifications ({} events, {} notifications)",
            data.n,
            data.visits.len()
        ),
        &rows,
    );
}

// ---- performance tests ---------------------------------------------------

struct DsRow {
    threads: usize,
    insert: f64,
    lookup: f64,
    insert_lookup: f64,
    create_unique: f64,
    create_repeat: f64,
    find_uid: f64,
    cached: f64,
    notify: f64,
}

fn perf_data_structures(data: &Data, threads: &[usize]) {
    let mut rows = Vec::new();
    for &t in threads {
        // String insert (fresh table), then 2n random lookups.
        let fw = Framework::new();
        let ids: Vec<AtomicU64> = (0..data.n).map(|_| AtomicU64::new(0)).collect();
        let (ins_ns, _) = run_split(t, data.n, |r| {
            for i in r {
                let (id, _) = fw
                    .register_string(data.strings[i].as_bytes())
                    .expect("insert");
                ids[i].store(id as u64, Ordering::Relaxed);
            }
        });
        let ids: Vec<u32> = ids
            .iter()
            .map(|a| a.load(Ordering::Relaxed) as u32)
            .collect();
        let (look_ns, _) = run_split(t, data.lookups.len(), |r| {
            for k in r {
                black_box(fw.lookup_string(ids[data.lookups[k] as usize]));
            }
        });
        // Unique creation (fresh framework).
        let fw = Framework::new();
        let s = fw.register_stream(b"bench").expect("stream");
        let (uniq_ns, _) = run_split(t, data.n, |r| {
            for i in r {
                black_box(
                    fw.make_event(&data.spec(i), event_type::ALGORITHM, activity::ACTIVE)
                        .expect("make"),
                );
            }
        });
        let uids: Vec<u64> = (0..data.n)
            .map(|i| fw.register_payload(&data.spec(i)).expect("payload"))
            .collect();
        // Repeated creation over the visit sequence.
        let (rep_ns, _) = run_split(t, data.visits.len(), |r| {
            for v in r {
                let i = data.visits[v] as usize;
                black_box(
                    fw.make_event(&data.spec(i), event_type::ALGORITHM, activity::ACTIVE)
                        .expect("make"),
                );
            }
        });
        // Lookup by unique id.
        let (find_ns, _) = run_split(t, data.visits.len(), |r| {
            for v in r {
                black_box(fw.find_event(uids[data.visits[v] as usize]));
            }
        });
        // Cached event: the instrumentation keeps the pointer.
        let cached: Vec<&EventData> = uids
            .iter()
            .map(|u| fw.find_event(*u).expect("event"))
            .collect();
        let (cache_ns, _) = run_split(t, data.visits.len(), |r| {
            for v in r {
                black_box(cached[data.visits[v] as usize]);
            }
        });
        // Notification with one registered no-op callback.
        fw.register_raw_callback(s, trace_point::TASK_BEGIN, noop_callback)
            .expect("callback");
        let (notify_ns, _) = run_split(t, data.visits.len(), |r| {
            for v in r {
                let e = cached[data.visits[v] as usize];
                let _ = black_box(fw.notify(
                    s,
                    trace_point::TASK_BEGIN,
                    None,
                    Some(e),
                    v as u64,
                    std::ptr::null(),
                ));
            }
        });
        let insert = per_op(ins_ns, data.n);
        let lookup = per_op(look_ns, data.lookups.len());
        rows.push(DsRow {
            threads: t,
            insert,
            lookup,
            insert_lookup: (insert + 2.0 * lookup) / 3.0,
            create_unique: per_op(uniq_ns, data.n),
            create_repeat: per_op(rep_ns, data.visits.len()),
            find_uid: per_op(find_ns, data.visits.len()),
            cached: per_op(cache_ns, data.visits.len()),
            notify: per_op(notify_ns, data.visits.len()),
        });
    }
    println!(
        "\nPerformance test 1: data structures ({} trace points, {} visits each; thread CPU ns per operation)",
        data.n, data.visits_per_tp
    );
    let header = [
        ("String insert", data.n),
        ("String lookup", data.lookups.len()),
        ("String insert/lookup", data.n + data.lookups.len()),
        ("TP create (unique)", data.n),
        ("TP create (repeated)", data.visits.len()),
        ("TP lookup by uid", data.visits.len()),
        ("TP cached event", data.visits.len()),
        ("TP notify (no-op cb)", data.visits.len()),
    ];
    print!("{:<22} | {:>8}", "Operation", "Count");
    for r in &rows {
        print!(" | {:>9}", thread_label(r.threads));
    }
    println!();
    for (k, (name, count)) in header.iter().enumerate() {
        print!("{:<22} | {:>8}", name, count);
        for r in &rows {
            let v = [
                r.insert,
                r.lookup,
                r.insert_lookup,
                r.create_unique,
                r.create_repeat,
                r.find_uid,
                r.cached,
                r.notify,
            ][k];
            print!(" | {:>9.2}", v);
        }
        println!();
    }
}

fn perf_instrumentation(data: &Data, threads: &[usize], overhead: f64) {
    println!(
        "\nPerformance test 2: instrumentation (composite: create {} unique trace points, then {} visits of lookup-by-uid + notify; cost per visit in ns)",
        data.n,
        data.visits.len()
    );
    println!(
        "{:>8} | {:>12} | {:>10} | {:>16} | {:>16} | {:>16} | {:>16}",
        "Threads",
        "FW cost (ns)",
        "Overhead",
        "Events/s Ct=10ns",
        "Events/s Ct=100",
        "Events/s Ct=500",
        "Events/s Ct=1000"
    );
    for &t in threads {
        let fw = Framework::new();
        let s = fw.register_stream(b"bench").expect("stream");
        fw.register_raw_callback(s, trace_point::TASK_BEGIN, noop_callback)
            .expect("callback");
        let uids: Vec<AtomicU64> = (0..data.n).map(|_| AtomicU64::new(0)).collect();
        let (create_ns, _) = run_split(t, data.n, |r| {
            for i in r {
                let (e, _) = fw
                    .make_event(&data.spec(i), event_type::ALGORITHM, activity::ACTIVE)
                    .expect("make");
                uids[i].store(e.unique_id(), Ordering::Relaxed);
            }
        });
        let uids: Vec<u64> = uids.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        let (visit_ns, _) = run_split(t, data.visits.len(), |r| {
            for v in r {
                let e = fw.find_event(uids[data.visits[v] as usize]);
                let _ = black_box(fw.notify(
                    s,
                    trace_point::TASK_BEGIN,
                    None,
                    e,
                    v as u64,
                    std::ptr::null(),
                ));
            }
        });
        let fw_cost = per_op(create_ns + visit_ns, data.visits.len());
        let factor = 100.0 / overhead;
        let ev = |ct: f64| 1e9 / (factor * (fw_cost + ct));
        println!(
            "{:>8} | {:>12.2} | {:>9.2}% | {:>16.0} | {:>16.0} | {:>16.0} | {:>16.0}",
            thread_label(t),
            fw_cost,
            overhead,
            ev(10.0),
            ev(100.0),
            ev(500.0),
            ev(1000.0)
        );
    }
}

/// Disabled-check cost and two-thread notify scaling (strobe additions).
fn perf_extras(data: &Data) {
    const ITERS: usize = 200_000_000;
    // Disabled check on the process-wide framework (no subscribers loaded:
    // disabled unless this process was started with XPTI_SUBSCRIBERS).
    let global_on = strobe_trace::trace_enabled();
    let t = thread_cpu_ns();
    let mut hits = 0usize;
    for _ in 0..ITERS {
        hits += black_box(strobe_trace::trace_enabled()) as usize;
    }
    let global_ns = per_op((thread_cpu_ns() - t) as u128, ITERS);
    let off = Framework::new();
    off.set_enabled(false);
    let t = thread_cpu_ns();
    for _ in 0..ITERS {
        hits += black_box(&off).is_enabled() as usize;
    }
    let local_ns = per_op((thread_cpu_ns() - t) as u128, ITERS);
    black_box(hits);
    println!("\nDisabled check ({} iterations)", ITERS);
    println!(
        "  strobe_trace::trace_enabled() (global, currently {}): {:.3} ns",
        if global_on { "enabled" } else { "disabled" },
        global_ns
    );
    println!(
        "  Framework::is_enabled() on a disabled framework:        {:.3} ns",
        local_ns
    );

    // Two threads notifying (each its own events) versus one.
    let (fw, s, uids) = populated(data);
    fw.register_raw_callback(s, trace_point::TASK_BEGIN, noop_callback)
        .expect("callback");
    let events: Vec<&EventData> = uids
        .iter()
        .map(|u| fw.find_event(*u).expect("event"))
        .collect();
    let per_thread = 20_000_000usize;
    let notify_loop = |offset: usize| {
        for v in 0..per_thread {
            let e = events[data.visits[(v + offset) % data.visits.len()] as usize];
            let _ = black_box(fw.notify(
                s,
                trace_point::TASK_BEGIN,
                None,
                Some(e),
                v as u64,
                std::ptr::null(),
            ));
        }
    };
    // Rate by wall time (what a user sees; needs idle cores) and by summed
    // per-thread CPU time (contention between the threads shows as more CPU
    // per notification, even when other processes share the cores).
    let best_of = |threads: usize| -> (f64, f64) {
        (0..3)
            .map(|_| {
                let (cpu, wall) = run_split(threads, threads, |r| {
                    for k in r {
                        notify_loop(k * 7919);
                    }
                });
                let ops = (threads * per_thread) as f64;
                (
                    ops / (wall as f64 / 1e9),
                    threads as f64 * ops / (cpu as f64 / 1e9),
                )
            })
            .fold((0.0, 0.0), |a, b| (a.0.max(b.0), a.1.max(b.1)))
    };
    let one = best_of(1);
    let two = best_of(2);
    println!(
        "\nNotify scaling ({} notifications per thread, best of 3)",
        per_thread
    );
    println!(
        "  1 thread : {:>8.1} M/s wall, {:>8.1} M/s by thread CPU time",
        one.0 / 1e6,
        one.1 / 1e6
    );
    println!(
        "  2 threads: {:>8.1} M/s wall ({:.2}x), {:>8.1} M/s by thread CPU time ({:.2}x)",
        two.0 / 1e6,
        two.0 / one.0,
        two.1 / 1e6,
        two.1 / one.1
    );
    println!(
        "  (machine: {} online CPUs, load average {})",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split(' ')
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}

/// Per-call costs through the exported XPTI C functions of
/// `libstrobe_xpti.so` (linked in as its rlib: the same functions a C
/// caller reaches through the PLT), on the process-wide framework.
fn perf_c_abi() {
    use std::ffi::CString;
    use strobe_xpti as x;
    const NOTIFIES: usize = 50_000_000;
    const CREATES: usize = 2_000_000;
    const NEW: usize = 10_000;
    x::xptiForceSetTraceEnabled(true);
    let stream = CString::new("bench.c_abi").unwrap();
    let name = CString::new("bench_task").unwrap();
    let file = CString::new("bench.cpp").unwrap();
    // SAFETY: NUL-terminated strings, a payload and an instance slot that
    // outlive the calls; the callback ignores its arguments.
    let (s, event) = unsafe {
        let s = x::xptiRegisterStream(stream.as_ptr());
        let _ = x::xptiRegisterCallback(s, trace_point::TASK_BEGIN, Some(noop_callback));
        let mut payload = strobe_trace::Payload {
            name: name.as_ptr(),
            source_file: file.as_ptr(),
            line_no: 1,
            column_no: 1,
            flags: strobe_trace::types::payload_flags::NAME
                | strobe_trace::types::payload_flags::SOURCE_FILE
                | strobe_trace::types::payload_flags::LINE,
            ..Default::default()
        };
        let mut instance = 0u64;
        let e = x::xptiMakeEvent(name.as_ptr(), &mut payload, 2, 1, &mut instance);
        (s, e)
    };
    let t = thread_cpu_ns();
    for i in 0..NOTIFIES {
        // SAFETY: a live framework event.
        black_box(unsafe {
            x::xptiNotifySubscribers(
                s,
                trace_point::TASK_BEGIN,
                std::ptr::null_mut(),
                event,
                i as u64,
                std::ptr::null(),
            )
        });
    }
    let notify_ns = per_op((thread_cpu_ns() - t) as u128, NOTIFIES);

    // The runtime deletes a tracepoint when its operation's scope ends: a
    // few are alive at a time. Creates and deletes run in batches of 64,
    // timed apart.
    const BATCH: usize = 64;
    let mut made = Vec::with_capacity(BATCH);
    let names: Vec<CString> = (0..NEW)
        .map(|i| CString::new(format!("kernel_{i}")).unwrap())
        .collect();
    let mut timed = |count: usize, name_of: &dyn Fn(usize) -> *const std::ffi::c_char| {
        let (mut create, mut delete) = (0u64, 0u64);
        for start in (0..count).step_by(BATCH) {
            let t = thread_cpu_ns();
            for i in start..(start + BATCH).min(count) {
                // SAFETY: NUL-terminated strings that outlive the call.
                made.push(unsafe {
                    x::xptiCreateTracepoint(name_of(i), file.as_ptr(), 7, 3, std::ptr::null_mut())
                });
            }
            let t2 = thread_cpu_ns();
            for tp in made.drain(..) {
                // SAFETY: tracepoints made above, deleted once.
                black_box(unsafe { x::xptiDeleteTracepoint(tp) });
            }
            create += t2 - t;
            delete += thread_cpu_ns() - t2;
        }
        (per_op(create as u128, count), per_op(delete as u128, count))
    };
    let (known_ns, delete_ns) = timed(CREATES, &|_| name.as_ptr());
    let (new_ns, _) = timed(NEW, &|i| names[i].as_ptr());
    println!("\nThrough the C ABI (libstrobe_xpti's exported functions, thread CPU time)");
    println!("  xptiNotifySubscribers, one no-op callback:   {notify_ns:>8.2} ns");
    println!("  xptiCreateTracepoint, known location:        {known_ns:>8.2} ns");
    println!("  xptiCreateTracepoint, new location:          {new_ns:>8.2} ns");
    println!("  xptiDeleteTracepoint:                        {delete_ns:>8.2} ns");
}

#[cfg(test)]
mod tests {
    use super::parse_list;

    #[test]
    fn lists_and_ranges() {
        assert_eq!(parse_list("1,2,3").unwrap(), vec![1, 2, 3]);
        assert_eq!(parse_list("1:3:1").unwrap(), vec![1, 2, 3]);
        assert_eq!(
            parse_list("0:2:1,4:16:4").unwrap(),
            vec![0, 1, 2, 4, 8, 12, 16]
        );
        assert_eq!(parse_list("0,1,2,4").unwrap(), vec![0, 1, 2, 4]);
        assert!(parse_list("").is_err());
        assert!(parse_list("3:1:1").is_err());
        assert!(parse_list("1:3:0").is_err());
        assert!(parse_list("x").is_err());
    }
}
