//! Part 1 of `strobe-bench kernel`: hot-function shares of oversubscribed
//! threads (4 workers on 2 cores) against each worker's measured CPU
//! time, for strobe's samplers and perf.
//!
//! Owns the split of each thread's samples between `hot_a` and `hot_b`,
//! the programs' `truth` lines, the per-round worst errors and part 1's
//! tables. It must never assert a figure.

use std::collections::HashMap;

use anyhow::Result;

use super::{
    databases, db_size, median, perf_samples, pp, samples_of, strobe_leaf_name, Bench, KernelArgs,
};

/// hot_a / (hot_a + hot_b) per thread: weighted and counted.
#[derive(Default, Clone, Copy)]
struct Split {
    /// Weight of every CPU sample of the thread, whatever its leaf.
    all_w: f64,
    a_w: f64,
    b_w: f64,
    a_n: f64,
    b_n: f64,
}

impl Split {
    fn add(&mut self, leaf: &str, w: f64) {
        self.all_w += w;
        match leaf {
            "hot_a" => {
                self.a_w += w;
                self.a_n += 1.0;
            }
            "hot_b" => {
                self.b_w += w;
                self.b_n += 1.0;
            }
            _ => {}
        }
    }
    fn weighted(&self) -> f64 {
        100.0 * self.a_w / (self.a_w + self.b_w)
    }
    fn counted(&self) -> f64 {
        100.0 * self.a_n / (self.a_n + self.b_n)
    }
}

/// The workers' `truth` lines: (tid, hot_a % of hot_a + hot_b, their ns),
/// by share.
fn truths(stderr: &str) -> Vec<(i64, f64, f64)> {
    let mut v: Vec<(i64, f64, f64)> = stderr
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.strip_prefix("truth ")?.split(' ').collect();
            let a: f64 = f.get(1)?.parse().ok()?;
            let b: f64 = f.get(2)?.parse().ok()?;
            Some((f[0].parse().ok()?, 100.0 * a / (a + b), a + b))
        })
        .collect();
    v.sort_by(|x, y| x.1.total_cmp(&y.1));
    v
}

/// The configurations of part 1 and their per-round worst errors.
struct Oversub {
    names: Vec<String>,
    worst: Vec<Vec<f64>>,
    /// Weight in hot_a + hot_b over their measured CPU time, % (weighted rows).
    accounted: Vec<Vec<f64>>,
    /// The workers' whole CPU weight over the same, %.
    accounted_all: Vec<Vec<f64>>,
    notes: Vec<String>,
}

/// One configuration's run of part 1: each worker's true share and CPU
/// time, and the split of every thread's samples (`None`: it failed).
type OversubCol = Option<(Vec<(i64, f64, f64)>, HashMap<i64, Split>)>;

impl Oversub {
    /// Adds one round's worst errors and accounted weights.
    fn score(&mut self, cols: &[OversubCol]) {
        let o = self;
        // Worst errors: column c gives configurations 2c (weighted) and 2c+1 (counted);
        // perf's counted comes first in its pair.
        for (c, col) in cols.iter().enumerate() {
            let (wi, ni) = if c < 2 {
                (2 * c, 2 * c + 1)
            } else {
                (2 * c + 1, 2 * c)
            };
            let Some((truth, by_tid)) = col else {
                o.worst[wi].push(f64::NAN);
                o.worst[ni].push(f64::NAN);
                o.accounted[wi].push(f64::NAN);
                o.accounted[ni].push(f64::NAN);
                o.accounted_all[wi].push(f64::NAN);
                o.accounted_all[ni].push(f64::NAN);
                continue;
            };
            let (mut ww, mut wn) = (0.0f64, 0.0f64);
            if truth.len() != 4 {
                ww = f64::INFINITY;
                wn = f64::INFINITY;
            }
            let (mut weight, mut all, mut ns) = (0.0, 0.0, 0.0);
            for (tid, t, t_ns) in truth {
                let s = by_tid.get(tid).copied().unwrap_or_default();
                weight += s.a_w + s.b_w;
                all += s.all_w;
                ns += t_ns;
                let (ew, en) = ((s.weighted() - t).abs(), (s.counted() - t).abs());
                ww = if ew.is_nan() {
                    f64::INFINITY
                } else {
                    ww.max(ew)
                };
                wn = if en.is_nan() {
                    f64::INFINITY
                } else {
                    wn.max(en)
                };
            }
            o.worst[wi].push(ww);
            o.worst[ni].push(wn);
            o.accounted[wi].push(100.0 * weight / ns);
            o.accounted[ni].push(f64::NAN);
            o.accounted_all[wi].push(100.0 * all / ns);
            o.accounted_all[ni].push(f64::NAN);
        }
    }
}

