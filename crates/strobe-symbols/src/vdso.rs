//! The kernel's vDSO as a file, for naming `[vdso]` frames after the run.
//!
//! Owns copying this process's vDSO into a temporary file when its build
//! id is the one the profile recorded (the same kernel the profile ran
//! on): the vDSO exists in no file on disk. Never copies one whose build
//! id differs (its names would be another kernel's); the caller removes
//! the copy.

/// The kernel's vDSO, copied from this process into a file, when it is
/// the one with build id `hex`; the file's path.
pub fn copy_if_same(hex: &str) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::ElfFile;

    #[test]
    fn this_kernels_vdso_is_copied_and_another_is_not() {
        assert_eq!(
            copy_if_same("00112233445566778899aabbccddeeff00112233"),
            None
        );
        assert_eq!(copy_if_same(""), None);
        // The vDSO's own build id, read from a first copy made without the
        // check (its note is inside the image).
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let Some(line) = maps.lines().find(|l| l.ends_with("[vdso]")) else {
            return;
        };
        let (start, end) = line
            .split_whitespace()
            .next()
            .unwrap()
            .split_once('-')
            .unwrap();
        let (start, end) = (
            usize::from_str_radix(start, 16).unwrap(),
            usize::from_str_radix(end, 16).unwrap(),
        );
        // SAFETY: as in `copy_if_same`: mapped readable for the process's life.
        let image = unsafe { std::slice::from_raw_parts(start as *const u8, end - start) };
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("vdso.so");
        std::fs::write(&raw, image).unwrap();
        let Some(id) = ElfFile::open(&raw).unwrap().build_id() else {
            return;
        };
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let copy = copy_if_same(&hex).expect("this kernel's vDSO");
        assert_eq!(std::fs::read(&copy).unwrap(), image);
        std::fs::remove_file(copy).unwrap();
    }
}
