//! The object table: byte blobs with a type tag (`object_data_t`), used as
//! metadata values. Registration appends; lookups are lock-free.
//!
//! Owns the stored blobs. It must never move or free a blob while the table
//! lives (C callers keep the `data` pointer `xptiLookupObject` returns).

use crate::error::TraceError;
use crate::types::ObjectId;

/// One stored object.
#[derive(Debug)]
pub struct Object {
    /// The bytes, as registered.
    pub data: Box<[u8]>,
    /// The type tag (`object_type`).
    pub kind: u8,
}

/// An append-only table of objects.
#[derive(Default)]
pub struct ObjectTable {
    objects: boxcar::Vec<Object>,
}

impl ObjectTable {
    /// Stores a copy of `data` with type tag `kind` and returns its id.
    ///
    /// Errors: `Full` once 2^31 objects exist.
    pub fn register(&self, data: &[u8], kind: u8) -> Result<ObjectId, TraceError> {
        let index = self.objects.push(Object {
            data: data.into(),
            kind,
        });
        ObjectId::try_from(index).map_err(|_| TraceError::Full("object table"))
    }

    /// The object named by `id`.
    pub fn lookup(&self, id: ObjectId) -> Option<&Object> {
        usize::try_from(id).ok().and_then(|i| self.objects.get(i))
    }
}
