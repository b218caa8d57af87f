//! Unit tests of `segment.rs`.

use super::*;
use std::io::Write;

const SMALL: Layout = Layout {
    slots: 4,
    sample_ring_bytes: 4096,
    event_ring_bytes: 8192,
};

#[test]
fn a_created_segment_opens_from_its_descriptor_and_shares_pages() {
    let (seg, fd) = Segment::create(SMALL, 42, 1, 7, (0, 0)).unwrap();
    seg.write_info(b"hello");
    let i = seg.claim_slot(1234).unwrap();
    assert!(seg.sample_ring(i).push(&[b"sample!!"]));
    assert!(seg.event_ring(i).push(&[b"event..."]));
    let other = Segment::open(&fd).unwrap();
    assert_eq!(other.header().pid, 42);
    assert_eq!(other.info(), b"hello");
    assert_eq!(other.slots_in_use(), 1);
    assert_eq!(other.slot(i).tid.load(Ordering::Relaxed), 1234);
    let mut got = Vec::new();
    other
        .sample_ring(i)
        .drain(|p| got.push(p.to_vec()))
        .unwrap();
    other.event_ring(i).drain(|p| got.push(p.to_vec())).unwrap();
    assert_eq!(got, vec![b"sample!!".to_vec(), b"event...".to_vec()]);
    assert_eq!(
        seg.sample_ring(i).used(),
        0,
        "the producer sees the consumer's progress"
    );
}

#[test]
fn a_private_segment_shared_later_keeps_what_was_written_at_the_same_addresses() {
    let seg = Segment::create_private(SMALL, 42, 1, 7, (11, 13)).unwrap();
    seg.write_info(b"hello");
    let first = seg.claim_slot(1234).unwrap();
    let second = seg.claim_slot(1235).unwrap();
    assert!(seg.sample_ring(first).push(&[b"sample!!"]));
    // Enough events to fill several pages of the second slot's ring.
    let events = (SMALL.event_ring_bytes as usize / 2) / 24;
    for k in 0..events {
        assert!(seg
            .event_ring(second)
            .push(&[&(k as u64).to_le_bytes(), b"event..."]));
    }
    let header_at = seg.header() as *const Header;
    let fd = seg.share().unwrap();
    assert_eq!(seg.header() as *const Header, header_at, "same addresses");
    let other = Segment::open(&fd).unwrap();
    assert_eq!(other.header().pid, 42);
    assert_eq!(other.header().magic, MAGIC);
    assert_eq!(other.header().tsc_anchor, [11, 13]);
    assert_eq!(other.info(), b"hello");
    assert_eq!(other.slots_in_use(), 2);
    assert_eq!(other.slot(second).tid.load(Ordering::Relaxed), 1235);
    let mut got = Vec::new();
    other
        .sample_ring(first)
        .drain(|p| got.push(p.to_vec()))
        .unwrap();
    assert_eq!(got, vec![b"sample!!".to_vec()]);
    let mut n = 0u64;
    other
        .event_ring(second)
        .drain(|p| {
            assert_eq!(&p[..8], &n.to_le_bytes());
            n += 1;
        })
        .unwrap();
    assert_eq!(n as usize, events);
    // Written after sharing: seen by the other side at once.
    assert!(seg.event_ring(first).push(&[b"later..."]));
    let mut later = Vec::new();
    other
        .event_ring(first)
        .drain(|p| later.push(p.to_vec()))
        .unwrap();
    assert_eq!(later, vec![b"later...".to_vec()]);
}

#[test]
fn slots_run_out_and_come_back_when_freed() {
    let (seg, _fd) = Segment::create(SMALL, 1, 1, 0, (0, 0)).unwrap();
    let taken: Vec<u32> = (0..4).map(|t| seg.claim_slot(t).unwrap()).collect();
    assert_eq!(taken, vec![0, 1, 2, 3]);
    assert_eq!(seg.claim_slot(9), None);
    assert_eq!(seg.header().slots_exhausted.load(Ordering::Relaxed), 1);
    seg.end_slot(2);
    assert!(seg.free_slot(2));
    assert_eq!(seg.claim_slot(10), Some(2));
    assert_eq!(seg.slot(2).tid.load(Ordering::Relaxed), 10);
}

