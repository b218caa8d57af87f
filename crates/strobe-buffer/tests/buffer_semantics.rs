//! Seed 001's buffer semantics, checked through the public API with real
//! callback threads: page rounding, watermark examples, policies, flush,
//! callback threads, configuration errors, failing callbacks.

use std::sync::{Arc, Mutex};
use strobe_buffer::record::{CounterRecord, MemoryRecord, RegionRecord};
use strobe_buffer::{
    page_size, Buffer, BufferOptions, CallbackThread, Context, Emplace, Error, Kind, Policy,
};

/// What each callback saw: (records, drop_count).
type Log = Arc<Mutex<Vec<(usize, u64)>>>;

/// Records each callback's record count and drop count.
fn recorder() -> (Log, impl FnMut(&strobe_buffer::Delivery<'_>) + Send) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    (log, move |d: &strobe_buffer::Delivery<'_>| {
        l.lock().unwrap().push((d.records.len(), d.drop_count));
    })
}

/// An 8-byte record: a raw payload of kind Counter.
fn emplace8(buffer: &Buffer, value: u64) -> Emplace {
    buffer.emplace_bytes(3, Kind::Counter as u32, 0, &value.to_ne_bytes(), &[])
}

#[test]
fn size_is_rounded_up_to_the_page_size() {
    let ctx = Context::create().unwrap();
    let page = page_size();
    for (asked, expected) in [(1, page), (page, page), (page + 1, 2 * page), (4000, page)] {
        let b =
            Buffer::create(&ctx, BufferOptions::new(asked, 0, Policy::Lossless), |_| {}).unwrap();
        assert_eq!(b.size(), expected, "size {asked}");
    }
    let b = Buffer::create(
        &ctx,
        BufferOptions::new(100, 1 << 20, Policy::Lossless),
        |_| {},
    )
    .unwrap();
    assert_eq!(
        b.watermark(),
        page,
        "a watermark above the size acts as the size"
    );
    let err = Buffer::create(&ctx, BufferOptions::new(0, 0, Policy::Lossless), |_| {}).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let err = Buffer::create(
        &ctx,
        BufferOptions::new(4096, 0, Policy::Lossless).blocks(0),
        |_| {},
    )
    .unwrap_err();
    assert!(err.to_string().contains("blocks"), "{err}");
}

#[test]
fn seed_example_six_8_byte_records_reach_a_48_byte_watermark() {
    let ctx = Context::create().unwrap();
    let (log, cb) = recorder();
    let b = Buffer::create(&ctx, BufferOptions::new(4096, 48, Policy::Lossless), cb).unwrap();
    for i in 0..12 {
        assert_eq!(emplace8(&b, i), Emplace::Stored);
    }
    b.flush().unwrap();
    assert_eq!(*log.lock().unwrap(), vec![(6, 0), (6, 0)]);
    for i in 0..5 {
        emplace8(&b, i);
    }
    b.flush().unwrap();
    assert_eq!(
        log.lock().unwrap()[2..],
        [(5, 0)],
        "five records wait for the flush"
    );
}

#[test]
fn seed_example_every_64_byte_record_triggers_delivery() {
    let ctx = Context::create().unwrap();
    let (log, cb) = recorder();
    let b = Buffer::create(&ctx, BufferOptions::new(4096, 48, Policy::Lossless), cb).unwrap();
    for _ in 0..3 {
        b.emplace_bytes(1, Kind::Region as u32, 0, &[7u8; 64], &[]);
    }
    b.flush().unwrap();
    assert_eq!(*log.lock().unwrap(), vec![(1, 0), (1, 0), (1, 0)]);
}

#[test]
fn watermark_zero_delivers_every_record() {
    let ctx = Context::create().unwrap();
    let (log, cb) = recorder();
    let b = Buffer::create(&ctx, BufferOptions::new(4096, 0, Policy::Discard), cb).unwrap();
    for i in 0..4 {
        emplace8(&b, i);
    }
    b.flush().unwrap();
    assert_eq!(*log.lock().unwrap(), vec![(1, 0); 4]);
}

