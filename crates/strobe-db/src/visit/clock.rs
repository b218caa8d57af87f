//! One time base for every process of a profile.
//!
//! Owns [`Shift`] (what puts one process's timestamps on the common time
//! base) and [`clock_shifts`], which derives it from the nodes' clock
//! snapshots, the process uuids and the MPI ranks' clock comparisons. It
//! never reads a database: it works on the [`ProcessRow`]s a visit loaded.

use std::collections::HashMap;

use super::meta::ProcessRow;

/// What puts one process's timestamps on the common time base: a constant
/// (its node's offset) and, for an MPI rank, the offset to rank 0's clock
/// measured at `MPI_Init` and `MPI_Finalize`, interpolated in between (the
/// clocks drift) and held outside. `t + shift` is the aligned time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shift {
    base: i64,
    /// (local time, offset) of the comparisons used, in time order.
    sync: [Option<(i64, i64)>; 2],
}

impl Shift {
    /// A constant shift.
    pub fn constant(ns: i64) -> Shift {
        Shift {
            base: ns,
            sync: [None, None],
        }
    }

    /// The shift at the process's time `t`.
    pub fn at(&self, t: i64) -> i64 {
        let offset = match self.sync {
            [None, _] => 0,
            [Some((_, o)), None] => o,
            [Some((t0, o0)), Some((t1, o1))] => {
                if t <= t0 || t1 <= t0 {
                    o0
                } else if t >= t1 {
                    o1
                } else {
                    let d = i128::from(o1 - o0) * i128::from(t - t0) / i128::from(t1 - t0);
                    o0 + d as i64
                }
            }
        };
        self.base + offset
    }

    /// `base` plus the offsets of `points` (local time, offset, round
    /// trip), keeping the comparisons worth using: one whose round trip was much
    /// longer than the other's (the rank was preempted mid-exchange) is
    /// left out rather than bend the line.
    pub fn with_sync(base: i64, points: &[(i64, i64, i64)]) -> Shift {
        let mut points: Vec<_> = points.to_vec();
        points.sort_unstable();
        if let [a, b] = points[..] {
            let (better, worse) = if a.2 <= b.2 { (a, b) } else { (b, a) };
            if worse.2 > 4 * better.2.max(1) && worse.2 > 50_000 {
                points = vec![better];
            }
        }
        let mut sync = [None, None];
        for (slot, p) in sync.iter_mut().zip(points.iter()) {
            *slot = Some((p.0, p.1));
        }
        if points.len() > 2 {
            sync[1] = points.last().map(|p| (p.0, p.1));
        }
        Shift { base, sync }
    }
}

impl std::ops::Add<Shift> for i64 {
    type Output = i64;
    fn add(self, shift: Shift) -> i64 {
        self.saturating_add(shift.at(self))
    }
}

/// Per-process shift that puts every process on one time base: other
/// processes as their node (`node_shifts`); MPI ranks that measured
/// their clock against rank 0 (when rank 0 is among `procs`) on rank 0's
/// clock with those measurements (to within half the round trip of the
/// best exchange: microseconds), then shifted as rank 0 is.
pub fn clock_shifts(procs: &[ProcessRow]) -> HashMap<String, Shift> {
    let node = node_shifts(procs);
    let node_of = |p: &ProcessRow| node.get(&p.guid).copied().unwrap_or(0);
    let rank_zero: HashMap<&str, &ProcessRow> = procs
        .iter()
        .filter_map(|p| match &p.mpi {
            Some((job, 0)) => Some((job.as_str(), p)),
            _ => None,
        })
        .collect();
    procs
        .iter()
        .map(|p| {
            let reference = p
                .mpi
                .as_ref()
                .and_then(|(job, _)| rank_zero.get(job.as_str()));
            let shift = match reference {
                Some(r) if !p.clock_sync.is_empty() => Shift::with_sync(node_of(r), &p.clock_sync),
                _ => Shift::constant(node_of(p)),
            };
            (p.guid.clone(), shift)
        })
        .collect()
}

