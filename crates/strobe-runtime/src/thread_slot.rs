//! The calling thread's slot in the segment, claimed on the thread's first
//! need: at its start, or on the first event of a thread made without
//! `pthread_create` (which is then adopted: its start record, counters and
//! sampling begin there).
//!
//! Owns claiming a slot for the calling thread and the thread's kernel
//! name its records carry. Never runs in a signal handler; never hands a
//! slot back (the thread's end does, in `threads`).

use crate::events::{emit, my_slot, set_my_slot};
use crate::state::Runtime;
use strobe_core::clock::now_ns;
use strobe_core::thread::gettid;
use strobe_wire::record::event;

/// The calling thread's slot, claiming one (and starting its sampling) if
/// it has none: threads made without `pthread_create` are adopted on their
/// first event. `None` when every slot is taken.
pub fn slot_of_current_thread(rt: &Runtime) -> Option<u32> {
    my_slot(rt).or_else(|| claim_for_current_thread(rt))
}

fn claim_for_current_thread(rt: &Runtime) -> Option<u32> {
    let tid = gettid();
    let slot = rt.segment.claim_slot(tid)?;
    set_my_slot(rt, slot);
    emit(rt, slot, event::THREAD_START, 0, now_ns(), &thread_name());
    crate::sigwrap::note_current_mask(rt, slot);
    // Before the timers: the first sample finds them.
    if let Some(counters) = &rt.counters {
        counters
            .open_for_current_thread(slot, |note| emit(rt, slot, event::NOTE, 0, now_ns(), note));
    }
    if let Some(sampler) = &rt.sampler {
        if let Err(e) = sampler.register_current_thread(slot) {
            crate::log::log_at!(1, "thread {tid} is not sampled: {e}");
        }
    }
    Some(slot)
}

/// The kernel's name of the calling thread.
pub fn thread_name() -> Vec<u8> {
    let mut buf = [0u8; 16];
    // SAFETY: a 16-byte buffer, as the kernel's names are.
    let rc = unsafe {
        libc::pthread_getname_np(
            libc::pthread_self(),
            buf.as_mut_ptr() as *mut libc::c_char,
            16,
        )
    };
    if rc != 0 {
        return Vec::new();
    }
    buf.iter().copied().take_while(|&b| b != 0).collect()
}
