//! Subscribers: the loader for C subscriber libraries named in
//! `XPTI_SUBSCRIBERS`; the [`Subscriber`] trait in-process tools implement
//! is the framework's (re-exported here).
//!
//! Owns subscriber handles (a loaded library is never closed once accepted:
//! its callbacks may be registered anywhere). It must never call a
//! subscriber while holding a framework lock: subscribers call back into the
//! framework from `init` and `finish`.

use std::ffi::{c_char, c_uint, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub use crate::framework::{StreamInit, Subscriber};

use crate::framework::Framework;

type InitFn = unsafe extern "C" fn(c_uint, c_uint, *const c_char, *const c_char);
type FinishFn = unsafe extern "C" fn(*const c_char);

/// Why a subscriber library was rejected.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// `dlopen` failed.
    #[error("cannot load subscriber {path}: {reason}")]
    Open { path: PathBuf, reason: String },
    /// The library lacks one of the two entry points.
    #[error("subscriber {path} rejected: it does not export xptiTraceInit and xptiTraceFinish")]
    MissingEntryPoints { path: PathBuf },
}

/// A C subscriber library (`xptiTraceInit` / `xptiTraceFinish`).
pub struct DylibSubscriber {
    path: PathBuf,
    display: String,
    init: InitFn,
    finish: FinishFn,
}

fn dlerror_text() -> String {
    // SAFETY: dlerror returns null or a thread-local NUL-terminated string.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".to_string()
    } else {
        // SAFETY: non-null NUL-terminated string from dlerror.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

impl DylibSubscriber {
    /// Loads `path` with `dlopen(RTLD_NOW | RTLD_LOCAL)` and resolves both
    /// entry points; the library is closed again when either is missing.
    pub fn load(path: &Path) -> Result<Self, LoadError> {
        let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| LoadError::Open {
            path: path.to_owned(),
            reason: "path holds a NUL byte".into(),
        })?;
        // SAFETY: c is a valid NUL-terminated path; dlopen runs the
        // library's constructors, which is what loading a subscriber means.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(LoadError::Open {
                path: path.to_owned(),
                reason: dlerror_text(),
            });
        }
        // SAFETY: handle is a live dlopen handle; names are NUL-terminated.
        let init = unsafe { libc::dlsym(handle, c"xptiTraceInit".as_ptr()) };
        // SAFETY: as above.
        let finish = unsafe { libc::dlsym(handle, c"xptiTraceFinish".as_ptr()) };
        if init.is_null() || finish.is_null() {
            // SAFETY: nothing from this library was kept.
            unsafe { libc::dlclose(handle) };
            return Err(LoadError::MissingEntryPoints {
                path: path.to_owned(),
            });
        }
        Ok(DylibSubscriber {
            path: path.to_owned(),
            display: path.display().to_string(),
            // SAFETY: the subscriber protocol defines these signatures; the
            // handle is never closed, so the pointers stay valid.
            init: unsafe { std::mem::transmute::<*mut libc::c_void, InitFn>(init) },
            // SAFETY: as above.
            finish: unsafe { std::mem::transmute::<*mut libc::c_void, FinishFn>(finish) },
        })
    }

    /// The library's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Subscriber for DylibSubscriber {
    fn name(&self) -> &str {
        &self.display
    }
    fn init(&self, _framework: &Framework, stream: &StreamInit<'_>) {
        // SAFETY: entry point resolved from a library that stays loaded;
        // both strings are valid for the call.
        unsafe {
            (self.init)(
                stream.major,
                stream.minor,
                stream.version.as_ptr(),
                stream.name.as_ptr(),
            )
        }
    }
    fn finish(&self, _framework: &Framework, stream_name: &CStr) {
        // SAFETY: as for init.
        unsafe { (self.finish)(stream_name.as_ptr()) }
    }
}

/// Splits an `XPTI_SUBSCRIBERS` value into paths (comma-separated, blanks
/// ignored).
pub fn parse_subscriber_list(value: &str) -> Vec<PathBuf> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_parsing() {
        assert_eq!(
            parse_subscriber_list(" /a.so, ,/b.so,"),
            vec![PathBuf::from("/a.so"), PathBuf::from("/b.so")]
        );
        assert!(parse_subscriber_list("").is_empty());
    }

    #[test]
    fn missing_library_is_an_open_error() {
        let e = DylibSubscriber::load(Path::new("/nonexistent/libnothing.so"))
            .err()
            .unwrap();
        assert!(matches!(e, LoadError::Open { .. }));
        assert!(e.to_string().contains("/nonexistent/libnothing.so"));
    }
}
