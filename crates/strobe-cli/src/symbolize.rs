//! Post-run symbolization: function names (and, when asked, source lines)
//! for every frame of a profile database, from the binaries on disk.
//!
//! Owns grouping frames by module and calling blazesym offline, with the
//! module's separate debug file where its own symbols lack a function (by
//! build id, under `/usr/lib/debug/.build-id`; else the one its
//! `.gnu_debuglink` section names, found where gdb looks and accepted only
//! with the recorded CRC-32), x86-64 PLT stubs named `foo@plt` as perf
//! names them, the running kernel's vDSO (copied from this process, when
//! its build id matches) for `[vdso]` frames, frames recorded in no module
//! placed in the one recorded module covering them, and a process's perf
//! map for code in no module (a JIT's), whose entries that name frames it
//! keeps in the database for later symbolizations. Names are demangled only
//! when mangled (`_Z…`, `_R…`). Names only (ELF symbol tables) is the fast
//! default; `--lines` also reads DWARF, which can take hundreds of MiB for
//! large binaries (one module at a time, so that memory is released
//! between modules). It reads ELF files itself only for section headers,
//! `.gnu_debuglink` and the PLT with its relocations. Never runs inside the
//! profiled process, and never writes a database except through
//! `strobe_db::symbols`.

use anyhow::Result;
use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use strobe_db::symbols::{
    jit_symbols, process_modules, set_frame_symbols, store_jit_symbols, unsymbolized_frames,
    JitSymbol,
};
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

/// The global directory of separate debug files, as gdb's
/// `debug-file-directory` defaults to.
const DEBUG_DIR: &str = "/usr/lib/debug";

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

/// One ELF section header: what the readers below need of it.
struct Section {
    name: Vec<u8>,
    kind: u32,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
    entsize: u64,
}

/// A little ELF reader: the section headers, and the bytes of a section.
/// Just enough for `.gnu_debuglink` and PLT names; any malformed or
/// unexpected input gives `None`.
struct ElfSections {
    file: std::fs::File,
    little_endian: bool,
    is_64: bool,
    machine: u16,
    sections: Vec<Section>,
}

/// Largest section header table or section read (16 MiB): a bound on
/// what a damaged file can make us allocate.
const MAX_ELF_READ: u64 = 16 << 20;

/// A PLT stub: first address, end (exclusive) and name (`puts@plt`).
type Stub = (u64, u64, String);

/// `e_machine` of x86-64, the one architecture whose PLT is decoded.
const EM_X86_64: u16 = 62;

/// The unsigned integer of `width` bytes at `at` in `bytes`.
fn uint(bytes: &[u8], at: usize, width: usize, little_endian: bool) -> Option<u64> {
    let field = bytes.get(at..at.checked_add(width)?)?;
    let mut v = 0u64;
    for i in 0..width {
        let b = if little_endian {
            field[width - 1 - i]
        } else {
            field[i]
        };
        v = (v << 8) | u64::from(b);
    }
    Some(v)
}

impl ElfSections {
    fn open(path: &Path) -> Option<ElfSections> {
        let file = std::fs::File::open(path).ok()?;
        let mut ident = [0u8; 16];
        file.read_exact_at(&mut ident, 0).ok()?;
        if ident[..4] != *b"\x7fELF" {
            return None;
        }
        let is_64 = match ident[4] {
            1 => false,
            2 => true,
            _ => return None,
        };
        let little_endian = match ident[5] {
            1 => true,
            2 => false,
            _ => return None,
        };
        let mut elf = ElfSections {
            file,
            little_endian,
            is_64,
            machine: 0,
            sections: Vec::new(),
        };
        elf.read_headers()?;
        Some(elf)
    }

    fn read(&self, offset: u64, len: u64) -> Option<Vec<u8>> {
        if len > MAX_ELF_READ {
            return None;
        }
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        self.file.read_exact_at(&mut buf, offset).ok()?;
        Some(buf)
    }

    fn uint(&self, bytes: &[u8], at: usize, width: usize) -> Option<u64> {
        uint(bytes, at, width, self.little_endian)
    }

    /// Reads the ELF header and every section header with its name.
    fn read_headers(&mut self) -> Option<()> {
        // ELF header fields: machine, section header offset, entry size,
        // count and the index of the section name table.
        let (shoff_at, word, shentsize_at) = if self.is_64 { (40, 8, 58) } else { (32, 4, 46) };
        let header = self.read(0, if self.is_64 { 64 } else { 52 })?;
        self.machine = u16::try_from(self.uint(&header, 18, 2)?).ok()?;
        let shoff = self.uint(&header, shoff_at, word)?;
        let shentsize = self.uint(&header, shentsize_at, 2)?;
        let mut shnum = self.uint(&header, shentsize_at + 2, 2)?;
        let mut shstrndx = self.uint(&header, shentsize_at + 4, 2)?;
        let min_entry = if self.is_64 { 64 } else { 40 };
        if shoff == 0 || shentsize < min_entry {
            return None;
        }
        let first = self.read(shoff, shentsize)?;
        // Section header fields: name offset, type, address, file offset,
        // size, link, entry size.
        let (addr_at, offset_at, size_at, link_at, entsize_at) = if self.is_64 {
            (16, 24, 32, 40, 56)
        } else {
            (12, 16, 20, 24, 36)
        };
        // Extended numbering: the real count and name-table index live in
        // section 0 when they do not fit the header's 16 bits.
        if shnum == 0 {
            shnum = self.uint(&first, size_at, word)?;
        }
        if shstrndx == 0xffff {
            shstrndx = self.uint(&first, link_at, 4)?;
        }
        let table = self.read(shoff, shnum.checked_mul(shentsize)?)?;
        let entsize = usize::try_from(shentsize).ok()?;
        let mut sections = Vec::new();
        for e in table.chunks_exact(entsize) {
            sections.push(Section {
                name: Vec::new(),
                kind: u32::try_from(self.uint(e, 4, 4)?).ok()?,
                addr: self.uint(e, addr_at, word)?,
                offset: self.uint(e, offset_at, word)?,
                size: self.uint(e, size_at, word)?,
                link: u32::try_from(self.uint(e, link_at, 4)?).ok()?,
                entsize: self.uint(e, entsize_at, word)?,
            });
        }
        let names = self.contents(sections.get(usize::try_from(shstrndx).ok()?)?)?;
        for (section, e) in sections.iter_mut().zip(table.chunks_exact(entsize)) {
            let at = usize::try_from(self.uint(e, 0, 4)?).ok()?;
            if let Some(rest) = names.get(at..) {
                section.name = rest.split(|&b| b == 0).next().unwrap_or_default().to_vec();
            }
        }
        self.sections = sections;
        Some(())
    }

