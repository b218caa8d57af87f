//! strobe's symbolizer: names for code addresses, from the ELF files on
//! disk, the separate debug files, the kernel's vDSO and JIT perf maps.
//!
//! The one crate that reads ELF files for names (sections, symbol tables,
//! PLT entries, build ids, `.gnu_debuglink`, line tables), built on
//! `object` ([`elf`]), blazesym ([`resolve`]) and `gimli` ([`lines`]).
//! It runs in the collector (the kernel sampler's modules and unwind
//! sections, the causal profiler's code map, modules found in
//! `/proc/PID/maps`) and after the run (`strobe symbolize`, the end of
//! `strobe sample`).
//!
//! Never runs inside the profiled program: it allocates, reads files and
//! takes its time, so neither `strobe-runtime` nor `strobe-sampler` may
//! depend on it (the sampler keeps its own signal-safe reader of the
//! modules in memory, `strobe_core::modules`). It knows no database: the
//! caller maps frames to addresses and stores the names
//! (`strobe_db::symbols`).

pub mod debug_file;
pub mod demangle;
pub mod elf;
pub mod functions;
pub mod lines;
pub mod module;
pub mod perf_map;
pub mod plt;
pub mod proc_maps;
pub mod resolve;
pub mod vdso;

pub use elf::ElfFile;
pub use module::{ModuleNames, ModuleSymbolizer};
pub use resolve::Name;

#[cfg(test)]
mod testing {
    /// Runs a tool the tests build their ELF files with; fails the test
    /// when it fails.
    pub(crate) fn run(cmd: &str, args: &[&str]) {
        let status = std::process::Command::new(cmd)
            .args(args)
            .status()
            .expect(cmd);
        assert!(status.success(), "{cmd} {args:?}");
    }
}
