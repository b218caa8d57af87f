//! Typed columns built in Rust and handed to Python as whole buffers.
//!
//! Owns the column builders ([`Col`]: 64-bit integers and floats with a
//! validity mask, strings dictionary-encoded as `int32` codes plus the
//! list of distinct values, stacks as codes into a list of tuples) and
//! their conversion into the plain Python description `python/strobe/
//! _profile.py` turns into pandas, pyarrow or polars columns:
//! `(name, kind, data, extra)` with `data` a `bytearray` numpy reads
//! without copying. It must never create one Python object per row.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyList, PyTuple};
use strobe_db::Value;

/// Distinct strings and the code of each.
#[derive(Default)]
pub struct Dict {
    index: HashMap<Box<str>, i32>,
    values: Vec<Box<str>>,
}

impl Dict {
    /// The code of `s`, added when new.
    pub fn code(&mut self, s: &str) -> i32 {
        if let Some(&c) = self.index.get(s) {
            return c;
        }
        let c = self.values.len() as i32;
        self.index.insert(s.into(), c);
        self.values.push(s.into());
        c
    }
}

/// One column under construction.
pub enum Col {
    /// No value seen yet but NULLs (the count).
    Null(usize),
    /// 64-bit integers; `valid` is empty while every value is present.
    Int { vals: Vec<i64>, valid: Vec<bool> },
    /// 64-bit floats (NULL: NaN).
    Float(Vec<f64>),
    /// Strings: codes (-1: NULL) into the dictionary.
    Text { codes: Vec<i32>, dict: Dict },
    /// Stacks: codes into a list of frame-name tuples built by the caller.
    Stack {
        codes: Vec<i32>,
        stacks: Vec<Vec<String>>,
    },
}

impl Col {
    /// An integer column of known values, all present.
    pub fn ints(vals: Vec<i64>) -> Col {
        Col::Int {
            vals,
            valid: Vec::new(),
        }
    }

    /// Appends a value of any SQLite type, widening the column when needed
    /// (integers to floats; numbers and text mixed become text).
    pub fn push(&mut self, v: &Value) {
        match (&mut *self, v) {
            (Col::Null(n), Value::Null) => *n += 1,
            (Col::Null(n), Value::Integer(_)) => {
                let n = *n;
                let mut vals = vec![0; n];
                vals.reserve(64);
                *self = Col::Int {
                    vals,
                    valid: vec![false; n],
                };
                self.push(v);
            }
            (Col::Null(n), Value::Real(_)) => {
                *self = Col::Float(vec![f64::NAN; *n]);
                self.push(v);
            }
            (Col::Null(n), Value::Text(_) | Value::Blob(_)) => {
                *self = Col::Text {
                    codes: vec![-1; *n],
                    dict: Dict::default(),
                };
                self.push(v);
            }
            (Col::Int { vals, valid }, Value::Integer(i)) => {
                vals.push(*i);
                if !valid.is_empty() {
                    valid.push(true);
                }
            }
            (Col::Int { vals, valid }, Value::Null) => {
                if valid.is_empty() {
                    valid.resize(vals.len(), true);
                }
                vals.push(0);
                valid.push(false);
            }
            (Col::Int { vals, valid }, Value::Real(_)) => {
                let f = vals
                    .iter()
                    .enumerate()
                    .map(|(k, x)| {
                        if valid.is_empty() || valid[k] {
                            *x as f64
                        } else {
                            f64::NAN
                        }
                    })
                    .collect();
                *self = Col::Float(f);
                self.push(v);
            }
            (Col::Float(f), Value::Real(x)) => f.push(*x),
            (Col::Float(f), Value::Integer(i)) => f.push(*i as f64),
            (Col::Float(f), Value::Null) => f.push(f64::NAN),
            (Col::Text { codes, .. }, Value::Null) => codes.push(-1),
            (Col::Text { codes, dict }, Value::Text(s)) => codes.push(dict.code(s)),
            (Col::Text { codes, dict }, Value::Blob(b)) => {
                codes.push(dict.code(&String::from_utf8_lossy(b)))
            }
            (Col::Text { codes, dict }, Value::Integer(i)) => codes.push(dict.code(&i.to_string())),
            (Col::Text { codes, dict }, Value::Real(x)) => codes.push(dict.code(&x.to_string())),
            (Col::Int { .. } | Col::Float(_), Value::Text(_) | Value::Blob(_)) => {
                let mut dict = Dict::default();
                let codes = match std::mem::replace(self, Col::Null(0)) {
                    Col::Int { vals, valid } => vals
                        .iter()
                        .enumerate()
                        .map(|(k, x)| {
                            if valid.is_empty() || valid[k] {
                                dict.code(&x.to_string())
                            } else {
                                -1
                            }
                        })
                        .collect(),
                    Col::Float(f) => f
                        .iter()
                        .map(|x| {
                            if x.is_nan() {
                                -1
                            } else {
                                dict.code(&x.to_string())
                            }
                        })
                        .collect(),
                    _ => unreachable!("matched above"),
                };
                *self = Col::Text { codes, dict };
                self.push(v);
            }
            (Col::Stack { .. }, _) => {}
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Col::Null(n) => *n,
            Col::Int { vals, .. } => vals.len(),
            Col::Float(f) => f.len(),
            Col::Text { codes, .. } | Col::Stack { codes, .. } => codes.len(),
        }
    }
}

