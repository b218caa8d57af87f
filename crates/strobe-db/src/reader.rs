//! Reading one or many profile databases as one logical database.
//!
//! Owns [`Profile`]: an in-memory SQLite connection with every input
//! attached read-only and TEMP views (`rocpd_region`, …, `regions`,
//! `samples`, …) that `UNION ALL` all processes of all inputs, optionally
//! restricted to a time window. Beyond SQLite's limit of
//! [`MAX_ATTACHED`] attached databases the same names are virtual tables
//! that read the inputs in place, one process at a time
//! ([`crate::federation`]): any number of inputs, in bounded memory.
//! It also owns the streaming, time-ordered record iterators exporters use.
//! It never writes to an input and never creates a file beside one (see
//! [`crate::inputs::read_only_uri`]): reading a finished profile works from
//! a read-only directory.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use rusqlite::Connection;

use crate::error::{classify, DbError, Result, SqlContext};
use crate::federation::{Federation, ScanProgress, Unit};
use crate::inputs::{check_file, check_schema, expand_inputs, read_only_uri};
use crate::schema::{self, TableSet, ViewWindow};
use crate::stream::RowStream;
use crate::value::Value;

/// Most databases attached directly; more are read in place through
/// virtual tables ([`crate::federation`]).
pub const MAX_ATTACHED: usize = 10;

/// Call sites and frames [`Profile::resolve_stack`] keeps before it starts
/// over (bounds its memory over many processes).
const STACK_CACHE_ENTRIES: usize = 1 << 16;

/// One end of a time window: nanoseconds from the start of the run, or a
/// percentage of the run's length.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimeBound {
    /// Nanoseconds after the run start.
    Ns(i64),
    /// Percent (0–100) of the run length after the run start.
    Percent(f64),
}

impl std::fmt::Display for TimeBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimeBound::Ns(n) => write!(f, "{n} ns"),
            TimeBound::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl std::str::FromStr for TimeBound {
    type Err = DbError;
    /// Parses `1500000` (ns after the run start) or `25%`.
    fn from_str(s: &str) -> Result<TimeBound> {
        let t = s.trim();
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p
                .trim()
                .parse()
                .map_err(|_| DbError::TimeBound(s.to_string()))?;
            if !(0.0..=100.0).contains(&v) {
                return Err(DbError::TimeBound(s.to_string()));
            }
            return Ok(TimeBound::Percent(v));
        }
        let v: i64 = t
            .trim_end_matches("ns")
            .parse()
            .map_err(|_| DbError::TimeBound(s.to_string()))?;
        if v < 0 {
            return Err(DbError::TimeBound(s.to_string()));
        }
        Ok(TimeBound::Ns(v))
    }
}

/// Time extent of the run: earliest process start to latest end (falling
/// back to the data when a process has no end, e.g. a killed writer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunBounds {
    /// Earliest timestamp (ns).
    pub start: i64,
    /// Latest timestamp (ns).
    pub end: i64,
}

/// A region as exporters see it.
#[derive(Debug, Clone, PartialEq)]
pub struct RegionRow {
    /// Process guid.
    pub guid: String,
    /// OS pid.
    pub pid: i64,
    /// OS tid.
    pub tid: i64,
    /// Region name.
    pub name: String,
    /// Category, if any.
    pub category: Option<String>,
    /// Start (ns).
    pub start: i64,
    /// End (ns).
    pub end: i64,
    /// Event row id.
    pub event_id: i64,
    /// Call site row id, if a stack was captured.
    pub stack_id: Option<i64>,
}

/// A resolved frame of a sample's stack.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedFrame {
    /// Module path, if the pc fell in a module.
    pub module: Option<Arc<str>>,
    /// Pc relative to the module load address.
    pub rel_pc: u64,
    /// Function name, once symbolized.
    pub function: Option<Arc<str>>,
    /// Source file, once symbolized.
    pub file: Option<Arc<str>>,
    /// Source line, once symbolized.
    pub line: Option<u32>,
}