/// Per-process constant shift (ns) from the nodes' clock snapshots.
///
/// Timestamps are `CLOCK_MONOTONIC` of the node that recorded them.
/// Processes of one node share that clock and are never shifted. For a
/// profile spanning several nodes, each node's monotonic clock is mapped to
/// the realtime clock through its processes' start time, which the process
/// uuid records in Unix milliseconds (UUIDv7 time field) next to the
/// monotonic `start` column; nodes are then shifted onto the first node's
/// monotonic time base. The alignment is as good as the uuid's millisecond
/// resolution and the nodes' NTP synchronisation.
fn node_shifts(procs: &[ProcessRow]) -> HashMap<String, i64> {
    let mut out = HashMap::new();
    let machines: std::collections::HashSet<&str> =
        procs.iter().map(|p| p.machine_id.as_str()).collect();
    if machines.len() <= 1 {
        for p in procs {
            out.insert(p.guid.clone(), 0);
        }
        return out;
    }
    // realtime - monotonic, per node: from a recorded clock snapshot when
    // one exists (nanoseconds), else from the process start and the uuid's
    // millisecond time field.
    let mut node_offset: HashMap<&str, i64> = HashMap::new();
    for p in procs {
        if let Some(offset) = p.realtime_minus_monotonic {
            node_offset.insert(p.machine_id.as_str(), offset);
        }
    }
    for p in procs {
        if let (Some(start), Some(ms)) = (p.start, uuid_unix_ms(&p.guid)) {
            node_offset
                .entry(p.machine_id.as_str())
                .or_insert(ms as i64 * 1_000_000 - start);
        }
    }
    let reference = procs
        .first()
        .and_then(|p| node_offset.get(p.machine_id.as_str()).copied());
    for p in procs {
        let shift = match (reference, node_offset.get(p.machine_id.as_str())) {
            (Some(r), Some(o)) => o - r,
            _ => 0,
        };
        out.insert(p.guid.clone(), shift);
    }
    out
}

/// The Unix-millisecond time field of a UUIDv7 guid (first 48 bits).
fn uuid_unix_ms(guid: &str) -> Option<u64> {
    let hex: String = guid.chars().filter(|c| *c != '-').take(12).collect();
    if hex.len() != 12 {
        return None;
    }
    u64::from_str_radix(&hex, 16).ok()
}

#[cfg(test)]
mod clock_tests {
    use super::*;

    fn proc_on(machine: &str, guid: &str, offset: Option<i64>) -> ProcessRow {
        ProcessRow {
            guid: guid.into(),
            pid: 1,
            ppid: 0,
            command: String::new(),
            machine_id: machine.into(),
            hostname: machine.into(),
            start: Some(1_000),
            realtime_minus_monotonic: offset,
            ..Default::default()
        }
    }

    #[test]
    fn recorded_clock_snapshots_align_nodes_to_the_nanosecond() {
        // Node b's monotonic clock started 5.000000123 s before node a's.
        let procs = [
            proc_on(
                "a",
                "0190a000-0000-7000-8000-000000000001",
                Some(1_700_000_000_000_000_000),
            ),
            proc_on(
                "b",
                "0190a000-0000-7000-8000-000000000002",
                Some(1_700_000_005_000_000_123),
            ),
        ];
        let shifts = clock_shifts(&procs);
        assert_eq!(shifts[&procs[0].guid].at(0), 0);
        assert_eq!(shifts[&procs[1].guid].at(0), 5_000_000_123);
    }

    #[test]
    fn without_snapshots_the_uuid_milliseconds_are_used() {
        let mut a = proc_on("a", "00000000-03e8-7000-8000-000000000001", None); // 1000 ms
        let mut b = proc_on("b", "00000000-07d0-7000-8000-000000000002", None); // 2000 ms
        a.start = Some(0);
        b.start = Some(0);
        let shifts = clock_shifts(&[a.clone(), b.clone()]);
        assert_eq!(shifts[&b.guid].at(0) - shifts[&a.guid].at(0), 1_000_000_000);
    }

    #[test]
    fn mpi_ranks_follow_their_measured_offset_and_its_drift() {
        let mut zero = proc_on("a", "00000000-03e8-7000-8000-000000000001", Some(0));
        zero.mpi = Some(("j".into(), 0));
        let mut one = proc_on("b", "00000000-03e8-7000-8000-000000000002", Some(7_000));
        one.mpi = Some(("j".into(), 1));
        // Rank 1's clock reads 1000 ns behind rank 0 at 100, 3000 ns at 1100.
        one.clock_sync = vec![(100, 1_000, 500), (1_100, 3_000, 400)];
        let shifts = clock_shifts(&[zero.clone(), one.clone()]);
        assert_eq!(shifts[&zero.guid].at(5), 0);
        let s = shifts[&one.guid];
        assert_eq!((s.at(0), s.at(600), s.at(5_000)), (1_000, 2_000, 3_000));
        assert_eq!(600 + s, 2_600);
        // A comparison made while the rank was preempted is left out.
        one.clock_sync = vec![(100, 1_000, 500), (1_100, 90_000, 200_000)];
        let s = clock_shifts(&[zero.clone(), one.clone()])[&one.guid];
        assert_eq!(s.at(1_100), 1_000);
        // Without its rank 0 a rank keeps its node's shift.
        let alone = clock_shifts(std::slice::from_ref(&one));
        assert_eq!(alone[&one.guid].at(0), 0);
    }
}