    /// The bytes of `section` (`None` for one without file contents).
    fn contents(&self, section: &Section) -> Option<Vec<u8>> {
        const SHT_NOBITS: u32 = 8;
        if section.kind == SHT_NOBITS {
            return None;
        }
        self.read(section.offset, section.size)
    }

    fn named(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name.as_bytes())
    }

    /// The file name and CRC32 of the `.gnu_debuglink` section: the name,
    /// NUL-terminated and padded to 4 bytes, then the CRC in the file's
    /// byte order.
    fn gnu_debuglink(&self) -> Option<(String, u32)> {
        let data = self.contents(self.named(".gnu_debuglink")?)?;
        let len = data.iter().position(|&b| b == 0)?;
        let name = std::str::from_utf8(&data[..len]).ok()?.to_string();
        let crc_at = (len + 1).next_multiple_of(4);
        let crc = u32::try_from(self.uint(&data, crc_at, 4)?).ok()?;
        Some((name, crc))
    }

    /// The PLT stubs of an x86-64 file, as perf names them: `(start, end,
    /// "name@plt")`, sorted. Each stub of `.plt`, `.plt.sec` and `.plt.got`
    /// jumps through a GOT slot (`jmp *disp32(%rip)`, `ff 25`); the
    /// dynamic relocation of that slot names the symbol (`JUMP_SLOT`,
    /// `GLOB_DAT`), or its addend the ifunc resolver (`IRELATIVE`: the
    /// ifunc symbol there, else `*ABS*+0x…` as objdump writes it). Stubs
    /// whose slot has no relocation (`.plt`'s header) stay unnamed.
    fn plt_stubs(&self) -> Vec<Stub> {
        if self.machine != EM_X86_64 || !self.is_64 {
            return Vec::new();
        }
        // Stubs and the GOT slot each jumps through.
        let mut stubs: Vec<(u64, u64, u64)> = Vec::new();
        for section in &self.sections {
            if ![&b".plt"[..], b".plt.sec", b".plt.got"].contains(&section.name.as_slice()) {
                continue;
            }
            let size = if section.entsize == 0 {
                16
            } else {
                section.entsize
            };
            let (Some(code), Ok(step)) = (self.contents(section), usize::try_from(size)) else {
                continue;
            };
            if !(8..=64).contains(&step) {
                continue;
            }
            for (i, entry) in code.chunks_exact(step).enumerate() {
                // The jump opens the stub, after an `endbr64` and a `bnd`
                // prefix where present: never bytes inside another
                // instruction.
                let Some(at) = [0usize, 1, 4, 5].into_iter().find(|&at| {
                    entry.get(at..at + 2) == Some(&[0xff, 0x25][..])
                        && matches!(
                            &entry[..at],
                            [] | [0xf2] | [0xf3, 0x0f, 0x1e, 0xfa] | [0xf3, 0x0f, 0x1e, 0xfa, 0xf2]
                        )
                }) else {
                    continue;
                };
                let Some(disp) = self.uint(entry, at + 2, 4) else {
                    continue;
                };
                let start = section.addr + (i * step) as u64;
                let next = start + at as u64 + 6;
                let slot = next.wrapping_add_signed(i64::from(disp as u32 as i32));
                stubs.push((start, start + size, slot));
            }
        }
        if stubs.is_empty() {
            return Vec::new();
        }
        let wanted: HashSet<u64> = stubs.iter().map(|s| s.2).collect();
        let mut names: HashMap<u64, String> = HashMap::new();
        const SHT_RELA: u32 = 4;
        const R_X86_64_GLOB_DAT: u64 = 6;
        const R_X86_64_JUMP_SLOT: u64 = 7;
        const R_X86_64_IRELATIVE: u64 = 37;
        const STT_FUNC: u8 = 2;
        const STT_GNU_IFUNC: u8 = 10;
        for rela in self.sections.iter().filter(|s| s.kind == SHT_RELA) {
            let (Some(relocs), Some(symtab)) =
                (self.contents(rela), self.sections.get(rela.link as usize))
            else {
                continue;
            };
            let syms = self.contents(symtab).unwrap_or_default();
            let strs = self
                .sections
                .get(symtab.link as usize)
                .and_then(|t| self.contents(t))
                .unwrap_or_default();
            let name_of = |sym: &[u8]| -> Option<String> {
                let at = usize::try_from(self.uint(sym, 0, 4)?).ok()?;
                let name = strs.get(at..)?.split(|&b| b == 0).next()?;
                (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned())
            };
            // IRELATIVE slots (an ifunc called through the PLT) name no
            // symbol: their addend is the resolver's address, the value
            // of the ifunc symbol when the table has one.
            let mut resolvers: Vec<(u64, u64)> = Vec::new();
            for r in relocs.chunks_exact(24) {
                let (Some(offset), Some(info)) = (self.uint(r, 0, 8), self.uint(r, 8, 8)) else {
                    continue;
                };
                if !wanted.contains(&offset) {
                    continue;
                }
                match info & 0xffff_ffff {
                    R_X86_64_JUMP_SLOT | R_X86_64_GLOB_DAT => {
                        let Some(name) = usize::try_from(info >> 32)
                            .ok()
                            .and_then(|i| syms.get(i.checked_mul(24)?..i * 24 + 24))
                            .and_then(name_of)
                        else {
                            continue;
                        };
                        names.insert(offset, format!("{name}@plt"));
                    }
                    R_X86_64_IRELATIVE => {
                        if let Some(addend) = self.uint(r, 16, 8) {
                            resolvers.push((offset, addend));
                        }
                    }
                    _ => {}
                }
            }
            if resolvers.is_empty() {
                continue;
            }
            // The ifunc (or, failing one, function) symbol at each
            // resolver address; objdump's `*ABS*+0x…@plt` without one.
            let addends: HashSet<u64> = resolvers.iter().map(|r| r.1).collect();
            let mut at_value: HashMap<u64, (bool, String)> = HashMap::new();
            for sym in syms.chunks_exact(24) {
                let (Some(&info), Some(value)) = (sym.get(4), self.uint(sym, 8, 8)) else {
                    continue;
                };
                let ifunc = info & 0xf == STT_GNU_IFUNC;
                if !addends.contains(&value) || !(ifunc || info & 0xf == STT_FUNC) {
                    continue;
                }
                if at_value
                    .get(&value)
                    .is_some_and(|(was_ifunc, _)| *was_ifunc || !ifunc)
                {
                    continue;
                }
                if let Some(name) = name_of(sym) {
                    at_value.insert(value, (ifunc, name));
                }
            }
            for (offset, addend) in resolvers {
                let name = match at_value.get(&addend) {
                    Some((_, name)) => format!("{name}@plt"),
                    None => format!("*ABS*+{addend:#x}@plt"),
                };
                names.insert(offset, name);
            }
        }
        let mut out: Vec<Stub> = stubs
            .into_iter()
            .filter_map(|(start, end, slot)| Some((start, end, names.get(&slot)?.clone())))
            .collect();
        out.sort();
        out
    }
}

