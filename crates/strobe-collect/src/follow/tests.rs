//! Unit tests of `follow.rs`.

use super::*;
use crate::listen::{Peer, UNKNOWN_GRACE_NS};

/// A descriptor standing for a child's pidfd.
fn pidfd() -> std::io::Result<OwnedFd> {
    Ok(std::fs::File::open("/dev/null")?.into())
}

fn gone(_: i32) -> std::io::Result<OwnedFd> {
    Err(std::io::Error::from_raw_os_error(libc::ESRCH))
}

#[test]
fn an_announced_child_is_expected_until_it_connects_or_ends() {
    let mut e = Expected::default();
    e.announce_with(10, |_| pidfd(), || 0);
    e.announce_with(11, |_| pidfd(), || 0);
    assert_eq!(e.pending.len(), 2);
    // Announced twice (fork, then the child's exec): expected once,
    // its descriptor not opened again.
    e.announce_with(10, |_| panic!("opened twice"), || 0);
    assert_eq!(e.pending.len(), 2);
    e.connected(10);
    assert!(!e.pending.contains_key(&10));
    // A child that connected before its parent's announcement was
    // read is not expected again.
    e.announce_with(10, |_| panic!("already connected"), || 0);
    assert!(!e.pending.contains_key(&10));
    e.child_ended_at(11, 5_000);
    assert!(e.pending.is_empty());
    assert_eq!(e.ended.get(&11), Some(&5_000));
}

#[test]
fn a_child_gone_before_its_announcement_was_read_is_remembered_as_ended() {
    let mut e = Expected::default();
    e.announce_with(12, gone, || 7_000);
    assert!(e.pending.is_empty());
    assert_eq!(e.ended.get(&12), Some(&7_000));
}

#[test]
fn ended_processes_are_forgotten_after_twice_the_listeners_grace() {
    let mut e = Expected::default();
    e.child_ended_at(1, 1_000);
    e.child_ended_at(2, 1_000 + UNKNOWN_GRACE_NS);
    e.forget_ended(1_000 + 2 * UNKNOWN_GRACE_NS);
    assert!(e.ended.contains_key(&1), "kept up to the bound itself");
    e.forget_ended(1_001 + 2 * UNKNOWN_GRACE_NS);
    assert!(!e.ended.contains_key(&1));
    assert!(e.ended.contains_key(&2));
    // A clock that seems to go back keeps them.
    e.forget_ended(0);
    assert!(e.ended.contains_key(&2));
    e.forget_ended(u64::MAX);
    assert!(e.ended.is_empty());
}

/// Parents as `/proc` would show them: 1 ← 50 (the launcher, the
/// run's root) ← 60 ← 70; 80 and 90 are children of 1; 95 of 90.
fn parent_of(pid: i32) -> Option<i32> {
    match pid {
        50 | 80 | 90 => Some(1),
        60 => Some(50),
        70 => Some(60),
        95 => Some(90),
        _ => None,
    }
}

const ME: u32 = 1000;

fn peer(pid: i32, uid: u32) -> Peer {
    Peer { pid, uid }
}

#[test]
fn the_run_is_its_root_and_the_roots_descendants_whoever_their_user() {
    let e = Expected::default();
    let none = |_| false;
    for pid in [50, 60, 70] {
        assert!(e.admits(peer(pid, ME), ME, 50, none, parent_of), "{pid}");
        // `runuser -u postgres -- postgres` under a root launcher.
        assert!(e.admits(peer(pid, 70), ME, 50, none, parent_of), "{pid}");
    }
    for pid in [1, 80, 95, 12345] {
        assert!(!e.admits(peer(pid, ME), ME, 50, none, parent_of), "{pid}");
    }
}

#[test]
fn followed_images_and_expected_children_bring_their_descendants_in() {
    let mut e = Expected::default();
    // 80 outlived its parent of the run (now a child of 1), announced.
    e.announce_with(80, |_| pidfd(), || 0);
    assert!(e.admits(peer(80, 7), ME, 50, |_| false, parent_of));
    // 90 is followed (it connected); 95 is its child.
    let followed = |p| p == 90;
    assert!(e.admits(peer(95, 7), ME, 50, followed, parent_of));
    assert!(!e.admits(peer(95, 7), ME, 50, |_| false, parent_of));
}

#[test]
fn a_process_of_the_run_seen_ended_is_let_in_only_as_the_collectors_user() {
    let mut e = Expected::default();
    // Ended, and gone from /proc: nothing shows whose child it was.
    e.child_ended_at(4242, 0);
    assert!(e.admits(peer(4242, ME), ME, 50, |_| false, parent_of));
    assert!(!e.admits(peer(4242, ME + 1), ME, 50, |_| false, parent_of));
    assert!(!e.admits(peer(4243, ME), ME, 50, |_| false, parent_of));
    e.forget_ended(u64::MAX);
    assert!(!e.admits(peer(4242, ME), ME, 50, |_| false, parent_of));
}

