//! The C ABI: the versioned function table (`strobe_tool_api_t`) handed to
//! tool libraries, and in one place every type of it (the handles are
//! defined in `ids`, the callback signatures with the buffers and the
//! callback tracing services that call them).
//!
//! Owns the translation between C calls and the Rust API: null checks,
//! status codes, catching panics at the boundary (none may unwind into C).
//! It mirrors `include/strobe_tool.h` exactly; change both together and bump
//! the minor version when adding a trailing table entry. Tools need no
//! symbol from the host: everything goes through the table.

use crate::buffer::{self, BufferOptions, BufferStats, Callback, Policy};
use crate::buffer_setup::create_buffer;
use crate::callback_thread::CallbackThread;
use crate::callback_tracing::CallbackFn;
use crate::context::Context;
use crate::error::{status, status_name, Error};
use crate::kind::{self, Kind};
use std::ffi::{c_char, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// Major version of the tool API: a tool built for another major is refused.
pub const API_VERSION_MAJOR: u32 = 1;
/// Minor version: a tool built for a minor up to this one is accepted.
pub const API_VERSION_MINOR: u32 = 0;
/// `STROBE_TOOL_API_VERSION`: `major << 16 | minor`.
pub const API_VERSION: u32 = (API_VERSION_MAJOR << 16) | API_VERSION_MINOR;

pub use crate::buffer::CBufferCallback;
pub use crate::callback_tracing::CCallbackTracingFn;
pub use crate::ids::{BufferId, CallbackThreadId, ContextId};

/// `strobe_kind_iterate_cb_t`: return non-zero to stop.
pub type CIterateKindsFn = unsafe extern "C" fn(kind: u32, data: *mut c_void) -> i32;
/// `strobe_operation_iterate_cb_t`: return non-zero to stop.
pub type CIterateOperationsFn =
    unsafe extern "C" fn(kind: u32, operation: u32, data: *mut c_void) -> i32;

/// `strobe_tool_api_t`: the versioned function table a tool receives.
#[repr(C)]
pub struct ToolApi {
    /// `sizeof(strobe_tool_api_t)` of the host.
    pub size: u32,
    /// [`API_VERSION`] of the host.
    pub version: u32,
    /// Creates an inactive context.
    pub create_context: unsafe extern "C" fn(out: *mut ContextId) -> i32,
    /// Starts a context.
    pub start_context: unsafe extern "C" fn(ctx: ContextId) -> i32,
    /// Stops a context.
    pub stop_context: unsafe extern "C" fn(ctx: ContextId) -> i32,
    /// Writes 1 or 0 to `active`.
    pub context_is_active: unsafe extern "C" fn(ctx: ContextId, active: *mut i32) -> i32,
    /// Seed 001's `create_buffer`.
    pub create_buffer: unsafe extern "C" fn(
        ctx: ContextId,
        size: usize,
        watermark: usize,
        policy: u32,
        callback: Option<CBufferCallback>,
        callback_data: *mut c_void,
        out: *mut BufferId,
    ) -> i32,
    /// Seed 001's `flush_buffer`: returns after the callback ran.
    pub flush_buffer: unsafe extern "C" fn(buffer: BufferId) -> i32,
    /// Copies the buffer's counters to `out`.
    pub buffer_stats: unsafe extern "C" fn(buffer: BufferId, out: *mut BufferStats) -> i32,
    /// Seed 001's `create_callback_thread`.
    pub create_callback_thread: unsafe extern "C" fn(out: *mut CallbackThreadId) -> i32,
    /// Seed 001's `assign_callback_thread`.
    pub assign_callback_thread:
        unsafe extern "C" fn(buffer: BufferId, thread: CallbackThreadId) -> i32,
    /// Seed 001's `configure_buffer_tracing_service`.
    pub configure_buffer_tracing_service: unsafe extern "C" fn(
        ctx: ContextId,
        kind: u32,
        operations: *const u32,
        operations_count: usize,
        buffer: BufferId,
    ) -> i32,
    /// Configures a synchronous callback tracing service.
    pub configure_callback_tracing_service: unsafe extern "C" fn(
        ctx: ContextId,
        kind: u32,
        operations: *const u32,
        operations_count: usize,
        callback: Option<CCallbackTracingFn>,
        callback_data: *mut c_void,
    ) -> i32,
    /// The kind's name, or NULL.
    pub query_kind_name: unsafe extern "C" fn(kind: u32) -> *const c_char,
    /// The operation's name, or NULL.
    pub query_operation_name: unsafe extern "C" fn(kind: u32, operation: u32) -> *const c_char,
    /// Calls `cb` for each kind until it returns non-zero.
    pub iterate_kinds: unsafe extern "C" fn(cb: Option<CIterateKindsFn>, data: *mut c_void) -> i32,
    /// Calls `cb` for each operation of `kind` until it returns non-zero.
    pub iterate_operations:
        unsafe extern "C" fn(kind: u32, cb: Option<CIterateOperationsFn>, data: *mut c_void) -> i32,
    /// A static description of a status code.
    pub status_string: unsafe extern "C" fn(status: i32) -> *const c_char,
    /// Emits a record of `kind` to every active context tracing it.
    /// Returns OK when stored at least once or nobody traces it,
    /// RECORD_DROPPED when every buffer dropped it.
    pub emit:
        unsafe extern "C" fn(kind: u32, operation: u32, payload: *const c_void, size: usize) -> i32,
}

/// The table handed to tools.
pub fn tool_api() -> &'static ToolApi {
    &TOOL_API
}

