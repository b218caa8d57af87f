//! The six parts of `strobe-bench procs` (see [`super`]): each runs its
//! series plain and under `strobe sample` and adds its rows to the table.
//!
//! Owns what each part runs (the helper programs' use, the make project,
//! the stress-ng stressors) and how its figures are written. It must
//! never assert a figure.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Result};

use super::*;

fn ms(v: f64) -> String {
    format!("{:.3} ms", v * 1e3)
}

fn secs(v: f64) -> String {
    format!("{v:.3} s")
}

fn diff_ms(a: &Series, b: &Series, stat: fn(&[f64]) -> f64) -> String {
    if a.values.is_empty() || b.values.is_empty() {
        return "–".into();
    }
    format!("{:+.3} ms", (stat(&b.values) - stat(&a.values)) * 1e3)
}

fn diff_s(a: &Series, b: &Series) -> String {
    if a.values.is_empty() || b.values.is_empty() {
        return "–".into();
    }
    format!("{:+.3} s", median(&b.values) - median(&a.values))
}

fn ratio(a: &Series, b: &Series) -> String {
    if a.values.is_empty() || b.values.is_empty() {
        return "–".into();
    }
    format!("{:.2}×", median(&b.values) / median(&a.values))
}

/// Part 1: `/bin/true`, the whole command and the program's own time.
pub(super) fn part_true(b: &mut Bench, runs: usize, rows: &mut Vec<Row>) -> Result<()> {
    eprintln!("procs: /bin/true, {runs} runs per configuration");
    let timeit = compile(&b.dir, "timeit", TIMEIT_C)?;
    let t = vec!["/bin/true".to_string()];
    let timed = vec![timeit, "/bin/true".to_string()];
    let wall = b.interleaved(
        &[
            ("/bin/true", t.clone()),
            ("strobe sample -- /bin/true", b.under_strobe(&t)),
        ],
        runs,
        |w, _| Some((w, 0.0)),
    )?;
    let inner = b.interleaved(
        &[
            ("timeit /bin/true", timed.clone()),
            ("strobe sample -- timeit /bin/true", b.under_strobe(&timed)),
        ],
        runs,
        |_, out| {
            out.lines()
                .find_map(|l| l.strip_prefix("elapsed_ns "))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map(|ns| (ns * 1e-9, 0.0))
        },
    )?;
    for (what, s) in [
        (
            "(a) whole command: `/bin/true` vs `strobe sample -- /bin/true`",
            &wall,
        ),
        (
            "(b) /bin/true inside a parent, by `timeit` (fork+exec+wait)",
            &inner,
        ),
    ] {
        for (stat_name, stat) in [("median", median as fn(&[f64]) -> f64), ("p90", p90)] {
            let mut r = Row::new("true", format!("{what}, {stat_name}"));
            let show = |x: &Series| {
                if x.values.is_empty() {
                    x.state()
                } else {
                    let mut v = ms(stat(&x.values));
                    if x.timed_out || x.failed > 0 {
                        v.push_str(&format!(" ({}, n={})", x.state(), x.values.len()));
                    }
                    v
                }
            };
            r.plain = show(&s[0]);
            r.strobe = show(&s[1]);
            r.diff = diff_ms(&s[0], &s[1], stat);
            if stat_name == "median" {
                r.ratio = ratio(&s[0], &s[1]);
            }
            rows.push(r);
        }
    }
    Ok(())
}

