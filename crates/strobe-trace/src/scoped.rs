//! [`ScopedNotify`]: a guard that sends a begin notification when created
//! and the matching end notification (`begin | 1`) when dropped.
//!
//! Owns nothing but the arguments it replays. It must never allocate: it
//! sits on instrumentation paths.

use std::ffi::c_void;

use crate::event::EventData;
use crate::framework::Framework;
use crate::types::StreamId;

/// Begin/end notification pair bound to a scope.
///
/// Nothing is sent when tracing is off at creation. The end type is the
/// begin type with bit 0 set (`XPTI_TRACE_POINT_END`), so pass a begin code
/// (`region_begin`, `task_begin`, a user-defined begin, …).
#[must_use = "the end notification is sent when this guard is dropped"]
pub struct ScopedNotify<'a> {
    fw: &'a Framework,
    stream: StreamId,
    end_type: u16,
    parent: Option<&'a EventData>,
    event: Option<&'a EventData>,
    instance: u64,
    user_data: *const c_void,
    armed: bool,
}

impl<'a> ScopedNotify<'a> {
    /// Sends `begin_type` now and `begin_type | 1` on drop.
    pub fn new(
        fw: &'a Framework,
        stream: StreamId,
        begin_type: u16,
        parent: Option<&'a EventData>,
        event: Option<&'a EventData>,
        instance: u64,
        user_data: *const c_void,
    ) -> Self {
        let armed = fw.is_enabled()
            && fw
                .notify(stream, begin_type, parent, event, instance, user_data)
                .is_ok();
        ScopedNotify {
            fw,
            stream,
            end_type: begin_type | 1,
            parent,
            event,
            instance,
            user_data,
            armed,
        }
    }
}

impl Drop for ScopedNotify<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.fw.notify(
                self.stream,
                self.end_type,
                self.parent,
                self.event,
                self.instance,
                self.user_data,
            );
        }
    }
}
