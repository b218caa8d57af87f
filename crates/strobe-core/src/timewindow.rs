//! Time-window constraints: when a collector may collect.
//!
//! Owns the `clock:delay:duration:cycles` grammar of seed 000 and the one
//! evaluator every collector uses to ask "is collection on now?" and "when
//! does that next change?". It reads clocks only through [`ClockReader`] and
//! never sleeps, spawns threads or arms timers itself.
//!
//! # Semantics
//! A setting holds one or more specs separated by white space. They run one
//! after another: the first starts when the evaluator starts; each cycle of a
//! spec is `delay` with collection off followed by `duration` with
//! collection on; after `cycles` cycles the next spec starts, its delay
//! measured on its own clock from that moment. After the last spec
//! collection is off for good ([`WindowState::Done`]). So
//! `realtime:10:1:5 process_cputime:10:2:20` is five cycles of 10 s off and
//! 1 s on in real time, then twenty cycles of 10 s off and 2 s on in process
//! CPU time, then stop.
//!
//! * The clock is optional (default `realtime`): `realtime`, `monotonic`,
//!   `process_cputime`, `thread_cputime`.
//! * `delay` is required; `duration` defaults to 0 and `cycles` to 1.
//! * `duration` 0 means "on for the rest of the run" after the delay (the
//!   spec never ends, so later specs never start).
//! * `cycles` 0 means "repeat for the rest of the run".
//! * Times are plain seconds or carry a unit (`500ms`, `2s`, `1m`).
//! * No spec at all means collection is always on.

use crate::duration::{parse_duration_ns, DisplayDuration, DurationError};
use std::fmt;
use std::str::FromStr;

/// The clock a spec measures its delay and duration on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WindowClock {
    /// Wall-clock time (`CLOCK_REALTIME`).
    Realtime,
    /// Elapsed time immune to clock adjustments (`CLOCK_MONOTONIC`).
    Monotonic,
    /// CPU time of the whole process (`CLOCK_PROCESS_CPUTIME_ID`).
    ProcessCpu,
    /// CPU time of the thread that evaluates (`CLOCK_THREAD_CPUTIME_ID`).
    ThreadCpu,
}

impl WindowClock {
    /// Every clock, in the order `strobe avail` lists them.
    pub const ALL: [WindowClock; 4] = [
        WindowClock::Realtime,
        WindowClock::Monotonic,
        WindowClock::ProcessCpu,
        WindowClock::ThreadCpu,
    ];

    /// The name used in specs.
    pub const fn name(self) -> &'static str {
        match self {
            WindowClock::Realtime => "realtime",
            WindowClock::Monotonic => "monotonic",
            WindowClock::ProcessCpu => "process_cputime",
            WindowClock::ThreadCpu => "thread_cputime",
        }
    }

    fn from_name(name: &str) -> Option<WindowClock> {
        WindowClock::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name))
    }
}

/// One `clock:delay:duration:cycles` spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSpec {
    /// The clock delay and duration are measured on.
    pub clock: WindowClock,
    /// Nanoseconds with collection off at the start of each cycle.
    pub delay_ns: u64,
    /// Nanoseconds with collection on after the delay; 0 = for the rest of the run.
    pub duration_ns: u64,
    /// How many delay+duration cycles; 0 = for the rest of the run.
    pub cycles: u64,
}

impl WindowSpec {
    /// Nanoseconds this spec lasts on its clock, or `None` if it never ends.
    pub fn total_ns(&self) -> Option<u64> {
        if self.duration_ns == 0 || self.cycles == 0 {
            return None;
        }
        (self.delay_ns + self.duration_ns).checked_mul(self.cycles)
    }
}

impl fmt::Display for WindowSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}",
            self.clock.name(),
            DisplayDuration(self.delay_ns),
            DisplayDuration(self.duration_ns),
            self.cycles
        )
    }
}

/// Why a time-window spec could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// Too many or too few `:` fields.
    #[error("'{spec}' has {fields} fields; write [clock:]delay[:duration[:cycles]], e.g. realtime:10:1:5")]
    Fields { spec: String, fields: usize },
    /// The first field is neither a clock nor a delay.
    #[error("'{spec}': unknown clock '{clock}'; use realtime, monotonic, process_cputime or thread_cputime")]
    Clock { spec: String, clock: String },
    /// A delay or duration is malformed.
    #[error("'{spec}': {source}")]
    Duration {
        spec: String,
        #[source]
        source: DurationError,
    },
    /// The cycle count is not a non-negative integer.
    #[error(
        "'{spec}': cycles '{cycles}' must be a whole number (0 = repeat for the rest of the run)"
    )]
    Cycles { spec: String, cycles: String },
}

