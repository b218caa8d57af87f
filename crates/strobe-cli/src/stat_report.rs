//! `strobe stat`'s report: counts and metrics laid out as `perf stat` lays
//! them out (REFERENCE §5), as a table, CSV (`perf stat -x,` columns) or
//! JSON lines (`perf stat -j` fields).
//!
//! Owns the layout and the per-event comments perf users expect (CPUs
//! utilized, rates per second of task-clock, instructions per cycle, miss
//! percentages). Never counts, runs or reads anything: it is given the
//! values.

use std::fmt::Write as _;

/// What one counter gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Count {
    /// Counted (already scaled by enabled / running when multiplexed).
    Value(f64),
    /// Opened but never ran (the PMU had no slot for it the whole time).
    NotCounted,
    /// This machine cannot count it.
    NotSupported,
}

/// One counter's line.
#[derive(Debug, Clone)]
pub struct CounterLine {
    pub event: String,
    pub count: Count,
    /// Nanosecond counters (task-clock, cpu-clock, duration_time) are shown
    /// in milliseconds, as perf shows them.
    pub nanoseconds: bool,
    /// Time the counter was enabled, ns.
    pub enabled_ns: u64,
    /// 100 × running / enabled (100 unless multiplexed).
    pub running_pct: f64,
}

/// One derived metric asked for with `-M`.
#[derive(Debug, Clone)]
pub struct MetricLine {
    pub name: String,
    /// `None` when it could not be computed (an input missing, a division
    /// by zero).
    pub value: Option<f64>,
    pub unit: String,
}

/// The counts of one interval (or of the whole run).
#[derive(Debug, Clone, Default)]
pub struct Block {
    /// Seconds since the start (interval mode), `None` for the totals.
    pub time_s: Option<f64>,
    /// `pid/tid` of the thread these counts are of (`--per-thread`).
    pub thread: Option<String>,
    /// Wall time this block covers, ns.
    pub wall_ns: u64,
    pub counters: Vec<CounterLine>,
    pub metrics: Vec<MetricLine>,
}

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatFormat {
    Table,
    Csv,
    Json,
}

/// perf's comment for a counter: a value and its unit, from the other
/// counters of the same block.
fn comment(line: &CounterLine, block: &Block) -> Option<(f64, String)> {
    let Count::Value(v) = line.count else {
        return None;
    };
    let other = |name: &str| {
        block.counters.iter().find_map(|c| match c.count {
            Count::Value(x) if c.event == name && x > 0.0 => Some(x),
            _ => None,
        })
    };
    let task_clock_s = other("task-clock").map(|ns| ns / 1e9);
    match line.event.as_str() {
        "task-clock" | "cpu-clock" if block.wall_ns > 0 => {
            Some((v / block.wall_ns as f64, "CPUs utilized".into()))
        }
        "instructions" => other("cycles").map(|c| (v / c, "insn per cycle".into())),
        "cycles" => task_clock_s.map(|s| (v / s / 1e9, "GHz".into())),
        "branch-misses" => other("branches").map(|b| (100.0 * v / b, "of all branches".into())),
        "cache-misses" => {
            other("cache-references").map(|r| (100.0 * v / r, "of all cache refs".into()))
        }
        "context-switches" | "cs" | "cpu-migrations" | "migrations" | "page-faults" | "faults"
        | "minor-faults" | "major-faults" | "alignment-faults" | "emulation-faults"
        | "branches" => {
            let seconds = task_clock_s.unwrap_or(block.wall_ns as f64 / 1e9);
            (seconds > 0.0).then(|| rate(v / seconds))
        }
        _ => None,
    }
}

/// A rate per second with perf's K/M/G prefixes.
fn rate(per_s: f64) -> (f64, String) {
    for (scale, prefix) in [(1e9, "G"), (1e6, "M"), (1e3, "K")] {
        if per_s >= scale {
            return (per_s / scale, format!("{prefix}/sec"));
        }
    }
    (per_s, "/sec".into())
}

/// The count column: milliseconds with two decimals for nanosecond
/// counters, integers otherwise (fractions after scaling rounded).
fn count_text(line: &CounterLine) -> String {
    match line.count {
        Count::Value(v) if line.nanoseconds => format!("{:.2}", v / 1e6),
        Count::Value(v) => format!("{:.0}", v),
        Count::NotCounted => "<not counted>".into(),
        Count::NotSupported => "<not supported>".into(),
    }
}

