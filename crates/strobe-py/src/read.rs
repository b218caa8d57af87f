//! Reading profile databases from Python: `strobe.open` and the tables of
//! a `Profile` as typed columns.
//!
//! Owns the `_native.Profile` class (many databases opened as one by
//! strobe-db's `Profile`, exactly as `strobe query` opens them, with the
//! same `--start/--end` window parser), its tables (SQL results, regions,
//! samples with resolved frames, threads, processes, counters, the
//! function and summary tables of `strobe_db::summary`), chunked streaming
//! of any of them on a reader thread of its own, the flamegraph, and the
//! mapping of strobe errors to Python exceptions. Submodules: [`cols`]
//! (columns handed to Python as buffers), [`samples`] (the fast sample
//! scan), [`export`] (conversions, merge, the streaming export writer).
//! It must never compute a number strobe-db or strobe-export already
//! computes, never build one Python object per row, and never panic on
//! bad input: every failure is a Python exception with the CLI's message.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver};

use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyStopIteration, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use strobe_db::summary::{function_summary, region_summary, thread_summary};
use strobe_db::visit::Table as NamedTable;
use strobe_db::{DbError, Profile, Value};

#[path = "read_cols.rs"]
pub mod cols;
#[path = "read_export.rs"]
pub mod export;
#[path = "read_samples.rs"]
pub mod samples;

use cols::Table;

/// The Python exception for a strobe-db error: missing files are
/// `FileNotFoundError`, bad inputs and arguments `ValueError`, the rest
/// `RuntimeError`; the message is the CLI's.
pub fn db_err(e: DbError) -> PyErr {
    let msg = e.to_string();
    match &e {
        DbError::Io { error, .. } if error.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(msg)
        }
        DbError::NoInput { .. }
        | DbError::NotSqlite { .. }
        | DbError::NotProfile { .. }
        | DbError::MissingTable { .. }
        | DbError::NewerSchema { .. }
        | DbError::DuplicateProcess { .. }
        | DbError::TimeBound(_)
        | DbError::InvertedWindow { .. }
        | DbError::Query { .. } => PyValueError::new_err(msg),
        _ => PyRuntimeError::new_err(msg),
    }
}

/// The Python exception for an export error (see [`db_err`]).
pub fn export_err(e: strobe_export::ExportError) -> PyErr {
    use strobe_export::ExportError as E;
    match e {
        E::Db(d) => db_err(d),
        e @ (E::UnknownFormat(_) | E::Empty { .. } | E::Usage(_)) => {
            PyValueError::new_err(e.to_string())
        }
        e => PyRuntimeError::new_err(e.to_string()),
    }
}

/// Opens `inputs` as one profile and applies the window (strings as
/// `strobe query --start/--end` takes them).
pub fn open_profile(
    inputs: &[String],
    start: Option<&str>,
    end: Option<&str>,
) -> Result<Profile, DbError> {
    let mut p = Profile::open(inputs)?;
    p.set_window_text(start, end)?;
    Ok(p)
}

/// Streams the rows of a query or of a named table of `p`: column names
/// to `on_columns` once, each row to `on_row`.
fn each_row(
    p: &Profile,
    rows: &Rows,
    on_columns: &mut dyn FnMut(&[String]),
    on_row: &mut dyn FnMut(&[Value]) -> Result<(), DbError>,
) -> Result<u64, DbError> {
    match rows {
        Rows::Sql(sql) => p.query_each(sql, on_columns, on_row),
        Rows::Named(t) => p.table_rows(*t, on_columns, on_row),
    }
}

/// Runs a query or reads a named table of `p` into one table.
fn query_table(p: &Profile, rows: &Rows) -> Result<Table, DbError> {
    let table: RefCell<Option<Table>> = RefCell::new(None);
    each_row(
        p,
        rows,
        &mut |cols| *table.borrow_mut() = Some(Table::new(cols.to_vec())),
        &mut |vals| {
            if let Some(t) = table.borrow_mut().as_mut() {
                t.push_row(vals);
            }
            Ok(())
        },
    )?;
    Ok(table.into_inner().unwrap_or_else(|| Table::new(Vec::new())))
}

