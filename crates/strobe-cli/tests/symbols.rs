//! Post-run symbolization from separate debug files named by a module's
//! `.gnu_debuglink`: a program whose symbol table was moved into such a
//! file (`tests/programs/debuglink_work.c`) runs under `strobe sample`,
//! with the debug file where gdb looks, and with a debug file whose CRC
//! does not match (refused). And `strobe symbolize` on databases written
//! here: frames recorded in no module placed in the module covering them,
//! JIT code named from the process's perf map, then from the entries kept
//! in the database once the map is gone.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use strobe_db::{ProcessInfo, Profile, SampleMeta, StackFrame, ThreadInfo, Writer, WriterOptions};

// The runs here take CPU time: one at a time (`one_at_a_time`).
use common::{databases, one_at_a_time, programs_dir, strobe_command};

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().expect(cmd);
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `debuglink_work` built with `-g`, its symbol table and debug info
/// moved into `debuglink_work.debug` and the binary stripped and given a
/// `.gnu_debuglink` naming that file; both in a fresh directory. Returns
/// (program, debug file).
fn stripped_program(dir: &Path) -> (PathBuf, PathBuf) {
    let src = programs_dir().join("debuglink_work.c");
    let prog = dir.join("debuglink_work");
    let debug = dir.join("debuglink_work.debug");
    let (p, d) = (prog.to_str().unwrap(), debug.to_str().unwrap());
    run("cc", &["-O2", "-g", "-o", p, src.to_str().unwrap()]);
    run("objcopy", &["--only-keep-debug", p, d]);
    run("strip", &["--strip-debug", "--strip-unneeded", p]);
    // objcopy records the file name and the CRC of the file it is given.
    run("objcopy", &[&format!("--add-gnu-debuglink={d}"), p]);
    // Only the debug file names the functions now.
    let nm = Command::new("nm").arg(p).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&nm.stdout).contains("linked_inner"),
        "the stripped program still names its functions"
    );
    (prog, debug)
}

/// Runs `program` under `strobe sample -q` with output in `out`; returns
/// the display names of every sampled frame of its one database.
fn sampled_frame_names(out: &Path, program: &Path) -> Vec<String> {
    let o = strobe_command()
        .args(["sample", "-q", "--output-dir", out.to_str().unwrap(), "--"])
        .arg(program)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let dbs = databases(out);
    assert_eq!(dbs.len(), 1, "{dbs:?}");
    let p = Profile::open(&[dbs[0].display().to_string()]).unwrap();
    let samples: Vec<_> = p.samples().unwrap().map(Result::unwrap).collect();
    assert!(samples.len() >= 10, "only {} samples", samples.len());
    samples
        .iter()
        .flat_map(|s| s.frames.iter().map(|f| f.display_name()))
        .collect()
}

/// The distinct names, for messages.
fn distinct(names: &[String]) -> std::collections::BTreeSet<&str> {
    names.iter().map(String::as_str).collect()
}

/// Both functions are named (gcc may add a clone suffix such as
/// `.constprop.0`), and (nearly) every frame of the program is.
fn assert_named(names: &[String], layout: &str) {
    for f in ["linked_inner", "linked_outer"] {
        assert!(
            names
                .iter()
                .any(|n| n == f || n.starts_with(&format!("{f}."))),
            "{layout}: {f} not named: {:?}",
            distinct(names)
        );
    }
    let unnamed = names
        .iter()
        .filter(|n| n.starts_with("debuglink_work+"))
        .count();
    assert!(
        unnamed * 10 <= names.len(),
        "{layout}: {unnamed} of {} frames unnamed: {:?}",
        names.len(),
        distinct(names)
    );
}

#[test]
fn functions_are_named_from_a_debug_file_found_by_gnu_debuglink() {
    let _turn = one_at_a_time();
    // gdb's places (the global /usr/lib/debug/<dir>/ one is left to the
    // unit tests: a test must not write there): beside the module, and
    // in its `.debug/` subdirectory.
    for layout in ["beside", ".debug"] {
        let dir = tempfile::tempdir().unwrap();
        let (prog, debug) = stripped_program(dir.path());
        if layout == ".debug" {
            let sub = dir.path().join(".debug");
            std::fs::create_dir(&sub).unwrap();
            std::fs::rename(&debug, sub.join("debuglink_work.debug")).unwrap();
        }
        let out = dir.path().join("out");
        assert_named(&sampled_frame_names(&out, &prog), layout);
    }
}

