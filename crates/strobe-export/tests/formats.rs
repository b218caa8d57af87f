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
    let thread_names = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
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
    // X events come in start order within each thread.
    let mut last: HashMap<(i64, i64), f64> = HashMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let k = (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap());
        let ts = e["ts"].as_f64().unwrap();
        assert!(ts >= *last.get(&k).unwrap_or(&f64::MIN));
        last.insert(k, ts);
    }
}

#[test]
fn folded_and_flamegraph_name_the_hot_function() {
    let (_d, p, exp) = profile(20);
    let stacks = strobe_export::folded::folded_stacks(&p, FoldOptions::default()).unwrap();
    assert_eq!(stacks.values().sum::<u64>(), exp.samples);
    let hot: u64 = stacks
        .iter()
        .filter(|(s, _)| s.ends_with(fixture::HOT))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(hot, exp.hot_samples);
    for s in stacks.keys() {
        assert!(
            s.starts_with("libc.so.6+0x29d90;main;"),
            "outermost frame first: {s}"
        );
    }
    let per_thread = strobe_export::folded::folded_stacks(
        &p,
        FoldOptions {
            per_process: false,
            per_thread: true,
        },
    )
    .unwrap();
    assert!(per_thread
        .keys()
        .any(|s| s.starts_with("solver (pid 2000);worker-1 (tid 2001);")));
    assert_eq!(per_thread.values().sum::<u64>(), exp.samples);
    let mut svg = Vec::new();
    let n = strobe_export::folded::write_flamegraph(&p, FoldOptions::default(), "test", &mut svg)
        .unwrap();
    assert_eq!(n, exp.samples);
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.contains("<svg"));
    assert!(svg.contains(fixture::HOT));
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
    assert_eq!((x, y), (600, 600));
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.contains(fixture::HOT));
    // 8 of 10 samples before, 2 of 10 after: every hot_loop frame reports
    // a decrease, the cold leaves an increase.
    let titles = |f: &str| -> Vec<String> {
        svg.split("<title>")
            .skip(1)
            .filter(|t| t.starts_with(f))
            .map(|t| t.split("</title>").next().unwrap().to_string())
            .collect()
    };
    let hot = titles("hot_loop (");
    assert!(!hot.is_empty());
    assert!(hot.iter().all(|t| t.contains("; -")), "{hot:?}");
    let cold = titles("libm.so.6+0x12340 (");
    assert!(
        !cold.is_empty() && cold.iter().all(|t| t.contains("; +")),
        "{cold:?}"
    );
}

#[test]
fn pprof_decodes_and_totals_match() {
    let (_d, p, exp) = profile(20);
    let mut gz = Vec::new();
    let st = strobe_export::pprof::write_pprof(&p, &mut gz).unwrap();
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut raw)
        .unwrap();
    let prof = PprofProfile::decode(&raw[..]).expect("profile.proto decodes");
    assert_eq!(prof.string_table[0], "");
    let s = |i: i64| prof.string_table[i as usize].as_str();
    assert_eq!(s(prof.sample_type[0].r#type), "samples");
    assert_eq!(s(prof.sample_type[0].unit), "count");
    assert_eq!(s(prof.sample_type[1].r#type), "cpu");
    assert_eq!(s(prof.sample_type[1].unit), "nanoseconds");
    assert_eq!(prof.period, 1_000_000, "sampling_freq 1000 Hz gives 1 ms");
    let total: i64 = prof.sample.iter().map(|x| x.value[0]).sum();
    assert_eq!(total as u64, exp.samples);
    assert_eq!(st.samples, exp.samples);
    let cpu: i64 = prof.sample.iter().map(|x| x.value[1]).sum();
    assert_eq!(cpu, total * 1_000_000);
    let locs: HashMap<u64, &strobe_export::pprof::Location> =
        prof.location.iter().map(|l| (l.id, l)).collect();
    let funcs: HashMap<u64, &strobe_export::pprof::Function> =
        prof.function.iter().map(|f| (f.id, f)).collect();
    let maps: HashMap<u64, &strobe_export::pprof::Mapping> =
        prof.mapping.iter().map(|m| (m.id, m)).collect();
    let mut hot = 0;
    for smp in &prof.sample {
        for id in &smp.location_id {
            let l = locs[id];
            assert!(l.mapping_id == 0 || maps.contains_key(&l.mapping_id));
            assert!(funcs.contains_key(&l.line[0].function_id));
        }
        let leaf = locs[&smp.location_id[0]];
        if s(funcs[&leaf.line[0].function_id].name) == fixture::HOT {
            hot += smp.value[0];
        }
    }
    assert_eq!(hot as u64, exp.hot_samples);
    assert!(prof.mapping.iter().any(|m| s(m.build_id)
        == "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"
        && s(m.filename) == "/opt/app/bin/solver"));
}

#[test]
fn firefox_profile_has_threads_samples_and_markers() {
    let (_d, p, exp) = profile(10);
    let mut out = Vec::new();
    let st = strobe_export::firefox::write_firefox(&p, &mut out).unwrap();
    assert_eq!(st.samples, exp.samples);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert!(v["meta"]["version"].is_number());
    let threads = v["threads"].as_array().unwrap();
    assert_eq!(threads.len() as u64, exp.threads);
    let samples: u64 = threads
        .iter()
        .map(|t| t["samples"]["length"].as_u64().unwrap())
        .sum();
    assert_eq!(samples, exp.samples);
    let markers: u64 = threads
        .iter()
        .map(|t| t["markers"]["length"].as_u64().unwrap())
        .sum();
    assert_eq!(markers, exp.regions + exp.markers);
    let strings = v["shared"]["stringArray"]
        .as_array()
        .map(|a| a.len())
        .unwrap_or(0)
        + threads
            .iter()
            .map(|t| t["stringArray"].as_array().map(|a| a.len()).unwrap_or(0))
            .sum::<usize>();
    assert!(strings > 0);
    assert!(String::from_utf8_lossy(&out).contains(fixture::HOT));
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
    assert_eq!(rows["run_samples.csv"], exp.samples);
    assert_eq!(rows["run_threads.csv"], exp.threads);
    assert_eq!(rows["run_processes.csv"], 3);
    assert_eq!(rows["run_counters.csv"], exp.counters);
    assert!(rows["run_top.csv"] >= 3);
    let text = std::fs::read_to_string(out.join("run_regions.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "guid,pid,tid,category,name,start,end,duration,corr_id"
    );
    assert_eq!(text.lines().count() as u64, exp.regions + exp.markers + 1);
    let samples = std::fs::read_to_string(out.join("run_samples.csv")).unwrap();
    assert!(samples.starts_with("guid,pid,tid,timestamp,track,leaf,stack\n"));
    assert!(samples.contains(&format!(",{},", fixture::HOT)));
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