/// Where rows of values come from.
#[derive(Clone)]
enum Rows {
    /// A query the user wrote.
    Sql(String),
    /// A named table (`Profile.table`).
    Named(NamedTable),
}

/// What a chunked reader streams.
#[derive(Clone)]
enum Job {
    /// Rows of values.
    Rows(Rows),
    /// Samples with resolved frames (see [`samples`]).
    Samples { stack: bool },
}

/// A chunked read: a reader thread with its own [`Profile`] sends tables
/// of at most `chunk` rows through a channel holding one, so memory holds
/// at most about three chunks whatever the table's size.
#[pyclass(module = "strobe._native")]
pub struct Chunks {
    rx: Option<std::sync::Mutex<Receiver<Result<Table, PyErr>>>>,
}

#[pymethods]
impl Chunks {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let Some(rx) = &self.rx else {
            return Err(PyStopIteration::new_err(()));
        };
        let got = py.detach(|| {
            rx.lock()
                .map_err(|_| PyRuntimeError::new_err("chunk reader poisoned"))
                .map(|r| r.recv().ok())
        })?;
        match got {
            Some(Ok(t)) => t.into_py(py),
            Some(Err(e)) => {
                self.rx = None;
                Err(e)
            }
            None => {
                self.rx = None;
                Err(PyStopIteration::new_err(()))
            }
        }
    }
}

fn spawn_chunks(
    files: Vec<PathBuf>,
    window: (Option<String>, Option<String>),
    job: Job,
    chunk: usize,
) -> Chunks {
    let (tx, rx) = sync_channel::<Result<Table, PyErr>>(1);
    std::thread::spawn(move || {
        let run = || -> Result<(), PyErr> {
            let mut p = Profile::open_files(&files).map_err(db_err)?;
            p.set_window_text(window.0.as_deref(), window.1.as_deref())
                .map_err(db_err)?;
            match job {
                Job::Rows(rows) => {
                    let table: RefCell<Option<Table>> = RefCell::new(None);
                    let names: RefCell<Vec<String>> = RefCell::new(Vec::new());
                    let mut sent = false;
                    let mut closed = false;
                    let r = each_row(
                        &p,
                        &rows,
                        &mut |cols| {
                            *names.borrow_mut() = cols.to_vec();
                            *table.borrow_mut() = Some(Table::new(cols.to_vec()));
                        },
                        &mut |vals| {
                            let mut guard = table.borrow_mut();
                            let Some(t) = guard.as_mut() else {
                                return Ok(());
                            };
                            t.push_row(vals);
                            if t.rows() >= chunk {
                                let full = std::mem::replace(t, Table::new(names.borrow().clone()));
                                sent = true;
                                if tx.send(Ok(full)).is_err() {
                                    // The iterator was dropped: stop reading.
                                    closed = true;
                                    return Err(DbError::Query {
                                        message: "the chunk iterator was closed".into(),
                                        sql: String::new(),
                                    });
                                }
                            }
                            Ok(())
                        },
                    );
                    if closed {
                        return Ok(());
                    }
                    r.map_err(db_err)?;
                    if let Some(t) = table.into_inner() {
                        if t.rows() > 0 || !sent {
                            let _ = tx.send(Ok(t));
                        }
                    }
                    Ok(())
                }
                Job::Samples { stack } => {
                    samples::stream(&p, stack, chunk, &mut |t| tx.send(Ok(t)).is_ok())
                }
            }
        };
        if let Err(e) = run() {
            let _ = tx.send(Err(e));
        }
    });
    Chunks {
        rx: Some(std::sync::Mutex::new(rx)),
    }
}

/// Many profile databases read as one (`strobe.open`).
#[pyclass(module = "strobe._native", unsendable)]
pub struct NativeProfile {
    p: Profile,
    inputs: Vec<String>,
    window: (Option<String>, Option<String>),
}

impl NativeProfile {
    /// The strobe-db profile.
    pub fn profile(&self) -> &Profile {
        &self.p
    }

