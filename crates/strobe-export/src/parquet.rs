//! Parquet datasets: a profile as a directory of Parquet files that
//! DuckDB, Spark, Dask, pandas and pyarrow read directly.
//!
//! Owns [`write_parquet`]: the dataset's layout (one sub-directory per
//! table, hive-partitioned by node and MPI rank,
//! `<table>/node=<host>/rank=<rank>/<guid>.parquet`, one file per process
//! and table, so files never collide), the tables' columns (see
//! docs/parquet.md), and writing it through a staging directory renamed
//! when complete, so that a failed or interrupted conversion never leaves
//! a dataset under the final name. Each process is read on a connection of
//! its own by a reader thread that hands batches of rows (≤ 64 Ki) to the
//! thread encoding them; a file's row groups (≤ 1 Mi rows) are encoded
//! into memory column by column and spliced into the file, so memory is
//! bounded by a row group's *encoded* size, never by a table's. Processes
//! (or, for a large process, its large tables) are converted by a few
//! workers at once; a large table of samples or counter values is read by
//! several threads taking turns over chunks of row ids ([`Chunks`]), so
//! that reading, the slow side, uses the cores and the file keeps the
//! storage order. Every timestamp is written raw and aligned, through
//! [`ProcessClock::align`].
//!
//! It writes through the `parquet` crate's column writers (no Arrow
//! arrays: they cost four times the build time for nothing this needs).
//! It never writes to an input, never leaves a file outside the output
//! directory and its staging directory, and never holds a table in memory
//! (per process: the distinct names, stacks and frames excepted).

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use parquet::basic::{Compression, Encoding};
use parquet::column::writer::{get_column_writer, ColumnWriter};
use parquet::data_type::ByteArray;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::{ColumnDescPtr, ColumnPath, SchemaDescriptor};
use strobe_db::atomic::Partial;
use strobe_db::process_tables::{
    ArgJoin, CounterScan, ProcessSource, ProcessTables, RegionArg, RegionsRead, SampleScan,
};
use strobe_db::scan::{IdMap, Window};
use strobe_db::{Profile, SampleKind};

use crate::error::{ExportError, Result};
use crate::jsonw;
use strobe_db::visit::{ProcessRow, Shift};

/// The tables of a dataset, in the order they are written.
pub const TABLES: &[&str] = &[
    "processes",
    "threads",
    "regions",
    "samples",
    "stacks",
    "counters",
];

/// The file at a dataset's top level that marks it complete (JSON: the
/// format, strobe's version, the row and file counts per table).
pub const MARKER: &str = "_strobe.json";

/// How a dataset is written (the defaults suit every profile; tests use
/// small sizes to exercise several batches and row groups).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParquetOptions {
    /// Rows per batch handed from a reader thread to its encoder.
    pub batch_rows: usize,
    /// Rows per row group (rounded up to whole batches).
    pub row_group_rows: usize,
    /// Processes (or large tables) converted at once; 0: one per core, at
    /// most eight.
    pub workers: usize,
    /// Rows (samples, regions and counter values) above which a process's
    /// large tables are converted as jobs of their own.
    pub split_rows: u64,
    /// Threads reading one large table of samples or counter values
    /// (in turns, a batch each); 0: by the cores, two to three.
    pub readers: usize,
}

impl Default for ParquetOptions {
    fn default() -> Self {
        ParquetOptions {
            batch_rows: 65_536,
            row_group_rows: 1 << 20,
            workers: 0,
            split_rows: 200_000,
            readers: 0,
        }
    }
}

/// What was written for one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCount {
    /// The table's name (its sub-directory).
    pub table: &'static str,
    /// Rows in all its files.
    pub rows: u64,
    /// Files written.
    pub files: u64,
}

/// What [`write_parquet`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParquetSummary {
    /// The dataset directory.
    pub path: PathBuf,
    /// Processes converted.
    pub processes: usize,
    /// Per table, in [`TABLES`] order.
    pub tables: Vec<TableCount>,
}

impl ParquetSummary {
    /// Rows of `table` (0 for an unknown name).
    pub fn rows(&self, table: &str) -> u64 {
        self.tables
            .iter()
            .find(|t| t.table == table)
            .map_or(0, |t| t.rows)
    }

    /// Rows of every table.
    pub fn total_rows(&self) -> u64 {
        self.tables.iter().map(|t| t.rows).sum()
    }
}

// ---------------------------------------------------------------------
// Columns
// ---------------------------------------------------------------------

/// A column's physical type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    /// `int64`.
    I64,
    /// `double`.
    F64,
    /// UTF-8 `binary (STRING)`.
    Str,
}

/// A column of a table.
struct Col {
    name: &'static str,
    ty: Ty,
    /// Whether it may be null.
    optional: bool,
    /// Whether it is dictionary-encoded (few distinct values).
    dict: bool,
}

/// A required column.
const fn req(name: &'static str, ty: Ty, dict: bool) -> Col {
    Col {
        name,
        ty,
        optional: false,
        dict,
    }
}

/// An optional column.
const fn opt(name: &'static str, ty: Ty, dict: bool) -> Col {
    Col {
        name,
        ty,
        optional: true,
        dict,
    }
}

/// A table: its name and columns, in file order (the readers below push
/// values in this order).
struct Table {
    name: &'static str,
    cols: &'static [Col],
}

use Ty::{Str, F64, I64};

const PROCESSES: Table = Table {
    name: "processes",
    cols: &[
        req("guid", Str, true),
        req("pid", I64, true),
        req("ppid", I64, true),
        opt("command", Str, true),
        req("hostname", Str, true),
        req("machine_id", Str, true),
        opt("world_size", I64, true),
        opt("job", Str, true),
        opt("launcher", Str, true),
        opt("start", I64, false),
        opt("end", I64, false),
        opt("start_aligned", I64, false),
        opt("end_aligned", I64, false),
    ],
};

const THREADS: Table = Table {
    name: "threads",
    cols: &[
        req("guid", Str, true),
        req("pid", I64, true),
        req("tid", I64, true),
        opt("name", Str, true),
        opt("start", I64, false),
        opt("end", I64, false),
        opt("start_aligned", I64, false),
        opt("end_aligned", I64, false),
    ],
};

const REGIONS: Table = Table {
    name: "regions",
    cols: &[
        req("guid", Str, true),
        req("pid", I64, true),
        req("tid", I64, true),
        req("start", I64, false),
        req("end", I64, false),
        req("duration", I64, false),
        req("start_aligned", I64, false),
        req("end_aligned", I64, false),
        req("name", Str, true),
        opt("category", Str, true),
        opt("corr_id", I64, false),
        opt("stack_id", I64, true),
        opt("args", Str, false),
        opt("bytes", I64, true),
        opt("recv_bytes", I64, true),
        opt("peer", I64, true),
        opt("tag", I64, true),
        opt("root", I64, true),
        opt("comm", Str, true),
        opt("comm_size", I64, true),
    ],
};

const SAMPLES: Table = Table {
    name: "samples",
    cols: &[
        req("guid", Str, true),
        req("pid", I64, true),
        req("tid", I64, true),
        req("timestamp", I64, false),
        req("timestamp_aligned", I64, false),
        req("kind", Str, true),
        req("weight_ns", I64, true),
        opt("stack_id", I64, true),
        opt("function", Str, true),
        opt("module", Str, true),
    ],
};

