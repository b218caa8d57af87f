//! `strobe sample` end to end: real C programs (tests/programs) built with
//! `cc`, run under the preloaded runtime, checked through the databases they
//! leave.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use strobe_db::{Profile, SampleRow};

// The tests here run real programs whose sample counts depend on getting
// CPU: they take turns (`one_at_a_time`) rather than compete for the
// machine's cores.
use common::{
    apt_get_install, cc, clean_command, databases, fresh_runtime, one_at_a_time, programs_dir,
    stderr, strobe_command,
};

/// Builds the test programs once per test binary; returns their directory.
fn built() -> PathBuf {
    static DIR: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut dir = DIR.lock().unwrap();
    if let Some(d) = &*dir {
        return d.clone();
    }
    let out =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("programs-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let src = programs_dir();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include");
    let o = |name: &str| out.join(name).display().to_string();
    let s = |name: &str| src.join(name).display().to_string();
    let flags = ["-O2", "-g", "-fomit-frame-pointer"].map(String::from);
    let mut lib = flags.to_vec();
    lib.extend(["-shared", "-fPIC", "-o"].map(String::from));
    let mut slow = lib.clone();
    lib.extend([o("libhotlib.so"), s("libhotlib.c")]);
    cc(&lib);
    slow.extend([o("libslowstart.so"), s("libslowstart.c")]);
    cc(&slow);
    for name in [
        "hotspots",
        "early_thread",
        "own_timer",
        "vfork_exec",
        "fixedwork",
        "deep",
        "crash",
        "spin",
        "stress",
        "regions",
        "leave_child",
        "raw_clone",
        "libc_pthread",
        "short_threads",
        "two_equal_threads",
        "syscall_loop",
        "off_cpu",
        "libc_work",
        "jit",
    ] {
        let mut args = flags.to_vec();
        args.extend([
            "-o".into(),
            o(name),
            s(&format!("{name}.c")),
            format!("-I{}", include.display()),
            format!("-L{}", out.display()),
            "-lhotlib".into(),
            "-Wl,--no-as-needed".into(),
            "-lslowstart".into(),
            "-Wl,--as-needed".into(),
            format!("-Wl,-rpath,{}", out.display()),
            "-lpthread".into(),
            "-ldl".into(),
        ]);
        cc(&args);
    }
    cc(&[
        "-O2".into(),
        "-g".into(),
        "-o".into(),
        o("dlopen_work"),
        s("dlopen_work.c"),
        "-ldl".into(),
    ]);
    cc(&[
        "-O2".into(),
        "-static".into(),
        "-o".into(),
        o("leave_child_static"),
        s("leave_child.c"),
        s("libslowstart.c"),
    ]);
    *dir = Some(out.clone());
    out
}

fn strobe(args: &[&str], env: &[(&str, &str)]) -> Output {
    strobe_command()
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// `strobe sample -q --output-dir <out> -- <program...>`.
fn sample_in(out: &Path, program: &[&str]) -> Output {
    sample_with(out, &[], program)
}

/// `strobe sample -q <options> --output-dir <out> -- <program...>`.
fn sample_with(out: &Path, options: &[&str], program: &[&str]) -> Output {
    let mut args = vec!["sample", "-q"];
    args.extend_from_slice(options);
    args.extend(["--output-dir", out.to_str().unwrap(), "--"]);
    args.extend_from_slice(program);
    strobe(&args, &[])
}

fn samples(db: &Path) -> Vec<SampleRow> {
    let p = Profile::open(&[db.display().to_string()]).unwrap();
    p.samples().unwrap().map(|s| s.unwrap()).collect()
}

fn names(s: &SampleRow) -> Vec<String> {
    s.frames.iter().map(|f| f.display_name()).collect()
}

#[test]
fn shares_per_thread_match_cpu_time_and_stacks_reach_main_or_the_thread_start() {
    let _turn = one_at_a_time();
    let bin = built();
    let out = tempfile::tempdir().unwrap();
    let o = strobe(
        &[
            "sample",
            "--output-dir",
            out.path().to_str().unwrap(),
            "--",
            bin.join("hotspots").to_str().unwrap(),
            "0.7",
            "2",
            "1",
        ],
        &[("STROBE_TEST_TRUTH", "1")],
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("hot_a") && err.contains("Sampled functions"),
        "summary printed: {err}"
    );
    let truth: HashMap<i64, (f64, f64)> = err
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.strip_prefix("truth ")?.split(' ').collect();
            Some((f[0].parse().ok()?, (f[1].parse().ok()?, f[2].parse().ok()?)))
        })
        .collect();
    assert_eq!(truth.len(), 2, "{err}");
    let dbs = databases(out.path());
    assert_eq!(dbs.len(), 1);
    let all = samples(&dbs[0]);
    let (mut total_a, mut total_b) = (0usize, 0usize);
    for (tid, (ns_a, ns_b)) in &truth {
        let mine: Vec<&SampleRow> = all.iter().filter(|s| s.tid == *tid).collect();
        let a = mine.iter().filter(|s| names(s)[0] == "hot_a").count();
        let b = mine.iter().filter(|s| names(s)[0] == "hot_b").count();
        // The CPU time the samples stand for (a loaded machine merges
        // expirations into fewer rows; the weights count them).
        let sampled_ns: u64 = mine
            .iter()
            .filter(|s| ["hot_a", "hot_b"].contains(&names(s)[0].as_str()))
            .map(|s| s.weight_ns)
            .sum();
        assert!(
            sampled_ns as f64 >= 0.6 * (ns_a + ns_b),
            "thread {tid}: {a} + {b} samples stand for {:.0} ms of {:.0}",
            sampled_ns as f64 / 1e6,
            (ns_a + ns_b) / 1e6
        );
        let seen = a as f64 / (a + b) as f64;
        let want = ns_a / (ns_a + ns_b);
        assert!(
            (seen - want).abs() < 0.07,
            "thread {tid}: hot_a share {seen:.3}, truth {want:.3}"
        );
        total_a += a;
        total_b += b;
    }
    let seen = total_a as f64 / (total_a + total_b) as f64;
    assert!((seen - 0.7).abs() < 0.05, "overall hot_a share {seen:.3}");
    let reaching = all
        .iter()
        .filter(|s| names(s).iter().any(|n| n == "main" || n == "worker"))
        .count();
    assert!(
        reaching * 100 >= all.len() * 99,
        "{reaching} of {} samples reach main or worker",
        all.len()
    );
    for s in all.iter().filter(|s| names(s)[0] == "hot_a").take(20) {
        assert_eq!(names(s)[1], "split_work", "{:?}", names(s));
    }
    // The samples' metrics become counter series: per-thread CPU time
    // (growing, about 2 s per thread) and the process's peak RSS.
    let p = Profile::open(&[dbs[0].display().to_string()]).unwrap();
    let counters: Vec<_> = p.counters().unwrap().map(|c| c.unwrap()).collect();
    let cpu: Vec<_> = counters
        .iter()
        .filter(|c| c.name == "thread_cpu_time")
        .collect();
    assert!(cpu.len() >= 20, "{} CPU-time points", cpu.len());
    let max_cpu = cpu.iter().map(|c| c.value).fold(0.0, f64::max);
    assert!(
        max_cpu > 1.5e9 && max_cpu < 3.0e9,
        "thread CPU time reaches about 2 s: {max_cpu}"
    );
    assert!(counters
        .iter()
        .any(|c| c.name == "peak_rss" && c.value > 1000.0));
}