impl FromStr for WindowSpec {
    type Err = WindowError;

    fn from_str(spec: &str) -> Result<WindowSpec, WindowError> {
        let mut fields: Vec<&str> = spec.split(':').collect();
        let field_count = fields.len();
        let starts_with_clock = fields
            .first()
            .is_some_and(|f| f.starts_with(|c: char| c.is_ascii_alphabetic()));
        let clock = if starts_with_clock {
            let name = fields.remove(0);
            WindowClock::from_name(name).ok_or_else(|| WindowError::Clock {
                spec: spec.to_string(),
                clock: name.to_string(),
            })?
        } else {
            WindowClock::Realtime
        };
        if fields.is_empty() || fields.len() > 3 {
            return Err(WindowError::Fields {
                spec: spec.to_string(),
                fields: field_count,
            });
        }
        let time = |text: &str| {
            parse_duration_ns(text).map_err(|source| WindowError::Duration {
                spec: spec.to_string(),
                source,
            })
        };
        let delay_ns = time(fields[0])?;
        let duration_ns = fields.get(1).map(|t| time(t)).transpose()?.unwrap_or(0);
        let cycles = match fields.get(2) {
            None => 1,
            Some(c) => c.trim().parse::<u64>().map_err(|_| WindowError::Cycles {
                spec: spec.to_string(),
                cycles: c.to_string(),
            })?,
        };
        Ok(WindowSpec {
            clock,
            delay_ns,
            duration_ns,
            cycles,
        })
    }
}

/// A sequence of specs, as held by a setting such as `trace_periods`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimeWindows {
    /// The specs, run one after another.
    pub specs: Vec<WindowSpec>,
}

impl FromStr for TimeWindows {
    type Err = WindowError;

    fn from_str(text: &str) -> Result<TimeWindows, WindowError> {
        let specs = text
            .split_whitespace()
            .map(WindowSpec::from_str)
            .collect::<Result<_, _>>()?;
        Ok(TimeWindows { specs })
    }
}

impl fmt::Display for TimeWindows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, spec) in self.specs.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{spec}")?;
        }
        Ok(())
    }
}

/// Reads the clocks a spec may use. [`KernelClocks`] reads the real ones.
pub trait ClockReader {
    /// The clock's current reading in nanoseconds.
    fn read_ns(&self, clock: WindowClock) -> u64;
}

/// The kernel's clocks, as seen by the calling thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelClocks;

impl ClockReader for KernelClocks {
    fn read_ns(&self, clock: WindowClock) -> u64 {
        use crate::clock::Clock;
        match clock {
            WindowClock::Realtime => Clock::Realtime.read_ns(),
            WindowClock::Monotonic => Clock::Monotonic.read_ns(),
            WindowClock::ProcessCpu => Clock::ProcessCpu.read_ns(),
            WindowClock::ThreadCpu => Clock::ThreadCpu.read_ns(),
        }
    }
}

/// Whether a collector may collect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowState {
    /// Collection is on.
    On,
    /// Collection is off for now.
    Off,
    /// Every spec has ended: collection is off for the rest of the run.
    Done,
}

/// A moment on one clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockTime {
    /// The clock.
    pub clock: WindowClock,
    /// Its reading in nanoseconds.
    pub ns: u64,
}

/// The answer of [`WindowEvaluator::status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowStatus {
    /// The state now.
    pub state: WindowState,
    /// When the state next changes, or `None` if it never does. When the
    /// following spec runs on another clock, the change is reported at the
    /// end of the current spec (the moment the other clock takes over),
    /// where the state may stay the same: ask again then.
    pub next_change: Option<ClockTime>,
}

/// Walks a [`TimeWindows`] sequence as clocks advance. One per collector
/// (per thread for `thread_cputime` specs). Cheap: no allocation after
/// [`WindowEvaluator::start`].
#[derive(Debug, Clone)]
pub struct WindowEvaluator {
    specs: Vec<WindowSpec>,
    index: usize,
    /// Reading of `specs[index].clock` when that spec started.
    spec_start: u64,
}

