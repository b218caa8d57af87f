//! `strobe convert`: profile databases to Perfetto, Chrome JSON, folded
//! stacks, SVG flamegraphs, pprof, Firefox Profiler, CSV and Parquet
//! datasets.
//!
//! Owns the command's arguments (inputs default to the latest run, see
//! `run_dir`), the time window (ns, %, or markers), the output file names
//! and the report lines; every conversion is
//! strobe-export's. Outputs are written to `<name>.partial` and renamed
//! when complete, so a failed conversion never leaves a truncated file
//! under the final name; a conversion still running after a second shows
//! a progress line (bytes written, time) on a terminal. It never modifies
//! an input.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use strobe_db::atomic::{partial_path, WriteError};
use strobe_db::{Profile, TimeBound};
use strobe_export::folded::FoldOptions;
use strobe_export::Format;

/// Arguments of `strobe convert`.
#[derive(Debug, Args)]
#[command(
    after_help = "Formats: pftrace (Perfetto, ui.perfetto.dev), json (Chrome trace: chrome://tracing, Perfetto, speedscope), \
folded (folded stacks), svg (flamegraph), pprof (go tool pprof -http=: FILE), firefox (profiler.firefox.com), csv (one file per table), \
parquet (a Parquet dataset: the directory NAME.parquet, one sub-directory per table, partitioned by node and MPI rank; DuckDB, Spark, Dask, pandas).\n\
Examples:\n  strobe convert -f pftrace                         the latest run (strobe-output/latest)\n  \
strobe convert -i run/*.db -f pftrace -o run      one trace with every process\n  \
strobe convert -i app.db -f svg pprof --per-thread\n  strobe convert --diff before.db after.db -f svg"
)]
pub struct ConvertArgs {
    /// Input databases: files, directories (searched for *.db) or globs; all go into one output.
    /// Default: the latest run, `<output_dir>/latest` (`strobe-output/latest`).
    #[arg(short = 'i', long = "input", num_args = 1..)]
    pub inputs: Vec<String>,
    /// Output formats (several allowed, or comma-separated): pftrace, json, folded, svg, pprof, firefox, csv, parquet.
    #[arg(short = 'f', long = "format", num_args = 1.., required = true, value_delimiter = ',')]
    pub formats: Vec<String>,
    /// Output name, to which each format adds its extension (unless the name already ends
    /// with it: `-o run.trace.json -f json` writes run.trace.json); default: the first
    /// input's file stem, or the run's directory name when no -i is given.
    #[arg(short = 'o', long = "output")]
    pub output: Option<String>,
    /// Output directory (created if missing).
    #[arg(short = 'd', long = "dir", default_value = ".")]
    pub dir: PathBuf,
    /// Keep data from here: ns after the run start, or N%.
    #[arg(long, conflicts_with = "start_marker")]
    pub start: Option<String>,
    /// Keep data up to here: ns after the run start, or N%.
    #[arg(long, conflicts_with = "end_marker")]
    pub end: Option<String>,
    /// Keep data from the first region or marker with this name.
    #[arg(long)]
    pub start_marker: Option<String>,
    /// Keep data up to the end of the last region or marker with this name.
    #[arg(long)]
    pub end_marker: Option<String>,
    /// Folded stacks, flamegraphs: one tree per process and thread.
    #[arg(long)]
    pub per_thread: bool,
    /// Folded stacks, flamegraphs: one tree per process (default: merged).
    #[arg(long)]
    pub per_process: bool,
    /// Folded stacks, flamegraphs: add off-CPU (blocked) time under an `[off-CPU]` leaf frame,
    /// a wall-clock flame graph (default: on-CPU time only).
    #[arg(long)]
    pub off_cpu: bool,
    /// Differential flamegraph (svg) or folded diff input: before and after databases.
    #[arg(long, num_args = 2, value_names = ["A.db", "B.db"])]
    pub diff: Option<Vec<String>>,
}