impl ResolvedFrame {
    /// The function name, or `module+0xoffset` before symbolization.
    pub fn display_name(&self) -> String {
        display_name(
            self.function.as_deref(),
            self.module.as_deref(),
            self.rel_pc,
        )
    }
}

/// A frame's name as shown: its function, or `module+0xoffset` before
/// symbolization (the module's file name), or the bare pc.
pub(crate) fn display_name(function: Option<&str>, module: Option<&str>, rel_pc: u64) -> String {
    match (function, module) {
        (Some(f), _) => f.to_string(),
        (None, Some(m)) => {
            let base = m.rsplit('/').next().unwrap_or(m);
            format!("{base}+{rel_pc:#x}")
        }
        (None, None) => format!("{rel_pc:#x}"),
    }
}

/// A sample with its call stack resolved (leaf first).
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRow {
    /// Process guid.
    pub guid: String,
    /// OS pid.
    pub pid: i64,
    /// OS tid.
    pub tid: i64,
    /// Timestamp (ns).
    pub timestamp: i64,
    /// Track name.
    pub track: Option<String>,
    /// Call site row id of the leaf.
    pub stack_id: Option<i64>,
    /// What it measured: `sample` (CPU time), `wall_sample` or `off_cpu`
    /// (see [`crate::SampleKind`]).
    pub kind: String,
    /// The time it stands for (ns); 0 when the database holds no weight.
    pub weight_ns: u64,
    /// Frames, innermost first.
    pub frames: Vec<ResolvedFrame>,
}

impl SampleRow {
    /// Whether it measured CPU time (`sample`).
    pub fn is_cpu(&self) -> bool {
        self.kind == crate::SampleKind::Cpu.category()
    }
}

/// One point of a counter time series.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterRow {
    /// Process guid.
    pub guid: String,
    /// OS pid.
    pub pid: i64,
    /// OS tid for per-thread counters.
    pub tid: Option<i64>,
    /// Counter name.
    pub name: String,
    /// Unit.
    pub units: Option<String>,
    /// Timestamp (ns).
    pub timestamp: i64,
    /// Value.
    pub value: f64,
}

impl CounterRow {
    /// The row of a query whose columns are guid, pid, tid, name, units,
    /// timestamp and value, in that order.
    pub(crate) fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CounterRow> {
        Ok(CounterRow {
            guid: r.get(0)?,
            pid: r.get(1)?,
            tid: r.get(2)?,
            name: r.get(3)?,
            units: r.get(4)?,
            timestamp: r.get(5)?,
            value: r.get(6)?,
        })
    }
}

/// A thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadRecord {
    /// Process guid.
    pub guid: String,
    /// OS pid.
    pub pid: i64,
    /// OS tid.
    pub tid: i64,
    /// Name, if known.
    pub name: Option<String>,
    /// Start (ns).
    pub start: Option<i64>,
    /// End (ns).
    pub end: Option<i64>,
}

/// Call sites, frames and module names already resolved, keyed by table
/// set (see [`Profile::table_sets`]): what [`Profile::resolve_stack`]
/// keeps, and what a reader resolving stacks on a connection of its own
/// keeps (see [`crate::scan`]).
#[derive(Default)]
pub struct StackCache {
    callsites: HashMap<(usize, i64), (Option<i64>, i64)>,
    frames: HashMap<(usize, i64), ResolvedFrame>,
    modules: HashMap<String, Arc<str>>,
}

