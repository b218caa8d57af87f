//! The unwinder snapshot: framehop's unwinder over every loaded module,
//! published behind an atomic pointer so the signal handler can use it
//! without locks while `dlopen`/`dlclose` replace it.
//!
//! Owns publication and reclamation. Readers (the handler) announce
//! themselves in one of two epoch counters and never block; a writer swaps
//! the pointer, flips the epoch and waits for the old epoch's readers to
//! leave before freeing the old snapshot. Building a snapshot allocates and
//! runs only on ordinary threads.

use framehop::x86_64::{CacheX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, MustNotAllocateDuringUnwind, Unwinder};
use std::ops::{Deref, Range};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use strobe_core::modules::{load_counters, loaded_modules, ModuleInfo};

/// Bytes that live in the process's own mapped memory (a module's unwind
/// tables or code), borrowed without copying.
pub struct MappedBytes {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the bytes are read-only module memory, valid while the module is
// loaded; sharing a pointer to them between threads is sound.
unsafe impl Send for MappedBytes {}
// SAFETY: as above: read-only.
unsafe impl Sync for MappedBytes {}

impl MappedBytes {
    /// # Safety
    /// `range` must be mapped readable for as long as the value is used.
    unsafe fn new(range: &Range<u64>) -> MappedBytes {
        MappedBytes {
            ptr: range.start as *const u8,
            len: (range.end - range.start) as usize,
        }
    }
}

impl Default for MappedBytes {
    fn default() -> Self {
        MappedBytes {
            ptr: std::ptr::NonNull::<u8>::dangling().as_ptr(),
            len: 0,
        }
    }
}

impl Deref for MappedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: guaranteed by the constructor's contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The unwinder type strobe uses inside the process.
pub type NativeUnwinder = UnwinderX86_64<MappedBytes, MustNotAllocateDuringUnwind>;
/// The per-thread unwinder cache.
pub type NativeCache = CacheX86_64<MustNotAllocateDuringUnwind>;

/// An immutable view of the loaded modules and their unwinder.
pub struct Snapshot {
    /// framehop's unwinder over `modules`.
    pub unwinder: NativeUnwinder,
    /// The modules, in loader order.
    pub modules: Vec<ModuleInfo>,
    /// Their executable ranges (what the unwinder knows), sorted.
    texts: Box<[Range<u64>]>,
    /// Every module seen by any snapshot so far, unloaded ones included
    /// (samples taken before an unload still refer to them).
    pub history: Vec<ModuleInfo>,
    /// Increases with every published snapshot.
    pub generation: u64,
}

impl Snapshot {
    /// Whether a module's executable range holds `addr` (a binary search;
    /// async-signal-safe).
    pub fn in_module_text(&self, addr: u64) -> bool {
        let i = self.texts.partition_point(|r| r.start <= addr);
        i > 0 && self.texts[i - 1].contains(&addr)
    }
}

static CURRENT: AtomicPtr<Snapshot> = AtomicPtr::new(ptr::null_mut());
static EPOCH: AtomicUsize = AtomicUsize::new(0);
static READERS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// Serializes writers. A spin flag rather than a mutex so that a forked
/// child can reset it (the thread that held it does not exist there).
static WRITER: AtomicBool = AtomicBool::new(false);
/// Loader counters (adds, subs) when the current snapshot was built.
static BUILT_ADDS: AtomicU64 = AtomicU64::new(u64::MAX);
static BUILT_SUBS: AtomicU64 = AtomicU64::new(u64::MAX);

struct WriterGuard;

impl WriterGuard {
    fn lock() -> WriterGuard {
        while WRITER
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        WriterGuard
    }
}

impl Drop for WriterGuard {
    fn drop(&mut self) {
        WRITER.store(false, Ordering::Release);
    }
}

/// Calls `f` with the current snapshot, if one was published.
/// Async-signal-safe: atomic operations only; never blocks.
#[inline]
pub fn with_snapshot<R>(f: impl FnOnce(&Snapshot) -> R) -> Option<R> {
    let slot = loop {
        let epoch = EPOCH.load(Ordering::SeqCst);
        let slot = &READERS[epoch & 1];
        slot.fetch_add(1, Ordering::SeqCst);
        if EPOCH.load(Ordering::SeqCst) == epoch {
            break slot;
        }
        slot.fetch_sub(1, Ordering::SeqCst);
    };
    let current = CURRENT.load(Ordering::SeqCst);
    // SAFETY: a snapshot published in CURRENT is freed only after the epoch
    // in which it could be loaded has no readers; we are counted in it.
    let result = (!current.is_null()).then(|| f(unsafe { &*current }));
    slot.fetch_sub(1, Ordering::SeqCst);
    result
}

/// Builds a snapshot from the modules loaded now, leaving out any module
/// whose text overlaps `exclude` (one about to be unloaded), publishes it,
/// and frees the one it replaces once no handler can still use it.
/// Returns the new generation.
pub fn rebuild(exclude: Option<Range<u64>>) -> u64 {
    let _writer = WriterGuard::lock();
    let (adds, subs) = load_counters();
    let mut modules = loaded_modules();
    if let Some(gone) = &exclude {
        modules.retain(|m| m.text.end <= gone.start || m.text.start >= gone.end);
    }
    let mut unwinder = NativeUnwinder::new();
    for m in &modules {
        unwinder.add_module(framehop_module(m));
    }
    let mut history = with_snapshot(|s| s.history.clone()).unwrap_or_default();
    for m in &modules {
        if !history.contains(m) {
            history.push(m.clone());
        }
    }
    let generation = GENERATION.fetch_add(1, Ordering::SeqCst) + 1;
    let mut texts: Vec<Range<u64>> = modules.iter().map(|m| m.text.clone()).collect();
    texts.sort_by_key(|r| r.start);
    let fresh = Box::into_raw(Box::new(Snapshot {
        unwinder,
        modules,
        texts: texts.into_boxed_slice(),
        history,
        generation,
    }));
    if exclude.is_none() {
        BUILT_ADDS.store(adds, Ordering::SeqCst);
        BUILT_SUBS.store(subs, Ordering::SeqCst);
    }
    let old = CURRENT.swap(fresh, Ordering::SeqCst);
    let epoch = EPOCH.fetch_add(1, Ordering::SeqCst);
    while READERS[epoch & 1].load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
    if !old.is_null() {
        // SAFETY: `old` came from Box::into_raw above (a previous call), is
        // no longer published, and every reader that could hold it has left.
        drop(unsafe { Box::from_raw(old) });
    }
    generation
}

fn framehop_module(m: &ModuleInfo) -> framehop::Module<MappedBytes> {
    let svma = |r: &Range<u64>| r.start - m.bias..r.end - m.bias;
    // SAFETY: each range was read from the module's loaded segments and
    // stays mapped while the module is loaded; a module is left out of the
    // snapshot before it is unloaded (see `rebuild`).
    let bytes = |r: &Range<u64>| unsafe { MappedBytes::new(r) };
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: Some(svma(&m.text)),
        text: Some(bytes(&m.text)),
        eh_frame_svma: m.eh_frame.as_ref().map(svma),
        eh_frame: m.eh_frame.as_ref().map(bytes),
        eh_frame_hdr_svma: m.eh_frame_hdr.as_ref().map(svma),
        eh_frame_hdr: m.eh_frame_hdr.as_ref().map(bytes),
        ..Default::default()
    };
    framehop::Module::new(m.path.clone(), m.text.clone(), m.bias, info)
}

