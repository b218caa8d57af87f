//! The numbers of an MPI run: time in MPI calls per rank, per MPI function,
//! and the ranks that wait most.
//!
//! Owns the queries behind `strobe summary --report mpi` over a
//! [`Profile`]: the rank identity of each process (`mpi.*` rows of
//! `strobe_settings`, see the MPI data contract in `docs/mpi.md`), its MPI
//! calls (regions whose event category is `mpi`) with the bytes they moved
//! (`bytes` and `recv_bytes` arguments), and why a run has no MPI call at
//! all. Each process's calls are read by one ordered query over its own
//! suffixed tables (window applied) and folded as they stream: memory grows
//! with processes, threads and distinct MPI function names, never with
//! calls. A call made inside another MPI call on the same thread (an MPI
//! library calling itself through the wrappers) is counted in its caller's
//! time only. It never formats or prints and never writes to an input.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::error::{Result, SqlContext};
use crate::reader::Profile;
use crate::schema::TableSet;

/// The event category of MPI calls.
pub const MPI_CATEGORY: &str = "mpi";

/// The `strobe_settings` name holding a process's world rank.
pub const RANK_SETTING: &str = "mpi.rank";

/// MPI functions that wait for other ranks besides the `MPI_Wait*` family
/// (completion of nonblocking calls): blocking receives and probes,
/// barriers, blocking collectives (communicator and window creation
/// included: they synchronise their group) and RMA synchronisation.
const WAITING_CALLS: &[&str] = &[
    "MPI_Recv",
    "MPI_Mrecv",
    "MPI_Sendrecv",
    "MPI_Sendrecv_replace",
    "MPI_Probe",
    "MPI_Mprobe",
    "MPI_Barrier",
    "MPI_Bcast",
    "MPI_Reduce",
    "MPI_Allreduce",
    "MPI_Reduce_local",
    "MPI_Reduce_scatter",
    "MPI_Reduce_scatter_block",
    "MPI_Scan",
    "MPI_Exscan",
    "MPI_Gather",
    "MPI_Gatherv",
    "MPI_Scatter",
    "MPI_Scatterv",
    "MPI_Allgather",
    "MPI_Allgatherv",
    "MPI_Alltoall",
    "MPI_Alltoallv",
    "MPI_Alltoallw",
    "MPI_Neighbor_allgather",
    "MPI_Neighbor_allgatherv",
    "MPI_Neighbor_alltoall",
    "MPI_Neighbor_alltoallv",
    "MPI_Neighbor_alltoallw",
    "MPI_Comm_split",
    "MPI_Comm_split_type",
    "MPI_Comm_dup",
    "MPI_Comm_create",
    "MPI_Cart_create",
    "MPI_Win_create",
    "MPI_Win_allocate",
    "MPI_Win_allocate_shared",
    "MPI_Win_fence",
    "MPI_Win_wait",
    "MPI_Win_start",
    "MPI_Win_complete",
    "MPI_Win_lock",
    "MPI_Win_lock_all",
    "MPI_Win_unlock",
    "MPI_Win_unlock_all",
    "MPI_Win_flush",
    "MPI_Win_flush_all",
    "MPI_Win_flush_local",
    "MPI_Win_flush_local_all",
];

/// Whether an MPI call by this name waits for other ranks: `MPI_Wait`,
/// `MPI_Waitall`, `MPI_Waitany`, `MPI_Waitsome`, blocking receives and
/// probes, barriers, blocking collectives and RMA synchronisation
/// (`MPI_Win_fence`, …). Sends and nonblocking calls (`MPI_Isend`,
/// `MPI_Test*`, `MPI_Iallreduce`, …) do not count. Case-insensitive.
pub fn is_waiting_call(name: &str) -> bool {
    let n = name.trim();
    let wait = "MPI_Wait";
    (n.len() >= wait.len()
        && n.is_char_boundary(wait.len())
        && n[..wait.len()].eq_ignore_ascii_case(wait)
        && matches!(
            n[wait.len()..].to_ascii_lowercase().as_str(),
            "" | "all" | "any" | "some"
        ))
        || WAITING_CALLS.iter().any(|w| w.eq_ignore_ascii_case(n))
}

