//! Separate debug files: where the symbols of a stripped module went.
//!
//! Owns the two ways gdb (and perf, and distributions' `-dbg` packages)
//! find them: by build id under `/usr/lib/debug/.build-id`, and by the
//! file name that the module's `.gnu_debuglink` section records, looked
//! for beside the module, in its `.debug/` subdirectory and under
//! `/usr/lib/debug`, accepted only with the CRC-32 the section records.
//! Never follows a link name that is a path (it could leave those
//! directories), and never takes the module itself for its debug file.

use crate::elf::ElfFile;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The global directory of separate debug files, as gdb's
/// `debug-file-directory` defaults to.
const DEBUG_DIR: &str = "/usr/lib/debug";

/// Where separate debug files are looked up by build id
/// (`<dir>/xx/yyyy….debug`), as gdb, perf and Debian's `-dbg` packages do.
const BUILD_ID_DIR: &str = "/usr/lib/debug/.build-id";

/// The separate debug file of the module with build id `hex`, if
/// installed.
pub fn by_build_id(hex: &str) -> Option<String> {
    if hex.len() < 3 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let path = format!("{BUILD_ID_DIR}/{}/{}.debug", &hex[..2], &hex[2..]);
    Path::new(&path).is_file().then_some(path)
}

/// The CRC-32 of the whole file at `path` (zlib's, as `.gnu_debuglink`
/// records it), read 1 MiB at a time.
pub fn crc32_file(path: &Path) -> Option<u32> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut buf = vec![0u8; 1 << 20];
    let mut crc = crc32fast::Hasher::new();
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Some(crc.finalize()),
            Ok(n) => crc.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// Where gdb looks for the debug file `link` named by the
/// `.gnu_debuglink` of `module`: beside it, in its `.debug/`
/// subdirectory, and under the global debug directory followed by the
/// module's directory.
pub fn debuglink_candidates(module: &Path, link: &str) -> Vec<PathBuf> {
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
#[derive(Debug, Default)]
pub struct DebugLinks {
    by_module: HashMap<String, Option<String>>,
    crcs: HashMap<PathBuf, Option<u32>>,
}

impl DebugLinks {
    /// The debug file `module`'s `.gnu_debuglink` names, in the first
    /// place gdb would look that holds a file with the recorded CRC.
    pub fn file_for(&mut self, module: &str) -> Option<String> {
        if let Some(found) = self.by_module.get(module) {
            return found.clone();
        }
        let found = self.find(Path::new(module));
        self.by_module.insert(module.to_string(), found.clone());
        found
    }

    fn find(&mut self, module: &Path) -> Option<String> {
        let (link, crc) = ElfFile::open(module)?.gnu_debuglink()?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run;
    use std::process::Command;

    #[test]
    fn crc32_is_zlibs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("check");
        std::fs::write(&path, b"123456789").unwrap();
        assert_eq!(crc32_file(&path), Some(0xCBF4_3926));
        std::fs::write(&path, b"").unwrap();
        assert_eq!(crc32_file(&path), Some(0));
        assert_eq!(crc32_file(&dir.path().join("missing")), None);
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

    #[test]
    fn build_ids_that_are_no_hex_find_nothing() {
        assert_eq!(by_build_id(""), None);
        assert_eq!(by_build_id("ab"), None);
        assert_eq!(by_build_id("../../etc/passwd"), None);
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
            let elf = ElfFile::open(p(obj)).unwrap();
            assert_eq!(elf.is_64(), flag == "-m64");
            let (name, crc) = elf.gnu_debuglink().unwrap();
            assert_eq!(name, format!("{obj}.dbg"), "{flag}");
            assert_eq!(Some(crc), crc32_file(Path::new(&debug)), "{flag}");
            assert_eq!(ElfFile::open(&debug).unwrap().gnu_debuglink(), None);
        }
        assert!(ElfFile::open(&src).is_none());
    }
}
