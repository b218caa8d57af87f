//! `strobe summary`: Nsight-style summary tables.
//!
//! Owns the command's arguments (inputs default to the latest run, see
//! `run_dir`) and printing; the numbers come from
//! strobe-db's `summary` module (the MPI tables: `summary_mpi`). Columns
//! follow Nsight Systems' `stats` layout: Time (%), Total Time (ns),
//! Instances, Avg, Med, Min, Max, StdDev, Name, sorted by total time.
//! A table without rows is not printed as a table: one line after the
//! others says what the run did not record (CSV and JSON keep every table).

use std::io::Write;

use strobe_db::summary::{CounterSumRow, FunctionRow, StatRow, ThreadRow};
use strobe_metrics::defs::{Counter, Definition, Metric, MetricSet, Plan};

use crate::output::{Cell, Format, TableOut};
use crate::summary_args::{Report, SummaryArgs, SummaryFormat};

fn proc_cols(by: bool) -> Vec<String> {
    if by {
        vec!["PID".into()]
    } else {
        Vec::new()
    }
}

fn region_table(rows: &[StatRow], by: bool) -> (Vec<String>, Vec<Vec<Cell>>) {
    // A time filter's exact counts add two columns.
    let counted = rows.iter().any(|r| r.counted.is_some());
    let mut cols = proc_cols(by);
    cols.extend(
        ["Time (%)", "Total Time (ns)", "Instances", "Avg (ns)"]
            .into_iter()
            .chain(
                counted
                    .then_some(["Self (ns)", "Stored"])
                    .into_iter()
                    .flatten(),
            )
            .chain(["Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)", "Name"])
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
            ]);
            if counted {
                match r.counted {
                    Some(k) => c.extend([Cell::Int(k.self_ns), Cell::Int(k.stored as i64)]),
                    None => c.extend([Cell::Null, Cell::Int(r.instances as i64)]),
                }
            }
            c.extend([
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

/// `csv`: every column (the off-CPU one even without off-CPU samples) and
/// region time and lifetime in whole nanoseconds, as scripts have read
/// them; tables print those two in milliseconds like the sampled time
/// beside them.
fn thread_table(rows: &[ThreadRow], csv: bool) -> (Vec<String>, Vec<Vec<Cell>>) {
    let off_cpu = csv || rows.iter().any(|r| r.off_cpu_ns > 0);
    let mut cols = ["Sampled (%)", "Sampled (ms)", "Samples"]
        .map(String::from)
        .to_vec();
    if off_cpu {
        cols.push("Off-CPU (ms)".into());
    }
    let (region_time, lifetime) = if csv {
        ("Region Time (ns)", "Lifetime (ns)")
    } else {
        ("Region Time (ms)", "Lifetime (ms)")
    };
    cols.extend(["Regions", region_time, lifetime, "PID", "TID", "Name"].map(String::from));
    let duration = |ns: i64| {
        if csv {
            Cell::Int(ns)
        } else {
            ms(ns.max(0) as u64)
        }
    };
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
                duration(r.region_total_ns),
                r.lifetime_ns.map_or(Cell::Null, duration),
                Cell::Int(r.pid),
                Cell::Int(r.tid),
                r.name.clone().map_or(Cell::Null, Cell::Text),
            ]);
            c
        })
        .collect();
    (cols, body)
}

/// The counter columns of a profile that read counters per thread
/// (`sampling_events`): the counters, and the derived metrics stored with
/// it (`strobe_metric`), evaluated over each row's sums.
struct CounterColumns {
    /// (name, unit) of each counter.
    counters: Vec<(String, String)>,
    /// The requested metrics, their plan, and for each counter the plan
    /// needs, its column among `counters`.
    metrics: Option<(Plan, Vec<Option<usize>>)>,
}