/// One process of an MPI run (a rank, or a process without a rank that made
/// MPI calls).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MpiRank {
    /// World rank (`mpi.rank`); `None` for a process started without an
    /// MPI launcher.
    pub rank: Option<i64>,
    /// World size (`mpi.world_size`), if recorded.
    pub world_size: Option<i64>,
    /// The launcher's job id (`mpi.job`), if recorded.
    pub job: Option<String>,
    /// Process guid.
    pub guid: String,
    /// OS pid.
    pub pid: i64,
    /// Host name of the node.
    pub node: String,
    /// Process start (ns, `CLOCK_MONOTONIC` of its node).
    pub start_ns: Option<i64>,
    /// Process end (ns); `None` when the writer was killed before it
    /// recorded one (the wall time then ends at its last MPI call).
    pub end_ns: Option<i64>,
    /// Wall time: process start to end (within the time window, if any).
    pub wall_ns: i64,
    /// Time inside MPI calls: the union of the outermost calls' intervals
    /// of all its threads (time at least one thread was inside MPI),
    /// within the window.
    pub mpi_ns: i64,
    /// `wall_ns − mpi_ns` (never below 0).
    pub compute_ns: i64,
    /// `mpi_ns` as a percentage of `wall_ns`.
    pub mpi_pct: f64,
    /// Outermost MPI calls.
    pub calls: u64,
    /// MPI calls made inside another MPI call on the same thread, counted
    /// in their caller's time only.
    pub nested_calls: u64,
    /// Time inside waiting calls ([`is_waiting_call`]): the union of their
    /// intervals, within the window.
    pub wait_ns: i64,
    /// `wait_ns` as a percentage of `wall_ns`.
    pub wait_pct: f64,
    /// `wait_ns` divided by the mean waiting time of all ranks listed (1.0
    /// is average; `None` when no rank waited).
    pub wait_vs_mean: Option<f64>,
    /// The waiting function this rank spent most time in.
    pub top_wait_function: Option<String>,
    /// The time in it (the sum of its outermost calls' durations, ns; 0
    /// without one).
    pub top_wait_ns: i64,
}

/// One MPI function over all ranks (outermost calls only).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MpiFunction {
    /// The MPI function's C name.
    pub name: String,
    /// Calls.
    pub calls: u64,
    /// Sum of the calls' durations (ns).
    pub total_ns: i64,
    /// Mean duration (ns).
    pub mean_ns: f64,
    /// Longest call (ns).
    pub max_ns: i64,
    /// Bytes sent or received by the calls (their `bytes` and
    /// `recv_bytes` arguments).
    pub bytes: u64,
    /// Calls that carried a byte count.
    pub calls_with_bytes: u64,
    /// `total_ns` as a percentage of all functions' total.
    pub share_pct: f64,
    /// Whether it is a waiting call ([`is_waiting_call`]).
    pub waiting: bool,
}

/// A process left out of the rank table: no rank and no MPI call (the
/// launcher itself, a helper process).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OtherProcess {
    /// OS pid.
    pub pid: i64,
    /// Host name of the node.
    pub node: String,
    /// Command line.
    pub command: String,
}

/// Why a run has no MPI call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NoMpi {
    /// MPI calls were recorded, but none in the time window.
    OutsideWindow,
    /// Ranks were started by an MPI launcher, or a process loaded an MPI
    /// library, but no MPI call was recorded: the MPI wrappers did not load
    /// (or the program made no MPI call).
    WrappersNotLoaded {
        /// Processes with an `mpi.rank` setting.
        ranks: usize,
        /// An MPI library a process loaded, if any.
        library: Option<String>,
    },
    /// No process was started by an MPI launcher, loaded an MPI library or
    /// recorded an MPI call: not an MPI program.
    NotMpi {
        /// Processes in the run.
        processes: usize,
    },
}

