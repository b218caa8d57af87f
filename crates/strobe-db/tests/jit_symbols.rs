//! The optional JIT symbol table (`strobe_jit_symbol`): created with every
//! new profile, written and read by the symbolization storage, kept by a
//! merge, and absent from files written before it without making them
//! unreadable.

mod common;

use std::path::Path;

use strobe_db::symbols::{jit_symbols, store_jit_symbols, JitSymbol};
use strobe_db::{merge, Profile};

fn sym(start: u64, size: u64, name: &str) -> JitSymbol {
    JitSymbol {
        start,
        size,
        name: name.into(),
    }
}

fn suffix_of(path: &Path) -> String {
    let conn = rusqlite::Connection::open(path).unwrap();
    let meta: String = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd\\_metadata\\_%' ESCAPE '\\'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    meta["rocpd_metadata".len()..].to_string()
}

/// Makes `path` look like a file written before the table existed.
fn drop_jit_table(path: &Path) {
    let s = suffix_of(path);
    rusqlite::Connection::open(path)
        .unwrap()
        .execute_batch(&format!(
            "DROP VIEW strobe_jit_symbol; DROP TABLE \"strobe_jit_symbol{s}\";"
        ))
        .unwrap();
}

fn view_rows(profile: &Profile) -> Vec<(i64, i64, String)> {
    let mut st = profile
        .connection()
        .prepare("SELECT start, size, name FROM strobe_jit_symbol ORDER BY start")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn jit_symbols_are_stored_once_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("1.db");
    common::write_small(&db, 1);
    let s = suffix_of(&db);
    assert_eq!(jit_symbols(&db, &s).unwrap(), []);
    let entries = [
        sym(0x7f00_0000_1000, 0x40, "jitted"),
        sym(u64::MAX - 15, 16, "top"),
    ];
    store_jit_symbols(&db, &s, &entries).unwrap();
    // Storing the same entries again (a second symbolization) adds none.
    store_jit_symbols(&db, &s, &entries[..1]).unwrap();
    assert_eq!(jit_symbols(&db, &s).unwrap(), entries);
    // The unsuffixed view of a file, and of a reader over it.
    let p = Profile::open(&[db.display().to_string()]).unwrap();
    assert_eq!(view_rows(&p).len(), 2);
    let guid: String = p
        .connection()
        .query_row("SELECT DISTINCT guid FROM strobe_jit_symbol", [], |r| {
            r.get(0)
        })
        .unwrap();
    let process_guid: String = p
        .connection()
        .query_row("SELECT guid FROM rocpd_info_process", [], |r| r.get(0))
        .unwrap();
    assert_eq!(guid, process_guid);
}

#[test]
fn files_without_the_table_are_read_merged_and_given_it_when_stored_to() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("1.db");
    let new = dir.path().join("2.db");
    common::write_small(&old, 1);
    common::write_small(&new, 2);
    drop_jit_table(&old);
    store_jit_symbols(&new, &suffix_of(&new), &[sym(0x1000, 0x10, "f")]).unwrap();

    // Read alone and together: the view exists, with the rows there are.
    let alone = Profile::open(&[old.display().to_string()]).unwrap();
    assert_eq!(view_rows(&alone), []);
    assert_eq!(jit_symbols(&old, &suffix_of(&old)).unwrap(), []);
    let both = Profile::open(&[old.display().to_string(), new.display().to_string()]).unwrap();
    assert_eq!(view_rows(&both), [(0x1000, 0x10, "f".to_string())]);

    // Merged: the table of the file that has one is copied.
    let merged = dir.path().join("merged.db");
    merge(&[old.clone(), new.clone()], &merged, &mut |_| {}).unwrap();
    let m = Profile::open(&[merged.display().to_string()]).unwrap();
    assert_eq!(view_rows(&m), [(0x1000, 0x10, "f".to_string())]);

    // Storing into the old file creates its table.
    store_jit_symbols(&old, &suffix_of(&old), &[sym(0x2000, 0x20, "g")]).unwrap();
    assert_eq!(
        jit_symbols(&old, &suffix_of(&old)).unwrap(),
        [sym(0x2000, 0x20, "g")]
    );
}
