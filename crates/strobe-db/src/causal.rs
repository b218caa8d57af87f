//! Causal-profiling results: reading experiments back and computing Coz's
//! speedup curves from them.
//!
//! Owns loading the causal tables (`strobe_causal_experiment`,
//! `strobe_causal_progress`, `strobe_causal_sample`) of one or many
//! databases, pooled across processes, configuration variants and runs
//! ([`load`]); the program-speedup math of Coz's viewer, baselines,
//! bootstrap confidence intervals, the impact slope and the ranking
//! ([`analyze`]); and Coz's `profile.coz` text ([`write_coz_profile`]). It
//! never prints, never opens a file for writing (the caller hands it a
//! writer) and never modifies an input. `docs/causal-report.md` explains
//! the math.
//!
//! The math, per selection (a line or function that experiments virtually
//! sped up) and progress point, for the experiments at one virtual speedup
//! `s`:
//!
//! - throughput: period(s) = Σ duration / Σ visits (time per visit);
//! - latency: Coz's viewer applies Little's law: the mean number in flight
//!   (`difference`, averaged over the experiments weighted by their
//!   duration) divided by the arrival rate (Σ arrivals / Σ duration), which
//!   is Σ (in_flight × duration) / Σ arrivals;
//! - end-to-end: period(s) = the mean effective run duration.
//!
//! Program speedup(s) = (period(0) − period(s)) / period(0), positive when
//! the period (or latency) shrinks. period(0) comes from the selection's own
//! 0% experiments, or, when it has none, from every 0% experiment that
//! measured the progress point (Coz interleaves 0% controls).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use crate::error::{Result, SqlContext};
use crate::inputs::{check_file, expand_inputs, open_read_only};
use crate::schema::{self, CAUSAL_EXPERIMENT_TABLE, CAUSAL_PROGRESS_TABLE, CAUSAL_SAMPLE_TABLE};
use crate::writer::{CausalExperiment, CausalProgress, ProgressKind};

/// The causal data of one process (one table suffix of one file).
#[derive(Debug, Clone)]
pub struct CausalProcess {
    /// The database file it was read from.
    pub file: PathBuf,
    /// The process guid.
    pub guid: String,
    /// The OS pid.
    pub pid: i64,
    /// Process start (`CLOCK_MONOTONIC` ns), if recorded.
    pub start_ns: Option<i64>,
    /// Process end (`CLOCK_MONOTONIC` ns), if recorded (NULL for a killed
    /// process).
    pub end_ns: Option<i64>,
    /// Its experiments in the order they were written.
    pub experiments: Vec<CausalExperiment>,
    /// In-scope samples per location, summed, most first.
    pub samples: Vec<(String, u64)>,
}

/// The causal data of many databases, pooled.
#[derive(Debug, Clone, Default)]
pub struct CausalData {
    /// Every file read (those without causal tables included).
    pub files: Vec<PathBuf>,
    /// The processes holding experiments or in-scope samples, in file and
    /// suffix order.
    pub processes: Vec<CausalProcess>,
}

impl CausalData {
    /// Every experiment of every process.
    pub fn experiments(&self) -> impl Iterator<Item = &CausalExperiment> + '_ {
        self.processes.iter().flat_map(|p| p.experiments.iter())
    }

    /// Number of experiments, all processes together.
    pub fn experiment_count(&self) -> usize {
        self.processes.iter().map(|p| p.experiments.len()).sum()
    }

    /// The distinct progress points measured (name and kind), sorted.
    pub fn progress_points(&self) -> Vec<(String, ProgressKind)> {
        let set: std::collections::BTreeSet<(String, ProgressKind)> = self
            .experiments()
            .flat_map(|e| e.progress.iter().map(|p| (p.name.clone(), p.kind)))
            .collect();
        set.into_iter().collect()
    }
}

/// Reads the causal data of inputs (files, directories searched
/// recursively for `*.db`, globs; see [`crate::inputs::expand_inputs`]).
/// Every file is checked as a profile first; files without causal tables
/// (written before them, or by `strobe sample`) contribute nothing.
pub fn load<S: AsRef<str>>(inputs: &[S]) -> Result<CausalData> {
    load_files(&expand_inputs(inputs)?)
}

