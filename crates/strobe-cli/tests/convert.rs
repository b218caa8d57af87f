//! `strobe convert` end to end: the real binary on real databases.

mod common;
#[path = "../../strobe-export/tests/fixture/mod.rs"]
mod fixture;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output};

use prost::Message;

use common::stderr;

fn strobe(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strobe"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run strobe")
}

#[test]
fn many_databases_many_formats() {
    let dir = tempfile::tempdir().unwrap();
    let (files, exp) = fixture::three_processes(dir.path(), 10);
    let mut args = vec!["convert", "-i"];
    let names: Vec<String> = files
        .iter()
        .map(|f| f.to_str().unwrap().to_string())
        .collect();
    args.extend(names.iter().map(String::as_str));
    args.extend([
        "-f", "pftrace", "json", "folded", "svg", "pprof", "firefox", "csv", "-o", "run", "-d",
        "out",
    ]);
    let o = strobe(&args, dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = dir.path().join("out");
    for f in [
        "run.pftrace",
        "run.trace.json",
        "run.folded",
        "run.svg",
        "run.pb.gz",
        "run.firefox.json",
        "run_regions.csv",
        "run_samples.csv",
        "run_stacks.csv",
        "run_threads.csv",
        "run_processes.csv",
        "run_counters.csv",
        "run_top.csv",
    ] {
        assert!(out.join(f).is_file(), "{f} missing; stderr: {}", stderr(&o));
    }
    assert!(!std::fs::read_dir(&out).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".partial")));
    // Perfetto: decodes, counts match.
    let bytes = std::fs::read(out.join("run.pftrace")).unwrap();
    let trace = strobe_export::perfetto::proto::Trace::decode(&bytes[..]).unwrap();
    let begins = trace
        .packet
        .iter()
        .filter(|p| p.track_event.as_ref().is_some_and(|e| e.r#type == Some(1)))
        .count() as u64;
    let samples = trace
        .packet
        .iter()
        .filter(|p| p.perf_sample.is_some())
        .count() as u64;
    // Off-CPU samples are slices.
    assert_eq!(begins, exp.regions + exp.off_cpu_samples);
    assert_eq!(samples, exp.samples + exp.wall_samples);
    // pprof totals.
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(out.join("run.pb.gz")).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let prof = strobe_export::pprof::PprofProfile::decode(&raw[..]).unwrap();
    assert_eq!(
        prof.sample.iter().map(|s| s.value[0]).sum::<i64>() as u64,
        exp.samples
    );
    // Folded totals and the SVG's hot function.
    let folded = std::fs::read_to_string(out.join("run.folded")).unwrap();
    let total: u64 = folded
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    // Folded values are on-CPU time in µs.
    assert_eq!(total, exp.cpu_ns / 1000);
    assert!(std::fs::read_to_string(out.join("run.svg"))
        .unwrap()
        .contains(fixture::HOT));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("run.trace.json")).unwrap()).unwrap();
    assert_eq!(
        json["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            // Regions (the samples' flame-chart frames are `cat` "sample").
            .filter(|e| e["ph"] == "X" && e["cat"] != "sample")
            .count() as u64,
        exp.regions
    );
    assert!(stderr(&o).contains("wrote"));
}

#[test]
fn markers_bound_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("one.db");
    let exp = fixture::write_process(&db, 500, "n", 30, 5);
    let o = strobe(
        &[
            "convert",
            "-i",
            "one.db",
            "-f",
            "json",
            "--start-marker",
            "checkpoint",
            "--end-marker",
            "checkpoint",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("one.trace.json")).unwrap()).unwrap();
    let x = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] != "sample")
        .count() as u64;
    assert!(
        x > 0 && x < exp.regions,
        "window kept {x} of {}",
        exp.regions
    );
    let o = strobe(
        &[
            "convert",
            "-i",
            "one.db",
            "-f",
            "json",
            "--start-marker",
            "no-such-marker",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no-such-marker"), "{}", stderr(&o));
}

#[test]
fn diff_flamegraph() {
    let dir = tempfile::tempdir().unwrap();
    fixture::write_process(&dir.path().join("a.db"), 100, "n", 10, 8);
    fixture::write_process(&dir.path().join("b.db"), 200, "n", 10, 2);
    let o = strobe(
        &["convert", "--diff", "a.db", "b.db", "-f", "svg"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(dir.path().join("a-vs-b.diff.svg")).unwrap();
    assert!(svg.contains(fixture::HOT));
    let o = strobe(
        &["convert", "--diff", "a.db", "b.db", "-f", "pprof"],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--diff produces svg"), "{}", stderr(&o));
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    fixture::write_process(&dir.path().join("ok.db"), 1, "n", 2, 5);
    // Unknown format.
    let o = strobe(&["convert", "-i", "ok.db", "-f", "svgz"], dir.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("unknown output format 'svgz'"),
        "{}",
        stderr(&o)
    );
    // Empty database.
    fixture::empty(dir.path());
    let o = strobe(&["convert", "-i", "empty.db", "-f", "pftrace"], dir.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no regions, samples or counters"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.path().join("empty.pftrace").exists());
    // Unreadable / not a database.
    std::fs::write(dir.path().join("junk.db"), b"this is not sqlite").unwrap();
    let o = strobe(&["convert", "-i", "junk.db", "-f", "json"], dir.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("junk.db"), "{}", stderr(&o));
    let o = strobe(&["convert", "-i", "missing.db", "-f", "json"], dir.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("missing.db"), "{}", stderr(&o));
    // No error leaves a partial file behind.
    assert!(!std::fs::read_dir(dir.path()).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".partial")));
}

#[test]
fn an_output_name_that_ends_with_the_extension_is_taken_as_is() {
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = fixture::three_processes(dir.path(), 2);
    let input = files[0].to_str().unwrap();
    let o = strobe(
        &[
            "convert",
            "-i",
            input,
            "-f",
            "json",
            "pftrace",
            "-o",
            "named.trace.json",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.path().join("named.trace.json").is_file());
    assert!(dir.path().join("named.trace.json.pftrace").is_file());
    assert!(!dir.path().join("named.trace.json.trace.json").exists());
}
