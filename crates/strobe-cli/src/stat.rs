//! `strobe stat`: counts and derived metrics of a command, as `perf stat`
//! gives them.
//!
//! Owns the run: which counters the events and metrics need, the held
//! child they are opened on before it executes, interval reads, multi-pass
//! runs (one per counter group) and the child's exit status. Never
//! formats (stat_report does) and never counts itself (strobe-metrics
//! does).

use crate::held::{Held, NotStarted};
use crate::stat_report::{self, Block, Count, CounterLine, MetricLine, StatFormat};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use strobe_metrics::catalog::{self, CounterSpec};
use strobe_metrics::counting::{Counters, OpenOptions, Reading, Target};
use strobe_metrics::defs::{MetricSet, Plan};

/// perf stat's default events.
const DEFAULT_EVENTS: [&str; 8] = [
    "task-clock",
    "context-switches",
    "cpu-migrations",
    "page-faults",
    "cycles",
    "instructions",
    "branches",
    "branch-misses",
];

/// Options of `strobe stat`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  strobe stat -- ./app args                          perf stat's default events
  strobe stat -e task-clock,page-faults -- ./app     these counters
  strobe stat -M ipc,cpu-utilization -- ./app        derived metrics (and the counters they need)
  strobe stat -I 500 -e task-clock -- ./app          a line every 500 ms
  strobe stat --passes auto -e EVENTS -- ./app       one run per counter group instead of multiplexing
  strobe avail --counters                            what can be counted here")]
pub struct StatArgs {
    /// Counters (comma-separated, repeatable): perf's names (task-clock, cycles, cache-misses,
    /// ...), `pmu/event=0x..,umask=0x../`, `pmu/name/`, `rXXXX`, `subsystem:tracepoint`,
    /// rusage and /proc values. Default: perf stat's set.
    #[arg(short = 'e', long = "event", value_name = "EVENTS")]
    events: Vec<String>,

    /// Derived metrics (comma-separated, repeatable) from the built-in library and the file in
    /// STROBE_METRICS; the counters they need are counted too.
    #[arg(
        short = 'M',
        long = "metrics",
        value_name = "METRICS",
        value_delimiter = ','
    )]
    metrics: Vec<String>,

    /// Print the counts of every interval of MS milliseconds while the command runs.
    #[arg(short = 'I', long = "interval-print", value_name = "MS")]
    interval_ms: Option<u64>,

    /// Also print each thread's (and child process's) counts, collected as each one exits.
    #[arg(long)]
    per_thread: bool,

    /// When the counters need more groups than the PMU has slots: `1` multiplexes them in one
    /// run (counts scaled by enabled / running time, shown as a percentage); a number or `auto`
    /// runs the command once per group instead and combines the counts.
    #[arg(long, value_name = "N|auto", default_value = "1")]
    passes: String,

    /// Output format: perf's table, CSV (`perf stat -x,` columns) or JSON lines (`perf stat -j`).
    #[arg(long, value_enum, default_value_t = StatFormat::Table)]
    format: StatFormat,

    /// Write the report to FILE instead of standard error.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,

    /// The command and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

/// One counter asked for, resolved or not supported here.
struct Wanted {
    name: String,
    spec: Option<CounterSpec>,
}

/// Nanosecond counters are shown in milliseconds.
fn is_nanoseconds(name: &str) -> bool {
    matches!(name, "task-clock" | "cpu-clock" | "duration_time")
}

/// The counters to count: the events asked for (or perf's defaults), then
/// those the metrics need that are not already there.
fn wanted(args: &StatArgs, plan: Option<&Plan>) -> Result<Vec<Wanted>> {
    let mut names: Vec<String> = if args.events.is_empty() && args.metrics.is_empty() {
        DEFAULT_EVENTS.iter().map(|s| s.to_string()).collect()
    } else {
        // Commas inside `pmu/.../` separate terms, not counters.
        args.events
            .iter()
            .flat_map(|list| catalog::split_list(list))
            .collect()
    };
    if let Some(plan) = plan {
        for c in plan.counters() {
            if !names.contains(c) {
                names.push(c.clone());
            }
        }
    }
    let mut out = Vec::new();
    for name in names {
        let name = name.trim().to_string();
        if name.is_empty() {
            continue;
        }
        let spec = catalog::resolve(&name).with_context(|| format!("event `{name}`"))?;
        out.push(Wanted {
            name,
            spec: Some(spec),
        });
    }
    Ok(out)
}

