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

use crate::overhead::{build_programs, perf_unavailable, strobe_binary};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
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
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let rows: i64 = conn.query_row("SELECT COUNT(*) FROM rocpd_sample", [], |r| r.get(0))?;
    let sample_table_bytes = conn
        .query_row(
            "SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'rocpd_sample%'",
            [],
            |r| r.get::<_, Option<i64>>(0),
        )
        .ok()
        .flatten();
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

/// hot_a / (hot_a + hot_b) per thread: weighted and counted.
#[derive(Default, Clone, Copy)]
struct Split {
    /// Weight of every CPU sample of the thread, whatever its leaf.
    all_w: f64,
    a_w: f64,
    b_w: f64,
    a_n: f64,
    b_n: f64,
}

impl Split {
    fn add(&mut self, leaf: &str, w: f64) {
        self.all_w += w;
        match leaf {
            "hot_a" => {
                self.a_w += w;
                self.a_n += 1.0;
            }
            "hot_b" => {
                self.b_w += w;
                self.b_n += 1.0;
            }
            _ => {}
        }
    }
    fn weighted(&self) -> f64 {
        100.0 * self.a_w / (self.a_w + self.b_w)
    }
    fn counted(&self) -> f64 {
        100.0 * self.a_n / (self.a_n + self.b_n)
    }
}

/// The workers' `truth` lines: (tid, hot_a % of hot_a + hot_b, their ns),
/// by share.
fn truths(stderr: &str) -> Vec<(i64, f64, f64)> {
    let mut v: Vec<(i64, f64, f64)> = stderr
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.strip_prefix("truth ")?.split(' ').collect();
            let a: f64 = f.get(1)?.parse().ok()?;
            let b: f64 = f.get(2)?.parse().ok()?;
            Some((f[0].parse().ok()?, 100.0 * a / (a + b), a + b))
        })
        .collect();
    v.sort_by(|x, y| x.1.total_cmp(&y.1));
    v
}

/// The configurations of part 1 and their per-round worst errors.
struct Oversub {
    names: Vec<String>,
    worst: Vec<Vec<f64>>,
    /// Weight in hot_a + hot_b over their measured CPU time, % (weighted rows).
    accounted: Vec<Vec<f64>>,
    /// The workers' whole CPU weight over the same, %.
    accounted_all: Vec<Vec<f64>>,
    notes: Vec<String>,
}

