//! The info API: `strobe_metrics_get_info`, `strobe_metrics_iterate_info`
//! and `strobe_metrics_query_info` over the metric definitions and the
//! counter catalog.
//!
//! Owns the process-wide caches the info strings live in (they stay valid
//! until the library is unloaded, as the header promises): the
//! definitions (`definitions()`, the built-in set merged with the
//! `STROBE_METRICS` file, read at the first call that needs them and
//! shared with [`super::context`]) and the probed catalog (at the first
//! counter query). Owns the `*` pattern matcher of queries. Must never
//! hold a lock while calling a tool's callback, and never cache a failure
//! (a bad `STROBE_METRICS` file is reported again at the next call).

use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::{Arc, Mutex, OnceLock};

use super::status::{cstring, guard, CResult, Error, Status};
use super::types::{info_kind, CounterInfo, InfoCallback, InfoData, InfoUnion, MetricInfo};
use crate::catalog;
use crate::defs::{Definition, MetricSet, ENV_VAR};

/// One metric definition as C strings.
struct MetricEntry {
    name: CString,
    description: Option<CString>,
    expr: Option<CString>,
    unit: Option<CString>,
    event: Option<CString>,
}

/// The definitions every context plans with, and their info entries.
pub(crate) struct Definitions {
    pub(crate) set: MetricSet,
    entries: Vec<MetricEntry>,
}

static DEFINITIONS: Mutex<Option<Arc<Definitions>>> = Mutex::new(None);

/// The built-in definitions merged with the `STROBE_METRICS` file, read
/// once (a failure is not kept: the next call tries again).
pub(crate) fn definitions() -> CResult<Arc<Definitions>> {
    let mut cached = DEFINITIONS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = &*cached {
        return Ok(d.clone());
    }
    let set = MetricSet::from_env().map_err(|e| {
        Error::new(
            Status::ERROR_DEFINITIONS,
            format!("cannot read the metric definitions ({ENV_VAR}): {e}"),
        )
    })?;
    let opt = |s: Option<&str>| s.map(cstring);
    let entries = set
        .definitions()
        .map(|d| match d {
            Definition::Metric(m) => MetricEntry {
                name: cstring(&m.name),
                description: opt(m.description.as_deref()),
                expr: Some(cstring(&m.expr_text)),
                unit: opt(m.unit.as_deref()),
                event: None,
            },
            Definition::Counter(c) => MetricEntry {
                name: cstring(&c.name),
                description: opt(c.description.as_deref()),
                expr: None,
                unit: opt(c.unit.as_deref()),
                event: Some(cstring(&c.spec())),
            },
        })
        .collect();
    let d = Arc::new(Definitions { set, entries });
    *cached = Some(d.clone());
    Ok(d)
}

/// One catalog counter as C strings.
struct CounterEntry {
    name: CString,
    description: CString,
    unit: CString,
    source: CString,
    unavailable_reason: Option<CString>,
}

static COUNTERS: OnceLock<Vec<CounterEntry>> = OnceLock::new();

fn counters() -> &'static [CounterEntry] {
    COUNTERS.get_or_init(|| {
        catalog::catalog()
            .into_iter()
            .map(|c| CounterEntry {
                name: cstring(&c.name),
                description: cstring(&c.description),
                unit: cstring(&c.unit),
                source: cstring(c.kind.as_str()),
                unavailable_reason: c.available.err().map(|r| cstring(&r)),
            })
            .collect()
    })
}

fn ptr(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr())
}

fn metric_info(e: &MetricEntry) -> InfoData {
    InfoData {
        kind: info_kind::METRIC,
        u: InfoUnion {
            metric: MetricInfo {
                name: e.name.as_ptr(),
                description: ptr(&e.description),
                expr: ptr(&e.expr),
                unit: ptr(&e.unit),
                event: ptr(&e.event),
            },
        },
    }
}

