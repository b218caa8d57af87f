//! A profile of more than ten files, read in place (`strobe_db::federation`),
//! against the same processes merged into one file: every table and every
//! standard view holds the same rows, with and without a time window. A
//! data view that combines processes but is not listed in
//! `federation::CROSS_PROCESS_VIEWS` (so is computed per process) fails
//! here.

use std::path::PathBuf;

use strobe_db::Value;
use strobe_db::{schema, synth, Profile, TimeBound};

/// Twelve small ranks on three nodes, and the same merged into one file.
fn job(dir: &std::path::Path) -> (Vec<PathBuf>, PathBuf) {
    let spec = synth::JobSpec {
        ranks: 12,
        nodes: 3,
        // The nodes' clock origins lie up to 50 s apart and each run lasts
        // milliseconds: with this seed the middle node's runs fall inside
        // the window of `a_window_restricts_both_alike` (20% to 60% of the
        // run); with many others they fall outside it.
        seed: 1,
        min_samples: 10,
        max_samples: 30,
        steps: 2,
        job: "fed.1".into(),
    };
    let files: Vec<PathBuf> = synth::write_job(&dir.join("run"), &spec, 2, &|_| {})
        .unwrap()
        .into_iter()
        .map(|t| t.path)
        .collect();
    let merged = dir.join("merged.db");
    strobe_db::merge(&files, &merged, &mut |_| {}).unwrap();
    (files, merged)
}

/// Every row of `SELECT * FROM name`, each as text, sorted.
fn rows(p: &Profile, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    p.query_each(
        &format!("SELECT * FROM \"{name}\""),
        &mut |_| {},
        &mut |vals| {
            out.push(
                vals.iter()
                    .map(|v| match v {
                        Value::Null => "NULL".to_string(),
                        Value::Integer(i) => i.to_string(),
                        Value::Real(r) => format!("{r:e}"),
                        Value::Text(t) => format!("'{t}'"),
                        Value::Blob(b) => format!("{b:?}"),
                    })
                    .collect::<Vec<_>>()
                    .join("|"),
            );
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    out.sort();
    out
}

fn names() -> Vec<String> {
    schema::all_tables()
        .map(String::from)
        .chain(schema::OPTIONAL_TABLES.iter().map(|(t, _)| t.to_string()))
        .chain(schema::DATA_VIEW_NAMES.iter().map(|v| v.to_string()))
        .collect()
}

#[test]
fn every_table_and_view_holds_the_rows_of_the_merged_file() {
    let dir = tempfile::tempdir().unwrap();
    let (files, merged) = job(dir.path());
    let many = Profile::open_files(&files).unwrap();
    assert!(many.is_federated());
    assert_eq!(many.process_count(), 12);
    let one = Profile::open_files(&[merged]).unwrap();
    assert!(!one.is_federated());
    let mut nonempty = 0;
    for name in names() {
        let (a, b) = (rows(&many, &name), rows(&one, &name));
        assert_eq!(a.len(), b.len(), "{name}: row counts");
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x, y, "{name}");
        }
        nonempty += usize::from(!a.is_empty());
    }
    // The synthetic ranks fill most of them (not the GPU tables).
    assert!(nonempty >= 25, "{nonempty} tables and views hold rows");
}

#[test]
fn a_window_restricts_both_alike() {
    let dir = tempfile::tempdir().unwrap();
    let (files, merged) = job(dir.path());
    let mut many = Profile::open_files(&files).unwrap();
    let mut one = Profile::open_files(&[merged]).unwrap();
    let w = (
        Some(TimeBound::Percent(20.0)),
        Some(TimeBound::Percent(60.0)),
    );
    assert_eq!(
        many.set_window(w.0, w.1).unwrap(),
        one.set_window(w.0, w.1).unwrap()
    );
    assert_eq!(many.run_bounds().unwrap(), one.run_bounds().unwrap());
    for name in [
        "rocpd_region",
        "regions",
        "samples",
        "strobe_counters",
        "top",
    ] {
        let (a, b) = (rows(&many, name), rows(&one, name));
        assert_eq!(a, b, "{name}");
        assert!(!a.is_empty(), "{name}: nothing in the window");
    }
}

#[test]
fn each_process_reads_on_a_connection_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = job(dir.path());
    let p = Profile::open_files(&files).unwrap();
    for (k, (ts, guid)) in p.table_sets().into_iter().enumerate() {
        assert!(files.contains(&p.set_file(k).to_path_buf()));
        let n: String = p
            .with_set_connection(k, |c| {
                Ok(c.query_row(
                    &format!(
                        "SELECT guid FROM \"{}\".\"rocpd_info_process{}\"",
                        ts.schema, ts.suffix
                    ),
                    [],
                    |r| r.get(0),
                )
                .unwrap())
            })
            .unwrap();
        assert_eq!(n, guid);
    }
    // The process's tables are not named on the profile's connection.
    let (ts, _) = &p.table_sets()[0];
    assert!(p
        .connection()
        .prepare(&format!(
            "SELECT 1 FROM \"{}\".\"rocpd_sample{}\"",
            ts.schema, ts.suffix
        ))
        .is_err());
}