#[test]
fn a_recursion_200_deep_is_unwound_whole_with_default_settings() {
    let _turn = one_at_a_time();
    let bin = built();
    let out = tempfile::tempdir().unwrap();
    let o = sample_with(
        out.path(),
        &["--lines"],
        &[bin.join("deep").to_str().unwrap(), "200", "1"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let all = samples(&databases(out.path())[0]);
    // --lines: source positions from the program's DWARF (built with -g).
    let descend = all[0]
        .frames
        .iter()
        .find(|f| f.function.as_deref() == Some("descend"))
        .expect("a descend frame");
    assert!(
        descend
            .file
            .as_deref()
            .is_some_and(|f| f.ends_with("deep.c")),
        "{descend:?}"
    );
    assert!(
        descend.line.is_some_and(|l| (20..=35).contains(&l)),
        "{descend:?}"
    );
    let in_bottom: Vec<_> = all.iter().filter(|s| names(s)[0] == "bottom").collect();
    assert!(
        in_bottom.len() > 100,
        "{} samples in bottom",
        in_bottom.len()
    );
    let whole = in_bottom
        .iter()
        .filter(|s| {
            let n = names(s);
            n.iter().filter(|f| *f == "descend").count() == 201 && n.iter().any(|f| f == "main")
        })
        .count();
    assert!(
        whole * 100 >= in_bottom.len() * 99,
        "{whole} of {} hold 201 descend frames and main",
        in_bottom.len()
    );
}

#[test]
fn regions_markers_and_thread_names_from_the_user_api() {
    let _turn = one_at_a_time();
    let bin = built();
    let out = tempfile::tempdir().unwrap();
    let o = sample_in(out.path(), &[bin.join("regions").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "api present\n");
    let without = Command::new(bin.join("regions")).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&without.stdout),
        "api absent\n",
        "no-op without strobe"
    );
    let db = databases(out.path()).remove(0);
    let p = Profile::open(&[db.display().to_string()]).unwrap();
    let regions: Vec<_> = p.regions().unwrap().map(|r| r.unwrap()).collect();
    let count = |n: &str| regions.iter().filter(|r| r.name == n).count();
    assert_eq!(
        (count("outer"), count("inner"), count("checkpoint")),
        (10, 20, 10)
    );
    for inner in regions.iter().filter(|r| r.name == "inner") {
        let parent = regions.iter().find(|o| {
            o.name == "outer" && o.tid == inner.tid && o.start <= inner.start && inner.end <= o.end
        });
        assert!(
            parent.is_some(),
            "inner region nested in an outer one: {inner:?}"
        );
    }
    let threads: Vec<_> = p.threads().unwrap().map(|t| t.unwrap()).collect();
    let mut named: Vec<_> = threads.iter().filter_map(|t| t.name.clone()).collect();
    named.sort();
    assert_eq!(named, ["main-thread", "worker-thread-with-a-long-name"]);
}

#[test]
fn a_crashing_program_still_dies_by_sigsegv_and_leaves_its_database() {
    let _turn = one_at_a_time();
    let bin = built();
    let out = tempfile::tempdir().unwrap();
    let o = sample_in(out.path(), &[bin.join("crash").to_str().unwrap(), "1"]);
    assert_eq!(o.status.code(), Some(128 + libc::SIGSEGV), "{}", stderr(&o));
    assert!(stderr(&o).contains("killed by SIGSEGV"), "{}", stderr(&o));
    let dbs = databases(out.path());
    assert_eq!(dbs.len(), 1);
    let all = samples(&dbs[0]);
    assert!(
        all.len() > 100,
        "{} samples saved before the crash",
        all.len()
    );
    assert!(all.iter().any(|s| names(s).contains(&"busy".to_string())));
}

#[test]
fn a_program_killed_with_sigkill_keeps_everything_but_the_last_flush_interval() {
    let _turn = one_at_a_time();
    let bin = built();
    let out = tempfile::tempdir().unwrap();
    let mut child = strobe_command()
        .args([
            "sample",
            "-q",
            "--flush-interval",
            "500ms",
            "--output-dir",
            out.path().to_str().unwrap(),
            "--",
        ])
        .arg(bin.join("spin"))
        .arg("30")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the program's database, then let it run for 3 s of samples.
    let started = std::time::Instant::now();
    let db = loop {
        if let Some(db) = std::fs::read_dir(out.path())
            .ok()
            .and_then(|_| databases(out.path()).into_iter().next())
        {
            break db;
        }
        assert!(started.elapsed().as_secs() < 20, "no database appeared");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let pid: i32 = db.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    // 3 s of the program's CPU time (a loaded machine gives it less than a
    // core), at most 30 s.
    let cpu_from = cpu_ns(pid as u32);
    let waited = std::time::Instant::now();
    while cpu_ns(pid as u32) < cpu_from + 3_000_000_000 && waited.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: killing the profiled program (our grandchild) by pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGKILL));
    let all = samples(&db);
    // 3 s of CPU at 250 Hz, less the last 0.5 s flush interval: about 625.
    assert!(all.len() > 250, "{} samples survived SIGKILL", all.len());
    assert!(all.iter().all(|s| !s.frames.is_empty()));
}

