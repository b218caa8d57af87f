//! Multi-row inserts: the writer's path for the rows that come by the
//! million (regions, samples).
//!
//! Owns a small buffer of one table's pending rows and the two statements
//! that insert them: one `INSERT … VALUES (…), (…), …` of [`BLOCK`] rows,
//! run each time the buffer fills, and a one-row insert for what is left
//! when the writer flushes. One statement per block instead of one per row
//! halves SQLite's cost per row (binding, stepping and resetting a
//! statement cost as much as storing its row; measured in
//! `docs/architecture.md`, "The event path"). Rows keep their order.
//!
//! It never begins or commits a transaction and never reads: the writer
//! opens the transaction before the first push and calls [`Bulk::flush`]
//! before it commits or touches the same table otherwise.

use rusqlite::{Connection, Statement};

/// Rows per multi-row statement. 128 rows of up to 8 columns stay far below
/// SQLite's limit on bound parameters (32 766).
pub(crate) const BLOCK: usize = 128;

/// Pending rows of one table, `N` integer columns each; the last one may
/// be bound as the text a renderer makes of it (SQL string concatenation
/// and its integer-to-text conversion cost more than formatting in Rust).
pub(crate) struct Bulk<const N: usize> {
    rows: Vec<[i64; N]>,
    block: Statement<'static>,
    one: Statement<'static>,
    render_last: Option<fn(&mut String, i64)>,
    text: String,
}

impl<const N: usize> Bulk<N> {
    /// Prepares the inserts `INSERT INTO "<table>" (<columns>) VALUES <row>`
    /// where `row` is the SQL of one row's values with `?` for each of the
    /// `N` parameters (for example `(?, ?, json_object('w', ?))`). Values
    /// the same in every row belong in `row` as literals: a bound value
    /// costs about as much as storing it.
    ///
    /// # Safety
    ///
    /// The statements borrow `conn` for `'static`: the caller must keep the
    /// connection at a fixed address and drop this before it.
    pub(crate) unsafe fn new(
        conn: &Connection,
        table: &str,
        columns: &str,
        row: &str,
    ) -> rusqlite::Result<Bulk<N>> {
        debug_assert_eq!(row.matches('?').count(), N);
        let head = format!("INSERT INTO \"{table}\" ({columns}) VALUES ");
        let many = vec![row; BLOCK].join(", ");
        // SAFETY: the caller keeps `conn` alive and in place for as long as
        // this Bulk (see the function's safety section).
        let block = unsafe { keep(conn.prepare(&format!("{head}{many}"))?) };
        // SAFETY: as above.
        let one = unsafe { keep(conn.prepare(&format!("{head}{row}"))?) };
        Ok(Bulk {
            rows: Vec::with_capacity(BLOCK),
            block,
            one,
            render_last: None,
            text: String::new(),
        })
    }

    /// Binds the last column as the text `render` makes of its value.
    pub(crate) fn with_last_as_text(mut self, render: fn(&mut String, i64)) -> Self {
        self.render_last = Some(render);
        self
    }

    /// Binds `values` as the parameters of the row at `row` of `st`.
    fn bind(
        st: &mut Statement<'static>,
        row: usize,
        values: &[i64; N],
        render_last: Option<fn(&mut String, i64)>,
        text: &mut String,
    ) -> rusqlite::Result<()> {
        for (c, v) in values.iter().enumerate() {
            match render_last {
                Some(render) if c + 1 == N => {
                    text.clear();
                    render(text, *v);
                    st.raw_bind_parameter(row * N + c + 1, text.as_str())?;
                }
                _ => st.raw_bind_parameter(row * N + c + 1, *v)?,
            }
        }
        Ok(())
    }

    /// Adds a row; inserts a whole block when the buffer fills.
    #[inline]
    pub(crate) fn push(&mut self, row: [i64; N]) -> rusqlite::Result<()> {
        self.rows.push(row);
        if self.rows.len() == BLOCK {
            for (r, values) in self.rows.iter().enumerate() {
                Self::bind(&mut self.block, r, values, self.render_last, &mut self.text)?;
            }
            self.rows.clear();
            self.block.raw_execute()?;
        }
        Ok(())
    }

    /// Inserts every pending row.
    pub(crate) fn flush(&mut self) -> rusqlite::Result<()> {
        for values in self.rows.drain(..) {
            Self::bind(&mut self.one, 0, &values, self.render_last, &mut self.text)?;
            self.one.raw_execute()?;
        }
        Ok(())
    }

    /// Rows waiting for a block.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.rows.len()
    }
}

/// Extends a statement's borrow of its connection to `'static`.
///
/// # Safety
///
/// The connection must outlive the statement and never move while it lives.
pub(crate) unsafe fn keep(st: Statement<'_>) -> Statement<'static> {
    // SAFETY: the caller guarantees the connection outlives the statement
    // and stays in place; only the lifetime changes, not the layout.
    unsafe { std::mem::transmute::<Statement<'_>, Statement<'static>>(st) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(conn: &Connection) -> Vec<(i64, i64, String)> {
        let mut st = conn.prepare("SELECT id, a, b FROM t ORDER BY id").unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn a_rendered_last_column_is_stored_as_its_text() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, b TEXT)")
            .unwrap();
        // SAFETY: `bulk` is dropped before `conn`, which does not move.
        let mut bulk: Bulk<2> = unsafe { Bulk::new(&conn, "t", "a, b", "(?, ?)") }
            .unwrap()
            .with_last_as_text(|s, v| {
                use std::fmt::Write;
                let _ = write!(s, "w{v}");
            });
        for k in 0..(BLOCK + 3) as i64 {
            bulk.push([k, -k]).unwrap();
        }
        bulk.flush().unwrap();
        drop(bulk);
        let got = rows(&conn);
        assert_eq!(got.len(), BLOCK + 3);
        for (k, (_, a, b)) in got.iter().enumerate() {
            assert_eq!(
                (*a, b.as_str()),
                (k as i64, format!("w{}", -(k as i64)).as_str())
            );
        }
    }

    #[test]
    fn every_row_arrives_in_order_across_blocks_and_the_rest() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, b TEXT)")
            .unwrap();
        for n in [0usize, 1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 5] {
            conn.execute_batch("DELETE FROM t").unwrap();
            // SAFETY: `bulk` is dropped at the end of this iteration, before
            // `conn`, which does not move.
            let mut bulk: Bulk<2> =
                unsafe { Bulk::new(&conn, "t", "a, b", "(?, 'w' || ?)") }.unwrap();
            for k in 0..n as i64 {
                bulk.push([k * 3, k]).unwrap();
            }
            assert_eq!(bulk.pending(), n % BLOCK);
            bulk.flush().unwrap();
            assert_eq!(bulk.pending(), 0);
            let got = rows(&conn);
            assert_eq!(got.len(), n, "rows for n = {n}");
            for (k, (_, a, b)) in got.iter().enumerate() {
                assert_eq!((*a, b.as_str()), (k as i64 * 3, format!("w{k}").as_str()));
            }
            // Ids follow the push order.
            assert!(got.windows(2).all(|w| w[0].0 < w[1].0));
        }
    }
}