const STACKS: Table = Table {
    name: "stacks",
    cols: &[
        req("guid", Str, true),
        req("stack_id", I64, false),
        req("depth", I64, true),
        req("function", Str, true),
        opt("module", Str, true),
        req("rel_pc", I64, false),
        opt("file", Str, true),
        opt("line", I64, true),
    ],
};

const COUNTERS: Table = Table {
    name: "counters",
    cols: &[
        req("guid", Str, true),
        req("pid", I64, true),
        opt("tid", I64, true),
        req("name", Str, true),
        opt("unit", Str, true),
        req("timestamp", I64, false),
        req("timestamp_aligned", I64, false),
        opt("value", F64, false),
    ],
};

/// Every table, in [`TABLES`] order.
const ALL: [&Table; 6] = [&PROCESSES, &THREADS, &REGIONS, &SAMPLES, &STACKS, &COUNTERS];

/// A table's index in [`ALL`].
type TableId = usize;
const T_PROCESSES: TableId = 0;
const T_THREADS: TableId = 1;
const T_REGIONS: TableId = 2;
const T_SAMPLES: TableId = 3;
const T_STACKS: TableId = 4;
const T_COUNTERS: TableId = 5;

/// The Parquet schema of a table.
fn message_type(t: &Table) -> String {
    let mut s = format!("message {} {{\n", t.name);
    for c in t.cols {
        let rep = if c.optional { "optional" } else { "required" };
        let ty = match c.ty {
            Ty::I64 => "int64",
            Ty::F64 => "double",
            Ty::Str => "binary",
        };
        let ann = if c.ty == Ty::Str { " (STRING)" } else { "" };
        s.push_str(&format!("  {rep} {ty} {}{ann};\n", c.name));
    }
    s.push('}');
    s
}

/// One column of a batch: values of its type, and definition levels
/// (1 present, 0 null) when it is optional.
struct ColumnData {
    ty: Ty,
    ints: Vec<i64>,
    floats: Vec<f64>,
    strs: StrColumn,
    defs: Option<Vec<i16>>,
}

/// A string column of a batch as codes into the batch's own list of its
/// distinct values: 4 bytes a row where a value would take 32, and no
/// reference count touched per row. Values are told apart by their
/// buffer (readers hand out the same buffer for the same name), so a
/// lookup hashes two integers, never the text; a value the batch holds
/// stays alive, so its buffer cannot be reused for another.
#[derive(Default)]
struct StrColumn {
    codes: Vec<u32>,
    values: Vec<ByteArray>,
    index: crate::FastMap<(usize, usize), u32>,
    /// The last value pushed: (buffer, length, code).
    last: Option<(usize, usize, u32)>,
}

impl StrColumn {
    fn push(&mut self, v: &ByteArray) {
        let key = v.data().as_ptr() as usize;
        let len = v.len();
        if let Some((k, l, code)) = self.last {
            if k == key && l == len {
                self.codes.push(code);
                return;
            }
        }
        let code = match self.index.get(&(key, len)) {
            Some(&c) => c,
            None => {
                let c = self.values.len() as u32;
                self.values.push(v.clone());
                self.index.insert((key, len), c);
                c
            }
        };
        self.last = Some((key, len, code));
        self.codes.push(code);
    }

    fn clear(&mut self) {
        self.codes.clear();
        self.values.clear();
        self.index.clear();
        self.last = None;
    }

    /// The values, one per code, into `out` (reused between batches).
    fn expand(&self, out: &mut Vec<ByteArray>) {
        out.clear();
        out.extend(self.codes.iter().map(|&c| self.values[c as usize].clone()));
    }
}

/// Up to `batch_rows` rows of one table, column by column. Rows are
/// pushed value by value in the table's column order, then closed with
/// [`Batch::end_row`].
struct Batch {
    table: &'static str,
    /// The reader thread that made it (written batches go back to it).
    origin: usize,
    cols: Vec<ColumnData>,
    rows: usize,
    at: usize,
}

impl Batch {
    fn new(t: &'static Table, cap: usize) -> Batch {
        let cols = t
            .cols
            .iter()
            .map(|c| ColumnData {
                ty: c.ty,
                ints: Vec::with_capacity(if c.ty == Ty::I64 { cap } else { 0 }),
                floats: Vec::with_capacity(if c.ty == Ty::F64 { cap } else { 0 }),
                strs: StrColumn {
                    codes: Vec::with_capacity(if c.ty == Ty::Str { cap } else { 0 }),
                    ..StrColumn::default()
                },
                defs: c.optional.then(|| Vec::with_capacity(cap)),
            })
            .collect();
        Batch {
            table: t.name,
            origin: 0,
            cols,
            rows: 0,
            at: 0,
        }
    }

    /// Empties the batch for reuse (its values are dropped here, on the
    /// thread that made them).
    fn clear(&mut self) {
        for c in &mut self.cols {
            c.ints.clear();
            c.floats.clear();
            c.strs.clear();
            if let Some(d) = &mut c.defs {
                d.clear();
            }
        }
        self.rows = 0;
        self.at = 0;
    }

    /// The next column, checked against the type being pushed.
    fn next(&mut self, ty: Ty, present: bool) -> &mut ColumnData {
        let c = &mut self.cols[self.at];
        debug_assert_eq!(c.ty, ty, "column {} pushed as {ty:?}", self.at);
        debug_assert!(present || c.defs.is_some(), "null in required column");
        if let Some(d) = &mut c.defs {
            d.push(i16::from(present));
        }
        self.at += 1;
        c
    }

    fn i64(&mut self, v: i64) {
        self.next(Ty::I64, true).ints.push(v);
    }

    fn opt_i64(&mut self, v: Option<i64>) {
        let c = self.next(Ty::I64, v.is_some());
        if let Some(v) = v {
            c.ints.push(v);
        }
    }

    fn opt_f64(&mut self, v: Option<f64>) {
        let c = self.next(Ty::F64, v.is_some());
        if let Some(v) = v {
            c.floats.push(v);
        }
    }

    fn str(&mut self, v: &ByteArray) {
        self.next(Ty::Str, true).strs.push(v);
    }

    fn opt_str(&mut self, v: Option<&ByteArray>) {
        let c = self.next(Ty::Str, v.is_some());
        if let Some(v) = v {
            c.strs.push(v);
        }
    }

    fn end_row(&mut self) {
        debug_assert_eq!(self.at, self.cols.len(), "row with missing columns");
        self.at = 0;
        self.rows += 1;
    }
}

/// Text as a Parquet string value.
fn text(s: &str) -> ByteArray {
    ByteArray::from(Bytes::copy_from_slice(s.as_bytes()))
}

// ---------------------------------------------------------------------
// Processes and their clocks
// ---------------------------------------------------------------------

/// A process's clock on the profile's common time base: the one place a
/// node's monotonic timestamp becomes an aligned one, through the
/// process's [`Shift`] from [`strobe_db::visit::clock_shifts`] (its node's
/// offset, and for an MPI rank the offset to rank 0's clock it measured,
/// interpolated over the run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessClock {
    shift: Shift,
}

impl ProcessClock {
    /// `t` (ns, the process's node's `CLOCK_MONOTONIC`) on the common
    /// time base.
    pub fn align(&self, t: i64) -> i64 {
        t + self.shift
    }
}

