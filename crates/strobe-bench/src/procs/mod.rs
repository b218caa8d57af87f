//! `strobe-bench procs`: what strobe adds per process and per thread, plain
//! and under `strobe sample` side by side in one run.
//!
//! Six parts (`--only` picks some):
//! 1. `true`: `/bin/true` N times plain and under `strobe sample`: the
//!    whole command's wall time, and the program's own wall time measured
//!    from inside a profiled parent (`timeit`, a small C helper that times
//!    fork + exec + wait of its arguments).
//! 2. `loop`: a bash loop of 200 `/bin/true`.
//! 3. `make`: `make -j2` of 7 small C files.
//! 4. `threads`: VmRSS / VmHWM of a process holding T blocked threads
//!    (64 KiB stacks), and of one holding a single thread.
//! 5. `size`: the runtime library's size, unstripped and stripped, and the
//!    count of its symbols naming SQLite.
//! 6. `stress`: stress-ng's fork-heavy stressors (`--fork`, `--zombie`,
//!    `--prctl`, one worker for `--stress-seconds`): their bogo-ops per
//!    second of real time, plain and under strobe.
//!
//! Every child runs under a timeout (`--timeout`); a series whose child
//! times out stops and reports "timed out". Needs `cc`, `bash`, `seq`,
//! `make` and (part `stress`) `stress-ng`; prints figures and asserts
//! nothing.

mod parts;

use parts::{part_loop, part_make, part_size, part_stress, part_threads, part_true};

use crate::overhead::strobe_binary;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Options of `strobe-bench procs`.
#[derive(Debug, Args)]
pub struct ProcsArgs {
    /// Runs of `/bin/true` per configuration (part `true`).
    #[arg(long, default_value_t = 100)]
    runs: usize,
    /// Rounds of the other parts; medians are reported.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Threads of the memory part (part `threads`).
    #[arg(long, default_value_t = 5000)]
    threads: usize,
    /// Parts to run, comma-separated (default: all).
    #[arg(long, value_delimiter = ',', value_name = "PART")]
    only: Vec<Part>,
    /// Seconds each stress-ng run lasts (part `stress`).
    #[arg(long, default_value_t = 3)]
    stress_seconds: u64,
    /// Seconds any one child may run before it is killed.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// The strobe binary (default: next to this benchmark).
    #[arg(long)]
    strobe: Option<PathBuf>,
    /// The runtime library strobe preloads (default: `STROBE_RUNTIME`, else
    /// strobe's own search: next to `strobe`, then its `deps/`).
    #[arg(long)]
    runtime: Option<PathBuf>,
}

/// The parts of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Part {
    /// `/bin/true`, plain and under strobe.
    #[value(alias = "1")]
    True,
    /// A bash loop of 200 `/bin/true`.
    #[value(alias = "2")]
    Loop,
    /// `make -j2` of 7 small C files.
    #[value(alias = "3")]
    Make,
    /// Memory added per thread.
    #[value(alias = "4")]
    Threads,
    /// The runtime library's size and SQLite symbols.
    #[value(alias = "5")]
    Size,
    /// stress-ng's fork-heavy stressors.
    #[value(alias = "6")]
    Stress,
}