impl StackCache {
    /// Entries held.
    pub fn len(&self) -> usize {
        self.callsites.len() + self.frames.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves call site `callsite` of table set `set` (`ts`, process
    /// `guid`, in file `path`) into frames, leaf first, reading on `conn`
    /// (where `ts`'s tables are named `"<schema>"."<table><suffix>"`).
    pub fn resolve(
        &mut self,
        conn: &Connection,
        ts: &TableSet,
        set: usize,
        guid: &str,
        path: &Path,
        callsite: i64,
    ) -> Result<Vec<ResolvedFrame>> {
        let mut out = Vec::new();
        let mut cur = Some(callsite);
        let mut guard = 0;
        while let Some(cs) = cur {
            guard += 1;
            if guard > 100_000 {
                return Err(DbError::Corrupt {
                    path: path.to_path_buf(),
                    detail: format!("call site {cs} of {guid} forms a cycle"),
                });
            }
            let (parent, frame) = match self.callsites.get(&(set, cs)) {
                Some(v) => *v,
                None => {
                    let v: (Option<i64>, i64) = conn
                        .prepare_cached(&format!("SELECT parent_id, frame_id FROM \"{}\".\"strobe_callsite{}\" WHERE id = ?1", ts.schema, ts.suffix))
                        .and_then(|mut st| st.query_row([cs], |r| Ok((r.get(0)?, r.get(1)?))))
                        .map_err(|e| classify(e, path))?;
                    self.callsites.insert((set, cs), v);
                    v
                }
            };
            let f = match self.frames.get(&(set, frame)) {
                Some(f) => f.clone(),
                None => {
                    let raw: (Option<String>, i64, Option<String>, Option<String>, Option<i64>) = conn
                        .prepare_cached(&format!(
                            "SELECT M.path, F.rel_pc, F.function, F.file, F.line FROM \"{0}\".\"strobe_frame{1}\" F LEFT JOIN \"{0}\".\"strobe_module{1}\" M ON M.id = F.module_id WHERE F.id = ?1",
                            ts.schema, ts.suffix
                        ))
                        .and_then(|mut st| st.query_row([frame], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))))
                        .map_err(|e| classify(e, path))?;
                    let module = raw.0.map(|m| {
                        self.modules
                            .entry(m.clone())
                            .or_insert_with(|| Arc::from(m.as_str()))
                            .clone()
                    });
                    let f = ResolvedFrame {
                        module,
                        rel_pc: raw.1 as u64,
                        function: raw.2.map(|s| Arc::from(s.as_str())),
                        file: raw.3.map(|s| Arc::from(s.as_str())),
                        line: raw.4.map(|l| l as u32),
                    };
                    self.frames.insert((set, frame), f.clone());
                    f
                }
            };
            out.push(f);
            cur = parent;
        }
        Ok(out)
    }
}

/// One or many profile databases opened as one logical database.
pub struct Profile {
    conn: Connection,
    files: Vec<PathBuf>,
    sets: Vec<TableSet>,
    /// The file holding each set.
    set_files: Vec<PathBuf>,
    guid_to_set: HashMap<String, usize>,
    window: ViewWindow,
    stacks: RefCell<StackCache>,
    /// Set when the inputs are read in place (more than [`MAX_ATTACHED`]).
    fed: Option<FedRef>,
}

/// The federation of a profile read in place.
struct FedRef(Rc<Federation>);

// SAFETY: every `Rc` of the federation (and of the databases it keeps
// open) lives inside one Profile: this field, and the virtual tables,
// module data and cursors owned by the Profile's own connection. None is
// ever handed out, so moving the Profile to another thread moves every
// user of them together, and Profile is not Sync (its RefCell), so no two
// threads use them at once.
unsafe impl Send for FedRef {}

impl Profile {
    /// Opens inputs (files, directories, globs; see
    /// [`crate::inputs::expand_inputs`]) as one database. Every file is
    /// checked first; the first bad one is reported by name.
    pub fn open<S: AsRef<str>>(inputs: &[S]) -> Result<Profile> {
        let files = expand_inputs(inputs)?;
        Profile::open_files(&files)
    }

    /// [`Profile::open`], reporting the check of the files to `progress`
    /// (`"checking"`, files done, files in all).
    pub fn open_with_progress<S: AsRef<str>>(
        inputs: &[S],
        progress: &dyn Fn(&str, usize, usize),
    ) -> Result<Profile> {
        let files = expand_inputs(inputs)?;
        Profile::open_files_with_progress(&files, progress)
    }

    /// Opens an explicit list of files as one database. Up to
    /// [`MAX_ATTACHED`] files are attached to one connection; more are read
    /// in place through virtual tables of the same names (see
    /// [`crate::federation`]): queries mean the same, and memory and open
    /// files stay bounded whatever the number of inputs.
    pub fn open_files(files: &[PathBuf]) -> Result<Profile> {
        Profile::open_files_with_progress(files, &|_, _, _| {})
    }