/// Every process of the profile as the dataset needs it.
struct Proc {
    guid: String,
    guid_value: ByteArray,
    /// Where its tables are read.
    source: ProcessSource,
    row: ProcessRow,
    /// The hive partition directory of its node, `node=…`.
    node_dir: String,
    rank: i64,
    world_size: Option<i64>,
    job: Option<String>,
    launcher: Option<String>,
    clock: ProcessClock,
}

/// A hostname as a hive partition value: bytes other than letters,
/// digits, `.`, `_` and `-` percent-encoded (readers decode them);
/// `unknown` when empty.
fn partition_value(s: &str) -> String {
    if s.is_empty() {
        return "unknown".to_string();
    }
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The processes of `p`, one per table set.
fn processes(p: &Profile) -> Result<Vec<Proc>> {
    let run = p.run()?;
    let (rows, shifts) = (&run.processes, &run.shifts);
    let by_guid: HashMap<&str, &ProcessRow> = rows.iter().map(|r| (r.guid.as_str(), r)).collect();
    let settings = p.mpi_settings()?;
    let mut out = Vec::new();
    // Each process is read from its file on a connection of its own.
    for source in p.process_sources() {
        let guid = source.guid.clone();
        let row = by_guid.get(guid.as_str()).map_or_else(
            || ProcessRow {
                guid: guid.clone(),
                ..Default::default()
            },
            |r| (*r).clone(),
        );
        let mpi = settings.get(&guid);
        let setting = |name: &str| mpi.and_then(|m| m.get(name)).map(|v| v.trim().to_string());
        let int = |name: &str| setting(name).and_then(|v| v.parse::<i64>().ok());
        let rank = int("mpi.rank").filter(|r| *r >= 0).unwrap_or(-1);
        out.push(Proc {
            guid_value: text(&guid),
            node_dir: format!("node={}", partition_value(&row.hostname)),
            rank,
            world_size: int("mpi.world_size"),
            job: setting("mpi.job"),
            launcher: setting("mpi.launcher"),
            clock: ProcessClock {
                shift: shifts.get(&guid).copied().unwrap_or_default(),
            },
            source,
            row,
            guid,
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------
// Reader side: rows of one process, in batches
// ---------------------------------------------------------------------

/// What a reader thread sends its encoder.
enum Msg {
    /// Rows of `table` follow.
    Begin(TableId),
    /// Rows.
    Batch(Batch),
    /// Forget the current table's rows so far: they come again.
    Discard,
    /// The table is complete.
    End,
    /// Reading failed.
    Failed(ExportError),
}

/// A reader thread's ends of its channels: messages out, written
/// batches back (so that a batch's values are made and dropped on the
/// same thread, and its buffers reused).
struct Link {
    tx: SyncSender<Msg>,
    spare: Receiver<Batch>,
    /// This reader's number among its job's readers.
    origin: usize,
}

impl Link {
    /// An empty batch of `table`: a written one back, or a new one.
    fn batch(&self, table: &'static Table, cap: usize) -> Batch {
        while let Ok(mut b) = self.spare.try_recv() {
            if b.table == table.name {
                b.clear();
                return b;
            }
        }
        let mut b = Batch::new(table, cap);
        b.origin = self.origin;
        b
    }
}

/// Collects one table's rows into batches and sends them.
struct Emit<'a> {
    link: &'a Link,
    table: &'static Table,
    batch: Batch,
    cap: usize,
}

impl<'a> Emit<'a> {
    fn new(link: &'a Link, table: TableId, cap: usize) -> Emit<'a> {
        let table = ALL[table];
        Emit {
            link,
            table,
            batch: link.batch(table, cap),
            cap,
        }
    }

    /// Closes the row just pushed; `false` when the encoder has gone (an
    /// error elsewhere): stop reading.
    fn end_row(&mut self) -> bool {
        self.batch.end_row();
        if self.batch.rows < self.cap {
            return true;
        }
        self.send()
    }

    fn send(&mut self) -> bool {
        if self.batch.rows == 0 {
            return true;
        }
        let fresh = self.link.batch(self.table, self.cap);
        let full = std::mem::replace(&mut self.batch, fresh);
        self.link.tx.send(Msg::Batch(full)).is_ok()
    }
}

/// Whether reading goes on.
type Go = Result<bool>;

/// A cache of one process's strings (names, categories) as values,
/// cleared when it grows past [`STRING_CACHE`].
#[derive(Default)]
struct Strings {
    map: IdMap<i64, ByteArray>,
}

/// Most strings cached per process.
const STRING_CACHE: usize = 65_536;

impl Strings {
    fn get(&mut self, t: &ProcessTables, id: i64) -> Result<ByteArray> {
        if let Some(s) = self.map.get(&id) {
            return Ok(s.clone());
        }
        if self.map.len() >= STRING_CACHE {
            self.map.clear();
        }
        let b = text(&t.string(id)?);
        self.map.insert(id, b.clone());
        Ok(b)
    }
}

/// What the reader of one job needs besides the process.
#[derive(Clone, Copy)]
struct ReadCtx {
    window: Window,
    time_kind: SampleKind,
    batch_rows: usize,
}

fn read_processes(pr: &Proc, e: &mut Emit<'_>) -> Go {
    let r = &pr.row;
    let b = &mut e.batch;
    b.str(&pr.guid_value);
    b.i64(r.pid);
    b.i64(r.ppid);
    b.opt_str(Some(&text(&r.command)).filter(|_| !r.command.is_empty()));
    b.str(&text(&r.hostname));
    b.str(&text(&r.machine_id));
    b.opt_i64(pr.world_size);
    b.opt_str(pr.job.as_deref().map(text).as_ref());
    b.opt_str(pr.launcher.as_deref().map(text).as_ref());
    b.opt_i64(r.start);
    b.opt_i64(r.end);
    b.opt_i64(r.start.map(|t| pr.clock.align(t)));
    b.opt_i64(r.end.map(|t| pr.clock.align(t)));
    Ok(e.end_row())
}

fn read_threads(t: &ProcessTables, pr: &Proc, e: &mut Emit<'_>) -> Go {
    t.threads(|th| {
        let b = &mut e.batch;
        b.str(&pr.guid_value);
        b.i64(pr.row.pid);
        b.i64(th.tid);
        b.opt_str(th.name.as_deref().map(text).as_ref());
        b.opt_i64(th.start);
        b.opt_i64(th.end);
        b.opt_i64(th.start.map(|t| pr.clock.align(t)));
        b.opt_i64(th.end.map(|t| pr.clock.align(t)));
        Ok(e.end_row())
    })
}

/// The arguments of the MPI contract that get typed columns.
#[derive(Default)]
struct MpiArgs {
    bytes: Option<i64>,
    recv_bytes: Option<i64>,
    peer: Option<i64>,
    tag: Option<i64>,
    root: Option<i64>,
    comm: Option<String>,
    comm_size: Option<i64>,
}

impl MpiArgs {
    fn take(&mut self, name: &str, value: &str) {
        let int = || value.trim().parse::<i64>().ok();
        match name {
            "bytes" => self.bytes = int(),
            "recv_bytes" => self.recv_bytes = int(),
            "peer" => self.peer = int(),
            "tag" => self.tag = int(),
            "root" => self.root = int(),
            "comm" => self.comm = Some(value.to_string()),
            "comm_size" => self.comm_size = int(),
            _ => {}
        }
    }
}

/// An argument's value as JSON, as its type says: integers (`int`,
/// `int64`, `uint64`, …, any that parses as a 64-bit integer), floats,
/// booleans; anything else, and a value its type does not parse, a
/// string.
fn json_value(out: &mut Vec<u8>, ty: &str, value: &str) {
    match ty {
        "int" | "int64" | "uint64" | "int32" | "uint32" | "long" | "u64" | "i64" => {
            let v = value.trim();
            if let Ok(i) = v.parse::<i64>() {
                return jsonw::int(out, i);
            }
            if let Ok(u) = v.parse::<u64>() {
                return out.extend_from_slice(itoa::Buffer::new().format(u).as_bytes());
            }
        }
        "float" | "double" => {
            if let Ok(f) = value.trim().parse::<f64>() {
                if f.is_finite() {
                    return jsonw::float(out, f);
                }
            }
        }
        "bool" => {
            if let Ok(b) = value.trim().parse::<bool>() {
                return out.extend_from_slice(if b { b"true" } else { b"false" });
            }
        }
        _ => {}
    }
    jsonw::string(out, value)
}

/// The arguments as one JSON object (of equal names, the last kept).
fn args_json(out: &mut Vec<u8>, args: &[RegionArg]) {
    out.clear();
    out.push(b'{');
    let mut first = true;
    for (i, a) in args.iter().enumerate() {
        if args[i + 1..].iter().any(|b| b.name == a.name) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        jsonw::string(out, &a.name);
        out.push(b':');
        json_value(out, &a.ty, &a.value);
    }
    out.push(b'}');
}

/// Streams the regions of one process (window applied) with their
/// arguments, as `join` reads them (see [`RegionsRead`]).
fn read_regions(
    t: &ProcessTables,
    pr: &Proc,
    join: ArgJoin,
    e: &mut Emit<'_>,
) -> Result<RegionsRead> {
    let mut strings = Strings::default();
    let mut json = Vec::new();
    t.regions(join, |r| {
        let mut mpi = MpiArgs::default();
        for a in r.args {
            mpi.take(&a.name, &a.value);
        }
        let name = strings.get(t, r.name_id)?;
        let category = r.category_id.map(|c| strings.get(t, c)).transpose()?;
        let b = &mut e.batch;
        b.str(&pr.guid_value);
        b.i64(pr.row.pid);
        b.i64(r.tid);
        b.i64(r.start);
        b.i64(r.end);
        b.i64(r.end - r.start);
        b.i64(pr.clock.align(r.start));
        b.i64(pr.clock.align(r.end));
        b.str(&name);
        b.opt_str(category.as_ref());
        b.opt_i64(r.correlation_id);
        b.opt_i64(r.stack_id);
        if r.args.is_empty() {
            b.opt_str(None);
        } else {
            args_json(&mut json, r.args);
            b.opt_str(Some(&ByteArray::from(json.clone())));
        }
        b.opt_i64(mpi.bytes);
        b.opt_i64(mpi.recv_bytes);
        b.opt_i64(mpi.peer);
        b.opt_i64(mpi.tag);
        b.opt_i64(mpi.root);
        b.opt_str(mpi.comm.as_deref().map(text).as_ref());
        b.opt_i64(mpi.comm_size);
        Ok(e.end_row())
    })
}

/// One frame of a stack as written: display name, module, pc, source.
#[derive(Clone)]
struct FrameOut {
    function: ByteArray,
    module: Option<ByteArray>,
    rel_pc: i64,
    file: Option<ByteArray>,
    line: Option<i64>,
}

/// The process's frames as written, by frame row id (one value per
/// distinct module and file).
fn frames(t: &ProcessTables) -> Result<IdMap<i64, FrameOut>> {
    let mut modules: HashMap<String, ByteArray> = HashMap::new();
    let mut files: HashMap<String, ByteArray> = HashMap::new();
    let mut out = IdMap::default();
    t.frames(|f| {
        let shown = f.display_name();
        let module = f
            .module
            .map(|m| modules.entry(m).or_insert_with_key(|m| text(m)).clone());
        let file = f
            .file
            .map(|m| files.entry(m).or_insert_with_key(|m| text(m)).clone());
        out.insert(
            f.id,
            FrameOut {
                function: text(&shown),
                module,
                rel_pc: f.rel_pc,
                file,
                line: f.line,
            },
        );
    })?;
    Ok(out)
}

fn read_stacks(t: &ProcessTables, pr: &Proc, e: &mut Emit<'_>) -> Go {
    let Some(walk) = t.stack_walk()? else {
        return Ok(true);
    };
    let frames = frames(t)?;
    let unknown = FrameOut {
        function: text("[unknown]"),
        module: None,
        rel_pc: 0,
        file: None,
        line: None,
    };
    walk.each(t, |leaf, depth, frame| {
        let f = frames.get(&frame).unwrap_or(&unknown);
        let b = &mut e.batch;
        b.str(&pr.guid_value);
        b.i64(leaf);
        b.i64(depth);
        b.str(&f.function);
        b.opt_str(f.module.as_ref());
        b.i64(f.rel_pc);
        b.opt_str(f.file.as_ref());
        b.opt_i64(f.line);
        Ok(e.end_row())
    })
}

/// A large table read in row-id ranges, possibly by several threads.
trait RangeReader {
    /// Reads the rows whose row id is in `rows` (window applied) into `e`.
    fn read(&mut self, t: &ProcessTables, pr: &Proc, rows: Window, e: &mut Emit<'_>) -> Go;
}

/// The reader of a large table (samples, counters).
fn range_reader(t: TableId, tables: &ProcessTables, cx: ReadCtx) -> Result<Box<dyn RangeReader>> {
    Ok(if t == T_SAMPLES {
        Box::new(SampleReader::new(tables, cx)?)
    } else {
        Box::new(CounterReader::new(tables)?)
    })
}

/// The leaf frame of a sample's stack as written: display name, module.
type Leaf = (Option<ByteArray>, Option<ByteArray>);

/// A process's samples in row-id ranges, through strobe-db's one sample
/// reader, with the leaf frame of each stack resolved once and kept from
/// one range to the next.
struct SampleReader {
    scan: SampleScan,
    kinds: [ByteArray; 3],
    leaves: IdMap<i64, Leaf>,
    modules: HashMap<String, ByteArray>,
}

/// Most leaf frames cached per process.
const LEAF_CACHE: usize = 1 << 20;

/// The kinds in [`SampleReader::kinds`] order.
const KINDS: [SampleKind; 3] = [SampleKind::Cpu, SampleKind::Wall, SampleKind::OffCpu];

impl SampleReader {
    fn new(t: &ProcessTables, cx: ReadCtx) -> Result<SampleReader> {
        Ok(SampleReader {
            scan: t.sample_scan(cx.time_kind)?,
            kinds: KINDS.map(|k| text(k.category())),
            leaves: IdMap::default(),
            modules: HashMap::new(),
        })
    }
}

/// The leaf frame's (display name, module) of call site `id`.
fn leaf(t: &ProcessTables, id: i64, modules: &mut HashMap<String, ByteArray>) -> Result<Leaf> {
    let Some(f) = t.leaf(id)? else {
        return Ok((None, None));
    };
    let shown = f.display_name();
    let m = f
        .module
        .map(|m| modules.entry(m).or_insert_with_key(|m| text(m)).clone());
    Ok((Some(text(&shown)), m))
}

impl RangeReader for SampleReader {
    fn read(&mut self, t: &ProcessTables, pr: &Proc, rows: Window, e: &mut Emit<'_>) -> Go {
        let SampleReader {
            scan,
            kinds,
            leaves,
            modules,
        } = self;
        scan.read(t, rows, |s| {
            let leaf = if s.stack_id < 0 {
                None
            } else {
                if !leaves.contains_key(&s.stack_id) {
                    if leaves.len() >= LEAF_CACHE {
                        leaves.clear();
                    }
                    leaves.insert(s.stack_id, leaf(t, s.stack_id, modules)?);
                }
                leaves.get(&s.stack_id)
            };
            let kind = KINDS.iter().position(|k| *k == s.kind).unwrap_or(0);
            let b = &mut e.batch;
            b.str(&pr.guid_value);
            b.i64(s.pid);
            b.i64(s.tid);
            b.i64(s.timestamp);
            b.i64(pr.clock.align(s.timestamp));
            b.str(&kinds[kind]);
            b.i64(s.weight_ns.min(i64::MAX as u64) as i64);
            b.opt_i64((s.stack_id >= 0).then_some(s.stack_id));
            b.opt_str(leaf.and_then(|l| l.0.as_ref()));
            b.opt_str(leaf.and_then(|l| l.1.as_ref()));
            Ok(e.end_row())
        })
    }
}

/// A process's counter values in row-id ranges: counter names as
/// written, loaded once.
struct CounterReader {
    scan: CounterScan,
    names: IdMap<i64, (ByteArray, Option<ByteArray>)>,
}

impl CounterReader {
    fn new(t: &ProcessTables) -> Result<CounterReader> {
        let scan = t.counter_scan()?;
        let names = scan
            .counters()
            .iter()
            .map(|c| (c.id, (text(&c.name), c.unit.as_deref().map(text))))
            .collect();
        Ok(CounterReader { scan, names })
    }
}

impl RangeReader for CounterReader {
    fn read(&mut self, t: &ProcessTables, pr: &Proc, rows: Window, e: &mut Emit<'_>) -> Go {
        let names = &self.names;
        self.scan.read(t, rows, |v| {
            let Some((name, unit)) = names.get(&v.counter) else {
                return Ok(true);
            };
            let b = &mut e.batch;
            b.str(&pr.guid_value);
            b.i64(pr.row.pid);
            b.opt_i64(v.tid);
            b.str(name);
            b.opt_str(unit.as_ref());
            b.i64(v.timestamp);
            b.i64(pr.clock.align(v.timestamp));
            b.opt_f64(v.value);
            Ok(e.end_row())
        })
    }
}

/// Reads `tables` of one process and sends them, table after table; an
/// error is sent as [`Msg::Failed`].
fn reader(pr: &Proc, tables: &[TableId], cx: ReadCtx, link: Link) {
    let tx = &link.tx;
    let run = || -> Result<()> {
        let t = pr.source.open(cx.window)?;
        for &table in tables {
            if tx.send(Msg::Begin(table)).is_err() {
                return Ok(());
            }
            let mut e = Emit::new(&link, table, cx.batch_rows);
            let go = match table {
                T_PROCESSES => read_processes(pr, &mut e)?,
                T_THREADS => read_threads(&t, pr, &mut e)?,
                T_REGIONS => match read_regions(&t, pr, ArgJoin::Storage, &mut e)? {
                    RegionsRead::Complete => true,
                    RegionsRead::Stopped => false,
                    RegionsRead::NotInEventOrder => {
                        if tx.send(Msg::Discard).is_err() {
                            return Ok(());
                        }
                        e = Emit::new(&link, table, cx.batch_rows);
                        read_regions(&t, pr, ArgJoin::Sorted, &mut e)? != RegionsRead::Stopped
                    }
                },
                T_STACKS => read_stacks(&t, pr, &mut e)?,
                _ => range_reader(table, &t, cx)?.read(&t, pr, (None, None), &mut e)?,
            };
            if !go || !e.send() || tx.send(Msg::End).is_err() {
                return Ok(());
            }
        }
        Ok(())
    };
    if let Err(e) = run() {
        let _ = tx.send(Msg::Failed(e));
    }
}

// ---------------------------------------------------------------------
// Encoder side: batches into files
// ---------------------------------------------------------------------

/// A table's schema and writer properties, shared by its files.
struct TableFormat {
    schema: Arc<parquet::schema::types::Type>,
    descr: SchemaDescriptor,
    props: Arc<WriterProperties>,
}

impl TableFormat {
    fn new(t: &Table) -> Result<TableFormat> {
        let schema = Arc::new(
            parse_message_type(&message_type(t))
                .map_err(|e| ExportError::Usage(format!("internal: schema of {}: {e}", t.name)))?,
        );
        let mut b = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_created_by(format!("strobe {}", env!("CARGO_PKG_VERSION")))
            .set_dictionary_enabled(true);
        for c in t.cols {
            if !c.dict {
                b = b.set_column_dictionary_enabled(ColumnPath::from(c.name), false);
                // Times and durations: deltas of neighbours, a byte or two
                // a value where plain takes eight (every reader named in
                // docs/parquet.md decodes it).
                if c.ty == Ty::I64 {
                    b = b.set_column_encoding(
                        ColumnPath::from(c.name),
                        Encoding::DELTA_BINARY_PACKED,
                    );
                }
            }
            // Min/max of strings cost a comparison per value and prune
            // little: numbers (times, ids) keep theirs.
            if c.ty == Ty::Str {
                b = b.set_column_statistics_enabled(
                    ColumnPath::from(c.name),
                    EnabledStatistics::None,
                );
            }
        }
        Ok(TableFormat {
            descr: SchemaDescriptor::new(schema.clone()),
            schema,
            props: Arc::new(b.build()),
        })
    }

    fn columns(&self) -> Vec<ColumnDescPtr> {
        (0..self.descr.num_columns())
            .map(|i| self.descr.column(i))
            .collect()
    }
}

/// Maps a Parquet error while writing `path`.
fn pq_err(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> ExportError + '_ {
    move |e| ExportError::Write {
        path: path.to_path_buf(),
        error: std::io::Error::other(e.to_string()),
    }
}

/// Encodes one batch into the row group's column writers (`strings`:
/// a buffer for string values, reused).
fn write_batch(
    writers: &mut [ColumnWriter<'_>],
    b: &Batch,
    strings: &mut Vec<ByteArray>,
    path: &Path,
) -> Result<()> {
    for (w, c) in writers.iter_mut().zip(&b.cols) {
        let defs = c.defs.as_deref();
        let r = match (w, c.ty) {
            (ColumnWriter::Int64ColumnWriter(w), Ty::I64) => w.write_batch(&c.ints, defs, None),
            (ColumnWriter::DoubleColumnWriter(w), Ty::F64) => w.write_batch(&c.floats, defs, None),
            (ColumnWriter::ByteArrayColumnWriter(w), Ty::Str) => {
                c.strs.expand(strings);
                let r = w.write_batch(strings, defs, None);
                strings.clear();
                r
            }
            _ => {
                return Err(ExportError::Usage(format!(
                    "internal: column type mismatch writing {}",
                    path.display()
                )))
            }
        };
        r.map_err(pq_err(path))?;
    }
    Ok(())
}

/// An encoder's ends of its reader's channels: messages in, written
/// batches back.
struct Ends {
    feed: Feed,
    /// Per reader thread, where its written batches go back.
    spare: Vec<Sender<Batch>>,
}

/// Where an encoder's messages come from.
enum Feed {
    /// One reader thread, table after table.
    One(Receiver<Msg>),
    /// One table read by several threads in interleaved chunks (see
    /// [`Chunks`]): each sends exactly one batch per chunk, so taking
    /// them in turn restores the storage order.
    Chunks {
        table: TableId,
        rxs: Vec<Receiver<Msg>>,
        next: usize,
        count: usize,
        begun: bool,
    },
}

impl Ends {
    /// The next message; `None` when every reader is done.
    fn recv(&mut self) -> Option<Msg> {
        loop {
            let empty = match &mut self.feed {
                Feed::One(rx) => return rx.recv().ok(),
                Feed::Chunks {
                    table,
                    rxs,
                    next,
                    count,
                    begun,
                } => {
                    if !*begun {
                        *begun = true;
                        return Some(Msg::Begin(*table));
                    }
                    if *next > *count {
                        return None;
                    }
                    if *next == *count {
                        *next += 1;
                        return Some(Msg::End);
                    }
                    match rxs[*next % rxs.len()].recv() {
                        Ok(Msg::Batch(b)) => {
                            *next += 1;
                            if b.rows > 0 {
                                return Some(Msg::Batch(b));
                            }
                            b
                        }
                        Ok(m) => return Some(m),
                        Err(_) => return None,
                    }
                }
            };
            self.give_back(empty);
        }
    }

    /// Hands a written batch back to the thread that made it (dropped
    /// here when that thread has finished).
    fn give_back(&self, b: Batch) {
        if let Some(tx) = self.spare.get(b.origin) {
            let _ = tx.send(b);
        }
    }
}

/// How a file's writing ended: the message after its last batch.
enum Next {
    Msg(Msg),
    /// The reader stopped without saying why (it panicked).
    Gone,
}

/// Writes one row group: batches from `first` on until the group is full
/// or a message other than a batch arrives (returned). Its columns are
/// encoded into memory one writer per column, then spliced into the file.
fn row_group(
    fw: &mut SerializedFileWriter<File>,
    fmt: &TableFormat,
    first: Batch,
    ends: &mut Ends,
    limit: usize,
    path: &Path,
) -> Result<(u64, Option<Next>)> {
    let descrs = fmt.columns();
    let mut sinks: Vec<TrackedWrite<Vec<u8>>> = descrs
        .iter()
        .map(|_| TrackedWrite::new(Vec::new()))
        .collect();
    let mut rows = 0usize;
    let mut next = None;
    let closed = {
        let mut writers: Vec<ColumnWriter<'_>> = sinks
            .iter_mut()
            .zip(&descrs)
            .map(|(s, d)| {
                get_column_writer(
                    d.clone(),
                    fmt.props.clone(),
                    Box::new(SerializedPageWriter::new(s)),
                )
            })
            .collect();
        let mut batch = Some(first);
        let mut strings = Vec::new();
        loop {
            let b = match batch.take() {
                Some(b) => b,
                None => match ends.recv() {
                    Some(Msg::Batch(b)) => b,
                    Some(m) => {
                        next = Some(Next::Msg(m));
                        break;
                    }
                    None => {
                        next = Some(Next::Gone);
                        break;
                    }
                },
            };
            write_batch(&mut writers, &b, &mut strings, path)?;
            rows += b.rows;
            ends.give_back(b);
            if rows >= limit {
                break;
            }
        }
        writers
            .into_iter()
            .map(|w| w.close())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(pq_err(path))?
    };
    let mut rg = fw.next_row_group().map_err(pq_err(path))?;
    for (sink, close) in sinks.into_iter().zip(closed) {
        let bytes = Bytes::from(sink.into_inner().map_err(pq_err(path))?);
        rg.append_column(&bytes, close).map_err(pq_err(path))?;
    }
    rg.close().map_err(pq_err(path))?;
    Ok((rows as u64, next))
}

/// Writes batches from `first` on into a new file at `path` until a
/// message other than a batch arrives; returns the rows and that message.
fn write_file(
    path: &Path,
    fmt: &TableFormat,
    pr: &Proc,
    table: &Table,
    first: Batch,
    ends: &mut Ends,
    limit: usize,
) -> Result<(u64, Next)> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ExportError::Write {
            path: dir.to_path_buf(),
            error: e,
        })?;
    }
    let file = File::create(path).map_err(|e| ExportError::Write {
        path: path.to_path_buf(),
        error: e,
    })?;
    let mut fw = SerializedFileWriter::new(file, fmt.schema.clone(), fmt.props.clone())
        .map_err(pq_err(path))?;
    for (k, v) in [
        ("strobe.table", table.name.to_string()),
        ("strobe.guid", pr.guid.clone()),
        ("strobe.node", pr.row.hostname.clone()),
        ("strobe.rank", pr.rank.to_string()),
    ] {
        fw.append_key_value_metadata(KeyValue::new(k.to_string(), v));
    }
    let mut rows = 0;
    let mut batch = first;
    let next = loop {
        let (n, next) = row_group(&mut fw, fmt, batch, ends, limit, path)?;
        rows += n;
        match next {
            Some(n) => break n,
            None => match ends.recv() {
                Some(Msg::Batch(b)) => batch = b,
                Some(m) => break Next::Msg(m),
                None => break Next::Gone,
            },
        }
    };
    fw.into_inner().map_err(pq_err(path))?;
    Ok((rows, next))
}

/// Rows and files written per table.
type Counts = [(u64, u64); 6];

/// The file of `table` for process `pr` under `root`.
fn file_path(root: &Path, table: &Table, pr: &Proc) -> PathBuf {
    root.join(table.name)
        .join(&pr.node_dir)
        .join(format!("rank={}", pr.rank))
        .join(format!("{}.parquet", pr.guid))
}

/// A large table split into chunks of consecutive row ids, read by
/// `readers` threads in turn (reader `j` reads chunks `j`, `j + readers`,
/// …), so that reading, the slow side, uses several cores while the file
/// keeps the storage order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chunks {
    /// The first chunk's first row id.
    first: i64,
    /// Row ids per chunk (at most a batch of rows).
    size: i64,
    count: usize,
    readers: usize,
}

/// One unit of work: tables of one process, or one large table in chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Job {
    process: usize,
    tables: Vec<TableId>,
    chunks: Option<Chunks>,
}

/// Reads chunks `j`, `j + readers`, … of a large table, one batch each
/// (empty ones included: the encoder counts them); an error is sent in
/// place of a batch.
fn chunk_reader(pr: &Proc, t: TableId, cx: ReadCtx, ch: Chunks, link: Link) {
    let run = || -> Result<()> {
        let tables = pr.source.open(cx.window)?;
        let mut r = range_reader(t, &tables, cx)?;
        for c in (link.origin..ch.count).step_by(ch.readers.max(1)) {
            let lo = ch.first + c as i64 * ch.size;
            // Never full before the chunk ends: one message per chunk.
            let mut e = Emit::new(&link, t, ch.size as usize + 1);
            if !r.read(&tables, pr, (Some(lo), Some(lo + ch.size)), &mut e)? {
                return Ok(());
            }
            if link.tx.send(Msg::Batch(e.batch)).is_err() {
                return Ok(());
            }
        }
        Ok(())
    };
    if let Err(e) = run() {
        let _ = link.tx.send(Msg::Failed(e));
    }
}

/// Converts one job: reader threads read, this thread encodes. Files are
/// created with a table's first row (an empty table writes no file).
fn job(
    root: &Path,
    formats: &[TableFormat],
    pr: &Proc,
    job: &Job,
    cx: ReadCtx,
    opts: &ParquetOptions,
    counts: &mut Counts,
) -> Result<()> {
    let readers = job.chunks.map_or(1, |c| c.readers.max(1));
    let (mut links, mut rxs, mut spare) = (Vec::new(), Vec::new(), Vec::new());
    for origin in 0..readers {
        let (tx, rx) = sync_channel::<Msg>(2);
        let (spare_tx, spare_rx) = channel::<Batch>();
        links.push(Link {
            tx,
            spare: spare_rx,
            origin,
        });
        rxs.push(rx);
        spare.push(spare_tx);
    }
    let feed = match job.chunks {
        Some(c) => Feed::Chunks {
            table: job.tables[0],
            rxs,
            next: 0,
            count: c.count,
            begun: false,
        },
        None => Feed::One(
            rxs.pop()
                .ok_or_else(|| ExportError::Usage("internal: no reader".into()))?,
        ),
    };
    let mut ends = Ends { feed, spare };
    std::thread::scope(|s| -> Result<()> {
        let mut threads = Vec::new();
        for link in links {
            let b = std::thread::Builder::new().name("strobe-parquet-reader".into());
            threads.push(match job.chunks {
                Some(c) => {
                    let t = job.tables[0];
                    b.spawn_scoped(s, move || chunk_reader(pr, t, cx, c, link))?
                }
                None => b.spawn_scoped(s, move || reader(pr, &job.tables, cx, link))?,
            });
        }
        let result = (|| -> Result<()> {
            let mut current: Option<TableId> = None;
            let mut pending: Option<Msg> = None;
            loop {
                let m = match pending.take() {
                    Some(m) => m,
                    None => match ends.recv() {
                        Some(m) => m,
                        None => return Ok(()),
                    },
                };
                match m {
                    Msg::Begin(t) => current = Some(t),
                    Msg::Batch(b) => {
                        let Some(t) = current else {
                            return Err(ExportError::Usage("internal: rows before a table".into()));
                        };
                        let table = ALL[t];
                        let path = file_path(root, table, pr);
                        let (rows, next) = write_file(
                            &path,
                            &formats[t],
                            pr,
                            table,
                            b,
                            &mut ends,
                            opts.row_group_rows,
                        )?;
                        match next {
                            Next::Msg(Msg::Discard) => {
                                std::fs::remove_file(&path).map_err(|e| ExportError::Write {
                                    path: path.clone(),
                                    error: e,
                                })?;
                            }
                            Next::Msg(m) => {
                                counts[t].0 += rows;
                                counts[t].1 += 1;
                                pending = Some(m);
                            }
                            Next::Gone => {
                                return Err(ExportError::Usage(format!(
                                    "internal: the reader of {} stopped while writing {}",
                                    pr.guid,
                                    path.display()
                                )))
                            }
                        }
                    }
                    Msg::Discard | Msg::End => {}
                    Msg::Failed(e) => return Err(e),
                }
            }
        })();
        // Dropping the receivers unblocks readers still sending.
        drop(ends);
        let joined: Vec<_> = threads.into_iter().map(|t| t.join()).collect();
        result?;
        if joined.iter().any(|j| j.is_err()) {
            return Err(ExportError::Usage(format!(
                "internal: a reader of process {} failed",
                pr.guid
            )));
        }
        Ok(())
    })
}

/// Writes an empty file (schema only) for each table no process wrote,
/// so that every table of the dataset can be read.
fn empty_files(
    root: &Path,
    formats: &[TableFormat],
    first: &Proc,
    counts: &mut Counts,
) -> Result<()> {
    for (t, table) in ALL.iter().enumerate() {
        if counts[t].1 > 0 {
            continue;
        }
        let path = file_path(root, table, first);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| ExportError::Write {
                path: dir.to_path_buf(),
                error: e,
            })?;
        }
        let file = File::create(&path).map_err(|e| ExportError::Write {
            path: path.clone(),
            error: e,
        })?;
        let fw =
            SerializedFileWriter::new(file, formats[t].schema.clone(), formats[t].props.clone())
                .map_err(pq_err(&path))?;
        fw.close().map_err(pq_err(&path))?;
        counts[t].1 += 1;
    }
    Ok(())
}

