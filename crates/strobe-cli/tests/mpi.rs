//! MPI jobs under strobe: a real `mpirun -n 4` (Open MPI with
//! `--oversubscribe`, and MPICH's Hydra) of tests/programs/mpi_ring.c, each
//! rank started as `strobe sample -- ./mpi_ring`. Checked through the
//! databases the ranks leave: one per rank in one run directory, the rank
//! recorded, every MPI call a region with the right bytes and peers, every
//! message's two ends paired, clocks compared with rank 0 (and a known
//! skew found), and the program's output as without strobe. Open MPI and
//! MPICH are Debian packages: installed with apt-get when missing (as
//! root, as CI runs); the test says why it skips where it cannot.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

// The jobs take turns (`one_at_a_time`): four ranks each already
// oversubscribe two cores.
use common::{
    apt_get_install, clean_command, databases, fresh_runtime, one_at_a_time, programs_dir,
    run_bounded,
};

/// The two MPI implementations: (launcher, compiler wrapper, extra
/// launcher flags).
const OPEN_MPI: (&str, &str, &[&str]) = ("mpirun.openmpi", "mpicc.openmpi", &["--oversubscribe"]);
const MPICH: (&str, &str, &[&str]) = ("mpirun.mpich", "mpicc.mpich", &[]);
/// The Fortran compiler wrapper of each.
const FORTRAN: [(&str, &str); 2] = [
    ("mpirun.openmpi", "mpif90.openmpi"),
    ("mpirun.mpich", "mpif90.mpich"),
];

/// Ranks of every job here.
const RANKS: usize = 4;
/// Rounds of the ring program.
const ROUNDS: usize = 6;

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(name).is_file()))
}

/// Open MPI and MPICH with their compilers: found, or installed with
/// apt-get (as root); `Err` with the reason when neither works.
fn mpi_installed() -> Result<(), String> {
    static INSTALL: Mutex<Option<Result<(), String>>> = Mutex::new(None);
    let mut done = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = &*done {
        return r.clone();
    }
    let have = || {
        [OPEN_MPI, MPICH]
            .iter()
            .all(|(run, cc, _)| on_path(run) && on_path(cc))
    };
    let result = if have() {
        Ok(())
    } else if {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() }
    } != 0
    {
        Err(
            "Open MPI and MPICH are not installed and this is not root to apt-get install them"
                .into(),
        )
    } else {
        let packages = [
            "openmpi-bin",
            "libopenmpi-dev",
            "mpich",
            "libmpich-dev",
            "gfortran",
        ];
        if apt_get_install(&packages) && have() {
            Ok(())
        } else {
            Err(format!("apt-get install {} failed", packages.join(" ")))
        }
    };
    *done = Some(result.clone());
    result
}

/// mpi_ring (C) built with `compiler` (once per compiler).
fn ring(compiler: &str) -> PathBuf {
    build("mpi_ring.c", compiler)
}

/// tests/programs/`source` built with `compiler` (once per compiler).
fn build(source: &str, compiler: &str) -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mpi-programs-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let exe = out.join(format!("{source}-{compiler}"));
    if !exe.is_file() {
        let src = programs_dir().join(source);
        let built = Command::new(compiler)
            .args(["-O1", "-g", "-o"])
            .arg(&exe)
            .arg(src)
            .output()
            .expect("the MPI compiler wrapper runs");
        assert!(
            built.status.success(),
            "{compiler} {source}: {}",
            String::from_utf8_lossy(&built.stderr)
        );
    }
    exe
}

/// A run past this is killed with its process group and fails the test
/// ("hung").
const HUNG: Duration = Duration::from_secs(120);

/// A launcher command with what running as root in CI needs, and no
/// inherited `STROBE_*` variable.
fn launcher(mpi: (&str, &str, &[&str])) -> Command {
    let mut cmd = clean_command(mpi.0);
    cmd.env("STROBE_RUNTIME", fresh_runtime())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
    cmd
}

/// `strobe sample` of `exe` as one rank's command line (after `-n N`).
fn rank_command(out: &Path, exe: &Path) -> Vec<String> {
    vec![
        env!("CARGO_BIN_EXE_strobe").to_string(),
        "sample".into(),
        "-q".into(),
        "--output-dir".into(),
        out.display().to_string(),
        "--".into(),
        exe.display().to_string(),
        ROUNDS.to_string(),
    ]
}

