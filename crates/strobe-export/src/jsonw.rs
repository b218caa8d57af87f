//! Hand-written JSON values for the streamed text exporters.
//!
//! Owns the appending of single JSON values to a byte buffer: strings
//! escaped as JSON requires (quote, backslash and control characters;
//! everything else, non-ASCII included, passes through as UTF-8),
//! integers, shortest round-trip floats, and nanosecond times as exact
//! decimal microseconds. It allocates nothing per value (floats, and
//! [`quoted`] strings made to be kept, excepted) and never decides a
//! document's structure, which is the caller's: it must never write
//! anything that is not a complete, valid JSON value.

use std::sync::Arc;

/// Hex digits of `\u00XX` escapes.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// `s` as a JSON string, quotes included.
pub(crate) fn string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    string_body(out, s);
    out.push(b'"');
}

/// `s` escaped for the inside of a JSON string (no quotes), so that a
/// caller can build one string from several pieces.
pub(crate) fn string_body(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b >= 0x20 && b != b'"' && b != b'\\' {
            continue;
        }
        out.extend_from_slice(&bytes[run..i]);
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]),
        }
        run = i + 1;
    }
    out.extend_from_slice(&bytes[run..]);
}

/// `s` as a quoted, escaped JSON string of its own, to be copied into
/// the output as it is each time it is needed.
pub(crate) fn quoted(s: &str) -> Arc<str> {
    let mut out = Vec::with_capacity(s.len() + 2);
    string(&mut out, s);
    // Escaping keeps UTF-8 valid: only ASCII bytes are added.
    String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
        .into()
}

/// An integer.
pub(crate) fn int(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// A float in its shortest round-trip form (as serde_json writes it);
/// `null` for NaN and infinities, which JSON cannot express.
pub(crate) fn float(out: &mut Vec<u8>, v: f64) {
    match serde_json::Number::from_f64(v) {
        Some(n) => out.extend_from_slice(n.to_string().as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
}

/// `ns` nanoseconds as microseconds, exactly: the integer part, then up
/// to three decimals without trailing zeros (`1234567` → `1234.567`,
/// `-1500` → `-1.5`, `2000` → `2`). For magnitudes below 10¹⁵ ns this is
/// also the shortest form of the nearest double, so a reader parsing it
/// as one gets `ns / 1000` correctly rounded.
pub(crate) fn micros(out: &mut Vec<u8>, ns: i64) {
    // Digits are laid out from the end of a buffer long enough for
    // `-9223372036854775.808`, then copied at once.
    let mut buf = [0u8; 24];
    let mut pos = buf.len();
    let abs = ns.unsigned_abs();
    let mut frac = abs % 1000;
    if frac != 0 {
        let mut digits = 3;
        while frac.is_multiple_of(10) {
            frac /= 10;
            digits -= 1;
        }
        for _ in 0..digits {
            pos -= 1;
            buf[pos] = b'0' + (frac % 10) as u8;
            frac /= 10;
        }
        pos -= 1;
        buf[pos] = b'.';
    }
    let mut int = abs / 1000;
    loop {
        pos -= 1;
        buf[pos] = b'0' + (int % 10) as u8;
        int /= 10;
        if int == 0 {
            break;
        }
    }
    if ns < 0 {
        pos -= 1;
        buf[pos] = b'-';
    }
    out.extend_from_slice(&buf[pos..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(bytes: &[u8]) -> serde_json::Value {
        serde_json::from_slice(bytes).expect("valid JSON")
    }

    #[test]
    fn strings_round_trip_exactly() {
        let mut all_controls: String = (0u8..0x20).map(char::from).collect();
        all_controls.push('\u{7f}');
        for s in [
            "",
            "plain",
            "say \"hi\"",
            "back\\slash\\",
            "\\\"",
            "tab\tnew\nline\rcr\u{8}\u{c}\u{0}nul",
            &all_controls,
            "ünïcödé – ≥ 𝄞 🦀 日本語",
            "\u{2028}\u{2029} line separators",
            "a\"b\\c\u{1}d é",
        ] {
            let mut out = Vec::new();
            string(&mut out, s);
            assert_eq!(parsed(&out), serde_json::Value::String(s.into()), "{s:?}");
            assert!(
                out.iter().all(|&b| b >= 0x20),
                "no raw control bytes: {out:?}"
            );
            assert_eq!(&*quoted(s), std::str::from_utf8(&out).unwrap());
            // Pieces escaped separately make one string.
            let mut pieces = b"\"".to_vec();
            string_body(&mut pieces, s);
            string_body(&mut pieces, " (tid 7)");
            pieces.push(b'"');
            assert_eq!(
                parsed(&pieces),
                serde_json::Value::String(format!("{s} (tid 7)"))
            );
        }
    }

    #[test]
    fn micros_keep_nanosecond_precision() {
        for (ns, text) in [
            (1_234_567, "1234.567"),
            (1_234_560, "1234.56"),
            (1_234_500, "1234.5"),
            (1_234_000, "1234"),
            (1_234_001, "1234.001"),
            (1_234_010, "1234.01"),
            (0, "0"),
            (7, "0.007"),
            (-1_500, "-1.5"),
            (-7, "-0.007"),
            // 11 days of nanoseconds: still exact.
            (950_400_000_000_001, "950400000000.001"),
            (i64::MIN, "-9223372036854775.808"),
            (i64::MAX, "9223372036854775.807"),
        ] {
            let mut out = Vec::new();
            micros(&mut out, ns);
            assert_eq!(std::str::from_utf8(&out).unwrap(), text);
            if ns.unsigned_abs() < 1_000_000_000_000_000 {
                // The double a JSON reader gets is ns / 1000, correctly rounded.
                let v = parsed(&out).as_f64().unwrap();
                assert_eq!(v, ns as f64 / 1000.0, "{text}");
                assert_eq!((v * 1000.0).round() as i64, ns);
            }
        }
    }

    #[test]
    fn numbers_are_json_numbers() {
        let mut out = Vec::new();
        for v in [0, -1, 42, i64::MIN, i64::MAX] {
            out.clear();
            int(&mut out, v);
            assert_eq!(parsed(&out).as_i64(), Some(v));
        }
        for v in [0.0, -2.5, 0.1, 1e300, 5e-324, 1234.567, f64::MAX] {
            out.clear();
            float(&mut out, v);
            assert_eq!(parsed(&out).as_f64(), Some(v), "{v}");
        }
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            out.clear();
            float(&mut out, v);
            assert_eq!(out, b"null");
        }
    }
}
