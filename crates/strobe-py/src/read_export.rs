//! Exports from Python: `strobe.convert`, `strobe.merge` and the
//! streaming `strobe.export.writer`.
//!
//! Owns choosing the format (by name as `strobe convert -f` takes it, or
//! from the output's extension), writing one through `<output>.partial`
//! renamed when complete (as `strobe convert` does), and [`ExportSink`]:
//! chunks of regions and samples written into temporary profile databases
//! by strobe-db's `Writer` (one per process, memory bounded by its
//! interning caches), converted on close by the same strobe-export
//! function as `strobe convert`. It must never implement a format itself
//! and never modify an input.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use strobe_db::atomic::WriteError;
use strobe_db::{
    FrameSymbols, ModuleId, ModuleRow, ProcessInfo, Profile, Region, SampleMeta, StackFrame,
    ThreadInfo, ThreadRef, TrackId, Writer, WriterOptions,
};
use strobe_export::folded::FoldOptions;
use strobe_export::Format;

use super::{db_err, export_err, open_profile};

/// The format named `format`, or the one whose extension `output` ends
/// with (the longest that matches).
pub fn choose_format(output: &str, format: Option<&str>) -> PyResult<Format> {
    if let Some(f) = format {
        return f.parse::<Format>().map_err(export_err);
    }
    Format::ALL
        .iter()
        .filter(|f| output.ends_with(f.extension()))
        .max_by_key(|f| f.extension().len())
        .copied()
        .ok_or_else(|| {
            let names: Vec<String> = Format::ALL
                .iter()
                .map(|f| format!("{} ({})", f.name(), f.extension()))
                .collect();
            PyValueError::new_err(format!(
                "{output}: cannot tell the format from the file name; give format= one of {}",
                names.join(", ")
            ))
        })
}

/// Writes through `<path>.partial`, renamed to `path` on success
/// ([`strobe_db::atomic::write_file`]).
fn with_file<T>(
    path: &Path,
    f: impl FnOnce(BufWriter<File>) -> strobe_export::Result<T>,
) -> PyResult<T> {
    strobe_db::atomic::write_file(path, f).map_err(|e| match e {
        WriteError::Create { path, error } => PyErr::from(error).tap_message(format!(
            "cannot create {} (check the directory is writable)",
            path.display()
        )),
        WriteError::Write(e) => export_err(e),
        WriteError::Rename { from, to, error } => PyRuntimeError::new_err(format!(
            "cannot rename {} to {}: {error}",
            from.display(),
            to.display()
        )),
    })
}

/// Replaces an OS error's message by ours (keeping its exception type).
trait TapMessage {
    fn tap_message(self, msg: String) -> PyErr;
}

impl TapMessage for PyErr {
    fn tap_message(self, msg: String) -> PyErr {
        Python::attach(|py| {
            let inner = self.value(py).to_string();
            let ty = self.get_type(py);
            PyErr::from_type(ty, format!("{msg}: {inner}"))
        })
    }
}

/// Writes `p` in `format` (or the format of `output`'s extension) to
/// `output`; CSV writes `<stem>_<table>.csv` files beside it, Parquet the
/// dataset directory `output`. Returns
/// what was written, as `strobe convert` reports it.
pub fn write_format(p: &Profile, output: &str, format: Option<&str>) -> PyResult<String> {
    let f = choose_format(output, format)?;
    let path = PathBuf::from(output);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            PyErr::from(e).tap_message(format!("cannot create output directory {}", dir.display()))
        })?;
    }
    let stem_of = |ext: &str| {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("strobe")
            .to_string();
        name.strip_suffix(ext).unwrap_or(&name).to_string()
    };
    let fold = FoldOptions::default();
    Ok(match f {
        Format::Perfetto => {
            let s = with_file(&path, |w| strobe_export::perfetto::write_perfetto(p, w))?;
            format!(
                "{} events ({} slices, {} instants, {} samples, {} counter values)",
                s.events, s.slices, s.instants, s.samples, s.counter_values
            )
        }
        Format::Chrome => {
            let s = with_file(&path, |w| strobe_export::chrome::write_chrome(p, w))?;
            format!(
                "{} regions, {} instants, {} counter values",
                s.regions, s.instants, s.counters
            )
        }
        Format::Folded => {
            let n = with_file(&path, |w| strobe_export::folded::write_folded(p, fold, w))?;
            format!("{n} samples")
        }
        Format::Svg => {
            let title = format!("strobe: {}", stem_of(".svg"));
            let n = with_file(&path, |w| {
                strobe_export::folded::write_flamegraph(p, fold, &title, w)
            })?;
            format!("{n} samples")
        }
        Format::Pprof => {
            let s = with_file(&path, |w| strobe_export::pprof::write_pprof(p, w))?;
            format!(
                "{} samples in {} stacks, period {} ns",
                s.samples, s.entries, s.period_ns
            )
        }
        Format::Firefox => {
            let s = with_file(&path, |w| strobe_export::firefox::write_firefox(p, w))?;
            format!(
                "{} threads, {} samples, {} markers",
                s.threads, s.samples, s.markers
            )
        }
        Format::Parquet => {
            let s = strobe_export::parquet::write_parquet(p, &path).map_err(export_err)?;
            let tables: Vec<String> = s
                .tables
                .iter()
                .map(|t| format!("{} {}", t.rows, t.table))
                .collect();
            format!("{} (rows: {})", path.display(), tables.join(", "))
        }
        Format::Csv => {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let files =
                strobe_export::csv::write_csv(p, dir, &stem_of(".csv")).map_err(export_err)?;
            let list: Vec<String> = files
                .iter()
                .map(|(f, n)| format!("{} ({n} rows)", f.display()))
                .collect();
            list.join(", ")
        }
    })
}