/// A `bytearray` holding the values' bytes (native byte order), written
/// straight into the Python object: one copy, no per-value objects.
pub fn bytes_of<'py, T: Copy>(py: Python<'py>, vals: &[T]) -> PyResult<Bound<'py, PyByteArray>> {
    let n = std::mem::size_of_val(vals);
    PyByteArray::new_with(py, n, |buf| {
        // SAFETY: `vals` is a slice of `Copy` plain numbers (i64, f64, i32,
        // u8, bool), so its `n` bytes are initialised and may be read as
        // bytes; `buf` is exactly `n` bytes long and does not overlap it.
        let src = unsafe { std::slice::from_raw_parts(vals.as_ptr().cast::<u8>(), n) };
        buf.copy_from_slice(src);
        Ok(())
    })
}

/// Dictionary codes in the narrowest integer type that holds them
/// (`-1` = missing, so `distinct` values need codes up to `distinct - 1`),
/// as a bytearray, with the numpy type name (`int8`, `int16`, `int32`):
/// pandas keeps categorical codes that narrow, so the frame is built
/// without a wider copy in between.
fn codes_of<'py>(
    py: Python<'py>,
    codes: &[i32],
    distinct: usize,
) -> PyResult<(Bound<'py, PyByteArray>, &'static str)> {
    if distinct <= i8::MAX as usize + 1 {
        let narrow: Vec<i8> = codes.iter().map(|&c| c as i8).collect();
        Ok((bytes_of(py, &narrow)?, "int8"))
    } else if distinct <= i16::MAX as usize + 1 {
        let narrow: Vec<i16> = codes.iter().map(|&c| c as i16).collect();
        Ok((bytes_of(py, &narrow)?, "int16"))
    } else {
        Ok((bytes_of(py, codes)?, "int32"))
    }
}

/// Converts a column into `(name, kind, data, extra)`:
/// `("i64", bytearray, validity bytearray or None)`, `("f64", bytearray,
/// None)`, `("cat:TYPE", codes, [str])`, `("stack:TYPE", codes, [tuple])`
/// (TYPE: the codes' numpy type, see [`codes_of`]), `("null", count,
/// None)`. Consumes the column so its memory goes as soon
/// as it is copied.
pub fn to_py<'py>(py: Python<'py>, name: &str, col: Col) -> PyResult<Bound<'py, PyTuple>> {
    let t = match col {
        Col::Null(n) => (
            name,
            "null".to_string(),
            n.into_pyobject(py)?.into_any(),
            py.None().into_bound(py),
        ),
        Col::Int { vals, valid } => {
            let data = bytes_of(py, &vals)?.into_any();
            drop(vals);
            let mask = if valid.is_empty() {
                py.None().into_bound(py)
            } else {
                let bytes: Vec<u8> = valid.iter().map(|&b| b as u8).collect();
                bytes_of(py, &bytes)?.into_any()
            };
            (name, "i64".to_string(), data, mask)
        }
        Col::Float(f) => (
            name,
            "f64".to_string(),
            bytes_of(py, &f)?.into_any(),
            py.None().into_bound(py),
        ),
        Col::Text { codes, dict } => {
            let (data, ty) = codes_of(py, &codes, dict.values.len())?;
            drop(codes);
            let cats = PyList::new(py, dict.values.iter().map(|s| &**s))?.into_any();
            (name, format!("cat:{ty}"), data.into_any(), cats)
        }
        Col::Stack { codes, stacks } => {
            let (data, ty) = codes_of(py, &codes, stacks.len())?;
            drop(codes);
            let data = data.into_any();
            let tuples = stacks
                .iter()
                .map(|s| PyTuple::new(py, s))
                .collect::<PyResult<Vec<_>>>()?;
            (
                name,
                format!("stack:{ty}"),
                data,
                PyList::new(py, tuples)?.into_any(),
            )
        }
    };
    t.into_pyobject(py)
}

/// A table: column names and builders, converted to a list of column
/// tuples (see [`to_py`]).
pub struct Table {
    /// Column names.
    pub names: Vec<String>,
    /// Builders, one per name.
    pub cols: Vec<Col>,
}

impl Table {
    /// An empty table with these column names.
    pub fn new(names: Vec<String>) -> Table {
        let cols = names.iter().map(|_| Col::Null(0)).collect();
        Table { names, cols }
    }

    /// Rows so far.
    pub fn rows(&self) -> usize {
        self.cols.first().map_or(0, Col::len)
    }

    /// Appends a row of SQLite values.
    pub fn push_row(&mut self, vals: &[Value]) {
        for (c, v) in self.cols.iter_mut().zip(vals) {
            c.push(v);
        }
    }

    /// The Python description: a list of column tuples.
    pub fn into_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
        let list = PyList::empty(py);
        for (n, c) in self.names.iter().zip(self.cols) {
            list.append(to_py(py, n, c)?)?;
        }
        Ok(list)
    }
}
