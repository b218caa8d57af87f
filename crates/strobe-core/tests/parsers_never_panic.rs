//! Every parser of outside input (setting values, config files, time-window
//! specs, durations, path templates) fed arbitrary text: it returns a value
//! or an error, never panics, and what it accepts prints back to itself.
//! (cargo-fuzz needs a nightly toolchain this project cannot assume; these
//! property tests run in every CI build instead.)

use proptest::prelude::*;
use strobe_core::duration::{parse_duration_ns, DisplayDuration};
use strobe_core::output_path::{expand_template, validate_template, ProcessIdentity};
use strobe_core::settings::{SettingsLoader, SETTINGS};
use strobe_core::timewindow::TimeWindows;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z_:%{}0-9. -]{0,40}",
        "(realtime|monotonic|process_cputime|thread_cputime|x)?:[0-9.]{0,4}(ms|s|m|h|ns|us|q)?:[0-9]{0,3}:[0-9]{0,3}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn setting_values(raw in text()) {
        for def in SETTINGS {
            if let Ok(value) = def.kind.parse(&raw) {
                let again = def.kind.parse(&value.to_raw(&def.kind));
                prop_assert_eq!(again.as_ref(), Ok(&value), "{} {:?}", def.name, raw);
            }
        }
    }

    #[test]
    fn durations(raw in text()) {
        if let Ok(ns) = parse_duration_ns(&raw) {
            prop_assert_eq!(parse_duration_ns(&DisplayDuration(ns).to_string()), Ok(ns));
        }
    }

    #[test]
    fn time_windows(raw in text()) {
        if let Ok(w) = raw.parse::<TimeWindows>() {
            prop_assert_eq!(w.to_string().parse::<TimeWindows>(), Ok(w));
        }
    }

    #[test]
    fn templates(raw in text()) {
        let id = ProcessIdentity::default();
        prop_assert_eq!(validate_template(&raw).is_ok(), expand_template(&raw, &id).is_ok());
    }

    #[test]
    fn config_files(body in "([a-z_]{1,20} = (\"[ -~]{0,10}\"|[0-9.]{1,5}|true|\\[\\]|=)\n){0,6}") {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, &body).unwrap();
        let _ = SettingsLoader::new().config_file(&path).load();
    }
}
