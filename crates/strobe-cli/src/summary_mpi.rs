//! `strobe summary --report mpi`: the MPI tables.
//!
//! Owns printing strobe-db's [`strobe_db::mpi`] numbers as the summary's
//! other tables are printed (comfy-table tables, CSV blocks headed `# name`,
//! or JSON): time in MPI per rank, per MPI function, the ranks that wait
//! most with the imbalance, and a plain sentence saying why when the run
//! made no MPI call. It never computes a number itself and never reads a
//! database except through `strobe_db::mpi`.

use std::io::Write;

use strobe_db::mpi::{has_mpi_calls, mpi_summary, MpiRank, MpiSummary, NoMpi};
use strobe_db::Profile;

use crate::output::{Cell, Format, TableOut};
use crate::summary_args::{SummaryArgs, SummaryFormat};

/// Milliseconds with three decimals (microseconds) in tables, in full in
/// CSV and JSON.
fn ms(ns: i64) -> Cell {
    Cell::Fixed(ns as f64 / 1e6, 3)
}

/// The columns of a per-rank table: the rank (and its job when the
/// databases hold several jobs), node and pid, then `rest`.
fn rank_columns(jobs: bool, rest: &[&str]) -> Vec<String> {
    let mut cols = vec!["Rank".to_string()];
    if jobs {
        cols.push("Job".into());
    }
    cols.extend(["Node", "PID"].iter().chain(rest).map(|c| c.to_string()));
    cols
}

/// A row of a per-rank table: the cells [`rank_columns`] names, then `rest`.
fn rank_row(r: &MpiRank, jobs: bool, rest: impl IntoIterator<Item = Cell>) -> Vec<Cell> {
    let mut c = vec![r.rank.map_or(Cell::Null, Cell::Int)];
    if jobs {
        c.push(r.job.clone().map_or(Cell::Null, Cell::Text));
    }
    c.extend([Cell::Text(r.node.clone()), Cell::Int(r.pid)]);
    c.extend(rest);
    c
}

/// `--report mpi`: the MPI section, or the reason there is none.
pub fn render(p: &Profile, a: &SummaryArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let s = mpi_summary(p)?;
    if a.format == SummaryFormat::Json {
        let mut obj = serde_json::Map::new();
        obj.insert("mpi".into(), json(&s)?);
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&serde_json::Value::Object(obj))?
        )?;
        return Ok(());
    }
    tables(&s, a, out)
}

/// `--report all`: the MPI section after the other tables (a blank line
/// first), only when the run made MPI calls; whether it printed one.
pub fn render_if_any(p: &Profile, a: &SummaryArgs, out: &mut dyn Write) -> anyhow::Result<bool> {
    if !has_mpi_calls(p)? {
        return Ok(false);
    }
    let s = mpi_summary(p)?;
    writeln!(out)?;
    tables(&s, a, out)?;
    Ok(true)
}

/// `--report all --format json`: the `mpi` member, only when the run made
/// MPI calls.
pub fn json_if_any(p: &Profile) -> anyhow::Result<Option<serde_json::Value>> {
    if !has_mpi_calls(p)? {
        return Ok(None);
    }
    Ok(Some(json(&mpi_summary(p)?)?))
}

/// The summary as JSON, with the sentence explaining a run without MPI
/// calls (`no_mpi_message`).
fn json(s: &MpiSummary) -> anyhow::Result<serde_json::Value> {
    let mut v = serde_json::to_value(s)?;
    if let (Some(why), Some(obj)) = (&s.no_mpi, v.as_object_mut()) {
        obj.insert("no_mpi_message".into(), no_mpi_message(why).into());
    }
    Ok(v)
}

/// Why a run has no MPI call, in a sentence or two.
pub fn no_mpi_message(why: &NoMpi) -> String {
    match why {
        NoMpi::OutsideWindow => "No MPI calls in the time window: the run recorded MPI calls, \
             but none between --start and --end."
            .to_string(),
        NoMpi::WrappersNotLoaded { ranks, library } => {
            let mut what = Vec::new();
            if *ranks > 0 {
                what.push(format!(
                    "{ranks} process{} started by an MPI launcher (mpi.rank is set)",
                    if *ranks == 1 { " was" } else { "es were" }
                ));
            }
            if let Some(lib) = library {
                what.push(format!("the program loaded the MPI library {lib}"));
            }
            let what = if what.is_empty() {
                "The run knows the mpi event category".to_string()
            } else {
                let mut w = what.join(" and ");
                if let Some(first) = w.get(..1) {
                    w = first.to_uppercase() + &w[1..];
                }
                w
            };
            format!(
                "No MPI calls recorded. {what}, but no MPI call was recorded: the MPI wrappers \
                 did not load (see docs/mpi.md), or the program made no MPI call."
            )
        }
        NoMpi::NotMpi { processes } => format!(
            "No MPI calls recorded: this is not an MPI program. None of its {processes} \
             process{} was started by an MPI launcher (no mpi.rank setting), loaded an MPI \
             library or made an MPI call.",
            if *processes == 1 { "" } else { "es" }
        ),
    }
}