/// Parses the requested formats (a clear error names an unknown one).
fn formats(a: &ConvertArgs) -> anyhow::Result<Vec<Format>> {
    let mut out = Vec::new();
    for f in &a.formats {
        let f: Format = f.parse()?;
        if !out.contains(&f) {
            out.push(f);
        }
    }
    Ok(out)
}

/// Resolves `--start-marker`/`--end-marker` to bounds after the run start.
fn marker_bound(p: &Profile, name: &str, first: bool) -> anyhow::Result<TimeBound> {
    let span = p
        .named_region_span(name)
        .with_context(|| format!("looking up marker '{name}'"))?;
    let Some((from, to)) = span else {
        bail!("no region or marker named '{name}' in the profile (list names with `strobe summary --report regions`)");
    };
    let t = if first { from } else { to };
    let start = p.run_bounds()?.map(|b| b.start).unwrap_or(0);
    Ok(TimeBound::Ns((t - start).max(0)))
}

fn apply_window(p: &mut Profile, a: &ConvertArgs) -> anyhow::Result<()> {
    let mut s = a
        .start
        .as_deref()
        .map(str::parse::<TimeBound>)
        .transpose()?;
    let mut e = a.end.as_deref().map(str::parse::<TimeBound>).transpose()?;
    if let Some(m) = &a.start_marker {
        s = Some(marker_bound(p, m, true)?);
    }
    if let Some(m) = &a.end_marker {
        e = Some(marker_bound(p, m, false)?);
    }
    if s.is_some() || e.is_some() {
        p.set_window(s, e)?;
    }
    Ok(())
}

