//! Unwinding kernel samples in the collector: framehop over the modules of
//! one process, read from their files, walking the copy of the user stack
//! that came with each sample.
//!
//! Owns the process's module list (from `/proc/PID/maps` when sampling
//! starts and from the ring's mapping records afterwards), reading each
//! module's unwind tables from its ELF file, and the walk itself. Never
//! reads the process's memory: only the copied stack.

use crate::profile::Module;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Unwinder};
use std::ops::Range;

/// The sections of an ELF file framehop needs, by virtual address.
struct Sections {
    text: Option<(Range<u64>, Vec<u8>)>,
    eh_frame: Option<(Range<u64>, Vec<u8>)>,
    eh_frame_hdr: Option<(Range<u64>, Vec<u8>)>,
}

/// Reads `.text`, `.eh_frame` and `.eh_frame_hdr` of the ELF file at
/// `path` (64-bit little-endian).
fn read_sections(path: &str) -> Option<Sections> {
    let file = std::fs::read(path).ok()?;
    if file.len() < 64 || &file[..4] != b"\x7fELF" || file[4] != 2 || file[5] != 1 {
        return None;
    }
    let u16_at = |i: usize| Some(u16::from_le_bytes(file.get(i..i + 2)?.try_into().ok()?));
    let u32_at = |i: usize| Some(u32::from_le_bytes(file.get(i..i + 4)?.try_into().ok()?));
    let u64_at = |i: usize| Some(u64::from_le_bytes(file.get(i..i + 8)?.try_into().ok()?));
    let shoff = u64_at(40)? as usize;
    let (shentsize, shnum, shstrndx) = (u16_at(58)? as usize, u16_at(60)? as usize, u16_at(62)?);
    let header = |i: usize| shoff + i * shentsize;
    let names_at = u64_at(header(shstrndx as usize) + 24)? as usize;
    let mut sections = Sections {
        text: None,
        eh_frame: None,
        eh_frame_hdr: None,
    };
    const SHT_NOBITS: u32 = 8;
    for i in 0..shnum {
        let h = header(i);
        let name_off = u32_at(h)? as usize;
        let name_bytes = file.get(names_at + name_off..)?;
        let name = &name_bytes[..name_bytes.iter().position(|&b| b == 0)?];
        let (kind, addr, offset, size) = (
            u32_at(h + 4)?,
            u64_at(h + 16)?,
            u64_at(h + 24)?,
            u64_at(h + 32)?,
        );
        if kind == SHT_NOBITS {
            continue;
        }
        let data = || {
            Some((
                addr..addr + size,
                file.get(offset as usize..(offset + size) as usize)?
                    .to_vec(),
            ))
        };
        match name {
            b".text" => sections.text = data(),
            b".eh_frame" => sections.eh_frame = data(),
            b".eh_frame_hdr" => sections.eh_frame_hdr = data(),
            _ => {}
        }
    }
    Some(sections)
}

/// The modules of one process and an unwinder over them.
pub struct ProcessUnwinder {
    unwinder: UnwinderX86_64<Vec<u8>>,
    cache: CacheX86_64,
    /// Modules known, for the database.
    pub modules: Vec<Module>,
}

impl ProcessUnwinder {
    /// No module yet (a new image: its mappings follow as records).
    pub fn empty() -> ProcessUnwinder {
        ProcessUnwinder {
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            modules: Vec::new(),
        }
    }

    /// The modules mapped into `pid` now.
    pub fn for_process(pid: i32) -> ProcessUnwinder {
        let mut u = ProcessUnwinder::empty();
        for m in crate::maps::executable_modules(pid) {
            u.add(m);
        }
        u
    }

    /// Adds a module (once).
    pub fn add(&mut self, m: Module) {
        if self.modules.iter().any(|k| k.text == m.text) {
            return;
        }
        if let Some(s) = read_sections(&m.path) {
            let (text_svma, text) = s.text.map_or((None, None), |(r, d)| (Some(r), Some(d)));
            let (eh_svma, eh) = s.eh_frame.map_or((None, None), |(r, d)| (Some(r), Some(d)));
            let (hdr_svma, hdr) = s
                .eh_frame_hdr
                .map_or((None, None), |(r, d)| (Some(r), Some(d)));
            let info = ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma,
                text,
                eh_frame_svma: eh_svma,
                eh_frame: eh,
                eh_frame_hdr_svma: hdr_svma,
                eh_frame_hdr: hdr,
                ..Default::default()
            };
            self.unwinder.add_module(framehop::Module::new(
                m.path.clone(),
                m.text.clone(),
                m.bias,
                info,
            ));
        }
        self.modules.push(m);
    }

    /// [`ProcessUnwinder::unwind`] for a sample's registers and stack copy.
    pub fn unwind_sample(
        &mut self,
        s: &super::records::KernelSample<'_>,
        max: usize,
    ) -> (Vec<u64>, bool) {
        self.unwind(s.ip, s.sp, s.bp, s.stack, max)
    }

    /// Walks from the sampled registers through `stack` (the copy of the
    /// memory from `sp` up); returns the return addresses, innermost first,
    /// and whether the walk reached the outermost frame.
    pub fn unwind(
        &mut self,
        ip: u64,
        sp: u64,
        bp: u64,
        stack: &[u8],
        max: usize,
    ) -> (Vec<u64>, bool) {
        let mut read = |addr: u64| -> Result<u64, ()> {
            let at = addr.checked_sub(sp).ok_or(())? as usize;
            let bytes = stack.get(at..at + 8).ok_or(())?;
            Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| ())?))
        };
        let mut frames = self.unwinder.iter_frames(
            ip,
            UnwindRegsX86_64::new(ip, sp, bp),
            &mut self.cache,
            &mut read,
        );
        let mut out = Vec::new();
        loop {
            if out.len() == max {
                return (out, false);
            }
            match frames.next() {
                Ok(Some(frame)) => out.push(frame.address()),
                Ok(None) => return (out, true),
                Err(_) => return (out, false),
            }
        }
    }
}
