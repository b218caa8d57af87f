//! The exporters' sample stream and aggregation against the database's own
//! `strobe_samples` view: every sample once, in time order, with its kind,
//! weight and stack, whether processes are read by reader threads (few),
//! on the profile's connection (many) or a large one split in two.

mod fixture;

use std::collections::HashMap;

use strobe_db::scan::sample_groups as groups;
use strobe_db::visit::{Order, ProfileSink, SampleEvent, Stacks, Stream};
use strobe_db::{
    DbError, ProcessInfo, Profile, SampleKind, SampleMeta, StackFrame, ThreadInfo, Writer,
};

type Key = (String, i64, i64, i64, Option<i64>, String, u64);

/// The view's samples as sortable keys.
fn from_view(p: &Profile) -> Vec<Key> {
    let mut v: Vec<Key> = p
        .samples_unresolved()
        .unwrap()
        .map(|s| {
            let s = s.unwrap();
            (
                s.guid,
                s.pid,
                s.tid,
                s.timestamp,
                s.stack_id,
                s.kind,
                s.weight_ns,
            )
        })
        .collect();
    v.sort();
    v
}

/// The visit's samples: checks the order, returns sortable keys.
fn from_stream(p: &Profile) -> Vec<Key> {
    struct Collect {
        keys: Vec<Key>,
        last: (i64, i64),
    }
    impl ProfileSink for Collect {
        type Error = DbError;
        fn order(&self) -> Order {
            Order::Sequence(&[Stream::Samples])
        }
        fn sample(&mut self, s: &SampleEvent<'_>, _: &mut Stacks<'_>) -> Result<(), DbError> {
            assert!(
                (s.timestamp, s.tid) >= self.last,
                "out of order at {}",
                s.timestamp
            );
            self.last = (s.timestamp, s.tid);
            self.keys.push((
                s.guid.to_string(),
                s.pid,
                s.tid,
                s.timestamp,
                s.stack_id,
                s.kind.category().to_string(),
                s.weight_ns,
            ));
            Ok(())
        }
    }
    let mut c = Collect {
        keys: Vec::new(),
        last: (i64::MIN, i64::MIN),
    };
    p.visit(&mut c).unwrap();
    c.keys.sort();
    c.keys
}

#[test]
fn many_processes_are_merged_in_time_order_with_their_weights() {
    let dir = tempfile::tempdir().unwrap();
    // More processes than reader threads: read on the profile's connection.
    let mut files = Vec::new();
    let mut exp = fixture::Expected::default();
    for k in 0..10u32 {
        let path = dir.path().join(format!("p{k}.db"));
        exp.add(&fixture::write_process(&path, 100 + k, "node-a", 3, 4));
        files.push(path);
    }
    let p = Profile::open_files(&files).unwrap();
    let view = from_view(&p);
    assert_eq!(from_stream(&p), view);
    assert_eq!(
        view.len() as u64,
        exp.samples + exp.wall_samples + exp.off_cpu_samples
    );
    let g = groups(&p, 1_000_000).unwrap();
    assert_eq!(g.iter().map(|g| g.samples).sum::<u64>(), exp.samples);
    assert_eq!(g.iter().map(|g| g.cpu_ns).sum::<u64>(), exp.cpu_ns);
    assert_eq!(
        g.iter().map(|g| g.off_cpu_samples).sum::<u64>(),
        exp.off_cpu_samples
    );
    assert_eq!(g.iter().map(|g| g.off_cpu_ns).sum::<u64>(), exp.off_cpu_ns);
    // Few processes: reader threads.
    let p = Profile::open_files(&files[..3]).unwrap();
    assert_eq!(from_stream(&p), from_view(&p));
}

#[test]
fn a_large_process_written_out_of_order_is_sorted_and_windowed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.db");
    let info = ProcessInfo {
        pid: 7,
        ppid: 1,
        init_ns: 1_000,
        start_ns: 1_000,
        start_unix_ns: 1_763_000_000_000_000_000,
        command: "big".into(),
        environment: Vec::new(),
    };
    let mut w = Writer::create(&path, &info, Default::default()).unwrap();
    let tracks: Vec<_> = (0..3)
        .map(|k| {
            let t = w
                .add_thread(&ThreadInfo {
                    tid: 7 + k,
                    name: None,
                    start_ns: Some(1_000),
                })
                .unwrap();
            w.add_track(Some(t), "samples").unwrap()
        })
        .collect();
    // Past the split point (two reader threads), in scrambled time order.
    let n = 150_000u64;
    let mut cpu_ns = 0;
    for i in 0..n {
        let ts = 10_000 + (i * 7_919) % n * 10;
        let kind = if i % 5 == 0 {
            SampleKind::OffCpu
        } else {
            SampleKind::Cpu
        };
        let weight_ns = 1_000 + i % 17;
        if kind == SampleKind::Cpu {
            cpu_ns += weight_ns;
        }
        let frames = [StackFrame {
            module: None,
            rel_pc: 0x1000 + i % 50,
        }];
        let meta = SampleMeta {
            timestamp_ns: ts,
            kind,
            weight_ns,
        };
        w.append_sample(tracks[(i % 3) as usize], meta, &frames)
            .unwrap();
    }
    w.finish(10_000 + n * 10 + 1).unwrap();
    let mut p = Profile::open_files(&[path]).unwrap();
    let all = from_stream(&p);
    assert_eq!(all.len() as u64, n);
    assert_eq!(all, from_view(&p));
    let g = groups(&p, 1).unwrap();
    assert_eq!(g.iter().map(|g| g.cpu_ns).sum::<u64>(), cpu_ns);
    let per_thread: HashMap<i64, u64> = g.iter().fold(HashMap::new(), |mut m, g| {
        *m.entry(g.tid).or_default() += g.samples + g.off_cpu_samples;
        m
    });
    assert_eq!(per_thread.len(), 3);
    assert_eq!(per_thread.values().sum::<u64>(), n);
    p.set_window(
        Some(strobe_db::TimeBound::Percent(25.0)),
        Some(strobe_db::TimeBound::Percent(30.0)),
    )
    .unwrap();
    let windowed = from_stream(&p);
    assert!(!windowed.is_empty() && windowed.len() < all.len() / 10);
    assert_eq!(windowed, from_view(&p));
}

