//! `strobe-bench causal`: how well `strobe causal` predicts the effect of
//! an optimisation, against programs where the real effect is known, side
//! by side with Coz on the same binaries.
//!
//! Owns the accuracy benchmark of causal profiling. The ground truth comes
//! from three programs in `tests/programs/` (`causal_serial.c`,
//! `causal_threads.c`, `causal_pool.c`) whose function under test does s%
//! less work when built with `-DSPEEDUP=s`: the real program speedup at s
//! is measured from wall times of the two builds, then compared with what
//! `strobe causal` and Coz predict from a run of the unmodified build. The
//! loop under test is marked `/* causal-truth */` in each source; a
//! profiler's selection is "the function under test" when it names that
//! function or one of those lines.
//!
//! Coz's prediction is computed from `profile.coz` with the method of Coz's
//! own viewer (see [`CozProfile`]). Prints figures and never asserts them;
//! a tool that fails is reported, with its output, and the others go on.

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Options of `strobe-bench causal`.
#[derive(Debug, Args)]
pub struct CausalArgs {
    /// The strobe binary (default: next to this benchmark).
    #[arg(long)]
    strobe: Option<PathBuf>,
    /// Directory holding causal_serial.c, causal_threads.c and causal_pool.c.
    #[arg(long)]
    programs: Option<PathBuf>,
    /// Length of each profiled run, and of the plain run its overhead is
    /// measured against, in milliseconds of work: that many iterations of
    /// causal_serial and items of causal_pool (about 1 ms each), a tenth as
    /// many iterations of causal_threads (about 10 ms each).
    #[arg(long, default_value_t = 60_000)]
    iterations: u64,
    /// Length of each timed run that measures the real speedup, in the
    /// units of --iterations.
    #[arg(long, default_value_t = 5_000)]
    real_iterations: u64,
    /// Timed runs of each build for the real speedup (interleaved); the
    /// median is used.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Speedups of the function under test to evaluate, in percent.
    #[arg(long, value_delimiter = ',', default_value = "10,20,30,40,50")]
    speedups: Vec<u32>,
    /// Only these programs (serial, threads, pool; comma separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Do not run Coz.
    #[arg(long)]
    skip_coz: bool,
    /// Do not run `strobe causal` (real speedups and Coz only).
    #[arg(long)]
    skip_strobe: bool,
    /// An extra argument for `strobe causal`, placed before `--` (repeatable).
    #[arg(long = "strobe-arg", allow_hyphen_values = true)]
    strobe_args: Vec<String>,
    /// Work in this directory and keep it (builds, strobe's output,
    /// profile.coz and both tools' logs) instead of a temporary one.
    #[arg(long)]
    keep: Option<PathBuf>,
}

/// A ground-truth program: its source stem, the function under test, the
/// name of its progress point and how long one iteration takes.
struct Program {
    stem: &'static str,
    short: &'static str,
    function: &'static str,
    progress: &'static str,
    /// Milliseconds of wall time per iteration (argv[1] counts iterations).
    ms_per_iteration: u64,
    about: &'static str,
}

const PROGRAMS: [Program; 3] = [
    Program {
        stem: "causal_serial",
        short: "serial",
        function: "hot",
        progress: "iteration",
        ms_per_iteration: 1,
        about: "one thread; hot() is 60% of the run (real speedup 0.6·s)",
    },
    Program {
        stem: "causal_threads",
        short: "threads",
        function: "long_side",
        progress: "iteration",
        ms_per_iteration: 10,
        about: "two threads joined per iteration, 60/40; real speedup saturates near s = 33%",
    },
    Program {
        stem: "causal_pool",
        short: "pool",
        function: "locked_update",
        progress: "item",
        ms_per_iteration: 1,
        about: "four workers on one lock (70% of the work inside it); real speedup ≈ s",
    },
];

/// Coz's viewer lists a selection only when one of its progress points has
/// at least this many distinct speedups measured (the viewer's default).
const COZ_MIN_POINTS: usize = 10;

/// A speedup curve: (line speedup, program speedup) as fractions, sorted by
/// line speedup.
type Curve = Vec<(f64, f64)>;

/// The program speedup at line speedup `x`: the curve's value there, or a
/// linear interpolation between the measured speedups around it; `None`
/// outside the measured range.
fn interpolate(curve: &[(f64, f64)], x: f64) -> Option<f64> {
    const EPS: f64 = 1e-9;
    if let Some(&(_, y)) = curve.iter().find(|(cx, _)| (cx - x).abs() < EPS) {
        return Some(y);
    }
    let below = curve.iter().rfind(|(cx, _)| *cx < x)?;
    let above = curve.iter().find(|(cx, _)| *cx > x)?;
    let t = (x - below.0) / (above.0 - below.0);
    Some(below.1 + t * (above.1 - below.1))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The line numbers (1-based) of `source` marked `/* causal-truth */`.
fn truth_lines(source: &str) -> Vec<u32> {
    source
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("/* causal-truth */"))
        .map(|(i, _)| i as u32 + 1)
        .collect()
}

/// Whether a profiler's selection (`file:line`, or a function name) is
/// inside the function under test: one of the marked `lines` of the file
/// named `file_name`, or the function itself (a compiler clone such as
/// `hot.constprop.0` counts as the function).
fn selection_is_truth(selection: &str, file_name: &str, function: &str, lines: &[u32]) -> bool {
    let selection = selection.trim();
    if let Some((file, line)) = selection.rsplit_once(':') {
        if let Ok(line) = line.trim().parse::<u32>() {
            let base = Path::new(file.trim())
                .file_name()
                .and_then(|f| f.to_str())
                .unwrap_or("");
            return base == file_name && lines.contains(&line);
        }
    }
    let name = selection.split('(').next().unwrap_or("").trim();
    let name = name.split('.').next().unwrap_or("");
    name == function
}

