//! A batch: the records the collector thread copied out of one process's
//! rings, in the order they must be applied, with what else the writer
//! needs to hear about that process (slots freed, notes, damaged rings,
//! `/proc` values, causal results).
//!
//! Owns the batch, copying a ring's records into it, and moving its
//! records to the spool file and back. Never decodes a record beyond its
//! length (the writer does, `process`) and never writes a database.

use crate::source::{CopiedRecord, Source};
use crate::spool::{Spilled, Spool};
use std::io;
use strobe_wire::ring::ShmRing;

/// Records copied out of one process's rings, in the order they must be
/// applied.
#[derive(Default)]
pub struct Batch {
    /// The records' bytes, back to back.
    pub bytes: Vec<u8>,
    /// (source, thread id of the slot, range in `bytes`).
    pub records: Vec<CopiedRecord>,
    /// Sample counters of slots freed in this batch: taken, lost (full),
    /// lost (nested), overruns, incomplete.
    pub retired: [u64; 6],
    /// Messages for the run summary.
    pub notes: Vec<String>,
    /// Rings that held a corrupt record (the rest of what they held was
    /// skipped): the thread and the kind of ring.
    pub corrupt: Vec<(i32, Source)>,
    /// Process-level values read from `/proc` (`process_sampling_freq`).
    pub process_points: Vec<crate::procstat::Point>,
    /// Causal experiments that ended.
    pub causal: Vec<strobe_db::CausalExperiment>,
    /// In-scope samples per selectable unit (sent once, at the end).
    pub causal_samples: Vec<(String, u64)>,
    /// Where `bytes` and `records` wait on disk, when the collector spilled
    /// them ([`Batch::spill`]); the writer restores them first
    /// ([`Batch::unspill`]).
    pub spilled: Option<Spilled>,
}

impl Batch {
    /// Whether the batch carries nothing.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
            && self.spilled.is_none()
            && self.process_points.is_empty()
            && self.causal.is_empty()
            && self.causal_samples.is_empty()
            && self.notes.is_empty()
            && self.corrupt.is_empty()
            && self.retired == [0; 6]
    }

    /// Bytes held (for the collector's bound on queued data).
    pub fn weight(&self) -> usize {
        self.bytes.len() + self.records.len() * std::mem::size_of::<(Source, i32, usize, usize)>()
    }

    /// Adds one record of a kernel sampling ring.
    pub fn push_kernel(&mut self, record: &[u8]) {
        self.bytes.resize(self.bytes.len().next_multiple_of(8), 0);
        let start = self.bytes.len();
        self.bytes.extend_from_slice(record);
        self.records
            .push((Source::Kernel, 0, start..self.bytes.len()));
    }

    /// Copies every record of `ring`; `each` may rewrite the copy. Each
    /// record starts 8-aligned in `bytes` (as in the ring), whatever the
    /// length of the one before: samples are read in place as `u64`
    /// frames (`decode_sample` refuses a misaligned one), and `bytes`
    /// comes from the allocator 16-aligned.
    pub fn copy(
        &mut self,
        ring: &ShmRing,
        source: Source,
        tid: i32,
        mut each: impl FnMut(&mut [u8]),
    ) {
        let drained = ring.drain(|payload| {
            self.bytes.resize(self.bytes.len().next_multiple_of(8), 0);
            let start = self.bytes.len();
            self.bytes.extend_from_slice(payload);
            each(&mut self.bytes[start..]);
            self.records.push((source, tid, start..self.bytes.len()));
        });
        if drained.is_err() {
            self.corrupt.push((tid, source));
        }
    }

    /// Moves the records of the batch (its bytes and their index) into
    /// `spool`; the batch keeps everything else and remembers where they
    /// went. Returns the bytes written (0 for a batch without records or
    /// spilled already). On an error (a full disk) the batch is left as it
    /// was.
    pub fn spill(&mut self, spool: &mut Spool) -> io::Result<usize> {
        if self.spilled.is_some() || self.records.is_empty() {
            return Ok(0);
        }
        let spilled = spool.spill(&self.bytes, &self.records)?;
        let written = spilled.len();
        self.spilled = Some(spilled);
        self.bytes = Vec::new();
        self.records = Vec::new();
        Ok(written)
    }

    /// Reads the records the collector spilled back into the batch (and
    /// frees their disk blocks). `Ok` without anything to do for a batch
    /// that was not spilled; on an error the records stay missing.
    pub fn unspill(&mut self) -> io::Result<()> {
        let Some(spilled) = self.spilled.take() else {
            return Ok(());
        };
        let (bytes, records) = spilled.restore()?;
        self.bytes = bytes;
        self.records = records;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: usize) -> Batch {
        let mut b = Batch::default();
        for k in 0..n {
            let start = b.bytes.len();
            b.bytes.extend_from_slice(&(k as u64 * 7).to_le_bytes());
            let source = [Source::Events, Source::Samples, Source::Kernel][k % 3];
            b.records.push((source, k as i32 - 1, start..b.bytes.len()));
        }
        b.notes.push("kept in memory".into());
        b
    }

    #[test]
    fn a_batch_with_no_records_or_spilled_already_is_not_written() {
        let mut spool = Spool::create(&std::env::temp_dir()).unwrap();
        let mut empty = batch(0);
        assert_eq!(empty.spill(&mut spool).unwrap(), 0);
        assert!(empty.spilled.is_none());
        let mut b = batch(2);
        let written = b.spill(&mut spool).unwrap();
        assert_eq!(written, b.spilled.as_ref().unwrap().len());
        // Its records are on disk: spilling it again changes nothing.
        b.records.push((Source::Events, 1, 0..0));
        assert_eq!(b.spill(&mut spool).unwrap(), 0);
        assert_eq!(b.records.len(), 1);
    }

    #[test]
    fn a_spilled_batch_keeps_the_rest_in_memory_and_comes_back_whole() {
        let mut spool = Spool::create(&std::env::temp_dir()).unwrap();
        for n in [3usize, 0, 1000, 1] {
            let want = batch(n);
            let mut b = batch(n);
            b.spill(&mut spool).unwrap();
            assert!(b.bytes.is_empty() && b.records.is_empty());
            assert_eq!(b.notes, ["kept in memory"]);
            assert_eq!(b.spilled.is_some(), n > 0);
            b.unspill().unwrap();
            assert!(b.spilled.is_none());
            assert_eq!(b.bytes, want.bytes);
            assert_eq!(b.records, want.records);
        }
    }
}
