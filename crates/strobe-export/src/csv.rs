//! CSV output: one file per table or view, with a header row.
//!
//! Owns [`write_csv`] (regions, samples with their kind, weight and folded
//! stacks, threads, processes, counters, top) and [`write_query_csv`] (any query, streamed
//! row by row). Fields are quoted per RFC 4180 when needed. It never holds
//! a table in memory.

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use strobe_db::{Profile, Value};

use crate::error::{ExportError, Result};
use crate::source;

/// The tables written by [`write_csv`], with their queries.
pub const CSV_TABLES: &[(&str, &str)] = &[
    ("regions", "SELECT guid, pid, tid, category, name, start, \"end\", duration, corr_id FROM regions ORDER BY start, \"end\" DESC"),
    ("threads", "SELECT guid, hostname, pid, tid, name, start, \"end\" FROM threads ORDER BY pid, tid"),
    ("processes", "SELECT guid, hostname, machine_id, ppid, pid, init, start, \"end\", fini, command FROM processes ORDER BY start"),
    ("counters", "SELECT guid, pid, tid, name, units, timestamp, value FROM strobe_counters ORDER BY timestamp"),
    ("top", "SELECT name, total_calls, total_duration, average, percentage FROM top"),
];

fn field(out: &mut impl Write, s: &str) -> std::io::Result<()> {
    if s.contains([',', '"', '\n', '\r']) {
        out.write_all(b"\"")?;
        out.write_all(s.replace('"', "\"\"").as_bytes())?;
        out.write_all(b"\"")
    } else {
        out.write_all(s.as_bytes())
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Integer(i) => i.to_string(),
        Value::Real(f) => f.to_string(),
        Value::Text(t) => t.clone(),
        Value::Blob(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
    }
}

fn create(path: &Path) -> Result<BufWriter<File>> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|e| ExportError::Write {
            path: path.to_path_buf(),
            error: e,
        })
}

/// Streams the rows of `sql` into a CSV file; returns the row count.
pub fn write_query_csv(p: &Profile, sql: &str, path: &Path) -> Result<u64> {
    let out = RefCell::new(create(path)?);
    let io_err: RefCell<Option<std::io::Error>> = RefCell::new(None);
    let line = |vals: &mut dyn Iterator<Item = String>| {
        let mut o = out.borrow_mut();
        let r = (|| {
            for (k, v) in vals.enumerate() {
                if k > 0 {
                    o.write_all(b",")?;
                }
                field(&mut *o, &v)?;
            }
            o.write_all(b"\n")
        })();
        if let Err(e) = r {
            io_err.borrow_mut().get_or_insert(e);
        }
    };
    let n = p.query_each(
        sql,
        &mut |cols| line(&mut cols.iter().cloned()),
        &mut |row| {
            line(&mut row.iter().map(value_text));
            Ok(())
        },
    )?;
    let w = |e| ExportError::Write {
        path: path.to_path_buf(),
        error: e,
    };
    if let Some(e) = io_err.into_inner() {
        return Err(w(e));
    }
    out.into_inner().flush().map_err(w)?;
    Ok(n)
}

/// Writes the samples with their kind (`sample`, `wall_sample`,
/// `off_cpu`), weight (ns; 0 where the database recorded none) and stack
/// (`frame;…;leaf`, outermost first).
fn write_samples_csv(p: &Profile, path: &Path) -> Result<u64> {
    let mut out = create(path)?;
    let w = |e| ExportError::Write {
        path: path.to_path_buf(),
        error: e,
    };
    out.write_all(b"guid,pid,tid,timestamp,kind,weight_ns,track,leaf,stack\n")
        .map_err(w)?;
    let mut n = 0;
    let mut stack = String::new();
    for s in p.samples()? {
        let s = s?;
        stack.clear();
        for (k, f) in s.frames.iter().rev().enumerate() {
            if k > 0 {
                stack.push(';');
            }
            stack.push_str(&source::frame_name(f));
        }
        let leaf = s.frames.first().map(source::frame_name).unwrap_or_default();
        (|| {
            write!(out, "{},{},{},{},", s.guid, s.pid, s.tid, s.timestamp)?;
            field(&mut out, &s.kind)?;
            write!(out, ",{},", s.weight_ns)?;
            field(&mut out, s.track.as_deref().unwrap_or(""))?;
            out.write_all(b",")?;
            field(&mut out, &leaf)?;
            out.write_all(b",")?;
            field(&mut out, &stack)?;
            out.write_all(b"\n")
        })()
        .map_err(w)?;
        n += 1;
    }
    out.flush().map_err(w)?;
    Ok(n)
}

/// Writes one CSV file per table into `dir`, named `<stem>_<table>.csv`;
/// returns the files with their row counts.
pub fn write_csv(p: &Profile, dir: &Path, stem: &str) -> Result<Vec<(PathBuf, u64)>> {
    let mut files = Vec::new();
    for (table, sql) in CSV_TABLES {
        let path = dir.join(format!("{stem}_{table}.csv"));
        let n = write_query_csv(p, sql, &path)?;
        files.push((path, n));
        if *table == "regions" {
            let path = dir.join(format!("{stem}_samples.csv"));
            let n = write_samples_csv(p, &path)?;
            files.push((path, n));
        }
    }
    Ok(files)
}