static TOOL_API: ToolApi = ToolApi {
    size: std::mem::size_of::<ToolApi>() as u32,
    version: API_VERSION,
    create_context: c_create_context,
    start_context: c_start_context,
    stop_context: c_stop_context,
    context_is_active: c_context_is_active,
    create_buffer: c_create_buffer,
    flush_buffer: c_flush_buffer,
    buffer_stats: c_buffer_stats,
    create_callback_thread: c_create_callback_thread,
    assign_callback_thread: c_assign_callback_thread,
    configure_buffer_tracing_service: c_configure_buffer_tracing_service,
    configure_callback_tracing_service: c_configure_callback_tracing_service,
    query_kind_name: c_query_kind_name,
    query_operation_name: c_query_operation_name,
    iterate_kinds: c_iterate_kinds,
    iterate_operations: c_iterate_operations,
    status_string: c_status_string,
    emit: c_emit,
};

/// Runs `f`, mapping errors to status codes and panics to `ERROR`.
fn guard(f: impl FnOnce() -> Result<(), Error>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => status::OK,
        Ok(Err(e)) => e.status(),
        Err(_) => status::ERROR,
    }
}

fn kind_of(kind: u32) -> Result<Kind, Error> {
    Kind::from_u32(kind).ok_or(Error::UnknownKind(kind))
}

/// # Safety
/// `ops` must point at `n` readable values when non-null.
unsafe fn operations<'a>(ops: *const u32, n: usize) -> Option<&'a [u32]> {
    if ops.is_null() || n == 0 {
        None
    } else {
        // SAFETY: per the function contract.
        Some(unsafe { std::slice::from_raw_parts(ops, n) })
    }
}

unsafe extern "C" fn c_create_context(out: *mut ContextId) -> i32 {
    guard(|| {
        if out.is_null() {
            return Err(Error::InvalidArgument("create_context: out is NULL".into()));
        }
        let ctx = Context::create()?;
        // SAFETY: `out` is non-null and the caller promises it is writable.
        unsafe { out.write(ContextId { handle: ctx.id() }) };
        Ok(())
    })
}

unsafe extern "C" fn c_start_context(ctx: ContextId) -> i32 {
    guard(|| Context::from_id(ctx.handle)?.start())
}

unsafe extern "C" fn c_stop_context(ctx: ContextId) -> i32 {
    guard(|| Context::from_id(ctx.handle)?.stop())
}

