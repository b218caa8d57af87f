//! External merge sort of fixed-size records (regions, samples).
//!
//! Owns [`RunSorter`] and the [`Record`] encoding it spills: records are
//! collected into a bounded in-memory
//! chunk, each full chunk is sorted and written as a run to an anonymous
//! temporary file, and [`RunSorter::finish`] returns an iterator that
//! merges the runs (or yields the single in-memory chunk). Memory is the
//! chunk plus one small read buffer per run, whatever the input size. It
//! never touches a database.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

/// A region row with unresolved ids, sortable by (start, end descending).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rec {
    pub start: i64,
    pub end: i64,
    pub tid: i64,
    pub name_id: i64,
    /// -1 when absent.
    pub category_id: i64,
    /// `i64::MIN` when absent.
    pub corr_id: i64,
    pub event_id: i64,
}

/// A fixed-size record the sorter can spill: an order key and a
/// little-endian encoding of `WORDS` 64-bit words.
pub(crate) trait Record: Copy {
    /// The sort key.
    type Key: Ord + Copy;
    /// 64-bit words of the encoding.
    const WORDS: usize;
    /// The sort key of this record.
    fn key(&self) -> Self::Key;
    /// The record as words.
    fn words(&self) -> [i64; 8];
    /// The record from words.
    fn from_words(w: &[i64; 8]) -> Self;

    fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut b = [0u8; 64];
        for (k, v) in self.words()[..Self::WORDS].iter().enumerate() {
            b[k * 8..k * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        out.write_all(&b[..Self::WORDS * 8])
    }

    fn read(inp: &mut impl Read) -> std::io::Result<Option<Self>> {
        let mut b = [0u8; 64];
        match inp.read_exact(&mut b[..Self::WORDS * 8]) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let mut w = [0i64; 8];
        for (k, v) in w[..Self::WORDS].iter_mut().enumerate() {
            *v = i64::from_le_bytes(b[k * 8..k * 8 + 8].try_into().expect("8 bytes"));
        }
        Ok(Some(Self::from_words(&w)))
    }
}

impl Record for Rec {
    type Key = (i64, Reverse<i64>);
    const WORDS: usize = 7;
    fn key(&self) -> Self::Key {
        (self.start, Reverse(self.end))
    }
    fn words(&self) -> [i64; 8] {
        [
            self.start,
            self.end,
            self.tid,
            self.name_id,
            self.category_id,
            self.corr_id,
            self.event_id,
            0,
        ]
    }
    fn from_words(v: &[i64; 8]) -> Self {
        Rec {
            start: v[0],
            end: v[1],
            tid: v[2],
            name_id: v[3],
            category_id: v[4],
            corr_id: v[5],
            event_id: v[6],
        }
    }
}

/// Records per in-memory chunk (at most 16 MiB).
pub(crate) const CHUNK: usize = 256 * 1024;

/// Collects records and sorts them with bounded memory.
pub(crate) struct RunSorter<R: Record = Rec> {
    chunk: Vec<R>,
    runs: Vec<File>,
}

impl<R: Record> RunSorter<R> {
    pub fn new() -> Self {
        RunSorter {
            chunk: Vec::new(),
            runs: Vec::new(),
        }
    }

    pub fn push(&mut self, r: R) -> std::io::Result<()> {
        if self.chunk.len() == self.chunk.capacity() {
            // Doubling up to a chunk: a small process (many of them, read
            // one after the other) never holds a whole chunk.
            let want = (self.chunk.capacity() * 2).clamp(4096, CHUNK);
            self.chunk.reserve_exact(want - self.chunk.len());
        }
        self.chunk.push(r);
        if self.chunk.len() == CHUNK {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> std::io::Result<()> {
        self.chunk.sort_unstable_by_key(R::key);
        let mut f = BufWriter::with_capacity(1 << 16, tempfile::tempfile()?);
        for r in &self.chunk {
            r.write(&mut f)?;
        }
        let mut f = f.into_inner().map_err(|e| e.into_error())?;
        f.seek(SeekFrom::Start(0))?;
        self.runs.push(f);
        self.chunk.clear();
        Ok(())
    }

    /// The records in order.
    pub fn finish(mut self) -> std::io::Result<Sorted<R>> {
        if self.runs.is_empty() {
            self.chunk.sort_unstable_by_key(R::key);
            return Ok(Sorted::Memory(self.chunk.into_iter()));
        }
        if !self.chunk.is_empty() {
            self.spill()?;
        }
        self.chunk = Vec::new();
        let mut readers: Vec<BufReader<File>> = self
            .runs
            .into_iter()
            .map(|f| BufReader::with_capacity(1 << 16, f))
            .collect();
        let mut heap = BinaryHeap::with_capacity(readers.len());
        for (k, r) in readers.iter_mut().enumerate() {
            if let Some(rec) = R::read(r)? {
                heap.push(Reverse((rec.key(), k, HeapRec(rec))));
            }
        }
        Ok(Sorted::Merge { readers, heap })
    }
}

/// Wrapper so records can ride in the heap without taking part in the order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeapRec<R>(R);
impl<R> PartialEq for HeapRec<R> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<R> Eq for HeapRec<R> {}
impl<R> PartialOrd for HeapRec<R> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<R> Ord for HeapRec<R> {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

type HeapEntry<R> = Reverse<(<R as Record>::Key, usize, HeapRec<R>)>;

/// Sorted records: from memory or merged from runs.
pub(crate) enum Sorted<R: Record> {
    Memory(std::vec::IntoIter<R>),
    Merge {
        readers: Vec<BufReader<File>>,
        heap: BinaryHeap<HeapEntry<R>>,
    },
}

impl<R: Record> Iterator for Sorted<R> {
    type Item = std::io::Result<R>;
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Sorted::Memory(it) => it.next().map(Ok),
            Sorted::Merge { readers, heap } => {
                // Replace the top in place (one sift) rather than pop + push.
                let mut top = heap.peek_mut()?;
                let Reverse((_, k, HeapRec(rec))) = *top;
                match R::read(&mut readers[k]) {
                    Ok(Some(n)) => *top = Reverse((n.key(), k, HeapRec(n))),
                    Ok(None) => {
                        std::collections::binary_heap::PeekMut::pop(top);
                    }
                    Err(e) => return Some(Err(e)),
                }
                Some(Ok(rec))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_across_runs_like_a_full_sort() {
        let mut s = RunSorter::new();
        let mut all = Vec::new();
        let mut x: u64 = 88172645463325252;
        for i in 0..(CHUNK as i64 * 2 + 1234) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let start = (x % 1_000_000) as i64;
            let r = Rec {
                start,
                end: start + (x % 977) as i64,
                tid: i,
                name_id: 1,
                category_id: -1,
                corr_id: i64::MIN,
                event_id: i,
            };
            all.push(r);
            s.push(r).unwrap();
        }
        let got: Vec<Rec> = s.finish().unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(got.len(), all.len());
        for w in got.windows(2) {
            assert!(w[0].key() <= w[1].key());
        }
        all.sort_by_key(|r| (r.key(), r.tid));
        let mut g2 = got.clone();
        g2.sort_by_key(|r| (r.key(), r.tid));
        assert_eq!(g2, all);
    }
}