impl CounterColumns {
    /// `None` when the profile read no counter per thread (`counters`, see
    /// `profile_counters`; `stored`: its `stored_metrics`). A metric
    /// definition that no longer plans (an older file) is left out with a
    /// warning.
    fn of(
        counters: Vec<(String, String)>,
        stored: &[strobe_db::summary::StoredMetric],
    ) -> Option<CounterColumns> {
        if counters.is_empty() {
            return None;
        }
        let requested: Vec<&str> = stored
            .iter()
            .filter(|m| m.requested)
            .map(|m| m.name.as_str())
            .collect();
        let metrics = if requested.is_empty() {
            None
        } else {
            match Self::plan(stored, &requested) {
                Ok(plan) => {
                    let slots = plan
                        .counters()
                        .iter()
                        .map(|spec| {
                            let name = strobe_metrics::catalog::resolve(spec)
                                .map_or_else(|_| spec.clone(), |s| s.name);
                            counters.iter().position(|(c, _)| *c == name || c == spec)
                        })
                        .collect();
                    Some((plan, slots))
                }
                Err(e) => {
                    say!("strobe: warning: the metrics stored in the profile: {e:#}");
                    None
                }
            }
        };
        Some(CounterColumns { counters, metrics })
    }

    /// The plan of `requested` over the stored definitions alone (no file).
    fn plan(
        stored: &[strobe_db::summary::StoredMetric],
        requested: &[&str],
    ) -> anyhow::Result<Plan> {
        let mut set = MetricSet::new();
        for m in stored {
            let defined_at = "the profile database".to_string();
            let def = if m.kind == "counter" {
                Definition::Counter(Counter {
                    name: m.name.clone(),
                    block: String::new(),
                    event: m.expression.clone(),
                    description: m.description.clone(),
                    unit: m.unit.clone(),
                    defined_at,
                })
            } else {
                Definition::Metric(Metric {
                    name: m.name.clone(),
                    expr: strobe_metrics::expr::parse(&m.expression)
                        .map_err(|e| anyhow::anyhow!("metric {}: {e}", m.name))?,
                    expr_text: m.expression.clone(),
                    description: m.description.clone(),
                    unit: m.unit.clone(),
                    defined_at,
                })
            };
            set.insert(def);
        }
        Ok(set.plan(requested)?)
    }

    /// Column headers: each counter, then each metric, with its unit.
    fn headers(&self) -> Vec<String> {
        let with_unit = |name: &str, unit: Option<&str>| match unit.filter(|u| !u.is_empty()) {
            Some(u) => format!("{name} ({u})"),
            None => name.to_string(),
        };
        let mut out: Vec<String> = self
            .counters
            .iter()
            .map(|(n, u)| with_unit(n, Some(u)))
            .collect();
        if let Some((plan, _)) = &self.metrics {
            for (i, name) in plan.outputs().iter().enumerate() {
                out.push(with_unit(name, plan.unit(i)));
            }
        }
        out
    }

    /// The metrics' values over `sums` (one per counter).
    fn evaluate(&self, sums: &[Option<f64>]) -> Vec<Option<f64>> {
        let Some((plan, slots)) = &self.metrics else {
            return Vec::new();
        };
        let inputs: Vec<Option<f64>> = slots
            .iter()
            .map(|s| s.and_then(|i| sums.get(i).copied().flatten()))
            .collect();
        let mut out = vec![None; plan.len()];
        plan.evaluate(&inputs, &mut out);
        out
    }

    /// The table of `rows` (`what` names the count column).
    fn table(
        &self,
        rows: &[CounterSumRow],
        what: &str,
        by: bool,
        table: bool,
    ) -> (Vec<String>, Vec<Vec<Cell>>) {
        let mut cols = proc_cols(by);
        cols.push(what.into());
        cols.extend(self.headers());
        cols.push("Name".into());
        let missing = || {
            if table {
                Cell::Text("n/a".into())
            } else {
                Cell::Null
            }
        };
        let body = rows
            .iter()
            .map(|r| {
                let mut c = if by {
                    vec![r.pid.map_or(Cell::Null, Cell::Int)]
                } else {
                    Vec::new()
                };
                c.push(Cell::Int(r.count as i64));
                for v in &r.sums {
                    c.push(v.map_or_else(missing, |v| Cell::Fixed(v, 0)));
                }
                for v in self.evaluate(&r.sums) {
                    c.push(v.map_or_else(missing, |v| Cell::Fixed(v, 3)));
                }
                c.push(Cell::Text(r.name.clone()));
                c
            })
            .collect();
        (cols, body)
    }