/// The tables of `s` as tables or CSV blocks.
fn tables(s: &MpiSummary, a: &SummaryArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let fmt = if a.format == SummaryFormat::Csv {
        Format::Csv
    } else {
        Format::Table
    };
    if let Some(why) = &s.no_mpi {
        return no_mpi_block(why, fmt, out);
    }
    let v = View {
        fmt,
        limit: a.limit,
        jobs: s.jobs.len() > 1,
    };
    rank_table(s, &v, out)?;
    writeln!(out)?;
    function_table(s, &v, out)?;
    writeln!(out)?;
    wait_table(s, &v, out)
}

/// How the MPI tables are printed.
struct View {
    fmt: Format,
    /// `--limit`: rows per table (0: all).
    limit: usize,
    /// Whether the databases hold several jobs (a Job column).
    jobs: bool,
}

impl View {
    /// Whether tables (not CSV) are printed: they get notes below them.
    fn table(&self) -> bool {
        self.fmt == Format::Table
    }

    /// How many of `n` rows are printed.
    fn shown(&self, n: usize) -> usize {
        if self.limit == 0 {
            n
        } else {
            n.min(self.limit)
        }
    }

    /// The line saying how many of `n` rows `--limit` left out, if any.
    fn more(&self, out: &mut dyn Write, n: usize) -> anyhow::Result<()> {
        if n > self.shown(n) {
            writeln!(out, "  … {} more (--limit 0 prints all)", n - self.shown(n))?;
        }
        Ok(())
    }
}

/// A run without MPI calls: the sentence saying why, as a table's
/// title line or a one-row CSV block.
fn no_mpi_block(why: &NoMpi, fmt: Format, out: &mut dyn Write) -> anyhow::Result<()> {
    if fmt == Format::Table {
        writeln!(out, "MPI:")?;
        writeln!(out, "  {}", no_mpi_message(why))?;
    } else {
        writeln!(out, "# mpi")?;
        let mut t = TableOut::begin(fmt, &mut *out, &["message".to_string()])?;
        t.row(&[Cell::Text(no_mpi_message(why))])?;
        t.end()?;
    }
    Ok(())
}

/// Per rank, by rank: wall, MPI and compute time; with notes below a
/// table.
fn rank_table(s: &MpiSummary, v: &View, out: &mut dyn Write) -> anyhow::Result<()> {
    let cols = rank_columns(
        v.jobs,
        &["Wall (ms)", "MPI (ms)", "Compute (ms)", "MPI (%)", "Calls"],
    );
    let rows: Vec<Vec<Cell>> = s
        .ranks
        .iter()
        .map(|r| {
            rank_row(
                r,
                v.jobs,
                [
                    ms(r.wall_ns),
                    ms(r.mpi_ns),
                    ms(r.compute_ns),
                    Cell::Fixed(r.mpi_pct, 1),
                    Cell::Int(r.calls as i64),
                ],
            )
        })
        .collect();
    block(
        out,
        v.fmt,
        "mpi_ranks",
        "MPI ranks (wall = process start to end; MPI = time inside MPI calls, a call made \
         inside another counted once; compute = wall - MPI)",
        &cols,
        &rows[..v.shown(rows.len())],
    )?;
    if v.table() {
        v.more(out, rows.len())?;
        mpi_share_note(s, out)?;
        if s.nested_calls > 0 {
            writeln!(
                out,
                "  {} MPI call{} made inside other MPI calls {} counted in the callers' time",
                s.nested_calls,
                if s.nested_calls == 1 { "" } else { "s" },
                if s.nested_calls == 1 { "is" } else { "are" }
            )?;
        }
        other_processes_note(s, out)?;
    }
    Ok(())
}

/// `rank K`, or `pid P` for a process without a rank.
fn rank_name(r: &MpiRank) -> String {
    match r.rank {
        Some(k) => format!("rank {k}"),
        None => format!("pid {}", r.pid),
    }
}

/// With more than one rank: the mean share of MPI in the wall time, and
/// the ranks with the least and the most.
fn mpi_share_note(s: &MpiSummary, out: &mut dyn Write) -> anyhow::Result<()> {
    if s.ranks.len() <= 1 {
        return Ok(());
    }
    let by_pct = |a: &&MpiRank, b: &&MpiRank| a.mpi_pct.total_cmp(&b.mpi_pct);
    let lo = s.ranks.iter().min_by(by_pct);
    let hi = s.ranks.iter().max_by(by_pct);
    let mean = s.ranks.iter().map(|r| r.mpi_pct).sum::<f64>() / s.ranks.len() as f64;
    if let (Some(lo), Some(hi)) = (lo, hi) {
        writeln!(
            out,
            "  {} processes: MPI {mean:.1}% of the wall time on average, from {:.1}% \
             ({}) to {:.1}% ({})",
            s.ranks.len(),
            lo.mpi_pct,
            rank_name(lo),
            hi.mpi_pct,
            rank_name(hi)
        )?;
    }
    Ok(())
}

