//! The counter stream of a visit.
//!
//! Owns [`Counters`]: every counter value in time order, or, for a profile
//! read in place, one process after the other, each in time order (no sort
//! over every process's values). It never writes and never formats output.

use crate::reader::{CounterRow, Profile};
use crate::stream::RowStream;
use crate::Result;

/// Streams counter samples ordered by time; for a profile read in place
/// (see [`Profile::is_federated`]), one process after the other, each in
/// time order (no sort over every process's values).
pub(super) fn counters(p: &Profile) -> Result<Counters<'_>> {
    if !p.is_federated() {
        return Ok(Counters {
            p,
            current: Some(p.counters()?),
            pending: Default::default(),
        });
    }
    Ok(Counters {
        p,
        current: None,
        pending: p.table_sets().into_iter().map(|(_, guid)| guid).collect(),
    })
}

/// The stream of [`counters`].
pub(super) struct Counters<'p> {
    p: &'p Profile,
    current: Option<RowStream<'p, CounterRow>>,
    /// Guids of the processes not streamed yet.
    pending: std::collections::VecDeque<String>,
}

impl Iterator for Counters<'_> {
    type Item = crate::Result<CounterRow>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(row) = self.current.as_mut().and_then(|c| c.next()) {
                return Some(row);
            }
            let guid = self.pending.pop_front()?;
            // A guid is hex digits and dashes (checked when the profile was
            // opened): safe to write into the query.
            let sql = format!(
                "SELECT guid, pid, tid, name, units, timestamp, value FROM strobe_counters \
                 WHERE guid = '{guid}' ORDER BY timestamp, name"
            );
            match self.p.stream_query(&sql, CounterRow::from_row) {
                Ok(s) => self.current = Some(s),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}
