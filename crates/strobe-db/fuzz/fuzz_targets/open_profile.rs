//! Fuzz target: arbitrary bytes given to the reader as a database file.
//!
//! Writes the input to a temporary file, opens it with `Profile::open`, walks
//! every iterator and computes every summary. Any panic is a bug; errors are
//! expected. Seed the corpus with real profiles (e.g. from
//! `strobe-bench db --rows 1000`) so mutations reach the page level.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("strobe-db-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("input.db");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let Ok(p) = strobe_db::Profile::open(&[path.to_str().unwrap_or_default()]) else {
        return;
    };
    if let Ok(it) = p.regions() {
        it.for_each(drop);
    }
    if let Ok(it) = p.samples() {
        it.for_each(drop);
    }
    if let Ok(it) = p.counters() {
        it.for_each(drop);
    }
    let _ = strobe_db::summary::region_summary(&p, true);
    let _ = strobe_db::summary::function_summary(&p, false);
    let _ = strobe_db::summary::thread_summary(&p, false);
});
