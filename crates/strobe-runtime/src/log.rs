//! The runtime's own messages, written with raw `write(2)` to stderr.
//!
//! Owns message formatting and the verbosity threshold. Never uses Rust's
//! `std::io::stderr` (its lock could be held by the program at the moment
//! we report) and never runs from a signal handler (it formats).

use std::sync::atomic::{AtomicI32, Ordering};

static VERBOSE: AtomicI32 = AtomicI32::new(0);

/// Sets the verbosity (`verbose` setting).
pub fn set_verbosity(level: i64) {
    VERBOSE.store(level as i32, Ordering::Relaxed);
}

/// Whether messages of `level` are shown.
pub fn enabled(level: i32) -> bool {
    VERBOSE.load(Ordering::Relaxed) >= level
}

/// Writes `strobe[pid]: <message>\n` to stderr in one `write(2)`.
pub fn emit(message: &str) {
    let line = format!("strobe[{}]: {message}\n", std::process::id());
    let mut bytes = line.as_bytes();
    while !bytes.is_empty() {
        // SAFETY: writing a valid buffer to fd 2.
        let n = unsafe { libc::write(2, bytes.as_ptr() as *const libc::c_void, bytes.len()) };
        if n <= 0 {
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// Logs at a verbosity level (0 = always).
macro_rules! log_at {
    ($level:expr, $($arg:tt)*) => {
        if $crate::log::enabled($level) {
            $crate::log::emit(&format!($($arg)*));
        }
    };
}
pub(crate) use log_at;
