//! Text that came from a profiled program, made safe to print.
//!
//! Owns the one rule for terminals: names, paths, command lines and
//! messages a program chose (thread names through `prctl`, function names
//! from perf maps, region names, …) may hold control characters that a
//! terminal would obey (clear the screen, retitle the window, move the
//! cursor). Every control character (C0, DEL, C1) and the Unicode
//! direction overrides are written as escapes instead (`\x1b`, `\u{9b}`,
//! `\u{202e}`), the way `ls` and `ps` show such names. Pure; never
//! allocates for text that needs nothing.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal as it is.
fn unsafe_for_terminal(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character a terminal would act on escaped.
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_for_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !unsafe_for_terminal(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_become_visible_text() {
        assert_eq!(
            for_terminal("\u{1b}[2J\u{1b}]0;X\u{7}"),
            "\\x1b[2J\\x1b]0;X\\x07"
        );
        assert_eq!(for_terminal("a\tb\nc\rd\u{7f}"), "a\\x09b\\x0ac\\x0dd\\x7f");
        assert_eq!(for_terminal("csi\u{9b}2J"), "csi\\u{9b}2J");
        assert_eq!(for_terminal("abc\u{202e}cba"), "abc\\u{202e}cba");
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        for s in [
            "main",
            "std::vec::Vec<T>::push",
            "Grüße aus Köln",
            "线程",
            "a\\x1b",
        ] {
            assert!(matches!(for_terminal(s), Cow::Borrowed(b) if b == s));
        }
    }
}
