//! A writer process killed with SIGKILL mid-run leaves a database that
//! opens and holds every row committed before its last flush.
//!
//! The test re-executes its own test binary as the child (running the
//! ignored `child_writer` test with an environment variable naming the
//! output), reads the child's "flushed N" reports from its stdout, kills it
//! with SIGKILL, and checks the file.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use strobe_db::{Profile, Region, ThreadInfo, Writer, WriterOptions};

const ENV: &str = "STROBE_DB_TEST_CHILD_OUTPUT";

#[test]
#[ignore = "child process of sigkill_mid_run_keeps_flushed_rows; runs only when re-executed by it"]
fn child_writer() {
    let Ok(path) = std::env::var(ENV) else {
        panic!("{ENV} not set: this test is the child of sigkill_mid_run_keeps_flushed_rows");
    };
    let opts = WriterOptions {
        batch_rows: 1_000_000,
        flush_interval: Duration::from_millis(50),
        ..common::opts()
    };
    let mut w = Writer::create(&path, &common::process(std::process::id()), opts).unwrap();
    let t = w
        .add_thread(&ThreadInfo {
            tid: 1,
            name: Some("main"),
            start_ns: Some(0),
        })
        .unwrap();
    let name = w.intern_string("step").unwrap();
    let out = std::io::stdout();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut k = 0u64;
    while std::time::Instant::now() < deadline {
        w.append_region(&Region {
            thread: t,
            start_ns: k * 10,
            end_ns: k * 10 + 5,
            name,
            category: None,
            stack: None,
            correlation_id: None,
            args: &[],
        })
        .unwrap();
        k += 1;
        if w.maybe_flush().unwrap() {
            let mut o = out.lock();
            writeln!(o, "flushed {k}").unwrap();
            o.flush().unwrap();
        }
        if k.is_multiple_of(64) {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

#[test]
fn sigkill_mid_run_keeps_flushed_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.db");
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--ignored",
            "--exact",
            "child_writer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut last = 0u64;
    let mut reports = 0;
    let mut line = String::new();
    while reports < 6 {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if let Some(n) = line.trim().strip_prefix("flushed ") {
            last = n.parse().unwrap();
            reports += 1;
        }
    }
    assert_eq!(reports, 6, "child stopped reporting flushes");
    // SAFETY: kill(2) on the pid of our own, still-running child.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    assert_eq!(rc, 0);
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert!(last > 0);

    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    let regions: Vec<_> = p.regions().unwrap().map(Result::unwrap).collect();
    assert!(
        regions.len() as u64 >= last,
        "{} rows, {} were flushed",
        regions.len(),
        last
    );
    for (k, r) in regions.iter().enumerate() {
        assert_eq!(
            r.start,
            k as i64 * 10,
            "rows are the first ones written, none missing"
        );
        assert_eq!(r.name, "step");
    }
    // The process never finished: no end time.
    let end: Option<i64> = p
        .connection()
        .query_row("SELECT \"end\" FROM processes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(end, None);
    drop(p);

    // The killed writer left its WAL files; reading adds nothing beside
    // them, and a read-write connection (post-run symbolization) folds them
    // back into the file on close.
    let beside = |dir: &std::path::Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        beside(dir.path()),
        ["killed.db", "killed.db-shm", "killed.db-wal"]
    );
    // With its -shm and -wal present, it reads from a read-only directory.
    let ro = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().to_str().unwrap(), ro.path().to_str().unwrap());
    let mount = |args: &[&str]| {
        Command::new("mount")
            .args(args)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if mount(&["--bind", src, dst]) {
        let ok = mount(&["-o", "remount,ro,bind", dst]);
        let result = ok.then(|| {
            Profile::open(&[ro.path().join("killed.db").to_str().unwrap()])
                .map(|p| p.regions().unwrap().count())
        });
        let _ = Command::new("umount").arg(dst).status();
        match result {
            Some(n) => assert_eq!(n.unwrap(), regions.len()),
            None => eprintln!("skipped the read-only part: cannot remount read-only"),
        }
    } else {
        eprintln!("skipped the read-only part: bind mounts are not permitted here");
    }
    assert_eq!(
        beside(dir.path()),
        ["killed.db", "killed.db-shm", "killed.db-wal"]
    );
    strobe_db::symbols::unsymbolized_frames(&path).unwrap();
    assert_eq!(beside(dir.path()), ["killed.db"]);
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    assert_eq!(p.regions().unwrap().count(), regions.len());
    drop(p);
    assert_eq!(beside(dir.path()), ["killed.db"]);
}
