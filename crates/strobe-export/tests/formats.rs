//! Chrome JSON, folded stacks, SVG flamegraphs (plain and differential),
//! pprof, Firefox and CSV outputs checked against real databases.

mod fixture;

use std::collections::HashMap;
use std::io::Read;

use prost::Message;
use strobe_db::Profile;
use strobe_export::folded::FoldOptions;
use strobe_export::pprof::PprofProfile;
use strobe_export::ExportError;

fn profile(iters: u64) -> (tempfile::TempDir, Profile, fixture::Expected) {
    let dir = tempfile::tempdir().unwrap();
    let (files, exp) = fixture::three_processes(dir.path(), iters);
    let p = Profile::open_files(&files).unwrap();
    (dir, p, exp)
}

#[test]
fn chrome_json_parses_and_matches_counts() {
    let (_d, p, exp) = profile(20);
    let mut out = Vec::new();
    let st = strobe_export::chrome::write_chrome(&p, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
    let events = v["traceEvents"].as_array().unwrap();
    let count = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count() as u64;
    assert_eq!(count("X"), exp.regions);
    assert_eq!(count("i"), exp.markers);
    assert_eq!(count("C"), exp.counters);
    assert_eq!(st.regions, exp.regions);
    // Real threads (below 2^22) are named once each; lanes have their own.
    let thread_names = events
        .iter()
        .filter(|e| {
            e["ph"] == "M" && e["name"] == "thread_name" && e["tid"].as_i64().unwrap() < 1 << 22
        })
        .count() as u64;
    assert_eq!(thread_names, exp.threads);
    let procs = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .count();
    assert_eq!(procs, 3);
    // Nested regions: every X has ts and a non-negative dur; args survive.
    let step = events.iter().find(|e| e["name"] == "step").unwrap();
    assert!(step["dur"].as_f64().unwrap() > 0.0);
    assert!(step["args"]["phase"].as_str().unwrap().contains("\"fast\""));
    let io = events.iter().find(|e| e["name"] == "io").unwrap();
    assert!(io["args"]["correlation_id"].is_number());
    // Region X events come in start order within each thread lane, and
    // nest there (the format's rule: partial overlaps go to other lanes).
    let mut open: HashMap<(i64, i64), Vec<f64>> = HashMap::new();
    let mut last: HashMap<(i64, i64), f64> = HashMap::new();
    for e in events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] != "sample")
    {
        let k = (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap());
        let ts = e["ts"].as_f64().unwrap();
        let end = ts + e["dur"].as_f64().unwrap();
        assert!(ts >= *last.get(&k).unwrap_or(&f64::MIN));
        last.insert(k, ts);
        let stack = open.entry(k).or_default();
        while stack.last().is_some_and(|&e| e <= ts) {
            stack.pop();
        }
        assert!(stack.last().is_none_or(|&outer| outer >= end - 1e-9), "{e}");
        stack.push(end);
    }
    // Typed arguments; strobe's own nesting depth is not among them.
    assert!(events.iter().all(|e| e["args"].get("depth").is_none()));
    // The samples as one CPU profile per thread: every on-CPU sample is
    // there once, `(idle)` ones aside, and the hot leaf as often as the
    // fixture put it there.
    let mut names: HashMap<(String, i64), String> = HashMap::new();
    let (mut on_cpu, mut idle, mut hot) = (0u64, 0u64, 0u64);
    for chunk in events.iter().filter(|e| e["name"] == "ProfileChunk") {
        assert_eq!(chunk["ph"], "P");
        let id = chunk["id"].as_str().unwrap().to_string();
        let data = &chunk["args"]["data"];
        for n in data["cpuProfile"]["nodes"].as_array().unwrap() {
            if let Some(parent) = n["parent"].as_i64() {
                assert!(
                    names.contains_key(&(id.clone(), parent)),
                    "parent first: {n}"
                );
            }
            let name = n["callFrame"]["functionName"].as_str().unwrap();
            names.insert((id.clone(), n["id"].as_i64().unwrap()), name.to_string());
        }
        let samples = data["cpuProfile"]["samples"].as_array().unwrap();
        assert_eq!(samples.len(), data["timeDeltas"].as_array().unwrap().len());
        for s in samples {
            match names[&(id.clone(), s.as_i64().unwrap())].as_str() {
                "(idle)" => idle += 1,
                leaf => {
                    on_cpu += 1;
                    hot += u64::from(leaf == fixture::HOT);
                }
            }
        }
        assert!(data["timeDeltas"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d.as_i64().is_some_and(|d| d >= 0)));
    }
    assert_eq!(on_cpu, exp.samples);
    assert_eq!(hot, exp.hot_samples);
    assert_eq!(on_cpu + idle, st.samples);
    assert_eq!(names.len() as u64, st.profile_nodes);
}

