//! The strobe side of the causal benchmark: running `strobe causal` on
//! a ground-truth program and reading its predictions.
//!
//! Owns parsing `strobe causal report --csv` and choosing the row of the
//! function under test. It must never judge the prediction (the harness
//! compares it with the real speedup) nor assert figures.

use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::{interpolate, selection_is_truth, tail, Curve, Program};

/// One row of `strobe causal report --csv`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct StrobeRow {
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
pub(super) fn parse_strobe_csv(text: &str) -> Result<Vec<StrobeRow>> {
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
pub(super) struct StrobeResult {
    /// The report's first selection (the report lists them by rank).
    pub(super) top: Option<String>,
    /// The selection inside the function under test with the most
    /// experiments, its experiments, and its curve with intervals.
    pub(super) truth: Option<(String, u64, Vec<StrobePoint>)>,
    pub(super) wall_s: f64,
}

impl StrobeResult {
    pub(super) fn predict(&self, s: f64) -> Option<(f64, Option<(f64, f64)>)> {
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
pub(super) fn strobe_result(
    rows: &[StrobeRow],
    p: &Program,
    lines: &[u32],
    wall_s: f64,
) -> StrobeResult {
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
pub(super) fn run_strobe(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causal::PROGRAMS;

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
}
