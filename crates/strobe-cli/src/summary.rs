//! `strobe summary`: Nsight-style summary tables.
//!
//! Owns the command's arguments (inputs default to the latest run, see
//! `run_dir`) and printing; the numbers come from
//! strobe-db's `summary` module. Columns follow Nsight Systems' `stats`
//! layout: Time (%), Total Time (ns), Instances, Avg, Med, Min, Max,
//! StdDev, Name, sorted by total time.

use std::io::Write;

use clap::{Args, ValueEnum};
use strobe_db::summary::{
    function_summary, region_summary, thread_summary, FunctionRow, StatRow, ThreadRow,
};

use crate::output::{Cell, Format, TableOut};

/// Which tables to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Report {
    /// All of them.
    All,
    /// Regions by name.
    Regions,
    /// Sampled functions (self and inclusive).
    Functions,
    /// Threads.
    Threads,
}

/// Output formats of `strobe summary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SummaryFormat {
    /// Aligned tables.
    Table,
    /// CSV, one block per table, each preceded by a `# name` line.
    Csv,
    /// One JSON object with one array per table.
    Json,
}

/// Arguments of `strobe summary`.
#[derive(Debug, Clone, Args)]
pub struct SummaryArgs {
    /// Input databases: files, directories (searched for *.db) or globs.
    /// Default: the latest run, `<output_dir>/latest` (`strobe-output/latest`).
    #[arg(short = 'i', long = "input", num_args = 1..)]
    pub inputs: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: SummaryFormat,
    /// Which tables.
    #[arg(long, value_enum, default_value = "all")]
    pub report: Report,
    /// Print at most this many rows per table, and per process with
    /// `--by-process` (after sorting; shares stay relative to all rows).
    /// 0 prints every row.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Print names whole (tables elide the middle of names longer than
    /// 80 characters).
    #[arg(long)]
    pub wide: bool,
    /// One set of rows per process (shares within each process).
    #[arg(long)]
    pub by_process: bool,
    /// Summarize the databases of several runs (`strobe sample`
    /// invocations) as one; by default each run gets its own tables.
    #[arg(long)]
    pub merge_runs: bool,
    /// Restrict to a window from here (ns after the run start, or %).
    #[arg(long)]
    pub start: Option<String>,
    /// Restrict to a window up to here (ns after the run start, or %).
    #[arg(long)]
    pub end: Option<String>,
}

fn proc_cols(by: bool) -> Vec<String> {
    if by {
        vec!["PID".into()]
    } else {
        Vec::new()
    }
}

fn region_table(rows: &[StatRow], by: bool) -> (Vec<String>, Vec<Vec<Cell>>) {
    let mut cols = proc_cols(by);
    cols.extend(
        [
            "Time (%)",
            "Total Time (ns)",
            "Instances",
            "Avg (ns)",
            "Med (ns)",
            "Min (ns)",
            "Max (ns)",
            "StdDev (ns)",
            "Name",
        ]
        .map(String::from),
    );
    let body = rows
        .iter()
        .map(|r| {
            let mut c = if by {
                vec![r.pid.map_or(Cell::Null, Cell::Int)]
            } else {
                Vec::new()
            };
            c.extend([
                Cell::Fixed(r.time_pct, 1),
                Cell::Int(r.total_ns),
                Cell::Int(r.instances as i64),
                Cell::Fixed(r.avg_ns, 1),
                Cell::Fixed(r.med_ns, 1),
                Cell::Int(r.min_ns),
                Cell::Int(r.max_ns),
                Cell::Fixed(r.stddev_ns, 1),
                Cell::Text(r.name.clone()),
            ]);
            c
        })
        .collect();
    (cols, body)
}

/// Names (the last column) longer than this are elided in the middle in
/// tables (`--wide` prints them whole).
const NAME_WIDTH: usize = 80;

/// `row` with its name cut to [`NAME_WIDTH`] characters: its start and its
/// end, joined by `…` (C++ names differ at both ends).
fn elide_name(row: &[Cell]) -> Vec<Cell> {
    let mut row = row.to_vec();
    if let Some(Cell::Text(name)) = row.last_mut() {
        let chars: Vec<char> = name.chars().collect();
        if chars.len() > NAME_WIDTH {
            let keep = (NAME_WIDTH - 1) / 2;
            let head: String = chars[..keep].iter().collect();
            let tail: String = chars[chars.len() - keep..].iter().collect();
            *name = format!("{head}…{tail}");
        }
    }
    row
}

