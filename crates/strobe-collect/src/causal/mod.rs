//! Causal profiling's experiments for one process (Coz's method of
//! virtual speedups), run from the collector thread.
//!
//! Each experiment selects one unit of code (a line, or a function) from a
//! recent in-scope sample, and a virtual speedup: about a quarter of the
//! experiments are 0% controls (every fourth, the first included), the
//! others deal the unit the listed speedups in shuffled rounds (so every
//! unit's curve fills evenly).
//! While it runs, every sample in the selection delays all other threads
//! by speedup × sampling period (the program side does that, see
//! `strobe_wire::causal`); the progress points' counts over the
//! experiment's effective duration (wall time minus the delay inserted)
//! measure what a real speedup of that code would give. Experiments last
//! at least 500 ms (100 sampling periods when that is longer), double
//! while a progress point saw fewer than 5 visits, and are 10 ms apart. In
//! end-to-end mode one experiment spans the whole run.
//!
//! Owns the schedule, the selection and the measurements; results leave
//! as rows in the batches the writer receives. Never blocks the collector
//! thread: the code map is built on a thread of its own.

pub mod code;

use crate::batch::Batch;
use code::CodeMap;
pub use code::{Mode, Scope};
use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::Arc;
use strobe_db::{CausalExperiment, CausalProgress, ProgressKind};
use strobe_wire::causal::point_kind;
use strobe_wire::segment::Segment;

/// What causal profiling does in every process of the run.
#[derive(Debug, Clone)]
pub struct CausalOptions {
    /// Lines or functions.
    pub mode: Mode,
    /// The code that can be selected.
    pub scope: Scope,
    /// Virtual speedups to draw from (fractions, 0 to 1).
    pub speedups: Vec<f64>,
    /// One experiment for the whole run (the speedup is the first of
    /// [`speedups`](Self::speedups)).
    pub end_to_end: bool,
    /// The configuration variant's label, stored with every experiment.
    pub variant: String,
    /// The sampling period (ns of thread CPU time).
    pub period_ns: u64,
    /// Seeds the choices (mixed with the pid).
    pub seed: u64,
    /// Experiments select only the unit this names (`file:line`, the file
    /// as a path suffix, or a function name); empty: any unit.
    pub fixed: String,
}

/// Shortest experiment.
const MIN_EXPERIMENT_NS: u64 = 500_000_000;
/// Longest experiment (a program whose progress points are rare).
const MAX_EXPERIMENT_NS: u64 = 60_000_000_000;
/// Pause between experiments.
const COOL_OFF_NS: u64 = 10_000_000;
/// Fewer visits of a progress point than this doubles the length.
const TARGET_VISITS: u64 = 5;
/// Every this many experiments, starting with the first, one is a 0%
/// control (when 0 is listed): a baseline exists from the start and
/// stays a quarter of the data.
const CONTROL_EVERY: usize = 4;
/// Most candidate units kept between two experiments.
const MAX_CANDIDATES: usize = 4096;
/// A process that ran this long without an experiment is named in the
/// run's notes.
const NOTE_AFTER_NS: u64 = 1_000_000_000;
/// An experiment cut short by the process's end is kept if it ran this
/// long.
const MIN_KEPT_NS: u64 = 100_000_000;

/// A progress point's counts at one moment.
#[derive(Debug, Clone)]
struct PointCounts {
    name: String,
    kind: u32,
    visits: u64,
    departures: u64,
}

fn point_counts(segment: &Segment) -> Vec<PointCounts> {
    segment
        .causal()
        .points()
        .map(|p| PointCounts {
            name: String::from_utf8_lossy(p.name()).into_owned(),
            kind: p.kind.load(std::sync::atomic::Ordering::Acquire),
            visits: p.visits.load(std::sync::atomic::Ordering::Acquire),
            departures: p.departures.load(std::sync::atomic::Ordering::Acquire),
        })
        .collect()
}

