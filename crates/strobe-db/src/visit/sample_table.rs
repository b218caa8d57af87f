//! The samples as one table in (timestamp, process, row id) order: what
//! the Python package reads as columns.
//!
//! Owns [`Profile::scan_sample_parts`] (every process, each half of a
//! large one, scanned in row order by worker threads on connections of
//! their own, handed back in (process, row range) order: concatenated and
//! stably sorted by timestamp they give the table's order) and
//! [`Profile::samples_by_process_order`] (the same order streamed: each
//! process's samples read in time order by its own query, merged). Both
//! read rows with the one sample reader of [`crate::scan`]. It never
//! resolves stacks and never formats output.

use crate::reader::Profile;
use crate::scan::{open_attached, qerr, scan_sql, split_point, Mapper, ScannedSample, Window};
use crate::{DbError, Result};

/// One process's samples (a row-id range of them) scanned in row order on
/// a connection of its own, each handed to `push` with the process's
/// table set.
fn scan_part<T>(
    file: &str,
    (sc, sf): (&str, &str),
    set: u32,
    (window, rows): (Window, Window),
    time_kind: crate::SampleKind,
    part: &mut T,
    push: &(dyn Fn(&mut T, u32, &ScannedSample) + Sync),
) -> Result<()> {
    let conn = open_attached(file, sc)?;
    let mut mapper = Mapper::new(&conn, sc, sf, time_kind)?;
    let sql = scan_sql(sc, sf, window, rows, false);
    let mut st = conn.prepare(&sql).map_err(qerr(&sql))?;
    let mut q = st.query([]).map_err(qerr(&sql))?;
    while let Some(r) = q.next().map_err(qerr(&sql))? {
        push(part, set, &mapper.map(&conn, r, &sql)?);
    }
    Ok(())
}

impl Profile {
    /// Every sample (window applied) in parts: each part made by `make`,
    /// filled by `push` with one process's samples (or half of a large
    /// one's) in row order, on up to eight worker threads. The parts come
    /// back in (process, row range) order.
    pub fn scan_sample_parts<T: Send>(
        &self,
        make: &(dyn Fn() -> T + Sync),
        push: &(dyn Fn(&mut T, u32, &ScannedSample) + Sync),
    ) -> Result<Vec<T>> {
        let time_kind = self.time_kind()?;
        let window = self.window();
        let sets = self.table_sets();
        let mut work = Vec::new();
        for (k, (ts, _)) in sets.iter().enumerate() {
            let file = self.set_file(k).to_string_lossy().into_owned();
            // A profile read in place (many files) has no per-process
            // tables on its own connection: its processes are read whole.
            let split = if self.is_federated() {
                None
            } else {
                let table = format!("rocpd_sample{}", ts.suffix);
                split_point(self.conn(), &ts.schema, &table)?
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
        let results: Vec<Result<Vec<(usize, T)>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    scope.spawn(|| -> Result<Vec<(usize, T)>> {
                        let mut out = Vec::new();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some((k, file, rows)) = work.get(i) else {
                                return Ok(out);
                            };
                            let ts = &sets[*k].0;
                            let mut part = make();
                            scan_part(
                                file,
                                (&ts.schema, &ts.suffix),
                                *k as u32,
                                (window, *rows),
                                time_kind,
                                &mut part,
                                push,
                            )?;
                            out.push((i, part));
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
        let mut parts: Vec<(usize, T)> = Vec::new();
        for r in results {
            parts.extend(r?);
        }
        parts.sort_by_key(|(i, _)| *i);
        Ok(parts.into_iter().map(|(_, part)| part).collect())
    }

    /// Every sample (window applied) in (timestamp, process, row id)
    /// order, handed to `f` with its process's table set until `f`
    /// returns false. Not for a profile read in place (its processes are
    /// read one at a time, not at once).
    pub fn samples_by_process_order(
        &self,
        f: &mut dyn FnMut(u32, &ScannedSample) -> Result<bool>,
    ) -> Result<()> {
        let conn = self.conn();
        let time_kind = self.time_kind()?;
        let window = self.window();
        let sets = self.table_sets();
        let sqls: Vec<String> = sets
            .iter()
            .map(|(ts, _)| {
                let scan = scan_sql(&ts.schema, &ts.suffix, window, (None, None), false);
                format!("{scan} ORDER BY timestamp, rowid")
            })
            .collect();
        let mut mappers = Vec::new();
        for (ts, _) in &sets {
            mappers.push(Mapper::new(conn, &ts.schema, &ts.suffix, time_kind)?);
        }
        let mut stmts = Vec::new();
        for sql in &sqls {
            stmts.push(conn.prepare(sql).map_err(qerr(sql))?);
        }
        let mut rows = Vec::new();
        for (st, sql) in stmts.iter_mut().zip(&sqls) {
            rows.push(st.query([]).map_err(qerr(sql))?);
        }
        let mut heads: Vec<Option<ScannedSample>> = vec![None; sets.len()];
        let mut heap = std::collections::BinaryHeap::new();
        let mut advance = |k: usize, heads: &mut Vec<Option<ScannedSample>>| -> Result<()> {
            let sql = &sqls[k];
            heads[k] = match rows[k].next().map_err(qerr(sql))? {
                Some(r) => Some(mappers[k].map(conn, r, sql)?),
                None => None,
            };
            Ok(())
        };
        for k in 0..sets.len() {
            advance(k, &mut heads)?;
            if let Some(h) = &heads[k] {
                heap.push(std::cmp::Reverse((h.timestamp, k)));
            }
        }
        while let Some(std::cmp::Reverse((_, k))) = heap.pop() {
            let Some(s) = heads[k] else { continue };
            if !f(k as u32, &s)? {
                return Ok(());
            }
            advance(k, &mut heads)?;
            if let Some(h) = &heads[k] {
                heap.push(std::cmp::Reverse((h.timestamp, k)));
            }
        }
        Ok(())
    }
}