unsafe extern "C" fn c_context_is_active(ctx: ContextId, active: *mut i32) -> i32 {
    guard(|| {
        let c = Context::from_id(ctx.handle)?;
        if active.is_null() {
            return Err(Error::InvalidArgument(
                "context_is_active: active is NULL".into(),
            ));
        }
        // SAFETY: non-null, writable per the caller.
        unsafe { active.write(c.is_active() as i32) };
        Ok(())
    })
}

unsafe extern "C" fn c_create_buffer(
    ctx: ContextId,
    size: usize,
    watermark: usize,
    policy: u32,
    callback: Option<CBufferCallback>,
    callback_data: *mut c_void,
    out: *mut BufferId,
) -> i32 {
    guard(|| {
        let Some(func) = callback else {
            return Err(Error::InvalidArgument(
                "create_buffer: callback is NULL".into(),
            ));
        };
        if out.is_null() {
            return Err(Error::InvalidArgument("create_buffer: out is NULL".into()));
        }
        let policy = Policy::from_u32(policy).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "create_buffer: policy {policy} (use STROBE_BUFFER_POLICY_LOSSLESS or _DISCARD)"
            ))
        })?;
        let b = create_buffer(
            ctx.handle,
            BufferOptions::new(size, watermark, policy),
            Callback::C {
                func,
                data: callback_data,
            },
        )?;
        // SAFETY: non-null, writable per the caller.
        unsafe { out.write(BufferId { handle: b.id() }) };
        Ok(())
    })
}

unsafe extern "C" fn c_flush_buffer(b: BufferId) -> i32 {
    guard(|| buffer::lookup(b.handle)?.flush())
}

unsafe extern "C" fn c_buffer_stats(b: BufferId, out: *mut BufferStats) -> i32 {
    guard(|| {
        let stats = buffer::lookup(b.handle)?.stats();
        if out.is_null() {
            return Err(Error::InvalidArgument("buffer_stats: out is NULL".into()));
        }
        // SAFETY: non-null, writable per the caller.
        unsafe { out.write(stats) };
        Ok(())
    })
}

unsafe extern "C" fn c_create_callback_thread(out: *mut CallbackThreadId) -> i32 {
    guard(|| {
        if out.is_null() {
            return Err(Error::InvalidArgument(
                "create_callback_thread: out is NULL".into(),
            ));
        }
        let t = CallbackThread::create()?;
        // SAFETY: non-null, writable per the caller.
        unsafe { out.write(CallbackThreadId { handle: t.id() }) };
        Ok(())
    })
}

unsafe extern "C" fn c_assign_callback_thread(b: BufferId, t: CallbackThreadId) -> i32 {
    guard(|| {
        let b = buffer::lookup(b.handle)?;
        b.assign_callback_thread(CallbackThread::from_id(t.handle)?)
    })
}

unsafe extern "C" fn c_configure_buffer_tracing_service(
    ctx: ContextId,
    kind: u32,
    ops: *const u32,
    n: usize,
    b: BufferId,
) -> i32 {
    guard(|| {
        let c = Context::from_id(ctx.handle)?;
        let k = kind_of(kind)?;
        let b = buffer::lookup(b.handle)?;
        // SAFETY: the caller passes `n` readable operations or NULL.
        let ops = unsafe { operations(ops, n) };
        c.configure_buffer_tracing(k, ops, &b)
    })
}

unsafe extern "C" fn c_configure_callback_tracing_service(
    ctx: ContextId,
    kind: u32,
    ops: *const u32,
    n: usize,
    callback: Option<CCallbackTracingFn>,
    callback_data: *mut c_void,
) -> i32 {
    guard(|| {
        let c = Context::from_id(ctx.handle)?;
        let k = kind_of(kind)?;
        let Some(func) = callback else {
            return Err(Error::InvalidArgument(
                "configure_callback_tracing_service: callback is NULL".into(),
            ));
        };
        // SAFETY: the caller passes `n` readable operations or NULL.
        let ops = unsafe { operations(ops, n) };
        c.configure_callback_fn(
            k,
            ops,
            CallbackFn::C {
                func,
                data: callback_data,
            },
        )
    })
}