fn unit_text(line: &CounterLine) -> &'static str {
    if line.nanoseconds {
        "msec"
    } else {
        ""
    }
}

/// Whether a metric's unit is a percentage (printed with `%`).
fn percent(unit: &str) -> bool {
    unit.starts_with("of all")
}

/// The table: perf's columns (count, unit, event, `# comment`, then the
/// running percentage when multiplexed).
fn table_block(out: &mut String, block: &Block) {
    let time = |out: &mut String| {
        if let Some(t) = block.time_s {
            let _ = write!(out, "{t:>16.9} ");
        }
        if let Some(thread) = &block.thread {
            let _ = write!(out, "{thread:>16} ");
        }
    };
    for line in &block.counters {
        time(out);
        let _ = write!(
            out,
            "{:>18} {:<4} {:<32}",
            count_text(line),
            unit_text(line),
            line.event
        );
        match comment(line, block) {
            Some((v, unit)) if percent(&unit) => {
                let _ = write!(out, " # {v:>7.2}% {unit:<23}");
            }
            Some((v, unit)) => {
                let _ = write!(out, " # {v:>8.3} {unit:<23}");
            }
            None if line.running_pct < 100.0 => {
                let _ = write!(out, " {:<34}", "");
            }
            None => {}
        }
        if line.running_pct < 100.0 && line.count != Count::NotSupported {
            let _ = write!(out, " ({:.2}%)", line.running_pct);
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
    }
    for m in &block.metrics {
        time(out);
        let value = m
            .value
            .map_or_else(|| format!("{:>8}", "n/a"), |v| format!("{v:>8.3}"));
        let unit = if m.unit.is_empty() {
            String::new()
        } else {
            format!(" ({})", m.unit)
        };
        let _ = writeln!(
            out,
            "{:>18} {:<4} {:<32} # {value} {}{unit}",
            "", "", "", m.name
        );
    }
}

/// The whole table report: the header naming the command, each block, and
/// (for the totals) the elapsed, user and system seconds.
pub fn table(
    command: &str,
    blocks: &[Block],
    times: Option<(f64, f64, f64)>,
    passes: usize,
) -> String {
    let mut out = String::new();
    if blocks.iter().any(|b| b.time_s.is_some()) {
        out.push_str("#           time             counts unit events\n");
        for b in blocks {
            table_block(&mut out, b);
        }
        return out;
    }
    let _ = writeln!(out, "\n Performance counter stats for '{command}':\n");
    for b in blocks {
        table_block(&mut out, b);
    }
    if passes > 1 {
        let _ = writeln!(
            out,
            "\n  (counted in {passes} runs of the command, one per counter group)"
        );
    }
    if let Some((elapsed, user, sys)) = times {
        let _ = writeln!(out, "\n{elapsed:>18.9} seconds time elapsed\n");
        let _ = writeln!(out, "{user:>18.9} seconds user");
        let _ = writeln!(out, "{sys:>18.9} seconds sys");
    }
    out.push('\n');
    out
}

/// A CSV field: quoted when it holds a comma, quote or line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `perf stat -x,` columns: value, unit, event, run time (ns), running %,
/// metric value, metric unit; interval mode puts the time first. Derived
/// metrics are lines with only the metric columns.
pub fn csv(blocks: &[Block]) -> String {
    let mut out = String::new();
    for b in blocks {
        let time = b.time_s.map(|t| format!("{t:.9},")).unwrap_or_default()
            + &b.thread
                .as_ref()
                .map(|t| format!("{t},"))
                .unwrap_or_default();
        for line in &b.counters {
            let (mv, mu) = comment(line, b)
                .map(|(v, u)| (format!("{v:.3}"), u))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{time}{},{},{},{},{:.2},{mv},{}",
                count_text(line),
                unit_text(line),
                csv_field(&line.event),
                line.enabled_ns as f64 * line.running_pct / 100.0,
                line.running_pct,
                csv_field(&mu)
            );
        }
        for m in &b.metrics {
            let v = m.value.map(|v| format!("{v:.6}")).unwrap_or_default();
            let _ = writeln!(out, "{time},,,,,{v},{}", csv_field(&m.name));
        }
    }
    out
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON number, `null` when missing.
fn json_num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => "null".into(),
    }
}

