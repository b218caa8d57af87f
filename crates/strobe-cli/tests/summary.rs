//! `strobe summary` as a new user first reads it, on real runs of the
//! programs in tests/programs: a run without regions opens with the
//! tables that have data and says once, after them, that it recorded no
//! regions (`--report regions` says so in place of the table; CSV keeps
//! its empty block); the thread table gives region time and lifetime in
//! milliseconds like the sampled time beside them (CSV keeps whole
//! nanoseconds); the main thread has a name: the kernel's, recorded in
//! the database, or, for a database without one, its program's (also
//! when many databases are read in place).

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use common::{cc, databases, programs_dir, repo, run_bounded, stderr, strobe_command, text};

const HUNG: Duration = Duration::from_secs(120);

/// The program's file name: longer than the 15 bytes the kernel keeps of
/// a thread's name, so the recorded name (cut) and the program's (whole)
/// differ.
const PROGRAM: &str = "summary_spin_program";

/// What the kernel calls the program's main thread.
const COMM: &str = "summary_spin_pr";

/// A directory of this test binary's own under the target directory.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("summary-{}", std::process::id()))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// tests/programs/`source`.c built as `dir/exe`.
fn build(dir: &Path, source: &str, exe: &str) -> PathBuf {
    let out = dir.join(exe);
    cc(&[
        "-O2".into(),
        "-g".into(),
        "-o".into(),
        out.display().to_string(),
        programs_dir()
            .join(format!("{source}.c"))
            .display()
            .to_string(),
        format!("-I{}", repo().join("include").display()),
        "-lpthread".into(),
    ]);
    out
}

/// `strobe sample -q` of `program args` into `out`; its one database.
fn sample(out: &Path, program: &Path, args: &[&str]) -> PathBuf {
    let mut cmd = strobe_command();
    cmd.args(["sample", "-q", "--output-dir"])
        .arg(out)
        .arg("--")
        .arg(program)
        .args(args);
    let run = run_bounded(cmd, HUNG);
    assert!(run.status.success(), "strobe sample: {}", stderr(&run));
    let dbs = databases(out);
    assert_eq!(dbs.len(), 1, "{dbs:?}");
    dbs[0].clone()
}

/// The database of one run of `spin 0.3` (one thread, no region), made
/// once for every test here.
fn spin_run() -> &'static Path {
    static RUN: OnceLock<PathBuf> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = scratch("spin");
        let exe = build(&dir, "spin", PROGRAM);
        sample(&dir.join("out"), &exe, &["0.3"])
    })
}

/// `strobe summary -i db args`'s stdout.
fn summary(db: &Path, args: &[&str]) -> String {
    let mut cmd = strobe_command();
    cmd.arg("summary").arg("-i").arg(db).args(args);
    let out = run_bounded(cmd, HUNG);
    assert!(out.status.success(), "strobe summary: {}", stderr(&out));
    text(&out.stdout)
}

