//! Lossless delivery under concurrency: N producer threads × M records,
//! every record delivered exactly once and each thread's records in order,
//! through a counting consumer that uses only the public API.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strobe_buffer::record::{CounterRecord, RegionRecord, SampleRecord};
use strobe_buffer::{Buffer, BufferOptions, Context, Delivery, Emplace, Kind, Policy};

/// A consumer that counts records per kind and checks per-producer order.
#[derive(Default)]
struct CountingConsumer {
    per_kind: HashMap<u32, u64>,
    /// producer id → next expected sequence number.
    next: HashMap<u64, u64>,
    out_of_order: u64,
    drops: u64,
}

impl CountingConsumer {
    fn take(&mut self, d: &Delivery<'_>) {
        self.drops += d.drop_count;
        for r in d.records {
            *self.per_kind.entry(r.kind).or_default() += 1;
            if let Some(c) = r.payload_as::<CounterRecord>() {
                let next = self.next.entry(c.counter_id).or_default();
                if c.value as u64 != *next {
                    self.out_of_order += 1;
                }
                *next = c.value as u64 + 1;
            }
        }
    }
}

fn run(threads: u64, per_thread: u64, options: BufferOptions, slow_consumer: bool) -> Buffer {
    run_with(threads, per_thread, options, slow_consumer, false)
}

fn run_with(
    threads: u64,
    per_thread: u64,
    options: BufferOptions,
    slow_consumer: bool,
    concurrent_flushes: bool,
) -> Buffer {
    // These tests are about losing nothing, not about the wait bound: make
    // the bound far longer than any scheduling delay on a loaded machine.
    let options = options.lossless_wait(Duration::from_secs(120));
    let ctx = Context::create().unwrap();
    let consumer = Arc::new(Mutex::new(CountingConsumer::default()));
    let c = consumer.clone();
    let buffer = Buffer::create(&ctx, options, move |d| {
        if slow_consumer {
            std::thread::sleep(Duration::from_micros(100));
        }
        c.lock().unwrap().take(d)
    })
    .unwrap();
    ctx.configure_buffer_tracing(Kind::Counter, None, &buffer)
        .unwrap();
    ctx.start().unwrap();
    let producing = std::sync::atomic::AtomicBool::new(true);
    std::thread::scope(|s| {
        if concurrent_flushes {
            let producing = &producing;
            s.spawn(move || {
                while producing.load(std::sync::atomic::Ordering::Relaxed) {
                    buffer.flush().unwrap();
                }
            });
        }
        let mut producers: Vec<std::thread::ScopedJoinHandle<()>> = Vec::new();
        for t in 0..threads {
            producers.push(s.spawn(move || {
                for i in 0..per_thread {
                    let r = CounterRecord {
                        counter_id: t,
                        value: i as f64,
                        ..Default::default()
                    };
                    assert_eq!(ctx.emit(0, &r), Some(Emplace::Stored));
                }
            }));
        }
        for p in producers {
            p.join().unwrap();
        }
        producing.store(false, std::sync::atomic::Ordering::Relaxed);
    });
    buffer.flush().unwrap();
    let c = consumer.lock().unwrap();
    assert_eq!(c.drops, 0);
    assert_eq!(c.out_of_order, 0);
    assert_eq!(
        c.per_kind.get(&(Kind::Counter as u32)),
        Some(&(threads * per_thread))
    );
    assert_eq!(c.next.len() as u64, threads);
    for t in 0..threads {
        assert_eq!(
            c.next[&t], per_thread,
            "thread {t} delivered exactly once, all of it"
        );
    }
    let stats = buffer.stats();
    assert_eq!(stats.records_delivered, threads * per_thread);
    assert_eq!(stats.records_dropped, 0);
    buffer
}

#[test]
fn eight_threads_every_record_once_in_order() {
    run(
        8,
        50_000,
        BufferOptions::new(16 * 1024, 12 * 1024, Policy::Lossless),
        false,
    );
}

#[test]
fn flushes_racing_with_producers_lose_and_duplicate_nothing() {
    let b = run_with(
        4,
        50_000,
        BufferOptions::new(4096, 4096, Policy::Lossless).blocks(3),
        false,
        true,
    );
    assert!(b.stats().flushes > 1);
}

#[test]
fn few_blocks_and_a_slow_consumer_make_producers_wait_but_lose_nothing() {
    let b = run(
        4,
        20_000,
        BufferOptions::new(4096, 4096, Policy::Lossless).blocks(2),
        true,
    );
    let s = b.stats();
    assert!(s.lossless_waits > 0, "the producers had to wait: {s:?}");
    assert_eq!(s.lossless_wait_timeouts, 0);
}

#[test]
fn more_threads_than_shards_and_blocks_share_slots_without_loss() {
    // 80 threads > 64 shards, 3 blocks: threads share shard slots and steal
    // idle blocks from each other.
    run(
        80,
        2_000,
        BufferOptions::new(4096, 2048, Policy::Lossless).blocks(3),
        false,
    );
}

#[test]
fn mixed_kinds_and_variable_length_records_through_global_emit() {
    let ctx = Context::create().unwrap();
    let frames_seen = Arc::new(Mutex::new(Vec::new()));
    let texts = Arc::new(Mutex::new(Vec::new()));
    let (f, t) = (frames_seen.clone(), texts.clone());
    let b = Buffer::create(
        &ctx,
        BufferOptions::new(128 * 1024, 128 * 1024, Policy::Lossless),
        move |d| {
            for r in d.records {
                match r.kind() {
                    Some(Kind::Sample) => f.lock().unwrap().push(r.sample_frames().to_vec()),
                    Some(Kind::Marker) => t.lock().unwrap().push(r.marker_text().to_vec()),
                    Some(Kind::Region) => {
                        assert_eq!(r.payload_as::<RegionRecord>().unwrap().depth, 3)
                    }
                    other => panic!("unexpected kind {other:?}"),
                }
            }
        },
    )
    .unwrap();
    for k in [Kind::Sample, Kind::Marker, Kind::Region] {
        ctx.configure_buffer_tracing(k, None, &b).unwrap();
    }
    ctx.start().unwrap();
    // Global emission reaches this context (other tests in this binary do
    // not trace these kinds).
    let frames: Vec<u64> = (0..strobe_buffer::record::MAX_SAMPLE_FRAMES as u64 + 44).collect();
    let head = SampleRecord {
        timestamp_ns: 1,
        tid: 2,
        ..Default::default()
    };
    assert_eq!(strobe_buffer::emit_sample(0, &head, &frames[..3]).stored, 1);
    assert_eq!(strobe_buffer::emit_sample(1, &head, &frames).stored, 1);
    let marker = strobe_buffer::record::MarkerRecord::default();
    assert_eq!(strobe_buffer::emit_marker(0, &marker, b"hello").stored, 1);
    assert_eq!(
        strobe_buffer::emit(
            0,
            &RegionRecord {
                depth: 3,
                ..Default::default()
            }
        )
        .stored,
        1
    );
    b.flush().unwrap();
    let f = frames_seen.lock().unwrap();
    assert_eq!(f[0], vec![0, 1, 2]);
    assert_eq!(
        f[1].len(),
        strobe_buffer::record::MAX_SAMPLE_FRAMES,
        "truncated at the bound"
    );
    assert_eq!(*texts.lock().unwrap(), vec![b"hello".to_vec()]);
    ctx.stop().unwrap();
    assert_eq!(strobe_buffer::emit_marker(0, &marker, b"late").stored, 0);
    assert!(!strobe_buffer::is_traced(Kind::Marker));
}
