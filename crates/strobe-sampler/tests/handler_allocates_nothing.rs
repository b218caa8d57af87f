//! The signal handler allocates nothing: a counting global allocator
//! counts allocations per thread, and a thread that itself allocates
//! nothing is sampled thousands of times; its count must stay at zero.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; counting touches only a
// const-initialised thread-local without destructor.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn sampled_thread_sees_no_allocation() {
    let w = common::load_workload();
    let sink = Arc::new(common::Collect::default());
    let sampler =
        strobe_sampler::Sampler::start(common::config(Some(250.0), Some(2000.0)), sink.clone())
            .unwrap();
    sampler.register_current_thread().unwrap();
    let taken_before = sampler.stats().samples;
    let before = ALLOCATIONS.with(Cell::get);
    (w.spin_ms)(600.0);
    let after = ALLOCATIONS.with(Cell::get);
    let taken = sampler.stats().samples - taken_before;
    sampler.unregister_current_thread();
    sampler.stop();
    assert!(taken > 300, "only {taken} samples taken");
    assert_eq!(
        after - before,
        0,
        "{} allocations on the sampled thread during {taken} samples",
        after - before
    );
}