#[test]
fn a_debug_file_with_another_crc_is_refused() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (prog, debug) = stripped_program(dir.path());
    // Still a valid ELF file that names the functions at the right
    // addresses, but not the file the link was made for.
    let mut bytes = std::fs::read(&debug).unwrap();
    bytes.extend_from_slice(b"changed");
    std::fs::write(&debug, bytes).unwrap();
    let names = sampled_frame_names(&dir.path().join("out"), &prog);
    assert!(
        !names.iter().any(|n| n.starts_with("linked_")),
        "named from a debug file with the wrong CRC: {:?}",
        distinct(&names)
    );
    assert!(
        names.iter().any(|n| n.starts_with("debuglink_work+")),
        "{:?}",
        distinct(&names)
    );
}

#[test]
fn a_missing_debug_file_leaves_the_frames_unnamed() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (prog, debug) = stripped_program(dir.path());
    std::fs::remove_file(&debug).unwrap();
    let names = sampled_frame_names(&dir.path().join("out"), &prog);
    assert!(!names.iter().any(|n| n.starts_with("linked_")), "{names:?}");
}

/// Runs `strobe symbolize` on `db`; returns (frames named, frames that
/// needed a name) as it reports them.
fn symbolize(db: &Path) -> (usize, usize) {
    let o = strobe_command()
        .args(["symbolize", "-i", db.to_str().unwrap()])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{report}");
    let counts = report.split_once(": named ").and_then(|(_, rest)| {
        let (named, rest) = rest.split_once(" of ")?;
        let frames = rest.split_whitespace().next()?;
        Some((named.parse().ok()?, frames.parse().ok()?))
    });
    counts.unwrap_or_else(|| panic!("no report: {report}"))
}

// Frames recorded in no module, and JIT code named from perf maps: databases
// written here, named by `strobe symbolize`.

#[test]
fn frames_recorded_in_no_module_are_named_from_the_one_module_covering_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).display().to_string();
    std::fs::write(
        p("m.c"),
        "__attribute__((noinline, used)) int in_module(int x) { return x * 7; }\n\
         int main(void) { return in_module(1); }\n",
    )
    .unwrap();
    run("cc", &["-O1", "-o", &p("m"), &p("m.c")]);
    let nm = Command::new("nm").arg(p("m")).output().unwrap();
    let at = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .find_map(|l| {
            let (a, rest) = l.split_once(' ')?;
            rest.ends_with(" in_module")
                .then(|| u64::from_str_radix(a, 16).unwrap())
        })
        .unwrap();
    let db = dir.path().join("p.db");
    let process = ProcessInfo {
        pid: fake_pid(3),
        ppid: 1,
        init_ns: 1,
        start_ns: 1,
        start_unix_ns: 1,
        command: "m".into(),
        environment: Vec::new(),
    };
    let mut w = Writer::create(&db, &process, WriterOptions::default()).unwrap();
    let module = |w: &mut Writer, path: &str, load_address: u64| {
        w.add_module(&strobe_db::ModuleRow {
            path,
            build_id: None,
            load_address,
            size: 0x10000,
            file_offset: 0,
            load_ns: None,
        })
        .unwrap();
    };
    let (base, other) = (0x5555_0000_0000u64, 0x7f00_0000_0000u64);
    module(&mut w, &p("m"), base);
    // The same module recorded twice (the kernel sampler's first
    // mapping, then the whole): still one module.
    module(&mut w, &p("m"), base);
    // Two different modules over one range: ambiguous.
    module(&mut w, &p("m"), other);
    module(&mut w, "/nonexistent/other.so", other);
    let t = w
        .add_thread(&ThreadInfo {
            tid: 1,
            name: None,
            start_ns: None,
        })
        .unwrap();
    let track = w.add_track(Some(t), "cpu samples").unwrap();
    for pc in [base + at, other + at, 0x1000] {
        let frames = [StackFrame {
            module: None,
            rel_pc: pc,
        }];
        w.append_sample(track, SampleMeta::cpu(2, 1), &frames)
            .unwrap();
    }
    w.finish(3).unwrap();
    symbolize(&db);
    let mut want = vec![
        (0x1000, None),
        (base + at, Some("in_module".to_string())),
        (other + at, None),
    ];
    want.sort();
    assert_eq!(frame_names(&db), want);
}

/// A database of process `pid` whose samples are in no module at
/// `pcs` (absolute), its monotonic start and end at `start_ns` and
/// `end_ns`.
fn jit_profile(path: &Path, pid: u32, pcs: &[u64], start_ns: u64, end_ns: u64) {
    let process = ProcessInfo {
        pid,
        ppid: 1,
        init_ns: start_ns,
        start_ns,
        start_unix_ns: 1,
        command: "jit".into(),
        environment: Vec::new(),
    };
    let mut w = Writer::create(path, &process, WriterOptions::default()).unwrap();
    let t = w
        .add_thread(&ThreadInfo {
            tid: pid,
            name: None,
            start_ns: Some(start_ns),
        })
        .unwrap();
    let track = w.add_track(Some(t), "cpu samples").unwrap();
    for (i, &pc) in pcs.iter().enumerate() {
        let frames = [StackFrame {
            module: None,
            rel_pc: pc,
        }];
        w.append_sample(track, SampleMeta::cpu(start_ns + i as u64, 1), &frames)
            .unwrap();
    }
    w.finish(end_ns).unwrap();
}

