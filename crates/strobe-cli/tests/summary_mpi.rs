//! `strobe summary --report mpi` and the message flows of `strobe convert -f
//! pftrace`, run as the real binary on rank databases written with
//! `strobe_db::Writer` (rows as the MPI data contract lays them out), every
//! number checked against what the test wrote.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use prost::Message;
use strobe_db::{Arg, NodeInfo, ProcessInfo, Region, ThreadInfo, Writer, WriterOptions};
use strobe_export::perfetto::message_flow_id;
use strobe_export::perfetto::proto::{
    Trace, SEQ_INCREMENTAL_STATE_CLEARED, TYPE_INSTANT, TYPE_SLICE_BEGIN, TYPE_SLICE_END,
};

fn strobe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strobe"))
        .args(args)
        .output()
        .expect("run strobe")
}

fn ok(args: &[&str]) -> String {
    let o = strobe(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "strobe {args:?} failed: {err}");
    assert!(!err.contains("panicked"), "{err}");
    String::from_utf8(o.stdout).unwrap()
}

/// The start of every process (ns, monotonic).
const S: u64 = 1_000_000_000;
/// Every process ends 10 ms after it started.
const WALL: u64 = 10_000_000;

/// The key of the message rank `r` sends to rank `r + 1` (above
/// `i64::MAX`: keys are u64).
fn key(r: usize) -> String {
    (0xF000_0000_0000_0000u64 + r as u64).to_string()
}

/// One region: thread index, name, category, start and end (ns after
/// `S`), arguments.
struct Call {
    thread: usize,
    name: &'static str,
    category: &'static str,
    start: u64,
    end: u64,
    args: Vec<(&'static str, &'static str, String)>,
}

fn mpi(thread: usize, name: &'static str, start: u64, end: u64) -> Call {
    Call {
        thread,
        name,
        category: "mpi",
        start,
        end,
        args: vec![
            ("comm", "str", "world".into()),
            ("comm_size", "int", "4".into()),
        ],
    }
}

impl Call {
    fn arg(mut self, name: &'static str, value: impl ToString) -> Call {
        let ty = if name == "comm" { "str" } else { "int" };
        self.args.push((name, ty, value.to_string()));
        self
    }
}