/// Everything `strobe summary --report mpi` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MpiSummary {
    /// Ranks by rank number (then pid), then processes without a rank that
    /// made MPI calls, by pid.
    pub ranks: Vec<MpiRank>,
    /// MPI functions by total time, largest first.
    pub functions: Vec<MpiFunction>,
    /// Processes with neither a rank nor an MPI call, by pid.
    pub other_processes: Vec<OtherProcess>,
    /// Outermost MPI calls of all ranks.
    pub calls: u64,
    /// MPI calls made inside other MPI calls (left out of the tables).
    pub nested_calls: u64,
    /// Sum of the functions' `total_ns`.
    pub total_mpi_call_ns: i64,
    /// Mean waiting time of the ranks listed (ns).
    pub wait_mean_ns: f64,
    /// Longest waiting time of a rank (ns).
    pub wait_max_ns: i64,
    /// Imbalance of waiting time: max / mean (`None` when nobody waited).
    pub wait_imbalance: Option<f64>,
    /// Distinct `mpi.job` values of the ranks (more than one: several jobs
    /// summarized together, and rank numbers repeat).
    pub jobs: Vec<String>,
    /// Why there is no MPI call, when there is none.
    pub no_mpi: Option<NoMpi>,
}

/// Whether any process recorded an MPI call (in the window): a cheap test
/// (an indexed string lookup per process, and a scan only of the processes
/// that know the `mpi` category, stopping at their first call).
pub fn has_mpi_calls(p: &Profile) -> Result<bool> {
    let (lo, hi) = p.window();
    for (k, (ts, _)) in p.table_sets().into_iter().enumerate() {
        let path = p.set_file(k).to_path_buf();
        // Each process on a connection where its tables are named (the
        // profile's own, or the process's own when the inputs are read in
        // place).
        let found = p.set_connection(k, |conn| {
            let Some(cat) = category_id(conn, &ts.schema, &ts.suffix, &path)? else {
                return Ok(false);
            };
            let sql = format!(
                "SELECT EXISTS (SELECT 1 FROM \"{sc}\".\"rocpd_region{sf}\" R \
               JOIN \"{sc}\".\"rocpd_event{sf}\" E ON E.id = R.event_id \
             WHERE E.category_id = ?1{w})",
                sc = ts.schema,
                sf = ts.suffix,
                w = window_sql(lo, hi)
            );
            conn.query_row(&sql, [cat], |r| r.get(0)).at(&path)
        })?;
        if found {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The MPI summary of a profile (window applied): per rank, per function,
/// and why there is none when the run made no MPI call.
pub fn mpi_summary(p: &Profile) -> Result<MpiSummary> {
    let window = p.window();
    let mut ranks = Vec::new();
    let mut other_processes = Vec::new();
    let mut functions: BTreeMap<String, FnAcc> = BTreeMap::new();
    let mut nested_calls = 0u64;
    let mut evidence = Evidence::default();
    for (k, (ts, guid)) in p.table_sets().into_iter().enumerate() {
        let ProcessMpi {
            info,
            library,
            category,
            fold,
        } = read_process(p, k, &ts, window, evidence.library.is_none())?;
        if info.rank.is_some() {
            evidence.ranked += 1;
        }
        if evidence.library.is_none() {
            evidence.library = library;
        }
        evidence.mpi_category |= category;
        nested_calls += fold.nested;
        for (name, acc) in &fold.functions {
            functions.entry(name.clone()).or_default().add(acc);
        }
        if info.rank.is_none() && fold.calls == 0 {
            other_processes.push(OtherProcess {
                pid: info.pid,
                node: info.node,
                command: info.command,
            });
            continue;
        }
        ranks.push(rank_row(info, guid, &fold, window));
    }
    ranks.sort_by(|a, b| {
        (a.rank.is_none(), a.rank, a.job.as_deref(), a.pid).cmp(&(
            b.rank.is_none(),
            b.rank,
            b.job.as_deref(),
            b.pid,
        ))
    });
    other_processes.sort_by_key(|o| o.pid);
    let calls: u64 = ranks.iter().map(|r| r.calls).sum();
    let (wait_mean_ns, wait_max_ns, wait_imbalance) = wait_spread(&mut ranks);
    let (functions, total_mpi_call_ns) = function_rows(functions);
    let mut jobs: Vec<String> = ranks.iter().filter_map(|r| r.job.clone()).collect();
    jobs.sort();
    jobs.dedup();
    let windowed = window.0.is_some() || window.1.is_some();
    let no_mpi = (calls == 0).then(|| evidence.why_none(windowed, p.process_count()));
    Ok(MpiSummary {
        ranks,
        functions,
        other_processes,
        calls,
        nested_calls,
        total_mpi_call_ns,
        wait_mean_ns,
        wait_max_ns,
        wait_imbalance,
        jobs,
        no_mpi,
    })
}

/// What one process's database says about MPI.
struct ProcessMpi {
    info: ProcInfo,
    /// An MPI library it loaded (looked for only when asked).
    library: Option<String>,
    /// Whether it knows the `mpi` event category.
    category: bool,
    /// Its MPI calls (in the window).
    fold: Fold,
}

/// Reads process `k` (tables `ts`) of `p`: its identity, with
/// `want_library` the MPI library it loaded, and its MPI calls in `window`.
fn read_process(
    p: &Profile,
    k: usize,
    ts: &TableSet,
    window: (Option<i64>, Option<i64>),
    want_library: bool,
) -> Result<ProcessMpi> {
    let path = p.set_file(k).to_path_buf();
    // Each process on a connection where its tables are named (the
    // profile's own, or the process's own when the inputs are read in
    // place).
    p.set_connection(k, |conn| {
        let (sc, sf) = (&ts.schema, &ts.suffix);
        let info = process_info(conn, sc, sf, &path)?;
        let library = if want_library {
            mpi_library(conn, sc, sf, &path)?
        } else {
            None
        };
        let cat = category_id(conn, sc, sf, &path)?;
        let fold = match cat {
            Some(cat) => fold_calls(conn, sc, sf, &path, cat, window)?,
            None => Fold::default(),
        };
        Ok(ProcessMpi {
            info,
            library,
            category: cat.is_some(),
            fold,
        })
    })
}

/// The row of a process with a rank or an MPI call (its process `guid`,
/// its calls folded in `fold`, `window` bounding its wall time);
/// `wait_vs_mean` is left for [`wait_spread`].
fn rank_row(
    info: ProcInfo,
    guid: String,
    fold: &Fold,
    window: (Option<i64>, Option<i64>),
) -> MpiRank {
    // Wall time: process start to end, or to the last MPI call when no
    // end was recorded; within the window.
    let start = info.start.or(fold.first_start);
    let end = info.end.or(fold.last_end);
    let wall = match (start, end) {
        (Some(s), Some(e)) => {
            let s = window.0.map_or(s, |lo| s.max(lo));
            let e = window.1.map_or(e, |hi| e.min(hi));
            (e - s).max(0)
        }
        _ => 0,
    };
    let pct = |v: i64| {
        if wall > 0 {
            v as f64 * 100.0 / wall as f64
        } else {
            0.0
        }
    };
    let (top_wait_function, top_wait_ns): (Option<String>, Option<i64>) = fold
        .functions
        .iter()
        .filter(|(n, _)| is_waiting_call(n))
        .max_by(|a, b| a.1.total.cmp(&b.1.total).then(b.0.cmp(a.0)))
        .filter(|(_, a)| a.total > 0)
        .map(|(n, a)| (n.clone(), a.total))
        .unzip();
    MpiRank {
        rank: info.rank,
        world_size: info.world_size,
        job: info.job,
        guid,
        pid: info.pid,
        node: info.node,
        start_ns: info.start,
        end_ns: info.end,
        wall_ns: wall,
        mpi_ns: fold.mpi_ns,
        compute_ns: (wall - fold.mpi_ns).max(0),
        mpi_pct: pct(fold.mpi_ns),
        calls: fold.calls,
        nested_calls: fold.nested,
        wait_ns: fold.wait_ns,
        wait_pct: pct(fold.wait_ns),
        wait_vs_mean: None,
        top_wait_function,
        top_wait_ns: top_wait_ns.unwrap_or(0),
    }
}

/// The waiting time over `ranks`: (mean, max, imbalance = max / mean);
/// sets each rank's `wait_vs_mean`.
fn wait_spread(ranks: &mut [MpiRank]) -> (f64, i64, Option<f64>) {
    let wait_total: i64 = ranks.iter().map(|r| r.wait_ns).sum();
    let wait_mean_ns = if ranks.is_empty() {
        0.0
    } else {
        wait_total as f64 / ranks.len() as f64
    };
    let wait_max_ns = ranks.iter().map(|r| r.wait_ns).max().unwrap_or(0);
    let wait_imbalance = (wait_mean_ns > 0.0).then(|| wait_max_ns as f64 / wait_mean_ns);
    for r in ranks.iter_mut() {
        r.wait_vs_mean = (wait_mean_ns > 0.0).then(|| r.wait_ns as f64 / wait_mean_ns);
    }
    (wait_mean_ns, wait_max_ns, wait_imbalance)
}

/// The function rows, by total time (largest first), and the total time of
/// all MPI calls.
fn function_rows(functions: BTreeMap<String, FnAcc>) -> (Vec<MpiFunction>, i64) {
    let total_mpi_call_ns: i64 = functions.values().map(|f| f.total).sum();
    let mut rows: Vec<MpiFunction> = functions
        .into_iter()
        .map(|(name, f)| MpiFunction {
            waiting: is_waiting_call(&name),
            calls: f.calls,
            total_ns: f.total,
            mean_ns: if f.calls > 0 {
                f.total as f64 / f.calls as f64
            } else {
                0.0
            },
            max_ns: f.max,
            bytes: f.bytes,
            calls_with_bytes: f.with_bytes,
            share_pct: if total_mpi_call_ns > 0 {
                f.total as f64 * 100.0 / total_mpi_call_ns as f64
            } else {
                0.0
            },
            name,
        })
        .collect();
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    (rows, total_mpi_call_ns)
}

/// What the processes say about MPI besides their calls, for [`NoMpi`].
#[derive(Default)]
struct Evidence {
    /// Processes with an `mpi.rank` setting.
    ranked: usize,
    /// The first MPI library a process loaded.
    library: Option<String>,
    /// Whether any process knows the `mpi` event category.
    mpi_category: bool,
}

impl Evidence {
    /// Why a run of `processes` processes has no MPI call (in the window,
    /// when `windowed`).
    fn why_none(&self, windowed: bool, processes: usize) -> NoMpi {
        if self.mpi_category && windowed {
            NoMpi::OutsideWindow
        } else if self.ranked > 0 || self.library.is_some() || self.mpi_category {
            NoMpi::WrappersNotLoaded {
                ranks: self.ranked,
                library: self.library.clone(),
            }
        } else {
            NoMpi::NotMpi { processes }
        }
    }
}

/// ` AND …` restricting regions `R` to those overlapping the window.
fn window_sql(lo: Option<i64>, hi: Option<i64>) -> String {
    let mut s = String::new();
    if let Some(lo) = lo {
        s.push_str(&format!(" AND R.\"end\" >= {lo}"));
    }
    if let Some(hi) = hi {
        s.push_str(&format!(" AND R.start <= {hi}"));
    }
    s
}

/// The row id of the `mpi` category string of one process (an indexed
/// lookup: the column is unique); `None` when it recorded no MPI call.
fn category_id(
    conn: &rusqlite::Connection,
    sc: &str,
    sf: &str,
    path: &std::path::Path,
) -> Result<Option<i64>> {
    let sql = format!("SELECT id FROM \"{sc}\".\"rocpd_string{sf}\" WHERE string = ?1");
    let mut st = conn.prepare(&sql).at(path)?;
    let mut rows = st.query([MPI_CATEGORY]).at(path)?;
    match rows.next().at(path)? {
        Some(r) => Ok(Some(r.get(0).at(path)?)),
        None => Ok(None),
    }
}

/// A process's identity as the MPI tables show it.
struct ProcInfo {
    pid: i64,
    node: String,
    command: String,
    start: Option<i64>,
    end: Option<i64>,
    rank: Option<i64>,
    world_size: Option<i64>,
    job: Option<String>,
}

fn process_info(
    conn: &rusqlite::Connection,
    sc: &str,
    sf: &str,
    path: &std::path::Path,
) -> Result<ProcInfo> {
    let sql = format!(
        "SELECT P.pid, COALESCE(N.hostname, ''), COALESCE(P.command, ''), P.start, P.\"end\" \
         FROM \"{sc}\".\"rocpd_info_process{sf}\" P \
           LEFT JOIN \"{sc}\".\"rocpd_info_node{sf}\" N ON N.id = P.nid \
         ORDER BY P.id LIMIT 1"
    );
    let mut info = {
        let mut st = conn.prepare(&sql).at(path)?;
        let mut rows = st.query([]).at(path)?;
        match rows.next().at(path)? {
            Some(r) => ProcInfo {
                pid: r.get::<_, Option<i64>>(0).at(path)?.unwrap_or(0),
                node: r.get(1).at(path)?,
                command: r.get(2).at(path)?,
                start: r.get(3).at(path)?,
                end: r.get(4).at(path)?,
                rank: None,
                world_size: None,
                job: None,
            },
            None => ProcInfo {
                pid: 0,
                node: String::new(),
                command: String::new(),
                start: None,
                end: None,
                rank: None,
                world_size: None,
                job: None,
            },
        }
    };
    let sql = format!(
        "SELECT name, value FROM \"{sc}\".\"strobe_settings{sf}\" \
         WHERE name IN ('mpi.rank', 'mpi.world_size', 'mpi.job') ORDER BY id"
    );
    let mut st = conn.prepare(&sql).at(path)?;
    let mut rows = st.query([]).at(path)?;
    while let Some(r) = rows.next().at(path)? {
        let name: String = r.get(0).at(path)?;
        let value: Option<String> = r.get(1).at(path)?;
        let value = value.unwrap_or_default();
        let int = || value.trim().parse::<i64>().ok().filter(|v| *v >= 0);
        match name.as_str() {
            RANK_SETTING => info.rank = int(),
            "mpi.world_size" => info.world_size = int(),
            _ => info.job = Some(value.clone()).filter(|j| !j.is_empty()),
        }
    }
    Ok(info)
}

/// The path of an MPI library the process loaded (`libmpi*`, `libmpich*`,
/// `libmvapich*`), if any.
fn mpi_library(
    conn: &rusqlite::Connection,
    sc: &str,
    sf: &str,
    path: &std::path::Path,
) -> Result<Option<String>> {
    let sql = format!(
        "SELECT path FROM \"{sc}\".\"strobe_module{sf}\" WHERE path LIKE '%mpi%' ORDER BY id"
    );
    let mut st = conn.prepare(&sql).at(path)?;
    let mut rows = st.query([]).at(path)?;
    while let Some(r) = rows.next().at(path)? {
        let module: String = r.get(0).at(path)?;
        let base = module.rsplit('/').next().unwrap_or(&module);
        if base.starts_with("libmpi") || base.starts_with("libmvapich") {
            return Ok(Some(module));
        }
    }
    Ok(None)
}

/// Outermost calls of one MPI function.
#[derive(Debug, Clone, Default)]
struct FnAcc {
    calls: u64,
    total: i64,
    max: i64,
    bytes: u64,
    with_bytes: u64,
}

impl FnAcc {
    fn add(&mut self, o: &FnAcc) {
        self.calls += o.calls;
        self.total += o.total;
        self.max = self.max.max(o.max);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.with_bytes += o.with_bytes;
    }
}

/// A union of intervals fed in start order: the time covered.
#[derive(Default)]
struct Union {
    end: Option<i64>,
    covered: i64,
}

impl Union {
    fn add(&mut self, s: i64, e: i64) {
        if e <= s {
            return;
        }
        match self.end {
            Some(end) if s < end => {
                if e > end {
                    self.covered += e - end;
                    self.end = Some(e);
                }
            }
            _ => {
                self.covered += e - s;
                self.end = Some(e);
            }
        }
    }
}

/// One process's MPI calls, folded.
#[derive(Default)]
struct Fold {
    calls: u64,
    nested: u64,
    mpi_ns: i64,
    wait_ns: i64,
    first_start: Option<i64>,
    last_end: Option<i64>,
    functions: BTreeMap<String, FnAcc>,
}

/// Streams one process's MPI calls (category id `cat`) in start order and
/// folds them: per thread, a call inside the current outermost call is
/// nested; outermost calls count per function, and their intervals
/// (clipped to the window) make up the MPI and waiting time.
fn fold_calls(
    conn: &rusqlite::Connection,
    sc: &str,
    sf: &str,
    path: &std::path::Path,
    cat: i64,
    (lo, hi): (Option<i64>, Option<i64>),
) -> Result<Fold> {
    // The writer creates no index on rocpd_arg: the byte counts are summed
    // per event once, and SQLite indexes that result for the join.
    let sql = format!(
        "SELECT R.tid, R.start, R.\"end\", R.name_id, B.bytes \
         FROM \"{sc}\".\"rocpd_region{sf}\" R \
           JOIN \"{sc}\".\"rocpd_event{sf}\" E ON E.id = R.event_id \
           LEFT JOIN (SELECT event_id, TOTAL(CAST(value AS INTEGER)) AS bytes \
                      FROM \"{sc}\".\"rocpd_arg{sf}\" WHERE name IN ('bytes', 'recv_bytes') \
                      GROUP BY event_id) B ON B.event_id = R.event_id \
         WHERE E.category_id = ?1{w} \
         ORDER BY R.start, R.\"end\" DESC",
        w = window_sql(lo, hi)
    );
    let name_sql = format!("SELECT string FROM \"{sc}\".\"rocpd_string{sf}\" WHERE id = ?1");
    let mut names: HashMap<i64, (String, bool)> = HashMap::new();
    let mut outer_end: HashMap<i64, i64> = HashMap::new();
    let mut by_id: HashMap<i64, FnAcc> = HashMap::new();
    let mut mpi = Union::default();
    let mut wait = Union::default();
    let mut f = Fold::default();
    let mut st = conn.prepare(&sql).at(path)?;
    let mut rows = st.query([cat]).at(path)?;
    while let Some(r) = rows.next().at(path)? {
        let tid: i64 = r.get::<_, Option<i64>>(0).at(path)?.unwrap_or(0);
        let start: i64 = r.get(1).at(path)?;
        let end: i64 = r.get::<_, i64>(2).at(path)?.max(start);
        let name_id: Option<i64> = r.get(3).at(path)?;
        let bytes: Option<f64> = r.get(4).at(path)?;
        let top = outer_end.entry(tid).or_insert(i64::MIN);
        if start < *top && end <= *top {
            f.nested += 1;
            continue;
        }
        *top = end;
        let name_id = name_id.unwrap_or(0);
        let waiting = match names.entry(name_id) {
            std::collections::hash_map::Entry::Occupied(o) => o.get().1,
            std::collections::hash_map::Entry::Vacant(v) => {
                let name: String = match conn
                    .prepare_cached(&name_sql)
                    .and_then(|mut s| s.query_row([name_id], |r| r.get(0)))
                {
                    Ok(n) => n,
                    // A name row that is missing (a damaged file): keep the
                    // call, under a name that says so.
                    Err(rusqlite::Error::QueryReturnedNoRows) => {
                        format!("[unnamed MPI call {name_id}]")
                    }
                    Err(e) => return Err(crate::error::classify(e, path)),
                };
                let waiting = is_waiting_call(&name);
                v.insert((name, waiting));
                waiting
            }
        };
        let acc = by_id.entry(name_id).or_default();
        let dur = end - start;
        acc.calls += 1;
        acc.total += dur;
        acc.max = acc.max.max(dur);
        if let Some(b) = bytes {
            acc.bytes = acc.bytes.saturating_add(b.max(0.0) as u64);
            acc.with_bytes += 1;
        }
        f.calls += 1;
        f.first_start = Some(f.first_start.map_or(start, |s| s.min(start)));
        f.last_end = Some(f.last_end.map_or(end, |e| e.max(end)));
        let s = lo.map_or(start, |lo| start.max(lo));
        let e = hi.map_or(end, |hi| end.min(hi));
        mpi.add(s, e);
        if waiting {
            wait.add(s, e);
        }
    }
    for (id, acc) in by_id {
        if let Some((name, _)) = names.get(&id) {
            f.functions.entry(name.clone()).or_default().add(&acc);
        }
    }
    f.mpi_ns = mpi.covered;
    f.wait_ns = wait.covered;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_calls() {
        for w in [
            "MPI_Wait",
            "MPI_Waitall",
            "mpi_waitany",
            "MPI_Waitsome",
            "MPI_Recv",
            "MPI_Probe",
            "MPI_Barrier",
            "MPI_Allreduce",
            "MPI_Win_fence",
        ] {
            assert!(is_waiting_call(w), "{w}");
        }
        for n in [
            "MPI_Send",
            "MPI_Isend",
            "MPI_Irecv",
            "MPI_Test",
            "MPI_Iprobe",
            "MPI_Iallreduce",
            "MPI_Waitfoo",
            "MPI_Wai",
            "",
            "é",
        ] {
            assert!(!is_waiting_call(n), "{n}");
        }
    }

    #[test]
    fn union_counts_overlaps_once() {
        let mut u = Union::default();
        u.add(0, 10);
        u.add(5, 15);
        u.add(6, 8);
        u.add(20, 25);
        u.add(20, 20);
        assert_eq!(u.covered, 20);
    }
}
