//! The interning state of a Perfetto trace's packet sequence.
//!
//! Owns [`Interner`]: the iids given so far to event names, categories,
//! function names, mapping paths, build ids, mappings, frames and call
//! stacks on the current sequence, each new entry added to the packet's
//! `InternedData` that first uses it, and the off-CPU slice names already
//! resolved; all of it is cleared together when the writer restarts the
//! sequence (past [`MAX_INTERNED`] entries). It never writes a packet and
//! never resolves a stack itself: frames come from the caller.

use std::collections::HashMap;
use std::sync::Arc;

use strobe_db::visit::ModuleRow;
use strobe_db::ResolvedFrame;

use super::proto::{
    Callstack, EventCategory, EventName, Frame, InternedData, InternedString, Mapping,
};
use crate::FastMap;

/// Interned entries kept before the sequence's incremental state is cleared.
pub(super) const MAX_INTERNED: usize = 200_000;

/// Slots of the caches of recently interned event names and categories.
const RECENT_STRINGS: usize = 256;

/// The iids of recently interned strings by the address of their `Arc`
/// (each slot keeps its `Arc` alive, so an address is never reused while
/// cached): the readers hand out one `Arc` per distinct string, so this
/// skips hashing the text. Cleared with the interning state.
struct RecentStrings(Vec<Option<(Arc<str>, u64)>>);

impl RecentStrings {
    fn new() -> Self {
        RecentStrings(vec![None; RECENT_STRINGS])
    }

    fn slot(s: &Arc<str>) -> usize {
        (Arc::as_ptr(s).cast::<u8>() as usize >> 4) % RECENT_STRINGS
    }

    #[inline]
    fn get(&self, s: &Arc<str>) -> Option<u64> {
        match &self.0[Self::slot(s)] {
            Some((a, i)) if Arc::ptr_eq(a, s) => Some(*i),
            _ => None,
        }
    }

    fn put(&mut self, s: &Arc<str>, iid: u64) {
        self.0[Self::slot(s)] = Some((s.clone(), iid));
    }

    fn clear(&mut self) {
        self.0.iter_mut().for_each(|e| *e = None);
    }
}

/// The interned entries of the current sequence, by what they intern.
pub(super) struct Interner {
    /// Mapping ranges and build ids by (process guid, path).
    modules: HashMap<(String, Arc<str>), ModuleRow>,
    interned: usize,
    next_iid: u64,
    names: FastMap<Arc<str>, u64>,
    recent_names: RecentStrings,
    cats: FastMap<Arc<str>, u64>,
    recent_cats: RecentStrings,
    func_names: FastMap<String, u64>,
    paths: FastMap<Arc<str>, u64>,
    build_ids: FastMap<String, u64>,
    mappings: FastMap<(String, Arc<str>), u64>,
    frames: FastMap<crate::FrameKey, u64>,
    /// Call stack iids by (process index, call site id).
    callstacks: FastMap<(usize, i64), u64>,
    /// Off-CPU slice names per (process index, call stack), cleared with
    /// the interning state.
    off_cpu_names: FastMap<(usize, i64), Arc<str>>,
}

impl Interner {
    /// An empty state; `modules` gives mapping ranges and build ids.
    pub(super) fn new(modules: Vec<ModuleRow>) -> Self {
        Interner {
            modules: modules
                .into_iter()
                .map(|m| ((m.guid.clone(), m.path.clone()), m))
                .collect(),
            interned: 0,
            next_iid: 1,
            names: FastMap::default(),
            recent_names: RecentStrings::new(),
            cats: FastMap::default(),
            recent_cats: RecentStrings::new(),
            func_names: FastMap::default(),
            paths: FastMap::default(),
            build_ids: FastMap::default(),
            mappings: FastMap::default(),
            frames: FastMap::default(),
            callstacks: FastMap::default(),
            off_cpu_names: FastMap::default(),
        }
    }

    /// Forgets every entry (the sequence restarts); iids start at 1 again.
    pub(super) fn clear(&mut self) {
        self.names.clear();
        self.recent_names.clear();
        self.cats.clear();
        self.recent_cats.clear();
        self.func_names.clear();
        self.paths.clear();
        self.build_ids.clear();
        self.mappings.clear();
        self.frames.clear();
        self.callstacks.clear();
        self.off_cpu_names.clear();
        self.interned = 0;
        self.next_iid = 1;
    }

    /// Whether the sequence holds enough entries to be restarted.
    pub(super) fn is_full(&self) -> bool {
        self.interned >= MAX_INTERNED
    }

    /// A new iid, counted toward [`MAX_INTERNED`].
    fn iid(&mut self) -> u64 {
        let i = self.next_iid;
        self.next_iid += 1;
        self.interned += 1;
        i
    }

    /// The iid of event name `name`, interned on `inter` when new.
    pub(super) fn name(&mut self, name: &Arc<str>, inter: &mut Option<InternedData>) -> u64 {
        if let Some(i) = self.recent_names.get(name) {
            return i;
        }
        if let Some(i) = self.names.get(name).copied() {
            self.recent_names.put(name, i);
            return i;
        }
        let i = self.iid();
        self.names.insert(name.clone(), i);
        self.recent_names.put(name, i);
        inter
            .get_or_insert_with(InternedData::default)
            .event_names
            .push(EventName {
                iid: Some(i),
                name: Some(name.to_string()),
            });
        i
    }

