//! The encoder side of a job: batches into Parquet files.
//!
//! Owns each table's writer properties ([`TableFormat`]: compression,
//! dictionaries, encodings, statistics), taking a job's messages in
//! storage order ([`Ends`]), encoding a row group column by column into
//! memory and splicing it into its file ([`write_file`]), and where a
//! process's table goes ([`file_path`]). It never reads a profile.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use bytes::Bytes;
use parquet::basic::{Compression, Encoding};
use parquet::column::writer::{get_column_writer, ColumnWriter};
use parquet::data_type::ByteArray;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::{ColumnDescPtr, ColumnPath, SchemaDescriptor};

use super::columns::{message_type, Batch, Table, TableId, Ty};
use super::emit::Msg;
use super::process::Proc;
use crate::error::{ExportError, Result};

/// A table's schema and writer properties, shared by its files.
pub(super) struct TableFormat {
    pub(super) schema: Arc<parquet::schema::types::Type>,
    pub(super) descr: SchemaDescriptor,
    pub(super) props: Arc<WriterProperties>,
}

impl TableFormat {
    pub(super) fn new(t: &Table) -> Result<TableFormat> {
        let schema = Arc::new(
            parse_message_type(&message_type(t))
                .map_err(|e| ExportError::Usage(format!("internal: schema of {}: {e}", t.name)))?,
        );
        let mut b = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_created_by(format!("strobe {}", env!("CARGO_PKG_VERSION")))
            .set_dictionary_enabled(true);
        for c in t.cols {
            if !c.dict {
                b = b.set_column_dictionary_enabled(ColumnPath::from(c.name), false);
                // Times and durations: deltas of neighbours, a byte or two
                // a value where plain takes eight (every reader named in
                // docs/parquet.md decodes it).
                if c.ty == Ty::I64 {
                    b = b.set_column_encoding(
                        ColumnPath::from(c.name),
                        Encoding::DELTA_BINARY_PACKED,
                    );
                }
            }
            // Min/max of strings cost a comparison per value and prune
            // little: numbers (times, ids) keep theirs.
            if c.ty == Ty::Str {
                b = b.set_column_statistics_enabled(
                    ColumnPath::from(c.name),
                    EnabledStatistics::None,
                );
            }
        }
        Ok(TableFormat {
            descr: SchemaDescriptor::new(schema.clone()),
            schema,
            props: Arc::new(b.build()),
        })
    }

    pub(super) fn columns(&self) -> Vec<ColumnDescPtr> {
        (0..self.descr.num_columns())
            .map(|i| self.descr.column(i))
            .collect()
    }
}

/// Maps a Parquet error while writing `path`.
pub(super) fn pq_err(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> ExportError + '_ {
    move |e| ExportError::Write {
        path: path.to_path_buf(),
        error: std::io::Error::other(e.to_string()),
    }
}

