//! ELF files on disk, read for names: section headers and contents,
//! symbol tables, relocations, loadable segments, the build id and
//! `.gnu_debuglink`.
//!
//! Owns parsing ELF files, through `object`'s low-level ELF reader over a
//! file read on demand ([`ReadCache`]): only the headers and the sections
//! asked for are read, so finding the `.gnu_debuglink` of a binary with a
//! gigabyte of DWARF reads a few pages. Both classes and byte orders are
//! read ([`ElfFile::open`]); the collector, which only handles code of its
//! own machine, opens with [`ElfFile::open_native`].
//!
//! Never trusts an offset or a size: a damaged file gives `None` or fewer
//! entries, never a panic, and never makes it allocate more than the
//! file's size. Never runs inside the profiled program (it allocates and
//! reads files): the program's own in-memory module reader is
//! `strobe_core::modules`.

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, SectionTable, Sym};
use object::read::ReadCache;
use object::{Endianness, SectionIndex};
use std::fs::File;
use std::path::Path;

/// What the file is read through: the file, with every range read kept
/// until the [`ElfFile`] is dropped.
type Data<'a> = &'a ReadCache<File>;

/// An ELF file opened for reading.
pub struct ElfFile {
    data: ReadCache<File>,
    is_64: bool,
    little_endian: bool,
    machine: u16,
}

/// A section header with its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section<'a> {
    /// Index in the section header table.
    pub index: usize,
    /// Name (from the section name string table; empty when unreadable).
    pub name: &'a [u8],
    /// `sh_type` (`SHT_*`).
    pub kind: u32,
    /// Virtual address.
    pub addr: u64,
    /// Size in bytes (in memory; in the file too unless `SHT_NOBITS`).
    pub size: u64,
    /// `sh_link`: the index of a related section (a symbol table's
    /// strings, a relocation section's symbols).
    pub link: u32,
    /// Size of one entry, for sections of fixed-size entries (0: none).
    pub entsize: u64,
    /// File range of the contents; `None` for `SHT_NOBITS`.
    file_range: Option<(u64, u64)>,
}

/// A loadable segment (`PT_LOAD`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// Virtual address.
    pub vaddr: u64,
    /// File offset.
    pub offset: u64,
    /// Bytes in the file.
    pub file_size: u64,
    /// Whether it is mapped executable (`PF_X`).
    pub executable: bool,
}

/// A symbol of a symbol table, raw: nothing demangled or filtered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbol<'a> {
    /// Name (empty for the null symbol or an unreadable name).
    pub name: &'a [u8],
    /// `STT_*` type.
    pub kind: u8,
    /// Value (an address, for code).
    pub value: u64,
    /// Size in bytes.
    pub size: u64,
    /// Section index (`SHN_UNDEF`, 0, when undefined).
    pub shndx: u16,
}

/// A relocation with an addend (`SHT_RELA`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rela {
    /// The address it applies to.
    pub offset: u64,
    /// `R_*` type (machine-specific).
    pub kind: u32,
    /// Index of its symbol in the linked symbol table.
    pub symbol: u32,
    /// Addend.
    pub addend: i64,
}

/// A function symbol with a size: `start..start + size` is its code (file
/// addresses), `name` its raw (possibly mangled) name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSymbol {
    /// First address.
    pub start: u64,
    /// Size in bytes (never 0).
    pub size: u64,
    /// Name as the symbol table has it.
    pub name: String,
}

/// Where `e_ident` holds the file's class and its byte order.
const EI_CLASS: usize = 4;
const EI_DATA: usize = 5;

/// Calls the generic function `$f::<header type>($file, …)` for the file's
/// class (32- or 64-bit; both byte orders are `Endianness`).
macro_rules! by_class {
    ($file:expr, $f:ident($($arg:expr),*)) => {
        if $file.is_64 {
            $f::<elf::FileHeader64<Endianness>>($file, $($arg),*)
        } else {
            $f::<elf::FileHeader32<Endianness>>($file, $($arg),*)
        }
    };
}

impl ElfFile {
    /// Opens the ELF file at `path` (either class, either byte order);
    /// `None` when it cannot be read or is no ELF file.
    pub fn open(path: impl AsRef<Path>) -> Option<ElfFile> {
        let data = ReadCache::new(File::open(path).ok()?);
        let ident = object::ReadRef::read_bytes_at(&data, 0, 16).ok()?;
        if ident[..4] != *b"\x7fELF" {
            return None;
        }
        let is_64 = match ident[EI_CLASS] {
            elf::ELFCLASS32 => false,
            elf::ELFCLASS64 => true,
            _ => return None,
        };
        let little_endian = match ident[EI_DATA] {
            elf::ELFDATA2LSB => true,
            elf::ELFDATA2MSB => false,
            _ => return None,
        };
        let mut file = ElfFile {
            data,
            is_64,
            little_endian,
            machine: 0,
        };
        file.machine = by_class!(&file, machine())?;
        Some(file)
    }

