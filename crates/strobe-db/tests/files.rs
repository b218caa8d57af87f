//! What a profile leaves on disk: a finished database is one plain file
//! (rollback-journal mode, nothing beside it, mode 0644), readers never
//! create anything beside it and work from a read-only directory, and a
//! file is never shared by two writers.
//!
//! The file-mode check under a restrictive umask lives in `umask.rs` (its
//! own test binary, since the umask is process-wide).

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use strobe_db::{Profile, Writer};

/// Names of the entries of `dir`.
fn entries(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Header bytes 18 and 19: 1 = rollback journal, 2 = WAL.
fn header_mode(path: &Path) -> (u8, u8) {
    let b = std::fs::read(path).unwrap();
    (b[18], b[19])
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Reads everything a converter would read and a few SQL answers.
fn read_all(inputs: &[PathBuf]) -> (usize, usize, i64) {
    let p = Profile::open_files(inputs).unwrap();
    let regions = p.regions().unwrap().count();
    let samples = p.samples().unwrap().count();
    let threads: i64 = p
        .connection()
        .query_row("SELECT count(*) FROM threads", [], |r| r.get(0))
        .unwrap();
    (regions, samples, threads)
}

/// Puts a finished profile back in WAL mode and closes it, as a writer that
/// was dropped by an older strobe (or symbolization of a killed writer's
/// file) leaves it: WAL in the header, no `-wal` file.
fn make_wal_without_log(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let m: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(m, "wal");
    drop(conn);
    assert_eq!(header_mode(path), (2, 2));
}

#[test]
fn finished_database_is_one_plain_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("1.db");
    common::write_small(&db, 1);
    assert_eq!(entries(dir.path()), set(&["1.db"]));
    assert_eq!(header_mode(&db), (1, 1), "rollback-journal mode");
    assert_eq!(mode(&db), 0o644);
    let conn = strobe_db::inputs::open_read_only(&db).unwrap();
    let m: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(m, "delete");
    drop(conn);
    assert_eq!(entries(dir.path()), set(&["1.db"]));
}

#[test]
fn reading_and_merging_leave_nothing_beside_the_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let inputs: Vec<PathBuf> = (1..=3)
        .map(|pid| {
            let p = dir.path().join(format!("{pid}.db"));
            common::write_small(&p, pid);
            p
        })
        .collect();
    let before = entries(dir.path());
    assert_eq!(before, set(&["1.db", "2.db", "3.db"]));

    assert_eq!(read_all(&inputs), (15, 18, 6));
    assert_eq!(entries(dir.path()), before, "after Profile::open");
    strobe_db::inputs::check_file(&inputs[0]).unwrap();
    assert_eq!(entries(dir.path()), before, "after check_file");

    let out = tempfile::tempdir().unwrap();
    let merged = out.path().join("merged.db");
    strobe_db::merge(&inputs, &merged, &mut |_| {}).unwrap();
    assert_eq!(entries(dir.path()), before, "after merge");
    assert_eq!(entries(out.path()), set(&["merged.db"]));
    assert_eq!(header_mode(&merged), (1, 1));
    assert_eq!(mode(&merged), 0o644);
    assert_eq!(read_all(std::slice::from_ref(&merged)), (15, 18, 6));
    assert_eq!(entries(out.path()), set(&["merged.db"]));
}

#[test]
fn reading_more_than_the_attach_limit_leaves_nothing_beside_the_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let n = strobe_db::reader::MAX_ATTACHED as u32 + 2;
    let inputs: Vec<PathBuf> = (1..=n)
        .map(|pid| {
            let p = dir.path().join(format!("{pid}.db"));
            common::write_small(&p, pid);
            p
        })
        .collect();
    let before = entries(dir.path());
    let (regions, _, _) = read_all(&inputs);
    assert_eq!(regions, 5 * n as usize);
    assert_eq!(entries(dir.path()), before);
}

#[test]
fn run_directories_with_latest_links_give_each_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("strobe-output");
    let run = out.join("app-20250101-120000");
    std::fs::create_dir_all(run.join("host")).unwrap();
    common::write_small(&run.join("host/1.db"), 1);
    common::write_small(&run.join("host/2.db"), 2);
    std::os::unix::fs::symlink("app-20250101-120000", out.join("latest")).unwrap();
    // A loop must not hang the search.
    std::os::unix::fs::symlink("..", run.join("host/up")).unwrap();
    let expected = vec![run.join("host/1.db"), run.join("host/2.db")];
    let expand = |input: String| strobe_db::inputs::expand_inputs(&[input]).unwrap();
    assert_eq!(expand(out.display().to_string()), expected);
    assert_eq!(expand(format!("{}/*", out.display())), expected);
    assert_eq!(
        expand(out.join("latest").display().to_string()),
        [out.join("latest/host/1.db"), out.join("latest/host/2.db")]
    );
    let both = strobe_db::inputs::expand_inputs(&[
        run.join("host/1.db").display().to_string(),
        out.join("latest/host/1.db").display().to_string(),
    ])
    .unwrap();
    assert_eq!(both.len(), 1, "{both:?}");
    assert_eq!(
        Profile::open(&[out.to_str().unwrap()])
            .unwrap()
            .process_count(),
        2
    );
}

