//! Unloading libraries: `dlclose` is wrapped so the unwinder forgets a
//! module before its memory is unmapped.
//!
//! `dlopen` is deliberately not wrapped: glibc resolves a `dlopen` relative
//! to its caller (`RUNPATH`, namespaces), and a wrapper would make the
//! runtime the caller. New modules are found instead by the sampler's
//! allocator threads, which compare the loader's load/unload counters every
//! poll interval and rebuild the unwinder when they change.

use crate::interpose::{real, RealFn};

static REAL_DLCLOSE: RealFn = RealFn::new(c"dlclose");

/// The load address (link map `l_addr`) of a `dlopen` handle.
fn load_bias(handle: *mut libc::c_void) -> Option<u64> {
    #[repr(C)]
    struct LinkMap {
        l_addr: u64,
    }
    let mut map: *mut LinkMap = std::ptr::null_mut();
    // SAFETY: RTLD_DI_LINKMAP writes a link_map pointer, whose first field
    // is l_addr (ABI of <link.h>).
    let rc = unsafe {
        libc::dlinfo(
            handle,
            libc::RTLD_DI_LINKMAP,
            &mut map as *mut _ as *mut libc::c_void,
        )
    };
    // SAFETY: a non-null link map returned by the loader.
    (rc == 0 && !map.is_null()).then(|| unsafe { (*map).l_addr })
}

/// Interposes `dlclose`.
///
/// # Safety
/// Same contract as `dlclose`.
#[no_mangle]
pub unsafe extern "C" fn dlclose(handle: *mut libc::c_void) -> libc::c_int {
    let real_dlclose = real!(REAL_DLCLOSE as fn(*mut libc::c_void) -> libc::c_int);
    let closing = crate::state::owned()
        .and_then(|_| load_bias(handle))
        .and_then(|bias| {
            strobe_sampler::modules()
                .into_iter()
                .find(|m| m.bias == bias && bias != 0)
        });
    if let Some(module) = &closing {
        let _ = std::panic::catch_unwind(|| {
            strobe_sampler::snapshot::rebuild(Some(module.text.clone()))
        });
    }
    // SAFETY: forwarding the caller's handle.
    let rc = unsafe { real_dlclose(handle) };
    // Rebuild after every dlclose, not only when the handle's own module was
    // known: its dependencies may have been unmapped with it.
    if crate::state::owned().is_some() {
        let _ = std::panic::catch_unwind(|| strobe_sampler::snapshot::rebuild(None));
    }
    rc
}
