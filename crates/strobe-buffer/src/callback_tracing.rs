//! Callback tracing services: synchronous calls on the producing thread at
//! the enter and exit of an operation, with per-call user data carried from
//! enter to exit (seed 001 contrasts these with buffered tracing).
//!
//! Owns the callback record layout (shared with C), the phases, per-call
//! user data, correlation ids, and the scope that pairs enter with exit.
//! Invoking services never allocates or locks; a panicking Rust callback is
//! caught and counted so it cannot unwind into the producer (which may be C
//! code behind a wrapper).

use crate::filter::OperationFilter;
use crate::kind::Kind;
use crate::service_table::MAX_ACTIVE_SERVICES_PER_KIND;
use crate::thread_index;
use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

/// The phase of a callback tracing call.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before the operation runs.
    Enter = 1,
    /// After it returned.
    Exit = 2,
}

/// Per-call storage a callback writes at enter and reads back at exit
/// (C `strobe_user_data_t`). Starts as zero for every call.
#[repr(C)]
#[derive(Clone, Copy)]
pub union UserData {
    /// As an integer.
    pub value: u64,
    /// As a pointer.
    pub ptr: *mut c_void,
}

impl UserData {
    /// The data as an integer.
    pub fn value(&self) -> u64 {
        // SAFETY: both fields are 8 bytes of plain data on 64-bit targets;
        // reading either is valid for any bit pattern.
        unsafe { self.value }
    }
}

impl std::fmt::Debug for UserData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UserData({:#x})", self.value())
    }
}

/// What a callback tracing callback receives (C
/// `strobe_callback_record_t`, 48 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CallbackRecord {
    /// The context whose service runs.
    pub context: u64,
    /// Same value at enter and exit of one call; unique per call.
    pub correlation_id: u64,
    /// A [`Kind`] value.
    pub kind: u32,
    /// The operation.
    pub operation: u32,
    /// A [`Phase`] value.
    pub phase: u32,
    /// Kernel thread id of the calling thread.
    pub tid: u32,
    /// The operation's payload for this phase (may be null).
    pub payload: *const c_void,
    /// Payload size in bytes.
    pub payload_size: u64,
}

impl CallbackRecord {
    /// The payload bytes (valid during the callback).
    pub fn payload_bytes(&self) -> &[u8] {
        if self.payload.is_null() || self.payload_size == 0 {
            return &[];
        }
        // SAFETY: the record points at the caller's payload slice, alive
        // for the duration of the callback that sees this record.
        unsafe { std::slice::from_raw_parts(self.payload as *const u8, self.payload_size as usize) }
    }

    /// The phase.
    pub fn phase(&self) -> Phase {
        if self.phase == Phase::Exit as u32 {
            Phase::Exit
        } else {
            Phase::Enter
        }
    }
}

/// `strobe_callback_tracing_cb_t`.
pub type CCallbackTracingFn = unsafe extern "C" fn(
    record: *const CallbackRecord,
    user_data: *mut UserData,
    callback_data: *mut c_void,
);

/// A Rust callback tracing callback.
pub type CallbackTracingFn = Box<dyn Fn(&CallbackRecord, &mut UserData) + Send + Sync + 'static>;

pub(crate) enum CallbackFn {
    Rust(CallbackTracingFn),
    C {
        func: CCallbackTracingFn,
        data: *mut c_void,
    },
}

pub(crate) struct CallbackService {
    context: u64,
    filter: OperationFilter,
    callback: CallbackFn,
    failures: AtomicU64,
}

// SAFETY: the C callback data is the tool's, which promises (by registering
// a callback tracing service) that it may be used from any producing thread.
unsafe impl Sync for CallbackService {}
// SAFETY: as above.
unsafe impl Send for CallbackService {}

impl CallbackService {
    pub(crate) fn new(context: u64, filter: OperationFilter, callback: CallbackFn) -> Self {
        CallbackService {
            context,
            filter,
            callback,
            failures: AtomicU64::new(0),
        }
    }

