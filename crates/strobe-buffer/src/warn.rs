//! Warnings the service writes to stderr.
//!
//! Owns the raw `write(2)` used where formatting or allocation is not
//! allowed (producer slow paths) and the text of caught panics. It must never
//! be used for anything but diagnostics.

/// Writes `message` to stderr with one `write(2)`: no allocation, no lock,
/// no formatting (usable on a producer path).
pub(crate) fn write_raw(message: &[u8]) {
    // SAFETY: writing a valid byte slice to fd 2; the result is ignored on
    // purpose (a diagnostic that cannot be written is not an error).
    unsafe {
        libc::write(2, message.as_ptr() as *const libc::c_void, message.len());
    }
}

/// The message of a caught panic, when it is a string.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_string()
    }
}
