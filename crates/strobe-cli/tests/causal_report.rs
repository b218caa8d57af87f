//! `strobe causal report`, run as the built binary on databases written by
//! strobe-db's writer: the ranked table, `--csv`, the SVG and Coz's
//! `profile.coz` (read back the way Coz's viewer reads it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use strobe_db::{
    CausalExperiment, CausalProgress, NodeInfo, ProcessInfo, ProgressKind, Writer, WriterOptions,
};

fn strobe(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strobe"))
        .args(args)
        .current_dir(cwd)
        .env_remove("STROBE_OUTPUT_DIR")
        .env_remove("STROBE_CONFIG")
        .output()
        .expect("run strobe")
}

fn ok(args: &[&str], cwd: &Path) -> String {
    let o = strobe(args, cwd);
    assert!(
        o.status.success(),
        "strobe {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn fails(args: &[&str], cwd: &Path) -> String {
    let o = strobe(args, cwd);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "strobe {args:?} succeeded");
    assert_eq!(o.status.code(), Some(1), "exit status for {args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn throughput(name: &str, visits: u64) -> CausalProgress {
    CausalProgress {
        name: name.into(),
        kind: ProgressKind::Throughput,
        visits,
        departures: 0,
        in_flight: 0,
    }
}

fn experiment(
    selection: &str,
    speedup: f64,
    start_ns: u64,
    duration_ns: u64,
    progress: Vec<CausalProgress>,
) -> CausalExperiment {
    CausalExperiment {
        variant: String::new(),
        mode: if selection.contains(':') {
            "line"
        } else {
            "function"
        }
        .into(),
        selection: selection.into(),
        file: selection.split_once(':').map(|(f, _)| f.to_string()),
        line: selection.split_once(':').and_then(|(_, l)| l.parse().ok()),
        function: None,
        speedup,
        start_ns,
        duration_ns,
        delay_ns: 0,
        selected_samples: 4,
        period_ns: 1_000_000,
        progress,
    }
}

fn write_db(path: &Path, pid: u32, experiments: &[CausalExperiment], samples: &[(&str, u64)]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let process = ProcessInfo {
        pid,
        ppid: 1,
        init_ns: 1_000,
        start_ns: 1_000,
        start_unix_ns: 1_700_000_000_000_000_000 + u64::from(pid),
        command: "app".into(),
        environment: vec![],
    };
    let opts = WriterOptions {
        node: Some(NodeInfo {
            machine_id: "causal-test".into(),
            hostname: "h".into(),
            ..NodeInfo::default()
        }),
        ..WriterOptions::default()
    };
    let mut w = Writer::create(path, &process, opts).unwrap();
    for e in experiments {
        w.causal_experiment(e).unwrap();
    }
    let samples: Vec<(String, u64)> = samples.iter().map(|(l, c)| (l.to_string(), *c)).collect();
    w.causal_samples(&samples).unwrap();
    w.finish(10_000_000_000).unwrap();
}

/// A run directory with two processes. Progress point `items`:
/// - `src/a.c:10`: 1000 ns per item at 0%, 1000 × (1 − s/2) at s: slope 0.5
///   (its experiments split between the two processes);
/// - `src/b.c:20`: unchanged: slope 0;
/// - `work, then more`: a function (comma in the name), no 0% experiment of
///   its own: the pooled baseline (1000 ns) and 800 ns at 25%, 600 ns at
///   50%: slope 0.8.
fn run_dir(root: &Path) -> PathBuf {
    let run = root.join("run");
    let mut one = Vec::new();
    let mut two = Vec::new();
    let mut t = 0u64;
    let mut next = || {
        t += 1_000_000_000;
        t
    };
    for s in [0.0, 0.25, 0.5] {
        let a = (1000.0 * (1.0 - s / 2.0)) as u64 * 1000;
        one.push(experiment(
            "src/a.c:10",
            s,
            next(),
            a,
            vec![throughput("items", 1000)],
        ));
        two.push(experiment(
            "src/a.c:10",
            s,
            next(),
            a,
            vec![throughput("items", 1000)],
        ));
        one.push(experiment(
            "src/b.c:20",
            s,
            next(),
            1_000_000,
            vec![throughput("items", 1000)],
        ));
    }
    for (s, ns) in [(0.25, 800_000), (0.5, 600_000)] {
        two.push(experiment(
            "work, then more",
            s,
            next(),
            ns,
            vec![throughput("items", 1000)],
        ));
    }
    write_db(
        &run.join("h/100.db"),
        100,
        &one,
        &[("src/a.c:10", 40), ("src/b.c:20", 10)],
    );
    write_db(&run.join("h/200.db"), 200, &two, &[("src/a.c:10", 30)]);
    run
}

/// The CSV rows: (selection, progress, speedup) → (program speedup, low,
/// high, experiments).
type Rows = BTreeMap<(String, String, String), (f64, f64, f64, usize)>;

/// Splits one CSV line (RFC 4180 quoting).
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(String::new()),
            (c, _) => out.last_mut().unwrap().push(c),
        }
    }
    out
}

