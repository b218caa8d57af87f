//! The strobe user API for Rust programs.
//!
//! ```no_run
//! let _solve = strobe::Region::new(c"solve"); // ends when dropped
//! strobe::mark(c"checkpoint");
//! strobe::progress(c"request served"); // for `strobe causal`
//! ```
//!
//! Calls reach the strobe runtime when the program runs under
//! `strobe sample`; otherwise each is a no-op costing an atomic load and a
//! branch. The runtime is looked up once, with `dlsym`, on first use.
//!
//! This crate owns only the lookup and thin wrappers; it never allocates
//! (names are `&CStr`) and never panics.

use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};

/// The runtime's entry points (`strobe_api_t` in `include/strobe.h`).
#[repr(C)]
struct Api {
    size: u32,
    version: u32,
    push_region: extern "C" fn(*const c_char),
    pop_region: extern "C" fn(),
    mark: extern "C" fn(*const c_char),
    set_thread_name: extern "C" fn(*const c_char),
    pause: extern "C" fn(),
    resume: extern "C" fn(),
    // Version 2: present when `size` covers them.
    progress: extern "C" fn(*const c_char),
    progress_begin: extern "C" fn(*const c_char),
    progress_end: extern "C" fn(*const c_char),
}

/// Size of the version-1 table (without progress points).
const V1_SIZE: u32 = std::mem::offset_of!(Api, progress) as u32;

/// Not looked up yet.
const UNKNOWN: *mut Api = std::ptr::dangling_mut::<Api>();

static TABLE: AtomicPtr<Api> = AtomicPtr::new(UNKNOWN);

#[inline]
fn api() -> Option<&'static Api> {
    let mut p = TABLE.load(Ordering::Relaxed);
    if p == UNKNOWN {
        p = lookup();
    }
    // SAFETY: a non-null table is the runtime's static, valid for the
    // process's life (the runtime is preloaded and never unloaded).
    unsafe { p.as_ref() }
}

#[cold]
fn lookup() -> *mut Api {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"strobe_runtime_api".as_ptr()) } as *mut Api;
    // SAFETY: only trust a table with at least the first version's entries.
    let p = if p.is_null() || unsafe { (*p).size } < V1_SIZE {
        std::ptr::null_mut()
    } else {
        p
    };
    TABLE.store(p, Ordering::Relaxed);
    p
}

/// Whether the program runs under the strobe runtime.
pub fn is_active() -> bool {
    api().is_some()
}

/// A region of the calling thread, open until dropped. Regions nest.
#[must_use = "a region ends when this guard is dropped"]
pub struct Region {
    active: bool,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Region {
    /// Opens a region named `name`.
    #[inline]
    pub fn new(name: &CStr) -> Region {
        let active = match api() {
            Some(a) => {
                (a.push_region)(name.as_ptr());
                true
            }
            None => false,
        };
        Region {
            active,
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for Region {
    #[inline]
    fn drop(&mut self) {
        if self.active {
            if let Some(a) = api() {
                (a.pop_region)();
            }
        }
    }
}

/// Opens a region named `name` without a guard: for bindings whose scopes
/// are not Rust's (a Python `with` block); each must be ended by one
/// [`pop_region`] on the same thread. Prefer [`Region`].
#[inline]
pub fn push_region(name: &CStr) {
    if let Some(a) = api() {
        (a.push_region)(name.as_ptr());
    }
}

/// Ends the calling thread's innermost region opened by [`push_region`].
#[inline]
pub fn pop_region() {
    if let Some(a) = api() {
        (a.pop_region)();
    }
}

/// Records an instant marker.
#[inline]
pub fn mark(name: &CStr) {
    if let Some(a) = api() {
        (a.mark)(name.as_ptr());
    }
}

/// Names the calling thread in the profile.
#[inline]
pub fn set_thread_name(name: &CStr) {
    if let Some(a) = api() {
        (a.set_thread_name)(name.as_ptr());
    }
}

/// Stops all collection until [`resume`].
#[inline]
pub fn pause() {
    if let Some(a) = api() {
        (a.pause)();
    }
}

/// Resumes collection after [`pause`].
#[inline]
pub fn resume() {
    if let Some(a) = api() {
        (a.resume)();
    }
}

/// The runtime's table when it has the progress point entries.
#[inline]
fn api_v2() -> Option<&'static Api> {
    api().filter(|a| a.size >= std::mem::size_of::<Api>() as u32)
}

/// Counts one visit of the throughput progress point `name` (causal
/// profiling: one unit of work done).
#[inline]
pub fn progress(name: &CStr) {
    if let Some(a) = api_v2() {
        (a.progress)(name.as_ptr());
    }
}

/// A unit of work of the latency progress point `name` begins.
#[inline]
pub fn progress_begin(name: &CStr) {
    if let Some(a) = api_v2() {
        (a.progress_begin)(name.as_ptr());
    }
}

/// A unit of work of the latency progress point `name` ends.
#[inline]
pub fn progress_end(name: &CStr) {
    if let Some(a) = api_v2() {
        (a.progress_end)(name.as_ptr());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn without_the_runtime_everything_is_a_no_op() {
        assert!(!super::is_active());
        let _r = super::Region::new(c"region");
        super::mark(c"mark");
        super::set_thread_name(c"name");
        super::pause();
        super::resume();
        super::progress(c"done");
        super::progress_begin(c"request");
        super::progress_end(c"request");
    }
}
