//! The XPTI C ABI exercised from C: programs and subscriber libraries in
//! `tests/c/` are compiled with `cc` against `include/xpti/*.h`, linked with
//! the freshly built `libstrobe_xpti.so` (or the proxy), and run as real
//! subprocesses.

mod common;

use common::{lib_dir, repo_root};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn include_dir() -> PathBuf {
    repo_root().join("include")
}

fn c_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c")
}

/// A directory to link and load against: the dispatcher under its own name
/// and under its SONAME `libxptifw.so.1` (what `-lstrobe_xpti` records).
fn link_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("strobe-xpti-link");
    std::fs::create_dir_all(&d).unwrap();
    let real = lib_dir().join("libstrobe_xpti.so");
    for name in ["libstrobe_xpti.so", "libxptifw.so.1"] {
        let link = d.join(name);
        let _ = std::fs::remove_file(&link);
        // Another test of this binary may have made it in the meantime.
        if let Err(e) = std::os::unix::fs::symlink(&real, &link) {
            assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        }
    }
    d
}

/// Compiles tests/c/`name`.cpp against strobe's header and dispatcher.
fn build_cpp(dir_name: &str, name: &str) -> PathBuf {
    let dir = work_dir(dir_name);
    let exe = dir.join(name);
    let lib = link_dir();
    let inc = format!("-I{}", s(&include_dir()));
    let l = format!("-L{}", s(&lib));
    let rpath = format!("-Wl,-rpath,{}", s(&lib));
    let src = c_dir().join(format!("{name}.cpp"));
    compile(
        "c++",
        &[
            "-std=c++17",
            "-Wall",
            "-Werror",
            "-pthread",
            &inc,
            s(&src),
            &l,
            "-lstrobe_xpti",
            &rpath,
            "-o",
            s(&exe),
        ],
    );
    exe
}

