//! Synthetic MPI-job profiles, for tests and benchmarks over many files.
//!
//! Owns [`JobSpec`] and writing the rank databases of an imaginary MPI job
//! through the real [`Writer`], exactly as `strobe sample` lays them out
//! (`<dir>/<hostname>/<pid>.db`, one database per rank), deterministic from
//! a seed: the same spec always gives the same rows (only the writer's own
//! clock snapshot in `strobe_settings` differs between generations). Each
//! rank holds a few threads, call-stack samples (mostly on CPU, some off
//! CPU) drawn from a pool of stacks over about 200 symbolized functions in
//! six modules shared by every rank, a few hundred regions including `mpi`
//! regions with the arguments of the MPI data contract (`bytes`, `peer`,
//! `tag`, `comm`, `comm_size`, `root`, `flow_out`/`flow_in` keys that match
//! between sender and receiver), a per-thread counter read with each sample
//! (`sampling_events`), a process counter time series, and the `mpi.rank`,
//! `mpi.world_size`, `mpi.job` and `mpi.launcher` settings. Ranks are spread
//! over `nodes` hosts in blocks (as launchers place them), each node with
//! its own machine id and its own monotonic clock origin.
//!
//! The profiler never uses this module; it is here so that the integration
//! tests and `strobe-bench multinode` write the same data. It never reads a
//! database.

use std::path::{Path, PathBuf};

use fastrand::Rng;

use crate::writer::{
    Arg, CounterId, CounterInfo, FrameSymbols, ModuleId, ModuleRow, Region, SampleKind, SampleMeta,
    StackFrame, StringId, ThreadInfo, ThreadRef, TrackId, Writer, WriterOptions,
};
use crate::{NodeInfo, ProcessInfo, Result};

/// What to generate.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// Ranks (one database each).
    pub ranks: u32,
    /// Hosts the ranks are spread over, in blocks of consecutive ranks.
    pub nodes: u32,
    /// Seeds every random choice.
    pub seed: u64,
    /// Fewest call-stack samples of a rank.
    pub min_samples: u32,
    /// Most call-stack samples of a rank.
    pub max_samples: u32,
    /// Time steps; each writes about ten regions.
    pub steps: u32,
    /// The launcher's job id (`mpi.job`).
    pub job: String,
}

impl Default for JobSpec {
    fn default() -> Self {
        JobSpec {
            ranks: 4,
            nodes: 2,
            seed: 1,
            min_samples: 1_000,
            max_samples: 5_000,
            steps: 40,
            job: "synth.0".into(),
        }
    }
}

/// What one rank's database holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RankTotals {
    /// The database written.
    pub path: PathBuf,
    /// Regions (MPI calls included).
    pub regions: u64,
    /// Call-stack samples, on and off CPU.
    pub samples: u64,
    /// Counter values.
    pub counter_samples: u64,
}

/// Module paths, and how many of the functions each holds.
const MODULES: [(&str, u64); 6] = [
    ("/opt/synth/bin/solver", 40),
    ("/opt/synth/lib/libphysics.so", 70),
    ("/usr/lib/x86_64-linux-gnu/libmpi.so.40", 40),
    ("/usr/lib/x86_64-linux-gnu/libc.so.6", 25),
    ("/usr/lib/x86_64-linux-gnu/libm.so.6", 15),
    ("/usr/lib/x86_64-linux-gnu/libgomp.so.1", 10),
];
/// Call stacks the samples are drawn from (the same in every rank).
const STACKS: u64 = 300;
/// Bytes between two functions of a module.
const FN_SIZE: u64 = 0x200;
/// The sampling period written as each sample's weight (ns, 1 kHz).
pub const PERIOD_NS: u64 = 1_000_000;

