//! The collector's decoders run on a segment's bytes, for fuzzing.
//!
//! A segment is input from the program, which may be buggy or hostile and
//! may change it at any moment. Owns the harness that feeds bytes to
//! everything the collector does with a runtime's segment
//! ([`run_segment`]: open and check it, copy its rings as the collector
//! thread does, decode the copies into a database as the writer thread
//! does, finish it), optionally with the bytes changing under the copy,
//! and making a corpus of real segments from real programs
//! ([`capture_segments`]). Never used by a run.

use crate::batch::Batch;
use crate::listen::Listener;
use crate::process::Process;
use crate::tap::{Found, Tap};
use crate::{Options, RunDir, Timing};
use std::ffi::OsString;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strobe_wire::config::{RuntimeConfig, COLLECTOR_ENV, CONFIG_ENV};
use strobe_wire::segment::{sealed_memfd, Layout, Segment};

/// The layout of the segments [`capture_segments`] asks runtimes for:
/// small enough to keep in the repository and to fuzz quickly.
pub const CORPUS_LAYOUT: Layout = Layout {
    slots: 8,
    sample_ring_bytes: 1 << 16,
    event_ring_bytes: 1 << 16,
};

/// What the collector made of one segment.
#[derive(Debug)]
pub struct Outcome {
    /// The database it wrote, if the segment recorded anything.
    pub database: Option<PathBuf>,
    /// The notes it gave (damaged rings among them).
    pub notes: Vec<String>,
}

/// How the bytes change while the collector reads them.
pub enum Changes<'a> {
    /// They do not.
    None,
    /// `between` rewrites them between the collector's copies (it copies
    /// three times).
    Between(&'a mut dyn FnMut(&mut [u8])),
    /// Another thread writes pseudo-random bytes (from this seed) at
    /// pseudo-random places of the first [`RACE_SPAN`] bytes while the
    /// collector copies and decodes.
    Racing { seed: u64 },
}

/// Where [`Changes::Racing`] writes: the header and the slot table (ring
/// indices, counters, states), where a change hurts most.
pub const RACE_SPAN: usize = 64 << 10;

/// Runs `bytes` as a runtime's segment through the collector: the checks
/// of a handover, three copies of its rings (with `changes` applied),
/// decoding into a database in `dir` and finishing it. Errors are what
/// the collector refuses at the door (an invalid header); anything else
/// it must survive: a panic here is a bug.
pub fn run_segment(bytes: &[u8], dir: &Path, changes: Changes<'_>) -> io::Result<Outcome> {
    let fd = sealed_memfd(bytes.len())?;
    // The program's side: writes into the memfd the collector maps.
    let program = std::fs::File::from(fd.try_clone()?);
    program.write_all_at(bytes, 0)?;
    let segment = Arc::new(Segment::open(&fd)?);
    let options = options_for(dir);
    let pid = std::process::id() as i32;
    let mut tap = Tap::new(
        1,
        pid,
        segment.clone(),
        strobe_core::pidfd::open(pid)?,
        &options,
    );
    let mut process = Process::new(pid, segment);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let mut between = None;
        match changes {
            Changes::None => {}
            Changes::Between(f) => between = Some(f),
            Changes::Racing { seed } => {
                let (program, stop) = (&program, &stop);
                let span = RACE_SPAN.min(bytes.len());
                scope.spawn(move || race(program, span, seed, stop));
            }
        }
        for _ in 0..3 {
            let mut batch = Batch::default();
            tap.drain(&mut batch, &mut Found::default());
            process.apply(batch, &options);
            if let Some(f) = between.as_mut() {
                let mut now = vec![0u8; bytes.len()];
                program.read_exact_at(&mut now, 0)?;
                f(&mut now);
                program.write_all_at(&now, 0)?;
            }
        }
        let mut last = Batch::default();
        tap.finish(&mut last);
        process.apply(last, &options);
        stop.store(true, Ordering::Relaxed);
        let (database, notes) = process.finish(&options);
        Ok(Outcome { database, notes })
    })
}

/// [`run_segment`] of `bytes` as they are, then (with `race_seed`) with
/// another thread changing them under the collector; the message of the
/// panic, if one happened (a bug: the collector must survive any bytes).
pub fn survives(bytes: &[u8], dir: &Path, race_seed: Option<u64>) -> Result<(), String> {
    for race in std::iter::once(None).chain(race_seed.map(Some)) {
        let result = std::panic::catch_unwind(|| {
            let changes = race.map_or(Changes::None, |seed| Changes::Racing { seed });
            // The next case writes the same database name again.
            if let Ok(Outcome {
                database: Some(db), ..
            }) = run_segment(bytes, dir, changes)
            {
                let _ = std::fs::remove_file(db);
            }
        });
        if let Err(panic) = result {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            return Err(format!("racing {}: {message}", race.is_some()));
        }
    }
    Ok(())
}

