//! How many counters a PMU schedules at once (its general-purpose counter
//! slots), which decides how `counting` splits events into groups.
//!
//! Owns the lookup order, documented on [`super::pmu_slots`]: the
//! `STROBE_PMU_SLOTS` override, a `caps/num_counters` file where a kernel
//! publishes one, the CPU's own description (CPUID on x86-64), then a
//! table. Never opens a perf event: a guess that is too high only means
//! the kernel multiplexes a group it cannot schedule, which the
//! enabled/running times show.

use super::sysfs::{self, Roots};
use std::fs;

/// PMUs whose events live in the kernel's software context: they take no
/// hardware counter and are never multiplexed.
pub(crate) const SOFTWARE_CONTEXT_PMUS: &[&str] =
    &["software", "tracepoint", "kprobe", "uprobe", "msr"];

/// Whether `pmu` is a CPU core PMU (the one `cycles` and `rNNNN` go to).
pub(crate) fn is_core_pmu(pmu: &str) -> bool {
    matches!(pmu, "cpu" | "cpu_core" | "cpu_atom" | "cpu_lowpower")
        || pmu.starts_with("armv8")
        || pmu.starts_with("armv7")
        || pmu.starts_with("arm_cortex")
}

/// The core PMU among those `roots` lists, if there is one (where perf's
/// hardware events go).
pub(crate) fn core_pmu_in(roots: &Roots) -> Option<String> {
    sysfs::pmus(roots).into_iter().find(|p| is_core_pmu(p))
}

/// Parses `STROBE_PMU_SLOTS`: a number for every PMU, or `pmu=n` pairs
/// separated by commas (a bare number among them is the default).
pub(crate) fn env_override(value: &str, pmu: &str) -> Option<usize> {
    let mut default = None;
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some((name, n)) if name.trim() == pmu => return n.trim().parse().ok(),
            Some(_) => {}
            None => default = part.parse().ok(),
        }
    }
    default
}

/// The lookup described on [`super::pmu_slots`].
pub(crate) fn pmu_slots_in(pmu: &str, roots: &Roots) -> Option<usize> {
    if let Ok(v) = std::env::var("STROBE_PMU_SLOTS") {
        if let Some(n) = env_override(&v, pmu) {
            return Some(n.max(1));
        }
    }
    if SOFTWARE_CONTEXT_PMUS.contains(&pmu) {
        return None;
    }
    let caps = sysfs::pmu_dir(roots, pmu).join("caps");
    for file in ["num_counters", "num_counters_gp"] {
        if let Ok(text) = fs::read_to_string(caps.join(file)) {
            if let Ok(n) = text.trim().parse::<usize>() {
                if n > 0 {
                    return Some(n);
                }
            }
        }
    }
    if !is_core_pmu(pmu) {
        return None;
    }
    let n = cpu_counters().unwrap_or(if pmu.starts_with("arm") { 6 } else { 4 });
    Some(n.max(1))
}

/// General-purpose counters of this logical CPU as the CPU describes them,
/// less one the NMI watchdog holds on AMD.
#[cfg(target_arch = "x86_64")]
fn cpu_counters() -> Option<usize> {
    use std::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86-64 processor; leaf 0 is always valid.
    #[allow(unused_unsafe)]
    let leaf0 = unsafe { __cpuid(0) };
    let vendor: Vec<u8> = [leaf0.ebx, leaf0.edx, leaf0.ecx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect();
    match &vendor[..] {
        b"GenuineIntel" => {
            if leaf0.eax < 0xa {
                return None;
            }
            // SAFETY: leaf 0xA is within the maximum basic leaf checked above.
            #[allow(unused_unsafe)]
            let a = unsafe { __cpuid(0xa) };
            // EAX[7:0] architectural perfmon version, EAX[15:8] counters
            // per logical processor (4 with Hyper-Threading on most cores,
            // 8 without).
            let version = a.eax & 0xff;
            let n = ((a.eax >> 8) & 0xff) as usize;
            (version > 0 && n > 0).then_some(n)
        }
        b"AuthenticAMD" | b"HygonGenuine" => {
            // SAFETY: leaf 0x80000000 is valid on every x86-64 processor.
            #[allow(unused_unsafe)]
            let ext = unsafe { __cpuid(0x8000_0000) };
            let mut n = 4;
            if ext.eax >= 0x8000_0001 {
                // SAFETY: within the maximum extended leaf checked above.
                #[allow(unused_unsafe)]
                let e1 = unsafe { __cpuid(0x8000_0001) };
                if e1.ecx & (1 << 23) != 0 {
                    n = 6; // PerfCtrExtCore
                }
            }
            if ext.eax >= 0x8000_0022 {
                // SAFETY: within the maximum extended leaf checked above.
                #[allow(unused_unsafe)]
                let e22 = unsafe { __cpuid(0x8000_0022) };
                let v2 = (e22.ebx & 0xf) as usize;
                if v2 > 0 {
                    n = v2; // PerfMonV2 NumPerfCtrCore
                }
            }
            let watchdog = fs::read_to_string("/proc/sys/kernel/nmi_watchdog")
                .map(|s| s.trim() == "1")
                .unwrap_or(false);
            Some(if watchdog && n > 1 { n - 1 } else { n })
        }
        _ => None,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_counters() -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_forms() {
        assert_eq!(env_override("2", "cpu"), Some(2));
        assert_eq!(env_override("cpu=3,software=5", "software"), Some(5));
        assert_eq!(env_override("cpu=3", "software"), None);
        assert_eq!(env_override("4, cpu=3", "msr"), Some(4));
        assert_eq!(env_override("x", "cpu"), None);
    }
}