#[test]
fn lossless_swaps_a_full_block_and_keeps_every_record() {
    let ctx = Context::create().unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let b = Buffer::create(
        &ctx,
        BufferOptions::new(4096, 4096, Policy::Lossless).blocks(2),
        move |d| {
            let mut g = g.lock().unwrap();
            for r in d.records {
                g.push(u64::from_ne_bytes(r.payload_bytes().try_into().unwrap()));
            }
        },
    )
    .unwrap();
    // 4096 / 8 = 512 records fill a block; 5000 records need many swaps
    // with only two blocks, so the producer also waits for the callback.
    for i in 0..5000u64 {
        assert_eq!(emplace8(&b, i), Emplace::Stored);
    }
    b.flush().unwrap();
    assert_eq!(*got.lock().unwrap(), (0..5000).collect::<Vec<_>>());
    let s = b.stats();
    assert_eq!(s.records_delivered, 5000);
    assert_eq!(s.records_dropped, 0);
    assert_eq!(s.lossless_wait_timeouts, 0);
}

#[test]
fn discard_drops_exactly_what_does_not_fit_and_reports_it() {
    let ctx = Context::create().unwrap();
    let (log, cb) = recorder();
    // Seed 001's example: watermark = size, the block holds 4080 bytes of
    // 40-byte records (102 of them) and the next record does not fit: it
    // and every later one are dropped until the flush.
    let b = Buffer::create(&ctx, BufferOptions::new(4096, 4096, Policy::Discard), cb).unwrap();
    let mut stored = 0;
    let mut dropped = 0;
    for i in 0..1000 {
        match b.emplace(
            0,
            &MemoryRecord {
                address: i,
                ..Default::default()
            },
        ) {
            Emplace::Stored => stored += 1,
            Emplace::Dropped => dropped += 1,
        }
    }
    assert_eq!(
        stored,
        4096 / 40,
        "a 4096-byte block holds 102 records of 40 bytes"
    );
    assert_eq!(dropped, 1000 - 102);
    // Records that still fit (8 bytes into the last 16) are kept.
    assert_eq!(emplace8(&b, 5), Emplace::Stored);
    b.flush().unwrap();
    assert_eq!(*log.lock().unwrap(), vec![(103, 898)]);
    // After the flush the buffer accepts records again; drops were reported once.
    emplace8(&b, 1);
    b.flush().unwrap();
    assert_eq!(log.lock().unwrap()[1..], [(1, 0)]);
}

#[test]
fn discard_under_concurrency_accounts_for_every_record() {
    let ctx = Context::create().unwrap();
    let totals = Arc::new(Mutex::new((0u64, 0u64)));
    let t = totals.clone();
    let b = Buffer::create(
        &ctx,
        BufferOptions::new(4096, 4096, Policy::Discard).blocks(2),
        move |d| {
            // A slow consumer makes producers find every block in use.
            std::thread::sleep(std::time::Duration::from_micros(200));
            let mut t = t.lock().unwrap();
            t.0 += d.records.len() as u64;
            t.1 += d.drop_count;
        },
    )
    .unwrap();
    let threads = 4;
    let per_thread = 20_000u64;
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for i in 0..per_thread {
                    b.emplace(
                        0,
                        &MemoryRecord {
                            address: i,
                            ..Default::default()
                        },
                    );
                }
            });
        }
    });
    b.flush().unwrap();
    let (delivered, drops) = *totals.lock().unwrap();
    assert_eq!(
        delivered + drops,
        threads * per_thread,
        "delivered {delivered} + dropped {drops}"
    );
    assert_eq!(b.stats().records_dropped, drops);
}

#[test]
fn record_larger_than_the_buffer_is_dropped_and_counted() {
    let ctx = Context::create().unwrap();
    let (log, cb) = recorder();
    let b = Buffer::create(&ctx, BufferOptions::new(4096, 4096, Policy::Lossless), cb).unwrap();
    let big = vec![0u8; 4097];
    assert_eq!(b.emplace_bytes(1, 1, 0, &big, &[]), Emplace::Dropped);
    b.flush().unwrap();
    assert_eq!(*log.lock().unwrap(), vec![(0, 1)]);
    assert_eq!(b.stats().records_too_large, 1);
}

