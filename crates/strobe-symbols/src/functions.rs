//! A module's functions by address, with demangled names: what a line
//! belongs to, and what function-level selection chooses from.
//!
//! Owns turning a symbol table's function symbols into sorted, disjoint
//! lookups (one function per start address, the largest kept). Never
//! reads DWARF (lines are [`crate::lines`]'s).

use crate::demangle::demangle;
use crate::elf::ElfFile;

/// A function: `[start, end)` (file addresses) and its demangled name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// First address.
    pub start: u64,
    /// End (exclusive).
    pub end: u64,
    /// Demangled name.
    pub name: String,
}

/// The functions of one module, sorted by start address, one per start.
#[derive(Debug, Default, Clone)]
pub struct Functions(Vec<Function>);

impl Functions {
    /// The function symbols of `elf` ([`ElfFile::functions`]), demangled.
    pub fn of(elf: &ElfFile) -> Functions {
        let mut functions: Vec<Function> = elf
            .functions()
            .into_iter()
            .map(|f| Function {
                start: f.start,
                end: f.start + f.size,
                name: demangle(&f.name),
            })
            .collect();
        functions.sort_by_key(|f| (f.start, std::cmp::Reverse(f.end)));
        functions.dedup_by_key(|f| f.start);
        Functions(functions)
    }

    /// The function whose code holds `address`.
    pub fn at(&self, address: u64) -> Option<&Function> {
        let i = self.0.partition_point(|f| f.start <= address);
        self.0[..i].last().filter(|f| address < f.end)
    }

    /// Every function, by start address.
    pub fn iter(&self) -> std::slice::Iter<'_, Function> {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn marker_function(x: u64) -> u64 {
        x.wrapping_mul(2654435761) ^ 7
    }

    #[test]
    fn this_binarys_functions_are_found_by_address_and_demangled() {
        std::hint::black_box(marker_function(3));
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let functions = Functions::of(&ElfFile::open(&exe).unwrap());
        // A position-independent executable: the symbol's address is the
        // runtime one less the load bias, which the function's own
        // pointer and its symbol share modulo the page.
        let f = functions
            .iter()
            .find(|f| f.name.ends_with("functions::tests::marker_function"))
            .expect("demangled, without Rust's hash");
        assert_eq!(functions.at(f.start), Some(f));
        assert_eq!(functions.at(f.end - 1), Some(f));
        assert!(functions.at(f.end).is_none_or(|g| g.start == f.end));
        assert_eq!(
            (marker_function as *const () as u64) & 0xfff,
            f.start & 0xfff
        );
    }
}
