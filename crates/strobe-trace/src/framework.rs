//! The [`Framework`]: one instance of the tracing framework (streams, string
//! table, payloads and events, callbacks, subscribers, user-defined types).
//!
//! Owns every registry of one framework instance, and the [`Subscriber`]
//! interface through which it tells tools about streams. The notify path
//! ([`Framework::notify`], [`Framework::notify_raw`]) must never lock,
//! allocate or write shared memory; registration paths may lock.

use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::callbacks::{Callback, CallbackHandle, CallbackTable, Notification, RawCallback};
use crate::error::TraceError;
use crate::event::{EventData, Payload};
use crate::objects::{Object, ObjectTable};
use crate::strings::StringTable;
use crate::tracepoints::{PayloadSpec, TracePoints};
use crate::types::{object_type, trace_point, ObjectId, StreamId, StringId};

/// What a subscriber learns when a stream is initialized.
#[derive(Debug, Clone, Copy)]
pub struct StreamInit<'a> {
    /// The stream's id.
    pub id: StreamId,
    /// The stream's name.
    pub name: &'a CStr,
    /// Major version the instrumentation declared.
    pub major: u32,
    /// Minor version the instrumentation declared.
    pub minor: u32,
    /// Version string the instrumentation declared.
    pub version: &'a CStr,
}

/// A tool that consumes streams: told when a stream starts (where it
/// registers its callbacks) and when it ends.
///
/// `init` is called once per initialization of a stream; a stream that is
/// finalized and initialized again is announced again, and a subscriber
/// added after a stream was initialized is told about it when it is added.
/// Implementations must tolerate repeated `init` calls for one stream
/// (registering the same callback twice yields `Duplicate`, which is
/// harmless).
pub trait Subscriber: Send + Sync {
    /// A short name for diagnostics.
    fn name(&self) -> &str;
    /// A stream begins: register callbacks here.
    fn init(&self, framework: &Framework, stream: &StreamInit<'_>);
    /// A stream ends: flush and release what the stream needed.
    fn finish(&self, framework: &Framework, stream_name: &CStr);
}

/// How a framework decides whether tracing is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnablePolicy {
    /// On unless [`Framework::set_enabled`]`(false)` (in-process Rust use).
    Always,
    /// The dispatcher rule: on when `XPTI_TRACE_ENABLE` allows it (see
    /// [`crate::env_trace_enable`]) and at least one subscriber is loaded,
    /// unless forced with [`Framework::set_enabled`].
    EnvAndSubscribers { env_allows: bool },
}

#[derive(Debug)]
struct StreamEntry {
    name: CString,
    initialized: bool,
}

#[derive(Default)]
struct Streams {
    by_name: HashMap<Vec<u8>, StreamId>,
    entries: Vec<StreamEntry>,
}

/// One tracing framework. The process-wide instance the C ABI uses is
/// [`crate::global()`]; tests and embedders may create their own.
pub struct Framework {
    callbacks: CallbackTable,
    tracepoints: TracePoints,
    objects: ObjectTable,
    // After `tracepoints`: its keys borrow interned strings.
    strings: StringTable,
    streams: Mutex<Streams>,
    subscribers: RwLock<Vec<Arc<dyn Subscriber>>>,
    vendors: Mutex<Vec<Vec<u8>>>,
    /// Metadata by event unique id (rarely used: kept out of the trace points).
    metadata: Mutex<HashMap<u64, Vec<(StringId, ObjectId)>>>,
    enabled: AtomicBool,
    policy: EnablePolicy,
    /// 0 = not forced, 1 = forced off, 2 = forced on.
    forced: AtomicU8,
    pub(crate) mirrors_global: AtomicBool,
    unique_ids: AtomicU64,
    id: u64,
}

static NEXT_FRAMEWORK_ID: AtomicU64 = AtomicU64::new(1);

impl Default for Framework {
    fn default() -> Self {
        Self::new()
    }
}

