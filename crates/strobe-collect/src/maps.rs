//! Modules the runtime has not announced yet, found in `/proc/PID/maps`.
//!
//! The runtime announces modules when a thread starts or a library is
//! closed (it does not wrap `dlopen`), so a library `dlopen`ed since then
//! is unknown when its first samples arrive. While the process still runs
//! its current image, the mapping holding such an address names the file;
//! its load bias and build id come from the file's ELF headers.
//!
//! Owns that lookup. Never trusts a mapping that is not a file mapped
//! executable, and never answers for a process that exec'd or ended (the
//! caller checks) — a wrong module would be worse than none.

use crate::profile::Module;
use std::io::Read;

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

/// What a module's bias and identity come from.
struct ElfFacts {
    /// The loadable segments' (virtual address, file offset, file size,
    /// executable), in file order.
    loads: Vec<(u64, u64, u64, bool)>,
    build_id: Vec<u8>,
}

/// The loadable segments and the build id of the ELF file at `path`.
fn elf_facts(path: &str) -> Option<ElfFacts> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut head = vec![0u8; 64 * 1024];
    let n = file.read(&mut head).ok()?;
    head.truncate(n);
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let u16_at = |i: usize| Some(u16::from_le_bytes(head.get(i..i + 2)?.try_into().ok()?));
    let u32_at = |i: usize| Some(u32::from_le_bytes(head.get(i..i + 4)?.try_into().ok()?));
    let u64_at = |i: usize| Some(u64::from_le_bytes(head.get(i..i + 8)?.try_into().ok()?));
    let phoff = u64_at(32)? as usize;
    let (phentsize, phnum) = (u16_at(54)? as usize, u16_at(56)? as usize);
    let mut loads = Vec::new();
    let mut build_id = Vec::new();
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let (kind, flags, offset, vaddr, filesz) = (
            u32_at(ph)?,
            u32_at(ph + 4)?,
            u64_at(ph + 8)?,
            u64_at(ph + 16)?,
            u64_at(ph + 32)?,
        );
        const PT_LOAD: u32 = 1;
        const PT_NOTE: u32 = 4;
        if kind == PT_LOAD {
            const PF_X: u32 = 1;
            loads.push((vaddr, offset, filesz, flags & PF_X != 0));
        }
        if kind == PT_NOTE && build_id.is_empty() {
            let notes = head
                .get(offset as usize..(offset + filesz) as usize)
                .unwrap_or(&[]);
            if let Some(id) = strobe_core::modules::find_build_id(notes) {
                build_id = id.to_vec();
            }
        }
    }
    (!loads.is_empty()).then_some(ElfFacts { loads, build_id })
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
    let ElfFacts { loads, build_id } = elf_facts(&hit.path)?;
    let (vaddr, offset, _, _) = loads[0];
    // The mapping of the first loadable segment's file offset sits at
    // bias + its virtual address (both page-aligned in practice).
    let base = same_file().find(|m| m.offset == offset & !0xfff)?;
    Some(Module {
        path: hit.path.clone(),
        bias: base.start.wrapping_sub(vaddr & !0xfff),
        text: hit.start..hit.end,
        mapped: same_file().map(|m| m.start).min()?..same_file().map(|m| m.end).max()?,
        build_id: build_id.iter().map(|b| format!("{b:02x}")).collect(),
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

/// The module a mapping record announces (`start`, `offset`, `path`),
/// while the process still has it mapped.
pub fn module_for_mapping(start: u64, offset: u64, len: u64, path: &str) -> Option<Module> {
    let ElfFacts { loads, build_id } = elf_facts(path)?;
    // The executable segment whose file range holds the mapping's offset
    // (two segments may share a file page: lld packs small binaries).
    let (vaddr, seg_offset, _, _) = *loads
        .iter()
        .find(|(_, o, size, x)| *x && o & !0xfff <= offset && offset < o + size)?;
    // `start` maps file offset `offset`; the segment's address for that
    // offset is its vaddr moved by the same distance.
    let bias = start
        .wrapping_add(seg_offset.wrapping_sub(offset))
        .wrapping_sub(vaddr);
    Some(Module {
        path: path.to_string(),
        bias,
        text: start..start + len,
        mapped: start..start + len,
        build_id: build_id.iter().map(|b| format!("{b:02x}")).collect(),
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
        // The loader's own record of the executable's bias.
        let known = strobe_core::modules::loaded_modules()
            .into_iter()
            .find(|k| k.text.contains(&pc))
            .expect("the loader lists the executable");
        assert_eq!(m.bias, known.bias);
        assert_eq!(m.build_id, known.build_id_hex());
    }
}
