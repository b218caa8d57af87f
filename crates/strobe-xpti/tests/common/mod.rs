//! Where strobe-xpti's integration tests find the repository and the
//! dispatcher this test build made. Locates only; never builds, runs or
//! checks anything.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory holding the cdylib built with this test (target/<profile>/deps
/// or target/<profile>).
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    for d in [
        deps.clone(),
        deps.parent().expect("profile dir").to_path_buf(),
    ] {
        if d.join("libstrobe_xpti.so").exists() {
            return d;
        }
    }
    panic!(
        "libstrobe_xpti.so not found next to {}: build it with `cargo build -p strobe-xpti`",
        exe.display()
    );
}
