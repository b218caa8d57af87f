//! Process-level series (`process_sampling_freq`): each followed
//! process's resident set, threads, CPU utilisation, context switches,
//! storage I/O and CPU frequency, read from `/proc/<pid>` by the
//! collector thread, from outside the program.
//!
//! Owns which values are read (through `strobe-metrics`' procfs and
//! rusage counters on the process as target), when, and how CPU
//! utilisation is derived (CPU time over wall time between two reads).
//! Never touches the program: nothing is opened in it, nothing is
//! written to it. Never writes a database (the writer thread turns the
//! points into counter series).

use strobe_core::clock::now_ns;
use strobe_metrics::catalog::{resolve, CounterSpec};
use strobe_metrics::counting::{Counters, OpenOptions, Reading, Target};

/// One series: its name in `rocpd_info_pmc`, unit, description, whether
/// it accumulates (else a level).
pub struct Series {
    pub name: &'static str,
    pub unit: &'static str,
    pub description: &'static str,
    pub accumulating: bool,
}

/// The series, in the order of [`Point::values`].
pub const SERIES: [Series; 8] = [
    Series {
        name: "rss",
        unit: "KiB",
        description: "resident set size of the process (VmRSS of /proc/<pid>/status)",
        accumulating: false,
    },
    Series {
        name: "threads",
        unit: "",
        description: "threads of the process (Threads of /proc/<pid>/status)",
        accumulating: false,
    },
    Series {
        name: "cpu_utilisation",
        unit: "CPUs",
        description: "CPU time of the process (its CPU-time clock, ns precision) per wall \
                      time since the previous point",
        accumulating: false,
    },
    Series {
        name: "voluntary_switches",
        unit: "",
        description: "voluntary context switches (waits) of the live threads since the \
                      collector first saw the process (/proc/<pid>/task/*/status)",
        accumulating: true,
    },
    Series {
        name: "involuntary_switches",
        unit: "",
        description: "involuntary context switches (preemptions) of the live threads since \
                      the collector first saw the process (/proc/<pid>/task/*/status)",
        accumulating: true,
    },
    Series {
        name: "read_bytes",
        unit: "bytes",
        description: "bytes read from storage since the collector first saw the process \
                      (read_bytes of /proc/<pid>/io)",
        accumulating: true,
    },
    Series {
        name: "write_bytes",
        unit: "bytes",
        description: "bytes written to storage since the collector first saw the process \
                      (write_bytes of /proc/<pid>/io)",
        accumulating: true,
    },
    Series {
        name: "cpu_frequency",
        unit: "MHz",
        description: "frequency of the CPU the process's main thread last ran on (sysfs \
                      cpufreq or /proc/cpuinfo)",
        accumulating: false,
    },
];

/// The counters behind the series (CPU utilisation comes from the
/// process's CPU-time clock).
const SPECS: [&str; 7] = [
    "proc/rss/",
    "proc/threads/",
    "rusage/voluntary-switches/",
    "rusage/involuntary-switches/",
    "proc/read_bytes/",
    "proc/write_bytes/",
    "proc/cpu-frequency/",
];

/// One reading of every series at `at_ns` (`CLOCK_MONOTONIC`); `None`
/// where the value could not be read.
#[derive(Debug, Clone)]
pub struct Point {
    pub at_ns: u64,
    pub values: [Option<f64>; SERIES.len()],
}

/// Reads one process's series at a fixed rate.
pub struct ProcessSampler {
    pid: i32,
    counters: Counters,
    period_ns: u64,
    next_ns: u64,
    readings: Vec<Reading>,
    /// CPU time and wall time of the previous point.
    last_cpu: Option<(u64, u64)>,
}

impl ProcessSampler {
    /// A sampler of `pid` at `hz` per second; `None` when `hz` is 0 or
    /// the values cannot be read at all.
    pub fn new(pid: i32, hz: f64) -> Option<ProcessSampler> {
        if !(hz > 0.0 && hz.is_finite()) {
            return None;
        }
        let specs: Vec<CounterSpec> = SPECS.iter().filter_map(|s| resolve(s).ok()).collect();
        if specs.len() != SPECS.len() {
            return None;
        }
        let mut counters =
            Counters::open(&specs, Target::Process(pid), &OpenOptions::default()).ok()?;
        counters.enable().ok()?;
        let readings = vec![Reading::default(); specs.len()];
        Some(ProcessSampler {
            pid,
            counters,
            period_ns: (1e9 / hz).round().max(1.0) as u64,
            next_ns: 0,
            readings,
            last_cpu: None,
        })
    }

    /// A point when one is due (the first at once).
    pub fn due(&mut self) -> Option<Point> {
        let now = now_ns();
        if now < self.next_ns {
            return None;
        }
        self.next_ns = now + self.period_ns;
        self.counters.read_into(&mut self.readings).ok()?;
        let r = |i: usize| {
            let reading = self.readings[i];
            (reading.running_ns > 0 || reading.raw > 0).then_some(reading.raw)
        };
        // The kernel's process CPU clock of pid: ((~pid) << 3) | 2
        // (CPUCLOCK_SCHED); 0 when the process is gone.
        let cpu =
            Some(strobe_core::clock::read_clock_ns(((!self.pid) << 3) | 2)).filter(|&ns| ns > 0);
        let utilisation = match (cpu, self.last_cpu) {
            (Some(cpu), Some((last_cpu, last_at))) if now > last_at => {
                Some(cpu.saturating_sub(last_cpu) as f64 / (now - last_at) as f64)
            }
            _ => None,
        };
        if let Some(cpu) = cpu {
            self.last_cpu = Some((cpu, now));
        }
        let f = |v: Option<u64>| v.map(|v| v as f64);
        Some(Point {
            at_ns: now,
            values: [
                f(r(0)),
                f(r(1)),
                utilisation,
                f(r(2)),
                f(r(3)),
                f(r(4)),
                f(r(5)),
                f(r(6)),
            ],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_resident_set_and_threads() {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let mut s = ProcessSampler::new(pid, 1000.0).expect("procfs values of this process");
        let p = s.due().expect("the first point is due at once");
        assert!(p.values[0].unwrap() > 0.0, "rss {:?}", p.values);
        assert!(p.values[1].unwrap() >= 1.0, "threads {:?}", p.values);
        assert!(p.values[2].is_none(), "no utilisation before two points");
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        let p = s.due().expect("due after a period");
        assert!(p.values[2].is_some_and(|u| u > 0.0), "{:?}", p.values);
    }
}
