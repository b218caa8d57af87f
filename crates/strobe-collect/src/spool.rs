//! The queue's overflow on disk: copied records the writer has not reached
//! yet, held in a file instead of the collector's memory.
//!
//! Owns the spool file (unnamed, in the run directory, or the temporary
//! directory where the run directory's file system has no unnamed files:
//! it vanishes with the collector however the collector ends) and moving a batch's records into
//! it and back. The collector thread appends ([`Spool::spill`]); the writer
//! thread reads each spilled batch back once, in the order the batches were
//! sent ([`Spilled::restore`]), and frees its disk blocks. A program that
//! produces faster than SQLite stores therefore neither waits nor grows the
//! collector's memory: the backlog costs disk (page cache) instead.
//!
//! It never decodes a record and never blocks on anything but the file.

use crate::tap::{Batch, Source};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// Bytes per record in the spooled index: source, thread id, start, end.
const INDEX_BYTES: usize = 16;

/// The spool file and where the next batch goes.
pub struct Spool {
    file: Arc<File>,
    end: u64,
}

/// Where a batch's records wait in the spool.
pub struct Spilled {
    file: Arc<File>,
    at: u64,
    bytes: usize,
    records: usize,
}

impl Spool {
    /// Creates an unnamed spool file in `dir`.
    pub fn create(dir: &Path) -> io::Result<Spool> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
            .mode(0o600)
            .open(dir)?;
        Ok(Spool {
            file: Arc::new(file),
            end: 0,
        })
    }

    /// Moves the records of `batch` (its bytes and their index) into the
    /// file; the batch keeps everything else and remembers where they went.
    /// Returns the bytes written. On an error (a full disk) the batch is
    /// left as it was.
    pub fn spill(&mut self, batch: &mut Batch) -> io::Result<usize> {
        if batch.spilled.is_some() || batch.records.is_empty() {
            return Ok(0);
        }
        let too_far = |v: usize| u32::try_from(v).is_err();
        if too_far(batch.bytes.len()) {
            return Err(io::Error::other("a batch of 4 GiB or more"));
        }
        let mut index = Vec::with_capacity(batch.records.len() * INDEX_BYTES);
        for (source, tid, range) in &batch.records {
            for v in [
                source.code(),
                *tid as u32,
                range.start as u32,
                range.end as u32,
            ] {
                index.extend_from_slice(&v.to_le_bytes());
            }
        }
        let at = self.end;
        self.file.write_all_at(&batch.bytes, at)?;
        self.file
            .write_all_at(&index, at + batch.bytes.len() as u64)?;
        let written = batch.bytes.len() + index.len();
        self.end += written as u64;
        batch.spilled = Some(Spilled {
            file: self.file.clone(),
            at,
            bytes: batch.bytes.len(),
            records: batch.records.len(),
        });
        batch.bytes = Vec::new();
        batch.records = Vec::new();
        Ok(written)
    }
}

impl Spilled {
    /// Bytes it takes in the file.
    pub fn len(&self) -> usize {
        self.bytes + self.records * INDEX_BYTES
    }

