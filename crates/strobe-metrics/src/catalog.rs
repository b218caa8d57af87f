//! What can be counted on this machine, and how a counter's name becomes
//! something [`crate::counting`] opens.
//!
//! Owns the counter catalog ([`catalog`]): perf's generic hardware,
//! hardware-cache and software events, every named event of every PMU in
//! `/sys/bus/event_source/devices/*/events/*`, tracepoints (summarised;
//! [`catalog_tracepoints`] lists them), rusage fields, procfs/sysfs values
//! and `duration_time`, each with its availability *probed* here (a perf
//! event is opened on this process and closed; a tracepoint needs its
//! tracefs `id` file; a procfs value needs its file). Owns the parser of
//! counter names ([`resolve`]): catalog names (perf names
//! case-insensitively, perf's aliases), `pmu/terms/` mapped through the
//! PMU's sysfs format bit layouts, `pmu/alias/`, `rNNNN`, `sys:name`,
//! `rusage/<field>/`, `proc/<field>/`, `software/<name>/`, and perf's
//! `:u` / `:k` modifiers. Owns [`pmu_slots`]: how many counters a PMU
//! schedules at once.
//!
//! Never keeps a perf event open past a probe, never writes a file, never
//! prints. Resolving a name never probes: `cycles` resolves on a machine
//! without a PMU, and [`crate::counting::Counters::open`] then says why it
//! cannot be counted.
//!
//! # Names
//!
//! | written | kind | example |
//! |---|---|---|
//! | perf hardware name or alias | [`CounterKind::Hardware`] | `cycles`, `cpu-cycles`, `branch-instructions` |
//! | perf cache name | [`CounterKind::HardwareCache`] | `L1-dcache-load-misses`, `LLC-loads`, `dTLB-load-misses` |
//! | perf software name or alias | [`CounterKind::Software`] | `task-clock`, `cs`, `faults`, `software/page-faults/` |
//! | `pmu/term=value,.../` | [`CounterKind::Raw`] | `cpu/event=0x3c,umask=0x0/`, `msr/event=0x0/` |
//! | `pmu/name/` (a file in the PMU's `events/`) | [`CounterKind::Raw`] | `msr/tsc/`, `cpu/mem-loads/` |
//! | `r` + hexadecimal | [`CounterKind::Raw`] | `r003c` (`PERF_TYPE_RAW`, config 0x3c) |
//! | `subsystem:tracepoint` | [`CounterKind::Tracepoint`] | `sched:sched_switch` |
//! | `rusage/<field>/` or the bare field | [`CounterKind::Rusage`] | `rusage/user-time/`, `max-rss` |
//! | `proc/<field>/` or the bare field | [`CounterKind::Proc`] | `proc/rss/`, `threads` |
//! | `duration_time` | [`CounterKind::Tool`] | wall-clock ns while the counters are enabled |
//!
//! A perf event may end in `:u` (user space only), `:k` (kernel only) or
//! `:uk`; after a PMU form the modifier follows the last slash
//! (`cpu/event=0x3c/u`). Without one, the kernel is counted too where
//! `perf_event_paranoid` (or root) allows it, as `perf stat` does.
//!
//! Terms of `pmu/terms/`: every file of `<pmu>/format/` (`event`,
//! `umask`, `cmask`, `inv`, `edge`, `any`, ...; a term without a value
//! is 1) plus `config`, `config1`, `config2`, `config3`, which set those
//! words directly. Terms are ORed into the words in order. `name=` is the
//! counter's display name; `period=` is ignored (strobe counts, never
//! samples). A named event (`pmu/alias/`) may be followed by more terms
//! (`cpu/alias,cmask=2/`), which fill the alias's `?` placeholders.

pub(crate) mod counter;
mod parse;
mod probe;
pub(crate) mod slots;
pub(crate) mod sysfs;
mod tables;

pub use counter::{
    CounterInfo, CounterKind, CounterSpec, PerfEvent, ProcField, RusageField, Source, ToolCounter,
};
pub use probe::probe;
pub use sysfs::Roots;