#[test]
fn chrome_json_puts_partially_overlapping_regions_on_separate_lanes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.db");
    let info = strobe_db::ProcessInfo {
        pid: 4,
        ppid: 1,
        init_ns: 0,
        start_ns: 0,
        start_unix_ns: 1_763_000_000_000_000_000,
        command: "overlap".into(),
        environment: vec![],
    };
    let mut w =
        strobe_db::Writer::create(&path, &info, strobe_db::WriterOptions::default()).unwrap();
    let t = w
        .add_thread(&strobe_db::ThreadInfo {
            tid: 4,
            name: Some("main"),
            start_ns: Some(0),
        })
        .unwrap();
    let (a, b) = (w.intern_string("a").unwrap(), w.intern_string("b").unwrap());
    for (name, start, end) in [(a, 100, 300), (b, 200, 400)] {
        w.append_region(&strobe_db::Region {
            thread: t,
            start_ns: start,
            end_ns: end,
            name,
            category: None,
            stack: None,
            correlation_id: None,
            args: &[],
        })
        .unwrap();
    }
    w.finish(500).unwrap();
    let p = Profile::open_files(&[path]).unwrap();
    let mut out = Vec::new();
    strobe_export::chrome::write_chrome(&p, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let tid_of = |name: &str| {
        v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["ph"] == "X" && e["name"] == name)
            .unwrap()["tid"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(tid_of("a"), 4);
    assert_ne!(tid_of("b"), 4, "b overlaps a without nesting: another lane");
}

#[test]
fn folded_and_flamegraph_show_on_cpu_time_in_microseconds() {
    let (_d, p, exp) = profile(20);
    let stacks = strobe_export::folded::folded_stacks(&p, FoldOptions::default()).unwrap();
    // Values are the summed weights in µs (1, 2 or 3 ms per sample, CPU-time
    // and wall-clock samples alike); off-CPU time is left out by default.
    assert_eq!(stacks.values().sum::<u64>(), exp.cpu_ns / 1000);
    assert_ne!(exp.cpu_ns, exp.samples * 1_000_000, "weights differ");
    assert!(exp.wall_samples > 0 && exp.off_cpu_samples > 0);
    let hot: u64 = stacks
        .iter()
        .filter(|(s, _)| s.ends_with(fixture::HOT))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(hot, exp.hot_ns / 1000);
    for s in stacks.keys() {
        assert!(
            s.starts_with("libc.so.6+0x29d90;main;"),
            "outermost frame first: {s}"
        );
        assert!(
            !s.contains("[off-CPU]") && !s.ends_with(fixture::BLOCKED),
            "{s}"
        );
    }
    let per_thread = strobe_export::folded::folded_stacks(
        &p,
        FoldOptions {
            per_thread: true,
            ..FoldOptions::default()
        },
    )
    .unwrap();
    assert!(per_thread
        .keys()
        .any(|s| s.starts_with("solver (pid 2000);worker-1 (tid 2001);")));
    assert_eq!(per_thread.values().sum::<u64>(), exp.cpu_ns / 1000);
    let mut folded = Vec::new();
    let n = strobe_export::folded::write_folded(&p, FoldOptions::default(), &mut folded).unwrap();
    assert_eq!(n, exp.samples, "returns the samples folded");
    let folded = String::from_utf8(folded).unwrap();
    let total: u64 = folded
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, exp.cpu_ns / 1000);
    let mut svg = Vec::new();
    let n = strobe_export::folded::write_flamegraph(&p, FoldOptions::default(), "test", &mut svg)
        .unwrap();
    assert_eq!(n, exp.samples);
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.contains("<svg"));
    assert!(svg.contains(fixture::HOT));
    // Tooltips name the unit: "hot_loop (N µs, P%)".
    let hot_title = format!("<title>{} (", fixture::HOT);
    let t = svg.split(&hot_title).nth(1).expect("a hot_loop frame");
    assert!(t.split(')').next().unwrap().contains(" µs, "), "{t}");
    assert!(svg.contains("on-CPU time"));
}

