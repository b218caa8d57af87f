//! Unit tests of `causal.rs`.

use super::*;

fn exp(
    selection: &str,
    speedup: f64,
    duration: u64,
    progress: Vec<CausalProgress>,
) -> CausalExperiment {
    CausalExperiment {
        variant: String::new(),
        mode: "line".into(),
        selection: selection.into(),
        file: None,
        line: None,
        function: None,
        speedup,
        start_ns: 0,
        duration_ns: duration,
        delay_ns: 0,
        selected_samples: 1,
        period_ns: 1_000_000,
        progress,
    }
}

fn tp(name: &str, visits: u64) -> CausalProgress {
    CausalProgress {
        name: name.into(),
        kind: ProgressKind::Throughput,
        visits,
        departures: 0,
        in_flight: 0,
    }
}

fn data(experiments: Vec<CausalExperiment>) -> CausalData {
    let mut experiments = experiments;
    for (k, e) in experiments.iter_mut().enumerate() {
        e.start_ns = k as u64 * 1_000_000_000;
    }
    CausalData {
        files: Vec::new(),
        processes: vec![CausalProcess {
            file: PathBuf::from("x.db"),
            guid: "g".into(),
            pid: 1,
            start_ns: Some(0),
            end_ns: None,
            experiments,
            samples: vec![("a.c:1".into(), 10)],
        }],
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn period_halves_at_50_percent_gives_speedup_half() {
    // Baseline: 1000 ns per visit. At 50%: 500 ns per visit. At 25%:
    // 750 ns per visit. Program speedup = (p0 - ps) / p0.
    let d = data(vec![
        exp("a.c:1", 0.0, 1_000_000, vec![tp("p", 1000)]),
        exp("a.c:1", 0.5, 1_000_000, vec![tp("p", 2000)]),
        exp("a.c:1", 0.25, 750_000, vec![tp("p", 1000)]),
    ]);
    let a = analyze(&d, &AnalysisOptions::default());
    assert_eq!(a.curves.len(), 1);
    let c = &a.curves[0];
    assert_eq!(c.baseline, Baseline::Own);
    let got: Vec<(f64, f64)> = c
        .points
        .iter()
        .map(|p| (p.speedup, p.program_speedup))
        .collect();
    assert_eq!(got.len(), 3);
    assert!(close(got[0].0, 0.0) && close(got[0].1, 0.0));
    assert!(close(got[1].0, 0.25) && close(got[1].1, 0.25), "{got:?}");
    assert!(close(got[2].0, 0.5) && close(got[2].1, 0.5), "{got:?}");
    // y = x exactly: slope 1, and every resample agrees (one
    // experiment per group): the interval is the point.
    assert!(close(c.slope, 1.0));
    assert!(close(c.slope_low, 1.0) && close(c.slope_high, 1.0));
    for p in &c.points {
        assert!(close(p.ci_low, p.program_speedup) && close(p.ci_high, p.program_speedup));
    }
    assert!(close(c.points[0].period_ns, 1000.0));
    assert!(close(c.at_largest().unwrap().period_ns, 500.0));
}

#[test]
fn pooled_periods_use_sums_not_mean_of_ratios() {
    // Two 50% experiments: 1000 ns / 4 visits and 3000 ns / 1 visit:
    // period 4000 / 5 = 800 (a mean of ratios would give 1625).
    let d = data(vec![
        exp("a.c:1", 0.0, 1000, vec![tp("p", 1)]),
        exp("a.c:1", 0.5, 1000, vec![tp("p", 4)]),
        exp("a.c:1", 0.5, 3000, vec![tp("p", 1)]),
        exp("a.c:1", 0.25, 900, vec![tp("p", 1)]),
    ]);
    let a = analyze(&d, &AnalysisOptions::default());
    let c = &a.curves[0];
    let p = c.points.iter().find(|p| close(p.speedup, 0.5)).unwrap();
    assert!(close(p.period_ns, 800.0));
    assert!(close(p.program_speedup, 0.2));
    assert_eq!(p.experiments, 2);
    // Resampling the two experiments gives 250 (both fast), 800 or
    // 3000 (both slow): the interval spans that.
    assert!(close(p.ci_low, -2.0) && close(p.ci_high, 0.75), "{p:?}");
}

#[test]
fn slope_through_origin_is_least_squares() {
    // Points (0.2, 0.1), (0.4, 0.3): slope = (0.02 + 0.12) / (0.04 + 0.16) = 0.7.
    let s = slope_through_origin([(0.2, 0.1), (0.4, 0.3)].into_iter()).unwrap();
    assert!(close(s, 0.7));
    assert_eq!(slope_through_origin(std::iter::empty()), None);
}

#[test]
fn slope_interval_covers_scatter_between_speedups() {
    // Program speedups 0.1 at 20%, 0.3 at 40%, 0.2 at 60% (exact
    // periods: 1000 ns baseline): slope 0.157/0.56 and an interval of
    // non-zero width that contains it.
    let mk = |s: f64, ps: f64| {
        exp(
            "a.c:1",
            s,
            ((1.0 - ps) * 1000.0).round() as u64,
            vec![tp("p", 1)],
        )
    };
    let d = data(vec![
        exp("a.c:1", 0.0, 1000, vec![tp("p", 1)]),
        mk(0.2, 0.1),
        mk(0.4, 0.3),
        mk(0.6, 0.2),
    ]);
    let c = &analyze(&d, &AnalysisOptions::default()).curves[0];
    let want = (0.2 * 0.1 + 0.4 * 0.3 + 0.6 * 0.2) / (0.04 + 0.16 + 0.36);
    assert!(close(c.slope, want), "{} vs {want}", c.slope);
    assert!(c.slope_low < c.slope && c.slope < c.slope_high, "{c:?}");
    // The slopes of single points bound the interval: 0.5, 0.75, 0.333.
    assert!(c.slope_low >= 1.0 / 3.0 - 1e-9 && c.slope_high <= 0.75 + 1e-9);
    // Same seed, same answer.
    let again = &analyze(&d, &AnalysisOptions::default()).curves[0];
    assert_eq!(c, again);
}

#[test]
fn latency_uses_littles_law_as_coz_viewer() {
    // Baseline: 1000 ns, 10 arrivals, 4 in flight → latency
    // 4 / (10 / 1000) = 400 ns. At 50%: two experiments of 1000 ns,
    // 10 arrivals each, 2 and 1 in flight → weighted mean 1.5 in
    // flight / (20 / 2000) = 150 ns → speedup (400 - 150) / 400.
    let lat = |a: u64, d: i64| CausalProgress {
        name: "req".into(),
        kind: ProgressKind::Latency,
        visits: a,
        departures: a,
        in_flight: d,
    };
    let d = data(vec![
        exp("f", 0.0, 1000, vec![lat(10, 4)]),
        exp("f", 0.5, 1000, vec![lat(10, 2)]),
        exp("f", 0.5, 1000, vec![lat(10, 1)]),
        exp("f", 0.25, 1000, vec![lat(10, 3)]),
    ]);
    let c = &analyze(&d, &AnalysisOptions::default()).curves[0];
    assert_eq!(c.kind, ProgressKind::Latency);
    let p = c.points.iter().find(|p| close(p.speedup, 0.5)).unwrap();
    assert!(close(c.points[0].period_ns, 400.0));
    assert!(close(p.period_ns, 150.0), "{}", p.period_ns);
    assert!(close(p.program_speedup, 0.625));
}

#[test]
fn end_to_end_uses_mean_run_and_pooled_baseline() {
    // Baseline runs (selection "") of 10 and 12 s: 11 s. Runs at 50%
    // of f: 8 s and 9 s → 8.5 s; at 25%: 10 s.
    let e2e = || CausalProgress {
        name: "end-to-end".into(),
        kind: ProgressKind::EndToEnd,
        visits: 1,
        departures: 0,
        in_flight: 0,
    };
    let mut runs = vec![
        exp("", 0.0, 10_000, vec![e2e()]),
        exp("", 0.0, 12_000, vec![e2e()]),
        exp("f", 0.5, 8_000, vec![e2e()]),
        exp("f", 0.5, 9_000, vec![e2e()]),
        exp("f", 0.25, 10_000, vec![e2e()]),
    ];
    for r in &mut runs {
        r.mode = "end-to-end".into();
    }
    let d = data(runs);
    let a = analyze(&d, &AnalysisOptions::default());
    assert_eq!(a.curves.len(), 1, "the empty selection is no curve");
    let c = &a.curves[0];
    assert_eq!(c.baseline, Baseline::Pooled);
    assert_eq!(c.points[0].experiments, 2);
    let p = c.at_largest().unwrap();
    assert!(close(p.program_speedup, (11.0 - 8.5) / 11.0));
    assert_eq!(c.experiments, 3);
}

#[test]
fn ranking_and_filtering() {
    let mk = |sel: &str, s: f64, d: u64| exp(sel, s, d, vec![tp("p", 1)]);
    let d = data(vec![
        mk("a", 0.0, 1000),
        mk("a", 0.5, 900),
        mk("a", 0.25, 950),
        mk("b", 0.0, 1000),
        mk("b", 0.5, 500),
        mk("b", 0.25, 750),
        // c: one non-zero speedup only: left out.
        mk("c", 0.0, 1000),
        mk("c", 0.5, 100),
    ]);
    let a = analyze(&d, &AnalysisOptions::default());
    let names: Vec<&str> = a.curves.iter().map(|c| c.selection.as_str()).collect();
    assert_eq!(names, ["b", "a"]);
    assert_eq!(a.left_out, 1);
    // --progress filters.
    let none = analyze(
        &d,
        &AnalysisOptions {
            progress: Some("other".into()),
            ..AnalysisOptions::default()
        },
    );
    assert!(none.curves.is_empty());
}

#[test]
fn coz_profile_lines() {
    let d = data(vec![
        exp("a.c:1", 0.0, 1000, vec![tp("p", 3)]),
        exp("a.c:1", 0.15000000000000002, 900, vec![tp("p", 3)]),
        exp("b.c:2", 0.5, 800, vec![tp("p", 3)]),
    ]);
    let mut out = Vec::new();
    write_coz_profile(&d, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "startup\ttime=0");
    assert_eq!(
        lines[1],
        "experiment\tselected=a.c:1\tspeedup=0\tduration=1000\tselected-samples=1"
    );
    assert_eq!(lines[2], "throughput-point\tname=p\tdelta=3");
    assert!(lines[3].contains("\tspeedup=0.15\t"), "{}", lines[3]);
    assert!(text.contains("samples\tlocation=a.c:1\tcount=10\n"));
    assert!(text.contains("runtime\ttime="));
    // b.c:2 has no 0% experiment of its own: the baseline is copied
    // under its name.
    assert!(text.ends_with(
        "experiment\tselected=b.c:2\tspeedup=0\tduration=1000\tselected-samples=1\nthroughput-point\tname=p\tdelta=3\n"
    ));
}