/// The canonical name of the format `format` (or of `output`'s
/// extension); a `ValueError` names the formats when it is unknown.
#[pyfunction]
#[pyo3(signature = (output, format=None))]
fn check_format(output: &str, format: Option<&str>) -> PyResult<&'static str> {
    Ok(choose_format(output, format)?.name())
}

/// `strobe.convert`: `inputs` (files, directories, globs) read as one,
/// window applied, written to `output`.
#[pyfunction]
#[pyo3(signature = (inputs, output, format=None, start=None, end=None))]
fn convert(
    inputs: Vec<String>,
    output: String,
    format: Option<String>,
    start: Option<String>,
    end: Option<String>,
) -> PyResult<String> {
    // The format is checked before the inputs are read.
    choose_format(&output, format.as_deref())?;
    let p = open_profile(&inputs, start.as_deref(), end.as_deref()).map_err(db_err)?;
    write_format(&p, &output, format.as_deref())
}

/// `strobe.merge`: the physical merge of `strobe merge`; returns (files,
/// processes, rows).
#[pyfunction]
fn merge(py: Python<'_>, inputs: Vec<String>, output: String) -> PyResult<(usize, usize, u64)> {
    let files = strobe_db::inputs::expand_inputs(&inputs).map_err(db_err)?;
    let stats = py
        .detach(|| strobe_db::merge(&files, Path::new(&output), &mut |_| {}))
        .map_err(db_err)?;
    Ok((stats.inputs, stats.processes, stats.rows))
}

/// One process of an [`ExportSink`].
struct Proc {
    w: Writer,
    threads: HashMap<i64, (ThreadRef, TrackId)>,
    modules: HashMap<String, ModuleId>,
    frames: HashMap<(String, String), StackFrame>,
    next_pc: u64,
    end: u64,
}

/// The databases behind `strobe.export.writer`: chunks of regions and
/// samples go into one temporary profile database per process.
#[pyclass(module = "strobe._native", unsendable)]
pub struct ExportSink {
    dir: PathBuf,
    procs: HashMap<String, Proc>,
    written: Vec<PathBuf>,
    inputs: Vec<String>,
}

fn ints(b: &[u8], what: &str, n: usize) -> PyResult<Vec<i64>> {
    if b.len() != n * 8 {
        return Err(PyValueError::new_err(format!(
            "column {what}: {} bytes for {n} rows",
            b.len()
        )));
    }
    Ok(b.chunks_exact(8)
        .map(|c| {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            i64::from_ne_bytes(a)
        })
        .collect())
}

fn codes(b: &[u8], what: &str, n: usize, len: usize) -> PyResult<Vec<i32>> {
    if b.len() != n * 4 {
        return Err(PyValueError::new_err(format!(
            "column {what}: {} bytes for {n} rows",
            b.len()
        )));
    }
    let v: Vec<i32> = b
        .chunks_exact(4)
        .map(|c| {
            let mut a = [0u8; 4];
            a.copy_from_slice(c);
            i32::from_ne_bytes(a)
        })
        .collect();
    if v.iter().any(|&c| c >= len as i32) {
        return Err(PyValueError::new_err(format!(
            "column {what}: a code beyond its {len} values"
        )));
    }
    Ok(v)
}