#[test]
fn wal_file_without_its_log_is_read_without_creating_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("1.db");
    common::write_small(&db, 1);
    make_wal_without_log(&db);
    assert_eq!(entries(dir.path()), set(&["1.db"]));
    assert_eq!(read_all(std::slice::from_ref(&db)).0, 5);
    assert_eq!(entries(dir.path()), set(&["1.db"]));
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    strobe_db::merge(std::slice::from_ref(&db), &out.join("m.db"), &mut |_| {}).unwrap();
    assert_eq!(entries(dir.path()), set(&["1.db", "out"]));
}

#[test]
fn symbolizing_keeps_the_file_plain() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("1.db");
    common::write_small(&db, 1);
    let frames = strobe_db::symbols::unsymbolized_frames(&db).unwrap();
    assert!(!frames.is_empty());
    let names: Vec<String> = frames.iter().map(|f| format!("f{}", f.rel_pc)).collect();
    let rows: Vec<strobe_db::FrameSymbols<'_>> = frames
        .iter()
        .zip(&names)
        .map(|(f, n)| strobe_db::FrameSymbols {
            frame: f.frame,
            function: Some(n),
            file: None,
            line: None,
        })
        .collect();
    strobe_db::symbols::set_frame_symbols(&db, &frames[0].suffix, &rows).unwrap();
    assert_eq!(entries(dir.path()), set(&["1.db"]));
    assert_eq!(header_mode(&db), (1, 1));
    assert!(strobe_db::symbols::unsymbolized_frames(&db)
        .unwrap()
        .is_empty());
}

#[test]
fn writer_dropped_without_finish_leaves_a_plain_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("1.db");
    let mut w = Writer::create(&db, &common::process(1), common::opts()).unwrap();
    w.intern_string("pending").unwrap();
    assert!(
        entries(dir.path()).contains("1.db-wal"),
        "WAL while writing"
    );
    drop(w);
    assert_eq!(entries(dir.path()), set(&["1.db"]));
    assert_eq!(header_mode(&db), (1, 1));
    let p = Profile::open_files(std::slice::from_ref(&db)).unwrap();
    let n: i64 = p
        .connection()
        .query_row(
            "SELECT count(*) FROM rocpd_string WHERE string = 'pending'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn finish_with_a_reader_open_keeps_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("1.db");
    let mut w = Writer::create(&db, &common::process(1), common::opts()).unwrap();
    w.intern_string("early").unwrap();
    w.flush().unwrap();
    let reader = Profile::open_files(std::slice::from_ref(&db)).unwrap();
    let count = |p: &Profile| -> i64 {
        p.connection()
            .query_row("SELECT count(*) FROM rocpd_string", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&reader), 1);
    w.intern_string("late").unwrap();
    // The reader holds the file: finish cannot leave WAL mode, and says
    // nothing about it; the rows are complete either way.
    w.finish(10).unwrap();
    assert_eq!(count(&reader), 2);
    drop(reader);
    assert_eq!(header_mode(&db), (2, 2));
    // A read-only reader cannot remove the WAL files it finds, nor needs to.
    assert_eq!(entries(dir.path()), set(&["1.db", "1.db-shm", "1.db-wal"]));
    assert_eq!(read_all(std::slice::from_ref(&db)).2, 0);
    let p = Profile::open_files(std::slice::from_ref(&db)).unwrap();
    assert_eq!(count(&p), 2);
    drop(p);
    // Symbolization (a read-write connection) folds them back in.
    strobe_db::symbols::unsymbolized_frames(&db).unwrap();
    assert_eq!(entries(dir.path()), set(&["1.db"]));
    assert_eq!(read_all(std::slice::from_ref(&db)).2, 0);
    assert_eq!(entries(dir.path()), set(&["1.db"]));
}

#[test]
fn finish_waits_for_a_reader_that_closes_soon() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("1.db");
    let mut w = Writer::create(&db, &common::process(1), common::opts()).unwrap();
    w.intern_string("early").unwrap();
    w.flush().unwrap();
    let reader = Profile::open_files(std::slice::from_ref(&db)).unwrap();
    let closer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        drop(reader);
    });
    w.finish(10).unwrap();
    closer.join().unwrap();
    assert_eq!(header_mode(&db), (1, 1));
    assert_eq!(entries(dir.path()), set(&["1.db"]));
}

