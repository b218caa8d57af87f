//! Thread identity and per-thread storage under 10,000 threads (seed 000's
//! fixed 2048-slot array crashed beyond its size). Runs in its own test
//! process so the id counters start at zero.

use std::collections::HashSet;
use std::sync::Mutex;
use strobe_core::thread::{
    current, gettid, register_current, PerThread, ThreadIdentity, ThreadRole, STROBE_SEQUENT_OFFSET,
};

static DATA: PerThread<(i32, u64)> = PerThread::new();

fn register_and_store(role: ThreadRole, seen: &Mutex<Vec<ThreadIdentity>>) {
    assert!(current().is_none());
    let id = register_current(role);
    assert_eq!(
        register_current(ThreadRole::Program),
        id,
        "registration is idempotent"
    );
    assert_eq!(current(), Some(id));
    assert_eq!(id.tid, gettid());
    DATA.get_or_insert_with(id.sequent, || (id.tid, id.internal));
    seen.lock().unwrap().push(id);
}

#[test]
fn ten_thousand_threads_get_unique_dense_ids_and_their_own_data() {
    const WAVES: usize = 100;
    const PER_WAVE: usize = 100;
    const STROBE_THREADS: usize = 50;
    let seen = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..STROBE_THREADS {
            scope.spawn(|| register_and_store(ThreadRole::Strobe, &seen));
        }
    });
    for _ in 0..WAVES {
        std::thread::scope(|scope| {
            for _ in 0..PER_WAVE {
                scope.spawn(|| register_and_store(ThreadRole::Program, &seen));
            }
        });
    }
    let seen = seen.into_inner().unwrap();
    let total = WAVES * PER_WAVE + STROBE_THREADS;
    assert_eq!(seen.len(), total);

    let internal: HashSet<u64> = seen.iter().map(|i| i.internal).collect();
    assert_eq!(
        internal,
        (0..total as u64).collect(),
        "internal ids are 0..n"
    );

    let program: HashSet<u64> = seen
        .iter()
        .filter(|i| i.role == ThreadRole::Program)
        .map(|i| i.sequent)
        .collect();
    assert_eq!(
        program,
        (0..(WAVES * PER_WAVE) as u64).collect(),
        "program threads are dense from 0"
    );
    let strobe: HashSet<u64> = seen
        .iter()
        .filter(|i| i.role == ThreadRole::Strobe)
        .map(|i| i.sequent)
        .collect();
    let offset = STROBE_SEQUENT_OFFSET;
    assert_eq!(strobe, (offset..offset + STROBE_THREADS as u64).collect());

    for id in &seen {
        assert_eq!(DATA.get(id.sequent), Some(&(id.tid, id.internal)), "{id:?}");
    }
    assert_eq!(DATA.iter().count(), total);
    assert!(DATA.get(WAVES as u64 * PER_WAVE as u64).is_none());
}