#[test]
fn flush_returns_after_the_callback_ran_and_keeps_order() {
    let ctx = Context::create().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let b = Buffer::create(
        &ctx,
        BufferOptions::new(4096, 64, Policy::Lossless),
        move |d| {
            // Slow callback: flush must still wait for it.
            std::thread::sleep(std::time::Duration::from_millis(5));
            let mut s = s.lock().unwrap();
            for r in d.records {
                s.push(u64::from_ne_bytes(r.payload_bytes().try_into().unwrap()));
            }
        },
    )
    .unwrap();
    for round in 0..5u64 {
        for i in 0..21u64 {
            emplace8(&b, round * 100 + i);
        }
        b.flush().unwrap();
        let s = seen.lock().unwrap();
        let expected: Vec<u64> = (0..=round)
            .flat_map(|r| (0..21).map(move |i| r * 100 + i))
            .collect();
        assert_eq!(*s, expected, "after flush {round}");
    }
    assert_eq!(b.stats().flushes, 5);
}

#[test]
fn callbacks_run_on_the_assigned_thread() {
    let ctx = Context::create().unwrap();
    let t1 = CallbackThread::create().unwrap();
    let t2 = CallbackThread::create().unwrap();
    assert_ne!(t1, t2);
    let names = Arc::new(Mutex::new(Vec::new()));
    let mk = |tag: &'static str| {
        let n = names.clone();
        move |_: &strobe_buffer::Delivery<'_>| {
            let current = CallbackThread::current().map(|t| t.id());
            n.lock().unwrap().push((
                tag,
                current,
                std::thread::current().name().map(str::to_owned),
            ));
        }
    };
    let a = Buffer::create(&ctx, BufferOptions::new(4096, 0, Policy::Lossless), mk("a")).unwrap();
    let b = Buffer::create(&ctx, BufferOptions::new(4096, 0, Policy::Lossless), mk("b")).unwrap();
    let c = Buffer::create(&ctx, BufferOptions::new(4096, 0, Policy::Lossless), mk("c")).unwrap();
    assert_eq!(
        a.callback_thread(),
        CallbackThread::default_thread().unwrap().id()
    );
    a.assign_callback_thread(t1).unwrap();
    b.assign_callback_thread(t2).unwrap();
    for _ in 0..10 {
        emplace8(&a, 1);
        emplace8(&b, 2);
        emplace8(&c, 3);
    }
    a.flush().unwrap();
    b.flush().unwrap();
    c.flush().unwrap();
    let names = names.lock().unwrap();
    assert_eq!(names.len(), 30);
    let default = CallbackThread::default_thread().unwrap().id();
    for (tag, id, name) in names.iter() {
        let want = match *tag {
            "a" => t1.id(),
            "b" => t2.id(),
            _ => default,
        };
        assert_eq!(*id, Some(want), "buffer {tag}");
        assert_eq!(name.as_deref(), Some(format!("strobe-cb-{want}").as_str()));
    }
    // Assignment is refused while the context runs.
    let ctx2 = Context::create().unwrap();
    let d = Buffer::create(&ctx2, BufferOptions::new(4096, 0, Policy::Lossless), |_| {}).unwrap();
    ctx2.start().unwrap();
    assert_eq!(
        d.assign_callback_thread(t1),
        Err(Error::ContextActive(ctx2.id()))
    );
    assert!(CallbackThread::from_id(999_999).is_err());
}

#[test]
fn flush_from_the_buffers_own_callback_thread_is_refused() {
    let ctx = Context::create().unwrap();
    let thread = CallbackThread::create().unwrap();
    let result = Arc::new(Mutex::new(None));
    let slot: Arc<Mutex<Option<Buffer>>> = Arc::new(Mutex::new(None));
    let (r, s) = (result.clone(), slot.clone());
    let b = Buffer::create(
        &ctx,
        BufferOptions::new(4096, 0, Policy::Lossless),
        move |_| {
            let me = s.lock().unwrap().unwrap();
            *r.lock().unwrap() = Some(me.flush());
        },
    )
    .unwrap();
    b.assign_callback_thread(thread).unwrap();
    *slot.lock().unwrap() = Some(b);
    emplace8(&b, 1);
    b.flush().unwrap();
    assert_eq!(
        *result.lock().unwrap(),
        Some(Err(Error::FlushOnDeliveryThread(b.id())))
    );
}

