//! Finding `libstrobe_runtime.so`, the library `strobe sample` preloads.
//!
//! Owns the search order: the `runtime` setting (`STROBE_RUNTIME`,
//! `--runtime`), then next to the `strobe` executable (the build tree:
//! `target/<profile>/` after `cargo build --workspace`), then its `deps/`
//! (where `cargo test` leaves it), then `<prefix>/lib/strobe/` for an
//! installed `<prefix>/bin/strobe` (what `scripts/install.sh` lays out).

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// The runtime's file name.
pub const RUNTIME_FILE: &str = "libstrobe_runtime.so";

/// Places searched for the runtime, in order, given the `strobe` executable.
pub fn candidates(exe: &Path) -> Vec<PathBuf> {
    let dir = exe.parent().unwrap_or(Path::new("."));
    let mut out = vec![dir.join(RUNTIME_FILE), dir.join("deps").join(RUNTIME_FILE)];
    if let Some(prefix) = dir.parent() {
        out.push(prefix.join("lib").join("strobe").join(RUNTIME_FILE));
    }
    out
}

/// The runtime to preload: `explicit` if given (it must exist), else the
/// first candidate that exists.
pub fn locate(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        if !path.is_file() {
            bail!(
                "the runtime library {} (from the runtime setting) does not exist; \
                 unset STROBE_RUNTIME or point it at libstrobe_runtime.so",
                path.display()
            );
        }
        return Ok(std::fs::canonicalize(path)?);
    }
    let exe = std::env::current_exe()?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    let searched = candidates(&exe);
    if let Some(found) = searched.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let list: Vec<String> = searched.iter().map(|p| p.display().to_string()).collect();
    bail!(
        "cannot find {RUNTIME_FILE}; looked in {}. Build it with `cargo build --workspace` \
         (or `--release`), install with scripts/install.sh, or set STROBE_RUNTIME to its path",
        list.join(" and ")
    )
}
