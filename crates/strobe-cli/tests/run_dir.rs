//! Run directories (`strobe-output/<command>-<date>-<time>/`, the `latest`
//! symlink) and the commands that read the latest run when given no `-i`.
//!
//! The module is compiled into this test directly (the binary crate has no
//! library to link against); the commands run as the built binary in a
//! temporary current directory.

#[allow(dead_code)]
#[path = "../src/run_dir.rs"]
mod run_dir;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use strobe_db::{NodeInfo, ProcessInfo, Region, StackFrame, ThreadInfo, Writer, WriterOptions};

fn entries(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// Whether `s` is `<prefix>-YYYYmmdd-HHMMSS`.
fn is_stamped(s: &str, prefix: &str) -> bool {
    let Some(rest) = s.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else {
        return false;
    };
    let b = rest.as_bytes();
    b.len() == 15
        && b[8] == b'-'
        && b.iter()
            .enumerate()
            .all(|(k, c)| k == 8 || c.is_ascii_digit())
}

#[test]
fn run_directory_is_named_after_the_command_and_the_time() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("strobe-output");
    let run = run_dir::create(&dir, "/usr/bin/my-app").unwrap();
    assert!(run.is_dir());
    assert_eq!(run.parent(), Some(dir.as_path()));
    assert!(is_stamped(&name(&run), "my-app"), "{}", run.display());
    assert_eq!(run_dir::latest(&dir), Some(run));
}

#[test]
fn same_second_runs_get_their_own_directories() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path();
    let now = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
    let runs: Vec<PathBuf> = (0..3)
        .map(|_| run_dir::create_at(dir, "app", now).unwrap())
        .collect();
    let first = name(&runs[0]);
    assert!(is_stamped(&first, "app"), "{first}");
    assert_eq!(
        runs.iter().map(|r| name(r)).collect::<Vec<_>>(),
        [first.clone(), format!("{first}-2"), format!("{first}-3")]
    );
    for r in &runs {
        assert!(r.is_dir());
    }
    assert_eq!(run_dir::latest(dir).as_ref(), runs.last());
}

#[test]
fn latest_is_a_relative_symlink_replaced_by_each_run() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path();
    let t0 = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
    let a = run_dir::create_at(dir, "app", t0).unwrap();
    let link = dir.join(run_dir::LATEST);
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new(&name(&a)));
    let b = run_dir::create_at(dir, "other", t0 + Duration::from_secs(1)).unwrap();
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new(&name(&b)));
    assert_eq!(run_dir::latest(dir), Some(b.clone()));
    // The old run is untouched and no temporary link is left behind.
    assert!(a.is_dir());
    assert_eq!(
        entries(dir),
        [name(&a), name(&b), "latest".to_string()].into()
    );
    // Relative: the output directory can move as a whole.
    let moved = out
        .path()
        .with_file_name(format!("{}-moved", name(out.path())));
    std::fs::rename(dir, &moved).unwrap();
    assert_eq!(run_dir::latest(&moved), Some(moved.join(name(&b))));
    std::fs::rename(&moved, dir).unwrap();
}

#[test]
fn concurrent_runs_never_share_a_directory() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path();
    let now = SystemTime::now();
    let barrier = std::sync::Barrier::new(8);
    let runs: BTreeSet<PathBuf> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    run_dir::create_at(dir, "app", now).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(runs.len(), 8);
    let latest = run_dir::latest(dir).unwrap();
    assert!(runs.contains(&latest));
    let mut expected: BTreeSet<String> = runs.iter().map(|r| name(r)).collect();
    expected.insert("latest".into());
    assert_eq!(entries(dir), expected, "no temporary links left");
}

#[test]
fn command_names_are_reduced_to_safe_characters() {
    assert_eq!(run_dir::command_name("/usr/bin/python3.12"), "python3.12");
    assert_eq!(run_dir::command_name("./my app (v2)"), "my_app__v2_");
    assert_eq!(run_dir::command_name("../.hidden"), "hidden");
    assert_eq!(run_dir::command_name("--x"), "x");
    assert_eq!(run_dir::command_name("прог"), "____");
    assert_eq!(run_dir::command_name(""), "run");
    assert_eq!(run_dir::command_name("/"), "run");
    assert_eq!(run_dir::command_name(&"a".repeat(200)).len(), 64);
}

