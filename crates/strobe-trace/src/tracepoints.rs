//! Trace points: the payload registry (payload → 64-bit unique id) and the
//! event made for each payload, with its instance counter and metadata.
//!
//! A payload is identified by its contents: name, source file, line, column
//! and code address. The unique id is the payload's index in an append-only
//! registry plus one (so never a heap address, never 0), which makes lookup
//! by unique id an array access. Repeated registration of a known payload
//! takes no lock and allocates nothing; only a new payload takes the
//! insertion lock. It must never remove or move a trace point while the
//! registry lives: C code holds pointers to the events and payloads.

use std::hash::BuildHasher;
use std::sync::{Mutex, OnceLock};

use crate::error::TraceError;
use crate::event::{EventData, Payload, Reserved, Uid};
use crate::strings::StringTable;
use crate::types::{event_flags, payload_flags, UNKNOWN_LINE};

use crate::arena::Arena;
use crate::index_table::IndexTable;

fn hasher() -> foldhash::fast::FixedState {
    foldhash::fast::FixedState::with_seed(0x7a3c_e1d2_9b04)
}

/// What describes a trace point, as given by the instrumentation.
///
/// At least one of name, source file or code address must be present. Strings
/// are bytes without a NUL (C strings need not be UTF-8).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PayloadSpec<'a> {
    /// Function, kernel or region name.
    pub name: Option<&'a [u8]>,
    /// Source file.
    pub source_file: Option<&'a [u8]>,
    /// Line number.
    pub line: Option<u32>,
    /// Column number.
    pub column: Option<u32>,
    /// Code address.
    pub code_ptr: Option<usize>,
}

impl<'a> PayloadSpec<'a> {
    /// A payload with only a name.
    pub fn named(name: &'a str) -> Self {
        PayloadSpec {
            name: Some(name.as_bytes()),
            ..Default::default()
        }
    }
    /// A payload with name, source file, line and column (what
    /// `payload_t("function1", "main.cpp", 104, 2, function1)` holds, less the
    /// address).
    pub fn at(name: &'a str, file: &'a str, line: u32, column: u32) -> Self {
        PayloadSpec {
            name: Some(name.as_bytes()),
            source_file: Some(file.as_bytes()),
            line: Some(line),
            column: Some(column),
            code_ptr: None,
        }
    }
    /// A payload with only a code address.
    pub fn code(address: usize) -> Self {
        PayloadSpec {
            code_ptr: Some(address),
            ..Default::default()
        }
    }
    /// The same payload with a code address added.
    pub fn with_code_ptr(mut self, address: usize) -> Self {
        self.code_ptr = Some(address);
        self
    }
}

/// A payload as looked up: empty strings already dropped, unknown line and
/// column as `UNKNOWN_LINE`, no address as 0.
struct PayloadQuery<'a> {
    name: Option<&'a [u8]>,
    file: Option<&'a [u8]>,
    line: u32,
    column: u32,
    code: usize,
}

#[inline]
fn opt_eq(a: Option<&[u8]>, b: Option<&[u8]>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => crate::index_table::bytes_eq(a, b),
        _ => false,
    }
}

impl PayloadQuery<'_> {
    /// The lookup hash: the name's bytes plus line, column, address and the
    /// file name's length. File contents are left out (many trace points
    /// share a file, so they add little entropy); equality checks them.
    #[inline]
    fn hash(&self) -> u64 {
        let h = hasher();
        let name = self.name.map_or(0x51, |n| h.hash_one(n));
        let mix = |acc: u64, v: u64| {
            (acc ^ v)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(29)
        };
        let mut acc = mix(name, self.line as u64 | (self.column as u64) << 32);
        acc = mix(acc, self.code as u64);
        acc = mix(acc, self.file.map_or(u64::MAX, |f| f.len() as u64));
        acc ^ (acc >> 32)
    }

    fn matches(&self, tp: &TracePoint) -> bool {
        let p = &tp.payload;
        self.line == p.line_no
            && self.column == p.column_no
            && self.code == p.code_ptr_va as usize
            && opt_eq(self.name, tp.name_bytes())
            && opt_eq(self.file, tp.file_bytes())
    }
}

/// One registered payload and (once made) its event.
/// `repr(C)`: the lengths and the payload fields compared on a repeated
/// lookup come first, next to each other.
#[repr(C)]
pub(crate) struct TracePoint {
    /// Byte lengths of the interned name and file (`u32::MAX` = absent).
    name_len: u32,
    file_len: u32,
    pub(crate) payload: Payload,
    pub(crate) event: OnceLock<EventData>,
}

/// The payload → trace point registry.
pub(crate) struct TracePoints {
    map: IndexTable,
    points: boxcar::Vec<TracePoint>,
    /// Serialises inserts; owns the copies of payload names.
    insert_lock: Mutex<Arena>,
}

impl TracePoints {
    pub(crate) fn new() -> Self {
        TracePoints {
            map: IndexTable::new(),
            points: boxcar::Vec::new(),
            insert_lock: Mutex::new(Arena::new()),
        }
    }