/// Rebuilds the snapshot if the loader loaded or unloaded a module since it
/// was built (cheap when nothing changed: one `dl_iterate_phdr` step).
/// Returns whether it rebuilt.
pub fn refresh_if_changed() -> bool {
    let (adds, subs) = load_counters();
    if adds == BUILT_ADDS.load(Ordering::SeqCst) && subs == BUILT_SUBS.load(Ordering::SeqCst) {
        return false;
    }
    rebuild(None);
    true
}

/// In a forked child: forget readers and writers of threads that do not
/// exist there. Call first thing after `fork()` returns in the child.
pub fn reset_after_fork() {
    READERS[0].store(0, Ordering::SeqCst);
    READERS[1].store(0, Ordering::SeqCst);
    WRITER.store(false, Ordering::SeqCst);
}

/// Every module any snapshot has held, unloaded ones included.
pub fn modules_seen() -> Vec<ModuleInfo> {
    with_snapshot(|s| s.history.clone()).unwrap_or_default()
}

/// The modules of the current snapshot (building one if none exists).
pub fn current_modules() -> Vec<ModuleInfo> {
    if let Some(modules) = with_snapshot(|s| s.modules.clone()) {
        return modules;
    }
    rebuild(None);
    with_snapshot(|s| s.modules.clone()).unwrap_or_default()
}
