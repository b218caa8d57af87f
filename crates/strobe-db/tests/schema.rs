//! The schema: every table and view exists even when the profile is empty,
//! with rocpd's names, and rocpd-style queries work on real files.

mod common;

use strobe_db::schema::{DATA_VIEW_NAMES, ROCPD_TABLES, STROBE_TABLES};
use strobe_db::{Profile, Writer};

fn names(conn: &rusqlite::Connection, kind: &str) -> Vec<String> {
    let mut st = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = ?1")
        .unwrap();
    st.query_map([kind], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn empty_profile_has_all_tables_and_views() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.db");
    let w = Writer::create(&path, &common::process(42), common::opts()).unwrap();
    let suffix = w.suffix().to_string();
    let guid = w.guid().to_string();
    w.finish(2_000).unwrap();

    let conn = rusqlite::Connection::open(&path).unwrap();
    let tables = names(&conn, "table");
    for t in ROCPD_TABLES.iter().chain(STROBE_TABLES.iter()) {
        assert!(
            tables.contains(&format!("{t}{suffix}")),
            "missing table {t}{suffix}"
        );
    }
    assert_eq!(ROCPD_TABLES.len(), 20);
    let views = names(&conn, "view");
    for t in ROCPD_TABLES
        .iter()
        .chain(STROBE_TABLES.iter())
        .chain(DATA_VIEW_NAMES.iter())
    {
        assert!(views.contains(&t.to_string()), "missing view {t}");
    }
    // No index is created while writing.
    assert!(names(&conn, "index")
        .iter()
        .all(|n| n.starts_with("sqlite_autoindex")));
    // Metadata.
    let meta: Vec<(String, String)> = conn
        .prepare(&format!(
            "SELECT tag, value FROM rocpd_metadata{suffix} ORDER BY id"
        ))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(meta.contains(&("schema_version".into(), "3".into())));
    assert!(meta.contains(&("uuid".into(), suffix.clone())));
    assert!(meta.contains(&("guid".into(), guid.clone())));
    assert_eq!(suffix, format!("_{}", guid.replace('-', "_")));
    // Every view can be queried on an empty profile.
    for v in DATA_VIEW_NAMES {
        conn.query_row(&format!("SELECT COUNT(*) FROM \"{v}\""), [], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap_or_else(|e| panic!("view {v}: {e}"));
    }
    // Process row: guid default, ids.
    let (pid, g, end): (i64, String, i64) = conn
        .query_row(
            "SELECT pid, guid, \"end\" FROM rocpd_info_process",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((pid, g.as_str(), end), (42, guid.as_str(), 2_000));
    let p: (i64, String) = conn
        .query_row("SELECT pid, hostname FROM processes", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(p, (42, "testhost".to_string()));
}

#[test]
fn rocpd_style_queries_on_views() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    common::write_small(&path, 100);
    let conn = rusqlite::Connection::open(&path).unwrap();
    // regions: OS pid/tid resolved through row ids.
    let rows: Vec<(String, i64, i64, i64, String)> = conn
        .prepare("SELECT name, pid, tid, duration, category FROM regions ORDER BY start")
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 5);
    assert_eq!(rows[0], ("compute".into(), 100, 100, 10, "user".into()));
    assert!(rows.contains(&("io".into(), 100, 101, 100, "user".into())));
    // The stored pid/tid columns hold row ids, not OS ids.
    let raw: (i64, i64) = conn
        .query_row("SELECT pid, tid FROM rocpd_region WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(raw, (1, 1));
    // samples and regions_and_samples.
    let ns: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM samples WHERE name = 'cpu samples' AND category = 'sample'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(ns, 6);
    let nrs: i64 = conn
        .query_row("SELECT COUNT(*) FROM regions_and_samples", [], |r| r.get(0))
        .unwrap();
    assert_eq!(nrs, 11);
    // top: compute total 100 ns over 4 calls, 50% of 200 ns.
    let top: (String, i64, f64, f64) = conn
        .query_row(
            "SELECT name, total_calls, total_duration, percentage FROM top ORDER BY name LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(top.0, "compute");
    assert_eq!(top.1, 4);
    assert!((top.2 - 0.1).abs() < 1e-9);
    assert!((top.3 - 50.0).abs() < 1e-9);
    // region_args and events_args.
    let args: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM region_args WHERE name = 'n' AND value = '7'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(args, 4);
    // threads view.
    let th: Vec<(i64, String)> = conn
        .prepare("SELECT tid, name FROM threads ORDER BY tid")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        th,
        vec![(100, "main".to_string()), (101, "worker".to_string())]
    );
    // strobe views: sample stacks walk the interned tree.
    let depth: i64 = conn
        .query_row("SELECT MAX(depth) FROM strobe_sample_stacks", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(depth, 2);
    let ctr: f64 = conn
        .query_row(
            "SELECT SUM(value) FROM strobe_counters WHERE name = 'task-clock'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(ctr, 3000.0);

    // Same queries through the multi-file reader (TEMP views over ATTACH).
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    let n: i64 = p
        .connection()
        .query_row("SELECT COUNT(*) FROM regions WHERE pid = 100", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(n, 5);
}