#[test]
fn folded_off_cpu_option_adds_blocked_time_under_an_off_cpu_leaf() {
    let (_d, p, exp) = profile(20);
    let opt = FoldOptions {
        off_cpu: true,
        ..FoldOptions::default()
    };
    let stacks = strobe_export::folded::folded_stacks(&p, opt).unwrap();
    let (off, on): (Vec<_>, Vec<_>) = stacks.iter().partition(|(s, _)| s.ends_with(";[off-CPU]"));
    assert!(!off.is_empty());
    for (s, _) in &off {
        assert!(
            s.ends_with(&format!(";{};[off-CPU]", fixture::BLOCKED)),
            "blocked in {}: {s}",
            fixture::BLOCKED
        );
    }
    // 1 or 2 µs per off-CPU sample.
    assert_eq!(
        off.iter().map(|(_, n)| **n).sum::<u64>(),
        exp.off_cpu_ns / 1000
    );
    assert_eq!(on.iter().map(|(_, n)| **n).sum::<u64>(), exp.cpu_ns / 1000);
    assert!(!stacks
        .keys()
        .any(|s| s.contains("[off-CPU]") && !s.ends_with("[off-CPU]")));
    let mut out = Vec::new();
    let n = strobe_export::folded::write_folded(&p, opt, &mut out).unwrap();
    assert_eq!(n, exp.samples + exp.off_cpu_samples);
    assert_eq!(
        String::from_utf8(out)
            .unwrap()
            .lines()
            .filter(|l| l.contains("[off-CPU]"))
            .count(),
        off.len()
    );
    // The fixture's blocked time (µs) is too narrow to draw next to its
    // CPU time (ms); the SVG says what it shows.
    let mut svg = Vec::new();
    let n = strobe_export::folded::write_flamegraph(&p, opt, "wall", &mut svg).unwrap();
    assert_eq!(n, exp.samples + exp.off_cpu_samples);
    assert!(String::from_utf8(svg)
        .unwrap()
        .contains("on-CPU and off-CPU ([off-CPU]) time"));
}

#[test]
fn differential_flamegraph_between_two_databases() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    let b = dir.path().join("b.db");
    fixture::write_process(&a, 100, "n", 20, 8);
    fixture::write_process(&b, 200, "n", 20, 2);
    let pa = Profile::open_files(&[a]).unwrap();
    let pb = Profile::open_files(&[b]).unwrap();
    let mut svg = Vec::new();
    let (x, y) = strobe_export::folded::write_diff_flamegraph(
        &pa,
        &pb,
        FoldOptions::default(),
        "diff",
        &mut svg,
    )
    .unwrap();
    // Two of three threads have CPU-time samples (the third, wall-clock ones).
    assert_eq!((x, y), (400, 400), "on-CPU samples folded");
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.contains(fixture::HOT));
    // 15 of 19 ms per iteration in hot_loop before, 3 of 19 after: every
    // hot_loop frame reports a decrease, the cold leaves an increase.
    let titles = |f: &str| -> Vec<String> {
        svg.split("<title>")
            .skip(1)
            .filter(|t| t.starts_with(f))
            .map(|t| t.split("</title>").next().unwrap().to_string())
            .collect()
    };
    let hot = titles("hot_loop (");
    assert!(!hot.is_empty());
    assert!(
        hot.iter().all(|t| t.contains(" µs, ") && t.contains("; -")),
        "{hot:?}"
    );
    let cold = titles("libm.so.6+0x12340 (");
    assert!(
        !cold.is_empty() && cold.iter().all(|t| t.contains("; +")),
        "{cold:?}"
    );
}

/// Decodes a gzip-compressed pprof profile.
fn decode_pprof(gz: &[u8]) -> PprofProfile {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut raw)
        .unwrap();
    PprofProfile::decode(&raw[..]).expect("profile.proto decodes")
}

