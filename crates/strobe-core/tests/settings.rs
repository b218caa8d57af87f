//! Settings: precedence, parsing of every type with its error message,
//! config files (including the generated-config round trip), warnings.

use strobe_core::settings::{
    generate_config, Key, Kind, SettingDef, Settings, SettingsError, SettingsLoader, Source, Value,
    SETTINGS,
};
use strobe_core::timewindow::WindowClock;

fn write_config(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strobe.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn every_default_parses_and_every_getter_matches_its_kind() {
    let s = Settings::defaults();
    for def in SETTINGS {
        assert_eq!(SettingDef::of(def.key).name, def.name, "registry order");
        assert_eq!(s.source(def.key), &Source::Default);
        if s.value(def.key).is_none() {
            continue;
        }
        match def.kind {
            Kind::Bool => drop(s.bool(def.key)),
            Kind::Int { .. } => drop(s.int(def.key)),
            Kind::Float { .. } => drop(s.float(def.key)),
            Kind::Duration => drop(s.duration_ns(def.key)),
            Kind::Str | Kind::Enum(_) | Kind::PathTemplate => drop(s.text(def.key)),
            Kind::List { .. } => drop(s.list(def.key)),
            Kind::Path => drop(s.path(def.key)),
            Kind::TimeWindows => drop(s.windows(def.key)),
        }
    }
    assert_eq!(s.float(Key::SamplingFreq), 250.0);
    assert_eq!(s.text(Key::OutputFile), "%hostname%/%pid%.db");
    assert!(s.windows(Key::TracePeriods).specs.is_empty());
}

#[test]
fn names_env_vars_and_flags_are_unique_and_derived() {
    let mut seen = std::collections::HashSet::new();
    for def in SETTINGS {
        assert!(seen.insert(def.name), "duplicate {}", def.name);
        assert_eq!(def.env_var(), format!("STROBE_{}", def.name.to_uppercase()));
        assert_eq!(def.flag(), def.name.replace('_', "-"));
        assert_eq!(
            SettingDef::by_env_var(&def.env_var()).unwrap().name,
            def.name
        );
        assert!(!def.description.is_empty());
    }
    assert!(
        SettingDef::by_env_var("STROBE_sampling_freq").is_none(),
        "env vars are upper case"
    );
}

#[test]
fn precedence_flag_over_env_over_config_over_default() {
    let (_dir, cfg) = write_config("sampling_freq = 100\nsampling_delay = \"2s\"\nverbose = 1\n");
    let env = [
        ("STROBE_SAMPLING_FREQ", "200"),
        ("STROBE_SAMPLING_DELAY", "3s"),
    ];
    let s = SettingsLoader::new()
        .config_file(&cfg)
        .env(env)
        .flag("sampling-freq", "300")
        .load()
        .unwrap();
    assert_eq!(s.float(Key::SamplingFreq), 300.0);
    assert_eq!(s.source(Key::SamplingFreq), &Source::Flag);
    assert_eq!(s.duration_ns(Key::SamplingDelay), 3_000_000_000);
    assert_eq!(s.source(Key::SamplingDelay), &Source::Env);
    assert_eq!(s.int(Key::Verbose), 1);
    assert_eq!(s.source(Key::Verbose), &Source::Config(cfg.clone()));
    assert_eq!(s.duration_ns(Key::FlushInterval), 1_000_000_000);
    assert_eq!(s.source(Key::FlushInterval), &Source::Default);
    assert_eq!(s.config_file(), Some(cfg.as_path()));
}

#[test]
fn strobe_config_env_names_the_config_file_and_flag_file_wins() {
    let (_d1, a) = write_config("verbose = 2\n");
    let (_d2, b) = write_config("verbose = 3\n");
    let s = SettingsLoader::new()
        .env([("STROBE_CONFIG", a.to_str().unwrap())])
        .load()
        .unwrap();
    assert_eq!(s.int(Key::Verbose), 2);
    let s = SettingsLoader::new()
        .env([("STROBE_CONFIG", a.to_str().unwrap())])
        .config_file(&b)
        .load()
        .unwrap();
    assert_eq!(s.int(Key::Verbose), 3);
}

#[test]
fn timer_overrides_inherit_the_common_settings() {
    let s = SettingsLoader::new()
        .env([
            ("STROBE_SAMPLING_FREQ", "500"),
            ("STROBE_SAMPLING_REALTIME_FREQ", "10"),
        ])
        .load()
        .unwrap();
    assert_eq!(
        s.float(Key::SamplingCputimeFreq),
        500.0,
        "inherits sampling_freq"
    );
    assert_eq!(s.source(Key::SamplingCputimeFreq), &Source::Env);
    assert!(s.resolved(Key::SamplingCputimeFreq).value.is_none());
    assert_eq!(s.float(Key::SamplingRealtimeFreq), 10.0, "its own override");
    assert_eq!(s.duration_ns(Key::SamplingRealtimeDelay), 0);
}

fn error_for(var: &str, raw: &str) -> String {
    let errs = SettingsLoader::new().env([(var, raw)]).load().unwrap_err();
    assert_eq!(errs.0.len(), 1);
    errs.to_string()
}

#[test]
fn every_type_parses_and_rejects_with_a_clear_message() {
    // (variable, good value, expected value, bad value, words the error must contain)
    let cases: Vec<(&str, &str, Value, &str, &[&str])> = vec![
        (
            "STROBE_USE_SAMPLING",
            "off",
            Value::Bool(false),
            "maybe",
            &[
                "'maybe'",
                "STROBE_USE_SAMPLING",
                "not a boolean",
                "true or false",
            ],
        ),
        (
            "STROBE_VERBOSE",
            "3",
            Value::Int(3),
            "7",
            &["'7'", "STROBE_VERBOSE", "out of range", "from 0 to 3"],
        ),
        (
            "STROBE_SAMPLING_DEPTH",
            "1_024",
            Value::Int(1024),
            "deep",
            &["not a whole number"],
        ),
        (
            "STROBE_SAMPLING_FREQ",
            "99.5",
            Value::Float(99.5),
            "fast",
            &[
                "'fast'",
                "STROBE_SAMPLING_FREQ",
                "not a number",
                "a number from 0.001 to 100000",
            ],
        ),
        (
            "STROBE_SAMPLING_FREQ",
            "1e3",
            Value::Float(1000.0),
            "NaN",
            &["not a finite number"],
        ),
        (
            "STROBE_TOOL_LIB",
            "/a.so: /b.so",
            Value::List(vec!["/a.so".into(), "/b.so".into()]),
            "",
            &[],
        ),
        (
            "STROBE_SAMPLING_DELAY",
            "250ms",
            Value::Duration(250_000_000),
            "soon",
            &["'soon'", "STROBE_SAMPLING_DELAY", "no number", "500ms"],
        ),
        (
            "STROBE_SAMPLING_DURATION",
            "1.5m",
            Value::Duration(90_000_000_000),
            "3 fortnights",
            &["unknown unit"],
        ),
        (
            "STROBE_OUTPUT_DIR",
            "/tmp/x",
            Value::Path("/tmp/x".into()),
            " ",
            &["the path is empty", "a file or directory path"],
        ),
        (
            "STROBE_FORK_MODE",
            "STOP",
            Value::Enum("stop"),
            "sometimes",
            &[
                "'sometimes'",
                "not one of the choices",
                "one of: follow, stop",
            ],
        ),
        (
            "STROBE_OUTPUT_FILE",
            "%rank%/%pid%.db",
            Value::Str("%rank%/%pid%.db".into()),
            "%pdi%.db",
            &["unknown placeholder '%pdi%'", "%hostname%"],
        ),
        (
            "STROBE_TRACE_PERIODS",
            "realtime:10:1:5 process_cputime:10:2:20",
            Value::TimeWindows("realtime:10:1:5 process_cputime:10:2:20".parse().unwrap()),
            "walltime:1:2",
            &["unknown clock 'walltime'", "STROBE_TRACE_PERIODS"],
        ),
    ];
    for (var, good, want, bad, words) in cases {
        let def = SettingDef::by_env_var(var).unwrap();
        let s = SettingsLoader::new().env([(var, good)]).load().unwrap();
        assert_eq!(s.value(def.key), Some(&want), "{var}={good}");
        if words.is_empty() {
            continue;
        }
        let msg = error_for(var, bad);
        for w in words {
            assert!(msg.contains(w), "{var}={bad}: '{msg}' lacks '{w}'");
        }
    }
    let windows = SettingsLoader::new()
        .env([("STROBE_TRACE_PERIODS", "thread_cputime:1:1")])
        .load()
        .unwrap();
    assert_eq!(
        windows.windows(Key::TracePeriods).specs[0].clock,
        WindowClock::ThreadCpu
    );
}

#[test]
fn all_errors_are_reported_together_with_origins() {
    let (_dir, cfg) = write_config("sampling_freq = \"quick\"\n");
    let errs = SettingsLoader::new()
        .config_file(&cfg)
        .env([("STROBE_VERBOSE", "loud")])
        .flag("fork_mode", "never")
        .load()
        .unwrap_err();
    assert_eq!(errs.0.len(), 3, "{errs}");
    let text = errs.to_string();
    assert!(
        text.contains(&format!("'sampling_freq' in config file {}", cfg.display())),
        "{text}"
    );
    assert!(
        text.contains("environment variable STROBE_VERBOSE"),
        "{text}"
    );
    assert!(text.contains("flag --fork-mode"), "{text}");
}

#[test]
fn unknown_env_vars_warn_with_the_nearest_name_and_reserved_ones_do_not() {
    let s = SettingsLoader::new()
        .env([
            ("STROBE_SAMPLNG_FREQ", "10"),
            ("STROBE_CONFIG", ""),
            ("STROBE_INTERNAL_FD", "3"),
            ("STROBE_XYZZY_PLUGH_FOO", "1"),
            ("PATH", "/bin"),
        ])
        .load()
        .unwrap();
    assert_eq!(s.warnings().len(), 2, "{:?}", s.warnings());
    assert!(s.warnings()[0].contains("STROBE_SAMPLNG_FREQ is not a strobe setting"));
    assert!(s.warnings()[0].contains("did you mean STROBE_SAMPLING_FREQ?"));
    assert!(!s.warnings()[1].contains("did you mean"));
}

#[test]
fn config_file_problems_name_the_file() {
    let (_dir, cfg) = write_config("sampling_frq = 10\n");
    let errs = SettingsLoader::new().config_file(&cfg).load().unwrap_err();
    assert!(
        matches!(&errs.0[0], SettingsError::UnknownConfigKey { key, .. } if key == "sampling_frq")
    );
    assert!(errs.to_string().contains("did you mean sampling_freq?"));

    let (_dir, cfg) = write_config("sampling_freq = = 1\n");
    let errs = SettingsLoader::new().config_file(&cfg).load().unwrap_err();
    assert!(errs.to_string().contains("is not valid TOML"), "{errs}");
    assert!(errs.to_string().contains(&cfg.display().to_string()));

    let errs = SettingsLoader::new()
        .config_file("/nonexistent/strobe.toml")
        .load()
        .unwrap_err();
    assert!(
        errs.to_string()
            .contains("cannot read config file /nonexistent/strobe.toml"),
        "{errs}"
    );

    let (_dir, cfg) = write_config("use_sampling = 3\ntool_lib = [1, 2]\n");
    let errs = SettingsLoader::new().config_file(&cfg).load().unwrap_err();
    assert_eq!(errs.0.len(), 2, "{errs}");
}

#[test]
fn generated_config_reads_back_unchanged() {
    for env in [
        vec![],
        vec![
            ("STROBE_SAMPLING_FREQ", "123.5"),
            ("STROBE_TOOL_LIB", "/x/a.so:/y/b.so"),
            (
                "STROBE_TRACE_PERIODS",
                "monotonic:1:2:3 thread_cputime:500ms",
            ),
            ("STROBE_SAMPLING_REALTIME_DELAY", "250ms"),
            ("STROBE_OUTPUT_FILE", "%env{JOB}%/%rank%.db"),
            ("STROBE_RUNTIME", "/opt/strobe/lib/libstrobe_runtime.so"),
            ("STROBE_USE_TEMPORARY_FILES", "yes"),
        ],
    ] {
        let original = SettingsLoader::new().env(env.clone()).load().unwrap();
        let text = generate_config(&original);
        let (_dir, cfg) = write_config(&text);
        let reread = SettingsLoader::new().config_file(&cfg).load().unwrap();
        for def in SETTINGS {
            assert_eq!(
                reread.value(def.key),
                original.value(def.key),
                "{}\n{text}",
                def.name
            );
            assert_eq!(
                reread.resolved(def.key).value,
                original.resolved(def.key).value,
                "{}",
                def.name
            );
        }
        // And generating again from the re-read settings gives the same file.
        assert_eq!(generate_config(&reread), text);
    }
}

#[test]
fn to_env_carries_non_default_settings_to_a_child() {
    let (_dir, cfg) = write_config("verbose = 2\n");
    let s = SettingsLoader::new()
        .config_file(&cfg)
        .flag("tool_lib", "/a.so:/b.so")
        .flag("sampling_realtime", "true")
        .load()
        .unwrap();
    let env = s.to_env();
    assert!(env.contains(&("STROBE_VERBOSE".into(), "2".into())));
    assert!(env.contains(&("STROBE_TOOL_LIB".into(), "/a.so:/b.so".into())));
    assert!(env.contains(&("STROBE_SAMPLING_REALTIME".into(), "true".into())));
    assert_eq!(env.len(), 3, "{env:?}");
    let child = SettingsLoader::new().env(env).load().unwrap();
    for def in SETTINGS {
        assert_eq!(child.value(def.key), s.value(def.key), "{}", def.name);
    }
}

#[test]
fn unknown_flag_names_are_errors() {
    let errs = SettingsLoader::new()
        .flag("samplig-freq", "1")
        .load()
        .unwrap_err();
    assert!(
        errs.to_string()
            .contains("unknown setting 'samplig_freq' (did you mean sampling_freq?)"),
        "{errs}"
    );
}