/// Random stream `stream` of a job seeded with `seed`: each rank, node
/// and pooled stack draws from a stream of its own, so ranks can be
/// written in any order, on any thread, and give the same rows.
fn rng(seed: u64, stream: u64) -> Rng {
    Rng::with_seed(seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// The function number `k` (0..200) as (module index, function index in it).
fn function_at(k: u64) -> (usize, u64) {
    let mut k = k;
    for (m, (_, n)) in MODULES.iter().enumerate() {
        if k < *n {
            return (m, k);
        }
        k -= n;
    }
    (0, 0)
}

/// All functions, in module order.
fn function_count() -> u64 {
    MODULES.iter().map(|(_, n)| n).sum()
}

/// The name of function `j` of module `m`.
fn function_name(m: usize, j: u64) -> String {
    match (m, j) {
        (0, 0) => "main".into(),
        (0, 1) => "solver::run".into(),
        (0, 2) => "solver::step".into(),
        (0, 3) => "solver::exchange_halo".into(),
        (0, 4) => "solver::reduce_residual".into(),
        (0, j) => format!("solver::stage_{j}"),
        (1, j) => format!("physics::kernel_{j}"),
        (2, 0) => "MPI_Waitall".into(),
        (2, 1) => "MPI_Allreduce".into(),
        (2, 2) => "MPI_Barrier".into(),
        (2, 3) => "MPI_Isend".into(),
        (2, 4) => "MPI_Irecv".into(),
        (2, j) => format!("ompi_progress_{j}"),
        (3, 0) => "poll".into(),
        (3, 1) => "memcpy".into(),
        (3, j) => format!("libc_internal_{j}"),
        (4, j) => format!("libm_kernel_{j}"),
        (_, j) => format!("gomp_team_{j}"),
    }
}

/// The first function number of module `m`.
fn module_base(m: usize) -> u64 {
    MODULES[..m].iter().map(|(_, n)| n).sum()
}

/// Call stack `k` of the shared pool, root first, as function numbers:
/// `main → solver::run → solver::step → …`, then either a compute path
/// (solver stages, physics kernels, a libm or OpenMP leaf) or a
/// communication path (halo exchange or reduction, an MPI call, Open MPI
/// progress functions, `poll` or `memcpy`). Depth 5 to 20.
fn stack_functions(seed: u64, k: u64) -> Vec<u64> {
    let mut r = rng(seed, 0x5741_434b ^ k);
    let mut f = vec![0, 1, 2];
    let depth = 5 + r.u64(..16) as usize;
    if k.is_multiple_of(3) {
        f.push(if k.is_multiple_of(2) { 3 } else { 4 });
        f.push(module_base(2) + r.u64(..5));
        while f.len() + 1 < depth {
            f.push(module_base(2) + 5 + r.u64(..35));
        }
        f.push(module_base(3) + r.u64(..2));
    } else {
        f.push(5 + r.u64(..35));
        while f.len() + 1 < depth {
            f.push(module_base(1) + r.u64(..70));
        }
        f.push(if k.is_multiple_of(5) {
            module_base(5) + r.u64(..10)
        } else {
            module_base(4) + r.u64(..15)
        });
    }
    f
}

/// The hostname of node `n`.
pub fn hostname(n: u32) -> String {
    format!("node{n:03}")
}

/// The node rank `rank` runs on (blocks of consecutive ranks).
pub fn node_of(spec: &JobSpec, rank: u32) -> u32 {
    (u64::from(rank) * u64::from(spec.nodes.max(1)) / u64::from(spec.ranks.max(1))) as u32
}

/// The OS pid of rank `rank`: distinct among the ranks of its node.
pub fn pid_of(spec: &JobSpec, rank: u32) -> u32 {
    let n = node_of(spec, rank);
    let first = (u64::from(n) * u64::from(spec.ranks)).div_ceil(u64::from(spec.nodes.max(1)));
    40_000 + rank - first as u32
}

/// Where rank `rank`'s database goes: `<dir>/<hostname>/<pid>.db`.
pub fn rank_path(dir: &Path, spec: &JobSpec, rank: u32) -> PathBuf {
    dir.join(hostname(node_of(spec, rank)))
        .join(format!("{}.db", pid_of(spec, rank)))
}

/// The message key of the `n`-th message from rank `from` to rank `to`
/// with tag `tag` on communicator `comm` (the same on both sides, as
/// `flow_out` and `flow_in` of the MPI data contract).
pub fn message_key(from: u32, to: u32, tag: u32, comm: &str, n: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in from
        .to_le_bytes()
        .iter()
        .chain(&to.to_le_bytes())
        .chain(&tag.to_le_bytes())
        .chain(comm.as_bytes())
        .chain(&n.to_le_bytes())
    {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h >> 1
}

/// Writes the database of rank `rank` of `spec` under `dir` (see
/// [`rank_path`]; the host directory is created). Fails if the file
/// exists.
pub fn write_rank(dir: &Path, spec: &JobSpec, rank: u32) -> Result<RankTotals> {
    let path = rank_path(dir, spec, rank);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| crate::DbError::Io {
            path: parent.to_path_buf(),
            error: e,
        })?;
    }
    let mut r = rng(spec.seed, 0x5241_4e4b_0000_0000 | u64::from(rank));
    let (mut w, start_ns) = create_rank(&path, spec, rank, &mut r)?;
    // Threads: the main thread and two or three OpenMP workers.
    let nthreads = 3 + rank % 2;
    let (threads, tracks) = add_threads(&mut w, pid_of(spec, rank), nthreads, start_ns)?;
    let stacks = add_stacks(&mut w, spec.seed, start_ns, &mut r)?;
    let (task_clock, rss) = add_counters(&mut w)?;

    let n_samples = u64::from(spec.min_samples)
        + r.u64(..=u64::from(spec.max_samples.saturating_sub(spec.min_samples)));
    let steps = u64::from(spec.steps.max(1));
    // One sample per period per thread: the run lasts as long as that takes.
    let run_ns = (n_samples / u64::from(nthreads) + 1) * PERIOD_NS;
    let t0 = start_ns + 2_000_000;
    let mut totals = RankTotals {
        path: path.clone(),
        ..RankTotals::default()
    };
    let sampled = Sampled {
        tracks: &tracks,
        stacks: &stacks,
        task_clock,
        t0,
    };
    write_samples(&mut w, &mut r, &sampled, n_samples, &mut totals)?;
    let mut em = Emitter {
        threads: &threads,
        regions: 0,
        user: w.intern_string("user")?,
        mpi: w.intern_string("mpi")?,
        omp: w.intern_string("openmp")?,
    };
    let ring = Ring::of(spec, rank);
    em.mpi_init(&mut w, &ring, start_ns)?;
    let step_ns = run_ns / steps;
    for step in 0..steps {
        let s = t0 + step * step_ns;
        em.time_step(&mut w, &mut r, &ring, step, s, step_ns)?;
        let rss_value = 200_000_000 + u64::from(rank % 13) * 1_000_000 + step * 4_096;
        w.append_counter_sample(rss, None, s, rss_value as f64)?;
        totals.counter_samples += 1;
    }
    let end = t0 + steps * step_ns + 1_000_000;
    em.mpi_finalize(&mut w, &ring, end)?;
    totals.regions = em.regions;
    w.finish(end)?;
    Ok(totals)
}

/// Creates rank `rank`'s database at `path`: its process (started at a
/// random time after its node's clock origin), node and MPI settings.
/// Returns the writer and the process start (ns).
fn create_rank(path: &Path, spec: &JobSpec, rank: u32, r: &mut Rng) -> Result<(Writer, u64)> {
    let node = node_of(spec, rank);
    let pid = pid_of(spec, rank);
    // Every node's monotonic clock has its own origin (its boot time).
    let node_origin =
        1_000_000_000_000 + (rng(spec.seed, u64::from(node)).u64(..50_000)) * 1_000_000;
    let start_ns = node_origin + r.u64(..5_000_000);
    let info = ProcessInfo {
        pid,
        ppid: 39_999,
        init_ns: start_ns,
        start_ns,
        start_unix_ns: 1_795_000_000_000_000_000 + spec.seed * 1_000_000_000 + r.u64(..5_000_000),
        command: format!("/opt/synth/bin/solver --steps {} --grid 512", spec.steps),
        environment: vec![("OMPI_COMM_WORLD_RANK".into(), rank.to_string())],
    };
    let opts = WriterOptions {
        node: Some(NodeInfo {
            machine_id: format!("synth-{:x}-node{node:04}", spec.seed),
            system_name: "Linux".into(),
            hostname: hostname(node),
            release: "6.8.0".into(),
            version: "#1 SMP".into(),
            hardware_name: "x86_64".into(),
            domain_name: "(none)".into(),
        }),
        settings: vec![
            ("mpi.rank".into(), rank.to_string()),
            ("mpi.world_size".into(), spec.ranks.to_string()),
            ("mpi.job".into(), spec.job.clone()),
            ("mpi.launcher".into(), "slurm".into()),
            ("sampling_cputime_freq".into(), "1000".into()),
        ],
        cache_kib: 2048,
        ..WriterOptions::default()
    };
    Ok((Writer::create(path, &info, opts)?, start_ns))
}

/// Adds `nthreads` threads of process `pid` (the main thread `solver`,
/// then OpenMP workers), each with its sample track.
fn add_threads(
    w: &mut Writer,
    pid: u32,
    nthreads: u32,
    start_ns: u64,
) -> Result<(Vec<ThreadRef>, Vec<TrackId>)> {
    let mut threads: Vec<ThreadRef> = Vec::new();
    let mut tracks: Vec<TrackId> = Vec::new();
    for k in 0..nthreads {
        let name = if k == 0 {
            "solver".to_string()
        } else {
            format!("omp-worker-{k}")
        };
        let t = w.add_thread(&ThreadInfo {
            tid: pid + k * 3,
            name: Some(&name),
            start_ns: Some(start_ns + u64::from(k) * 50_000),
        })?;
        threads.push(t);
        tracks.push(w.add_track(Some(t), "samples")?);
    }
    Ok((threads, tracks))
}

/// Adds the modules (their load addresses differ per rank, as with ASLR)
/// and every function, symbolized; returns the pool of call stacks
/// (leaf first) over them.
fn add_stacks(
    w: &mut Writer,
    seed: u64,
    start_ns: u64,
    r: &mut Rng,
) -> Result<Vec<Vec<StackFrame>>> {
    let mut modules: Vec<ModuleId> = Vec::new();
    for (m, (path, n)) in MODULES.iter().enumerate() {
        let load = 0x7f00_0000_0000 + ((m as u64) << 32) + (r.u64(..4096) << 16);
        modules.push(w.add_module(&ModuleRow {
            path,
            build_id: Some(&format!("{:040x}", m as u64 * 0x1111_1111 + 0xabc)),
            load_address: if m == 0 { 0x40_0000 } else { load },
            size: 0x1000 + n * FN_SIZE,
            file_offset: 0,
            load_ns: Some(start_ns),
        })?);
    }
    let frame_of = |k: u64| {
        let (m, j) = function_at(k);
        StackFrame {
            module: Some(modules[m]),
            rel_pc: 0x1000 + j * FN_SIZE + 0x10,
        }
    };
    let mut names = Vec::new();
    for k in 0..function_count() {
        let (m, j) = function_at(k);
        names.push((w.intern_frame(frame_of(k))?, function_name(m, j)));
    }
    let symbols: Vec<FrameSymbols<'_>> = names
        .iter()
        .map(|(frame, name)| FrameSymbols {
            frame: *frame,
            function: Some(name),
            file: Some("synth.c"),
            line: Some(10),
        })
        .collect();
    w.set_frame_symbols(&symbols)?;
    Ok((0..STACKS)
        .map(|k| {
            stack_functions(seed, k)
                .into_iter()
                .rev()
                .map(frame_of)
                .collect()
        })
        .collect())
}

/// Describes the counters: one read with every sample (the thread's CPU
/// time since its previous sample), one for the whole process. Returns
/// (per sample, process).
fn add_counters(w: &mut Writer) -> Result<(CounterId, CounterId)> {
    let task_clock = w.add_counter_with(
        &CounterInfo {
            name: "task-clock",
            description: Some("CPU time of the thread"),
            units: Some("ns"),
            component: Some("perf_event"),
            accumulating: true,
            expression: None,
        },
        r#"{"strobe":"sampling_events"}"#,
    )?;
    let rss = w.add_counter(&CounterInfo {
        name: "memory.rss",
        description: Some("resident set size"),
        units: Some("bytes"),
        component: Some("procfs"),
        accumulating: false,
        expression: None,
    })?;
    Ok((task_clock, rss))
}

/// Where a rank's samples go and what they are drawn from.
struct Sampled<'a> {
    /// One sample track per thread.
    tracks: &'a [TrackId],
    /// The pool of call stacks.
    stacks: &'a [Vec<StackFrame>],
    /// The counter read with each on-CPU sample.
    task_clock: CounterId,
    /// The first sample's time.
    t0: u64,
}