    /// The iid of event category `cat`, interned on `inter` when new.
    pub(super) fn category(&mut self, cat: &Arc<str>, inter: &mut Option<InternedData>) -> u64 {
        if let Some(i) = self.recent_cats.get(cat) {
            return i;
        }
        if let Some(i) = self.cats.get(cat).copied() {
            self.recent_cats.put(cat, i);
            return i;
        }
        let i = self.iid();
        self.cats.insert(cat.clone(), i);
        self.recent_cats.put(cat, i);
        inter
            .get_or_insert_with(InternedData::default)
            .event_categories
            .push(EventCategory {
                iid: Some(i),
                name: Some(cat.to_string()),
            });
        i
    }

    /// The iid of call stack `id` of process `proc`, if interned.
    #[inline]
    pub(super) fn callstack(&self, proc: usize, id: i64) -> Option<u64> {
        self.callstacks.get(&(proc, id)).copied()
    }

    /// Interns call stack `id` of process `proc` (guid `guid`) made of
    /// `frames` (leaf first), with its frames, on `inter`; returns its iid.
    pub(super) fn add_callstack(
        &mut self,
        guid: &str,
        proc: usize,
        id: i64,
        frames: &[ResolvedFrame],
        inter: &mut InternedData,
    ) -> u64 {
        let mut frame_ids = Vec::with_capacity(frames.len());
        for f in frames.iter().rev() {
            frame_ids.push(self.frame(guid, f, inter));
        }
        let i = self.iid();
        inter.callstacks.push(Callstack {
            iid: Some(i),
            frame_ids,
        });
        self.callstacks.insert((proc, id), i);
        i
    }

    /// The off-CPU slice name of call stack `id` of process `proc`, if
    /// already resolved.
    pub(super) fn off_cpu_name(&self, proc: usize, id: i64) -> Option<Arc<str>> {
        self.off_cpu_names.get(&(proc, id)).cloned()
    }

    /// Keeps the off-CPU slice name of call stack `id` of process `proc`
    /// (forgetting all of them past [`MAX_INTERNED`]).
    pub(super) fn keep_off_cpu_name(&mut self, proc: usize, id: i64, name: Arc<str>) {
        if self.off_cpu_names.len() >= MAX_INTERNED {
            self.off_cpu_names.clear();
        }
        self.off_cpu_names.insert((proc, id), name);
    }

    /// The iid of frame `f` of process `guid`, interned on `inter` (with
    /// its function name and mapping) when new.
    fn frame(&mut self, guid: &str, f: &ResolvedFrame, inter: &mut InternedData) -> u64 {
        let key = (
            guid.to_string(),
            f.module.clone(),
            f.rel_pc,
            f.function.clone(),
        );
        if let Some(i) = self.frames.get(&key) {
            return *i;
        }
        let name = f.display_name();
        let fname = match self.func_names.get(&name) {
            Some(i) => *i,
            None => {
                let i = self.iid();
                inter.function_names.push(InternedString {
                    iid: Some(i),
                    str: Some(name.clone().into_bytes()),
                });
                self.func_names.insert(name, i);
                i
            }
        };
        let mapping = f.module.as_ref().map(|m| self.mapping(guid, m, inter));
        let i = self.iid();
        inter.frames.push(Frame {
            iid: Some(i),
            function_name_id: Some(fname),
            mapping_id: mapping,
            rel_pc: Some(f.rel_pc),
        });
        self.frames.insert(key, i);
        i
    }

    /// The iid of the mapping of module `path` of process `guid`,
    /// interned on `inter` (with its path and build id) when new.
    fn mapping(&mut self, guid: &str, path: &Arc<str>, inter: &mut InternedData) -> u64 {
        let key = (guid.to_string(), path.clone());
        if let Some(i) = self.mappings.get(&key) {
            return *i;
        }
        let path_iid = match self.paths.get(path) {
            Some(i) => *i,
            None => {
                let i = self.iid();
                inter.mapping_paths.push(InternedString {
                    iid: Some(i),
                    str: Some(path.as_bytes().to_vec()),
                });
                self.paths.insert(path.clone(), i);
                i
            }
        };
        let module = self.modules.get(&key).cloned();
        let build = module.as_ref().and_then(|m| m.build_id.clone());
        let build_iid = build.map(|b| match self.build_ids.get(&b) {
            Some(i) => *i,
            None => {
                let i = self.iid();
                inter.build_ids.push(InternedString {
                    iid: Some(i),
                    str: Some(hex_bytes(&b)),
                });
                self.build_ids.insert(b, i);
                i
            }
        });
        let i = self.iid();
        inter.mappings.push(Mapping {
            iid: Some(i),
            build_id: build_iid,
            start: module.as_ref().map(|m| m.load_address),
            end: module.as_ref().map(|m| m.load_address + m.size),
            path_string_ids: vec![path_iid],
        });
        self.mappings.insert(key, i);
        i
    }
}

/// A build id given in hex as raw bytes (as Perfetto expects); anything
/// that is not hex is kept as text.
fn hex_bytes(s: &str) -> Vec<u8> {
    if s.len().is_multiple_of(2) && !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0))
            .collect()
    } else {
        s.as_bytes().to_vec()
    }
}
