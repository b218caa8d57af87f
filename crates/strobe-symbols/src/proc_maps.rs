//! The modules of a running process, from `/proc/PID/maps` and the ELF
//! headers of the files mapped.
//!
//! The collector needs them where the runtime cannot announce them: a
//! library `dlopen`ed since the runtime last looked (it does not wrap
//! `dlopen`), every module of a process sampled by the kernel, and the
//! code a causal experiment can select. The mapping holding an address
//! names the file; its load bias comes from the file's loadable segments
//! and its identity from the build id note.
//!
//! Owns that lookup. Never trusts a mapping that is not a file mapped
//! executable, and never answers for a process that exec'd or ended (the
//! caller checks): a wrong module would be worse than none. Never reads
//! the process's memory.

use crate::elf::{ElfFile, Load};
use std::ops::Range;

/// A module of a process: where its file is mapped and how to read its
/// addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// File path.
    pub path: String,
    /// Load bias (a runtime address less the bias is a file address).
    pub bias: u64,
    /// Executable range.
    pub text: Range<u64>,
    /// Whole mapped range.
    pub mapped: Range<u64>,
    /// Build id as lower-case hex (may be empty).
    pub build_id: String,
}

/// One line of `/proc/PID/maps`: range, permissions, file offset, path.
struct Mapping {
    start: u64,
    end: u64,
    executable: bool,
    offset: u64,
    path: String,
}

fn parse(line: &str) -> Option<Mapping> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
    let _device = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.collect::<Vec<_>>().join(" ");
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        executable: perms.as_bytes().get(2) == Some(&b'x'),
        offset,
        path,
    })
}

/// What a module's bias and identity come from: its file's loadable
/// segments, in file order, and its build id in hex.
fn elf_facts(path: &str) -> Option<(Vec<Load>, String)> {
    let elf = ElfFile::open_native(path)?;
    let loads = elf.loads();
    let build_id = elf.build_id().unwrap_or_default();
    let hex = build_id.iter().map(|b| format!("{b:02x}")).collect();
    (!loads.is_empty()).then_some((loads, hex))
}

/// The mappings of process `pid`.
fn mappings(pid: i32) -> Vec<Mapping> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map(|maps| maps.lines().filter_map(parse).collect())
        .unwrap_or_default()
}

/// The module that executable mapping `hit` belongs to.
fn module_of(mappings: &[Mapping], hit: &Mapping) -> Option<Module> {
    let same_file = || mappings.iter().filter(|m| m.path == hit.path);
    let (loads, build_id) = elf_facts(&hit.path)?;
    let first = loads[0];
    // The mapping of the first loadable segment's file offset sits at
    // bias + its virtual address (both page-aligned in practice).
    let base = same_file().find(|m| m.offset == first.offset & !0xfff)?;
    Some(Module {
        path: hit.path.clone(),
        bias: base.start.wrapping_sub(first.vaddr & !0xfff),
        text: hit.start..hit.end,
        mapped: same_file().map(|m| m.start).min()?..same_file().map(|m| m.end).max()?,
        build_id,
    })
}

fn is_file_code(m: &Mapping) -> bool {
    m.executable && m.path.starts_with('/')
}

/// The module of process `pid` whose executable mapping holds `pc`.
pub fn module_at(pid: i32, pc: u64) -> Option<Module> {
    let all = mappings(pid);
    let hit = all
        .iter()
        .find(|m| is_file_code(m) && (m.start..m.end).contains(&pc))?;
    module_of(&all, hit)
}

/// Every module of process `pid` with code mapped from a file.
pub fn executable_modules(pid: i32) -> Vec<Module> {
    let all = mappings(pid);
    all.iter()
        .filter(|m| is_file_code(m))
        .filter_map(|hit| module_of(&all, hit))
        .collect()
}

/// The module a mapping record announces (`start`, `offset`, `len`,
/// `path`), while the process still has it mapped.
pub fn module_for_mapping(start: u64, offset: u64, len: u64, path: &str) -> Option<Module> {
    let (loads, build_id) = elf_facts(path)?;
    // The executable segment whose file range holds the mapping's offset
    // (two segments may share a file page: lld packs small binaries).
    let segment = loads
        .iter()
        .find(|l| l.executable && l.offset & !0xfff <= offset && offset < l.offset + l.file_size)?;
    // `start` maps file offset `offset`; the segment's address for that
    // offset is its vaddr moved by the same distance.
    let bias = start
        .wrapping_add(segment.offset.wrapping_sub(offset))
        .wrapping_sub(segment.vaddr);
    Some(Module {
        path: path.to_string(),
        bias,
        text: start..start + len,
        mapped: start..start + len,
        build_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_this_test_binarys_own_code_with_the_loaders_bias() {
        let pc = finds_this_test_binarys_own_code_with_the_loaders_bias as *const () as u64;
        let m = module_at(std::process::id() as i32, pc).expect("own code is in a mapped file");
        assert!(m.text.contains(&pc));
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(std::path::Path::new(&m.path), exe);
        // The bias maps the runtime address to this function's symbol.
        let functions = crate::functions::Functions::of(&ElfFile::open(&exe).unwrap());
        let function = functions.at(pc.wrapping_sub(m.bias)).unwrap();
        assert!(function
            .name
            .ends_with("::finds_this_test_binarys_own_code_with_the_loaders_bias"));
        assert_eq!(function.start.wrapping_add(m.bias), pc);
        assert!(executable_modules(std::process::id() as i32).contains(&m));
        // The loader's own record of the executable (from memory).
        let known = strobe_core::modules::loaded_modules()
            .into_iter()
            .find(|k| k.text.contains(&pc))
            .expect("the loader lists the executable");
        assert_eq!(m.bias, known.bias);
        assert_eq!(m.build_id, known.build_id_hex());
    }

    #[test]
    fn maps_lines_parse_with_spaces_in_paths() {
        let m = parse("7f00-7f10 r-xp 00001000 08:01 42    /tmp/a b.so").unwrap();
        assert_eq!((m.start, m.end, m.offset), (0x7f00, 0x7f10, 0x1000));
        assert!(m.executable && is_file_code(&m));
        assert_eq!(m.path, "/tmp/a b.so");
        let anon = parse("7f00-7f10 rw-p 00000000 00:00 0").unwrap();
        assert!(!anon.executable && !is_file_code(&anon));
        assert!(parse("garbage").is_none());
    }
}
