//! CSV output: one file per table, with a header row.
//!
//! Owns [`write_csv`] and [`write_query_csv`] (any query, streamed row by
//! row). The large tables are compact: rows carry a process number (the
//! `process` column of `NAME_processes.csv`), OS ids, names and numbers;
//! a sample names its call stack by id, and each stack is written once, in
//! `NAME_stacks.csv` (leaf and folded frames). Regions and samples are
//! read from the exporters' time-ordered streams; the samples' readers
//! start before the regions are written, so both are read and sorted at
//! once. Fields are quoted per RFC 4180 when
//! needed. It never holds a table in memory (the set of stacks seen
//! excepted: it grows with distinct stacks, never with samples).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strobe_db::visit::{Order, ProfileSink, RegionRow, Run, SampleEvent, Stacks, Stream, Table};
use strobe_db::{Profile, Value};

use crate::error::{ExportError, Result};

/// Every table [`write_csv`] writes, in order (`<stem>_<table>.csv`).
pub const TABLES: &[&str] = &[
    "processes",
    "threads",
    "regions",
    "samples",
    "stacks",
    "counters",
    "top",
];

/// Headers of the tables written from streams.
const REGIONS_HEADER: &str = "process,pid,tid,category,name,start,end,duration,corr_id\n";
const SAMPLES_HEADER: &str = "process,pid,tid,timestamp,kind,weight_ns,stack\n";
const STACKS_HEADER: &str = "process,stack,leaf,frames\n";

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
    write_rows(path, &mut |cols, row| p.query_each(sql, cols, row))
}

/// What streams rows of values: given what takes the column names and
/// what takes each row, returns the row count (`Profile::query_each`,
/// `Profile::table_rows`).
type RowSource<'a> = dyn FnMut(
        &mut dyn FnMut(&[String]),
        &mut dyn FnMut(&[Value]) -> strobe_db::Result<()>,
    ) -> strobe_db::Result<u64>
    + 'a;

