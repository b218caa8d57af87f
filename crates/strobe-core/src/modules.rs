//! The modules (executable and shared libraries) mapped into this process,
//! read from the dynamic loader with `dl_iterate_phdr`.
//!
//! Owns discovery: each module's path, load bias, executable address range,
//! GNU build id, and the in-memory location of its `.eh_frame_hdr` and
//! `.eh_frame` unwind tables. Opens no files: everything comes from memory
//! the loader already mapped. Allocates, so it never runs in a signal
//! handler; callers (the sampler's unwinder snapshot, the runtime's module
//! announcements) work from its result. [`find_build_id`] parses note
//! bytes from anywhere: the collector also reads it from files.

use std::ffi::CStr;
use std::ops::Range;

/// One loaded module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleInfo {
    /// File path as the loader knows it (the main executable's is resolved
    /// from `/proc/self/exe`; the vDSO is `[vdso]`).
    pub path: String,
    /// Load bias: add to an address in the file to get the address in memory.
    pub bias: u64,
    /// Lowest and highest address of the module's loaded segments.
    pub mapped: Range<u64>,
    /// Address range of the executable segments.
    pub text: Range<u64>,
    /// GNU build id (empty if the module has none).
    pub build_id: Vec<u8>,
    /// In-memory `.eh_frame_hdr` (address range), if present.
    pub eh_frame_hdr: Option<Range<u64>>,
    /// In-memory `.eh_frame` (address range), derived from the header's
    /// `eh_frame_ptr` and the end of the segment that holds it.
    pub eh_frame: Option<Range<u64>>,
}

impl ModuleInfo {
    /// The build id as lower-case hex.
    pub fn build_id_hex(&self) -> String {
        self.build_id.iter().map(|b| format!("{b:02x}")).collect()
    }
}

struct Collector {
    modules: Vec<ModuleInfo>,
    exe: String,
}

/// This process's executable (`/proc/self/exe`), read once per image (a
/// forked child shares it; `exec` starts a new image).
pub fn own_executable() -> &'static str {
    static EXE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    EXE.get_or_init(|| {
        std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    })
}

/// Every module currently loaded, in the loader's order (main executable
/// first). Modules without executable segments are skipped.
pub fn loaded_modules() -> Vec<ModuleInfo> {
    let mut collector = Collector {
        modules: Vec::new(),
        exe: own_executable().to_string(),
    };
    // SAFETY: the callback only reads the loader's structures during the
    // call and writes to the collector we pass by pointer.
    unsafe {
        libc::dl_iterate_phdr(
            Some(visit),
            &mut collector as *mut Collector as *mut libc::c_void,
        );
    }
    collector.modules
}

unsafe extern "C" fn visit(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // Never unwind through the loader.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: dl_iterate_phdr passes a valid info and our collector.
        let (info, collector) = unsafe { (&*info, &mut *(data as *mut Collector)) };
        let first = collector.modules.is_empty();
        // SAFETY: as above; the program headers live as long as the module.
        let module = unsafe { describe(info, &collector.exe, first) };
        collector.modules.extend(module);
    }));
    0
}

/// Reads one module's description from its program headers.
///
/// # Safety
/// `info` must come from `dl_iterate_phdr` and be used during its callback.
unsafe fn describe(info: &libc::dl_phdr_info, exe: &str, first: bool) -> Option<ModuleInfo> {
    let bias = info.dlpi_addr;
    // SAFETY: the loader guarantees dlpi_phnum headers at dlpi_phdr.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: a non-null dlpi_name is a NUL-terminated string.
        unsafe { CStr::from_ptr(info.dlpi_name) }
            .to_string_lossy()
            .into_owned()
    };
    let path = match (name.is_empty(), first) {
        (true, true) => exe.to_string(),
        (true, false) => return None,
        (false, _) if name.starts_with("linux-vdso") || name.starts_with("linux-gate") => {
            "[vdso]".into()
        }
        (false, _) => name,
    };
    let mut mapped: Option<Range<u64>> = None;
    let mut text: Option<Range<u64>> = None;
    let mut build_id = Vec::new();
    let mut eh_frame_hdr = None;
    for ph in phdrs {
        let start = bias.wrapping_add(ph.p_vaddr);
        let range = start..start + ph.p_memsz;
        match ph.p_type {
            libc::PT_LOAD => {
                mapped = Some(match mapped {
                    Some(m) => m.start.min(range.start)..m.end.max(range.end),
                    None => range.clone(),
                });
                if ph.p_flags & libc::PF_X != 0 {
                    text = Some(match text {
                        Some(t) => t.start.min(range.start)..t.end.max(range.end),
                        None => range,
                    });
                }
            }
            libc::PT_NOTE if build_id.is_empty() => {
                // SAFETY: a PT_NOTE segment is mapped for p_memsz bytes.
                let notes =
                    unsafe { std::slice::from_raw_parts(start as *const u8, ph.p_memsz as usize) };
                if let Some(id) = find_build_id(notes) {
                    build_id = id.to_vec();
                }
            }
            libc::PT_GNU_EH_FRAME => eh_frame_hdr = Some(range),
            _ => {}
        }
    }
    let text = text?;
    let mapped = mapped?;
    let eh_frame = eh_frame_hdr.as_ref().and_then(|hdr| {
        // SAFETY: the header segment is mapped for its length.
        let bytes = unsafe {
            std::slice::from_raw_parts(hdr.start as *const u8, (hdr.end - hdr.start) as usize)
        };
        let start = eh_frame_ptr(bytes, hdr.start)?;
        // The .eh_frame section runs to the end of the PT_LOAD holding it.
        let end = phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_LOAD)
            .map(|p| bias.wrapping_add(p.p_vaddr)..bias.wrapping_add(p.p_vaddr) + p.p_memsz)
            .find(|r| r.contains(&start))?
            .end;
        Some(start..end)
    });
    Some(ModuleInfo {
        path,
        bias,
        mapped,
        text,
        build_id,
        eh_frame_hdr,
        eh_frame,
    })
}

