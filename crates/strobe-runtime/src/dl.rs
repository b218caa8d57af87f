//! Loaded modules: telling the collector about them, and keeping the
//! unwinder current when libraries come and go.
//!
//! `dlclose` is wrapped so the unwinder forgets a module before its memory
//! is unmapped. `dlopen` is deliberately not wrapped: glibc resolves a
//! `dlopen` relative to its caller (`RUNPATH`, namespaces), and a wrapper
//! would make the runtime the caller. New modules are noticed instead when
//! a thread is created or a library is closed, by
//! comparing the loader's load/unload counters (cheap when nothing
//! changed). Each module is announced once, as an event of the calling
//! thread, before the unwinder that knows it is published.

use crate::events::emit;
use crate::interpose::{real, RealFn};
use crate::state::Runtime;
use std::sync::atomic::Ordering;
use strobe_wire::record::{as_bytes, event, ModuleBody};

static REAL_DLCLOSE: RealFn = RealFn::new(c"dlclose");

/// Writes every module of the unwinder's history not yet announced.
pub fn announce_modules(rt: &Runtime) {
    let Some(slot) = crate::thread_slot::slot_of_current_thread(rt) else {
        return;
    };
    let seen = strobe_sampler::snapshot::modules_seen();
    let from = rt.announced_modules.swap(seen.len(), Ordering::AcqRel);
    for m in seen.iter().skip(from) {
        let body = ModuleBody {
            bias: m.bias,
            text_start: m.text.start,
            text_end: m.text.end,
            mapped_start: m.mapped.start,
            mapped_end: m.mapped.end,
            build_id_len: m.build_id.len() as u32,
            reserved: 0,
        };
        let mut bytes = as_bytes(&body).to_vec();
        bytes.extend_from_slice(&m.build_id);
        bytes.extend_from_slice(m.path.as_bytes());
        emit(rt, slot, event::MODULE, 0, 0, &bytes);
    }
}

/// Rebuilds the unwinder if the loader's counters moved, and announces
/// new modules.
pub fn refresh_modules(rt: &Runtime) {
    if strobe_sampler::snapshot::refresh_if_changed() {
        announce_modules(rt);
    }
}

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
    let rt = crate::state::owned();
    let closing = rt.and_then(|_| load_bias(handle)).and_then(|bias| {
        strobe_sampler::modules()
            .into_iter()
            .find(|m| m.bias == bias && bias != 0)
    });
    if let (Some(rt), Some(module)) = (rt, &closing) {
        let _ = std::panic::catch_unwind(|| {
            strobe_sampler::snapshot::rebuild(Some(module.text.clone()));
            announce_modules(rt);
        });
    }
    // SAFETY: forwarding the caller's handle.
    let rc = unsafe { real_dlclose(handle) };
    // Rebuild after every dlclose, not only when the handle's own module was
    // known: its dependencies may have been unmapped with it.
    if let Some(rt) = rt {
        let _ = std::panic::catch_unwind(|| {
            strobe_sampler::snapshot::rebuild(None);
            announce_modules(rt);
        });
    }
    rc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testing::{events, small};
    use strobe_wire::record::read;

    /// A module record's fields as the collector reads them: the body,
    /// then the build id, then the path.
    fn decode(bytes: &[u8]) -> (ModuleBody, Vec<u8>, String) {
        let body = read::<ModuleBody>(bytes).expect("a whole module body");
        let rest = &bytes[std::mem::size_of::<ModuleBody>()..];
        let (id, path) = rest.split_at(body.build_id_len as usize);
        (body, id.to_vec(), String::from_utf8(path.to_vec()).unwrap())
    }

    #[test]
    fn each_module_seen_is_announced_once_as_the_collector_reads_it() {
        strobe_sampler::snapshot::rebuild(None);
        let seen = strobe_sampler::snapshot::modules_seen();
        assert!(!seen.is_empty());
        let rt = small();
        announce_modules(rt);
        // The calling thread got a slot for it (and said so first).
        let slot = crate::events::my_slot(rt).expect("a slot");
        let got = events(rt, slot);
        assert_eq!(got[0].0.kind, event::THREAD_START);
        let modules: Vec<_> = got[1..]
            .iter()
            .map(|(head, bytes)| {
                assert_eq!(
                    (head.kind, head.arg, head.timestamp_ns),
                    (event::MODULE, 0, 0)
                );
                decode(bytes)
            })
            .collect();
        let announced = rt.announced_modules.load(Ordering::Relaxed);
        assert!(announced >= seen.len());
        assert_eq!(modules.len(), announced);
        for ((body, id, path), m) in modules.iter().zip(&seen) {
            assert_eq!(*path, m.path);
            assert_eq!(*id, m.build_id);
            assert_eq!(body.bias, m.bias);
            assert_eq!(body.text_start..body.text_end, m.text);
            assert_eq!(body.mapped_start..body.mapped_end, m.mapped);
        }
        // This test's own code is in the executable's module.
        let here = each_module_seen_is_announced_once_as_the_collector_reads_it as fn() as usize;
        let (body, _, path) = modules
            .iter()
            .find(|(b, _, _)| (b.text_start..b.text_end).contains(&(here as u64)))
            .expect("the module of this code");
        assert_eq!(path, strobe_core::modules::own_executable());
        assert!(body.bias <= body.text_start && body.mapped_start <= body.text_start);
        assert!(body.text_end <= body.mapped_end);
        // Nothing new: nothing more is written.
        announce_modules(rt);
        assert!(events(rt, slot).is_empty());
    }
}
