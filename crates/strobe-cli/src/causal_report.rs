//! `strobe causal report`: what causal profiling (Coz's method) found.
//!
//! Owns the subcommand's arguments, the ranked table, the CSV of curve
//! points, the speedup-curve SVG (hand-written) and writing Coz's
//! `profile.coz`; the numbers and the `profile.coz` text come from
//! `strobe_db::causal`. It reads databases and writes only its two output
//! files (each through a temporary file renamed into place); it never
//! modifies a database. `docs/causal-report.md` explains the numbers.

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use strobe_db::causal::{self, AnalysisOptions, Baseline, Curve, CurvePoint};
use strobe_db::DbError;

use crate::output::{Cell, Format, TableOut};

/// Arguments of `strobe causal report`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Input databases: files, directories (searched recursively for *.db)
    /// or globs. Experiments of every process, variant and run found are
    /// pooled. Default: the latest run (`<output_dir>/latest`), as the
    /// other commands read.
    #[arg(short = 'i', long = "input", num_args = 1.., value_name = "PATH")]
    pub inputs: Vec<String>,
    /// Only this progress point (default: every one, each selection and
    /// progress point ranked on its own).
    #[arg(long, value_name = "NAME")]
    pub progress: Option<String>,
    /// Show the N selections with the highest impact (table and CSV); 0
    /// shows all.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    /// Print one CSV row per curve point instead of the table:
    /// `selection,progress,speedup,program_speedup,ci_low,ci_high,experiments`.
    #[arg(long)]
    pub csv: bool,
    /// Write the speedup curves of the top 6 selections here (default:
    /// `causal.svg` in the first input directory, or beside the database).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write Coz's `profile.coz` here, for Coz's viewer (default:
    /// `profile.coz` in the first input directory, or beside the database).
    #[arg(long, value_name = "FILE")]
    pub coz: Option<PathBuf>,
    /// Write neither default file (an explicit --svg or --coz is still
    /// written).
    #[arg(long)]
    pub no_files: bool,
    /// Print nothing (errors are still returned): `strobe causal -q`
    /// writes the files without the report.
    #[arg(skip)]
    pub quiet: bool,
}

/// The header of `--csv`; scripts parse it, keep it exactly so.
pub const CSV_HEADER: &str =
    "selection,progress,speedup,program_speedup,ci_low,ci_high,experiments";

/// Curves drawn in the SVG.
const SVG_CURVES: usize = 6;

/// Runs `strobe causal report`, the table (or CSV) on stdout.
pub fn run(args: &ReportArgs) -> anyhow::Result<()> {
    run_to(args, &mut std::io::stdout().lock())
}

/// Runs `strobe causal report` with the table (or CSV) written to `out`
/// (after `strobe causal`: stderr, stdout is the program's).
pub fn run_to(args: &ReportArgs, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let inputs = if args.inputs.is_empty() {
        vec![crate::run_dir::default_input()?.display().to_string()]
    } else {
        args.inputs.clone()
    };
    let where_ = inputs.join(", ");
    let no_experiments = || {
        anyhow::anyhow!("no causal experiments in {where_}: run `strobe causal -- PROGRAM` first")
    };
    let files = match strobe_db::inputs::expand_inputs(&inputs) {
        Ok(f) => f,
        Err(DbError::NoInput { .. }) => return Err(no_experiments()),
        Err(e) => return Err(e.into()),
    };
    let data = causal::load_files(&files)?;
    if data.experiment_count() == 0 {
        return Err(no_experiments());
    }
    if let Some(p) = &args.progress {
        let points = data.progress_points();
        if !points.iter().any(|(n, _)| n == p) {
            let names: Vec<String> = points.iter().map(|(n, k)| format!("{n} ({k})")).collect();
            bail!(
                "no progress point named `{p}` in {where_}; the experiments measured: {} (omit --progress for all)",
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            );
        }
    }
    let analysis = causal::analyze(
        &data,
        &AnalysisOptions {
            progress: args.progress.clone(),
            ..AnalysisOptions::default()
        },
    );
    if !args.quiet {
        print_report(args, &data, &analysis, files.len(), out)?;
    }
    let dir = output_dir(&inputs, &files);
    let svg = args
        .svg
        .clone()
        .or_else(|| (!args.no_files).then(|| dir.join("causal.svg")));
    let coz = args
        .coz
        .clone()
        .or_else(|| (!args.no_files).then(|| dir.join("profile.coz")));
    if let Some(path) = svg {
        let text = svg_curves(&analysis.curves[..analysis.curves.len().min(SVG_CURVES)]);
        write_file(&path, text.as_bytes())?;
        if !args.quiet {
            say!("strobe: wrote {}", path.display());
        }
    }
    if let Some(path) = coz {
        let mut text = Vec::new();
        causal::write_coz_profile(&data, &mut text)?;
        write_file(&path, &text)?;
        if !args.quiet {
            eprintln!(
                "strobe: wrote {} (load it in Coz's viewer, https://plasma-umass.org/coz/)",
                path.display()
            );
        }
    }
    Ok(())
}