/// The processes left out of the rank table (neither a rank nor an MPI
/// call), the first five by pid and program.
fn other_processes_note(s: &MpiSummary, out: &mut dyn Write) -> anyhow::Result<()> {
    if s.other_processes.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = s
        .other_processes
        .iter()
        .take(5)
        .map(|o| {
            let exe = o.command.split_whitespace().next().unwrap_or("");
            let exe = exe.rsplit('/').next().unwrap_or(exe);
            if exe.is_empty() {
                o.pid.to_string()
            } else {
                format!("{} {exe}", o.pid)
            }
        })
        .collect();
    let more = s.other_processes.len().saturating_sub(shown.len());
    writeln!(
        out,
        "  not listed: {} process{} with neither a rank nor an MPI call (pid {}{})",
        s.other_processes.len(),
        if s.other_processes.len() == 1 {
            ""
        } else {
            "es"
        },
        shown.join(", "),
        if more > 0 {
            format!(", … {more} more")
        } else {
            String::new()
        }
    )?;
    Ok(())
}

/// Per MPI function, by total time.
fn function_table(s: &MpiSummary, v: &View, out: &mut dyn Write) -> anyhow::Result<()> {
    let cols: Vec<String> = [
        "Time (%)",
        "Total (ms)",
        "Calls",
        "Avg (µs)",
        "Max (µs)",
        "Bytes",
        "Waits",
        "Name",
    ]
    .map(String::from)
    .to_vec();
    let rows: Vec<Vec<Cell>> = s
        .functions
        .iter()
        .map(|f| {
            vec![
                Cell::Fixed(f.share_pct, 1),
                ms(f.total_ns),
                Cell::Int(f.calls as i64),
                Cell::Fixed(f.mean_ns / 1e3, 1),
                Cell::Fixed(f.max_ns as f64 / 1e3, 1),
                if f.calls_with_bytes > 0 {
                    Cell::Int(i64::try_from(f.bytes).unwrap_or(i64::MAX))
                } else {
                    Cell::Null
                },
                Cell::Text(if f.waiting { "yes" } else { "no" }.into()),
                Cell::Text(f.name.clone()),
            ]
        })
        .collect();
    block(
        out,
        v.fmt,
        "mpi_functions",
        "MPI functions (outermost calls of every rank; Time (%) = share of all MPI call time; \
         Bytes = sent or received; Waits = counted as waiting below)",
        &cols,
        &rows[..v.shown(rows.len())],
    )
}

/// Ranks by waiting time, largest first; below a table, the imbalance of
/// waiting time.
fn wait_table(s: &MpiSummary, v: &View, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut order: Vec<&MpiRank> = s.ranks.iter().collect();
    order.sort_by(|a, b| {
        b.wait_ns
            .cmp(&a.wait_ns)
            .then((a.rank.is_none(), a.rank, a.pid).cmp(&(b.rank.is_none(), b.rank, b.pid)))
    });
    let cols = rank_columns(
        v.jobs,
        &[
            "Wait (ms)",
            "Wait (% of wall)",
            "x Mean",
            "Most In (ms)",
            "Most In",
        ],
    );
    let rows: Vec<Vec<Cell>> = order
        .iter()
        .map(|r| {
            rank_row(
                r,
                v.jobs,
                [
                    ms(r.wait_ns),
                    Cell::Fixed(r.wait_pct, 1),
                    r.wait_vs_mean.map_or(Cell::Null, |x| Cell::Fixed(x, 2)),
                    match &r.top_wait_function {
                        Some(_) => ms(r.top_wait_ns),
                        None => Cell::Null,
                    },
                    r.top_wait_function.clone().map_or(Cell::Null, Cell::Text),
                ],
            )
        })
        .collect();
    block(
        out,
        v.fmt,
        "mpi_waits",
        "Ranks that wait most (time in MPI_Wait*, MPI_Recv, MPI_Probe, MPI_Barrier, \
         collectives, MPI_Win_fence and other RMA synchronisation)",
        &cols,
        &rows[..v.shown(rows.len())],
    )?;
    if v.table() {
        v.more(out, rows.len())?;
        match (s.wait_imbalance, order.first()) {
            (Some(imb), Some(top)) => {
                writeln!(
                    out,
                    "  Imbalance of waiting time (max / mean): {imb:.2} ({} waits {:.3} ms, \
                     the mean is {:.3} ms)",
                    rank_name(top),
                    top.wait_ns as f64 / 1e6,
                    s.wait_mean_ns / 1e6
                )?;
            }
            _ => writeln!(out, "  No rank spent time in waiting calls.")?,
        }
    }
    Ok(())
}

/// One table (a title line and the table) or CSV block (`# id` and the
/// rows).
fn block(
    out: &mut dyn Write,
    fmt: Format,
    id: &str,
    title: &str,
    cols: &[String],
    rows: &[Vec<Cell>],
) -> anyhow::Result<()> {
    if fmt == Format::Csv {
        writeln!(out, "# {id}")?;
    } else {
        writeln!(out, "{title}:")?;
        if rows.is_empty() {
            writeln!(out, "  (none)")?;
            return Ok(());
        }
    }
    let mut t = TableOut::begin(fmt, &mut *out, cols)?;
    for r in rows {
        t.row(r)?;
    }
    t.end()?;
    Ok(())
}