struct Proc {
    pid: u32,
    host: &'static str,
    settings: Vec<(&'static str, String)>,
    command: &'static str,
    threads: Vec<u32>,
    calls: Vec<Call>,
    modules: Vec<&'static str>,
}

/// Writes `p` as `<run>/<host>/<pid>.db`.
fn write(run: &Path, p: &Proc) -> PathBuf {
    let dir = run.join(p.host);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.db", p.pid));
    let opts = WriterOptions {
        node: Some(NodeInfo {
            machine_id: format!("machine-{}", p.host),
            hostname: p.host.into(),
            ..NodeInfo::default()
        }),
        settings: p
            .settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ..WriterOptions::default()
    };
    let process = ProcessInfo {
        pid: p.pid,
        ppid: 1,
        init_ns: S,
        start_ns: S,
        start_unix_ns: 1_700_000_000_000_000_000 + u64::from(p.pid),
        command: p.command.into(),
        environment: vec![],
    };
    let mut w = Writer::create(&path, &process, opts).unwrap();
    for m in &p.modules {
        w.add_module(&strobe_db::ModuleRow {
            path: m,
            load_address: 0x7f00_0000_0000,
            size: 0x10_0000,
            ..Default::default()
        })
        .unwrap();
    }
    let threads: Vec<_> = p
        .threads
        .iter()
        .map(|tid| {
            w.add_thread(&ThreadInfo {
                tid: *tid,
                name: Some("main"),
                start_ns: Some(S),
            })
            .unwrap()
        })
        .collect();
    for c in &p.calls {
        let name = w.intern_string(c.name).unwrap();
        let category = w.intern_string(c.category).unwrap();
        let args: Vec<Arg<'_>> = c
            .args
            .iter()
            .map(|(n, t, v)| Arg {
                name: n,
                ty: t,
                value: v,
            })
            .collect();
        w.append_region(&Region {
            thread: threads[c.thread],
            start_ns: S + c.start,
            end_ns: S + c.end,
            name,
            category: Some(category),
            stack: None,
            correlation_id: None,
            args: &args,
        })
        .unwrap();
    }
    w.finish(S + WALL).unwrap();
    path
}

fn rank_settings(r: usize) -> Vec<(&'static str, String)> {
    vec![
        ("mpi.rank", r.to_string()),
        ("mpi.world_size", "4".into()),
        ("mpi.job", "job-42".into()),
        ("mpi.launcher", "strobe".into()),
    ]
}

const PIDS: [u32; 4] = [3100, 3101, 3200, 3201];
const HOSTS: [&str; 4] = ["node-a", "node-a", "node-b", "node-b"];
/// Barrier durations: rank 3 waits longest.
const BARRIER: [u64; 4] = [1_000_000, 1_500_000, 600_000, 3_000_000];

/// A run of four ranks on two nodes plus the launcher (no rank, no MPI
/// call). Per rank (ns after the start):
/// - a `user` region `solve` over 0.1–9 ms (not MPI: left out);
/// - a ring: rank r sends (1024 bytes, key `key(r)`) to r + 1 and receives
///   from r − 1. Sends at 1 ms lasting 100·(r+1) µs, receives at 2 ms
///   lasting 600, 200, 200, 50 µs; rank 3 receives first (2.00–2.05 ms)
///   and sends at 2.1–2.5 ms, so rank 0's receive of its message begins
///   before the send does;
/// - `MPI_Allreduce` 3.0–3.5 ms (8 bytes); on rank 0 an `MPI_Isend` nested
///   inside it (3.10–3.15 ms: counted in the Allreduce only);
/// - `MPI_Barrier` from 5 ms lasting [`BARRIER`];
/// - rank 1 only: a second thread in `MPI_Probe` 5.5–6.9 ms, overlapping
///   its barrier (5.0–6.5 ms) by 1 ms.
fn mpi_run(root: &Path) -> PathBuf {
    let run = root.join("mpi-run");
    let sends = [
        (1_000_000, 1_100_000),
        (1_000_000, 1_200_000),
        (1_000_000, 1_300_000),
        (2_100_000, 2_500_000),
    ];
    let recvs = [
        (2_000_000, 2_600_000),
        (2_000_000, 2_200_000),
        (2_000_000, 2_200_000),
        (2_000_000, 2_050_000),
    ];
    for r in 0..4 {
        let next = (r + 1) % 4;
        let prev = (r + 3) % 4;
        let mut calls = vec![
            Call {
                thread: 0,
                name: "solve",
                category: "user",
                start: 100_000,
                end: 9_000_000,
                args: vec![],
            },
            mpi(0, "MPI_Send", sends[r].0, sends[r].1)
                .arg("bytes", 1024)
                .arg("peer", next)
                .arg("tag", 7)
                .arg("flow_out", key(r)),
            mpi(0, "MPI_Recv", recvs[r].0, recvs[r].1)
                .arg("bytes", 1024)
                .arg("peer", prev)
                .arg("tag", 7)
                .arg("flow_in", key(prev)),
            mpi(0, "MPI_Allreduce", 3_000_000, 3_500_000).arg("bytes", 8),
            mpi(0, "MPI_Barrier", 5_000_000, 5_000_000 + BARRIER[r]),
        ];
        let mut threads = vec![PIDS[r]];
        if r == 0 {
            calls.push(mpi(0, "MPI_Isend", 3_100_000, 3_150_000).arg("bytes", 8));
        }
        if r == 1 {
            threads.push(PIDS[r] + 1);
            calls.push(mpi(1, "MPI_Probe", 5_500_000, 6_900_000).arg("peer", 0));
        }
        write(
            &run,
            &Proc {
                pid: PIDS[r],
                host: HOSTS[r],
                settings: rank_settings(r),
                command: "/opt/app/solver --steps 10",
                threads,
                calls,
                modules: vec!["/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.0"],
            },
        );
    }
    write(
        &run,
        &Proc {
            pid: 3000,
            host: "node-a",
            settings: vec![],
            command: "/usr/bin/mpirun -n 4 /opt/app/solver",
            threads: vec![3000],
            calls: vec![],
            modules: vec![],
        },
    );
    run
}

/// Floats compared to a relative 1e-12 (JSON parsing may be one unit in
/// the last place off).
fn close(a: &serde_json::Value, b: f64) -> bool {
    let a = a.as_f64().unwrap_or(f64::NAN);
    (a - b).abs() <= 1e-12 * b.abs().max(1.0)
}

/// An expected MPI function row: name, calls, total, max, bytes (`None`:
/// no call carried a count), waiting.
type FunctionRow = (&'static str, u64, i64, i64, Option<u64>, bool);

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(args)).unwrap()
}

