//! Status codes, each thread's last error, the version functions, and the
//! guard every C entry point runs its body in.
//!
//! Owns [`Status`] (`strobe_metrics_status_t`), the thread-local record
//! behind `strobe_metrics_errno` / `strobe_metrics_error_string` (set by
//! failing calls only, so a success never clears it), and [`guard`],
//! which turns an `Err` into its status and a panic into
//! [`Status::ERROR_INTERNAL`]. Must never let a panic escape, and never
//! touch the last error on success.

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The API major version of this library (`STROBE_METRICS_VERSION_MAJOR`).
pub const VERSION_MAJOR: u32 = 1;
/// The API minor version (`STROBE_METRICS_VERSION_MINOR`).
pub const VERSION_MINOR: u32 = 0;

/// `strobe_metrics_status_t`: `SUCCESS` or an error code. A plain `i32`
/// underneath, because tools' callbacks return it and may return any
/// integer.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Status(pub i32);

impl Status {
    /// `STROBE_METRICS_STATUS_SUCCESS`.
    pub const SUCCESS: Status = Status(0);
    /// `STROBE_METRICS_STATUS_ERROR`: unspecified.
    pub const ERROR: Status = Status(1);
    /// `STROBE_METRICS_STATUS_ERROR_INVALID_ARGUMENT`.
    pub const ERROR_INVALID_ARGUMENT: Status = Status(2);
    /// `STROBE_METRICS_STATUS_ERROR_UNKNOWN_FEATURE`.
    pub const ERROR_UNKNOWN_FEATURE: Status = Status(3);
    /// `STROBE_METRICS_STATUS_ERROR_UNAVAILABLE`.
    pub const ERROR_UNAVAILABLE: Status = Status(4);
    /// `STROBE_METRICS_STATUS_ERROR_GROUPS`.
    pub const ERROR_GROUPS: Status = Status(5);
    /// `STROBE_METRICS_STATUS_ERROR_IO`.
    pub const ERROR_IO: Status = Status(6);
    /// `STROBE_METRICS_STATUS_ERROR_DEFINITIONS`.
    pub const ERROR_DEFINITIONS: Status = Status(7);
    /// `STROBE_METRICS_STATUS_ERROR_NOT_SUPPORTED`.
    pub const ERROR_NOT_SUPPORTED: Status = Status(8);
    /// `STROBE_METRICS_STATUS_ERROR_INCOMPATIBLE_VERSION`.
    pub const ERROR_INCOMPATIBLE_VERSION: Status = Status(9);
    /// `STROBE_METRICS_STATUS_ERROR_INTERNAL`: a panic caught at the boundary.
    pub const ERROR_INTERNAL: Status = Status(10);

    /// Whether this is `SUCCESS`.
    pub fn is_success(self) -> bool {
        self == Status::SUCCESS
    }

    /// The header's name of the code (`STROBE_METRICS_STATUS_...`), or
    /// `unknown status N`.
    pub fn name(self) -> String {
        let n = match self.0 {
            0 => "SUCCESS",
            1 => "ERROR",
            2 => "ERROR_INVALID_ARGUMENT",
            3 => "ERROR_UNKNOWN_FEATURE",
            4 => "ERROR_UNAVAILABLE",
            5 => "ERROR_GROUPS",
            6 => "ERROR_IO",
            7 => "ERROR_DEFINITIONS",
            8 => "ERROR_NOT_SUPPORTED",
            9 => "ERROR_INCOMPATIBLE_VERSION",
            10 => "ERROR_INTERNAL",
            other => return format!("unknown status {other}"),
        };
        format!("STROBE_METRICS_STATUS_{n}")
    }
}

/// A failure: the status to return and the message to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What the call returns (never `SUCCESS`).
    pub status: Status,
    /// What `strobe_metrics_error_string` says.
    pub message: String,
}

impl Error {
    /// A failure with `status` and `message`.
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    /// `ERROR_INVALID_ARGUMENT` with `message`.
    pub fn invalid(message: impl Into<String>) -> Error {
        Error::new(Status::ERROR_INVALID_ARGUMENT, message)
    }
}

