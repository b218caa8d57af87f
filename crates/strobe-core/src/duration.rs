//! Parsing of human-written durations (`500ms`, `2s`, `1m`, `1.5`).
//!
//! Owns the one grammar strobe accepts for every duration, in settings and in
//! time-window specs. Pure string handling: never reads clocks or the
//! environment.

use std::fmt;

/// Why a duration could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{text}' is not a duration: {reason}; write a number of seconds or a number with a unit (ns, us, ms, s, m, h), e.g. 500ms, 2s, 1.5m")]
pub struct DurationError {
    /// The text that failed.
    pub text: String,
    /// What was wrong with it.
    pub reason: &'static str,
}

/// Parses a duration into nanoseconds. A bare number means seconds; the
/// units are `ns`, `us` (or `µs`), `ms`, `s`, `m` (minutes) and `h`.
/// Fractions are allowed (`0.5s`, `1.5m`); negative values, NaN and values
/// beyond `u64::MAX` nanoseconds are rejected.
pub fn parse_duration_ns(text: &str) -> Result<u64, DurationError> {
    let err = |reason| DurationError {
        text: text.to_string(),
        reason,
    };
    let t = text.trim();
    if t.is_empty() {
        return Err(err("it is empty"));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_' || c == '+'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    if t.starts_with('-') {
        return Err(err("durations cannot be negative"));
    }
    let number: String = number.chars().filter(|&c| c != '_').collect();
    if number.is_empty() {
        return Err(err("it has no number"));
    }
    let multiplier: f64 = match unit.trim() {
        "" | "s" | "sec" => 1e9,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return Err(err("unknown unit")),
    };
    // Integers are converted exactly; fractions through f64.
    if let Ok(n) = number.parse::<u64>() {
        return n
            .checked_mul(multiplier as u64)
            .ok_or_else(|| err("it is too large"));
    }
    let value: f64 = number.parse().map_err(|_| err("the number is malformed"))?;
    let ns = value * multiplier;
    if !ns.is_finite() || ns >= u64::MAX as f64 {
        return Err(err("it is too large"));
    }
    Ok(ns.round() as u64)
}

/// A duration in nanoseconds that prints in the unit people would write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DisplayDuration(pub u64);

impl fmt::Display for DisplayDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        const UNITS: [(u64, &str); 6] = [
            (3_600_000_000_000, "h"),
            (60_000_000_000, "m"),
            (1_000_000_000, "s"),
            (1_000_000, "ms"),
            (1_000, "us"),
            (1, "ns"),
        ];
        if ns == 0 {
            return write!(f, "0s");
        }
        for (scale, unit) in UNITS {
            if ns.is_multiple_of(scale) {
                return write!(f, "{}{}", ns / scale, unit);
            }
        }
        unreachable!("every integer is a multiple of 1 ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration_ns("500ms").unwrap(), 500_000_000);
        assert_eq!(parse_duration_ns("2s").unwrap(), 2_000_000_000);
        assert_eq!(parse_duration_ns("1m").unwrap(), 60_000_000_000);
        assert_eq!(parse_duration_ns("1h").unwrap(), 3_600_000_000_000);
        assert_eq!(parse_duration_ns("10").unwrap(), 10_000_000_000);
        assert_eq!(parse_duration_ns("0.5").unwrap(), 500_000_000);
        assert_eq!(parse_duration_ns("1.5m").unwrap(), 90_000_000_000);
        assert_eq!(parse_duration_ns("250us").unwrap(), 250_000);
        assert_eq!(parse_duration_ns("7ns").unwrap(), 7);
        assert_eq!(parse_duration_ns(" 3 s ").unwrap(), 3_000_000_000);
        assert_eq!(parse_duration_ns("0").unwrap(), 0);
    }

    #[test]
    fn errors_name_the_problem() {
        for (bad, reason) in [
            ("", "it is empty"),
            ("-1s", "durations cannot be negative"),
            ("5 parsecs", "unknown unit"),
            ("ms", "it has no number"),
            ("1.2.3s", "the number is malformed"),
            ("99999999999999999999h", "it is too large"),
        ] {
            let e = parse_duration_ns(bad).unwrap_err();
            assert_eq!(e.reason, reason, "{bad}");
            assert!(e.to_string().contains("500ms"), "{e}");
        }
    }

    #[test]
    fn display_round_trips() {
        for ns in [
            0,
            1,
            999,
            1_000,
            1_500_000,
            2_000_000_000,
            60_000_000_000,
            7_200_000_000_000,
        ] {
            let shown = DisplayDuration(ns).to_string();
            assert_eq!(parse_duration_ns(&shown).unwrap(), ns, "{shown}");
        }
    }
}
