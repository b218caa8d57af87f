//! Test fixture: the databases of a small MPI job written through
//! `strobe_db::Writer` as the MPI data contract lays them out (three ranks
//! on two nodes with `mpi.*` settings, MPI calls as `mpi` regions with the
//! contract's arguments, clock comparisons with rank 0, call-stack samples
//! and counters), plus one process of the same run that MPI did not launch.
//! Shared by convert_parquet.rs and python_package.rs (which hands the
//! directory to the pytest suite).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use strobe_db::{
    Arg, ClockSync, CounterInfo, FrameSymbols, ModuleRow, NodeInfo, ProcessInfo, Region,
    SampleKind, SampleMeta, StackFrame, ThreadInfo, Writer, WriterOptions,
};

/// Ranks of the job.
pub const RANKS: u32 = 3;
/// Rounds of communication per rank.
pub const ROUNDS: u64 = 40;
/// The job id (`mpi.job`).
pub const JOB: &str = "fixture.42";

/// The MPI functions every round calls, in order.
pub const CALLS: [&str; 7] = [
    "MPI_Send",
    "MPI_Recv",
    "MPI_Isend",
    "MPI_Irecv",
    "MPI_Waitall",
    "MPI_Allreduce",
    "MPI_Barrier",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The node of `rank` of `world`: the first two thirds on `node-a`, the
/// rest on `node-b` (ranks 0 and 1 and rank 2 of the three-rank job).
pub fn hostname(rank: u32, world: u32) -> &'static str {
    if rank * 3 < world * 2 {
        "node-a"
    } else {
        "node-b"
    }
}

/// The message key of the `n`-th message from `from` to `to` with `tag`.
fn key(from: u32, to: u32, tag: u32, n: u64) -> u64 {
    (u64::from(from) << 48) ^ (u64::from(to) << 32) ^ (u64::from(tag) << 24) ^ n
}