impl WindowEvaluator {
    /// Starts the sequence now: the first spec's delay begins at the
    /// current reading of its clock.
    pub fn start(windows: &TimeWindows, clocks: &impl ClockReader) -> WindowEvaluator {
        let spec_start = windows.specs.first().map_or(0, |s| clocks.read_ns(s.clock));
        WindowEvaluator {
            specs: windows.specs.clone(),
            index: 0,
            spec_start,
        }
    }

    /// Is collection on now?
    pub fn is_on(&mut self, clocks: &impl ClockReader) -> bool {
        self.status(clocks).state == WindowState::On
    }

    /// The state now and when it next changes.
    pub fn status(&mut self, clocks: &impl ClockReader) -> WindowStatus {
        if self.specs.is_empty() {
            return WindowStatus {
                state: WindowState::On,
                next_change: None,
            };
        }
        // Advance past every spec that has ended.
        loop {
            let Some(spec) = self.specs.get(self.index).copied() else {
                return WindowStatus {
                    state: WindowState::Done,
                    next_change: None,
                };
            };
            let now = clocks.read_ns(spec.clock);
            match spec.total_ns() {
                Some(total) if now >= self.spec_start.saturating_add(total) => {
                    self.index += 1;
                    if let Some(next) = self.specs.get(self.index) {
                        self.spec_start = if next.clock == spec.clock {
                            self.spec_start + total
                        } else {
                            clocks.read_ns(next.clock)
                        };
                    }
                }
                _ => break,
            }
        }
        let spec = self.specs[self.index];
        let now = clocks.read_ns(spec.clock);
        let (state, mut end) = segment_at(&spec, self.spec_start, now);
        // Extend through following specs on the same clock whose first
        // segment has the same state.
        let mut index = self.index;
        let mut start = self.spec_start;
        while let Some(e) = end {
            let cur = self.specs[index];
            if Some(e) != cur.total_ns().map(|t| start + t) {
                break; // the change is inside this spec
            }
            let Some(next) = self.specs.get(index + 1) else {
                break; // Done follows
            };
            if next.clock != cur.clock {
                break;
            }
            let (next_state, next_end) = segment_at(next, e, e);
            if next_state != state {
                break;
            }
            index += 1;
            start = e;
            end = next_end;
        }
        WindowStatus {
            state,
            next_change: end.map(|ns| ClockTime {
                clock: spec.clock,
                ns,
            }),
        }
    }
}