/// Writes pseudo-random bytes into the first `span` bytes of the
/// segment, one at a time, until `stop`.
fn race(program: &std::fs::File, span: usize, seed: u64, stop: &AtomicBool) {
    let mut rng = fastrand::Rng::with_seed(seed);
    while !stop.load(Ordering::Relaxed) && span > 0 {
        let at = rng.u64(..span as u64);
        let _ = program.write_at(&[rng.u8(..)], at);
    }
}

/// The collector's options for a harness run writing into `dir` (and for
/// the collector's unit tests).
pub(crate) fn options_for(dir: &Path) -> Options {
    let dir = dir.to_path_buf();
    Options {
        run_root: std::process::id() as i32,
        run_dir: Arc::new(RunDir::new(move || Ok(dir.clone()))),
        flush_interval: Duration::from_secs(3600),
        timing: [Timing {
            period_ns: 4_000_000,
            ..Timing::default()
        }; 2],
        windows: Default::default(),
        settings: Vec::new(),
        poll_interval: Duration::from_millis(5),
        max_depth: 512,
        kernel_for_all: false,
        kernel_threads: None,
        counters: Vec::new(),
        metrics: Vec::new(),
        process_sampling_hz: 0.0,
        time_filter_ns: 0,
        causal: None,
    }
}

/// Runs `argv` under `runtime` (with no environment but `PATH`) and
/// segments of [`CORPUS_LAYOUT`], takes
/// every segment its processes hand over, and once they all ended (or
/// `limit` passed) writes each one, its rings never read, to
/// `<out>/<name>-<n>.seg` ([`pack`]ed). Returns the files written.
pub fn capture_segments(
    runtime: &Path,
    argv: &[OsString],
    out: &Path,
    name: &str,
    limit: Duration,
) -> io::Result<Vec<PathBuf>> {
    let mut listener = Listener::bind()?;
    let config = RuntimeConfig {
        layout: CORPUS_LAYOUT,
        tsc: strobe_core::clock::tsc_is_reliable(),
        ..RuntimeConfig::default()
    };
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no program to run"))?;
    // Only what the program needs: the segment keeps the environment, and
    // the corpus lives in the repository.
    let mut child = std::process::Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LD_PRELOAD", runtime)
        .env(CONFIG_ENV, config.encode())
        .env(COLLECTOR_ENV, listener.name())
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let me = std::process::id() as i32;
    let mut segments = Vec::new();
    let started = std::time::Instant::now();
    let mut ended_at = None;
    loop {
        let now = strobe_core::clock::now_ns();
        let accepted =
            listener.accept(now, |peer| crate::ancestry::descends(peer.pid, |p| p == me));
        segments.extend(accepted.handovers.into_iter().map(|h| h.segment));
        if ended_at.is_none() && child.try_wait()?.is_some() {
            ended_at = Some(std::time::Instant::now());
        }
        // Children that outlive the program hand over a little later.
        let settled = ended_at.is_some_and(|t| t.elapsed() > Duration::from_millis(300));
        if settled || started.elapsed() > limit {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
    let mut written = Vec::new();
    for (n, fd) in segments.into_iter().enumerate() {
        let mut bytes = Vec::new();
        std::fs::File::from(fd).read_to_end(&mut bytes)?;
        let path = out.join(format!("{name}-{n}.seg"));
        std::fs::write(&path, pack(&bytes))?;
        written.push(path);
    }
    Ok(written)
}

/// The packed segments (`*.seg`, [`pack`]) in `dir`, in name order, with
/// their files; files that do not unpack are left out.
pub fn corpus(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|x| x == "seg"));
    files.sort();
    files
        .into_iter()
        .filter_map(|p| Some((p.clone(), unpack(&std::fs::read(&p).ok()?)?)))
        .collect()
}

/// The first bytes of a packed segment file ([`pack`]).
const PACK_MAGIC: &[u8; 8] = b"STRBSEG1";
const PAGE: usize = 4096;

/// A segment as a file: its length, then only its pages that hold
/// something (offset and bytes), so a mostly empty 1 MiB segment takes
/// kilobytes in the repository.
pub fn pack(bytes: &[u8]) -> Vec<u8> {
    let mut out = PACK_MAGIC.to_vec();
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    for (i, page) in bytes.chunks(PAGE).enumerate() {
        if page.iter().any(|&b| b != 0) {
            out.extend_from_slice(&((i * PAGE) as u64).to_le_bytes());
            out.extend_from_slice(&(page.len() as u64).to_le_bytes());
            out.extend_from_slice(page);
        }
    }
    out
}