fn work_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("strobe-xpti-c")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn compile(compiler: &str, args: &[&str]) {
    let out = Command::new(compiler)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn build_subscriber(dir: &Path, src: &str, name: &str) -> PathBuf {
    let out = dir.join(name);
    let inc = format!("-I{}", s(&include_dir()));
    compile(
        "cc",
        &[
            "-shared",
            "-fPIC",
            "-Wall",
            "-Werror",
            &inc,
            s(&c_dir().join(src)),
            "-o",
            s(&out),
        ],
    );
    out
}

fn build_app_direct(dir: &Path) -> PathBuf {
    let out = dir.join("app_direct");
    let lib = link_dir();
    let inc = format!("-I{}", s(&include_dir()));
    let l = format!("-L{}", s(&lib));
    let rpath = format!("-Wl,-rpath,{}", s(&lib));
    compile(
        "cc",
        &[
            "-Wall",
            "-Werror",
            &inc,
            s(&c_dir().join("app.c")),
            &l,
            "-lstrobe_xpti",
            &rpath,
            "-o",
            s(&out),
        ],
    );
    out
}

fn build_app_proxy(dir: &Path) -> PathBuf {
    let out = dir.join("app_proxy");
    let inc = format!("-I{}", s(&include_dir()));
    let proxy = Path::new(env!("CARGO_MANIFEST_DIR")).join("proxy/xpti_proxy.c");
    compile(
        "cc",
        &[
            "-Wall",
            "-Werror",
            "-O2",
            &inc,
            s(&c_dir().join("app.c")),
            s(&proxy),
            "-ldl",
            "-lpthread",
            "-o",
            s(&out),
        ],
    );
    out
}

fn run(exe: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(exe);
    // cargo's LD_LIBRARY_PATH would win over the executables' RUNPATH and
    // could pick a stale uplifted copy of the library.
    cmd.env_remove("LD_LIBRARY_PATH");
    for k in [
        "XPTI_TRACE_ENABLE",
        "XPTI_SUBSCRIBERS",
        "XPTI_FRAMEWORK_DISPATCHER",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Checks the trace the test subscriber printed for app.c.
fn assert_app_trace(o: &Output) {
    let out = stdout(o);
    assert!(
        o.status.success(),
        "app failed: {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "enabled=1", "{out}");
    let inits: Vec<&&str> = lines.iter().filter(|l| l.starts_with("init ")).collect();
    assert_eq!(
        inits,
        [
            &"init stream=foo major=1 minor=0 version=foo 1.0",
            &"init stream=bar major=2 minor=3 version=bar 2.3"
        ],
        "{out}"
    );
    let cbs: Vec<&&str> = lines.iter().filter(|l| l.starts_with("cb ")).collect();
    assert_eq!(cbs.len(), 5, "{out}");
    assert!(
        cbs[0].starts_with("cb type=2 ")
            && cbs[0].contains("name=app_graph")
            && cbs[0].contains("instance=1")
    );
    let graph_uid = cbs[0]
        .split("uid=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    assert!(cbs[1].starts_with("cb type=10 "), "{out}");
    for (line, inst) in [(cbs[1], 1), (cbs[3], 2)] {
        assert!(line.contains(&format!("instance={inst} ")), "{line}");
        assert!(
            line.contains("name=work file=app.c line=42 user=payload-data queue=q0"),
            "{line}"
        );
        assert!(line.contains(&format!("parent={graph_uid} ")), "{line}");
    }
    assert!(
        cbs[2].starts_with("cb type=11 ") && cbs[2].contains("user=-"),
        "{out}"
    );
    let uid1 = cbs[1]
        .split("uid=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let uid2 = cbs[3]
        .split("uid=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    assert_eq!(uid1, uid2, "same payload, same unique id");
    assert!(lines.contains(&"finish stream=foo"), "{out}");
    assert_eq!(*lines.last().unwrap(), "done");
}

#[test]
fn abi_through_the_header() {
    let dir = work_dir("abi");
    let exe = dir.join("abi_test");
    let lib = link_dir();
    let inc = format!("-I{}", s(&include_dir()));
    let l = format!("-L{}", s(&lib));
    let rpath = format!("-Wl,-rpath,{}", s(&lib));
    compile(
        "cc",
        &[
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            &inc,
            s(&c_dir().join("abi_test.c")),
            &l,
            "-lstrobe_xpti",
            &rpath,
            "-lpthread",
            "-o",
            s(&exe),
        ],
    );
    let o = run(&exe, &[]);
    assert!(
        o.status.success() && stdout(&o).contains("ABI OK"),
        "abi_test failed:\n{}\n{}",
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn subscriber_loaded_from_env_with_direct_link() {
    let dir = work_dir("direct");
    let sub = build_subscriber(&dir, "subscriber.c", "libtest_subscriber.so");
    let app = build_app_direct(&dir);
    assert_app_trace(&run(&app, &[("XPTI_SUBSCRIBERS", s(&sub))]));
    // Explicitly enabled gives the same.
    assert_app_trace(&run(
        &app,
        &[("XPTI_SUBSCRIBERS", s(&sub)), ("XPTI_TRACE_ENABLE", "true")],
    ));
    // Disabled by environment (0, false, or anything else): calls return FALSE.
    for v in ["0", "false", "yes"] {
        let o = run(
            &app,
            &[("XPTI_SUBSCRIBERS", s(&sub)), ("XPTI_TRACE_ENABLE", v)],
        );
        let out = stdout(&o);
        assert!(o.status.success());
        assert!(out.starts_with("enabled=0\n"), "{v}: {out}");
        assert!(out.contains("disabled notify rc=1"), "{v}: {out}");
        assert!(!out.contains("cb "), "{v}: {out}");
    }
    // No subscriber: disabled.
    let o = run(&app, &[]);
    assert!(stdout(&o).starts_with("enabled=0\n"));
}

#[test]
fn invalid_subscribers_are_rejected_with_a_warning() {
    let dir = work_dir("bad");
    let bad = build_subscriber(&dir, "bad_subscriber.c", "libbad_subscriber.so");
    let good = build_subscriber(&dir, "subscriber.c", "libtest_subscriber.so");
    let app = build_app_direct(&dir);
    let list = format!("{},/nonexistent/libmissing.so,{}", s(&bad), s(&good));
    let o = run(&app, &[("XPTI_SUBSCRIBERS", &list)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(s(&bad)) && err.contains("xptiTraceInit and xptiTraceFinish"),
        "{err}"
    );
    assert!(err.contains("/nonexistent/libmissing.so"), "{err}");
    assert_app_trace(&o);
    // Only invalid subscribers: nothing loaded, tracing stays off.
    let o = run(&app, &[("XPTI_SUBSCRIBERS", s(&bad))]);
    assert!(stdout(&o).starts_with("enabled=0\n"));
}

#[test]
fn builtin_printer_subscriber() {
    let dir = work_dir("printer");
    let app = build_app_direct(&dir);
    let o = run(&app, &[("XPTI_SUBSCRIBERS", "strobe:printer")]);
    let err_text = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err_text}");
    assert!(
        stdout(&o).starts_with("enabled=1\n"),
        "{}\n{err_text}",
        stdout(&o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("stream=foo")).collect();
    assert_eq!(lines.len(), 5, "{err}");
    assert!(
        lines[0].contains("type=graph_create") && lines[0].contains("name=app_graph"),
        "{err}"
    );
    assert!(
        lines[1].contains("type=task_begin")
            && lines[1].contains("name=work at=app.c:42:3")
            && lines[1].contains("queue=q0")
            && lines[1].contains("instance=1"),
        "{err}"
    );
    assert!(
        lines[4].contains("type=task_end") && lines[4].contains("instance=2"),
        "{err}"
    );
    assert!(err.contains("stream foo finalized"), "{err}");
}

#[test]
fn proxy_forwards_only_with_a_dispatcher() {
    let dir = work_dir("proxy");
    let sub = build_subscriber(&dir, "subscriber.c", "libtest_subscriber.so");
    let app = build_app_proxy(&dir);
    let dispatcher = lib_dir().join("libstrobe_xpti.so");
    // No dispatcher: every call returns immediately.
    let o = run(&app, &[("XPTI_SUBSCRIBERS", s(&sub))]);
    let out = stdout(&o);
    assert!(o.status.success());
    assert!(
        out.starts_with("enabled=0\n") && out.contains("disabled notify rc=1"),
        "{out}"
    );
    // Dispatcher named but tracing disabled.
    let o = run(
        &app,
        &[
            ("XPTI_SUBSCRIBERS", s(&sub)),
            ("XPTI_FRAMEWORK_DISPATCHER", s(&dispatcher)),
            ("XPTI_TRACE_ENABLE", "false"),
        ],
    );
    assert!(stdout(&o).starts_with("enabled=0\n"));
    // Dispatcher path that does not load: calls return immediately.
    let o = run(
        &app,
        &[("XPTI_FRAMEWORK_DISPATCHER", "/nonexistent/libxptifw.so")],
    );
    assert!(stdout(&o).starts_with("enabled=0\n"));
    // Dispatcher and subscriber: the full trace.
    assert_app_trace(&run(
        &app,
        &[
            ("XPTI_SUBSCRIBERS", s(&sub)),
            ("XPTI_FRAMEWORK_DISPATCHER", s(&dispatcher)),
        ],
    ));
}

#[test]
fn seed_cpp_example_compiles_and_runs() {
    if Command::new("c++").arg("--version").output().is_err() {
        eprintln!("skipped: no c++ compiler on this machine");
        return;
    }
    let exe = build_cpp("cpp", "seed_example");
    let o = run(&exe, &[]);
    let out = stdout(&o);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("graph rc=0 begin=3 end=3"), "{out}");
    // The cached event is notified with a stable uid; instance 1 from its creation.
    let uids: std::collections::HashSet<&str> = out
        .lines()
        .filter(|l| l.starts_with("cb "))
        .map(|l| l.split("uid=").nth(1).unwrap().split(' ').next().unwrap())
        .collect();
    assert_eq!(uids.len(), 1, "{out}");
}

#[test]
fn the_library_is_named_libxptifw_so_1() {
    let out = Command::new("readelf")
        .args(["-d", s(&lib_dir().join("libstrobe_xpti.so"))])
        .output();
    let Ok(out) = out else {
        eprintln!("skipped: readelf is not installed");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Library soname: [libxptifw.so.1]"), "{text}");
}

/// XPTI 2026.2's tracepoints through their C++ interfaces, as a runtime
/// built against the 2026.2 headers calls them.
#[test]
fn tracepoints_through_their_cpp_interfaces() {
    if Command::new("c++").arg("--version").output().is_err() {
        eprintln!("skipped: no c++ compiler on this machine");
        return;
    }
    let exe = build_cpp("tracepoints", "tracepoint_test");
    let o = run(&exe, &[]);
    let out = stdout(&o);
    assert!(
        o.status.success() && out.contains("TRACEPOINTS OK"),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
