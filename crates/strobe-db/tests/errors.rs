//! Bad inputs give one clear error naming the file, never a panic.

mod common;

use strobe_db::{DbError, Profile};

fn open_err(path: &std::path::Path) -> DbError {
    match Profile::open(&[path.to_str().unwrap()]) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e,
    }
}

#[test]
fn not_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("notes.db");
    std::fs::write(&p, "this is a text file, not a database\n".repeat(10)).unwrap();
    let e = open_err(&p);
    assert!(matches!(e, DbError::NotSqlite { .. }), "{e}");
    assert!(e.to_string().contains("notes.db"));
}

#[test]
fn truncated() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cut.db");
    common::write_small(&p, 5);
    let len = std::fs::metadata(&p).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(len / 2).unwrap();
    let e = open_err(&p);
    assert!(matches!(e, DbError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("cut.db"));
}

#[test]
fn newer_schema_version() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("future.db");
    common::write_small(&p, 5);
    let c = rusqlite::Connection::open(&p).unwrap();
    c.execute(
        "UPDATE rocpd_metadata SET value = '4' WHERE tag = 'schema_version'",
        [],
    )
    .unwrap_err();
    // Views are read-only: update the physical table.
    let suffix: String = c
        .query_row(
            "SELECT value FROM rocpd_metadata WHERE tag = 'uuid'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    c.execute(
        &format!("UPDATE rocpd_metadata{suffix} SET value = '4' WHERE tag = 'schema_version'"),
        [],
    )
    .unwrap();
    drop(c);
    let e = open_err(&p);
    assert!(
        matches!(
            e,
            DbError::NewerSchema {
                found: 4,
                supported: 3,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn missing_table() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("partial.db");
    common::write_small(&p, 5);
    let c = rusqlite::Connection::open(&p).unwrap();
    let suffix: String = c
        .query_row(
            "SELECT value FROM rocpd_metadata WHERE tag = 'uuid'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    c.execute_batch(&format!("DROP TABLE rocpd_info_queue{suffix}"))
        .unwrap();
    drop(c);
    let e = open_err(&p);
    match &e {
        DbError::MissingTable { table, .. } => {
            assert_eq!(table, &format!("rocpd_info_queue{suffix}"))
        }
        other => panic!("{other}"),
    }
}

#[test]
fn plain_sqlite_without_profile_tables_and_missing_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("other.db");
    let c = rusqlite::Connection::open(&p).unwrap();
    c.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    drop(c);
    assert!(matches!(open_err(&p), DbError::NotProfile { .. }));
    assert!(matches!(
        open_err(&dir.path().join("nope.db")),
        DbError::Io { .. }
    ));
    let e = Profile::open(&[format!("{}/*.nothing", dir.path().display())])
        .err()
        .unwrap();
    assert!(matches!(e, DbError::NoInput { .. }), "{e}");
}

#[test]
fn writer_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.db");
    common::write_small(&p, 5);
    let e = strobe_db::Writer::create(&p, &common::process(5), common::opts())
        .err()
        .unwrap();
    assert!(e.to_string().contains("never overwritten"), "{e}");
}

#[test]
fn bad_sql_reports_message_and_query() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.db");
    common::write_small(&p, 5);
    let prof = Profile::open(&[p.to_str().unwrap()]).unwrap();
    let e = prof
        .query_each("SELECT nope FROM regions", &mut |_| {}, &mut |_| Ok(()))
        .unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("no such column: nope") && s.contains("SELECT nope FROM regions"),
        "{s}"
    );
}
