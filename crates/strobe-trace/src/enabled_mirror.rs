//! The global framework's enabled state, mirrored in one atomic byte so
//! that [`crate::trace_enabled`] costs one relaxed load.
//!
//! Owns that byte. Written only by the framework instance that is the
//! global one, whenever its enabled state changes; read by the
//! instrumentation's enabled check. Never locks or allocates.

use std::sync::atomic::{AtomicU8, Ordering};

/// 0 = global not created yet, 1 = disabled, 2 = enabled.
static GLOBAL_ENABLED: AtomicU8 = AtomicU8::new(0);

/// Records the global framework's enabled state.
pub(crate) fn mirror_enabled(on: bool) {
    GLOBAL_ENABLED.store(if on { 2 } else { 1 }, Ordering::Relaxed);
}

/// The global framework's enabled state; `None` before the global exists.
/// One relaxed atomic load.
#[inline(always)]
pub(crate) fn mirrored_enabled() -> Option<bool> {
    match GLOBAL_ENABLED.load(Ordering::Relaxed) {
        2 => Some(true),
        1 => Some(false),
        _ => None,
    }
}
