//! Damaged files never panic the reader, the iterators or the summaries:
//! every seed overwrites random byte ranges of a real profile and the whole
//! read path must return either data or an error.

mod common;

use strobe_db::summary::{function_summary, region_summary, thread_summary};
use strobe_db::Profile;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn read_everything(path: &std::path::Path) -> Result<(), strobe_db::DbError> {
    let p = Profile::open(&[path.to_str().unwrap()])?;
    for r in p.regions()? {
        r?;
    }
    for s in p.samples()? {
        s?;
    }
    for c in p.counters()? {
        c?;
    }
    for t in p.threads()? {
        t?;
    }
    region_summary(&p, true)?;
    function_summary(&p, false)?;
    thread_summary(&p, false)?;
    Ok(())
}

#[test]
fn random_damage_gives_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.db");
    common::write_small(&good, 55);
    read_everything(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let (mut ok, mut failed) = (0, 0);
    for seed in 1..=60u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut b = bytes.clone();
        for _ in 0..(1 + rng.next() % 4) {
            // Skip the 100-byte header half the time so damage reaches pages.
            let lo = if rng.next().is_multiple_of(2) { 100 } else { 0 };
            let at = lo + (rng.next() as usize) % (b.len() - lo);
            let len = 1 + (rng.next() as usize) % 64;
            for k in at..(at + len).min(b.len()) {
                b[k] = rng.next() as u8;
            }
        }
        let path = dir.path().join(format!("bad{seed}.db"));
        std::fs::write(&path, &b).unwrap();
        match read_everything(&path) {
            Ok(()) => ok += 1,
            Err(e) => {
                failed += 1;
                assert!(!e.to_string().is_empty());
            }
        }
    }
    assert_eq!(ok + failed, 60);
}