/// Reads the causal data of an explicit list of database files.
pub fn load_files(files: &[PathBuf]) -> Result<CausalData> {
    let mut data = CausalData {
        files: files.to_vec(),
        processes: Vec::new(),
    };
    for f in files {
        let suffixes = check_file(f)?;
        let conn = open_read_only(f)?;
        for s in &suffixes {
            if let Some(p) = load_process(&conn, f, s)? {
                data.processes.push(p);
            }
        }
    }
    Ok(data)
}

/// The causal data of suffix `s` of the file `path` (open as `conn`), or
/// `None` when it holds no experiment and no in-scope sample.
fn load_process(conn: &Connection, path: &Path, s: &str) -> Result<Option<CausalProcess>> {
    let has = |t: &str| schema::has_table(conn, "main", &format!("{t}{s}")).at(path);
    let mut experiments = Vec::new();
    if has(CAUSAL_EXPERIMENT_TABLE)? {
        let mut progress: HashMap<i64, Vec<CausalProgress>> = HashMap::new();
        if has(CAUSAL_PROGRESS_TABLE)? {
            let mut st = conn
                .prepare(&format!(
                    "SELECT experiment, name, kind, visits, departures, in_flight FROM \"{CAUSAL_PROGRESS_TABLE}{s}\" ORDER BY id"
                ))
                .at(path)?;
            let rows = st
                .query_map([], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, i64>(5)?,
                    ))
                })
                .at(path)?;
            for row in rows {
                let (experiment, name, kind, visits, departures, in_flight) = row.at(path)?;
                // A kind this strobe does not know (written by a newer one)
                // is left out rather than misread.
                let Some(kind) = ProgressKind::from_name(&kind) else {
                    continue;
                };
                progress
                    .entry(experiment)
                    .or_default()
                    .push(CausalProgress {
                        name,
                        kind,
                        visits: visits.max(0) as u64,
                        departures: departures.max(0) as u64,
                        in_flight,
                    });
            }
        }
        let mut st = conn
            .prepare(&format!(
                "SELECT id, variant, mode, selection, file, line, function, speedup, start_ns, duration_ns, delay_ns, selected_samples, period_ns FROM \"{CAUSAL_EXPERIMENT_TABLE}{s}\" ORDER BY id"
            ))
            .at(path)?;
        let rows = st
            .query_map([], |r| {
                let u = |k: usize| r.get::<_, i64>(k).map(|v| v.max(0) as u64);
                Ok((
                    r.get::<_, i64>(0)?,
                    CausalExperiment {
                        variant: r.get(1)?,
                        mode: r.get(2)?,
                        selection: r.get(3)?,
                        file: r.get(4)?,
                        line: r
                            .get::<_, Option<i64>>(5)?
                            .and_then(|l| u32::try_from(l).ok()),
                        function: r.get(6)?,
                        speedup: r.get(7)?,
                        start_ns: u(8)?,
                        duration_ns: u(9)?,
                        delay_ns: u(10)?,
                        selected_samples: u(11)?,
                        period_ns: u(12)?,
                        progress: Vec::new(),
                    },
                ))
            })
            .at(path)?;
        for row in rows {
            let (id, mut e) = row.at(path)?;
            e.progress = progress.remove(&id).unwrap_or_default();
            experiments.push(e);
        }
    }
    let mut samples = Vec::new();
    if has(CAUSAL_SAMPLE_TABLE)? {
        let mut st = conn
            .prepare(&format!(
                "SELECT location, SUM(count) FROM \"{CAUSAL_SAMPLE_TABLE}{s}\" GROUP BY location ORDER BY SUM(count) DESC, location"
            ))
            .at(path)?;
        let rows = st
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as u64))
            })
            .at(path)?;
        for row in rows {
            samples.push(row.at(path)?);
        }
    }
    if experiments.is_empty() && samples.is_empty() {
        return Ok(None);
    }
    let (pid, start_ns, end_ns) = conn
        .query_row(
            &format!(
                "SELECT pid, start, \"end\" FROM \"rocpd_info_process{s}\" ORDER BY id LIMIT 1"
            ),
            [],
            |r| Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get(2)?)),
        )
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok((0, None, None)),
            e => Err(e),
        })
        .at(path)?;
    Ok(Some(CausalProcess {
        file: path.to_path_buf(),
        guid: crate::identity::guid_from_suffix(s),
        pid,
        start_ns,
        end_ns,
        experiments,
        samples,
    }))
}

