//! Annotations for Python programs: `strobe.region`, `strobe.mark`,
//! `strobe.set_thread_name`, recorded by the preloaded runtime when the
//! interpreter runs under `strobe sample`.
//!
//! Owns the Python objects over strobe-api's calls. Whether the runtime
//! is there is known at import (it is preloaded before the interpreter
//! starts); without it `region()` hands out one shared object whose
//! enter and exit do nothing, and `mark` / `set_thread_name` return at
//! once. Must never raise from `__exit__` (the program's own exception
//! wins) and never keep a region open across threads: a region ends on
//! the thread that opened it, as the runtime requires.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use std::ffi::CString;

/// A region: `with strobe.region("load"): ...`. Reusable and nestable;
/// entering pushes the region on the calling thread, exiting pops it.
#[pyclass(frozen, module = "strobe._native")]
struct Region {
    /// `None` for the shared object handed out without the runtime.
    name: Option<CString>,
}

#[pymethods]
impl Region {
    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        if let Some(name) = &slf.get().name {
            strobe::push_region(name);
        }
        slf
    }

    fn __exit__(
        &self,
        _ty: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _tb: &Bound<'_, PyAny>,
    ) -> bool {
        if self.name.is_some() {
            strobe::pop_region();
        }
        false
    }

    fn __repr__(&self) -> String {
        match &self.name {
            Some(n) => format!("strobe.region({:?})", n.to_string_lossy()),
            None => "strobe.region(<not under strobe>)".to_string(),
        }
    }
}

static NOOP: PyOnceLock<Py<Region>> = PyOnceLock::new();

/// The name as a C string: an interior NUL is a ValueError.
fn c_name(name: &str) -> PyResult<CString> {
    CString::new(name).map_err(|_| {
        pyo3::exceptions::PyValueError::new_err("a strobe name must not contain a NUL character")
    })
}

/// Calls the user API's `f` with `name` when the runtime is there (the
/// name is not even checked without it).
fn with_name(name: &str, f: fn(&std::ffi::CStr)) -> PyResult<()> {
    if strobe::is_active() {
        f(&c_name(name)?);
    }
    Ok(())
}

/// `strobe.region(name)`: a context manager recording a region.
/// Without the runtime the name is not even read.
#[pyfunction]
fn region(py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Py<Region>> {
    if !strobe::is_active() {
        return Ok(NOOP
            .get_or_try_init(py, || Py::new(py, Region { name: None }))?
            .clone_ref(py));
    }
    let name: std::borrow::Cow<'_, str> = name.extract()?;
    Py::new(
        py,
        Region {
            name: Some(c_name(&name)?),
        },
    )
}

/// `strobe.mark(name)`: an instant marker on the calling thread.
#[pyfunction]
fn mark(name: &str) -> PyResult<()> {
    with_name(name, strobe::mark)
}

/// `strobe.set_thread_name(name)`: names the calling thread in the profile.
#[pyfunction]
fn set_thread_name(name: &str) -> PyResult<()> {
    with_name(name, strobe::set_thread_name)
}

/// `strobe.push_region(name)` / `pop_region()`: the raw pair `traced` uses.
#[pyfunction]
fn push_region(name: &str) -> PyResult<()> {
    with_name(name, strobe::push_region)
}

#[pyfunction]
fn pop_region() {
    strobe::pop_region();
}

/// `strobe.progress(name)`: one visit of a throughput progress point.
#[pyfunction]
fn progress(name: &str) -> PyResult<()> {
    with_name(name, strobe::progress)
}

/// `strobe.progress_begin(name)`: a latency progress point's unit of work
/// begins.
#[pyfunction]
fn progress_begin(name: &str) -> PyResult<()> {
    with_name(name, strobe::progress_begin)
}

/// `strobe.progress_end(name)`: a latency progress point's unit of work
/// ends.
#[pyfunction]
fn progress_end(name: &str) -> PyResult<()> {
    with_name(name, strobe::progress_end)
}

/// Whether the interpreter runs under the strobe runtime.
#[pyfunction]
fn is_active() -> bool {
    strobe::is_active()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Region>()?;
    m.add_function(wrap_pyfunction!(region, m)?)?;
    m.add_function(wrap_pyfunction!(mark, m)?)?;
    m.add_function(wrap_pyfunction!(set_thread_name, m)?)?;
    m.add_function(wrap_pyfunction!(push_region, m)?)?;
    m.add_function(wrap_pyfunction!(pop_region, m)?)?;
    m.add_function(wrap_pyfunction!(is_active, m)?)?;
    m.add_function(wrap_pyfunction!(progress, m)?)?;
    m.add_function(wrap_pyfunction!(progress_begin, m)?)?;
    m.add_function(wrap_pyfunction!(progress_end, m)?)?;
    Ok(())
}