/// A sink that records what it is handed and fails where told.
struct Recorder {
    order: Order,
    fail_after: Option<usize>,
    calls: Vec<String>,
}

#[derive(Debug)]
enum RecorderError {
    Db(DbError),
    Mine(usize),
}

impl From<DbError> for RecorderError {
    fn from(e: DbError) -> Self {
        RecorderError::Db(e)
    }
}

impl Recorder {
    fn note(&mut self, what: String) -> Result<(), RecorderError> {
        self.calls.push(what);
        match self.fail_after {
            Some(n) if self.calls.len() > n => Err(RecorderError::Mine(self.calls.len())),
            _ => Ok(()),
        }
    }
}

impl ProfileSink for Recorder {
    type Error = RecorderError;
    fn order(&self) -> Order {
        self.order
    }
    fn begin(&mut self, run: &strobe_db::visit::Run) -> Result<(), RecorderError> {
        self.note(format!("begin {}", run.processes.len()))
    }
    fn sample(&mut self, s: &SampleEvent<'_>, _: &mut Stacks<'_>) -> Result<(), RecorderError> {
        self.note(format!("sample {}", s.timestamp))
    }
    fn sample_counts(&mut self, c: strobe_db::visit::ProcessSamples) -> Result<(), RecorderError> {
        self.note(format!("counts {}", c.groups.len()))
    }
    fn counter(&mut self, _: &strobe_db::visit::CounterRow) -> Result<(), RecorderError> {
        self.note("counter".into())
    }
    fn stream_end(&mut self, stream: Stream) -> Result<(), RecorderError> {
        self.note(format!("end {stream:?}"))
    }
}

#[test]
fn a_visit_hands_the_streams_in_the_sinks_order_and_returns_the_sinks_own_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for k in 0..3u32 {
        let path = dir.path().join(format!("p{k}.db"));
        fixture::write_process(&path, 200 + k, "node-a", 2, 3);
        files.push(path);
    }
    let p = Profile::open_files(&files).unwrap();
    let samples = from_view(&p).len();
    assert!(samples > 0);
    let mut r = Recorder {
        order: Order::Sequence(&[Stream::SampleCounts, Stream::Samples]),
        fail_after: None,
        calls: Vec::new(),
    };
    p.visit(&mut r).unwrap();
    assert_eq!(r.calls[0], "begin 3");
    let kinds: Vec<&str> = r
        .calls
        .iter()
        .map(|c| c.split(' ').next().unwrap())
        .collect();
    // Counts per process, then every sample, each stream closed in turn.
    let end_counts = kinds.iter().position(|k| *k == "end").unwrap();
    assert!(kinds[1..end_counts].iter().all(|k| *k == "counts"));
    assert_eq!(end_counts - 1, 3, "one count per process");
    assert_eq!(r.calls[end_counts], "end SampleCounts");
    assert_eq!(kinds.iter().filter(|k| **k == "sample").count(), samples);
    assert_eq!(r.calls.last().unwrap(), "end Samples");
    // A sink's error stops the visit and comes back as the sink's own,
    // from the counting workers too.
    for fail_after in [1, 2, end_counts + 1] {
        let mut r = Recorder {
            order: Order::Sequence(&[Stream::SampleCounts, Stream::Samples]),
            fail_after: Some(fail_after),
            calls: Vec::new(),
        };
        match p.visit(&mut r) {
            Err(RecorderError::Mine(n)) => assert_eq!(n, fail_after + 1),
            Err(RecorderError::Db(e)) => panic!("expected the sink's error, got {e}"),
            Ok(()) => panic!("expected the sink's error, the visit went on"),
        }
        assert_eq!(r.calls.len(), fail_after + 1, "nothing after the error");
    }
}