#[test]
fn a_fresh_slot_taken_by_a_scan_meanwhile_is_not_handed_out_twice() {
    let (seg, _fd) = Segment::create(SMALL, 1, 1, 0, (0, 0)).unwrap();
    for t in 0..3 {
        assert_eq!(seg.claim_slot(t), Some(t as u32));
    }
    // One claimer draws the last never-used index (3) and is
    // interrupted before it marks the slot live...
    let drawn = seg.header().next_slot.fetch_add(1, Ordering::AcqRel);
    assert_eq!(drawn, 3);
    // ...while another draws past the table and scans for a free slot.
    assert_eq!(seg.claim_slot(20), Some(3));
    // The first one, resumed, must not get slot 3 as well.
    assert_eq!(seg.claim_from(drawn), None);
    assert_eq!(seg.slot(3).tid.load(Ordering::Relaxed), 20);
    // Had a slot been free, it would have got that one instead.
    seg.end_slot(1);
    assert!(seg.free_slot(1));
    assert_eq!(seg.claim_from(drawn), Some(1));
}

#[test]
fn threads_claiming_and_releasing_at_once_never_share_a_slot() {
    const THREADS: i32 = 8;
    const ROUNDS: usize = 2000;
    let layout = Layout { slots: 6, ..SMALL };
    let (seg, _fd) = Segment::create(layout, 1, 1, 0, (0, 0)).unwrap();
    // Who holds each slot (0: nobody), as the claimers see it.
    let owners: Vec<AtomicI32> = (0..layout.slots).map(|_| AtomicI32::new(0)).collect();
    let claimed = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for me in 1..=THREADS {
            let (seg, owners, claimed) = (&seg, &owners, &claimed);
            scope.spawn(move || {
                for _ in 0..ROUNDS {
                    let Some(i) = seg.claim_slot(me) else {
                        std::thread::yield_now();
                        continue;
                    };
                    claimed.fetch_add(1, Ordering::Relaxed);
                    let before = owners[i as usize].swap(me, Ordering::AcqRel);
                    assert_eq!(before, 0, "slot {i} handed to {me} while {before} held it");
                    assert_eq!(seg.slot(i).tid.load(Ordering::Acquire), me);
                    owners[i as usize].store(0, Ordering::Release);
                    seg.end_slot(i);
                    // The collector's part: the drained slot goes back.
                    assert!(seg.free_slot(i));
                }
            });
        }
    });
    let claimed = claimed.load(Ordering::Relaxed);
    let exhausted = u64::from(seg.header().slots_exhausted.load(Ordering::Relaxed));
    assert_eq!(claimed + exhausted, THREADS as u64 * ROUNDS as u64);
    assert!(claimed > 0);
    assert_eq!(seg.slots_in_use(), layout.slots);
    for i in 0..layout.slots {
        assert_eq!(seg.slot(i).state.load(Ordering::Relaxed), slot_state::FREE);
    }
}

#[test]
fn claims_beyond_the_table_are_counted_and_every_slot_goes_to_one_thread() {
    const THREADS: usize = 8;
    const EACH: usize = 4;
    let layout = Layout { slots: 20, ..SMALL };
    let (seg, _fd) = Segment::create(layout, 1, 1, 0, (0, 0)).unwrap();
    let got: Vec<Vec<u32>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let seg = &seg;
                scope.spawn(move || {
                    (0..EACH)
                        .filter_map(|_| seg.claim_slot(t as i32 + 100))
                        .collect::<Vec<u32>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<u32> = got.iter().flatten().copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..20).collect::<Vec<u32>>(), "each slot once");
    assert_eq!(
        seg.header().slots_exhausted.load(Ordering::Relaxed) as usize,
        THREADS * EACH - 20
    );
    for (t, slots) in got.iter().enumerate() {
        for &i in slots {
            assert_eq!(seg.slot(i).tid.load(Ordering::Relaxed), t as i32 + 100);
        }
    }
}