// ---------------------------------------------------------------- strobe

/// One row of `strobe causal report --csv`.
#[derive(Debug, Clone, PartialEq)]
struct StrobeRow {
    selection: String,
    progress: String,
    /// Line speedup, a fraction.
    speedup: f64,
    /// Predicted program speedup, a fraction.
    program_speedup: f64,
    ci: Option<(f64, f64)>,
    experiments: u64,
}

/// Splits one CSV line into fields (RFC 4180 quoting).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    fields.push(field);
    fields
}

/// Parses `strobe causal report --csv`: a header line naming the columns
/// `selection,progress,speedup,program_speedup,ci_low,ci_high,experiments`
/// (found by name; `progress`, the interval and `experiments` may be
/// missing), then one row per selection, progress point and speedup.
/// Speedups are fractions; a report whose speedups exceed 1 is read as
/// percent and scaled to fractions. Rows keep the report's order.
fn parse_strobe_csv(text: &str) -> Result<Vec<StrobeRow>> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines
        .next()
        .ok_or_else(|| anyhow!("the report is empty (no header line)"))?;
    let names: Vec<String> = csv_fields(header)
        .into_iter()
        .map(|n| n.trim().to_ascii_lowercase())
        .collect();
    let col = |name: &str| names.iter().position(|n| n == name);
    let need = |name: &str| {
        col(name).ok_or_else(|| anyhow!("the report's header `{header}` has no `{name}` column"))
    };
    let (c_sel, c_speedup, c_program) = (
        need("selection")?,
        need("speedup")?,
        need("program_speedup")?,
    );
    let (c_progress, c_low, c_high, c_exp) = (
        col("progress"),
        col("ci_low"),
        col("ci_high"),
        col("experiments"),
    );
    let mut rows = Vec::new();
    for (n, line) in lines.enumerate() {
        let f = csv_fields(line);
        let get = |c: usize| f.get(c).map(|s| s.trim()).unwrap_or("");
        let num = |c: usize| -> Result<f64> {
            get(c).parse::<f64>().with_context(|| {
                format!(
                    "report line {}: `{}` is not a number: {line}",
                    n + 2,
                    get(c)
                )
            })
        };
        let opt = |c: Option<usize>| c.and_then(|c| get(c).parse::<f64>().ok());
        rows.push(StrobeRow {
            selection: get(c_sel).to_string(),
            progress: c_progress.map(|c| get(c).to_string()).unwrap_or_default(),
            speedup: num(c_speedup)?,
            program_speedup: num(c_program)?,
            ci: opt(c_low).zip(opt(c_high)),
            experiments: opt(c_exp).map(|e| e as u64).unwrap_or(1),
        });
    }
    if rows.iter().any(|r| r.speedup.abs() > 1.0 + 1e-9) {
        for r in &mut rows {
            r.speedup /= 100.0;
            r.program_speedup /= 100.0;
            r.ci = r.ci.map(|(l, h)| (l / 100.0, h / 100.0));
        }
    }
    Ok(rows)
}

/// A point of strobe's curve: line speedup, predicted program speedup and
/// its interval, fractions.
type StrobePoint = (f64, f64, Option<(f64, f64)>);

/// What `strobe causal` says about one program.
struct StrobeResult {
    /// The report's first selection (the report lists them by rank).
    top: Option<String>,
    /// The selection inside the function under test with the most
    /// experiments, its experiments, and its curve with intervals.
    truth: Option<(String, u64, Vec<StrobePoint>)>,
    wall_s: f64,
}

impl StrobeResult {
    fn predict(&self, s: f64) -> Option<(f64, Option<(f64, f64)>)> {
        let (_, _, points) = self.truth.as_ref()?;
        let curve: Curve = points.iter().map(|&(x, y, _)| (x, y)).collect();
        let y = interpolate(&curve, s)?;
        let ci = points
            .iter()
            .find(|(x, _, _)| (x - s).abs() < 1e-9)
            .and_then(|p| p.2);
        Some((y, ci))
    }
}

/// Reads the rows of the report about the function under test.
fn strobe_result(rows: &[StrobeRow], p: &Program, lines: &[u32], wall_s: f64) -> StrobeResult {
    let file_name = format!("{}.c", p.stem);
    // The program's progress point, when the report names it.
    let ours =
        |r: &&StrobeRow| r.progress == p.progress || !rows.iter().any(|r| r.progress == p.progress);
    let mut experiments: BTreeMap<&str, u64> = BTreeMap::new();
    for r in rows.iter().filter(ours) {
        if selection_is_truth(&r.selection, &file_name, p.function, lines) {
            *experiments.entry(&r.selection).or_default() += r.experiments;
        }
    }
    let best = experiments
        .iter()
        .max_by_key(|(_, e)| **e)
        .map(|(s, e)| (s.to_string(), *e));
    let truth = best.map(|(sel, e)| {
        let mut points: Vec<StrobePoint> = rows
            .iter()
            .filter(ours)
            .filter(|r| r.selection == sel)
            .map(|r| (r.speedup, r.program_speedup, r.ci))
            .collect();
        if !points.iter().any(|p| p.0.abs() < 1e-9) {
            points.push((0.0, 0.0, None));
        }
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        (sel, e, points)
    });
    StrobeResult {
        top: rows.first().map(|r| r.selection.clone()),
        truth,
        wall_s,
    }
}

