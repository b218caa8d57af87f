//! `strobe query`: SQL over one or many profile databases.
//!
//! Owns parsing the command's arguments (inputs default to the latest run),
//! opening the inputs as one logical database (strobe-db's `Profile`; over
//! more than ten databases it reads them in place, one at a time, and any
//! SQL means what it means over the same data merged: see
//! docs/profile-db.md, Many databases), applying `--start/--end`, and
//! printing the rows. It never computes results itself.

use std::cell::RefCell;
use std::io::Write;

use anyhow::Context;
use clap::Args;

use crate::output::{Cell, Format, TableOut};

/// Arguments of `strobe query`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// Input databases: files, directories (searched for *.db) or globs.
    /// `-i a.db b.db "SQL"` works: when no separate SQL argument follows,
    /// the last value given to `-i` is the SQL. Default: the latest run,
    /// `<output_dir>/latest` (`strobe-output/latest`).
    #[arg(short = 'i', long = "input", num_args = 1..)]
    pub inputs: Vec<String>,
    /// The SQL to run. The rocpd views (regions, samples, top, …) and the
    /// unsuffixed tables cover every process of every input.
    pub sql: Option<String>,
    /// Output format. csv, json and markdown stream rows as they come; table
    /// must hold every row to size its columns (use it for small results).
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Keep only rows overlapping the window from here: nanoseconds after
    /// the run start, or a percentage of the run (e.g. 25%).
    #[arg(long)]
    pub start: Option<String>,
    /// Keep only rows overlapping the window up to here (ns after the run
    /// start, or a percentage of the run).
    #[arg(long)]
    pub end: Option<String>,
}

/// Runs `strobe query` (on the latest run when no `-i` is given).
pub fn run(mut a: QueryArgs) -> anyhow::Result<()> {
    let sql = match a.sql.take() {
        Some(sql) => sql,
        None if a.inputs.len() >= 2 => a.inputs.pop().expect("two or more values"),
        None if a.inputs.len() == 1 => anyhow::bail!(
            "no SQL given (the one -i value is taken as the input): strobe query [-i DB...] \"SELECT ...\""
        ),
        None => anyhow::bail!("no SQL given: strobe query [-i DB...] \"SELECT ...\""),
    };
    if a.inputs.is_empty() {
        a.inputs = vec![crate::run_dir::default_input()?.display().to_string()];
    }
    let mut profile = crate::progress::open_profile(&a.inputs)?;
    profile.set_window_text(a.start.as_deref(), a.end.as_deref())?;
    // Over many databases (read in place), a bar while they are scanned;
    // cleared before the first row is written.
    let bar = RefCell::new(Some(crate::progress::ScanBar::start(&profile, "querying")));
    let stdout = std::io::stdout();
    let out = std::io::BufWriter::new(stdout.lock());
    let table: RefCell<Option<TableOut<_>>> = RefCell::new(None);
    let mut pending = Some(out);
    let io_err: RefCell<Option<std::io::Error>> = RefCell::new(None);
    let fmt = a.format;
    let result = profile.query_each(
        &sql,
        &mut |cols| match TableOut::begin(fmt, pending.take().expect("columns come once"), cols) {
            Ok(t) => *table.borrow_mut() = Some(t),
            Err(e) => *io_err.borrow_mut() = Some(e),
        },
        &mut |vals| {
            bar.borrow_mut().take();
            if let Some(t) = table.borrow_mut().as_mut() {
                let cells: Vec<Cell> = vals.iter().cloned().map(Cell::from).collect();
                if let Err(e) = t.row(&cells) {
                    let stop = strobe_db::DbError::Io {
                        path: "<stdout>".into(),
                        error: std::io::Error::new(e.kind(), e.to_string()),
                    };
                    *io_err.borrow_mut() = Some(e);
                    return Err(stop);
                }
            }
            Ok(())
        },
    );
    drop(bar);
    let table = table.into_inner();
    if let Some(e) = io_err.into_inner() {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Ok(());
        }
        return Err(e).context("writing the results");
    }
    result?;
    if let Some(t) = table {
        match t.end() {
            Ok(mut w) => {
                let _ = w.flush();
            }
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => return Err(e).context("writing the results"),
        }
    }
    Ok(())
}