/// The line counting the experiments (stderr), then the ranked table or
/// the CSV (`out`) of the top curves.
fn print_report(
    args: &ReportArgs,
    data: &causal::CausalData,
    analysis: &causal::Analysis,
    databases: usize,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    eprintln!(
        "strobe: {} causal experiments from {} process{} in {} database{}; {} curve{} ranked{}",
        data.experiment_count(),
        data.processes.len(),
        if data.processes.len() == 1 { "" } else { "es" },
        databases,
        if databases == 1 { "" } else { "s" },
        analysis.curves.len(),
        if analysis.curves.len() == 1 { "" } else { "s" },
        if analysis.left_out > 0 {
            format!(
                ", {} left out (fewer than 2 distinct non-zero speedups measured, or no valid baseline: run longer or more often)",
                analysis.left_out
            )
        } else {
            String::new()
        }
    );
    let shown = if args.top == 0 {
        &analysis.curves[..]
    } else {
        &analysis.curves[..analysis.curves.len().min(args.top)]
    };

    if args.csv {
        write_csv(shown, out)?;
    } else {
        write_table(shown, out)?;
    }
    out.flush()?;
    Ok(())
}

/// Where the default files go: the first input if it is a directory, else
/// the directory of the first database.
fn output_dir(inputs: &[String], files: &[PathBuf]) -> PathBuf {
    let first = Path::new(&inputs[0]);
    if first.is_dir() {
        return first.to_path_buf();
    }
    match files.first().and_then(|f| f.parent()) {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes `bytes` to `path` through a temporary file beside it, so a
/// reader never sees half a file.
fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
        .with_context(|| {
            format!(
                "cannot write {} (check that its directory exists and is writable, or pass --no-files)",
                path.display()
            )
        })
}

/// `+12.3%`.
fn pct(v: f64) -> String {
    let s = format!("{:+.1}%", v * 100.0);
    if s == "-0.0%" {
        "+0.0%".into()
    } else {
        s
    }
}

/// Two decimals, without the sign of a value that rounds to zero.
fn two(v: f64) -> String {
    let s = format!("{v:.2}");
    if s == "-0.00" {
        "0.00".into()
    } else {
        s
    }
}

/// The impact column: slope and its interval.
fn impact(c: &Curve) -> String {
    format!(
        "{} [{}, {}]",
        two(c.slope),
        two(c.slope_low),
        two(c.slope_high)
    )
}

/// Names longer than this are elided in the middle in the table.
const NAME_WIDTH: usize = 60;

fn elide(name: &str, width: usize) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= width {
        return name.to_string();
    }
    let keep = (width - 1) / 2;
    let head: String = chars[..keep].iter().collect();
    let tail: String = chars[chars.len() - keep..].iter().collect();
    format!("{head}…{tail}")
}

fn write_table(curves: &[Curve], out: &mut dyn Write) -> anyhow::Result<()> {
    let columns: Vec<String> = [
        "Rank",
        "Selection",
        "Progress",
        "Impact (slope, 95% CI)",
        "Program Speedup at Max",
        "Experiments",
        "Samples",
    ]
    .map(String::from)
    .to_vec();
    let mut t = TableOut::begin(Format::Table, out, &columns)?;
    for (k, c) in curves.iter().enumerate() {
        let at_max = c.at_largest().map_or(String::new(), |p| {
            format!("{} at {:.0}%", pct(p.program_speedup), p.speedup * 100.0)
        });
        let progress = if c.baseline == Baseline::Pooled {
            format!("{} (pooled baseline)", c.progress)
        } else {
            c.progress.clone()
        };
        t.row(&[
            Cell::Int(k as i64 + 1),
            Cell::Text(elide(&c.selection, NAME_WIDTH)),
            Cell::Text(progress),
            Cell::Text(impact(c)),
            Cell::Text(at_max),
            Cell::Int(c.experiments as i64),
            Cell::Int(c.selected_samples as i64),
        ])?;
    }
    t.end()?;
    Ok(())
}

/// A CSV field, quoted as RFC 4180 says when it must be.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn write_csv(curves: &[Curve], out: &mut dyn Write) -> anyhow::Result<()> {
    writeln!(out, "{CSV_HEADER}")?;
    for c in curves {
        for p in &c.points {
            writeln!(
                out,
                "{},{},{},{:.6},{:.6},{:.6},{}",
                csv_field(&c.selection),
                csv_field(&c.progress),
                p.speedup,
                p.program_speedup,
                p.ci_low,
                p.ci_high,
                p.experiments
            )?;
        }
    }
    Ok(())
}

