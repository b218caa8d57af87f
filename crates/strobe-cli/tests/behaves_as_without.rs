//! A program run under `strobe sample` behaves exactly as without strobe
//! (issue 10, DESIGN.md "How data flows").
//!
//! Each case runs a small program (tests/programs/behave) twice, in two fresh,
//! identical scratch directories: once plainly and once as
//! `strobe sample -q --output-dir <dir outside the scratch dirs> -- <program>`,
//! and compares the exit status (strobe's exit code must be the program's
//! shell-style status: `128 + N` for a program killed by signal N), the
//! stdout bytes, and every file the program left in its working directory
//! (names, contents and permission bits).
//!
//! Every run is bounded: a run that does not end within
//! `STROBE_TEST_TIMEOUT_S` seconds (default 60) is killed with its whole
//! process tree and fails the test ("hung under strobe: …"). The test binary
//! is a child subreaper, so processes a run leaves behind are found, killed
//! and reported as a failure too.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Mutex, Once};
use std::time::{Duration, Instant};

// The tests here run real programs (some of them timing-sensitive): they
// take turns (`one_at_a_time`) rather than compete for the machine's cores.
use common::{clean_command, databases, files_below, one_at_a_time, programs_dir, strobe_command};

// ---------------------------------------------------------------------------
// Building the programs
// ---------------------------------------------------------------------------

fn behave_dir() -> PathBuf {
    programs_dir().join("behave")
}

fn target_tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

/// The C programs of tests/programs/behave, built with `cc`.
const PROGRAMS: &[&str] = &[
    "closes_fds_below_1024",
    "dup2_over_low_fds",
    "closes_all_fds_opens_eight",
    "main_pthread_exit",
    "raises_sigprof",
    "own_itimer_prof",
    "many_threads",
    "umask_fork",
    "burn",
    "pid_burn",
    "setuid_report",
    "exec_empty_env",
    "blocks_all_signals",
    "ignores_sigprof",
    "spin_thread",
];

/// Builds the programs once per test binary; returns their directory.
/// `burn_static` is `burn.c` linked with `-static`.
fn built() -> PathBuf {
    static DIR: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut dir = DIR.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = &*dir {
        return d.clone();
    }
    // Programs of earlier test runs (whose process is gone) are removed.
    for e in std::fs::read_dir(target_tmp())
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.strip_prefix("behave-") {
            if !Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let out = target_tmp().join(format!("behave-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let src = behave_dir();
    let cc = |extra: &[&str], name: &str, source: &str| {
        let status = Command::new("cc")
            .args(["-O2", "-g", "-Wall", "-o"])
            .arg(out.join(name))
            .arg(src.join(source))
            .arg(format!("-I{}", src.display()))
            .args(extra)
            .arg("-lpthread")
            .status()
            .expect("cc runs");
        assert!(status.success(), "cc {source} -o {name} {extra:?}");
    };
    for name in PROGRAMS {
        cc(&[], name, &format!("{name}.c"));
    }
    cc(&["-static"], "burn_static", "burn.c");
    *dir = Some(out.clone());
    out
}

/// `strobe <args>` with the runtime of this build.
fn strobe(args: &[&OsStr]) -> Command {
    let mut cmd = strobe_command();
    cmd.args(args);
    cmd
}

/// `strobe sample -q <options> --output-dir <out> -- <argv>`.
fn sample(out: &Path, options: &[&str], argv: &[OsString]) -> Command {
    let mut args: Vec<&OsStr> = vec!["sample".as_ref(), "-q".as_ref()];
    args.extend(options.iter().map(OsStr::new));
    args.extend(["--output-dir".as_ref(), out.as_os_str(), "--".as_ref()]);
    args.extend(argv.iter().map(|a| a.as_os_str()));
    strobe(&args)
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

// ---------------------------------------------------------------------------
// Bounded runs that leave nothing behind
// ---------------------------------------------------------------------------

fn timeout() -> Duration {
    let s = std::env::var("STROBE_TEST_TIMEOUT_S")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(60.0);
    Duration::from_secs_f64(s)
}

/// Pids this test binary spawned and has not reaped yet: every other
/// process whose parent is this one is an orphan a run left behind.
static SPAWNED: Mutex<Vec<i32>> = Mutex::new(Vec::new());

fn spawned() -> std::sync::MutexGuard<'static, Vec<i32>> {
    SPAWNED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes this process the reaper of every orphan below it, so nothing a run
/// leaves behind escapes to init unseen.
fn become_subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: prctl with integer arguments; affects only this process.
        let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        assert_eq!(rc, 0, "PR_SET_CHILD_SUBREAPER");
    });
}

struct Proc {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    state: char,
}

impl Proc {
    fn describe(&self) -> String {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", self.pid))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        format!("pid {} ({}) {}", self.pid, self.state, cmdline.trim())
    }
}

fn processes() -> Vec<Proc> {
    let mut all = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp ...": comm may hold spaces and ')'.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        all.push(Proc {
            pid,
            state: f[0].chars().next().unwrap_or('?'),
            ppid: f[1].parse().unwrap_or(0),
            pgrp: f[2].parse().unwrap_or(0),
        });
    }
    all
}

