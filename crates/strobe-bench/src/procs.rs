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

use crate::overhead::strobe_binary;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use std::fmt::Write as _;
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

fn ms(v: f64) -> String {
    format!("{:.3} ms", v * 1e3)
}

fn secs(v: f64) -> String {
    format!("{v:.3} s")
}

fn diff_ms(a: &Series, b: &Series, stat: fn(&[f64]) -> f64) -> String {
    if a.values.is_empty() || b.values.is_empty() {
        return "–".into();
    }
    format!("{:+.3} ms", (stat(&b.values) - stat(&a.values)) * 1e3)
}

fn diff_s(a: &Series, b: &Series) -> String {
    if a.values.is_empty() || b.values.is_empty() {
        return "–".into();
    }
    format!("{:+.3} s", median(&b.values) - median(&a.values))
}

fn ratio(a: &Series, b: &Series) -> String {
    if a.values.is_empty() || b.values.is_empty() {
        return "–".into();
    }
    format!("{:.2}×", median(&b.values) / median(&a.values))
}

/// Part 1: `/bin/true`, the whole command and the program's own time.
fn part_true(b: &mut Bench, runs: usize, rows: &mut Vec<Row>) -> Result<()> {
    eprintln!("procs: /bin/true, {runs} runs per configuration");
    let timeit = compile(&b.dir, "timeit", TIMEIT_C)?;
    let t = vec!["/bin/true".to_string()];
    let timed = vec![timeit, "/bin/true".to_string()];
    let wall = b.interleaved(
        &[
            ("/bin/true", t.clone()),
            ("strobe sample -- /bin/true", b.under_strobe(&t)),
        ],
        runs,
        |w, _| Some((w, 0.0)),
    )?;
    let inner = b.interleaved(
        &[
            ("timeit /bin/true", timed.clone()),
            ("strobe sample -- timeit /bin/true", b.under_strobe(&timed)),
        ],
        runs,
        |_, out| {
            out.lines()
                .find_map(|l| l.strip_prefix("elapsed_ns "))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map(|ns| (ns * 1e-9, 0.0))
        },
    )?;
    for (what, s) in [
        (
            "(a) whole command: `/bin/true` vs `strobe sample -- /bin/true`",
            &wall,
        ),
        (
            "(b) /bin/true inside a parent, by `timeit` (fork+exec+wait)",
            &inner,
        ),
    ] {
        for (stat_name, stat) in [("median", median as fn(&[f64]) -> f64), ("p90", p90)] {
            let mut r = Row::new("true", format!("{what}, {stat_name}"));
            let show = |x: &Series| {
                if x.values.is_empty() {
                    x.state()
                } else {
                    let mut v = ms(stat(&x.values));
                    if x.timed_out || x.failed > 0 {
                        v.push_str(&format!(" ({}, n={})", x.state(), x.values.len()));
                    }
                    v
                }
            };
            r.plain = show(&s[0]);
            r.strobe = show(&s[1]);
            r.diff = diff_ms(&s[0], &s[1], stat);
            if stat_name == "median" {
                r.ratio = ratio(&s[0], &s[1]);
            }
            rows.push(r);
        }
    }
    Ok(())
}