/// Feeds a CSV file, header first, from `rows`; returns the row count.
fn write_rows(path: &Path, rows: &mut RowSource<'_>) -> Result<u64> {
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
    let n = rows(&mut |cols| line(&mut cols.iter().cloned()), &mut |row| {
        line(&mut row.iter().map(value_text));
        Ok(())
    })?;
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

/// An output file with its path, for errors that name it.
struct Out {
    path: PathBuf,
    w: BufWriter<File>,
    rows: u64,
}

impl Out {
    fn create(path: PathBuf, header: &str) -> Result<Out> {
        let mut o = Out {
            w: create(&path)?,
            path,
            rows: 0,
        };
        o.io(|w| w.write_all(header.as_bytes()))?;
        Ok(o)
    }

    fn io(&mut self, f: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>) -> Result<()> {
        f(&mut self.w).map_err(|e| ExportError::Write {
            path: self.path.clone(),
            error: e,
        })
    }

    fn finish(mut self) -> Result<(PathBuf, u64)> {
        self.io(|w| w.flush())?;
        Ok((self.path, self.rows))
    }
}

/// rocpd's `top` view, computed while the regions stream by: per name,
/// calls and summed duration. strobe writes no kernel dispatches or
/// memory copies (the view's other rows); a database that has them gets
/// the view itself.
#[derive(Default)]
struct Top {
    by_name: HashMap<Arc<str>, (i64, i64)>,
    total: i64,
}

impl Top {
    fn add(&mut self, r: &RegionRow) {
        let d = r.end - r.start;
        let e = self.by_name.entry(r.name.clone()).or_default();
        e.0 += 1;
        e.1 += d;
        self.total += d;
    }

    /// Writes `NAME_top.csv` with the view's columns, values and order
    /// (total duration descending; ties by name).
    fn write(self, p: &Profile, path: PathBuf) -> Result<(PathBuf, u64)> {
        if p.has_device_activity()? {
            let n = write_rows(&path, &mut |cols, row| p.table_rows(Table::Top, cols, row))?;
            return Ok((path, n));
        }
        let mut rows: Vec<(Arc<str>, i64, i64)> = self
            .by_name
            .into_iter()
            .map(|(n, (c, d))| (n, c, d))
            .collect();
        rows.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        let mut o = Out::create(path, "name,total_calls,total_duration,average,percentage\n")?;
        for (name, calls, sum) in rows {
            o.rows += 1;
            // The view's arithmetic: REAL µs, integer average before the
            // division, percentage of all regions' time (NULL when none).
            let pct = if self.total != 0 {
                value_text(&Value::Real(sum as f64 * 100.0 / self.total as f64))
            } else {
                String::new()
            };
            o.io(|w| {
                field(w, &name)?;
                w.write_all(b",")?;
                int(w, calls)?;
                w.write_all(b",")?;
                w.write_all(value_text(&Value::Real(sum as f64 / 1000.0)).as_bytes())?;
                w.write_all(b",")?;
                w.write_all(value_text(&Value::Real((sum / calls) as f64 / 1000.0)).as_bytes())?;
                w.write_all(b",")?;
                w.write_all(pct.as_bytes())?;
                w.write_all(b"\n")
            })?;
        }
        o.finish()
    }
}

/// Writes integers without the formatting machinery.
fn int(w: &mut impl Write, v: i64) -> std::io::Result<()> {
    w.write_all(itoa::Buffer::new().format(v).as_bytes())
}

/// Process numbers: 1, 2, … in `NAME_processes.csv` order, by guid (the
/// last one looked up is remembered by pointer: rows come in runs).
struct ProcessNumbers {
    by_guid: HashMap<String, i64>,
    last: Option<(Arc<str>, i64)>,
}

impl ProcessNumbers {
    fn new(run: &Run) -> ProcessNumbers {
        let by_guid = run
            .processes
            .iter()
            .enumerate()
            .map(|(k, pr)| (pr.guid.clone(), k as i64 + 1))
            .collect();
        ProcessNumbers {
            by_guid,
            last: None,
        }
    }

    fn of_str(&self, guid: &str) -> i64 {
        self.by_guid.get(guid).copied().unwrap_or(0)
    }

    fn of(&mut self, guid: &Arc<str>) -> i64 {
        if let Some((g, n)) = &self.last {
            if Arc::ptr_eq(g, guid) {
                return *n;
            }
        }
        let n = self.of_str(guid);
        self.last = Some((guid.clone(), n));
        n
    }
}

fn write_region(o: &mut Out, process: i64, r: &RegionRow) -> Result<()> {
    o.rows += 1;
    o.io(|w| {
        int(w, process)?;
        w.write_all(b",")?;
        int(w, r.pid)?;
        w.write_all(b",")?;
        int(w, r.tid)?;
        w.write_all(b",")?;
        field(w, r.category.as_deref().unwrap_or(""))?;
        w.write_all(b",")?;
        field(w, &r.name)?;
        w.write_all(b",")?;
        int(w, r.start)?;
        w.write_all(b",")?;
        int(w, r.end)?;
        w.write_all(b",")?;
        int(w, r.end - r.start)?;
        w.write_all(b",")?;
        if let Some(c) = r.corr_id {
            int(w, c)?;
        }
        w.write_all(b"\n")
    })
}

fn write_sample(o: &mut Out, process: i64, s: &SampleEvent<'_>) -> Result<()> {
    o.rows += 1;
    o.io(|w| {
        int(w, process)?;
        w.write_all(b",")?;
        int(w, s.pid)?;
        w.write_all(b",")?;
        int(w, s.tid)?;
        w.write_all(b",")?;
        int(w, s.timestamp)?;
        w.write_all(b",")?;
        w.write_all(s.kind.category().as_bytes())?;
        w.write_all(b",")?;
        w.write_all(itoa::Buffer::new().format(s.weight_ns).as_bytes())?;
        w.write_all(b",")?;
        if let Some(id) = s.stack_id {
            int(w, id)?;
        }
        w.write_all(b"\n")
    })
}

/// Writes each stack the samples named once: its leaf and its frames,
/// outermost first, joined by `;`.
fn write_stacks(
    p: &Profile,
    guids: &HashMap<i64, Arc<str>>,
    stacks: &[(i64, i64)],
    path: PathBuf,
) -> Result<(PathBuf, u64)> {
    let mut o = Out::create(path, STACKS_HEADER)?;
    let mut text = String::new();
    for &(process, id) in stacks {
        let guid = guids.get(&process).map_or("", |g| &**g);
        let frames = p.resolve_stack(guid, id)?;
        text.clear();
        for (k, f) in frames.iter().rev().enumerate() {
            if k > 0 {
                text.push(';');
            }
            text.push_str(&f.display_name());
        }
        let leaf = frames.first().map(|f| f.display_name()).unwrap_or_default();
        o.rows += 1;
        o.io(|w| {
            int(w, process)?;
            w.write_all(b",")?;
            int(w, id)?;
            w.write_all(b",")?;
            field(w, &leaf)?;
            w.write_all(b",")?;
            field(w, &text)?;
            w.write_all(b"\n")
        })?;
    }
    o.finish()
}

/// Writes a small table with the process number in front (the table's
/// first column is the guid, which stays in `processes` only).
fn write_numbered(
    p: &Profile,
    numbers: &ProcessNumbers,
    table: Table,
    path: PathBuf,
) -> Result<(PathBuf, u64)> {
    let out = RefCell::new(create(&path)?);
    let io_err: RefCell<Option<std::io::Error>> = RefCell::new(None);
    let keep_guid = table == Table::Processes;
    let line = |process: &str, vals: &mut dyn Iterator<Item = String>| {
        let mut o = out.borrow_mut();
        let r = (|| {
            field(&mut *o, process)?;
            for (k, v) in vals.enumerate() {
                if k == 0 && !keep_guid {
                    continue;
                }
                o.write_all(b",")?;
                field(&mut *o, &v)?;
            }
            o.write_all(b"\n")
        })();
        if let Err(e) = r {
            io_err.borrow_mut().get_or_insert(e);
        }
    };
    let n = p.table_rows(
        table,
        &mut |cols| line("process", &mut cols.iter().cloned()),
        &mut |row| {
            let guid = match &row[0] {
                Value::Text(g) => g.as_str(),
                _ => "",
            };
            line(
                &numbers.of_str(guid).to_string(),
                &mut row.iter().map(value_text),
            );
            Ok(())
        },
    )?;
    let w = |e| ExportError::Write {
        path: path.clone(),
        error: e,
    };
    if let Some(e) = io_err.into_inner() {
        return Err(w(e));
    }
    out.into_inner().flush().map_err(w)?;
    Ok((path, n))
}

/// Writes one CSV file per table into `dir`, named `<stem>_<table>.csv`
/// (processes, threads, regions, samples, stacks, counters, top; see
/// docs/exports.md); returns the files with their row counts.
pub fn write_csv(p: &Profile, dir: &Path, stem: &str) -> Result<Vec<(PathBuf, u64)>> {
    let file = |table: &str| dir.join(format!("{stem}_{table}.csv"));
    let mut sink = Csv {
        p,
        file: &file,
        files: Vec::new(),
        numbers: ProcessNumbers {
            by_guid: HashMap::new(),
            last: None,
        },
        regions: Out::create(file("regions"), REGIONS_HEADER)?,
        samples: Out::create(file("samples"), SAMPLES_HEADER)?,
        top: Top::default(),
        stacks: Default::default(),
        guids: HashMap::new(),
    };
    p.visit(&mut sink)?;
    let Csv {
        mut files,
        numbers,
        regions,
        samples,
        top,
        stacks,
        guids,
        ..
    } = sink;
    files.push(regions.finish()?);
    files.push(samples.finish()?);
    let mut stacks: Vec<(i64, i64)> = stacks.into_iter().collect();
    stacks.sort_unstable();
    files.push(write_stacks(p, &guids, &stacks, file("stacks"))?);
    files.push(write_numbered(
        p,
        &numbers,
        Table::Counters,
        file("counters"),
    )?);
    files.push(top.write(p, file("top"))?);
    Ok(files)
}

/// The CSV files as a sink of the profile: the processes and threads
/// tables on [`ProfileSink::begin`], then regions and samples (the
/// samples' readers scan and sort while the regions are written).
struct Csv<'a> {
    p: &'a Profile,
    /// The path of a table's file.
    file: &'a dyn Fn(&str) -> PathBuf,
    files: Vec<(PathBuf, u64)>,
    numbers: ProcessNumbers,
    regions: Out,
    samples: Out,
    top: Top,
    /// (process number, stack) of every stack the samples named.
    stacks: std::collections::HashSet<(i64, i64), crate::Fast>,
    /// A guid of each process number that named a stack.
    guids: HashMap<i64, Arc<str>>,
}

impl ProfileSink for Csv<'_> {
    type Error = ExportError;

    fn order(&self) -> Order {
        Order::Sequence(&[Stream::Regions, Stream::Samples])
    }

    fn begin(&mut self, run: &Run) -> Result<()> {
        self.numbers = ProcessNumbers::new(run);
        for (table, name) in [(Table::Processes, "processes"), (Table::Threads, "threads")] {
            let f = write_numbered(self.p, &self.numbers, table, (self.file)(name))?;
            self.files.push(f);
        }
        Ok(())
    }

    fn region(&mut self, r: &RegionRow) -> Result<()> {
        let n = self.numbers.of(&r.guid);
        write_region(&mut self.regions, n, r)?;
        self.top.add(r);
        Ok(())
    }

    fn sample(&mut self, s: &SampleEvent<'_>, _: &mut Stacks<'_>) -> Result<()> {
        let n = self.numbers.of(s.guid);
        if let Some(id) = s.stack_id {
            if self.stacks.insert((n, id)) {
                self.guids.entry(n).or_insert_with(|| s.guid.clone());
            }
        }
        write_sample(&mut self.samples, n, s)
    }
}
