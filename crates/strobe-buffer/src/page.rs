//! The system page size, which buffer sizes are rounded to (seed 001) and
//! blocks are aligned on.
//!
//! Owns reading it (once) and rounding to it. Never allocates.

use std::sync::OnceLock;

/// The system page size (`sysconf(_SC_PAGESIZE)`), read once.
pub fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if v > 0 {
            v as usize
        } else {
            4096
        }
    })
}

/// `size` rounded up to a multiple of the page size (at least one page), as
/// seed 001 specifies for buffer sizes.
pub fn round_to_page(size: usize) -> usize {
    let page = page_size();
    size.max(1).div_ceil(page) * page
}