/// What the C ABI's internals return.
pub type CResult<T = ()> = Result<T, Error>;

struct LastError {
    status: Status,
    message: CString,
}

thread_local! {
    static LAST: RefCell<Option<LastError>> = const { RefCell::new(None) };
}

/// A C string of `s`, with any NUL byte replaced (C strings cannot hold one).
pub(crate) fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', "\u{fffd}")).expect("NUL bytes were replaced")
}

/// Records `e` as the calling thread's last error. Does nothing while the
/// thread's locals are being destroyed.
pub fn set_last_error(e: &Error) {
    let message = cstring(&e.message);
    let _ = LAST.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            *l = Some(LastError {
                status: e.status,
                message,
            });
        }
    });
}

/// The calling thread's last error: its status and message
/// (`SUCCESS` and "" when none).
pub fn last_error() -> (Status, String) {
    LAST.try_with(|l| match &*l.borrow() {
        Some(e) => (e.status, e.message.to_string_lossy().into_owned()),
        None => (Status::SUCCESS, String::new()),
    })
    .unwrap_or((Status::SUCCESS, String::new()))
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "a panic without a message"
    }
}

/// Runs the body of C entry point `function`: `Ok` gives `SUCCESS`; an
/// `Err` is recorded (its message prefixed with `function: `) and its
/// status returned; a panic is caught, recorded and turned into
/// [`Status::ERROR_INTERNAL`]. Nothing unwinds out of it.
pub fn guard(function: &str, body: impl FnOnce() -> CResult) -> Status {
    let result = catch_unwind(AssertUnwindSafe(body));
    // Formatting and recording could panic only on allocation failure,
    // which aborts; the outer catch keeps the promise regardless.
    let out = catch_unwind(AssertUnwindSafe(|| match result {
        Ok(Ok(())) => Status::SUCCESS,
        Ok(Err(mut e)) => {
            if e.status.is_success() {
                e.status = Status::ERROR;
            }
            e.message = format!("{function}: {}", e.message);
            set_last_error(&e);
            e.status
        }
        Err(payload) => {
            let e = Error::new(
                Status::ERROR_INTERNAL,
                format!(
                    "{function}: internal error (a bug in libstrobe_metrics, please report \
                     it): {}",
                    panic_message(&*payload)
                ),
            );
            set_last_error(&e);
            e.status
        }
    }));
    out.unwrap_or(Status::ERROR_INTERNAL)
}

/// Like [`guard`] for entry points that return a value: `fallback` when
/// the body panics (recorded as [`Status::ERROR_INTERNAL`]).
pub(crate) fn guard_value<T: Copy>(function: &str, fallback: T, body: impl FnOnce() -> T) -> T {
    let mut out = fallback;
    let _ = guard(function, || {
        out = body();
        Ok(())
    });
    out
}

/// `strobe_metrics_errno`: the status of the calling thread's last failed
/// call.
pub extern "C" fn strobe_metrics_errno() -> Status {
    guard_value("strobe_metrics_errno", Status::ERROR_INTERNAL, || {
        last_error().0
    })
}

/// `strobe_metrics_error_string`: the message of the calling thread's last
/// failed call, valid until its next failing call; never null.
pub extern "C" fn strobe_metrics_error_string() -> *const c_char {
    static EMPTY: &[u8] = b"\0";
    guard_value("strobe_metrics_error_string", EMPTY.as_ptr().cast(), || {
        LAST.try_with(|l| match &*l.borrow() {
            // The CString lives in the thread-local until the next
            // failing call on this thread replaces it.
            Some(e) => e.message.as_ptr(),
            None => EMPTY.as_ptr().cast(),
        })
        .unwrap_or(EMPTY.as_ptr().cast())
    })
}

/// `strobe_metrics_version_major`.
pub extern "C" fn strobe_metrics_version_major() -> u32 {
    guard_value("strobe_metrics_version_major", VERSION_MAJOR, || {
        VERSION_MAJOR
    })
}

/// `strobe_metrics_version_minor`.
pub extern "C" fn strobe_metrics_version_minor() -> u32 {
    guard_value("strobe_metrics_version_minor", VERSION_MINOR, || {
        VERSION_MINOR
    })
}