/// Names the frames of `frames` (frame, module-relative pc) that lie in
/// one of `stubs` (sorted `(start, end, name)`).
fn plt_names(stubs: &[Stub], frames: &[(FrameId, u64)]) -> Vec<Resolved> {
    frames
        .iter()
        .filter_map(|&(frame, pc)| {
            let i = stubs.partition_point(|s| s.0 <= pc).checked_sub(1)?;
            let (_, end, name) = &stubs[i];
            (pc < *end).then(|| Resolved {
                frame,
                function: name.clone(),
                file: None,
                line: None,
            })
        })
        .collect()
}

/// The CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320) table, one
/// entry per byte value.
const CRC32_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// Continues the CRC-32 `crc` (0 to start) over `data`: the checksum
/// `.gnu_debuglink` records of its debug file (zlib's `crc32`).
fn crc32_update(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in data {
        c = CRC32_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// The CRC-32 of the whole file at `path`, read 1 MiB at a time.
fn crc32_file(path: &Path) -> Option<u32> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut buf = vec![0u8; 1 << 20];
    let mut crc = 0;
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Some(crc),
            Ok(n) => crc = crc32_update(crc, &buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// Where gdb looks for the debug file `link` named by the
/// `.gnu_debuglink` of `module`: beside it, in its `.debug/`
/// subdirectory, and under the global debug directory followed by the
/// module's directory.
fn debuglink_candidates(module: &Path, link: &str) -> Vec<PathBuf> {
    // A plain file name only: never a path that leaves those directories.
    if link.is_empty() || link.contains('/') || link == "." || link == ".." {
        return Vec::new();
    }
    let Some(dir) = module.parent().filter(|d| d.is_absolute()) else {
        return Vec::new();
    };
    let under_global = Path::new(DEBUG_DIR).join(dir.strip_prefix("/").unwrap_or(dir));
    vec![
        dir.join(link),
        dir.join(".debug").join(link),
        under_global.join(link),
    ]
}

/// Finds separate debug files through `.gnu_debuglink`, remembering what
/// it found per module and the CRC of every file it checked (a run's
/// processes share libraries).
#[derive(Default)]
struct DebugLinks {
    by_module: HashMap<String, Option<String>>,
    crcs: HashMap<PathBuf, Option<u32>>,
}

impl DebugLinks {
    /// The debug file `module`'s `.gnu_debuglink` names, in the first
    /// place gdb would look that holds a file with the recorded CRC.
    fn file_for(&mut self, module: &str) -> Option<String> {
        if let Some(found) = self.by_module.get(module) {
            return found.clone();
        }
        let found = self.find(Path::new(module));
        self.by_module.insert(module.to_string(), found.clone());
        found
    }

    fn find(&mut self, module: &Path) -> Option<String> {
        let (link, crc) = ElfSections::open(module)?.gnu_debuglink()?;
        let own = std::fs::metadata(module).ok()?;
        for candidate in debuglink_candidates(module, &link) {
            let Ok(meta) = std::fs::metadata(&candidate) else {
                continue;
            };
            // The module itself (a link naming its own file) is no debug
            // file.
            if !meta.is_file() || (meta.dev(), meta.ino()) == (own.dev(), own.ino()) {
                continue;
            }
            let actual = *self
                .crcs
                .entry(candidate.clone())
                .or_insert_with(|| crc32_file(&candidate));
            if actual == Some(crc) {
                return Some(candidate.display().to_string());
            }
        }
        None
    }
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

/// What symbolization needs to know of a process: its OS pid, and its
/// lifetime on the realtime clock (Unix epoch ns) where the database
/// tells it (start and end are monotonic; the clock snapshot taken when
/// the database was created converts them).
struct ProcessRow {
    pid: i64,
    start_unix_ns: Option<i128>,
    end_unix_ns: Option<i128>,
}

/// The process whose tables have `suffix`.
fn process_row(db: &Path, suffix: &str) -> Option<ProcessRow> {
    let conn = strobe_db::inputs::open_read_only(db).ok()?;
    let s = suffix.replace('"', "");
    let (pid, start, end) = conn
        .query_row(
            &format!("SELECT pid, start, \"end\" FROM \"rocpd_info_process{s}\""),
            [],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Option<i64>>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                ))
            },
        )
        .ok()?;
    let clock = |name: &str| -> Option<i128> {
        conn.query_row(
            &format!("SELECT value FROM \"strobe_settings{s}\" WHERE name = ?1"),
            [name],
            |r| r.get::<_, String>(0),
        )
        .ok()?
        .trim()
        .parse()
        .ok()
    };
    let offset = clock("clock.realtime_ns")
        .zip(clock("clock.monotonic_ns"))
        .map(|(real, mono)| real - mono);
    Some(ProcessRow {
        pid,
        start_unix_ns: offset.zip(start).map(|(o, t)| o + i128::from(t)),
        end_unix_ns: offset.zip(end).map(|(o, t)| o + i128::from(t)),
    })
}

/// How far a perf map's modification time may lie outside its process's
/// lifetime (clock steps, coarse timestamps).
const MAP_TIME_SLACK_NS: i128 = 2_000_000_000;

/// Whether the perf map `meta` describes can be the one of `process`: a
/// map last written before the process started belongs to an earlier
/// process with the same pid, one written after it ended to a later one.
/// Unknown times do not refuse it.
fn map_within_lifetime(meta: &std::fs::Metadata, process: &ProcessRow) -> bool {
    let Some(mtime) = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128)
    else {
        return true;
    };
    process
        .start_unix_ns
        .is_none_or(|s| mtime >= s - MAP_TIME_SLACK_NS)
        && process
            .end_unix_ns
            .is_none_or(|e| mtime <= e + MAP_TIME_SLACK_NS)
}