/// Opens what this machine can count; the rest is marked not supported
/// (as perf marks it) when it is one of the defaults, an error otherwise.
fn open(
    wanted: &mut [Wanted],
    pid: libc::pid_t,
    single_group: bool,
    explicit: bool,
    per_thread: bool,
) -> Result<Counters> {
    let options = OpenOptions {
        inherit: true,
        enable_on_exec: true,
        max_slots: None,
        single_group,
    };
    loop {
        let specs: Vec<CounterSpec> = wanted.iter().filter_map(|w| w.spec.clone()).collect();
        let opened = if per_thread {
            Counters::open_per_thread(&specs, Target::Process(pid), &options)
        } else {
            Counters::open(&specs, Target::Process(pid), &options)
        };
        match opened {
            Ok(c) => return Ok(c),
            Err(e) => {
                // Which one: the first that cannot be opened alone.
                let bad = wanted.iter().position(|w| {
                    w.spec.as_ref().is_some_and(|s| {
                        Counters::open(std::slice::from_ref(s), Target::Process(pid), &options)
                            .is_err()
                    })
                });
                match bad {
                    Some(i) if !explicit => wanted[i].spec = None,
                    _ => return Err(anyhow::Error::new(e)),
                }
            }
        }
    }
}

/// How many runs: 1 multiplexes; `auto` or N runs once per group.
fn passes(arg: &str) -> Result<Option<usize>> {
    match arg {
        "1" => Ok(None),
        "auto" => Ok(Some(0)),
        n => match n.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Some(n)),
            _ => bail!("--passes takes a number of runs (1 or more) or `auto`, not `{n}`"),
        },
    }
}

/// The counter lines of a block from readings (in the order of the
/// opened specs) and, when `previous` is given, as deltas from it.
fn counter_lines(
    wanted: &[Wanted],
    readings: &[Reading],
    previous: Option<&[Reading]>,
) -> Vec<CounterLine> {
    let mut at = 0;
    wanted
        .iter()
        .map(|w| {
            let (count, enabled_ns, running_pct) = if w.spec.is_none() {
                (Count::NotSupported, 0, 100.0)
            } else {
                let mut r = readings[at];
                if let Some(p) = previous {
                    r = Reading {
                        raw: r.raw.saturating_sub(p[at].raw),
                        enabled_ns: r.enabled_ns.saturating_sub(p[at].enabled_ns),
                        running_ns: r.running_ns.saturating_sub(p[at].running_ns),
                    };
                }
                at += 1;
                let count = r.scaled().map_or(Count::NotCounted, Count::Value);
                let pct = if r.enabled_ns == 0 {
                    100.0
                } else {
                    100.0 * r.running_ns as f64 / r.enabled_ns as f64
                };
                (count, r.enabled_ns, pct)
            };
            CounterLine {
                event: w.name.clone(),
                count,
                nanoseconds: is_nanoseconds(&w.name),
                enabled_ns,
                running_pct,
            }
        })
        .collect()
}

/// The metric lines: the plan evaluated over the block's counts.
fn metric_lines(plan: Option<&Plan>, lines: &[CounterLine], wall_ns: u64) -> Vec<MetricLine> {
    let Some(plan) = plan else {
        return Vec::new();
    };
    let inputs: Vec<Option<f64>> = plan
        .counters()
        .iter()
        .map(|name| {
            if name == "duration_time" {
                if let Some(l) = lines.iter().find(|l| &l.event == name) {
                    if let Count::Value(v) = l.count {
                        return Some(v);
                    }
                }
                return Some(wall_ns as f64);
            }
            lines
                .iter()
                .find(|l| &l.event == name)
                .and_then(|l| match l.count {
                    Count::Value(v) => Some(v),
                    _ => None,
                })
        })
        .collect();
    let mut out = vec![None; plan.outputs().len()];
    plan.evaluate(&inputs, &mut out);
    plan.outputs()
        .iter()
        .zip(out)
        .enumerate()
        .map(|(i, (name, value))| MetricLine {
            name: name.clone(),
            value,
            unit: plan.unit(i).unwrap_or("").to_string(),
        })
        .collect()
}

