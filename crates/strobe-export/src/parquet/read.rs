//! The reader side of a job: one process's tables into batches.
//!
//! Owns reading a process's tables through strobe-db's
//! [`ProcessTables`] (processes, threads, regions with their arguments,
//! stacks; the large tables through [`super::ranges`]) and pushing them,
//! row by row in storage order, into batches for the job's encoder
//! ([`reader`]); regions are read again, sorted by event, when a file's
//! arguments are not in event order. It never writes SQL, never encodes
//! and never writes a file.

use std::collections::HashMap;

use parquet::data_type::ByteArray;
use strobe_db::process_tables::{ArgJoin, ProcessTables, RegionsRead};
use strobe_db::scan::IdMap;

use super::args::{args_json, MpiArgs};
use super::columns::{text, TableId, T_PROCESSES, T_REGIONS, T_STACKS, T_THREADS};
use super::emit::{Emit, Go, Link, Msg, ReadCtx};
use super::process::Proc;
use super::ranges::range_reader;
use crate::error::Result;

/// A cache of one process's strings (names, categories) as values,
/// cleared when it grows past [`STRING_CACHE`].
#[derive(Default)]
pub(super) struct Strings {
    pub(super) map: IdMap<i64, ByteArray>,
}

/// Most strings cached per process.
pub(super) const STRING_CACHE: usize = 65_536;

impl Strings {
    pub(super) fn get(&mut self, t: &ProcessTables, id: i64) -> Result<ByteArray> {
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

pub(super) fn read_processes(pr: &Proc, e: &mut Emit<'_>) -> Go {
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

pub(super) fn read_threads(t: &ProcessTables, pr: &Proc, e: &mut Emit<'_>) -> Go {
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

/// Streams the regions of one process (window applied) with their
/// arguments, as `join` reads them (see [`RegionsRead`]).
pub(super) fn read_regions(
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
pub(super) struct FrameOut {
    pub(super) function: ByteArray,
    pub(super) module: Option<ByteArray>,
    pub(super) rel_pc: i64,
    pub(super) file: Option<ByteArray>,
    pub(super) line: Option<i64>,
}

/// The process's frames as written, by frame row id (one value per
/// distinct module and file).
pub(super) fn frames(t: &ProcessTables) -> Result<IdMap<i64, FrameOut>> {
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

pub(super) fn read_stacks(t: &ProcessTables, pr: &Proc, e: &mut Emit<'_>) -> Go {
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

/// Reads `tables` of one process and sends them, table after table; an
/// error is sent as [`Msg::Failed`].
pub(super) fn reader(pr: &Proc, tables: &[TableId], cx: ReadCtx, link: Link) {
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