fn oversubscribed(b: &mut Bench, args: &KernelArgs) -> Result<()> {
    let program = vec![b.bin("oversubscribed"), args.seconds.to_string()];
    let mut perf_freqs = vec![250];
    if !args.no_perf_1k {
        perf_freqs.push(1000);
    }
    let mut o = Oversub {
        names: vec![
            "strobe default (auto), weighted".into(),
            "strobe default (auto), counted".into(),
            "strobe --sampler kernel, weighted".into(),
            "strobe --sampler kernel, counted".into(),
        ],
        worst: vec![Vec::new(); 4],
        accounted: vec![Vec::new(); 4],
        accounted_all: vec![Vec::new(); 4],
        notes: Vec::new(),
    };
    for f in &perf_freqs {
        o.names
            .push(format!("perf --call-graph dwarf,16384 -F {f}, counted"));
        o.names.push(format!(
            "perf --call-graph dwarf,16384 -F {f}, weighted by period"
        ));
        o.worst.push(Vec::new());
        o.worst.push(Vec::new());
        o.accounted.push(Vec::new());
        o.accounted.push(Vec::new());
        o.accounted_all.push(Vec::new());
        o.accounted_all.push(Vec::new());
    }
    let mut detail = Vec::new();
    for round in 0..args.rounds {
        // (truth per worker, splits per configuration)
        #[allow(clippy::type_complexity)]
        let mut cols: Vec<Option<(Vec<(i64, f64, f64)>, HashMap<i64, Split>)>> = Vec::new();
        for (i, extra) in [&[][..], &["--sampler", "kernel"][..]].iter().enumerate() {
            let (f, out) = b.strobe_run(extra, &program, true)?;
            if let Some(why) = f.failure(&o.names[2 * i]) {
                o.notes.push(format!("round {}: {why}", round + 1));
                cols.push(None);
                continue;
            }
            let dbs = databases(&out);
            let all = samples_of(&dbs)?;
            if round == 0 {
                let what = format!(
                    "oversubscribed {} s × 4 workers, {}",
                    args.seconds,
                    if i == 0 {
                        "default (auto)"
                    } else {
                        "--sampler kernel"
                    }
                );
                b.sizes.push(db_size(what, &dbs[0], &all)?);
            }
            let mut by_tid: HashMap<i64, Split> = HashMap::new();
            for s in all.iter().filter(|s| s.is_cpu()) {
                by_tid
                    .entry(s.tid)
                    .or_default()
                    .add(strobe_leaf_name(s), s.weight_ns as f64);
            }
            cols.push(Some((truths(&f.stderr), by_tid)));
            let _ = std::fs::remove_dir_all(&out);
        }
        for &freq in &perf_freqs {
            if b.no_perf.is_some() {
                cols.push(None);
                continue;
            }
            let (f, data) = b.perf_run(freq, &program, true)?;
            if let Some(why) = f.failure(&format!("perf -F {freq}")) {
                o.notes.push(format!("round {}: {why}", round + 1));
                cols.push(None);
                continue;
            }
            let ps = perf_samples(&mut b.namer, &data, b.timeout)?;
            if round == 0 {
                let bytes = std::fs::metadata(&data).map(|m| m.len()).unwrap_or(0);
                b.perf_sizes.push((
                    format!("perf.data, oversubscribed, dwarf,16384 -F {freq}"),
                    bytes,
                    ps.len(),
                ));
            }
            let _ = std::fs::remove_file(&data);
            let mut by_tid: HashMap<i64, Split> = HashMap::new();
            for s in &ps {
                by_tid
                    .entry(s.tid)
                    .or_default()
                    .add(&s.sym, s.period as f64);
            }
            cols.push(Some((truths(&f.stderr), by_tid)));
        }
        // Worst errors: column c gives configurations 2c (weighted) and 2c+1 (counted);
        // perf's counted comes first in its pair.
        for (c, col) in cols.iter().enumerate() {
            let (wi, ni) = if c < 2 {
                (2 * c, 2 * c + 1)
            } else {
                (2 * c + 1, 2 * c)
            };
            let Some((truth, by_tid)) = col else {
                o.worst[wi].push(f64::NAN);
                o.worst[ni].push(f64::NAN);
                o.accounted[wi].push(f64::NAN);
                o.accounted[ni].push(f64::NAN);
                o.accounted_all[wi].push(f64::NAN);
                o.accounted_all[ni].push(f64::NAN);
                continue;
            };
            let (mut ww, mut wn) = (0.0f64, 0.0f64);
            if truth.len() != 4 {
                ww = f64::INFINITY;
                wn = f64::INFINITY;
            }
            let (mut weight, mut all, mut ns) = (0.0, 0.0, 0.0);
            for (tid, t, t_ns) in truth {
                let s = by_tid.get(tid).copied().unwrap_or_default();
                weight += s.a_w + s.b_w;
                all += s.all_w;
                ns += t_ns;
                let (ew, en) = ((s.weighted() - t).abs(), (s.counted() - t).abs());
                ww = if ew.is_nan() {
                    f64::INFINITY
                } else {
                    ww.max(ew)
                };
                wn = if en.is_nan() {
                    f64::INFINITY
                } else {
                    wn.max(en)
                };
            }
            o.worst[wi].push(ww);
            o.worst[ni].push(wn);
            o.accounted[wi].push(100.0 * weight / ns);
            o.accounted[ni].push(f64::NAN);
            o.accounted_all[wi].push(100.0 * all / ns);
            o.accounted_all[ni].push(f64::NAN);
        }
        detail.push(cols);
    }

    println!(
        "\n### 1. oversubscribed: hot_a share per worker (4 workers, 2 cores, {} s CPU each)\n",
        args.seconds
    );
    let mut head = "| round | target | truth % | strobe default weighted | counted | strobe kernel weighted | counted |".to_string();
    let mut rule = "|---|---|---|---|---|---|---|".to_string();
    for f in &perf_freqs {
        head.push_str(&format!(" perf -F {f} counted | weighted |"));
        rule.push_str("---|---|");
    }
    println!("{head}\n{rule}");
    for (round, cols) in detail.iter().enumerate() {
        // Truth from the first configuration that ran; each run has its own tids,
        // so rows follow the worker order (by true share).
        for w in 0..4 {
            let mut truth_cell = String::new();
            let mut cells = Vec::new();
            for (c, col) in cols.iter().enumerate() {
                let Some((truth, by_tid)) = col else {
                    cells.push("—".to_string());
                    cells.push("—".to_string());
                    continue;
                };
                let Some(&(tid, t, _)) = truth.get(w) else {
                    cells.push("no truth".into());
                    cells.push("no truth".into());
                    continue;
                };
                if truth_cell.is_empty() {
                    truth_cell = format!("{t:.2}");
                }
                let s = by_tid.get(&tid).copied().unwrap_or_default();
                let cell = |v: f64| {
                    if v.is_finite() {
                        format!("{v:.2} ({:+.2})", v - t)
                    } else {
                        "no samples".into()
                    }
                };
                let (w, n) = (cell(s.weighted()), cell(s.counted()));
                if c < 2 {
                    cells.push(w);
                    cells.push(n);
                } else {
                    cells.push(n);
                    cells.push(w);
                }
            }
            println!(
                "| {} | {}% | {} | {} |",
                round + 1,
                20 * (w + 1),
                truth_cell,
                cells.join(" | ")
            );
        }
    }
    println!("\nWorst error per configuration, percentage points (|share − truth| over the 4 workers):\n");
    let mut head = "| configuration |".to_string();
    let mut rule = "|---|".to_string();
    for r in 0..args.rounds {
        head.push_str(&format!(" round {} |", r + 1));
        rule.push_str("---|");
    }
    println!("{head} median | weight in hot_a + hot_b / their measured CPU time, median % | the workers' whole CPU weight / the same, median % |\n{rule}---|---|---|");
    for (((name, worst), acct), all) in o
        .names
        .iter()
        .zip(&o.worst)
        .zip(&o.accounted)
        .zip(&o.accounted_all)
    {
        let cells: Vec<String> = worst.iter().map(|w| pp(*w)).collect();
        let med = if worst.iter().any(|w| w.is_nan()) {
            if let Some(why) = &b.no_perf {
                format!("perf unavailable: {why}")
            } else {
                "n/a".into()
            }
        } else {
            pp(median(worst))
        };
        let pct = |v: &Vec<f64>| {
            if v.iter().all(|a| a.is_nan()) {
                "—".to_string()
            } else {
                format!("{:.1}", median(v))
            }
        };
        println!(
            "| {name} | {} | {med} | {} | {} |",
            cells.join(" | "),
            pct(acct),
            pct(all)
        );
    }
    for n in &o.notes {
        println!("\nnote: {n}");
    }
    Ok(())
}

