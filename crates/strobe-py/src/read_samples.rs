//! The samples table: every sample of a profile as typed columns, with
//! its leaf frame (and optionally its whole stack) resolved.
//!
//! Owns reading `rocpd_sample` fast for Python: the whole table by
//! strobe-db's raw scans (`strobe_db::scan`: each process, each half of a
//! large one, on a reader thread with its own connection, ids mapped by
//! its `Mapper`), then a stable sort by timestamp; or chunk by chunk by a
//! merge of per-process time-ordered scans. Both give the order
//! (timestamp, process, row id), so chunks concatenate to the whole
//! table. Frames are resolved once per distinct stack by
//! `Profile::resolve_stack` and named by `ResolvedFrame::display_name`,
//! the names `strobe summary` and the exports show. It must never hold
//! more than one copy of a column plus the row order, and never create a
//! Python object per row.

use std::collections::HashMap;

use pyo3::prelude::*;
use strobe_db::scan::{open_attached, qerr, scan_sql, split_point, Mapper};
use strobe_db::{DbError, Profile, SampleKind};

use super::cols::{Col, Dict, Table};
use super::db_err;

/// Sample columns as scanned (before frames are resolved).
#[derive(Default)]
struct Batch {
    ts: Vec<i64>,
    pid: Vec<i64>,
    tid: Vec<i64>,
    weight: Vec<i64>,
    stack: Vec<i64>,
    set: Vec<u32>,
    kind: Vec<u8>,
}

impl Batch {
    fn push(&mut self, set: u32, s: &strobe_db::scan::ScannedSample) {
        self.ts.push(s.timestamp);
        self.pid.push(s.pid);
        self.tid.push(s.tid);
        self.weight.push(s.weight_ns as i64);
        self.stack.push(s.stack_id);
        self.set.push(set);
        self.kind.push(s.kind as u8);
    }

    fn len(&self) -> usize {
        self.ts.len()
    }

    fn append(&mut self, mut o: Batch) {
        self.ts.append(&mut o.ts);
        self.pid.append(&mut o.pid);
        self.tid.append(&mut o.tid);
        self.weight.append(&mut o.weight);
        self.stack.append(&mut o.stack);
        self.set.append(&mut o.set);
        self.kind.append(&mut o.kind);
    }
}

/// Scans one process's samples (a row-id range of them) in row order on a
/// connection of its own.
fn scan_part(
    file: &str,
    sc: &str,
    sf: &str,
    set: u32,
    window: strobe_db::scan::Window,
    rows: strobe_db::scan::Window,
    time_kind: SampleKind,
) -> Result<Batch, DbError> {
    let conn = open_attached(file, sc)?;
    let mut mapper = Mapper::new(&conn, sc, sf, time_kind)?;
    let sql = scan_sql(sc, sf, window, rows, false);
    let mut st = conn.prepare(&sql).map_err(qerr(&sql))?;
    let mut q = st.query([]).map_err(qerr(&sql))?;
    let mut b = Batch::default();
    while let Some(r) = q.next().map_err(qerr(&sql))? {
        let s = mapper.map(&conn, r, &sql)?;
        b.push(set, &s);
    }
    Ok(b)
}

/// Every sample of `p` (window applied) in (timestamp, process, row id)
/// order.
pub fn all(p: &Profile, stack: bool) -> PyResult<Table> {
    let time_kind = strobe_db::summary::time_kind(p).map_err(db_err)?;
    let conn = p.connection();
    let window = p.window();
    let sets = p.table_sets();
    let mut work = Vec::new();
    for (k, (ts, _)) in sets.iter().enumerate() {
        let file = p.set_file(k).to_string_lossy().into_owned();
        // A profile read in place (many files) has no per-process tables
        // on its own connection: its processes are read whole.
        let split = if p.is_federated() {
            None
        } else {
            split_point(conn, &ts.schema, &format!("rocpd_sample{}", ts.suffix)).map_err(db_err)?
        };
        match split {
            Some(mid) => {
                work.push((k, file.clone(), (None, Some(mid))));
                work.push((k, file, (Some(mid), None)));
            }
            None => work.push((k, file, (None, None))),
        }
    }
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8)
        .min(work.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Result<Vec<(usize, Batch)>, DbError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| -> Result<Vec<(usize, Batch)>, DbError> {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((k, file, rows)) = work.get(i) else {
                            return Ok(out);
                        };
                        let ts = &sets[*k].0;
                        let b = scan_part(
                            file, &ts.schema, &ts.suffix, *k as u32, window, *rows, time_kind,
                        )?;
                        out.push((i, b));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(DbError::Query {
                        message: "a sample reader thread panicked".into(),
                        sql: String::new(),
                    })
                })
            })
            .collect()
    });
    let mut parts: Vec<(usize, Batch)> = Vec::new();
    for r in results {
        parts.extend(r.map_err(db_err)?);
    }
    // Work items are in (process, row range) order: concatenated in that
    // order, a stable sort by timestamp gives (timestamp, process, row id).
    parts.sort_by_key(|(i, _)| *i);
    let mut b = Batch::default();
    let total: usize = parts.iter().map(|(_, b)| b.len()).sum();
    b.ts.reserve_exact(total);
    for (_, part) in parts {
        if b.len() == 0 {
            b = part;
        } else {
            b.append(part);
        }
    }
    let perm = if b.ts.windows(2).all(|w| w[0] <= w[1]) {
        None
    } else {
        let mut perm: Vec<u32> = (0..b.len() as u32).collect();
        perm.sort_by_key(|&i| b.ts[i as usize]);
        Some(perm)
    };
    let guids: Vec<String> = sets.into_iter().map(|(_, g)| g).collect();
    build(p, &guids, b, perm, stack)
}