/// Chunks per reader thread below which a table is read by one thread.
const CHUNKS_PER_READER: usize = 4;

/// The jobs: per process, its tables; a large process's large tables
/// each on their own (samples and counters read by `readers` threads),
/// largest first.
fn jobs(p: &Profile, procs: &[Proc], opts: &ParquetOptions, readers: usize) -> Result<Vec<Job>> {
    let split = opts.split_rows.min(i64::MAX as u64) as i64;
    let mut sized = Vec::new();
    for (k, pr) in procs.iter().enumerate() {
        // Per table, the first and last row id.
        let b = p.row_id_bounds(&pr.source)?;
        let big = [
            (T_SAMPLES, b.samples),
            (T_REGIONS, b.regions),
            (T_COUNTERS, b.counters),
        ];
        let span = |(lo, hi): (i64, i64)| (hi - lo + 1).max(0);
        let total: i64 = big.iter().map(|b| span(b.1)).sum();
        if total <= split {
            sized.push((
                total,
                Job {
                    process: k,
                    tables: (0..ALL.len()).collect(),
                    chunks: None,
                },
            ));
            continue;
        }
        let mut rest = vec![T_PROCESSES, T_THREADS, T_STACKS];
        for (t, range) in big {
            let n = span(range);
            if n <= split / 4 {
                rest.push(t);
                continue;
            }
            let size = opts.batch_rows.max(1) as i64;
            let count = ((n + size - 1) / size) as usize;
            let chunks = (t != T_REGIONS && readers > 1 && count >= CHUNKS_PER_READER * readers)
                .then_some(Chunks {
                    first: range.0,
                    size,
                    count,
                    readers,
                });
            sized.push((
                n,
                Job {
                    process: k,
                    tables: vec![t],
                    chunks,
                },
            ));
        }
        rest.sort_unstable();
        sized.push((
            0,
            Job {
                process: k,
                tables: rest,
                chunks: None,
            },
        ));
    }
    sized.sort_by_key(|(n, j)| (std::cmp::Reverse(*n), j.process));
    Ok(sized.into_iter().map(|(_, j)| j).collect())
}

