//! The call-stack samples as the exporters read them: one time-ordered
//! stream of narrow rows, and a bounded cache of resolved stacks.
//!
//! Owns [`samples`] (every process's samples in time order, window
//! applied, kinds decided: a sample without a kind, from a database
//! written before kinds existed, is of the profile's time kind) and
//! [`StackCache`]. Rows carry ids, never resolved frames: a consumer
//! resolves a stack the first time it meets it. It never writes to an
//! input and never formats output.

use std::sync::Arc;

use strobe_db::{Profile, ResolvedFrame, SampleKind};

use crate::error::Result;

/// One call-stack sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleEvent {
    /// Process guid.
    pub guid: Arc<str>,
    /// OS pid.
    pub pid: i64,
    /// OS tid.
    pub tid: i64,
    /// When (ns, the process's clock).
    pub timestamp: i64,
    /// Call site row id of the leaf (`None`: no stack).
    pub stack_id: Option<i64>,
    /// What it measured.
    pub kind: SampleKind,
    /// The time it stands for (ns); 0 when the database holds no weight.
    pub weight_ns: u64,
}

/// The kind named by an event category; `None` for anything else.
pub fn kind_of(category: &str) -> Option<SampleKind> {
    [SampleKind::Cpu, SampleKind::Wall, SampleKind::OffCpu]
        .into_iter()
        .find(|k| k.category() == category)
}

/// Streams every sample of the profile ordered by time (then process and
/// thread).
pub fn samples(p: &Profile) -> Result<impl Iterator<Item = Result<SampleEvent>> + '_> {
    let time_kind = strobe_db::summary::time_kind(p)?;
    let mut guids: Vec<Arc<str>> = Vec::new();
    Ok(p.samples_unresolved()?.map(move |s| {
        let s = s?;
        let guid = match guids.iter().find(|g| ***g == *s.guid) {
            Some(g) => g.clone(),
            None => {
                let g: Arc<str> = Arc::from(s.guid.as_str());
                guids.push(g.clone());
                g
            }
        };
        Ok(SampleEvent {
            guid,
            pid: s.pid,
            tid: s.tid,
            timestamp: s.timestamp,
            stack_id: s.stack_id,
            kind: kind_of(&s.kind).unwrap_or(time_kind),
            weight_ns: s.weight_ns,
        })
    }))
}

/// Most stacks a [`StackCache`] holds before it starts over.
const STACK_CACHE: usize = 65_536;

/// Resolved call stacks by (process guid, call site id), leaf first,
/// bounded: when full it is cleared and refilled as stacks come back.
#[derive(Default)]
pub struct StackCache {
    stacks: std::collections::HashMap<(Arc<str>, i64), Arc<[ResolvedFrame]>>,
}

impl StackCache {
    /// The frames (leaf first) of call site `id` of process `guid`.
    pub fn get(&mut self, p: &Profile, guid: &Arc<str>, id: i64) -> Result<Arc<[ResolvedFrame]>> {
        if let Some(s) = self.stacks.get(&(guid.clone(), id)) {
            return Ok(s.clone());
        }
        if self.stacks.len() >= STACK_CACHE {
            self.stacks.clear();
        }
        let frames: Arc<[ResolvedFrame]> = p.resolve_stack(guid, id)?.into();
        self.stacks.insert((guid.clone(), id), frames.clone());
        Ok(frames)
    }
}
