//! Fixed-capacity, append-only registries of process-lifetime objects
//! (contexts, buffers, callback threads) addressed by small non-zero ids.
//!
//! Owns id allocation and lock-free lookup. Entries are leaked on purpose:
//! producers and delivery threads hold `&'static` references without
//! reference counting, so an entry must never be freed. Lookup never
//! allocates or locks; insertion allocates (configuration time only).

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// An append-only table of up to `N` leaked entries; ids are `index + 1`.
pub(crate) struct Registry<T: 'static, const N: usize> {
    len: AtomicUsize,
    slots: [AtomicPtr<T>; N],
}

impl<T: 'static, const N: usize> Registry<T, N> {
    /// An empty registry (usable in a `static`).
    pub(crate) const fn new() -> Self {
        Registry {
            len: AtomicUsize::new(0),
            slots: [const { AtomicPtr::new(std::ptr::null_mut()) }; N],
        }
    }

    /// The capacity.
    pub(crate) const fn capacity(&self) -> usize {
        N
    }

    /// Reserves the next id and stores the entry `make(id)` returns. `None`
    /// when the registry is full (nothing is created then).
    pub(crate) fn insert_with<E>(
        &self,
        make: impl FnOnce(u64) -> Result<T, E>,
    ) -> Option<Result<&'static T, E>> {
        let index = self.len.fetch_add(1, Ordering::AcqRel);
        if index >= N {
            self.len.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let value = match make(index as u64 + 1) {
            Ok(v) => v,
            // The slot stays null: lookups of this id report "unknown".
            Err(e) => return Some(Err(e)),
        };
        let leaked: &'static T = Box::leak(Box::new(value));
        self.slots[index].store(leaked as *const T as *mut T, Ordering::Release);
        Some(Ok(leaked))
    }

    /// The entry with id `id`, if it exists.
    #[inline]
    pub(crate) fn get(&self, id: u64) -> Option<&'static T> {
        let index = (id as usize).checked_sub(1)?;
        let ptr = self.slots.get(index)?.load(Ordering::Acquire);
        // SAFETY: non-null slots hold pointers leaked by `insert_with`; they
        // are never freed, so a `'static` shared reference is valid.
        unsafe { ptr.as_ref() }
    }

    /// Every entry, in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &'static T> + '_ {
        let len = self.len.load(Ordering::Acquire).min(N);
        (1..=len as u64).filter_map(move |id| self.get(id))
    }
}
