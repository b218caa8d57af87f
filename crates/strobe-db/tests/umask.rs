//! Files strobe-db creates get mode 0644 whatever the umask.
//!
//! Its own test binary with a single test: the umask is process-wide, and
//! setting it here must not change what other tests create.

mod common;

use std::os::unix::fs::PermissionsExt;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn created_files_are_0644_under_umask_077() {
    // SAFETY: umask(2) cannot fail; this binary holds this one test, so no
    // other thread creates files meanwhile.
    let old = unsafe { libc::umask(0o077) };
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("1.db");
    common::write_small(&a, 1);
    let w = strobe_db::Writer::create_unique(&a, &common::process(2), common::opts()).unwrap();
    let b = w.path().to_path_buf();
    w.finish(1).unwrap();
    let merged = dir.path().join("merged.db");
    strobe_db::merge(&[a.clone(), b.clone()], &merged, &mut |_| {}).unwrap();
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    assert_eq!(mode(&a), 0o644, "{}", a.display());
    assert_eq!(mode(&b), 0o644, "{}", b.display());
    assert_eq!(mode(&merged), 0o644, "{}", merged.display());
}
