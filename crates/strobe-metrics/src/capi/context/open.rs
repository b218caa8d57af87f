//! Opening a context: the body of `strobe_metrics_open`.
//!
//! Owns checking the caller's features, mode and properties, planning
//! the features over counters, resolving those in the catalog, grouping
//! them (one group in SINGLEGROUP mode, else as the PMU can schedule
//! them), opening each group and registering the new [`Context`], and
//! the error messages that name the feature behind a failure. It must
//! never write a feature's fields other than `data`, never keep a borrow
//! of caller memory past the call, and never register a context whose
//! groups did not all open.

use std::ffi::CStr;
use std::sync::{Arc, Mutex};

use super::Properties;
use super::{open_contexts, Context, GroupState, Role, State};
use crate::capi::info::definitions;
use crate::capi::status::{CResult, Error, Status};
use crate::capi::types::{feature_kind, flags, mode, target, Data, Feature};
use crate::catalog::{self, CounterSpec, Source};
use crate::counting::{CountError, Counters, OpenOptions, Reading, Target};
use crate::defs::{Definition, DefsError, MetricSet, Plan};

fn count_error(
    e: CountError,
    specs: &[CounterSpec],
    names: &[String],
    deps: &[Vec<usize>],
) -> Error {
    match e {
        CountError::Open { ref event, .. } => {
            let who = specs
                .iter()
                .position(|s| &s.name == event)
                .map(|s| needed_by(s, names, deps));
            let msg = match who {
                Some(f) if f != *event => format!("feature `{f}` needs `{event}`: {e}"),
                _ => e.to_string(),
            };
            Error::new(Status::ERROR_UNAVAILABLE, msg)
        }
        CountError::Groups { .. } => Error::new(Status::ERROR_GROUPS, e.to_string()),
        CountError::Options(_) => Error::invalid(e.to_string()),
        CountError::Io { .. } => Error::new(Status::ERROR_IO, e.to_string()),
        other => Error::new(Status::ERROR, other.to_string()),
    }
}

/// The name of the first feature that needs plan counter `slot`.
fn needed_by(slot: usize, names: &[String], deps: &[Vec<usize>]) -> String {
    deps.iter()
        .position(|d| d.contains(&slot))
        .map_or_else(String::new, |i| names[i].clone())
}

fn is_hardware(s: &CounterSpec) -> bool {
    matches!(&s.source, Source::Perf(ev) if !catalog::is_software_context_pmu(&ev.pmu))
}

/// The groups `specs` need when every perf event is to be in one: the
/// hardware events' groups (software events ride along with them, as
/// `Counters` schedules a single group), else the software events'.
fn check_single(specs: &[CounterSpec], max_slots: Option<usize>) -> CResult {
    let hw: Vec<CounterSpec> = specs.iter().filter(|s| is_hardware(s)).cloned().collect();
    let considered: Vec<CounterSpec> = if hw.is_empty() {
        specs
            .iter()
            .filter(|s| matches!(s.source, Source::Perf(_)))
            .cloned()
            .collect()
    } else {
        hw
    };
    let groups = Counters::plan_groups(&considered, max_slots);
    let needed = groups.iter().max().map_or(1, |m| m + 1);
    if needed <= 1 {
        return Ok(());
    }
    let listing: Vec<String> = (0..needed)
        .map(|g| {
            let members: Vec<&str> = considered
                .iter()
                .zip(&groups)
                .filter(|(_, &gg)| gg == g)
                .map(|(s, _)| s.name.as_str())
                .collect();
            format!("group {g}: {}", members.join(", "))
        })
        .collect();
    Err(Error::new(
        Status::ERROR_GROUPS,
        format!(
            "the features need {needed} groups and STROBE_METRICS_MODE_SINGLEGROUP allows one \
             ({}); open without SINGLEGROUP and collect the groups in turn, or ask for fewer \
             counters",
            listing.join("; ")
        ),
    ))
}

/// The feature array as a slice of copies, checked.
///
/// # Safety
/// `features` points to `count` readable features.
unsafe fn feature_names(features: *const Feature, count: usize) -> CResult<Vec<String>> {
    let mut names = Vec::with_capacity(count);
    for i in 0..count {
        // SAFETY: `i < count`, per the function contract.
        let f = unsafe { features.add(i).read() };
        let name = if f.name.is_null() {
            None
        } else {
            // SAFETY: a non-null feature name is a NUL-terminated string.
            Some(
                unsafe { CStr::from_ptr(f.name) }
                    .to_string_lossy()
                    .into_owned(),
            )
        };
        let label = name.as_deref().unwrap_or("");
        match f.kind {
            feature_kind::METRIC => {}
            feature_kind::TRACE => {
                return Err(Error::new(
                    Status::ERROR_NOT_SUPPORTED,
                    format!(
                        "feature {i} (`{label}`) is a trace; CPUs have no traces, only \
                         metrics (STROBE_METRICS_FEATURE_KIND_METRIC)"
                    ),
                ))
            }
            other => {
                return Err(Error::invalid(format!(
                    "feature {i} (`{label}`) has kind {other}; use \
                     STROBE_METRICS_FEATURE_KIND_METRIC"
                )))
            }
        }
        let Some(name) = name else {
            return Err(Error::invalid(format!("feature {i} has no name (NULL)")));
        };
        if f.parameter_count != 0 {
            return Err(Error::new(
                Status::ERROR_NOT_SUPPORTED,
                format!(
                    "feature `{name}` has {} parameters; CPU metrics take none (set \
                     parameter_count to 0)",
                    f.parameter_count
                ),
            ));
        }
        names.push(name);
    }
    Ok(names)
}