/// A progress line for a conversion that lasts over a second: the bytes
/// written so far to the output files (read from the files themselves,
/// so no exporter reports anything) and the elapsed time, on a terminal
/// only; cleared when dropped, at once (the thread waits on a channel,
/// not a sleep, so the command ends with its conversion).
struct Progress {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start(label: String, files: Vec<PathBuf>) -> Progress {
        use std::sync::mpsc::RecvTimeoutError;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        // Whether the conversion ended while waiting `tick`.
        let ended =
            move |tick| !matches!(stopped.recv_timeout(tick), Err(RecvTimeoutError::Timeout));
        let thread = std::thread::spawn(move || {
            let tick = std::time::Duration::from_millis(100);
            if ended(std::time::Duration::from_secs(1)) {
                return;
            }
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} writing {msg} ({elapsed})")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            loop {
                let bytes: u64 = files.iter().map(|f| tree_bytes(f)).sum();
                bar.set_message(format!("{label}: {:.1} MiB", bytes as f64 / 1048576.0));
                bar.tick();
                if ended(tick) {
                    break;
                }
            }
            bar.finish_and_clear();
        });
        Progress {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // Dropping the sender wakes the thread.
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The file (or files, for CSV; the staging directory, for Parquet) a
/// format writes, `.partial` names included.
fn output_files(dir: &Path, stem: &str, f: Format) -> Vec<PathBuf> {
    if f == Format::Parquet {
        return vec![partial_path(&parquet_dir(dir, stem))];
    }
    if f == Format::Csv {
        return strobe_export::csv::TABLES
            .iter()
            .map(|t| dir.join(format!("{stem}_{t}.csv")))
            .collect();
    }
    let path = output_path(dir, stem, f);
    let partial = partial_path(&path);
    vec![path, partial]
}

/// The file a single-file format writes: `<dir>/<stem><extension>`, or
/// `<dir>/<stem>` when the stem already ends with the extension
/// (`-o run.trace.json -f json`).
fn output_path(dir: &Path, stem: &str, f: Format) -> PathBuf {
    if stem.ends_with(f.extension()) {
        dir.join(stem)
    } else {
        dir.join(format!("{stem}{}", f.extension()))
    }
}

/// The Parquet dataset directory: `<dir>/<stem>.parquet` (a stem that
/// already ends in `.parquet` is taken as is).
fn parquet_dir(dir: &Path, stem: &str) -> PathBuf {
    if stem.ends_with(".parquet") {
        dir.join(stem)
    } else {
        dir.join(format!("{stem}.parquet"))
    }
}

/// Bytes under `path`: a file's size, or a directory tree's.
fn tree_bytes(path: &Path) -> u64 {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => std::fs::read_dir(path)
            .map(|rd| rd.flatten().map(|e| tree_bytes(&e.path())).sum())
            .unwrap_or(0),
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

/// Writes through `<path>.partial`, renamed to `path` on success
/// ([`strobe_db::atomic::write_file`]).
fn with_file<T>(
    path: &Path,
    f: impl FnOnce(BufWriter<File>) -> strobe_export::Result<T>,
) -> anyhow::Result<T> {
    strobe_db::atomic::write_file(path, f).map_err(|e| match e {
        WriteError::Write(e) => {
            anyhow::Error::new(e).context(format!("writing {}", path.display()))
        }
        e => anyhow::Error::new(e),
    })
}

/// Runs `strobe convert` (on the latest run when neither `-i` nor
/// `--diff` is given).
pub fn run(mut a: ConvertArgs) -> anyhow::Result<()> {
    let fmts = formats(&a)?;
    if a.inputs.is_empty() && a.diff.is_none() {
        let run = crate::run_dir::default_input()?;
        if a.output.is_none() {
            a.output = run.file_name().map(|n| n.to_string_lossy().into_owned());
        }
        a.inputs = vec![run.display().to_string()];
    }
    std::fs::create_dir_all(&a.dir)
        .with_context(|| format!("cannot create output directory {}", a.dir.display()))?;
    let fold = FoldOptions {
        per_process: a.per_process,
        per_thread: a.per_thread,
        off_cpu: a.off_cpu,
    };
    if let Some(d) = &a.diff {
        return run_diff(&a, &fmts, &d[0], &d[1], fold);
    }
    let opened = Instant::now();
    let mut p = crate::progress::open_profile(&a.inputs)?;
    apply_window(&mut p, &a)?;
    let stem = a.output.clone().unwrap_or_else(|| {
        p.files()
            .first()
            .and_then(|f| f.file_stem())
            .and_then(|s| s.to_str())
            .unwrap_or("strobe")
            .to_string()
    });
    if !p.has_events().context("reading the profile")? {
        bail!(
            "{}: no regions, samples or counters{} (was the program profiled with `strobe sample`, or did it exit before writing?)",
            a.inputs.join(" "),
            if a.start.is_some() || a.end.is_some() || a.start_marker.is_some() || a.end_marker.is_some() {
                " in the chosen window"
            } else {
                ""
            }
        );
    }
    for (k, f) in fmts.into_iter().enumerate() {
        // The first conversion's time includes opening the inputs.
        let t0 = if k == 0 { opened } else { Instant::now() };
        let path = output_path(&a.dir, &stem, f);
        let progress = Progress::start(f.name().to_string(), output_files(&a.dir, &stem, f));
        let what = match f {
            Format::Perfetto => {
                let s = with_file(&path, |w| strobe_export::perfetto::write_perfetto(&p, w))?;
                format!(
                    "{} events ({} slices, {} instants, {} samples, {} counter values)",
                    s.events, s.slices, s.instants, s.samples, s.counter_values
                )
            }
            Format::Chrome => {
                let s = with_file(&path, |w| strobe_export::chrome::write_chrome(&p, w))?;
                format!(
                    "{} regions, {} instants, {} samples, {} counter values",
                    s.regions, s.instants, s.samples, s.counters
                )
            }
            Format::Folded => {
                let n = with_file(&path, |w| strobe_export::folded::write_folded(&p, fold, w))?;
                format!("{n} samples")
            }
            Format::Svg => {
                let title = format!("strobe: {stem}");
                let n = with_file(&path, |w| {
                    strobe_export::folded::write_flamegraph(&p, fold, &title, w)
                })?;
                format!("{n} samples")
            }
            Format::Pprof => {
                let s = with_file(&path, |w| strobe_export::pprof::write_pprof(&p, w))?;
                format!(
                    "{} samples in {} stacks, period {} ns",
                    s.samples, s.entries, s.period_ns
                )
            }
            Format::Firefox => {
                let s = with_file(&path, |w| strobe_export::firefox::write_firefox(&p, w))?;
                format!(
                    "{} threads, {} samples, {} markers",
                    s.threads, s.samples, s.markers
                )
            }
            Format::Parquet => {
                let dir = parquet_dir(&a.dir, &stem);
                let s = strobe_export::parquet::write_parquet(&p, &dir)
                    .with_context(|| format!("writing {}", dir.display()))?;
                drop(progress);
                let list: Vec<String> = s
                    .tables
                    .iter()
                    .map(|t| format!("{} {}", t.rows, t.table))
                    .collect();
                let secs = t0.elapsed().as_secs_f64();
                eprintln!(
                    "wrote {}/ (rows: {}) in {secs:.2} s, {:.2} M rows/s",
                    dir.display(),
                    list.join(", "),
                    s.total_rows() as f64 / secs.max(1e-9) / 1e6
                );
                continue;
            }
            Format::Csv => {
                let files = strobe_export::csv::write_csv(&p, &a.dir, &stem)?;
                drop(progress);
                let list: Vec<String> = files
                    .iter()
                    .map(|(f, n)| {
                        format!(
                            "{} ({n} rows)",
                            f.file_name().and_then(|s| s.to_str()).unwrap_or("?")
                        )
                    })
                    .collect();
                eprintln!(
                    "wrote {} in {:.2} s",
                    list.join(", "),
                    t0.elapsed().as_secs_f64()
                );
                continue;
            }
        };
        drop(progress);
        eprintln!(
            "wrote {} ({what}) in {:.2} s",
            path.display(),
            t0.elapsed().as_secs_f64()
        );
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        if let Some(warning) = f.too_large(&path, bytes) {
            say!("strobe: {warning}");
        }
    }
    Ok(())
}

fn run_diff(
    a: &ConvertArgs,
    fmts: &[Format],
    before: &str,
    after: &str,
    fold: FoldOptions,
) -> anyhow::Result<()> {
    if !a.inputs.is_empty() {
        bail!("--diff takes its two databases itself; drop -i/--input");
    }
    let mut pa = Profile::open(&[before]).with_context(|| format!("opening {before}"))?;
    let mut pb = Profile::open(&[after]).with_context(|| format!("opening {after}"))?;
    apply_window(&mut pa, a)?;
    apply_window(&mut pb, a)?;
    let stem = a.output.clone().unwrap_or_else(|| {
        let s = |x: &str| {
            Path::new(x)
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("db")
                .to_string()
        };
        format!("{}-vs-{}", s(before), s(after))
    });
    for f in fmts {
        let t0 = Instant::now();
        match f {
            Format::Svg => {
                let path = a.dir.join(format!("{stem}.diff.svg"));
                let title = format!("strobe diff: {before} → {after}");
                let (x, y) = with_file(&path, |w| strobe_export::folded::write_diff_flamegraph(&pa, &pb, fold, &title, w))?;
                eprintln!("wrote {} ({x} → {y} samples) in {:.2} s", path.display(), t0.elapsed().as_secs_f64());
            }
            Format::Folded => {
                for (p, tag) in [(&pa, "before"), (&pb, "after")] {
                    let path = a.dir.join(format!("{stem}.{tag}.folded"));
                    let n = with_file(&path, |w| strobe_export::folded::write_folded(p, fold, w))?;
                    eprintln!("wrote {} ({n} samples)", path.display());
                }
            }
            other => bail!(
                "--diff produces svg (differential flamegraph) or folded stacks, not {}; convert each database separately for other formats",
                other.name()
            ),
        }
    }
    Ok(())
}