    fn table<'py>(
        &self,
        py: Python<'py>,
        job: Job,
        chunks: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(n) = chunks {
            if n == 0 {
                return Err(PyValueError::new_err("chunks must be at least 1 row"));
            }
            let c = spawn_chunks(self.p.files().to_vec(), self.window.clone(), job, n);
            return Ok(Bound::new(py, c)?.into_any());
        }
        let t = match job {
            Job::Rows(rows) => query_table(&self.p, &rows).map_err(db_err)?,
            Job::Samples { stack } => samples::all(&self.p, stack)?,
        };
        Ok(t.into_py(py)?.into_any())
    }
}

fn rows_table<T>(names: &[&str], rows: &[T], row: impl Fn(&T) -> Vec<Value>) -> Table {
    let mut t = Table::new(names.iter().map(|s| s.to_string()).collect());
    for r in rows {
        t.push_row(&row(r));
    }
    t
}

fn opt_i(v: Option<i64>) -> Value {
    v.map_or(Value::Null, Value::Integer)
}

fn opt_s(v: &Option<String>) -> Value {
    v.clone().map_or(Value::Null, Value::Text)
}

#[pymethods]
impl NativeProfile {
    #[new]
    #[pyo3(signature = (inputs, start=None, end=None))]
    fn new(inputs: Vec<String>, start: Option<String>, end: Option<String>) -> PyResult<Self> {
        let p = open_profile(&inputs, start.as_deref(), end.as_deref()).map_err(db_err)?;
        Ok(NativeProfile {
            p,
            inputs,
            window: (start, end),
        })
    }

    /// The database files read, in order.
    fn files(&self) -> Vec<String> {
        self.p
            .files()
            .iter()
            .map(|f| f.display().to_string())
            .collect()
    }

    /// The inputs as given.
    fn inputs(&self) -> Vec<String> {
        self.inputs.clone()
    }

    /// The window strings as given.
    fn window_args(&self) -> (Option<String>, Option<String>) {
        self.window.clone()
    }

    /// The absolute window (ns) applied, open sides `None`.
    fn window(&self) -> (Option<i64>, Option<i64>) {
        self.p.window()
    }

    /// Processes across all inputs.
    fn process_count(&self) -> usize {
        self.p.process_count()
    }