/// Reads and checks the properties (defaults for null).
///
/// # Safety
/// `props` is null or points to a readable properties struct.
unsafe fn properties(props: *const Properties) -> CResult<Properties> {
    let p = if props.is_null() {
        Properties::default()
    } else {
        // SAFETY: non-null, readable per the function contract.
        unsafe { props.read() }
    };
    if !p.queue.is_null() {
        return Err(Error::new(
            Status::ERROR_NOT_SUPPORTED,
            "properties.queue: CPUs have no HSA queue; leave it NULL",
        ));
    }
    if p.reserved0 != 0 || p.reserved.iter().any(|&r| r != 0) {
        return Err(Error::invalid(
            "the reserved fields of the properties must be zero (start from `= {0}`)",
        ));
    }
    if p.target != target::THREAD && p.target != target::PROCESS {
        return Err(Error::invalid(format!(
            "properties.target is {}; use STROBE_METRICS_TARGET_THREAD (0) or \
             STROBE_METRICS_TARGET_PROCESS (1)",
            p.target
        )));
    }
    if p.flags & !flags::INHERIT != 0 {
        return Err(Error::invalid(format!(
            "properties.flags has unknown bits {:#x}",
            p.flags & !flags::INHERIT
        )));
    }
    if p.flags & flags::INHERIT != 0 && p.target != target::PROCESS {
        return Err(Error::invalid(
            "STROBE_METRICS_FLAG_INHERIT needs STROBE_METRICS_TARGET_PROCESS",
        ));
    }
    if p.pid < 0 {
        return Err(Error::invalid(format!(
            "properties.pid is {}; use 0 for the caller or a thread/process id",
            p.pid
        )));
    }
    Ok(p)
}

/// The body of `strobe_metrics_open`.
///
/// # Safety
/// As [`strobe_metrics_open`].
pub(super) unsafe fn open(
    features: *mut Feature,
    count: u32,
    out: *mut *mut Context,
    mode_mask: u32,
    props: *const Properties,
) -> CResult {
    if out.is_null() {
        return Err(Error::invalid("the context pointer (out) is NULL"));
    }
    if features.is_null() || count == 0 {
        return Err(Error::invalid(
            "no features: pass an array of at least one strobe_metrics_feature_t",
        ));
    }
    if mode_mask & !mode::ALL != 0 {
        return Err(Error::invalid(format!(
            "unknown mode bits {:#x}; modes are STANDALONE (1), CREATEQUEUE (2), SINGLEGROUP (4)",
            mode_mask & !mode::ALL
        )));
    }
    // SAFETY: the caller's properties pointer is null or readable.
    let props = unsafe { properties(props) }?;
    let n = count as usize;
    // SAFETY: the caller passes `count` features.
    let names = unsafe { feature_names(features, n) }?;
    let defs = definitions()?;
    let set = &defs.set;
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let plan = set.plan(&refs).map_err(|e| match e {
        DefsError::BadRequest { .. } => Error::new(Status::ERROR_UNKNOWN_FEATURE, e.to_string()),
        _ => Error::new(Status::ERROR_DEFINITIONS, e.to_string()),
    })?;
    let deps = feature_deps(set, &plan, &names)?;
    let specs = resolve_specs(&plan, &names, &deps)?;
    let max_slots = (props.max_slots != 0).then_some(props.max_slots as usize);
    let single = mode_mask & mode::SINGLEGROUP != 0;
    let (group_of_slot, ngroups) = if single {
        check_single(&specs, max_slots)?;
        (vec![0; specs.len()], 1)
    } else {
        let g = Counters::plan_groups(&specs, max_slots);
        let ng = g.iter().max().map_or(1, |m| m + 1);
        (g, ng)
    };
    let tgt = if props.target == target::PROCESS {
        Target::Process(props.pid)
    } else {
        Target::Thread(props.pid)
    };
    let opts = OpenOptions {
        inherit: props.flags & flags::INHERIT != 0,
        enable_on_exec: false,
        max_slots,
        single_group: single,
    };
    let grouping = Grouping {
        specs: &specs,
        group_of_slot: &group_of_slot,
        ngroups,
        names: &names,
        deps: &deps,
    };
    let (groups, position) = grouping.open(tgt, &opts)?;
    let mut roles = Vec::with_capacity(n);
    let mut member_lists: Vec<Vec<*mut Feature>> = vec![Vec::new(); ngroups];
    for (i, dep) in deps.iter().enumerate() {
        let (role, group) = if plan.is_derived(i) {
            let g = dep.iter().map(|&s| position[s].0).max().unwrap_or(0);
            (Role::Derived, g)
        } else {
            let s = dep[0];
            let (g, k) = position[s];
            let scaled = specs[s].scale != 1.0;
            (
                Role::Counter {
                    group: g,
                    k,
                    scaled,
                },
                g,
            )
        };
        roles.push(role);
        // SAFETY: `i < count`: a pointer into the caller's array.
        member_lists[group].push(unsafe { features.add(i) });
    }
    for i in 0..n {
        // SAFETY: `i < count`; only the `data` field is written.
        unsafe { std::ptr::addr_of_mut!((*features.add(i)).data).write(Data::UNINIT) };
    }
    let nslots = plan.counters().len();
    let ctx = Arc::new(Context {
        callback: props.callback,
        callback_arg: props.callback_arg,
        members: member_lists
            .into_iter()
            .map(Vec::into_boxed_slice)
            .collect(),
        state: Mutex::new(State {
            features,
            roles,
            outputs: vec![None; plan.len()],
            plan,
            groups,
            latest: vec![None; nslots],
        }),
    });
    let handle = Arc::as_ptr(&ctx) as *mut Context;
    open_contexts().insert(handle as usize, ctx);
    // SAFETY: `out` is non-null and the caller's writable pointer slot.
    unsafe { out.write(handle) };
    Ok(())
}