    /// `rows` as JSON objects: counters and metrics by name.
    fn json(&self, rows: &[CounterSumRow]) -> serde_json::Value {
        let num = |v: Option<f64>| {
            v.and_then(serde_json::Number::from_f64)
                .map_or(serde_json::Value::Null, Into::into)
        };
        let outputs: Vec<String> = self
            .metrics
            .as_ref()
            .map(|(p, _)| p.outputs().to_vec())
            .unwrap_or_default();
        rows.iter()
            .map(|r| {
                let counters: serde_json::Map<String, serde_json::Value> = self
                    .counters
                    .iter()
                    .zip(&r.sums)
                    .map(|((n, _), v)| (n.clone(), num(*v)))
                    .collect();
                let metrics: serde_json::Map<String, serde_json::Value> = outputs
                    .iter()
                    .zip(self.evaluate(&r.sums))
                    .map(|(n, v)| (n.clone(), num(v)))
                    .collect();
                serde_json::json!({
                    "pid": r.pid,
                    "name": r.name,
                    "count": r.count,
                    "counters": counters,
                    "metrics": metrics,
                })
            })
            .collect()
    }
}

/// Region counter rows in the region table's order (largest total time
/// first).
fn in_region_order(
    mut rows: Vec<CounterSumRow>,
    regions: Option<&Vec<StatRow>>,
) -> Vec<CounterSumRow> {
    let rank = |r: &CounterSumRow| {
        regions
            .and_then(|rs| {
                rs.iter()
                    .position(|s| s.name == r.name && (r.guid.is_none() || s.guid == r.guid))
            })
            .unwrap_or(usize::MAX)
    };
    rows.sort_by_key(|r| (r.guid.clone(), rank(r)));
    rows
}

/// Function counter rows by the first counter's sum, largest first.
fn by_first_counter(mut rows: Vec<CounterSumRow>) -> Vec<CounterSumRow> {
    rows.sort_by(|a, b| {
        let first = |r: &CounterSumRow| r.sums.first().copied().flatten().unwrap_or(f64::MIN);
        a.guid
            .cmp(&b.guid)
            .then(first(b).total_cmp(&first(a)))
            .then(b.count.cmp(&a.count))
            .then(a.name.cmp(&b.name))
    });
    rows
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
    let mut profile = crate::progress::open_profile(&a.inputs)?;
    profile.set_window_text(a.start.as_deref(), a.end.as_deref())?;
    if a.report == Report::Mpi {
        return crate::summary_mpi::render(&profile, a, out);
    }
    let summary = Summary::of(&profile, a)?;
    if a.format == SummaryFormat::Json {
        return summary.json(&profile, a, out);
    }
    summary.print(&profile, a, out)
}

/// The tables of one summary, with the counter columns (only when the
/// profile read counters per thread).
struct Summary {
    regions: Option<Vec<StatRow>>,
    functions: Option<Vec<FunctionRow>>,
    threads: Option<Vec<ThreadRow>>,
    columns: Option<CounterColumns>,
    region_counters: Option<Vec<CounterSumRow>>,
    function_counters: Option<Vec<CounterSumRow>>,
}

/// One table to print: its CSV id, its title, its columns and rows, and
/// each row's group (its process with `--by-process`: `--limit` counts
/// rows per group).
struct Section {
    id: &'static str,
    title: &'static str,
    cols: Vec<String>,
    body: Vec<Vec<Cell>>,
    groups: Vec<Option<i64>>,
}