/// Runs `strobe causal` on `prog` and reads its CSV report.
fn run_strobe(
    strobe: &Path,
    extra: &[String],
    work: &Path,
    prog: &Path,
    iterations: u64,
) -> Result<(Vec<StrobeRow>, f64)> {
    let out = work.join("strobe-out");
    let log = work.join("strobe-causal.log");
    let log_file = std::fs::File::create(&log)?;
    let t0 = Instant::now();
    let status = Command::new(strobe)
        .arg("causal")
        .arg("--output-dir")
        .arg(&out)
        .args(extra)
        .arg("--")
        .arg(prog)
        .arg(iterations.to_string())
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .status()
        .with_context(|| format!("starting {}", strobe.display()))?;
    let wall = t0.elapsed().as_secs_f64();
    if !status.success() {
        bail!(
            "`{} causal --output-dir {} -- {} {iterations}` failed ({status}); its output ends:\n{}",
            strobe.display(),
            out.display(),
            prog.display(),
            tail(&std::fs::read_to_string(&log).unwrap_or_default(), 15)
        );
    }
    let report = Command::new(strobe)
        .args(["causal", "report", "-i"])
        .arg(&out)
        .args(["--csv", "--top", "0"])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("starting {}", strobe.display()))?;
    if !report.status.success() {
        bail!(
            "`{} causal report -i {} --csv --top 0` failed ({}):\n{}",
            strobe.display(),
            out.display(),
            report.status,
            tail(&String::from_utf8_lossy(&report.stderr), 15)
        );
    }
    let rows = parse_strobe_csv(&String::from_utf8_lossy(&report.stdout))
        .context("reading `strobe causal report --csv`")?;
    Ok((rows, wall))
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

// ------------------------------------------------------------------- Coz

/// What one selection and progress point accumulated at one speedup.
#[derive(Debug, Default, Clone, Copy)]
struct CozCell {
    delta: f64,
    duration: f64,
}

/// A parsed `profile.coz`, aggregated as Coz's viewer does: for each
/// selected location, throughput point and speedup, the visits (`delta`)
/// and effective durations of all its experiments are summed.
///
/// The viewer's facts (Coz 0.2.2, `viewer/js/profile.js`), followed here:
/// a point's period at a speedup is summed duration / summed delta; its
/// program speedup is (period(0) − period(s)) / period(0), so a location
/// without a valid baseline (speedup 0) has no curve; values outside
/// [−1, 2] are dropped; a location is shown when a progress point has at
/// least 10 distinct speedups; locations are ranked by "impact", the
/// largest running trapezoid area under the curve divided by the speedup
/// it reaches; the drawn line is a loess fit (bandwidth 0.4, 5 robustness
/// iterations, first point pinned to 0) when there are more than 5 points,
/// else the points themselves. Latency points are read past, not used.
#[derive(Debug, Default)]
struct CozProfile {
    /// (selected, point) → speedup in percent → sums.
    data: BTreeMap<(String, String), BTreeMap<i64, CozCell>>,
    /// selected → number of experiments.
    experiments: BTreeMap<String, u64>,
}