/// The segment a [`pack`]ed file holds; `None` for anything else.
pub fn unpack(file: &[u8]) -> Option<Vec<u8>> {
    let rest = file.strip_prefix(PACK_MAGIC)?;
    let word = |b: &[u8]| Some(u64::from_le_bytes(b.get(..8)?.try_into().ok()?) as usize);
    let len = word(rest)?;
    if len > 1 << 30 {
        return None;
    }
    let mut bytes = vec![0u8; len];
    let mut at = &rest[8..];
    while !at.is_empty() {
        let (offset, n) = (word(at)?, word(at.get(8..)?)?);
        let page = at.get(16..16usize.checked_add(n)?)?;
        bytes
            .get_mut(offset..offset.checked_add(n)?)?
            .copy_from_slice(page);
        at = &at[16 + n..];
    }
    Some(bytes)
}

/// The fuzzer's seedable pseudo-random generator (fastrand's): the same
/// seed gives the same mutations on every machine.
pub struct Rng(fastrand::Rng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(fastrand::Rng::with_seed(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.u64(..)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            self.0.usize(..n)
        }
    }
}

/// Values that break length and index arithmetic.
const EDGES: [u64; 12] = [
    0,
    1,
    7,
    8,
    4095,
    4096,
    65_536,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 63,
    u64::MAX,
];

/// Changes `bytes` in 1 to 8 places, mostly where the segment holds
/// something (header, slots, records): bit flips, random bytes, edge
/// values as aligned 32- and 64-bit words (lengths, indices, counts),
/// copies from elsewhere in the segment, and runs of 0x00 or 0xff.
pub fn mutate(bytes: &mut [u8], rng: &mut Rng) {
    if bytes.is_empty() {
        return;
    }
    let used: Vec<usize> = bytes
        .chunks(PAGE)
        .enumerate()
        .filter(|(_, p)| p.iter().any(|&b| b != 0))
        .map(|(i, _)| i * PAGE)
        .collect();
    for _ in 0..1 + rng.below(8) {
        let at = if !used.is_empty() && rng.below(10) < 8 {
            (used[rng.below(used.len())] + rng.below(PAGE)).min(bytes.len() - 1)
        } else {
            rng.below(bytes.len())
        };
        match rng.below(6) {
            0 => bytes[at] ^= 1 << rng.below(8),
            1 => bytes[at] = rng.next_u64() as u8,
            2 => {
                let at = at & !3;
                let edge = EDGES[rng.below(EDGES.len())] as u32;
                if let Some(w) = bytes.get_mut(at..at + 4) {
                    w.copy_from_slice(&edge.to_le_bytes());
                }
            }
            3 => {
                let at = at & !7;
                let edge = EDGES[rng.below(EDGES.len())];
                if let Some(w) = bytes.get_mut(at..at + 8) {
                    w.copy_from_slice(&edge.to_le_bytes());
                }
            }
            4 => {
                let n = 8 + rng.below(57);
                let from = rng.below(bytes.len());
                if from + n <= bytes.len() && at + n <= bytes.len() {
                    bytes.copy_within(from..from + n, at);
                }
            }
            _ => {
                let n = (8 + rng.below(249)).min(bytes.len() - at);
                let fill = if rng.below(2) == 0 { 0 } else { 0xff };
                bytes[at..at + n].fill(fill);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_segment_unpacks_to_the_same_bytes() {
        let mut bytes = vec![0u8; 5 * PAGE + 100];
        bytes[3] = 1;
        bytes[3 * PAGE + 7] = 2;
        bytes[5 * PAGE + 99] = 3;
        let packed = pack(&bytes);
        assert!(packed.len() < 4 * PAGE);
        assert_eq!(unpack(&packed).unwrap(), bytes);
        assert_eq!(unpack(b"not a segment"), None);
        assert_eq!(unpack(&packed[..packed.len() - 1]), None);
    }

    #[test]
    fn the_same_seed_mutates_alike() {
        let base: Vec<u8> = (0..3 * PAGE).map(|i| (i % 251) as u8).collect();
        let (mut a, mut b) = (base.clone(), base.clone());
        mutate(&mut a, &mut Rng::new(7));
        mutate(&mut b, &mut Rng::new(7));
        assert_eq!(a, b);
        assert_ne!(a, base);
    }
}
