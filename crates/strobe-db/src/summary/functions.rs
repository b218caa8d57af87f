//! The sampled-function table: self and inclusive weights per function.
//!
//! Owns [`function_summary`] and [`FunctionFold`], which folds in one
//! process's resolved sample groups at a time: memory grows with distinct
//! names (per process with `by_process`), never with the number of
//! processes. It never reads the database itself ([`crate::scan`] does).

use std::collections::{HashMap, HashSet};

use super::rows::FunctionRow;
use super::weights::Weights;
use crate::error::Result;
use crate::reader::Profile;

/// Sampled functions: self and inclusive samples and time per function
/// name, on and off CPU (per process with `by_process`), sorted by self
/// time, then inclusive. The processes are folded in one at a time (see
/// [`crate::scan::for_each_process`]): memory grows with distinct names
/// (per process with `by_process`), never with the number of processes.
pub fn function_summary(p: &Profile, by_process: bool) -> Result<Vec<FunctionRow>> {
    let mut fold = FunctionFold::default();
    crate::scan::for_each_process(p, p.sampling_period_ns(), true, &mut |ps| {
        fold.add(&ps, by_process);
        Ok(())
    })?;
    Ok(fold.finish())
}

/// Self and inclusive weights per function name, folded in one process
/// at a time (what [`function_summary`] computes).
#[derive(Default)]
pub(super) struct FunctionFold {
    selfw: HashMap<(Option<String>, String), Weights>,
    incl: HashMap<(Option<String>, String), Weights>,
    totals: HashMap<Option<String>, Weights>,
    pids: HashMap<String, i64>,
    names: HashSet<String>,
}

impl FunctionFold {
    /// Adds one process's sample groups (its stacks resolved).
    pub(super) fn add(&mut self, ps: &crate::scan::ProcessSamples, by_process: bool) {
        // Per stack, the threads together (the pid of its first group).
        let mut per_stack: std::collections::BTreeMap<Option<i64>, (i64, Weights)> =
            Default::default();
        for g in &ps.groups {
            per_stack
                .entry(g.stack_id)
                .or_insert((g.pid, Weights::default()))
                .1
                .add(&Weights {
                    samples: g.samples,
                    ns: g.cpu_ns,
                    off_cpu_ns: g.off_cpu_ns,
                });
        }
        let guid = ps.guid.to_string();
        for (stack, (pid, w)) in per_stack {
            self.pids.insert(guid.clone(), pid);
            let gk = by_process.then(|| guid.clone());
            self.totals.entry(gk.clone()).or_default().add(&w);
            let frames: &[crate::ResolvedFrame] = stack
                .and_then(|s| ps.stacks.get(&s))
                .map_or(&[], |f| &f[..]);
            let leaf = frames
                .first()
                .map_or_else(|| "[no stack]".to_string(), |f| f.display_name());
            self.selfw
                .entry((gk.clone(), leaf.clone()))
                .or_default()
                .add(&w);
            self.names.clear();
            if frames.is_empty() {
                self.names.insert(leaf);
            }
            for f in frames {
                self.names.insert(f.display_name());
            }
            for name in self.names.drain() {
                self.incl.entry((gk.clone(), name)).or_default().add(&w);
            }
        }
    }

    /// The rows, sorted by self time, then inclusive.
    pub(super) fn finish(self) -> Vec<FunctionRow> {
        let FunctionFold {
            selfw,
            incl,
            totals,
            pids,
            ..
        } = self;
        let mut out: Vec<FunctionRow> = incl
            .into_iter()
            .map(|((guid, name), total)| {
                let own = selfw
                    .get(&(guid.clone(), name.clone()))
                    .copied()
                    .unwrap_or_default();
                let all = totals.get(&guid).copied().unwrap_or_default();
                FunctionRow {
                    pid: guid.as_ref().and_then(|g| pids.get(g).copied()),
                    self_samples: own.samples,
                    self_ns: own.ns,
                    self_pct: own.pct_of(&all),
                    total_samples: total.samples,
                    total_ns: total.ns,
                    total_pct: total.pct_of(&all),
                    off_cpu_self_ns: own.off_cpu_ns,
                    off_cpu_total_ns: total.off_cpu_ns,
                    guid,
                    name,
                }
            })
            .collect();
        // Wall-clock order: time on and off CPU together (just on-CPU time,
        // or samples, when nothing was recorded off CPU).
        out.sort_by(|a, b| {
            a.guid
                .cmp(&b.guid)
                .then((b.self_ns + b.off_cpu_self_ns).cmp(&(a.self_ns + a.off_cpu_self_ns)))
                .then(b.self_samples.cmp(&a.self_samples))
                .then((b.total_ns + b.off_cpu_total_ns).cmp(&(a.total_ns + a.off_cpu_total_ns)))
                .then(b.total_samples.cmp(&a.total_samples))
                .then(a.name.cmp(&b.name))
        });
        out
    }
}