fn parse_csv(text: &str) -> (Vec<String>, Rows) {
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("selection,progress,speedup,program_speedup,ci_low,ci_high,experiments")
    );
    let mut order = Vec::new();
    let mut rows = Rows::new();
    for line in lines {
        let f = csv_fields(line);
        assert_eq!(f.len(), 7, "{line}");
        if order.last() != Some(&f[0]) {
            order.push(f[0].clone());
        }
        let num = |k: usize| f[k].parse::<f64>().unwrap_or_else(|_| panic!("{line}"));
        rows.insert(
            (f[0].clone(), f[1].clone(), f[2].clone()),
            (num(3), num(4), num(5), f[6].parse().unwrap()),
        );
    }
    (order, rows)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn table_csv_svg_and_coz() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_dir(dir.path());
    let run_s = run.to_str().unwrap();

    // The table: ranked by slope, highest first.
    let table = ok(&["causal", "report", "-i", run_s], dir.path());
    let pos = |s: &str| {
        table
            .find(s)
            .unwrap_or_else(|| panic!("{s} missing:\n{table}"))
    };
    assert!(pos("work, then more") < pos("src/a.c:10"));
    assert!(pos("src/a.c:10") < pos("src/b.c:20"));
    assert!(table.contains("0.50 [0.50, 0.50]"), "{table}");
    assert!(table.contains("+25.0% at 50%"), "{table}");
    assert!(table.contains("pooled baseline"), "{table}");
    // The default files, in the input directory.
    let svg = std::fs::read_to_string(run.join("causal.svg")).unwrap();
    let coz = std::fs::read_to_string(run.join("profile.coz")).unwrap();

    // CSV: one row per point, ranked, exact values.
    let csv = ok(
        &["causal", "report", "-i", run_s, "--csv", "--no-files"],
        dir.path(),
    );
    let (order, rows) = parse_csv(&csv);
    assert_eq!(order, ["work, then more", "src/a.c:10", "src/b.c:20"]);
    let get = |sel: &str, s: &str| rows[&(sel.to_string(), "items".to_string(), s.to_string())];
    let (ps, lo, hi, n) = get("src/a.c:10", "0.5");
    assert!(
        close(ps, 0.25) && close(lo, 0.25) && close(hi, 0.25),
        "{csv}"
    );
    assert_eq!(n, 2, "pooled across the two processes");
    assert_eq!(get("src/a.c:10", "0").3, 2);
    assert!(close(get("src/a.c:10", "0.25").0, 0.125));
    assert!(close(get("work, then more", "0.5").0, 0.4));
    // No 0% experiment of its own: every 0% experiment of `items` (2 of
    // a.c, 1 of b.c) is its baseline.
    assert_eq!(get("work, then more", "0").3, 3);
    assert!(close(get("src/b.c:20", "0.5").0, 0.0));
    assert_eq!(rows.len(), 9);

    // --top and --progress.
    let (order, _) = parse_csv(&ok(
        &[
            "causal",
            "report",
            "-i",
            run_s,
            "--csv",
            "--no-files",
            "--top",
            "1",
            "--progress",
            "items",
        ],
        dir.path(),
    ));
    assert_eq!(order, ["work, then more"]);
    let err = fails(
        &[
            "causal",
            "report",
            "-i",
            run_s,
            "--progress",
            "nope",
            "--no-files",
        ],
        dir.path(),
    );
    assert!(err.contains("no progress point named `nope`"), "{err}");
    assert!(err.contains("items (throughput)"), "{err}");

    // The SVG: well-formed, one panel per selection.
    check_xml(&svg);
    assert!(svg.starts_with("<?xml"));
    assert!(svg.contains("src/a.c:10") && svg.contains("src/b.c:20"));
    assert!(svg.contains("work, then more"));
    assert_eq!(svg.matches("<g class=\"curve\"").count(), 3);
    assert_eq!(svg.matches("class=\"fit\"").count(), 3);
    assert_eq!(svg.matches("<circle").count(), 9);

    // profile.coz, read as Coz's viewer reads it, gives the same curves.
    let viewer = coz_viewer(&coz);
    for ((sel, point, s), (ps, _, _, _)) in &rows {
        let v = viewer
            .get(&(sel.clone(), point.clone(), s.clone()))
            .unwrap_or_else(|| panic!("{sel} {point} {s} not in profile.coz:\n{coz}"));
        assert!(close(*v, *ps), "{sel} {point} {s}: viewer {v}, strobe {ps}");
    }
    assert!(coz.contains("samples\tlocation=src/a.c:10\tcount=40\n"));
    assert!(coz.contains("samples\tlocation=src/a.c:10\tcount=30\n"));

    // Explicit paths; --no-files writes nothing else.
    let other = dir.path().join("out");
    std::fs::create_dir(&other).unwrap();
    std::fs::remove_file(run.join("causal.svg")).unwrap();
    std::fs::remove_file(run.join("profile.coz")).unwrap();
    ok(
        &[
            "causal",
            "report",
            "-i",
            run_s,
            "--no-files",
            "--svg",
            other.join("c.svg").to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(other.join("c.svg").is_file());
    assert!(!run.join("causal.svg").exists() && !run.join("profile.coz").exists());
    // A database given as a file: the files go beside it.
    let db = run.join("h/100.db");
    ok(
        &["causal", "report", "-i", db.to_str().unwrap()],
        dir.path(),
    );
    assert!(run.join("h/causal.svg").is_file() && run.join("h/profile.coz").is_file());
}

#[test]
fn latency_and_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let lat = |arrivals: u64, in_flight: i64| CausalProgress {
        name: "request".into(),
        kind: ProgressKind::Latency,
        visits: arrivals,
        departures: arrivals,
        in_flight,
    };
    let e2e = || CausalProgress {
        name: "end-to-end".into(),
        kind: ProgressKind::EndToEnd,
        visits: 1,
        departures: 0,
        in_flight: 0,
    };
    // Latency 400 ns at 0%, 300 at 25%, 200 at 50% (Little's law:
    // in flight × duration / arrivals).
    let mut e = vec![
        experiment("f.c:1", 0.0, 1, 1000, vec![lat(10, 4)]),
        experiment("f.c:1", 0.25, 2, 1000, vec![lat(10, 3)]),
        experiment("f.c:1", 0.5, 3, 1000, vec![lat(10, 2)]),
    ];
    // End-to-end runs: baselines (selection "") of 10 s, f at 50%: 7 s,
    // at 25%: 8.5 s.
    for (k, (sel, s, ns)) in [
        ("", 0.0, 10_000),
        ("", 0.0, 10_000),
        ("g", 0.25, 8_500),
        ("g", 0.5, 7_000),
    ]
    .into_iter()
    .enumerate()
    {
        let mut x = experiment(sel, s, 10 + k as u64, ns, vec![e2e()]);
        x.mode = "end-to-end".into();
        e.push(x);
    }
    let db = dir.path().join("1.db");
    write_db(&db, 1, &e, &[]);
    let (_, rows) = parse_csv(&ok(
        &["causal", "report", "-i", db.to_str().unwrap(), "--csv"],
        dir.path(),
    ));
    let get =
        |sel: &str, p: &str, s: &str| rows[&(sel.to_string(), p.to_string(), s.to_string())].0;
    assert!(close(get("f.c:1", "request", "0.5"), 0.5));
    assert!(close(get("f.c:1", "request", "0.25"), 0.25));
    assert!(close(get("g", "end-to-end", "0.5"), 0.3));
    assert!(close(get("g", "end-to-end", "0.25"), 0.15));
    // The viewer reads the same from profile.coz (it negates latency
    // speedups: a shorter latency shows there as a negative speedup).
    let coz = std::fs::read_to_string(dir.path().join("profile.coz")).unwrap();
    let viewer = coz_viewer(&coz);
    let v = |sel: &str, p: &str, s: &str| viewer[&(sel.to_string(), p.to_string(), s.to_string())];
    assert!(close(v("f.c:1", "request", "0.5"), -0.5));
    assert!(close(v("g", "end-to-end", "0.5"), 0.3));
}