/// Text for SVG: `&`, `<`, `>` and quotes escaped.
fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// A step of 1, 2, 2.5 or 5 × 10^k near `range / 5`.
fn nice_step(range: f64) -> f64 {
    let raw = (range / 5.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// Width of one panel of the SVG (px).
const PANEL_W: f64 = 380.0;
/// Height of one panel (px).
const PANEL_H: f64 = 270.0;
/// Height of the title line above the panels (px).
const HEAD: f64 = 40.0;
/// Margins of a panel's plot: left, right, top and bottom (px).
const LEFT: f64 = 62.0;
const RIGHT: f64 = 18.0;
const TOP: f64 = 52.0;
const BOTTOM: f64 = 42.0;

/// The speedup curves of `curves` (at most [`SVG_CURVES`]): one panel each,
/// x = the selection's virtual speedup (0–100%), y = program speedup (%,
/// one scale for all panels), each point with its 95% interval, and the
/// fitted line through the origin.
fn svg_curves(curves: &[Curve]) -> String {
    let cols = curves.len().clamp(1, 3);
    let rows = curves.len().div_ceil(3).max(1);
    let width = PANEL_W * cols as f64;
    let height = HEAD + PANEL_H * rows as f64;
    let scale = YScale::of(curves);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">
<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>
<text x="{x}" y="24" font-size="15" text-anchor="middle">Causal profile: program speedup if the selection ran faster (95% intervals, fitted slope)</text>"##,
        x = width / 2.0
    );
    if curves.is_empty() {
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="middle">No selection was measured at 2 or more non-zero speedups yet: run longer or more often.</text>"##,
            width / 2.0,
            HEAD + PANEL_H / 2.0
        );
    }
    for (k, c) in curves.iter().enumerate() {
        Panel::at(k, &scale).draw(&mut s, k, c);
    }
    s.push_str("</svg>\n");
    s
}

/// The y axis every panel shares, as Coz's viewer draws them: from `lo`
/// to `hi` (program speedup, multiples of `step`) over every point, its
/// interval and the fitted line.
struct YScale {
    lo: f64,
    hi: f64,
    step: f64,
}

impl YScale {
    fn of(curves: &[Curve]) -> YScale {
        let (mut lo, mut hi) = (0.0f64, 0.0f64);
        for c in curves {
            for p in &c.points {
                for v in [p.program_speedup, p.ci_low, p.ci_high] {
                    if v.is_finite() {
                        lo = lo.min(v);
                        hi = hi.max(v);
                    }
                }
            }
            if let Some(p) = c.at_largest() {
                let fit = c.slope * p.speedup;
                if fit.is_finite() {
                    lo = lo.min(fit);
                    hi = hi.max(fit);
                }
            }
        }
        if hi - lo < 1e-6 {
            lo -= 0.1;
            hi += 0.1;
        }
        let step = nice_step(hi - lo);
        YScale {
            lo: (lo / step).floor() * step,
            hi: (hi / step).ceil() * step,
            step,
        }
    }
}

/// Where panel `k` lies: its corner (`ox`, `oy`), its plot's corner
/// (`x0`, `y0`) and size (`pw`, `ph`), and the y scale.
struct Panel<'a> {
    ox: f64,
    oy: f64,
    x0: f64,
    y0: f64,
    pw: f64,
    ph: f64,
    y: &'a YScale,
}