impl Framework {
    /// A framework that is enabled from the start ([`EnablePolicy::Always`]).
    pub fn new() -> Self {
        Self::with_policy(EnablePolicy::Always)
    }

    /// A framework following `policy`.
    pub fn with_policy(policy: EnablePolicy) -> Self {
        let fw = Framework {
            callbacks: CallbackTable::new(),
            tracepoints: TracePoints::new(),
            objects: ObjectTable::default(),
            strings: StringTable::new(),
            streams: Mutex::new(Streams::default()),
            subscribers: RwLock::new(Vec::new()),
            vendors: Mutex::new(Vec::new()),
            metadata: Mutex::new(HashMap::new()),
            enabled: AtomicBool::new(false),
            policy,
            forced: AtomicU8::new(0),
            mirrors_global: AtomicBool::new(false),
            unique_ids: AtomicU64::new(1),
            id: NEXT_FRAMEWORK_ID.fetch_add(1, Ordering::Relaxed),
        };
        fw.recompute_enabled();
        fw
    }

    /// An id unique to this framework instance within the process (never
    /// reused, unlike its address).
    pub fn id(&self) -> u64 {
        self.id
    }

    // ---- enable state -------------------------------------------------

    /// Whether tracing is on: one relaxed atomic load.
    #[inline(always)]
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Forces tracing on or off regardless of the policy
    /// (`xptiForceSetTraceEnabled`).
    pub fn set_enabled(&self, on: bool) {
        self.forced.store(if on { 2 } else { 1 }, Ordering::Relaxed);
        self.recompute_enabled();
    }

    pub(crate) fn recompute_enabled(&self) {
        let on = match self.forced.load(Ordering::Relaxed) {
            1 => false,
            2 => true,
            _ => match self.policy {
                EnablePolicy::Always => true,
                EnablePolicy::EnvAndSubscribers { env_allows } => {
                    env_allows && !self.read_subscribers().is_empty()
                }
            },
        };
        self.enabled.store(on, Ordering::Relaxed);
        if self.mirrors_global.load(Ordering::Relaxed) {
            crate::enabled_mirror::mirror_enabled(on);
        }
    }

    /// Whether notifications on `stream` would reach anyone: tracing is on
    /// and a callback is registered for `trace_type` (or, for
    /// `trace_type == 0`, for any type on the stream).
    pub fn check_trace_enabled(&self, stream: StreamId, trace_type: u16) -> bool {
        self.is_enabled() && self.callbacks.has_callbacks(stream, trace_type)
    }

    // ---- streams --------------------------------------------------------

    fn lock_streams(&self) -> std::sync::MutexGuard<'_, Streams> {
        self.streams.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a stream name and returns its id; the same name always
    /// yields the same id. Ids are 1..=254 in registration order (255 is
    /// [`crate::types::INVALID_STREAM_ID`]).
    ///
    /// Errors: `InvalidArg` for an empty name or one holding a NUL byte;
    /// `Full` when 254 streams exist.
    pub fn register_stream(&self, name: &[u8]) -> Result<StreamId, TraceError> {
        if name.is_empty() {
            return Err(TraceError::InvalidArg("empty stream name"));
        }
        let mut s = self.lock_streams();
        if let Some(&id) = s.by_name.get(name) {
            return Ok(id);
        }
        let cname = CString::new(name)
            .map_err(|_| TraceError::InvalidArg("stream name holds a NUL byte"))?;
        if s.entries.len() >= crate::types::INVALID_STREAM_ID as usize - 1 {
            return Err(TraceError::Full("254 streams are registered"));
        }
        s.entries.push(StreamEntry {
            name: cname,
            initialized: false,
        });
        let id = s.entries.len() as StreamId;
        s.by_name.insert(name.to_vec(), id);
        Ok(id)
    }

    /// The id of a registered stream.
    pub fn stream_id(&self, name: &[u8]) -> Option<StreamId> {
        self.lock_streams().by_name.get(name).copied()
    }

