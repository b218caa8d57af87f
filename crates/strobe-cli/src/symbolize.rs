//! Post-run symbolization: function names (and, when asked, source lines)
//! for every frame of a profile database, from the binaries on disk.
//!
//! Owns grouping frames by module and calling blazesym offline. Names only
//! (ELF symbol tables) is the fast default; `--lines` also reads DWARF,
//! which can take hundreds of MiB for large binaries (one module at a time,
//! so that memory is released between modules). Never runs inside the
//! profiled process.

use anyhow::Result;
use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use std::collections::BTreeMap;
use std::path::Path;
use strobe_db::symbols::{set_frame_symbols, unsymbolized_frames};
use strobe_db::{FrameId, FrameSymbols};

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

struct Resolved {
    frame: FrameId,
    function: String,
    file: Option<String>,
    line: Option<u32>,
}

/// Names every unnamed frame of the database at `path`.
pub fn symbolize_database(path: &Path, lines: bool) -> Result<SymbolStats> {
    let frames = unsymbolized_frames(path)?;
    let mut stats = SymbolStats {
        frames: frames.len(),
        ..Default::default()
    };
    // (process suffix, module path) → frames
    let mut groups: BTreeMap<(String, String), Vec<(FrameId, u64)>> = BTreeMap::new();
    for f in frames {
        if let Some(module) = f.module_path {
            groups
                .entry((f.suffix, module))
                .or_default()
                .push((f.frame, f.rel_pc));
        }
    }
    let mut resolved_by_suffix: BTreeMap<String, Vec<Resolved>> = BTreeMap::new();
    for ((suffix, module), frames) in groups {
        if module.starts_with('[') || !Path::new(&module).is_file() {
            stats.missing_modules += 1;
            continue;
        }
        // One symbolizer per module: its caches (and DWARF) go with it.
        let symbolizer = Symbolizer::builder()
            .enable_code_info(lines)
            .enable_inlined_fns(false)
            .enable_demangling(true)
            .build();
        let mut elf = Elf::new(&module);
        elf.debug_syms = lines;
        let source = Source::Elf(elf);
        let addrs: Vec<u64> = frames.iter().map(|&(_, pc)| pc).collect();
        let Ok(symbols) = symbolizer.symbolize(&source, Input::VirtOffset(&addrs)) else {
            stats.missing_modules += 1;
            continue;
        };
        let out = resolved_by_suffix.entry(suffix).or_default();
        for ((frame, _), sym) in frames.iter().zip(symbols) {
            let Symbolized::Sym(sym) = sym else {
                continue;
            };
            let (file, line) = match &sym.code_info {
                Some(ci) => (Some(ci.to_path().display().to_string()), ci.line),
                None => (None, None),
            };
            out.push(Resolved {
                frame: *frame,
                function: sym.name.to_string(),
                file,
                line,
            });
        }
    }
    for (suffix, resolved) in &resolved_by_suffix {
        let rows: Vec<FrameSymbols<'_>> = resolved
            .iter()
            .map(|r| FrameSymbols {
                frame: r.frame,
                function: Some(&r.function),
                file: r.file.as_deref(),
                line: r.line,
            })
            .collect();
        set_frame_symbols(path, suffix, &rows)?;
        stats.named += rows.len();
    }
    Ok(stats)
}