/// Part 2: a bash loop of 200 `/bin/true`.
fn part_loop(b: &mut Bench, rounds: usize, rows: &mut Vec<Row>) -> Result<()> {
    eprintln!("procs: bash loop of 200 /bin/true, {rounds} rounds");
    let prog: Vec<String> = ["bash", "-c", "for i in $(seq 200); do /bin/true; done"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let s = b.interleaved(
        &[
            ("bash loop", prog.clone()),
            ("strobe sample -- bash loop", b.under_strobe(&prog)),
        ],
        rounds,
        |w, _| Some((w, 0.0)),
    )?;
    let mut r = Row::new("loop", "bash loop of 200 /bin/true, wall, median");
    r.plain = s[0].summary(secs);
    r.strobe = s[1].summary(secs);
    r.diff = diff_s(&s[0], &s[1]);
    r.ratio = ratio(&s[0], &s[1]);
    rows.push(r);
    if !s[0].values.is_empty() && !s[1].values.is_empty() {
        let mut r = Row::new("loop", "  per process (201 processes + bash), median");
        r.diff = format!(
            "{:+.3} ms",
            (median(&s[1].values) - median(&s[0].values)) * 1e3 / 202.0
        );
        rows.push(r);
    }
    Ok(())
}

/// The bogo-ops per second of real time of `stressor` in stress-ng's
/// `--metrics-brief` output.
fn bogo_ops_per_s(stressor: &str, out: &str) -> Option<f64> {
    out.lines().find_map(|l| {
        let fields: Vec<&str> = l.split_whitespace().collect();
        // stress-ng: metrc: [PID] NAME OPS REAL USR SYS OPS/S(real) OPS/S(cpu)
        match fields.as_slice() {
            [_, "metrc:", _, name, _, _, _, _, real, _] if *name == stressor => real.parse().ok(),
            _ => None,
        }
    })
}

/// Part 6: stress-ng's fork-heavy stressors, bogo-ops/s plain and under
/// strobe.
fn part_stress(b: &mut Bench, seconds: u64, rounds: usize, rows: &mut Vec<Row>) -> Result<()> {
    eprintln!("procs: stress-ng --fork, --zombie, --prctl, {seconds} s each, {rounds} rounds");
    for stressor in ["fork", "zombie", "prctl"] {
        let prog: Vec<String> = [
            "stress-ng".to_string(),
            format!("--{stressor}"),
            "1".into(),
            "--timeout".into(),
            format!("{seconds}s"),
            "--metrics-brief".into(),
            "--stdout".into(),
        ]
        .to_vec();
        let s = b.interleaved(
            &[
                (stressor, prog.clone()),
                ("strobe sample -- stress-ng", b.under_strobe(&prog)),
            ],
            rounds,
            |_, out| bogo_ops_per_s(stressor, out).map(|v| (v, 0.0)),
        )?;
        let mut r = Row::new(
            "stress",
            format!("stress-ng --{stressor} 1: bogo-ops/s (real time), median"),
        );
        let ops = |v: f64| format!("{v:.0}");
        r.plain = s[0].summary(ops);
        r.strobe = s[1].summary(ops);
        if !s[0].values.is_empty() && !s[1].values.is_empty() {
            r.ratio = format!(
                "{:.2} of plain",
                median(&s[1].values) / median(&s[0].values)
            );
        }
        rows.push(r);
    }
    Ok(())
}

/// Writes 7 small C files and their Makefile into `dir`.
fn write_make_project(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut objs = Vec::new();
    for f in 0..7 {
        let mut src = String::from("#include <stdio.h>\n#include <string.h>\n\n");
        for g in 0..8 {
            writeln!(
                src,
                "struct s{f}_{g} {{ int a[16]; double d; char name[32]; }};\n\
                 long f{f}_{g}(long n) {{\n\
                 \x20   struct s{f}_{g} s;\n\
                 \x20   memset(&s, 0, sizeof s);\n\
                 \x20   long acc = 0;\n\
                 \x20   for (long i = 0; i < n; i++) {{\n\
                 \x20       s.a[i % 16] += (int)(i * {g} + {f});\n\
                 \x20       s.d += (double)s.a[(i * 7) % 16] / (i + 1);\n\
                 \x20       acc ^= s.a[i % 16] + (long)s.d;\n\
                 \x20   }}\n\
                 \x20   snprintf(s.name, sizeof s.name, \"f{f}_{g} %ld\", acc);\n\
                 \x20   return acc + (long)strlen(s.name);\n\
                 }}\n"
            )?;
        }
        if f == 0 {
            for o in 1..7 {
                writeln!(src, "long f{o}_0(long n);")?;
            }
            src.push_str("int main(void) {\n    long acc = f0_0(10);\n");
            for o in 1..7 {
                writeln!(src, "    acc += f{o}_0(10);")?;
            }
            src.push_str("    printf(\"%ld\\n\", acc);\n    return 0;\n}\n");
        }
        std::fs::write(dir.join(format!("f{f}.c")), src)?;
        objs.push(format!("f{f}.o"));
    }
    let objs = objs.join(" ");
    std::fs::write(
        dir.join("Makefile"),
        format!(
            "CC = cc\nCFLAGS = -O2 -g\nOBJS = {objs}\n\n\
             prog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n\n\
             %.o: %.c\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\n\
             clean:\n\trm -f $(OBJS) prog\n\n.PHONY: clean\n"
        ),
    )?;
    Ok(())
}

/// Part 3: `make -j2` of 7 small C files.
fn part_make(b: &mut Bench, rounds: usize, rows: &mut Vec<Row>) -> Result<()> {
    eprintln!("procs: make -j2 of 7 C files, {rounds} rounds");
    let project = b.dir.join("make-project");
    write_make_project(&project)?;
    let p = project.display().to_string();
    let make: Vec<String> = ["make", "-s", "-C", &p, "-j2"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let clean: Vec<String> = ["make", "-s", "-C", &p, "clean"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let configs = [
        ("make -j2", make.clone()),
        ("strobe sample -- make -j2", b.under_strobe(&make)),
    ];
    let mut series: Vec<Series> = configs.iter().map(|_| Series::default()).collect();
    for _ in 0..rounds {
        for (i, (name, argv)) in configs.iter().enumerate() {
            if series[i].timed_out {
                continue;
            }
            match run_child(&clean, &b.runtime, b.timeout)? {
                Outcome::Done { success: true, .. } => {}
                _ => bail!("`make clean` failed in {}", project.display()),
            }
            b.once(name, argv, &mut series[i], |w, _| Some((w, 0.0)))?;
        }
    }
    for ((name, _), s) in configs.iter().zip(&series) {
        if let Some(why) = &s.first_failure {
            b.notes.push(format!(
                "{name}: {} of {rounds} rounds failed; first: {why}",
                s.failed
            ));
        }
    }
    let mut r = Row::new("make", "make -j2, 7 C files + link, wall, median");
    r.plain = series[0].summary(secs);
    r.strobe = series[1].summary(secs);
    r.diff = diff_s(&series[0], &series[1]);
    r.ratio = ratio(&series[0], &series[1]);
    rows.push(r);
    Ok(())
}

/// Part 4: memory added per thread and per process.
fn part_threads(b: &mut Bench, threads: usize, rounds: usize, rows: &mut Vec<Row>) -> Result<()> {
    let exe = compile(&b.dir, "threads", THREADS_C)?;
    let mut counts = vec![threads];
    if threads != 1 {
        counts.push(1);
    }
    // (threads, median VmRSS added by strobe in KiB) per finished count.
    let mut rss_added: Vec<(usize, f64)> = Vec::new();
    for t in counts {
        eprintln!("procs: {t} blocked thread(s), {rounds} rounds");
        let prog = vec![exe.clone(), t.to_string()];
        let figures = |_: f64, out: &str| -> Option<(f64, f64)> {
            let line = out.lines().find(|l| l.starts_with("rss_kib "))?;
            let f: Vec<&str> = line.split_whitespace().collect();
            match f[..] {
                ["rss_kib", rss, "hwm_kib", hwm] => Some((rss.parse().ok()?, hwm.parse().ok()?)),
                _ => None,
            }
        };
        let (plain_name, strobe_name) = if t == 1 {
            ("threads 1", "strobe sample -- threads 1")
        } else {
            ("threads T", "strobe sample -- threads T")
        };
        let rss = b.interleaved(
            &[
                (plain_name, prog.clone()),
                (strobe_name, b.under_strobe(&prog)),
            ],
            rounds,
            figures,
        )?;
        let hwm: Vec<Series> = rss
            .iter()
            .map(|s| Series {
                values: s.second.clone(),
                ..s.clone()
            })
            .collect();
        let results = [("rss_kib", rss), ("hwm_kib", hwm)];
        for (key, s) in &results {
            let label = if *key == "rss_kib" { "VmRSS" } else { "VmHWM" };
            // KiB in, MiB shown (KiB for the one-thread process).
            let mib = |v: f64| {
                if t == 1 {
                    format!("{v:.0} KiB")
                } else {
                    format!("{:.1} MiB", v / 1024.0)
                }
            };
            let mut r = Row::new(
                "threads",
                format!("{label}, {t} blocked thread(s) (64 KiB stacks), median"),
            );
            r.plain = s[0].summary(mib);
            r.strobe = s[1].summary(mib);
            if !s[0].values.is_empty() && !s[1].values.is_empty() {
                let d = median(&s[1].values) - median(&s[0].values);
                if *key == "rss_kib" {
                    rss_added.push((t, d));
                }
                r.diff = if t == 1 {
                    format!("{d:+.0} KiB")
                } else {
                    format!("{:+.1} MiB", d / 1024.0)
                };
                r.ratio = if t > 1 {
                    format!("{:+.1} KiB/thread", d / t as f64)
                } else {
                    format!("{:.2}×", median(&s[1].values) / median(&s[0].values))
                };
            } else {
                r.diff = "–".into();
            }
            rows.push(r);
        }
    }
    if let [(t, d_t), (1, d_1)] = rss_added[..] {
        let mut r = Row::new(
            "threads",
            format!(
                "VmRSS added per thread, one-thread cost removed: (Δ{t} − Δ1) / {}",
                t - 1
            ),
        );
        r.ratio = format!("{:+.1} KiB/thread", (d_t - d_1) / (t - 1) as f64);
        rows.push(r);
    }
    Ok(())
}

/// Runs `program args` and returns its stdout, or why it could not.
fn tool_output(program: &str, args: &[&str], path: &Path) -> Result<String, String> {
    match Command::new(program).args(args).arg(path).output() {
        Err(e) => Err(format!("{program} cannot be run: {e}")),
        Ok(o) if !o.status.success() => Err(format!(
            "{program} {}: {}",
            args.join(" "),
            first_line(&String::from_utf8_lossy(&o.stderr))
        )),
        Ok(o) => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
    }
}

/// Part 5: the runtime library's size and SQLite symbols.
fn part_size(b: &mut Bench, rows: &mut Vec<Row>) -> Result<()> {
    eprintln!("procs: runtime library size");
    let lib = b.runtime.clone();
    let size = std::fs::metadata(&lib)?.len();
    let mut r = Row::new("size", format!("{}, as found", lib.display()));
    r.strobe = format!("{:.1} KiB", size as f64 / 1024.0);
    rows.push(r);

    let stripped = b.dir.join("libstrobe_runtime.stripped.so");
    std::fs::copy(&lib, &stripped)?;
    let how = match tool_output("strip", &[], &stripped) {
        Ok(_) => Ok("strip"),
        Err(why) => {
            std::fs::copy(&lib, &stripped)?;
            match tool_output("objcopy", &["--strip-all"], &stripped) {
                Ok(_) => Ok("objcopy --strip-all"),
                Err(why2) => Err(format!("{why}; {why2}")),
            }
        }
    };
    let mut r = Row::new("size", "runtime library, stripped");
    match how {
        Ok(tool) => {
            let s = std::fs::metadata(&stripped)?.len();
            r.figure = format!("runtime library, stripped ({tool})");
            r.strobe = format!("{:.1} KiB", s as f64 / 1024.0);
        }
        Err(why) => {
            r.strobe = "not measured".into();
            b.notes.push(format!("stripping the runtime: {why}"));
        }
    }
    rows.push(r);

    for (label, args) in [
        ("dynamic symbols (nm -D)", &["-D"][..]),
        ("symbol table (nm)", &[][..]),
    ] {
        let mut r = Row::new("size", format!("{label} containing \"sqlite\""));
        match tool_output("nm", args, &lib) {
            Ok(out) => {
                let total = out.lines().filter(|l| !l.trim().is_empty()).count();
                let n = out
                    .lines()
                    .filter(|l| l.to_ascii_lowercase().contains("sqlite"))
                    .count();
                r.strobe = format!("{n} of {total}");
            }
            Err(why) => {
                r.strobe = "not measured".into();
                b.notes.push(format!("{label}: {why}"));
            }
        }
        rows.push(r);
    }
    Ok(())
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