/// Names code in no module from perf-map entries (in the order written:
/// a later entry at the same address wins, the code was regenerated):
/// each pc gets the covering entry with the highest start. Returns the
/// names and the entries that gave them, each once. Memory grows with the
/// frames, not with the entries, so a map of any size streams through.
fn name_from_entries(
    entries: impl Iterator<Item = JitSymbol>,
    frames: &[(FrameId, u64)],
) -> (Vec<Resolved>, Vec<JitSymbol>) {
    let mut pcs: Vec<u64> = frames.iter().map(|&(_, pc)| pc).collect();
    pcs.sort_unstable();
    pcs.dedup();
    let mut best: Vec<Option<Rc<JitSymbol>>> = vec![None; pcs.len()];
    for entry in entries {
        let end = entry.start.saturating_add(entry.size);
        let first = pcs.partition_point(|&pc| pc < entry.start);
        let entry = Rc::new(entry);
        for (i, _) in pcs[first..]
            .iter()
            .enumerate()
            .take_while(|&(_, &pc)| pc < end)
        {
            let slot = &mut best[first + i];
            if slot.as_ref().is_none_or(|b| entry.start >= b.start) {
                *slot = Some(Rc::clone(&entry));
            }
        }
    }
    let resolved = frames
        .iter()
        .filter_map(|&(frame, pc)| {
            let i = pcs.binary_search(&pc).ok()?;
            Some(Resolved {
                frame,
                function: best[i].as_ref()?.name.clone(),
                file: None,
                line: None,
            })
        })
        .collect();
    let mut used: Vec<JitSymbol> = Vec::new();
    let mut seen = HashSet::new();
    for b in best.iter().flatten() {
        if seen.insert(Rc::as_ptr(b)) {
            used.push(JitSymbol::clone(b));
        }
    }
    (resolved, used)
}

/// Names code that lies in no module (a JIT's) in the process `suffix`:
/// from the perf-map entries stored in the database when it has some,
/// else from the process's perf map, `/tmp/perf-<pid>.map` (lines `START
/// SIZE NAME`, hex, as Node's `--perf-basic-prof` and Python's `-X perf`
/// write them, and perf reads), when its modification time lies within
/// the process's lifetime; the entries that named a frame are then stored
/// in `strobe_jit_symbol`, so that a later symbolization (the map is often
/// deleted, or the database copied elsewhere) names them again.
fn jit_names(db: &Path, suffix: &str, frames: &[(FrameId, u64)]) -> Result<Vec<Resolved>> {
    let stored = jit_symbols(db, suffix)?;
    if !stored.is_empty() {
        return Ok(name_from_entries(stored.into_iter(), frames).0);
    }
    let Some(process) = process_row(db, suffix) else {
        return Ok(Vec::new());
    };
    let map = format!("/tmp/perf-{}.map", process.pid);
    let Ok(file) = std::fs::File::open(&map) else {
        return Ok(Vec::new());
    };
    if !file
        .metadata()
        .is_ok_and(|m| map_within_lifetime(&m, &process))
    {
        return Ok(Vec::new());
    }
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    let entries = std::iter::from_fn(|| loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {
                if let Some(e) = JitSymbol::from_perf_map_line(&String::from_utf8_lossy(&line)) {
                    return Some(e);
                }
            }
        }
    });
    let (resolved, used) = name_from_entries(entries, frames);
    if !used.is_empty() {
        store_jit_symbols(db, suffix, &used)?;
    }
    Ok(resolved)
}

/// Deletes the perf map (`/tmp/perf-<pid>.map`) of the process of the
/// database at `db` when it was written during the process's life: for
/// maps strobe caused (`sampling_python_perf`), once symbolization copied
/// the entries it needed into the database. Returns whether one was
/// deleted.
pub fn remove_perf_map(db: &Path) -> bool {
    let Some(process) = process_row(db, "") else {
        return false;
    };
    let map = format!("/tmp/perf-{}.map", process.pid);
    std::fs::metadata(&map).is_ok_and(|m| map_within_lifetime(&m, &process))
        && std::fs::remove_file(&map).is_ok()
}

/// What blazesym found for one address: the name, the address of the
/// symbol it lies in, and the source location when asked for.
struct Found {
    name: String,
    symbol: u64,
    file: Option<String>,
    line: Option<u32>,
}