impl Summary {
    /// The tables `a` asks for, computed under a progress bar; the counter
    /// tables in the order they are printed, left out when empty.
    fn of(profile: &strobe_db::Profile, a: &SummaryArgs) -> anyhow::Result<Summary> {
        let want = |r: Report| a.report == Report::All || a.report == r;
        let bar = crate::progress::ScanBar::start(profile, "summarizing");
        let tables = strobe_db::summary::tables(
            profile,
            strobe_db::summary::Want {
                regions: want(Report::Regions),
                functions: want(Report::Functions),
                threads: want(Report::Threads),
                by_process: a.by_process,
            },
        );
        drop(bar);
        let tables = tables?;
        let (regions, functions, threads) = (tables.regions, tables.functions, tables.threads);
        let columns = CounterColumns::of(tables.counters, &tables.metrics);
        let region_counters = match (&columns, tables.region_counters) {
            (Some(_), Some(rows)) => {
                Some(in_region_order(rows, regions.as_ref())).filter(|r| !r.is_empty())
            }
            _ => None,
        };
        let function_counters = match (&columns, tables.function_counters) {
            (Some(_), Some(rows)) => Some(by_first_counter(rows)).filter(|r| !r.is_empty()),
            _ => None,
        };
        Ok(Summary {
            regions,
            functions,
            threads,
            columns,
            region_counters,
            function_counters,
        })
    }

    /// `--format json`: one object, a member per table (the MPI tables
    /// with `--report all` when the run made MPI calls), and the notes.
    fn json(
        &self,
        profile: &strobe_db::Profile,
        a: &SummaryArgs,
        out: &mut dyn Write,
    ) -> anyhow::Result<()> {
        let mut obj = serde_json::Map::new();
        if let Some(r) = &self.regions {
            obj.insert("regions".into(), serde_json::to_value(r)?);
        }
        if let Some(f) = &self.functions {
            obj.insert("functions".into(), serde_json::to_value(f)?);
        }
        if let Some(t) = &self.threads {
            obj.insert("threads".into(), serde_json::to_value(t)?);
        }
        if a.report == Report::All {
            if let Some(m) = crate::summary_mpi::json_if_any(profile)? {
                obj.insert("mpi".into(), m);
            }
        }
        if let Some(c) = &self.columns {
            if let Some(r) = &self.region_counters {
                obj.insert("region_counters".into(), c.json(r));
            }
            if let Some(f) = &self.function_counters {
                obj.insert("function_counters".into(), c.json(f));
            }
        }
        let notes = stored_notes(profile, a);
        if !notes.is_empty() {
            obj.insert("notes".into(), serde_json::to_value(notes)?);
        }
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&serde_json::Value::Object(obj))?
        )?;
        Ok(())
    }

    /// Tables or CSV blocks: the tables with rows (CSV: every table), the
    /// MPI tables with `--report all`, a line per table without rows, and
    /// the notes.
    fn print(
        &self,
        profile: &strobe_db::Profile,
        a: &SummaryArgs,
        out: &mut dyn Write,
    ) -> anyhow::Result<()> {
        let fmt = if a.format == SummaryFormat::Csv {
            Format::Csv
        } else {
            Format::Table
        };
        // Tables leave out a table without rows and say so after the others,
        // once (CSV keeps every block, for scripts).
        let mut empty = Vec::new();
        let mut printed = 0;
        for section in self.sections(a, fmt) {
            if section.body.is_empty() && fmt == Format::Table {
                empty.push(section.id);
                continue;
            }
            if printed > 0 {
                writeln!(out)?;
            }
            printed += 1;
            print_section(section, a, fmt, out)?;
        }
        if a.report == Report::All && crate::summary_mpi::render_if_any(profile, a, out)? {
            printed += 1;
        }
        let windowed = a.start.is_some() || a.end.is_some();
        for (k, id) in empty.into_iter().enumerate() {
            if printed > 0 && k == 0 {
                writeln!(out)?;
            }
            writeln!(out, "{}.", without_rows(id, windowed))?;
        }
        if fmt == Format::Table {
            for note in stored_notes(profile, a) {
                writeln!(out, "\nNote: {note}.")?;
            }
        }
        Ok(())
    }

    /// The tables to print, in order.
    fn sections(&self, a: &SummaryArgs, fmt: Format) -> Vec<Section> {
        // `--limit` counts rows per process with `--by-process`.
        let by = |pid: Option<i64>| if a.by_process { pid } else { None };
        let table = fmt == Format::Table;
        let mut out = Vec::new();
        let mut push = |id, title, (cols, body), groups| {
            out.push(Section {
                id,
                title,
                cols,
                body,
                groups,
            })
        };
        if let Some(r) = &self.regions {
            let title = if r.iter().any(|x| x.counted.is_some()) {
                "Regions (a time filter stored only the longer user-API regions: instances, \
                 total, average and self time count every one; median, minimum, maximum and \
                 deviation describe the stored ones)"
            } else {
                "Regions"
            };
            let groups = r.iter().map(|x| by(x.pid)).collect();
            push("regions", title, region_table(r, a.by_process), groups);
        }
        if let (Some(c), Some(r)) = (&self.columns, &self.region_counters) {
            push(
                "region_counters",
                "Region counters (sum over the regions of each counter's change from begin to \
                 end; metrics computed from the sums)",
                c.table(r, "Instances", a.by_process, table),
                r.iter().map(|x| by(x.pid)).collect(),
            );
        }
        if let Some(f) = &self.functions {
            push(
                "functions",
                "Sampled functions (self = innermost frame, total = anywhere on the stack; \
                 time = the samples' weights, off-CPU = blocked)",
                function_table(f, a.by_process, fmt == Format::Csv),
                f.iter().map(|x| by(x.pid)).collect(),
            );
        }
        if let (Some(c), Some(f)) = (&self.columns, &self.function_counters) {
            push(
                "function_counters",
                "Function counters (sum of each counter's change since the thread's previous \
                 sample, over the samples whose innermost frame is the function; metrics \
                 computed from the sums)",
                c.table(f, "Samples", a.by_process, table),
                f.iter().map(|x| by(x.pid)).collect(),
            );
        }
        if let Some(t) = &self.threads {
            let groups = t.iter().map(|x| by(Some(x.pid))).collect();
            push(
                "threads",
                "Threads",
                thread_table(t, fmt == Format::Csv),
                groups,
            );
        }
        out
    }
}

