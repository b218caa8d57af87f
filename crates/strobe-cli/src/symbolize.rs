//! Post-run symbolization of a profile database: function names (and,
//! when asked, source lines) for every unnamed frame.
//!
//! Owns mapping a database's frames to what `strobe-symbols` names:
//! grouping frames by process and module, placing frames recorded in no
//! module in the one recorded module covering them (the kernel sampler
//! records `[vdso]` frames so), naming the rest (code in no module, a
//! JIT's) from the perf-map entries stored in the database or else the
//! process's perf map (keeping the entries that named a frame, so that a
//! later symbolization names them again), and writing the names back.
//! Names only (ELF symbol tables) is the fast default; `--lines` also
//! reads DWARF, one module at a time.
//!
//! Never reads an ELF file itself (`strobe_symbols` does), never writes
//! SQL (`strobe_db::symbols` reads and writes the database), and never
//! runs inside the profiled process.

use anyhow::Result;
use std::collections::BTreeMap;
use std::path::Path;
use strobe_db::symbols::{
    jit_symbols, process_lifetime, process_modules, set_frame_symbols, store_jit_symbols,
    unsymbolized_frames, JitSymbol, ProcessLifetime, UnsymbolizedFrame,
};
use strobe_db::{FrameId, FrameSymbols};
use strobe_symbols::perf_map::{self, Lifetime};
use strobe_symbols::{ModuleSymbolizer, Name};

/// What symbolization did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SymbolStats {
    /// Frames that needed a name.
    pub frames: usize,
    /// Frames that got one.
    pub named: usize,
    /// Modules whose file could not be read.
    pub missing_modules: usize,
}

/// Frames are symbolized per process suffix, module path and build id.
type ModuleKey = (String, String, Option<String>);

/// Frames (frame, pc) by module (module-relative pcs) and, for frames in
/// no module, by process suffix (absolute pcs).
#[derive(Default)]
struct Grouped {
    by_module: BTreeMap<ModuleKey, Vec<(FrameId, u64)>>,
    outside: BTreeMap<String, Vec<(FrameId, u64)>>,
}

/// Names found, per process suffix: (frame, name).
type Named = BTreeMap<String, Vec<(FrameId, Name)>>;

/// Names every unnamed frame of the database at `path`.
pub fn symbolize_database(path: &Path, lines: bool) -> Result<SymbolStats> {
    let frames = unsymbolized_frames(path)?;
    let mut stats = SymbolStats {
        frames: frames.len(),
        ..Default::default()
    };
    let mut grouped = group(frames);
    place_in_covering_modules(path, &mut grouped)?;
    let mut named = Named::new();
    for (suffix, frames) in &grouped.outside {
        let found = jit_names(path, suffix, frames)?;
        named.entry(suffix.clone()).or_default().extend(found);
    }
    let mut symbolizer = ModuleSymbolizer::new(lines);
    for ((suffix, module, build_id), frames) in grouped.by_module {
        let pcs: Vec<u64> = frames.iter().map(|&(_, pc)| pc).collect();
        let found = symbolizer.name(&module, build_id.as_deref(), &pcs);
        if found.missing {
            stats.missing_modules += 1;
        }
        let out = named.entry(suffix).or_default();
        out.extend(
            frames
                .iter()
                .zip(found.names)
                .filter_map(|(&(frame, _), name)| Some((frame, name?))),
        );
    }
    stats.named = write_names(path, &named)?;
    Ok(stats)
}

/// Groups `frames` by process and module.
fn group(frames: Vec<UnsymbolizedFrame>) -> Grouped {
    let mut grouped = Grouped::default();
    for f in frames {
        match f.module_path {
            Some(module) => grouped
                .by_module
                .entry((f.suffix, module, f.build_id))
                .or_default()
                .push((f.frame, f.rel_pc)),
            None => grouped
                .outside
                .entry(f.suffix)
                .or_default()
                .push((f.frame, f.rel_pc)),
        }
    }
    grouped
}

