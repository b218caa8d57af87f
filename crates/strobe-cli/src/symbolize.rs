//! Post-run symbolization: function names (and, when asked, source lines)
//! for every frame of a profile database, from the binaries on disk.
//!
//! Owns grouping frames by module and calling blazesym offline, with the
//! module's separate debug file (by build id, under
//! `/usr/lib/debug/.build-id`) where its own symbols lack a function, and
//! the running kernel's vDSO (copied from this process, when its build id
//! matches) for `[vdso]` frames, and a process's perf map for code in no
//! module (a JIT's). Names only
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

/// Frames are symbolized per process suffix, module path and build id.
type ModuleKey = (String, String, Option<String>);

/// Where separate debug files are looked up by build id
/// (`<dir>/xx/yyyy….debug`), as gdb, perf and Debian's `-dbg` packages do.
const BUILD_ID_DIR: &str = "/usr/lib/debug/.build-id";

/// The separate debug file of the module with build id `hex`, if
/// installed.
fn debug_file_for(hex: &str) -> Option<String> {
    if hex.len() < 3 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let path = format!("{BUILD_ID_DIR}/{}/{}.debug", &hex[..2], &hex[2..]);
    Path::new(&path).is_file().then_some(path)
}

/// The kernel's vDSO, copied from this process into a file, when it is
/// the one with build id `hex` (the same kernel the profile ran on).
fn vdso_file(hex: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let range = maps.lines().find(|l| l.ends_with("[vdso]"))?;
    let (start, end) = range.split_whitespace().next()?.split_once('-')?;
    let (start, end) = (
        usize::from_str_radix(start, 16).ok()?,
        usize::from_str_radix(end, 16).ok()?,
    );
    // SAFETY: the vDSO is mapped readable in this process for its whole
    // life, over exactly this range.
    let image = unsafe { std::slice::from_raw_parts(start as *const u8, end.checked_sub(start)?) };
    let id: Vec<u8> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
        .collect::<Option<_>>()?;
    if id.is_empty() || !image.windows(id.len()).any(|w| w == id.as_slice()) {
        return None;
    }
    let path = std::env::temp_dir().join(format!("strobe-vdso-{}-{hex}.so", std::process::id()));
    std::fs::write(&path, image).ok()?;
    Some(path.display().to_string())
}

/// The OS pid of the process whose tables have `suffix`.
fn process_pid(db: &Path, suffix: &str) -> Option<i64> {
    let conn = strobe_db::inputs::open_read_only(db).ok()?;
    let sql = format!(
        "SELECT pid FROM \"rocpd_info_process{}\"",
        suffix.replace('"', "")
    );
    conn.query_row(&sql, [], |r| r.get(0)).ok()
}

/// Names code that lies in no module (a JIT's) from the process's perf
/// map, `/tmp/perf-<pid>.map` (lines `START SIZE NAME`, hex, as Node's
/// `--perf-basic-prof` and Python's `-X perf` write them, and perf reads).
/// The names are stored in the database, so later readers need no map.
fn perf_map_names(pid: i64, frames: &[(FrameId, u64)]) -> Vec<Resolved> {
    let Ok(text) = std::fs::read_to_string(format!("/tmp/perf-{pid}.map")) else {
        return Vec::new();
    };
    let mut entries: Vec<(u64, u64, &str)> = text
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ' ');
            let start = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
            let size = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
            Some((start, size, parts.next()?.trim()))
        })
        .collect();
    // A later line for the same address wins (code regenerated).
    entries.sort_by_key(|&(start, _, _)| start);
    frames
        .iter()
        .filter_map(|&(frame, pc)| {
            let i = entries.partition_point(|&(start, _, _)| start <= pc);
            let (start, size, name) = *entries.get(i.checked_sub(1)?)?;
            (pc < start.saturating_add(size)).then(|| Resolved {
                frame,
                function: name.to_string(),
                file: None,
                line: None,
            })
        })
        .collect()
}

/// Names `frames` (frame, module-relative pc) from the ELF file `file`;
/// `None` when the file cannot be read. One symbolizer per call: its
/// caches (and DWARF) go with it.
fn symbolize_in(file: &str, frames: &[(FrameId, u64)], lines: bool) -> Option<Vec<Resolved>> {
    let symbolizer = Symbolizer::builder()
        .enable_code_info(lines)
        .enable_inlined_fns(false)
        .enable_demangling(true)
        .build();
    let mut elf = Elf::new(file);
    elf.debug_syms = lines;
    let source = Source::Elf(elf);
    let addrs: Vec<u64> = frames.iter().map(|&(_, pc)| pc).collect();
    let symbols = symbolizer
        .symbolize(&source, Input::VirtOffset(&addrs))
        .ok()?;
    let mut out = Vec::new();
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
    Some(out)
}

/// Names every unnamed frame of the database at `path`.
pub fn symbolize_database(path: &Path, lines: bool) -> Result<SymbolStats> {
    let frames = unsymbolized_frames(path)?;
    let mut stats = SymbolStats {
        frames: frames.len(),
        ..Default::default()
    };
    let mut groups: BTreeMap<ModuleKey, Vec<(FrameId, u64)>> = BTreeMap::new();
    // Code in no module (a JIT's), by process: absolute pcs.
    let mut outside: BTreeMap<String, Vec<(FrameId, u64)>> = BTreeMap::new();
    for f in frames {
        match f.module_path {
            Some(module) => groups
                .entry((f.suffix, module, f.build_id))
                .or_default()
                .push((f.frame, f.rel_pc)),
            None => outside
                .entry(f.suffix)
                .or_default()
                .push((f.frame, f.rel_pc)),
        }
    }
    let mut resolved_by_suffix: BTreeMap<String, Vec<Resolved>> = BTreeMap::new();
    for (suffix, frames) in outside {
        let named = process_pid(path, &suffix)
            .map(|pid| perf_map_names(pid, &frames))
            .unwrap_or_default();
        resolved_by_suffix.entry(suffix).or_default().extend(named);
    }
    for ((suffix, module, build_id), frames) in groups {
        let debug_file = match module.as_str() {
            "[vdso]" => build_id.as_deref().and_then(vdso_file),
            _ => build_id.as_deref().and_then(debug_file_for),
        };
        let readable = !module.starts_with('[') && Path::new(&module).is_file();
        if !readable && debug_file.is_none() {
            stats.missing_modules += 1;
            continue;
        }
        let out = resolved_by_suffix.entry(suffix).or_default();
        // The module's own symbols first, then its separate debug file's
        // (a stripped library's internal functions are only there).
        let mut left = frames;
        let copied_vdso = (module == "[vdso]").then(|| debug_file.clone()).flatten();
        for file in [readable.then(|| module.clone()), debug_file]
            .into_iter()
            .flatten()
        {
            if left.is_empty() {
                break;
            }
            match symbolize_in(&file, &left, lines) {
                Some(found) => {
                    let named: std::collections::HashSet<FrameId> =
                        found.iter().map(|r| r.frame).collect();
                    left.retain(|(frame, _)| !named.contains(frame));
                    out.extend(found);
                }
                None if file == module => stats.missing_modules += 1,
                None => {}
            }
        }
        if let Some(copy) = copied_vdso {
            let _ = std::fs::remove_file(copy);
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
