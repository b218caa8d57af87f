//! Contexts: the unit a tool configures and switches on and off, holding one
//! buffer tracing service and one callback tracing service per kind.
//!
//! Owns context creation, start/stop, service configuration (with the
//! "configure each (context, kind) pair once" rule of seed 001), and
//! per-context emission. Configuration allocates and takes the
//! context's configuration lock; emission through a context does neither:
//! an atomic load of the active flag, a lock-free lookup of the kind's
//! service, a bit test of the filter, then the buffer's emplace.

use crate::buffer::{Buffer, Emplace};
use crate::buffer_tracing::BufferService;
use crate::callback_tracing::{
    CallbackFn, CallbackRecord, CallbackScope, CallbackService, UserData,
};
use crate::dispatch;
use crate::error::{Error, Result};
use crate::filter::OperationFilter;
use crate::kind::{Kind, KIND_SLOTS};
use crate::record::{frames_as_bytes, MarkerRecord, Payload, SampleRecord};
use crate::registry::Registry;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// Most contexts a process may create.
pub const MAX_CONTEXTS: usize = 1024;

pub(crate) struct ContextInner {
    pub(crate) id: u64,
    active: AtomicBool,
    config: Mutex<()>,
    buffer_services: [OnceLock<&'static BufferService>; KIND_SLOTS],
    callback_services: [OnceLock<&'static CallbackService>; KIND_SLOTS],
}

impl ContextInner {
    #[inline]
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }
}

static CONTEXTS: Registry<ContextInner, MAX_CONTEXTS> = Registry::new();

pub(crate) fn lookup(id: u64) -> Result<&'static ContextInner> {
    CONTEXTS.get(id).ok_or(Error::UnknownContext(id))
}

/// A handle to a context (seed 001's `context_id_t`). Contexts live until
/// the process exits.
#[derive(Clone, Copy)]
pub struct Context {
    inner: &'static ContextInner,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("id", &self.inner.id)
            .field("active", &self.is_active())
            .finish()
    }
}

impl Context {
    /// Creates an inactive context.
    pub fn create() -> Result<Context> {
        let made = CONTEXTS.insert_with(|id| {
            Ok::<_, Error>(ContextInner {
                id,
                active: AtomicBool::new(false),
                config: Mutex::new(()),
                buffer_services: [const { OnceLock::new() }; KIND_SLOTS],
                callback_services: [const { OnceLock::new() }; KIND_SLOTS],
            })
        });
        match made {
            Some(Ok(inner)) => Ok(Context { inner }),
            Some(Err(e)) => Err(e),
            None => Err(Error::LimitReached {
                what: "contexts",
                limit: CONTEXTS.capacity(),
            }),
        }
    }

    /// The context with this id.
    pub fn from_id(id: u64) -> Result<Context> {
        lookup(id).map(|inner| Context { inner })
    }