/// Writes `n_samples` samples, round robin over the threads, one period
/// apart per thread; one in ten of the main thread's is off CPU (blocked
/// in MPI). Each on-CPU sample carries a `task-clock` value.
fn write_samples(
    w: &mut Writer,
    r: &mut Rng,
    s: &Sampled<'_>,
    n_samples: u64,
    totals: &mut RankTotals,
) -> Result<()> {
    let nthreads = s.tracks.len() as u64;
    for i in 0..n_samples {
        let th = (i % nthreads) as usize;
        let ts = s.t0 + (i / nthreads) * PERIOD_NS + th as u64 * 1_000;
        let mut k = (r.u64(..STACKS) * r.u64(..STACKS)) / STACKS; // skewed
        let off_cpu = th == 0 && r.u64(..10) == 0;
        if off_cpu && !k.is_multiple_of(3) {
            k -= k % 3; // a communication stack
        }
        let meta = if off_cpu {
            SampleMeta {
                timestamp_ns: ts,
                kind: SampleKind::OffCpu,
                weight_ns: 100_000 + r.u64(..5_000_000),
            }
        } else {
            SampleMeta::cpu(ts, PERIOD_NS)
        };
        w.append_sample(s.tracks[th], meta, &s.stacks[k as usize])?;
        totals.samples += 1;
        if !off_cpu {
            let v = (PERIOD_NS - r.u64(..PERIOD_NS / 10)) as f64;
            w.append_counter_sample(s.task_clock, Some(s.tracks[th]), ts, v)?;
            totals.counter_samples += 1;
        }
    }
    Ok(())
}

