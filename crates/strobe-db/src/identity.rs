//! Process identity: the UUIDv7 that names a process's tables.
//!
//! Owns building the per-process UUID (seeded from machine id, pid, ppid and
//! process start time), its dashed `guid` form and its `_`-joined table
//! suffix, and reading the node description (uname, machine id). It must
//! never touch a database.

use std::fmt::Write as _;

/// The identity of one process database: a UUIDv7.
///
/// The 48-bit time field is the process start time in Unix milliseconds; the
/// 74 random bits are a hash of machine id, pid, ppid and the start time in
/// nanoseconds, so the same process always gets the same uuid and two
/// processes (even with a recycled pid) get different ones.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProcessUuid {
    bytes: [u8; 16],
}

/// 64-bit FNV-1a followed by a splitmix64 finaliser. A hash, not a random
/// stream: its values are stored in every database (the uuid, the node's
/// `hash`), so it must never change.
fn mix(seed: u64, data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

impl ProcessUuid {
    /// Builds the uuid of a process. `start_unix_ns` is the process start
    /// time on the realtime clock (Unix epoch, nanoseconds).
    pub fn new(machine_id: &str, pid: u32, ppid: u32, start_unix_ns: u64) -> ProcessUuid {
        let mut seed = Vec::with_capacity(machine_id.len() + 16);
        seed.extend_from_slice(machine_id.as_bytes());
        seed.extend_from_slice(&pid.to_le_bytes());
        seed.extend_from_slice(&ppid.to_le_bytes());
        seed.extend_from_slice(&start_unix_ns.to_le_bytes());
        let a = mix(0x5354_524f_4245_0001, &seed);
        let b = mix(0x5354_524f_4245_0002, &seed);
        let ms = start_unix_ns / 1_000_000;
        let mut bytes = [0u8; 16];
        bytes[0..6].copy_from_slice(&ms.to_be_bytes()[2..8]);
        bytes[6..14].copy_from_slice(&a.to_be_bytes());
        bytes[14..16].copy_from_slice(&b.to_be_bytes()[0..2]);
        bytes[6] = 0x70 | (bytes[6] & 0x0f); // version 7
        bytes[8] = 0x80 | (bytes[8] & 0x3f); // RFC 4122 variant
        ProcessUuid { bytes }
    }

    /// The raw 16 bytes.
    pub fn bytes(&self) -> [u8; 16] {
        self.bytes
    }

    /// The dashed form, e.g. `0190c3a1-…`: the `guid` column's value.
    pub fn guid(&self) -> String {
        let mut s = String::with_capacity(36);
        for (i, b) in self.bytes.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                s.push('-');
            }
            let _ = write!(s, "{b:02x}");
        }
        s
    }

    /// The table suffix: `_` + the guid with `-` replaced by `_`.
    pub fn suffix(&self) -> String {
        format!("_{}", self.guid().replace('-', "_"))
    }
}

/// Converts a table suffix (`_0190…_…`) back to its dashed guid.
pub fn guid_from_suffix(suffix: &str) -> String {
    suffix.trim_start_matches('_').replace('_', "-")
}

/// Checks that `s` has the shape of a table suffix (`_` + 32 hex digits in
/// 8-4-4-4-12 groups joined by `_`), so it can be pasted into SQL safely.
pub fn is_suffix(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('_') else {
        return false;
    };
    let groups: Vec<&str> = rest.split('_').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8usize, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|c| c.is_ascii_hexdigit()))
}

/// Description of the machine a process ran on (`rocpd_info_node`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeInfo {
    /// `/etc/machine-id` (or a hash of the hostname when absent).
    pub machine_id: String,
    /// `uname -s`.
    pub system_name: String,
    /// `uname -n`.
    pub hostname: String,
    /// `uname -r`.
    pub release: String,
    /// `uname -v`.
    pub version: String,
    /// `uname -m`.
    pub hardware_name: String,
    /// NIS domain name from uname.
    pub domain_name: String,
}

fn field(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl NodeInfo {
    /// Reads this machine's description from `uname(2)` and
    /// `/etc/machine-id` (falling back to `/var/lib/dbus/machine-id`, then to
    /// the hostname).
    pub fn detect() -> NodeInfo {
        // SAFETY: utsname is plain old data; zeroed is a valid value and
        // uname fills it completely or fails leaving it zeroed.
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: `u` is a valid, writable utsname.
        let ok = unsafe { libc::uname(&mut u) } == 0;
        let mut n = NodeInfo::default();
        if ok {
            n.system_name = field(&u.sysname);
            n.hostname = field(&u.nodename);
            n.release = field(&u.release);
            n.version = field(&u.version);
            n.hardware_name = field(&u.machine);
            n.domain_name = field(&u.domainname);
        }
        n.machine_id = ["/etc/machine-id", "/var/lib/dbus/machine-id"]
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("{:016x}", mix(0, n.hostname.as_bytes())));
        n
    }

    /// The `hash` column: a 63-bit hash of the machine id.
    pub fn hash(&self) -> i64 {
        (mix(7, self.machine_id.as_bytes()) >> 1) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_is_v7_and_deterministic() {
        let a = ProcessUuid::new("abc", 10, 1, 1_700_000_000_123_456_789);
        let b = ProcessUuid::new("abc", 10, 1, 1_700_000_000_123_456_789);
        let c = ProcessUuid::new("abc", 11, 1, 1_700_000_000_123_456_789);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let g = a.guid();
        assert_eq!(g.len(), 36);
        assert_eq!(&g[14..15], "7");
        assert!(matches!(&g[19..20], "8" | "9" | "a" | "b"));
        assert!(is_suffix(&a.suffix()));
        assert_eq!(guid_from_suffix(&a.suffix()), g);
        // time field holds the start time in ms
        let ms = u64::from_str_radix(&g[0..8], 16).unwrap() << 16
            | u64::from_str_radix(&g[9..13], 16).unwrap();
        assert_eq!(ms, 1_700_000_000_123);
        assert!(!is_suffix("_x; DROP TABLE"));
    }

    #[test]
    fn node_detect_has_hostname() {
        let n = NodeInfo::detect();
        assert!(!n.machine_id.is_empty());
        assert_eq!(n.system_name, "Linux");
    }
}
