//! Folded stacks and SVG flamegraphs, plain and differential.
//!
//! Owns [`folded_stacks`] (time per distinct stack in microseconds: the
//! summed sample weights, aggregated by SQLite so memory grows with
//! distinct stacks, never with samples), [`write_folded`],
//! [`write_flamegraph`] (inferno) and [`write_diff_flamegraph`] (two
//! profiles). Lines are `frame;frame;…;leaf µs`, outermost first,
//! optionally prefixed by the process and the thread; on-CPU time only,
//! unless [`FoldOptions::off_cpu`] adds the blocked time under an
//! `[off-CPU]` leaf. It never reads the inputs' files itself.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use strobe_db::visit::{Order, ProcessSamples, ProfileSink, Run, Stream, ThreadRecord};
use strobe_db::Profile;

use crate::error::{ExportError, Result};

/// The leaf frame added under a stack's off-CPU (blocked) time.
pub const OFF_CPU_FRAME: &str = "[off-CPU]";

/// The unit of the folded values, as flamegraph tooltips name it.
pub const UNIT: &str = "µs";

/// How stacks are grouped and what time they show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FoldOptions {
    /// Prefix every stack with its process (`name (pid N)`).
    pub per_process: bool,
    /// Prefix every stack with its thread (`name (tid N)`); implies the process.
    pub per_thread: bool,
    /// Add the off-CPU samples' blocked time, each stack with an extra
    /// [`OFF_CPU_FRAME`] leaf (a wall-clock flame graph: running plus
    /// blocked time). Default: on-CPU time only.
    pub off_cpu: bool,
}

/// Makes a name safe inside a folded line (no `;`) and in the flame
/// graph's XML (which admits no control characters): a program's names
/// may hold anything, so control characters are written as escapes
/// (`\x1b`), as on a terminal.
fn clean(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            ';' => out.push(':'),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Folded stacks with their time (ns) and the samples they hold.
struct Folded {
    /// Stack text → summed weights (ns).
    ns: BTreeMap<String, u64>,
    /// Samples folded (on-CPU, plus off-CPU with [`FoldOptions::off_cpu`]).
    samples: u64,
}

impl Folded {
    /// Stack text → microseconds (rounded); stacks that round to zero are
    /// left out.
    fn micros(&self) -> BTreeMap<String, u64> {
        self.ns
            .iter()
            .map(|(s, ns)| (s.clone(), ns.saturating_add(500) / 1000))
            .filter(|(_, us)| *us > 0)
            .collect()
    }
}

fn fold(p: &Profile, opt: FoldOptions) -> Result<Folded> {
    let mut fold = Fold {
        opt,
        pname: HashMap::new(),
        tname: HashMap::new(),
        out: Folded {
            ns: BTreeMap::new(),
            samples: 0,
        },
        line: String::new(),
    };
    p.visit(&mut fold)?;
    Ok(fold.out)
}

/// The folding as a sink of the profile: names of processes and threads,
/// then the samples counted per stack, one process at a time (its stacks
/// resolved by the reader).
struct Fold {
    opt: FoldOptions,
    /// Guid → `name (pid N)`.
    pname: HashMap<String, String>,
    /// (guid, tid) → `name (tid N)`.
    tname: HashMap<(String, i64), String>,
    out: Folded,
    /// The stack being written (reused).
    line: String,
}

impl ProfileSink for Fold {
    type Error = ExportError;

    fn order(&self) -> Order {
        Order::Sequence(&[Stream::SampleCounts])
    }

    fn resolve_counted_stacks(&self) -> bool {
        true
    }

    fn begin(&mut self, run: &Run) -> Result<()> {
        for q in &run.processes {
            let name = format!("{} (pid {})", clean(&q.short_name()), q.pid);
            self.pname.insert(q.guid.clone(), name);
        }
        Ok(())
    }

    fn thread(&mut self, t: &ThreadRecord) -> Result<()> {
        let n = t.name.as_deref().unwrap_or("thread");
        let name = format!("{} (tid {})", clean(n), t.tid);
        self.tname.insert((t.guid.clone(), t.tid), name);
        Ok(())
    }

    fn sample_counts(&mut self, ps: ProcessSamples) -> Result<()> {
        for g in &ps.groups {
            let on = g.samples > 0;
            let off = self.opt.off_cpu && g.off_cpu_samples > 0;
            if !on && !off {
                continue;
            }
            self.line.clear();
            if self.opt.per_process || self.opt.per_thread {
                self.line.push_str(
                    self.pname
                        .get(&*g.guid)
                        .map(String::as_str)
                        .unwrap_or("process"),
                );
                self.line.push(';');
            }
            if self.opt.per_thread {
                match self.tname.get(&(g.guid.to_string(), g.tid)) {
                    Some(t) => self.line.push_str(t),
                    None => self.line.push_str(&format!("thread (tid {})", g.tid)),
                }
                self.line.push(';');
            }
            let frames = match g.stack_id {
                Some(s) => ps
                    .stacks
                    .get(&s)
                    .cloned()
                    .unwrap_or_else(|| std::sync::Arc::from(Vec::new())),
                None => std::sync::Arc::from(Vec::new()),
            };
            if frames.is_empty() {
                self.line.push_str("[no stack]");
            }
            for (k, f) in frames.iter().rev().enumerate() {
                if k > 0 {
                    self.line.push(';');
                }
                self.line.push_str(&clean(&f.display_name()));
            }
            if on {
                *self.out.ns.entry(self.line.clone()).or_insert(0) += g.cpu_ns;
                self.out.samples += g.samples;
            }
            if off {
                self.line.push(';');
                self.line.push_str(OFF_CPU_FRAME);
                *self.out.ns.entry(self.line.clone()).or_insert(0) += g.off_cpu_ns;
                self.out.samples += g.off_cpu_samples;
            }
        }
        Ok(())
    }
}

/// Time per folded stack in microseconds (the summed weights of its
/// samples, rounded; a sample without a recorded weight, from a database
/// written before weights existed, counts one sampling period), sorted by
/// stack text. Stacks under 0.5 µs are left out.
pub fn folded_stacks(p: &Profile, opt: FoldOptions) -> Result<BTreeMap<String, u64>> {
    Ok(fold(p, opt)?.micros())
}

/// Writes folded stacks (`stack µs` lines); returns the number of samples
/// folded.
pub fn write_folded<W: Write>(p: &Profile, opt: FoldOptions, mut out: W) -> Result<u64> {
    let folded = fold(p, opt)?;
    for (s, n) in &folded.micros() {
        writeln!(out, "{s} {n}")?;
    }
    out.flush()?;
    Ok(folded.samples)
}

fn need_samples(stacks: &BTreeMap<String, u64>, what: &str) -> Result<()> {
    if stacks.is_empty() {
        return Err(ExportError::Empty {
            what: what.into(),
            needed: "samples".into(),
        });
    }
    Ok(())
}

/// inferno's options for our values: title, unit, and a subtitle naming
/// the time shown.
fn inferno_options(title: &str, opt: FoldOptions) -> inferno::flamegraph::Options<'static> {
    let mut o = inferno::flamegraph::Options::default();
    o.title = title.to_string();
    o.subtitle = Some(if opt.off_cpu {
        format!("on-CPU and off-CPU ({OFF_CPU_FRAME}) time, {UNIT}")
    } else {
        format!("on-CPU time, {UNIT}")
    });
    o.count_name = UNIT.into();
    o
}