#[test]
fn the_run_ends_when_the_program_ended_and_nothing_of_it_is_left() {
    assert!(run_over(false, true, 0, 0, true));
    assert!(!run_over(false, false, 0, 0, true), "the program runs");
    assert!(!run_over(false, true, 1, 0, true), "an image is followed");
    assert!(!run_over(false, true, 0, 1, true), "a child is expected");
    assert!(!run_over(false, true, 0, 0, false), "a connection waits");
    assert!(run_over(true, false, 3, 2, false), "interrupted");
}

#[test]
fn ids_are_listed_with_a_mark_when_some_are_not_named() {
    assert_eq!(listed(&[12, 13, 14], 3), "12, 13, 14");
    assert_eq!(listed(&[12, 13], 47), "12, 13, …");
    assert_eq!(listed(&[], 0), "");
    assert_eq!(count_of(1, "process", "processes"), "1 process");
    assert_eq!(count_of(0, "process", "processes"), "0 processes");
    assert_eq!(count_of(47, "thread", "threads"), "47 threads");
}

#[test]
fn processes_without_the_runtime_are_grouped_by_image_with_a_few_named() {
    let mut groups = BTreeMap::new();
    for pid in 1..=7 {
        unprofiled_group(
            &mut groups,
            pid,
            exec_reason::STATIC,
            b"/bin/busybox".to_vec(),
        )
        .refused += 1;
    }
    unprofiled_group(
        &mut groups,
        8,
        exec_reason::SETUID,
        b"/bin/busybox".to_vec(),
    )
    .sampled += 1;
    assert_eq!(groups.len(), 2, "one group per image and reason");
    let busybox = &groups[&(b"/bin/busybox".to_vec(), exec_reason::STATIC)];
    assert_eq!(busybox.pids, [1, 2, 3, 4, 5]);
    assert_eq!(busybox.refused, 7);
    // Past the images named, new ones share one group; known ones
    // keep theirs.
    for i in groups.len()..IMAGES_NAMED {
        unprofiled_group(
            &mut groups,
            100,
            exec_reason::STATIC,
            format!("/x/{i}").into(),
        );
    }
    assert_eq!(groups.len(), IMAGES_NAMED);
    unprofiled_group(&mut groups, 200, exec_reason::STATIC, b"/y/new".to_vec());
    unprofiled_group(&mut groups, 201, exec_reason::STATIC, b"/y/newer".to_vec());
    unprofiled_group(
        &mut groups,
        9,
        exec_reason::STATIC,
        b"/bin/busybox".to_vec(),
    );
    assert_eq!(groups.len(), IMAGES_NAMED + 1);
    let others = &groups[&(b"other images".to_vec(), exec_reason::STATIC)];
    assert_eq!(others.pids, [200, 201]);
    assert!(!groups.contains_key(&(b"/y/new".to_vec(), exec_reason::STATIC)));
}

#[test]
fn a_group_of_processes_without_the_runtime_is_one_line() {
    let group = Unprofiled {
        pids: vec![10, 11],
        sampled: 1,
        gone: 1,
        ..Unprofiled::default()
    };
    assert_eq!(
        group.note(b"/bin/static", exec_reason::STATIC),
        "2 processes of /bin/static (pids 10, 11) ran a static image (nothing can be \
         preloaded into it): 1 process sampled by the kernel from when the collector saw \
         it start (no regions, markers or tracing); 1 process ended before the collector \
         could sample it"
    );
    let group = Unprofiled {
        pids: vec![1, 2, 3, 4, 5],
        refused: 7,
        why_refused: Some("kernel sampling is off".into()),
        ..Unprofiled::default()
    };
    assert_eq!(
        group.note(b"env", exec_reason::ENVIRONMENT),
        "7 processes of env (pids 1, 2, 3, 4, 5, …) started with a cleared environment \
         (strobe's runtime was not passed on): 7 processes not profiled (kernel sampling \
         is off)"
    );
    let group = Unprofiled {
        pids: vec![3],
        sampled: 2,
        ..Unprofiled::default()
    };
    assert!(group
        .note(b"x", exec_reason::SETUID)
        .contains("2 processes sampled by the kernel from when the collector saw each start"));
}