/// A rank's place in the ring of ranks its halo exchange goes around.
struct Ring {
    rank: u32,
    /// The previous rank (messages come from it).
    left: u32,
    /// The next rank (messages go to it).
    right: u32,
    /// The world size, as its argument text.
    world: String,
    /// Bytes this rank sends to `right` each step.
    halo: u64,
}

impl Ring {
    fn of(spec: &JobSpec, rank: u32) -> Ring {
        let ranks = spec.ranks.max(1);
        Ring {
            rank,
            left: (rank + ranks - 1) % ranks,
            right: (rank + 1) % ranks,
            world: ranks.to_string(),
            halo: halo_bytes(rank),
        }
    }
}

/// The bytes rank `rank` sends in each halo exchange.
fn halo_bytes(rank: u32) -> u64 {
    8 * (1_024 + u64::from(rank % 7) * 128)
}

/// The message tag of time step `step`.
fn step_tag(step: u64) -> u32 {
    (step % 32_767) as u32
}

/// A region argument: (name, type, value).
fn arg(name: &'static str, ty: &'static str, v: &str) -> (&'static str, &'static str, String) {
    (name, ty, v.to_string())
}

/// Writes regions on the rank's threads, counting them.
struct Emitter<'t> {
    threads: &'t [ThreadRef],
    regions: u64,
    /// The categories: the program's own regions, MPI calls, OpenMP.
    user: StringId,
    mpi: StringId,
    omp: StringId,
}