#[test]
fn no_experiments_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run/h/1.db");
    write_db(&db, 1, &[], &[]);
    let run = dir.path().join("run");
    let err = fails(
        &["causal", "report", "-i", run.to_str().unwrap()],
        dir.path(),
    );
    assert!(
        err.contains(&format!("no causal experiments in {}", run.display())),
        "{err}"
    );
    assert!(
        err.contains("run `strobe causal -- PROGRAM` first"),
        "{err}"
    );
    assert!(!run.join("causal.svg").exists());
    // No -i: the latest run, here missing.
    let err = fails(&["causal", "report"], dir.path());
    assert!(err.contains("latest does not exist"), "{err}");
    // An empty directory.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = fails(
        &["causal", "report", "-i", empty.to_str().unwrap()],
        dir.path(),
    );
    assert!(err.contains("no causal experiments in"), "{err}");
}

/// Reads `profile.coz` as Coz's viewer (`viewer/js/profile.js`) does: each
/// line split at tabs, the first field the type, the others `key=value`
/// (`delta`, `time`, `duration`, `arrivals`, `departures`, `difference`
/// integers, `speedup` a float); measurements summed per selection,
/// progress point and speedup (latency: the in-flight difference averaged
/// weighted by duration); the program speedup of each against the
/// selection's own 0% measurement, negated for latency points. Returns
/// (selection, point, speedup as printed by strobe's CSV) → program speedup.
fn coz_viewer(text: &str) -> BTreeMap<(String, String, String), f64> {
    #[derive(Default, Clone, Copy)]
    struct Entry {
        latency: bool,
        delta: f64,
        duration: f64,
        arrivals: f64,
        difference: f64,
    }
    let mut data: BTreeMap<(String, String, String), Entry> = BTreeMap::new();
    let mut experiment: Option<BTreeMap<String, String>> = None;
    for line in text.lines().filter(|l| !l.is_empty()) {
        let parts: Vec<&str> = line.split('\t').collect();
        let mut obj = BTreeMap::new();
        for p in &parts[1..] {
            let (k, v) = p
                .split_once('=')
                .unwrap_or_else(|| panic!("field without '=': {line:?}"));
            match k {
                "delta" | "time" | "duration" | "arrivals" | "departures" | "difference" => {
                    v.parse::<i64>()
                        .unwrap_or_else(|_| panic!("{k} not an integer: {line:?}"));
                }
                "speedup" => {
                    let s: f64 = v
                        .parse()
                        .unwrap_or_else(|_| panic!("bad speedup: {line:?}"));
                    assert!((0.0..=1.0).contains(&s), "{line:?}");
                }
                _ => {}
            }
            obj.insert(k.to_string(), v.to_string());
        }
        let num = |o: &BTreeMap<String, String>, k: &str| o[k].parse::<f64>().unwrap();
        match parts[0] {
            "startup" | "shutdown" | "samples" | "runtime" => {}
            "experiment" => {
                assert!(obj.contains_key("selected") && obj.contains_key("selected-samples"));
                experiment = Some(obj);
            }
            "throughput-point" | "latency-point" => {
                let e = experiment.as_ref().expect("a point before any experiment");
                let speedup: f64 = num(e, "speedup");
                let key = (
                    e["selected"].clone(),
                    obj["name"].clone(),
                    format!("{speedup}"),
                );
                let entry = data.entry(key).or_default();
                let duration = num(e, "duration");
                if parts[0] == "throughput-point" {
                    entry.delta += num(&obj, "delta");
                } else {
                    entry.latency = true;
                    entry.arrivals += num(&obj, "arrivals");
                    let d = num(&obj, "difference");
                    entry.difference = if entry.duration == 0.0 {
                        d
                    } else {
                        let total = entry.duration + duration;
                        entry.difference * (entry.duration / total) + d * duration / total
                    };
                }
                entry.duration += duration;
            }
            other => panic!("the viewer rejects line type {other:?}: {line:?}"),
        }
    }
    let point = |e: &Entry| {
        if e.latency {
            e.difference / (e.arrivals / e.duration)
        } else {
            e.duration / e.delta
        }
    };
    let mut out = BTreeMap::new();
    for ((sel, name, s), e) in &data {
        let Some(base) = data.get(&(sel.clone(), name.clone(), "0".to_string())) else {
            continue;
        };
        let mut v = (point(base) - point(e)) / point(base);
        if e.latency {
            v = -v;
        }
        out.insert((sel.clone(), name.clone(), s.clone()), v);
    }
    out
}