#[test]
fn ranks_functions_and_waits() {
    let dir = tempfile::tempdir().unwrap();
    let run = mpi_run(dir.path());
    let run_s = run.to_str().unwrap();
    let v = json(&[
        "summary", "-i", run_s, "--report", "mpi", "--format", "json",
    ]);
    let m = &v["mpi"];
    assert!(m["no_mpi"].is_null(), "{m}");
    // Per rank: (MPI, waiting, outermost calls, top waiting function and
    // its time). MPI: the send, the receive, the allreduce (the nested
    // Isend not again) and the barrier; on rank 1 the barrier and the
    // other thread's probe together cover 5.0–6.9 ms.
    let expect: [(i64, i64, u64, &str, i64); 4] = [
        (
            100_000 + 600_000 + 500_000 + 1_000_000,
            600_000 + 500_000 + 1_000_000,
            4,
            "MPI_Barrier",
            1_000_000,
        ),
        (
            200_000 + 200_000 + 500_000 + 1_900_000,
            200_000 + 500_000 + 1_900_000,
            5,
            "MPI_Barrier",
            1_500_000,
        ),
        (
            300_000 + 200_000 + 500_000 + 600_000,
            200_000 + 500_000 + 600_000,
            4,
            "MPI_Barrier",
            600_000,
        ),
        (
            400_000 + 50_000 + 500_000 + 3_000_000,
            50_000 + 500_000 + 3_000_000,
            4,
            "MPI_Barrier",
            3_000_000,
        ),
    ];
    let ranks = m["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4, "the launcher is not a rank: {m}");
    let wait_total: i64 = expect.iter().map(|e| e.1).sum();
    let mean = wait_total as f64 / 4.0;
    for (r, (row, (mpi_ns, wait_ns, calls, top, top_ns))) in ranks.iter().zip(expect).enumerate() {
        assert_eq!(row["rank"], r as i64, "{row}");
        assert_eq!(row["pid"], PIDS[r], "{row}");
        assert_eq!(row["node"], HOSTS[r], "{row}");
        assert_eq!(row["world_size"], 4);
        assert_eq!(row["job"], "job-42");
        assert_eq!(row["wall_ns"], WALL as i64, "{row}");
        assert_eq!(row["mpi_ns"], mpi_ns, "rank {r}: {row}");
        assert_eq!(row["compute_ns"], WALL as i64 - mpi_ns, "rank {r}");
        assert!(close(&row["mpi_pct"], mpi_ns as f64 * 100.0 / WALL as f64));
        assert_eq!(row["calls"], calls, "rank {r}");
        assert_eq!(row["nested_calls"], u64::from(r == 0), "rank {r}");
        assert_eq!(row["wait_ns"], wait_ns, "rank {r}: {row}");
        assert_eq!(row["top_wait_function"], top, "rank {r}");
        assert_eq!(row["top_wait_ns"], top_ns, "rank {r}");
        assert!(close(&row["wait_vs_mean"], wait_ns as f64 / mean), "{row}");
    }
    assert_eq!(m["calls"], 17);
    assert_eq!(m["nested_calls"], 1);
    assert_eq!(m["wait_max_ns"], 3_550_000);
    assert!(close(&m["wait_mean_ns"], mean));
    assert!(
        close(&m["wait_imbalance"], 3_550_000f64 / mean),
        "max / mean"
    );
    assert_eq!(m["jobs"], serde_json::json!(["job-42"]));
    let others = m["other_processes"].as_array().unwrap();
    assert_eq!(others.len(), 1);
    assert_eq!(others[0]["pid"], 3000);

    // Per function: outermost calls of every rank, by total time.
    // (name, calls, total, max, bytes or None, waiting)
    let funcs: [FunctionRow; 5] = [
        (
            "MPI_Barrier",
            4,
            1_000_000 + 1_500_000 + 600_000 + 3_000_000,
            3_000_000,
            None,
            true,
        ),
        ("MPI_Allreduce", 4, 2_000_000, 500_000, Some(32), true),
        ("MPI_Probe", 1, 1_400_000, 1_400_000, None, true),
        (
            "MPI_Recv",
            4,
            600_000 + 200_000 + 200_000 + 50_000,
            600_000,
            Some(4096),
            true,
        ),
        (
            "MPI_Send",
            4,
            100_000 + 200_000 + 300_000 + 400_000,
            400_000,
            Some(4096),
            false,
        ),
    ];
    let total: i64 = funcs.iter().map(|f| f.2).sum();
    assert_eq!(m["total_mpi_call_ns"], total);
    let rows = m["functions"].as_array().unwrap();
    assert_eq!(rows.len(), funcs.len(), "{rows:?}");
    for (row, (name, calls, tot, max, bytes, waiting)) in rows.iter().zip(funcs) {
        assert_eq!(row["name"], name, "{row}");
        assert_eq!(row["calls"], calls, "{row}");
        assert_eq!(row["total_ns"], tot, "{row}");
        assert_eq!(row["max_ns"], max, "{row}");
        assert!(close(&row["mean_ns"], tot as f64 / calls as f64), "{row}");
        assert_eq!(row["bytes"], bytes.unwrap_or(0), "{row}");
        assert_eq!(
            row["calls_with_bytes"],
            if bytes.is_some() { calls } else { 0 }
        );
        assert!(close(&row["share_pct"], tot as f64 * 100.0 / total as f64));
        assert_eq!(row["waiting"], waiting, "{row}");
    }

    // The table: the same numbers, in ms.
    let table = ok(&["summary", "-i", run_s, "--report", "mpi"]);
    for needle in [
        "MPI ranks (",
        "MPI functions (",
        "Ranks that wait most (",
        "MPI_Barrier",
        "39.5",
        "3.950",
        "6.050",
        "Imbalance of waiting time (max / mean): 1.49 (rank 3 waits 3.550 ms",
        "1 MPI call made inside other MPI calls is counted in the callers' time",
        "not listed: 1 process with neither a rank nor an MPI call (pid 3000 mpirun)",
        "4 processes: MPI 26.4% of the wall time on average, from 16.0% (rank 2) to 39.5% (rank 3)",
    ] {
        assert!(table.contains(needle), "`{needle}` missing:\n{table}");
    }
    assert!(table.contains('┌'), "a comfy table:\n{table}");
    // Rank 3 heads the waiting table.
    let waits = &table[table.find("Ranks that wait most").unwrap()..];
    let first_row = waits.lines().nth(4).unwrap();
    assert!(
        first_row.contains("3201") && first_row.contains("3.550"),
        "{waits}"
    );

    // CSV: one block per table, full precision.
    let csv = ok(&["summary", "-i", run_s, "--report", "mpi", "--format", "csv"]);
    let block = |id: &str| -> Vec<String> {
        let at = csv
            .find(&format!("# {id}\n"))
            .unwrap_or_else(|| panic!("{csv}"));
        csv[at..]
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with('#') && !l.is_empty())
            .map(String::from)
            .collect()
    };
    let ranks_csv = block("mpi_ranks");
    assert_eq!(
        ranks_csv[0],
        "Rank,Node,PID,Wall (ms),MPI (ms),Compute (ms),MPI (%),Calls"
    );
    assert_eq!(ranks_csv[4], "3,node-b,3201,10,3.95,6.05,39.5,4");
    let funcs_csv = block("mpi_functions");
    assert!(
        funcs_csv[1].starts_with("52.81")
            && funcs_csv[1].ends_with(",6.1,4,1525,3000,,yes,MPI_Barrier"),
        "{funcs_csv:?}"
    );
    let waits_csv = block("mpi_waits");
    assert!(
        waits_csv[1].starts_with("3,node-b,3201,3.55,35.5,1.48"),
        "{waits_csv:?}"
    );
    assert!(waits_csv[1].ends_with(",3,MPI_Barrier"), "{waits_csv:?}");

    // `--report all` adds the MPI section after the other tables.
    let all = ok(&["summary", "-i", run_s]);
    assert!(
        all.contains("Regions:") && all.contains("MPI ranks ("),
        "{all}"
    );
    let all_json = json(&["summary", "-i", run_s, "--format", "json"]);
    assert_eq!(all_json["mpi"]["calls"], 17);
    assert!(all_json["regions"].is_array());

    // A window: the first 5.5 ms. Rank 3's barrier (5–8 ms) counts up to
    // 5.5 ms; the wall time is the window.
    let w = json(&[
        "summary", "-i", run_s, "--report", "mpi", "--format", "json", "--end", "5500000",
    ]);
    let r3 = &w["mpi"]["ranks"][3];
    assert_eq!(r3["wall_ns"], 5_500_000);
    assert_eq!(r3["mpi_ns"], 400_000 + 50_000 + 500_000 + 500_000);
    // After every MPI call: none in the window, said so.
    let after = ok(&[
        "summary", "-i", run_s, "--report", "mpi", "--start", "9500000",
    ]);
    assert!(after.contains("No MPI calls in the time window"), "{after}");
}