/// The collector's shared state for a run writing into `dir` (or
/// into nothing, when its run directory cannot be made).
fn shared(run_dir: Option<&std::path::Path>) -> Shared {
    let mut options = crate::fuzz::options_for(&std::env::temp_dir());
    let dir = run_dir.map(std::path::Path::to_path_buf);
    options.run_dir = Arc::new(crate::RunDir::new(move || {
        dir.clone()
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EROFS))
    }));
    Shared {
        options,
        report: Default::default(),
        program_done: Default::default(),
        interrupted: Default::default(),
        live: Default::default(),
        wake: std::fs::File::open("/dev/null").unwrap().into(),
        done: Default::default(),
        queued: Default::default(),
        spooled: Default::default(),
        kernel: Default::default(),
        kernel_for_all: Default::default(),
        announced: Default::default(),
    }
}

fn taps(shared: &Shared) -> (Taps<'_>, mpsc::Receiver<ToWriter>) {
    let (to_writer, from_taps) = mpsc::channel();
    let taps = Taps::new(shared, to_writer);
    (taps, from_taps)
}

/// A batch of `n` records of 16 bytes each.
fn batch(n: usize) -> Batch {
    let mut b = Batch::default();
    for k in 0..n {
        let start = b.bytes.len();
        b.bytes.extend_from_slice(&[k as u8; 16]);
        b.records
            .push((crate::source::Source::Events, 7, start..b.bytes.len()));
    }
    b
}

/// The batch of the next message to the writer.
fn sent(from: &mpsc::Receiver<ToWriter>) -> Batch {
    match from.try_recv() {
        Ok(ToWriter::Records { batch, .. }) => batch,
        _ => panic!("no records sent"),
    }
}

#[test]
fn batches_wait_in_memory_until_the_backlog_passes_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let shared = shared(Some(dir.path()));
    let (mut t, from) = taps(&shared);
    let b = batch(3);
    let weight = b.weight();
    assert_eq!(
        t.send(b, |batch| ToWriter::Records { id: 1, batch }),
        weight
    );
    assert_eq!(shared.queued.load(Ordering::SeqCst), weight);
    assert_eq!(shared.spooled.load(Ordering::SeqCst), 0);
    assert!(t.spool.is_none(), "no spool file until one is needed");
    let got = sent(&from);
    assert!(got.spilled.is_none());
    assert_eq!(got.records.len(), 3);
}

#[test]
fn past_the_bound_a_batchs_records_wait_on_disk_and_the_counts_balance() {
    let dir = tempfile::tempdir().unwrap();
    let shared = shared(Some(dir.path()));
    let (mut t, from) = taps(&shared);
    shared.queued.store(SPILL_ABOVE - 10, Ordering::SeqCst);
    let mut b = batch(4);
    b.notes.push("stays in memory".into());
    let weight = b.weight();
    let original = batch(4);
    assert_eq!(
        t.send(b, |batch| ToWriter::Records { id: 1, batch }),
        weight
    );
    let mut got = sent(&from);
    assert!(got.records.is_empty() && got.bytes.is_empty());
    assert_eq!(got.notes, ["stays in memory"]);
    let spilled = got.spilled.as_ref().expect("on disk");
    // What the writer takes off the counts when it reads the batch
    // back is what the collector added.
    assert_eq!(shared.spooled.load(Ordering::SeqCst), spilled.len() as u64);
    assert_eq!(shared.queued.load(Ordering::SeqCst), SPILL_ABOVE - 10);
    got.unspill().unwrap();
    assert_eq!(got.bytes, original.bytes);
    assert_eq!(got.records, original.records);
    // The spool file is unnamed: nothing left in the run directory.
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
}

#[test]
fn without_a_run_directory_the_spool_goes_to_the_temporary_directory() {
    let shared = shared(None);
    let (mut t, from) = taps(&shared);
    shared.queued.store(SPILL_ABOVE, Ordering::SeqCst);
    t.send(batch(2), |batch| ToWriter::Records { id: 1, batch });
    assert!(sent(&from).spilled.is_some());
    assert!(matches!(t.spool, Some(Ok(_))));
    assert!(crate::lock(&shared.report).notes.is_empty());
}

#[test]
fn threads_handed_to_the_kernel_are_one_line_per_reason_and_outcome() {
    let mut noted: BTreeMap<(&'static str, String), Vec<i32>> = BTreeMap::new();
    noted.insert(
        ("blocked the sampling signal", "not sampled".into()),
        vec![7],
    );
    noted.insert(
        ("had no sampler", "sampled by the kernel".into()),
        (20..28).collect(),
    );
    assert_eq!(
        threads_noted(&noted),
        [
            "thread 7 blocked the sampling signal: not sampled".to_string(),
            "8 threads (20, 21, 22, 23, 24, …) had no sampler: sampled by the kernel".to_string()
        ]
    );
    assert!(threads_noted(&BTreeMap::new()).is_empty());
}