/// Looks `addrs` (virtual offsets) up in the ELF file `file` with one
/// symbolizer (its caches, and DWARF, go with it); `None` when the file
/// cannot be read.
fn look_up(file: &str, addrs: &[u64], lines: bool, demangle: bool) -> Option<Vec<Option<Found>>> {
    let symbolizer = Symbolizer::builder()
        .enable_code_info(lines)
        .enable_inlined_fns(false)
        .enable_demangling(demangle)
        .build();
    let mut elf = Elf::new(file);
    elf.debug_syms = lines;
    let symbols = symbolizer
        .symbolize(&Source::Elf(elf), Input::VirtOffset(addrs))
        .ok()?;
    Some(
        symbols
            .into_iter()
            .map(|sym| {
                let Symbolized::Sym(sym) = sym else {
                    return None;
                };
                let (file, line) = match &sym.code_info {
                    Some(ci) => (Some(ci.to_path().display().to_string()), ci.line),
                    None => (None, None),
                };
                Some(Found {
                    name: sym.name.to_string(),
                    symbol: sym.addr,
                    file,
                    line,
                })
            })
            .collect(),
    )
}

/// Whether `name` is mangled the way blazesym demangles: Itanium C++ and
/// Rust's legacy scheme (`_Z…`), Rust's v0 (`_R…`).
fn is_mangled(name: &str) -> bool {
    name.starts_with("_Z") || name.starts_with("_R")
}

/// Names `frames` (frame, module-relative pc) from the ELF file `file`;
/// `None` when the file cannot be read.
///
/// Names are looked up as written, then only the mangled ones demangled
/// (a second, names-only lookup of those addresses, kept where it finds
/// the same symbol): blazesym demangles every name it is given, and its
/// C++ demangler reads short C names as types (`w` became `wchar_t`, `i`
/// `int`).
fn symbolize_in(file: &str, frames: &[(FrameId, u64)], lines: bool) -> Option<Vec<Resolved>> {
    let addrs: Vec<u64> = frames.iter().map(|&(_, pc)| pc).collect();
    let found = look_up(file, &addrs, lines, false)?;
    let mangled: Vec<usize> = (0..found.len())
        .filter(|&i| found[i].as_ref().is_some_and(|f| is_mangled(&f.name)))
        .collect();
    let mut demangled: HashMap<usize, String> = HashMap::new();
    if !mangled.is_empty() {
        let again: Vec<u64> = mangled.iter().map(|&i| addrs[i]).collect();
        if let Some(names) = look_up(file, &again, false, true) {
            for (&i, d) in mangled.iter().zip(names) {
                if let (Some(d), Some(f)) = (d, &found[i]) {
                    if d.symbol == f.symbol {
                        demangled.insert(i, d.name);
                    }
                }
            }
        }
    }
    Some(
        frames
            .iter()
            .zip(found)
            .enumerate()
            .filter_map(|(i, ((frame, _), f))| {
                let f = f?;
                Some(Resolved {
                    frame: *frame,
                    function: demangled.remove(&i).unwrap_or(f.name),
                    file: f.file,
                    line: f.line,
                })
            })
            .collect(),
    )
}