struct Names {
    kinds: Vec<Option<CString>>,
    operations: Vec<Vec<CString>>,
    statuses: Vec<CString>,
}

fn names() -> &'static Names {
    static NAMES: OnceLock<Names> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut kinds = vec![None; kind::KIND_SLOTS];
        let mut operations = vec![Vec::new(); kind::KIND_SLOTS];
        for k in kind::kinds() {
            kinds[k as usize] = CString::new(k.name()).ok();
            operations[k as usize] = k
                .operations()
                .iter()
                .filter_map(|n| CString::new(*n).ok())
                .collect();
        }
        let statuses = (0..=status::RECORD_DROPPED + 1)
            .filter_map(|c| CString::new(status_name(c)).ok())
            .collect();
        Names {
            kinds,
            operations,
            statuses,
        }
    })
}

unsafe extern "C" fn c_query_kind_name(kind: u32) -> *const c_char {
    catch_unwind(|| {
        names()
            .kinds
            .get(kind as usize)
            .and_then(|n| n.as_ref())
            .map_or(std::ptr::null(), |n| n.as_ptr())
    })
    .unwrap_or(std::ptr::null())
}

unsafe extern "C" fn c_query_operation_name(kind: u32, operation: u32) -> *const c_char {
    catch_unwind(|| {
        names()
            .operations
            .get(kind as usize)
            .and_then(|ops| ops.get(operation as usize))
            .map_or(std::ptr::null(), |n| n.as_ptr())
    })
    .unwrap_or(std::ptr::null())
}

unsafe extern "C" fn c_status_string(code: i32) -> *const c_char {
    catch_unwind(|| {
        let table = &names().statuses;
        let i = if code >= 0 && (code as usize) < table.len() - 1 {
            code as usize
        } else {
            table.len() - 1
        };
        table[i].as_ptr()
    })
    .unwrap_or(std::ptr::null())
}

unsafe extern "C" fn c_iterate_kinds(cb: Option<CIterateKindsFn>, data: *mut c_void) -> i32 {
    guard(|| {
        let cb =
            cb.ok_or_else(|| Error::InvalidArgument("iterate_kinds: callback is NULL".into()))?;
        for k in kind::kinds() {
            // SAFETY: the tool's iteration callback with its own data.
            if unsafe { cb(k as u32, data) } != 0 {
                break;
            }
        }
        Ok(())
    })
}

unsafe extern "C" fn c_iterate_operations(
    kind: u32,
    cb: Option<CIterateOperationsFn>,
    data: *mut c_void,
) -> i32 {
    guard(|| {
        let k = kind_of(kind)?;
        let cb = cb
            .ok_or_else(|| Error::InvalidArgument("iterate_operations: callback is NULL".into()))?;
        for (op, _) in kind::operations(k) {
            // SAFETY: the tool's iteration callback with its own data.
            if unsafe { cb(kind, op, data) } != 0 {
                break;
            }
        }
        Ok(())
    })
}

unsafe extern "C" fn c_emit(kind: u32, operation: u32, payload: *const c_void, size: usize) -> i32 {
    let k = match Kind::from_u32(kind) {
        Some(k) => k,
        None => return status::UNKNOWN_KIND,
    };
    if payload.is_null() && size != 0 {
        return status::INVALID_ARGUMENT;
    }
    let bytes = if size == 0 {
        &[][..]
    } else {
        // SAFETY: the caller passes `size` readable bytes.
        unsafe { std::slice::from_raw_parts(payload as *const u8, size) }
    };
    let out = crate::dispatch::emit_bytes(k, operation, bytes, &[]);
    if out.stored == 0 && out.dropped > 0 {
        status::RECORD_DROPPED
    } else {
        status::OK
    }
}
