//! A table of the services active for one kind: fixed slots of leaked
//! service pointers and a count, filled when a context starts and emptied
//! when it stops.
//!
//! Owns the slots and how many one kind may hold
//! ([`MAX_ACTIVE_SERVICES_PER_KIND`]). Walking a table (every emission)
//! never allocates or locks: with no service it is one relaxed load.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Most contexts that may trace one kind at the same time, per service sort.
pub const MAX_ACTIVE_SERVICES_PER_KIND: usize = 16;

pub(crate) struct Table<T> {
    count: AtomicUsize,
    slots: [AtomicPtr<T>; MAX_ACTIVE_SERVICES_PER_KIND],
}

impl<T: 'static> Table<T> {
    pub(crate) const fn new() -> Self {
        Table {
            count: AtomicUsize::new(0),
            slots: [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_ACTIVE_SERVICES_PER_KIND],
        }
    }

    /// Whether no service is active: one relaxed load.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.count.load(Ordering::Relaxed) == 0
    }

    pub(crate) fn insert(&self, svc: &'static T) -> bool {
        let p = svc as *const T as *mut T;
        for slot in &self.slots {
            if slot
                .compare_exchange(std::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.count.fetch_add(1, Ordering::AcqRel);
                return true;
            }
        }
        false
    }

    pub(crate) fn remove(&self, svc: &'static T) {
        let p = svc as *const T as *mut T;
        for slot in &self.slots {
            if slot
                .compare_exchange(p, std::ptr::null_mut(), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.count.fetch_sub(1, Ordering::AcqRel);
                return;
            }
        }
    }

    #[inline]
    pub(crate) fn for_each(&self, mut f: impl FnMut(&'static T)) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        for slot in &self.slots {
            let p = slot.load(Ordering::Acquire);
            // SAFETY: non-null slots hold leaked `&'static T` services.
            if let Some(svc) = unsafe { p.as_ref() } {
                f(svc);
            }
        }
    }
}

impl<T> Table<T> {
    /// Empties the table without taking a lock (in a forked child).
    pub(crate) fn clear(&self) {
        for slot in &self.slots {
            slot.store(std::ptr::null_mut(), Ordering::Release);
        }
        self.count.store(0, Ordering::Release);
    }
}
