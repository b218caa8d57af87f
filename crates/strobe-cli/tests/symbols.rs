//! Post-run symbolization from separate debug files named by a module's
//! `.gnu_debuglink`: a program whose symbol table was moved into such a
//! file (`tests/programs/debuglink_work.c`) runs under `strobe sample`,
//! with the debug file where gdb looks, and with a debug file whose CRC
//! does not match (refused).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use strobe_db::Profile;

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