/// Why a counter name was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// No counter has this name.
    #[error("unknown event `{name}`{}; `strobe avail --counters` lists them", suggest(.suggestion))]
    Unknown {
        /// What was written.
        name: String,
        /// The nearest known name, if one is close.
        suggestion: Option<String>,
    },
    /// `pmu/.../` names a PMU that does not exist.
    #[error("unknown PMU `{pmu}` in `{spec}`{}; PMUs here: {}", suggest(.suggestion), list(.known))]
    UnknownPmu {
        /// The whole spec.
        spec: String,
        /// The PMU written.
        pmu: String,
        /// The nearest PMU name.
        suggestion: Option<String>,
        /// The PMUs that exist.
        known: Vec<String>,
    },
    /// A term the PMU has no format for (or a named event it lacks).
    #[error("`{term}` in `{spec}` is neither a format term nor a named event of PMU `{pmu}`{}; terms: {}", suggest(.suggestion), list(.known))]
    UnknownTerm {
        /// The whole spec.
        spec: String,
        /// The PMU.
        pmu: String,
        /// The term written.
        term: String,
        /// The nearest term or event name.
        suggestion: Option<String>,
        /// The PMU's format terms (and config, config1, config2, config3).
        known: Vec<String>,
    },
    /// A term's value is not a number, does not fit, or is missing.
    #[error("bad value for `{term}` in `{spec}`: {reason}")]
    BadValue {
        /// The whole spec.
        spec: String,
        /// The term.
        term: String,
        /// What is wrong.
        reason: String,
    },
    /// A tracepoint that cannot be found (or tracefs that is not there).
    #[error("tracepoint `{spec}`: {reason}")]
    Tracepoint {
        /// The whole spec.
        spec: String,
        /// What is wrong, with the nearest names.
        reason: String,
    },
    /// The text is not any form the parser knows.
    #[error("cannot read event `{spec}`: {reason}")]
    Syntax {
        /// The whole spec.
        spec: String,
        /// What was expected.
        reason: String,
    },
    /// A sysfs file the PMU should have is missing or unreadable.
    #[error("PMU `{pmu}`: {reason}")]
    Sysfs {
        /// The PMU.
        pmu: String,
        /// What could not be read.
        reason: String,
    },
}

fn suggest(s: &Option<String>) -> String {
    match s {
        Some(s) => format!("; did you mean `{s}`?"),
        None => String::new(),
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        return "none".to_string();
    }
    const MAX: usize = 24;
    let mut s = items
        .iter()
        .take(MAX)
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > MAX {
        s.push_str(&format!(" and {} more", items.len() - MAX));
    }
    s
}

/// Every counter this machine knows of, with its availability probed for
/// the calling process: see the module documentation for what is listed.
/// Tracepoints are one entry (`sys:name`) saying how many subsystems and
/// tracepoints tracefs has, probed by opening one of them;
/// [`catalog_tracepoints`] lists them all.
pub fn catalog() -> Vec<CounterInfo> {
    catalog_in(&Roots::system())
}

/// [`catalog`] with the PMU directory and tracefs taken from `roots`.
pub fn catalog_in(roots: &Roots) -> Vec<CounterInfo> {
    probe::catalog_in(roots)
}

/// Every tracepoint as `sys:name`, sorted; an error saying why when
/// tracefs is not mounted.
pub fn catalog_tracepoints() -> Result<Vec<String>, CatalogError> {
    catalog_tracepoints_in(&Roots::system())
}

/// [`catalog_tracepoints`] with tracefs taken from `roots`.
pub fn catalog_tracepoints_in(roots: &Roots) -> Result<Vec<String>, CatalogError> {
    let dir = sysfs::tracefs(roots).map_err(|reason| CatalogError::Tracepoint {
        spec: "sys:name".into(),
        reason,
    })?;
    Ok(sysfs::tracepoints(&dir)
        .into_iter()
        .flat_map(|(sys, names)| names.into_iter().map(move |n| format!("{sys}:{n}")))
        .collect())
}

/// Parses one counter name (see the module documentation for the forms).
/// Never probes: a name that parses resolves even when this machine
/// cannot count it.
pub fn resolve(spec: &str) -> Result<CounterSpec, CatalogError> {
    resolve_in(spec, &Roots::system())
}

/// [`resolve`] with the PMU directory and tracefs taken from `roots`.
pub fn resolve_in(spec: &str, roots: &Roots) -> Result<CounterSpec, CatalogError> {
    parse::resolve(spec, roots)
}