/// Milliseconds, one decimal.
fn ms(ns: u64) -> Cell {
    Cell::Fixed(ns as f64 / 1e6, 1)
}

/// `all_columns`: the off-CPU columns even without off-CPU samples (CSV
/// keeps one layout for scripts; tables leave empty columns out).
fn function_table(
    rows: &[FunctionRow],
    by: bool,
    all_columns: bool,
) -> (Vec<String>, Vec<Vec<Cell>>) {
    let off_cpu = all_columns || rows.iter().any(|r| r.off_cpu_total_ns > 0);
    let mut cols = proc_cols(by);
    cols.extend(
        [
            "Self (%)",
            "Self (ms)",
            "Total (%)",
            "Total (ms)",
            "Self Samples",
        ]
        .map(String::from),
    );
    if off_cpu {
        cols.extend(["Off-CPU Self (ms)", "Off-CPU Total (ms)"].map(String::from));
    }
    cols.push("Name".into());
    let body = rows
        .iter()
        .map(|r| {
            let mut c = if by {
                vec![r.pid.map_or(Cell::Null, Cell::Int)]
            } else {
                Vec::new()
            };
            c.extend([
                Cell::Fixed(r.self_pct, 1),
                ms(r.self_ns),
                Cell::Fixed(r.total_pct, 1),
                ms(r.total_ns),
                Cell::Int(r.self_samples as i64),
            ]);
            if off_cpu {
                c.extend([ms(r.off_cpu_self_ns), ms(r.off_cpu_total_ns)]);
            }
            c.push(Cell::Text(r.name.clone()));
            c
        })
        .collect();
    (cols, body)
}

fn thread_table(rows: &[ThreadRow], all_columns: bool) -> (Vec<String>, Vec<Vec<Cell>>) {
    let off_cpu = all_columns || rows.iter().any(|r| r.off_cpu_ns > 0);
    let mut cols = ["Sampled (%)", "Sampled (ms)", "Samples"]
        .map(String::from)
        .to_vec();
    if off_cpu {
        cols.push("Off-CPU (ms)".into());
    }
    cols.extend(
        [
            "Regions",
            "Region Time (ns)",
            "Lifetime (ns)",
            "PID",
            "TID",
            "Name",
        ]
        .map(String::from),
    );
    let body = rows
        .iter()
        .map(|r| {
            let mut c = vec![
                Cell::Fixed(r.sample_pct, 1),
                ms(r.sampled_ns),
                Cell::Int(r.samples as i64),
            ];
            if off_cpu {
                c.push(ms(r.off_cpu_ns));
            }
            c.extend([
                Cell::Int(r.regions as i64),
                Cell::Int(r.region_total_ns),
                r.lifetime_ns.map_or(Cell::Null, Cell::Int),
                Cell::Int(r.pid),
                Cell::Int(r.tid),
                r.name.clone().map_or(Cell::Null, Cell::Text),
            ]);
            c
        })
        .collect();
    (cols, body)
}

