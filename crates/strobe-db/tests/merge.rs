//! Physical merge of many process databases, and the reader over more than
//! SQLite's 10 attachable files (staged through a merge transparently).

mod common;

use std::path::PathBuf;

use strobe_db::{merge, DbError, MergeProgress, Profile};

fn write_many(dir: &std::path::Path, n: u32) -> Vec<PathBuf> {
    (0..n)
        .map(|k| {
            let p = dir.join(format!("{}.db", 1000 + k));
            common::write_small(&p, 1000 + k);
            p
        })
        .collect()
}

#[test]
fn merge_25_inputs_keeps_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = write_many(dir.path(), 25);
    let out = dir.path().join("merged.db");
    let mut copied = 0u64;
    let mut started = None;
    let stats = merge(&inputs, &out, &mut |p| match p {
        MergeProgress::Started { total_rows, .. } => started = Some(total_rows),
        MergeProgress::Copied { rows, .. } => copied += rows,
        MergeProgress::Finishing => {}
    })
    .unwrap();
    assert_eq!(stats.inputs, 25);
    assert_eq!(stats.processes, 25);
    assert_eq!(copied, stats.rows);
    assert_eq!(started, Some(stats.rows));

    let conn = rusqlite::Connection::open(&out).unwrap();
    let suffixed: i64 = conn
        .query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_region\\_%' ESCAPE '\\'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(suffixed, 25);
    // Unsuffixed views UNION ALL every process; identity kept per process.
    let (n, pids, guids): (i64, i64, i64) = conn
        .query_row(
            "SELECT COUNT(*), COUNT(DISTINCT pid), COUNT(DISTINCT guid) FROM regions",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((n, pids, guids), (125, 25, 25));
    let per: Vec<(i64, i64)> = conn
        .prepare("SELECT pid, COUNT(*) FROM samples GROUP BY pid ORDER BY pid")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(per.len(), 25);
    assert!(per.iter().all(|(_, c)| *c == 6));
    // Indexes exist after a merge.
    let idx: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name LIKE 'idx_region%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(idx, 50);
    drop(conn);
    // The merged file opens through the reader, as does merged + nothing else.
    let p = Profile::open(&[out.to_str().unwrap()]).unwrap();
    assert_eq!(p.process_count(), 25);
    assert_eq!(p.samples().unwrap().count(), 150);

    // Merging the same process twice is refused, naming the file.
    let again = dir.path().join("again.db");
    let err = merge(&[inputs[0].clone(), out.clone()], &again, &mut |_| {}).unwrap_err();
    assert!(matches!(err, DbError::DuplicateProcess { .. }), "{err}");
    assert!(!again.exists());
    // The reader refuses the same overlap (it would count every row twice).
    let err = Profile::open(&[inputs[0].to_str().unwrap(), out.to_str().unwrap()])
        .err()
        .unwrap();
    assert!(matches!(err, DbError::DuplicateProcess { .. }), "{err}");
}

#[test]
fn reader_opens_more_files_than_sqlite_can_attach() {
    let dir = tempfile::tempdir().unwrap();
    write_many(dir.path(), 12);
    // A directory and a glob both expand to the 12 files.
    let p = Profile::open(&[dir.path().to_str().unwrap()]).unwrap();
    assert_eq!(p.files().len(), 12);
    assert_eq!(p.process_count(), 12);
    let regions: Vec<_> = p.regions().unwrap().map(Result::unwrap).collect();
    assert_eq!(regions.len(), 60);
    assert!(regions.windows(2).all(|w| w[0].start <= w[1].start));
    let glob = format!("{}/10*.db", dir.path().display());
    let q = Profile::open(&[glob.as_str()]).unwrap();
    assert_eq!(q.process_count(), 12);
    // Few files attach directly.
    let few = format!("{}/100[0-2].db", dir.path().display());
    let r = Profile::open(&[few.as_str()]).unwrap();
    assert_eq!(r.process_count(), 3);
    assert_eq!(r.samples().unwrap().count(), 18);
}
