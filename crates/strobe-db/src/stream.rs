//! Owned row streams over a connection.
//!
//! Owns [`RowStream`], an iterator that keeps its prepared statement alive
//! next to the rows it yields, so readers can hand out plain iterators that
//! step through a query one row at a time (SQLite sorts and spills to disk;
//! nothing here buffers the result). It never interprets rows.

use std::path::PathBuf;

use rusqlite::{Connection, Row, Rows, Statement, ToSql};

use crate::error::{classify, DbError, Result};

/// Iterator over the rows of one query, each mapped by `map`.
pub struct RowStream<'c, T> {
    rows: Option<Rows<'c>>,
    stmt: *mut Statement<'c>,
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
    path: PathBuf,
    done: bool,
}

impl<'c, T> RowStream<'c, T> {
    /// Prepares `sql` on `conn`, binds `params` and returns the stream.
    pub(crate) fn new(
        conn: &'c Connection,
        sql: &str,
        params: &[&dyn ToSql],
        map: fn(&Row<'_>) -> rusqlite::Result<T>,
        path: PathBuf,
    ) -> Result<RowStream<'c, T>> {
        let stmt = conn.prepare(sql).map_err(|e| DbError::Query {
            message: e.to_string(),
            sql: sql.to_string(),
        })?;
        let stmt: *mut Statement<'c> = Box::into_raw(Box::new(stmt));
        // SAFETY: `stmt` points to a heap allocation owned by this stream;
        // it is neither moved nor freed until `drop`, which drops `rows`
        // (the only borrower) first. The connection outlives 'c.
        let rows = unsafe { &mut *stmt }.query(params);
        match rows {
            Ok(rows) => Ok(RowStream {
                rows: Some(rows),
                stmt,
                map,
                path,
                done: false,
            }),
            Err(e) => {
                // SAFETY: nothing borrows the statement any more; it came
                // from Box::into_raw above and is freed exactly once here.
                drop(unsafe { Box::from_raw(stmt) });
                Err(classify(e, &path))
            }
        }
    }
}

impl<T> Iterator for RowStream<'_, T> {
    type Item = Result<T>;
    fn next(&mut self) -> Option<Result<T>> {
        if self.done {
            return None;
        }
        let rows = self.rows.as_mut()?;
        match rows.next() {
            Ok(Some(row)) => Some((self.map)(row).map_err(|e| classify(e, &self.path))),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(classify(e, &self.path)))
            }
        }
    }
}

impl<T> Drop for RowStream<'_, T> {
    fn drop(&mut self) {
        self.rows = None;
        // SAFETY: `rows` (the only borrower of the statement) is gone; the
        // pointer came from Box::into_raw in `new` and is freed only here.
        drop(unsafe { Box::from_raw(self.stmt) });
    }
}