/// Moves each frame recorded in no module that lies in exactly one
/// module its process recorded (the kernel sampler records `[vdso]`
/// frames so) into that module's group, its pc made module-relative.
fn place_in_covering_modules(path: &Path, grouped: &mut Grouped) -> Result<()> {
    for (suffix, frames) in grouped.outside.iter_mut() {
        let modules = process_modules(path, suffix)?;
        frames.retain(|&(frame, pc)| {
            let mut covering = modules
                .iter()
                .filter(|m| m.load_address != 0 && pc.wrapping_sub(m.load_address) < m.size)
                .map(|m| (&m.path, &m.build_id, m.load_address));
            let Some(first) = covering.next() else {
                return true;
            };
            if covering.any(|other| other != first) {
                return true;
            }
            let (module, build_id, load_address) = first;
            grouped
                .by_module
                .entry((suffix.clone(), module.clone(), build_id.clone()))
                .or_default()
                .push((frame, pc - load_address));
            false
        });
    }
    Ok(())
}

/// Writes `named` into the database; how many frames were named.
fn write_names(path: &Path, named: &Named) -> Result<usize> {
    let mut count = 0;
    for (suffix, names) in named {
        if names.is_empty() {
            continue;
        }
        let rows: Vec<FrameSymbols<'_>> = names
            .iter()
            .map(|(frame, name)| FrameSymbols {
                frame: *frame,
                function: Some(&name.function),
                file: name.file.as_deref(),
                line: name.line,
            })
            .collect();
        set_frame_symbols(path, suffix, &rows)?;
        count += rows.len();
    }
    Ok(count)
}

/// The lifetime of process `suffix` in the database at `db`, with its pid;
/// `None` where the database does not tell it (a file without the
/// process's row, or one that cannot be read as a profile).
fn lifetime(db: &Path, suffix: &str) -> Option<(i64, Lifetime)> {
    let ProcessLifetime {
        pid,
        start_unix_ns,
        end_unix_ns,
    } = process_lifetime(db, suffix).ok().flatten()?;
    let lifetime = Lifetime {
        start_unix_ns,
        end_unix_ns,
    };
    Some((pid, lifetime))
}

/// Names code that lies in no module (a JIT's) in the process `suffix`:
/// from the perf-map entries stored in the database when it has some,
/// else from the process's perf map, `/tmp/perf-<pid>.map` (as Node's
/// `--perf-basic-prof` and Python's `-X perf` write it), when it was
/// written within the process's lifetime; the entries that named a frame
/// are then stored in `strobe_jit_symbol`, so that a later symbolization
/// (the map is often deleted, or the database copied elsewhere) names
/// them again.
fn jit_names(db: &Path, suffix: &str, frames: &[(FrameId, u64)]) -> Result<Vec<(FrameId, Name)>> {
    let pcs: Vec<u64> = frames.iter().map(|&(_, pc)| pc).collect();
    let stored = jit_symbols(db, suffix)?;
    let names = if !stored.is_empty() {
        let entries = stored.into_iter().map(|s| perf_map::Entry {
            start: s.start,
            size: s.size,
            name: s.name,
        });
        perf_map::name_pcs(entries, &pcs).0
    } else {
        let Some((pid, lifetime)) = lifetime(db, suffix) else {
            return Ok(Vec::new());
        };
        let Some(entries) = perf_map::read(pid, &lifetime) else {
            return Ok(Vec::new());
        };
        let (names, used) = perf_map::name_pcs(entries, &pcs);
        if !used.is_empty() {
            let used: Vec<JitSymbol> = used
                .into_iter()
                .map(|e| JitSymbol {
                    start: e.start,
                    size: e.size,
                    name: e.name,
                })
                .collect();
            store_jit_symbols(db, suffix, &used)?;
        }
        names
    };
    let named = frames
        .iter()
        .zip(names)
        .filter_map(|(&(frame, _), function)| {
            let name = Name {
                function: function?,
                file: None,
                line: None,
            };
            Some((frame, name))
        })
        .collect();
    Ok(named)
}

/// Deletes the perf map (`/tmp/perf-<pid>.map`) of the process of the
/// database at `db` when it was written during the process's life: for
/// maps strobe caused (`sampling_python_perf`), once symbolization copied
/// the entries it needed into the database. Returns whether one was
/// deleted.
pub fn remove_perf_map(db: &Path) -> bool {
    lifetime(db, "").is_some_and(|(pid, lifetime)| perf_map::remove(pid, &lifetime))
}