/// `strobe convert -f FORMAT` of `run` named `mpi` into `run`'s sibling
/// `out`; the path of `file` there.
fn convert(run: &Path, format: &str, file: &str) -> PathBuf {
    let out = run.with_file_name("out");
    ok(&[
        "convert",
        "-i",
        run.to_str().unwrap(),
        "-f",
        format,
        "-o",
        "mpi",
        "-d",
        out.to_str().unwrap(),
    ]);
    out.join(file)
}

/// A track's events as the checker pairs them.
#[derive(Debug, Clone)]
struct End {
    pid: i32,
    name: String,
    ts: u64,
}

#[test]
fn perfetto_links_each_send_to_its_receive_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let run = mpi_run(dir.path());
    let bytes = std::fs::read(convert(&run, "pftrace", "mpi.pftrace")).unwrap();
    let trace = Trace::decode(&bytes[..]).expect("the trace decodes");
    // Track uuid -> pid (thread tracks and their overlap lanes).
    let mut pid_of: HashMap<u64, i32> = HashMap::new();
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut open: HashMap<u64, Vec<(String, u64)>> = HashMap::new();
    let mut starts: HashMap<u64, Vec<End>> = HashMap::new();
    let mut ends: HashMap<u64, Vec<End>> = HashMap::new();
    for p in &trace.packet {
        if p.sequence_flags.unwrap_or(0) & SEQ_INCREMENTAL_STATE_CLEARED != 0 {
            names.clear();
        }
        if let Some(i) = &p.interned_data {
            for n in &i.event_names {
                names.insert(n.iid.unwrap(), n.name.clone().unwrap_or_default());
            }
        }
        if let Some(d) = &p.track_descriptor {
            let uuid = d.uuid.unwrap();
            if let Some(t) = &d.thread {
                pid_of.insert(uuid, t.pid.unwrap());
            } else if let Some(parent) = d.parent_uuid.and_then(|u| pid_of.get(&u).copied()) {
                pid_of.insert(uuid, parent);
            }
        }
        let Some(ev) = &p.track_event else { continue };
        let ts = p.timestamp.unwrap();
        let track = ev.track_uuid.unwrap();
        let pid = pid_of.get(&track).copied().unwrap_or(-1);
        match ev.r#type {
            Some(TYPE_SLICE_BEGIN) => {
                let name = names[&ev.name_iid.unwrap()].clone();
                for f in &ev.flow_ids {
                    starts.entry(*f).or_default().push(End {
                        pid,
                        name: name.clone(),
                        ts,
                    });
                }
                assert!(
                    ev.terminating_flow_ids.is_empty(),
                    "flows end on the receive's END, not its BEGIN ({name})"
                );
                open.entry(track).or_default().push((name, ts));
            }
            Some(TYPE_SLICE_END) => {
                let (name, _) = open.get_mut(&track).and_then(|s| s.pop()).unwrap();
                assert!(ev.flow_ids.is_empty());
                for f in &ev.terminating_flow_ids {
                    ends.entry(*f).or_default().push(End {
                        pid,
                        name: name.clone(),
                        ts,
                    });
                }
            }
            Some(TYPE_INSTANT) => panic!("no zero-length region was written"),
            _ => {}
        }
    }
    assert_eq!(starts.len(), 4, "one flow per message: {starts:?}");
    assert_eq!(ends.len(), 4, "{ends:?}");
    for r in 0..4 {
        let id = message_flow_id(&key(r));
        let s = &starts[&id];
        let e = &ends[&id];
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(
            (s[0].pid, s[0].name.as_str()),
            (PIDS[r] as i32, "MPI_Send"),
            "message {r}"
        );
        assert_eq!(
            (e[0].pid, e[0].name.as_str()),
            (PIDS[(r + 1) % 4] as i32, "MPI_Recv"),
            "message {r}"
        );
        // The trace processor links an end only to a flow already begun:
        // the receive's END comes after the send's BEGIN in time.
        assert!(s[0].ts < e[0].ts, "message {r}: {s:?} {e:?}");
    }
    // The flow id is the key's alone: the same on both processes, and
    // different keys differ.
    assert_eq!(
        message_flow_id(&key(3)),
        message_flow_id(&format!(" {} ", key(3)))
    );
    assert_ne!(message_flow_id(&key(0)), message_flow_id(&key(1)));
}