fn query(db: &Path, sql: &str) -> Vec<Vec<String>> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn.prepare(sql).unwrap();
    let n = st.column_count();
    st.query_map([], |r| {
        Ok((0..n)
            .map(|i| match r.get_ref(i).unwrap() {
                rusqlite::types::ValueRef::Null => String::new(),
                rusqlite::types::ValueRef::Integer(v) => v.to_string(),
                rusqlite::types::ValueRef::Real(v) => v.to_string(),
                rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                rusqlite::types::ValueRef::Blob(_) => "<blob>".into(),
            })
            .collect())
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// One MPI region: name and arguments.
struct Call {
    name: String,
    args: HashMap<String, Vec<String>>,
}

fn mpi_calls(db: &Path) -> Vec<Call> {
    let rows = query(
        db,
        "SELECT R.id, S.string, A.name, A.value FROM rocpd_region R \
         JOIN rocpd_string S ON S.id = R.name_id JOIN rocpd_event E ON E.id = R.event_id \
         JOIN rocpd_string C ON C.id = E.category_id AND C.string = 'mpi' \
         LEFT JOIN rocpd_arg A ON A.event_id = E.id ORDER BY R.start, R.id, A.position",
    );
    let mut calls: Vec<(String, Call)> = Vec::new();
    for r in rows {
        if calls.last().is_none_or(|(id, _)| *id != r[0]) {
            calls.push((
                r[0].clone(),
                Call {
                    name: r[1].clone(),
                    args: HashMap::new(),
                },
            ));
        }
        let call = &mut calls.last_mut().unwrap().1;
        call.args
            .entry(r[2].clone())
            .or_default()
            .push(r[3].clone());
    }
    calls.into_iter().map(|(_, c)| c).collect()
}

fn arg(c: &Call, name: &str) -> Option<i64> {
    c.args.get(name)?.first()?.parse().ok()
}

fn setting(db: &Path, name: &str) -> Option<String> {
    query(
        db,
        &format!("SELECT value FROM strobe_settings WHERE name = '{name}'"),
    )
    .first()
    .map(|r| r[0].clone())
}

/// Runs the ring job of `mpi` plain and under strobe; checks everything
/// the module documentation lists. `skew`: a clock skew (ns) given to the
/// last rank only.
fn job_under_strobe(mpi: (&str, &str, &[&str]), skew: Option<i64>) {
    if let Err(why) = mpi_installed() {
        println!("skipped: {why}");
        return;
    }
    let _turn = one_at_a_time();
    let exe = ring(mpi.1);
    let dir = tempfile::tempdir().unwrap();

    let mut plain = launcher(mpi);
    plain
        .args(["-n", &RANKS.to_string()])
        .args(mpi.2)
        .arg(&exe)
        .arg(ROUNDS.to_string());
    let plain = run_bounded(plain, HUNG);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );

    let mut job = launcher(mpi);
    let command = rank_command(dir.path(), &exe);
    match skew {
        None => {
            job.args(["-n", &RANKS.to_string()])
                .args(mpi.2)
                .args(&command);
        }
        Some(ns) => {
            job.args(["-n", &(RANKS - 1).to_string()])
                .args(mpi.2)
                .args(&command)
                .args([":", "-n", "1"])
                .args(mpi.2)
                .args(["env", &format!("STROBE_MPI_CLOCK_SKEW_NS={ns}")])
                .args(&command);
        }
    }
    let profiled = run_bounded(job, HUNG);
    let stderr = String::from_utf8_lossy(&profiled.stderr);
    assert!(profiled.status.success(), "{}: {stderr}", mpi.0);
    assert_eq!(
        String::from_utf8_lossy(&profiled.stdout),
        String::from_utf8_lossy(&plain.stdout),
        "the job's output is as without strobe"
    );

    // One run directory for the job, one database per rank.
    let runs: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.path())
        .collect();
    assert_eq!(runs.len(), 1, "one run directory: {runs:?}");
    let dbs = databases(&runs[0]);
    assert_eq!(dbs.len(), RANKS, "a database per rank: {dbs:?}\n{stderr}");
    let mut by_rank: Vec<Option<PathBuf>> = vec![None; RANKS];
    for db in &dbs {
        let rank: usize = setting(db, "mpi.rank").expect("mpi.rank").parse().unwrap();
        assert_eq!(setting(db, "mpi.world_size").as_deref(), Some("4"));
        assert!(setting(db, "mpi.job").is_some_and(|j| !j.is_empty()));
        assert!(
            by_rank[rank].replace(db.clone()).is_none(),
            "rank {rank} twice"
        );
    }
    let by_rank: Vec<PathBuf> = by_rank.into_iter().map(Option::unwrap).collect();

    // Every call, with its bytes and peers.
    let mut sends: HashMap<String, (usize, i64)> = HashMap::new();
    let mut receives: Vec<(usize, i64, String)> = Vec::new();
    for (rank, db) in by_rank.iter().enumerate() {
        let calls = mpi_calls(db);
        let next = ((rank + 1) % RANKS) as i64;
        let prev = ((rank + RANKS - 1) % RANKS) as i64;
        let named = |n: &str| calls.iter().filter(|c| c.name == n).collect::<Vec<_>>();
        for name in [
            "MPI_Send",
            "MPI_Recv",
            "MPI_Isend",
            "MPI_Irecv",
            "MPI_Waitall",
            "MPI_Allreduce",
            "MPI_Barrier",
        ] {
            assert_eq!(named(name).len(), ROUNDS, "rank {rank}: {name} calls");
        }
        assert_eq!(named("MPI_Init").len(), 1);
        assert_eq!(named("MPI_Finalize").len(), 1);
        for c in named("MPI_Send") {
            assert_eq!(
                (arg(c, "bytes"), arg(c, "peer"), arg(c, "tag")),
                (Some(8192), Some(next), Some(1))
            );
            assert_eq!(c.args["comm"], ["world"]);
            assert_eq!(arg(c, "comm_size"), Some(4));
        }
        for c in named("MPI_Recv") {
            assert_eq!(
                (arg(c, "recv_bytes"), arg(c, "peer"), arg(c, "tag")),
                (Some(8192), Some(prev), Some(1))
            );
        }
        for c in named("MPI_Isend") {
            assert_eq!(
                (arg(c, "bytes"), arg(c, "peer"), arg(c, "tag")),
                (Some(4096), Some(prev), Some(7))
            );
        }
        for c in named("MPI_Irecv") {
            assert_eq!(
                (arg(c, "peer"), arg(c, "tag")),
                (None, Some(7)),
                "from MPI_ANY_SOURCE"
            );
        }
        for c in named("MPI_Waitall") {
            // The receive's actual source, read from a status the program ignored.
            assert_eq!(
                (arg(c, "recv_bytes"), arg(c, "peer"), arg(c, "tag")),
                (Some(4096), Some(next), Some(7))
            );
        }
        for c in named("MPI_Allreduce") {
            assert_eq!(arg(c, "bytes"), Some(128));
        }
        for c in &calls {
            for key in c.args.get("flow_out").into_iter().flatten() {
                assert!(
                    sends
                        .insert(key.clone(), (rank, arg(c, "peer").unwrap()))
                        .is_none(),
                    "a send key twice"
                );
            }
            for key in c.args.get("flow_in").into_iter().flatten() {
                receives.push((rank, arg(c, "peer").unwrap(), key.clone()));
            }
        }
    }
    // Every message's ends carry one key: sender's peer = receiver, and the
    // receiver's peer = sender.
    assert_eq!(sends.len(), 2 * ROUNDS * RANKS);
    assert_eq!(receives.len(), sends.len());
    for (rank, peer, key) in &receives {
        let (from, to) = sends[key];
        assert_eq!((from as i64, to), (*peer, *rank as i64), "message {key}");
    }

    // Clocks: every rank but 0 compared at init and finalize; on one
    // machine the truth is 0 (or minus the skew), and the midpoint rule
    // errs by at most half the round trip.
    for (rank, db) in by_rank.iter().enumerate().skip(1) {
        let rows = query(db, "SELECT phase, offset_ns, rtt_ns, reference_rank FROM strobe_clock_sync ORDER BY local_ns");
        let phases: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(phases, ["init", "finalize"], "rank {rank}");
        let truth = match skew {
            Some(ns) if rank == RANKS - 1 => -ns,
            _ => 0,
        };
        for r in &rows {
            let (offset, rtt): (i64, i64) = (r[1].parse().unwrap(), r[2].parse().unwrap());
            assert!(
                (offset - truth).abs() <= rtt / 2 + 1,
                "rank {rank} {}: offset {offset} ns, truth {truth}, round trip {rtt} ns",
                r[0]
            );
            assert_eq!(r[3], "0");
        }
    }

    // The summary reads the job whole: the last rank computes ten times as
    // long each round, so it is the one that waits least.
    let summary = Command::new(env!("CARGO_BIN_EXE_strobe"))
        .args(["summary", "--report", "mpi", "--format", "json", "-i"])
        .arg(&runs[0])
        .output()
        .unwrap();
    assert!(
        summary.status.success(),
        "{}",
        String::from_utf8_lossy(&summary.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&summary.stdout).unwrap();
    let ranks = json["mpi"]["ranks"].as_array().expect("mpi.ranks");
    assert_eq!(ranks.len(), RANKS);
    let wait = |r: &serde_json::Value| r["wait_ns"].as_i64().unwrap();
    let least = ranks.iter().min_by_key(|r| wait(r)).unwrap();
    assert_eq!(least["rank"], (RANKS - 1) as i64, "{ranks:?}");
    for r in ranks {
        // MPI_Init, MPI_Finalize and seven calls a round.
        assert_eq!(r["calls"], 2 + 7 * ROUNDS as i64, "{r}");
    }

    // The post-processing commands read the job whole.
    let convert = Command::new(env!("CARGO_BIN_EXE_strobe"))
        .args(["convert", "-f", "perfetto", "-i"])
        .arg(&runs[0])
        .arg("-o")
        .arg(dir.path().join("trace"))
        .output()
        .unwrap();
    assert!(
        convert.status.success(),
        "{}",
        String::from_utf8_lossy(&convert.stderr)
    );
}

#[test]
fn an_open_mpi_job_gives_a_database_per_rank_with_its_calls_messages_and_clocks() {
    job_under_strobe(OPEN_MPI, None);
}

#[test]
fn an_mpich_job_gives_the_same() {
    job_under_strobe(MPICH, None);
}

#[test]
fn a_rank_with_a_skewed_clock_is_measured_at_its_skew() {
    job_under_strobe(MPICH, Some(2_500_000_000));
}

#[test]
fn fortran_calls_are_recorded_under_both_mpis() {
    if let Err(why) = mpi_installed() {
        println!("skipped: {why}");
        return;
    }
    let _turn = one_at_a_time();
    for (run, fc) in FORTRAN {
        let exe = build("mpi_ring_f.f90", fc);
        let dir = tempfile::tempdir().unwrap();
        let mpi = if run == OPEN_MPI.0 { OPEN_MPI } else { MPICH };
        let mut job = launcher(mpi);
        let mut command = rank_command(dir.path(), &exe);
        command.pop(); // the Fortran program takes no argument
        job.args(["-n", &RANKS.to_string()])
            .args(mpi.2)
            .args(&command);
        let out = run_bounded(job, HUNG);
        assert!(
            out.status.success(),
            "{run}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("ranks=4 checksum="));
        let dbs = databases(dir.path());
        assert_eq!(dbs.len(), RANKS, "{run}: {dbs:?}");
        let (mut outs, mut ins) = (Vec::new(), Vec::new());
        for db in &dbs {
            let calls = mpi_calls(db);
            for name in ["MPI_Send", "MPI_Recv", "MPI_Allreduce", "MPI_Barrier"] {
                assert_eq!(
                    calls.iter().filter(|c| c.name == name).count(),
                    3,
                    "{run}: {name}"
                );
            }
            for c in &calls {
                if c.name == "MPI_Send" {
                    assert_eq!(
                        (arg(c, "bytes"), arg(c, "tag")),
                        (Some(2048), Some(3)),
                        "{run}"
                    );
                }
                outs.extend(c.args.get("flow_out").into_iter().flatten().cloned());
                ins.extend(c.args.get("flow_in").into_iter().flatten().cloned());
            }
        }
        outs.sort();
        ins.sort();
        assert_eq!(outs.len(), 3 * RANKS, "{run}");
        assert_eq!(outs, ins, "{run}: every message's two ends carry its key");
    }
}
