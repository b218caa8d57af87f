//! Folded stacks and SVG flamegraphs, plain and differential.
//!
//! Owns [`folded_stacks`] (sample counts per distinct stack, aggregated by
//! SQLite so memory grows with distinct stacks, never with samples),
//! [`write_folded`], [`write_flamegraph`] (inferno) and
//! [`write_diff_flamegraph`] (two profiles). Lines are
//! `frame;frame;…;leaf count`, outermost first, optionally prefixed by the
//! process and the thread. It never reads the inputs' files itself.

use std::collections::BTreeMap;
use std::io::Write;

use strobe_db::Profile;

use crate::error::{ExportError, Result};
use crate::source;

/// How stacks are grouped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FoldOptions {
    /// Prefix every stack with its process (`name (pid N)`).
    pub per_process: bool,
    /// Prefix every stack with its thread (`name (tid N)`); implies the process.
    pub per_thread: bool,
}

/// Makes a name safe inside a folded line (no `;`, no line breaks).
fn clean(s: &str) -> String {
    s.replace(';', ":").replace(['\n', '\r'], " ")
}

/// Sample counts per folded stack, sorted by stack text.
pub fn folded_stacks(p: &Profile, opt: FoldOptions) -> Result<BTreeMap<String, u64>> {
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
    let groups = p.query_stream(
        "SELECT guid, tid, stack_id, COUNT(*) FROM samples GROUP BY guid, tid, stack_id",
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Option<i64>>(2)?,
                r.get::<_, i64>(3)?,
            ))
        },
    )?;
    let mut out = BTreeMap::new();
    let mut line = String::new();
    for g in groups {
        let (guid, tid, stack, n) = g?;
        line.clear();
        if opt.per_process || opt.per_thread {
            line.push_str(pname.get(&guid).map(String::as_str).unwrap_or("process"));
            line.push(';');
        }
        if opt.per_thread {
            match tname.get(&(guid.clone(), tid)) {
                Some(t) => line.push_str(t),
                None => line.push_str(&format!("thread (tid {tid})")),
            }
            line.push(';');
        }
        let frames = match stack {
            Some(s) => p.resolve_stack(&guid, s)?,
            None => Vec::new(),
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
        *out.entry(line.clone()).or_insert(0) += n as u64;
    }
    Ok(out)
}

/// Writes folded stacks (`stack count` lines); returns the sample total.
pub fn write_folded<W: Write>(p: &Profile, opt: FoldOptions, mut out: W) -> Result<u64> {
    let stacks = folded_stacks(p, opt)?;
    let mut total = 0;
    for (s, n) in &stacks {
        writeln!(out, "{s} {n}")?;
        total += n;
    }
    out.flush()?;
    Ok(total)
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

/// Renders an interactive SVG flamegraph of the samples; returns the sample
/// total. Fails with [`ExportError::Empty`] when there are no samples.
pub fn write_flamegraph<W: Write>(
    p: &Profile,
    opt: FoldOptions,
    title: &str,
    out: W,
) -> Result<u64> {
    let stacks = folded_stacks(p, opt)?;
    need_samples(&stacks, "flamegraph")?;
    let lines: Vec<String> = stacks.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let mut o = inferno::flamegraph::Options::default();
    o.title = title.to_string();
    o.count_name = "samples".into();
    inferno::flamegraph::from_lines(&mut o, lines.iter().map(String::as_str), out)
        .map_err(|e| ExportError::Flamegraph(e.to_string()))?;
    Ok(stacks.values().sum())
}

/// Renders a differential flamegraph from `before` to `after`: frame
/// widths are `after`'s samples, red where `after` has more, blue where it
/// has fewer (counts normalised to the same total). Returns the sample
/// totals of both.
pub fn write_diff_flamegraph<W: Write>(
    before: &Profile,
    after: &Profile,
    opt: FoldOptions,
    title: &str,
    out: W,
) -> Result<(u64, u64)> {
    let a = folded_stacks(before, opt)?;
    let b = folded_stacks(after, opt)?;
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
    let mut o = inferno::flamegraph::Options::default();
    o.title = title.to_string();
    o.count_name = "samples".into();
    inferno::flamegraph::from_lines(&mut o, diff.lines(), out)
        .map_err(|e| ExportError::Flamegraph(e.to_string()))?;
    Ok((a.values().sum(), b.values().sum()))
}