#[test]
fn chrome_json_links_each_send_to_its_receive_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let run = mpi_run(dir.path());
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(convert(&run, "json", "mpi.trace.json")).unwrap())
            .unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    // The name of the innermost complete event of lane (pid, tid) that
    // holds `ts`: the slice a viewer binds a flow at `ts` to.
    let slice_at = |pid: &serde_json::Value, tid: &serde_json::Value, ts: f64| {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && &e["pid"] == pid && &e["tid"] == tid)
            .filter(|e| {
                let start = e["ts"].as_f64().unwrap();
                start <= ts && ts < start + e["dur"].as_f64().unwrap()
            })
            .min_by(|a, b| {
                a["dur"]
                    .as_f64()
                    .unwrap()
                    .total_cmp(&b["dur"].as_f64().unwrap())
            })
            .map(|e| e["name"].as_str().unwrap().to_string())
    };
    let flows = |ph: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == ph)
            .map(|e| (e["id"].as_str().unwrap().to_string(), e))
            .collect::<HashMap<_, _>>()
    };
    let (starts, ends) = (flows("s"), flows("f"));
    assert_eq!((starts.len(), ends.len()), (4, 4), "one flow per message");
    for r in 0..4 {
        let id = format!("0x{:x}", message_flow_id(&key(r)));
        let (s, f) = (starts[&id], ends[&id]);
        assert_eq!((&s["name"], &s["cat"]), (&f["name"], &f["cat"]), "{s} {f}");
        assert_eq!(f["bp"], "e", "the end binds to the enclosing slice");
        let (s_ts, f_ts) = (s["ts"].as_f64().unwrap(), f["ts"].as_f64().unwrap());
        assert_eq!(s["pid"], PIDS[r], "message {r}");
        assert_eq!(
            slice_at(&s["pid"], &s["tid"], s_ts).as_deref(),
            Some("MPI_Send"),
            "{s}"
        );
        assert_eq!(f["pid"], PIDS[(r + 1) % 4], "message {r}");
        assert_eq!(
            slice_at(&f["pid"], &f["tid"], f_ts).as_deref(),
            Some("MPI_Recv"),
            "{f}"
        );
        assert!(s_ts < f_ts, "message {r}: {s} {f}");
    }
}

