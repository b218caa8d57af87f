//! The Coz side of the causal benchmark: running Coz on a ground-truth
//! program and computing its prediction the way Coz's own viewer does.
//!
//! Owns reading `profile.coz`, the viewer's speedup curves (LOESS
//! smoothing included) and the choice of the selection of the function
//! under test. It must never judge the prediction (the harness compares
//! it with the real speedup) nor assert figures.

use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::{selection_is_truth, tail, Curve, Program, COZ_MIN_POINTS};

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
pub(super) struct CozProfile {
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
pub(super) fn loess(
    x: &[f64],
    y: &[f64],
    bandwidth: f64,
    robustness_iters: usize,
) -> Option<Vec<f64>> {
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
pub(super) struct CozResult {
    pub(super) top: Option<(String, bool)>,
    /// The location inside the function under test with the most
    /// experiments, its experiments, its measured points and drawn curve.
    pub(super) truth: Option<(String, u64, Curve, Curve)>,
    pub(super) wall_s: f64,
}

pub(super) fn coz_result(
    profile: &CozProfile,
    p: &Program,
    lines: &[u32],
    wall_s: f64,
) -> CozResult {
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
pub(super) fn run_coz(work: &Path, prog: &Path, iterations: u64) -> Result<(CozProfile, f64)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causal::{interpolate, PROGRAMS};

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