/// `timeit PROGRAM [ARGS...]`: prints the wall time of fork + exec + wait.
const TIMEIT_C: &str = r#"
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: timeit PROGRAM [ARGS...]\n");
        return 2;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0) {
        execvp(argv[1], argv + 1);
        perror("execvp");
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0) {
        perror("waitpid");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("elapsed_ns %lld\n",
           (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
"#;

/// `threads T`: starts T threads with 64 KiB stacks, waits until all run,
/// prints its VmRSS and VmHWM (KiB), then releases and joins them.
const THREADS_C: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_started = PTHREAD_COND_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER;
static long started, wanted;
static int released;

static void *worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    if (++started == wanted)
        pthread_cond_signal(&all_started);
    while (!released)
        pthread_cond_wait(&go, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static long status_kib(const char *name) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(name);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

int main(int argc, char **argv) {
    wanted = argc > 1 ? atol(argv[1]) : 5000;
    if (wanted < 1)
        wanted = 1;
    pthread_t *t = calloc((size_t)wanted, sizeof *t);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    int e = pthread_attr_setstacksize(&attr, 64 * 1024);
    if (e) {
        fprintf(stderr, "pthread_attr_setstacksize: %s\n", strerror(e));
        return 1;
    }
    for (long i = 0; i < wanted; i++) {
        e = pthread_create(&t[i], &attr, worker, NULL);
        if (e) {
            fprintf(stderr, "pthread_create %ld: %s\n", i, strerror(e));
            return 1;
        }
    }
    pthread_mutex_lock(&mu);
    while (started < wanted)
        pthread_cond_wait(&all_started, &mu);
    pthread_mutex_unlock(&mu);
    long rss = status_kib("VmRSS"), hwm = status_kib("VmHWM");
    printf("rss_kib %ld hwm_kib %ld\n", rss, hwm);
    fflush(stdout);
    pthread_mutex_lock(&mu);
    released = 1;
    pthread_cond_broadcast(&go);
    pthread_mutex_unlock(&mu);
    for (long i = 0; i < wanted; i++)
        pthread_join(t[i], NULL);
    return 0;
}
"#;

/// How a child ended.
enum Outcome {
    /// It exited (successfully or not) within the timeout.
    Done {
        wall_s: f64,
        success: bool,
        status: String,
        stdout: String,
        stderr: String,
    },
    /// It was killed at the timeout.
    TimedOut,
}

/// What one series of runs gave.
#[derive(Default, Clone)]
struct Series {
    values: Vec<f64>,
    /// A second figure from the same runs (VmHWM beside VmRSS).
    second: Vec<f64>,
    failed: usize,
    first_failure: Option<String>,
    timed_out: bool,
}

impl Series {
    fn summary(&self, fmt: impl Fn(f64) -> String) -> String {
        if self.values.is_empty() {
            return self.state();
        }
        let mut s = fmt(median(&self.values));
        if self.timed_out || self.failed > 0 {
            s.push_str(&format!(" ({})", self.state()));
        }
        s
    }

    fn state(&self) -> String {
        let mut parts = Vec::new();
        if self.timed_out {
            parts.push("timed out".to_string());
        }
        if self.failed > 0 {
            parts.push(format!("{} failed", self.failed));
        }
        if parts.is_empty() {
            parts.push("no data".into());
        }
        parts.join(", ")
    }
}

/// The benchmark's context: binaries, directories, limits.
struct Bench {
    strobe: PathBuf,
    runtime: PathBuf,
    dir: PathBuf,
    timeout: Duration,
    notes: Vec<String>,
}

/// One line of the results table.
struct Row {
    part: &'static str,
    figure: String,
    plain: String,
    strobe: String,
    diff: String,
    ratio: String,
}

impl Row {
    fn new(part: &'static str, figure: impl Into<String>) -> Self {
        Row {
            part,
            figure: figure.into(),
            plain: String::new(),
            strobe: String::new(),
            diff: String::new(),
            ratio: String::new(),
        }
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The nearest-rank 90th percentile.
fn p90(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((v.len() as f64) * 0.9).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// Runs `argv` in its own process group with the runtime setting, stdin
/// closed, stdout and stderr captured; kills the group at the timeout.
/// The wall time runs from just before the spawn to the reaping of the
/// child and the end of its output.
fn run_child(argv: &[String], runtime: &Path, timeout: Duration) -> Result<Outcome> {
    let argv = argv.to_vec();
    let runtime = runtime.to_path_buf();
    let (pid_tx, pid_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env("STROBE_RUNTIME", &runtime)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let t0 = Instant::now();
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let _ = pid_tx.send(Err(e));
                return;
            }
        };
        let _ = pid_tx.send(Ok(child.id()));
        let out = child.wait_with_output();
        let _ = done_tx.send((out, t0.elapsed().as_secs_f64()));
    });
    let pid = match pid_rx.recv().context("the waiter thread died")? {
        Ok(pid) => pid as libc::pid_t,
        Err(e) => {
            let _ = waiter.join();
            return Err(e).context("spawning the benchmark child");
        }
    };
    match done_rx.recv_timeout(timeout) {
        Ok((out, wall_s)) => {
            let _ = waiter.join();
            let out = out.context("waiting for the benchmark child")?;
            Ok(Outcome::Done {
                wall_s,
                success: out.status.success(),
                status: out.status.to_string(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            })
        }
        Err(_) => {
            // SAFETY: kill has no memory-safety preconditions; the group is
            // the one the child leads (process_group(0)) and the child has
            // not been reaped, since its waiter has not reported.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            // The waiter reaps the child; if some process outside the group
            // still holds its pipes, leave the thread behind.
            if done_rx.recv_timeout(Duration::from_secs(5)).is_ok() {
                let _ = waiter.join();
            }
            Ok(Outcome::TimedOut)
        }
    }
}

/// The first line of `s`, for notes.
fn first_line(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

impl Bench {
    /// The argv of `strobe sample -q --output-dir <dir>/out -- program...`.
    fn under_strobe(&self, program: &[String]) -> Vec<String> {
        let mut argv = vec![
            self.strobe.display().to_string(),
            "sample".into(),
            "-q".into(),
            "--output-dir".into(),
            self.out_dir().display().to_string(),
            "--".into(),
        ];
        argv.extend(program.iter().cloned());
        argv
    }

    fn out_dir(&self) -> PathBuf {
        self.dir.join("out")
    }

    /// Runs `argv` once into `series`, with `value` taking the figure from
    /// the finished run (`None`: the run's output did not hold it). Returns
    /// false when the series must stop (timeout).
    fn once(
        &mut self,
        name: &str,
        argv: &[String],
        series: &mut Series,
        value: impl Fn(f64, &str) -> Option<(f64, f64)>,
    ) -> Result<bool> {
        let outcome = run_child(argv, &self.runtime, self.timeout)?;
        let _ = std::fs::remove_dir_all(self.out_dir());
        match outcome {
            Outcome::TimedOut => {
                series.timed_out = true;
                self.notes.push(format!(
                    "{name}: timed out after {} s (killed; series stopped after {} runs)",
                    self.timeout.as_secs(),
                    series.values.len() + series.failed
                ));
                Ok(false)
            }
            Outcome::Done {
                wall_s,
                success,
                status,
                stdout,
                stderr,
            } => {
                match (success, value(wall_s, &stdout)) {
                    (true, Some((v, second))) => {
                        series.values.push(v);
                        series.second.push(second);
                    }
                    (true, None) => {
                        series.failed += 1;
                        series.first_failure.get_or_insert_with(|| {
                            format!("no figure in its output: {:?}", first_line(&stdout))
                        });
                    }
                    (false, _) => {
                        series.failed += 1;
                        series
                            .first_failure
                            .get_or_insert_with(|| format!("{status}: {}", first_line(&stderr)));
                    }
                }
                Ok(true)
            }
        }
    }

    /// Runs each configuration `n` times, interleaved.
    fn interleaved(
        &mut self,
        configs: &[(&str, Vec<String>)],
        n: usize,
        value: impl Fn(f64, &str) -> Option<(f64, f64)> + Copy,
    ) -> Result<Vec<Series>> {
        let mut series: Vec<Series> = configs.iter().map(|_| Series::default()).collect();
        for _ in 0..n {
            for (i, (name, argv)) in configs.iter().enumerate() {
                if series[i].timed_out {
                    continue;
                }
                self.once(name, argv, &mut series[i], value)?;
            }
        }
        for ((name, _), s) in configs.iter().zip(&series) {
            if let Some(why) = &s.first_failure {
                self.notes.push(format!(
                    "{name}: {} of {n} runs failed; first: {why}",
                    s.failed
                ));
            }
        }
        Ok(series)
    }
}

fn cc(args: &[&str]) -> Result<()> {
    let out = Command::new("cc")
        .args(args)
        .output()
        .context("running cc")?;
    if !out.status.success() {
        bail!(
            "cc {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Compiles `source` into the executable `dir/name`.
fn compile(dir: &Path, name: &str, source: &str) -> Result<String> {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source)?;
    let exe = dir.join(name);
    cc(&[
        "-O2",
        "-pthread",
        "-o",
        exe.to_str().context("non-UTF-8 temp dir")?,
        src.to_str().context("non-UTF-8 temp dir")?,
    ])?;
    Ok(exe.display().to_string())
}

/// The runtime strobe would preload: `explicit`, else `STROBE_RUNTIME`,
/// else next to `strobe`, else its `deps/` (strobe's own search order).
fn locate_runtime(explicit: Option<&Path>, strobe: &Path) -> Result<PathBuf> {
    const FILE: &str = "libstrobe_runtime.so";
    let from_env = std::env::var_os("STROBE_RUNTIME").map(PathBuf::from);
    if let Some(p) = explicit.map(Path::to_path_buf).or(from_env) {
        if !p.is_file() {
            bail!("the runtime {} does not exist", p.display());
        }
        return Ok(std::fs::canonicalize(p)?);
    }
    let strobe = std::fs::canonicalize(strobe)?;
    let dir = strobe.parent().unwrap_or(Path::new("."));
    for p in [dir.join(FILE), dir.join("deps").join(FILE)] {
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!(
        "cannot find {FILE} next to {}; build it with \
         `cargo build --release -p strobe-runtime` or pass --runtime",
        strobe.display()
    )
}

/// "N cores, MODEL, DATE" from nproc, /proc/cpuinfo and date.
fn machine() -> String {
    let stdout = |p: &str, a: &[&str]| {
        Command::new(p)
            .args(a)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let cores = stdout("nproc", &[]).unwrap_or_else(|| "?".into());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let date = stdout("date", &["+%Y-%m-%d %H:%M %Z"]).unwrap_or_else(|| "unknown date".into());
    format!("{cores} cores (nproc), {model}; {date}")
}

/// The one-minute load average.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// Runs the benchmark and prints the table.
pub fn run(args: &ProcsArgs) -> Result<()> {
    if args.runs == 0 || args.rounds == 0 || args.threads == 0 {
        bail!("--runs, --rounds and --threads must be at least 1");
    }
    let strobe = strobe_binary(args.strobe.as_deref())?;
    let runtime = locate_runtime(args.runtime.as_deref(), &strobe)?;
    let dir = tempfile::tempdir()?;
    let mut b = Bench {
        strobe,
        runtime,
        dir: dir.path().to_path_buf(),
        timeout: Duration::from_secs(args.timeout.max(1)),
        notes: Vec::new(),
    };
    let wanted = |p: Part| args.only.is_empty() || args.only.contains(&p);
    let started = Instant::now();
    let load_before = load_average();
    let mut rows = Vec::new();
    if wanted(Part::True) {
        part_true(&mut b, args.runs, &mut rows)?;
    }
    if wanted(Part::Loop) {
        part_loop(&mut b, args.rounds, &mut rows)?;
    }
    if wanted(Part::Make) {
        part_make(&mut b, args.rounds, &mut rows)?;
    }
    if wanted(Part::Threads) {
        part_threads(&mut b, args.threads, args.rounds, &mut rows)?;
    }
    if wanted(Part::Size) {
        part_size(&mut b, &mut rows)?;
    }
    if wanted(Part::Stress) {
        part_stress(&mut b, args.stress_seconds, args.rounds, &mut rows)?;
    }

    println!(
        "machine: {}; load average {load_before} before, {} after",
        machine(),
        load_average()
    );
    println!("strobe:  {}", b.strobe.display());
    println!("runtime: {}", b.runtime.display());
    println!(
        "runs {} (true), rounds {} (loop, make, threads, stress), threads {}, timeout {} s; took {:.0} s",
        args.runs,
        args.rounds,
        args.threads,
        b.timeout.as_secs(),
        started.elapsed().as_secs_f64()
    );
    let w = |f: fn(&Row) -> &str, head: &str| {
        rows.iter()
            .map(|r| f(r).chars().count())
            .chain([head.chars().count()])
            .max()
            .unwrap_or(0)
    };
    let heads = [
        "part",
        "figure",
        "plain",
        "strobe",
        "strobe − plain",
        "ratio / per",
    ];
    let getters: [fn(&Row) -> &str; 6] = [
        |r| r.part,
        |r| &r.figure,
        |r| &r.plain,
        |r| &r.strobe,
        |r| &r.diff,
        |r| &r.ratio,
    ];
    let widths: Vec<usize> = getters.iter().zip(heads).map(|(g, h)| w(*g, h)).collect();
    let line = |cells: [&str; 6]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = widths[i].saturating_sub(c.chars().count());
            if i < 2 {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
            s.push_str("  ");
        }
        println!("{}", s.trim_end());
    };
    line(heads);
    for r in &rows {
        line([r.part, &r.figure, &r.plain, &r.strobe, &r.diff, &r.ratio]);
    }
    if !b.notes.is_empty() {
        println!("notes:");
        for n in &b.notes {
            println!("  {n}");
        }
    }
    Ok(())
}