/// Runs `strobe summary` (on the latest run when no `-i` is given).
pub fn run(mut a: SummaryArgs) -> anyhow::Result<()> {
    if a.inputs.is_empty() {
        a.inputs = vec![crate::run_dir::default_input()?.display().to_string()];
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let runs = runs_of(&strobe_db::inputs::expand_inputs(&a.inputs)?);
    if a.merge_runs || runs.len() < 2 {
        render(&a, &mut out)?;
    } else if a.format == SummaryFormat::Json {
        anyhow::bail!(
            "the inputs hold {} runs ({} …): give one run's directory, or --merge-runs to \
             summarize them as one",
            runs.len(),
            runs[0].0.display()
        );
    } else {
        for (k, (run, files)) in runs.iter().enumerate() {
            if k > 0 {
                writeln!(out)?;
            }
            let what = if a.format == SummaryFormat::Csv {
                "# run"
            } else {
                "Run"
            };
            writeln!(out, "{what} {} ({} databases):", run.display(), files.len())?;
            let one = SummaryArgs {
                inputs: files.iter().map(|f| f.display().to_string()).collect(),
                ..a.clone()
            };
            render(&one, &mut out)?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Database files grouped by run: the directory that holds
/// `<host>/<pid>.db` (files laid out otherwise group by their
/// grandparent directory too), in path order.
fn runs_of(files: &[std::path::PathBuf]) -> Vec<(std::path::PathBuf, Vec<std::path::PathBuf>)> {
    let mut runs: std::collections::BTreeMap<std::path::PathBuf, Vec<std::path::PathBuf>> =
        Default::default();
    for f in files {
        let run = f
            .parent()
            .and_then(std::path::Path::parent)
            .unwrap_or(std::path::Path::new(""));
        runs.entry(run.to_path_buf()).or_default().push(f.clone());
    }
    runs.into_iter().collect()
}

/// Writes the summary tables of `a` to `out` (`strobe sample` prints them
/// to stderr after a run).
pub fn render(a: &SummaryArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut profile = strobe_db::Profile::open(&a.inputs)?;
    crate::query::apply_window(&mut profile, a.start.as_deref(), a.end.as_deref())?;
    let want = |r: Report| a.report == Report::All || a.report == r;
    let regions = if want(Report::Regions) {
        Some(region_summary(&profile, a.by_process)?)
    } else {
        None
    };
    let functions = if want(Report::Functions) {
        Some(function_summary(&profile, a.by_process)?)
    } else {
        None
    };
    let threads = if want(Report::Threads) {
        Some(thread_summary(&profile, a.by_process)?)
    } else {
        None
    };
    if a.format == SummaryFormat::Json {
        let mut obj = serde_json::Map::new();
        if let Some(r) = &regions {
            obj.insert("regions".into(), serde_json::to_value(r)?);
        }
        if let Some(f) = &functions {
            obj.insert("functions".into(), serde_json::to_value(f)?);
        }
        if let Some(t) = &threads {
            obj.insert("threads".into(), serde_json::to_value(t)?);
        }
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&serde_json::Value::Object(obj))?
        )?;
        return Ok(());
    }
    let fmt = if a.format == SummaryFormat::Csv {
        Format::Csv
    } else {
        Format::Table
    };
    // `--limit` counts rows per process with `--by-process`.
    let by = |pid: Option<i64>| if a.by_process { pid } else { None };
    let mut tables = Vec::new();
    if let Some(r) = &regions {
        let groups: Vec<_> = r.iter().map(|x| by(x.pid)).collect();
        tables.push(("regions", "Regions", region_table(r, a.by_process), groups));
    }
    if let Some(f) = &functions {
        tables.push((
            "functions",
            "Sampled functions (self = innermost frame, total = anywhere on the stack; \
             time = the samples' weights, off-CPU = blocked)",
            function_table(f, a.by_process, fmt == Format::Csv),
            f.iter().map(|x| by(x.pid)).collect(),
        ));
    }
    if let Some(t) = &threads {
        let groups = t.iter().map(|x| by(Some(x.pid))).collect();
        tables.push((
            "threads",
            "Threads",
            thread_table(t, fmt == Format::Csv),
            groups,
        ));
    }
    for (k, (id, title, (cols, body), groups)) in tables.into_iter().enumerate() {
        if k > 0 {
            writeln!(out)?;
        }
        if fmt == Format::Csv {
            writeln!(out, "# {id}")?;
        } else {
            writeln!(out, "{title}:")?;
        }
        if body.is_empty() && fmt == Format::Table {
            writeln!(out, "  (none)")?;
            continue;
        }
        let mut t = TableOut::begin(fmt, &mut *out, &cols)?;
        let mut shown: std::collections::HashMap<Option<i64>, usize> = Default::default();
        for (r, group) in body.iter().zip(groups) {
            let n = shown.entry(group).or_default();
            if a.limit != 0 && *n >= a.limit {
                continue;
            }
            *n += 1;
            if fmt == Format::Table && !a.wide {
                t.row(&elide_name(r))?;
            } else {
                t.row(r)?;
            }
        }
        t.end()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_keep_their_start_and_end() {
        let name = format!("std::vector<{}>::push_back", "int, ".repeat(40));
        let row = elide_name(&[Cell::Int(1), Cell::Text(name.clone())]);
        let Cell::Text(short) = &row[1] else {
            panic!("{row:?}")
        };
        assert_eq!(short.chars().count(), NAME_WIDTH - 1);
        assert!(short.starts_with("std::vector<int, ") && short.ends_with(">::push_back"));
        assert!(short.contains('…'));
        let kept = elide_name(&[Cell::Text("main".into())]);
        assert_eq!(kept, [Cell::Text("main".into())]);
    }
}