impl Emitter<'_> {
    /// A region on thread number `th` with its arguments (name, type, value).
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        w: &mut Writer,
        th: usize,
        start_ns: u64,
        end_ns: u64,
        name: &str,
        category: StringId,
        args: &[(&str, &str, String)],
    ) -> Result<()> {
        let name = w.intern_string(name)?;
        let args: Vec<Arg<'_>> = args
            .iter()
            .map(|(n, t, v)| Arg {
                name: n,
                ty: t,
                value: v,
            })
            .collect();
        w.append_region(&Region {
            thread: self.threads[th],
            start_ns,
            end_ns,
            name,
            category: Some(category),
            stack: None,
            correlation_id: None,
            args: &args,
        })?;
        self.regions += 1;
        Ok(())
    }

    /// `MPI_Init` and `MPI_Comm_split` on the main thread.
    fn mpi_init(&mut self, w: &mut Writer, ring: &Ring, start_ns: u64) -> Result<()> {
        let (mpi, world) = (self.mpi, &ring.world);
        self.emit(
            w,
            0,
            start_ns + 100_000,
            start_ns + 900_000,
            "MPI_Init",
            mpi,
            &[
                arg("comm", "string", "world"),
                arg("comm_size", "int", world),
            ],
        )?;
        self.emit(
            w,
            0,
            start_ns + 1_000_000,
            start_ns + 1_200_000,
            "MPI_Comm_split",
            mpi,
            &[
                arg("comm", "string", "world"),
                arg("comm_size", "int", world),
                arg("bytes", "int", "0"),
            ],
        )
    }

    /// `MPI_Finalize` on the main thread, ending before `end`.
    fn mpi_finalize(&mut self, w: &mut Writer, ring: &Ring, end: u64) -> Result<()> {
        let mpi = self.mpi;
        self.emit(
            w,
            0,
            end - 800_000,
            end - 100_000,
            "MPI_Finalize",
            mpi,
            &[
                arg("comm", "string", "world"),
                arg("comm_size", "int", &ring.world),
            ],
        )
    }

    /// Time step `step` (from `s`, `step_ns` long): on the main thread the
    /// compute, the halo exchange with both ring neighbours, a reduction,
    /// now and then a barrier and a broadcast, inside a `timestep` region;
    /// a parallel region on each worker. Innermost first: regions complete
    /// in end order, as recorded.
    fn time_step(
        &mut self,
        w: &mut Writer,
        r: &mut Rng,
        ring: &Ring,
        step: u64,
        s: u64,
        step_ns: u64,
    ) -> Result<()> {
        let e = s + step_ns - 1_000;
        let compute_end = s + step_ns * (60 + r.u64(..25)) / 100;
        let user = self.user;
        self.emit(w, 0, s + 1_000, compute_end, "compute", user, &[])?;
        let t = self.halo_exchange(w, r, ring, step, compute_end + 2_000, step_ns)?;
        self.collectives(w, r, ring, step, (s, t, e), step_ns)?;
        self.emit(
            w,
            0,
            s,
            e,
            "timestep",
            user,
            &[arg("step", "int", &step.to_string())],
        )?;
        let omp = self.omp;
        for th in 1..self.threads.len() {
            let ws = s + 2_000 + th as u64 * 500;
            let we = compute_end - r.u64(..=step_ns / 10).min(compute_end - ws - 1);
            self.emit(w, th, ws, we, "omp parallel", omp, &[])?;
        }
        Ok(())
    }

    /// The halo exchange of step `step` from `t`: `MPI_Isend` to the right
    /// neighbour, `MPI_Irecv` from the left one, and the `MPI_Waitall`
    /// that receives its message. Returns when the main thread is done.
    fn halo_exchange(
        &mut self,
        w: &mut Writer,
        r: &mut Rng,
        ring: &Ring,
        step: u64,
        mut t: u64,
        step_ns: u64,
    ) -> Result<u64> {
        let (mpi, world) = (self.mpi, &ring.world);
        let tag = step_tag(step);
        let (left, right) = (ring.left.to_string(), ring.right.to_string());
        let send_key = message_key(ring.rank, ring.right, tag, "world", step);
        let tag = tag.to_string();
        self.emit(
            w,
            0,
            t,
            t + 3_000,
            "MPI_Isend",
            mpi,
            &[
                arg("bytes", "int", &ring.halo.to_string()),
                arg("peer", "int", &right),
                arg("tag", "int", &tag),
                arg("comm", "string", "world"),
                arg("comm_size", "int", world),
                arg("flow_out", "int", &send_key.to_string()),
            ],
        )?;
        t += 5_000;
        self.emit(
            w,
            0,
            t,
            t + 2_000,
            "MPI_Irecv",
            mpi,
            &[
                arg("bytes", "int", "0"),
                arg("peer", "int", &left),
                arg("tag", "int", &tag),
                arg("comm", "string", "world"),
                arg("comm_size", "int", world),
            ],
        )?;
        t += 4_000;
        let wait = 10_000 + r.u64(..=step_ns / 20);
        let recv_key = message_key(ring.left, ring.rank, step_tag(step), "world", step);
        self.emit(
            w,
            0,
            t,
            t + wait,
            "MPI_Waitall",
            mpi,
            &[
                arg("bytes", "int", &halo_bytes(ring.left).to_string()),
                arg("peer", "int", &left),
                arg("tag", "int", &tag),
                arg("comm", "string", "world"),
                arg("comm_size", "int", world),
                arg("flow_in", "int", &recv_key.to_string()),
            ],
        )?;
        Ok(t + wait + 2_000)
    }

    /// The collectives of step `step` (`s`: its start, `t`: when the main
    /// thread gets to them, `e`: its end): an `MPI_Allreduce`, every tenth
    /// step an `MPI_Barrier`, every twentieth an `MPI_Bcast` at its start.
    fn collectives(
        &mut self,
        w: &mut Writer,
        r: &mut Rng,
        ring: &Ring,
        step: u64,
        (s, mut t, e): (u64, u64, u64),
        step_ns: u64,
    ) -> Result<()> {
        let (mpi, world) = (self.mpi, &ring.world);
        let reduce = 5_000 + r.u64(..=step_ns / 50);
        self.emit(
            w,
            0,
            t,
            t + reduce,
            "MPI_Allreduce",
            mpi,
            &[
                arg("bytes", "int", "8"),
                arg("comm", "string", "world"),
                arg("comm_size", "int", world),
            ],
        )?;
        t += reduce + 1_000;
        if step % 10 == 9 {
            let barrier = 2_000 + r.u64(..=step_ns / 50);
            self.emit(
                w,
                0,
                t,
                (t + barrier).min(e - 1),
                "MPI_Barrier",
                mpi,
                &[
                    arg("bytes", "int", "0"),
                    arg("comm", "string", "world"),
                    arg("comm_size", "int", world),
                ],
            )?;
        }
        if step.is_multiple_of(20) {
            self.emit(
                w,
                0,
                s + 500,
                s + 900,
                "MPI_Bcast",
                mpi,
                &[
                    arg("bytes", "int", "64"),
                    arg("root", "int", "0"),
                    arg("comm", "string", "world"),
                    arg("comm_size", "int", world),
                ],
            )?;
        }
        Ok(())
    }
}