/// A deterministic ~`mib` MiB text of pseudo-random words: compressible,
/// but not trivially.
fn write_words(path: &Path, mib: usize) -> Result<()> {
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let words: Vec<Vec<u8>> = (0..5000)
        .map(|_| {
            let len = 2 + (next() % 9) as usize;
            (0..len).map(|_| b'a' + (next() % 26) as u8).collect()
        })
        .collect();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut n = 0;
    while n < mib << 20 {
        for i in 0..12 {
            let w = &words[(next() % words.len() as u64) as usize];
            f.write_all(w)?;
            f.write_all(if i == 11 { b"\n" } else { b" " })?;
            n += w.len() + 1;
        }
    }
    f.flush()?;
    Ok(())
}

/// Leaf and thread figures of one configuration of the xz part.
struct XzCol {
    name: &'static str,
    leaves: HashMap<String, f64>,
    threads: BTreeMap<i64, f64>,
    wall_s: Option<f64>,
    note: String,
}

impl XzCol {
    fn new(name: &'static str) -> XzCol {
        XzCol {
            name,
            leaves: HashMap::new(),
            threads: BTreeMap::new(),
            wall_s: None,
            note: String::new(),
        }
    }

    fn share(&self, leaf: &str) -> f64 {
        let total: f64 = self.leaves.values().sum();
        100.0 * self.leaves.get(leaf).copied().unwrap_or(0.0) / total
    }

    fn top8(&self) -> Vec<String> {
        let mut v: Vec<(&String, &f64)> = self.leaves.iter().collect();
        v.sort_by(|x, y| y.1.total_cmp(x.1).then(x.0.cmp(y.0)));
        v.into_iter().take(8).map(|(k, _)| k.clone()).collect()
    }

    /// The largest |share − reference share| over both top-8 lists.
    fn max_diff(&self, reference: &XzCol, namer: &Namer) -> String {
        let mut over = self.top8();
        over.extend(reference.top8());
        let (mut worst, mut at) = (0.0f64, String::new());
        for l in over {
            let d = (self.share(&l) - reference.share(&l)).abs();
            if d > worst {
                worst = d;
                at = l;
            }
        }
        format!("{worst:.2} ({})", namer.label(&at))
    }
}