fn counter_info(e: &CounterEntry) -> InfoData {
    InfoData {
        kind: info_kind::COUNTER,
        u: InfoUnion {
            counter: CounterInfo {
                name: e.name.as_ptr(),
                description: e.description.as_ptr(),
                unit: e.unit.as_ptr(),
                source: e.source.as_ptr(),
                unavailable_reason: ptr(&e.unavailable_reason),
                available: u32::from(e.unavailable_reason.is_none()),
            },
        },
    }
}

/// Whether `text` matches `pattern` entirely, `*` matching any run of
/// bytes (including none).
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// A query field: `None` for any value, else the pattern's bytes.
///
/// # Safety
/// `p` is null or a NUL-terminated string live for `'a`.
unsafe fn pattern<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        None
    } else {
        // SAFETY: per the function contract.
        Some(unsafe { CStr::from_ptr(p) }.to_bytes())
    }
}

fn field_matches(pattern: Option<&[u8]>, value: Option<&CStr>) -> bool {
    match pattern {
        None => true,
        Some(p) => glob_match(p, value.map_or(&b""[..], CStr::to_bytes)),
    }
}

/// The entries of `kind` that `keep` accepts, each passed to `callback`
/// until one returns other than `SUCCESS`.
fn iterate(
    kind: u32,
    callback: InfoCallback,
    data: *mut c_void,
    keep: &dyn Fn(&InfoData) -> bool,
) -> CResult {
    let Some(callback) = callback else {
        return Err(Error::invalid("the callback is NULL"));
    };
    // The caches are never freed, so the strings outlive the callback and
    // no lock is held while it runs.
    let defs;
    let infos: Box<dyn Iterator<Item = InfoData>> = match kind {
        info_kind::METRIC => {
            defs = definitions()?;
            Box::new(defs.entries.iter().map(metric_info))
        }
        info_kind::COUNTER => Box::new(counters().iter().map(counter_info)),
        info_kind::TRACE => Box::new(std::iter::empty()),
        info_kind::METRIC_COUNT | info_kind::TRACE_COUNT | info_kind::COUNTER_COUNT => {
            return Err(Error::invalid(format!(
                "info kind {kind} is a count: get it with strobe_metrics_get_info"
            )))
        }
        other => return Err(Error::invalid(format!("unknown info kind {other}"))),
    };
    for info in infos.filter(|i| keep(i)) {
        // SAFETY: `callback` is the caller's function of the documented
        // type; `info` points at strings that live as long as the library.
        let status = unsafe { callback(info, data) };
        if !status.is_success() {
            // SAFETY: every entry's name is a valid C string (the first
            // member of each union variant).
            let name = unsafe { CStr::from_ptr(info.u.metric.name) };
            return Err(Error::new(
                status,
                format!(
                    "the callback returned {} at `{}`; the iteration stopped there",
                    status.name(),
                    name.to_string_lossy()
                ),
            ));
        }
    }
    Ok(())
}

/// `strobe_metrics_get_info`: the count of a `*_COUNT` kind into
/// `*(uint32_t *)data`.
///
/// # Safety
/// `data` is null or points to a writable `u32`.
pub unsafe extern "C" fn strobe_metrics_get_info(kind: u32, data: *mut c_void) -> Status {
    guard("strobe_metrics_get_info", || {
        let n = match kind {
            info_kind::METRIC_COUNT => definitions()?.entries.len(),
            info_kind::COUNTER_COUNT => counters().len(),
            info_kind::TRACE_COUNT => 0,
            info_kind::METRIC | info_kind::TRACE | info_kind::COUNTER => {
                return Err(Error::invalid(format!(
                    "info kind {kind} lists entries: iterate them with \
                     strobe_metrics_iterate_info (get_info returns the *_COUNT kinds)"
                )))
            }
            other => return Err(Error::invalid(format!("unknown info kind {other}"))),
        };
        if data.is_null() {
            return Err(Error::invalid(
                "data is NULL (it receives a uint32_t count)",
            ));
        }
        // SAFETY: non-null, and the caller passes a writable uint32_t.
        unsafe {
            data.cast::<u32>()
                .write_unaligned(n.min(u32::MAX as usize) as u32)
        };
        Ok(())
    })
}