/// `strobe_metrics_check_version`: `SUCCESS` when this library serves a
/// program built with header `header_major.header_minor` (seed 3.3: the
/// library's major version is less than or equal to the header's).
pub extern "C" fn strobe_metrics_check_version(header_major: u32, header_minor: u32) -> Status {
    guard("strobe_metrics_check_version", || {
        if VERSION_MAJOR <= header_major {
            Ok(())
        } else {
            Err(Error::new(
                Status::ERROR_INCOMPATIBLE_VERSION,
                format!(
                    "the program was built with strobe_metrics.h {header_major}.{header_minor}, \
                     and this library ({VERSION_MAJOR}.{VERSION_MINOR}) serves headers of major \
                     version {VERSION_MAJOR} or later; rebuild the program with this library's \
                     header"
                ),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn error_string() -> String {
        // SAFETY: the function returns a NUL-terminated string that stays
        // valid until the next failing call on this thread.
        unsafe { CStr::from_ptr(strobe_metrics_error_string()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn success_leaves_the_last_error_alone() {
        std::thread::spawn(|| {
            assert_eq!(strobe_metrics_errno(), Status::SUCCESS);
            assert_eq!(error_string(), "");
            let s = guard("f", || Err(Error::invalid("bad thing")));
            assert_eq!(s, Status::ERROR_INVALID_ARGUMENT);
            assert_eq!(guard("g", || Ok(())), Status::SUCCESS);
            assert_eq!(strobe_metrics_errno(), Status::ERROR_INVALID_ARGUMENT);
            assert_eq!(error_string(), "f: bad thing");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn last_error_is_per_thread() {
        let s = guard("here", || Err(Error::new(Status::ERROR_IO, "mine")));
        assert_eq!(s, Status::ERROR_IO);
        std::thread::spawn(|| assert_eq!(strobe_metrics_errno(), Status::SUCCESS))
            .join()
            .unwrap();
        assert_eq!(strobe_metrics_errno(), Status::ERROR_IO);
        assert_eq!(error_string(), "here: mine");
    }

    #[test]
    fn a_panic_becomes_internal_error() {
        let s = guard("strobe_metrics_x", || panic!("boom {}", 42));
        assert_eq!(s, Status::ERROR_INTERNAL);
        assert_eq!(strobe_metrics_errno(), Status::ERROR_INTERNAL);
        let msg = error_string();
        assert!(msg.starts_with("strobe_metrics_x: internal error"), "{msg}");
        assert!(msg.ends_with("boom 42"), "{msg}");
        assert_eq!(guard_value("v", 7u32, || panic!("static str")), 7);
        assert!(error_string().ends_with("static str"));
    }

    #[test]
    fn an_error_claiming_success_is_an_error() {
        let s = guard("f", || Err(Error::new(Status::SUCCESS, "odd")));
        assert_eq!(s, Status::ERROR);
    }

    #[test]
    fn nul_bytes_in_messages_are_replaced() {
        let s = guard("f", || Err(Error::invalid("a\0b")));
        assert_eq!(s, Status::ERROR_INVALID_ARGUMENT);
        assert_eq!(error_string(), "f: a\u{fffd}b");
    }

    #[test]
    fn version_rule() {
        assert_eq!(strobe_metrics_version_major(), VERSION_MAJOR);
        assert_eq!(strobe_metrics_version_minor(), VERSION_MINOR);
        assert_eq!(
            strobe_metrics_check_version(VERSION_MAJOR, VERSION_MINOR),
            Status::SUCCESS
        );
        assert_eq!(
            strobe_metrics_check_version(VERSION_MAJOR + 1, 0),
            Status::SUCCESS
        );
        assert_eq!(
            strobe_metrics_check_version(VERSION_MAJOR - 1, 99),
            Status::ERROR_INCOMPATIBLE_VERSION
        );
        assert!(error_string().contains("rebuild the program"));
    }

    #[test]
    fn status_names() {
        assert_eq!(
            Status::ERROR_GROUPS.name(),
            "STROBE_METRICS_STATUS_ERROR_GROUPS"
        );
        assert_eq!(Status(77).name(), "unknown status 77");
    }
}
