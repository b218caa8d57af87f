//! The samples table: every sample of a profile as typed columns, with
//! its leaf frame (and optionally its whole stack) resolved.
//!
//! Owns turning samples into columns for Python: the whole table from
//! strobe-db's parallel scans (`Profile::scan_sample_parts`), then a
//! stable sort by timestamp; or chunk by chunk from its merge of
//! per-process time-ordered scans (`Profile::samples_by_process_order`).
//! Both give the order (timestamp, process, row id), so chunks
//! concatenate to the whole table. Frames are resolved once per distinct
//! stack by `Profile::resolve_stack` and named by
//! `ResolvedFrame::display_name`, the names `strobe summary` and the
//! exports show. It must never hold more than one copy of a column plus
//! the row order, never create a Python object per row, and never read
//! the database itself.

use std::collections::HashMap;

use pyo3::prelude::*;
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

    /// The batch in the order of `perm` (as it is without one).
    fn permuted(self, perm: Option<&[u32]>) -> Batch {
        Batch {
            ts: permute(self.ts, perm),
            pid: permute(self.pid, perm),
            tid: permute(self.tid, perm),
            weight: permute(self.weight, perm),
            stack: permute(self.stack, perm),
            set: permute(self.set, perm),
            kind: permute(self.kind, perm),
        }
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

/// Every sample of `p` (window applied) in (timestamp, process, row id)
/// order.
pub fn all(p: &Profile, stack: bool) -> PyResult<Table> {
    // Parts come in (process, row range) order: concatenated in that
    // order, a stable sort by timestamp gives (timestamp, process, row id).
    let parts = p
        .scan_sample_parts(&Batch::default, &|b: &mut Batch, set, s| b.push(set, s))
        .map_err(db_err)?;
    let mut b = Batch::default();
    let total: usize = parts.iter().map(Batch::len).sum();
    b.ts.reserve_exact(total);
    for part in parts {
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
    let guids: Vec<String> = p.table_sets().into_iter().map(|(_, g)| g).collect();
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
    let b = b.permuted(perm.as_deref());
    // Freed before the code columns grow (peak memory).
    drop(perm);
    let mut codes = FrameCodes::new(with_stack, b.len());
    codes.add_all(p, guids, &b.set, &b.stack)?;
    Ok(columns(guids, b, codes))
}

/// Leaf function, leaf module and stack codes of the samples, each
/// distinct stack resolved once.
struct FrameCodes {
    with_stack: bool,
    functions: Dict,
    modules: Dict,
    /// Each distinct stack's frame names, by stack code.
    stacks: Vec<Vec<String>>,
    stack_codes: HashMap<Vec<String>, i32>,
    seen: HashMap<StackKey, Codes>,
    f_codes: Vec<i32>,
    m_codes: Vec<i32>,
    s_codes: Vec<i32>,
}

impl FrameCodes {
    /// Room for `n` samples.
    fn new(with_stack: bool, n: usize) -> FrameCodes {
        FrameCodes {
            with_stack,
            functions: Dict::default(),
            modules: Dict::default(),
            stacks: Vec::new(),
            stack_codes: HashMap::new(),
            seen: HashMap::new(),
            f_codes: Vec::with_capacity(n),
            m_codes: Vec::with_capacity(n),
            s_codes: if with_stack {
                Vec::with_capacity(n)
            } else {
                Vec::new()
            },
        }
    }

    /// The codes of every sample: of process `set[k]`, call site
    /// `stack[k]` (-1: none).
    fn add_all(
        &mut self,
        p: &Profile,
        guids: &[String],
        set: &[u32],
        stack: &[i64],
    ) -> PyResult<()> {
        let mut last: Option<(StackKey, Codes)> = None;
        for (&s, &c) in set.iter().zip(stack) {
            let key = (s, c);
            let codes = match last {
                Some((lk, lv)) if lk == key => lv,
                _ => {
                    let v = self.codes_of(p, guids, key)?;
                    last = Some((key, v));
                    v
                }
            };
            self.f_codes.push(codes.0);
            self.m_codes.push(codes.1);
            if self.with_stack {
                self.s_codes.push(codes.2);
            }
        }
        Ok(())
    }

    /// The codes of one stack, resolved the first time it is seen.
    fn codes_of(&mut self, p: &Profile, guids: &[String], key: StackKey) -> PyResult<Codes> {
        if let Some(v) = self.seen.get(&key) {
            return Ok(*v);
        }
        let v = if key.1 < 0 {
            (-1, -1, -1)
        } else {
            let frames = p
                .resolve_stack(&guids[key.0 as usize], key.1)
                .map_err(db_err)?;
            let (f, m) = match frames.first() {
                Some(leaf) => (
                    self.functions.code(&leaf.display_name()),
                    leaf.module.as_deref().map_or(-1, |m| self.modules.code(m)),
                ),
                None => (-1, -1),
            };
            let s = if self.with_stack {
                self.stack_code(&frames)
            } else {
                -1
            };
            (f, m, s)
        };
        self.seen.insert(key, v);
        Ok(v)
    }

    /// The code of a resolved stack: stacks of other pcs in the same
    /// functions read the same, so they share one category.
    fn stack_code(&mut self, frames: &[strobe_db::ResolvedFrame]) -> i32 {
        let names: Vec<String> = frames.iter().map(|f| f.display_name()).collect();
        let next = self.stacks.len() as i32;
        let code = *self.stack_codes.entry(names.clone()).or_insert(next);
        if code == next {
            self.stacks.push(names);
        }
        code
    }
}

/// The table's columns: the batch's, with the process guids and sample
/// kinds as categories, and the frame codes.
fn columns(guids: &[String], b: Batch, codes: FrameCodes) -> Table {
    let Batch {
        ts,
        pid,
        tid,
        weight,
        stack,
        set,
        kind,
    } = b;
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
            codes: codes.f_codes,
            dict: codes.functions,
        },
        Col::Text {
            codes: codes.m_codes,
            dict: codes.modules,
        },
    ];
    if codes.with_stack {
        names.push("stack".into());
        cols.push(Col::Stack {
            codes: codes.s_codes,
            stacks: codes.stacks,
        });
    }
    Table { names, cols }
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
    let guids: Vec<String> = p.table_sets().into_iter().map(|(_, g)| g).collect();
    let mut b = Batch::default();
    let mut sent = false;
    let mut failed = None;
    let mut stopped = false;
    p.samples_by_process_order(&mut |set, s| {
        b.push(set, s);
        if b.len() >= chunk {
            let t = match build(p, &guids, std::mem::take(&mut b), None, with_stack) {
                Ok(t) => t,
                Err(e) => {
                    failed = Some(e);
                    return Ok(false);
                }
            };
            sent = true;
            if !send(t) {
                stopped = true;
                return Ok(false);
            }
        }
        Ok(true)
    })
    .map_err(db_err)?;
    if let Some(e) = failed {
        return Err(e);
    }
    if stopped {
        return Ok(());
    }
    if b.len() > 0 || !sent {
        let t = build(p, &guids, b, None, with_stack)?;
        send(t);
    }
    Ok(())
}
