//! The worker pool of the readers that go through every process of a
//! profile: items worked on by a few threads at once, handed over in
//! order.
//!
//! Owns [`ordered_parallel`]. It knows nothing of databases (the work
//! opens what it needs) and never reorders what it hands over.

use crate::{DbError, Result};

/// Work items counted ahead of the one handed over next, at most (their
/// results wait in memory until their turn).
const LOOKAHEAD: usize = 16;

/// Runs `work(i)` for every `i` in `0..n` on two to four worker threads,
/// at most [`LOOKAHEAD`] items ahead of the consumer, and hands each
/// result to `f` in order of `i` on the calling thread. The first error
/// (of a worker or of `f`) stops the workers and is returned.
pub(crate) fn ordered_parallel<T: Send>(
    n: usize,
    work: &(dyn Fn(usize) -> Result<T> + Sync),
    f: &mut dyn FnMut(usize, T) -> Result<()>,
) -> Result<()> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 4)
        .min(n.max(1));
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // Items handed over so far, and a condition workers wait on to stay
    // within LOOKAHEAD of it.
    let handed = (std::sync::Mutex::new(0usize), std::sync::Condvar::new());
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<T>)>();
    std::thread::scope(|scope| -> Result<()> {
        for _ in 0..workers {
            let tx = tx.clone();
            let (next, stop, handed) = (&next, &stop, &handed);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return;
                }
                {
                    let (lock, cv) = handed;
                    let mut h = lock.lock().unwrap_or_else(|e| e.into_inner());
                    while i >= *h + LOOKAHEAD && !stop.load(Ordering::Relaxed) {
                        h = cv.wait(h).unwrap_or_else(|e| e.into_inner());
                    }
                }
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                // A panicking item reports an error instead of leaving the
                // consumer waiting for it.
                let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(i)))
                    .unwrap_or_else(|_| {
                        Err(DbError::Query {
                            message: "a reader thread panicked".into(),
                            sql: String::new(),
                        })
                    });
                if tx.send((i, done)).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        let finish = |r: Result<()>| {
            stop.store(true, Ordering::Relaxed);
            handed.1.notify_all();
            r
        };
        let mut pending: std::collections::BTreeMap<usize, Result<T>> = Default::default();
        let mut i = 0;
        while i < n {
            let done = match pending.remove(&i) {
                Some(d) => d,
                None => match rx.recv() {
                    Ok((j, d)) => {
                        pending.insert(j, d);
                        continue;
                    }
                    Err(_) => {
                        return finish(Err(DbError::Query {
                            message: "a reader thread stopped early".into(),
                            sql: String::new(),
                        }))
                    }
                },
            };
            let step = done.and_then(|d| f(i, d));
            if step.is_err() {
                return finish(step);
            }
            i += 1;
            *handed.0.lock().unwrap_or_else(|e| e.into_inner()) = i;
            handed.1.notify_all();
        }
        finish(Ok(()))
    })
}