    /// [`Profile::open_files`], reporting the check of the files to
    /// `progress` (`"checking"`, files done, files in all). Many files are
    /// checked two to four at a time.
    pub fn open_files_with_progress(
        files: &[PathBuf],
        progress: &dyn Fn(&str, usize, usize),
    ) -> Result<Profile> {
        if files.is_empty() {
            return Err(DbError::NoInput {
                pattern: String::new(),
            });
        }
        let mut seen = std::collections::HashSet::new();
        let mut checked = Vec::with_capacity(files.len());
        crate::parallel::ordered_parallel(
            files.len(),
            &|i| check_file(&files[i]),
            &mut |i, suffixes| {
                let f = &files[i];
                for s in &suffixes {
                    if !seen.insert(s.clone()) {
                        return Err(DbError::DuplicateProcess {
                            path: f.clone(),
                            suffix: s.clone(),
                        });
                    }
                }
                checked.push((f.clone(), suffixes));
                progress("checking", i + 1, files.len());
                Ok(())
            },
        )?;
        let mem = Path::new(":memory:");
        let conn = Connection::open_in_memory().at(mem)?;
        let mut sets = Vec::new();
        let mut set_files = Vec::new();
        let mut guid_to_set = HashMap::new();
        let mut fed = None;
        if files.len() > MAX_ATTACHED {
            let mut units = Vec::new();
            for (f, suffixes) in checked {
                for s in suffixes {
                    let guid = crate::identity::guid_from_suffix(&s);
                    guid_to_set.insert(guid.clone(), sets.len());
                    sets.push(TableSet {
                        schema: "main".into(),
                        suffix: s.clone(),
                    });
                    set_files.push(f.clone());
                    units.push(Unit {
                        file: f.clone(),
                        suffix: s,
                        guid,
                    });
                }
            }
            fed = Some(FedRef(Federation::install(&conn, units)?));
        } else {
            for (k, f) in files.iter().enumerate() {
                let alias = format!("db{k}");
                conn.execute(
                    &format!("ATTACH DATABASE ?1 AS {alias}"),
                    [read_only_uri(f)],
                )
                .at(f)?;
                for s in check_schema(&conn, &alias, f)? {
                    guid_to_set.insert(crate::identity::guid_from_suffix(&s), sets.len());
                    sets.push(TableSet {
                        schema: alias.clone(),
                        suffix: s,
                    });
                    set_files.push(f.clone());
                }
            }
            schema::create_views(&conn, &sets, true, &ViewWindow::default()).at(&files[0])?;
        }
        Ok(Profile {
            conn,
            files: files.to_vec(),
            sets,
            set_files,
            guid_to_set,
            window: ViewWindow::default(),
            stacks: RefCell::new(StackCache::default()),
            fed,
        })
    }

    /// Whether the inputs are read in place through virtual tables (more
    /// than [`MAX_ATTACHED`] files, see [`crate::federation`]) rather than
    /// attached. Queries mean the same either way; code that reads each
    /// process on a connection of its own ([`Profile::set_file`],
    /// [`Profile::with_set_connection`]) works either way.
    pub fn is_federated(&self) -> bool {
        self.fed.is_some()
    }

    /// The federation a profile read in place is built on.
    pub(crate) fn federation(&self) -> Option<&Federation> {
        self.fed.as_ref().map(|f| &*f.0)
    }

    /// Reports the progress of every scan over all processes (profiles
    /// read in place only; see [`Profile::is_federated`]) to `f`: the table
    /// or view scanned, processes done, processes in all. `None` stops it.
    pub fn set_scan_progress(&self, f: Option<Box<ScanProgress>>) {
        if let Some(fed) = &self.fed {
            fed.0.set_progress(f);
        }
    }

    /// The file holding table set `k` (see [`Profile::table_sets`]), for
    /// readers that open it on a connection of their own
    /// ([`crate::scan::open_attached`] with the set's schema name).
    pub fn set_file(&self, k: usize) -> &Path {
        &self.set_files[k]
    }

