//! `strobe query`, `summary`, `merge` and `convert` over a few hundred
//! rank databases (more than the ten a profile attaches, so they are read
//! in place, one database at a time): the real binary on real files
//! written by `strobe_db::synth` (the generator `strobe-bench multinode`
//! uses), checked against the same data merged into one file per node
//! (few enough files to be attached, the long-standing path), with the
//! number of open files limited well below the number of databases.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use prost::Message;

use common::stderr;

/// Ranks written: more than one merged file may hold (256), more than the
/// open-file limit the commands run under.
const RANKS: u32 = 300;
/// Nodes they are spread over (one merged file each).
const NODES: u32 = 8;
/// Open files allowed to the commands reading the rank databases.
const OPEN_FILES: u64 = 128;

struct Job {
    /// The rank databases (`run/<host>/<pid>.db`).
    run: PathBuf,
    /// The same processes merged per node (`nodes/<host>.db`).
    nodes: PathBuf,
}

/// A directory for one test's outputs, removed when the test ends (the
/// job itself stays for the other tests: a static is never dropped).
fn outputs() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// The job, written once for every test of this file into the target's
/// scratch directory (a static is never dropped, so a temporary directory
/// would be left behind by every run; this one is replaced by the next).
fn job() -> &'static Job {
    static JOB: OnceLock<Job> = OnceLock::new();
    JOB.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("many_ranks");
        let _ = std::fs::remove_dir_all(&dir);
        let run = dir.join("run");
        let spec = strobe_db::synth::JobSpec {
            ranks: RANKS,
            nodes: NODES,
            seed: 7,
            min_samples: 20,
            max_samples: 60,
            steps: 4,
            job: "test.1".into(),
        };
        let written = strobe_db::synth::write_job(&run, &spec, 2, &|_| {}).unwrap();
        assert_eq!(written.len(), RANKS as usize);
        let nodes = dir.join("nodes");
        let o = strobe(
            &[
                "merge",
                "--quiet",
                "--per-node",
                "-i",
                s(&run),
                "-o",
                s(&nodes),
            ],
            None,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        Job { run, nodes }
    })
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs strobe; with `open_files`, under that limit of open file
/// descriptors (RLIMIT_NOFILE, soft and hard).
fn strobe(args: &[&str], open_files: Option<u64>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strobe"));
    cmd.args(args);
    if let Some(n) = open_files {
        // SAFETY: the closure runs in the child between fork and exec and
        // only calls setrlimit, which is async-signal-safe; it allocates
        // nothing and touches no lock.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd.output().expect("run strobe")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `strobe <args> -i <ranks>` (open files limited) and `strobe <args> -i
/// <per-node files>`: both must succeed; returns their outputs.
fn both(args: &[&str]) -> (Output, Output) {
    let j = job();
    let mut a: Vec<&str> = args.to_vec();
    a.extend(["-i", s(&j.run)]);
    let many = strobe(&a, Some(OPEN_FILES));
    assert!(many.status.success(), "{a:?}: {}", stderr(&many));
    let mut b: Vec<&str> = args.to_vec();
    b.extend(["-i", s(&j.nodes)]);
    let merged = strobe(&b, None);
    assert!(merged.status.success(), "{b:?}: {}", stderr(&merged));
    (many, merged)
}

/// Asserts `a` and `b` are equal, naming the first line that differs.
fn same_lines(a: &str, b: &str, what: &str) {
    for (k, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        assert_eq!(x, y, "{what}: line {} differs", k + 1);
    }
    assert_eq!(a.lines().count(), b.lines().count(), "{what}: line counts");
}

#[test]
fn the_per_node_merge_holds_every_process() {
    let j = job();
    let files: Vec<_> = std::fs::read_dir(&j.nodes).unwrap().collect();
    assert_eq!(files.len(), NODES as usize);
    let o = strobe(
        &[
            "query",
            "--format",
            "csv",
            "-i",
            s(&j.nodes),
            "select count(*), count(distinct guid) from processes",
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!("count(*),count(distinct guid)\n{RANKS},{RANKS}\n")
    );
}

#[test]
fn one_merged_file_refuses_more_processes_than_it_can_hold() {
    let j = job();
    let dir = outputs();
    let out = dir.path().join("all.db");
    let o = strobe(&["merge", "--quiet", "-i", s(&j.run), "-o", s(&out)], None);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("300 processes") && e.contains("--per-node"),
        "{e}"
    );
    assert!(!out.exists());
    assert!(!dir.path().join("all.db.partial").exists());
}

#[test]
fn queries_mean_the_same_over_the_rank_databases() {
    for sql in [
        "select count(*) from samples",
        "select count(*), sum(duration), min(start), max(\"end\") from regions",
        "select name, category, count(*), sum(duration) from regions group by 1, 2 order by 1, 2",
        // Rows of every process, in an order of their own.
        "select guid, pid, tid, name from threads order by guid, tid",
        // A join between two per-process views, on guid.
        "select count(*) from samples s join threads t on t.guid = s.guid and t.tid = s.tid \
         where t.name = 'solver'",
        // Arguments of the MPI calls (the contract's `flow_out` keys).
        "select count(*), count(distinct value) from rocpd_arg where name = 'flow_out'",
        // A view over every process (`top`) and an aggregate over settings.
        "select name, total_calls from top order by total_calls desc, name limit 5",
        "select count(*), sum(cast(value as integer)) from strobe_settings where name = 'mpi.rank'",
        // Comparisons in another collation and against text: the column's
        // affinity applies as in the view.
        "select count(*) from regions where name = 'mpi_waitall' collate nocase",
        "select count(*) from threads where pid = '40000'",
        // A lookup of one process by guid, as the inner loop of a join does.
        "select p.pid, n.hostname from processes p join rocpd_info_node n on n.guid = p.guid \
         order by p.pid, n.hostname limit 3",
    ] {
        let (many, merged) = both(&["query", "--format", "csv", sql]);
        same_lines(&stdout(&many), &stdout(&merged), sql);
        assert!(stdout(&many).lines().count() > 1, "{sql}: no row");
    }
}

#[test]
fn a_time_window_means_the_same() {
    let (many, merged) = both(&[
        "query",
        "--format",
        "csv",
        "--start",
        "20%",
        "--end",
        "60%",
        "select count(*), sum(duration) from regions",
    ]);
    assert_eq!(stdout(&many), stdout(&merged));
}

#[test]
fn summaries_are_the_same() {
    for args in [
        vec!["summary", "--format", "csv", "--limit", "0"],
        vec!["summary", "--format", "csv", "--limit", "0", "--by-process"],
        vec![
            "summary", "--format", "csv", "--limit", "0", "--start", "10%", "--end", "70%",
        ],
    ] {
        let (many, merged) = both(&args);
        let (a, b) = (stdout(&many), stdout(&merged));
        assert!(
            a.contains("# functions") && a.contains("# mpi_ranks"),
            "{a}"
        );
        same_lines(&a, &b, &format!("{args:?}"));
    }
}

/// The Perfetto trace's packets by kind: slice begins, ends, perf samples,
/// counter values.
fn perfetto_counts(path: &Path) -> [usize; 4] {
    let bytes = std::fs::read(path).unwrap();
    let trace = strobe_export::perfetto::proto::Trace::decode(&bytes[..]).unwrap();
    let of = |t: i32| {
        trace
            .packet
            .iter()
            .filter(|p| p.track_event.as_ref().is_some_and(|e| e.r#type == Some(t)))
            .count()
    };
    let samples = trace
        .packet
        .iter()
        .filter(|p| p.perf_sample.is_some())
        .count();
    [of(1), of(2), samples, of(4)]
}

#[test]
fn conversions_hold_the_same_events() {
    let j = job();
    let out = outputs();
    // The merged databases with no limit; the many with few open files.
    for (name, input, open_files) in [
        ("merged", &j.nodes, None),
        ("many", &j.run, Some(OPEN_FILES)),
    ] {
        let o = strobe(
            &[
                "convert",
                "-f",
                "folded",
                "pftrace",
                "csv",
                "-o",
                name,
                "-d",
                s(out.path()),
                "-i",
                s(input),
            ],
            open_files,
        );
        assert!(o.status.success(), "{name}: {}", stderr(&o));
    }
    let read = |n: &str| std::fs::read_to_string(out.path().join(n)).unwrap();
    same_lines(&read("many.folded"), &read("merged.folded"), "folded");
    let counts = perfetto_counts(&out.path().join("many.pftrace"));
    assert_eq!(counts, perfetto_counts(&out.path().join("merged.pftrace")));
    assert!(counts.iter().all(|n| *n > 0), "{counts:?}");
    // CSV: the same rows (in an order of their own over many databases).
    for table in ["regions", "samples", "threads", "processes", "counters"] {
        let sorted = |n: &str| {
            let mut l: Vec<String> = read(&format!("{n}_{table}.csv"))
                .lines()
                .map(String::from)
                .collect();
            l.sort();
            l
        };
        let (a, b) = (sorted("many"), sorted("merged"));
        assert!(a.len() > 1, "{table}");
        assert_eq!(a, b, "{table}");
    }
}

#[test]
fn other_formats_work_with_few_open_files() {
    let j = job();
    let out = outputs();
    let o = strobe(
        &[
            "convert",
            "-f",
            "json",
            "pprof",
            "firefox",
            "-o",
            "few",
            "-d",
            s(out.path()),
            "-i",
            s(&j.run),
        ],
        Some(OPEN_FILES),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    for f in ["few.trace.json", "few.pb.gz", "few.firefox.json"] {
        assert!(out.path().join(f).metadata().unwrap().len() > 0, "{f}");
    }
    let o = strobe(
        &[
            "merge",
            "--quiet",
            "--per-node",
            "-i",
            s(&j.run),
            "-o",
            s(&out.path().join("nodes-again")),
        ],
        Some(OPEN_FILES),
    );
    assert!(o.status.success(), "{}", stderr(&o));
}