/// The rows of the table titled `title` in a summary, each cell trimmed,
/// the header first.
fn table(summary: &str, title: &str) -> Vec<Vec<String>> {
    let mut lines = summary.lines().skip_while(|l| !l.starts_with(title));
    assert!(lines.next().is_some(), "no table {title} in:\n{summary}");
    lines
        .take_while(|l| !l.is_empty())
        .filter(|l| l.contains('┆'))
        .map(|l| {
            l.trim_matches('│')
                .split('┆')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// The cell of `row` in the column headed `column`.
fn cell<'a>(rows: &'a [Vec<String>], row: &'a [String], column: &str) -> &'a str {
    let k = rows[0]
        .iter()
        .position(|c| c == column)
        .unwrap_or_else(|| panic!("no column {column}: {:?}", rows[0]));
    &row[k]
}

/// The main thread's row (TID = PID) of the thread table.
fn main_thread(rows: &[Vec<String>]) -> Vec<String> {
    rows[1..]
        .iter()
        .find(|r| cell(rows, r, "TID") == cell(rows, r, "PID"))
        .unwrap_or_else(|| panic!("no main thread: {rows:?}"))
        .clone()
}

#[test]
fn a_run_without_regions_opens_with_its_data() {
    let db = spin_run();
    let all = summary(db, &[]);
    assert!(
        all.starts_with("Sampled functions"),
        "the first table has rows:\n{all}"
    );
    assert!(
        !all.contains("Regions:") && !all.contains("(none)"),
        "no empty regions section:\n{all}"
    );
    let said: Vec<&str> = all
        .lines()
        .filter(|l| l.starts_with("No regions recorded"))
        .collect();
    assert_eq!(said.len(), 1, "said once:\n{all}");
    let threads_at = all.find("Threads:").expect("a thread table");
    assert!(
        all.find(said[0]).unwrap() > threads_at,
        "after the tables:\n{all}"
    );
    // Asked for by name: said in place of the table.
    let regions = summary(db, &["--report", "regions"]);
    assert!(
        regions.starts_with("No regions recorded ("),
        "--report regions:\n{regions}"
    );
    // CSV keeps its block, for scripts.
    let csv = summary(db, &["--report", "regions", "--format", "csv"]);
    assert!(
        csv.starts_with("# regions\nTime (%),Total Time (ns),Instances,"),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 2, "{csv}");
}

#[test]
fn a_run_with_regions_opens_with_them() {
    let dir = scratch("regions");
    let exe = build(&dir, "regions", "regions");
    let db = sample(&dir.join("out"), &exe, &[]);
    let all = summary(&db, &[]);
    assert!(all.starts_with("Regions:"), "{all}");
    assert!(!all.contains("No regions recorded"), "{all}");
    let rows = table(&all, "Regions:");
    assert!(
        rows[1..].iter().any(|r| cell(&rows, r, "Name") == "outer"),
        "{rows:?}"
    );
}

#[test]
fn thread_times_are_in_milliseconds_like_the_sampled_time() {
    let db = spin_run();
    let all = summary(db, &[]);
    let rows = table(&all, "Threads:");
    for unit in ["Sampled (ms)", "Region Time (ms)", "Lifetime (ms)"] {
        assert!(rows[0].iter().any(|c| c == unit), "{unit}: {:?}", rows[0]);
    }
    assert!(
        !rows[0].iter().any(|c| c.ends_with("(ns)")),
        "{:?}",
        rows[0]
    );
    let main = main_thread(&rows);
    // `spin 0.3` lives 0.3 s and a little more.
    let lifetime = cell(&rows, &main, "Lifetime (ms)");
    let (whole, decimals) = lifetime
        .split_once('.')
        .unwrap_or_else(|| panic!("one decimal: {lifetime}"));
    assert_eq!(decimals.len(), 1, "one decimal: {lifetime}");
    let ms: f64 = lifetime.parse().unwrap();
    assert!(
        (290.0..20_000.0).contains(&ms),
        "lifetime {lifetime} ms (whole part {whole})"
    );
    assert_eq!(cell(&rows, &main, "Region Time (ms)"), "0.0");
    // CSV: whole nanoseconds, as scripts read them.
    let csv = common::summary_csv(db, "threads");
    let main = csv
        .iter()
        .find(|r| r["TID"] == r["PID"])
        .expect("the main thread");
    let ns: i64 = main["Lifetime (ns)"].parse().unwrap();
    assert!((290_000_000..20_000_000_000).contains(&ns), "{main:?}");
    assert_eq!(main["Region Time (ns)"], "0", "{main:?}");
    assert!((ns as f64 / 1e6 - ms).abs() < 0.051, "{ns} ns vs {ms} ms");
}

#[test]
fn the_main_thread_has_its_name() {
    let db = spin_run();
    // In the database: the kernel's name, cut to 15 bytes.
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let name: Option<String> = conn
        .query_row("SELECT name FROM threads WHERE tid = pid", [], |r| r.get(0))
        .unwrap();
    assert_eq!(name.as_deref(), Some(COMM));
    drop(conn);
    let rows = table(&summary(db, &["--report", "threads"]), "Threads:");
    assert_eq!(cell(&rows, &main_thread(&rows), "Name"), COMM, "{rows:?}");

    // A database without it (written before strobe recorded it): the
    // program's name, whole.
    let dir = scratch("unnamed");
    let copy = dir.join("unnamed.db");
    std::fs::copy(db, &copy).unwrap();
    forget_thread_names(&copy);
    let rows = table(&summary(&copy, &["--report", "threads"]), "Threads:");
    assert_eq!(
        cell(&rows, &main_thread(&rows), "Name"),
        PROGRAM,
        "{rows:?}"
    );
}

/// Removes every thread name from database `db`, as databases written
/// before strobe recorded main threads' names are.
fn forget_thread_names(db: &Path) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let table_name: String = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' \
             AND name LIKE 'rocpd_info_thread%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute(&format!("UPDATE \"{table_name}\" SET name = NULL"), [])
        .unwrap();
}

#[test]
fn main_threads_are_named_when_many_databases_are_read_in_place() {
    // 12 forked children, a database each: more than strobe attaches, so
    // the summary reads them in place, one process at a time.
    let dir = scratch("children");
    let exe = build(&dir, "fork_children", "fork_children");
    let out = dir.join("out");
    let mut cmd = strobe_command();
    cmd.args(["sample", "-q", "--output-dir"])
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .arg("12");
    let run = run_bounded(cmd, HUNG);
    assert!(run.status.success(), "strobe sample: {}", stderr(&run));
    let dbs = databases(&out);
    assert_eq!(dbs.len(), 12, "{dbs:?}");
    let names = |what: &str| {
        let rows = common::summary_csv(&out.join("latest"), "threads");
        assert_eq!(rows.len(), 12, "{what}: {rows:?}");
        for row in &rows {
            assert_eq!(row["TID"], row["PID"], "{what}: {row:?}");
            assert_eq!(row["Name"], "fork_children", "{what}: {row:?}");
        }
    };
    names("recorded");
    for db in &dbs {
        forget_thread_names(db);
    }
    names("from the program");
}