/// A stack of a process: (process index, call site id or -1).
type StackKey = (u32, i64);
/// Its leaf function, leaf module and stack codes (-1: none).
type Codes = (i32, i32, i32);

fn permute<T: Copy>(v: Vec<T>, perm: Option<&[u32]>) -> Vec<T> {
    match perm {
        None => v,
        Some(perm) => perm.iter().map(|&i| v[i as usize]).collect(),
    }
}

/// The table of a batch: columns `timestamp, pid, tid, guid, kind,
/// weight_ns, stack_id, function, module` (leaf frame) and `stack` (frame
/// names, leaf first) when asked for.
fn build(
    p: &Profile,
    guids: &[String],
    b: Batch,
    perm: Option<Vec<u32>>,
    with_stack: bool,
) -> PyResult<Table> {
    let Batch {
        ts,
        pid,
        tid,
        weight,
        stack,
        set,
        kind,
    } = b;
    let order = perm.as_deref();
    let ts = permute(ts, order);
    let pid = permute(pid, order);
    let tid = permute(tid, order);
    let weight = permute(weight, order);
    let stack = permute(stack, order);
    let set = permute(set, order);
    let kind = permute(kind, order);
    // Freed before the code columns grow (peak memory).
    drop(perm);
    let n = ts.len();
    // Leaf function and module, and stack code, per distinct stack.
    let mut functions = Dict::default();
    let mut modules = Dict::default();
    let mut stacks: Vec<Vec<String>> = Vec::new();
    let mut stack_codes: HashMap<Vec<String>, i32> = HashMap::new();
    let mut seen: HashMap<StackKey, Codes> = HashMap::new();
    let mut f_codes = Vec::with_capacity(n);
    let mut m_codes = Vec::with_capacity(n);
    let mut s_codes = if with_stack {
        Vec::with_capacity(n)
    } else {
        Vec::new()
    };
    let mut last: Option<(StackKey, Codes)> = None;
    for k in 0..n {
        let key = (set[k], stack[k]);
        let codes = match last {
            Some((lk, lv)) if lk == key => lv,
            _ => {
                let v = match seen.get(&key) {
                    Some(v) => *v,
                    None => {
                        let v = if key.1 < 0 {
                            (-1, -1, -1)
                        } else {
                            let frames = p
                                .resolve_stack(&guids[key.0 as usize], key.1)
                                .map_err(db_err)?;
                            let (f, m) = match frames.first() {
                                Some(leaf) => (
                                    functions.code(&leaf.display_name()),
                                    leaf.module.as_deref().map_or(-1, |m| modules.code(m)),
                                ),
                                None => (-1, -1),
                            };
                            let s = if with_stack {
                                // Stacks of other pcs in the same functions
                                // read the same: one category each.
                                let names: Vec<String> =
                                    frames.iter().map(|f| f.display_name()).collect();
                                let next = stacks.len() as i32;
                                let code = *stack_codes.entry(names.clone()).or_insert(next);
                                if code == next {
                                    stacks.push(names);
                                }
                                code
                            } else {
                                -1
                            };
                            (f, m, s)
                        };
                        seen.insert(key, v);
                        v
                    }
                };
                last = Some((key, v));
                v
            }
        };
        f_codes.push(codes.0);
        m_codes.push(codes.1);
        if with_stack {
            s_codes.push(codes.2);
        }
    }
    let mut guid_dict = Dict::default();
    for g in guids {
        guid_dict.code(g);
    }
    let mut kinds = Dict::default();
    for k in [SampleKind::Cpu, SampleKind::Wall, SampleKind::OffCpu] {
        kinds.code(k.category());
    }
    let stack_valid: Vec<bool> = if stack.iter().any(|&s| s < 0) {
        stack.iter().map(|&s| s >= 0).collect()
    } else {
        Vec::new()
    };
    let mut names: Vec<String> = [
        "timestamp",
        "pid",
        "tid",
        "guid",
        "kind",
        "weight_ns",
        "stack_id",
        "function",
        "module",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut cols = vec![
        Col::ints(ts),
        Col::ints(pid),
        Col::ints(tid),
        Col::Text {
            codes: set.into_iter().map(|s| s as i32).collect(),
            dict: guid_dict,
        },
        Col::Text {
            codes: kind.into_iter().map(i32::from).collect(),
            dict: kinds,
        },
        Col::ints(weight),
        Col::Int {
            vals: stack,
            valid: stack_valid,
        },
        Col::Text {
            codes: f_codes,
            dict: functions,
        },
        Col::Text {
            codes: m_codes,
            dict: modules,
        },
    ];
    if with_stack {
        names.push("stack".into());
        cols.push(Col::Stack {
            codes: s_codes,
            stacks,
        });
    }
    Ok(Table { names, cols })
}

/// Streams the samples of `p` in chunks of `chunk` rows, in the order of
/// [`all`]: each process's samples read in time order by its own query,
/// merged. `send` returns false when the reader is gone (then it stops).
pub fn stream(
    p: &Profile,
    with_stack: bool,
    chunk: usize,
    send: &mut dyn FnMut(Table) -> bool,
) -> PyResult<()> {
    if p.is_federated() {
        return Err(db_err(DbError::Query {
            message: format!(
                "streaming the samples of {} databases in time order is not supported (more than {} are read in place, one process at a time): read them whole, open fewer files at once, or merge them per node first (strobe merge --per-node)",
                p.files().len(),
                strobe_db::reader::MAX_ATTACHED
            ),
            sql: String::new(),
        }));
    }
    let time_kind = strobe_db::summary::time_kind(p).map_err(db_err)?;
    let conn = p.connection();
    let window = p.window();
    let sets = p.table_sets();
    let guids: Vec<String> = sets.iter().map(|(_, g)| g.clone()).collect();
    let sqls: Vec<String> = sets
        .iter()
        .map(|(ts, _)| {
            format!(
                "{} ORDER BY timestamp, rowid",
                scan_sql(&ts.schema, &ts.suffix, window, (None, None), false)
            )
        })
        .collect();
    let mut mappers = Vec::new();
    for (ts, _) in &sets {
        mappers.push(Mapper::new(conn, &ts.schema, &ts.suffix, time_kind).map_err(db_err)?);
    }
    let mut stmts = Vec::new();
    for sql in &sqls {
        stmts.push(conn.prepare(sql).map_err(qerr(sql)).map_err(db_err)?);
    }
    let mut rows = Vec::new();
    for (st, sql) in stmts.iter_mut().zip(&sqls) {
        rows.push(st.query([]).map_err(qerr(sql)).map_err(db_err)?);
    }
    let mut heads: Vec<Option<strobe_db::scan::ScannedSample>> = vec![None; sets.len()];
    let mut heap = std::collections::BinaryHeap::new();
    let advance = |k: usize,
                   rows: &mut Vec<rusqlite_rows::Rows<'_>>,
                   mappers: &mut Vec<Mapper>,
                   heads: &mut Vec<Option<strobe_db::scan::ScannedSample>>|
     -> Result<(), DbError> {
        let sql = &sqls[k];
        heads[k] = match rows[k].next().map_err(qerr(sql))? {
            Some(r) => Some(mappers[k].map(conn, r, sql)?),
            None => None,
        };
        Ok(())
    };
    for k in 0..sets.len() {
        advance(k, &mut rows, &mut mappers, &mut heads).map_err(db_err)?;
        if let Some(h) = &heads[k] {
            heap.push(std::cmp::Reverse((h.timestamp, k)));
        }
    }
    let mut b = Batch::default();
    let mut sent = false;
    while let Some(std::cmp::Reverse((_, k))) = heap.pop() {
        let Some(s) = heads[k] else { continue };
        b.push(k as u32, &s);
        advance(k, &mut rows, &mut mappers, &mut heads).map_err(db_err)?;
        if let Some(h) = &heads[k] {
            heap.push(std::cmp::Reverse((h.timestamp, k)));
        }
        if b.len() >= chunk {
            let t = build(p, &guids, std::mem::take(&mut b), None, with_stack)?;
            sent = true;
            if !send(t) {
                return Ok(());
            }
        }
    }
    if b.len() > 0 || !sent {
        let t = build(p, &guids, b, None, with_stack)?;
        send(t);
    }
    Ok(())
}

mod rusqlite_rows {
    pub use strobe_db::rusqlite::Rows;
}