/// The experiment in progress.
struct Running {
    /// `None`: an end-to-end run whose selection never showed up.
    unit: Option<u32>,
    speedup: f64,
    start_ns: u64,
    end_ns: u64,
    global_delay: u64,
    selected: u64,
    points: Vec<PointCounts>,
}

enum Phase {
    /// The code map is being built.
    Mapping(mpsc::Receiver<CodeMap>),
    /// Between experiments, until the time given.
    Idle(u64),
    Running(Running),
    /// Nothing to do (nothing in scope, or the end-to-end run is over).
    Off,
}

/// The experiments of one process image.
pub struct Controller {
    segment: Arc<Segment>,
    options: CausalOptions,
    phase: Phase,
    code: CodeMap,
    pcs_at: u64,
    pcs: Vec<u64>,
    /// Units of in-scope samples since the last experiment began (a
    /// uniform sample of them past [`MAX_CANDIDATES`]).
    candidates: Vec<u32>,
    /// In-scope samples offered as candidates since then.
    offered: u64,
    /// In-scope samples per unit, for the whole run.
    counts: HashMap<u32, u64>,
    /// Per unit, the non-zero speedups not drawn yet (shuffled): each
    /// unit's experiments cover the list evenly.
    decks: HashMap<u32, Vec<f64>>,
    length_ns: u64,
    rng: fastrand::Rng,
    /// Said once, in the run's notes.
    notes: Vec<String>,
    /// Experiments that began.
    started: usize,
    /// Experiments that ended.
    ended: usize,
    /// Why nothing is in scope, once the code map says so.
    unmapped: Option<String>,
    /// The one unit experiments select (`causal_fixed`).
    fixed: Option<u32>,
}