    /// Registers (or finds) the payload; returns its unique id and trace point.
    pub(crate) fn register(
        &self,
        strings: &StringTable,
        spec: &PayloadSpec<'_>,
    ) -> Result<(u64, &TracePoint), TraceError> {
        let name = spec.name.filter(|n| !n.is_empty());
        let file = spec.source_file.filter(|f| !f.is_empty());
        if name.is_none() && file.is_none() && spec.code_ptr.unwrap_or(0) == 0 {
            return Err(TraceError::InvalidArg(
                "a payload needs a name, a source file or a code address",
            ));
        }
        let query = PayloadQuery {
            name,
            file,
            line: spec.line.unwrap_or(UNKNOWN_LINE),
            column: spec.column.unwrap_or(UNKNOWN_LINE),
            code: spec.code_ptr.unwrap_or(0),
        };
        let hash = query.hash();
        if let Some(found) = self.find(&query, hash) {
            return Ok(found);
        }
        // New payload: intern its strings, then insert under the lock.
        // Names are (nearly) unique per trace point: copied into this
        // registry's arena rather than interned. Files are shared by many
        // trace points: interned in the string table.
        if name.is_some_and(|n| n.len() >= u32::MAX as usize) {
            return Err(TraceError::InvalidArg("payload name longer than 4 GiB"));
        }
        if name.is_some_and(|n| n.contains(&0)) {
            return Err(TraceError::InvalidArg("payload name holds a NUL byte"));
        }
        let file_s = file.map(|f| strings.register(f)).transpose()?;
        let mut arena = self.insert_lock.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = self.find(&query, hash) {
            return Ok(found);
        }
        let index = self.points.count();
        let uid = index as u64 + 1;
        let mut flags = payload_flags::REGISTERED | payload_flags::HASH_AVAILABLE;
        let name_ptr = name.map(|n| arena.store(n));
        if name.is_some() {
            flags |= payload_flags::NAME;
        }
        if file_s.is_some() {
            flags |= payload_flags::SOURCE_FILE;
        }
        if spec.line.is_some() {
            flags |= payload_flags::LINE;
        }
        if spec.column.is_some() {
            flags |= payload_flags::COLUMN;
        }
        if query.code != 0 {
            flags |= payload_flags::CODE_POINTER;
        }
        let file_id = file_s.map_or(crate::types::INVALID_STRING_ID, |s| s.0);
        let payload = Payload {
            name: name_ptr.map_or(std::ptr::null(), |p| p as *const std::ffi::c_char),
            stack_trace: std::ptr::null(),
            source_file: file_s.map_or(std::ptr::null(), |s| s.1.as_ptr()),
            line_no: query.line,
            column_no: query.column,
            code_ptr_va: query.code as *const std::ffi::c_void,
            internal: uid,
            flags,
            uid: Uid {
                p1: ((file_id as u64) << 32) | query.line as u64,
                p2: ((query.column as u64) << 32) | (hash as u32 as u64),
                p3: query.code as u64,
            },
        };
        let index32 = u32::try_from(index).map_err(|_| TraceError::Full("trace points"))?;
        let pushed = self.points.push(TracePoint {
            payload,
            name_len: name.map_or(u32::MAX, |n| n.len() as u32),
            file_len: file_s.map_or(u32::MAX, |s| s.1.to_bytes().len() as u32),
            event: OnceLock::new(),
        });
        debug_assert_eq!(pushed, index, "pushes happen only under the insert lock");
        self.map.insert(hash, index32);
        Ok((uid, self.points.get(index).expect("just pushed")))
    }

    #[inline]
    fn find(&self, q: &PayloadQuery<'_>, hash: u64) -> Option<(u64, &TracePoint)> {
        let mut found = None;
        let index = self.map.find(hash, |i| match self.points.get(i as usize) {
            Some(tp) if q.matches(tp) => {
                found = Some(tp);
                true
            }
            _ => false,
        })?;
        found.map(|tp| (index as u64 + 1, tp))
    }

    /// The trace point of a unique id.
    #[inline]
    pub(crate) fn by_uid(&self, uid: u64) -> Option<&TracePoint> {
        if uid == 0 {
            return None;
        }
        self.points.get(usize::try_from(uid - 1).ok()?)
    }

    /// How many payloads are registered.
    pub(crate) fn len(&self) -> usize {
        self.points.count()
    }
}

impl TracePoint {
    fn bytes(&self, ptr: *const std::ffi::c_char, len: u32) -> Option<&[u8]> {
        if len == u32::MAX {
            None
        } else {
            // SAFETY: `ptr` points at `len` bytes, the registry arena's copy of
            // the name or the string table's copy of the file; both belong to
            // the framework that owns this trace point and never move or get
            // freed before it, so they outlive the borrow of `self`.
            Some(unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) })
        }
    }
    #[inline]
    fn name_bytes(&self) -> Option<&[u8]> {
        self.bytes(self.payload.name, self.name_len)
    }
    #[inline]
    fn file_bytes(&self) -> Option<&[u8]> {
        self.bytes(self.payload.source_file, self.file_len)
    }

    /// The event of this trace point, made on first use with the given types.
    pub(crate) fn event(&self, uid: u64, event_type: u16, activity: u16) -> &EventData {
        self.event.get_or_init(|| EventData {
            unique_id: uid,
            data_id: 0,
            instance_id: std::sync::atomic::AtomicU64::new(0),
            event_type,
            activity_type: activity,
            unused: 0,
            source_id: 0,
            target_id: 0,
            reserved: Reserved {
                payload: &self.payload as *const Payload as *mut Payload,
                opaque: [0; 56],
            },
            global_user_data: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            flags: event_flags::UID
                | event_flags::EVENT_TYPE
                | event_flags::ACTIVITY_TYPE
                | event_flags::PAYLOAD,
        })
    }
}