fn descendants(all: &[Proc], root: i32) -> Vec<i32> {
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(all.iter().filter(|q| q.ppid == p).map(|q| q.pid));
        i += 1;
    }
    found.remove(0);
    found
}

/// Live processes of group `pgrp` and orphans reparented to this process;
/// reaps orphans that are already zombies.
fn leftovers(pgrp: i32) -> Vec<Proc> {
    let me = std::process::id() as i32;
    let ours = spawned();
    let mut left = Vec::new();
    for p in processes() {
        if p.ppid == me && !ours.contains(&p.pid) {
            if p.state == 'Z' {
                // SAFETY: reaping a specific orphan child; no memory involved.
                unsafe { libc::waitpid(p.pid, std::ptr::null_mut(), libc::WNOHANG) };
            } else {
                left.push(p);
            }
        } else if p.pgrp == pgrp && p.state != 'Z' && p.pid != me {
            left.push(p);
        }
    }
    left
}

fn sigkill(pid: i32) {
    // SAFETY: sending a signal to a pid (or group) this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// Kills `pgrp`, the tree below `root` and every orphan, until none is left.
fn kill_everything(root: Option<i32>, pgrp: i32) {
    for _ in 0..200 {
        let mut targets: Vec<i32> = leftovers(pgrp).iter().map(|p| p.pid).collect();
        if let Some(root) = root {
            targets.extend(descendants(&processes(), root));
        }
        sigkill(-pgrp);
        if targets.is_empty() {
            return;
        }
        for t in targets {
            sigkill(t);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

struct Run {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl Run {
    /// The status as a shell reports it: the exit code, or 128 + signal.
    fn shell_code(&self) -> i32 {
        shell_code(self.status)
    }

    fn stderr(&self) -> String {
        tail(&self.stderr, 4000)
    }

    fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

fn shell_code(s: ExitStatus) -> i32 {
    s.code()
        .or_else(|| s.signal().map(|n| 128 + n))
        .unwrap_or(-1)
}

fn tail(bytes: &[u8], n: usize) -> String {
    let s = String::from_utf8_lossy(bytes);
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= n {
        s.into_owned()
    } else {
        format!("…{}", chars[chars.len() - n..].iter().collect::<String>())
    }
}

fn reader(mut from: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = from.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

/// A started run: its own process group, output read in the background,
/// killed with everything below it if dropped unfinished.
struct Running {
    what: String,
    child: Option<Child>,
    pid: i32,
    deadline: Instant,
    stdout: mpsc::Receiver<Vec<u8>>,
    stderr: mpsc::Receiver<Vec<u8>>,
}

fn start(mut cmd: Command, what: &str) -> Running {
    become_subreaper();
    cmd.process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut ours = spawned();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let pid = child.id() as i32;
    ours.push(pid);
    drop(ours);
    let stdout = reader(child.stdout.take().unwrap());
    let stderr = reader(child.stderr.take().unwrap());
    Running {
        what: what.to_string(),
        child: Some(child),
        pid,
        deadline: Instant::now() + timeout(),
        stdout,
        stderr,
    }
}

impl Running {
    /// Kills everything of the run and reaps it; returns the stderr so far.
    fn kill(&mut self) -> String {
        kill_everything(Some(self.pid), self.pid);
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
        spawned().retain(|p| *p != self.pid);
        kill_everything(None, self.pid);
        let err = self
            .stderr
            .recv_timeout(Duration::from_secs(2))
            .unwrap_or_default();
        tail(&err, 4000)
    }

    /// Waits for the end of the run, its output and its processes, within the
    /// run's deadline; panics ("hung …") past it.
    fn finish(mut self) -> Run {
        let status = loop {
            let child = self.child.as_mut().unwrap();
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() >= self.deadline {
                let err = self.kill();
                panic!(
                    "hung {}: still running after {:?}, killed; its stderr:\n{err}",
                    self.what,
                    timeout()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        self.child = None;
        spawned().retain(|p| *p != self.pid);
        let grace = self
            .deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(5));
        let output = self
            .stdout
            .recv_timeout(grace)
            .and_then(|o| Ok((o, self.stderr.recv_timeout(grace)?)));
        let Ok((stdout, stderr)) = output else {
            let left: Vec<String> = leftovers(self.pid).iter().map(Proc::describe).collect();
            let err = self.kill();
            panic!(
                "hung {}: it exited ({status}) but its output stayed open; left behind: \
                 {left:?}; its stderr:\n{err}",
                self.what
            );
        };
        // Anything still alive in the group or orphaned now was left behind.
        let give_up = Instant::now() + Duration::from_secs(2);
        loop {
            let left = leftovers(self.pid);
            if left.is_empty() {
                break;
            }
            if Instant::now() >= give_up {
                let names: Vec<String> = left.iter().map(Proc::describe).collect();
                kill_everything(None, self.pid);
                panic!(
                    "{} exited ({status}) but left processes behind (killed now): {names:?}\n\
                     its stderr:\n{}",
                    self.what,
                    tail(&stderr, 4000)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Run {
            status,
            stdout,
            stderr,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.kill();
        }
    }
}

fn run(cmd: Command, what: &str) -> Run {
    start(cmd, what).finish()
}

// ---------------------------------------------------------------------------
// Comparing the two runs
// ---------------------------------------------------------------------------

#[derive(PartialEq, Eq, Debug)]
enum Entry {
    Dir(u32),
    File(u32, Vec<u8>),
    Link(PathBuf),
    Other,
}

/// Every entry below `dir` (not following links), by relative path.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Entry> {
    fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<PathBuf, Entry>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let path = e.path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.mode() & 0o7777;
            let t = meta.file_type();
            let entry = if t.is_symlink() {
                Entry::Link(std::fs::read_link(&path).unwrap())
            } else if t.is_dir() {
                walk(root, &path, into);
                Entry::Dir(mode)
            } else if t.is_file() {
                Entry::File(mode, std::fs::read(&path).unwrap())
            } else {
                Entry::Other
            };
            into.insert(rel, entry);
        }
    }
    let mut all = BTreeMap::new();
    walk(dir, dir, &mut all);
    all
}

fn show(e: Option<&Entry>) -> String {
    match e {
        None => "absent".into(),
        Some(Entry::File(mode, bytes)) => format!(
            "file mode {mode:o}, {} bytes: {:?}",
            bytes.len(),
            tail(&bytes[..bytes.len().min(200)], 200)
        ),
        Some(other) => format!("{other:?}"),
    }
}

fn compare_files(name: &str, plain: &Path, strobed: &Path) {
    let a = snapshot(plain);
    let b = snapshot(strobed);
    let names: std::collections::BTreeSet<&PathBuf> = a.keys().chain(b.keys()).collect();
    let diffs: Vec<String> = names
        .into_iter()
        .filter(|n| a.get(*n) != b.get(*n))
        .map(|n| {
            format!(
                "  {}: without strobe {}; under strobe {}",
                n.display(),
                show(a.get(n)),
                show(b.get(n))
            )
        })
        .collect();
    assert!(
        diffs.is_empty(),
        "{name}: the files in the working directory differ:\n{}",
        diffs.join("\n")
    );
}

/// Both runs of one case and where strobe put its output.
struct Pair {
    plain: Run,
    strobed: Run,
    /// strobe's `--output-dir` (outside both scratch directories).
    out: PathBuf,
    root: tempfile::TempDir,
}

/// Runs `argv` without and with strobe (`options` go to `strobe sample`) in
/// two scratch directories prepared by `setup`, and asserts the same exit
/// status, stdout and files.
fn behaves_as_without(
    name: &str,
    argv: &[OsString],
    options: &[&str],
    setup: &dyn Fn(&Path),
) -> Pair {
    let root = tempfile::Builder::new()
        .prefix(&format!("{name}-"))
        .tempdir_in(target_tmp())
        .unwrap();
    let plain_dir = root.path().join("plain");
    let strobe_dir = root.path().join("under-strobe");
    let out = root.path().join("strobe-output");
    for d in [&plain_dir, &strobe_dir] {
        std::fs::create_dir(d).unwrap();
        setup(d);
    }
    let mut cmd = clean_command(&argv[0]);
    cmd.args(&argv[1..]).current_dir(&plain_dir);
    let plain = run(cmd, &format!("without strobe: {name}"));
    let mut cmd = sample(&out, options, argv);
    cmd.current_dir(&strobe_dir);
    let strobed = run(cmd, &format!("under strobe: {name}"));
    assert_eq!(
        strobed.status.code(),
        Some(plain.shell_code()),
        "{name}: without strobe the status is {} (shell code {}), under strobe it is {}; \
         strobe's stderr:\n{}",
        plain.status,
        plain.shell_code(),
        strobed.status,
        strobed.stderr()
    );
    assert!(
        plain.stdout == strobed.stdout,
        "{name}: stdout differs\nwithout strobe ({} bytes):\n{}\nunder strobe ({} bytes):\n{}\n\
         strobe's stderr:\n{}",
        plain.stdout.len(),
        tail(&plain.stdout, 2000),
        strobed.stdout.len(),
        tail(&strobed.stdout, 2000),
        strobed.stderr()
    );
    compare_files(name, &plain_dir, &strobe_dir);
    Pair {
        plain,
        strobed,
        out,
        root,
    }
}

fn nothing(_: &Path) {}

fn program(bin: &Path, name: &str, args: &[&str]) -> Vec<OsString> {
    let mut v = vec![bin.join(name).into_os_string()];
    v.extend(args.iter().map(OsString::from));
    v
}

fn script(interpreter: &str, file: &str) -> Vec<OsString> {
    vec![interpreter.into(), behave_dir().join(file).into_os_string()]
}

// ---------------------------------------------------------------------------
// Looking at what strobe wrote
// ---------------------------------------------------------------------------

/// SQLite side files: a finished profile is one file.
fn side_files(dir: &Path) -> Vec<PathBuf> {
    files_below(dir, &|n| {
        n.ends_with("-wal") || n.ends_with("-shm") || n.ends_with("-journal")
    })
}

/// `strobe query --format csv <sql> -i <dbs>`: the data rows.
fn query(dbs: &[PathBuf], sql: &str) -> Vec<Vec<String>> {
    assert!(!dbs.is_empty(), "no database to query");
    let mut args: Vec<&OsStr> = vec!["query".as_ref(), "--format".as_ref(), "csv".as_ref()];
    args.push(sql.as_ref());
    args.push("-i".as_ref());
    args.extend(dbs.iter().map(|d| d.as_os_str()));
    let r = run(strobe(&args), &format!("strobe query {sql:?}"));
    assert!(
        r.status.success(),
        "strobe query {sql:?} on {dbs:?} failed: {}",
        r.stderr()
    );
    r.stdout_text()
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

fn count_samples(dbs: &[PathBuf]) -> u64 {
    query(dbs, "SELECT count(*) FROM samples")[0][0]
        .parse()
        .unwrap()
}

/// Whether one line of `stderr` holds every word (case-insensitive).
fn says(stderr: &[u8], words: &[&str]) -> bool {
    String::from_utf8_lossy(stderr).lines().any(|l| {
        let l = l.to_lowercase();
        words.iter().all(|w| l.contains(w))
    })
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

// ---------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------

#[test]
fn closing_descriptors_below_1024_then_writing_a_file() {
    let _turn = one_at_a_time();
    let bin = built();
    let p = behaves_as_without(
        "closes_fds_below_1024",
        &program(&bin, "closes_fds_below_1024", &[]),
        &[],
        &nothing,
    );
    assert!(p.plain.status.success(), "{}", p.plain.stderr());
}

#[test]
fn bash_closing_descriptors_3_to_8() {
    let _turn = one_at_a_time();
    let p = behaves_as_without(
        "closes_fds_3_to_8",
        &script("bash", "closes_fds_3_to_8.sh"),
        &[],
        &nothing,
    );
    assert!(p.plain.stdout_text().starts_with("sum "));
}

#[test]
fn python_subprocess_with_preexec_fn_and_close_fds() {
    let _turn = one_at_a_time();
    let has_python = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_python {
        eprintln!("skipped: no python3 on PATH");
        return;
    }
    let p = behaves_as_without(
        "subprocess_close_fds",
        &script("python3", "subprocess_close_fds.py"),
        &[],
        &nothing,
    );
    assert_eq!(
        p.plain.stdout_text(),
        "0 hello from the child\n0 second child\n",
        "{}",
        p.plain.stderr()
    );
}

#[test]
fn bash_writing_200_lines_through_descriptor_4() {
    let _turn = one_at_a_time();
    let p = behaves_as_without(
        "writes_through_fd4",
        &script("bash", "writes_through_fd4.sh"),
        &[],
        &nothing,
    );
    assert!(p.plain.status.success(), "{}", p.plain.stderr());
    // 9 lines of 7 bytes, 90 of 8, 101 of 9 (compare_files checked strobe's).
    assert_eq!(
        std::fs::metadata(p.root.path().join("plain/out.txt"))
            .unwrap()
            .len(),
        1692
    );
}

#[test]
fn dup2_over_descriptors_3_to_19_then_writing_through_5() {
    let _turn = one_at_a_time();
    let bin = built();
    let p = behaves_as_without(
        "dup2_over_low_fds",
        &program(&bin, "dup2_over_low_fds", &[]),
        &[],
        &nothing,
    );
    assert!(p.plain.status.success(), "{}", p.plain.stderr());
    let plain = std::fs::read(p.root.path().join("plain/four.bin")).unwrap();
    assert_eq!(plain, b"abcd");
}

#[test]
fn closing_every_descriptor_then_writing_eight_files() {
    let _turn = one_at_a_time();
    let bin = built();
    let p = behaves_as_without(
        "closes_all_fds_opens_eight",
        &program(&bin, "closes_all_fds_opens_eight", &[]),
        &[],
        &nothing,
    );
    assert!(p.plain.status.success(), "{}", p.plain.stderr());
}

#[test]
fn main_ending_in_pthread_exit_exits_0() {
    let _turn = one_at_a_time();
    let bin = built();
    let p = behaves_as_without(
        "main_pthread_exit",
        &program(&bin, "main_pthread_exit", &[]),
        &[],
        &nothing,
    );
    assert!(p.plain.status.success(), "{}", p.plain.stderr());
}

/// `seq 1 100000` in a fixed pseudo-random order.
fn shuffled_numbers(dir: &Path) {
    let mut v: Vec<u32> = (1..=100_000).collect();
    let mut state: u64 = 0x5eed_cafe_f00d;
    for i in (1..v.len()).rev() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let j = ((state >> 33) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    let text: String = v.iter().map(|n| format!("{n}\n")).collect();
    std::fs::write(dir.join("in.txt"), text).unwrap();
}

#[test]
fn gnu_sort_of_100000_numbers() {
    let _turn = one_at_a_time();
    let p = behaves_as_without(
        "sort",
        &os(&["sort", "-n", "-r", "in.txt"]),
        &[],
        &shuffled_numbers,
    );
    assert!(p.plain.stdout.starts_with(b"100000\n99999\n"));
    assert_eq!(p.plain.stdout.len(), 588_895);
}

#[test]
fn gnu_sort_in_a_shell_pipeline() {
    let _turn = one_at_a_time();
    let p = behaves_as_without(
        "sort_pipe",
        &os(&["sh", "-c", "sort -n -r in.txt | tail -1"]),
        &[],
        &shuffled_numbers,
    );
    assert_eq!(p.plain.stdout_text(), "1\n");
}

#[test]
fn raising_sigprof_kills_the_program_as_without_strobe() {
    let _turn = one_at_a_time();
    let bin = built();
    let p = behaves_as_without(
        "raises_sigprof",
        &program(&bin, "raises_sigprof", &[]),
        &[],
        &nothing,
    );
    assert_eq!(p.plain.status.signal(), Some(libc::SIGPROF));
    assert_eq!(p.strobed.status.code(), Some(128 + libc::SIGPROF));
    assert!(p.plain.stdout.is_empty());
}

#[test]
fn a_programs_own_itimer_prof_sees_its_own_signals_only() {
    let _turn = one_at_a_time();
    let bin = built();
    let p = behaves_as_without(
        "own_itimer_prof",
        &program(&bin, "own_itimer_prof", &[]),
        &[],
        &nothing,
    );
    assert_eq!(p.plain.stdout_text(), "ok\n", "without strobe");
}

#[test]
fn bin_true() {
    let _turn = one_at_a_time();
    let p = behaves_as_without("true", &os(&["/bin/true"]), &[], &nothing);
    assert!(p.plain.status.success() && p.plain.stdout.is_empty());
}

#[test]
fn a_bash_loop_of_50_bin_true() {
    let _turn = one_at_a_time();
    let p = behaves_as_without("true_loop", &script("bash", "true_loop.sh"), &[], &nothing);
    assert_eq!(p.plain.stdout_text(), "ran /bin/true 50 times\n");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn make_j2_of_seven_c_files() {
    let _turn = one_at_a_time();
    let project = behave_dir().join("make_project");
    // The build (objects, `app`) and `result.txt` (the output of running
    // `app`) are compared byte for byte with the scratch directories.
    let p = behaves_as_without("make", &os(&["make", "-j2"]), &[], &|d| {
        copy_dir(&project, d)
    });
    assert!(p.plain.status.success(), "{}", p.plain.stderr());
    let result = std::fs::read_to_string(p.root.path().join("plain/result.txt")).unwrap();
    assert!(result.starts_with("result "), "{result}");
}

#[test]
fn five_thousand_threads() {
    let _turn = one_at_a_time();
    let bin = built();
    let p = behaves_as_without(
        "many_threads",
        &program(&bin, "many_threads", &[]),
        &[],
        &nothing,
    );
    assert_eq!(p.plain.stdout_text(), "done\n");
}

#[test]
fn umask_0777_and_fork_leave_readable_0644_databases() {
    let _turn = one_at_a_time();
    let bin = built();
    let p = behaves_as_without(
        "umask_fork",
        &program(&bin, "umask_fork", &[]),
        &[],
        &nothing,
    );
    assert!(p.plain.status.success(), "{}", p.plain.stderr());
    let dbs = databases(&p.out);
    assert!(
        dbs.len() >= 2,
        "expected a database for the parent and one for the child, found {dbs:?}; \
         strobe's stderr:\n{}",
        p.strobed.stderr()
    );
    for db in &dbs {
        let mode = std::fs::metadata(db).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o644, "{} has mode {mode:o}", db.display());
    }
    for db in &dbs {
        let args = ["summary".as_ref(), "-i".as_ref(), db.as_os_str()];
        let r = run(
            strobe(&args),
            &format!("strobe summary -i {}", db.display()),
        );
        assert!(
            r.status.success(),
            "strobe summary -i {}: {}",
            db.display(),
            r.stderr()
        );
    }
}

#[test]
fn finished_profiles_are_single_files_even_after_reading() {
    let _turn = one_at_a_time();
    let bin = built();
    let p = behaves_as_without("burn", &program(&bin, "burn", &["0.3"]), &[], &nothing);
    let dbs = databases(&p.out);
    assert!(!dbs.is_empty(), "no database: {}", p.strobed.stderr());
    let left = side_files(&p.out);
    assert!(left.is_empty(), "after the run: {left:?}");
    let args = ["summary".as_ref(), "-i".as_ref(), p.out.as_os_str()];
    let r = run(strobe(&args), "strobe summary -i <output dir>");
    assert!(r.status.success(), "strobe summary: {}", r.stderr());
    let left = side_files(&p.out);
    assert!(left.is_empty(), "after strobe summary: {left:?}");
}

#[test]
fn two_concurrent_runs_with_the_same_output_file_never_share_it() {
    let _turn = one_at_a_time();
    let bin = built();
    let argv = program(&bin, "pid_burn", &["0.5"]);
    // A check-then-create race shows only when both start at the same
    // moment: a few rounds make it likely to show.
    for round in 1..=3 {
        let root = tempfile::tempdir_in(target_tmp()).unwrap();
        let out = root.path().join("out");
        let runs: Vec<Running> = ["first", "second"]
            .iter()
            .map(|which| {
                let mut cmd = sample(&out, &["--output-file", "x.db"], &argv);
                cmd.current_dir(root.path());
                let what = format!("under strobe: {which} of two concurrent runs (round {round})");
                start(cmd, &what)
            })
            .collect();
        let runs: Vec<Run> = runs.into_iter().map(Running::finish).collect();
        let mut pids = HashSet::new();
        for r in &runs {
            assert!(r.status.success(), "{}", r.stderr());
            pids.insert(r.stdout_text().trim().to_string());
        }
        assert_eq!(pids.len(), 2, "{pids:?}");
        let dbs = databases(&out);
        assert_eq!(
            dbs.len(),
            2,
            "round {round}: expected one database per run: {dbs:?}"
        );
        let inodes: HashSet<(u64, u64)> = dbs
            .iter()
            .map(|d| {
                let m = std::fs::metadata(d).unwrap();
                (m.dev(), m.ino())
            })
            .collect();
        assert_eq!(inodes.len(), 2, "round {round}: {dbs:?} are one file");
        let mut seen = HashSet::new();
        for db in &dbs {
            let rows = query(std::slice::from_ref(db), "SELECT DISTINCT pid FROM samples");
            assert_eq!(
                rows.len(),
                1,
                "round {round}: {} holds samples of pids {rows:?}",
                db.display()
            );
            seen.insert(rows[0][0].clone());
        }
        assert_eq!(
            seen, pids,
            "round {round}: the databases' pids vs the programs' pids"
        );
    }
}

#[test]
fn a_static_binary_runs_and_is_sampled_by_the_kernel() {
    let _turn = one_at_a_time();
    let bin = built();
    let p = behaves_as_without(
        "static",
        &program(&bin, "burn_static", &["0.3", "static done"]),
        &[],
        &nothing,
    );
    assert_eq!(p.plain.stdout_text(), "static done\n");
    let kernel_refuses = says(&p.strobed.stderr, &["kernel sampling is off"]);
    if kernel_refuses {
        eprintln!("skipped the sample check: the kernel refuses sampling events here");
        assert!(
            says(&p.strobed.stderr, &["not profiled", "static"]),
            "no line saying 'not profiled' … 'static' in strobe's stderr:\n{}",
            p.strobed.stderr()
        );
        return;
    }
    assert!(
        says(&p.strobed.stderr, &["sampled by the kernel", "static"]),
        "no line saying 'sampled by the kernel' … 'static' in strobe's stderr:\n{}",
        p.strobed.stderr()
    );
    let dbs = databases(&p.out);
    let n = count_samples(&dbs);
    // 0.3 s of CPU at 250 Hz: about 75 samples.
    assert!(
        n >= 50,
        "{n} samples of 0.3 s of CPU in {dbs:?}; strobe's stderr:\n{}",
        p.strobed.stderr()
    );
}

/// Whether the filesystem holding `path` honours setuid bits.
fn suid_allowed(path: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let path = path.canonicalize().unwrap();
    let mut best: Option<(usize, bool)> = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 || !path.starts_with(f[1]) {
            continue;
        }
        let nosuid = f[3].split(',').any(|o| o == "nosuid");
        if best.is_none_or(|(len, _)| f[1].len() >= len) {
            best = Some((f[1].len(), nosuid));
        }
    }
    !best.is_some_and(|(_, nosuid)| nosuid)
}

#[test]
fn a_setuid_binary_runs_and_is_reported_not_profiled() {
    let _turn = one_at_a_time();
    let bin = built();
    let dir = tempfile::tempdir_in(target_tmp()).unwrap();
    let exe = dir.path().join("setuid_report");
    std::fs::copy(bin.join("setuid_report"), &exe).unwrap();
    let nobody = c"nobody";
    // SAFETY: getpwnam with a NUL-terminated name; the result is read at
    // once, before any other passwd call.
    let uid = unsafe {
        let pw = libc::getpwnam(nobody.as_ptr());
        if pw.is_null() {
            None
        } else {
            Some(((*pw).pw_uid, (*pw).pw_gid))
        }
    };
    let Some((uid, gid)) = uid else {
        eprintln!("skipped: no user 'nobody' to own a setuid program");
        return;
    };
    if let Err(e) = std::os::unix::fs::chown(&exe, Some(uid), Some(gid)) {
        eprintln!("skipped: cannot chown the program to nobody: {e}");
        return;
    }
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o4755)).unwrap();
    if !suid_allowed(&exe) {
        eprintln!("skipped: {} is on a nosuid filesystem", exe.display());
        return;
    }
    let probe = run(clean_command(&exe), "without strobe: setuid probe");
    if probe.stdout_text() != "setuid\n" {
        eprintln!(
            "skipped: the setuid bit has no effect here (the program says {:?})",
            probe.stdout_text()
        );
        return;
    }
    let p = behaves_as_without("setuid", &[exe.into_os_string()], &[], &nothing);
    assert_eq!(p.plain.stdout_text(), "setuid\n");
    assert!(
        says(&p.strobed.stderr, &["not profiled", "setuid"]),
        "no line saying 'not profiled' … 'setuid' in strobe's stderr:\n{}",
        p.strobed.stderr()
    );
}

#[test]
fn exec_with_an_empty_environment_is_sampled_by_the_kernel_and_said() {
    let _turn = one_at_a_time();
    let bin = built();
    let child = bin.join("burn").display().to_string();
    let p = behaves_as_without(
        "exec_empty_env",
        &program(&bin, "exec_empty_env", &[&child, "0.2", "child done"]),
        &[],
        &nothing,
    );
    assert_eq!(p.plain.stdout_text(), format!("exec {child}\nchild done\n"));
    // The kernel samples it (or says why it could not).
    assert!(
        says(
            &p.strobed.stderr,
            &[
                "started with a cleared environment",
                "sampled by the kernel"
            ]
        ) || says(
            &p.strobed.stderr,
            &[
                "started with a cleared environment",
                "kernel sampling failed"
            ]
        ),
        "no line saying the image started with a cleared environment was sampled by the kernel, \
         or why not, in strobe's stderr:\n{}",
        p.strobed.stderr()
    );
}

#[test]
fn threads_blocking_every_signal_are_handed_to_the_kernel_sampler() {
    let _turn = one_at_a_time();
    let bin = built();
    let p = behaves_as_without(
        "blocks_all_signals",
        &program(&bin, "blocks_all_signals", &[]),
        &[],
        &nothing,
    );
    assert_eq!(p.plain.stdout_text(), "both threads done\n");
    if !says(&p.strobed.stderr, &["sampled by the kernel", "blocked"]) {
        // Only where the kernel refuses sampling events: then the thread
        // is reported as not sampled.
        assert!(
            says(
                &p.strobed.stderr,
                &["not sampled", "blocked", "kernel sampling of it failed"]
            ),
            "no line saying the blocking threads were handed to the kernel, or why not:\n{}",
            p.strobed.stderr()
        );
        eprintln!("skipped the sample check: the kernel refuses sampling events here");
        return;
    }
    let dbs = databases(&p.out);
    let per_thread = query(&dbs, "SELECT tid, count(*) FROM samples GROUP BY tid");
    // 0.3 s of CPU each, the first 50 ms unsampled: about 60 samples each.
    let sampled = per_thread
        .iter()
        .filter(|r| r[1].parse::<u64>().unwrap_or(0) >= 25)
        .count();
    assert_eq!(
        sampled,
        2,
        "samples per thread {per_thread:?}; strobe's stderr:\n{}",
        p.strobed.stderr()
    );
}

#[test]
fn threads_blocking_every_signal_are_sampled_by_the_kernel_sampler() {
    let _turn = one_at_a_time();
    let bin = built();
    let p = behaves_as_without(
        "blocks_all_signals_kernel",
        &program(&bin, "blocks_all_signals", &[]),
        &["--sampler", "kernel"],
        &nothing,
    );
    assert_eq!(p.plain.stdout_text(), "both threads done\n");
    if says(&p.strobed.stderr, &["kernel sampling is off"]) {
        eprintln!("skipped: the kernel refuses sampling events here");
        return;
    }
    let dbs = databases(&p.out);
    assert!(!dbs.is_empty(), "no database: {}", p.strobed.stderr());
    let per_thread = query(&dbs, "SELECT tid, count(*) FROM samples GROUP BY tid");
    // Each thread burns 0.3 s of CPU: about 75 samples at 250 Hz.
    let sampled = per_thread
        .iter()
        .filter(|r| r[1].parse::<u64>().unwrap_or(0) >= 40)
        .count();
    assert_eq!(
        sampled,
        2,
        "samples per thread {per_thread:?}; strobe's stderr:\n{}",
        p.strobed.stderr()
    );
}

#[test]
fn a_program_ignoring_sigprof_is_still_profiled() {
    let _turn = one_at_a_time();
    let bin = built();
    let p = behaves_as_without(
        "ignores_sigprof",
        &program(&bin, "ignores_sigprof", &[]),
        &[],
        &nothing,
    );
    assert_eq!(p.plain.stdout_text(), "done\n");
    let dbs = databases(&p.out);
    assert!(
        !dbs.is_empty(),
        "no database; strobe's stderr:\n{}",
        p.strobed.stderr()
    );
    let n = count_samples(&dbs);
    assert!(
        n >= 10,
        "{n} samples of 0.5 s of CPU with SIGPROF ignored; strobe's stderr:\n{}",
        p.strobed.stderr()
    );
}

/// The pid of the process below the run running `exe`, once it has exec'd.
fn find_program(run: &mut Running, exe: &Path) -> i32 {
    let exe = exe.canonicalize().unwrap();
    loop {
        for pid in descendants(&processes(), run.pid) {
            if std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe) {
                return pid;
            }
        }
        let child = run.child.as_mut().unwrap();
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "{} ended ({status}) before {} was seen running",
                run.what,
                exe.display()
            );
        }
        if Instant::now() >= run.deadline {
            let err = run.kill();
            panic!(
                "hung {}: {} never started; stderr:\n{err}",
                run.what,
                exe.display()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn sigkill_at_a_random_moment_keeps_every_sample_older_than_20_ms() {
    let _turn = one_at_a_time();
    let bin = built();
    let root = tempfile::tempdir_in(target_tmp()).unwrap();
    let out = root.path().join("out");
    let exe = bin.join("spin_thread");
    let mut cmd = sample(
        &out,
        &[
            "--sampling-realtime=true",
            "--sampling-realtime-freq",
            "1000",
        ],
        &[exe.clone().into_os_string(), "3".into()],
    );
    cmd.current_dir(root.path());
    let mut running = start(cmd, "under strobe: spin_thread (to be killed)");
    let pid = find_program(&mut running, &exe);
    let started = monotonic_ns();
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        % 1000;
    let delay = Duration::from_millis(500 + u64::from(jitter));
    std::thread::sleep(delay);
    let killed = monotonic_ns();
    sigkill(pid);
    let r = running.finish();
    assert_eq!(
        r.status.code(),
        Some(128 + libc::SIGKILL),
        "strobe's status after SIGKILL of the program: {}; stderr:\n{}",
        r.status,
        r.stderr()
    );
    let dbs = databases(&out);
    assert!(!dbs.is_empty(), "no database: {}", r.stderr());
    let rows = query(
        &dbs,
        &format!("SELECT tid, timestamp FROM samples WHERE pid = {pid} ORDER BY timestamp"),
    );
    let ms = 1_000_000u64;
    let (from, to) = (started + 100 * ms, killed - 20 * ms);
    // The worker burns CPU all along: its samples in [from, to], with both
    // ends, must leave no gap over 20 ms.
    let mut times: Vec<u64> = vec![from];
    times.extend(
        rows.iter()
            .filter(|r| r[0] != pid.to_string())
            .map(|r| r[1].parse::<u64>().unwrap())
            .filter(|t| (from..=to).contains(t)),
    );
    times.push(to);
    let worst = times.windows(2).map(|w| (w[1] - w[0], w[0])).max().unwrap();
    assert!(
        worst.0 <= 20 * ms,
        "killed {delay:?} after the start: the worker's samples leave a gap of {:.1} ms \
         from {:.1} ms after the start ({} samples of the worker in the window up to \
         20 ms before the kill; {} rows in all)",
        worst.0 as f64 / 1e6,
        (worst.1 - started) as f64 / 1e6,
        times.len() - 2,
        rows.len()
    );
}
