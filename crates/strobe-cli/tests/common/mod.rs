//! Test helpers shared by the strobe-cli integration tests: where the
//! repository, its test programs and this build's runtime are; `cc` builds
//! of tests/programs; commands without the caller's `STROBE_*` variables;
//! runs bounded in time; apt-get installs of what a test needs; the
//! databases a run leaves; output as text; and the turn that tests which
//! measure time take.
//!
//! Each test file that says `mod common;` compiles its own copy, so the
//! turn of [`one_at_a_time`] is per test binary (as when every file had
//! its own), and what one file does not use is dead code there: hence the
//! `allow` below rather than attributes on each helper.
//!
//! It must never decide what a test checks: no assertion about strobe's
//! results, no threshold, no expected value lives here (those stay in the
//! test that makes them); a helper fails only when it cannot do its own
//! job (cc fails, a run hangs). Nor does it write anywhere but where its
//! caller says, or read the caller's `STROBE_*` settings into a run.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tests of one binary that measure time or need CPU take turns
/// rather than compete for the machine's cores.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// tests/programs: the C programs (and scripts) the tests run.
pub fn programs_dir() -> PathBuf {
    repo().join("tests/programs")
}

/// The runtime this test build made (cargo rebuilds `deps/` for the tests;
/// a `libstrobe_runtime.so` next to `strobe` may be older).
pub fn fresh_runtime() -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_strobe"));
    let deps = exe.with_file_name("deps").join("libstrobe_runtime.so");
    if deps.is_file() {
        deps
    } else {
        exe.with_file_name("libstrobe_runtime.so")
    }
}

/// A command with no inherited `STROBE_*` variable.
pub fn clean_command(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("STROBE_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// `strobe` with none of the caller's `STROBE_*` variables and this
/// build's runtime.
pub fn strobe_command() -> Command {
    let mut cmd = clean_command(env!("CARGO_BIN_EXE_strobe"));
    cmd.env("STROBE_RUNTIME", fresh_runtime());
    cmd
}

/// `apt-get install -y -q <packages>` (non-interactive), retried after
/// `apt-get update -q` when it fails; whether the packages got installed.
/// For tests that install what they need when run as root (as CI runs).
pub fn apt_get_install(packages: &[&str]) -> bool {
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let install: Vec<&str> = ["install", "-y", "-q"]
        .into_iter()
        .chain(packages.iter().copied())
        .collect();
    apt(&install) || (apt(&["update", "-q"]) && apt(&install))
}

/// Runs `cc <args>`; fails the test with cc's stderr when it fails.
pub fn cc(args: &[String]) {
    let out = Command::new("cc").args(args).output().expect("cc runs");
    assert!(
        out.status.success(),
        "cc {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// tests/programs/`name`.c built as `dir/name` with
/// `cc -O2 -g -I include -lpthread`; returns the program.
pub fn build_program(dir: &Path, name: &str) -> PathBuf {
    let exe = dir.join(name);
    let out = Command::new("cc")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(programs_dir().join(format!("{name}.c")))
        .arg(format!("-I{}", repo().join("include").display()))
        .arg("-lpthread")
        .output()
        .expect("cc runs");
    assert!(
        out.status.success(),
        "cc {name}.c:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Runs `cmd` with its output captured and no stdin; a run past `limit`
/// is killed with its process group and fails the test ("hung").
pub fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .process_group(0);
    let mut child = cmd.spawn().expect("the command starts");
    let mut pipes = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut o = Vec::new();
        let _ = pipes.0.read_to_end(&mut o);
        o
    });
    let err = std::thread::spawn(move || {
        let mut e = Vec::new();
        let _ = pipes.1.read_to_end(&mut e);
        e
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            // SAFETY: killing the process group this test started.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!("hung: {cmd:?} ran for more than {} s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Every regular file below `dir` (not following links below it, so not
/// the `latest` link of an output directory) whose name satisfies `keep`,
/// in path order. A directory that cannot be read counts as empty.
pub fn files_below(dir: &Path, keep: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() && e.file_name().to_str().is_some_and(keep) {
                found.push(e.path());
            }
        }
    }
    found.sort();
    found
}

/// Every database (`*.db`) below `dir` (a run directory per run, a host
/// directory in it), not following the `latest` link, in path order.
pub fn databases(dir: &Path) -> Vec<PathBuf> {
    files_below(dir, &|name| {
        Path::new(name).extension().is_some_and(|x| x == "db")
    })
}

/// Bytes (a program's output) as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A command's stderr as text.
pub fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

/// The rows of `strobe summary --report <report> --format csv` on `db`,
/// each as column → value.
pub fn summary_csv(db: &Path, report: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut cmd = strobe_command();
    cmd.args(["summary", "--report", report, "--format", "csv", "-i"])
        .arg(db);
    let out = run_bounded(cmd, Duration::from_secs(60));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty());
    let header: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split(',')
        .map(String::from)
        .collect();
    lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}