/// Part 2: a bash loop of 200 `/bin/true`.
pub(super) fn part_loop(b: &mut Bench, rounds: usize, rows: &mut Vec<Row>) -> Result<()> {
    eprintln!("procs: bash loop of 200 /bin/true, {rounds} rounds");
    let prog: Vec<String> = ["bash", "-c", "for i in $(seq 200); do /bin/true; done"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let s = b.interleaved(
        &[
            ("bash loop", prog.clone()),
            ("strobe sample -- bash loop", b.under_strobe(&prog)),
        ],
        rounds,
        |w, _| Some((w, 0.0)),
    )?;
    let mut r = Row::new("loop", "bash loop of 200 /bin/true, wall, median");
    r.plain = s[0].summary(secs);
    r.strobe = s[1].summary(secs);
    r.diff = diff_s(&s[0], &s[1]);
    r.ratio = ratio(&s[0], &s[1]);
    rows.push(r);
    if !s[0].values.is_empty() && !s[1].values.is_empty() {
        let mut r = Row::new("loop", "  per process (201 processes + bash), median");
        r.diff = format!(
            "{:+.3} ms",
            (median(&s[1].values) - median(&s[0].values)) * 1e3 / 202.0
        );
        rows.push(r);
    }
    Ok(())
}

/// The bogo-ops per second of real time of `stressor` in stress-ng's
/// `--metrics-brief` output.
fn bogo_ops_per_s(stressor: &str, out: &str) -> Option<f64> {
    out.lines().find_map(|l| {
        let fields: Vec<&str> = l.split_whitespace().collect();
        // stress-ng: metrc: [PID] NAME OPS REAL USR SYS OPS/S(real) OPS/S(cpu)
        match fields.as_slice() {
            [_, "metrc:", _, name, _, _, _, _, real, _] if *name == stressor => real.parse().ok(),
            _ => None,
        }
    })
}

/// Part 6: stress-ng's fork-heavy stressors, bogo-ops/s plain and under
/// strobe.
pub(super) fn part_stress(
    b: &mut Bench,
    seconds: u64,
    rounds: usize,
    rows: &mut Vec<Row>,
) -> Result<()> {
    eprintln!("procs: stress-ng --fork, --zombie, --prctl, {seconds} s each, {rounds} rounds");
    for stressor in ["fork", "zombie", "prctl"] {
        let prog: Vec<String> = [
            "stress-ng".to_string(),
            format!("--{stressor}"),
            "1".into(),
            "--timeout".into(),
            format!("{seconds}s"),
            "--metrics-brief".into(),
            "--stdout".into(),
        ]
        .to_vec();
        let s = b.interleaved(
            &[
                (stressor, prog.clone()),
                ("strobe sample -- stress-ng", b.under_strobe(&prog)),
            ],
            rounds,
            |_, out| bogo_ops_per_s(stressor, out).map(|v| (v, 0.0)),
        )?;
        let mut r = Row::new(
            "stress",
            format!("stress-ng --{stressor} 1: bogo-ops/s (real time), median"),
        );
        let ops = |v: f64| format!("{v:.0}");
        r.plain = s[0].summary(ops);
        r.strobe = s[1].summary(ops);
        if !s[0].values.is_empty() && !s[1].values.is_empty() {
            r.ratio = format!(
                "{:.2} of plain",
                median(&s[1].values) / median(&s[0].values)
            );
        }
        rows.push(r);
    }
    Ok(())
}

/// Writes 7 small C files and their Makefile into `dir`.
fn write_make_project(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut objs = Vec::new();
    for f in 0..7 {
        let mut src = String::from("#include <stdio.h>\n#include <string.h>\n\n");
        for g in 0..8 {
            writeln!(
                src,
                "struct s{f}_{g} {{ int a[16]; double d; char name[32]; }};\n\
                 long f{f}_{g}(long n) {{\n\
                 \x20   struct s{f}_{g} s;\n\
                 \x20   memset(&s, 0, sizeof s);\n\
                 \x20   long acc = 0;\n\
                 \x20   for (long i = 0; i < n; i++) {{\n\
                 \x20       s.a[i % 16] += (int)(i * {g} + {f});\n\
                 \x20       s.d += (double)s.a[(i * 7) % 16] / (i + 1);\n\
                 \x20       acc ^= s.a[i % 16] + (long)s.d;\n\
                 \x20   }}\n\
                 \x20   snprintf(s.name, sizeof s.name, \"f{f}_{g} %ld\", acc);\n\
                 \x20   return acc + (long)strlen(s.name);\n\
                 }}\n"
            )?;
        }
        if f == 0 {
            for o in 1..7 {
                writeln!(src, "long f{o}_0(long n);")?;
            }
            src.push_str("int main(void) {\n    long acc = f0_0(10);\n");
            for o in 1..7 {
                writeln!(src, "    acc += f{o}_0(10);")?;
            }
            src.push_str("    printf(\"%ld\\n\", acc);\n    return 0;\n}\n");
        }
        std::fs::write(dir.join(format!("f{f}.c")), src)?;
        objs.push(format!("f{f}.o"));
    }
    let objs = objs.join(" ");
    std::fs::write(
        dir.join("Makefile"),
        format!(
            "CC = cc\nCFLAGS = -O2 -g\nOBJS = {objs}\n\n\
             prog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n\n\
             %.o: %.c\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\n\
             clean:\n\trm -f $(OBJS) prog\n\n.PHONY: clean\n"
        ),
    )?;
    Ok(())
}

/// Part 3: `make -j2` of 7 small C files.
pub(super) fn part_make(b: &mut Bench, rounds: usize, rows: &mut Vec<Row>) -> Result<()> {
    eprintln!("procs: make -j2 of 7 C files, {rounds} rounds");
    let project = b.dir.join("make-project");
    write_make_project(&project)?;
    let p = project.display().to_string();
    let make: Vec<String> = ["make", "-s", "-C", &p, "-j2"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let clean: Vec<String> = ["make", "-s", "-C", &p, "clean"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let configs = [
        ("make -j2", make.clone()),
        ("strobe sample -- make -j2", b.under_strobe(&make)),
    ];
    let mut series: Vec<Series> = configs.iter().map(|_| Series::default()).collect();
    for _ in 0..rounds {
        for (i, (name, argv)) in configs.iter().enumerate() {
            if series[i].timed_out {
                continue;
            }
            match run_child(&clean, &b.runtime, b.timeout)? {
                Outcome::Done { success: true, .. } => {}
                _ => bail!("`make clean` failed in {}", project.display()),
            }
            b.once(name, argv, &mut series[i], |w, _| Some((w, 0.0)))?;
        }
    }
    for ((name, _), s) in configs.iter().zip(&series) {
        if let Some(why) = &s.first_failure {
            b.notes.push(format!(
                "{name}: {} of {rounds} rounds failed; first: {why}",
                s.failed
            ));
        }
    }
    let mut r = Row::new("make", "make -j2, 7 C files + link, wall, median");
    r.plain = series[0].summary(secs);
    r.strobe = series[1].summary(secs);
    r.diff = diff_s(&series[0], &series[1]);
    r.ratio = ratio(&series[0], &series[1]);
    rows.push(r);
    Ok(())
}

/// Part 4: memory added per thread and per process.
pub(super) fn part_threads(
    b: &mut Bench,
    threads: usize,
    rounds: usize,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let exe = compile(&b.dir, "threads", THREADS_C)?;
    let mut counts = vec![threads];
    if threads != 1 {
        counts.push(1);
    }
    // (threads, median VmRSS added by strobe in KiB) per finished count.
    let mut rss_added: Vec<(usize, f64)> = Vec::new();
    for t in counts {
        eprintln!("procs: {t} blocked thread(s), {rounds} rounds");
        let prog = vec![exe.clone(), t.to_string()];
        let figures = |_: f64, out: &str| -> Option<(f64, f64)> {
            let line = out.lines().find(|l| l.starts_with("rss_kib "))?;
            let f: Vec<&str> = line.split_whitespace().collect();
            match f[..] {
                ["rss_kib", rss, "hwm_kib", hwm] => Some((rss.parse().ok()?, hwm.parse().ok()?)),
                _ => None,
            }
        };
        let (plain_name, strobe_name) = if t == 1 {
            ("threads 1", "strobe sample -- threads 1")
        } else {
            ("threads T", "strobe sample -- threads T")
        };
        let rss = b.interleaved(
            &[
                (plain_name, prog.clone()),
                (strobe_name, b.under_strobe(&prog)),
            ],
            rounds,
            figures,
        )?;
        let hwm: Vec<Series> = rss
            .iter()
            .map(|s| Series {
                values: s.second.clone(),
                ..s.clone()
            })
            .collect();
        let results = [("rss_kib", rss), ("hwm_kib", hwm)];
        for (key, s) in &results {
            let label = if *key == "rss_kib" { "VmRSS" } else { "VmHWM" };
            // KiB in, MiB shown (KiB for the one-thread process).
            let mib = |v: f64| {
                if t == 1 {
                    format!("{v:.0} KiB")
                } else {
                    format!("{:.1} MiB", v / 1024.0)
                }
            };
            let mut r = Row::new(
                "threads",
                format!("{label}, {t} blocked thread(s) (64 KiB stacks), median"),
            );
            r.plain = s[0].summary(mib);
            r.strobe = s[1].summary(mib);
            if !s[0].values.is_empty() && !s[1].values.is_empty() {
                let d = median(&s[1].values) - median(&s[0].values);
                if *key == "rss_kib" {
                    rss_added.push((t, d));
                }
                r.diff = if t == 1 {
                    format!("{d:+.0} KiB")
                } else {
                    format!("{:+.1} MiB", d / 1024.0)
                };
                r.ratio = if t > 1 {
                    format!("{:+.1} KiB/thread", d / t as f64)
                } else {
                    format!("{:.2}×", median(&s[1].values) / median(&s[0].values))
                };
            } else {
                r.diff = "–".into();
            }
            rows.push(r);
        }
    }
    if let [(t, d_t), (1, d_1)] = rss_added[..] {
        let mut r = Row::new(
            "threads",
            format!(
                "VmRSS added per thread, one-thread cost removed: (Δ{t} − Δ1) / {}",
                t - 1
            ),
        );
        r.ratio = format!("{:+.1} KiB/thread", (d_t - d_1) / (t - 1) as f64);
        rows.push(r);
    }
    Ok(())
}

/// Runs `program args` and returns its stdout, or why it could not.
fn tool_output(program: &str, args: &[&str], path: &Path) -> Result<String, String> {
    match Command::new(program).args(args).arg(path).output() {
        Err(e) => Err(format!("{program} cannot be run: {e}")),
        Ok(o) if !o.status.success() => Err(format!(
            "{program} {}: {}",
            args.join(" "),
            first_line(&String::from_utf8_lossy(&o.stderr))
        )),
        Ok(o) => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
    }
}

/// Part 5: the runtime library's size and SQLite symbols.
pub(super) fn part_size(b: &mut Bench, rows: &mut Vec<Row>) -> Result<()> {
    eprintln!("procs: runtime library size");
    let lib = b.runtime.clone();
    let size = std::fs::metadata(&lib)?.len();
    let mut r = Row::new("size", format!("{}, as found", lib.display()));
    r.strobe = format!("{:.1} KiB", size as f64 / 1024.0);
    rows.push(r);

    let stripped = b.dir.join("libstrobe_runtime.stripped.so");
    std::fs::copy(&lib, &stripped)?;
    let how = match tool_output("strip", &[], &stripped) {
        Ok(_) => Ok("strip"),
        Err(why) => {
            std::fs::copy(&lib, &stripped)?;
            match tool_output("objcopy", &["--strip-all"], &stripped) {
                Ok(_) => Ok("objcopy --strip-all"),
                Err(why2) => Err(format!("{why}; {why2}")),
            }
        }
    };
    let mut r = Row::new("size", "runtime library, stripped");
    match how {
        Ok(tool) => {
            let s = std::fs::metadata(&stripped)?.len();
            r.figure = format!("runtime library, stripped ({tool})");
            r.strobe = format!("{:.1} KiB", s as f64 / 1024.0);
        }
        Err(why) => {
            r.strobe = "not measured".into();
            b.notes.push(format!("stripping the runtime: {why}"));
        }
    }
    rows.push(r);

    for (label, args) in [
        ("dynamic symbols (nm -D)", &["-D"][..]),
        ("symbol table (nm)", &[][..]),
    ] {
        let mut r = Row::new("size", format!("{label} containing \"sqlite\""));
        match tool_output("nm", args, &lib) {
            Ok(out) => {
                let total = out.lines().filter(|l| !l.trim().is_empty()).count();
                let n = out
                    .lines()
                    .filter(|l| l.to_ascii_lowercase().contains("sqlite"))
                    .count();
                r.strobe = format!("{n} of {total}");
            }
            Err(why) => {
                r.strobe = "not measured".into();
                b.notes.push(format!("{label}: {why}"));
            }
        }
        rows.push(r);
    }
    Ok(())
}