fn frame_names(path: &Path) -> Vec<(u64, Option<String>)> {
    let conn = rusqlite_conn(path);
    let mut st = conn
        .prepare("SELECT rel_pc, function FROM strobe_frame ORDER BY rel_pc")
        .unwrap();
    st.query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn rusqlite_conn(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

/// A pid no process can have (above the kernel's 2^22 limit), so that
/// the perf map is this test's own.
fn fake_pid(n: u32) -> u32 {
    4_000_000 + (std::process::id() % 100_000) * 4 + n
}

#[test]
fn jit_frames_are_named_again_after_the_perf_map_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("jit.db");
    let pid = fake_pid(0) + 4_000_000;
    let map = format!("/tmp/perf-{pid}.map");
    let now = strobe_core::clock::now_ns();
    // Two functions, one regenerated in place (the later line wins),
    // an entry covering no frame, and a pc no entry covers.
    std::fs::write(
        &map,
        "7f0000001000 40 old_code\n\
         7f0000001000 40 jitted_loop\n\
         0x7f0000002000 0x10 other fn (with spaces)\n\
         7f0000009000 10 unsampled\n\
         not a line\n",
    )
    .unwrap();
    jit_profile(
        &db,
        pid,
        &[0x7f00_0000_1008, 0x7f00_0000_2004, 0x7f00_0000_3000],
        now - 1_000_000_000,
        now + 1_000_000_000,
    );
    symbolize(&db);
    std::fs::remove_file(&map).unwrap();
    let expected = vec![
        (0x7f00_0000_1008, Some("jitted_loop".to_string())),
        (0x7f00_0000_2004, Some("other fn (with spaces)".to_string())),
        (0x7f00_0000_3000, None),
    ];
    assert_eq!(frame_names(&db), expected);
    // Only the entries that named a frame are kept.
    let conn = rusqlite_conn(&db);
    let mut st = conn
        .prepare("SELECT start, size, name FROM strobe_jit_symbol ORDER BY start")
        .unwrap();
    let kept: Vec<(i64, i64, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        kept,
        [
            (0x7f00_0000_1000, 0x40, "jitted_loop".to_string()),
            (0x7f00_0000_2000, 0x10, "other fn (with spaces)".to_string()),
        ]
    );
    drop(st);
    // Names cleared, map gone: symbolizing again names them from the
    // database; so does symbolizing a copy.
    let table: String = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'strobe\\_frame\\_%' ESCAPE '\\'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute(&format!("UPDATE \"{table}\" SET function = NULL"), [])
        .unwrap();
    drop(conn);
    let copy = dir.path().join("copy.db");
    std::fs::copy(&db, &copy).unwrap();
    for file in [&db, &copy] {
        assert_eq!(
            frame_names(file).iter().filter(|f| f.1.is_some()).count(),
            0
        );
        assert_eq!(symbolize(file), (2, 3));
        assert_eq!(frame_names(file), expected);
    }
    // A merge keeps the table.
    let merged = dir.path().join("merged.db");
    strobe_db::merge(std::slice::from_ref(&db), &merged, &mut |_| {}).unwrap();
    let n: i64 = rusqlite_conn(&merged)
        .query_row("SELECT count(*) FROM strobe_jit_symbol", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2);
}

#[test]
fn a_perf_map_written_outside_the_processs_lifetime_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let now = strobe_core::clock::now_ns();
    let hour = 3_600_000_000_000;
    let an_hour_on = std::time::SystemTime::now() + std::time::Duration::from_secs(3_600);
    // A process that starts an hour from now (the map is an earlier
    // process's), and one that ends now with a map written an hour
    // later (a later process's). Only additions to the monotonic
    // clock: a machine booted a minute ago has no hour to go back.
    for (n, start, end, map_time) in [
        (1, now + hour, now + 2 * hour, None),
        (2, now, now + 1_000_000, Some(an_hour_on)),
    ] {
        let pid = fake_pid(n) + 4_000_000;
        let db = dir.path().join(format!("{n}.db"));
        let map = format!("/tmp/perf-{pid}.map");
        std::fs::write(&map, "1000 100 stale\n").unwrap();
        if let Some(t) = map_time {
            let file = std::fs::File::options().write(true).open(&map).unwrap();
            file.set_modified(t).unwrap();
        }
        jit_profile(&db, pid, &[0x1010], start, end);
        let (named, _) = symbolize(&db);
        std::fs::remove_file(&map).unwrap();
        assert_eq!(named, 0);
        assert_eq!(frame_names(&db), [(0x1010, None)]);
    }
}
