//! `strobe avail` run as a real subprocess: listing, JSON, sources,
//! config generation and its round trip, and error exits.

mod common;

use std::process::{Command, Output};

use common::clean_command;

fn strobe(args: &[&str], env: &[(&str, &str)]) -> Output {
    clean_command(env!("CARGO_BIN_EXE_strobe"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn json(args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let out = strobe(args, env);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn setting<'a>(doc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    doc["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} missing"))
}

#[test]
fn lists_every_setting_in_the_table() {
    let out = strobe(&["avail"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for def in strobe_core::settings::SETTINGS {
        assert!(text.contains(def.name), "{} missing", def.name);
        assert!(text.contains(&def.env_var()), "{} missing", def.env_var());
        assert!(text.contains(&format!("--{}", def.flag())));
    }
    let out = strobe(
        &["avail", "--settings", "--category", "output", "--describe"],
        &[],
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("output_dir") && !text.contains("sampling_freq"));
    assert!(text.contains("Directory that receives"));
}

#[test]
fn json_shows_effective_values_and_their_sources() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "verbose = 1\nsampling_delay = \"5s\"\n").unwrap();
    let doc = json(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "avail",
            "--json",
            "--sampling-freq",
            "99",
            "--sampling-realtime",
        ],
        &[("STROBE_SAMPLING_DELAY", "7s")],
    );
    assert_eq!(
        doc["settings"].as_array().unwrap().len(),
        strobe_core::settings::SETTINGS.len()
    );
    assert_eq!(doc["config_file"], cfg.to_str().unwrap());
    let check = |name: &str, value: serde_json::Value, source: &str| {
        let s = setting(&doc, name);
        assert_eq!(s["value"], value, "{name}");
        assert_eq!(s["source"], source, "{name}");
    };
    check("sampling_freq", 99.0.into(), "flag");
    check("sampling_realtime", true.into(), "flag");
    check("sampling_delay", "7s".into(), "env");
    check("verbose", 1.into(), "config");
    check("flush_interval", "1s".into(), "default");
    check("sampling_cputime_freq", 99.0.into(), "flag");
    assert_eq!(
        setting(&doc, "sampling_cputime_freq")["inherits"],
        "sampling_freq"
    );
    assert_eq!(setting(&doc, "runtime")["value"], serde_json::Value::Null);
}

#[test]
fn generated_config_round_trips_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("gen.toml");
    let env = [
        (
            "STROBE_TRACE_PERIODS",
            "realtime:10:1:5 process_cputime:10:2:20",
        ),
        ("STROBE_TOOL_LIB", "/a.so:/b.so"),
        ("STROBE_OUTPUT_DIR", "/tmp/profiles"),
    ];
    let out = strobe(
        &[
            "avail",
            "--generate-config",
            cfg.to_str().unwrap(),
            "--sampling-freq",
            "321",
        ],
        &env,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let original = json(&["avail", "--json", "--sampling-freq", "321"], &env);
    let reread = json(&["--config", cfg.to_str().unwrap(), "avail", "--json"], &[]);
    for (a, b) in original["settings"]
        .as_array()
        .unwrap()
        .iter()
        .zip(reread["settings"].as_array().unwrap())
    {
        assert_eq!(a["value"], b["value"], "{}", a["name"]);
    }
    assert_eq!(setting(&reread, "sampling_freq")["source"], "config");

    // Regenerating from the file gives the same file.
    let again = strobe(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "avail",
            "--generate-config",
        ],
        &[],
    );
    assert_eq!(
        String::from_utf8(again.stdout).unwrap(),
        std::fs::read_to_string(&cfg).unwrap()
    );

    // An existing file is not overwritten without --force.
    let out = strobe(&["avail", "--generate-config", cfg.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists; pass --force"));
    let out = strobe(
        &[
            "avail",
            "--generate-config",
            cfg.to_str().unwrap(),
            "--force",
        ],
        &[],
    );
    assert!(out.status.success());
}

#[test]
fn invalid_values_fail_with_every_error_and_a_non_zero_exit() {
    let out = strobe(
        &["avail", "--sampling-depth", "0"],
        &[
            ("STROBE_SAMPLING_FREQ", "fast"),
            ("STROBE_BUFFER_POLICY", "maybe"),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "nothing printed on stdout");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("invalid value 'fast' for environment variable STROBE_SAMPLING_FREQ"),
        "{err}"
    );
    assert!(
        err.contains("invalid value 'maybe' for environment variable STROBE_BUFFER_POLICY"),
        "{err}"
    );
    assert!(
        err.contains("invalid value '0' for flag --sampling-depth: out of range"),
        "{err}"
    );
    assert!(err.contains("3 invalid settings"), "{err}");
    assert!(!err.contains("panicked"));

    let out = strobe(&["avail", "--category", "gpu"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown category 'gpu'"));

    let out = strobe(&["--config", "/nonexistent.toml", "avail"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot read config file /nonexistent.toml")
    );
}

#[test]
fn unknown_strobe_variables_warn_but_do_not_fail() {
    let out = strobe(&["avail", "--json"], &[("STROBE_OUTPUT_DIRR", "/tmp")]);
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("STROBE_OUTPUT_DIRR is not a strobe setting"),
        "{err}"
    );
    assert!(err.contains("did you mean STROBE_OUTPUT_DIR?"), "{err}");
}

#[test]
fn help_and_version() {
    let out = strobe(&["--help"], &[]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Examples:"));
    let out = strobe(&["--version"], &[]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("strobe "));
    let out = strobe(&["avail", "--help"], &[]);
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(
        help.contains("Sampling settings") && help.contains("--sampling-freq <X>"),
        "{help}"
    );
}

#[test]
fn docs_settings_md_is_the_generated_reference() {
    let out = strobe(&["avail", "--markdown"], &[]);
    assert!(out.status.success());
    let generated = String::from_utf8(out.stdout).unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/settings.md");
    let on_disk = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "docs/settings.md is out of date: regenerate it with `cargo run -p strobe-cli -- avail --markdown > docs/settings.md`"
    );
}

#[test]
fn components_are_listed_with_what_they_record() {
    let out = strobe(&["avail", "--components"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "sampling.cputime",
        "sampling.realtime",
        "regions",
        "xpti",
        "threads",
        "modules",
        "process",
        "tools",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    let doc = json(&["avail", "--components", "--json"], &[]);
    assert_eq!(doc.as_array().unwrap().len(), 8);
    assert!(doc[0]["stored_in"]
        .as_str()
        .unwrap()
        .contains("rocpd_sample"));
}

#[test]
fn counters_are_listed_probed_with_the_reason_when_they_cannot_count() {
    let doc = json(&["avail", "--counters", "--json"], &[]);
    let counters = doc["counters"].as_array().unwrap();
    let find = |name: &str| {
        counters
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} listed"))
    };
    // Software events count on any Linux machine.
    for name in [
        "task-clock",
        "page-faults",
        "context-switches",
        "cpu-migrations",
    ] {
        assert_eq!(find(name)["available"], true, "{name}");
    }
    // Hardware ones count where there is a PMU, and say why not elsewhere.
    let cycles = find("cycles");
    if cycles["available"] == false {
        assert!(!cycles["why_not"].as_str().unwrap().is_empty());
    }
    assert!(counters.iter().any(|c| c["kind"] == "rusage"));
    assert!(counters.iter().any(|c| c["kind"] == "proc"));
    let table = strobe(&["avail", "--counters"], &[]);
    let out = String::from_utf8_lossy(&table.stdout);
    assert!(
        out.contains("task-clock") && out.contains("counters can be counted here"),
        "{out}"
    );
}

#[test]
fn metrics_are_listed_with_their_definitions_and_a_user_file_adds_to_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.xml");
    std::fs::write(
        &file,
        "<global>\n  <metric name=twice expr=`task-clock` * 2 ></metric>\n</global>\n",
    )
    .unwrap();
    let doc = json(
        &["avail", "--metrics", "--json"],
        &[("STROBE_METRICS", file.to_str().unwrap())],
    );
    let all = doc.as_array().unwrap();
    assert!(all
        .iter()
        .any(|m| m["name"] == "IPC" && m["definition"] == "instructions / cycles"));
    assert!(all.iter().any(|m| m["name"] == "twice"), "{doc}");
}

#[test]
fn a_listing_piped_into_a_reader_that_stops_early_ends_quietly() {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    // A pipe smaller than the listing, so strobe writes after the reader
    // has gone.
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just created and are owned here.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(fds[1], libc::F_SETPIPE_SZ, 4096) };
    let child = Command::new(env!("CARGO_BIN_EXE_strobe"))
        .args(["avail", "--counters"])
        .stdout(std::process::Stdio::from(write_end))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = std::fs::File::from(read_end);
    let mut first = [0u8; 16];
    reader.read_exact(&mut first).unwrap();
    drop(reader);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.code() != Some(101), "{err}");
}