fn ns(v: i64) -> u64 {
    v.max(0) as u64
}

impl ExportSink {
    fn proc(&mut self, key: &str, pid: i64, first_ns: u64) -> PyResult<&mut Proc> {
        if !self.procs.contains_key(key) {
            let n = self.written.len();
            let path = self.dir.join(format!("{n}.db"));
            let info = ProcessInfo {
                pid: pid.clamp(0, u32::MAX as i64) as u32,
                ppid: 0,
                init_ns: first_ns,
                start_ns: first_ns,
                start_unix_ns: strobe_core_now_unix() + n as u64,
                command: format!("strobe.export.writer ({key})"),
                environment: Vec::new(),
            };
            let w = Writer::create(&path, &info, WriterOptions::default()).map_err(db_err)?;
            self.written.push(path);
            self.procs.insert(
                key.to_string(),
                Proc {
                    w,
                    threads: HashMap::new(),
                    modules: HashMap::new(),
                    frames: HashMap::new(),
                    next_pc: 0x1000,
                    end: first_ns,
                },
            );
        }
        self.procs
            .get_mut(key)
            .ok_or_else(|| PyRuntimeError::new_err("process table lost"))
    }
}

fn strobe_core_now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Proc {
    fn thread(&mut self, tid: i64) -> PyResult<(ThreadRef, TrackId)> {
        if let Some(t) = self.threads.get(&tid) {
            return Ok(*t);
        }
        let th = self
            .w
            .add_thread(&ThreadInfo {
                tid: tid.clamp(0, u32::MAX as i64) as u32,
                name: None,
                start_ns: None,
            })
            .map_err(db_err)?;
        let tr = self.w.add_track(Some(th), "samples").map_err(db_err)?;
        self.threads.insert(tid, (th, tr));
        Ok((th, tr))
    }

    /// A frame named `function` in `module`: a made-up pc of its own in
    /// the module, named as a symbolizer would name it.
    fn frame(&mut self, function: &str, module: &str) -> PyResult<StackFrame> {
        let key = (module.to_string(), function.to_string());
        if let Some(f) = self.frames.get(&key) {
            return Ok(*f);
        }
        let m = match self.modules.get(module) {
            Some(m) => *m,
            None => {
                let m = self
                    .w
                    .add_module(&ModuleRow {
                        path: module,
                        build_id: None,
                        load_address: 0,
                        size: 0,
                        file_offset: 0,
                        load_ns: None,
                    })
                    .map_err(db_err)?;
                self.modules.insert(module.to_string(), m);
                m
            }
        };
        let f = StackFrame {
            module: Some(m),
            rel_pc: self.next_pc,
        };
        self.next_pc += 16;
        let id = self.w.intern_frame(f).map_err(db_err)?;
        self.w
            .set_frame_symbols(&[FrameSymbols {
                frame: id,
                function: Some(function),
                file: None,
                line: None,
            }])
            .map_err(db_err)?;
        self.frames.insert(key, f);
        Ok(f)
    }
}

#[pymethods]
impl ExportSink {
    #[new]
    fn new(dir: String) -> Self {
        ExportSink {
            dir: PathBuf::from(dir),
            procs: HashMap::new(),
            written: Vec::new(),
            inputs: Vec::new(),
        }
    }

    /// Adds profile databases (files, directories, globs) to the output
    /// as they are.
    fn add_inputs(&mut self, inputs: Vec<String>) -> PyResult<()> {
        strobe_db::inputs::expand_inputs(&inputs).map_err(db_err)?;
        self.inputs.extend(inputs);
        Ok(())
    }

