//! Availability probes and the assembly of the catalog listing.
//!
//! Owns deciding, for each counter, whether it can be counted for the
//! calling process: a perf event is opened on the calling thread and
//! closed at once; a tracepoint needs tracefs and is probed by opening
//! one; a procfs/sysfs value needs its file; rusage and tool counters
//! always work. Never keeps anything open and never changes the system
//! (it does not mount tracefs, it says that it is not mounted).

use super::parse::{proc_spec, resolve, rusage_spec, tool_spec};
use super::tables::{self, TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_SOFTWARE};
use super::{sysfs, CounterInfo, CounterKind, CounterSpec, PerfEvent, ProcField, Roots, Source};
use crate::counting::perf;
use std::path::Path;

/// Whether `spec` can be counted for the calling process; the reason
/// when not. Perf events are opened on the calling thread and closed.
pub fn probe(spec: &CounterSpec) -> Result<(), String> {
    match &spec.source {
        Source::Perf(ev) => perf::probe(ev, spec.kind),
        Source::Rusage(_) | Source::Tool(_) => Ok(()),
        Source::Proc(f) => probe_proc(*f),
    }
}

fn probe_proc(f: ProcField) -> Result<(), String> {
    let need = |path: &str| {
        if Path::new(path).exists() {
            Ok(())
        } else {
            Err(format!("{path} does not exist on this kernel"))
        }
    };
    match f {
        ProcField::ReadBytes | ProcField::WriteBytes => need("/proc/self/io")
            .map_err(|e| format!("{e} (built without CONFIG_TASK_IO_ACCOUNTING)")),
        ProcField::CpuFrequency => {
            if Path::new("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq").exists() {
                return Ok(());
            }
            let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
            if cpuinfo.lines().any(|l| l.starts_with("cpu MHz")) {
                Ok(())
            } else {
                Err("no cpufreq in sysfs and no `cpu MHz` in /proc/cpuinfo".into())
            }
        }
        _ => need("/proc/self/status"),
    }
}

fn perf_event(pmu: &str, type_: u32, config: u64) -> PerfEvent {
    PerfEvent {
        pmu: pmu.into(),
        type_,
        config,
        config1: 0,
        config2: 0,
        config3: 0,
        exclude_user: false,
        exclude_kernel: None,
    }
}

fn with_aliases(description: &str, aliases: &[&str]) -> String {
    if aliases.is_empty() {
        description.to_string()
    } else {
        format!("{description} (alias {})", aliases.join(", "))
    }
}

pub(crate) fn catalog_in(roots: &Roots) -> Vec<CounterInfo> {
    let mut out = Vec::new();
    for g in tables::HARDWARE {
        out.push(CounterInfo {
            name: g.name.into(),
            kind: CounterKind::Hardware,
            description: with_aliases(g.description, g.aliases),
            unit: g.unit.into(),
            available: perf::probe(
                &perf_event("cpu", TYPE_HARDWARE, g.config),
                CounterKind::Hardware,
            ),
        });
    }
    for c in tables::cache_events() {
        out.push(CounterInfo {
            available: perf::probe(
                &perf_event("cpu", TYPE_HW_CACHE, c.config),
                CounterKind::HardwareCache,
            ),
            name: c.name,
            kind: CounterKind::HardwareCache,
            description: c.description,
            unit: String::new(),
        });
    }
    for g in tables::SOFTWARE {
        out.push(CounterInfo {
            name: g.name.into(),
            kind: CounterKind::Software,
            description: with_aliases(g.description, g.aliases),
            unit: g.unit.into(),
            available: perf::probe(
                &perf_event("software", TYPE_SOFTWARE, g.config),
                CounterKind::Software,
            ),
        });
    }
    for pmu in sysfs::pmus(roots) {
        for ev in sysfs::named_events(roots, &pmu) {
            let name = format!("{pmu}/{}/", ev.name);
            let available = match resolve(&name, roots) {
                Ok(spec) => probe(&spec),
                Err(e) => Err(e.to_string()),
            };
            out.push(CounterInfo {
                name,
                kind: CounterKind::Raw,
                description: format!("event of the {pmu} PMU ({})", ev.terms),
                unit: ev.unit,
                available,
            });
        }
    }
    out.push(tracepoint_entry(roots));
    for f in tables::RUSAGE {
        let spec = rusage_spec(*f);
        out.push(CounterInfo {
            name: spec.name,
            kind: CounterKind::Rusage,
            description: with_aliases(f.description(), &f.names()[1..]),
            unit: spec.unit,
            available: Ok(()),
        });
    }
    for f in tables::PROC {
        let spec = proc_spec(*f);
        out.push(CounterInfo {
            name: spec.name,
            kind: CounterKind::Proc,
            description: with_aliases(f.description(), &f.names()[1..]),
            unit: spec.unit,
            available: probe_proc(*f),
        });
    }
    for t in tables::TOOL {
        let spec = tool_spec(*t);
        out.push(CounterInfo {
            name: spec.name,
            kind: CounterKind::Tool,
            description: "wall-clock time while the counters are enabled".into(),
            unit: spec.unit,
            available: Ok(()),
        });
    }
    out
}

/// One entry for all tracepoints, probed by opening one of them.
fn tracepoint_entry(roots: &Roots) -> CounterInfo {
    let mut info = CounterInfo {
        name: "sys:name".into(),
        kind: CounterKind::Tracepoint,
        description: "a kernel tracepoint counted as an event (`subsystem:tracepoint`)".into(),
        unit: String::new(),
        available: Ok(()),
    };
    let dir = match sysfs::tracefs(roots) {
        Ok(d) => d,
        Err(reason) => {
            info.available = Err(reason);
            return info;
        }
    };
    let all = sysfs::tracepoints(&dir);
    let count: usize = all.iter().map(|(_, n)| n.len()).sum();
    info.description = format!(
        "a kernel tracepoint counted as an event: {count} tracepoints in {} subsystems \
         (`sched:sched_switch`, ...; `strobe avail --tracepoints` lists them)",
        all.len()
    );
    let sample = if sysfs::tracepoint_id(&dir, "sched", "sched_switch").is_some() {
        Some("sched:sched_switch".to_string())
    } else {
        all.first()
            .and_then(|(s, n)| n.first().map(|n| format!("{s}:{n}")))
    };
    info.available = match sample {
        None => Err("tracefs has no tracepoints".into()),
        Some(name) => match resolve(&name, roots) {
            Ok(spec) => probe(&spec).map_err(|e| format!("{name}: {e}")),
            Err(e) => Err(e.to_string()),
        },
    };
    info
}
