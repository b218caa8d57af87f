//! The architecture names of this machine, which choose the sections of
//! an XML definitions file that apply.
//!
//! Owns reading `std::env::consts::ARCH` and `/proc/cpuinfo` into those
//! names. It must never parse definitions nor fail: an unreadable
//! `/proc/cpuinfo` just gives fewer names.

/// The architecture names of this machine, for choosing XML sections
/// (see the module documentation).
pub fn machine_archs() -> Vec<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    archs_from_cpuinfo(std::env::consts::ARCH, &cpuinfo)
}

/// The architecture names for `arch` (as in `std::env::consts::ARCH`)
/// and the text of `/proc/cpuinfo`.
pub fn archs_from_cpuinfo(arch: &str, cpuinfo: &str) -> Vec<String> {
    let mut out = vec![arch.to_string()];
    match arch {
        "x86_64" => out.push("amd64".to_string()),
        "aarch64" => out.push("arm64".to_string()),
        _ => {}
    }
    let field = |key: &str| -> Option<&str> {
        cpuinfo
            .lines()
            .take_while(|l| !l.trim().is_empty())
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim())
            })
    };
    let number = |key: &str| -> Option<u32> { field(key)?.parse().ok() };
    match field("vendor_id") {
        Some("AuthenticAMD") => {
            out.push("amd".to_string());
            let gen = match (number("cpu family"), number("model")) {
                (Some(0x17), Some(m)) if m >= 0x30 => Some("zen2"),
                (Some(0x17), Some(_)) => Some("zen1"),
                (Some(0x19), Some(m))
                    if (0x10..=0x1f).contains(&m)
                        || (0x60..=0x7f).contains(&m)
                        || (0xa0..=0xaf).contains(&m) =>
                {
                    Some("zen4")
                }
                (Some(0x19), Some(_)) => Some("zen3"),
                (Some(0x1a), Some(_)) => Some("zen5"),
                _ => None,
            };
            if let Some(gen) = gen {
                out.push("zen".to_string());
                out.push(gen.to_string());
            }
        }
        Some("GenuineIntel") => out.push("intel".to_string()),
        _ => {}
    }
    out
}