/// Encodes one batch into the row group's column writers (`strings`:
/// a buffer for string values, reused).
pub(super) fn write_batch(
    writers: &mut [ColumnWriter<'_>],
    b: &Batch,
    strings: &mut Vec<ByteArray>,
    path: &Path,
) -> Result<()> {
    for (w, c) in writers.iter_mut().zip(&b.cols) {
        let defs = c.defs.as_deref();
        let r = match (w, c.ty) {
            (ColumnWriter::Int64ColumnWriter(w), Ty::I64) => w.write_batch(&c.ints, defs, None),
            (ColumnWriter::DoubleColumnWriter(w), Ty::F64) => w.write_batch(&c.floats, defs, None),
            (ColumnWriter::ByteArrayColumnWriter(w), Ty::Str) => {
                c.strs.expand(strings);
                let r = w.write_batch(strings, defs, None);
                strings.clear();
                r
            }
            _ => {
                return Err(ExportError::Usage(format!(
                    "internal: column type mismatch writing {}",
                    path.display()
                )))
            }
        };
        r.map_err(pq_err(path))?;
    }
    Ok(())
}

/// An encoder's ends of its reader's channels: messages in, written
/// batches back.
pub(super) struct Ends {
    pub(super) feed: Feed,
    /// Per reader thread, where its written batches go back.
    pub(super) spare: Vec<Sender<Batch>>,
}

/// Where an encoder's messages come from.
pub(super) enum Feed {
    /// One reader thread, table after table.
    One(Receiver<Msg>),
    /// One table read by several threads in interleaved chunks (see
    /// [`super::ranges::Chunks`]): each sends exactly one batch per chunk, so taking
    /// them in turn restores the storage order.
    Chunks {
        table: TableId,
        rxs: Vec<Receiver<Msg>>,
        next: usize,
        count: usize,
        begun: bool,
    },
}

impl Ends {
    /// The next message; `None` when every reader is done.
    pub(super) fn recv(&mut self) -> Option<Msg> {
        loop {
            let empty = match &mut self.feed {
                Feed::One(rx) => return rx.recv().ok(),
                Feed::Chunks {
                    table,
                    rxs,
                    next,
                    count,
                    begun,
                } => {
                    if !*begun {
                        *begun = true;
                        return Some(Msg::Begin(*table));
                    }
                    if *next > *count {
                        return None;
                    }
                    if *next == *count {
                        *next += 1;
                        return Some(Msg::End);
                    }
                    match rxs[*next % rxs.len()].recv() {
                        Ok(Msg::Batch(b)) => {
                            *next += 1;
                            if b.rows > 0 {
                                return Some(Msg::Batch(b));
                            }
                            b
                        }
                        Ok(m) => return Some(m),
                        Err(_) => return None,
                    }
                }
            };
            self.give_back(empty);
        }
    }

    /// Hands a written batch back to the thread that made it (dropped
    /// here when that thread has finished).
    pub(super) fn give_back(&self, b: Batch) {
        if let Some(tx) = self.spare.get(b.origin) {
            let _ = tx.send(b);
        }
    }
}

/// How a file's writing ended: the message after its last batch.
pub(super) enum Next {
    Msg(Msg),
    /// The reader stopped without saying why (it panicked).
    Gone,
}

/// Writes one row group: batches from `first` on until the group is full
/// or a message other than a batch arrives (returned). Its columns are
/// encoded into memory one writer per column, then spliced into the file.
pub(super) fn row_group(
    fw: &mut SerializedFileWriter<File>,
    fmt: &TableFormat,
    first: Batch,
    ends: &mut Ends,
    limit: usize,
    path: &Path,
) -> Result<(u64, Option<Next>)> {
    let descrs = fmt.columns();
    let mut sinks: Vec<TrackedWrite<Vec<u8>>> = descrs
        .iter()
        .map(|_| TrackedWrite::new(Vec::new()))
        .collect();
    let mut rows = 0usize;
    let mut next = None;
    let closed = {
        let mut writers: Vec<ColumnWriter<'_>> = sinks
            .iter_mut()
            .zip(&descrs)
            .map(|(s, d)| {
                get_column_writer(
                    d.clone(),
                    fmt.props.clone(),
                    Box::new(SerializedPageWriter::new(s)),
                )
            })
            .collect();
        let mut batch = Some(first);
        let mut strings = Vec::new();
        loop {
            let b = match batch.take() {
                Some(b) => b,
                None => match ends.recv() {
                    Some(Msg::Batch(b)) => b,
                    Some(m) => {
                        next = Some(Next::Msg(m));
                        break;
                    }
                    None => {
                        next = Some(Next::Gone);
                        break;
                    }
                },
            };
            write_batch(&mut writers, &b, &mut strings, path)?;
            rows += b.rows;
            ends.give_back(b);
            if rows >= limit {
                break;
            }
        }
        writers
            .into_iter()
            .map(|w| w.close())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(pq_err(path))?
    };
    let mut rg = fw.next_row_group().map_err(pq_err(path))?;
    for (sink, close) in sinks.into_iter().zip(closed) {
        let bytes = Bytes::from(sink.into_inner().map_err(pq_err(path))?);
        rg.append_column(&bytes, close).map_err(pq_err(path))?;
    }
    rg.close().map_err(pq_err(path))?;
    Ok((rows as u64, next))
}

/// Writes batches from `first` on into a new file at `path` until a
/// message other than a batch arrives; returns the rows and that message.
pub(super) fn write_file(
    path: &Path,
    fmt: &TableFormat,
    pr: &Proc,
    table: &Table,
    first: Batch,
    ends: &mut Ends,
    limit: usize,
) -> Result<(u64, Next)> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ExportError::Write {
            path: dir.to_path_buf(),
            error: e,
        })?;
    }
    let file = File::create(path).map_err(|e| ExportError::Write {
        path: path.to_path_buf(),
        error: e,
    })?;
    let mut fw = SerializedFileWriter::new(file, fmt.schema.clone(), fmt.props.clone())
        .map_err(pq_err(path))?;
    for (k, v) in [
        ("strobe.table", table.name.to_string()),
        ("strobe.guid", pr.guid.clone()),
        ("strobe.node", pr.row.hostname.clone()),
        ("strobe.rank", pr.rank.to_string()),
    ] {
        fw.append_key_value_metadata(KeyValue::new(k.to_string(), v));
    }
    let mut rows = 0;
    let mut batch = first;
    let next = loop {
        let (n, next) = row_group(&mut fw, fmt, batch, ends, limit, path)?;
        rows += n;
        match next {
            Some(n) => break n,
            None => match ends.recv() {
                Some(Msg::Batch(b)) => batch = b,
                Some(m) => break Next::Msg(m),
                None => break Next::Gone,
            },
        }
    };
    fw.into_inner().map_err(pq_err(path))?;
    Ok((rows, next))
}

/// Rows and files written per table.
pub(super) type Counts = [(u64, u64); 6];

/// The file of `table` for process `pr` under `root`.
pub(super) fn file_path(root: &Path, table: &Table, pr: &Proc) -> PathBuf {
    root.join(table.name)
        .join(&pr.node_dir)
        .join(format!("rank={}", pr.rank))
        .join(format!("{}.parquet", pr.guid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parquet::columns::ALL;
    use crate::parquet::dataset::TABLES;

    #[test]
    fn schemas_parse_and_name_every_column() {
        for t in ALL {
            let f = TableFormat::new(t).unwrap();
            let names: Vec<String> = f.columns().iter().map(|c| c.name().to_string()).collect();
            let want: Vec<&str> = t.cols.iter().map(|c| c.name).collect();
            assert_eq!(names, want, "{}", t.name);
        }
        assert_eq!(
            ALL.iter().map(|t| t.name).collect::<Vec<_>>(),
            TABLES.to_vec()
        );
    }
}