#[test]
fn pprof_decodes_and_totals_match() {
    let (_d, p, exp) = profile(20);
    let mut gz = Vec::new();
    let st = strobe_export::pprof::write_pprof(&p, &mut gz).unwrap();
    let prof = decode_pprof(&gz);
    assert_eq!(prof.string_table[0], "");
    let s = |i: i64| prof.string_table[i as usize].as_str();
    let types: Vec<(&str, &str)> = prof
        .sample_type
        .iter()
        .map(|t| (s(t.r#type), s(t.unit)))
        .collect();
    assert_eq!(
        types,
        [
            ("samples", "count"),
            ("cpu", "nanoseconds"),
            ("off_cpu", "nanoseconds")
        ]
    );
    assert_eq!(s(prof.default_sample_type), "cpu");
    assert_eq!(prof.period, 1_000_000, "sampling_freq 1000 Hz gives 1 ms");
    assert!(prof.sample.iter().all(|x| x.value.len() == 3));
    let sum = |k: usize| prof.sample.iter().map(|x| x.value[k]).sum::<i64>() as u64;
    // samples/count counts on-CPU samples (CPU-time ones: the fixture has them),
    // cpu/nanoseconds sums their weights, off_cpu/nanoseconds the blocked time.
    assert_eq!(sum(0), exp.samples);
    assert_eq!(sum(1), exp.cpu_ns);
    assert_eq!(sum(2), exp.off_cpu_ns);
    assert_ne!(sum(1), sum(0) * 1_000_000, "weights, not count x period");
    assert_eq!(
        st,
        strobe_export::pprof::PprofStats {
            samples: exp.samples,
            cpu_ns: exp.cpu_ns,
            off_cpu_samples: exp.off_cpu_samples,
            off_cpu_ns: exp.off_cpu_ns,
            entries: prof.sample.len() as u64,
            period_ns: 1_000_000,
        }
    );
    let locs: HashMap<u64, &strobe_export::pprof::Location> =
        prof.location.iter().map(|l| (l.id, l)).collect();
    let funcs: HashMap<u64, &strobe_export::pprof::Function> =
        prof.function.iter().map(|f| (f.id, f)).collect();
    let maps: HashMap<u64, &strobe_export::pprof::Mapping> =
        prof.mapping.iter().map(|m| (m.id, m)).collect();
    let (mut hot, mut hot_ns, mut blocked_ns) = (0, 0, 0);
    for smp in &prof.sample {
        for id in &smp.location_id {
            let l = locs[id];
            assert!(l.mapping_id == 0 || maps.contains_key(&l.mapping_id));
            assert!(funcs.contains_key(&l.line[0].function_id));
        }
        let leaf = locs[&smp.location_id[0]];
        let name = s(funcs[&leaf.line[0].function_id].name);
        if name == fixture::HOT {
            hot += smp.value[0];
            hot_ns += smp.value[1];
        }
        if name == fixture::BLOCKED {
            assert_eq!(&smp.value[..2], [0, 0], "blocked stacks have no CPU time");
            blocked_ns += smp.value[2];
        } else {
            assert_eq!(smp.value[2], 0, "only {} blocks", fixture::BLOCKED);
        }
    }
    assert_eq!(hot as u64, exp.hot_samples);
    assert_eq!(hot_ns as u64, exp.hot_ns);
    assert_eq!(blocked_ns as u64, exp.off_cpu_ns);
    assert!(prof.mapping.iter().any(|m| s(m.build_id)
        == "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"
        && s(m.filename) == "/opt/app/bin/solver"));
}

#[test]
fn databases_without_weights_count_one_sampling_period_per_sample() {
    let dir = tempfile::tempdir().unwrap();
    let (db, hot) = fixture::unweighted(dir.path(), 50, 3);
    let p = Profile::open_files(&[db]).unwrap();
    let weights: Vec<Option<i64>> = p
        .query_stream("SELECT weight_ns FROM strobe_samples", |r| r.get(0))
        .unwrap()
        .map(|w| w.unwrap())
        .collect();
    assert_eq!(weights.len(), 50);
    assert!(weights.iter().all(Option::is_none), "no weights recorded");
    // Recorded at 500 Hz: 2 ms = 2000 µs per sample.
    let stacks = strobe_export::folded::folded_stacks(&p, FoldOptions::default()).unwrap();
    assert_eq!(stacks.values().sum::<u64>(), 50 * 2000);
    let hot_us: u64 = stacks
        .iter()
        .filter(|(s, _)| s.ends_with(fixture::HOT))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(hot_us, hot * 2000);
    let mut svg = Vec::new();
    assert_eq!(
        strobe_export::folded::write_flamegraph(&p, FoldOptions::default(), "old", &mut svg)
            .unwrap(),
        50
    );
    let mut gz = Vec::new();
    let st = strobe_export::pprof::write_pprof(&p, &mut gz).unwrap();
    let prof = decode_pprof(&gz);
    assert_eq!(prof.period, 2_000_000);
    let sum = |k: usize| prof.sample.iter().map(|x| x.value[k]).sum::<i64>();
    assert_eq!((sum(0), sum(1), sum(2)), (50, 50 * 2_000_000, 0));
    assert_eq!((st.samples, st.cpu_ns, st.off_cpu_ns), (50, 100_000_000, 0));
    let mut out = Vec::new();
    strobe_export::firefox::write_firefox(&p, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let w: f64 = v["threads"][0]["samples"]["weight"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .sum();
    assert_eq!(w, 100.0, "50 samples of 2 ms");
}

#[test]
fn firefox_profile_has_threads_weighted_samples_and_markers() {
    let (_d, p, exp) = profile(10);
    let mut out = Vec::new();
    let st = strobe_export::firefox::write_firefox(&p, &mut out).unwrap();
    assert_eq!(st.samples, exp.samples);
    assert_eq!(st.off_cpu_markers, exp.off_cpu_samples);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert!(v["meta"]["version"].is_number());
    let threads = v["threads"].as_array().unwrap();
    assert_eq!(threads.len() as u64, exp.threads);
    // Only on-CPU samples are in the samples tables, weighted in ms.
    let samples: u64 = threads
        .iter()
        .map(|t| t["samples"]["length"].as_u64().unwrap())
        .sum();
    assert_eq!(samples, exp.samples);
    let mut weight_ms = 0.0;
    for t in threads {
        let smp = &t["samples"];
        assert_eq!(smp["weightType"], "tracing-ms");
        let w = smp["weight"].as_array().expect("a weight column");
        assert_eq!(w.len() as u64, smp["length"].as_u64().unwrap());
        weight_ms += w.iter().map(|x| x.as_f64().unwrap()).sum::<f64>();
    }
    assert_eq!(weight_ms, (exp.cpu_ns / 1_000_000) as f64);
    // Regions, instants and one off-CPU interval marker per off-CPU sample.
    let markers: u64 = threads
        .iter()
        .map(|t| t["markers"]["length"].as_u64().unwrap())
        .sum();
    assert_eq!(markers, exp.regions + exp.markers + exp.off_cpu_samples);
    let mut off = Vec::new();
    for t in threads {
        let m = &t["markers"];
        for (k, d) in m["data"].as_array().unwrap().iter().enumerate() {
            if d["type"] == "StrobeOffCpu" {
                let (a, b) = (
                    m["startTime"][k].as_f64().unwrap(),
                    m["endTime"][k].as_f64().unwrap(),
                );
                assert!(
                    d["cause"]["stack"].is_number(),
                    "the stack where it blocked: {d}"
                );
                off.push(((b - a) * 1e6).round() as u64);
            }
        }
    }
    let mut want: Vec<u64> = exp.off_cpu.iter().map(|(_, w)| *w).collect();
    off.sort_unstable();
    want.sort_unstable();
    assert_eq!(off, want, "marker durations are the blocked times");
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains(fixture::HOT) && text.contains(fixture::BLOCKED));
    let strings = v["shared"]["stringArray"]
        .as_array()
        .map(|a| a.len())
        .unwrap_or(0)
        + threads
            .iter()
            .map(|t| t["stringArray"].as_array().map(|a| a.len()).unwrap_or(0))
            .sum::<usize>();
    assert!(strings > 0);
}

#[test]
fn csv_one_file_per_table_with_headers() {
    let (d, p, exp) = profile(10);
    let out = d.path().join("csv");
    std::fs::create_dir_all(&out).unwrap();
    let files = strobe_export::csv::write_csv(&p, &out, "run").unwrap();
    let rows: HashMap<String, u64> = files
        .iter()
        .map(|(f, n)| (f.file_name().unwrap().to_str().unwrap().to_string(), *n))
        .collect();
    assert_eq!(rows["run_regions.csv"], exp.regions + exp.markers);
    assert_eq!(
        rows["run_samples.csv"],
        exp.samples + exp.wall_samples + exp.off_cpu_samples,
        "every sample, on and off CPU"
    );
    assert_eq!(rows["run_threads.csv"], exp.threads);
    assert_eq!(rows["run_processes.csv"], 3);
    assert_eq!(rows["run_counters.csv"], exp.counters);
    assert!(rows["run_top.csv"] >= 3);
    // The top table, computed while the regions stream by, is rocpd's
    // `top` view row for row (the order of equal durations aside).
    let view = out.join("view_top.csv");
    strobe_export::csv::write_query_csv(
        &p,
        "SELECT name, total_calls, total_duration, average, percentage FROM top",
        &view,
    )
    .unwrap();
    let lines = |f: &std::path::Path| {
        let mut v: Vec<String> = std::fs::read_to_string(f)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    };
    assert_eq!(lines(&out.join("run_top.csv")), lines(&view));
    let text = std::fs::read_to_string(out.join("run_regions.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "process,pid,tid,category,name,start,end,duration,corr_id"
    );
    assert_eq!(text.lines().count() as u64, exp.regions + exp.markers + 1);
    // Every process number of the large tables is a row of processes.csv.
    let procs = std::fs::read_to_string(out.join("run_processes.csv")).unwrap();
    assert!(procs.starts_with("process,guid,"));
    let numbers: std::collections::HashSet<&str> = procs
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(numbers.len(), 3);
    for l in text.lines().skip(1) {
        assert!(numbers.contains(l.split(',').next().unwrap()), "{l}");
    }
    // Stacks are written once each and named by the samples.
    let stacks = std::fs::read_to_string(out.join("run_stacks.csv")).unwrap();
    assert!(stacks.starts_with("process,stack,leaf,frames\n"));
    let leaf: HashMap<(String, String), String> = stacks
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            ((f[0].to_string(), f[1].to_string()), f[2].to_string())
        })
        .collect();
    assert_eq!(leaf.len() as u64, rows["run_stacks.csv"], "no stack twice");
    assert!(leaf.values().any(|l| l == fixture::HOT));
    let samples = std::fs::read_to_string(out.join("run_samples.csv")).unwrap();
    assert!(samples.starts_with("process,pid,tid,timestamp,kind,weight_ns,stack\n"));
    let mut by_kind: HashMap<String, (u64, u64)> = HashMap::new();
    let mut last_ts = i64::MIN;
    for l in samples.lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        assert!(numbers.contains(f[0]), "{l}");
        let ts: i64 = f[3].parse().unwrap();
        assert!(ts >= last_ts, "samples in time order");
        last_ts = ts;
        let e = by_kind.entry(f[4].to_string()).or_default();
        e.0 += 1;
        e.1 += f[5].parse::<u64>().unwrap();
        if f[4] == "off_cpu" {
            let l2 = &leaf[&(f[0].to_string(), f[6].to_string())];
            assert_eq!(l2, fixture::BLOCKED, "leaf of {l}");
        }
    }
    assert_eq!(by_kind["sample"].0, exp.samples);
    assert_eq!(by_kind["wall_sample"].0, exp.wall_samples);
    assert_eq!(by_kind["sample"].1, exp.cpu_ns);
    assert_eq!(by_kind["off_cpu"], (exp.off_cpu_samples, exp.off_cpu_ns));
}

#[test]
fn empty_database_is_a_clear_error_for_sample_formats() {
    let dir = tempfile::tempdir().unwrap();
    let p = Profile::open_files(&[fixture::empty(dir.path())]).unwrap();
    let e = strobe_export::pprof::write_pprof(&p, Vec::new()).unwrap_err();
    assert!(matches!(e, ExportError::Empty { .. }), "{e}");
    assert!(e.to_string().contains("no samples"), "{e}");
    let e = strobe_export::folded::write_flamegraph(&p, FoldOptions::default(), "t", Vec::new())
        .unwrap_err();
    assert!(matches!(e, ExportError::Empty { .. }));
    // The timeline formats still write valid, empty documents.
    let mut out = Vec::new();
    strobe_export::chrome::write_chrome(&p, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert!(v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["ph"] == "M"));
}

#[test]
fn unknown_format_names_the_known_ones() {
    let e = "svgz".parse::<strobe_export::Format>().unwrap_err();
    assert!(e.to_string().contains("svgz") && e.to_string().contains("pftrace"));
    for f in strobe_export::Format::ALL {
        assert_eq!(f.name().parse::<strobe_export::Format>().unwrap(), f);
    }
}

#[test]
fn pprof_of_a_window_lasts_as_long_as_the_window() {
    let (_d, mut p, _) = profile(20);
    let whole = decode_pprof(&{
        let mut gz = Vec::new();
        strobe_export::pprof::write_pprof(&p, &mut gz).unwrap();
        gz
    })
    .duration_nanos;
    let (from, to) = p
        .set_window(
            Some(strobe_db::TimeBound::Percent(30.0)),
            Some(strobe_db::TimeBound::Percent(70.0)),
        )
        .unwrap();
    let mut gz = Vec::new();
    strobe_export::pprof::write_pprof(&p, &mut gz).unwrap();
    let part = decode_pprof(&gz).duration_nanos;
    assert_eq!(part, to.unwrap() - from.unwrap());
    assert!(part * 2 < whole, "{part} of {whole} ns");
}