#[test]
fn unranked_processes_are_listed_by_pid() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("singleton");
    write(
        &run,
        &Proc {
            pid: 777,
            host: "h",
            settings: vec![],
            command: "./app",
            threads: vec![777],
            calls: vec![mpi(0, "MPI_Barrier", 1_000_000, 3_000_000)],
            modules: vec![],
        },
    );
    let v = json(&[
        "summary",
        "-i",
        run.to_str().unwrap(),
        "--report",
        "mpi",
        "--format",
        "json",
    ]);
    let r = &v["mpi"]["ranks"][0];
    assert!(r["rank"].is_null(), "{r}");
    assert_eq!(r["pid"], 777);
    assert_eq!(r["mpi_ns"], 2_000_000);
    assert_eq!(r["wait_ns"], 2_000_000);
    let csv = ok(&[
        "summary",
        "-i",
        run.to_str().unwrap(),
        "--report",
        "mpi",
        "--format",
        "csv",
    ]);
    assert!(csv.contains("\n,h,777,10,2,8,20,1\n"), "{csv}");
    let table = ok(&["summary", "-i", run.to_str().unwrap(), "--report", "mpi"]);
    assert!(
        table.contains("waits 2.000 ms") && table.contains("(pid 777 waits"),
        "{table}"
    );
}

