//! The collector survives whatever a program writes into its segment.
//!
//! Replays the fuzz corpus (real segments of real programs, made by
//! `fuzz_segments capture`) and every input the fuzzer found
//! (`fuzz/found/`), each as it is and with bytes changing under the
//! collector, then runs a bounded fuzz pass of mutated corpus segments
//! (`STROBE_FUZZ_CASES`, default 300; `STROBE_FUZZ_SEED`, default 1). A
//! panic is a failure; an error is the collector refusing the segment at
//! the door, which is allowed.

use std::path::{Path, PathBuf};
use strobe_collect::fuzz::{corpus, mutate, pack, run_segment, survives, Changes, Rng};

fn fuzz_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(name)
}

/// The packed segments in `dir`; every `.seg` file there must unpack.
fn segments(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let found = corpus(dir);
    let files = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "seg"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(
        found.len(),
        files,
        "a file in {} does not unpack",
        dir.display()
    );
    found
}

#[test]
fn real_segments_decode_into_databases() {
    let corpus = segments(&fuzz_dir("corpus"));
    assert!(
        corpus.len() >= 4,
        "the corpus is missing: {}",
        fuzz_dir("corpus").display()
    );
    let mut databases = 0;
    for (path, bytes) in &corpus {
        let dir = tempfile::tempdir().unwrap();
        let outcome = run_segment(bytes, dir.path(), Changes::None)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // A program may end before recording anything (no database).
        databases += usize::from(outcome.database.is_some());
        assert!(
            !outcome.notes.iter().any(|n| n.contains("damaged")),
            "{}: {outcome:?}",
            path.display()
        );
    }
    assert!(
        databases >= 4,
        "{databases} of {} segments made a database",
        corpus.len()
    );
}

#[test]
fn the_corpus_and_every_input_found_are_survived() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (path, bytes) in segments(&fuzz_dir("corpus"))
        .into_iter()
        .chain(segments(&fuzz_dir("found")))
    {
        if let Err(message) = survives(&bytes, dir.path(), Some(1)) {
            failures.push(format!("{}: {message}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_bounded_fuzz_pass_finds_nothing() {
    let cases: usize = std::env::var("STROBE_FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(300);
    let seed: u64 = std::env::var("STROBE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let corpus = segments(&fuzz_dir("corpus"));
    assert!(!corpus.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(seed);
    let mut failures = Vec::new();
    for case in 0..cases {
        let (path, base) = &corpus[rng.below(corpus.len())];
        let mut bytes = base.clone();
        mutate(&mut bytes, &mut rng);
        if let Err(message) = survives(&bytes, dir.path(), Some(rng.next_u64())) {
            // Kept to be added to fuzz/found/ with the fix.
            let saved = std::env::temp_dir().join(format!("segment-fuzz-{seed}-{case}.seg"));
            let _ = std::fs::write(&saved, pack(&bytes));
            failures.push(format!(
                "case {case} (seed {seed}, from {}): {message}; input saved as {}",
                path.display(),
                saved.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_ring_damaged_again_and_again_is_named_once_and_the_rest_kept() {
    // Where slot 0's sample-ring head lies in a corpus segment.
    let (probe, _fd) =
        strobe_wire::segment::Segment::create(strobe_collect::fuzz::CORPUS_LAYOUT, 1, 1, 0, (0, 0))
            .unwrap();
    let base = probe.header() as *const _ as usize;
    let head = &probe.slot(0).sample_head.0 as *const _ as usize - base;
    let tail = &probe.slot(0).sample_tail.0 as *const _ as usize - base;
    let corpus = segments(&fuzz_dir("corpus"));
    let (path, bytes) = corpus
        .iter()
        .find(|(p, _)| p.to_string_lossy().contains("hotspots"))
        .expect("hotspots in the corpus");
    let dir = tempfile::tempdir().unwrap();
    // After every copy the program writes an impossible head again: far
    // beyond where the collector left the tail.
    let mut damage = |b: &mut [u8]| {
        let at = u64::from_le_bytes(b[tail..tail + 8].try_into().unwrap());
        b[head..head + 8].copy_from_slice(&at.wrapping_add(1 << 40).to_le_bytes());
    };
    let outcome = run_segment(bytes, dir.path(), Changes::Between(&mut damage)).unwrap();
    let damaged: Vec<&String> = outcome
        .notes
        .iter()
        .filter(|n| n.contains("damaged"))
        .collect();
    assert_eq!(damaged.len(), 1, "{}: {outcome:?}", path.display());
    assert!(
        damaged[0].contains("sample ring was found damaged 2 time(s)"),
        "{damaged:?}"
    );
    // What came before the damage is kept.
    assert!(outcome.database.is_some(), "{outcome:?}");
}
