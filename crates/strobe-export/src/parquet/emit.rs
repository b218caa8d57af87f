//! How a reader thread hands rows to its encoder.
//!
//! Owns the messages on a reader's channel ([`Msg`]), a reader's ends of
//! its channels ([`Link`]: messages out, written batches back to be
//! reused on the thread that made them), [`Emit`] (fills a table's
//! batches and sends each when full) and what a reader of one job is
//! told ([`ReadCtx`]). It never reads a profile and never encodes.

use std::sync::mpsc::{Receiver, SyncSender};

use strobe_db::scan::Window;
use strobe_db::SampleKind;

use super::columns::{Batch, Table, TableId, ALL};
use crate::error::{ExportError, Result};

/// What a reader thread sends its encoder.
pub(super) enum Msg {
    /// Rows of `table` follow.
    Begin(TableId),
    /// Rows.
    Batch(Batch),
    /// Forget the current table's rows so far: they come again.
    Discard,
    /// The table is complete.
    End,
    /// Reading failed.
    Failed(ExportError),
}

/// A reader thread's ends of its channels: messages out, written
/// batches back (so that a batch's values are made and dropped on the
/// same thread, and its buffers reused).
pub(super) struct Link {
    pub(super) tx: SyncSender<Msg>,
    pub(super) spare: Receiver<Batch>,
    /// This reader's number among its job's readers.
    pub(super) origin: usize,
}

impl Link {
    /// An empty batch of `table`: a written one back, or a new one.
    pub(super) fn batch(&self, table: &'static Table, cap: usize) -> Batch {
        while let Ok(mut b) = self.spare.try_recv() {
            if b.table == table.name {
                b.clear();
                return b;
            }
        }
        let mut b = Batch::new(table, cap);
        b.origin = self.origin;
        b
    }
}

/// Collects one table's rows into batches and sends them.
pub(super) struct Emit<'a> {
    pub(super) link: &'a Link,
    pub(super) table: &'static Table,
    pub(super) batch: Batch,
    pub(super) cap: usize,
}

impl<'a> Emit<'a> {
    pub(super) fn new(link: &'a Link, table: TableId, cap: usize) -> Emit<'a> {
        let table = ALL[table];
        Emit {
            link,
            table,
            batch: link.batch(table, cap),
            cap,
        }
    }

    /// Closes the row just pushed; `false` when the encoder has gone (an
    /// error elsewhere): stop reading.
    pub(super) fn end_row(&mut self) -> bool {
        self.batch.end_row();
        if self.batch.rows < self.cap {
            return true;
        }
        self.send()
    }

    pub(super) fn send(&mut self) -> bool {
        if self.batch.rows == 0 {
            return true;
        }
        let fresh = self.link.batch(self.table, self.cap);
        let full = std::mem::replace(&mut self.batch, fresh);
        self.link.tx.send(Msg::Batch(full)).is_ok()
    }
}

/// Whether reading goes on.
pub(super) type Go = Result<bool>;

/// What the reader of one job needs besides the process.
#[derive(Clone, Copy)]
pub(super) struct ReadCtx {
    pub(super) window: Window,
    pub(super) time_kind: SampleKind,
    pub(super) batch_rows: usize,
}
