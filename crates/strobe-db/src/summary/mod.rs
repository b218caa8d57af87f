//! Summary tables computed from a profile (Nsight Systems `stats` style).
//!
//! Owns the numbers behind `strobe summary`: per-name region statistics
//! (total, instances, average, median, min, max, standard deviation, share),
//! per-function samples and the time they stand for (self and inclusive,
//! on and off CPU, from each sample's weight) and per-thread totals.
//! Memory grows with the number of distinct names, call stacks and threads,
//! never with the number of rows: regions are read raw by reader threads
//! in two passes, the second keeping only the durations around each
//! median ([`crate::region_scan`], [`crate::duration_stats`]); sampled
//! functions are folded one process at a time. A profile read in place
//! (many files) sorts its regions' durations in SQLite instead. [`tables`]
//! computes every table at once (for a profile read in place, in one pass
//! over its processes: `in_place`). A time filter's exact counts
//! (`strobe_region_stats`) replace the stored regions' in the region and
//! thread tables. A main thread the database has no name for is named
//! after its program. It never formats or prints; the CLI, the Python package
//! and exporters share it.
//!
//! This file owns [`tables`]; each table has a file of its own (`regions`,
//! `functions`, `threads`, `counters`), beside the rows they make (`rows`),
//! the sample weights (`weights`), the calls a time filter counted
//! (`counted`) and the one-pass computation over a profile read in place
//! (`in_place`).

mod counted;
mod counters;
mod functions;
mod in_place;
mod regions;
mod rows;
mod threads;
mod weights;

pub use counters::{
    function_counter_summary, profile_counters, region_counter_summary, stored_metrics,
};
pub use functions::function_summary;
pub use regions::{duration_summary, region_summary};
pub use rows::{
    Counted, CounterSumRow, FunctionRow, StatRow, StoredMetric, Tables, ThreadRow, Want,
};
pub use threads::thread_summary;

use crate::error::Result;
use crate::reader::Profile;
use crate::region_scan;
use functions::FunctionFold;
use regions::regions_of_scan;
use threads::threads_of;
use weights::ThreadWeights;

/// Every table `want` asks for. For a profile read in place (more than
/// [`crate::reader::MAX_ATTACHED`] files) they are computed in one pass
/// over its processes, each database opened once
/// (`in_place`); otherwise by the functions of this module,
/// one query each. Both give the same rows (sums of floating-point counter
/// values may differ in their last bits: they are added in another order).
pub fn tables(p: &Profile, want: Want) -> Result<Tables> {
    if let Some(fed) = p.federation() {
        return in_place::tables(p, fed, want);
    }
    let counters = profile_counters(p)?;
    let has_counters = !counters.is_empty();
    let by = want.by_process;
    // One pass over the regions and one over the samples serve every table.
    let region_pass = (want.regions || want.threads)
        .then(|| region_scan::first_pass(p))
        .transpose()?;
    let mut functions = want.functions.then(FunctionFold::default);
    let mut weights = want.threads.then(ThreadWeights::default);
    if want.functions || want.threads {
        crate::scan::for_each_process(p, p.sampling_period_ns(), want.functions, &mut |ps| {
            if let Some(f) = &mut functions {
                f.add(&ps, by);
            }
            if let Some(w) = &mut weights {
                w.add(&ps);
            }
            Ok(())
        })?;
    }
    Ok(Tables {
        regions: match (&region_pass, want.regions) {
            (Some(scan), true) => Some(regions_of_scan(p, scan, by)?),
            _ => None,
        },
        functions: functions.map(FunctionFold::finish),
        threads: weights
            .map(|w| threads_of(p, w.groups(), region_pass.as_ref(), by))
            .transpose()?,
        metrics: if has_counters {
            stored_metrics(p)?
        } else {
            Vec::new()
        },
        region_counters: (want.regions && has_counters)
            .then(|| region_counter_summary(p, &counters, want.by_process))
            .transpose()?,
        function_counters: (want.functions && has_counters)
            .then(|| function_counter_summary(p, &counters, want.by_process))
            .transpose()?,
        counters,
    })
}