/// How [`analyze`] computes.
#[derive(Debug, Clone)]
pub struct AnalysisOptions {
    /// Only this progress point (by name); `None` for all.
    pub progress: Option<String>,
    /// Bootstrap resamples per interval (default 1000); 0 gives every
    /// interval zero width.
    pub resamples: usize,
    /// Seed of the bootstrap's generator: the same data and seed give the
    /// same intervals.
    pub seed: u64,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        AnalysisOptions {
            progress: None,
            resamples: 1000,
            seed: 0x5EED_C0DE_CA05_A11E,
        }
    }
}

/// Where a curve's period(0) comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// The selection's own 0% experiments.
    Own,
    /// Every 0% experiment that measured the progress point, pooled (the
    /// selection has none of its own).
    Pooled,
}

/// One point of a speedup curve: the experiments of one selection at one
/// virtual speedup, for one progress point.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint {
    /// Virtual (line or function) speedup, 0.0 to 1.0.
    pub speedup: f64,
    /// Program speedup: (period(0) − period(s)) / period(0); 0 at the
    /// baseline.
    pub program_speedup: f64,
    /// Lower end of the 95% bootstrap interval of `program_speedup`.
    pub ci_low: f64,
    /// Upper end of that interval.
    pub ci_high: f64,
    /// Experiments pooled into this point (at 0%: those of the baseline).
    pub experiments: usize,
    /// The period (ns per visit; latency in ns for a latency point; run
    /// duration for end-to-end) at this speedup.
    pub period_ns: f64,
}

/// The speedup curve of one selection for one progress point.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// What was virtually sped up (`file:line` or a function name).
    pub selection: String,
    /// The selection's source file, when some experiment knew it.
    pub file: Option<String>,
    /// The selection's line, when some experiment knew it.
    pub line: Option<u32>,
    /// The selection's function, when some experiment knew it.
    pub function: Option<String>,
    /// The progress point.
    pub progress: String,
    /// Its kind.
    pub kind: ProgressKind,
    /// Where period(0) comes from.
    pub baseline: Baseline,
    /// The points, by speedup, the first at 0% (the baseline).
    pub points: Vec<CurvePoint>,
    /// Impact: least-squares slope of program speedup over virtual speedup,
    /// through the origin (0.5: making the selection 10% faster makes the
    /// program 5% faster).
    pub slope: f64,
    /// Lower end of the 95% bootstrap interval of `slope`.
    pub slope_low: f64,
    /// Upper end of that interval.
    pub slope_high: f64,
    /// Experiments of this selection that measured the point (its own 0%
    /// ones included, the pooled baseline not).
    pub experiments: usize,
    /// Samples that fell in the selection during those experiments.
    pub selected_samples: u64,
}

impl Curve {
    /// Number of distinct non-zero speedups with a valid point.
    pub fn nonzero_speedups(&self) -> usize {
        self.points.iter().filter(|p| p.speedup > 0.0).count()
    }

    /// The point at the largest speedup measured.
    pub fn at_largest(&self) -> Option<&CurvePoint> {
        self.points.last()
    }
}

/// What [`analyze`] found.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// Curves with at least 2 distinct non-zero speedups, highest slope
    /// first.
    pub curves: Vec<Curve>,
    /// (selection, progress point) pairs left out for having fewer than 2
    /// distinct non-zero speedups, or no valid baseline.
    pub left_out: usize,
}

/// Speedups are grouped on a 1e-4 grid (so 0.15 and 0.15000000000000002
/// are one group).
fn speedup_key(s: f64) -> i64 {
    (s * 10_000.0).round() as i64
}

fn key_speedup(k: i64) -> f64 {
    k as f64 / 10_000.0
}

/// What one experiment measured at one progress point, as the math needs it.
#[derive(Debug, Clone, Copy)]
struct Measure {
    duration: f64,
    visits: f64,
    in_flight: f64,
}