impl CozProfile {
    fn parse(text: &str) -> Result<CozProfile> {
        let mut profile = CozProfile::default();
        let mut experiment: Option<(String, i64, f64)> = None;
        for line in text.lines().filter(|l| !l.is_empty()) {
            let mut parts = line.split('\t');
            let kind = parts.next().unwrap_or("");
            let fields: BTreeMap<&str, &str> = parts.filter_map(|p| p.split_once('=')).collect();
            match kind {
                "experiment" => {
                    let selected = fields
                        .get("selected")
                        .ok_or_else(|| anyhow!("experiment line without selected=: {line}"))?;
                    let speedup: f64 = fields
                        .get("speedup")
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| anyhow!("experiment line without speedup=: {line}"))?;
                    let duration: f64 = fields
                        .get("duration")
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| anyhow!("experiment line without duration=: {line}"))?;
                    *profile.experiments.entry(selected.to_string()).or_default() += 1;
                    experiment = Some((
                        selected.to_string(),
                        (speedup * 100.0).round() as i64,
                        duration,
                    ));
                }
                "throughput-point" | "progress-point" => {
                    let (Some((selected, speedup, duration)), Some(name), Some(delta)) = (
                        experiment.as_ref(),
                        fields.get("name"),
                        fields.get("delta").and_then(|d| d.parse::<f64>().ok()),
                    ) else {
                        continue;
                    };
                    let cell = profile
                        .data
                        .entry((selected.clone(), name.to_string()))
                        .or_default()
                        .entry(*speedup)
                        .or_default();
                    cell.delta += delta;
                    cell.duration += duration;
                }
                "startup" | "shutdown" | "samples" | "runtime" | "latency-point" => {}
                _ => bail!("profile.coz has a line of unknown kind: {line}"),
            }
        }
        Ok(profile)
    }

    /// The measured points of `selected` for progress point `point`.
    fn points(&self, selected: &str, point: &str) -> Curve {
        let Some(cells) = self.data.get(&(selected.to_string(), point.to_string())) else {
            return Vec::new();
        };
        let period = |c: &CozCell| {
            let p = c.duration / c.delta;
            (c.duration >= 0.0 && p.is_finite()).then_some(p)
        };
        let Some(base) = cells.get(&0).and_then(period) else {
            return Vec::new();
        };
        cells
            .iter()
            .filter_map(|(s, c)| Some((*s as f64 / 100.0, (base - period(c)?) / base)))
            .filter(|(_, y)| (-1.0..=2.0).contains(y))
            .collect()
    }

    /// The progress points measured for `selected`.
    fn point_names(&self, selected: &str) -> Vec<&str> {
        self.data
            .keys()
            .filter(|(s, _)| s == selected)
            .map(|(_, p)| p.as_str())
            .collect()
    }

    /// The viewer's "impact" of `selected`: over its progress points with
    /// at least `min_points` speedups, the largest running area under the
    /// curve divided by the speedup reached. `None` when no point has
    /// enough speedups (the viewer would not list it).
    fn impact(&self, selected: &str, min_points: usize) -> Option<f64> {
        let mut listed = false;
        let mut best = 0.0f64;
        for point in self.point_names(selected) {
            let m = self.points(selected, point);
            if m.len() < min_points || m.is_empty() {
                continue;
            }
            listed = true;
            let mut area = 0.0;
            for w in m.windows(2) {
                area += (w[0].1 + w[1].1) / 2.0 * (w[1].0 - w[0].0);
                best = best.max(area / w[1].0);
            }
        }
        listed.then_some(best)
    }

    /// The location the viewer shows first (sorted by impact), and whether
    /// it met the viewer's minimum number of points.
    fn top(&self) -> Option<(String, bool)> {
        for min_points in [COZ_MIN_POINTS, 0] {
            let best = self
                .experiments
                .keys()
                .filter_map(|s| Some((s, self.impact(s, min_points)?)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((s, _)) = best {
                return Some((s.clone(), min_points == COZ_MIN_POINTS));
            }
        }
        None
    }
}

/// The viewer's drawn curve through `points`: a loess fit when there are
/// more than 5 points, else the points.
fn coz_curve(points: &[(f64, f64)]) -> Curve {
    if points.len() <= 5 {
        return points.to_vec();
    }
    let x: Vec<f64> = points.iter().map(|p| p.0).collect();
    let y: Vec<f64> = points.iter().map(|p| p.1).collect();
    match loess(&x, &y, 0.4, 5) {
        Some(mut smooth) if smooth.iter().all(|v| v.is_finite()) => {
            smooth[0] = 0.0;
            x.into_iter().zip(smooth).collect()
        }
        _ => points.to_vec(),
    }
}

/// Local linear regression (loess) of `y` over strictly increasing `x`, as
/// in science.js (which Coz's viewer uses): for each x, a weighted linear
/// fit over the `floor(bandwidth · n)` nearest points with tricube weights,
/// then `robustness_iters` refits with bisquare weights of the residuals
/// (scaled by 6 × their median). `None` when the bandwidth covers fewer
/// than 2 points.
fn loess(x: &[f64], y: &[f64], bandwidth: f64, robustness_iters: usize) -> Option<Vec<f64>> {
    let n = x.len();
    if n <= 2 {
        return (n > 0).then(|| y.to_vec());
    }
    let width = (bandwidth * n as f64).floor() as usize;
    if width < 2 {
        return None;
    }
    let tricube = |d: f64| {
        let t = 1.0 - d * d * d;
        t * t * t
    };
    let mut fit = vec![0.0; n];
    let mut residuals = vec![0.0; n];
    let mut robustness = vec![1.0; n];
    for iter in 0..=robustness_iters {
        let (mut left, mut right) = (0, width - 1);
        for i in 0..n {
            if i > 0 && right + 1 < n && x[right + 1] - x[i] < x[i] - x[left] {
                left += 1;
                right += 1;
            }
            let edge = if x[i] - x[left] > x[right] - x[i] {
                left
            } else {
                right
            };
            let denom = (1.0 / (x[edge] - x[i])).abs();
            let (mut sw, mut sx, mut sxx, mut sy, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for k in left..=right {
                let w = tricube((x[k] - x[i]).abs() * denom) * robustness[k];
                sw += w;
                sx += x[k] * w;
                sxx += x[k] * x[k] * w;
                sy += y[k] * w;
                sxy += y[k] * x[k] * w;
            }
            let (mx, my, mxy, mxx) = (sx / sw, sy / sw, sxy / sw, sxx / sw);
            let beta = if (mxx - mx * mx).abs().sqrt() < 1e-12 {
                0.0
            } else {
                (mxy - mx * my) / (mxx - mx * mx)
            };
            fit[i] = beta * x[i] + (my - beta * mx);
            residuals[i] = (y[i] - fit[i]).abs();
        }
        if iter == robustness_iters {
            break;
        }
        let mut sorted = residuals.clone();
        sorted.sort_by(f64::total_cmp);
        let mid = (n - 1) as f64 / 2.0;
        let med = sorted[mid.floor() as usize]
            + (mid - mid.floor()) * (sorted[mid.ceil() as usize] - sorted[mid.floor() as usize]);
        if med.abs() < 1e-12 {
            break;
        }
        for i in 0..n {
            let a = residuals[i] / (6.0 * med);
            robustness[i] = if a >= 1.0 { 0.0 } else { (1.0 - a * a).powi(2) };
        }
    }
    Some(fit)
}

/// What Coz says about one program.
struct CozResult {
    top: Option<(String, bool)>,
    /// The location inside the function under test with the most
    /// experiments, its experiments, its measured points and drawn curve.
    truth: Option<(String, u64, Curve, Curve)>,
    wall_s: f64,
}

fn coz_result(profile: &CozProfile, p: &Program, lines: &[u32], wall_s: f64) -> CozResult {
    let file_name = format!("{}.c", p.stem);
    let truth = profile
        .experiments
        .iter()
        .filter(|(s, _)| selection_is_truth(s, &file_name, p.function, lines))
        .max_by_key(|(_, e)| **e)
        .map(|(sel, e)| {
            let names = profile.point_names(sel);
            let point = if names.contains(&p.progress) {
                p.progress
            } else {
                names.first().copied().unwrap_or(p.progress)
            };
            let points = profile.points(sel, point);
            let curve = coz_curve(&points);
            (sel.clone(), *e, points, curve)
        });
    CozResult {
        top: profile.top(),
        truth,
        wall_s,
    }
}

/// Runs `coz run --- prog iterations` in `work` and reads its profile.coz.
fn run_coz(work: &Path, prog: &Path, iterations: u64) -> Result<(CozProfile, f64)> {
    let log = work.join("coz.log");
    let log_file = std::fs::File::create(&log)?;
    let t0 = Instant::now();
    let status = Command::new("coz")
        .args(["run", "---"])
        .arg(prog)
        .arg(iterations.to_string())
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .status()
        .context("starting `coz` (install Debian's coz-profiler, or pass --skip-coz)")?;
    let wall = t0.elapsed().as_secs_f64();
    if !status.success() {
        bail!(
            "`coz run --- {} {iterations}` failed ({status}); its output ends:\n{}",
            prog.display(),
            tail(&std::fs::read_to_string(&log).unwrap_or_default(), 15)
        );
    }
    let path = work.join("profile.coz");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("coz left no {}", path.display()))?;
    Ok((CozProfile::parse(&text)?, wall))
}

// ----------------------------------------------------------- the harness

/// Builds `source` at `-DSPEEDUP=speedup` into `out` with gcc, with debug
/// information Coz 0.2.2 can read (DWARF 3) and Coz's progress point.
fn build(source: &Path, include: &Path, out: &Path, speedup: u32) -> Result<()> {
    let output = Command::new("gcc")
        .args(["-O2", "-g", "-gdwarf-3", "-pthread", "-DWITH_COZ"])
        .arg(format!("-DSPEEDUP={speedup}"))
        .arg("-I")
        .arg(include)
        .arg("-o")
        .arg(out)
        .arg(source)
        .arg("-ldl")
        .output()
        .context("running gcc")?;
    if !output.status.success() {
        bail!(
            "gcc could not build {} (SPEEDUP={speedup}):\n{}",
            source.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// Wall seconds of one plain run of `prog iterations`.
fn time_run(prog: &Path, iterations: u64) -> Result<f64> {
    let t0 = Instant::now();
    let status = Command::new(prog)
        .arg(iterations.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("running {}", prog.display()))?;
    let wall = t0.elapsed().as_secs_f64();
    if !status.success() {
        bail!("{} {iterations} failed: {status}", prog.display());
    }
    Ok(wall)
}

/// Wall times of `runs` interleaved rounds over all the builds: one list
/// of seconds per build.
fn time_builds(builds: &[(u32, PathBuf)], iterations: u64, runs: usize) -> Result<Vec<Vec<f64>>> {
    let mut times = vec![Vec::new(); builds.len()];
    for round in 0..runs {
        eprintln!("  timing round {}/{runs}", round + 1);
        for (i, (_, prog)) in builds.iter().enumerate() {
            times[i].push(time_run(prog, iterations)?);
        }
    }
    Ok(times)
}

/// Real program speedups (fractions) of builds 1.. over build 0, from the
/// median wall times, and from the fastest run of each build (other work
/// on the machine only ever slows a run down, so on a shared machine the
/// fastest runs are the better estimate).
fn real_speedups(times: &[Vec<f64>]) -> Vec<(f64, f64)> {
    let medians: Vec<f64> = times.iter().map(|t| median(t.clone())).collect();
    let fastest: Vec<f64> = times
        .iter()
        .map(|t| t.iter().copied().fold(f64::INFINITY, f64::min))
        .collect();
    (1..times.len())
        .map(|i| {
            (
                (medians[0] - medians[i]) / medians[0],
                (fastest[0] - fastest[i]) / fastest[0],
            )
        })
        .collect()
}

/// The one-minute load average (other work on this machine skews the
/// wall times, most of all those of the threaded programs).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{:.1}%", v * 100.0))
        .unwrap_or_else(|| "n/a".into())
}

fn err_pp(pred: Option<f64>, real: f64) -> String {
    pred.map(|p| format!("{:.1}", (p - real).abs() * 100.0))
        .unwrap_or_else(|| "n/a".into())
}

/// Runs the benchmark and prints one table per program.
pub fn run(args: &CausalArgs) -> Result<()> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let programs_dir = args
        .programs
        .clone()
        .unwrap_or_else(|| repo.join("tests/programs"));
    let programs_dir = programs_dir
        .canonicalize()
        .with_context(|| format!("--programs {}", programs_dir.display()))?;
    // The headers of the checkout the programs come from, else this one's.
    let include = [programs_dir.join("../../include"), repo.join("include")]
        .into_iter()
        .find(|d| d.join("strobe.h").is_file())
        .unwrap_or_else(|| repo.join("include"));
    let strobe = if args.skip_strobe {
        None
    } else {
        // Absolute: strobe runs in a scratch directory.
        Some(crate::overhead::strobe_binary(args.strobe.as_deref())?.canonicalize()?)
    };
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if let Some(bad) = args.speedups.iter().find(|s| **s == 0 || **s > 100) {
        bail!("--speedups takes percents from 1 to 100, not {bad}");
    }
    for name in &args.only {
        if !PROGRAMS.iter().any(|p| p.short == name || p.stem == name) {
            bail!("--only: no program `{name}` (serial, threads, pool)");
        }
    }
    let temp = tempfile::tempdir()?;
    let dir = match &args.keep {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.canonicalize()?
        }
        None => temp.path().to_path_buf(),
    };
    println!(
        "causal accuracy: profiled runs of {} ms of work, real speedups from the median of {} interleaved runs of {} ms of work per build",
        args.iterations, args.runs, args.real_iterations
    );
    let mut failures = Vec::new();
    for p in PROGRAMS
        .iter()
        .filter(|p| args.only.is_empty() || args.only.iter().any(|o| o == p.short || o == p.stem))
    {
        let load_before = load_average();
        let source = programs_dir.join(format!("{}.c", p.stem));
        let text = std::fs::read_to_string(&source)
            .with_context(|| format!("reading {}", source.display()))?;
        let lines = truth_lines(&text);
        if lines.is_empty() {
            bail!("{} marks no line `/* causal-truth */`", source.display());
        }
        let work = dir.join(p.stem);
        std::fs::create_dir_all(&work)?;
        eprintln!("{}: building", p.stem);
        let mut builds = Vec::new();
        for s in std::iter::once(0).chain(args.speedups.iter().copied()) {
            let out = work.join(format!("{}_s{s}", p.stem));
            build(&source, &include, &out, s)?;
            builds.push((s, out));
        }
        let prog = builds[0].1.clone();
        let iterations = (args.iterations / p.ms_per_iteration).max(1);
        let real_iterations = (args.real_iterations / p.ms_per_iteration).max(1);
        eprintln!("{}: measuring real speedups", p.stem);
        let times = time_builds(&builds, real_iterations, args.runs)?;
        let real = real_speedups(&times);
        eprintln!("{}: plain run of {iterations} iterations", p.stem);
        let plain = time_run(&prog, iterations)?;

        let strobe_res = match &strobe {
            None => None,
            Some(strobe) => {
                eprintln!("{}: strobe causal", p.stem);
                let sw = work.join("strobe");
                std::fs::create_dir_all(&sw)?;
                match run_strobe(strobe, &args.strobe_args, &sw, &prog, iterations) {
                    Ok((rows, wall)) => Some(Ok(strobe_result(&rows, p, &lines, wall))),
                    Err(e) => {
                        failures.push(format!("{}: strobe", p.stem));
                        Some(Err(e))
                    }
                }
            }
        };
        let coz_res = if args.skip_coz {
            None
        } else {
            eprintln!("{}: coz run", p.stem);
            let cw = work.join("coz");
            std::fs::create_dir_all(&cw)?;
            match run_coz(&cw, &prog, iterations) {
                Ok((profile, wall)) => Some(Ok(coz_result(&profile, p, &lines, wall))),
                Err(e) => {
                    failures.push(format!("{}: coz", p.stem));
                    Some(Err(e))
                }
            }
        };
        println!();
        println!("{}: {}", p.stem, p.about);
        println!(
            "  real: {real_iterations} iterations per timed run; wall s, median (min-max) per build: {}",
            builds
                .iter()
                .zip(&times)
                .map(|((s, _), t)| {
                    let lo = t.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = t.iter().copied().fold(0.0, f64::max);
                    format!("{s}%: {:.3} ({lo:.3}-{hi:.3})", median(t.clone()))
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!("  profiled runs: {iterations} iterations; plain run {plain:.1} s");
        println!(
            "  load average: {load_before} at the start, {} at the end ({} cores)",
            load_average(),
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        print_program(
            p,
            &lines,
            &args.speedups,
            &real,
            plain,
            strobe_res.as_ref(),
            coz_res.as_ref(),
        );
    }
    if !failures.is_empty() {
        bail!("some profilers failed: {}", failures.join(", "));
    }
    Ok(())
}

fn print_program(
    p: &Program,
    lines: &[u32],
    speedups: &[u32],
    real: &[(f64, f64)],
    plain: f64,
    strobe: Option<&Result<StrobeResult>>,
    coz: Option<&Result<CozResult>>,
) {
    let overhead = |wall: f64| format!("{wall:.1} s ({:+.1}%)", (wall / plain - 1.0) * 100.0);
    let marked: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    println!(
        "  function under test {}(), lines {}.c:{}; progress point \"{}\"",
        p.function,
        p.stem,
        marked.join(","),
        p.progress
    );
    let strobe_ok = match strobe {
        None => {
            println!("  strobe: skipped (--skip-strobe)");
            None
        }
        Some(Err(e)) => {
            println!("  strobe: FAILED: {e:#}");
            None
        }
        Some(Ok(r)) => {
            println!("  strobe causal: {}", overhead(r.wall_s));
            println!(
                "  strobe top-ranked: {}",
                r.top.as_deref().unwrap_or("(empty report)")
            );
            match &r.truth {
                Some((sel, e, _)) => {
                    println!("  strobe on the function under test: {sel} ({e} experiments)")
                }
                None => println!("  strobe on the function under test: no row"),
            }
            Some(r)
        }
    };
    let coz_ok = match coz {
        None => {
            println!("  coz: skipped (--skip-coz)");
            None
        }
        Some(Err(e)) => {
            println!("  coz: FAILED: {e:#}");
            None
        }
        Some(Ok(r)) => {
            println!("  coz run: {}", overhead(r.wall_s));
            match &r.top {
                Some((sel, true)) => println!("  coz top-ranked (viewer's impact order): {sel}"),
                Some((sel, false)) => println!(
                    "  coz top-ranked (viewer's impact order): {sel} (no location has {COZ_MIN_POINTS} speedups, the viewer's minimum)"
                ),
                None => println!("  coz top-ranked: (no experiment with a baseline)"),
            }
            match &r.truth {
                Some((sel, e, points, _)) => println!(
                    "  coz on the function under test: {sel} ({e} experiments, {} speedups with data)",
                    points.len()
                ),
                None => println!("  coz on the function under test: never selected"),
            }
            Some(r)
        }
    };
    println!(
        "  {:>5} {:>7} {:>9} {:>8} {:>17} {:>6} {:>8} {:>6} {:>10}",
        "s", "real", "real min", "strobe", "strobe 95% CI", "|err|", "coz", "|err|", "coz points"
    );
    for (s, (real, real_min)) in speedups.iter().zip(real) {
        let x = *s as f64 / 100.0;
        let sp = strobe_ok.and_then(|r| r.predict(x));
        let ci = sp
            .and_then(|(_, ci)| ci)
            .map(|(l, h)| format!("[{:.1}, {:.1}]", l * 100.0, h * 100.0))
            .unwrap_or_else(|| "-".into());
        let sp = sp.map(|(y, _)| y);
        let (cc, cp) = coz_ok
            .and_then(|r| r.truth.as_ref())
            .map(|(_, _, points, curve)| (interpolate(curve, x), interpolate(points, x)))
            .unwrap_or((None, None));
        println!(
            "  {:>4}% {:>7} {:>9} {:>8} {:>17} {:>6} {:>8} {:>6} {:>10}",
            s,
            pct(Some(*real)),
            pct(Some(*real_min)),
            pct(sp),
            ci,
            err_pp(sp, *real),
            pct(cc),
            err_pp(cc, *real),
            pct(cp)
        );
    }
    println!(
        "  (real: from median wall times, |err| against it, in percentage points; real min: from each build's fastest run; coz = the viewer's drawn curve, coz points = its measured points, interpolated)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_between_measured_speedups() {
        let c = vec![(0.0, 0.0), (0.1, 0.05), (0.3, 0.25)];
        assert_eq!(interpolate(&c, 0.1), Some(0.05));
        assert!((interpolate(&c, 0.2).unwrap() - 0.15).abs() < 1e-12);
        assert_eq!(interpolate(&c, 0.5), None);
    }

    #[test]
    fn finds_marked_lines_and_matches_selections() {
        let src = "int a;\nvoid hot(void) {\n  for (;;) x++; /* causal-truth */\n}\n";
        let lines = truth_lines(src);
        assert_eq!(lines, vec![3]);
        assert!(selection_is_truth(
            "/src/t/causal_serial.c:3",
            "causal_serial.c",
            "hot",
            &lines
        ));
        assert!(selection_is_truth(
            "causal_serial.c:3",
            "causal_serial.c",
            "hot",
            &lines
        ));
        assert!(!selection_is_truth(
            "/x/causal_serial.c:4",
            "causal_serial.c",
            "hot",
            &lines
        ));
        assert!(!selection_is_truth(
            "/x/other.c:3",
            "causal_serial.c",
            "hot",
            &lines
        ));
        assert!(selection_is_truth("hot", "causal_serial.c", "hot", &lines));
        assert!(selection_is_truth(
            "hot.constprop.0",
            "causal_serial.c",
            "hot",
            &lines
        ));
        assert!(!selection_is_truth(
            "hotter",
            "causal_serial.c",
            "hot",
            &lines
        ));
    }

    #[test]
    fn reads_strobe_csv_in_fractions_or_percent() {
        let text = "selection,progress,speedup,program_speedup,ci_low,ci_high,experiments\n\
                    causal_serial.c:33,iteration,0.1,0.06,0.05,0.07,4\n\
                    \"cold, really\",iteration,0.2,0.0,,,3\n";
        let rows = parse_strobe_csv(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].ci, Some((0.05, 0.07)));
        assert_eq!(rows[1].selection, "cold, really");
        assert_eq!(rows[1].ci, None);
        assert_eq!(rows[1].experiments, 3);
        let pct = "selection,speedup,program_speedup\nhot,10,6\nhot,20,12\n";
        let rows = parse_strobe_csv(pct).unwrap();
        assert!((rows[1].speedup - 0.2).abs() < 1e-12);
        assert!((rows[1].program_speedup - 0.12).abs() < 1e-12);
        assert!(parse_strobe_csv("selection,speedup\nhot,1\n").is_err());
    }

    #[test]
    fn strobe_result_picks_the_function_under_test() {
        let p = &PROGRAMS[0];
        let rows = parse_strobe_csv(
            "selection,progress,speedup,program_speedup,ci_low,ci_high,experiments\n\
             /t/causal_serial.c:38,iteration,0.5,0.2,0.1,0.3,5\n\
             /t/causal_serial.c:33,iteration,0.0,0.0,0,0,9\n\
             /t/causal_serial.c:33,iteration,0.2,0.12,0.1,0.14,5\n\
             /t/causal_serial.c:33,iteration,0.4,0.25,0.2,0.3,5\n",
        )
        .unwrap();
        let r = strobe_result(&rows, p, &[33], 1.0);
        assert_eq!(r.top.as_deref(), Some("/t/causal_serial.c:38"));
        let (sel, e, _) = r.truth.as_ref().unwrap();
        assert_eq!((sel.as_str(), *e), ("/t/causal_serial.c:33", 19));
        let (y, ci) = r.predict(0.3).unwrap();
        assert!((y - 0.185).abs() < 1e-12);
        assert_eq!(ci, None);
        assert_eq!(r.predict(0.2).unwrap().1, Some((0.1, 0.14)));
    }

    /// Lines in the format of a real Coz 0.2.2 run of causal_serial.
    const COZ: &str = "startup\ttime=1795551855269119208\n\
experiment\tselected=/t/causal_serial.c:38\tspeedup=0.00\tduration=500000000\tselected-samples=275\n\
throughput-point\tname=iteration\tdelta=500\n\
experiment\tselected=/t/causal_serial.c:33\tspeedup=0.00\tduration=500000000\tselected-samples=174\n\
throughput-point\tname=iteration\tdelta=500\n\
experiment\tselected=/t/causal_serial.c:33\tspeedup=0.00\tduration=500000000\tselected-samples=294\n\
throughput-point\tname=iteration\tdelta=500\n\
experiment\tselected=/t/causal_serial.c:33\tspeedup=0.50\tduration=350000000\tselected-samples=300\n\
throughput-point\tname=iteration\tdelta=500\n\
experiment\tselected=/t/causal_serial.c:38\tspeedup=0.50\tduration=400000000\tselected-samples=300\n\
throughput-point\tname=iteration\tdelta=500\n\
samples\tlocation=/t/causal_serial.c:33\tcount=12\n\
runtime\ttime=15000000000\n";

    #[test]
    fn coz_speedups_follow_the_viewer() {
        let prof = CozProfile::parse(COZ).unwrap();
        assert_eq!(prof.experiments["/t/causal_serial.c:33"], 3);
        // Baseline period 1 ms (1e9 ns / 1000 visits), 0.7 ms at 50%.
        let pts = prof.points("/t/causal_serial.c:33", "iteration");
        assert_eq!(pts.len(), 2);
        assert!((pts[1].1 - 0.3).abs() < 1e-12);
        let r = coz_result(&prof, &PROGRAMS[0], &[33], 15.0);
        let (sel, e, points, curve) = r.truth.unwrap();
        assert_eq!((sel.as_str(), e), ("/t/causal_serial.c:33", 3));
        assert_eq!(points, curve);
        assert!((interpolate(&curve, 0.25).unwrap() - 0.15).abs() < 1e-12);
        // Line 33 has the larger normalized area: 0.3/2 vs 0.2/2.
        assert_eq!(r.top, Some(("/t/causal_serial.c:33".to_string(), false)));
        assert!(CozProfile::parse("bogus\tx=1\n").is_err());
    }

    #[test]
    fn loess_of_a_line_is_the_line() {
        let x: Vec<f64> = (0..12).map(|i| i as f64 * 0.05).collect();
        let y: Vec<f64> = x.iter().map(|v| 0.6 * v).collect();
        let fit = loess(&x, &y, 0.4, 5).unwrap();
        for (a, b) in fit.iter().zip(&y) {
            assert!((a - b).abs() < 1e-9);
        }
        assert!(loess(&x[..4], &y[..4], 0.4, 5).is_none());
    }

    /// The same fits as science.js 1.9.3 (Coz's viewer) under node,
    /// `science.stats.loess().bandwidth(0.4).robustnessIterations(5)`.
    #[test]
    fn loess_matches_science_js() {
        let x: Vec<f64> = (0..12).map(|i| i as f64 * 0.05).collect();
        let mut y: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, v)| 0.6 * v + 0.02 * (i as f64 * 1.7).sin())
            .collect();
        y[6] += 0.1;
        let js = [
            0.004083291455189854,
            0.034519042460511254,
            0.05756053629059185,
            0.08521799463287706,
            0.12389908459347945,
            0.16596974225246983,
            0.18180350000386458,
            0.19763725775526006,
            0.2446547156542985,
            0.2735908830105595,
            0.2953126953021857,
            0.3229560159932444,
        ];
        for (a, b) in loess(&x, &y, 0.4, 5).unwrap().iter().zip(js) {
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        }
        let x: [f64; 13] = [
            0.0, 0.05, 0.1, 0.2, 0.25, 0.3, 0.45, 0.5, 0.6, 0.75, 0.85, 0.95, 1.0,
        ];
        let y: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, v)| v.min(0.33) + 0.03 * (i as f64 * 2.3).cos())
            .collect();
        let js = [
            0.013232881920779233,
            0.05455120919283745,
            0.10053188482347444,
            0.2025299897986744,
            0.25226146103582364,
            0.2818604996223093,
            0.3175586968953712,
            0.3305699293582844,
            0.33146367820909467,
            0.32595885609052216,
            0.33401395843634374,
            0.32640780593017543,
            0.32728809610415305,
        ];
        for (a, b) in loess(&x, &y, 0.4, 5).unwrap().iter().zip(js) {
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        }
    }
}
