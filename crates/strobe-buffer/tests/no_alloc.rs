//! Emplace never allocates: a counting global allocator (per thread) sees no
//! allocation on the producer thread across many emplaces, including block
//! swaps, lossless waits for the callback thread, discard drops, filtered
//! and global emission and callback tracing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use strobe_buffer::record::{CounterRecord, MemoryRecord, SampleRecord};
use strobe_buffer::{Buffer, BufferOptions, Context, Kind, Policy};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const
// thread-local without destructor, safe to touch from inside the allocator.
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

fn allocations() -> u64 {
    ALLOCATIONS.with(|c| c.get())
}

#[test]
fn emplace_and_emit_never_allocate() {
    let ctx = Context::create().unwrap();
    let lossless = Buffer::create(
        &ctx,
        BufferOptions::new(4096, 2048, Policy::Lossless).blocks(2),
        |_| {},
    )
    .unwrap();
    let discard = Buffer::create(
        &ctx,
        BufferOptions::new(4096, 4096, Policy::Discard),
        |_| {},
    )
    .unwrap();
    ctx.configure_buffer_tracing(Kind::Counter, None, &lossless)
        .unwrap();
    ctx.configure_buffer_tracing(Kind::Sample, Some(&[1]), &lossless)
        .unwrap();
    ctx.configure_callback_tracing(Kind::Memory, None, |_, data| data.value = data.value() + 1)
        .unwrap();
    ctx.start().unwrap();
    // Warm-up: first use of thread-locals.
    lossless.emplace(0, &CounterRecord::default());

    let before = allocations();
    let frames = [1u64, 2, 3, 4];
    for i in 0..200_000u64 {
        let r = CounterRecord {
            counter_id: i,
            ..Default::default()
        };
        lossless.emplace(0, &r);
        // 40-byte records leave 16 bytes free in a full block: dropped.
        discard.emplace(0, &MemoryRecord::default());
        ctx.emit(0, &r);
        strobe_buffer::emit(0, &r);
        ctx.emit_sample(1, &SampleRecord::default(), &frames);
        ctx.emit_sample(0, &SampleRecord::default(), &frames); // filtered out
        let scope = strobe_buffer::callback_enter(Kind::Memory, 0, &[]);
        scope.exit(&[]);
    }
    let after = allocations();
    assert_eq!(
        after - before,
        0,
        "the producer thread allocated {} times",
        after - before
    );
    // The work really happened (so the loop was not a no-op).
    lossless.flush().unwrap();
    assert!(lossless.stats().records_delivered >= 200_000 * 4);
    assert!(
        discard.stats().records_dropped > 0,
        "the discard path ran too"
    );
}