/// Fails unless `text` is well-formed XML as far as an SVG viewer cares:
/// balanced tags, quoted attributes, entities only from the predefined
/// five, no stray `<` or `&`.
fn check_xml(text: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = text;
    let check_text = |t: &str| {
        let mut s = t;
        while let Some(i) = s.find('&') {
            let after = &s[i + 1..];
            let end = after.find(';').unwrap_or_else(|| panic!("bare & in {t:?}"));
            assert!(
                ["amp", "lt", "gt", "quot", "apos"].contains(&&after[..end]),
                "unknown entity in {t:?}"
            );
            s = &after[end..];
        }
        assert!(!t.contains('>'), "stray > in text {t:?}");
    };
    while let Some(open) = rest.find('<') {
        check_text(&rest[..open]);
        let close = rest[open..].find('>').expect("unclosed tag") + open;
        let tag = &rest[open + 1..close];
        rest = &rest[close + 1..];
        if tag.starts_with('?') {
            assert!(tag.ends_with('?'));
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(name.trim()),
                "mismatched </{name}>"
            );
            continue;
        }
        let self_closing = tag.ends_with('/');
        let body = tag.trim_end_matches('/');
        let name: String = body.chars().take_while(|c| !c.is_whitespace()).collect();
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()),
            "{tag}"
        );
        // Attributes: name="value" pairs, values free of < and ".
        let mut attrs = body[name.len()..].trim();
        while !attrs.is_empty() {
            let eq = attrs
                .find("=\"")
                .unwrap_or_else(|| panic!("bad attribute in <{tag}>"));
            let end = attrs[eq + 2..].find('"').expect("unterminated attribute") + eq + 2;
            let value = &attrs[eq + 2..end];
            assert!(!value.contains('<'), "< in attribute of <{tag}>");
            check_text(value);
            attrs = attrs[end + 1..].trim_start();
        }
        if !self_closing {
            stack.push(name);
        }
    }
    check_text(rest);
    assert!(stack.is_empty(), "unclosed elements: {stack:?}");
}
