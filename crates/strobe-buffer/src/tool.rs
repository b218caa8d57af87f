//! Tool plugins: shared libraries named in `STROBE_TOOL_LIB` that configure
//! their own contexts, buffers and services through the C function table.
//!
//! Owns loading (`dlopen`), the API version check, calling the tool's
//! configure entry point, and finalization at exit (stop contexts, flush
//! every buffer, call each tool's finalize in reverse load order). Problems
//! with one library are reported as warnings naming the file and never stop
//! the others or the host. Libraries are never unloaded: their callbacks
//! stay registered for the life of the process.
//!
//! A tool exports:
//! - `const uint32_t strobe_tool_api_version` (the header's
//!   `STROBE_TOOL_DEFINE_API_VERSION` macro): the API it was built against;
//! - `int strobe_tool_configure(uint32_t api_version, const
//!   strobe_tool_api_t *api, void **tool_data)`: returns 0 to stay active;
//! - optionally `void strobe_tool_finalize(void *tool_data)`.

use crate::ffi::{tool_api, ToolApi, API_VERSION, API_VERSION_MAJOR, API_VERSION_MINOR};
use std::ffi::{c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use thiserror::Error;

/// The environment variable listing tool libraries, separated by `:`.
pub const TOOL_ENV: &str = "STROBE_TOOL_LIB";
/// The configure entry point's symbol.
pub const CONFIGURE_SYMBOL: &str = "strobe_tool_configure";
/// The finalize entry point's symbol (optional).
pub const FINALIZE_SYMBOL: &str = "strobe_tool_finalize";
/// The version data symbol.
pub const VERSION_SYMBOL: &str = "strobe_tool_api_version";

type ConfigureFn =
    unsafe extern "C" fn(api_version: u32, api: *const ToolApi, tool_data: *mut *mut c_void) -> i32;
type FinalizeFn = unsafe extern "C" fn(tool_data: *mut c_void);

/// Why a tool library was not loaded (or declined).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ToolError {
    /// `dlopen` failed.
    #[error("tool library '{path}' could not be loaded: {reason}; check the path in {TOOL_ENV} and that the file is a shared library for this machine")]
    Open {
        /// The library.
        path: PathBuf,
        /// `dlerror()`'s text.
        reason: String,
    },
    /// A required symbol is missing.
    #[error("tool library '{path}' does not export '{symbol}': it is not a strobe tool (see include/strobe_tool.h); it was not configured")]
    MissingSymbol {
        /// The library.
        path: PathBuf,
        /// The missing symbol.
        symbol: &'static str,
    },
    /// The tool was built for an incompatible API version.
    #[error("tool library '{path}' was built for strobe tool API {tool_major}.{tool_minor}, this strobe provides {host_major}.{host_minor}: rebuild the tool against this strobe's include/strobe_tool.h; it was not configured")]
    IncompatibleVersion {
        /// The library.
        path: PathBuf,
        /// Tool's major.
        tool_major: u32,
        /// Tool's minor.
        tool_minor: u32,
        /// Host's major.
        host_major: u32,
        /// Host's minor.
        host_minor: u32,
    },
    /// The tool's configure entry point returned non-zero.
    #[error("tool library '{path}': strobe_tool_configure returned {status}; the tool declined and will not be finalized")]
    Declined {
        /// The library.
        path: PathBuf,
        /// What it returned.
        status: i32,
    },
    /// The configure entry point panicked or the path is unusable.
    #[error("tool library '{path}': {reason}")]
    Other {
        /// The library.
        path: PathBuf,
        /// What happened.
        reason: String,
    },
}

struct Loaded {
    path: PathBuf,
    finalize: Option<FinalizeFn>,
    tool_data: usize,
}

static LOADED: Mutex<Vec<Loaded>> = Mutex::new(Vec::new());

/// A tool that loaded and configured itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolInfo {
    /// The library.
    pub path: PathBuf,
    /// The API version the tool was built for.
    pub api_version: u32,
    /// Whether it exports a finalize entry point.
    pub has_finalize: bool,
}

/// What [`load_from_env`] did.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Tools loaded and configured.
    pub loaded: Vec<ToolInfo>,
    /// Libraries that were not (each also written to stderr as a warning).
    pub errors: Vec<ToolError>,
}