pub(super) fn oversubscribed(b: &mut Bench, args: &KernelArgs) -> Result<()> {
    let program = vec![b.bin("oversubscribed"), args.seconds.to_string()];
    let mut perf_freqs = vec![250];
    if !args.no_perf_1k {
        perf_freqs.push(1000);
    }
    let mut o = Oversub {
        names: vec![
            "strobe default (auto), weighted".into(),
            "strobe default (auto), counted".into(),
            "strobe --sampler kernel, weighted".into(),
            "strobe --sampler kernel, counted".into(),
        ],
        worst: vec![Vec::new(); 4],
        accounted: vec![Vec::new(); 4],
        accounted_all: vec![Vec::new(); 4],
        notes: Vec::new(),
    };
    for f in &perf_freqs {
        o.names
            .push(format!("perf --call-graph dwarf,16384 -F {f}, counted"));
        o.names.push(format!(
            "perf --call-graph dwarf,16384 -F {f}, weighted by period"
        ));
        o.worst.push(Vec::new());
        o.worst.push(Vec::new());
        o.accounted.push(Vec::new());
        o.accounted.push(Vec::new());
        o.accounted_all.push(Vec::new());
        o.accounted_all.push(Vec::new());
    }
    let mut detail = Vec::new();
    for round in 0..args.rounds {
        // (truth per worker, splits per configuration)
        let mut cols: Vec<OversubCol> = Vec::new();
        for (i, extra) in [&[][..], &["--sampler", "kernel"][..]].iter().enumerate() {
            let (f, out) = b.strobe_run(extra, &program, true)?;
            if let Some(why) = f.failure(&o.names[2 * i]) {
                o.notes.push(format!("round {}: {why}", round + 1));
                cols.push(None);
                continue;
            }
            let dbs = databases(&out);
            let all = samples_of(&dbs)?;
            if round == 0 {
                let what = format!(
                    "oversubscribed {} s × 4 workers, {}",
                    args.seconds,
                    if i == 0 {
                        "default (auto)"
                    } else {
                        "--sampler kernel"
                    }
                );
                b.sizes.push(db_size(what, &dbs[0], &all)?);
            }
            let mut by_tid: HashMap<i64, Split> = HashMap::new();
            for s in all.iter().filter(|s| s.is_cpu()) {
                by_tid
                    .entry(s.tid)
                    .or_default()
                    .add(strobe_leaf_name(s), s.weight_ns as f64);
            }
            cols.push(Some((truths(&f.stderr), by_tid)));
            let _ = std::fs::remove_dir_all(&out);
        }
        for &freq in &perf_freqs {
            if b.no_perf.is_some() {
                cols.push(None);
                continue;
            }
            let (f, data) = b.perf_run(freq, &program, true)?;
            if let Some(why) = f.failure(&format!("perf -F {freq}")) {
                o.notes.push(format!("round {}: {why}", round + 1));
                cols.push(None);
                continue;
            }
            let ps = perf_samples(&mut b.namer, &data, b.timeout)?;
            if round == 0 {
                let bytes = std::fs::metadata(&data).map(|m| m.len()).unwrap_or(0);
                b.perf_sizes.push((
                    format!("perf.data, oversubscribed, dwarf,16384 -F {freq}"),
                    bytes,
                    ps.len(),
                ));
            }
            let _ = std::fs::remove_file(&data);
            let mut by_tid: HashMap<i64, Split> = HashMap::new();
            for s in &ps {
                by_tid
                    .entry(s.tid)
                    .or_default()
                    .add(&s.sym, s.period as f64);
            }
            cols.push(Some((truths(&f.stderr), by_tid)));
        }
        o.score(&cols);
        detail.push(cols);
    }
    print_oversub(b, args, &perf_freqs, &o, &detail);
    Ok(())
}