/// Writes one process: rank `rank` of a `world`-rank job when `Some`.
fn write_process(path: &Path, pid: u32, rank: Option<u32>, world: u32, host: &str) {
    // node-b's monotonic clock started 7 s later than node-a's.
    let origin: u64 = if host == "node-a" {
        50_000_000_000
    } else {
        43_000_000_000
    };
    let base = origin + u64::from(pid) * 1_000;
    let mut settings = vec![("sampling_freq".to_string(), "1000".to_string())];
    if let Some(r) = rank {
        settings.extend([
            ("mpi.rank".into(), r.to_string()),
            ("mpi.world_size".into(), world.to_string()),
            ("mpi.job".into(), JOB.into()),
            ("mpi.launcher".into(), "openmpi".into()),
        ]);
    }
    let opts = WriterOptions {
        node: Some(NodeInfo {
            machine_id: format!("machine-{host}"),
            hostname: host.into(),
            system_name: "Linux".into(),
            ..NodeInfo::default()
        }),
        settings,
        ..WriterOptions::default()
    };
    let info = ProcessInfo {
        pid,
        ppid: 100,
        init_ns: base,
        start_ns: base,
        start_unix_ns: 1_763_000_000_000_000_000 + u64::from(pid) * 1_000_000,
        command: match rank {
            Some(_) => "./solver --halo 2 --grid \"64 64\"".into(),
            None => "/usr/bin/mpirun -n 3 ./solver".into(),
        },
        environment: vec![],
    };
    let mut w = Writer::create(path, &info, opts).expect("create database");
    let exe = w
        .add_module(&ModuleRow {
            path: "/opt/job/solver",
            build_id: Some("00aa11bb"),
            load_address: 0x5555_0000_0000,
            size: 0x10_0000,
            file_offset: 0,
            load_ns: Some(base),
        })
        .unwrap();
    let libmpi = w
        .add_module(&ModuleRow {
            path: "/usr/lib/libmpi.so.40",
            build_id: None,
            load_address: 0x7f00_0000_0000,
            size: 0x10_0000,
            file_offset: 0,
            load_ns: Some(base),
        })
        .unwrap();
    let f = |m, pc| StackFrame {
        module: Some(m),
        rel_pc: pc,
    };
    let main = f(exe, 0x1000);
    let step = f(exe, 0x2000);
    let kernel = f(exe, 0x3000);
    let wait = f(libmpi, 0x4000);
    let unsymbolized = f(libmpi, 0x4abc);
    let mut symbols = Vec::new();
    for (frame, name, line) in [
        (main, "main", Some(10)),
        (step, "solver::step", Some(20)),
        (kernel, "solver::kernel", Some(30)),
        (wait, "MPI_Waitall", None),
    ] {
        symbols.push((w.intern_frame(frame).unwrap(), name, line));
    }
    let fs: Vec<_> = symbols
        .iter()
        .map(|(frame, name, line)| FrameSymbols {
            frame: *frame,
            function: Some(name),
            file: line.map(|_| "solver.c"),
            line: *line,
        })
        .collect();
    w.set_frame_symbols(&fs).unwrap();
    // Leaf first.
    let stacks: [Vec<StackFrame>; 3] = [
        vec![kernel, step, main],
        vec![wait, step, main],
        vec![unsymbolized, wait, step, main],
    ];
    let mpi = w.intern_string("mpi").unwrap();
    let user = w.intern_string("user").unwrap();
    let compute = w.intern_string("compute").unwrap();
    let names: Vec<_> = CALLS.iter().map(|n| w.intern_string(n).unwrap()).collect();
    let rss = w
        .add_counter(&CounterInfo {
            name: "rss",
            description: Some("resident set size"),
            units: Some("KiB"),
            component: Some("procfs"),
            accumulating: false,
            expression: None,
        })
        .unwrap();
    let misses = w
        .add_counter(&CounterInfo {
            name: "cache_misses",
            description: None,
            units: None,
            component: None,
            accumulating: true,
            expression: None,
        })
        .unwrap();
    let mut rng = Rng(0x9e37_79b9 ^ u64::from(pid));
    let threads: Vec<_> = (0..2u32)
        .map(|k| {
            let th = w
                .add_thread(&ThreadInfo {
                    tid: pid + k,
                    name: Some(if k == 0 { "main" } else { "progress" }),
                    start_ns: Some(base),
                })
                .unwrap();
            (th, w.add_track(Some(th), "cpu samples").unwrap())
        })
        .collect();
    let (main_thread, main_track) = threads[0];
    let mut t = base + 10_000;
    for round in 0..ROUNDS {
        let it = round.to_string();
        let work = 20_000 + rng.next() % 30_000;
        w.append_region(&Region {
            thread: main_thread,
            start_ns: t,
            end_ns: t + work,
            name: compute,
            category: Some(user),
            stack: None,
            correlation_id: None,
            args: &[Arg {
                name: "iteration",
                ty: "int",
                value: &it,
            }],
        })
        .unwrap();
        for s in 0..4u64 {
            let k = ((round + s) % 3) as usize;
            let kind = if k == 1 && s == 3 {
                SampleKind::OffCpu
            } else {
                SampleKind::Cpu
            };
            w.append_sample(
                main_track,
                SampleMeta {
                    timestamp_ns: t + 1_000 + s * 4_000,
                    kind,
                    weight_ns: 1_000_000 + s,
                },
                &stacks[k],
            )
            .unwrap();
            w.append_counter_sample(
                misses,
                Some(main_track),
                t + 1_000 + s * 4_000,
                (round * 10 + s) as f64,
            )
            .unwrap();
        }
        w.append_counter_sample(rss, None, t + work / 2, 1024.0 + round as f64 * 0.5)
            .unwrap();
        t += work;
        let Some(rank) = rank else {
            t += 5_000;
            continue;
        };
        let next = (rank + 1) % world;
        let prev = (rank + world - 1) % world;
        let (n_s, n_p) = (next.to_string(), prev.to_string());
        let size = world.to_string();
        for (c, name) in CALLS.iter().enumerate() {
            // The last rank computes longest, so the others wait for it.
            let wait = if *name == "MPI_Barrier" || *name == "MPI_Waitall" {
                (world - 1 - rank) as u64 * 7_000
            } else {
                0
            };
            let d = 500 + rng.next() % 4_000 + wait;
            let out_key = key(rank, next, 1, round).to_string();
            let in_key = key(prev, rank, 1, round).to_string();
            let a =
                |name: &'static str, ty: &'static str, value: &str| (name, ty, value.to_string());
            let args: Vec<(&str, &str, String)> = match *name {
                "MPI_Send" | "MPI_Isend" => vec![
                    a("bytes", "int", "8192"),
                    a("peer", "int", &n_s),
                    a("tag", "int", "1"),
                    a("comm", "string", "world"),
                    a("comm_size", "int", &size),
                    a("flow_out", "int", &out_key),
                ],
                "MPI_Recv" => vec![
                    a("bytes", "int", "8192"),
                    a("peer", "int", &n_p),
                    a("tag", "int", "1"),
                    a("comm", "string", "world"),
                    a("comm_size", "int", &size),
                    a("flow_in", "int", &in_key),
                ],
                "MPI_Irecv" => vec![
                    a("peer", "int", &n_p),
                    a("tag", "int", "1"),
                    a("comm", "string", "world"),
                    a("comm_size", "int", &size),
                ],
                "MPI_Waitall" => vec![
                    a("bytes", "int", "4096"),
                    a("recv_bytes", "int", "4096"),
                    a("peer", "int", &n_p),
                    a("comm", "string", "world"),
                    a("flow_in", "int", &in_key),
                ],
                "MPI_Allreduce" => vec![
                    a("bytes", "int", "128"),
                    a("comm", "string", "world.1"),
                    a("comm_size", "int", &size),
                ],
                _ => vec![a("comm", "string", "world"), a("comm_size", "int", &size)],
            };
            let args: Vec<Arg<'_>> = args
                .iter()
                .map(|(n, ty, v)| Arg {
                    name: n,
                    ty,
                    value: v,
                })
                .collect();
            let stack = (c == 4).then(|| w_stack(&mut w, &stacks[1]));
            w.append_region(&Region {
                thread: main_thread,
                start_ns: t,
                end_ns: t + d,
                name: names[c],
                category: Some(mpi),
                stack,
                correlation_id: None,
                args: &args,
            })
            .unwrap();
            t += d + 100;
        }
    }
    if let Some(rank) = rank.filter(|r| *r > 0) {
        // Rank r's clock reads behind rank 0's, drifting by 2 µs over the run.
        let offset = i64::from(rank) * 1_500;
        for (phase, at, drift, rtt) in [
            ("init", base + 5_000, 0, 9_000u64),
            ("finalize", t, 2_000, 8_000),
        ] {
            w.clock_sync(&ClockSync {
                phase,
                local_ns: at,
                offset_ns: offset + drift,
                rtt_ns: rtt,
                reference_rank: 0,
            })
            .unwrap();
        }
    }
    for (th, _) in &threads {
        w.end_thread(*th, t + 1_000).unwrap();
    }
    w.finish(t + 2_000).unwrap();
}

/// Interns a stack for a region's call site.
fn w_stack(w: &mut Writer, frames: &[StackFrame]) -> strobe_db::CallSiteId {
    w.intern_stack(frames).unwrap().expect("a stack")
}

/// Writes the job into `dir` as `strobe sample` lays a run out
/// (`<dir>/<host>/<pid>.db`): ranks 0-2 (pids 3000-3002) and the
/// launcher (pid 2999, no rank). Returns the databases, rank order, the
/// launcher last.
pub fn write_job(dir: &Path) -> Vec<PathBuf> {
    write_ranks(dir, RANKS)
}

/// The job with `world` ranks (pids 3000 on) and the launcher.
pub fn write_ranks(dir: &Path, world: u32) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for rank in 0..world {
        let host = hostname(rank, world);
        let pid = 3000 + rank;
        let path = dir.join(host).join(format!("{pid}.db"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        write_process(&path, pid, Some(rank), world, host);
        out.push(path);
    }
    let path = dir.join("node-a").join("2999.db");
    write_process(&path, 2999, None, world, "node-a");
    out.push(path);
    out
}
