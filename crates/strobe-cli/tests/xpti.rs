//! `strobe sample --xpti`: real C programs instrumented with the XPTI C API
//! through the proxy (`crates/strobe-xpti/proxy/xpti_proxy.c`), as SYCL
//! runtimes are, run with strobe's dispatcher (`libstrobe_xpti.so`) and the
//! runtime as their XPTI subscriber; checked through the databases and
//! what strobe prints.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use common::{cc, databases, fresh_runtime, programs_dir, repo, text};

/// The dispatcher `--xpti` should find beside the runtime (built as a
/// dev-dependency, like `strobe-xpti`'s own tests find it).
fn dispatcher() -> PathBuf {
    let beside = fresh_runtime().with_file_name("libstrobe_xpti.so");
    assert!(
        beside.is_file(),
        "libstrobe_xpti.so not found at {}: build it with `cargo build -p strobe-xpti`",
        beside.display()
    );
    beside
}

/// Builds the programs once per test binary; returns their directory.
fn built() -> PathBuf {
    static DIR: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut dir = DIR.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = &*dir {
        return d.clone();
    }
    let out =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("xpti-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let src = programs_dir();
    let s = |name: &str| src.join(name).display().to_string();
    let o = |name: &str| out.join(name).display().to_string();
    let include = format!("-I{}", repo().join("include").display());
    let proxy = repo().join("crates/strobe-xpti/proxy/xpti_proxy.c");
    cc(&[
        "-O2".into(),
        "-Wall".into(),
        "-Werror".into(),
        include,
        s("xpti_tasks.c"),
        proxy.display().to_string(),
        "-ldl".into(),
        "-lpthread".into(),
        "-o".into(),
        o("xpti_tasks"),
    ]);
    cc(&[
        "-O2".into(),
        "-shared".into(),
        "-fPIC".into(),
        s("libsycl_strobe_test.c"),
        "-o".into(),
        o("libsycl_strobe_test.so"),
    ]);
    cc(&[
        "-O2".into(),
        "-Wall".into(),
        "-Werror".into(),
        s("xpti_not_initialized.c"),
        format!("-L{}", out.display()),
        "-lsycl_strobe_test".into(),
        format!("-Wl,-rpath,{}", out.display()),
        "-ldl".into(),
        "-o".into(),
        o("xpti_not_initialized"),
    ]);
    *dir = Some(out.clone());
    out
}

/// `strobe` with none of the caller's `STROBE_*` or `XPTI_*` variables and
/// this build's runtime.
fn strobe_command() -> Command {
    let mut cmd = clean(Command::new(env!("CARGO_BIN_EXE_strobe")));
    cmd.env("STROBE_RUNTIME", fresh_runtime());
    cmd
}

/// `cmd` without the caller's `STROBE_*` and `XPTI_*` variables.
fn clean(mut cmd: Command) -> Command {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("STROBE_") || k.starts_with("XPTI_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// `strobe sample -q <options> --output-dir <out> -- <program...>`.
fn sample(out: &Path, options: &[&str], program: &[&str]) -> Output {
    let mut args = vec!["sample", "-q"];
    args.extend_from_slice(options);
    args.extend(["--output-dir", out.to_str().unwrap(), "--"]);
    args.extend_from_slice(program);
    strobe_command().args(&args).output().unwrap()
}

/// (name, category, stream argument) of every region of `db`.
fn regions(db: &Path) -> Vec<(String, String, Option<String>)> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut s = c
        .prepare(
            "SELECT R.name, COALESCE(R.category, ''), \
               (SELECT A.value FROM rocpd_arg A WHERE A.event_id = R.event_id \
                  AND A.name = 'stream') \
             FROM regions R ORDER BY R.start",
        )
        .unwrap();
    s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

const NOT_INITIALIZED: &str = "the XPTI dispatcher was not initialized by libsycl_strobe_test.so \
     (its proxy unloads a dispatcher that lacks a function it needs), so no XPTI notifications \
     were recorded";

#[test]
fn xpti_tasks_of_a_program_using_the_proxy_become_regions_named_by_their_payloads() {
    let dir = built();
    dispatcher();
    let program = dir.join("xpti_tasks");
    let out = tempfile::tempdir().unwrap();
    let o = sample(out.path(), &["--xpti"], &[program.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "tracing on\n", "{}", text(&o.stderr));
    let dbs = databases(out.path());
    assert_eq!(dbs.len(), 1, "{dbs:?}\n{}", text(&o.stderr));
    let all = regions(&dbs[0]);
    let count = |name: &str, category: &str| {
        all.iter()
            .filter(|(n, c, s)| n == name && c == category && s.as_deref() == Some("strobe.test"))
            .count()
    };
    assert_eq!(
        (count("kernel_a", "task"), count("kernel_b", "task")),
        (3, 2),
        "task regions named by their payloads, on stream strobe.test: {all:?}"
    );
    assert_eq!(
        count("urFakeCall", "function"),
        2,
        "calls without an event are named from their function_with_args_t: {all:?}"
    );
    assert!(
        !all.iter().any(|(n, ..)| n.starts_with("event ")),
        "every notification has its name: {all:?}"
    );
    assert!(
        !text(&o.stderr).contains("XPTI"),
        "nothing to report: {}",
        text(&o.stderr)
    );

    // Without --xpti, or with tracing off, the program runs as without
    // strobe: no dispatcher.
    for options in [&[][..], &["--xpti", "--use-tracing=false"][..]] {
        let plain = tempfile::tempdir().unwrap();
        let o = sample(plain.path(), options, &[program.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(text(&o.stdout), "tracing off\n", "{options:?}");
        assert!(!text(&o.stderr).contains("XPTI"), "{}", text(&o.stderr));
    }
}

#[test]
fn the_users_subscribers_and_dispatcher_are_kept() {
    let dir = built();
    let program = dir.join("xpti_tasks");
    let out = tempfile::tempdir().unwrap();
    // The user's own dispatcher (here strobe's, by its path) wins; a
    // subscriber of theirs that does not exist is reported by the
    // dispatcher, and the runtime still receives the notifications.
    let o = strobe_command()
        .env("XPTI_FRAMEWORK_DISPATCHER", dispatcher())
        .env("XPTI_SUBSCRIBERS", "/nonexistent/libtheirs.so")
        .args(["sample", "-q", "--xpti", "--output-dir"])
        .arg(out.path())
        .arg("--")
        .arg(&program)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "tracing on\n");
    assert_eq!(
        text(&o.stderr)
            .lines()
            .filter(|l| l.contains("/nonexistent/libtheirs.so"))
            .count(),
        1,
        "the user's subscriber was kept in XPTI_SUBSCRIBERS, and only the program's \
         dispatcher tried to load it (not the runtime's own framework): {}",
        text(&o.stderr)
    );
    let all = regions(&databases(out.path())[0]);
    assert_eq!(all.iter().filter(|(n, ..)| n == "kernel_a").count(), 3);
}

#[test]
fn a_runtime_that_never_initialized_the_dispatcher_is_reported_by_sample_and_summary() {
    let dir = built();
    let program = dir.join("xpti_not_initialized");
    let out = tempfile::tempdir().unwrap();
    let o = sample(out.path(), &["--xpti"], &[program.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "answer 42\n");
    assert!(
        text(&o.stderr).contains(NOT_INITIALIZED),
        "strobe sample says it: {}",
        text(&o.stderr)
    );
    let dbs = databases(out.path());
    assert_eq!(dbs.len(), 1, "{dbs:?}");
    let summary = strobe_command()
        .args(["summary", "-i"])
        .arg(&dbs[0])
        .output()
        .unwrap();
    assert!(summary.status.success(), "{}", text(&summary.stderr));
    let printed = text(&summary.stdout);
    assert_eq!(
        printed.matches(NOT_INITIALIZED).count(),
        1,
        "strobe summary says it once: {printed}"
    );
    let json = strobe_command()
        .args(["summary", "--format", "json", "-i"])
        .arg(&dbs[0])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["notes"][0].as_str(), Some(NOT_INITIALIZED), "{v}");

    // Without --xpti nothing was asked for: nothing to say.
    let plain = tempfile::tempdir().unwrap();
    let o = sample(plain.path(), &[], &[program.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("XPTI"), "{}", text(&o.stderr));
}

#[test]
fn a_dispatcher_the_runtime_cannot_find_is_reported_and_nothing_breaks() {
    let dir = built();
    let program = dir.join("xpti_not_initialized");
    let out = tempfile::tempdir().unwrap();
    let o = sample(
        out.path(),
        &["--xpti"],
        &[program.to_str().unwrap(), "init-only"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "answer 42\n");
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains(
            "the XPTI dispatcher that announced stream `orphan.stream` could not be found"
        ) && stderr.contains("is not loaded"),
        "{stderr}"
    );
    assert!(!stderr.contains(NOT_INITIALIZED), "{stderr}");
}

#[test]
fn xpti_without_a_dispatcher_anywhere_is_a_clear_error() {
    // An installed layout with the runtime but no libstrobe_xpti.so.
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join("bin");
    let lib = root.path().join("lib/strobe");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_strobe"), bin.join("strobe")).unwrap();
    std::fs::copy(fresh_runtime(), lib.join("libstrobe_runtime.so")).unwrap();
    let marker = root.path().join("ran");
    let o = clean(Command::new(bin.join("strobe")))
        .args(["sample", "-q", "--xpti", "--output-dir"])
        .arg(root.path().join("out"))
        .args(["--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("libstrobe_xpti.so") && stderr.contains("XPTI_FRAMEWORK_DISPATCHER"),
        "{stderr}"
    );
    assert!(!marker.exists(), "nothing ran");
}

#[test]
fn preloaded_without_the_launcher_the_xpti_setting_says_what_is_missing() {
    let dir = built();
    let tmp = tempfile::tempdir().unwrap();
    let o = clean(Command::new(dir.join("xpti_not_initialized")))
        .env("LD_PRELOAD", fresh_runtime())
        .env("STROBE_BIN", env!("CARGO_BIN_EXE_strobe"))
        .env("STROBE_OUTPUT_DIR", tmp.path().join("out"))
        .env("STROBE_XPTI", "true")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "answer 42\n");
    let dbs = databases(&tmp.path().join("out"));
    assert_eq!(dbs.len(), 1, "{dbs:?}: {}", text(&o.stderr));
    let summary = strobe_command()
        .args(["summary", "-i"])
        .arg(&dbs[0])
        .output()
        .unwrap();
    let printed = text(&summary.stdout);
    assert!(
        printed.contains(
            "libsycl_strobe_test.so was loaded with the xpti setting on, but XPTI_SUBSCRIBERS \
             does not name strobe's runtime here"
        ),
        "{printed}"
    );
    assert!(!printed.contains(NOT_INITIALIZED), "{printed}");
}

/// Intel's SYCL runtime (oneAPI 2026.2 from PyPI) in the venv
/// `scripts/sycl-venv.sh` makes, or why this machine cannot have it.
fn sycl_venv() -> Result<PathBuf, String> {
    let script = repo().join("scripts/sycl-venv.sh");
    let out = Command::new("bash").arg(&script).output().unwrap();
    match out.status.code() {
        Some(0) => Ok(PathBuf::from(text(&out.stdout).trim())),
        Some(3) => Err(text(&out.stderr)),
        _ => panic!("{} failed: {}", script.display(), text(&out.stderr)),
    }
}

#[test]
fn sycl_work_of_intels_runtime_becomes_regions_and_the_program_runs_as_without() {
    let venv = match sycl_venv() {
        Ok(v) => v,
        Err(why) => {
            println!("skipping: no SYCL runtime here: {why}");
            return;
        }
    };
    dispatcher();
    let python = venv.join("bin/python");
    let work = repo().join("tests/programs/sycl_dpctl_work.py");
    // The wheel's OpenCL .icd names a placeholder: the CPU device directly.
    let ocl = venv.join("lib/libintelocl.so");
    let run = |strobe: Option<&Path>| {
        let mut cmd = match strobe {
            Some(out) => {
                let mut c = strobe_command();
                c.args(["sample", "-q", "--xpti", "--output-dir"])
                    .arg(out)
                    .arg("--")
                    .arg(&python);
                c
            }
            None => clean(Command::new(&python)),
        };
        cmd.arg(&work)
            .env("OCL_ICD_FILENAMES", &ocl)
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap()
    };
    let plain = run(None);
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    let out = tempfile::tempdir().unwrap();
    let o = run(Some(out.path()));
    assert_eq!(o.status.code(), plain.status.code(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), text(&plain.stdout), "{}", text(&o.stderr));
    assert!(
        !text(&o.stderr).contains("XPTI"),
        "nothing to report: {}",
        text(&o.stderr)
    );
    let dbs = databases(out.path());
    assert_eq!(dbs.len(), 1, "{dbs:?}\n{}", text(&o.stderr));
    let all = regions(&dbs[0]);
    // The SYCL runtime sends on `sycl` or, when a subscriber takes every
    // stream, `sycl.debug`; memory on its experimental stream.
    let count = |name: &str, category: &str, streams: &[&str]| {
        all.iter()
            .filter(|(n, c, s)| {
                n == name && c == category && s.as_deref().is_some_and(|s| streams.contains(&s))
            })
            .count()
    };
    let sycl = ["sycl", "sycl.debug"];
    let memory = ["sycl.experimental.mem_alloc"];
    assert_eq!(
        [
            count("DPCTLQueue_SubmitRange", "task", &sycl),
            count("DPCTLQueue_SubmitNDRange", "task", &sycl),
            count("memcpy", "task", &sycl),
            count("barrier", "task", &sycl),
            count("alignedAlloc", "memory", &memory),
            count("free", "memory", &memory),
        ],
        [1, 1, 3, 1, 2, 2],
        "the workload's two kernels, three copies, barrier, two allocations and frees: {all:?}"
    );
    // Instants say their trace type: the queue the workload made, its
    // barrier's graph node.
    let c = rusqlite::Connection::open(&dbs[0]).unwrap();
    let types: Vec<(String, Option<String>)> = c
        .prepare(
            "SELECT R.name, (SELECT A.value FROM rocpd_arg A WHERE A.event_id = R.event_id \
               AND A.name = 'trace_type') FROM regions R WHERE R.category = 'xpti'",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let has = |name: &str, ty: &str| {
        types
            .iter()
            .any(|(n, t)| n.starts_with(name) && t.as_deref() == Some(ty))
    };
    assert!(
        types.iter().all(|(_, t)| t.is_some())
            && has("queue[", "queue_create")
            && has("virtual_node[", "node_create"),
        "{types:?}"
    );
}