#[test]
fn latest_missing_dangling_or_blocked() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path();
    assert_eq!(run_dir::latest(dir), None);
    assert_eq!(run_dir::latest(&dir.join("nothing-here")), None);
    std::os::unix::fs::symlink("gone", dir.join("latest")).unwrap();
    assert_eq!(run_dir::latest(dir), None);
    std::fs::remove_file(dir.join("latest")).unwrap();
    // A real directory named latest: taken as is, and a new run still
    // succeeds (with a warning) without touching it.
    std::fs::create_dir(dir.join("latest")).unwrap();
    let run = run_dir::create(dir, "app").unwrap();
    assert!(run.is_dir());
    assert_eq!(run_dir::latest(dir), Some(dir.join("latest")));
    assert_eq!(entries(dir), [name(&run), "latest".to_string()].into());
}

/// One small profile: regions "compute" ×4 and "io", 4 samples.
fn write_profile(path: &Path, pid: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let node = NodeInfo {
        machine_id: "run-dir-test".into(),
        hostname: "host".into(),
        ..NodeInfo::default()
    };
    let process = ProcessInfo {
        pid,
        ppid: 1,
        init_ns: 1000,
        start_ns: 1000,
        start_unix_ns: 1_700_000_000_000_000_000 + u64::from(pid),
        command: "app".into(),
        environment: vec![],
    };
    let opts = WriterOptions {
        node: Some(node),
        ..WriterOptions::default()
    };
    let mut w = Writer::create(path, &process, opts).unwrap();
    let t = w
        .add_thread(&ThreadInfo {
            tid: pid,
            name: Some("main"),
            start_ns: Some(1000),
        })
        .unwrap();
    let compute = w.intern_string("compute").unwrap();
    let io = w.intern_string("io").unwrap();
    for (k, (name, d)) in [
        (compute, 10u64),
        (compute, 20),
        (compute, 30),
        (compute, 40),
        (io, 100),
    ]
    .into_iter()
    .enumerate()
    {
        let s = 2000 + 200 * k as u64;
        w.append_region(&Region {
            thread: t,
            start_ns: s,
            end_ns: s + d,
            name,
            category: None,
            stack: None,
            correlation_id: None,
            args: &[],
        })
        .unwrap();
    }
    let m = w
        .add_module(&strobe_db::ModuleRow {
            path: "/bin/app",
            load_address: 0x1000,
            size: 0x1000,
            ..Default::default()
        })
        .unwrap();
    let track = w.add_track(Some(t), "cpu").unwrap();
    let frame = |rel_pc| StackFrame {
        module: Some(m),
        rel_pc,
    };
    for k in 0..4 {
        w.append_sample(
            track,
            strobe_db::SampleMeta::cpu(2000 + k, 1_000_000),
            &[frame(0x20), frame(0x10)],
        )
        .unwrap();
    }
    w.finish(3000).unwrap();
}

const RUN: &str = "app-20250101-120000";

/// A current directory holding `strobe-output/<RUN>/host/1.db` and
/// `strobe-output/latest -> <RUN>`.
fn workdir() -> tempfile::TempDir {
    let cwd = tempfile::tempdir().unwrap();
    let out = cwd.path().join("strobe-output");
    write_profile(&out.join(RUN).join("host").join("1.db"), 1);
    std::os::unix::fs::symlink(RUN, out.join("latest")).unwrap();
    cwd
}

fn strobe(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strobe"))
        .args(args)
        .current_dir(cwd)
        .env_remove("STROBE_OUTPUT_DIR")
        .env_remove("STROBE_CONFIG")
        .output()
        .expect("run strobe")
}