/// Parses a comma-separated list of counter names, as `perf stat -e`
/// takes it: commas inside `pmu/.../` separate terms, not counters.
pub fn resolve_list(list: &str) -> Result<Vec<CounterSpec>, CatalogError> {
    let roots = Roots::system();
    split_list(list)
        .into_iter()
        .map(|s| parse::resolve(&s, &roots))
        .collect()
}

/// Splits a `-e` list at the commas that are outside `pmu/.../`.
pub fn split_list(list: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut inside = false;
    for c in list.chars() {
        match c {
            '/' => {
                inside = !inside;
                cur.push(c);
            }
            ',' if !inside => {
                if !cur.trim().is_empty() {
                    out.push(cur.trim().to_string());
                }
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// How many counters PMU `pmu` schedules at once, which is how many
/// events `counting` puts in one of its groups. In order:
///
/// 1. `STROBE_PMU_SLOTS`: a number for every PMU (software ones
///    included, so tests can force group splitting), or `pmu=n,...`
///    pairs (a bare number among them is the default).
/// 2. `None` for PMUs whose events live in the kernel's software context
///    (`software`, `tracepoint`, `kprobe`, `uprobe`, `msr`): they take no
///    hardware counter and are never multiplexed.
/// 3. `<pmu>/caps/num_counters` (or `num_counters_gp`) where a kernel
///    publishes one. x86 kernels do not: their `caps/` holds `pmu_name`,
///    `max_precise`, `branches`.
/// 4. For a CPU core PMU (`cpu`, `cpu_core`, `cpu_atom`, `armv8_*`...):
///    on x86-64 the CPU's own count, from CPUID: Intel leaf 0xA
///    (general-purpose counters per logical CPU: usually 4 with
///    Hyper-Threading on, 8 with it off; fixed counters for cycles,
///    instructions and ref-cycles are extra and not counted here), AMD
///    `PerfMonV2` (leaf 0x80000022) or `PerfCtrExtCore` (6) or the legacy
///    4, less one when the NMI watchdog is on (it holds a counter on
///    AMD). Otherwise 6 for Arm and 4 for anything else.
/// 5. `None` for other PMUs (uncore, power...): strobe does not know
///    their size and puts their events in one group per PMU.
///
/// A value too high makes the kernel multiplex the group (the
/// enabled/running times show it); too low only makes more groups.
pub fn pmu_slots(pmu: &str) -> Option<usize> {
    slots::pmu_slots_in(pmu, &Roots::system())
}

/// [`pmu_slots`] with the PMU directory taken from `roots`.
pub fn pmu_slots_in(pmu: &str, roots: &Roots) -> Option<usize> {
    slots::pmu_slots_in(pmu, roots)
}

/// The name of the core PMU on this machine (`cpu`, `cpu_core`, an
/// `armv8_*` one), if it has one: where perf's hardware events go.
pub fn core_pmu() -> Option<String> {
    core_pmu_in(&Roots::system())
}

/// [`core_pmu`] with the PMU directory taken from `roots`.
pub fn core_pmu_in(roots: &Roots) -> Option<String> {
    slots::core_pmu_in(roots)
}

/// Whether events of `pmu` live in the kernel's software context (take
/// no hardware counter, are never multiplexed).
pub fn is_software_context_pmu(pmu: &str) -> bool {
    slots::SOFTWARE_CONTEXT_PMUS.contains(&pmu)
}

/// Edit distance (insertions, deletions, substitutions and swaps of two
/// neighbours), case-insensitive, for "did you mean".
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

/// The candidate nearest to `name` when it is close enough to be a typo.
pub(crate) fn nearest<'a, I: IntoIterator<Item = &'a str>>(
    name: &str,
    candidates: I,
) -> Option<String> {
    let limit = (name.chars().count() / 3).clamp(1, 3);
    candidates
        .into_iter()
        .map(|c| (distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_splitting_keeps_pmu_terms() {
        assert_eq!(
            split_list("task-clock, cpu/event=0x3c,umask=0x1/u,cycles"),
            vec!["task-clock", "cpu/event=0x3c,umask=0x1/u", "cycles"]
        );
        assert!(split_list(" , ").is_empty());
    }

    #[test]
    fn typo_distance() {
        assert_eq!(distance("cyles", "cycles"), 1);
        assert_eq!(distance("shced", "sched"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(
            nearest("cyles", ["cycles", "instructions"]),
            Some("cycles".into())
        );
        assert_eq!(nearest("zzzzzz", ["cycles"]), None);
    }
}