    /// The context's id (non-zero).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Whether the context is started.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.inner.is_active()
    }

    /// Starts the context: its services begin receiving what producers emit
    /// through the global [`crate::emit`] family. Starting an active context
    /// does nothing.
    pub fn start(&self) -> Result<()> {
        let _guard = self.inner.config.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_active() {
            return Ok(());
        }
        let mut added_buffers = Vec::new();
        let mut added_callbacks = Vec::new();
        let mut failure = None;
        for kind in crate::kind::kinds() {
            if let Some(svc) = self.inner.buffer_services[kind as usize].get() {
                if dispatch::activate_buffer(kind, svc) {
                    added_buffers.push((kind, *svc));
                } else {
                    failure = Some("active buffer tracing services of one kind");
                    break;
                }
            }
            if let Some(svc) = self.inner.callback_services[kind as usize].get() {
                if dispatch::activate_callback(kind, svc) {
                    added_callbacks.push((kind, *svc));
                } else {
                    failure = Some("active callback tracing services of one kind");
                    break;
                }
            }
        }
        if let Some(what) = failure {
            for (kind, svc) in added_buffers {
                dispatch::deactivate_buffer(kind, svc);
            }
            for (kind, svc) in added_callbacks {
                dispatch::deactivate_callback(kind, svc);
            }
            return Err(Error::LimitReached {
                what,
                limit: dispatch::MAX_ACTIVE_SERVICES_PER_KIND,
            });
        }
        self.inner.active.store(true, Ordering::Release);
        Ok(())
    }

    /// Stops the context: its services stop receiving records. Records
    /// already placed stay in their buffers until a watermark or a flush.
    pub fn stop(&self) -> Result<()> {
        let _guard = self.inner.config.lock().unwrap_or_else(|e| e.into_inner());
        if !self.is_active() {
            return Ok(());
        }
        self.inner.active.store(false, Ordering::Release);
        for kind in crate::kind::kinds() {
            if let Some(svc) = self.inner.buffer_services[kind as usize].get() {
                dispatch::deactivate_buffer(kind, svc);
            }
            if let Some(svc) = self.inner.callback_services[kind as usize].get() {
                dispatch::deactivate_callback(kind, svc);
            }
        }
        Ok(())
    }

    /// Sends records of `kind` to `buffer` (seed 001's
    /// `configure_buffer_tracing_service`). `operations` restricts the
    /// service to those operations; `None` or an empty slice traces all.
    /// Errors when the pair is already configured, the context is active,
    /// the buffer belongs to another context, or an operation is unknown.
    pub fn configure_buffer_tracing(
        &self,
        kind: Kind,
        operations: Option<&[u32]>,
        buffer: &Buffer,
    ) -> Result<()> {
        if buffer.context_id() != self.id() {
            return Err(Error::BufferOfOtherContext {
                buffer: buffer.id(),
                owner: buffer.context_id(),
                context: self.id(),
            });
        }
        let filter = OperationFilter::new(kind, operations)?;
        let _guard = self.inner.config.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_active() {
            return Err(Error::ContextActive(self.id()));
        }
        let slot = &self.inner.buffer_services[kind as usize];
        if slot.get().is_some() {
            return Err(Error::ServiceAlreadyConfigured {
                context: self.id(),
                kind: kind.name(),
                service: "buffer tracing",
            });
        }
        let svc: &'static BufferService = Box::leak(Box::new(BufferService {
            filter,
            buffer: buffer.inner,
        }));
        let _ = slot.set(svc);
        Ok(())
    }

    /// Calls `callback` synchronously, on the producing thread, at the
    /// enter and exit of every operation of `kind` (seed 001 contrasts this
    /// with buffered tracing). The per-call [`UserData`] the enter phase
    /// writes is handed to the exit phase. Same errors as
    /// [`Context::configure_buffer_tracing`].
    pub fn configure_callback_tracing(
        &self,
        kind: Kind,
        operations: Option<&[u32]>,
        callback: impl Fn(&CallbackRecord, &mut UserData) + Send + Sync + 'static,
    ) -> Result<()> {
        self.configure_callback_fn(kind, operations, CallbackFn::Rust(Box::new(callback)))
    }

    pub(crate) fn configure_callback_fn(
        &self,
        kind: Kind,
        operations: Option<&[u32]>,
        callback: CallbackFn,
    ) -> Result<()> {
        let filter = OperationFilter::new(kind, operations)?;
        let _guard = self.inner.config.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_active() {
            return Err(Error::ContextActive(self.id()));
        }
        let slot = &self.inner.callback_services[kind as usize];
        if slot.get().is_some() {
            return Err(Error::ServiceAlreadyConfigured {
                context: self.id(),
                kind: kind.name(),
                service: "callback tracing",
            });
        }
        let svc: &'static CallbackService =
            Box::leak(Box::new(CallbackService::new(self.id(), filter, callback)));
        let _ = slot.set(svc);
        Ok(())
    }

    /// Emits a typed record to this context's buffer tracing service for
    /// `T::KIND`, if the context is active and the operation passes the
    /// filter. Returns `None` when no service took it. Never allocates or
    /// locks.
    #[inline]
    pub fn emit<T: Payload>(&self, operation: u32, payload: &T) -> Option<Emplace> {
        self.emit_bytes(T::KIND, operation, payload.as_bytes(), &[])
    }

    /// Emits a record made of `head` then `tail` for `kind`.
    #[inline]
    pub fn emit_bytes(
        &self,
        kind: Kind,
        operation: u32,
        head: &[u8],
        tail: &[u8],
    ) -> Option<Emplace> {
        if !self.is_active() {
            return None;
        }
        let svc = self.inner.buffer_services[kind as usize].get()?;
        if !svc.filter.allows(operation) {
            return None;
        }
        Some(
            svc.buffer
                .emplace(kind.category() as u32, kind as u32, operation, head, tail),
        )
    }

    /// Emits a sample with its frame addresses (at most
    /// [`crate::record::MAX_SAMPLE_FRAMES`]; more are cut and the truncated
    /// flag set). `head.frame_count` is set from `frames`.
    #[inline]
    pub fn emit_sample(
        &self,
        operation: u32,
        head: &SampleRecord,
        frames: &[u64],
    ) -> Option<Emplace> {
        let (head, frames) = dispatch::prepare_sample(head, frames);
        self.emit_bytes(
            Kind::Sample,
            operation,
            head.as_bytes(),
            frames_as_bytes(frames),
        )
    }

    /// Emits a marker with text (at most [`crate::record::MAX_MARKER_TEXT`]
    /// bytes; more are cut). `head.text_len` is set from `text`.
    #[inline]
    pub fn emit_marker(&self, operation: u32, head: &MarkerRecord, text: &[u8]) -> Option<Emplace> {
        let (head, text) = dispatch::prepare_marker(head, text);
        self.emit_bytes(Kind::Marker, operation, head.as_bytes(), text)
    }

    /// Runs this context's callback tracing service for `kind` (enter
    /// phase) and returns the scope whose [`CallbackScope::exit`] runs the
    /// exit phase with the same per-call user data. Nothing runs when the
    /// context is inactive or the operation is filtered out.
    #[inline]
    pub fn callback_enter(&self, kind: Kind, operation: u32, payload: &[u8]) -> CallbackScope {
        let mut scope = CallbackScope::new(kind, operation);
        if self.is_active() {
            if let Some(svc) = self.inner.callback_services[kind as usize].get() {
                scope.enter(svc, payload);
            }
        }
        scope
    }
}

/// Stops every context (used at exit, before the final flush).
pub(crate) fn stop_all() {
    for inner in CONTEXTS.iter() {
        let _ = Context { inner }.stop();
    }
}
