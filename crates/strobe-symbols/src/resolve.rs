//! Function names (and source lines) of addresses in one ELF file,
//! through blazesym, offline.
//!
//! Owns calling blazesym: one symbolizer per file and call (its caches,
//! and DWARF when lines are asked for, are released with it, so large
//! binaries are read one at a time), and demangling only the names that
//! are mangled. Never reads a process's memory; never looks anywhere but
//! the file it is given (debug files are [`crate::debug_file`]'s).

use crate::demangle::is_mangled;
use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use std::collections::HashMap;

/// The name of an address: its function and, when lines were asked for
/// and the file has them, its source location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name {
    /// Function name, demangled when it was mangled.
    pub function: String,
    /// Source file.
    pub file: Option<String>,
    /// Source line.
    pub line: Option<u32>,
}

/// What blazesym found for one address: the name, the address of the
/// symbol it lies in, and the source location when asked for.
struct Found {
    name: String,
    symbol: u64,
    file: Option<String>,
    line: Option<u32>,
}

/// Looks `addrs` (virtual offsets) up in the ELF file `file` with one
/// symbolizer; `None` when the file cannot be read.
fn look_up(file: &str, addrs: &[u64], lines: bool, demangle: bool) -> Option<Vec<Option<Found>>> {
    let symbolizer = Symbolizer::builder()
        .enable_code_info(lines)
        .enable_inlined_fns(false)
        .enable_demangling(demangle)
        .build();
    let mut elf = Elf::new(file);
    elf.debug_syms = lines;
    let symbols = symbolizer
        .symbolize(&Source::Elf(elf), Input::VirtOffset(addrs))
        .ok()?;
    let found = symbols
        .into_iter()
        .map(|sym| {
            let Symbolized::Sym(sym) = sym else {
                return None;
            };
            let (file, line) = match &sym.code_info {
                Some(ci) => (Some(ci.to_path().display().to_string()), ci.line),
                None => (None, None),
            };
            Some(Found {
                name: sym.name.to_string(),
                symbol: sym.addr,
                file,
                line,
            })
        })
        .collect();
    Some(found)
}

/// Names `addrs` (file addresses) from the ELF file `file`, one entry per
/// address (`None` where no symbol covers it); `None` when the file cannot
/// be read. `lines` also reads DWARF for source locations (slow and
/// memory-hungry for large binaries).
///
/// Names are looked up as written, then only the mangled ones demangled
/// (a second, names-only lookup of those addresses, kept where it finds
/// the same symbol): blazesym demangles every name it is given, and its
/// C++ demangler reads short C names as types (`w` became `wchar_t`, `i`
/// `int`).
pub fn names_in(file: &str, addrs: &[u64], lines: bool) -> Option<Vec<Option<Name>>> {
    let found = look_up(file, addrs, lines, false)?;
    let mangled: Vec<usize> = (0..found.len())
        .filter(|&i| found[i].as_ref().is_some_and(|f| is_mangled(&f.name)))
        .collect();
    let mut demangled: HashMap<usize, String> = HashMap::new();
    if !mangled.is_empty() {
        let again: Vec<u64> = mangled.iter().map(|&i| addrs[i]).collect();
        if let Some(names) = look_up(file, &again, false, true) {
            for (&i, d) in mangled.iter().zip(names) {
                if let (Some(d), Some(f)) = (d, &found[i]) {
                    if d.symbol == f.symbol {
                        demangled.insert(i, d.name);
                    }
                }
            }
        }
    }
    let names = found
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let f = f?;
            Some(Name {
                function: demangled.remove(&i).unwrap_or(f.name),
                file: f.file,
                line: f.line,
            })
        })
        .collect();
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run;
    use std::process::Command;

    #[test]
    fn short_c_names_stay_as_written_and_mangled_names_are_demangled() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n).display().to_string();
        // C functions whose names are also C++ type manglings, and two
        // mangled names (C++, Rust legacy) given with asm labels.
        std::fs::write(
            p("names.c"),
            "#define F __attribute__((noinline, used))\n\
             F void w(void) { __asm__ volatile(\"\"); }\n\
             F int i(int x) { return x + 1; }\n\
             F void Pc(void) { __asm__ volatile(\"\"); }\n\
             F int cxx(int) __asm__(\"_Z3fooi\");\n\
             F int cxx(int x) { return x * 2; }\n\
             F int rust(void) __asm__(\"_ZN4core3fmt5write17h0123456789abcdefE\");\n\
             F int rust(void) { return 3; }\n\
             int main(void) { w(); Pc(); return i(cxx(rust())); }\n",
        )
        .unwrap();
        run("cc", &["-O1", "-o", &p("names"), &p("names.c")]);
        let nm = Command::new("nm").arg(p("names")).output().unwrap();
        let addr = |name: &str| -> u64 {
            String::from_utf8_lossy(&nm.stdout)
                .lines()
                .find_map(|l| {
                    let mut f = l.split_whitespace();
                    let a = f.next()?;
                    (f.nth(1)? == name).then(|| u64::from_str_radix(a, 16).ok())?
                })
                .unwrap_or_else(|| panic!("{name} not in the symbol table"))
        };
        let cases = [
            ("w", "w"),
            ("i", "i"),
            ("Pc", "Pc"),
            ("_Z3fooi", "foo(int)"),
            ("_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write"),
        ];
        let mut addrs: Vec<u64> = cases.iter().map(|(sym, _)| addr(sym)).collect();
        addrs.push(0x10);
        for lines in [false, true] {
            let named = names_in(&p("names"), &addrs, lines).unwrap();
            let got: Vec<Option<&str>> = named
                .iter()
                .map(|n| n.as_ref().map(|n| n.function.as_str()))
                .collect();
            let mut want: Vec<Option<&str>> = cases.iter().map(|c| Some(c.1)).collect();
            want.push(None);
            assert_eq!(got, want, "lines: {lines}");
        }
        assert!(names_in(&p("missing"), &addrs, false).is_none());
    }
}
