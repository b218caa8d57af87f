//! The string table: every string the framework sees is interned once and
//! named by a dense [`StringId`]; the stored copy never moves, so the
//! `&CStr` (and its `char *`) handed out stays valid for the table's life.
//!
//! Owns the interned strings (bump-allocated in append-only chunks, so a new
//! string costs no `malloc`) and the string → id map. Lookups by id and
//! repeated registrations take no lock and allocate nothing; only the first
//! registration of a string takes the insertion lock. It must never free or
//! move a string while the table lives.

use std::ffi::CStr;
use std::sync::Mutex;

use crate::error::TraceError;
use crate::types::StringId;

use crate::arena::Arena;
use crate::index_table::IndexTable;

/// One interned string: NUL-terminated bytes inside an arena chunk.
struct Entry {
    ptr: *const u8,
    /// Length including the NUL.
    len: usize,
}

// SAFETY: entries point at immutable bytes owned by the table's arena.
unsafe impl Send for Entry {}
// SAFETY: as above.
unsafe impl Sync for Entry {}

impl Entry {
    #[inline]
    fn as_cstr(&self) -> &CStr {
        // SAFETY: `ptr..ptr+len` was written once (bytes + NUL, no interior
        // NUL) before the entry was published and is never written again;
        // the arena outlives every borrow of the table.
        unsafe {
            CStr::from_bytes_with_nul_unchecked(std::slice::from_raw_parts(self.ptr, self.len))
        }
    }
}

fn hash_bytes(b: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x5b0e_5742_7ace).hash_one(b)
}

/// An append-only, thread-safe string interner.
pub struct StringTable {
    ids: IndexTable,
    strings: boxcar::Vec<Entry>,
    insert_lock: Mutex<Arena>,
}

impl Default for StringTable {
    fn default() -> Self {
        Self::new()
    }
}

impl StringTable {
    /// An empty table.
    pub fn new() -> Self {
        StringTable {
            ids: IndexTable::new(),
            strings: boxcar::Vec::new(),
            insert_lock: Mutex::new(Arena::new()),
        }
    }

    /// Interns `s` (bytes without the terminating NUL) and returns its id and
    /// the stored copy. Registering the same bytes again returns the same id
    /// and the same pointer.
    ///
    /// Errors: `InvalidArg` for an empty string or one holding a NUL byte.
    pub fn register(&self, s: &[u8]) -> Result<(StringId, &CStr), TraceError> {
        let hash = hash_bytes(s);
        if let Some(found) = self.find_hashed(s, hash) {
            return Ok(found);
        }
        if s.is_empty() {
            return Err(TraceError::InvalidArg("empty string"));
        }
        if s.contains(&0) {
            return Err(TraceError::InvalidArg("string holds a NUL byte"));
        }
        let mut arena = self.insert_lock.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = self.find_hashed(s, hash) {
            return Ok(found);
        }
        let ptr = arena.store(s);
        let index = self.strings.push(Entry {
            ptr,
            len: s.len() + 1,
        });
        let id = StringId::try_from(index)
            .ok()
            .filter(|id| *id != crate::types::INVALID_STRING_ID)
            .ok_or(TraceError::Full("string table"))?;
        self.ids.insert(hash, id);
        Ok((id, self.strings.get(index).expect("just pushed").as_cstr()))
    }

    /// The id and stored copy of `s`, if it was registered.
    #[inline]
    pub fn find(&self, s: &[u8]) -> Option<(StringId, &CStr)> {
        self.find_hashed(s, hash_bytes(s))
    }

    #[inline]
    fn find_hashed(&self, s: &[u8], hash: u64) -> Option<(StringId, &CStr)> {
        let id = self.ids.find(hash, |i| {
            self.strings.get(i as usize).is_some_and(|e| {
                e.len == s.len() + 1 && crate::index_table::bytes_eq(e.as_cstr().to_bytes(), s)
            })
        })?;
        self.strings.get(id as usize).map(|e| (id, e.as_cstr()))
    }

    /// The stored string for `id`, or `None` for an unknown id.
    #[inline]
    pub fn lookup(&self, id: StringId) -> Option<&CStr> {
        self.strings.get(id as usize).map(Entry::as_cstr)
    }

    /// How many strings are interned.
    pub fn len(&self) -> usize {
        self.strings.count()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_string_same_id_and_pointer() {
        let t = StringTable::new();
        let (a, pa) = t.register(b"alpha").unwrap();
        let (b, pb) = t.register(b"beta").unwrap();
        let (a2, pa2) = t.register(b"alpha").unwrap();
        assert_ne!(a, b);
        assert_eq!(a, a2);
        assert_eq!(pa.as_ptr(), pa2.as_ptr());
        assert_eq!(t.lookup(b).unwrap().to_bytes(), b"beta");
        assert_eq!(pb.to_bytes(), b"beta");
        assert!(t.lookup(999).is_none());
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn rejects_empty_and_nul() {
        let t = StringTable::new();
        assert!(matches!(t.register(b""), Err(TraceError::InvalidArg(_))));
        assert!(matches!(
            t.register(b"a\0b"),
            Err(TraceError::InvalidArg(_))
        ));
        assert!(t.is_empty());
    }

    #[test]
    fn concurrent_registration_agrees() {
        let t = StringTable::new();
        let ids: Vec<Vec<StringId>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..500)
                            .map(|i| t.register(format!("s{i}").as_bytes()).unwrap().0)
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for v in &ids[1..] {
            assert_eq!(v, &ids[0]);
        }
        assert_eq!(t.len(), 500);
    }
}