impl Controller {
    /// Starts causal profiling of process `pid`: its code map is built on
    /// a thread of its own from the process's mappings.
    pub fn start(pid: i32, segment: Arc<Segment>, options: &CausalOptions) -> Controller {
        let (tx, rx) = mpsc::channel();
        let (scope, mode) = (options.scope.clone(), options.mode);
        let spawned = std::thread::Builder::new()
            .name("strobe-causal".into())
            .spawn(move || {
                let main = std::fs::read_link(format!("/proc/{pid}/exe"))
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let modules = strobe_symbols::proc_maps::executable_modules(pid);
                let _ = tx.send(CodeMap::build(&modules, &main, &scope, mode));
            });
        let mut notes = Vec::new();
        if let Err(e) = spawned {
            notes.push(format!("causal profiling is off for process {pid}: {e}"));
        }
        Controller {
            segment,
            options: options.clone(),
            phase: Phase::Mapping(rx),
            code: CodeMap::default(),
            pcs_at: 0,
            pcs: Vec::new(),
            candidates: Vec::new(),
            offered: 0,
            counts: HashMap::new(),
            decks: HashMap::new(),
            length_ns: MIN_EXPERIMENT_NS.max(100 * options.period_ns),
            rng: fastrand::Rng::with_seed(
                options.seed ^ (pid as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            ),
            notes,
            started: 0,
            ended: 0,
            unmapped: None,
            fixed: None,
        }
    }

    /// One step: reads the samples' in-scope addresses, starts and ends
    /// experiments; finished experiments go into `batch`.
    pub fn step(&mut self, now_ns: u64, batch: &mut Batch) {
        self.read_samples();
        enum Next {
            Code(CodeMap),
            Off,
            Begin,
            BeginEndToEnd,
            SelectEndToEnd,
            End,
            Wait,
        }
        let next = match &self.phase {
            Phase::Mapping(rx) => match rx.try_recv() {
                Ok(code) => Next::Code(code),
                Err(mpsc::TryRecvError::Empty) => Next::Wait,
                Err(mpsc::TryRecvError::Disconnected) => Next::Off,
            },
            Phase::Idle(until) if now_ns >= *until => {
                if self.options.end_to_end {
                    Next::BeginEndToEnd
                } else if !self.candidates.is_empty() {
                    Next::Begin
                } else {
                    Next::Wait
                }
            }
            Phase::Running(r) if r.unit.is_none() && !self.candidates.is_empty() => {
                Next::SelectEndToEnd
            }
            Phase::Running(r) if !self.options.end_to_end && now_ns >= r.end_ns => Next::End,
            _ => Next::Wait,
        };
        match next {
            Next::Code(code) => self.use_code(code, now_ns),
            Next::Off => self.phase = Phase::Off,
            Next::Begin => self.begin(now_ns),
            Next::BeginEndToEnd => self.begin_end_to_end(),
            Next::SelectEndToEnd => self.select_for_end_to_end(),
            Next::End => {
                batch.causal.extend(self.end(now_ns));
                self.phase = Phase::Idle(now_ns + COOL_OFF_NS);
            }
            Next::Wait => {}
        }
        batch.notes.append(&mut self.notes);
    }

    /// The process ended: the experiment in progress ends (end to end:
    /// the run's one experiment), and the sample counts go out.
    pub fn finish(&mut self, batch: &mut Batch) {
        self.read_samples();
        let now = strobe_core::clock::now_ns();
        if let Phase::Running(r) = &self.phase {
            let long_enough = now.saturating_sub(r.start_ns) >= MIN_KEPT_NS;
            if self.options.end_to_end || long_enough {
                batch.causal.extend(self.end(now));
            }
        }
        self.phase = Phase::Off;
        // Short processes (a shell's commands) end before any experiment
        // could: said only of those that ran a while.
        let lived = now.saturating_sub(self.segment.header().start_ns);
        let pid = self.segment.header().pid;
        // Nothing in scope is said of the program strobe started (its
        // children, a pipeline's other commands, are usually meant to be
        // out of scope).
        let root = self.segment.header().ppid == std::process::id() as i32;
        let unmapped = self
            .unmapped
            .take()
            .filter(|_| root && lived >= NOTE_AFTER_NS);
        if let Some(why) = unmapped {
            self.notes.push(format!(
                "causal profiling: no code of process {pid} is in scope ({why}); check the causal_*_scope settings and that the program has symbols"
            ));
        } else if !self.code.is_empty() && self.ended == 0 && lived >= NOTE_AFTER_NS {
            let seen = self.counts.values().fold(0u64, |a, &c| a.saturating_add(c));
            self.notes.push(format!(
                "causal profiling: no experiment ran in process {pid}: {seen} samples fell in scope ({}); run longer, or widen causal_binary_scope (libraries: e.g. '.') or the other scopes",
                self.code.modules.join(", ")
            ));
        }
        let mut counts: Vec<(String, u64)> = self
            .counts
            .iter()
            .map(|(&u, &n)| (self.code.units[u as usize].label.clone(), n))
            .collect();
        counts.sort();
        batch.causal_samples.extend(counts);
        batch.notes.append(&mut self.notes);
    }

    fn use_code(&mut self, code: CodeMap, now_ns: u64) {
        let area = self.segment.causal();
        if code.is_empty() {
            self.unmapped = Some(if code.modules.is_empty() {
                "no module matched".into()
            } else {
                format!("modules: {}", code.modules.join(", "))
            });
            self.phase = Phase::Off;
            return;
        }
        let ranges = code.scope_ranges();
        let kept = area.scope.publish(&ranges);
        if kept < ranges.len() {
            self.notes.push(format!(
                "causal profiling: the scope has {} address ranges, only the first {kept} are used; narrow it with the causal_*_scope settings",
                ranges.len()
            ));
        }
        if !self.options.fixed.is_empty() {
            match code.find(&self.options.fixed) {
                Some(unit) => self.fixed = Some(unit),
                None => {
                    self.unmapped = Some(format!(
                        "causal_fixed '{}' names no line or function in scope",
                        self.options.fixed
                    ));
                    self.phase = Phase::Off;
                    return;
                }
            }
        }
        self.code = code;
        self.phase = Phase::Idle(now_ns);
    }

    fn read_samples(&mut self) {
        if self.code.is_empty() {
            return;
        }
        self.pcs.clear();
        self.pcs_at = self.segment.causal().pcs_since(self.pcs_at, &mut self.pcs);
        let pcs = std::mem::take(&mut self.pcs);
        for &pc in &pcs {
            if let Some(unit) = self.code.unit_at(pc) {
                *self.counts.entry(unit).or_default() += 1;
                if self.fixed.is_none_or(|f| f == unit) {
                    self.offer_candidate(unit);
                }
            }
        }
        self.pcs = pcs;
    }

    /// Keeps `unit` among the candidates: all of them up to
    /// [`MAX_CANDIDATES`], then a uniform sample of them (reservoir), so
    /// memory stays bounded however long an experiment or run lasts.
    fn offer_candidate(&mut self, unit: u32) {
        self.offered += 1;
        if self.candidates.len() < MAX_CANDIDATES {
            self.candidates.push(unit);
        } else {
            let at = self.rng.u64(..self.offered);
            if let Some(slot) = self.candidates.get_mut(at as usize) {
                *slot = unit;
            }
        }
    }

    /// A unit drawn from the recent in-scope samples (so in proportion to
    /// their counts); the list starts over.
    fn take_candidate(&mut self) -> u32 {
        let at = self.rng.usize(..self.candidates.len());
        let unit = self.candidates[at];
        self.candidates.clear();
        self.offered = 0;
        unit
    }

    /// The speedup of the next experiment of `unit`: a 0% control about
    /// a quarter of the time (when 0 is listed), else the next from the
    /// unit's shuffled deck of the listed non-zero speedups.
    fn choose_speedup(&mut self, unit: u32) -> f64 {
        let list = &self.options.speedups;
        if list.len() == 1 {
            return list[0];
        }
        let nonzero: Vec<f64> = list.iter().copied().filter(|&s| s > 0.0).collect();
        let control = list.contains(&0.0) && self.started.is_multiple_of(CONTROL_EVERY);
        if nonzero.is_empty() || control {
            return 0.0;
        }
        let mut deck = self.decks.remove(&unit).unwrap_or_default();
        if deck.is_empty() {
            deck = nonzero;
            self.rng.shuffle(&mut deck);
        }
        let speedup = deck.pop().unwrap_or(0.0);
        self.decks.insert(unit, deck);
        speedup
    }

    /// Publishes `unit` as the selection with `speedup`'s delay.
    fn select(&self, unit: u32, speedup: f64) {
        let area = self.segment.causal();
        use std::sync::atomic::Ordering;
        area.experiment_on.store(0, Ordering::Release);
        area.selected.publish(&self.code.unit_ranges(unit));
        let delay = (speedup * self.options.period_ns as f64).round() as u64;
        area.delay_ns.store(delay, Ordering::Release);
        area.experiment_on.store(1, Ordering::Release);
    }

    fn snapshot(&self, unit: Option<u32>, speedup: f64, start_ns: u64, end_ns: u64) -> Running {
        use std::sync::atomic::Ordering;
        let area = self.segment.causal();
        Running {
            unit,
            speedup,
            start_ns,
            end_ns,
            global_delay: area.global_delay.load(Ordering::Acquire),
            selected: area.selected_samples.load(Ordering::Acquire),
            points: point_counts(&self.segment),
        }
    }

    fn begin(&mut self, now_ns: u64) {
        let unit = self.take_candidate();
        let speedup = self.choose_speedup(unit);
        self.started += 1;
        self.select(unit, speedup);
        self.phase =
            Phase::Running(self.snapshot(Some(unit), speedup, now_ns, now_ns + self.length_ns));
    }

    /// End to end: one experiment from the process's start to its end.
    fn begin_end_to_end(&mut self) {
        let start = self.segment.header().start_ns;
        let speedup = self.options.speedups.first().copied().unwrap_or(0.0);
        let mut running = self.snapshot(None, speedup, start, u64::MAX);
        // Counts from the start of the process.
        running.points.clear();
        running.global_delay = 0;
        running.selected = 0;
        self.phase = Phase::Running(running);
        if !self.candidates.is_empty() {
            self.select_for_end_to_end();
        }
    }

    fn select_for_end_to_end(&mut self) {
        let unit = self.take_candidate();
        if let Phase::Running(r) = &mut self.phase {
            r.unit = Some(unit);
            let speedup = r.speedup;
            self.select(unit, speedup);
        }
    }

    /// Ends the running experiment and measures it.
    fn end(&mut self, now_ns: u64) -> Option<CausalExperiment> {
        let e = self.measure(now_ns);
        self.ended += usize::from(e.is_some());
        e
    }

    fn measure(&mut self, now_ns: u64) -> Option<CausalExperiment> {
        use std::sync::atomic::Ordering;
        let Phase::Running(r) = std::mem::replace(&mut self.phase, Phase::Off) else {
            return None;
        };
        self.segment
            .causal()
            .experiment_on
            .store(0, Ordering::Release);
        let after = self.snapshot(r.unit, r.speedup, r.start_ns, now_ns);
        let delay = after.global_delay.saturating_sub(r.global_delay);
        let mut progress = Vec::new();
        let mut fewest = u64::MAX;
        for p in &after.points {
            let before = r
                .points
                .iter()
                .find(|b| b.name == p.name && b.kind == p.kind);
            let (v0, d0) = before.map_or((0, 0), |b| (b.visits, b.departures));
            let visits = p.visits.saturating_sub(v0);
            let departures = p.departures.saturating_sub(d0);
            let latency = p.kind == point_kind::LATENCY;
            fewest = fewest.min(if latency { departures } else { visits });
            progress.push(CausalProgress {
                name: p.name.clone(),
                kind: if latency {
                    ProgressKind::Latency
                } else {
                    ProgressKind::Throughput
                },
                visits,
                departures: if latency { departures } else { 0 },
                in_flight: if latency {
                    p.visits as i64 - p.departures as i64
                } else {
                    0
                },
            });
        }
        if self.options.end_to_end {
            progress.push(CausalProgress {
                name: "end-to-end".into(),
                kind: ProgressKind::EndToEnd,
                visits: 1,
                departures: 0,
                in_flight: 0,
            });
        } else if fewest < TARGET_VISITS {
            self.length_ns = (self.length_ns * 2).min(MAX_EXPERIMENT_NS);
        } else if fewest != u64::MAX && fewest > 2 * TARGET_VISITS {
            let floor = MIN_EXPERIMENT_NS.max(100 * self.options.period_ns);
            self.length_ns = (self.length_ns / 2).max(floor);
        }
        let unit = r.unit.map(|u| self.code.units[u as usize].clone());
        if unit.is_none() && r.speedup > 0.0 {
            // A speedup of code that never ran measures nothing.
            return None;
        }
        let wall = now_ns.saturating_sub(r.start_ns);
        let mode = match (self.options.end_to_end, self.options.mode) {
            (true, _) => "end-to-end",
            (false, Mode::Line) => "line",
            (false, Mode::Function) => "function",
        };
        Some(CausalExperiment {
            variant: self.options.variant.clone(),
            mode: mode.into(),
            selection: unit.as_ref().map_or_else(String::new, |u| u.label.clone()),
            file: unit.as_ref().and_then(|u| u.file.clone()),
            line: unit.as_ref().and_then(|u| u.line),
            function: unit.as_ref().and_then(|u| u.function.clone()),
            speedup: r.speedup,
            start_ns: r.start_ns,
            duration_ns: wall.saturating_sub(delay),
            delay_ns: delay,
            selected_samples: after.selected.saturating_sub(r.selected),
            period_ns: self.options.period_ns,
            progress,
        })
    }
}