/// Renders an interactive SVG flamegraph of the samples' time (frame
/// widths and tooltips in µs); returns the number of samples folded.
/// Fails with [`ExportError::Empty`] when there are no samples.
pub fn write_flamegraph<W: Write>(
    p: &Profile,
    opt: FoldOptions,
    title: &str,
    out: W,
) -> Result<u64> {
    let folded = fold(p, opt)?;
    let stacks = folded.micros();
    need_samples(&stacks, "flamegraph")?;
    let lines: Vec<String> = stacks.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let mut o = inferno_options(title, opt);
    inferno::flamegraph::from_lines(&mut o, lines.iter().map(String::as_str), out)
        .map_err(|e| ExportError::Flamegraph(e.to_string()))?;
    Ok(folded.samples)
}

/// Renders a differential flamegraph from `before` to `after`: frame
/// widths are `after`'s time (µs), red where `after` spends more, blue
/// where it spends less (times normalised to the same total). Returns the
/// numbers of samples folded from both.
pub fn write_diff_flamegraph<W: Write>(
    before: &Profile,
    after: &Profile,
    opt: FoldOptions,
    title: &str,
    out: W,
) -> Result<(u64, u64)> {
    let fa = fold(before, opt)?;
    let fb = fold(after, opt)?;
    let (a, b) = (fa.micros(), fb.micros());
    need_samples(&a, "differential flamegraph (first database)")?;
    need_samples(&b, "differential flamegraph (second database)")?;
    let text = |m: &BTreeMap<String, u64>| {
        m.iter()
            .map(|(s, n)| format!("{s} {n}\n"))
            .collect::<String>()
            .into_bytes()
    };
    let mut diff = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options {
            normalize: true,
            strip_hex: false,
        },
        &text(&a)[..],
        &text(&b)[..],
        &mut diff,
    )
    .map_err(|e| ExportError::Flamegraph(e.to_string()))?;
    let diff = String::from_utf8_lossy(&diff).into_owned();
    let mut o = inferno_options(title, opt);
    inferno::flamegraph::from_lines(&mut o, diff.lines(), out)
        .map_err(|e| ExportError::Flamegraph(e.to_string()))?;
    Ok((fa.samples, fb.samples))
}