    /// Runs `f` on a connection where table set `k`'s tables are named
    /// `"<schema>"."<table><suffix>"` (its [`TableSet`]): the profile's own
    /// connection when the inputs are attached, the process's own
    /// read-only connection when they are read in place.
    #[cfg(feature = "raw-sql")]
    pub fn with_set_connection<T>(
        &self,
        k: usize,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> Result<T> {
        self.set_connection(k, f)
    }

    /// What `with_set_connection` does, for strobe-db itself.
    pub(crate) fn set_connection<T>(
        &self,
        k: usize,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> Result<T> {
        match &self.fed {
            Some(fed) => fed.0.with_unit(k, f),
            None => f(&self.conn),
        }
    }

    /// The input files.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }
    /// Number of processes (suffixes) across all inputs.
    pub fn process_count(&self) -> usize {
        self.sets.len()
    }
    /// The connection, with the TEMP views in place. Query it freely; it is
    /// read-only towards the inputs. When the inputs are read in place
    /// ([`Profile::is_federated`]), the unsuffixed names are virtual tables
    /// and the processes' suffixed tables are not reachable here: use
    /// [`Profile::with_set_connection`].
    #[cfg(feature = "raw-sql")]
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The connection, for strobe-db itself.
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }
    fn path(&self) -> PathBuf {
        self.files.first().cloned().unwrap_or_default()
    }

    /// The run's time extent (unrestricted by any window).
    pub fn run_bounds(&self) -> Result<Option<RunBounds>> {
        let sql = "SELECT MIN(s), MAX(e) FROM (
              SELECT start AS s, \"end\" AS e FROM rocpd_info_process
              UNION ALL SELECT MIN(start), MAX(\"end\") FROM rocpd_region
              UNION ALL SELECT MIN(timestamp), MAX(timestamp) FROM rocpd_sample
              UNION ALL SELECT MIN(timestamp), MAX(timestamp) FROM strobe_counter_sample)";
        let unwindowed = self.window == ViewWindow::default();
        let r: (Option<i64>, Option<i64>) = if unwindowed && self.fed.is_none() {
            self.conn
                .query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))
                .at(&self.path())?
        } else {
            // The window restricts the timed views, so bounds come from the
            // tables, one process at a time (a UNION ALL over every process
            // would exceed SQLite's 500 terms), on the process's own
            // connection when the inputs are read in place. Counter samples
            // count as in the view query above only without a window.
            let mut bounds: (Option<i64>, Option<i64>) = (None, None);
            for (k, t) in self.sets.iter().enumerate() {
                let counters = if unwindowed {
                    format!(
                        " UNION ALL SELECT MIN(timestamp), MAX(timestamp) FROM \"{0}\".\"strobe_counter_sample{1}\"",
                        t.schema, t.suffix
                    )
                } else {
                    String::new()
                };
                let q = format!(
                    "SELECT MIN(s), MAX(e) FROM (SELECT start AS s, \"end\" AS e FROM \"{0}\".\"rocpd_info_process{1}\"
                     UNION ALL SELECT MIN(start), MAX(\"end\") FROM \"{0}\".\"rocpd_region{1}\"
                     UNION ALL SELECT MIN(timestamp), MAX(timestamp) FROM \"{0}\".\"rocpd_sample{1}\"{counters})",
                    t.schema, t.suffix
                );
                let file = self.set_files[k].clone();
                let (lo, hi): (Option<i64>, Option<i64>) = self.set_connection(k, |c| {
                    c.query_row(&q, [], |r| Ok((r.get(0)?, r.get(1)?)))
                        .at(&file)
                })?;
                bounds.0 = match (bounds.0, lo) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                bounds.1 = match (bounds.1, hi) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
            }
            bounds
        };
        Ok(match r {
            (Some(start), Some(end)) => Some(RunBounds {
                start,
                end: end.max(start),
            }),
            _ => None,
        })
    }

    /// [`Profile::set_window`] from the text of `--start/--end` (ns or
    /// `N%`, see [`TimeBound`]); nothing when both are `None`.
    pub fn set_window_text(&mut self, start: Option<&str>, end: Option<&str>) -> Result<()> {
        if start.is_none() && end.is_none() {
            return Ok(());
        }
        let s = start.map(str::parse::<TimeBound>).transpose()?;
        let e = end.map(str::parse::<TimeBound>).transpose()?;
        self.set_window(s, e).map(|_| ())
    }

