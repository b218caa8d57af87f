//! The signal handler allocates nothing: a counting global allocator
//! counts allocations per thread, and a thread that itself allocates
//! nothing is sampled over a thousand times; its count must stay at zero.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

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
    // Rings large enough that no sample is lost: every signal unwinds.
    let seg = common::segment(2, 1 << 21);
    let sampler =
        strobe_sampler::Sampler::start(common::config(Some(250.0), Some(2000.0)), seg).unwrap();
    let slot = seg.claim_slot(strobe_core::thread::gettid()).unwrap();
    sampler.register_current_thread(slot).unwrap();
    let before = ALLOCATIONS.with(Cell::get);
    (w.spin_ms)(600.0);
    let after = ALLOCATIONS.with(Cell::get);
    sampler.unregister_current_thread();
    sampler.stop();
    let c = common::counters(seg, slot);
    assert!(c.taken > 300, "only {} samples taken", c.taken);
    assert_eq!(c.lost_full, 0, "every signal took a whole sample");
    assert_eq!(
        after - before,
        0,
        "{} allocations on the sampled thread during {} samples",
        after - before,
        c.taken
    );
    assert_eq!(common::drain(seg, slot).len() as u64, c.taken);
}