#[test]
fn bad_input_starts_nothing() {
    let _turn = one_at_a_time();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("never");
    let d = dir.to_str().unwrap();
    let o = strobe(
        &[
            "sample",
            "--output-dir",
            d,
            "--sampling-freq",
            "fast",
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("invalid value 'fast' for flag --sampling-freq"),
        "{}",
        stderr(&o)
    );
    let o = strobe(
        &[
            "sample",
            "--output-dir",
            d,
            "--no-such-option",
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    let o = strobe(&["sample", "--output-dir", d], &[]);
    assert_eq!(o.status.code(), Some(2), "a command is required");
    let o = strobe(
        &["sample", "--output-dir", d, "--", "true"],
        &[("STROBE_BUFFER_POLICY", "maybe")],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(!dir.exists(), "nothing was started or created");
    let o = strobe(
        &["sample", "--output-dir", d, "--", "/no/such/program"],
        &[],
    );
    assert_eq!(o.status.code(), Some(127));
    assert!(stderr(&o).contains("cannot run '/no/such/program': command not found"));
}

#[test]
fn the_programs_exit_code_becomes_strobes() {
    let _turn = one_at_a_time();
    let out = tempfile::tempdir().unwrap();
    let o = sample_in(out.path(), &["sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
}

#[test]
fn stress_fifty_runs_threads_fork_exec_dlopen_malloc() {
    let _turn = one_at_a_time();
    let bin = built();
    let mut runs_with_children = 0;
    for run in 0..50 {
        let out = tempfile::tempdir().unwrap();
        let o = sample_with(
            out.path(),
            &["--no-symbols", "--sampling-realtime"],
            &[
                bin.join("stress").to_str().unwrap(),
                bin.join("stress").to_str().unwrap(),
                bin.join("libhotlib.so").to_str().unwrap(),
                "1",
            ],
        );
        assert!(
            o.status.success(),
            "run {run}: {:?} {}",
            o.status,
            stderr(&o)
        );
        let dbs = databases(out.path());
        // The parent, the forked child that worked, the exec'd image when
        // it was sampled (it works ~2 ms), and the forked child that only
        // exec'd when a sample fell in its few microseconds (timers start
        // at a random point of their first period, so a short life is
        // sampled with the probability its length deserves). The child that
        // works (a few ms) can, rarely, end before any timer fired: under a
        // loaded CI it once left no database in 50 runs. Each run needs the
        // parent; the child must show in almost every run.
        assert!((1..=4).contains(&dbs.len()), "run {run}: {dbs:?}");
        if dbs.len() >= 2 {
            runs_with_children += 1;
        }
        for db in &dbs {
            let p = Profile::open(&[db.display().to_string()])
                .unwrap_or_else(|e| panic!("run {run}: {e}"));
            let threads: Vec<_> = p.threads().unwrap().map(|t| t.unwrap()).collect();
            assert!(!threads.is_empty(), "run {run}: {}", db.display());
        }
        let parent = dbs
            .iter()
            .map(|db| {
                (
                    samples(db).len(),
                    Profile::open(&[db.display().to_string()])
                        .unwrap()
                        .threads()
                        .unwrap()
                        .count(),
                )
            })
            .max_by_key(|&(_, threads)| threads)
            .unwrap();
        assert_eq!(parent.1, 257, "run {run}: main + 256 threads recorded");
    }
    assert!(
        runs_with_children >= 45,
        "the forked children were profiled in only {runs_with_children} of 50 runs"
    );
}

#[test]
fn python_shows_cpython_native_frames() {
    let _turn = one_at_a_time();
    let out = tempfile::tempdir().unwrap();
    // The interpreter itself, not a wrapper script around it.
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    let python = String::from_utf8(python.stdout).unwrap().trim().to_string();
    let o = sample_in(out.path(), &[&python, "-c", "import time\nt=time.process_time()\nx=0\nwhile time.process_time()-t<1.0:\n    x+=sum(i*i for i in range(1000))"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let dbs = databases(out.path());
    let all: Vec<SampleRow> = dbs.iter().flat_map(|d| samples(d)).collect();
    assert!(all.len() > 100, "{} samples", all.len());
    let in_eval = all
        .iter()
        .filter(|s| {
            names(s)
                .iter()
                .any(|n| n.contains("EvalFrame") || n.starts_with("_PyEval"))
        })
        .count();
    assert!(
        in_eval * 2 > all.len(),
        "{in_eval} of {} samples inside CPython's evaluator",
        all.len()
    );
}

#[test]
fn the_installed_layout_finds_its_runtime() {
    let _turn = one_at_a_time();
    let bin = built();
    let prefix = tempfile::tempdir().unwrap();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_strobe"));
    let from = prefix.path().join("from");
    std::fs::create_dir_all(&from).unwrap();
    std::fs::copy(&exe, from.join("strobe")).unwrap();
    let runtime = ["deps/libstrobe_runtime.so", "libstrobe_runtime.so"]
        .iter()
        .map(|r| exe.with_file_name(r))
        .find(|p| p.is_file())
        .expect("the runtime was built");
    std::fs::copy(runtime, from.join("libstrobe_runtime.so")).unwrap();
    let install = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install.sh");
    let dest = prefix.path().join("usr");
    let status = Command::new("bash")
        .arg(install)
        .args([
            "--prefix",
            dest.to_str().unwrap(),
            "--from",
            from.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        dest.join("bin/strobe").is_file() && dest.join("lib/strobe/libstrobe_runtime.so").is_file()
    );
    let out = prefix.path().join("out");
    let o = Command::new(dest.join("bin/strobe"))
        .env_remove("STROBE_RUNTIME")
        .args(["sample", "-q", "--output-dir", out.to_str().unwrap(), "--"])
        .arg(bin.join("hotspots"))
        .args(["0.7", "0.3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!samples(&databases(&out)[0]).is_empty());
    // Without a runtime anywhere: a clear error, nothing run.
    std::fs::remove_file(dest.join("lib/strobe/libstrobe_runtime.so")).unwrap();
    let o = Command::new(dest.join("bin/strobe"))
        .env_remove("STROBE_RUNTIME")
        .args([
            "sample",
            "--output-dir",
            out.to_str().unwrap(),
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cannot find libstrobe_runtime.so"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn flamegraph_and_formats_right_after_the_run() {
    let _turn = one_at_a_time();
    let bin = built();
    let out = tempfile::tempdir().unwrap();
    let o = sample_with(
        out.path(),
        &["--flamegraph", "--format", "pftrace,pprof"],
        &[bin.join("hotspots").to_str().unwrap(), "0.7", "0.5"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // Exports go into the run's directory, which `latest` points at.
    let run = out.path().join("latest");
    let svg = std::fs::read_to_string(run.join("hotspots.svg")).unwrap();
    assert!(
        svg.contains("hot_a") && svg.contains("split_work"),
        "the flamegraph names the hot functions"
    );
    let folded = std::fs::read_to_string(run.join("hotspots.folded")).unwrap();
    assert!(
        folded.lines().any(|l| l.contains(";split_work;hot_a ")),
        "{folded}"
    );
    for f in ["hotspots.pftrace", "hotspots.pb.gz"] {
        assert!(std::fs::metadata(run.join(f)).unwrap().len() > 100, "{f}");
    }
    let o = sample_with(out.path(), &["--format", "nonsense"], &["true"]);
    assert_ne!(o.status.code(), Some(0), "an unknown format is an error");
}

#[test]
fn threads_started_before_main_are_sampled_too() {
    let _turn = one_at_a_time();
    let bin = built();
    let out = tempfile::tempdir().unwrap();
    let o = sample_in(out.path(), &[bin.join("early_thread").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let db = databases(out.path()).remove(0);
    let pid: i64 = db.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    let all = samples(&db);
    let early = all
        .iter()
        .filter(|s| s.tid != pid && names(s).iter().any(|n| n.starts_with("early_work")))
        .count();
    assert!(
        early > 50,
        "{early} samples of the thread a constructor started"
    );
}

#[test]
fn a_programs_own_sigprof_timer_keeps_working_beside_strobes() {
    let _turn = one_at_a_time();
    let bin = built();
    let out = tempfile::tempdir().unwrap();
    let o = sample_in(out.path(), &[bin.join("own_timer").to_str().unwrap()]);
    assert!(
        o.status.success(),
        "{} {}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("own ticks "));
    let all = samples(&databases(out.path())[0]);
    assert!(all.len() > 100, "strobe sampled too: {} samples", all.len());
}

#[test]
fn a_vfork_child_leaves_the_parents_profile_alone() {
    let _turn = one_at_a_time();
    let bin = built();
    let out = tempfile::tempdir().unwrap();
    let o = sample_in(out.path(), &[bin.join("vfork_exec").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let db = databases(out.path())
        .into_iter()
        .max_by_key(|db| samples(db).len())
        .expect("the parent's database");
    let n = samples(&db).len();
    // Weights, not rows: under load the CPU-time timer's expirations
    // coalesce (counted as overruns, each sample weighs them).
    let ms = weight_ms(&samples(&db), "sample", "");
    assert!(
        ms > 600.0,
        "the parent's second of work after its vfork children: {ms} ms in {n} samples"
    );
    let p = Profile::open(&[db.display().to_string()]).unwrap();
    let taken: String = p
        .connection()
        .query_row(
            "SELECT value FROM strobe_settings WHERE name = 'sampler.samples_taken'",
            [],
            |r| r.get(0),
        )
        .expect("finished at the parent's own exit");
    assert!(taken.parse::<u64>().unwrap() as usize >= n);
}

/// The pid a `leave_child` child wrote into `file` ("child PID done").
fn child_pid(file: &Path) -> i32 {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| {
        panic!(
            "{} is missing after strobe returned ({e}): strobe did not wait for the child",
            file.display()
        )
    });
    text.split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected content {text:?}"))
}

#[test]
fn a_child_that_outlives_its_parent_is_waited_for_and_profiled() {
    let _turn = one_at_a_time();
    let bin = built();
    for how in ["fork", "spawn", "popen"] {
        let tmp = tempfile::tempdir().unwrap();
        let done = tmp.path().join("done.txt");
        let out = sample_in(
            tmp.path(),
            &[
                bin.join("leave_child").to_str().unwrap(),
                how,
                done.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{how}: {}", stderr(&out));
        let pid = child_pid(&done);
        let db = databases(tmp.path())
            .into_iter()
            .find(|d| d.file_name().unwrap().to_string_lossy() == format!("{pid}.db"))
            .unwrap_or_else(|| panic!("{how}: no database of child {pid}: {}", stderr(&out)));
        let ms = weight_ms(&samples(&db), "sample", "");
        assert!(
            ms >= 40.0,
            "{how}: {ms} ms sampled of the child's 0.2 s of CPU; strobe's stderr:\n{}",
            stderr(&out)
        );
    }
}

#[test]
fn samples_count_from_a_process_first_instant_and_not_before_a_delay_or_period() {
    let _turn = one_at_a_time();
    let bin = built();
    let program = bin.join("leave_child");
    // `wait`: 0.2 s of CPU from main's first line, then exit status 3.
    let cpu_ms = |options: &[&str]| {
        let tmp = tempfile::tempdir().unwrap();
        let out = sample_with(tmp.path(), options, &[program.to_str().unwrap(), "wait"]);
        assert_eq!(out.status.code(), Some(3), "{options:?}: {}", stderr(&out));
        let dbs = databases(tmp.path());
        weight_ms(
            &dbs.iter().flat_map(|db| samples(db)).collect::<Vec<_>>(),
            "sample",
            "",
        )
    };
    // The runtime samples before the collector has looked at the process.
    let ms = cpu_ms(&[]);
    // (A blind start leaves a sample or two; a machine with several busy
    // threads per core has been seen to expire this timer for as little
    // as a quarter of the CPU time, hence no tighter bound.)
    assert!(ms >= 40.0, "{ms} ms sampled of 0.2 s of CPU at start");
    // A delay or trace period the run never reaches keeps it off throughout.
    for options in [&["--sampling-delay", "60s"], &["--trace-periods", "60s"]] {
        let ms = cpu_ms(options);
        assert_eq!(ms, 0.0, "{options:?}: sampled before the delay");
    }
}

/// Runs `program` (with a file name to write to appended) under `strobe
/// sample` with `options` in `dir`; returns strobe's stderr, the pid the
/// program's static child wrote to that file and the run's databases.
fn run_static_child(dir: &Path, options: &[&str], program: &[&str]) -> (String, i32, Vec<PathBuf>) {
    let done = dir.join("done.txt");
    let mut argv: Vec<&str> = program.to_vec();
    let done_arg = done.to_str().unwrap().to_string();
    argv.push(&done_arg);
    let out = sample_with(dir, options, &argv);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let pid = child_pid(&done);
    (err, pid, databases(dir))
}

#[test]
fn a_static_image_started_by_posix_spawn_is_reported_not_profiled_by_the_signal_sampler() {
    let _turn = one_at_a_time();
    let bin = built();
    let parent = bin.join("leave_child");
    let child = bin.join("leave_child_static");
    let tmp = tempfile::tempdir().unwrap();
    let (err, pid, _) = run_static_child(
        tmp.path(),
        &["--sampler", "signal"],
        &[
            parent.to_str().unwrap(),
            "spawn_wait",
            child.to_str().unwrap(),
        ],
    );
    assert!(
        err.lines().any(|l| l.contains("1 process of ")
            && l.contains(&format!(
                "leave_child_static (pid {pid}) ran a static image"
            ))
            && l.contains("1 process not profiled")),
        "no line naming child {pid} as not profiled (static) in strobe's stderr:\n{err}"
    );
}

/// The samples of process `pid` in all of `dbs` (every image it ran).
fn samples_of(dbs: &[PathBuf], pid: i32) -> Vec<SampleRow> {
    dbs.iter()
        .flat_map(|db| samples(db))
        .filter(|s| s.pid == i64::from(pid))
        .collect()
}

#[test]
fn by_default_a_static_image_started_by_posix_spawn_or_exec_is_sampled_by_the_kernel() {
    let _turn = one_at_a_time();
    let bin = built();
    let parent = bin.join("leave_child");
    let child = bin.join("leave_child_static");
    let spawned = [
        parent.to_str().unwrap(),
        "spawn_wait",
        child.to_str().unwrap(),
    ];
    let exec_line = format!("exec {} child \"$0\"", child.display());
    let execed = ["sh", "-c", exec_line.as_str()];
    for program in [&spawned[..], &execed[..]] {
        let tmp = tempfile::tempdir().unwrap();
        let (err, pid, dbs) = run_static_child(tmp.path(), &[], program);
        if err.contains("kernel sampling failed") {
            eprintln!("skipped: the kernel refuses sampling events here: {err}");
            return;
        }
        assert!(
            err.contains(&format!("(pid {pid}) ran a static image"))
                && err.contains("1 process sampled by the kernel"),
            "{err}"
        );
        // 0.2 s of CPU at 250 Hz, the first few ms before the collector saw it unsampled.
        let cpu_ms = weight_ms(&samples_of(&dbs, pid), "sample", "");
        assert!(
            (120.0..=220.0).contains(&cpu_ms),
            "{cpu_ms} ms sampled in {pid}: {err}"
        );
    }
}

#[test]
fn preloaded_without_strobe_sample_the_runtime_starts_its_own_collector() {
    let _turn = one_at_a_time();
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let program = bin.join("leave_child");
    let run = |preload: bool| {
        let mut cmd = clean_command(&program);
        cmd.arg("wait").current_dir(tmp.path());
        if preload {
            cmd.env("LD_PRELOAD", fresh_runtime())
                .env("STROBE_BIN", env!("CARGO_BIN_EXE_strobe"))
                .env("STROBE_OUTPUT_DIR", tmp.path().join("out"));
        }
        // Waits for the collector too: it holds the program's stderr.
        cmd.output().unwrap()
    };
    let plain = run(false);
    let preloaded = run(true);
    assert_eq!(plain.status.code(), Some(3));
    assert_eq!(
        preloaded.status.code(),
        plain.status.code(),
        "{}",
        stderr(&preloaded)
    );
    // The program sees no extra child: wait() still says ECHILD.
    assert_eq!(
        String::from_utf8_lossy(&preloaded.stdout),
        String::from_utf8_lossy(&plain.stdout)
    );
    let dbs = databases(&tmp.path().join("out"));
    assert_eq!(
        dbs.len(),
        1,
        "databases {dbs:?}; stderr: {}",
        stderr(&preloaded)
    );
    let ms = weight_ms(&samples(&dbs[0]), "sample", "");
    assert!(
        ms >= 40.0,
        "{ms} ms sampled of 0.2 s of CPU; stderr: {}",
        stderr(&preloaded)
    );
    assert!(
        stderr(&preloaded).contains("strobe: wrote"),
        "the collector did not say what it wrote: {}",
        stderr(&preloaded)
    );
}

#[test]
fn a_tool_plugin_does_not_hang_a_forked_child_that_calls_exit() {
    let _turn = one_at_a_time();
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let tool = count_records_tool(tmp.path());
    // The parent returns at once; the forked child burns, then calls
    // exit() and so the atexit handlers the parent registered: the tool is
    // finalized in the process that loaded it only (a child that waited
    // for the parent's callback threads would hang the run).
    let counts = tmp.path().join("counts.txt");
    let done = tmp.path().join("done.txt");
    let mut run = strobe_command()
        .env("STROBE_TOOL_LIB", &tool)
        .env("COUNT_RECORDS_OUTPUT", &counts)
        .args(["sample", "-q", "--output-dir"])
        .arg(tmp.path())
        .arg("--")
        .arg(bin.join("leave_child"))
        .arg("fork")
        .arg(&done)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = run.kill();
            panic!("hung: strobe sample with a tool plugin and a forked child that calls exit()");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    child_pid(&done);
    let text = std::fs::read_to_string(&counts)
        .unwrap_or_else(|e| panic!("the tool wrote no counts ({e})"));
    assert!(text.contains("callbacks"), "{text}");
}

#[test]
fn a_run_that_records_nothing_leaves_no_run_directory_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let out = sample_in(tmp.path(), &["/bin/true"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(
        stderr(&out).contains("no database was written"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn code_in_a_library_dlopened_after_the_last_thread_start_is_named() {
    let _turn = one_at_a_time();
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let lib = bin.join("libhotlib.so");
    let out = sample_in(
        tmp.path(),
        &[
            bin.join("dlopen_work").to_str().unwrap(),
            lib.to_str().unwrap(),
            "0.4",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let dbs = databases(tmp.path());
    assert_eq!(dbs.len(), 1, "{}", stderr(&out));
    let all = samples(&dbs[0]);
    let in_hot = all
        .iter()
        .filter(|s| {
            names(s)
                .first()
                .is_some_and(|f| f == "hot_a" || f == "hot_b")
        })
        .count();
    assert!(
        all.len() >= 20 && in_hot * 10 >= all.len() * 8,
        "{in_hot} of {} samples have hot_a/hot_b as their innermost frame; first stacks: {:?}",
        all.len(),
        all.iter().take(3).map(names).collect::<Vec<_>>()
    );
}

#[test]
fn attaching_to_a_running_process_samples_it_and_leaves_it_running() {
    let _turn = one_at_a_time();
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let mut target = Command::new(bin.join("spin")).arg("5").spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let pid = target.id().to_string();
    let (cpu_before, wall_before) = (cpu_ns(target.id()), std::time::Instant::now());
    let out = strobe(
        &[
            "sample",
            "-q",
            "--pid",
            &pid,
            "--duration",
            "500ms",
            "--output-dir",
            tmp.path().to_str().unwrap(),
        ],
        &[],
    );
    // The share of a core the target had while strobe ran (all of it on
    // an idle machine).
    let share = (cpu_ns(target.id()) - cpu_before) as f64 / wall_before.elapsed().as_nanos() as f64;
    let still_running = target.try_wait().unwrap().is_none();
    let _ = target.kill();
    let _ = target.wait();
    let err = stderr(&out);
    if err.contains("refuses sampling events") {
        eprintln!("skipped: the kernel refuses sampling events here: {err}");
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(still_running, "the attached process did not survive strobe");
    let dbs = databases(tmp.path());
    assert_eq!(dbs.len(), 1, "{dbs:?}: {err}");
    let ms = weight_ms(&samples(&dbs[0]), "sample", "");
    // 0.5 s attached to a spinning thread: its CPU time in that half
    // second, at the share of a core it had (loaded machines give less).
    let expected = 500.0 * share.min(1.0);
    assert!(
        ms >= 0.6 * expected,
        "{ms:.0} ms of CPU sampled in 0.5 s attached, expected about {expected:.0}: {err}"
    );
}

/// The CPU time process `pid` used so far, in ns (`/proc/PID/schedstat`).
fn cpu_ns(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("the process's schedstat")
}

#[test]
fn attaching_to_no_process_is_a_clear_error() {
    let out = strobe(&["sample", "--pid", "999999999"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot attach to process 999999999"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_tool_plugin_from_strobe_tool_lib_receives_the_programs_samples() {
    let _turn = one_at_a_time();
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let tool = count_records_tool(tmp.path());
    let counts = tmp.path().join("counts.txt");
    let done = tmp.path().join("done.txt");
    let out = strobe(
        &[
            "sample",
            "-q",
            "--output-dir",
            tmp.path().to_str().unwrap(),
            "--",
            bin.join("leave_child").to_str().unwrap(),
            "child",
            done.to_str().unwrap(),
        ],
        &[
            ("STROBE_TOOL_LIB", tool.to_str().unwrap()),
            ("COUNT_RECORDS_OUTPUT", counts.to_str().unwrap()),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&counts)
        .unwrap_or_else(|e| panic!("the tool wrote no counts ({e}); stderr: {}", stderr(&out)));
    let samples: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("sample "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(
        samples >= 10,
        "the tool counted {samples} samples of 0.2 s of CPU:\n{text}"
    );
}

/// Builds the example tool `examples/tools/count_records.c` into `dir`.
fn count_records_tool(dir: &Path) -> PathBuf {
    let tool = dir.join("libcount_records.so");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-I"])
        .arg(root.join("include"))
        .arg(root.join("examples/tools/count_records.c"))
        .arg("-o")
        .arg(&tool)
        .status()
        .unwrap();
    assert!(status.success(), "cc count_records.c");
    tool
}

#[test]
fn the_kernel_sampler_sees_a_thread_made_by_a_raw_clone() {
    let _turn = one_at_a_time();
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let out = sample_with(
        tmp.path(),
        &["--sampler", "kernel"],
        &[bin.join("raw_clone").to_str().unwrap()],
    );
    let err = stderr(&out);
    if err.contains("kernel sampling is off") {
        eprintln!("skipped: the kernel refuses sampling events here: {err}");
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "both done\n");
    let dbs = databases(tmp.path());
    assert_eq!(dbs.len(), 1, "{err}");
    let all = samples(&dbs[0]);
    let mut per_tid: HashMap<i64, usize> = HashMap::new();
    for s in &all {
        *per_tid.entry(s.tid).or_default() += 1;
    }
    let busy = per_tid.values().filter(|&&n| n >= 25).count();
    assert_eq!(busy, 2, "samples per thread {per_tid:?}: {err}");
    assert!(
        all.iter().any(|s| names(s).iter().any(|n| n == "raw_work")),
        "no stack in raw_work: {err}"
    );
}

#[test]
fn threads_that_end_before_their_first_sample_are_counted() {
    let _turn = one_at_a_time();
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let out = sample_in(tmp.path(), &[bin.join("short_threads").to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("threads ended before their first sample"))
        .unwrap_or_else(|| panic!("no line counting unsampled threads: {err}"));
    let n: u32 = line
        .split("): ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line:?}"));
    // 100 threads of 2 ms each at 250 Hz: most end before 4 ms of CPU.
    assert!(n >= 50, "{line}");
}

#[test]
fn two_threads_doing_equal_work_get_equal_samples() {
    let _turn = one_at_a_time();
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let out = sample_in(
        tmp.path(),
        &[bin.join("two_equal_threads").to_str().unwrap()],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let dbs = databases(tmp.path());
    assert_eq!(dbs.len(), 1, "{err}");
    let mut per_tid: HashMap<i64, usize> = HashMap::new();
    for s in samples(&dbs[0]) {
        *per_tid.entry(s.tid).or_default() += 1;
    }
    let mut counts: Vec<usize> = per_tid.values().copied().filter(|&n| n > 20).collect();
    counts.sort();
    assert_eq!(counts.len(), 2, "samples per thread {per_tid:?}");
    // 1 s of CPU each at 250 Hz: about 250 samples each, never twice as
    // many for one of them (a thread with two sets of timers).
    assert!(
        counts[1] * 10 <= counts[0] * 13 && counts[1] <= 300,
        "samples per thread {per_tid:?}"
    );
}

#[test]
fn the_kernel_sampler_counts_cpu_time_in_system_calls_or_says_it_cannot() {
    let _turn = one_at_a_time();
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let out = sample_with(
        tmp.path(),
        &["--sampler", "kernel"],
        &[bin.join("syscall_loop").to_str().unwrap()],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    if err.contains("kernel sampling is off") {
        eprintln!("skipped: the kernel refuses sampling events here: {err}");
        return;
    }
    if err.contains("does not see CPU time spent in system calls") {
        eprintln!("the kernel leaves system calls out here; the run says so");
        return;
    }
    let dbs = databases(tmp.path());
    let n = samples(&dbs[0])
        .iter()
        .filter(|s| names(s).iter().any(|f| f == "syscalls"))
        .count();
    // 1 s of (mostly system) CPU time at 250 Hz.
    assert!(n >= 150, "{n} samples under syscalls(): {err}");
}

/// Sum of the weights of the samples of `kind` whose stack holds `function`
/// (every sample with `function` empty), in ms.
fn weight_ms(all: &[SampleRow], kind: &str, function: &str) -> f64 {
    all.iter()
        .filter(|s| {
            s.kind == kind && (function.is_empty() || names(s).iter().any(|n| n == function))
        })
        .map(|s| s.weight_ns as f64 / 1e6)
        .sum()
}

#[test]
fn sample_weights_add_up_to_the_programs_own_cpu_time_with_either_sampler() {
    let _turn = one_at_a_time();
    let bin = built();
    for sampler in ["signal", "kernel"] {
        let tmp = tempfile::tempdir().unwrap();
        let out = sample_with(
            tmp.path(),
            &["--sampler", sampler],
            &[bin.join("two_equal_threads").to_str().unwrap()],
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{err}");
        if err.contains("kernel sampling is off") {
            eprintln!("skipped the kernel sampler: the kernel refuses sampling events here: {err}");
            continue;
        }
        let own_ms = err
            .lines()
            .find_map(|l| l.strip_prefix("process_cpu_ns "))
            .and_then(|n| n.trim().parse::<f64>().ok())
            .expect("the program prints its CPU time")
            / 1e6;
        let db = databases(tmp.path())[0].clone();
        let all = samples(&db);
        assert!(
            all.iter().all(|s| s.weight_ns > 0),
            "{sampler}: every sample has a weight"
        );
        // Either way the samples carry the counter series: per-thread CPU
        // time (up to about 1 s each) and the process's peak RSS.
        let p = Profile::open(&[db.display().to_string()]).unwrap();
        let counters: Vec<_> = p.counters().unwrap().map(|c| c.unwrap()).collect();
        let cpu_max = counters
            .iter()
            .filter(|c| c.name == "thread_cpu_time")
            .map(|c| c.value)
            .fold(0.0, f64::max);
        assert!(
            (0.7e9..1.2e9).contains(&cpu_max),
            "{sampler}: thread CPU time {cpu_max}"
        );
        assert!(
            counters
                .iter()
                .any(|c| c.name == "peak_rss" && c.value > 100.0),
            "{sampler}: no peak RSS"
        );
        let sampled_ms = weight_ms(&all, "sample", "");
        // Records the kernel dropped (its rings full while the collector
        // could not run: a loaded machine) are said, and not in the total.
        let dropped_ms = err
            .split("the kernel dropped ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next()?.parse::<f64>().ok())
            .map_or(0.0, |n| n * 4.0);
        assert!(
            (sampled_ms - own_ms).abs() <= own_ms * 0.02 + dropped_ms,
            "{sampler}: samples stand for {sampled_ms:.1} ms of CPU, the program used {own_ms:.1} ms"
        );
    }
}

#[test]
fn the_kernel_sampler_records_where_threads_block_and_for_how_long() {
    let _turn = one_at_a_time();
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let out = sample_with(
        tmp.path(),
        &["--sampler", "kernel"],
        &[bin.join("off_cpu").to_str().unwrap()],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    if err.contains("kernel sampling is off") {
        eprintln!("skipped: the kernel refuses sampling events here: {err}");
        return;
    }
    if err.contains("off-CPU time is not recorded") {
        assert!(err.contains("perf_event_paranoid"), "{err}");
        eprintln!("skipped: the kernel refuses context-switch samples here; the run says so");
        return;
    }
    let db = databases(tmp.path())[0].clone();
    let summary = strobe(&["summary", "-i", db.to_str().unwrap()], &[]);
    let table = String::from_utf8_lossy(&summary.stdout);
    assert!(
        table.contains("Off-CPU Self (ms)"),
        "the summary shows off-CPU time: {table}"
    );
    let all = samples(&db);
    // 300 ms in nanosleep under wait_here, 200 ms in read under wait_pipe
    // (and the answering thread's 200 ms usleep), 100 ms of CPU in burn.
    let slept = weight_ms(&all, "off_cpu", "wait_here");
    assert!(
        (250.0..400.0).contains(&slept),
        "{slept:.1} ms off CPU in wait_here: {err}"
    );
    let read = weight_ms(&all, "off_cpu", "wait_pipe");
    assert!(
        (150.0..300.0).contains(&read),
        "{read:.1} ms off CPU in wait_pipe: {err}"
    );
    let burned = weight_ms(&all, "sample", "burn");
    assert!(
        (70.0..150.0).contains(&burned),
        "{burned:.1} ms of CPU in burn: {err}"
    );
    assert!(
        weight_ms(&all, "off_cpu", "burn") < 20.0,
        "a busy function is not off CPU (preemption is not blocking)"
    );
    // Entering the sleep costs CPU (a sample may land in the system call).
    let busy_sleeping = weight_ms(&all, "sample", "wait_here");
    assert!(
        busy_sleeping <= 8.0,
        "{busy_sleeping} ms of CPU in wait_here: {err}"
    );
}

#[test]
fn by_default_a_raw_clone_thread_is_handed_to_the_kernel_and_said_so() {
    let _turn = one_at_a_time();
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let out = sample_in(tmp.path(), &[bin.join("raw_clone").to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "both done\n");
    assert!(err.contains("had no sampler"), "{err}");
    // The raw thread burns about 0.8 s; the scan finds it after 200-400 ms.
    if let Some(raw) = samples_of_handed_thread(tmp.path(), &err, "raw_work") {
        assert!(raw >= 25, "{raw} samples in raw_work: {err}");
    }
}

/// The samples with `function` on their stack in the run's database,
/// for a thread handed to the kernel; `None` (said) where the kernel
/// refuses sampling events.
fn samples_of_handed_thread(dir: &Path, err: &str, function: &str) -> Option<usize> {
    if err.contains("kernel sampling of it failed") {
        eprintln!("skipped: the kernel refuses sampling events here: {err}");
        return None;
    }
    let all = samples(&databases(dir)[0]);
    Some(
        all.iter()
            .filter(|s| names(s).iter().any(|n| n == function))
            .count(),
    )
}

#[test]
fn a_thread_made_by_libcs_own_pthread_create_is_named_so_and_sampled_by_the_kernel() {
    let _turn = one_at_a_time();
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let out = sample_in(tmp.path(), &[bin.join("libc_pthread").to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "joined\n");
    // One line for the thread, saying why (jemalloc's way) without
    // calling it a raw clone.
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("had no sampler"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("not started through strobe's pthread_create wrapper"),
        "{err}"
    );
    // 1 s of CPU; the scan finds the thread after 200-400 ms.
    if let Some(direct) = samples_of_handed_thread(tmp.path(), &err, "direct_work") {
        assert!(direct >= 25, "{direct} samples in direct_work: {err}");
    }
}

/// The Go toolchain: `go` on the PATH, else installed with apt-get (as
/// root, as CI runs); `Err` with the reason when neither works.
fn go_toolchain() -> Result<PathBuf, String> {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _once = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let found = || {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("go"))
                .find(|g| g.is_file())
        })
    };
    if let Some(go) = found() {
        return Ok(go);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("no `go` on the PATH and not root to apt-get install golang-go".into());
    }
    if !apt_get_install(&["golang-go"]) {
        return Err("apt-get install golang-go failed".into());
    }
    found().ok_or_else(|| "golang-go installed but no `go` on the PATH".into())
}

/// Builds tests/programs/gohot.go (with `extra` Go files of the same
/// package) into `dir`; `None` (and why, printed) without a Go toolchain.
fn build_go(dir: &Path, name: &str, extra: &[&str]) -> Option<PathBuf> {
    let go = match go_toolchain() {
        Ok(go) => go,
        Err(why) => {
            eprintln!("skipped: {why}");
            return None;
        }
    };
    let exe = dir.join(name);
    let built = Command::new(go)
        .args(["build", "-o", exe.to_str().unwrap()])
        .arg(programs_dir().join("gohot.go"))
        .args(extra.iter().map(|f| programs_dir().join(f)))
        .env("HOME", dir)
        .env("GOCACHE", dir.join("gocache"))
        .env("GOPATH", dir.join("gopath"))
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", stderr(&built));
    Some(exe)
}

/// hotA's share of the CPU time sampled in hotA and hotB.
fn go_hot_share(all: &[SampleRow], err: &str) -> f64 {
    let (a, b) = (
        weight_ms(all, "sample", "main.hotA"),
        weight_ms(all, "sample", "main.hotB"),
    );
    assert!(a + b > 500.0, "{a} + {b} ms in hotA + hotB: {err}");
    a / (a + b)
}

#[test]
fn a_pure_go_program_is_sampled_by_the_kernel_with_stacks_to_the_goroutine_start() {
    // The turn before the build: a compiler beside another test's timing
    // is load it did not ask for.
    let _turn = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = build_go(tmp.path(), "gohot", &[]) else {
        return;
    };
    let out = sample_in(tmp.path(), &[exe.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done true\n");
    if err.contains("kernel sampling is off") {
        eprintln!("skipped: the kernel refuses sampling events here: {err}");
        return;
    }
    assert!(err.contains("sampled by the kernel only"), "{err}");
    let all = samples(&databases(tmp.path())[0]);
    let share = go_hot_share(&all, &err);
    assert!((share - 0.7).abs() < 0.05, "hotA share {share:.3}: {err}");
    assert_go_stacks_end_where_go_stacks_end(&all, &databases(tmp.path())[0], &err);
}

/// Go's stacks end at a goroutine's start (`runtime.goexit`), at the
/// bottom of a thread's system stack (`runtime.mstart`, `runtime.rt0_go`)
/// or where the runtime switched stacks (`runtime.mcall`,
/// `runtime.systemstack`, `runtime.morestack`). The few that end elsewhere
/// are counted incomplete: on the signal stack the walk goes through the
/// restorer one frame into the interrupted code, whose stack is elsewhere;
/// a sample in a function's prologue may lose its callers. Every frame is
/// named: the frames on either side of a signal frame are no call sites
/// and are looked up where they are.
fn assert_go_stacks_end_where_go_stacks_end(all: &[SampleRow], db: &Path, err: &str) {
    const BOTTOMS: [&str; 6] = [
        "runtime.goexit",
        "runtime.mstart",
        "runtime.rt0_go",
        "runtime.mcall",
        "runtime.systemstack",
        "runtime.morestack",
    ];
    let mut elsewhere = 0;
    let mut in_work = 0;
    for s in all {
        let names = names(s);
        assert!(
            names.iter().all(|n| !n.contains('+')),
            "unnamed frame in {names:?}: {err}"
        );
        let root = names.last().unwrap();
        if !BOTTOMS.iter().any(|b| root.starts_with(b)) {
            eprintln!("a stack ending in {root}: {names:?}");
            elsewhere += 1;
        }
        in_work += names.iter().any(|n| n.starts_with("main.hot")) as usize;
    }
    assert!(
        in_work * 100 >= all.len() * 95,
        "{in_work} of {} stacks in main.hotA or main.hotB",
        all.len()
    );
    assert!(
        elsewhere * 100 <= all.len() * 3,
        "{elsewhere} of {} stacks end elsewhere",
        all.len()
    );
    let c = rusqlite::Connection::open(db).unwrap();
    let incomplete: usize = c
        .query_row(
            "SELECT value FROM strobe_settings WHERE name = 'sampler.incomplete_stacks'",
            [],
            |r| r.get::<_, String>(0),
        )
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        elsewhere <= incomplete,
        "{elsewhere} stacks end elsewhere, {incomplete} counted incomplete"
    );
}

#[test]
fn a_cgo_program_runs_as_without_strobe_and_is_sampled() {
    // The turn before the build: a compiler beside another test's timing
    // is load it did not ask for.
    let _turn = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = build_go(tmp.path(), "gocgo", &["gohot_cgo.go"]) else {
        return;
    };
    let plain = Command::new(&exe).output().unwrap();
    assert!(plain.status.success());
    // Go's signal handlers beside strobe's: a handler without SA_ONSTACK
    // running on a goroutine's stack crashed it.
    for _ in 0..3 {
        let out = sample_in(tmp.path(), &[exe.to_str().unwrap()]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert_eq!(out.stdout, plain.stdout, "{err}");
    }
    let dbs = databases(tmp.path());
    let all = samples(&dbs[dbs.len() - 1]);
    let share = go_hot_share(&all, "");
    assert!((share - 0.7).abs() < 0.07, "hotA share {share:.3}");
}

#[test]
fn a_rust_program_with_small_alternate_signal_stacks_runs_as_without_strobe() {
    // The turn before the build: a compiler beside another test's timing
    // is load it did not ask for.
    let _turn = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let exe = tmp.path().join("rust_threads");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let built = Command::new(rustc)
        .args(["-O", "-o", exe.to_str().unwrap()])
        .arg(programs_dir().join("rust_threads.rs"))
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", stderr(&built));
    let plain = Command::new(&exe).output().unwrap();
    assert!(plain.status.success());
    let out = sample_in(tmp.path(), &[exe.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(out.stdout, plain.stdout);
    let all = samples(&databases(tmp.path())[0]);
    // 0.6 s of CPU in two threads (rows: up to 150, fewer where a loaded
    // machine merged expirations; the weights count those).
    let ms = weight_ms(&all, "sample", "");
    assert!(
        ms >= 300.0,
        "{ms:.0} ms of 600 in {} samples: {err}",
        all.len()
    );
}

#[test]
fn after_a_crash_the_summary_counts_the_samples_the_database_holds() {
    let _turn = one_at_a_time();
    let bin = built();
    let out = tempfile::tempdir().unwrap();
    // No `--` before the program; without -q the summary is printed.
    let o = strobe(
        &[
            "sample",
            "--output-dir",
            out.path().to_str().unwrap(),
            bin.join("crash").to_str().unwrap(),
            "1",
        ],
        &[],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(128 + libc::SIGSEGV), "{err}");
    let recorded: usize = err
        .lines()
        .find_map(|l| l.strip_prefix("samples: ")?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no footer: {err}"));
    let dbs = databases(out.path());
    assert_eq!(recorded, samples(&dbs[0]).len(), "{err}");
    assert!(recorded > 100, "{err}");
    assert!(err.contains("strobe: wrote"), "{err}");
}

#[test]
fn quiet_prints_nothing_of_strobes_own_and_program_arguments_pass_through() {
    let _turn = one_at_a_time();
    let out = tempfile::tempdir().unwrap();
    // Options after the program's name are the program's.
    let o = strobe(
        &[
            "sample",
            "-q",
            "--output-dir",
            out.path().to_str().unwrap(),
            "sh",
            "-c",
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo done -q --top 3",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "done -q --top 3\n");
    assert_eq!(stderr(&o), "", "-q: nothing from strobe");
    assert_eq!(databases(out.path()).len(), 1);
}

#[test]
fn libc_internal_functions_and_vdso_frames_are_named() {
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let _turn = one_at_a_time();
    let out = sample_in(tmp.path(), &[bin.join("libc_work").to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let all = samples(&databases(tmp.path())[0]);
    let leaves: Vec<String> = all
        .iter()
        .filter_map(|s| names(s).first().cloned())
        .collect();
    // The vDSO's clock_gettime (the program reads its CPU clock in a loop)
    // is named from the running kernel's vDSO.
    let vdso_unnamed = leaves.iter().filter(|n| n.starts_with("[vdso]")).count();
    assert_eq!(vdso_unnamed, 0, "{leaves:?}");
    // memcpy's implementation is internal to libc: named from its separate
    // debug file (Debian's libc6-dbg) when that is installed.
    let db = databases(tmp.path())[0].clone();
    let p = Profile::open(&[db.display().to_string()]).unwrap();
    let libc_id: String = p
        .connection()
        .query_row(
            "SELECT build_id FROM strobe_module WHERE path LIKE '%/libc.so%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let debug = format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &libc_id[..2],
        &libc_id[2..]
    );
    if !Path::new(&debug).is_file() {
        eprintln!("skipped the libc part: libc's debug file {debug} is not installed (libc6-dbg)");
        return;
    }
    let copying = leaves
        .iter()
        .filter(|n| n.contains("memmove") || n.contains("memcpy"))
        .count();
    let unnamed_libc = leaves.iter().filter(|n| n.starts_with("libc.so")).count();
    assert!(
        copying * 10 >= leaves.len() * 8,
        "{copying} of {}: {leaves:?}",
        leaves.len()
    );
    assert_eq!(unnamed_libc, 0, "{leaves:?}");
}

#[test]
fn jit_code_is_named_from_the_processs_perf_map() {
    let bin = built();
    let tmp = tempfile::tempdir().unwrap();
    let _turn = one_at_a_time();
    let out = sample_in(tmp.path(), &[bin.join("jit").to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "jitted\n");
    let all = samples(&databases(tmp.path())[0]);
    let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", all[0].pid));
    let jitted = all
        .iter()
        .filter(|s| names(s).first().is_some_and(|n| n == "jitted_loop"))
        .count();
    assert!(
        jitted * 10 >= all.len() * 8,
        "{jitted} of {} samples in jitted_loop",
        all.len()
    );
    // The map is gone now; the entry that named the frames stays in the
    // database (`strobe_jit_symbol`), covering every jitted frame, so a
    // later symbolization still names them (the test
    // `tests/symbols.rs::jit_frames_are_named_again_after_the_perf_map_is_gone`
    // clears the names and symbolizes again).
    let p = Profile::open(&[databases(tmp.path())[0].display().to_string()]).unwrap();
    let stored: Vec<(i64, i64, String)> = {
        let mut st = p
            .connection()
            .prepare("SELECT start, size, name FROM strobe_jit_symbol")
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(stored.len(), 1, "{stored:?}");
    let (start, size, name) = &stored[0];
    assert_eq!((*size, name.as_str()), (9, "jitted_loop"));
    for s in all
        .iter()
        .filter(|s| names(s).first().is_some_and(|n| n == "jitted_loop"))
    {
        let pc = s.frames[0].rel_pc as i64;
        assert!(
            (*start..start + size).contains(&pc),
            "{pc:#x} outside {stored:?}"
        );
    }
    // `strobe symbolize` on a copy whose names were cleared names the
    // jitted frames again from the stored entry alone.
    drop(p);
    let copy = tmp.path().join("copy.db");
    std::fs::copy(&databases(tmp.path())[0], &copy).unwrap();
    {
        let c = rusqlite::Connection::open(&copy).unwrap();
        let t: String = c
            .query_row(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'strobe\\_frame\\_%' ESCAPE '\\'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        c.execute(&format!("UPDATE \"{t}\" SET function = NULL"), [])
            .unwrap();
    }
    assert!(samples(&copy)
        .iter()
        .all(|s| names(s).first().is_none_or(|n| n != "jitted_loop")));
    let o = strobe(&["symbolize", "-i", copy.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let again = samples(&copy)
        .iter()
        .filter(|s| names(s).first().is_some_and(|n| n == "jitted_loop"))
        .count();
    assert_eq!(again, jitted, "{}", stderr(&o));
}