    fn call(&self, record: &CallbackRecord, data: &mut UserData) {
        let outcome = catch_unwind(AssertUnwindSafe(|| match &self.callback {
            CallbackFn::Rust(f) => f(record, data),
            CallbackFn::C {
                func,
                data: cb_data,
            } => {
                // SAFETY: the tool registered this function with this data
                // and the `strobe_callback_tracing_cb_t` signature; both
                // pointers are valid for the call.
                unsafe { func(record, data, *cb_data) }
            }
        }));
        if outcome.is_err() && self.failures.fetch_add(1, Ordering::Relaxed) == 0 {
            {
                crate::warn::write_raw(
                    b"strobe: warning: a callback tracing callback panicked; the panic was \
                      caught and further ones are only counted\n",
                );
            }
        }
    }
}

const MAX_SCOPE: usize = MAX_ACTIVE_SERVICES_PER_KIND;

thread_local! {
    static NEXT_CALL: Cell<u64> = const { Cell::new(0) };
}

fn next_correlation_id() -> u64 {
    let n = NEXT_CALL.with(|c| {
        let n = c.get().wrapping_add(1);
        c.set(n);
        n
    });
    ((thread_index::current() as u64) << 40) | (n & ((1 << 40) - 1))
}

/// An operation between its enter and exit phases. Call
/// [`CallbackScope::exit`] when the operation returns; dropping the scope
/// without it runs the exit phase with an empty payload.
pub struct CallbackScope {
    kind: Kind,
    operation: u32,
    correlation_id: u64,
    len: usize,
    services: [Option<&'static CallbackService>; MAX_SCOPE],
    data: [UserData; MAX_SCOPE],
}

impl CallbackScope {
    pub(crate) fn new(kind: Kind, operation: u32) -> CallbackScope {
        CallbackScope {
            kind,
            operation,
            correlation_id: 0,
            len: 0,
            services: [None; MAX_SCOPE],
            data: [UserData { value: 0 }; MAX_SCOPE],
        }
    }

    /// How many services saw the enter phase (and will see the exit).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no service saw the enter phase.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The call's correlation id (0 when no service ran).
    pub fn correlation_id(&self) -> u64 {
        self.correlation_id
    }

    pub(crate) fn enter(&mut self, svc: &'static CallbackService, payload: &[u8]) {
        if !svc.filter.allows(self.operation) || self.len == MAX_SCOPE {
            return;
        }
        if self.correlation_id == 0 {
            self.correlation_id = next_correlation_id();
        }
        let record = self.record(svc, Phase::Enter, payload);
        let i = self.len;
        svc.call(&record, &mut self.data[i]);
        self.services[i] = Some(svc);
        self.len += 1;
    }

    fn record(&self, svc: &CallbackService, phase: Phase, payload: &[u8]) -> CallbackRecord {
        CallbackRecord {
            context: svc.context,
            correlation_id: self.correlation_id,
            kind: self.kind as u32,
            operation: self.operation,
            phase: phase as u32,
            tid: thread_index::tid(),
            payload: payload.as_ptr() as *const c_void,
            payload_size: payload.len() as u64,
        }
    }

    /// Runs the exit phase of every service that saw the enter phase, in
    /// reverse order, each with the user data its enter wrote.
    pub fn exit(mut self, payload: &[u8]) {
        self.run_exit(payload);
    }

    fn run_exit(&mut self, payload: &[u8]) {
        while self.len > 0 {
            self.len -= 1;
            let i = self.len;
            if let Some(svc) = self.services[i] {
                let record = self.record(svc, Phase::Exit, payload);
                svc.call(&record, &mut self.data[i]);
            }
        }
    }
}

impl Drop for CallbackScope {
    fn drop(&mut self) {
        self.run_exit(&[]);
    }
}
