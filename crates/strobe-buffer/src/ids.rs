//! The handles of the C ABI (`include/strobe_tool.h`): a context, a
//! buffer, a callback thread, each a `repr(C)` struct around its id.
//!
//! Owns their layouts only; what an id names is looked up where that
//! thing lives. Never changes a layout without `strobe_tool.h`.

/// `strobe_context_id_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContextId {
    /// Non-zero for a valid context.
    pub handle: u64,
}

/// `strobe_buffer_id_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BufferId {
    /// Non-zero for a valid buffer.
    pub handle: u64,
}

/// `strobe_callback_thread_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallbackThreadId {
    /// Non-zero for a valid callback thread.
    pub handle: u64,
}