#[test]
fn a_panicking_callback_does_not_stop_delivery() {
    let ctx = Context::create().unwrap();
    let thread = CallbackThread::create().unwrap();
    let delivered = Arc::new(Mutex::new(0usize));
    let d = delivered.clone();
    let bad = Buffer::create(
        &ctx,
        BufferOptions::new(4096, 0, Policy::Lossless),
        move |del| {
            if del.records.len() == 1 && del.records[0].payload_bytes()[0] == 13 {
                panic!("callback refuses record 13");
            }
            *d.lock().unwrap() += del.records.len();
        },
    )
    .unwrap();
    bad.assign_callback_thread(thread).unwrap();
    // Another buffer on the same thread must keep being served too.
    let (log, cb) = recorder();
    let good = Buffer::create(&ctx, BufferOptions::new(4096, 0, Policy::Lossless), cb).unwrap();
    good.assign_callback_thread(thread).unwrap();
    for i in 0..20u64 {
        emplace8(&bad, i);
    }
    bad.flush().unwrap();
    emplace8(&good, 1);
    good.flush().unwrap();
    assert_eq!(*delivered.lock().unwrap(), 19);
    assert_eq!(bad.stats().callback_failures, 1);
    assert_eq!(bad.stats().callbacks, 20);
    assert_eq!(*log.lock().unwrap(), vec![(1, 0)]);
}

#[test]
fn configuring_a_context_kind_pair_twice_is_an_error() {
    let ctx = Context::create().unwrap();
    let b1 = Buffer::create(&ctx, BufferOptions::new(4096, 0, Policy::Lossless), |_| {}).unwrap();
    let b2 = Buffer::create(&ctx, BufferOptions::new(4096, 0, Policy::Lossless), |_| {}).unwrap();
    ctx.configure_buffer_tracing(Kind::Region, None, &b1)
        .unwrap();
    let err = ctx
        .configure_buffer_tracing(Kind::Region, Some(&[0]), &b2)
        .unwrap_err();
    assert_eq!(
        err,
        Error::ServiceAlreadyConfigured {
            context: ctx.id(),
            kind: "region",
            service: "buffer tracing"
        }
    );
    assert!(err.to_string().contains("once"));
    // More than one service may share a buffer.
    ctx.configure_buffer_tracing(Kind::Memory, None, &b1)
        .unwrap();
    // Callback tracing is a separate service per pair, also configured once.
    ctx.configure_callback_tracing(Kind::Region, None, |_, _| {})
        .unwrap();
    assert!(matches!(
        ctx.configure_callback_tracing(Kind::Region, None, |_, _| {}),
        Err(Error::ServiceAlreadyConfigured {
            service: "callback tracing",
            ..
        })
    ));
    // Unknown operations, foreign buffers and active contexts are refused.
    assert!(matches!(
        ctx.configure_buffer_tracing(Kind::Counter, Some(&[99]), &b1),
        Err(Error::UnknownOperation {
            kind: "counter",
            operation: 99,
            ..
        })
    ));
    let other = Context::create().unwrap();
    assert!(matches!(
        other.configure_buffer_tracing(Kind::Region, None, &b1),
        Err(Error::BufferOfOtherContext { .. })
    ));
    ctx.start().unwrap();
    assert_eq!(
        ctx.configure_buffer_tracing(Kind::Sample, None, &b2),
        Err(Error::ContextActive(ctx.id()))
    );
}