fn ok(cwd: &Path, args: &[&str]) -> String {
    let o = strobe(cwd, args);
    assert!(
        o.status.success(),
        "strobe {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Runs a failing command; returns its stderr.
fn fails(cwd: &Path, args: &[&str]) -> String {
    let o = strobe(cwd, args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "strobe {args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

const COUNT: &str = "SELECT name, COUNT(*) AS n FROM regions GROUP BY name ORDER BY name";
const COUNTED: &str = "name,n\ncompute,4\nio,1\n";

#[test]
fn query_reads_the_latest_run_without_input() {
    let cwd = workdir();
    let cwd = cwd.path();
    assert_eq!(ok(cwd, &["query", "--format", "csv", COUNT]), COUNTED);
    assert_eq!(ok(cwd, &["query", COUNT, "--format", "csv"]), COUNTED);
    let o = strobe(cwd, &["query", "--format", "csv", COUNT]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(RUN), "names the run it reads: {err}");
    // Every existing form still works.
    let db = format!("strobe-output/{RUN}/host/1.db");
    assert_eq!(
        ok(cwd, &["query", "-i", &db, "--format", "csv", COUNT]),
        COUNTED
    );
    assert_eq!(
        ok(cwd, &["query", "--format", "csv", "-i", &db, COUNT]),
        COUNTED
    );
    assert_eq!(
        ok(
            cwd,
            &[
                "query",
                "-i",
                "strobe-output/latest",
                "--format",
                "csv",
                COUNT
            ]
        ),
        COUNTED
    );
    assert_eq!(
        ok(
            cwd,
            &[
                "query",
                "--format",
                "csv",
                "-i",
                "strobe-output/latest/host",
                "SELECT COUNT(*) AS n FROM regions"
            ]
        ),
        "n\n5\n"
    );
    let err = fails(cwd, &["query", "-i", &db]);
    assert!(err.contains("no SQL given"), "{err}");
}

#[test]
fn summary_reads_the_latest_run_without_input() {
    let cwd = workdir();
    let table = ok(
        cwd.path(),
        &["summary", "--format", "csv", "--report", "regions"],
    );
    assert!(table.contains("compute") && table.contains("io"), "{table}");
    let explicit = ok(
        cwd.path(),
        &[
            "summary",
            "-i",
            "strobe-output/latest",
            "--format",
            "csv",
            "--report",
            "regions",
        ],
    );
    assert_eq!(table, explicit);
    // The whole output directory: the run once, not again through latest.
    let all = ok(
        cwd.path(),
        &[
            "summary",
            "-i",
            "strobe-output",
            "--format",
            "csv",
            "--report",
            "regions",
        ],
    );
    assert_eq!(table, all);
}

#[test]
fn convert_reads_the_latest_run_without_input() {
    let cwd = workdir();
    ok(cwd.path(), &["convert", "-f", "folded"]);
    let folded = std::fs::read_to_string(cwd.path().join(format!("{RUN}.folded"))).unwrap();
    assert!(folded.contains(";"), "{folded}");
    // -o still names the output.
    ok(cwd.path(), &["convert", "-f", "folded", "-o", "mine"]);
    assert!(cwd.path().join("mine.folded").is_file());
}

#[test]
fn output_dir_setting_is_honoured() {
    let cwd = workdir();
    std::fs::rename(
        cwd.path().join("strobe-output"),
        cwd.path().join("elsewhere"),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_strobe"))
        .args(["query", "--format", "csv", COUNT])
        .current_dir(cwd.path())
        .env("STROBE_OUTPUT_DIR", "elsewhere")
        .env_remove("STROBE_CONFIG")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), COUNTED);
    let err = fails(cwd.path(), &["query", COUNT]);
    assert!(err.contains("strobe-output/latest does not exist"), "{err}");
}

#[test]
fn no_latest_run_is_a_clear_error() {
    let cwd = tempfile::tempdir().unwrap();
    let cwd = cwd.path();
    for args in [
        &["summary"][..],
        &["query", "SELECT 1"],
        &["convert", "-f", "folded"],
    ] {
        let err = fails(cwd, args);
        assert!(
            err.contains("no -i given and strobe-output/latest does not exist")
                && err.contains("strobe sample -- CMD")
                && err.contains("-i FILE"),
            "{args:?}: {err}"
        );
    }
    assert!(entries(cwd).is_empty(), "nothing created");
    // A latest link whose run was removed says so.
    std::fs::create_dir(cwd.join("strobe-output")).unwrap();
    std::os::unix::fs::symlink(RUN, cwd.join("strobe-output/latest")).unwrap();
    let err = fails(cwd, &["summary"]);
    assert!(err.contains("no longer exists"), "{err}");
    // --diff still needs no -i.
    let o = strobe(cwd, &["convert", "--diff", "a.db", "b.db", "-f", "svg"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("latest"), "{err}");
}