/// Whether `dir` is a dataset this exporter wrote (it holds [`MARKER`]).
pub fn is_dataset(dir: &Path) -> bool {
    dir.join(MARKER).is_file()
}

/// An error of the staging directory as an error writing the output.
fn write_err(e: strobe_db::DbError) -> ExportError {
    match e {
        strobe_db::DbError::Io { path, error } => ExportError::Write { path, error },
        e => ExportError::Db(e),
    }
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> ExportError + '_ {
    move |e| ExportError::Write {
        path: path.to_path_buf(),
        error: e,
    }
}

/// The dataset's marker file: format, versions, counts.
fn marker_json(s: &ParquetSummary, window: (Option<i64>, Option<i64>)) -> Result<Vec<u8>> {
    let tables: serde_json::Map<String, serde_json::Value> = s
        .tables
        .iter()
        .map(|t| {
            (
                t.table.to_string(),
                serde_json::json!({"rows": t.rows, "files": t.files}),
            )
        })
        .collect();
    Ok(serde_json::to_vec_pretty(&serde_json::json!({
        "format": "strobe-parquet",
        "format_version": 1,
        "strobe_version": env!("CARGO_PKG_VERSION"),
        "partitioning": ["node", "rank"],
        "processes": s.processes,
        "window": {"start": window.0, "end": window.1},
        "tables": tables,
    }))?)
}