    /// Restricts every time-based view (regions, samples, kernels, memory
    /// operations, counters and everything built on them) to rows that
    /// overlap `[start, end]`. Bounds are relative to the run start; `None`
    /// leaves that side open. Returns the absolute window applied.
    pub fn set_window(
        &mut self,
        start: Option<TimeBound>,
        end: Option<TimeBound>,
    ) -> Result<(Option<i64>, Option<i64>)> {
        let resolve = |b: Option<TimeBound>, bounds: Option<RunBounds>| -> Result<Option<i64>> {
            let Some(b) = b else { return Ok(None) };
            let Some(rb) = bounds else {
                return Err(DbError::TimeBound(format!(
                    "{b:?} (the profile holds no timestamps)"
                )));
            };
            Ok(Some(match b {
                TimeBound::Ns(n) => rb.start.saturating_add(n),
                TimeBound::Percent(p) => {
                    rb.start + ((rb.end - rb.start) as f64 * p / 100.0).round() as i64
                }
            }))
        };
        let bounds = self.run_bounds()?;
        let w = ViewWindow {
            start: resolve(start, bounds)?,
            end: resolve(end, bounds)?,
        };
        if let (Some(s), Some(e), Some(from), Some(to)) = (w.start, w.end, start, end) {
            if s > e {
                return Err(DbError::InvertedWindow {
                    start: from.to_string(),
                    end: to.to_string(),
                });
            }
        }
        match &self.fed {
            Some(fed) => fed.0.set_window(w),
            None => schema::create_views(&self.conn, &self.sets, true, &w).at(&self.path())?,
        }
        self.window = w;
        Ok((w.start, w.end))
    }

    /// Runs any SQL and streams its rows: `on_columns` gets the column names
    /// once, `on_row` each row's values. SQL errors come back as
    /// [`DbError::Query`] with SQLite's message and the query.
    pub fn query_each(
        &self,
        sql: &str,
        on_columns: &mut dyn FnMut(&[String]),
        on_row: &mut dyn FnMut(&[Value]) -> Result<()>,
    ) -> Result<u64> {
        let qerr = |e: rusqlite::Error| DbError::Query {
            message: e.to_string(),
            sql: sql.to_string(),
        };
        let mut st = self.conn.prepare(sql).map_err(qerr)?;
        let cols: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
        on_columns(&cols);
        let n = cols.len();
        let mut rows = st.query([]).map_err(qerr)?;
        let mut count = 0u64;
        let mut vals = Vec::with_capacity(n);
        while let Some(r) = rows.next().map_err(qerr)? {
            vals.clear();
            for k in 0..n {
                vals.push(Value::of(r.get_ref(k).map_err(qerr)?));
            }
            on_row(&vals)?;
            count += 1;
        }
        Ok(count)
    }