/// Finds the NT_GNU_BUILD_ID note in a note segment.
pub fn find_build_id(mut notes: &[u8]) -> Option<&[u8]> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let align4 = |n: usize| (n + 3) & !3;
    while notes.len() >= 12 {
        let word = |i: usize| u32::from_ne_bytes(notes[i..i + 4].try_into().unwrap());
        let (namesz, descsz, kind) = (word(0) as usize, word(4) as usize, word(8));
        let name_end = 12 + align4(namesz);
        let desc_end = name_end + align4(descsz);
        if desc_end > notes.len() {
            return None;
        }
        if kind == NT_GNU_BUILD_ID && namesz == 4 && &notes[12..16] == b"GNU\0" {
            return Some(&notes[name_end..name_end + descsz]);
        }
        notes = &notes[desc_end..];
    }
    None
}

/// The loader's counts of modules ever loaded and unloaded: when they
/// change, the module list changed.
pub fn load_counters() -> (u64, u64) {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        let has_counters = size >= std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs) + 8;
        if has_counters {
            // SAFETY: the loader passes a valid info of `size` bytes and our
            // out-pointer.
            unsafe { *(data as *mut (u64, u64)) = ((*info).dlpi_adds, (*info).dlpi_subs) };
        }
        1 // stop after the first module: the counters are global
    }
    let mut counters = (0u64, 0u64);
    // SAFETY: the callback writes only to `counters`.
    unsafe {
        libc::dl_iterate_phdr(
            Some(first),
            &mut counters as *mut (u64, u64) as *mut libc::c_void,
        )
    };
    counters
}

/// Decodes `eh_frame_ptr` from an `.eh_frame_hdr` at address `hdr_addr`.
fn eh_frame_ptr(hdr: &[u8], hdr_addr: u64) -> Option<u64> {
    const DW_EH_PE_PCREL: u8 = 0x10;
    const DW_EH_PE_DATAREL: u8 = 0x30;
    if hdr.len() < 8 || hdr[0] != 1 {
        return None;
    }
    let encoding = hdr[1];
    let field = hdr_addr + 4;
    let (value, _) = read_encoded(&hdr[4..], encoding & 0x0f)?;
    let base = match encoding & 0x70 {
        0 => 0,
        DW_EH_PE_PCREL => field,
        DW_EH_PE_DATAREL => hdr_addr,
        _ => return None,
    };
    Some(base.wrapping_add(value as u64))
}

/// Reads a DWARF pointer-encoded value (format nibble only); returns the
/// value sign-extended to i64 and its size.
fn read_encoded(bytes: &[u8], format: u8) -> Option<(i64, usize)> {
    let take = |n: usize| bytes.get(..n);
    Some(match format {
        0x03 => (u32::from_le_bytes(take(4)?.try_into().ok()?) as i64, 4),
        0x0b => (i32::from_le_bytes(take(4)?.try_into().ok()?) as i64, 4),
        0x04 | 0x0c | 0x00 => (i64::from_le_bytes(take(8)?.try_into().ok()?), 8),
        0x02 => (u16::from_le_bytes(take(2)?.try_into().ok()?) as i64, 2),
        0x0a => (i16::from_le_bytes(take(2)?.try_into().ok()?) as i64, 2),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_this_test_binary_and_libc_with_unwind_tables() {
        let modules = loaded_modules();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let main = &modules[0];
        assert_eq!(main.path, exe.to_string_lossy());
        let here = finds_this_test_binary_and_libc_with_unwind_tables as fn() as usize as u64;
        assert!(
            main.text.contains(&here),
            "{main:?} does not hold {here:#x}"
        );
        assert!(main.eh_frame_hdr.is_some() && main.eh_frame.is_some());
        let libc = modules
            .iter()
            .find(|m| m.path.contains("libc.so"))
            .expect("libc is loaded");
        assert_eq!(libc.build_id.len(), 20, "glibc has a SHA-1 build id");
        let eh = libc.eh_frame.as_ref().unwrap();
        assert!(eh.start > libc.mapped.start && eh.end <= libc.mapped.end);
        let getpid = libc::getpid as unsafe extern "C" fn() -> libc::pid_t as usize as u64;
        assert!(modules.iter().any(|m| m.text.contains(&getpid)));
    }

    #[test]
    fn build_id_matches_the_file_on_disk() {
        // `readelf -n`-style check: the id is the 20 bytes after "GNU\0" in
        // the file's .note.gnu.build-id; compare with the in-memory one.
        let modules = loaded_modules();
        let libc = modules.iter().find(|m| m.path.contains("libc.so")).unwrap();
        let file = std::fs::read(&libc.path).unwrap();
        let hex = libc.build_id_hex();
        let needle = &libc.build_id[..];
        assert!(
            file.windows(needle.len()).any(|w| w == needle),
            "{hex} not in {}",
            libc.path
        );
    }
}