    /// Opens the ELF file at `path` when it is of this machine's class and
    /// byte order (64-bit little-endian on x86-64): the only code the
    /// collector's unwinder and code map can place in a process of its
    /// own machine.
    pub fn open_native(path: impl AsRef<Path>) -> Option<ElfFile> {
        ElfFile::open(path).filter(|f| {
            f.is_64 == cfg!(target_pointer_width = "64")
                && f.little_endian == cfg!(target_endian = "little")
        })
    }

    /// Whether the file is 64-bit (`ELFCLASS64`).
    pub fn is_64(&self) -> bool {
        self.is_64
    }

    /// Whether the file is little-endian.
    pub fn is_little_endian(&self) -> bool {
        self.little_endian
    }

    /// `e_machine` (`EM_*`).
    pub fn machine(&self) -> u16 {
        self.machine
    }

    /// Every section header with its name, in file order (empty when the
    /// section header table cannot be read).
    pub fn sections(&self) -> Vec<Section<'_>> {
        by_class!(self, sections()).unwrap_or_default()
    }

    /// The first section named `name`.
    pub fn section(&self, name: &str) -> Option<Section<'_>> {
        self.sections()
            .into_iter()
            .find(|s| s.name == name.as_bytes())
    }

    /// The contents of `section`; `None` for one with no file contents
    /// (`SHT_NOBITS`) or contents beyond the end of the file.
    pub fn data(&self, section: &Section<'_>) -> Option<&[u8]> {
        let (offset, size) = section.file_range?;
        object::ReadRef::read_bytes_at(&self.data, offset, size).ok()
    }

    /// The symbols of the symbol table at section `index` (`SHT_SYMTAB` or
    /// `SHT_DYNSYM`), in table order; empty for any other section.
    pub fn symbols(&self, index: usize) -> Vec<Symbol<'_>> {
        by_class!(self, symbols(SectionIndex(index))).unwrap_or_default()
    }

    /// The relocations of the `SHT_RELA` section `section`.
    pub fn relas(&self, section: &Section<'_>) -> Vec<Rela> {
        by_class!(self, relas(section.index)).unwrap_or_default()
    }

    /// The loadable segments, in file order.
    pub fn loads(&self) -> Vec<Load> {
        by_class!(self, loads()).unwrap_or_default()
    }

    /// The build id: the first `NT_GNU_BUILD_ID` note of the note segments
    /// (`PT_NOTE`), as the loader maps them.
    pub fn build_id(&self) -> Option<Vec<u8>> {
        by_class!(self, build_id())
    }

    /// The file name and CRC-32 that `.gnu_debuglink` records of the
    /// separate debug file: the name, NUL-terminated and padded to 4 bytes,
    /// then the CRC in the file's byte order. `None` without the section,
    /// or with a name that is not UTF-8.
    pub fn gnu_debuglink(&self) -> Option<(String, u32)> {
        let data = self.data(&self.section(".gnu_debuglink")?)?;
        let len = data.iter().position(|&b| b == 0)?;
        let name = std::str::from_utf8(&data[..len]).ok()?.to_string();
        let at = (len + 1).next_multiple_of(4);
        let crc: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
        let crc = if self.little_endian {
            u32::from_le_bytes(crc)
        } else {
            u32::from_be_bytes(crc)
        };
        Some((name, crc))
    }

    /// Function symbols with a size (`STT_FUNC`, defined), from `.symtab`,
    /// or `.dynsym` when the file has no `.symtab` (stripped), in table
    /// order.
    pub fn functions(&self) -> Vec<FunctionSymbol> {
        let sections = self.sections();
        let table = sections
            .iter()
            .find(|s| s.kind == elf::SHT_SYMTAB)
            .or_else(|| sections.iter().find(|s| s.kind == elf::SHT_DYNSYM));
        let Some(table) = table else {
            return Vec::new();
        };
        self.symbols(table.index)
            .into_iter()
            .filter(|s| s.kind == elf::STT_FUNC && s.shndx != elf::SHN_UNDEF && s.size != 0)
            .map(|s| FunctionSymbol {
                start: s.value,
                size: s.size,
                name: String::from_utf8_lossy(s.name).into_owned(),
            })
            .collect()
    }
}

/// The file header of `file` and its byte order.
fn header<Elf: FileHeader<Endian = Endianness>>(file: &ElfFile) -> Option<(&Elf, Endianness)> {
    let header = Elf::parse(&file.data).ok()?;
    Some((header, header.endian().ok()?))
}

fn machine<Elf: FileHeader<Endian = Endianness>>(file: &ElfFile) -> Option<u16> {
    let (header, endian) = header::<Elf>(file)?;
    Some(header.e_machine(endian))
}

fn section_table<Elf: FileHeader<Endian = Endianness>>(
    file: &ElfFile,
) -> Option<(SectionTable<'_, Elf, Data<'_>>, Endianness)> {
    let (header, endian) = header::<Elf>(file)?;
    Some((header.sections(endian, &file.data).ok()?, endian))
}