#[test]
fn contexts_start_stop_and_filter_operations() {
    let ctx = Context::create().unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let b = Buffer::create(
        &ctx,
        BufferOptions::new(4096, 4096, Policy::Lossless),
        move |d| {
            let mut g = g.lock().unwrap();
            for r in d.records {
                g.push((
                    r.kind,
                    r.operation,
                    r.payload_as::<RegionRecord>().map(|x| x.name_id),
                ));
            }
        },
    )
    .unwrap();
    // Region: only operation 1 ("instrumented"); memory: all operations.
    ctx.configure_buffer_tracing(Kind::Region, Some(&[1]), &b)
        .unwrap();
    ctx.configure_buffer_tracing(Kind::Memory, None, &b)
        .unwrap();
    let region = |n| RegionRecord {
        name_id: n,
        ..Default::default()
    };
    assert!(!ctx.is_active());
    assert_eq!(
        ctx.emit(1, &region(1)),
        None,
        "inactive context takes nothing"
    );
    ctx.start().unwrap();
    assert!(ctx.is_active());
    assert_eq!(ctx.emit(1, &region(2)), Some(Emplace::Stored));
    assert_eq!(ctx.emit(0, &region(3)), None, "filtered out");
    assert_eq!(ctx.emit(5, &MemoryRecord::default()), Some(Emplace::Stored));
    assert_eq!(
        ctx.emit(0, &CounterRecord::default()),
        None,
        "kind not configured"
    );
    ctx.stop().unwrap();
    assert!(!ctx.is_active());
    assert_eq!(ctx.emit(1, &region(4)), None);
    b.flush().unwrap();
    assert_eq!(
        *got.lock().unwrap(),
        vec![
            (Kind::Region as u32, 1, Some(2)),
            (Kind::Memory as u32, 5, None)
        ]
    );
    assert!(matches!(Context::from_id(0), Err(Error::UnknownContext(0))));
}

/// A callback that blocks until released, on a thread of its own.
fn stalled_buffer(
    policy: Policy,
    wait: std::time::Duration,
) -> (Buffer, std::sync::mpsc::Sender<()>, Log) {
    let ctx = Context::create().unwrap();
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let b = Buffer::create(
        &ctx,
        BufferOptions::new(4096, 4096, policy)
            .blocks(2)
            .lossless_wait(wait),
        move |d| {
            let _ = gate.lock().unwrap().recv();
            l.lock().unwrap().push((d.records.len(), d.drop_count));
        },
    )
    .unwrap();
    b.assign_callback_thread(CallbackThread::create().unwrap())
        .unwrap();
    (b, release, log)
}

#[test]
fn discard_producers_never_wait_for_a_stalled_callback() {
    let (b, release, log) = stalled_buffer(Policy::Discard, std::time::Duration::from_secs(60));
    // The callback thread is stuck in the first callback; both blocks fill
    // up; every further record is dropped at once (no 60 s wait).
    let mut dropped = 0u64;
    for i in 0..10_000u64 {
        if emplace8(&b, i) == Emplace::Dropped {
            dropped += 1;
        }
    }
    assert!(dropped >= 10_000 - 2 * 512, "dropped {dropped}");
    assert_eq!(b.stats().lossless_waits, 0);
    drop(release); // unblock every callback
    b.flush().unwrap();
    let log = log.lock().unwrap();
    let delivered: usize = log.iter().map(|e| e.0).sum();
    let drops: u64 = log.iter().map(|e| e.1).sum();
    assert_eq!(delivered as u64 + drops, 10_000);
    assert_eq!(drops, dropped);
}

#[test]
fn the_lossless_wait_is_bounded_counted_and_reported() {
    let (b, release, log) = stalled_buffer(Policy::Lossless, std::time::Duration::from_millis(50));
    // Two blocks of 512 records: the first is stuck in the callback, the
    // second fills, then the producer waits 50 ms and drops the record.
    let mut outcomes = Vec::new();
    for i in 0..1025u64 {
        outcomes.push(emplace8(&b, i));
    }
    assert!(outcomes[..1024].iter().all(|o| *o == Emplace::Stored));
    assert_eq!(outcomes[1024], Emplace::Dropped);
    let s = b.stats();
    assert_eq!(s.lossless_wait_timeouts, 1);
    assert!(s.lossless_waits >= 1);
    assert!(
        s.lossless_wait_ns >= 50_000_000,
        "waited {} ns",
        s.lossless_wait_ns
    );
    drop(release);
    b.flush().unwrap();
    let log = log.lock().unwrap();
    assert_eq!(log.iter().map(|e| e.0).sum::<usize>(), 1024);
    assert_eq!(
        log.iter().map(|e| e.1).sum::<u64>(),
        1,
        "the drop reaches a callback"
    );
}
