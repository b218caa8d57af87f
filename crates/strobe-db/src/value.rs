//! A value of a query's result, as SQLite stores it.
//!
//! Owns [`Value`]: what [`crate::Profile::query_each`] and
//! [`crate::Profile::table_rows`] hand over for each column, so that
//! callers read results without depending on the SQLite bindings. It
//! never runs a query.

use rusqlite::types::ValueRef;

/// One column of one row: SQLite's five storage classes.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `NULL`.
    Null,
    /// A signed integer.
    Integer(i64),
    /// A floating point number.
    Real(f64),
    /// Text (bytes that are not UTF-8 replaced by U+FFFD).
    Text(String),
    /// A blob.
    Blob(Vec<u8>),
}

impl Value {
    /// The value of a column as SQLite returned it.
    pub(crate) fn of(v: ValueRef<'_>) -> Value {
        match v {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(i) => Value::Integer(i),
            ValueRef::Real(f) => Value::Real(f),
            ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        }
    }
}