/// `perf stat -j`: one object per line with perf's field names; derived
/// metrics as objects with `metric-value` and `metric-unit` only.
pub fn json(blocks: &[Block]) -> String {
    let mut out = String::new();
    for b in blocks {
        let time = b
            .time_s
            .map(|t| format!("\"interval\" : {t:.9}, "))
            .unwrap_or_default()
            + &b.thread
                .as_ref()
                .map(|t| format!("\"thread\" : {}, ", json_str(t)))
                .unwrap_or_default();
        for line in &b.counters {
            let (mv, mu) = comment(line, b).map_or((None, String::new()), |(v, u)| (Some(v), u));
            let _ = writeln!(
                out,
                "{{{time}\"counter-value\" : {}, \"unit\" : {}, \"event\" : {}, \"event-runtime\" : {:.0}, \"pcnt-running\" : {:.2}, \"metric-value\" : {}, \"metric-unit\" : {}}}",
                json_str(&count_text(line)),
                json_str(unit_text(line)),
                json_str(&line.event),
                line.enabled_ns as f64 * line.running_pct / 100.0,
                line.running_pct,
                json_num(mv),
                json_str(&mu)
            );
        }
        for m in &b.metrics {
            let _ = writeln!(
                out,
                "{{{time}\"metric-value\" : {}, \"metric-unit\" : {}}}",
                json_num(m.value),
                json_str(&m.name)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(event: &str, count: Count, ns: bool, pct: f64) -> CounterLine {
        CounterLine {
            event: event.into(),
            count,
            nanoseconds: ns,
            enabled_ns: 1_000_000_000,
            running_pct: pct,
        }
    }

    fn block() -> Block {
        Block {
            time_s: None,
            thread: None,
            wall_ns: 2_000_000_000,
            counters: vec![
                line("task-clock", Count::Value(1.5e9), true, 100.0),
                line("page-faults", Count::Value(3000.0), false, 100.0),
                line("cycles", Count::NotSupported, false, 100.0),
                line("instructions", Count::Value(4e9), false, 50.0),
            ],
            metrics: vec![MetricLine {
                name: "ipc".into(),
                value: None,
                unit: String::new(),
            }],
        }
    }

    #[test]
    fn the_table_has_perfs_columns_comments_and_running_share() {
        let t = table("./app x", &[block()], Some((2.0, 1.25, 0.25)), 1);
        assert!(
            t.contains(" Performance counter stats for './app x':"),
            "{t}"
        );
        assert!(
            t.contains(
                "           1500.00 msec task-clock                       #    0.750 CPUs utilized"
            ),
            "{t}"
        );
        assert!(
            t.contains("              3000      page-faults                      #    2.000 K/sec"),
            "{t}"
        );
        assert!(t.contains("   <not supported>      cycles\n"), "{t}");
        assert!(t.trim_end().contains("instructions"), "{t}");
        assert!(t.contains("(50.00%)"), "{t}");
        assert!(t.contains("#      n/a ipc"), "{t}");
        assert!(t.contains("       2.000000000 seconds time elapsed"), "{t}");
        assert!(t.contains("       1.250000000 seconds user"), "{t}");
    }

    #[test]
    fn csv_and_json_follow_perfs_fields() {
        let c = csv(&[block()]);
        assert!(
            c.starts_with("1500.00,msec,task-clock,1000000000,100.00,0.750,CPUs utilized\n"),
            "{c}"
        );
        assert!(c.contains("<not supported>,,cycles,"), "{c}");
        assert!(c.contains(",,,,,,ipc\n"), "{c}");
        let j = json(&[block()]);
        let first = j.lines().next().unwrap();
        assert_eq!(
            first,
            "{\"counter-value\" : \"1500.00\", \"unit\" : \"msec\", \"event\" : \"task-clock\", \"event-runtime\" : 1000000000, \"pcnt-running\" : 100.00, \"metric-value\" : 0.75, \"metric-unit\" : \"CPUs utilized\"}"
        );
        assert!(
            j.contains("{\"metric-value\" : null, \"metric-unit\" : \"ipc\"}"),
            "{j}"
        );
    }

    #[test]
    fn interval_blocks_carry_their_time() {
        let mut b = block();
        b.time_s = Some(0.5);
        let t = table("x", &[b.clone()], None, 1);
        assert!(t.starts_with("#           time             counts unit events\n"));
        assert!(
            t.contains("     0.500000000            1500.00 msec task-clock"),
            "{t}"
        );
        assert!(csv(&[b]).starts_with("0.500000000,1500.00,msec,task-clock"));
    }
}
