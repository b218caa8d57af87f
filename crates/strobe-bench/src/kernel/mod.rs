//! `strobe-bench kernel`: the goals of the kernel sampling backend measured
//! side by side with `perf record --call-graph dwarf` in one run: hot-function
//! shares of oversubscribed threads against their measured CPU time, xz's
//! per-function shares against perf's, CPU totals against the program's own
//! `CLOCK_PROCESS_CPUTIME_ID`, database bytes per sample, and how soon
//! `strobe sample --pid` delivers samples of a running process.
//!
//! Owns: building its test programs and input file in a temporary
//! directory, running strobe, perf and the programs (each child in its own
//! process group, killed at `--timeout`), and printing one markdown table
//! per part. Never asserts a figure and never touches a process it did not
//! start; perf columns say why they are empty when perf cannot run here.

mod oversub;
mod xz;

use crate::overhead::{build_programs, perf_unavailable, strobe_binary};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::collections::{BTreeMap, HashMap};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use strobe_db::{Profile, SampleRow};

/// Options of `strobe-bench kernel`.
#[derive(Debug, Args)]
pub struct KernelArgs {
    /// Seconds of CPU time per worker of `oversubscribed`.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Rounds of the oversubscribed, totals and attach parts.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Size of xz's generated input, MiB.
    #[arg(long, default_value_t = 20)]
    xz_mib: usize,
    /// Parts to run (comma-separated): oversubscribed, xz, totals, size, attach.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "oversubscribed,xz,totals,size,attach"
    )]
    only: Vec<String>,
    /// Leave out `perf record -F 1000` in the oversubscribed part.
    #[arg(long)]
    no_perf_1k: bool,
    /// Seconds any one child may run before its process group is killed.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// The strobe binary (default: next to this benchmark).
    #[arg(long)]
    strobe: Option<PathBuf>,
}

/// What a child left behind.
struct Finished {
    /// None when it was killed at the timeout.
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
    wall_s: f64,
}

impl Finished {
    /// Why it failed, if it did.
    fn failure(&self, what: &str) -> Option<String> {
        match self.status {
            None => Some(format!("{what}: timed out (killed)")),
            Some(s) if !s.success() => Some(format!(
                "{what}: {s}: {}",
                self.stderr
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
            )),
            Some(_) => None,
        }
    }
}