#[test]
fn a_reused_slot_starts_clean_and_owes_no_earlier_delay() {
    let (seg, _fd) = Segment::create(SMALL, 1, 1, 0, (0, 0)).unwrap();
    let i = seg.claim_slot(7).unwrap();
    let slot = seg.slot(i);
    for c in [
        &slot.blocked_since,
        &slot.blocked_ns,
        &slot.taken,
        &slot.lost_full,
        &slot.lost_reentrant,
        &slot.overruns,
        &slot.incomplete,
        &slot.causal_blocked_at,
        &slot.lost_altstack,
    ] {
        c.store(99, Ordering::Relaxed);
    }
    slot.event_busy.store(1, Ordering::Relaxed);
    // Only an ended slot can be given back.
    assert!(!seg.free_slot(i), "a live slot is not freed");
    seg.end_slot(i);
    assert_eq!(slot.state.load(Ordering::Relaxed), slot_state::ENDED);
    assert!(seg.free_slot(i));
    assert!(!seg.free_slot(i), "freed once");
    // Every never-used slot goes first.
    for t in 1..4 {
        assert_ne!(seg.claim_slot(t), Some(i));
    }
    seg.causal().global_delay.store(5_000, Ordering::Relaxed);
    assert_eq!(seg.claim_slot(8), Some(i));
    assert_eq!(slot.tid.load(Ordering::Relaxed), 8);
    assert_eq!(slot.state.load(Ordering::Relaxed), slot_state::LIVE);
    assert_eq!(slot.event_busy.load(Ordering::Relaxed), 0);
    assert_eq!(slot.taken.load(Ordering::Relaxed), 0);
    assert_eq!(slot.blocked_ns.load(Ordering::Relaxed), 0);
    assert_eq!(slot.lost_altstack.load(Ordering::Relaxed), 0);
    assert_eq!(slot.causal_blocked_at.load(Ordering::Relaxed), 0);
    assert_eq!(slot.causal_local.load(Ordering::Relaxed), 5_000);
}

#[test]
fn a_foreign_descriptor_is_refused() {
    // SAFETY: creating a small memfd for the test.
    let fd = unsafe { libc::memfd_create(c"x".as_ptr(), 0) };
    // SAFETY: we own it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sizing our memfd.
    unsafe { libc::ftruncate(fd.as_raw_fd(), HEADER_BYTES as libc::off_t) };
    let err = Segment::open(&fd).err().unwrap();
    assert!(err.to_string().contains("sealed"), "{err}");
}

#[test]
fn a_segment_is_sealed_and_an_unsealed_copy_of_it_is_refused() {
    let (seg, fd) = Segment::create(SMALL, 42, 1, 7, (0, 0)).unwrap();
    // SAFETY: shrinking must fail on the sealed memfd.
    assert_ne!(unsafe { libc::ftruncate(fd.as_raw_fd(), 4096) }, 0);
    // The same bytes in a memfd that could shrink under the reader.
    // SAFETY: a fresh memfd we own.
    let copy = unsafe { OwnedFd::from_raw_fd(libc::memfd_create(c"copy".as_ptr(), 0)) };
    // SAFETY: the segment's mapping holds `len` readable bytes.
    let bytes = unsafe { std::slice::from_raw_parts(seg.base, seg.len) };
    std::fs::File::from(copy.try_clone().unwrap())
        .write_all(bytes)
        .unwrap();
    let err = Segment::open(&copy).err().unwrap();
    assert!(err.to_string().contains("sealed"), "{err}");
    assert!(Segment::open(&fd).is_ok());
}

#[test]
fn the_exec_note_round_trips() {
    let (seg, _fd) = Segment::create(SMALL, 1, 1, 0, (0, 0)).unwrap();
    seg.note_exec(b"/bin/static", exec_reason::STATIC);
    assert_eq!(seg.header().state.load(Ordering::Relaxed), state::EXEC);
    assert_eq!(
        seg.exec_note(),
        (b"/bin/static".to_vec(), exec_reason::STATIC)
    );
    seg.exec_failed();
    assert_eq!(seg.header().state.load(Ordering::Relaxed), state::RUNNING);
}