/// Called with each interval's counters, its end (seconds since the start),
/// its length (ns), the readings then and at its start.
type OnInterval<'a> = dyn FnMut(&[Wanted], f64, u64, &[Reading], &[Reading]) + 'a;

/// What one run of the command gave: the totals, the wall time, the
/// child's status and resource usage.
struct Run {
    readings: Vec<Reading>,
    /// `--per-thread`: (pid, tid, readings) of each thread as it exited,
    /// then the rest.
    threads: Vec<(libc::pid_t, libc::pid_t, Vec<Reading>)>,
    wall_ns: u64,
    status: std::process::ExitStatus,
    usage: libc::rusage,
}

/// One run of the command with `wanted` counted; interval blocks are
/// handed to `interval` as they come.
fn run_once(
    args: &StatArgs,
    wanted: &mut [Wanted],
    single_group: bool,
    interval: &mut OnInterval,
) -> Result<std::result::Result<Run, NotStarted>> {
    let name = args.command[0].to_string_lossy().into_owned();
    let mut held = Held::spawn(&args.command).context("cannot start the command")?;
    let explicit = !args.events.is_empty();
    let mut counters = open(wanted, held.pid(), single_group, explicit, args.per_thread)?;
    crate::launch::install_forwarding();
    crate::launch::forward_to(held.pid());
    let start = Instant::now();
    if let Err(e) = held.release(&name) {
        crate::launch::forward_to(0);
        return Ok(Err(e));
    }
    let (status, usage) = match args.interval_ms {
        None if !args.per_thread => held.wait()?,
        None => loop {
            // Thread exits are drained as they come, so a program making
            // many short threads does not overflow their ring.
            if let Some(done) = held.poll(libc::WNOHANG)? {
                break done;
            }
            counters.collect_thread_exits();
            std::thread::sleep(Duration::from_millis(20));
        },
        Some(ms) => {
            let period = Duration::from_millis(ms.max(1));
            let mut previous = counters.read()?;
            let mut last = start;
            let mut next = start + period;
            loop {
                let done = held.poll(libc::WNOHANG)?;
                if done.is_some() || Instant::now() >= next {
                    // Every full interval, and the part before the exit;
                    // timed when read (a reader preempted in between would
                    // otherwise count past the interval it prints).
                    let readings = counters.read()?;
                    let now = Instant::now();
                    let t = now.duration_since(start).as_secs_f64();
                    let wall = now.duration_since(last).as_nanos() as u64;
                    interval(wanted, t, wall, &readings, &previous);
                    previous = readings;
                    last = now;
                    next += period;
                }
                if let Some(done) = done {
                    break done;
                }
                counters.collect_thread_exits();
                std::thread::sleep(
                    next.saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(10)),
                );
            }
        }
    };
    crate::launch::forward_to(0);
    let wall_ns = start.elapsed().as_nanos() as u64;
    counters.apply_final_rusage(&usage);
    let readings = counters.read()?;
    let threads = counters.per_thread()?;
    if counters.thread_exits_lost() > 0 {
        eprintln!(
            "strobe: {} thread exits were lost (too many at once); their counts are in the last row",
            counters.thread_exits_lost()
        );
    }
    Ok(Ok(Run {
        readings,
        threads,
        wall_ns,
        status,
        usage,
    }))
}

