//! The dataset's tables as Parquet columns, and the batches of rows that
//! travel from reader threads to encoders.
//!
//! Owns every table's columns (name, type, whether nullable, whether
//! dictionary-encoded; see docs/parquet.md) in file order, the Parquet
//! schema they make, and [`Batch`]: up to a batch of one table's rows,
//! column by column, pushed value by value in column order. It never
//! reads a profile and never writes a file.

use bytes::Bytes;
use parquet::data_type::ByteArray;

/// A column's physical type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ty {
    /// `int64`.
    I64,
    /// `double`.
    F64,
    /// UTF-8 `binary (STRING)`.
    Str,
}

/// A column of a table.
pub(super) struct Col {
    pub(super) name: &'static str,
    pub(super) ty: Ty,
    /// Whether it may be null.
    pub(super) optional: bool,
    /// Whether it is dictionary-encoded (few distinct values).
    pub(super) dict: bool,
}

/// A required column.
pub(super) const fn req(name: &'static str, ty: Ty, dict: bool) -> Col {
    Col {
        name,
        ty,
        optional: false,
        dict,
    }
}

/// An optional column.
pub(super) const fn opt(name: &'static str, ty: Ty, dict: bool) -> Col {
    Col {
        name,
        ty,
        optional: true,
        dict,
    }
}

/// A table: its name and columns, in file order (the readers push
/// values in this order).
pub(super) struct Table {
    pub(super) name: &'static str,
    pub(super) cols: &'static [Col],
}

use Ty::{Str, F64, I64};

pub(super) const PROCESSES: Table = Table {
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

pub(super) const THREADS: Table = Table {
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

pub(super) const REGIONS: Table = Table {
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

pub(super) const SAMPLES: Table = Table {
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

pub(super) const STACKS: Table = Table {
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

pub(super) const COUNTERS: Table = Table {
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

/// Every table, in [`super::TABLES`] order.
pub(super) const ALL: [&Table; 6] = [&PROCESSES, &THREADS, &REGIONS, &SAMPLES, &STACKS, &COUNTERS];

/// A table's index in [`ALL`].
pub(super) type TableId = usize;
pub(super) const T_PROCESSES: TableId = 0;
pub(super) const T_THREADS: TableId = 1;
pub(super) const T_REGIONS: TableId = 2;
pub(super) const T_SAMPLES: TableId = 3;
pub(super) const T_STACKS: TableId = 4;
pub(super) const T_COUNTERS: TableId = 5;

/// The Parquet schema of a table.
pub(super) fn message_type(t: &Table) -> String {
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
pub(super) struct ColumnData {
    pub(super) ty: Ty,
    pub(super) ints: Vec<i64>,
    pub(super) floats: Vec<f64>,
    pub(super) strs: StrColumn,
    pub(super) defs: Option<Vec<i16>>,
}

/// A string column of a batch as codes into the batch's own list of its
/// distinct values: 4 bytes a row where a value would take 32, and no
/// reference count touched per row. Values are told apart by their
/// buffer (readers hand out the same buffer for the same name), so a
/// lookup hashes two integers, never the text; a value the batch holds
/// stays alive, so its buffer cannot be reused for another.
#[derive(Default)]
pub(super) struct StrColumn {
    pub(super) codes: Vec<u32>,
    pub(super) values: Vec<ByteArray>,
    pub(super) index: crate::FastMap<(usize, usize), u32>,
    /// The last value pushed: (buffer, length, code).
    pub(super) last: Option<(usize, usize, u32)>,
}

impl StrColumn {
    pub(super) fn push(&mut self, v: &ByteArray) {
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

    pub(super) fn clear(&mut self) {
        self.codes.clear();
        self.values.clear();
        self.index.clear();
        self.last = None;
    }

    /// The values, one per code, into `out` (reused between batches).
    pub(super) fn expand(&self, out: &mut Vec<ByteArray>) {
        out.clear();
        out.extend(self.codes.iter().map(|&c| self.values[c as usize].clone()));
    }
}

/// Up to `batch_rows` rows of one table, column by column. Rows are
/// pushed value by value in the table's column order, then closed with
/// [`Batch::end_row`].
pub(super) struct Batch {
    pub(super) table: &'static str,
    /// The reader thread that made it (written batches go back to it).
    pub(super) origin: usize,
    pub(super) cols: Vec<ColumnData>,
    pub(super) rows: usize,
    pub(super) at: usize,
}

impl Batch {
    pub(super) fn new(t: &'static Table, cap: usize) -> Batch {
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
    pub(super) fn clear(&mut self) {
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
    pub(super) fn next(&mut self, ty: Ty, present: bool) -> &mut ColumnData {
        let c = &mut self.cols[self.at];
        debug_assert_eq!(c.ty, ty, "column {} pushed as {ty:?}", self.at);
        debug_assert!(present || c.defs.is_some(), "null in required column");
        if let Some(d) = &mut c.defs {
            d.push(i16::from(present));
        }
        self.at += 1;
        c
    }

    pub(super) fn i64(&mut self, v: i64) {
        self.next(Ty::I64, true).ints.push(v);
    }

    pub(super) fn opt_i64(&mut self, v: Option<i64>) {
        let c = self.next(Ty::I64, v.is_some());
        if let Some(v) = v {
            c.ints.push(v);
        }
    }

    pub(super) fn opt_f64(&mut self, v: Option<f64>) {
        let c = self.next(Ty::F64, v.is_some());
        if let Some(v) = v {
            c.floats.push(v);
        }
    }

    pub(super) fn str(&mut self, v: &ByteArray) {
        self.next(Ty::Str, true).strs.push(v);
    }

    pub(super) fn opt_str(&mut self, v: Option<&ByteArray>) {
        let c = self.next(Ty::Str, v.is_some());
        if let Some(v) = v {
            c.strs.push(v);
        }
    }

    pub(super) fn end_row(&mut self) {
        debug_assert_eq!(self.at, self.cols.len(), "row with missing columns");
        self.at = 0;
        self.rows += 1;
    }
}

/// Text as a Parquet string value.
pub(super) fn text(s: &str) -> ByteArray {
    ByteArray::from(Bytes::copy_from_slice(s.as_bytes()))
}