impl Panel<'_> {
    /// Panel `k`: three to a row.
    fn at(k: usize, y: &YScale) -> Panel<'_> {
        let ox = PANEL_W * (k % 3) as f64;
        let oy = HEAD + PANEL_H * (k / 3) as f64;
        Panel {
            ox,
            oy,
            x0: ox + LEFT,
            y0: oy + TOP,
            pw: PANEL_W - LEFT - RIGHT,
            ph: PANEL_H - TOP - BOTTOM,
            y,
        }
    }

    /// The x of a selection speedup `v` (0–1).
    fn xs(&self, v: f64) -> f64 {
        self.x0 + v * self.pw
    }

    /// The y of a program speedup `v`.
    fn ys(&self, v: f64) -> f64 {
        self.y0 + (self.y.hi - v) / (self.y.hi - self.y.lo) * self.ph
    }

    /// Curve `c`, the `k`-th, in this panel: titles, grid and axes, the
    /// fitted line and the points.
    fn draw(&self, s: &mut String, k: usize, c: &Curve) {
        let _ = writeln!(s, r##"<g class="curve" id="curve{}">"##, k + 1);
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" font-size="12" font-weight="bold"><title>{}</title>{}. {}</text>"##,
            self.ox + 10.0,
            self.oy + 16.0,
            xml(&c.selection),
            k + 1,
            xml(&elide(&c.selection, 52))
        );
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}">{} ({}) · impact {}</text>"##,
            self.ox + 10.0,
            self.oy + 32.0,
            xml(&elide(&c.progress, 30)),
            c.kind,
            xml(&impact(c))
        );
        self.grid(s);
        self.fit(s, k, c.slope);
        for p in &c.points {
            self.point(s, p);
        }
        let _ = writeln!(s, "</g>");
    }

    /// Grid, axes, tick labels and axis titles.
    fn grid(&self, s: &mut String) {
        let (x0, y0, pw, ph) = (self.x0, self.y0, self.pw, self.ph);
        let step = self.y.step;
        let mut v = self.y.lo;
        while v <= self.y.hi + step / 2.0 {
            let y = self.ys(v);
            let stroke = if v.abs() < step / 2.0 {
                "#888"
            } else {
                "#e4e4e4"
            };
            let _ = writeln!(
                s,
                r##"<line x1="{x0}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{stroke}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{:.0}%</text>"##,
                x0 + pw,
                x0 - 5.0,
                y + 4.0,
                v * 100.0
            );
            v += step;
        }
        for t in [0.0, 0.25, 0.5, 0.75, 1.0] {
            let x = self.xs(t);
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{:.1}" stroke="#e4e4e4"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{:.0}%</text>"##,
                y0 + ph,
                y0 + ph + 14.0,
                t * 100.0
            );
        }
        let _ = writeln!(
            s,
            r##"<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>
<text x="{:.1}" y="{:.1}" text-anchor="middle">speedup of the selection</text>
<text x="{:.1}" y="{:.1}" text-anchor="middle" transform="rotate(-90 {:.1} {:.1})">program speedup</text>"##,
            x0 + pw / 2.0,
            y0 + ph + 32.0,
            self.ox + 14.0,
            y0 + ph / 2.0,
            self.ox + 14.0,
            y0 + ph / 2.0
        );
    }

    /// The fitted line of slope `slope` (the `k`-th curve's), clipped to
    /// the plot.
    fn fit(&self, s: &mut String, k: usize, slope: f64) {
        let (x0, y0, pw, ph) = (self.x0, self.y0, self.pw, self.ph);
        let _ = writeln!(
            s,
            r##"<clipPath id="clip{n}"><rect x="{x0}" y="{y0}" width="{pw}" height="{ph}"/></clipPath>
<line class="fit" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#d62728" stroke-width="1.5" stroke-dasharray="5 3" clip-path="url(#clip{n})"/>"##,
            self.xs(0.0),
            self.ys(0.0),
            self.xs(1.0),
            self.ys(slope),
            n = k + 1
        );
    }

    /// One measured point with its interval, and its numbers as a tooltip.
    fn point(&self, s: &mut String, p: &CurvePoint) {
        let x = self.xs(p.speedup);
        let (yl, yh, y) = (
            self.ys(p.ci_low),
            self.ys(p.ci_high),
            self.ys(p.program_speedup),
        );
        let _ = writeln!(
            s,
            r##"<g class="point"><title>speedup {:.0}%: program speedup {} [{}, {}], {} experiment{}</title><line x1="{x:.1}" y1="{yl:.1}" x2="{x:.1}" y2="{yh:.1}" stroke="#1f77b4"/><line x1="{:.1}" y1="{yl:.1}" x2="{:.1}" y2="{yl:.1}" stroke="#1f77b4"/><line x1="{:.1}" y1="{yh:.1}" x2="{:.1}" y2="{yh:.1}" stroke="#1f77b4"/><circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="#1f77b4"/></g>"##,
            p.speedup * 100.0,
            pct(p.program_speedup),
            pct(p.ci_low),
            pct(p.ci_high),
            p.experiments,
            if p.experiments == 1 { "" } else { "s" },
            x - 3.0,
            x + 3.0,
            x - 3.0,
            x + 3.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(1.0), 0.2);
        assert_eq!(nice_step(0.5), 0.1);
        assert!((nice_step(0.12) - 0.025).abs() < 1e-12);
    }

    #[test]
    fn escapes() {
        assert_eq!(xml("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(csv_field("f(int, int)"), "\"f(int, int)\"");
        assert_eq!(elide("abcdefghij", 5), "ab…ij");
        assert_eq!(two(-0.001), "0.00");
        assert_eq!(two(-0.006), "-0.01");
    }
}
