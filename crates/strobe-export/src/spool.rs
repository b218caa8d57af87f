//! A spool of append-only byte columns with bounded memory.
//!
//! Owns [`Spool`]: an exporter that must write a document column by column
//! (every value of one column, then every value of the next) while its
//! input arrives row by row appends each row's values to their columns;
//! a column's bytes stay in memory until its buffer reaches a chunk limit
//! or all buffers together reach a budget, then they are written as
//! chunks to one anonymous temporary file (deleted by the OS when
//! dropped), and [`Spool::drain`] copies a column back, chunks in order
//! and then what is still in memory (gathered into writes of a few MiB).
//! Memory stays within the budget plus one chunk, the read-back buffer
//! and 16 bytes per spilled chunk whatever the data's size; the file
//! holds the rest. It never interprets the bytes, never writes a value
//! across two chunks and never creates a named file.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};

/// One column: its spilled chunks (offset, length in the file) in order
/// and the bytes not yet spilled.
#[derive(Default)]
struct Column {
    chunks: Vec<(u64, usize)>,
    buf: Vec<u8>,
}

/// Append-only byte columns spilled to one temporary file.
pub struct Spool {
    columns: Vec<Column>,
    /// The temporary file, created on the first spill.
    file: Option<File>,
    /// Bytes written to the file so far (the next chunk's offset).
    file_len: u64,
    /// A column is spilled when its buffer holds this many bytes.
    chunk: usize,
    /// Every buffer is spilled and freed when their capacities add up to
    /// more than this.
    budget: usize,
    /// The buffers' capacities, added up.
    held: usize,
    /// Chunks read back, gathered into large writes.
    scratch: Vec<u8>,
}

/// Bytes of chunks [`Spool::drain`] gathers before writing them: large
/// writes pass through the callers' buffered writers without a copy.
const GATHER: usize = 4 << 20;

impl Spool {
    /// An empty spool: a column spills when it holds `chunk` bytes, and
    /// every column when they hold more than `budget` together.
    pub fn new(chunk: usize, budget: usize) -> Spool {
        Spool {
            columns: Vec::new(),
            file: None,
            file_len: 0,
            chunk: chunk.max(1),
            budget,
            held: 0,
            scratch: Vec::new(),
        }
    }

    /// Adds `n` columns; returns the index of the first.
    pub fn add_columns(&mut self, n: usize) -> usize {
        let first = self.columns.len();
        self.columns.resize_with(first + n, Column::default);
        first
    }

    /// Appends to column `col` whatever `f` pushes onto its buffer, then
    /// spills what went over the limits.
    #[inline]
    pub fn write(&mut self, col: usize, f: impl FnOnce(&mut Vec<u8>)) -> io::Result<()> {
        let c = &mut self.columns[col];
        let cap = c.buf.capacity();
        f(&mut c.buf);
        let (len, grown) = (c.buf.len(), c.buf.capacity() - cap);
        if grown > 0 {
            self.held += grown;
            if self.held > self.budget {
                return self.spill_all();
            }
        }
        if len >= self.chunk {
            self.spill(col)?;
        }
        Ok(())
    }

    /// Appends `bytes` to column `col`.
    #[cfg(test)]
    pub fn append(&mut self, col: usize, bytes: &[u8]) -> io::Result<()> {
        self.write(col, |b| b.extend_from_slice(bytes))
    }

    /// Whether column `col` has no bytes, spilled or not.
    #[cfg(test)]
    pub fn is_empty(&self, col: usize) -> bool {
        let c = &self.columns[col];
        c.chunks.is_empty() && c.buf.is_empty()
    }

    /// Bytes written to the temporary file so far.
    #[cfg(test)]
    pub fn spilled_bytes(&self) -> u64 {
        self.file_len
    }