fn dlerror_text() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated thread-local string.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        "unknown dlopen error".to_string()
    } else {
        // SAFETY: non-null, NUL-terminated per dlerror's contract.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// Looks up `symbol` in `handle`.
fn symbol(handle: *mut c_void, symbol: &str) -> *mut c_void {
    let Ok(name) = CString::new(symbol) else {
        return std::ptr::null_mut();
    };
    // SAFETY: `handle` is a live dlopen handle and `name` a C string.
    unsafe { libc::dlsym(handle, name.as_ptr()) }
}

/// Loads one tool library, checks its API version and calls its configure
/// entry point. On success the tool will be finalized by [`finalize`].
pub fn load(path: &Path) -> Result<ToolInfo, ToolError> {
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| ToolError::Other {
        path: path.to_path_buf(),
        reason: "the path contains a NUL byte".into(),
    })?;
    // SAFETY: a valid C string; RTLD_NOW reports missing symbols now,
    // RTLD_LOCAL keeps the tool's symbols out of the global namespace.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(ToolError::Open {
            path: path.to_path_buf(),
            reason: dlerror_text(),
        });
    }
    // Until configure runs, nothing of the tool is registered: unload it on
    // refusal.
    let refuse = |e: ToolError| {
        // SAFETY: `handle` came from dlopen and no pointer into the library
        // has been kept.
        unsafe { libc::dlclose(handle) };
        Err(e)
    };
    let version_ptr = symbol(handle, VERSION_SYMBOL) as *const u32;
    if version_ptr.is_null() {
        return refuse(ToolError::MissingSymbol {
            path: path.to_path_buf(),
            symbol: VERSION_SYMBOL,
        });
    }
    // SAFETY: the symbol is the tool's `const uint32_t` (the header defines
    // it); reading 4 bytes from it is valid.
    let tool_version = unsafe { version_ptr.read_unaligned() };
    let (tool_major, tool_minor) = (tool_version >> 16, tool_version & 0xffff);
    if tool_major != API_VERSION_MAJOR || tool_minor > API_VERSION_MINOR {
        return refuse(ToolError::IncompatibleVersion {
            path: path.to_path_buf(),
            tool_major,
            tool_minor,
            host_major: API_VERSION_MAJOR,
            host_minor: API_VERSION_MINOR,
        });
    }
    let configure = symbol(handle, CONFIGURE_SYMBOL);
    if configure.is_null() {
        return refuse(ToolError::MissingSymbol {
            path: path.to_path_buf(),
            symbol: CONFIGURE_SYMBOL,
        });
    }
    // SAFETY: the symbol is the tool's configure function with the
    // documented signature (header `strobe_tool_configure_fn_t`).
    let configure: ConfigureFn =
        unsafe { std::mem::transmute::<*mut c_void, ConfigureFn>(configure) };
    let finalize_ptr = symbol(handle, FINALIZE_SYMBOL);
    let finalize: Option<FinalizeFn> = if finalize_ptr.is_null() {
        None
    } else {
        // SAFETY: the tool's finalize function with the documented signature.
        Some(unsafe { std::mem::transmute::<*mut c_void, FinalizeFn>(finalize_ptr) })
    };
    let mut tool_data: *mut c_void = std::ptr::null_mut();
    // SAFETY: calling the tool's entry point with the host's table (static,
    // valid forever) and a writable out pointer.
    let status = unsafe { configure(API_VERSION, tool_api(), &mut tool_data) };
    if status != 0 {
        return Err(ToolError::Declined {
            path: path.to_path_buf(),
            status,
        });
    }
    LOADED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Loaded {
            path: path.to_path_buf(),
            finalize,
            tool_data: tool_data as usize,
        });
    Ok(ToolInfo {
        path: path.to_path_buf(),
        api_version: tool_version,
        has_finalize: finalize.is_some(),
    })
}

/// Loads every library in a `:`-separated list (empty entries are skipped),
/// writing a warning to stderr for each one that fails.
pub fn load_list(list: &str) -> LoadReport {
    let mut report = LoadReport::default();
    for entry in list.split(':').filter(|e| !e.trim().is_empty()) {
        match load(Path::new(entry.trim())) {
            Ok(info) => report.loaded.push(info),
            Err(e) => {
                eprintln!("strobe: warning: {e}");
                report.errors.push(e);
            }
        }
    }
    report
}

/// Loads the libraries named in `STROBE_TOOL_LIB` (nothing when unset).
pub fn load_from_env() -> LoadReport {
    match std::env::var_os(TOOL_ENV) {
        Some(v) => load_list(&v.to_string_lossy()),
        None => LoadReport::default(),
    }
}

/// The paths of the tools loaded so far.
pub fn loaded() -> Vec<PathBuf> {
    LOADED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|l| l.path.clone())
        .collect()
}

/// At exit: stops every context (no new records), flushes every buffer (so
/// tools have received every record), then calls each loaded tool's finalize entry point, last loaded first.
/// Each tool is finalized once; later calls finalize only tools loaded
/// since. Must not be called from a callback thread (its buffers are
/// skipped then). Returns how many tools were finalized.
pub fn finalize() -> usize {
    crate::context::stop_all();
    if let Err(e) = crate::buffer::flush_all(None) {
        eprintln!("strobe: warning: flushing buffers before tool finalization: {e}");
    }
    let tools: Vec<Loaded> = std::mem::take(&mut *LOADED.lock().unwrap_or_else(|e| e.into_inner()));
    let n = tools.len();
    for tool in tools.into_iter().rev() {
        if let Some(f) = tool.finalize {
            // SAFETY: the tool's finalize with the data its configure wrote.
            unsafe { f(tool.tool_data as *mut c_void) };
        }
    }
    n
}

/// The host's API version as `major << 16 | minor`.
pub const fn api_version() -> u32 {
    API_VERSION
}
