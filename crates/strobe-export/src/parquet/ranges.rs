//! The large tables (samples, counter values) read in row-id ranges.
//!
//! Owns [`RangeReader`] and its two readers: samples through strobe-db's
//! one sample reader with each stack's leaf frame resolved once, and
//! counter values with their counters' names; and [`Chunks`], a large
//! table read by several threads taking turns over chunks of row ids
//! ([`chunk_reader`]) so that reading uses the cores while the file keeps
//! the storage order. It never writes SQL and never encodes.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use parquet::data_type::ByteArray;
use strobe_db::process_tables::{CounterScan, ProcessTables, SampleScan};
use strobe_db::scan::{IdMap, Window};
use strobe_db::SampleKind;

use super::columns::{text, TableId, T_SAMPLES};
use super::emit::{Emit, Go, Link, Msg, ReadCtx};
use super::process::Proc;
use crate::error::Result;

/// A large table read in row-id ranges, possibly by several threads.
pub(super) trait RangeReader {
    /// Reads the rows whose row id is in `rows` (window applied) into `e`.
    fn read(&mut self, t: &ProcessTables, pr: &Proc, rows: Window, e: &mut Emit<'_>) -> Go;
}

/// The reader of a large table (samples, counters).
pub(super) fn range_reader(
    t: TableId,
    tables: &ProcessTables,
    cx: ReadCtx,
) -> Result<Box<dyn RangeReader>> {
    Ok(if t == T_SAMPLES {
        Box::new(SampleReader::new(tables, cx)?)
    } else {
        Box::new(CounterReader::new(tables)?)
    })
}

/// The leaf frame of a sample's stack as written: display name, module.
pub(super) type Leaf = (Option<ByteArray>, Option<ByteArray>);

/// A process's samples in row-id ranges, through strobe-db's one sample
/// reader, with the leaf frame of each stack resolved once and kept from
/// one range to the next.
pub(super) struct SampleReader {
    pub(super) scan: SampleScan,
    pub(super) kinds: [ByteArray; 3],
    pub(super) leaves: IdMap<i64, Leaf>,
    pub(super) modules: HashMap<String, ByteArray>,
}

/// Most leaf frames cached per process.
pub(super) const LEAF_CACHE: usize = 1 << 20;

/// The kinds in [`SampleReader::kinds`] order.
pub(super) const KINDS: [SampleKind; 3] = [SampleKind::Cpu, SampleKind::Wall, SampleKind::OffCpu];

impl SampleReader {
    pub(super) fn new(t: &ProcessTables, cx: ReadCtx) -> Result<SampleReader> {
        Ok(SampleReader {
            scan: t.sample_scan(cx.time_kind)?,
            kinds: KINDS.map(|k| text(k.category())),
            leaves: IdMap::default(),
            modules: HashMap::new(),
        })
    }
}

/// The leaf frame's (display name, module) of call site `id`.
pub(super) fn leaf(
    t: &ProcessTables,
    id: i64,
    modules: &mut HashMap<String, ByteArray>,
) -> Result<Leaf> {
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
                if leaves.len() >= LEAF_CACHE {
                    leaves.clear();
                }
                Some(&*match leaves.entry(s.stack_id) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(v) => v.insert(leaf(t, s.stack_id, modules)?),
                })
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
pub(super) struct CounterReader {
    pub(super) scan: CounterScan,
    pub(super) names: IdMap<i64, (ByteArray, Option<ByteArray>)>,
}

impl CounterReader {
    pub(super) fn new(t: &ProcessTables) -> Result<CounterReader> {
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

/// A large table split into chunks of consecutive row ids, read by
/// `readers` threads in turn (reader `j` reads chunks `j`, `j + readers`,
/// …), so that reading, the slow side, uses several cores while the file
/// keeps the storage order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Chunks {
    /// The first chunk's first row id.
    pub(super) first: i64,
    /// Row ids per chunk (at most a batch of rows).
    pub(super) size: i64,
    pub(super) count: usize,
    pub(super) readers: usize,
}

/// Reads chunks `j`, `j + readers`, … of a large table, one batch each
/// (empty ones included: the encoder counts them); an error is sent in
/// place of a batch.
pub(super) fn chunk_reader(pr: &Proc, t: TableId, cx: ReadCtx, ch: Chunks, link: Link) {
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