    /// The name of stream `id`.
    pub fn stream_name(&self, id: StreamId) -> Option<CString> {
        let s = self.lock_streams();
        s.entries
            .get((id as usize).checked_sub(1)?)
            .map(|e| e.name.clone())
    }

    fn is_registered(&self, id: StreamId) -> bool {
        id != 0 && (id as usize) <= self.lock_streams().entries.len()
    }

    /// Unregisters a stream: removes its callbacks and marks it not
    /// initialized. The id stays bound to the name (ids are never reused).
    ///
    /// Errors: `NotFound` for a name never registered or a stream without
    /// callbacks (as Intel's framework answers).
    pub fn unregister_stream(&self, name: &[u8]) -> Result<(), TraceError> {
        let id = {
            let mut s = self.lock_streams();
            let id = *s
                .by_name
                .get(name)
                .ok_or(TraceError::NotFound("no stream of that name"))?;
            s.entries[id as usize - 1].initialized = false;
            id
        };
        if self.callbacks.clear_stream(id) {
            Ok(())
        } else {
            Err(TraceError::NotFound("the stream has no callbacks"))
        }
    }

    /// Announces a stream to every subscriber (`xptiInitialize`). The stream
    /// is registered if needed. Subscribers are told once per
    /// initialization: calling this again before [`Self::finalize_stream`]
    /// returns the id without telling them again.
    pub fn initialize_stream(
        &self,
        name: &[u8],
        major: u32,
        minor: u32,
        version: &[u8],
    ) -> Result<StreamId, TraceError> {
        let id = self.register_stream(name)?;
        let version = CString::new(version)
            .map_err(|_| TraceError::InvalidArg("version holds a NUL byte"))?;
        let cname = {
            let mut s = self.lock_streams();
            let e = &mut s.entries[id as usize - 1];
            if e.initialized {
                return Ok(id);
            }
            e.initialized = true;
            e.name.clone()
        };
        let subs = self.read_subscribers().clone();
        let init = StreamInit {
            id,
            name: &cname,
            major,
            minor,
            version: &version,
        };
        for s in subs {
            s.init(self, &init);
        }
        Ok(id)
    }

    /// Tells every subscriber that a stream ends (`xptiFinalize`).
    ///
    /// Errors: `NotFound` for an unknown stream name.
    pub fn finalize_stream(&self, name: &[u8]) -> Result<(), TraceError> {
        let cname = {
            let mut s = self.lock_streams();
            let id = *s
                .by_name
                .get(name)
                .ok_or(TraceError::NotFound("no stream of that name"))?;
            let e = &mut s.entries[id as usize - 1];
            e.initialized = false;
            e.name.clone()
        };
        let subs = self.read_subscribers().clone();
        for s in subs {
            s.finish(self, &cname);
        }
        Ok(())
    }

    // ---- subscribers ----------------------------------------------------

