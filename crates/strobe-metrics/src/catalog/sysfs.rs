//! What the kernel publishes about PMUs and tracepoints: the PMU
//! directories under `/sys/bus/event_source/devices` (`type`, `format/*`
//! bit layouts, `events/*` named events with their `.unit` and `.scale`)
//! and tracefs (`events/<subsystem>/<name>/id`).
//!
//! Owns reading those files and the arithmetic of format layouts
//! (`config:0-7,32-35`: the value's low bits go into the first range, the
//! next bits into the next). Never opens a perf event and never writes a
//! file; every path is taken from [`Roots`] so tests can point it at a
//! fake tree.

use std::fs;
use std::path::{Path, PathBuf};

/// Where the catalog looks: the PMU directory and the tracefs mount
/// points, in order. [`Roots::system`] is the real system; tests point
/// them at a temporary tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roots {
    /// `/sys/bus/event_source/devices`.
    pub event_source: PathBuf,
    /// `/sys/kernel/tracing`, then `/sys/kernel/debug/tracing`.
    pub tracefs: Vec<PathBuf>,
}

impl Roots {
    /// The running system's directories.
    pub fn system() -> Roots {
        Roots {
            event_source: PathBuf::from("/sys/bus/event_source/devices"),
            tracefs: vec![
                PathBuf::from("/sys/kernel/tracing"),
                PathBuf::from("/sys/kernel/debug/tracing"),
            ],
        }
    }
}

impl Default for Roots {
    fn default() -> Self {
        Roots::system()
    }
}

/// Which `perf_event_attr` word a format field writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    Config = 0,
    Config1 = 1,
    Config2 = 2,
    Config3 = 3,
}

impl Word {
    fn parse(s: &str) -> Option<Word> {
        match s {
            "config" => Some(Word::Config),
            "config1" => Some(Word::Config1),
            "config2" => Some(Word::Config2),
            "config3" => Some(Word::Config3),
            _ => None,
        }
    }
}

/// One `format/<term>` file: the word it writes and its bit ranges
/// (inclusive, in the order the value's bits fill them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Format {
    pub word: Word,
    pub ranges: Vec<(u32, u32)>,
}

impl Format {
    /// How many bits the term holds.
    pub fn width(&self) -> u32 {
        self.ranges.iter().map(|(lo, hi)| hi - lo + 1).sum()
    }

    /// ORs `value` into `words` by this layout; an error if the value
    /// does not fit.
    pub fn encode(&self, value: u64, words: &mut [u64; 4]) -> Result<(), String> {
        let mut rest = value;
        for &(lo, hi) in &self.ranges {
            let width = hi - lo + 1;
            let mask = if width >= 64 {
                u64::MAX
            } else {
                (1u64 << width) - 1
            };
            words[self.word as usize] |= (rest & mask) << lo;
            rest = if width >= 64 { 0 } else { rest >> width };
        }
        if rest != 0 {
            return Err(format!(
                "value {value:#x} does not fit in the term's {} bits",
                self.width()
            ));
        }
        Ok(())
    }
}

