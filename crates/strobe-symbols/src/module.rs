//! Naming the addresses of one module of a finished run: every source of
//! names for it, in order.
//!
//! Owns the order in which a module's names are looked for: the module's
//! own symbol tables, then its separate debug file (the one its build id
//! names under `/usr/lib/debug/.build-id`, else the one its
//! `.gnu_debuglink` names), then its PLT stubs; for `[vdso]`, the running
//! kernel's vDSO copied from this process when the build ids match. It
//! remembers, across modules, what is costly to find again (debug links
//! and their CRCs, PLT stubs). Never reads or writes a database (the
//! caller maps frames to addresses), never names code outside a module
//! (perf maps are [`crate::perf_map`]'s).

use crate::debug_file::{self, DebugLinks};
use crate::elf::ElfFile;
use crate::plt::PltStubs;
use crate::resolve::{names_in, Name};
use std::collections::HashMap;
use std::path::Path;

/// Names addresses module by module; create one per symbolization run.
#[derive(Debug, Default)]
pub struct ModuleSymbolizer {
    lines: bool,
    links: DebugLinks,
    plt: HashMap<String, PltStubs>,
}

/// What [`ModuleSymbolizer::name`] found for a module.
#[derive(Debug, Default)]
pub struct ModuleNames {
    /// One entry per address asked for, `None` where nothing names it.
    pub names: Vec<Option<Name>>,
    /// Whether the module's file (and any debug file standing in for it)
    /// could not be read.
    pub missing: bool,
}

impl ModuleSymbolizer {
    /// A symbolizer that also resolves source files and lines when
    /// `lines` (reads DWARF: slower, and memory-hungry for large
    /// binaries; function names are always resolved).
    pub fn new(lines: bool) -> ModuleSymbolizer {
        ModuleSymbolizer {
            lines,
            ..ModuleSymbolizer::default()
        }
    }

    /// Names `pcs` (module-relative: file addresses) of the module
    /// recorded as `module` (a path, or `[vdso]`) with build id
    /// `build_id` (hex).
    pub fn name(&mut self, module: &str, build_id: Option<&str>, pcs: &[u64]) -> ModuleNames {
        let debug_file = match module {
            "[vdso]" => build_id.and_then(crate::vdso::copy_if_same),
            _ => build_id.and_then(debug_file::by_build_id),
        };
        let readable = !module.starts_with('[') && Path::new(module).is_file();
        let mut out = ModuleNames {
            names: vec![None; pcs.len()],
            missing: false,
        };
        if !readable && debug_file.is_none() {
            out.missing = true;
            return out;
        }
        // The module's own symbols first, then its separate debug file's
        // (a stripped library's internal functions are only there).
        if readable && !self.name_from(module, pcs, &mut out.names) {
            out.missing = true;
        }
        match &debug_file {
            Some(file) => {
                self.name_from(file, pcs, &mut out.names);
            }
            None if readable && out.names.iter().any(Option::is_none) => {
                if let Some(file) = self.links.file_for(module) {
                    self.name_from(&file, pcs, &mut out.names);
                }
            }
            None => {}
        }
        // What no symbol table names: the PLT stubs, as perf names them.
        if readable && out.names.iter().any(Option::is_none) {
            self.name_plt_stubs(module, pcs, &mut out.names);
        }
        if module == "[vdso]" {
            if let Some(copy) = debug_file {
                let _ = std::fs::remove_file(copy);
            }
        }
        out
    }

    /// Names the entries of `names` still unnamed from the ELF file
    /// `file`; whether the file could be read (nothing left to name
    /// counts as read).
    fn name_from(&self, file: &str, pcs: &[u64], names: &mut [Option<Name>]) -> bool {
        let left: Vec<usize> = (0..pcs.len()).filter(|&i| names[i].is_none()).collect();
        if left.is_empty() {
            return true;
        }
        let addrs: Vec<u64> = left.iter().map(|&i| pcs[i]).collect();
        let Some(found) = names_in(file, &addrs, self.lines) else {
            return false;
        };
        for (i, name) in left.into_iter().zip(found) {
            names[i] = name;
        }
        true
    }

    /// Names the entries of `names` still unnamed that lie in a PLT stub
    /// of `module` (its stubs read once per run).
    fn name_plt_stubs(&mut self, module: &str, pcs: &[u64], names: &mut [Option<Name>]) {
        let stubs = self.plt.entry(module.to_string()).or_insert_with(|| {
            ElfFile::open(module)
                .map(|elf| PltStubs::of(&elf))
                .unwrap_or_default()
        });
        for (name, &pc) in names.iter_mut().zip(pcs) {
            if name.is_none() {
                *name = stubs.name_at(pc).map(|function| Name {
                    function: function.to_string(),
                    file: None,
                    line: None,
                });
            }
        }
    }
}