/// Writes every rank of `spec` under `dir` on `workers` threads (at least
/// one), calling `progress` after each database. Stops at the first error
/// (databases already written stay).
pub fn write_job(
    dir: &Path,
    spec: &JobSpec,
    workers: usize,
    progress: &(dyn Fn(&RankTotals) + Sync),
) -> Result<Vec<RankTotals>> {
    let next = std::sync::atomic::AtomicU32::new(0);
    let failed = std::sync::atomic::AtomicBool::new(false);
    let results: Vec<Result<Vec<RankTotals>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers.max(1))
            .map(|_| {
                scope.spawn(|| -> Result<Vec<RankTotals>> {
                    let mut out = Vec::new();
                    loop {
                        let rank = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if rank >= spec.ranks || failed.load(std::sync::atomic::Ordering::Relaxed) {
                            return Ok(out);
                        }
                        match write_rank(dir, spec, rank) {
                            Ok(t) => {
                                progress(&t);
                                out.push(t);
                            }
                            Err(e) => {
                                failed.store(true, std::sync::atomic::Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(crate::DbError::Query {
                        message: "a generator thread panicked".into(),
                        sql: String::new(),
                    })
                })
            })
            .collect()
    });
    let mut all = Vec::new();
    for r in results {
        all.extend(r?);
    }
    all.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_get_distinct_files_and_pids_per_node() {
        let spec = JobSpec {
            ranks: 10,
            nodes: 3,
            ..JobSpec::default()
        };
        let paths: std::collections::HashSet<_> = (0..10)
            .map(|r| rank_path(Path::new("x"), &spec, r))
            .collect();
        assert_eq!(paths.len(), 10);
        assert_eq!(node_of(&spec, 0), 0);
        assert_eq!(node_of(&spec, 9), 2);
        assert_eq!(pid_of(&spec, 0), 40_000);
    }

    #[test]
    fn send_and_receive_keys_match() {
        assert_eq!(
            message_key(3, 4, 7, "world", 2),
            message_key(3, 4, 7, "world", 2)
        );
        assert_ne!(
            message_key(3, 4, 7, "world", 2),
            message_key(4, 3, 7, "world", 2)
        );
    }

    #[test]
    fn stacks_start_at_main_and_stay_in_range() {
        for k in 0..STACKS {
            let f = stack_functions(1, k);
            assert_eq!(&f[..3], &[0, 1, 2]);
            assert!(f.len() >= 5 && f.len() <= 21, "{f:?}");
            assert!(f.iter().all(|x| *x < function_count()));
        }
    }
}