    fn read_subscribers(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<dyn Subscriber>>> {
        self.subscribers.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a subscriber. It is told at once about every stream already
    /// initialized, then about every later one.
    pub fn add_subscriber(&self, subscriber: Arc<dyn Subscriber>) {
        self.subscribers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(subscriber.clone());
        self.recompute_enabled();
        let live: Vec<(StreamId, CString)> = {
            let s = self.lock_streams();
            s.entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.initialized)
                .map(|(i, e)| ((i + 1) as StreamId, e.name.clone()))
                .collect()
        };
        for (id, name) in live {
            subscriber.init(
                self,
                &StreamInit {
                    id,
                    name: &name,
                    major: 0,
                    minor: 0,
                    version: c"",
                },
            );
        }
    }

    /// How many subscribers are attached.
    pub fn subscriber_count(&self) -> usize {
        self.read_subscribers().len()
    }

    // ---- strings and objects -------------------------------------------

    /// Interns a string; see [`StringTable::register`].
    pub fn register_string(&self, s: &[u8]) -> Result<(StringId, &CStr), TraceError> {
        self.strings.register(s)
    }

    /// The interned string of `id`.
    #[inline]
    pub fn lookup_string(&self, id: StringId) -> Option<&CStr> {
        self.strings.lookup(id)
    }

    /// The string table.
    pub fn strings(&self) -> &StringTable {
        &self.strings
    }

    /// Stores an object (metadata value) and returns its id.
    pub fn register_object(&self, data: &[u8], kind: u8) -> Result<ObjectId, TraceError> {
        self.objects.register(data, kind)
    }

    /// The object of `id`.
    pub fn lookup_object(&self, id: ObjectId) -> Option<&Object> {
        self.objects.lookup(id)
    }

    // ---- payloads and events -------------------------------------------

    /// Registers a payload and returns its 64-bit unique id: equal payloads
    /// (same name, file, line, column, address) get the same id. Ids are
    /// dense, start at 1, and are not addresses.
    pub fn register_payload(&self, spec: &PayloadSpec<'_>) -> Result<u64, TraceError> {
        self.tracepoints
            .register(&self.strings, spec)
            .map(|(uid, _)| uid)
    }

    /// Makes (or finds) the event of a payload and counts a visit: returns
    /// the event, shared by every caller with an equal payload, and this
    /// visit's instance number (1, 2, … per event). The event type and
    /// activity of the first call stick.
    #[inline]
    pub fn make_event(
        &self,
        spec: &PayloadSpec<'_>,
        event_type: u16,
        activity: u16,
    ) -> Result<(&EventData, u64), TraceError> {
        let (uid, tp) = self.tracepoints.register(&self.strings, spec)?;
        let ev = tp.event(uid, event_type, activity);
        let instance = ev.instance_id.fetch_add(1, Ordering::Relaxed) + 1;
        Ok((ev, instance))
    }

    /// The event with this unique id, if one was made.
    #[inline]
    pub fn find_event(&self, uid: u64) -> Option<&EventData> {
        self.tracepoints.by_uid(uid)?.event.get()
    }

    /// The registered payload with this unique id.
    pub fn query_payload(&self, uid: u64) -> Option<&Payload> {
        self.tracepoints.by_uid(uid).map(|tp| &tp.payload)
    }

    /// How many payloads are registered.
    pub fn payload_count(&self) -> usize {
        self.tracepoints.len()
    }

    /// Attaches `key = value` to an event made by this framework.
    ///
    /// Errors: `InvalidArg` for an empty key, an unknown object id or an
    /// event this framework did not make; `Duplicate` when the key is set.
    pub fn add_metadata(
        &self,
        event: &EventData,
        key: &[u8],
        value: ObjectId,
    ) -> Result<(), TraceError> {
        self.check_own_event(event)?;
        if self.objects.lookup(value).is_none() {
            return Err(TraceError::InvalidArg("unknown object id"));
        }
        let (key_id, _) = self.strings.register(key)?;
        let mut all = self.metadata.lock().unwrap_or_else(|e| e.into_inner());
        let md = all.entry(event.unique_id).or_default();
        if md.iter().any(|(k, _)| *k == key_id) {
            return Err(TraceError::Duplicate(
                "the event already has this metadata key",
            ));
        }
        md.push((key_id, value));
        Ok(())
    }

    /// Attaches a string value: registers it as a string object, then
    /// [`Self::add_metadata`].
    pub fn add_metadata_str(
        &self,
        event: &EventData,
        key: &str,
        value: &str,
    ) -> Result<(), TraceError> {
        let obj = self.register_object(value.as_bytes(), object_type::STRING)?;
        self.add_metadata(event, key.as_bytes(), obj)
    }

    /// The metadata of an event, in insertion order, as (key string id,
    /// object id) pairs.
    pub fn metadata(&self, event: &EventData) -> Result<Vec<(StringId, ObjectId)>, TraceError> {
        self.check_own_event(event)?;
        let all = self.metadata.lock().unwrap_or_else(|e| e.into_inner());
        Ok(all.get(&event.unique_id).cloned().unwrap_or_default())
    }

    fn check_own_event(&self, event: &EventData) -> Result<(), TraceError> {
        self.tracepoints
            .by_uid(event.unique_id)
            .filter(|tp| tp.event.get().is_some())
            .map(|_| ())
            .ok_or(TraceError::InvalidArg(
                "the event was not made by this framework",
            ))
    }

    /// A process-wide increasing id (`xptiGetUniqueId`).
    pub fn next_unique_id(&self) -> u64 {
        self.unique_ids.fetch_add(1, Ordering::Relaxed)
    }

    // ---- callbacks ------------------------------------------------------

    fn check_stream(&self, stream: StreamId) -> Result<(), TraceError> {
        if self.is_registered(stream) {
            Ok(())
        } else {
            Err(TraceError::InvalidArg("stream id was never registered"))
        }
    }

    /// Registers a Rust callback for (stream, trace type).
    pub fn register_callback<F>(
        &self,
        stream: StreamId,
        trace_type: u16,
        f: F,
    ) -> Result<CallbackHandle, TraceError>
    where
        F: Fn(&Notification<'_>) + Send + Sync + 'static,
    {
        self.check_stream(stream)?;
        let h = self.callbacks.new_handle();
        self.callbacks
            .add(stream, trace_type, Callback::Rust(h, Arc::new(f)))?;
        Ok(h)
    }

    /// Unregisters a Rust callback. `NotFound` when it is not registered
    /// for (stream, trace type).
    pub fn unregister_callback(
        &self,
        stream: StreamId,
        trace_type: u16,
        handle: CallbackHandle,
    ) -> Result<(), TraceError> {
        let dummy: crate::callbacks::RustCallback = Arc::new(|_: &Notification<'_>| {});
        self.callbacks
            .remove(stream, trace_type, &Callback::Rust(handle, dummy))
    }

    /// Registers a C callback. `Duplicate` when the same function is
    /// already registered for (stream, trace type).
    pub fn register_raw_callback(
        &self,
        stream: StreamId,
        trace_type: u16,
        cb: RawCallback,
    ) -> Result<(), TraceError> {
        self.check_stream(stream)?;
        self.callbacks.add(stream, trace_type, Callback::Raw(cb))
    }

    /// Unregisters a C callback. `NotFound` when it is not registered.
    pub fn unregister_raw_callback(
        &self,
        stream: StreamId,
        trace_type: u16,
        cb: RawCallback,
    ) -> Result<(), TraceError> {
        self.callbacks
            .remove(stream, trace_type, &Callback::Raw(cb))
    }

    // ---- notification ---------------------------------------------------

    /// Notifies the callbacks of (stream, trace type).
    ///
    /// Errors: `Disabled` (nothing delivered) when tracing is off;
    /// `InvalidArg` for a missing event, except for the types of
    /// [`trace_point::allows_null_event`] with non-null `user_data`.
    /// A stream without callbacks is a successful no-op.
    ///
    /// Hot path: no lock, no allocation, no shared write.
    ///
    /// `user_data` is never dereferenced by the framework; it is handed to
    /// the callbacks, whose stream protocol defines what it points at.
    #[inline]
    // The framework passes `user_data` through opaquely and never reads it.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn notify(
        &self,
        stream: StreamId,
        trace_type: u16,
        parent: Option<&EventData>,
        event: Option<&EventData>,
        instance: u64,
        user_data: *const c_void,
    ) -> Result<(), TraceError> {
        // SAFETY: the pointers come from live references.
        unsafe {
            self.notify_raw(
                stream,
                trace_type,
                parent.map_or(std::ptr::null_mut(), EventData::as_ptr),
                event.map_or(std::ptr::null_mut(), EventData::as_ptr),
                instance,
                user_data,
            )
        }
    }

    /// [`Self::notify`] with raw pointers, as the C ABI receives them.
    ///
    /// # Safety
    /// `parent` and `event` must each be null or point at a valid
    /// `EventData` for the duration of the call.
    #[inline]
    pub unsafe fn notify_raw(
        &self,
        stream: StreamId,
        trace_type: u16,
        parent: *mut EventData,
        event: *mut EventData,
        instance: u64,
        user_data: *const c_void,
    ) -> Result<(), TraceError> {
        if !self.is_enabled() {
            return Err(TraceError::Disabled);
        }
        if event.is_null() && (user_data.is_null() || !trace_point::allows_null_event(trace_type)) {
            return Err(TraceError::InvalidArg(
                "a null event is allowed only with user data for function, mem, offload_alloc and diagnostics types",
            ));
        }
        for cb in self.callbacks.callbacks(stream, trace_type) {
            match cb {
                // SAFETY: the subscriber registered this function with the
                // callback signature; pointers are as the caller vouched.
                Callback::Raw(f) => unsafe { f(trace_type, parent, event, instance, user_data) },
                Callback::Rust(_, f) => f(&Notification {
                    framework: self,
                    stream,
                    trace_type,
                    // SAFETY: null or valid per this function's contract.
                    parent: unsafe { parent.as_ref() },
                    // SAFETY: as above.
                    event: unsafe { event.as_ref() },
                    instance,
                    user_data,
                }),
            }
        }
        Ok(())
    }

    // ---- user-defined types --------------------------------------------

    fn vendor_id(&self, vendor: &[u8]) -> Result<u16, TraceError> {
        if vendor.is_empty() {
            return Err(TraceError::InvalidArg("empty vendor name"));
        }
        let mut v = self.vendors.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = v.iter().position(|n| n == vendor) {
            return Ok(i as u16 + 1);
        }
        if v.len() >= 255 {
            return Err(TraceError::Full("255 vendors are registered"));
        }
        v.push(vendor.to_vec());
        Ok(v.len() as u16)
    }

    fn user_code(&self, vendor: &[u8], value: u8) -> Result<u16, TraceError> {
        if value > 0x7f {
            return Err(TraceError::InvalidArg(
                "user-defined values are 0..=127 (128 per vendor)",
            ));
        }
        Ok((self.vendor_id(vendor)? << 8) | 0x80 | value as u16)
    }

    /// A user-defined trace-point type: vendor id in the high byte, bit 7
    /// set, `value` (an `XPTI_TRACE_POINT_BEGIN/END(n)` code, 0..=127) in the
    /// low 7 bits. The same (vendor, value) always yields the same code.
    pub fn register_user_defined_trace_point(
        &self,
        vendor: &[u8],
        value: u8,
    ) -> Result<u16, TraceError> {
        self.user_code(vendor, value)
    }

    /// A user-defined event type, encoded like trace-point types.
    pub fn register_user_defined_event_type(
        &self,
        vendor: &[u8],
        value: u8,
    ) -> Result<u16, TraceError> {
        self.user_code(vendor, value)
    }

    /// The vendor name of a vendor id.
    pub fn vendor_name(&self, id: u8) -> Option<Vec<u8>> {
        let v = self.vendors.lock().unwrap_or_else(|e| e.into_inner());
        v.get((id as usize).checked_sub(1)?).cloned()
    }

    pub(crate) fn subscribers_snapshot(&self) -> Vec<Arc<dyn Subscriber>> {
        self.read_subscribers().clone()
    }

    pub(crate) fn forced_state(&self) -> u8 {
        self.forced.load(Ordering::Relaxed)
    }

    pub(crate) fn set_forced_state(&self, f: u8) {
        self.forced.store(f, Ordering::Relaxed);
    }

    pub(crate) fn push_subscriber_quiet(&self, s: Arc<dyn Subscriber>) {
        self.subscribers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(s);
    }

    pub(crate) fn policy(&self) -> EnablePolicy {
        self.policy
    }
}
