//! Reading ELF files in the collector: section contents by name and
//! function symbols (64-bit little-endian files, what strobe runs on).
//!
//! Owns section-header and symbol-table parsing over a file read whole.
//! Never trusts an offset or size without a bounds check: a malformed file
//! yields `None` or fewer sections, never a panic.

/// A section: name, virtual address and contents (empty for `NOBITS`).
pub struct Section<'a> {
    pub name: &'a [u8],
    pub addr: u64,
    pub data: &'a [u8],
    kind: u32,
    link: u32,
}

/// An ELF file read into memory.
pub struct ElfFile {
    bytes: Vec<u8>,
}

const SHT_SYMTAB: u32 = 2;
const SHT_NOBITS: u32 = 8;
const SHT_DYNSYM: u32 = 11;
const STT_FUNC: u8 = 2;

impl ElfFile {
    /// Reads the file at `path`; `None` unless it is a 64-bit
    /// little-endian ELF file.
    pub fn read(path: &str) -> Option<ElfFile> {
        let bytes = std::fs::read(path).ok()?;
        let ok = bytes.len() >= 64 && &bytes[..4] == b"\x7fELF" && bytes[4] == 2 && bytes[5] == 1;
        ok.then_some(ElfFile { bytes })
    }

    fn u16_at(&self, i: usize) -> Option<u16> {
        Some(u16::from_le_bytes(
            self.bytes.get(i..i + 2)?.try_into().ok()?,
        ))
    }

    fn u32_at(&self, i: usize) -> Option<u32> {
        Some(u32::from_le_bytes(
            self.bytes.get(i..i + 4)?.try_into().ok()?,
        ))
    }

    fn u64_at(&self, i: usize) -> Option<u64> {
        Some(u64::from_le_bytes(
            self.bytes.get(i..i + 8)?.try_into().ok()?,
        ))
    }

    /// Every section with its name (sections whose header cannot be read
    /// are left out).
    pub fn sections(&self) -> Vec<Section<'_>> {
        self.try_sections().unwrap_or_default()
    }

    fn try_sections(&self) -> Option<Vec<Section<'_>>> {
        let shoff = usize::try_from(self.u64_at(40)?).ok()?;
        let shentsize = self.u16_at(58)? as usize;
        let shnum = self.u16_at(60)? as usize;
        let shstrndx = self.u16_at(62)? as usize;
        let header = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
        let names_at = usize::try_from(self.u64_at(header(shstrndx)? + 24)?).ok()?;
        let mut out = Vec::with_capacity(shnum);
        for i in 0..shnum {
            let Some(h) = header(i) else { break };
            let Some(s) = self.section_at(h, names_at) else {
                continue;
            };
            out.push(s);
        }
        Some(out)
    }

    fn section_at(&self, h: usize, names_at: usize) -> Option<Section<'_>> {
        let name_off = self.u32_at(h)? as usize;
        let name_bytes = self.bytes.get(names_at.checked_add(name_off)?..)?;
        let name = &name_bytes[..name_bytes.iter().position(|&b| b == 0)?];
        let kind = self.u32_at(h + 4)?;
        let addr = self.u64_at(h + 16)?;
        let offset = usize::try_from(self.u64_at(h + 24)?).ok()?;
        let size = usize::try_from(self.u64_at(h + 32)?).ok()?;
        let link = self.u32_at(h + 40)?;
        let data = if kind == SHT_NOBITS {
            &[][..]
        } else {
            self.bytes.get(offset..offset.checked_add(size)?)?
        };
        Some(Section {
            name,
            addr,
            data,
            kind,
            link,
        })
    }

    /// The section named `name`.
    pub fn section(&self, name: &str) -> Option<Section<'_>> {
        self.sections()
            .into_iter()
            .find(|s| s.name == name.as_bytes())
    }

    /// Function symbols with a size: (address, size, raw name), from
    /// `.symtab`, or `.dynsym` when the file was stripped.
    pub fn functions(&self) -> Vec<(u64, u64, String)> {
        let sections = self.sections();
        let table = sections
            .iter()
            .find(|s| s.kind == SHT_SYMTAB)
            .or_else(|| sections.iter().find(|s| s.kind == SHT_DYNSYM));
        let Some(table) = table else {
            return Vec::new();
        };
        let Some(strings) = sections.get(table.link as usize) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in table.data.chunks_exact(24) {
            let name_at = u32::from_le_bytes(entry[0..4].try_into().unwrap_or_default()) as usize;
            let info = entry[4];
            let shndx = u16::from_le_bytes([entry[6], entry[7]]);
            let value = u64::from_le_bytes(entry[8..16].try_into().unwrap_or_default());
            let size = u64::from_le_bytes(entry[16..24].try_into().unwrap_or_default());
            if info & 0xf != STT_FUNC || shndx == 0 || size == 0 {
                continue;
            }
            let Some(rest) = strings.data.get(name_at..) else {
                continue;
            };
            let name = &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())];
            out.push((value, size, String::from_utf8_lossy(name).into_owned()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_has_text_and_names_its_own_functions() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let elf = ElfFile::read(exe.to_str().unwrap()).unwrap();
        let text = elf.section(".text").unwrap();
        assert!(!text.data.is_empty() && text.addr > 0);
        let functions = elf.functions();
        assert!(functions
            .iter()
            .any(|(_, _, name)| name.contains("this_test_binary_has_text")));
        assert!(ElfFile::read("/proc/self/status").is_none());
    }
}