/// period over pooled experiments (see the module documentation); `None`
/// when undefined (no visits, no arrivals, no experiment).
fn period(kind: ProgressKind, ms: &[Measure]) -> Option<f64> {
    if ms.is_empty() {
        return None;
    }
    let p = match kind {
        ProgressKind::Throughput => {
            let v: f64 = ms.iter().map(|m| m.visits).sum();
            ms.iter().map(|m| m.duration).sum::<f64>() / v
        }
        ProgressKind::Latency => {
            let arrivals: f64 = ms.iter().map(|m| m.visits).sum();
            ms.iter().map(|m| m.in_flight * m.duration).sum::<f64>() / arrivals
        }
        ProgressKind::EndToEnd => ms.iter().map(|m| m.duration).sum::<f64>() / ms.len() as f64,
    };
    p.is_finite().then_some(p)
}

/// Program speedup from the baseline and the speedup's period.
fn program_speedup(p0: f64, ps: f64) -> Option<f64> {
    let v = (p0 - ps) / p0;
    v.is_finite().then_some(v)
}

/// Least-squares slope through the origin of `(x, y)` points.
fn slope_through_origin(points: impl Iterator<Item = (f64, f64)>) -> Option<f64> {
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (x, y) in points {
        sxy += x * y;
        sxx += x * x;
    }
    (sxx > 0.0).then(|| sxy / sxx).filter(|v| v.is_finite())
}

/// SplitMix64: small, fast, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }

    fn resample<T: Copy>(&mut self, from: &[T], into: &mut Vec<T>) {
        into.clear();
        for _ in 0..from.len() {
            into.push(from[self.below(from.len())]);
        }
    }
}

/// FNV-1a, to derive a curve's seed from its names.
fn fnv(parts: &[&str]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in parts {
        for b in p.bytes().chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The 2.5% and 97.5% percentiles (linear interpolation) of `v`, sorted
/// in place; `None` when empty.
fn interval95(v: &mut [f64]) -> Option<(f64, f64)> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let x = q * (v.len() - 1) as f64;
        let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
        v[lo] + (v[hi] - v[lo]) * (x - lo as f64)
    };
    Some((at(0.025), at(0.975)))
}

/// One experiment's measurement, with what grouping and ordering need.
#[derive(Debug, Clone)]
struct Row<'a> {
    selection: &'a str,
    experiment: &'a CausalExperiment,
    key: i64,
    measure: Measure,
}

/// Computes every (selection, progress point) curve of `data`, keeps those
/// with at least 2 distinct non-zero speedups and ranks them by slope,
/// highest first (ties by selection, then progress point).
///
/// Experiments are pooled across processes, variants and runs. Intervals
/// are percentile bootstrap intervals (`opts.resamples` resamples, seeded
/// from `opts.seed` and the curve's names, so results are reproducible): a
/// point's resamples draw the baseline experiments and the point's
/// experiments with replacement; the slope's draw the baseline experiments
/// and the selection's non-zero experiments (all speedups together, so the
/// scatter between speedups counts) and refit.
pub fn analyze(data: &CausalData, opts: &AnalysisOptions) -> Analysis {
    // Rows per progress point, in a fixed order whatever the order of the
    // inputs (bootstrap draws depend on it).
    let mut by_point: BTreeMap<(String, ProgressKind), Vec<Row<'_>>> = BTreeMap::new();
    for e in data.experiments() {
        for p in &e.progress {
            if opts.progress.as_ref().is_some_and(|n| *n != p.name) {
                continue;
            }
            by_point
                .entry((p.name.clone(), p.kind))
                .or_default()
                .push(Row {
                    selection: &e.selection,
                    experiment: e,
                    key: speedup_key(e.speedup),
                    measure: Measure {
                        duration: e.duration_ns as f64,
                        visits: p.visits as f64,
                        in_flight: p.in_flight as f64,
                    },
                });
        }
    }
    let mut out = Analysis::default();
    for ((name, kind), mut rows) in by_point {
        rows.sort_by(|a, b| {
            (
                a.experiment.start_ns,
                a.experiment.duration_ns,
                a.selection,
                a.key,
            )
                .cmp(&(
                    b.experiment.start_ns,
                    b.experiment.duration_ns,
                    b.selection,
                    b.key,
                ))
                .then(a.measure.visits.total_cmp(&b.measure.visits))
        });
        let pooled: Vec<Measure> = rows
            .iter()
            .filter(|r| r.key == 0)
            .map(|r| r.measure)
            .collect();
        let mut selections: BTreeMap<&str, Vec<&Row<'_>>> = BTreeMap::new();
        for r in &rows {
            if !r.selection.is_empty() {
                selections.entry(r.selection).or_default().push(r);
            }
        }
        for (selection, rows) in selections {
            match curve(selection, &name, kind, &rows, &pooled, opts) {
                Some(c) if c.nonzero_speedups() >= 2 => out.curves.push(c),
                _ => out.left_out += 1,
            }
        }
    }
    out.curves.sort_by(|a, b| {
        b.slope
            .total_cmp(&a.slope)
            .then_with(|| a.selection.cmp(&b.selection))
            .then_with(|| a.progress.cmp(&b.progress))
    });
    out
}