fn xz(b: &mut Bench, args: &KernelArgs) -> Result<()> {
    let input = b.dir.join("words.txt");
    write_words(&input, args.xz_mib)?;
    let program: Vec<String> = [
        "xz",
        "-9",
        "-T2",
        "--block-size=3MiB",
        "-c",
        input.to_str().context("temp path")?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    println!(
        "\n### 2. xz: `xz -9 -T2 --block-size=3MiB -c FILE > /dev/null`, {} MiB of pseudo-random words\n",
        args.xz_mib
    );
    let mut cols: Vec<XzCol> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for (name, extra) in [
        ("strobe default (auto)", &[][..]),
        ("strobe --sampler kernel", &["--sampler", "kernel"][..]),
    ] {
        let (f, out) = b.strobe_run(extra, &program, true)?;
        if let Some(why) = f.failure(name) {
            failures.push(why);
            continue;
        }
        let all = samples_of(&databases(&out))?;
        let mut c = XzCol::new(name);
        c.wall_s = Some(f.wall_s);
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for s in &all {
            *kinds.entry(s.kind.as_str()).or_default() += 1;
            if !s.is_cpu() {
                continue;
            }
            let w = s.weight_ns as f64;
            *c.leaves.entry(strobe_leaf(&mut b.namer, s)).or_default() += w;
            *c.threads.entry(s.tid).or_default() += w;
        }
        c.note = kinds
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ");
        let handed = f
            .stderr
            .lines()
            .filter(|l| l.contains("sampled by the kernel from then on"))
            .count();
        if handed > 0 {
            c.note
                .push_str(&format!("; {handed} thread(s) handed to the kernel"));
        }
        cols.push(c);
        let _ = std::fs::remove_dir_all(&out);
    }
    let mut perf_index = None;
    if let Some(why) = &b.no_perf {
        failures.push(format!("perf unavailable: {why}"));
    } else {
        let (f, data) = b.perf_run(250, &program, true)?;
        if let Some(why) = f.failure("perf") {
            failures.push(why);
        } else {
            let ps = perf_samples(&mut b.namer, &data, b.timeout)?;
            let bytes = std::fs::metadata(&data).map(|m| m.len()).unwrap_or(0);
            b.perf_sizes
                .push(("perf.data, xz, dwarf,16384 -F 250".into(), bytes, ps.len()));
            let _ = std::fs::remove_file(&data);
            let mut all = XzCol::new("perf dwarf -F 250, counted");
            let mut user = XzCol::new("perf, user-mode samples only");
            all.wall_s = Some(f.wall_s);
            let kernel = ps.iter().filter(|s| s.in_kernel).count();
            for s in &ps {
                for c in [&mut all, &mut user] {
                    if c.name.contains("user-mode") && s.in_kernel {
                        continue;
                    }
                    *c.leaves.entry(s.leaf.clone()).or_default() += 1.0;
                    *c.threads.entry(s.tid).or_default() += 1.0;
                }
            }
            all.note = format!(
                "{} samples, {:.1}% taken in the kernel (counted at their first user frame)",
                ps.len(),
                100.0 * kernel as f64 / ps.len().max(1) as f64
            );
            user.note = format!("{} samples", ps.len() - kernel);
            perf_index = Some(cols.len());
            cols.push(all);
            cols.push(user);
        }
    }
    let mut rows: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    for c in cols.iter().rev() {
        for l in c.top8() {
            if seen.insert(l.clone()) {
                rows.push(l);
            }
        }
    }
    let reference = perf_index.map(|i| &cols[i]);
    if let Some(p) = reference {
        rows.sort_by(|x, y| p.share(y).total_cmp(&p.share(x)));
    }
    let names: Vec<&str> = cols.iter().map(|c| c.name).collect();
    println!(
        "| leaf function (unwind-table range) | {} |\n|---|{}",
        names.join(" % | ") + " %",
        "---|".repeat(cols.len())
    );
    for r in &rows {
        let cells: Vec<String> = cols.iter().map(|c| format!("{:.2}", c.share(r))).collect();
        println!("| {} | {} |", b.namer.label(r), cells.join(" | "));
    }
    println!(
        "\n| configuration | threads with CPU samples (share of CPU) | max abs share difference vs perf, pp (its and perf's top 8) | same vs perf's user-mode samples | wall s | notes |\n|---|---|---|---|---|---|"
    );
    let user_ref = perf_index.map(|i| &cols[i + 1]);
    for (i, c) in cols.iter().enumerate() {
        let total: f64 = c.threads.values().sum();
        let threads: Vec<String> = c
            .threads
            .iter()
            .map(|(t, w)| format!("{t}: {:.1}%", 100.0 * w / total))
            .collect();
        let (d_all, d_user) = match (reference, user_ref) {
            (Some(p), Some(u)) if Some(i) < perf_index => {
                (c.max_diff(p, &b.namer), c.max_diff(u, &b.namer))
            }
            (Some(_), _) => ("(reference)".into(), "(reference)".into()),
            _ => {
                let why = format!(
                    "perf unavailable: {}",
                    b.no_perf.as_deref().unwrap_or("it failed")
                );
                (why.clone(), why)
            }
        };
        println!(
            "| {} | {} ({}) | {d_all} | {d_user} | {} | {} |",
            c.name,
            c.threads.len(),
            threads.join(", "),
            c.wall_s.map_or("—".into(), |w| format!("{w:.2}")),
            c.note
        );
    }
    for f in &failures {
        println!("\nnote: {f}");
    }
    Ok(())
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
        oversubscribed(&mut b, args)?;
    }
    if want("xz") {
        xz(&mut b, args)?;
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