    /// Regions of all processes, ordered by start (then longest first, so
    /// parents come before their children).
    pub fn regions(&self) -> Result<RowStream<'_, RegionRow>> {
        RowStream::new(
            &self.conn,
            "SELECT guid, pid, tid, name, category, start, \"end\", event_id, stack_id FROM regions ORDER BY start, \"end\" DESC, guid",
            &[],
            |r| {
                Ok(RegionRow {
                    guid: r.get(0)?,
                    pid: r.get(1)?,
                    tid: r.get(2)?,
                    name: r.get(3)?,
                    category: r.get(4)?,
                    start: r.get(5)?,
                    end: r.get(6)?,
                    event_id: r.get(7)?,
                    stack_id: r.get(8)?,
                })
            },
            self.path(),
        )
    }

    /// Samples ordered by timestamp without their stacks (`frames` stays
    /// empty; resolve one with [`Profile::resolve_stack`] when needed).
    pub fn samples_unresolved(&self) -> Result<RowStream<'_, SampleRow>> {
        RowStream::new(
            &self.conn,
            "SELECT guid, pid, tid, timestamp, track, stack_id, kind, weight_ns FROM strobe_samples ORDER BY timestamp, guid, tid",
            &[],
            |r| {
                Ok(SampleRow {
                    guid: r.get(0)?,
                    pid: r.get(1)?,
                    tid: r.get(2)?,
                    timestamp: r.get(3)?,
                    track: r.get(4)?,
                    stack_id: r.get(5)?,
                    kind: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
                    weight_ns: r.get::<_, Option<i64>>(7)?.unwrap_or(0).max(0) as u64,
                    frames: Vec::new(),
                })
            },
            self.path(),
        )
    }

    /// Samples ordered by timestamp, each with its stack resolved (leaf
    /// first). Frame and call-site lookups are cached per distinct value.
    pub fn samples(&self) -> Result<impl Iterator<Item = Result<SampleRow>> + '_> {
        Ok(self.samples_unresolved()?.map(move |s| {
            let mut s = s?;
            if let Some(id) = s.stack_id {
                s.frames = self.resolve_stack(&s.guid, id)?;
            }
            Ok(s)
        }))
    }

    /// Resolves a call site of process `guid` into frames, leaf first.
    pub fn resolve_stack(&self, guid: &str, callsite: i64) -> Result<Vec<ResolvedFrame>> {
        let Some(&set) = self.guid_to_set.get(guid) else {
            return Ok(Vec::new());
        };
        let ts = &self.sets[set];
        let path = self.set_files[set].clone();
        let mut cache = self.stacks.borrow_mut();
        if cache.len() > STACK_CACHE_ENTRIES {
            *cache = StackCache::default();
        }
        self.set_connection(set, |conn| {
            cache.resolve(conn, ts, set, guid, &path, callsite)
        })
    }

    /// Counter samples ordered by timestamp.
    pub fn counters(&self) -> Result<RowStream<'_, CounterRow>> {
        RowStream::new(
            &self.conn,
            "SELECT guid, pid, tid, name, units, timestamp, value FROM strobe_counters ORDER BY timestamp, guid, name",
            &[],
            CounterRow::from_row,
            self.path(),
        )
    }

    /// Streams the rows of any read-only query on [`Profile::connection`]
    /// (the TEMP views, window included), each mapped by `map`, one row at a
    /// time. Exporters use it for columns the typed iterators do not carry
    /// (correlation ids, arguments, module tables).
    #[cfg(feature = "raw-sql")]
    pub fn query_stream<T>(
        &self,
        sql: &str,
        map: fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<RowStream<'_, T>> {
        self.stream_query(sql, map)
    }

    /// What `query_stream` does, for strobe-db itself.
    pub(crate) fn stream_query<T>(
        &self,
        sql: &str,
        map: fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<RowStream<'_, T>> {
        RowStream::new(&self.conn, sql, &[], map, self.path())
    }

    /// The physical table sets (attach alias and process suffix) behind the
    /// unsuffixed views, one per process, with each process's guid, for
    /// exporters that query the suffixed tables directly (per-process
    /// ordered streams merged in the exporter).
    pub fn table_sets(&self) -> Vec<(TableSet, String)> {
        self.sets
            .iter()
            .map(|t| (t.clone(), crate::identity::guid_from_suffix(&t.suffix)))
            .collect()
    }

    /// The absolute time window currently applied by
    /// [`Profile::set_window`] (`None` sides are open).
    pub fn window(&self) -> (Option<i64>, Option<i64>) {
        (self.window.start, self.window.end)
    }

    /// Threads ordered by start time.
    pub fn threads(&self) -> Result<RowStream<'_, ThreadRecord>> {
        RowStream::new(
            &self.conn,
            "SELECT guid, pid, tid, name, start, \"end\" FROM threads ORDER BY start, guid, tid",
            &[],
            |r| {
                Ok(ThreadRecord {
                    guid: r.get(0)?,
                    pid: r.get(1)?,
                    tid: r.get(2)?,
                    name: r.get(3)?,
                    start: r.get(4)?,
                    end: r.get(5)?,
                })
            },
            self.path(),
        )
    }
}