/// Names every unnamed frame of the database at `path`.
pub fn symbolize_database(path: &Path, lines: bool) -> Result<SymbolStats> {
    let frames = unsymbolized_frames(path)?;
    let mut stats = SymbolStats {
        frames: frames.len(),
        ..Default::default()
    };
    let mut groups: BTreeMap<ModuleKey, Vec<(FrameId, u64)>> = BTreeMap::new();
    // Code in no module (a JIT's, or a module not known when the frame
    // was recorded), by process: absolute pcs.
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
    // A frame recorded in no module may still lie in a module the process
    // announced (the kernel sampler records `[vdso]` frames so): placed in
    // the one module whose range covers it, symbolized as its frames.
    for (suffix, frames) in outside.iter_mut() {
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
            groups
                .entry((suffix.clone(), module.clone(), build_id.clone()))
                .or_default()
                .push((frame, pc - load_address));
            false
        });
    }
    let mut resolved_by_suffix: BTreeMap<String, Vec<Resolved>> = BTreeMap::new();
    for (suffix, frames) in outside {
        let named = jit_names(path, &suffix, &frames)?;
        resolved_by_suffix.entry(suffix).or_default().extend(named);
    }
    let mut links = DebugLinks::default();
    // The PLT stubs of each module, read once.
    let mut plt: HashMap<String, Vec<Stub>> = HashMap::new();
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
        // (a stripped library's internal functions are only there): the
        // one its build id names, else the one its `.gnu_debuglink` names.
        let mut left = frames;
        let copied_vdso = (module == "[vdso]").then(|| debug_file.clone()).flatten();
        let mut name_from = |file: &str, left: &mut Vec<(FrameId, u64)>| {
            if left.is_empty() {
                return;
            }
            match symbolize_in(file, left, lines) {
                Some(found) => {
                    let named: HashSet<FrameId> = found.iter().map(|r| r.frame).collect();
                    left.retain(|(frame, _)| !named.contains(frame));
                    out.extend(found);
                }
                None if file == module => stats.missing_modules += 1,
                None => {}
            }
        };
        if readable {
            name_from(&module, &mut left);
        }
        match &debug_file {
            Some(file) => name_from(file, &mut left),
            None if readable && !left.is_empty() => {
                if let Some(file) = links.file_for(&module) {
                    name_from(&file, &mut left);
                }
            }
            None => {}
        }
        // What no symbol table names: the PLT stubs, as perf names them.
        if readable && !left.is_empty() {
            let stubs = plt.entry(module.clone()).or_insert_with(|| {
                ElfSections::open(Path::new(&module))
                    .map(|elf| elf.plt_stubs())
                    .unwrap_or_default()
            });
            out.extend(plt_names(stubs, &left));
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use strobe_db::{ProcessInfo, SampleMeta, StackFrame, ThreadInfo, Writer, WriterOptions};

    #[test]
    fn crc32_is_zlibs() {
        assert_eq!(crc32_update(0, b"123456789"), 0xCBF4_3926);
        assert_eq!(
            crc32_update(crc32_update(0, b"1234"), b"56789"),
            0xCBF4_3926
        );
        assert_eq!(crc32_update(0, b""), 0);
    }

    #[test]
    fn debuglink_candidates_are_gdbs() {
        assert_eq!(
            debuglink_candidates(
                Path::new("/usr/lib/x86_64-linux-gnu/libfoo.so.1"),
                "libfoo.so.debug"
            ),
            [
                "/usr/lib/x86_64-linux-gnu/libfoo.so.debug",
                "/usr/lib/x86_64-linux-gnu/.debug/libfoo.so.debug",
                "/usr/lib/debug/usr/lib/x86_64-linux-gnu/libfoo.so.debug",
            ]
            .map(PathBuf::from)
        );
        assert!(debuglink_candidates(Path::new("/bin/x"), "../etc/passwd").is_empty());
        assert!(debuglink_candidates(Path::new("/bin/x"), "").is_empty());
        assert!(debuglink_candidates(Path::new("relative"), "x.debug").is_empty());
    }

    fn run(cmd: &str, args: &[&str]) {
        let status = Command::new(cmd).args(args).status().expect(cmd);
        assert!(status.success(), "{cmd} {args:?}");
    }

    #[test]
    fn gnu_debuglink_section_is_read_in_both_classes() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("t.c");
        std::fs::write(&src, "int f(int x) { return x * 3; }\n").unwrap();
        let p = |n: &str| dir.path().join(n).display().to_string();
        // 64-bit always; 32-bit where the compiler can make it (objects
        // need no 32-bit libc).
        let mut classes = vec![("t64.o", "-m64")];
        if Command::new("cc")
            .args(["-m32", "-c", "-o", &p("t32.o"), &p("t.c")])
            .status()
            .is_ok_and(|s| s.success())
        {
            classes.push(("t32.o", "-m32"));
        }
        for (obj, flag) in classes {
            run("cc", &[flag, "-g", "-c", "-o", &p(obj), &p("t.c")]);
            let debug = p(&format!("{obj}.dbg"));
            run("objcopy", &["--only-keep-debug", &p(obj), &debug]);
            run(
                "objcopy",
                &[&format!("--add-gnu-debuglink={debug}"), &p(obj)],
            );
            let (name, crc) = ElfSections::open(Path::new(&p(obj)))
                .unwrap()
                .gnu_debuglink()
                .unwrap();
            assert_eq!(name, format!("{obj}.dbg"), "{flag}");
            assert_eq!(Some(crc), crc32_file(Path::new(&debug)), "{flag}");
            assert_eq!(
                ElfSections::open(Path::new(&debug))
                    .unwrap()
                    .gnu_debuglink(),
                None
            );
        }
        assert!(ElfSections::open(&src).is_none());
    }

    #[test]
    fn plt_stubs_are_named_as_objdump_and_perf_name_them() {
        if !cfg!(target_arch = "x86_64") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n).display().to_string();
        std::fs::write(
            p("plt.c"),
            "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\
             int (*keep)(const char *) = puts;\n\
             static int impl(int x) { return x + 5; }\n\
             static int (*resolve(void))(int) { return impl; }\n\
             int f(int) __attribute__((ifunc(\"resolve\")));\n\
             int main(int c, char **v) { puts(v[0]); printf(\"%zu\\n\", strlen(v[0]));\
             keep(\"x\"); return abs(c) + atoi(\"1\") + f(c); }\n",
        )
        .unwrap();
        // Lazy `.plt`; `.plt.sec` (IBT layout); not position-independent;
        // bound at start (`.plt.got` entries for address-taken functions
        // in every PIE variant); a shared library (the ifunc through a
        // `JUMP_SLOT`, elsewhere `IRELATIVE`); the ifunc exported.
        for flags in [
            &[][..],
            &["-Wl,-z,ibtplt"],
            &["-fcf-protection=full", "-Wl,-z,ibtplt"],
            &["-no-pie"],
            &["-Wl,-z,now"],
            &["-shared", "-fPIC"],
            &["-rdynamic"],
        ] {
            let out = p("plt");
            let mut args = vec!["-O2", "-o", &out];
            args.extend_from_slice(flags);
            let plt_c = p("plt.c");
            args.push(&plt_c);
            run("cc", &args);
            let dump = Command::new("objdump")
                .args(["-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got", &out])
                .output()
                .unwrap();
            let mut expected: Vec<(u64, String)> = String::from_utf8_lossy(&dump.stdout)
                .lines()
                .filter_map(|l| {
                    let (addr, label) = l.split_once(" <")?;
                    let name = label.strip_suffix(">:")?;
                    name.ends_with("@plt")
                        .then(|| (u64::from_str_radix(addr, 16).ok(), name.to_string()))
                        .and_then(|(a, n)| Some((a?, n)))
                })
                .collect();
            // objdump names an `IRELATIVE` stub `*ABS*+0xRESOLVER@plt`;
            // perf, and strobe, by the ifunc symbol at the resolver where
            // the dynamic symbol table has one.
            let ifuncs = Command::new("nm").args(["-D", &out]).output().unwrap();
            let ifuncs = String::from_utf8_lossy(&ifuncs.stdout).into_owned();
            for (_, name) in expected.iter_mut() {
                let Some(resolver) = name
                    .strip_prefix("*ABS*+0x")
                    .and_then(|a| u64::from_str_radix(a.strip_suffix("@plt")?, 16).ok())
                else {
                    continue;
                };
                if let Some(ifunc) = ifuncs.lines().find_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    (f.len() == 3 && f[1] == "i" && u64::from_str_radix(f[0], 16).ok()? == resolver)
                        .then(|| f[2].to_string())
                }) {
                    *name = format!("{ifunc}@plt");
                }
            }
            expected.sort();
            assert!(expected.len() >= 5, "{flags:?}: {expected:?}");
            assert!(
                expected
                    .iter()
                    .any(|(_, n)| n.starts_with("f@plt") || n.starts_with("*ABS*")),
                "{flags:?}: no ifunc stub: {expected:?}"
            );
            if flags == ["-rdynamic"] {
                assert!(expected.iter().any(|(_, n)| n == "f@plt"), "{expected:?}");
            }
            let stubs = ElfSections::open(Path::new(&out)).unwrap().plt_stubs();
            let found: Vec<(u64, String)> = stubs.iter().map(|s| (s.0, s.2.clone())).collect();
            assert_eq!(found, expected, "{flags:?}");
            // A pc inside a stub gets its name; one past the last does not.
            let last = stubs.last().unwrap();
            let frames = [(FrameId(1), stubs[0].0 + 3), (FrameId(2), last.1)];
            let named = plt_names(&stubs, &frames);
            assert_eq!(named.len(), 1, "{flags:?}");
            assert_eq!(named[0].function, stubs[0].2);
        }
    }

    #[test]
    fn short_c_names_stay_as_written_and_mangled_names_are_demangled() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n).display().to_string();
        // C functions whose names are also C++ type manglings, and two
        // mangled names (C++, Rust legacy) given with asm labels.
        std::fs::write(
            p("names.c"),
            "#define F __attribute__((noinline, used))\n\
             F void w(void) { __asm__ volatile(\"\"); }\n\
             F int i(int x) { return x + 1; }\n\
             F void Pc(void) { __asm__ volatile(\"\"); }\n\
             F int cxx(int) __asm__(\"_Z3fooi\");\n\
             F int cxx(int x) { return x * 2; }\n\
             F int rust(void) __asm__(\"_ZN4core3fmt5write17h0123456789abcdefE\");\n\
             F int rust(void) { return 3; }\n\
             int main(void) { w(); Pc(); return i(cxx(rust())); }\n",
        )
        .unwrap();
        run("cc", &["-O1", "-o", &p("names"), &p("names.c")]);
        let nm = Command::new("nm").arg(p("names")).output().unwrap();
        let addr = |name: &str| -> u64 {
            String::from_utf8_lossy(&nm.stdout)
                .lines()
                .find_map(|l| {
                    let mut f = l.split_whitespace();
                    let a = f.next()?;
                    (f.nth(1)? == name).then(|| u64::from_str_radix(a, 16).ok())?
                })
                .unwrap_or_else(|| panic!("{name} not in the symbol table"))
        };
        let cases = [
            ("w", "w"),
            ("i", "i"),
            ("Pc", "Pc"),
            ("_Z3fooi", "foo(int)"),
            ("_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write"),
        ];
        let frames: Vec<(FrameId, u64)> = cases
            .iter()
            .enumerate()
            .map(|(n, (sym, _))| (FrameId(n as i64 + 1), addr(sym)))
            .collect();
        for lines in [false, true] {
            let named = symbolize_in(&p("names"), &frames, lines).unwrap();
            let got: Vec<&str> = named.iter().map(|r| r.function.as_str()).collect();
            let want: Vec<&str> = cases.iter().map(|c| c.1).collect();
            assert_eq!(got, want, "lines: {lines}");
        }
    }

    #[test]
    fn frames_recorded_in_no_module_are_named_from_the_one_module_covering_them() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n).display().to_string();
        std::fs::write(
            p("m.c"),
            "__attribute__((noinline, used)) int in_module(int x) { return x * 7; }\n\
             int main(void) { return in_module(1); }\n",
        )
        .unwrap();
        run("cc", &["-O1", "-o", &p("m"), &p("m.c")]);
        let nm = Command::new("nm").arg(p("m")).output().unwrap();
        let at = String::from_utf8_lossy(&nm.stdout)
            .lines()
            .find_map(|l| {
                let (a, rest) = l.split_once(' ')?;
                rest.ends_with(" in_module")
                    .then(|| u64::from_str_radix(a, 16).unwrap())
            })
            .unwrap();
        let db = dir.path().join("p.db");
        let process = ProcessInfo {
            pid: fake_pid(3),
            ppid: 1,
            init_ns: 1,
            start_ns: 1,
            start_unix_ns: 1,
            command: "m".into(),
            environment: Vec::new(),
        };
        let mut w = Writer::create(&db, &process, WriterOptions::default()).unwrap();
        let module = |w: &mut Writer, path: &str, load_address: u64| {
            w.add_module(&strobe_db::ModuleRow {
                path,
                build_id: None,
                load_address,
                size: 0x10000,
                file_offset: 0,
                load_ns: None,
            })
            .unwrap();
        };
        let (base, other) = (0x5555_0000_0000u64, 0x7f00_0000_0000u64);
        module(&mut w, &p("m"), base);
        // The same module recorded twice (the kernel sampler's first
        // mapping, then the whole): still one module.
        module(&mut w, &p("m"), base);
        // Two different modules over one range: ambiguous.
        module(&mut w, &p("m"), other);
        module(&mut w, "/nonexistent/other.so", other);
        let t = w
            .add_thread(&ThreadInfo {
                tid: 1,
                name: None,
                start_ns: None,
            })
            .unwrap();
        let track = w.add_track(Some(t), "cpu samples").unwrap();
        for pc in [base + at, other + at, 0x1000] {
            let frames = [StackFrame {
                module: None,
                rel_pc: pc,
            }];
            w.append_sample(track, SampleMeta::cpu(2, 1), &frames)
                .unwrap();
        }
        w.finish(3).unwrap();
        symbolize_database(&db, false).unwrap();
        let mut want = vec![
            (0x1000, None),
            (base + at, Some("in_module".to_string())),
            (other + at, None),
        ];
        want.sort();
        assert_eq!(frame_names(&db), want);
    }

    /// A database of process `pid` whose samples are in no module at
    /// `pcs` (absolute), its monotonic start and end at `start_ns` and
    /// `end_ns`.
    fn jit_profile(path: &Path, pid: u32, pcs: &[u64], start_ns: u64, end_ns: u64) {
        let process = ProcessInfo {
            pid,
            ppid: 1,
            init_ns: start_ns,
            start_ns,
            start_unix_ns: 1,
            command: "jit".into(),
            environment: Vec::new(),
        };
        let mut w = Writer::create(path, &process, WriterOptions::default()).unwrap();
        let t = w
            .add_thread(&ThreadInfo {
                tid: pid,
                name: None,
                start_ns: Some(start_ns),
            })
            .unwrap();
        let track = w.add_track(Some(t), "cpu samples").unwrap();
        for (i, &pc) in pcs.iter().enumerate() {
            let frames = [StackFrame {
                module: None,
                rel_pc: pc,
            }];
            w.append_sample(track, SampleMeta::cpu(start_ns + i as u64, 1), &frames)
                .unwrap();
        }
        w.finish(end_ns).unwrap();
    }

    fn frame_names(path: &Path) -> Vec<(u64, Option<String>)> {
        let conn = rusqlite_conn(path);
        let mut st = conn
            .prepare("SELECT rel_pc, function FROM strobe_frame ORDER BY rel_pc")
            .unwrap();
        st.query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    fn rusqlite_conn(path: &Path) -> strobe_db::rusqlite::Connection {
        strobe_db::rusqlite::Connection::open(path).unwrap()
    }

    /// A pid no process can have (above the kernel's 2^22 limit), so that
    /// the perf map is this test's own.
    fn fake_pid(n: u32) -> u32 {
        4_000_000 + (std::process::id() % 100_000) * 4 + n
    }

    #[test]
    fn jit_frames_are_named_again_after_the_perf_map_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("jit.db");
        let pid = fake_pid(0) + 4_000_000;
        let map = format!("/tmp/perf-{pid}.map");
        let now = strobe_core::clock::now_ns();
        // Two functions, one regenerated in place (the later line wins),
        // an entry covering no frame, and a pc no entry covers.
        std::fs::write(
            &map,
            "7f0000001000 40 old_code\n\
             7f0000001000 40 jitted_loop\n\
             0x7f0000002000 0x10 other fn (with spaces)\n\
             7f0000009000 10 unsampled\n\
             not a line\n",
        )
        .unwrap();
        jit_profile(
            &db,
            pid,
            &[0x7f00_0000_1008, 0x7f00_0000_2004, 0x7f00_0000_3000],
            now - 1_000_000_000,
            now + 1_000_000_000,
        );
        symbolize_database(&db, false).unwrap();
        std::fs::remove_file(&map).unwrap();
        let expected = vec![
            (0x7f00_0000_1008, Some("jitted_loop".to_string())),
            (0x7f00_0000_2004, Some("other fn (with spaces)".to_string())),
            (0x7f00_0000_3000, None),
        ];
        assert_eq!(frame_names(&db), expected);
        // Only the entries that named a frame are kept.
        let conn = rusqlite_conn(&db);
        let mut st = conn
            .prepare("SELECT start, size, name FROM strobe_jit_symbol ORDER BY start")
            .unwrap();
        let kept: Vec<(i64, i64, String)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            kept,
            [
                (0x7f00_0000_1000, 0x40, "jitted_loop".to_string()),
                (0x7f00_0000_2000, 0x10, "other fn (with spaces)".to_string()),
            ]
        );
        drop(st);
        // Names cleared, map gone: symbolizing again names them from the
        // database; so does symbolizing a copy.
        let table: String = conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'strobe\\_frame\\_%' ESCAPE '\\'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        conn.execute(&format!("UPDATE \"{table}\" SET function = NULL"), [])
            .unwrap();
        drop(conn);
        let copy = dir.path().join("copy.db");
        std::fs::copy(&db, &copy).unwrap();
        for file in [&db, &copy] {
            assert_eq!(
                frame_names(file).iter().filter(|f| f.1.is_some()).count(),
                0
            );
            let stats = symbolize_database(file, false).unwrap();
            assert_eq!((stats.frames, stats.named), (3, 2));
            assert_eq!(frame_names(file), expected);
        }
        // A merge keeps the table.
        let merged = dir.path().join("merged.db");
        strobe_db::merge(std::slice::from_ref(&db), &merged, &mut |_| {}).unwrap();
        let n: i64 = rusqlite_conn(&merged)
            .query_row("SELECT count(*) FROM strobe_jit_symbol", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2);
    }

    #[test]
    fn a_perf_map_written_outside_the_processs_lifetime_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let now = strobe_core::clock::now_ns();
        let hour = 3_600_000_000_000;
        let an_hour_on = std::time::SystemTime::now() + std::time::Duration::from_secs(3_600);
        // A process that starts an hour from now (the map is an earlier
        // process's), and one that ends now with a map written an hour
        // later (a later process's). Only additions to the monotonic
        // clock: a machine booted a minute ago has no hour to go back.
        for (n, start, end, map_time) in [
            (1, now + hour, now + 2 * hour, None),
            (2, now, now + 1_000_000, Some(an_hour_on)),
        ] {
            let pid = fake_pid(n) + 4_000_000;
            let db = dir.path().join(format!("{n}.db"));
            let map = format!("/tmp/perf-{pid}.map");
            std::fs::write(&map, "1000 100 stale\n").unwrap();
            if let Some(t) = map_time {
                let file = std::fs::File::options().write(true).open(&map).unwrap();
                file.set_modified(t).unwrap();
            }
            jit_profile(&db, pid, &[0x1010], start, end);
            let stats = symbolize_database(&db, false);
            std::fs::remove_file(&map).unwrap();
            assert_eq!(stats.unwrap().named, 0);
            assert_eq!(frame_names(&db), [(0x1010, None)]);
        }
    }
}
