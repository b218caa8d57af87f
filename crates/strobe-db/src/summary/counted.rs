//! The calls a time filter counted (`strobe_region_stats`).
//!
//! Owns reading every `strobe_region_stats` row of a profile, named, for
//! the region and thread tables, which replace the stored regions' counts
//! and totals with these exact ones. It never reads regions.

use crate::error::Result;
use crate::reader::Profile;

/// One `strobe_region_stats` row, named: the calls a time filter counted
/// on one thread under one name.
pub(super) struct CountedCalls {
    pub(super) guid: String,
    pub(super) pid: Option<i64>,
    pub(super) tid: i64,
    pub(super) name: String,
    pub(super) calls: i64,
    pub(super) total_ns: i64,
    pub(super) self_ns: i64,
    pub(super) kept: i64,
    pub(super) kept_ns: i64,
}

/// Every `strobe_region_stats` row of `p` (none for a run without a time
/// filter, or a file older than the table).
pub(super) fn counted_calls(p: &Profile) -> Result<Vec<CountedCalls>> {
    let mut out = Vec::new();
    for (k, (ts, guid)) in p.table_sets().iter().enumerate() {
        let (sc, sf) = (&ts.schema, &ts.suffix);
        let table = format!("{}{sf}", crate::schema::REGION_STATS_TABLE);
        let sql = format!(
            "SELECT (SELECT MIN(pid) FROM \"{sc}\".\"rocpd_info_process{sf}\"), T.tid, S.string, \
             C.calls, C.total_ns, C.self_ns, C.kept, C.kept_ns FROM \"{sc}\".\"{table}\" C \
             JOIN \"{sc}\".\"rocpd_string{sf}\" S ON S.id = C.name_id \
             JOIN \"{sc}\".\"rocpd_info_thread{sf}\" T ON T.id = C.thread_id"
        );
        let q = crate::scan::qerr(&sql);
        p.set_connection(k, |conn| {
            if !crate::schema::has_table(conn, sc, &table).map_err(&q)? {
                return Ok(());
            }
            let mut st = conn.prepare(&sql).map_err(&q)?;
            let mut rows = st.query([]).map_err(&q)?;
            while let Some(r) = rows.next().map_err(&q)? {
                out.push(CountedCalls {
                    guid: guid.clone(),
                    pid: r.get(0).map_err(&q)?,
                    tid: r.get(1).map_err(&q)?,
                    name: r.get(2).map_err(&q)?,
                    calls: r.get(3).map_err(&q)?,
                    total_ns: r.get(4).map_err(&q)?,
                    self_ns: r.get(5).map_err(&q)?,
                    kept: r.get(6).map_err(&q)?,
                    kept_ns: r.get(7).map_err(&q)?,
                });
            }
            Ok(())
        })?;
    }
    Ok(out)
}