    /// Appends regions: `keys` name the processes (guids or pids).
    #[allow(clippy::too_many_arguments)]
    fn regions(
        &mut self,
        n: usize,
        key: &[u8],
        keys: Vec<String>,
        pid: &[u8],
        tid: &[u8],
        name: &[u8],
        names: Vec<String>,
        category: &[u8],
        categories: Vec<String>,
        start: &[u8],
        end: &[u8],
    ) -> PyResult<()> {
        let key = codes(key, "process", n, keys.len())?;
        let pid = ints(pid, "pid", n)?;
        let tid = ints(tid, "tid", n)?;
        let name = codes(name, "name", n, names.len())?;
        let category = codes(category, "category", n, categories.len())?;
        let start = ints(start, "start", n)?;
        let end = ints(end, "end", n)?;
        for k in 0..n {
            let pk = keys.get(key[k] as usize).map_or("", String::as_str);
            let p = self.proc(pk, pid[k], ns(start[k]))?;
            let (th, _) = p.thread(tid[k])?;
            let nm = names.get(name[k] as usize).map_or("", String::as_str);
            let nm = p.w.intern_string(nm).map_err(db_err)?;
            let cat = match categories.get(category[k] as usize) {
                Some(c) if category[k] >= 0 => Some(p.w.intern_string(c).map_err(db_err)?),
                _ => None,
            };
            p.w.append_region(&Region {
                thread: th,
                start_ns: ns(start[k]),
                end_ns: ns(end[k]).max(ns(start[k])),
                name: nm,
                category: cat,
                stack: None,
                correlation_id: None,
                args: &[],
            })
            .map_err(db_err)?;
            p.end = p.end.max(ns(end[k]));
        }
        Ok(())
    }

    /// Appends samples: `stacks` are lists of (function, module) frames,
    /// leaf first.
    #[allow(clippy::too_many_arguments)]
    fn samples(
        &mut self,
        n: usize,
        key: &[u8],
        keys: Vec<String>,
        pid: &[u8],
        tid: &[u8],
        timestamp: &[u8],
        weight: &[u8],
        kind: &[u8],
        kinds: Vec<String>,
        stack: &[u8],
        stacks: Vec<Vec<(String, Option<String>)>>,
    ) -> PyResult<()> {
        let key = codes(key, "process", n, keys.len())?;
        let pid = ints(pid, "pid", n)?;
        let tid = ints(tid, "tid", n)?;
        let ts = ints(timestamp, "timestamp", n)?;
        let weight = ints(weight, "weight_ns", n)?;
        let kind = codes(kind, "kind", n, kinds.len())?;
        let stack = codes(stack, "stack", n, stacks.len())?;
        let mut kind_of = Vec::new();
        for k in &kinds {
            kind_of.push(strobe_db::scan::kind_of(k).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "unknown sample kind {k:?} (sample, wall_sample or off_cpu)"
                ))
            })?);
        }
        let mut made: HashMap<(i32, i32), Vec<StackFrame>> = HashMap::new();
        for k in 0..n {
            let pk = keys.get(key[k] as usize).map_or("", String::as_str);
            let p = self.proc(pk, pid[k], ns(ts[k]))?;
            let (_, track) = p.thread(tid[k])?;
            let frames = match made.get(&(key[k], stack[k])) {
                Some(f) => f.clone(),
                None => {
                    let mut f = Vec::new();
                    if stack[k] >= 0 {
                        for (func, module) in &stacks[stack[k] as usize] {
                            f.push(p.frame(func, module.as_deref().unwrap_or("[unknown]"))?);
                        }
                    }
                    made.insert((key[k], stack[k]), f.clone());
                    f
                }
            };
            let meta = SampleMeta {
                timestamp_ns: ns(ts[k]),
                kind: if kind[k] >= 0 {
                    kind_of[kind[k] as usize]
                } else {
                    strobe_db::SampleKind::Cpu
                },
                weight_ns: ns(weight[k]),
            };
            p.w.append_sample(track, meta, &frames).map_err(db_err)?;
            p.end = p.end.max(ns(ts[k]));
        }
        Ok(())
    }

    /// Ends the databases and writes everything in `format` to `output`.
    #[pyo3(signature = (output, format=None))]
    fn finish(&mut self, output: String, format: Option<String>) -> PyResult<String> {
        choose_format(&output, format.as_deref())?;
        let mut inputs = self.inputs.clone();
        for (_, p) in self.procs.drain() {
            p.w.finish(p.end).map_err(db_err)?;
        }
        inputs.extend(self.written.iter().map(|p| p.display().to_string()));
        if inputs.is_empty() {
            return Err(PyValueError::new_err(format!(
                "{output}: nothing was written (write DataFrames of regions or samples, or a Profile)"
            )));
        }
        let p = Profile::open(&inputs).map_err(db_err)?;
        let r = write_format(&p, &output, format.as_deref());
        drop(p);
        for f in self.written.drain(..) {
            let _ = std::fs::remove_file(f);
        }
        r
    }
}

/// Registers the export functions and class.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_format, m)?)?;
    m.add_function(wrap_pyfunction!(convert, m)?)?;
    m.add_function(wrap_pyfunction!(merge, m)?)?;
    m.add_class::<ExportSink>()?;
    Ok(())
}