fn sections<Elf: FileHeader<Endian = Endianness>>(file: &ElfFile) -> Option<Vec<Section<'_>>> {
    let (table, endian) = section_table::<Elf>(file)?;
    let sections = table
        .enumerate()
        .map(|(index, s)| Section {
            index: index.0,
            name: table.section_name(endian, s).unwrap_or_default(),
            kind: s.sh_type(endian),
            addr: s.sh_addr(endian).into(),
            size: s.sh_size(endian).into(),
            link: s.sh_link(endian),
            entsize: s.sh_entsize(endian).into(),
            file_range: s.file_range(endian),
        })
        .collect();
    Some(sections)
}

fn symbols<Elf: FileHeader<Endian = Endianness>>(
    file: &ElfFile,
    index: SectionIndex,
) -> Option<Vec<Symbol<'_>>> {
    let (table, endian) = section_table::<Elf>(file)?;
    let symbols = table
        .symbol_table_by_index(endian, &file.data, index)
        .ok()?;
    let out = symbols
        .iter()
        .map(|s| Symbol {
            name: symbols.symbol_name(endian, s).unwrap_or_default(),
            kind: s.st_type(),
            value: s.st_value(endian).into(),
            size: s.st_size(endian).into(),
            shndx: s.st_shndx(endian),
        })
        .collect();
    Some(out)
}

fn relas<Elf: FileHeader<Endian = Endianness>>(file: &ElfFile, index: usize) -> Option<Vec<Rela>> {
    use object::read::elf::Rela as _;
    let (table, endian) = section_table::<Elf>(file)?;
    let section = table.section(SectionIndex(index)).ok()?;
    let (relas, _) = section.rela(endian, &file.data).ok()??;
    let is_mips64el = false;
    let out = relas
        .iter()
        .map(|r| Rela {
            offset: r.r_offset(endian).into(),
            kind: r.r_type(endian, is_mips64el),
            symbol: r.r_sym(endian, is_mips64el),
            addend: r.r_addend(endian).into(),
        })
        .collect();
    Some(out)
}

fn loads<Elf: FileHeader<Endian = Endianness>>(file: &ElfFile) -> Option<Vec<Load>> {
    let (header, endian) = header::<Elf>(file)?;
    let loads = header
        .program_headers(endian, &file.data)
        .ok()?
        .iter()
        .filter(|p| p.p_type(endian) == elf::PT_LOAD)
        .map(|p| Load {
            vaddr: p.p_vaddr(endian).into(),
            offset: p.p_offset(endian).into(),
            file_size: p.p_filesz(endian).into(),
            executable: p.p_flags(endian) & elf::PF_X != 0,
        })
        .collect();
    Some(loads)
}

fn build_id<Elf: FileHeader<Endian = Endianness>>(file: &ElfFile) -> Option<Vec<u8>> {
    let (header, endian) = header::<Elf>(file)?;
    for segment in header.program_headers(endian, &file.data).ok()? {
        let Ok(Some(mut notes)) = segment.notes(endian, &file.data) else {
            continue;
        };
        while let Ok(Some(note)) = notes.next() {
            if note.n_type(endian) == elf::NT_GNU_BUILD_ID && note.name() == elf::ELF_NOTE_GNU {
                return Some(note.desc().to_vec());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn this_binary() -> ElfFile {
        ElfFile::open_native(std::fs::read_link("/proc/self/exe").unwrap()).unwrap()
    }

    #[test]
    fn this_test_binary_has_text_and_names_its_own_functions() {
        let elf = this_binary();
        let text = elf.section(".text").unwrap();
        assert!(!elf.data(&text).unwrap().is_empty() && text.addr > 0);
        let functions = elf.functions();
        assert!(functions
            .iter()
            .any(|f| f.name.contains("this_test_binary_has_text")));
        assert!(ElfFile::open("/proc/self/status").is_none());
        assert!(ElfFile::open("/nonexistent").is_none());
    }

    #[test]
    fn the_build_id_is_readelfs_and_code_is_in_an_executable_load() {
        let elf = this_binary();
        assert_eq!(elf.build_id().unwrap_or_default(), readelf_build_id());
        let loads = elf.loads();
        assert!(loads.iter().any(|l| l.executable));
        assert!(loads.iter().any(|l| !l.executable));
    }

    /// The build id of the running executable as `readelf -n` prints it.
    fn readelf_build_id() -> Vec<u8> {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let out = std::process::Command::new("readelf")
            .arg("-n")
            .arg(&exe)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(hex) = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: "))
        else {
            return Vec::new();
        };
        (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn a_truncated_file_gives_nothing_and_no_panic() {
        let bytes = std::fs::read(std::fs::read_link("/proc/self/exe").unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        for len in [0, 4, 16, 63, 64, 200, 4096, bytes.len() / 2] {
            let path = dir.path().join(format!("cut{len}"));
            std::fs::write(&path, &bytes[..len]).unwrap();
            if let Some(elf) = ElfFile::open(&path) {
                for s in elf.sections() {
                    let _ = elf.data(&s);
                    let _ = elf.symbols(s.index);
                    let _ = elf.relas(&s);
                }
                let _ = (elf.functions(), elf.loads(), elf.build_id());
                let _ = elf.gnu_debuglink();
            }
        }
    }
}