#[test]
fn the_header_and_slot_layouts_are_the_contract() {
    use std::mem::{offset_of, size_of};
    assert_eq!(offset_of!(Header, magic), 0);
    assert_eq!(offset_of!(Header, version), 8);
    assert_eq!(offset_of!(Header, slots), 12);
    assert_eq!(offset_of!(Header, sample_ring_bytes), 16);
    assert_eq!(offset_of!(Header, event_ring_bytes), 20);
    assert_eq!(offset_of!(Header, total_bytes), 24);
    assert_eq!(offset_of!(Header, pid), 32);
    assert_eq!(offset_of!(Header, ppid), 36);
    assert_eq!(offset_of!(Header, start_ns), 40);
    assert_eq!(offset_of!(Header, info_len), 48);
    assert_eq!(offset_of!(Header, state), 52);
    assert_eq!(offset_of!(Header, tsc_anchor), 64);
    assert_eq!(offset_of!(Header, sampling_on), 80);
    assert_eq!(offset_of!(Header, next_slot), 88);
    assert_eq!(offset_of!(Header, slots_exhausted), 92);
    assert_eq!(offset_of!(Header, exec_reason), 96);
    assert_eq!(offset_of!(Header, exec_note_len), 100);
    assert_eq!(offset_of!(Header, signals), 104);
    assert_eq!(offset_of!(Header, event_waits), 112);
    assert_eq!(offset_of!(Header, events_dropped), 128);
    assert_eq!(size_of::<Header>(), 168);
    assert_eq!(offset_of!(Slot, state), 0);
    assert_eq!(offset_of!(Slot, tid), 4);
    assert_eq!(offset_of!(Slot, blocked_since), 16);
    assert_eq!(offset_of!(Slot, lost_altstack), 88);
    // Each ring index alone on its cache line.
    assert_eq!(offset_of!(Slot, sample_head), 128);
    assert_eq!(offset_of!(Slot, sample_tail), 192);
    assert_eq!(offset_of!(Slot, event_head), 256);
    assert_eq!(offset_of!(Slot, event_tail), 320);
    assert_eq!(size_of::<Slot>(), 384);
}

#[test]
fn the_areas_follow_each_other_in_whole_pages() {
    // Header pages, causal area, slot table, then each slot's sample
    // ring and event ring.
    assert_eq!(CAUSAL_BYTES % 4096, 0);
    let table = HEADER_BYTES + CAUSAL_BYTES;
    assert_eq!(SMALL.slot_table(), table);
    assert_eq!(
        SMALL.rings(),
        table + 4096,
        "4 slots of 384 bytes: one page"
    );
    assert_eq!(SMALL.total(), table + 4096 + 4 * (4096 + 8192));
    let (seg, _fd) = Segment::create(SMALL, 1, 1, 0, (0, 0)).unwrap();
    assert_eq!(seg.header().total_bytes as usize, SMALL.total());
    let base = seg.base as usize;
    assert_eq!(
        seg.causal() as *const CausalArea as usize,
        base + HEADER_BYTES
    );
    assert_eq!(seg.slot(1) as *const Slot as usize, base + table + 384);
    assert_eq!(seg.ring_data(0) as usize, base + SMALL.rings());
    assert_eq!(
        seg.ring_data(2) as usize,
        base + SMALL.rings() + 2 * (4096 + 8192)
    );
}

#[test]
fn layouts_out_of_bounds_are_refused() {
    for layout in [
        Layout { slots: 0, ..SMALL },
        Layout {
            slots: (1 << 16) + 1,
            ..SMALL
        },
        Layout {
            sample_ring_bytes: 4095,
            ..SMALL
        },
        Layout {
            event_ring_bytes: 2048,
            ..SMALL
        },
        Layout {
            event_ring_bytes: 1 << 27,
            ..SMALL
        },
    ] {
        assert!(
            Segment::create(layout, 1, 1, 0, (0, 0)).is_err(),
            "{layout:?}"
        );
    }
}
