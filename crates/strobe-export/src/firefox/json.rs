//! JSON values of the Firefox Profiler document, written as serde_json
//! writes them.
//!
//! Owns appending single values to a byte buffer: integers, floats,
//! nanoseconds as the format's float milliseconds, escaped strings,
//! column separators and repeated array elements, each byte for byte what
//! serde_json's compact formatter writes for the same value (the
//! document must equal the one `fxprof-processed-profile` writes). It
//! never decides the document's structure and never does I/O beyond
//! handing full buffers to a writer ([`repeat_to`]).

use std::io::{self, Write};

use serde_json::ser::{CompactFormatter, Formatter};

/// Nanoseconds per millisecond.
pub(super) const NS_PER_MS: u64 = 1_000_000;

/// Appends an unsigned integer.
#[inline]
pub(super) fn put_u64(b: &mut Vec<u8>, v: u64) {
    // Writing into a Vec cannot fail.
    let _ = CompactFormatter.write_u64(b, v);
}

/// Appends a signed integer.
#[inline]
pub(super) fn put_i64(b: &mut Vec<u8>, v: i64) {
    let _ = CompactFormatter.write_i64(b, v);
}

/// Appends a finite float as serde_json writes it.
#[inline]
pub(super) fn put_f64(b: &mut Vec<u8>, v: f64) {
    let _ = CompactFormatter.write_f64(b, v);
}

/// Nanoseconds as the format's float milliseconds: exactly what
/// `put_f64(ns as f64 / 1e6)` writes, without the float conversion.
/// Below 10^15 ns the decimal `ns / 10^6` has at most 15 significant
/// digits, so it is the shortest representation of the nearest double
/// and serde_json writes it in fixed notation (decimal exponents -5 to
/// 15), or as `Ne-6` for 1 to 9 ns.
#[inline]
pub(super) fn put_ms(b: &mut Vec<u8>, ns: u64) {
    if ns >= 1_000_000_000_000_000 {
        put_f64(b, ns as f64 / NS_PER_MS as f64);
    } else if ns < 10 {
        if ns == 0 {
            b.extend_from_slice(b"0.0");
        } else {
            b.extend_from_slice(&[b'0' + ns as u8, b'e', b'-', b'6']);
        }
    } else {
        put_u64(b, ns / NS_PER_MS);
        let mut frac = ns % NS_PER_MS;
        if frac == 0 {
            b.extend_from_slice(b".0");
        } else {
            let mut digits = 6;
            while frac.is_multiple_of(10) {
                frac /= 10;
                digits -= 1;
            }
            let mut d = [b'0'; 7];
            d[0] = b'.';
            for k in (1..=digits).rev() {
                d[k] = b'0' + (frac % 10) as u8;
                frac /= 10;
            }
            b.extend_from_slice(&d[..=digits]);
        }
    }
}

/// Appends `s` as a JSON string, escaped as serde_json escapes it.
pub(super) fn put_str(b: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    b.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &c) in bytes.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => &[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(c >> 4) as usize],
                HEX[(c & 15) as usize],
            ],
            _ => continue,
        };
        b.extend_from_slice(&bytes[start..i]);
        b.extend_from_slice(esc);
        start = i + 1;
    }
    b.extend_from_slice(&bytes[start..]);
    b.push(b'"');
}

/// A column value separator: nothing before a column's first value.
#[inline]
pub(super) fn sep(b: &mut Vec<u8>, n: u64) {
    if n > 0 {
        b.push(b',');
    }
}

/// Writes `n` copies of `v` as a JSON array's elements.
pub(super) fn repeat(b: &mut Vec<u8>, v: &[u8], n: usize) {
    for k in 0..n {
        if k > 0 {
            b.push(b',');
        }
        b.extend_from_slice(v);
    }
}

/// Writes `n` copies of `v` as array elements after `before` elements,
/// through `b` (flushed to `out` as it fills; left holding the tail).
pub(super) fn repeat_to<W: Write>(
    out: &mut W,
    b: &mut Vec<u8>,
    v: &[u8],
    n: u64,
    before: u64,
) -> io::Result<()> {
    for k in 0..n {
        sep(b, before + k);
        b.extend_from_slice(v);
        if b.len() >= 64 << 10 {
            out.write_all(b)?;
            b.clear();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_are_written_as_serde_json_writes_the_float() {
        let mut values: Vec<u64> = (0..2000).collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Every magnitude, and round numbers at each.
            let v = x >> (x % 64);
            values.extend([v, v / 1000 * 1000, v / 1_000_000 * 1_000_000]);
        }
        for p in 0..20 {
            let t = 10u64.pow(p);
            values.extend([t - 1, t, t + 1, t.saturating_mul(5), t.saturating_mul(15)]);
        }
        values.push(u64::MAX);
        for ns in values {
            let (mut fast, mut float) = (Vec::new(), Vec::new());
            put_ms(&mut fast, ns);
            put_f64(&mut float, ns as f64 / 1e6);
            assert_eq!(
                String::from_utf8(fast).unwrap(),
                String::from_utf8(float).unwrap(),
                "{ns} ns"
            );
        }
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        for s in [
            "plain",
            "",
            "quote \" and \\ backslash",
            "ctl \n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}",
            "ünïcödé ✓ µs",
        ] {
            let mut b = Vec::new();
            put_str(&mut b, s);
            assert_eq!(
                String::from_utf8(b).unwrap(),
                serde_json::to_string(s).unwrap()
            );
        }
    }
}