fn seconds(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

/// `strobe stat`: the child's exit code (128 + signal when killed).
pub fn run(args: &StatArgs) -> Result<i32> {
    let passes = passes(&args.passes)?;
    if passes.is_some() && (args.interval_ms.is_some() || args.per_thread) {
        // Each pass counts other events over another run of the command:
        // intervals and threads of different runs do not line up.
        bail!(
            "--passes counts each group in its own run of the command: it cannot be combined \
             with -I or --per-thread (use the default, multiplexing, for those)"
        );
    }
    let set = MetricSet::from_env()?;
    let plan = if args.metrics.is_empty() {
        None
    } else {
        let names: Vec<&str> = args.metrics.iter().map(|s| s.trim()).collect();
        Some(set.plan(&names)?)
    };
    let mut wanted = wanted(args, plan.as_ref())?;
    let command = args
        .command
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let mut blocks = Vec::new();
    let plan_ref = plan.as_ref();
    let mut interval = |w: &[Wanted], t: f64, wall: u64, now: &[Reading], prev: &[Reading]| {
        let counters = counter_lines(w, now, Some(prev));
        let metrics = metric_lines(plan_ref, &counters, wall);
        blocks.push(Block {
            time_s: Some(t),
            thread: None,
            wall_ns: wall,
            counters,
            metrics,
        });
    };
    let (run, runs) = match passes {
        None => match run_once(args, &mut wanted, false, &mut interval)? {
            Ok(run) => (run, 1),
            Err(NotStarted(code, message)) => {
                say!("strobe: {message}");
                return Ok(code);
            }
        },
        Some(n) => {
            let (run, runs) = multi_pass(args, &mut wanted, n, &mut interval)?;
            match run {
                Ok(run) => (run, runs),
                Err(NotStarted(code, message)) => {
                    say!("strobe: {message}");
                    return Ok(code);
                }
            }
        }
    };
    for (pid, tid, readings) in &run.threads {
        let counters = counter_lines(&wanted, readings, None);
        blocks.push(Block {
            thread: Some(format!("{pid}/{tid}")),
            wall_ns: run.wall_ns,
            counters,
            ..Block::default()
        });
    }
    if args.interval_ms.is_none() {
        let counters = counter_lines(&wanted, &run.readings, None);
        let metrics = metric_lines(plan.as_ref(), &counters, run.wall_ns);
        blocks.push(Block {
            time_s: None,
            thread: None,
            wall_ns: run.wall_ns,
            counters,
            metrics,
        });
    }
    let times = (
        run.wall_ns as f64 / 1e9,
        seconds(run.usage.ru_utime),
        seconds(run.usage.ru_stime),
    );
    let report = match args.format {
        StatFormat::Table => stat_report::table(&command, &blocks, Some(times), runs),
        StatFormat::Csv => stat_report::csv(&blocks),
        StatFormat::Json => stat_report::json(&blocks),
    };
    match &args.output {
        Some(path) => std::fs::write(path, report)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => eprint!("{report}"),
    }
    Ok(crate::launch::exit_code(&run.status))
}

/// Runs the command once per counter group (at most `limit` runs; 0 = as
/// many as there are groups) and combines each group's counts; the last
/// run's status and times are the command's.
fn multi_pass(
    args: &StatArgs,
    wanted: &mut [Wanted],
    limit: usize,
    interval: &mut OnInterval,
) -> Result<(std::result::Result<Run, NotStarted>, usize)> {
    let specs: Vec<CounterSpec> = wanted.iter().filter_map(|w| w.spec.clone()).collect();
    let groups = Counters::plan_groups(&specs, None);
    let count = groups.iter().copied().max().map_or(1, |g| g + 1);
    if limit != 0 && count > limit {
        bail!(
            "the counters need {count} groups, more than the {limit} runs --passes allows: \
             use --passes {count} or --passes auto"
        );
    }
    let mut combined: Vec<Option<Reading>> = vec![None; specs.len()];
    let mut last = None;
    let supported: Vec<usize> = (0..wanted.len())
        .filter(|&i| wanted[i].spec.is_some())
        .collect();
    for g in 0..count {
        let mut pass: Vec<Wanted> = supported
            .iter()
            .zip(&groups)
            .filter(|(_, &grp)| grp == g)
            .map(|(&i, _)| Wanted {
                name: wanted[i].name.clone(),
                spec: wanted[i].spec.clone(),
            })
            .collect();
        let at: Vec<usize> = (0..specs.len()).filter(|&k| groups[k] == g).collect();
        match run_once(args, &mut pass, true, interval)? {
            Ok(run) => {
                for (k, r) in at.iter().zip(&run.readings) {
                    combined[*k] = Some(*r);
                }
                last = Some(run);
            }
            Err(e) => return Ok((Err(e), g + 1)),
        }
    }
    let mut run = last.expect("at least one group");
    run.readings = combined
        .into_iter()
        .map(|r| {
            r.unwrap_or(Reading {
                raw: 0,
                enabled_ns: 0,
                running_ns: 0,
            })
        })
        .collect();
    Ok((Ok(run), count))
}