/// `strobe_metrics_iterate_info`: `callback` for every entry of `kind`.
///
/// # Safety
/// `callback` is null or a function of the documented type; `data` is
/// whatever it expects.
pub unsafe extern "C" fn strobe_metrics_iterate_info(
    kind: u32,
    callback: InfoCallback,
    data: *mut c_void,
) -> Status {
    guard("strobe_metrics_iterate_info", || {
        iterate(kind, callback, data, &|_| true)
    })
}

/// `strobe_metrics_query_info`: `callback` for the entries of `kind` that
/// match `query` (null fields are wildcards, `*` matches any run).
///
/// # Safety
/// As [`strobe_metrics_iterate_info`]; the string fields of `query`'s
/// member for `kind` are null or NUL-terminated.
pub unsafe extern "C" fn strobe_metrics_query_info(
    kind: u32,
    query: InfoData,
    callback: InfoCallback,
    data: *mut c_void,
) -> Status {
    guard("strobe_metrics_query_info", || {
        // The union member read below is the one `kind` selects (the
        // caller's contract for the query; the library's own for entries);
        // its strings are null or NUL-terminated, and entries' strings live
        // as long as the library. Every SAFETY note below refers to this.
        let c = |p: *const c_char| {
            // SAFETY: see above.
            unsafe { pattern(p) }.map(|_| {
                // SAFETY: see above; `pattern` checked it is not null.
                unsafe { CStr::from_ptr(p) }
            })
        };
        match kind {
            info_kind::METRIC => {
                // SAFETY: see above.
                let q = unsafe { query.u.metric };
                // SAFETY: see above.
                let pats = unsafe {
                    [
                        pattern(q.name),
                        pattern(q.description),
                        pattern(q.expr),
                        pattern(q.unit),
                        pattern(q.event),
                    ]
                };
                iterate(kind, callback, data, &|i| {
                    // SAFETY: see above.
                    let m = unsafe { i.u.metric };
                    let vals = [m.name, m.description, m.expr, m.unit, m.event];
                    pats.iter().zip(vals).all(|(p, v)| field_matches(*p, c(v)))
                })
            }
            info_kind::COUNTER => {
                // SAFETY: see above.
                let q = unsafe { query.u.counter };
                // SAFETY: see above.
                let pats = unsafe {
                    [
                        pattern(q.name),
                        pattern(q.description),
                        pattern(q.unit),
                        pattern(q.source),
                        pattern(q.unavailable_reason),
                    ]
                };
                iterate(kind, callback, data, &|i| {
                    // SAFETY: see above.
                    let m = unsafe { i.u.counter };
                    let vals = [
                        m.name,
                        m.description,
                        m.unit,
                        m.source,
                        m.unavailable_reason,
                    ];
                    pats.iter().zip(vals).all(|(p, v)| field_matches(*p, c(v)))
                })
            }
            _ => iterate(kind, callback, data, &|_| true),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::status::last_error;

    #[test]
    fn patterns() {
        assert!(glob_match(b"IPC", b"IPC"));
        assert!(!glob_match(b"IPC", b"IPCx"));
        assert!(glob_match(b"*", b""));
        assert!(glob_match(b"*-faults/s", b"minor-faults/s"));
        assert!(!glob_match(b"*-faults/s", b"faults/s"));
        assert!(glob_match(b"c*c*s", b"cache-misses"));
        assert!(glob_match(b"a*b*c", b"aXbYbZc"));
        assert!(!glob_match(b"a*b*c", b"aXbYbZ"));
        assert!(glob_match(b"**", b"x"));
        assert!(!glob_match(b"", b"x"));
    }

    struct Seen {
        names: Vec<String>,
        stop_after: usize,
        status: Status,
    }

    unsafe extern "C" fn collect(info: InfoData, data: *mut c_void) -> Status {
        // SAFETY: the tests pass a live `Seen` and a metric or counter entry
        // whose name is a C string.
        let seen = unsafe { &mut *data.cast::<Seen>() };
        // SAFETY: as above.
        let name = unsafe { CStr::from_ptr(info.u.metric.name) };
        seen.names.push(name.to_string_lossy().into_owned());
        if seen.names.len() >= seen.stop_after {
            seen.status
        } else {
            Status::SUCCESS
        }
    }

    fn seen(stop_after: usize, status: Status) -> Seen {
        Seen {
            names: Vec::new(),
            stop_after,
            status,
        }
    }

    #[test]
    fn metrics_are_listed_and_counted() {
        let mut s = seen(usize::MAX, Status::SUCCESS);
        // SAFETY: a valid callback and the `Seen` it expects.
        let st = unsafe {
            strobe_metrics_iterate_info(
                info_kind::METRIC,
                Some(collect),
                (&mut s as *mut Seen).cast(),
            )
        };
        assert_eq!(st, Status::SUCCESS);
        assert!(s.names.iter().any(|n| n == "IPC"), "{:?}", s.names);
        let mut n = 0u32;
        // SAFETY: `n` is a writable u32.
        let st = unsafe {
            strobe_metrics_get_info(info_kind::METRIC_COUNT, (&mut n as *mut u32).cast())
        };
        assert_eq!(st, Status::SUCCESS);
        assert_eq!(n as usize, s.names.len());
    }

    #[test]
    fn a_callback_error_stops_the_iteration_and_is_returned() {
        let mut s = seen(2, Status(1234));
        // SAFETY: a valid callback and the `Seen` it expects.
        let st = unsafe {
            strobe_metrics_iterate_info(
                info_kind::METRIC,
                Some(collect),
                (&mut s as *mut Seen).cast(),
            )
        };
        assert_eq!(st, Status(1234));
        assert_eq!(s.names.len(), 2);
        let (errno, msg) = last_error();
        assert_eq!(errno, Status(1234));
        assert!(
            msg.contains("unknown status 1234") && msg.contains(&format!("`{}`", s.names[1])),
            "{msg}"
        );
    }

    #[test]
    fn query_filters_with_patterns() {
        let mut s = seen(usize::MAX, Status::SUCCESS);
        let q = InfoData {
            kind: info_kind::METRIC,
            u: InfoUnion {
                metric: MetricInfo {
                    name: c"*-faults/s".as_ptr(),
                    description: std::ptr::null(),
                    expr: std::ptr::null(),
                    unit: c"1/s".as_ptr(),
                    event: std::ptr::null(),
                },
            },
        };
        // SAFETY: a valid callback, the `Seen` it expects, a query of C strings.
        let st = unsafe {
            strobe_metrics_query_info(
                info_kind::METRIC,
                q,
                Some(collect),
                (&mut s as *mut Seen).cast(),
            )
        };
        assert_eq!(st, Status::SUCCESS);
        assert!(
            s.names.contains(&"minor-faults/s".to_string()),
            "{:?}",
            s.names
        );
        assert!(!s.names.contains(&"faults/s".to_string()), "{:?}", s.names);
    }

    #[test]
    fn bad_arguments() {
        // SAFETY: null pointers are checked before use.
        unsafe {
            assert_eq!(
                strobe_metrics_get_info(info_kind::METRIC_COUNT, std::ptr::null_mut()),
                Status::ERROR_INVALID_ARGUMENT
            );
            assert_eq!(
                strobe_metrics_get_info(info_kind::METRIC, std::ptr::null_mut()),
                Status::ERROR_INVALID_ARGUMENT
            );
            assert!(last_error().1.contains("iterate them"));
            assert_eq!(
                strobe_metrics_iterate_info(99, Some(collect), std::ptr::null_mut()),
                Status::ERROR_INVALID_ARGUMENT
            );
            assert_eq!(
                strobe_metrics_iterate_info(info_kind::METRIC, None, std::ptr::null_mut()),
                Status::ERROR_INVALID_ARGUMENT
            );
            let mut n = 7u32;
            assert_eq!(
                strobe_metrics_get_info(info_kind::TRACE_COUNT, (&mut n as *mut u32).cast()),
                Status::SUCCESS
            );
            assert_eq!(n, 0);
        }
    }
}