/// The curve of one selection for one progress point; `None` without a
/// valid baseline.
fn curve(
    selection: &str,
    progress: &str,
    kind: ProgressKind,
    rows: &[&Row<'_>],
    pooled: &[Measure],
    opts: &AnalysisOptions,
) -> Option<Curve> {
    let mut groups: BTreeMap<i64, Vec<Measure>> = BTreeMap::new();
    for r in rows {
        groups.entry(r.key).or_default().push(r.measure);
    }
    let (baseline, base): (Baseline, &[Measure]) = match groups.get(&0) {
        Some(own) => (Baseline::Own, own),
        None => (Baseline::Pooled, pooled),
    };
    let p0 = period(kind, base)?;
    let mut rng = Rng(opts.seed ^ fnv(&[selection, progress, kind.as_str()]));
    let (mut b0, mut bs) = (Vec::new(), Vec::new());
    let mut points = vec![CurvePoint {
        speedup: 0.0,
        program_speedup: 0.0,
        ci_low: 0.0,
        ci_high: 0.0,
        experiments: base.len(),
        period_ns: p0,
    }];
    for (&key, ms) in groups.range(1..) {
        let Some(ps) = period(kind, ms).and_then(|p| program_speedup(p0, p).map(|v| (p, v))) else {
            continue;
        };
        let mut reps = Vec::with_capacity(opts.resamples);
        for _ in 0..opts.resamples {
            rng.resample(base, &mut b0);
            rng.resample(ms, &mut bs);
            if let Some(v) = period(kind, &b0)
                .zip(period(kind, &bs))
                .and_then(|(a, b)| program_speedup(a, b))
            {
                reps.push(v);
            }
        }
        let (lo, hi) = interval95(&mut reps).unwrap_or((ps.1, ps.1));
        points.push(CurvePoint {
            speedup: key_speedup(key),
            program_speedup: ps.1,
            ci_low: lo,
            ci_high: hi,
            experiments: ms.len(),
            period_ns: ps.0,
        });
    }
    let slope =
        slope_through_origin(points.iter().map(|p| (p.speedup, p.program_speedup))).unwrap_or(0.0);
    // Case bootstrap of the slope over the non-zero experiments.
    let nonzero: Vec<(i64, Measure)> = rows
        .iter()
        .filter(|r| r.key > 0)
        .map(|r| (r.key, r.measure))
        .collect();
    let mut reps = Vec::with_capacity(opts.resamples);
    let mut draw = Vec::new();
    let mut by_key: BTreeMap<i64, Vec<Measure>> = BTreeMap::new();
    let rounds = if nonzero.is_empty() {
        0
    } else {
        opts.resamples
    };
    for _ in 0..rounds {
        rng.resample(base, &mut b0);
        rng.resample(&nonzero, &mut draw);
        let Some(p0) = period(kind, &b0) else {
            continue;
        };
        by_key.values_mut().for_each(Vec::clear);
        for (k, m) in &draw {
            by_key.entry(*k).or_default().push(*m);
        }
        let fitted = slope_through_origin(by_key.iter().filter_map(|(k, ms)| {
            let ps = program_speedup(p0, period(kind, ms)?)?;
            Some((key_speedup(*k), ps))
        }));
        if let Some(s) = fitted {
            reps.push(s);
        }
    }
    let (slope_low, slope_high) = interval95(&mut reps).unwrap_or((slope, slope));
    let first = |f: fn(&CausalExperiment) -> Option<&String>| {
        rows.iter().find_map(|r| f(r.experiment).cloned())
    };
    Some(Curve {
        selection: selection.to_string(),
        file: first(|e| e.file.as_ref()),
        line: rows.iter().find_map(|r| r.experiment.line),
        function: first(|e| e.function.as_ref()),
        progress: progress.to_string(),
        kind,
        baseline,
        points,
        slope,
        slope_low,
        slope_high,
        experiments: rows.len(),
        selected_samples: rows.iter().map(|r| r.experiment.selected_samples).sum(),
    })
}

/// A field of a `profile.coz` line: tabs and line breaks would split it,
/// so they become spaces.
fn coz_field(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

/// The speedup as Coz writes it (`0`, `0.05`, `0.5`, `1`), on the grid the
/// analysis groups by, so the viewer groups alike.
fn coz_speedup(s: f64) -> String {
    format!("{}", key_speedup(speedup_key(s)))
}

fn write_coz_experiment(
    out: &mut dyn Write,
    selected: &str,
    e: &CausalExperiment,
) -> std::io::Result<()> {
    writeln!(
        out,
        "experiment\tselected={}\tspeedup={}\tduration={}\tselected-samples={}",
        coz_field(selected),
        coz_speedup(e.speedup),
        e.duration_ns,
        e.selected_samples
    )?;
    for p in &e.progress {
        match p.kind {
            ProgressKind::Throughput | ProgressKind::EndToEnd => writeln!(
                out,
                "throughput-point\tname={}\tdelta={}",
                coz_field(&p.name),
                p.visits
            )?,
            ProgressKind::Latency => writeln!(
                out,
                "latency-point\tname={}\tarrivals={}\tdepartures={}\tdifference={}",
                coz_field(&p.name),
                p.visits,
                p.departures,
                p.in_flight
            )?,
        }
    }
    Ok(())
}

/// Writes `data` as Coz's `profile.coz`, the text its web viewer loads:
/// per process a `startup` line, its experiments (each an `experiment`
/// line followed by its `throughput-point` / `latency-point` lines), its
/// `samples` lines and a `runtime` line; tab-separated `key=value` fields.
///
/// End-to-end points are written as throughput points (`delta=1` per run:
/// the viewer's period is then the mean run duration). Coz's viewer shows a
/// selection only with its own 0% experiments: for each selection that has
/// none, every 0% experiment (the pooled baseline [`analyze`] uses) is
/// written once more under its name, at the end, so the viewer computes
/// the same curve. Experiments with an empty selection (end-to-end
/// baselines) appear only as such copies.
pub fn write_coz_profile(data: &CausalData, out: &mut dyn Write) -> std::io::Result<()> {
    for p in &data.processes {
        let start = p
            .start_ns
            .or_else(|| p.experiments.iter().map(|e| e.start_ns as i64).min())
            .unwrap_or(0);
        writeln!(out, "startup\ttime={start}")?;
        for e in p.experiments.iter().filter(|e| !e.selection.is_empty()) {
            write_coz_experiment(out, &e.selection, e)?;
        }
        for (location, count) in &p.samples {
            writeln!(
                out,
                "samples\tlocation={}\tcount={count}",
                coz_field(location)
            )?;
        }
        let end = p.end_ns.unwrap_or_else(|| {
            p.experiments
                .iter()
                .map(|e| (e.start_ns + e.duration_ns + e.delay_ns) as i64)
                .max()
                .unwrap_or(start)
        });
        writeln!(out, "runtime\ttime={}", (end - start).max(0))?;
    }
    let with_own: HashSet<&str> = data
        .experiments()
        .filter(|e| speedup_key(e.speedup) == 0)
        .map(|e| e.selection.as_str())
        .collect();
    let mut lacking: Vec<&str> = data
        .experiments()
        .map(|e| e.selection.as_str())
        .filter(|s| !s.is_empty() && !with_own.contains(s))
        .collect();
    lacking.sort_unstable();
    lacking.dedup();
    for selection in lacking {
        for e in data.experiments().filter(|e| speedup_key(e.speedup) == 0) {
            write_coz_experiment(out, selection, e)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
