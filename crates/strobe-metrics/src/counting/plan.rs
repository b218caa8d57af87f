//! Which perf events go into which group.
//!
//! Owns the grouping rule: events are grouped per PMU in the order they
//! are given, at most `max_slots` (or the PMU's [`pmu_slots`]) per group;
//! software-context events (software, tracepoint, msr, kprobe, uprobe)
//! form their own groups, unlimited in size unless `max_slots` or
//! `STROBE_PMU_SLOTS` caps them, because they take no hardware counter
//! and are never multiplexed: kept apart, they always run 100% of the
//! enabled time, whatever the hardware groups go through. With
//! `single_group` everything goes into one group, led by the first
//! hardware event (software members are then scheduled with it). Never
//! opens anything.
//!
//! [`pmu_slots`]: crate::catalog::pmu_slots

use super::CountError;
use crate::catalog::{is_software_context_pmu, pmu_slots, CounterSpec, Source};

/// The group class of a perf event: its PMU, with all software-context
/// PMUs together.
fn class(pmu: &str) -> &str {
    if is_software_context_pmu(pmu) {
        "software"
    } else {
        pmu
    }
}

/// The capacity of a group of `class`.
fn capacity(class: &str, max_slots: Option<usize>) -> usize {
    max_slots
        .or_else(|| pmu_slots(class))
        .unwrap_or(usize::MAX)
        .max(1)
}

/// Groups of spec indices (leader first), in the order of their first
/// member. Specs that are not perf events are in no group.
pub(crate) fn plan(specs: &[CounterSpec], max_slots: Option<usize>) -> Vec<Vec<usize>> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    let mut open: Vec<(String, usize)> = Vec::new(); // class -> index of its filling group
    for (i, spec) in specs.iter().enumerate() {
        let Source::Perf(ev) = &spec.source else {
            continue;
        };
        let c = class(&ev.pmu).to_string();
        let cap = capacity(&c, max_slots);
        match open.iter_mut().find(|(k, _)| *k == c) {
            Some((_, g)) if groups[*g].1.len() < cap => groups[*g].1.push(i),
            Some((_, g)) => {
                groups.push((c, vec![i]));
                *g = groups.len() - 1;
            }
            None => {
                groups.push((c.clone(), vec![i]));
                open.push((c, groups.len() - 1));
            }
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

/// One group of every perf event, or an error naming how many groups the
/// events need.
pub(crate) fn single(
    specs: &[CounterSpec],
    max_slots: Option<usize>,
) -> Result<Vec<Vec<usize>>, CountError> {
    let perf: Vec<usize> = specs
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.source, Source::Perf(_)))
        .map(|(i, _)| i)
        .collect();
    if perf.is_empty() {
        return Ok(Vec::new());
    }
    let pmu_of = |i: usize| match &specs[i].source {
        Source::Perf(ev) => class(&ev.pmu).to_string(),
        _ => unreachable!("filtered to perf events"),
    };
    // Hardware classes need their slots; software-context members ride
    // along without taking one.
    let mut hardware: Vec<(String, usize)> = Vec::new();
    for &i in &perf {
        let c = pmu_of(i);
        if c == "software" {
            continue;
        }
        match hardware.iter_mut().find(|(k, _)| *k == c) {
            Some((_, n)) => *n += 1,
            None => hardware.push((c, 1)),
        }
    }
    let mut needed: usize = hardware
        .iter()
        .map(|(c, n)| n.div_ceil(capacity(c, max_slots)))
        .sum::<usize>()
        .max(1);
    let mut why = Vec::new();
    for (c, n) in &hardware {
        let cap = capacity(c, max_slots);
        if *n > cap {
            why.push(format!(
                "{n} events of PMU `{c}`, which schedules {cap} at once"
            ));
        }
    }
    if hardware.len() > 1 {
        why.push(format!(
            "events of {} hardware PMUs ({}), which cannot share a group",
            hardware.len(),
            hardware
                .iter()
                .map(|(c, _)| c.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(cap) = max_slots {
        let cap = cap.max(1);
        if perf.len() > cap {
            needed = needed.max(perf.len().div_ceil(cap));
            why.push(format!(
                "{} perf events with at most {cap} per group",
                perf.len()
            ));
        }
    }
    if needed > 1 {
        return Err(CountError::Groups {
            needed,
            detail: why.join("; "),
        });
    }
    let mut group = perf.clone();
    if let Some(pos) = perf.iter().position(|&i| pmu_of(i) != "software") {
        let leader = group.remove(pos);
        group.insert(0, leader);
    }
    Ok(vec![group])
}
