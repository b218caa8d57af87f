//! The queue's overflow on disk: copied records the writer has not reached
//! yet, held in a file instead of the collector's memory.
//!
//! Owns the spool file (unnamed, in the run directory, or the temporary
//! directory where the run directory's file system has no unnamed files:
//! it vanishes with the collector however the collector ends) and the
//! layout of a batch's records in it (bytes, then their index). The
//! collector thread appends ([`Spool::spill`], through `Batch::spill`);
//! the writer thread reads each spilled batch back once, in the order the
//! batches were sent ([`Spilled::restore`]), and frees its disk blocks. A program that
//! produces faster than SQLite stores therefore neither waits nor grows the
//! collector's memory: the backlog costs disk (page cache) instead.
//!
//! It never decodes a record and never blocks on anything but the file.

use crate::source::{CopiedRecord, Source};
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

    /// Appends records (`bytes`, and `records`: each one's source, thread
    /// and range in `bytes`) to the file and says where they went. On an
    /// error (a full disk) the end of the file stays where it was.
    pub fn spill(&mut self, bytes: &[u8], records: &[CopiedRecord]) -> io::Result<Spilled> {
        let too_far = |v: usize| u32::try_from(v).is_err();
        if too_far(bytes.len()) {
            return Err(io::Error::other("a batch of 4 GiB or more"));
        }
        let mut index = Vec::with_capacity(records.len() * INDEX_BYTES);
        for (source, tid, range) in records {
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
        self.file.write_all_at(bytes, at)?;
        self.file.write_all_at(&index, at + bytes.len() as u64)?;
        let written = bytes.len() + index.len();
        self.end += written as u64;
        Ok(Spilled {
            file: self.file.clone(),
            at,
            bytes: bytes.len(),
            records: records.len(),
        })
    }
}

impl Spilled {
    /// Bytes it takes in the file.
    pub fn len(&self) -> usize {
        self.bytes + self.records * INDEX_BYTES
    }

    /// Reads the records back (their bytes, and each one's source, thread
    /// and range in them) and frees their disk blocks.
    pub fn restore(self) -> io::Result<(Vec<u8>, Vec<CopiedRecord>)> {
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
        Ok((bytes, records))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Records = (Vec<u8>, Vec<CopiedRecord>);

    /// `n` records of 8 bytes each, from every source in turn.
    fn records(n: usize) -> Records {
        let mut bytes = Vec::new();
        let mut index = Vec::new();
        for k in 0..n {
            let start = bytes.len();
            bytes.extend_from_slice(&(k as u64 * 7).to_le_bytes());
            let source = [Source::Events, Source::Samples, Source::Kernel][k % 3];
            index.push((source, k as i32 - 1, start..bytes.len()));
        }
        (bytes, index)
    }

    #[test]
    fn what_a_spill_writes_is_what_its_handle_gives_back_when_read() {
        // The collector adds what `spill` wrote to the bytes waiting on
        // disk and the writer takes `len` off again: they must agree.
        let mut spool = Spool::create(&std::env::temp_dir()).unwrap();
        let mut at = 0;
        for n in [1usize, 7, 300] {
            let (bytes, index) = records(n);
            let spilled = spool.spill(&bytes, &index).unwrap();
            let written = spilled.len();
            assert_eq!(written, bytes.len() + n * INDEX_BYTES);
            assert_eq!(spilled.at, at, "batches follow each other in the file");
            at += written as u64;
            assert_eq!(spool.end, at);
        }
    }

    #[test]
    fn index_entries_that_do_not_fit_their_bytes_are_left_out() {
        let mut spool = Spool::create(&std::env::temp_dir()).unwrap();
        let (bytes, index) = records(4);
        let spilled = spool.spill(&bytes, &index).unwrap();
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
        let (got_bytes, got_index) = spilled.restore().unwrap();
        assert_eq!(got_bytes, bytes);
        assert_eq!(got_index, index[3..]);
    }

    #[test]
    fn records_come_back_whole_and_in_order() {
        let mut spool = Spool::create(&std::env::temp_dir()).unwrap();
        let originals: Vec<Records> = [3usize, 0, 1000, 1].iter().map(|&n| records(n)).collect();
        let mut total = 0;
        let mut spilled = Vec::new();
        for (bytes, index) in &originals {
            let s = spool.spill(bytes, index).unwrap();
            total += s.len();
            spilled.push(s);
        }
        assert_eq!(total, (3 + 1000 + 1) * (8 + INDEX_BYTES));
        for (s, want) in spilled.into_iter().zip(&originals) {
            assert_eq!(&s.restore().unwrap(), want);
        }
    }
}
