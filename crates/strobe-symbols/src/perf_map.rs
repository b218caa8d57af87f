//! Perf maps: the names JIT compilers give the code they generate.
//!
//! A JIT (Node's `--perf-basic-prof`, Python's `-X perf`, …) writes
//! `/tmp/perf-<pid>.map`, lines `START SIZE NAME` (hex), as perf reads
//! them. Owns reading such a map (streamed, any size), telling whether a
//! map can be the one of a process (its modification time within the
//! process's lifetime: pids are reused), naming addresses from its
//! entries, and removing a map strobe caused. Never trusts a line: one
//! that does not parse is skipped.

use std::collections::HashSet;
use std::io::BufRead;
use std::rc::Rc;

/// One perf-map entry: code at `start..start + size` (absolute addresses
/// in the process) is the function `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// First address.
    pub start: u64,
    /// Length in bytes.
    pub size: u64,
    /// Function name as the JIT wrote it.
    pub name: String,
}

impl Entry {
    /// One line of a perf map (`START SIZE NAME`, hex, with or without
    /// `0x`); `None` for anything else.
    pub fn parse(line: &str) -> Option<Entry> {
        let mut parts = line.trim_end_matches(['\n', '\r']).splitn(3, ' ');
        let start = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
        let size = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
        let name = parts.next()?.trim();
        (!name.is_empty()).then(|| Entry {
            start,
            size,
            name: name.to_string(),
        })
    }
}

/// The perf map of process `pid`.
pub fn path(pid: i64) -> String {
    format!("/tmp/perf-{pid}.map")
}

/// A process's lifetime on the realtime clock (Unix epoch ns), as far as
/// known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lifetime {
    /// When it started.
    pub start_unix_ns: Option<i128>,
    /// When it ended.
    pub end_unix_ns: Option<i128>,
}

/// How far a perf map's modification time may lie outside its process's
/// lifetime (clock steps, coarse timestamps).
const MAP_TIME_SLACK_NS: i128 = 2_000_000_000;

/// Whether the perf map `meta` describes can be the one of a process that
/// lived `lifetime`: a map last written before the process started belongs
/// to an earlier process with the same pid, one written after it ended to
/// a later one. Unknown times do not refuse it.
pub fn within_lifetime(meta: &std::fs::Metadata, lifetime: &Lifetime) -> bool {
    let Some(mtime) = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128)
    else {
        return true;
    };
    lifetime
        .start_unix_ns
        .is_none_or(|s| mtime >= s - MAP_TIME_SLACK_NS)
        && lifetime
            .end_unix_ns
            .is_none_or(|e| mtime <= e + MAP_TIME_SLACK_NS)
}

/// The entries of process `pid`'s perf map, in the order written, when
/// the map exists and was written within the process's `lifetime`.
pub fn read(pid: i64, lifetime: &Lifetime) -> Option<impl Iterator<Item = Entry>> {
    let file = std::fs::File::open(path(pid)).ok()?;
    if !file.metadata().is_ok_and(|m| within_lifetime(&m, lifetime)) {
        return None;
    }
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    Some(std::iter::from_fn(move || loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {
                if let Some(e) = Entry::parse(&String::from_utf8_lossy(&line)) {
                    return Some(e);
                }
            }
        }
    }))
}

/// Deletes process `pid`'s perf map when it was written within the
/// process's `lifetime`; whether one was deleted.
pub fn remove(pid: i64, lifetime: &Lifetime) -> bool {
    let map = path(pid);
    std::fs::metadata(&map).is_ok_and(|m| within_lifetime(&m, lifetime))
        && std::fs::remove_file(&map).is_ok()
}

/// Names `pcs` (absolute) from perf-map `entries` in the order written (a
/// later entry at the same address wins: the code was regenerated): each
/// pc gets the covering entry with the highest start. Returns one name per
/// pc and the entries that gave them, each once. Memory grows with the
/// pcs, not with the entries, so a map of any size streams through.
pub fn name_pcs(
    entries: impl Iterator<Item = Entry>,
    pcs: &[u64],
) -> (Vec<Option<String>>, Vec<Entry>) {
    let mut sorted: Vec<u64> = pcs.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut best: Vec<Option<Rc<Entry>>> = vec![None; sorted.len()];
    for entry in entries {
        let end = entry.start.saturating_add(entry.size);
        let first = sorted.partition_point(|&pc| pc < entry.start);
        let entry = Rc::new(entry);
        for (i, _) in sorted[first..]
            .iter()
            .enumerate()
            .take_while(|&(_, &pc)| pc < end)
        {
            let slot = &mut best[first + i];
            if slot.as_ref().is_none_or(|b| entry.start >= b.start) {
                *slot = Some(Rc::clone(&entry));
            }
        }
    }
    let names = pcs
        .iter()
        .map(|pc| {
            let i = sorted.binary_search(pc).ok()?;
            Some(best[i].as_ref()?.name.clone())
        })
        .collect();
    let mut used: Vec<Entry> = Vec::new();
    let mut seen = HashSet::new();
    for b in best.iter().flatten() {
        if seen.insert(Rc::as_ptr(b)) {
            used.push(Entry::clone(b));
        }
    }
    (names, used)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_as_perf_reads_them() {
        assert_eq!(
            Entry::parse("7f0000001000 40 jitted_loop\n"),
            Some(Entry {
                start: 0x7f00_0000_1000,
                size: 0x40,
                name: "jitted_loop".into()
            })
        );
        assert_eq!(
            Entry::parse("0x2000 0x10 other fn (with spaces)")
                .unwrap()
                .name,
            "other fn (with spaces)"
        );
        for bad in ["", "not a line", "1000 10", "1000 10 ", "zz 10 f"] {
            assert_eq!(Entry::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_latest_covering_entry_names_a_pc_and_only_used_entries_are_kept() {
        let entry = |start, size, name: &str| Entry {
            start,
            size,
            name: name.into(),
        };
        let entries = vec![
            entry(0x1000, 0x40, "old_code"),
            entry(0x1000, 0x40, "jitted_loop"),
            entry(0x2000, 0x10, "other"),
            entry(0x9000, 0x10, "unsampled"),
        ];
        let (names, used) = name_pcs(entries.into_iter(), &[0x1008, 0x2004, 0x3000, 0x1008]);
        assert_eq!(
            names,
            [
                Some("jitted_loop".to_string()),
                Some("other".to_string()),
                None,
                Some("jitted_loop".to_string())
            ]
        );
        assert_eq!(
            used,
            [
                entry(0x1000, 0x40, "jitted_loop"),
                entry(0x2000, 0x10, "other")
            ]
        );
    }

    #[test]
    fn a_map_outside_the_lifetime_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("map");
        std::fs::write(&file, "1000 10 f\n").unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i128;
        let hour = 3_600_000_000_000;
        let during = Lifetime {
            start_unix_ns: Some(now - hour),
            end_unix_ns: Some(now + hour),
        };
        assert!(within_lifetime(&meta, &during));
        assert!(within_lifetime(&meta, &Lifetime::default()));
        let later = Lifetime {
            start_unix_ns: Some(now + hour),
            end_unix_ns: None,
        };
        assert!(!within_lifetime(&meta, &later));
        let earlier = Lifetime {
            start_unix_ns: None,
            end_unix_ns: Some(now - hour),
        };
        assert!(!within_lifetime(&meta, &earlier));
    }
}