/// Writes the profile as a Parquet dataset at `out` with the default
/// [`ParquetOptions`]. See [`write_parquet_with`].
pub fn write_parquet(p: &Profile, out: &Path) -> Result<ParquetSummary> {
    write_parquet_with(p, out, &ParquetOptions::default())
}

/// Writes the profile (its window applied) as a Parquet dataset: the
/// directory `out`, holding one sub-directory per table ([`TABLES`]),
/// each hive-partitioned `node=<hostname>/rank=<MPI rank, -1 when none>`
/// with one file per process, `<guid>.parquet`, and [`MARKER`].
///
/// It is written into `<out>.partial` and renamed to `out` when complete;
/// a failure removes the staging directory. An existing dataset at `out`
/// is replaced; anything else there is an error, before any work.
pub fn write_parquet_with(
    p: &Profile,
    out: &Path,
    opts: &ParquetOptions,
) -> Result<ParquetSummary> {
    out.file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty() && *n != "." && *n != "..")
        .ok_or_else(|| {
            ExportError::Usage(format!(
                "{}: not a usable dataset directory name (give a name such as run.parquet)",
                out.display()
            ))
        })?;
    if out.exists() && !is_dataset(out) {
        return Err(ExportError::Usage(format!(
            "{} exists and is not a strobe Parquet dataset (it has no {MARKER}); remove it or choose another output name",
            out.display()
        )));
    }
    // Written under `<out>.partial`, removed unless renamed at the end.
    let staging = Partial::dir(out).map_err(write_err)?;
    let procs = processes(p)?;
    if procs.is_empty() {
        return Err(ExportError::Empty {
            what: format!("Parquet dataset {}", out.display()),
            needed: "processes".into(),
        });
    }
    let formats = ALL
        .iter()
        .map(|t| TableFormat::new(t))
        .collect::<Result<Vec<_>>>()?;
    let cx = ReadCtx {
        window: p.window(),
        time_kind: p.time_kind()?,
        batch_rows: opts.batch_rows.max(1),
    };
    let opts = ParquetOptions {
        row_group_rows: opts.row_group_rows.max(1),
        ..*opts
    };
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let readers = if opts.readers > 0 {
        opts.readers
    } else {
        cores.clamp(2, 4) / 2 + 1
    };
    let work = jobs(p, &procs, &opts, readers)?;
    let workers = if opts.workers > 0 {
        opts.workers
    } else {
        cores.clamp(1, 8)
    }
    .min(work.len().max(1));
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<ExportError>> = Mutex::new(None);
    let totals: Mutex<Counts> = Mutex::new([(0, 0); 6]);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                let mut counts: Counts = [(0, 0); 6];
                while !failed.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(w) = work.get(i) else {
                        break;
                    };
                    if let Err(e) = job(
                        staging.path(),
                        &formats,
                        &procs[w.process],
                        w,
                        cx,
                        &opts,
                        &mut counts,
                    ) {
                        failed.store(true, Ordering::Relaxed);
                        if let Ok(mut f) = first_error.lock() {
                            f.get_or_insert(e);
                        }
                        break;
                    }
                }
                if let Ok(mut t) = totals.lock() {
                    for (a, b) in t.iter_mut().zip(counts) {
                        a.0 += b.0;
                        a.1 += b.1;
                    }
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().ok().flatten() {
        return Err(e);
    }
    let mut counts = totals
        .into_inner()
        .map_err(|_| ExportError::Usage("internal: a conversion worker failed".into()))?;
    if let Some(first) = procs.first() {
        empty_files(staging.path(), &formats, first, &mut counts)?;
    }
    let mut summary = ParquetSummary {
        path: out.to_path_buf(),
        processes: procs.len(),
        tables: ALL
            .iter()
            .zip(counts)
            .map(|(t, (rows, files))| TableCount {
                table: t.name,
                rows,
                files,
            })
            .collect(),
    };
    let marker = staging.path().join(MARKER);
    std::fs::write(&marker, marker_json(&summary, cx.window)?).map_err(io_at(&marker))?;
    // Commit: an earlier dataset moves aside, the new one takes its name.
    staging.commit().map_err(write_err)?;
    summary.path = out.to_path_buf();
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_parse_and_name_every_column() {
        for t in ALL {
            let f = TableFormat::new(t).unwrap();
            let names: Vec<String> = f.columns().iter().map(|c| c.name().to_string()).collect();
            let want: Vec<&str> = t.cols.iter().map(|c| c.name).collect();
            assert_eq!(names, want, "{}", t.name);
        }
        assert_eq!(
            ALL.iter().map(|t| t.name).collect::<Vec<_>>(),
            TABLES.to_vec()
        );
    }

    #[test]
    fn hostnames_become_safe_partition_values() {
        assert_eq!(partition_value("node-01.cluster"), "node-01.cluster");
        assert_eq!(partition_value("a b/c=d"), "a%20b%2Fc%3Dd");
        assert_eq!(partition_value(""), "unknown");
    }

    #[test]
    fn arguments_become_typed_json() {
        let a = |n: &str, t: &str, v: &str| RegionArg {
            position: 0,
            name: n.to_string(),
            ty: t.to_string(),
            value: v.to_string(),
        };
        let mut out = Vec::new();
        args_json(
            &mut out,
            &[
                a("bytes", "int", "8192"),
                a("comm", "string", "world.3"),
                a("flow_out", "int", "18446744073709551615"),
                a("ratio", "double", "0.5"),
                a("bad", "int", "12x"),
                a("ok", "bool", "true"),
                a("bytes", "int", "16"),
                a("q", "string", "say \"hi\"\n"),
            ],
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["bytes"], 16);
        assert_eq!(v["comm"], "world.3");
        assert_eq!(v["flow_out"].as_u64(), Some(u64::MAX));
        assert_eq!(v["ratio"], 0.5);
        assert_eq!(v["bad"], "12x");
        assert_eq!(v["ok"], true);
        assert_eq!(v["q"], "say \"hi\"\n");
        assert_eq!(v.as_object().unwrap().len(), 7);
    }

    #[test]
    fn mpi_arguments_fill_their_columns() {
        let mut m = MpiArgs::default();
        for (n, v) in [
            ("bytes", "4096"),
            ("peer", "3"),
            ("tag", "-1"),
            ("comm", "world"),
            ("comm_size", " 4 "),
            ("root", "zero"),
        ] {
            m.take(n, v);
        }
        assert_eq!(
            (
                m.bytes,
                m.peer,
                m.tag,
                m.comm.as_deref(),
                m.comm_size,
                m.root
            ),
            (Some(4096), Some(3), Some(-1), Some("world"), Some(4), None)
        );
        assert_eq!(m.recv_bytes, None);
    }

    #[test]
    fn the_clock_shifts_timestamps() {
        let c = ProcessClock {
            shift: Shift::constant(-5),
        };
        assert_eq!(c.align(100), 95);
        let c = ProcessClock {
            shift: Shift::constant(1),
        };
        assert_eq!(c.align(i64::MAX), i64::MAX);
    }
}
