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

use std::collections::BTreeMap;
use std::io::Write;

use strobe_db::Profile;

use crate::error::{ExportError, Result};
use crate::source;

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
    let procs = source::processes(p)?;
    let pname: std::collections::HashMap<String, String> = procs
        .iter()
        .map(|q| {
            (
                q.guid.clone(),
                format!("{} (pid {})", clean(&q.short_name()), q.pid),
            )
        })
        .collect();
    let tname: std::collections::HashMap<(String, i64), String> = p
        .threads()?
        .filter_map(|t| t.ok())
        .map(|t| {
            let n = t.name.clone().unwrap_or_else(|| "thread".into());
            (
                (t.guid.clone(), t.tid),
                format!("{} (tid {})", clean(&n), t.tid),
            )
        })
        .collect();
    let period = strobe_db::summary::sampling_period_ns(p);
    let mut out = Folded {
        ns: BTreeMap::new(),
        samples: 0,
    };
    let mut line = String::new();
    // One process at a time, its stacks resolved by the reader.
    strobe_db::scan::for_each_process(p, period, true, &mut |ps| {
        for g in &ps.groups {
            let on = g.samples > 0;
            let off = opt.off_cpu && g.off_cpu_samples > 0;
            if !on && !off {
                continue;
            }
            line.clear();
            if opt.per_process || opt.per_thread {
                line.push_str(pname.get(&*g.guid).map(String::as_str).unwrap_or("process"));
                line.push(';');
            }
            if opt.per_thread {
                match tname.get(&(g.guid.to_string(), g.tid)) {
                    Some(t) => line.push_str(t),
                    None => line.push_str(&format!("thread (tid {})", g.tid)),
                }
                line.push(';');
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
                line.push_str("[no stack]");
            }
            for (k, f) in frames.iter().rev().enumerate() {
                if k > 0 {
                    line.push(';');
                }
                line.push_str(&clean(&source::frame_name(f)));
            }
            if on {
                *out.ns.entry(line.clone()).or_insert(0) += g.cpu_ns;
                out.samples += g.samples;
            }
            if off {
                line.push(';');
                line.push_str(OFF_CPU_FRAME);
                *out.ns.entry(line.clone()).or_insert(0) += g.off_cpu_ns;
                out.samples += g.off_cpu_samples;
            }
        }
        Ok(())
    })?;
    Ok(out)
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