    /// Writes column `col`'s buffer to the file as its next chunk; keeps
    /// the buffer's memory for the next values.
    fn spill(&mut self, col: usize) -> io::Result<()> {
        let c = &mut self.columns[col];
        if c.buf.is_empty() {
            return Ok(());
        }
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(tempfile::tempfile()?),
        };
        file.write_all(&c.buf)?;
        c.chunks.push((self.file_len, c.buf.len()));
        self.file_len += c.buf.len() as u64;
        c.buf.clear();
        Ok(())
    }

    /// Spills every column and frees every buffer.
    fn spill_all(&mut self) -> io::Result<()> {
        for col in 0..self.columns.len() {
            self.spill(col)?;
            self.columns[col].buf = Vec::new();
        }
        self.held = 0;
        Ok(())
    }

    /// Copies column `col` to `out` (its chunks in order, then its buffer)
    /// and empties it.
    pub fn drain(&mut self, col: usize, out: &mut impl Write) -> io::Result<()> {
        let c = &mut self.columns[col];
        let chunks = std::mem::take(&mut c.chunks);
        let buf = std::mem::take(&mut c.buf);
        self.held = self.held.saturating_sub(buf.capacity());
        if !chunks.is_empty() {
            let file = self
                .file
                .as_mut()
                .ok_or_else(|| io::Error::other("spool chunk without a file"))?;
            let tmp = &mut self.scratch;
            tmp.clear();
            for (off, len) in chunks {
                let at = tmp.len();
                tmp.resize(at + len, 0);
                file.seek(SeekFrom::Start(off))?;
                file.read_exact(&mut tmp[at..])?;
                if tmp.len() >= GATHER {
                    out.write_all(tmp)?;
                    tmp.clear();
                }
            }
            out.write_all(tmp)?;
            tmp.clear();
            // Later spills append at the end.
            file.seek(SeekFrom::End(0))?;
        }
        out.write_all(&buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_come_back_in_order_after_spilling() {
        // Tiny chunks: almost every append spills; three threads of two
        // columns each, written interleaved.
        let mut s = Spool::new(5, 1 << 20);
        let first = s.add_columns(6);
        assert_eq!(first, 0);
        let mut want = vec![Vec::new(); 6];
        for i in 0..500u32 {
            let col = (i as usize * 7) % 6;
            let v = format!("{i},");
            s.append(col, v.as_bytes()).unwrap();
            want[col].extend_from_slice(v.as_bytes());
        }
        assert!(s.spilled_bytes() > 0, "the chunks went to the file");
        // Appends after a drain of another column still land at the end.
        let mut out = Vec::new();
        s.drain(3, &mut out).unwrap();
        assert_eq!(out, want[3]);
        s.append(0, b"tail").unwrap();
        want[0].extend_from_slice(b"tail");
        for col in [5, 0, 1, 2, 4] {
            let mut out = Vec::new();
            s.drain(col, &mut out).unwrap();
            assert_eq!(out, want[col], "column {col}");
            assert!(s.is_empty(col));
        }
    }

    #[test]
    fn the_budget_spills_every_column() {
        // Chunks never fill, but the buffers together exceed the budget.
        let mut s = Spool::new(1 << 20, 64);
        s.add_columns(4);
        let mut want = vec![Vec::new(); 4];
        for i in 0..200u32 {
            let col = i as usize % 4;
            s.append(col, b"abcdef").unwrap();
            want[col].extend_from_slice(b"abcdef");
            assert!(s.held <= 64 + 64, "held {}", s.held);
        }
        assert!(s.spilled_bytes() > 0);
        for (col, w) in want.iter().enumerate() {
            let mut out = Vec::new();
            s.drain(col, &mut out).unwrap();
            assert_eq!(&out, w);
        }
    }

    #[test]
    fn nothing_spilled_needs_no_file() {
        let mut s = Spool::new(1 << 10, 1 << 20);
        s.add_columns(2);
        s.append(1, b"x").unwrap();
        assert!(s.is_empty(0) && !s.is_empty(1));
        let mut out = Vec::new();
        s.drain(1, &mut out).unwrap();
        assert_eq!(out, b"x");
        assert!(s.file.is_none());
    }
}
