//! Finding the real functions behind the ones the runtime interposes.
//!
//! Owns `dlsym(RTLD_NEXT, …)` lookups, cached per symbol. A lookup happens
//! on the first call of a wrapper, never in a signal handler.

use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One cached symbol address.
pub struct RealFn {
    name: &'static CStr,
    address: AtomicUsize,
}

impl RealFn {
    /// A lookup for `name`.
    pub const fn new(name: &'static CStr) -> RealFn {
        RealFn {
            name,
            address: AtomicUsize::new(0),
        }
    }

    /// The next definition of the symbol after this library, or 0.
    pub fn address(&self) -> usize {
        let cached = self.address.load(Ordering::Relaxed);
        if cached != 0 {
            return cached;
        }
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
        let found = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) } as usize;
        self.address.store(found, Ordering::Relaxed);
        found
    }

    /// The address, or abort with a message naming the symbol: the program
    /// cannot go on without the function it called.
    pub fn require(&self) -> usize {
        let address = self.address();
        if address == 0 {
            crate::log::emit(&format!("cannot find the real {:?}; aborting", self.name));
            // SAFETY: abort has no preconditions.
            unsafe { libc::abort() };
        }
        address
    }
}

/// Resolves a [`RealFn`] to a typed function pointer:
/// `real!(REAL_FORK as fn() -> libc::pid_t)`.
macro_rules! real {
    ($static_name:ident as fn($($arg:ty),* $(,)?) -> $ret:ty) => {{
        let address = $static_name.require();
        // SAFETY: the address is the next definition of a C function with
        // this signature.
        unsafe { std::mem::transmute::<usize, unsafe extern "C" fn($($arg),*) -> $ret>(address) }
    }};
}
pub(crate) use real;
