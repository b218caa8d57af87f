//! Demangling: C++ (Itanium) and Rust names as people read them.
//!
//! Owns the two rules strobe names code by: the causal code map's
//! [`demangle`] (Rust's legacy and v0 schemes, then C++, with Rust's hash
//! suffix dropped), and [`is_mangled`], which tells the post-run
//! symbolizer which names to hand to blazesym's demangler (it reads short
//! C names such as `w` or `i` as C++ types). Never changes a name that is
//! not mangled.

/// Demangles a C++ or Rust symbol (Rust's hash suffix dropped); other
/// names as they are.
pub fn demangle(raw: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(raw) {
        return format!("{d:#}");
    }
    if raw.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(raw) {
            if let Ok(text) = sym.demangle() {
                return text;
            }
        }
    }
    raw.to_string()
}

/// Whether `name` is mangled the way blazesym demangles: Itanium C++ and
/// Rust's legacy scheme (`_Z…`), Rust's v0 (`_R…`).
pub fn is_mangled(name: &str) -> bool {
    name.starts_with("_Z") || name.starts_with("_R")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mangled_names_are_demangled_and_others_kept() {
        assert_eq!(demangle("_Z3fooi"), "foo(int)");
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        for plain in ["w", "i", "Pc", "main", "_Znot a name"] {
            assert_eq!(demangle(plain), plain);
        }
        assert!(is_mangled("_Z3fooi") && is_mangled("_RNvC3foo3bar"));
        assert!(!is_mangled("w") && !is_mangled("main"));
    }
}