#[test]
fn runs_without_mpi_calls_say_why() {
    let dir = tempfile::tempdir().unwrap();
    // A plain program: no launcher, no MPI library, no MPI call.
    let plain = dir.path().join("plain");
    write(
        &plain,
        &Proc {
            pid: 10,
            host: "h",
            settings: vec![],
            command: "./plain",
            threads: vec![10],
            calls: vec![Call {
                thread: 0,
                name: "work",
                category: "user",
                start: 0,
                end: 1_000,
                args: vec![],
            }],
            modules: vec!["/usr/lib/libc.so.6"],
        },
    );
    let p = plain.to_str().unwrap();
    let t = ok(&["summary", "-i", p, "--report", "mpi"]);
    assert!(
        t.contains("No MPI calls recorded: this is not an MPI program.")
            && t.contains("None of its 1 process was started by an MPI launcher"),
        "{t}"
    );
    let v = json(&["summary", "-i", p, "--report", "mpi", "--format", "json"]);
    assert_eq!(v["mpi"]["no_mpi"]["kind"], "not_mpi");
    assert_eq!(v["mpi"]["ranks"], serde_json::json!([]));
    let csv = ok(&["summary", "-i", p, "--report", "mpi", "--format", "csv"]);
    assert!(csv.starts_with("# mpi\nmessage\n"), "{csv}");
    // `--report all` leaves the section out.
    let all = ok(&["summary", "-i", p]);
    assert!(all.contains("Regions:") && !all.contains("MPI"), "{all}");
    let all_json = json(&["summary", "-i", p, "--format", "json"]);
    assert!(all_json.get("mpi").is_none(), "{all_json}");

    // Ranks started by a launcher, the MPI library loaded, no call
    // recorded: the wrappers did not load.
    let unwrapped = dir.path().join("unwrapped");
    for r in 0..2 {
        write(
            &unwrapped,
            &Proc {
                pid: 20 + r as u32,
                host: "h",
                settings: rank_settings(r),
                command: "./solver",
                threads: vec![20 + r as u32],
                calls: vec![],
                modules: vec!["/opt/mpich/lib/libmpich.so.12"],
            },
        );
    }
    let t = ok(&[
        "summary",
        "-i",
        unwrapped.to_str().unwrap(),
        "--report",
        "mpi",
    ]);
    assert!(
        t.contains("2 processes were started by an MPI launcher (mpi.rank is set)")
            && t.contains("the program loaded the MPI library /opt/mpich/lib/libmpich.so.12")
            && t.contains("the MPI wrappers did not load"),
        "{t}"
    );
    let v = json(&[
        "summary",
        "-i",
        unwrapped.to_str().unwrap(),
        "--report",
        "mpi",
        "--format",
        "json",
    ]);
    assert_eq!(v["mpi"]["no_mpi"]["kind"], "wrappers_not_loaded");
    assert_eq!(v["mpi"]["no_mpi"]["ranks"], 2);
    // The ranks are still listed, with no MPI time.
    assert_eq!(v["mpi"]["ranks"].as_array().unwrap().len(), 2);
    assert_eq!(v["mpi"]["ranks"][1]["mpi_ns"], 0);
}
