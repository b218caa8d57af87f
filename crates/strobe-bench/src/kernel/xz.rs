//! Part 2 of `strobe-bench kernel`: xz's per-function shares under
//! strobe's samplers against perf's.
//!
//! Owns the compressible input file, the leaf and thread figures of each
//! configuration and part 2's tables. It must never assert a figure.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use super::{databases, perf_samples, samples_of, strobe_leaf, Bench, KernelArgs, Namer};

/// A deterministic ~`mib` MiB text of pseudo-random words: compressible,
/// but not trivially.
fn write_words(path: &Path, mib: usize) -> Result<()> {
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let words: Vec<Vec<u8>> = (0..5000)
        .map(|_| {
            let len = 2 + (next() % 9) as usize;
            (0..len).map(|_| b'a' + (next() % 26) as u8).collect()
        })
        .collect();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut n = 0;
    while n < mib << 20 {
        for i in 0..12 {
            let w = &words[(next() % words.len() as u64) as usize];
            f.write_all(w)?;
            f.write_all(if i == 11 { b"\n" } else { b" " })?;
            n += w.len() + 1;
        }
    }
    f.flush()?;
    Ok(())
}

/// Leaf and thread figures of one configuration of the xz part.
struct XzCol {
    name: &'static str,
    leaves: HashMap<String, f64>,
    threads: BTreeMap<i64, f64>,
    wall_s: Option<f64>,
    note: String,
}

impl XzCol {
    fn new(name: &'static str) -> XzCol {
        XzCol {
            name,
            leaves: HashMap::new(),
            threads: BTreeMap::new(),
            wall_s: None,
            note: String::new(),
        }
    }

    fn share(&self, leaf: &str) -> f64 {
        let total: f64 = self.leaves.values().sum();
        100.0 * self.leaves.get(leaf).copied().unwrap_or(0.0) / total
    }

    fn top8(&self) -> Vec<String> {
        let mut v: Vec<(&String, &f64)> = self.leaves.iter().collect();
        v.sort_by(|x, y| y.1.total_cmp(x.1).then(x.0.cmp(y.0)));
        v.into_iter().take(8).map(|(k, _)| k.clone()).collect()
    }

    /// The largest |share − reference share| over both top-8 lists.
    fn max_diff(&self, reference: &XzCol, namer: &Namer) -> String {
        let mut over = self.top8();
        over.extend(reference.top8());
        let (mut worst, mut at) = (0.0f64, String::new());
        for l in over {
            let d = (self.share(&l) - reference.share(&l)).abs();
            if d > worst {
                worst = d;
                at = l;
            }
        }
        format!("{worst:.2} ({})", namer.label(&at))
    }
}

