//! What can be seen of an executable before it runs: whether a preloaded
//! runtime can start in it at all.
//!
//! Owns the checks for static binaries (no program interpreter) and
//! set-user-ID/set-group-ID images (the loader ignores `LD_PRELOAD` for
//! them), and finding a command in `PATH` as `execvp` does. Reads at
//! most one page of the file; never runs in a signal handler. The reasons
//! it answers with are the segment's (`strobe_wire::segment::exec_reason`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use strobe_wire::segment::exec_reason;

fn os_str(bytes: &[u8]) -> &OsStr {
    OsStr::from_bytes(bytes)
}

/// Why the image at `path` will not be profiled, if it can be seen.
pub fn exec_reason_for(path: &[u8]) -> u32 {
    let Ok(meta) = std::fs::metadata(os_str(path)) else {
        return exec_reason::NONE;
    };
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let setuid = meta.mode() & libc::S_ISUID != 0 && meta.uid() != uid;
    let setgid = meta.mode() & libc::S_ISGID != 0 && meta.gid() != gid;
    if setuid || setgid {
        return exec_reason::SETUID;
    }
    if is_static_elf(path) {
        return exec_reason::STATIC;
    }
    exec_reason::NONE
}

/// Whether `path` is an ELF executable without a program interpreter.
pub fn is_static_elf(path: &[u8]) -> bool {
    use std::io::Read;
    let Ok(mut f) = std::fs::File::open(os_str(path)) else {
        return false;
    };
    let mut head = [0u8; 4096];
    let Ok(n) = f.read(&mut head) else {
        return false;
    };
    let head = &head[..n];
    if n < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(head[32..40].try_into().unwrap_or_default()) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    let mut dynamic_loader = false;
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        let Some(kind) = head.get(at..at + 4) else {
            return false;
        };
        if u32::from_le_bytes(kind.try_into().unwrap_or_default()) == 3 {
            dynamic_loader = true; // PT_INTERP
        }
    }
    !dynamic_loader
}

/// Finds `file` the way `execvp` does: a name without `/` is looked up in
/// `PATH` (or the default search path); anything else is taken as given.
pub fn resolve_command(file: &[u8]) -> Vec<u8> {
    if file.contains(&b'/') {
        return file.to_vec();
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in path.as_encoded_bytes().split(|&c| c == b':') {
        let mut candidate = if dir.is_empty() {
            b".".to_vec()
        } else {
            dir.to_vec()
        };
        candidate.push(b'/');
        candidate.extend_from_slice(file);
        if std::path::Path::new(os_str(&candidate)).is_file() {
            return candidate;
        }
    }
    file.to_vec()
}
