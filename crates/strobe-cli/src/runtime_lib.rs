//! Finding `libstrobe_runtime.so`, the library `strobe sample` preloads.
//!
//! Owns the search order: the `runtime` setting (`STROBE_RUNTIME`,
//! `--runtime`), then next to the `strobe` executable (the build tree:
//! `target/<profile>/` after `cargo build --workspace`), then its `deps/`
//! (where `cargo test` leaves it), then `<prefix>/lib/strobe/` for an
//! installed `<prefix>/bin/strobe` (what `scripts/install.sh` lays out).
//! Also finds `libstrobe_xpti.so`, the XPTI dispatcher `--xpti` hands to
//! the program: next to the runtime first, then in the same places.

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// The runtime's file name.
pub const RUNTIME_FILE: &str = "libstrobe_runtime.so";

/// The XPTI dispatcher's file name (crate `strobe-xpti`).
pub const DISPATCHER_FILE: &str = "libstrobe_xpti.so";

/// Places searched for the runtime, in order, given the `strobe` executable.
pub fn candidates(exe: &Path) -> Vec<PathBuf> {
    candidates_of(exe, RUNTIME_FILE)
}

/// Places searched for `file`, in order, given the `strobe` executable.
fn candidates_of(exe: &Path, file: &str) -> Vec<PathBuf> {
    let dir = exe.parent().unwrap_or(Path::new("."));
    let mut out = vec![dir.join(file), dir.join("deps").join(file)];
    if let Some(prefix) = dir.parent() {
        out.push(prefix.join("lib").join("strobe").join(file));
    }
    out
}

/// The XPTI dispatcher (`libstrobe_xpti.so`) to name in
/// `XPTI_FRAMEWORK_DISPATCHER`: next to `runtime` (the library `strobe`
/// preloads), else where the runtime itself is searched for.
pub fn locate_dispatcher(runtime: &Path) -> Result<PathBuf> {
    let mut searched = vec![runtime.with_file_name(DISPATCHER_FILE)];
    let exe = std::env::current_exe()?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    searched.extend(candidates_of(&exe, DISPATCHER_FILE));
    if let Some(found) = searched.iter().find(|p| p.is_file()) {
        return Ok(std::fs::canonicalize(found).unwrap_or_else(|_| found.clone()));
    }
    let list: Vec<String> = searched.iter().map(|p| p.display().to_string()).collect();
    bail!(
        "--xpti needs the XPTI dispatcher {DISPATCHER_FILE}, which was not found; looked in {}. \
         Build it with `cargo build --workspace` (or `--release`; scripts/install.sh installs it \
         beside the runtime), or name a dispatcher yourself in XPTI_FRAMEWORK_DISPATCHER",
        list.join(", ")
    )
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