pub(super) fn xz(b: &mut Bench, args: &KernelArgs) -> Result<()> {
    let input = b.dir.join("words.txt");
    write_words(&input, args.xz_mib)?;
    let program: Vec<String> = [
        "xz",
        "-9",
        "-T2",
        "--block-size=3MiB",
        "-c",
        input.to_str().context("temp path")?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    println!(
        "\n### 2. xz: `xz -9 -T2 --block-size=3MiB -c FILE > /dev/null`, {} MiB of pseudo-random words\n",
        args.xz_mib
    );
    let mut cols: Vec<XzCol> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for (name, extra) in [
        ("strobe default (auto)", &[][..]),
        ("strobe --sampler kernel", &["--sampler", "kernel"][..]),
    ] {
        let (f, out) = b.strobe_run(extra, &program, true)?;
        if let Some(why) = f.failure(name) {
            failures.push(why);
            continue;
        }
        let all = samples_of(&databases(&out))?;
        let mut c = XzCol::new(name);
        c.wall_s = Some(f.wall_s);
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for s in &all {
            *kinds.entry(s.kind.as_str()).or_default() += 1;
            if !s.is_cpu() {
                continue;
            }
            let w = s.weight_ns as f64;
            *c.leaves.entry(strobe_leaf(&mut b.namer, s)).or_default() += w;
            *c.threads.entry(s.tid).or_default() += w;
        }
        c.note = kinds
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ");
        let handed = f
            .stderr
            .lines()
            .filter(|l| l.contains("sampled by the kernel from then on"))
            .count();
        if handed > 0 {
            c.note
                .push_str(&format!("; {handed} thread(s) handed to the kernel"));
        }
        cols.push(c);
        let _ = std::fs::remove_dir_all(&out);
    }
    let mut perf_index = None;
    if let Some(why) = &b.no_perf {
        failures.push(format!("perf unavailable: {why}"));
    } else {
        let (f, data) = b.perf_run(250, &program, true)?;
        if let Some(why) = f.failure("perf") {
            failures.push(why);
        } else {
            let ps = perf_samples(&mut b.namer, &data, b.timeout)?;
            let bytes = std::fs::metadata(&data).map(|m| m.len()).unwrap_or(0);
            b.perf_sizes
                .push(("perf.data, xz, dwarf,16384 -F 250".into(), bytes, ps.len()));
            let _ = std::fs::remove_file(&data);
            let mut all = XzCol::new("perf dwarf -F 250, counted");
            let mut user = XzCol::new("perf, user-mode samples only");
            all.wall_s = Some(f.wall_s);
            let kernel = ps.iter().filter(|s| s.in_kernel).count();
            for s in &ps {
                for c in [&mut all, &mut user] {
                    if c.name.contains("user-mode") && s.in_kernel {
                        continue;
                    }
                    *c.leaves.entry(s.leaf.clone()).or_default() += 1.0;
                    *c.threads.entry(s.tid).or_default() += 1.0;
                }
            }
            all.note = format!(
                "{} samples, {:.1}% taken in the kernel (counted at their first user frame)",
                ps.len(),
                100.0 * kernel as f64 / ps.len().max(1) as f64
            );
            user.note = format!("{} samples", ps.len() - kernel);
            perf_index = Some(cols.len());
            cols.push(all);
            cols.push(user);
        }
    }
    print_xz(b, &cols, perf_index, &failures);
    Ok(())
}

/// Prints part 2's tables: the leaf shares of every configuration and
/// each one's threads and difference from perf.
fn print_xz(b: &Bench, cols: &[XzCol], perf_index: Option<usize>, failures: &[String]) {
    let mut rows: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    for c in cols.iter().rev() {
        for l in c.top8() {
            if seen.insert(l.clone()) {
                rows.push(l);
            }
        }
    }
    let reference = perf_index.map(|i| &cols[i]);
    if let Some(p) = reference {
        rows.sort_by(|x, y| p.share(y).total_cmp(&p.share(x)));
    }
    let names: Vec<&str> = cols.iter().map(|c| c.name).collect();
    println!(
        "| leaf function (unwind-table range) | {} |\n|---|{}",
        names.join(" % | ") + " %",
        "---|".repeat(cols.len())
    );
    for r in &rows {
        let cells: Vec<String> = cols.iter().map(|c| format!("{:.2}", c.share(r))).collect();
        println!("| {} | {} |", b.namer.label(r), cells.join(" | "));
    }
    println!(
        "\n| configuration | threads with CPU samples (share of CPU) | max abs share difference vs perf, pp (its and perf's top 8) | same vs perf's user-mode samples | wall s | notes |\n|---|---|---|---|---|---|"
    );
    let user_ref = perf_index.map(|i| &cols[i + 1]);
    for (i, c) in cols.iter().enumerate() {
        let total: f64 = c.threads.values().sum();
        let threads: Vec<String> = c
            .threads
            .iter()
            .map(|(t, w)| format!("{t}: {:.1}%", 100.0 * w / total))
            .collect();
        let (d_all, d_user) = match (reference, user_ref) {
            (Some(p), Some(u)) if Some(i) < perf_index => {
                (c.max_diff(p, &b.namer), c.max_diff(u, &b.namer))
            }
            (Some(_), _) => ("(reference)".into(), "(reference)".into()),
            _ => {
                let why = format!(
                    "perf unavailable: {}",
                    b.no_perf.as_deref().unwrap_or("it failed")
                );
                (why.clone(), why)
            }
        };
        println!(
            "| {} | {} ({}) | {d_all} | {d_user} | {} | {} |",
            c.name,
            c.threads.len(),
            threads.join(", "),
            c.wall_s.map_or("—".into(), |w| format!("{w:.2}")),
            c.note
        );
    }
    for f in failures {
        println!("\nnote: {f}");
    }
}