/// Runs `cmd` in its own process group (stdin closed, stderr captured,
/// stdout captured or discarded); kills the group at `timeout`.
fn run_timed(mut cmd: Command, stdout_null: bool, timeout: Duration) -> Result<Finished> {
    cmd.stdin(Stdio::null())
        .stdout(if stdout_null {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stderr(Stdio::piped())
        .process_group(0);
    let t0 = Instant::now();
    let child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(timeout) {
        Ok(out) => Some(out),
        Err(_) => {
            // SAFETY: kill has no memory-safety preconditions; the group is
            // the one our child leads (process_group(0)) and the child is not
            // reaped yet, since its waiter has not reported.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let _ = rx.recv_timeout(Duration::from_secs(5));
            None
        }
    };
    let wall_s = t0.elapsed().as_secs_f64();
    match out {
        Some(out) => {
            let _ = waiter.join();
            let out = out.context("waiting for a child")?;
            Ok(Finished {
                status: Some(out.status),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                wall_s,
            })
        }
        None => Ok(Finished {
            status: None,
            stdout: String::new(),
            stderr: String::new(),
            wall_s,
        }),
    }
}

/// `CLOCK_MONOTONIC` in ns, the clock of the samples' timestamps.
fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer to a timespec on this stack.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Every `.db` under `dir` (symbolic links such as `latest` skipped).
fn databases(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                todo.push(e.path());
            } else if t.is_file() && e.path().extension().is_some_and(|x| x == "db") {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

fn samples_of(dbs: &[PathBuf]) -> Result<Vec<SampleRow>> {
    if dbs.is_empty() {
        bail!("no database written");
    }
    let names: Vec<String> = dbs.iter().map(|p| p.display().to_string()).collect();
    let p = Profile::open(&names)?;
    let v: Result<Vec<_>, _> = p.samples()?.collect();
    Ok(v?)
}

/// One leaf as either tool saw it: module path (None for names without
/// one), module-relative pc, and the symbol name if the tool had one.
struct Leaf<'a> {
    module: Option<&'a str>,
    rel_pc: u64,
    name: Option<&'a str>,
}

/// Names leaves the same way for strobe and perf: by the unwind-table (FDE)
/// range of the (canonical) module that holds the pc, `module+0xSTART`,
/// so that stripped libraries (liblzma) compare function by function and
/// the two symbolizers' naming does not matter; by the tool's name where
/// the module has no such range. Remembers the first name a tool gave
/// each key, for display.
#[derive(Default)]
struct Namer {
    /// Module path as recorded → canonical base name and its FDE ranges.
    modules: HashMap<String, (String, Vec<(u64, u64)>)>,
    labels: HashMap<String, String>,
}

impl Namer {
    fn module(&mut self, module: &str) -> &(String, Vec<(u64, u64)>) {
        self.modules.entry(module.to_string()).or_insert_with(|| {
            let path = std::fs::canonicalize(module).unwrap_or_else(|_| module.into());
            let base = path
                .file_name()
                .map_or_else(|| module.to_string(), |b| b.to_string_lossy().into_owned());
            let Ok(out) = Command::new("readelf")
                .arg("--debug-dump=frames")
                .arg(&path)
                .stderr(Stdio::null())
                .output()
            else {
                return (base, Vec::new());
            };
            let mut v: Vec<(u64, u64)> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| {
                    let pc = l.split("pc=").nth(1)?;
                    let (a, b) = pc.trim().split_once("..")?;
                    Some((
                        u64::from_str_radix(a, 16).ok()?,
                        u64::from_str_radix(b, 16).ok()?,
                    ))
                })
                .collect();
            v.sort_unstable();
            (base, v)
        })
    }

    fn key(&mut self, leaf: &Leaf) -> String {
        let key = match (leaf.module, leaf.name) {
            (Some(m), name) => {
                let (base, ranges) = self.module(m);
                let i = ranges.partition_point(|r| r.0 <= leaf.rel_pc);
                match i.checked_sub(1).map(|i| ranges[i]) {
                    Some((start, end)) if leaf.rel_pc < end => format!("{base}+{start:#x}"),
                    _ => match name {
                        Some(n) => n.to_string(),
                        None => format!("{base}+? (no FDE)"),
                    },
                }
            }
            (None, Some(n)) => n.to_string(),
            (None, None) => format!("{:#x}", leaf.rel_pc),
        };
        if let Some(n) = leaf.name {
            if n != key {
                self.labels
                    .entry(key.clone())
                    .or_insert_with(|| n.to_string());
            }
        }
        key
    }

    fn label(&self, key: &str) -> String {
        match self.labels.get(key) {
            Some(n) => format!("`{n}` ({key})"),
            None => format!("`{key}`"),
        }
    }
}

fn strobe_leaf(namer: &mut Namer, s: &SampleRow) -> String {
    match s.frames.first() {
        None => "(no frames)".into(),
        Some(f) => namer.key(&Leaf {
            module: f.module.as_deref(),
            rel_pc: f.rel_pc,
            name: f.function.as_deref(),
        }),
    }
}

/// The leaf's function name as strobe's symbolizer gave it.
fn strobe_leaf_name(s: &SampleRow) -> &str {
    s.frames
        .first()
        .and_then(|f| f.function.as_deref())
        .unwrap_or("")
}

/// One sample of `perf script -F tid,period,ip,sym,dso`.
struct PerfSample {
    tid: i64,
    period: u64,
    /// The first user-space frame's key (see [`Namer`]).
    leaf: String,
    /// Its symbol name as perf gave it.
    sym: String,
    /// The sample was taken in the kernel.
    in_kernel: bool,
}

fn perf_samples(namer: &mut Namer, data: &Path, timeout: Duration) -> Result<Vec<PerfSample>> {
    let mut cmd = Command::new("perf");
    cmd.args(["script", "-F", "tid,period,ip,sym,dso", "--no-inline", "-i"])
        .arg(data);
    let out = run_timed(cmd, false, timeout)?;
    if let Some(why) = out.failure("perf script") {
        bail!(why);
    }
    let mut v = Vec::new();
    for block in out.stdout.split("\n\n") {
        let mut lines = block.lines().filter(|l| !l.trim().is_empty());
        let Some(head) = lines.next() else { continue };
        let mut h = head.split_whitespace();
        let (Some(Ok(tid)), period) = (h.next().map(str::parse::<i64>), h.next()) else {
            continue;
        };
        let mut in_kernel = false;
        let mut leaf = None;
        let mut leaf_sym = String::new();
        for (i, l) in lines.enumerate() {
            let l = l.trim();
            let Some((ip, rest)) = l.split_once(' ') else {
                continue;
            };
            let (sym, dso) = match rest.rsplit_once(" (") {
                Some((s, d)) => (s.trim(), d.trim_end_matches(')')),
                None => (rest.trim(), ""),
            };
            if dso.contains("kernel.kallsyms") || dso.starts_with("[kernel") {
                in_kernel |= i == 0;
                continue;
            }
            leaf_sym = sym.to_string();
            leaf = Some(namer.key(&Leaf {
                module: (dso.starts_with('/')).then_some(dso),
                rel_pc: u64::from_str_radix(ip, 16).unwrap_or(0),
                name: (sym != "[unknown]").then_some(sym),
            }));
            break;
        }
        v.push(PerfSample {
            tid,
            period: period.and_then(|p| p.parse().ok()).unwrap_or(0),
            leaf: leaf.unwrap_or_else(|| "(kernel only)".into()),
            sym: leaf_sym,
            in_kernel,
        });
    }
    Ok(v)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn pp(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "n/a".into()
    }
}

/// Size figures of one strobe database.
struct DbSize {
    what: String,
    rows: i64,
    by_kind: BTreeMap<String, usize>,
    file_bytes: u64,
    sample_table_bytes: Option<i64>,
}

fn db_size(what: String, db: &Path, samples: &[SampleRow]) -> Result<DbSize> {
    let p = Profile::open(&[db.to_string_lossy()])?;
    let rows = p.stored_samples()? as i64;
    let sample_table_bytes = p.sample_table_bytes().ok().flatten();
    let mut by_kind = BTreeMap::new();
    for s in samples {
        *by_kind.entry(s.kind.clone()).or_default() += 1;
    }
    Ok(DbSize {
        what,
        rows,
        by_kind,
        file_bytes: std::fs::metadata(db)?.len(),
        sample_table_bytes,
    })
}

struct Bench {
    dir: PathBuf,
    strobe: PathBuf,
    timeout: Duration,
    /// Why perf cannot run here.
    no_perf: Option<String>,
    namer: Namer,
    sizes: Vec<DbSize>,
    /// perf.data bytes and samples, per configuration.
    perf_sizes: Vec<(String, u64, usize)>,
    runs: usize,
}

impl Bench {
    fn bin(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// `strobe sample -q --output-dir <fresh dir> [extra] -- program`.
    fn strobe_run(
        &mut self,
        extra: &[&str],
        program: &[String],
        stdout_null: bool,
    ) -> Result<(Finished, PathBuf)> {
        self.runs += 1;
        let out = self.dir.join(format!("out-{}", self.runs));
        let mut cmd = Command::new(&self.strobe);
        cmd.args(["sample", "-q", "--output-dir"])
            .arg(&out)
            .args(extra)
            .arg("--")
            .args(program);
        Ok((run_timed(cmd, stdout_null, self.timeout)?, out))
    }

    /// `perf record -q --call-graph dwarf,16384 -F freq -o <data> -- program`.
    fn perf_run(
        &mut self,
        freq: u32,
        program: &[String],
        stdout_null: bool,
    ) -> Result<(Finished, PathBuf)> {
        self.runs += 1;
        let data = self.dir.join(format!("perf-{}.data", self.runs));
        let mut cmd = Command::new("perf");
        cmd.args(["record", "-q", "--call-graph", "dwarf,16384", "-F"])
            .arg(freq.to_string())
            .arg("-o")
            .arg(&data)
            .arg("--")
            .args(program);
        Ok((run_timed(cmd, stdout_null, self.timeout)?, data))
    }
}

fn totals(b: &mut Bench, args: &KernelArgs) -> Result<()> {
    println!("\n### 3. totals: `two_equal_threads` (main thread and one worker, 1 s CPU each), sum of CPU-sample weights vs its own CLOCK_PROCESS_CPUTIME_ID\n");
    println!("| configuration | round | CPU samples | sum of weights, ms | process CPU, ms | error % |\n|---|---|---|---|---|---|");
    let program = vec![b.bin("two_equal_threads")];
    for round in 0..args.rounds {
        for (name, extra) in [
            ("strobe default (auto)", &[][..]),
            ("strobe --sampler kernel", &["--sampler", "kernel"][..]),
        ] {
            let (f, out) = b.strobe_run(extra, &program, true)?;
            if let Some(why) = f.failure(name) {
                println!("| {name} | {} | — | — | — | {why} |", round + 1);
                continue;
            }
            let truth: Option<f64> = f
                .stderr
                .lines()
                .find_map(|l| l.strip_prefix("process_cpu_ns ")?.trim().parse().ok());
            let dbs = databases(&out);
            let all = samples_of(&dbs)?;
            if round == 0 {
                b.sizes.push(db_size(
                    format!("two_equal_threads, {name}"),
                    &dbs[0],
                    &all,
                )?);
            }
            let cpu: Vec<&SampleRow> = all.iter().filter(|s| s.is_cpu()).collect();
            let sum: f64 = cpu.iter().map(|s| s.weight_ns as f64).sum();
            let (t, e) = match truth {
                Some(t) => (
                    format!("{:.1}", t / 1e6),
                    format!("{:+.2}", (sum / t - 1.0) * 100.0),
                ),
                None => ("no process_cpu_ns line".into(), "—".into()),
            };
            println!(
                "| {name} | {} | {} | {:.1} | {t} | {e} |",
                round + 1,
                cpu.len(),
                sum / 1e6
            );
            let _ = std::fs::remove_dir_all(&out);
        }
    }
    Ok(())
}

fn size(b: &Bench) {
    println!("\n### 4. database bytes per sample (first round's databases)\n");
    println!("| source | rows (samples by kind) | file bytes | file bytes / row | `rocpd_sample` bytes (dbstat) | `rocpd_sample` bytes / row |\n|---|---|---|---|---|---|");
    for s in &b.sizes {
        let kinds: Vec<String> = s.by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let (t, per) = match s.sample_table_bytes {
            Some(t) => (t.to_string(), format!("{:.1}", t as f64 / s.rows as f64)),
            None => ("dbstat unavailable".into(), "—".into()),
        };
        println!(
            "| {} | {} ({}) | {} | {:.1} | {t} | {per} |",
            s.what,
            s.rows,
            kinds.join(", "),
            s.file_bytes,
            s.file_bytes as f64 / s.rows as f64
        );
    }
    if let Some(why) = &b.no_perf {
        println!("| perf.data | perf unavailable: {why} | | | | |");
    }
    for (what, bytes, n) in &b.perf_sizes {
        println!(
            "| {what} | {n} samples | {bytes} | {:.1} | — | — |",
            *bytes as f64 / *n as f64
        );
    }
}

fn attach(b: &mut Bench, args: &KernelArgs) -> Result<()> {
    println!("\n### 5. attach: `strobe sample -q --pid PID --duration 1s` on a running `spin`\n");
    println!("| round | strobe start → first sample, ms | CPU samples | strobe exit | strobe wall s | target running afterwards |\n|---|---|---|---|---|---|");
    for round in 0..args.rounds {
        let mut target = Command::new(b.bin("spin"))
            .arg("60")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting spin")?;
        std::thread::sleep(Duration::from_millis(300));
        b.runs += 1;
        let out = b.dir.join(format!("out-{}", b.runs));
        let mut cmd = Command::new(&b.strobe);
        cmd.args(["sample", "-q", "--output-dir"]).arg(&out).args([
            "--pid",
            &target.id().to_string(),
            "--duration",
            "1s",
        ]);
        let t0 = monotonic_ns();
        let f = run_timed(cmd, true, b.timeout);
        let running = matches!(target.try_wait(), Ok(None));
        let _ = target.kill();
        let _ = target.wait();
        let f = f?;
        let exit = match f.failure("strobe") {
            Some(why) => why,
            None => "0".into(),
        };
        let (first, n) = match samples_of(&databases(&out)) {
            Ok(all) => {
                let cpu: Vec<&SampleRow> = all.iter().filter(|s| s.is_cpu()).collect();
                let first = cpu.iter().map(|s| s.timestamp).min();
                (
                    first.map_or("no samples".into(), |t| {
                        format!("{:.1}", (t - t0) as f64 / 1e6)
                    }),
                    cpu.len(),
                )
            }
            Err(e) => (format!("no samples: {e}"), 0),
        };
        println!(
            "| {} | {first} | {n} | {exit} | {:.2} | {} |",
            round + 1,
            f.wall_s,
            if running { "yes" } else { "no" }
        );
        let _ = std::fs::remove_dir_all(&out);
    }
    Ok(())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Runs the benchmark.
pub fn run(args: &KernelArgs) -> Result<()> {
    let dir = tempfile::tempdir()?;
    build_programs(dir.path(), &["oversubscribed", "two_equal_threads", "spin"])?;
    let strobe = strobe_binary(args.strobe.as_deref())?;
    let no_perf = perf_unavailable(dir.path());
    let t0 = Instant::now();
    println!(
        "strobe-bench kernel: {} CPUs, load average {} at start; perf: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        loadavg(),
        no_perf.as_deref().unwrap_or("available")
    );
    let mut b = Bench {
        dir: dir.path().to_path_buf(),
        strobe,
        timeout: Duration::from_secs(args.timeout.max(1)),
        no_perf,
        namer: Namer::default(),
        sizes: Vec::new(),
        perf_sizes: Vec::new(),
        runs: 0,
    };
    let want = |p: &str| args.only.iter().any(|o| o == p);
    for p in &args.only {
        if !["oversubscribed", "xz", "totals", "size", "attach"].contains(&p.as_str()) {
            bail!("unknown part {p:?} (oversubscribed, xz, totals, size, attach)");
        }
    }
    if want("oversubscribed") || want("size") {
        oversub::oversubscribed(&mut b, args)?;
    }
    if want("xz") {
        xz::xz(&mut b, args)?;
    }
    if want("totals") || want("size") {
        totals(&mut b, args)?;
    }
    if want("size") {
        size(&b);
    }
    if want("attach") {
        attach(&mut b, args)?;
    }
    println!(
        "\ntook {:.0} s; load average {} at the end",
        t0.elapsed().as_secs_f64(),
        loadavg()
    );
    Ok(())
}