/// The plan counters each feature needs (for a derived metric, those of
/// its own plan; for a counter, its one slot).
fn feature_deps(set: &MetricSet, plan: &Plan, names: &[String]) -> CResult<Vec<Vec<usize>>> {
    let slot = |spec: &str| plan.counters().iter().position(|c| c == spec);
    let mut deps: Vec<Vec<usize>> = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let d: Vec<usize> = if plan.is_derived(i) {
            let own = set
                .plan(&[name.as_str()])
                .map_err(|e| Error::new(Status::ERROR_DEFINITIONS, e.to_string()))?;
            own.counters().iter().filter_map(|c| slot(c)).collect()
        } else {
            let spec = match set.get(name) {
                Some(Definition::Counter(c)) => c.spec(),
                _ => name.clone(),
            };
            slot(&spec).into_iter().collect()
        };
        deps.push(d);
    }
    Ok(deps)
}

/// The catalog counter of each plan counter; an error names the feature
/// that needs the one that does not resolve.
fn resolve_specs(plan: &Plan, names: &[String], deps: &[Vec<usize>]) -> CResult<Vec<CounterSpec>> {
    let mut specs = Vec::with_capacity(plan.counters().len());
    for (s, spec) in plan.counters().iter().enumerate() {
        let resolved = catalog::resolve(spec).map_err(|e| {
            let who = needed_by(s, names, deps);
            let msg = if who == *spec {
                format!("feature `{who}`: {e}")
            } else {
                format!("feature `{who}` needs `{spec}`: {e}")
            };
            Error::new(Status::ERROR_UNKNOWN_FEATURE, msg)
        })?;
        specs.push(resolved);
    }
    Ok(specs)
}

/// The opened groups and the `(group, reading)` of each plan counter.
type OpenGroups = (Vec<GroupState>, Vec<(usize, usize)>);

/// The plan counters of a context split into groups, with what error
/// messages need to name the feature behind a failure.
struct Grouping<'a> {
    specs: &'a [CounterSpec],
    group_of_slot: &'a [usize],
    ngroups: usize,
    names: &'a [String],
    deps: &'a [Vec<usize>],
}

impl Grouping<'_> {
    /// Opens every group; returns them and the `(group, reading)` of each
    /// plan counter.
    fn open(&self, tgt: Target, opts: &OpenOptions) -> CResult<OpenGroups> {
        let specs = self.specs;
        let mut groups = Vec::with_capacity(self.ngroups);
        let mut position = vec![(0usize, 0usize); specs.len()];
        for g in 0..self.ngroups {
            let slots: Vec<usize> = (0..specs.len())
                .filter(|&s| self.group_of_slot[s] == g)
                .collect();
            let gspecs: Vec<CounterSpec> = slots.iter().map(|&s| specs[s].clone()).collect();
            let counters = Counters::open(&gspecs, tgt, opts)
                .map_err(|e| count_error(e, &gspecs, self.names, &remap(self.deps, &slots)))?;
            for (k, &s) in slots.iter().enumerate() {
                position[s] = (g, k);
            }
            let len = slots.len();
            groups.push(GroupState {
                counters,
                scales: slots.iter().map(|&s| specs[s].scale).collect(),
                slots,
                base: vec![Reading::default(); len],
                now: vec![Reading::default(); len],
                values: vec![None; len],
                running: false,
                started: false,
            });
        }
        Ok((groups, position))
    }
}

/// `deps` with plan slots renumbered to their index in `slots` (one
/// group's counters), for naming the feature behind a group's error.
fn remap(deps: &[Vec<usize>], slots: &[usize]) -> Vec<Vec<usize>> {
    deps.iter()
        .map(|d| {
            d.iter()
                .filter_map(|s| slots.iter().position(|x| x == s))
                .collect()
        })
        .collect()
}