/// The state of `spec` (started at `start`) at `now`, and the end of the
/// run of that state inside the spec (`None` = it never ends).
fn segment_at(spec: &WindowSpec, start: u64, now: u64) -> (WindowState, Option<u64>) {
    let elapsed = now.saturating_sub(start);
    let spec_end = spec.total_ns().map(|t| start + t);
    if spec.duration_ns == 0 {
        return if elapsed < spec.delay_ns {
            (WindowState::Off, Some(start + spec.delay_ns))
        } else {
            (WindowState::On, None)
        };
    }
    if spec.delay_ns == 0 {
        return (WindowState::On, spec_end);
    }
    let period = spec.delay_ns + spec.duration_ns;
    let cycle_start = start + (elapsed / period) * period;
    if elapsed % period < spec.delay_ns {
        (WindowState::Off, Some(cycle_start + spec.delay_ns))
    } else {
        (WindowState::On, Some(cycle_start + period))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cell::Cell;

    /// A scripted set of clocks for pure evaluation: realtime and monotonic
    /// share one reading, the CPU clocks another.
    #[derive(Default)]
    struct Script {
        wall: Cell<u64>,
        cpu: Cell<u64>,
    }

    impl ClockReader for Script {
        fn read_ns(&self, clock: WindowClock) -> u64 {
            match clock {
                WindowClock::Realtime | WindowClock::Monotonic => self.wall.get(),
                WindowClock::ProcessCpu | WindowClock::ThreadCpu => self.cpu.get(),
            }
        }
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn parses_seed_examples() {
        let w: TimeWindows = "realtime:10:1:5 process_cputime:10:2:20".parse().unwrap();
        assert_eq!(
            w.specs,
            vec![
                WindowSpec {
                    clock: WindowClock::Realtime,
                    delay_ns: 10 * S,
                    duration_ns: S,
                    cycles: 5
                },
                WindowSpec {
                    clock: WindowClock::ProcessCpu,
                    delay_ns: 10 * S,
                    duration_ns: 2 * S,
                    cycles: 20
                },
            ]
        );
        let short: WindowSpec = "10:1:3".parse().unwrap();
        assert_eq!(short.clock, WindowClock::Realtime);
        assert_eq!(
            (short.delay_ns, short.duration_ns, short.cycles),
            (10 * S, S, 3)
        );
        let units: WindowSpec = "thread_cputime:500ms:2s".parse().unwrap();
        assert_eq!(
            (units.delay_ns, units.duration_ns, units.cycles),
            (S / 2, 2 * S, 1)
        );
        assert_eq!(w.to_string().parse::<TimeWindows>().unwrap(), w);
    }

    #[test]
    fn rejects_bad_specs_with_reasons() {
        let err = |s: &str| s.parse::<TimeWindows>().unwrap_err().to_string();
        assert!(err("walltime:1:2").contains("unknown clock 'walltime'"));
        assert!(err("1:2:3:4").contains("4 fields"));
        assert!(err("realtime").contains("1 fields"));
        assert!(err("1:2:x").contains("cycles 'x'"));
        assert!(err("1:2parsecs").contains("unknown unit"));
        assert!(err("1:zz").contains("no number"));
        assert!(err("-1:2").contains("negative"));
    }

    /// The first seed sequence: `10:1:3` = 10 s off, 1 s on, three times, stop.
    #[test]
    fn seed_sequence_10_1_3() {
        let clocks = Script::default();
        clocks.wall.set(1000 * S);
        let mut ev = WindowEvaluator::start(&"10:1:3".parse().unwrap(), &clocks);
        let mut timeline = Vec::new();
        for second in 0..40 {
            clocks.wall.set(1000 * S + second * S);
            timeline.push(ev.status(&clocks).state);
        }
        use WindowState::*;
        let mut expected = Vec::new();
        for _ in 0..3 {
            expected.extend([Off; 10]);
            expected.push(On);
        }
        expected.extend([Done; 7]);
        assert_eq!(timeline, expected);
    }

    /// The second seed sequence: five real-time cycles, then twenty cycles on
    /// process CPU time that starts counting when the first spec ends.
    #[test]
    fn seed_sequence_two_clocks() {
        let clocks = Script::default();
        let w: TimeWindows = "realtime:10:1:5 process_cputime:10:2:20".parse().unwrap();
        let mut ev = WindowEvaluator::start(&w, &clocks);
        // The CPU clock runs at half the wall rate (one busy thread of two).
        let mut on_wall = 0;
        for ms in (0..55_000).step_by(100) {
            clocks.wall.set(ms * 1_000_000);
            clocks.cpu.set(ms * 500_000);
            let st = ev.status(&clocks);
            if st.state == WindowState::On {
                on_wall += 100;
            }
            assert_ne!(st.state, WindowState::Done);
        }
        assert_eq!(on_wall, 5_000, "five one-second windows in the first 55 s");
        // The CPU-time spec started at wall 55 s = cpu 27.5 s.
        let cpu_base = 27_500 * 1_000_000;
        let mut on_cpu = 0;
        let mut step = 0;
        let mut transitions = Vec::new();
        let mut last = None;
        while step <= 240_000 {
            clocks.wall.set(55 * S + 2 * step * 1_000_000);
            clocks.cpu.set(cpu_base + step * 1_000_000);
            let st = ev.status(&clocks);
            if st.state == WindowState::On {
                on_cpu += 1;
            }
            if last != Some(st.state) {
                transitions.push((step, st.state));
                last = Some(st.state);
            }
            step += 1;
        }
        assert_eq!(
            on_cpu,
            20 * 2_000,
            "twenty two-second CPU windows (ms steps)"
        );
        assert_eq!(transitions[0], (0, WindowState::Off));
        assert_eq!(transitions[1], (10_000, WindowState::On));
        assert_eq!(transitions[2], (12_000, WindowState::Off));
        assert_eq!(*transitions.last().unwrap(), (240_000, WindowState::Done));
        assert_eq!(transitions.len(), 2 * 20 + 1);
    }

    #[test]
    fn next_change_on_the_seed_sequence() {
        let clocks = Script::default();
        let mut ev = WindowEvaluator::start(&"10:1:3".parse().unwrap(), &clocks);
        let at = |ns| {
            Some(ClockTime {
                clock: WindowClock::Realtime,
                ns,
            })
        };
        assert_eq!(ev.status(&clocks).next_change, at(10 * S));
        clocks.wall.set(10 * S);
        assert_eq!(
            ev.status(&clocks),
            WindowStatus {
                state: WindowState::On,
                next_change: at(11 * S)
            }
        );
        clocks.wall.set(32 * S + 1);
        assert_eq!(
            ev.status(&clocks),
            WindowStatus {
                state: WindowState::On,
                next_change: at(33 * S)
            }
        );
        clocks.wall.set(33 * S);
        assert_eq!(
            ev.status(&clocks),
            WindowStatus {
                state: WindowState::Done,
                next_change: None
            }
        );
    }

    #[test]
    fn no_specs_means_always_on_and_open_ended_specs() {
        let clocks = Script::default();
        let mut ev = WindowEvaluator::start(&TimeWindows::default(), &clocks);
        assert_eq!(
            ev.status(&clocks),
            WindowStatus {
                state: WindowState::On,
                next_change: None
            }
        );
        // Delay only: off for 5 s, then on forever.
        let mut ev = WindowEvaluator::start(&"5".parse().unwrap(), &clocks);
        assert_eq!(ev.status(&clocks).state, WindowState::Off);
        clocks.wall.set(5 * S);
        assert_eq!(
            ev.status(&clocks),
            WindowStatus {
                state: WindowState::On,
                next_change: None
            }
        );
        clocks.wall.set(1_000_000 * S);
        assert!(ev.is_on(&clocks));
        // Cycles 0: forever.
        clocks.wall.set(0);
        let mut ev = WindowEvaluator::start(&"1:1:0".parse().unwrap(), &clocks);
        clocks.wall.set(1_000_001 * S + S / 2);
        assert!(ev.is_on(&clocks));
    }

    /// Reference model: expand single-clock specs into explicit intervals.
    fn reference(specs: &[WindowSpec], horizon: u64) -> Vec<(u64, u64, WindowState)> {
        let mut out = Vec::new();
        let mut t = 0u64;
        for s in specs {
            let mut cycle = 0;
            loop {
                if t >= horizon {
                    return out;
                }
                if s.cycles != 0 && cycle == s.cycles {
                    break;
                }
                if s.delay_ns > 0 {
                    out.push((t, t + s.delay_ns, WindowState::Off));
                }
                t += s.delay_ns;
                if s.duration_ns == 0 {
                    out.push((t, u64::MAX, WindowState::On));
                    return out;
                }
                out.push((t, t + s.duration_ns, WindowState::On));
                t += s.duration_ns;
                cycle += 1;
            }
        }
        out.push((t, u64::MAX, WindowState::Done));
        out
    }

    fn spec_strategy() -> impl Strategy<Value = WindowSpec> {
        (0u64..5, 0u64..5, 0u64..4).prop_map(|(d, u, c)| WindowSpec {
            clock: WindowClock::Monotonic,
            delay_ns: d * 7,
            duration_ns: u * 3,
            cycles: c,
        })
    }

    proptest! {
        #[test]
        fn evaluator_matches_reference(
            specs in proptest::collection::vec(spec_strategy(), 0..4),
            probes in proptest::collection::vec(0u64..400, 1..40),
        ) {
            let windows = TimeWindows { specs: specs.clone() };
            let horizon = 10_000;
            let intervals = reference(&specs, horizon);
            let clocks = Script::default();
            let mut ev = WindowEvaluator::start(&windows, &clocks);
            let mut probes = probes;
            probes.sort_unstable();
            for t in probes {
                clocks.wall.set(t);
                let got = ev.status(&clocks);
                if specs.is_empty() {
                    prop_assert_eq!(got, WindowStatus { state: WindowState::On, next_change: None });
                    continue;
                }
                let pos = intervals.iter().position(|&(a, b, _)| a <= t && t < b).unwrap();
                let want_state = intervals[pos].2;
                prop_assert_eq!(got.state, want_state, "t={} specs={:?}", t, specs);
                let want_next = intervals[pos..]
                    .iter()
                    .find(|&&(_, _, s)| s != want_state)
                    .map(|&(a, _, _)| a)
                    .filter(|&a| a < horizon);
                prop_assert_eq!(got.next_change.map(|c| c.ns), want_next, "t={} specs={:?}", t, specs);
            }
        }

        #[test]
        fn display_parse_round_trip(specs in proptest::collection::vec(spec_strategy(), 0..4)) {
            let w = TimeWindows { specs };
            prop_assert_eq!(w.to_string().parse::<TimeWindows>().unwrap(), w);
        }
    }
}