/// Prints part 1's tables: every worker's share per round and
/// configuration, then each configuration's worst errors.
fn print_oversub(
    b: &Bench,
    args: &KernelArgs,
    perf_freqs: &[u32],
    o: &Oversub,
    detail: &[Vec<OversubCol>],
) {
    println!(
        "\n### 1. oversubscribed: hot_a share per worker (4 workers, 2 cores, {} s CPU each)\n",
        args.seconds
    );
    let mut head = "| round | target | truth % | strobe default weighted | counted | strobe kernel weighted | counted |".to_string();
    let mut rule = "|---|---|---|---|---|---|---|".to_string();
    for f in perf_freqs {
        head.push_str(&format!(" perf -F {f} counted | weighted |"));
        rule.push_str("---|---|");
    }
    println!("{head}\n{rule}");
    for (round, cols) in detail.iter().enumerate() {
        // Truth from the first configuration that ran; each run has its own tids,
        // so rows follow the worker order (by true share).
        for w in 0..4 {
            let mut truth_cell = String::new();
            let mut cells = Vec::new();
            for (c, col) in cols.iter().enumerate() {
                let Some((truth, by_tid)) = col else {
                    cells.push("—".to_string());
                    cells.push("—".to_string());
                    continue;
                };
                let Some(&(tid, t, _)) = truth.get(w) else {
                    cells.push("no truth".into());
                    cells.push("no truth".into());
                    continue;
                };
                if truth_cell.is_empty() {
                    truth_cell = format!("{t:.2}");
                }
                let s = by_tid.get(&tid).copied().unwrap_or_default();
                let cell = |v: f64| {
                    if v.is_finite() {
                        format!("{v:.2} ({:+.2})", v - t)
                    } else {
                        "no samples".into()
                    }
                };
                let (w, n) = (cell(s.weighted()), cell(s.counted()));
                if c < 2 {
                    cells.push(w);
                    cells.push(n);
                } else {
                    cells.push(n);
                    cells.push(w);
                }
            }
            println!(
                "| {} | {}% | {} | {} |",
                round + 1,
                20 * (w + 1),
                truth_cell,
                cells.join(" | ")
            );
        }
    }
    println!("\nWorst error per configuration, percentage points (|share − truth| over the 4 workers):\n");
    let mut head = "| configuration |".to_string();
    let mut rule = "|---|".to_string();
    for r in 0..args.rounds {
        head.push_str(&format!(" round {} |", r + 1));
        rule.push_str("---|");
    }
    println!("{head} median | weight in hot_a + hot_b / their measured CPU time, median % | the workers' whole CPU weight / the same, median % |\n{rule}---|---|---|");
    for (((name, worst), acct), all) in o
        .names
        .iter()
        .zip(&o.worst)
        .zip(&o.accounted)
        .zip(&o.accounted_all)
    {
        let cells: Vec<String> = worst.iter().map(|w| pp(*w)).collect();
        let med = if worst.iter().any(|w| w.is_nan()) {
            if let Some(why) = &b.no_perf {
                format!("perf unavailable: {why}")
            } else {
                "n/a".into()
            }
        } else {
            pp(median(worst))
        };
        let pct = |v: &Vec<f64>| {
            if v.iter().all(|a| a.is_nan()) {
                "—".to_string()
            } else {
                format!("{:.1}", median(v))
            }
        };
        println!(
            "| {name} | {} | {med} | {} | {} |",
            cells.join(" | "),
            pct(acct),
            pct(all)
        );
    }
    for n in &o.notes {
        println!("\nnote: {n}");
    }
}