    /// Any SQL on the profile's views, as columns (or chunks of them).
    #[pyo3(signature = (sql, chunks=None))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        chunks: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.table(py, Job::Rows(Rows::Sql(sql)), chunks)
    }

    /// A named table (`regions`, `threads`, `processes`, `counters`,
    /// `stacks`) as columns (or chunks of them).
    #[pyo3(signature = (name, chunks=None))]
    fn named<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        chunks: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let t = NamedTable::frame(name)
            .ok_or_else(|| PyValueError::new_err(format!("no table named {name}")))?;
        self.table(py, Job::Rows(Rows::Named(t)), chunks)
    }

    /// Samples with their leaf frame resolved (and whole stacks when
    /// `stack`), in time order.
    #[pyo3(signature = (stack=false, chunks=None))]
    fn samples<'py>(
        &self,
        py: Python<'py>,
        stack: bool,
        chunks: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.table(py, Job::Samples { stack }, chunks)
    }

    /// The sampled-function table of `strobe summary`.
    #[pyo3(signature = (by_process=false))]
    fn functions<'py>(&self, py: Python<'py>, by_process: bool) -> PyResult<Bound<'py, PyList>> {
        let rows = function_summary(&self.p, by_process).map_err(db_err)?;
        functions_table(&rows).into_py(py)
    }

    /// The tables of `strobe summary` (regions, functions, threads).
    #[pyo3(signature = (by_process=false))]
    fn summary<'py>(&self, py: Python<'py>, by_process: bool) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let regions = region_summary(&self.p, by_process).map_err(db_err)?;
        let t = rows_table(
            &[
                "pid",
                "guid",
                "name",
                "time_pct",
                "total_ns",
                "instances",
                "avg_ns",
                "med_ns",
                "min_ns",
                "max_ns",
                "stddev_ns",
                "self_ns",
                "stored",
            ],
            &regions,
            |r| {
                vec![
                    opt_i(r.pid),
                    opt_s(&r.guid),
                    Value::Text(r.name.clone()),
                    Value::Real(r.time_pct),
                    Value::Integer(r.total_ns),
                    Value::Integer(r.instances as i64),
                    Value::Real(r.avg_ns),
                    Value::Real(r.med_ns),
                    Value::Integer(r.min_ns),
                    Value::Integer(r.max_ns),
                    Value::Real(r.stddev_ns),
                    opt_i(r.counted.map(|c| c.self_ns)),
                    opt_i(r.counted.map(|c| c.stored as i64)),
                ]
            },
        );
        d.set_item("regions", t.into_py(py)?)?;
        let functions = function_summary(&self.p, by_process).map_err(db_err)?;
        d.set_item("functions", functions_table(&functions).into_py(py)?)?;
        let threads = thread_summary(&self.p, by_process).map_err(db_err)?;
        let t = rows_table(
            &[
                "pid",
                "guid",
                "tid",
                "name",
                "samples",
                "sampled_ns",
                "sample_pct",
                "off_cpu_ns",
                "regions",
                "region_total_ns",
                "lifetime_ns",
            ],
            &threads,
            |r| {
                vec![
                    Value::Integer(r.pid),
                    Value::Text(r.guid.clone()),
                    Value::Integer(r.tid),
                    opt_s(&r.name),
                    Value::Integer(r.samples as i64),
                    Value::Integer(r.sampled_ns as i64),
                    Value::Real(r.sample_pct),
                    Value::Integer(r.off_cpu_ns as i64),
                    Value::Integer(r.regions as i64),
                    Value::Integer(r.region_total_ns),
                    opt_i(r.lifetime_ns),
                ]
            },
        );
        d.set_item("threads", t.into_py(py)?)?;
        Ok(d)
    }

    /// An SVG flamegraph of the samples (strobe-export's, as `strobe
    /// convert -f svg` draws it).
    #[pyo3(signature = (title=None, per_thread=false, per_process=false, off_cpu=false))]
    fn flamegraph(
        &self,
        title: Option<String>,
        per_thread: bool,
        per_process: bool,
        off_cpu: bool,
    ) -> PyResult<String> {
        let fold = strobe_export::folded::FoldOptions {
            per_process,
            per_thread,
            off_cpu,
        };
        let title = title.unwrap_or_else(|| {
            let stem = self
                .p
                .files()
                .first()
                .and_then(|f| f.file_stem())
                .and_then(|s| s.to_str())
                .unwrap_or("strobe")
                .to_string();
            format!("strobe: {stem}")
        });
        let mut out = Vec::new();
        strobe_export::folded::write_flamegraph(&self.p, fold, &title, &mut out)
            .map_err(export_err)?;
        String::from_utf8(out).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// Writes the profile in `format` to `output` (see `convert`).
    #[pyo3(signature = (output, format=None))]
    fn export(&self, py: Python<'_>, output: String, format: Option<String>) -> PyResult<String> {
        let _ = py;
        export::write_format(&self.p, &output, format.as_deref())
    }
}

fn functions_table(rows: &[strobe_db::summary::FunctionRow]) -> Table {
    rows_table(
        &[
            "pid",
            "guid",
            "name",
            "self_samples",
            "self_ns",
            "self_pct",
            "total_samples",
            "total_ns",
            "total_pct",
            "off_cpu_self_ns",
            "off_cpu_total_ns",
        ],
        rows,
        |r| {
            vec![
                opt_i(r.pid),
                opt_s(&r.guid),
                Value::Text(r.name.clone()),
                Value::Integer(r.self_samples as i64),
                Value::Integer(r.self_ns as i64),
                Value::Real(r.self_pct),
                Value::Integer(r.total_samples as i64),
                Value::Integer(r.total_ns as i64),
                Value::Real(r.total_pct),
                Value::Integer(r.off_cpu_self_ns as i64),
                Value::Integer(r.off_cpu_total_ns as i64),
            ]
        },
    )
}

/// Registers the reading and export classes and functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeProfile>()?;
    m.add_class::<Chunks>()?;
    export::register(m)
}