#[test]
fn create_refuses_anything_already_there() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.db");
    std::fs::write(&file, b"not mine").unwrap();
    let e = Writer::create(&file, &common::process(1), common::opts())
        .err()
        .unwrap();
    assert!(e.to_string().contains("never overwritten"), "{e}");
    assert!(
        matches!(&e, strobe_db::DbError::Io { error, .. } if error.kind() == std::io::ErrorKind::AlreadyExists)
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"not mine", "left untouched");

    let link = dir.path().join("dangling.db");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
    assert!(Writer::create(&link, &common::process(1), common::opts()).is_err());
    assert!(!dir.path().join("nowhere").exists());
    assert_eq!(entries(dir.path()), set(&["x.db", "dangling.db"]));
}

#[test]
fn create_unique_takes_the_next_free_name() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("7.db");
    let mut paths = Vec::new();
    for _ in 0..3 {
        let w = Writer::create_unique(&base, &common::process(7), common::opts()).unwrap();
        paths.push(w.path().to_path_buf());
        w.finish(1).unwrap();
    }
    assert_eq!(
        paths,
        ["7.db", "7.1.db", "7.2.db"].map(|n| dir.path().join(n))
    );
    assert_eq!(entries(dir.path()), set(&["7.db", "7.1.db", "7.2.db"]));
}

#[test]
fn concurrent_create_unique_never_shares_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("9.db");
    let barrier = std::sync::Barrier::new(8);
    let paths: BTreeSet<PathBuf> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|k| {
                let (base, barrier) = (&base, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let w = Writer::create_unique(base, &common::process(100 + k), common::opts())
                        .unwrap();
                    let p = w.path().to_path_buf();
                    w.finish(1).unwrap();
                    p
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(paths.len(), 8, "{paths:?}");
    for p in &paths {
        strobe_db::inputs::check_file(p).unwrap();
    }
}

/// A read-only bind mount of a directory, unmounted when dropped.
struct ReadOnlyMount(PathBuf);

impl ReadOnlyMount {
    /// Mounts `src` read-only at `dst`, or says why it cannot.
    fn new(src: &Path, dst: &Path) -> Result<ReadOnlyMount, String> {
        let run = |args: &[&str]| -> Result<(), String> {
            let o = Command::new("mount")
                .args(args)
                .output()
                .map_err(|e| format!("cannot run mount: {e}"))?;
            if o.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "mount {args:?}: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ))
            }
        };
        let (s, d) = (src.to_str().unwrap(), dst.to_str().unwrap());
        run(&["--bind", s, d])?;
        let m = ReadOnlyMount(dst.to_path_buf());
        run(&["-o", "remount,ro,bind", d])?;
        // Root ignores permission bits, not a read-only mount: check it is one.
        match std::fs::write(dst.join("probe"), b"x") {
            Err(e) if e.raw_os_error() == Some(libc::EROFS) => Ok(m),
            other => Err(format!("the mount is not read-only ({other:?})")),
        }
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn finished_profiles_are_read_from_a_read_only_directory() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let ro = dir.path().join("ro");
    std::fs::create_dir(&src).unwrap();
    std::fs::create_dir(&ro).unwrap();
    for pid in 1..=2 {
        common::write_small(&src.join(format!("{pid}.db")), pid);
    }
    // A WAL-mode file without its -wal (closed without finish by an older
    // writer) must read there too.
    common::write_small(&src.join("3.db"), 3);
    make_wal_without_log(&src.join("3.db"));
    // A running writer's file copied without its -shm: SQLite must create
    // one, which a read-only directory forbids; the error says so.
    let live = dir.path().join("live");
    std::fs::create_dir(&live).unwrap();
    let mut w = Writer::create(live.join("4.db"), &common::process(4), common::opts()).unwrap();
    w.intern_string("x").unwrap();
    w.flush().unwrap();
    for f in ["4.db", "4.db-wal"] {
        std::fs::copy(live.join(f), src.join(f)).unwrap();
    }
    w.finish(1).unwrap();
    let before = entries(&src);

    let _mount = match ReadOnlyMount::new(&src, &ro) {
        Ok(m) => m,
        Err(why) => {
            eprintln!("skipped: cannot make a read-only directory here: {why}");
            return;
        }
    };
    let inputs: Vec<PathBuf> = (1..=3).map(|pid| ro.join(format!("{pid}.db"))).collect();
    assert_eq!(read_all(&inputs), (15, 18, 6));
    let p = Profile::open(&[format!("{}/[123].db", ro.display())]).unwrap();
    assert_eq!(p.process_count(), 3);
    drop(p);
    let merged = dir.path().join("merged.db");
    strobe_db::merge(&inputs, &merged, &mut |_| {}).unwrap();
    assert_eq!(read_all(&[merged]).0, 15);
    assert!(strobe_db::symbols::unsymbolized_frames(&inputs[0]).is_ok());
    let e = Profile::open(&[ro.join("4.db").to_str().unwrap()])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("WAL mode") && e.contains("4.db-shm") && e.contains("writable"),
        "{e}"
    );
    assert_eq!(entries(&src), before);
}