/// Parses a format file's text: `config:0-7,32-35`, `config1:0-63`,
/// `config:21`.
pub(crate) fn parse_format(text: &str) -> Result<Format, String> {
    let text = text.trim();
    let (word, bits) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}` is not `configN:bits`"))?;
    let word = Word::parse(word.trim())
        .ok_or_else(|| format!("`{word}` is not config, config1, config2 or config3"))?;
    let mut ranges = Vec::new();
    for part in bits.split(',') {
        let part = part.trim();
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.trim(), hi.trim()),
            None => (part, part),
        };
        let lo: u32 = lo
            .parse()
            .map_err(|_| format!("bit `{lo}` in `{text}` is not a number"))?;
        let hi: u32 = hi
            .parse()
            .map_err(|_| format!("bit `{hi}` in `{text}` is not a number"))?;
        if lo > hi || hi > 63 {
            return Err(format!("bit range `{part}` in `{text}` is not within 0-63"));
        }
        ranges.push((lo, hi));
    }
    if ranges.is_empty() {
        return Err(format!("`{text}` names no bits"));
    }
    Ok(Format { word, ranges })
}

/// One `term` or `term=value` of an event description, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Term {
    pub name: String,
    pub value: Option<String>,
}

/// Splits `event=0x3c,umask=0x1,inv` into terms.
pub(crate) fn parse_terms(text: &str) -> Vec<Term> {
    text.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| match t.split_once('=') {
            Some((n, v)) => Term {
                name: n.trim().to_string(),
                value: Some(v.trim().to_string()),
            },
            None => Term {
                name: t.to_string(),
                value: None,
            },
        })
        .collect()
}

/// Parses `0x1f`, `0X1F`, `31` into a number.
pub(crate) fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// The directory of PMU `pmu`.
pub(crate) fn pmu_dir(roots: &Roots, pmu: &str) -> PathBuf {
    roots.event_source.join(pmu)
}

/// Whether the PMU exists.
pub(crate) fn pmu_exists(roots: &Roots, pmu: &str) -> bool {
    !pmu.is_empty() && !pmu.contains('/') && pmu_dir(roots, pmu).join("type").is_file()
}

/// Every PMU's name, sorted.
pub(crate) fn pmus(roots: &Roots) -> Vec<String> {
    let mut out: Vec<String> = match fs::read_dir(&roots.event_source) {
        Ok(dir) => dir
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| pmu_exists(roots, n))
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out
}

/// The PMU's `type` number.
pub(crate) fn pmu_type(roots: &Roots, pmu: &str) -> Result<u32, String> {
    let path = pmu_dir(roots, pmu).join("type");
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.trim()
        .parse()
        .map_err(|_| format!("{}: `{}` is not a number", path.display(), text.trim()))
}

/// The PMU's format terms, sorted by name.
pub(crate) fn formats(roots: &Roots, pmu: &str) -> Vec<(String, Result<Format, String>)> {
    let dir = pmu_dir(roots, pmu).join("format");
    let mut out: Vec<(String, Result<Format, String>)> = match fs::read_dir(&dir) {
        Ok(d) => d
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let parsed = fs::read_to_string(e.path())
                    .map_err(|err| err.to_string())
                    .and_then(|t| parse_format(&t));
                Some((name, parsed))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Metadata files beside a named event (`<name>.unit`, `.scale`, ...).
fn is_metadata(name: &str) -> bool {
    [".unit", ".scale", ".per-pkg", ".snapshot"]
        .iter()
        .any(|s| name.ends_with(s))
}

/// One named event of a PMU: its name, its terms text, unit and scale.
#[derive(Clone, Debug)]
pub(crate) struct NamedEvent {
    pub name: String,
    pub terms: String,
    pub unit: String,
    pub scale: f64,
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// The PMU's named events (`events/*`), sorted by name.
pub(crate) fn named_events(roots: &Roots, pmu: &str) -> Vec<NamedEvent> {
    let dir = pmu_dir(roots, pmu).join("events");
    let mut out: Vec<NamedEvent> = match fs::read_dir(&dir) {
        Ok(d) => d
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !is_metadata(n))
            .filter_map(|n| named_event(roots, pmu, &n))
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// One named event of a PMU, if it exists.
pub(crate) fn named_event(roots: &Roots, pmu: &str, name: &str) -> Option<NamedEvent> {
    if name.is_empty() || name.contains('/') || is_metadata(name) {
        return None;
    }
    let dir = pmu_dir(roots, pmu).join("events");
    let terms = read_trimmed(&dir.join(name))?;
    let unit = read_trimmed(&dir.join(format!("{name}.unit"))).unwrap_or_default();
    let scale = read_trimmed(&dir.join(format!("{name}.scale")))
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(1.0);
    Some(NamedEvent {
        name: name.to_string(),
        terms,
        unit,
        scale,
    })
}

/// The mounted tracefs: the first root that has an `events` directory.
pub(crate) fn tracefs(roots: &Roots) -> Result<PathBuf, String> {
    for root in &roots.tracefs {
        if root.join("events").is_dir() {
            return Ok(root.clone());
        }
    }
    let tried: Vec<String> = roots
        .tracefs
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    Err(format!(
        "tracefs not mounted (looked in {}; as root: `mount -t tracefs nodev /sys/kernel/tracing`)",
        tried.join(", ")
    ))
}

/// A tracepoint's id from `<tracefs>/events/<sys>/<name>/id`.
pub(crate) fn tracepoint_id(tracefs: &Path, sys: &str, name: &str) -> Option<u64> {
    if [sys, name]
        .iter()
        .any(|s| s.is_empty() || s.contains('/') || s.starts_with('.'))
    {
        return None;
    }
    let text = fs::read_to_string(tracefs.join("events").join(sys).join(name).join("id")).ok()?;
    text.trim().parse().ok()
}

/// Tracepoint subsystems with their tracepoint names, sorted.
pub(crate) fn tracepoints(tracefs: &Path) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let Ok(dir) = fs::read_dir(tracefs.join("events")) else {
        return out;
    };
    for sys in dir.filter_map(|e| e.ok()) {
        if !sys.path().is_dir() {
            continue;
        }
        let Ok(sys_name) = sys.file_name().into_string() else {
            continue;
        };
        let Ok(points) = fs::read_dir(sys.path()) else {
            continue;
        };
        let mut names: Vec<String> = points
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("id").is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        if names.is_empty() {
            continue;
        }
        names.sort();
        out.push((sys_name, names));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_split_ranges() {
        let f = parse_format("config:0-7,32-35\n").unwrap();
        assert_eq!(f.word, Word::Config);
        assert_eq!(f.width(), 12);
        let mut w = [0u64; 4];
        f.encode(0xabc, &mut w).unwrap();
        assert_eq!(w[0], 0xbc | (0xa << 32));
        assert!(f.encode(0x1000, &mut [0; 4]).is_err());
    }

    #[test]
    fn format_single_bit_and_full_word() {
        let f = parse_format("config:23").unwrap();
        let mut w = [0u64; 4];
        f.encode(1, &mut w).unwrap();
        assert_eq!(w[0], 1 << 23);
        assert!(f.encode(2, &mut w).is_err());
        let f = parse_format("config1:0-63").unwrap();
        f.encode(u64::MAX, &mut w).unwrap();
        assert_eq!(w[1], u64::MAX);
    }

    #[test]
    fn format_errors() {
        assert!(parse_format("config").is_err());
        assert!(parse_format("config7:0-3").is_err());
        assert!(parse_format("config:9-3").is_err());
        assert!(parse_format("config:0-64").is_err());
        assert!(parse_format("config:x").is_err());
    }

    #[test]
    fn terms_and_numbers() {
        let t = parse_terms("event=0x3c, umask=1,inv");
        assert_eq!(t.len(), 3);
        assert_eq!(t[2].value, None);
        assert_eq!(parse_number("0x3C"), Some(0x3c));
        assert_eq!(parse_number("17"), Some(17));
        assert_eq!(parse_number("0xg"), None);
    }
}
