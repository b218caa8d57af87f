//! Sample weights: samples and the time they stand for, on and off CPU.
//!
//! Owns [`Weights`], its shares, and summing the weights per (process,
//! thread) one process at a time (the thread table's sample columns). It
//! never names a function or a thread.

use crate::error::Result;
use crate::reader::Profile;

/// Samples and the time they stand for, on and off CPU.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Weights {
    pub(super) samples: u64,
    pub(super) ns: u64,
    pub(super) off_cpu_ns: u64,
}

impl Weights {
    pub(super) fn add(&mut self, w: &Weights) {
        self.samples += w.samples;
        self.ns += w.ns;
        self.off_cpu_ns += w.off_cpu_ns;
    }

    /// `self` as a percentage of `all`: by time, or by count when the
    /// database holds no weights.
    pub(super) fn pct_of(&self, all: &Weights) -> f64 {
        if all.ns > 0 {
            self.ns as f64 * 100.0 / all.ns as f64
        } else if all.samples > 0 {
            self.samples as f64 * 100.0 / all.samples as f64
        } else {
            0.0
        }
    }
}

/// One group of samples: process guid, pid, the grouping key's value and
/// the group's weights.
pub(super) type WeightGroup = (String, i64, Option<i64>, Weights);

/// The sample weights grouped by process and thread, from
/// [`crate::scan::for_each_process`] (a sample without a recorded weight
/// counts one sampling period, as in the exports). Memory grows with
/// threads, one process's stacks at a time.
pub(super) fn thread_weights(p: &Profile) -> Result<Vec<WeightGroup>> {
    let mut weights = ThreadWeights::default();
    crate::scan::for_each_process(p, p.sampling_period_ns(), false, &mut |ps| {
        weights.add(&ps);
        Ok(())
    })?;
    Ok(weights.groups())
}

/// Sample weights summed per (process, thread), one process at a time.
#[derive(Default)]
pub(super) struct ThreadWeights(std::collections::BTreeMap<(String, Option<i64>), (i64, Weights)>);

impl ThreadWeights {
    pub(super) fn add(&mut self, ps: &crate::scan::ProcessSamples) {
        for g in &ps.groups {
            let e = self
                .0
                .entry((g.guid.to_string(), Some(g.tid)))
                .or_insert((g.pid, Weights::default()));
            e.1.add(&Weights {
                samples: g.samples,
                ns: g.cpu_ns,
                off_cpu_ns: g.off_cpu_ns,
            });
        }
    }

    pub(super) fn groups(self) -> Vec<WeightGroup> {
        self.0
            .into_iter()
            .map(|((guid, key), (pid, w))| (guid, pid, key, w))
            .collect()
    }
}