/// One table (its title and rows; at most `--limit` rows per group) or
/// CSV block (`# id` and the rows).
fn print_section(
    section: Section,
    a: &SummaryArgs,
    fmt: Format,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if fmt == Format::Csv {
        writeln!(out, "# {}", section.id)?;
    } else {
        writeln!(out, "{}:", section.title)?;
    }
    let mut t = TableOut::begin(fmt, &mut *out, &section.cols)?;
    let mut shown: std::collections::HashMap<Option<i64>, usize> = Default::default();
    for (r, group) in section.body.iter().zip(section.groups) {
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
    Ok(())
}

/// The line a table without rows gets instead of its table (after the
/// tables that have rows, so a run without regions does not open with an
/// empty section; `nsys stats` says as much of a report without data).
/// `windowed`: `--start/--end` restricted the summary.
fn without_rows(id: &str, windowed: bool) -> String {
    let within = if windowed { " in this window" } else { "" };
    match id {
        "regions" => format!(
            "No regions recorded{within} (the user API's strobe_push_region, strobe::Region \
             or strobe.region, --xpti and MPI calls record them)"
        ),
        "functions" => format!("No sampled functions: no samples recorded{within}"),
        "threads" => format!("No threads recorded{within}"),
        other => format!("No {} recorded{within}", other.replace('_', " ")),
    }
}

/// The notes a run stored for the summary to repeat (each once, however
/// many processes stored it): what strobe could not record, such as the
/// XPTI notifications of `--xpti` (`strobe_collect::XPTI_NOTE`).
fn stored_notes(profile: &strobe_db::Profile, a: &SummaryArgs) -> Vec<String> {
    if a.without_notes || a.report != Report::All {
        return Vec::new();
    }
    profile
        .setting_values(strobe_collect::XPTI_NOTE)
        .unwrap_or_default()
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
