//! Where a record the collector thread copied came from: a thread's event
//! ring, its sample ring, or a kernel sampling ring.
//!
//! Owns the names of the rings a batch's records come from and their
//! numbers in the spool file. Never reads a ring.

/// Where a copied record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// An event ring.
    Events,
    /// A sample ring.
    Samples,
    /// A kernel sampling ring (a whole perf record).
    Kernel,
}

impl Source {
    /// A number for the source (in the spool file).
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The source numbered `code`.
    pub fn from_code(code: u32) -> Option<Source> {
        [Source::Events, Source::Samples, Source::Kernel]
            .get(code as usize)
            .copied()
    }
}

/// Where one copied record lies: its source, the thread id of its slot,
/// and its range in the bytes of its batch.
pub type CopiedRecord = (Source, i32, std::ops::Range<usize>);