    /// Reads the records back into `batch` and frees their disk blocks.
    pub fn restore(self, batch: &mut Batch) -> io::Result<()> {
        let mut bytes = vec![0u8; self.bytes];
        self.file.read_exact_at(&mut bytes, self.at)?;
        let mut index = vec![0u8; self.records * INDEX_BYTES];
        self.file
            .read_exact_at(&mut index, self.at + self.bytes as u64)?;
        let word = |c: &[u8], k: usize| u32::from_le_bytes(c[k * 4..k * 4 + 4].try_into().unwrap());
        let mut records = Vec::with_capacity(self.records);
        for c in index.chunks_exact(INDEX_BYTES) {
            let (start, end) = (word(c, 2) as usize, word(c, 3) as usize);
            let Some(source) = Source::from_code(word(c, 0)) else {
                continue;
            };
            if start <= end && end <= bytes.len() {
                records.push((source, word(c, 1) as i32, start..end));
            }
        }
        batch.bytes = bytes;
        batch.records = records;
        // SAFETY: fallocate on a descriptor we own, over the range this
        // batch took; the rest of the file is untouched. A failure (a file
        // system without holes) only keeps the blocks until the file closes.
        unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                self.at as libc::off_t,
                self.len() as libc::off_t,
            )
        };
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
    fn what_a_spill_returns_is_what_its_batch_gives_back_when_read() {
        // The collector adds what `spill` returns to the bytes waiting on
        // disk and the writer takes `len` off again: they must agree.
        let mut spool = Spool::create(&std::env::temp_dir()).unwrap();
        let mut at = 0;
        for n in [1usize, 7, 300] {
            let mut b = batch(n);
            let bytes = b.bytes.len();
            let written = spool.spill(&mut b).unwrap();
            let spilled = b.spilled.as_ref().unwrap();
            assert_eq!(written, spilled.len());
            assert_eq!(written, bytes + n * INDEX_BYTES);
            assert_eq!(spilled.at, at, "batches follow each other in the file");
            at += written as u64;
            assert_eq!(spool.end, at);
        }
    }

    #[test]
    fn a_batch_with_no_records_or_spilled_already_is_not_written() {
        let mut spool = Spool::create(&std::env::temp_dir()).unwrap();
        let mut empty = batch(0);
        assert_eq!(spool.spill(&mut empty).unwrap(), 0);
        assert!(empty.spilled.is_none());
        let mut b = batch(2);
        spool.spill(&mut b).unwrap();
        let end = spool.end;
        // Its records are on disk: spilling it again changes nothing.
        b.records.push((Source::Events, 1, 0..0));
        assert_eq!(spool.spill(&mut b).unwrap(), 0);
        assert_eq!(spool.end, end);
        assert_eq!(b.records.len(), 1);
    }

    #[test]
    fn index_entries_that_do_not_fit_their_bytes_are_left_out() {
        let mut spool = Spool::create(&std::env::temp_dir()).unwrap();
        let mut b = batch(4);
        spool.spill(&mut b).unwrap();
        let spilled = b.spilled.take().unwrap();
        let index_at = spilled.at + spilled.bytes as u64;
        let entry = |k: u64| index_at + k * INDEX_BYTES as u64;
        let word = |v: u32| v.to_le_bytes();
        // Record 0: a source no code names; record 1: ends past the bytes;
        // record 2: ends before it starts. Record 3 stays.
        spilled.file.write_all_at(&word(9), entry(0)).unwrap();
        spilled
            .file
            .write_all_at(&word(1 << 20), entry(1) + 12)
            .unwrap();
        spilled.file.write_all_at(&word(24), entry(2) + 8).unwrap();
        spilled.file.write_all_at(&word(20), entry(2) + 12).unwrap();
        let want = batch(4);
        spilled.restore(&mut b).unwrap();
        assert_eq!(b.bytes, want.bytes);
        assert_eq!(b.records, want.records[3..]);
    }

    #[test]
    fn batches_come_back_whole_and_in_order() {
        let dir = std::env::temp_dir();
        let mut spool = Spool::create(&dir).unwrap();
        let originals: Vec<Batch> = [3usize, 0, 1000, 1].iter().map(|&n| batch(n)).collect();
        let mut spilled: Vec<Batch> = [3usize, 0, 1000, 1].iter().map(|&n| batch(n)).collect();
        let mut total = 0;
        for b in &mut spilled {
            total += spool.spill(b).unwrap();
            assert!(b.bytes.is_empty() && b.records.is_empty());
            assert_eq!(b.notes, ["kept in memory"]);
        }
        assert_eq!(total, (3 + 1000 + 1) * (8 + INDEX_BYTES));
        for (mut b, want) in spilled.into_iter().zip(&originals) {
            if let Some(s) = b.spilled.take() {
                s.restore(&mut b).unwrap();
            }
            assert_eq!(b.bytes, want.bytes);
            assert_eq!(b.records, want.records);
        }
    }
}
