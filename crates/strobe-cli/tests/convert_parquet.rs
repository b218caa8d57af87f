//! `strobe convert -f parquet` end to end: the real binary on databases
//! of an MPI job written through `strobe_db::Writer` and on a real
//! `strobe sample` run; the dataset read back with the `parquet` crate and
//! compared, row for row, with what SQL over the databases returns.

mod common;
#[path = "mpi_fixture/mod.rs"]
mod mpi_fixture;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Output;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use strobe_db::{Profile, Value};
use strobe_export::parquet::{write_parquet_with, ParquetOptions, TABLES};

use common::{build_program, clean_command, databases, stderr, strobe_command};

fn strobe(args: &[&str], cwd: &Path) -> Output {
    clean_command(env!("CARGO_BIN_EXE_strobe"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run strobe")
}

/// A value of either side, comparable.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
enum V {
    Null,
    I(i64),
    F(f64),
    S(String),
}

impl V {
    fn of_sql(v: &Value) -> V {
        match v {
            Value::Null => V::Null,
            Value::Integer(i) => V::I(*i),
            Value::Real(f) => V::F(*f),
            Value::Text(t) => V::S(t.clone()),
            Value::Blob(b) => V::S(String::from_utf8_lossy(b).into_owned()),
        }
    }
    fn of_field(f: &Field) -> V {
        match f {
            Field::Null => V::Null,
            Field::Long(i) => V::I(*i),
            Field::Double(d) => V::F(*d),
            Field::Str(s) => V::S(s.clone()),
            other => panic!("unexpected Parquet value {other:?}"),
        }
    }
    fn int(&self) -> i64 {
        match self {
            V::I(i) => *i,
            other => panic!("not an integer: {other:?}"),
        }
    }
    fn str(&self) -> &str {
        match self {
            V::S(s) => s,
            other => panic!("not a string: {other:?}"),
        }
    }
}

type Row = BTreeMap<String, V>;

/// Every `.parquet` file below `dir`.
fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The rows of one table of a dataset, with the partition values of
/// their file's path (`node`, `rank`) and the file's name.
fn read_table(ds: &Path, table: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for f in parquet_files(&ds.join(table)) {
        let rel = f.strip_prefix(ds.join(table)).unwrap();
        let parts: Vec<String> = rel
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        assert_eq!(parts.len(), 3, "{}", f.display());
        let node = parts[0].strip_prefix("node=").unwrap().to_string();
        let rank: i64 = parts[1].strip_prefix("rank=").unwrap().parse().unwrap();
        let reader = SerializedFileReader::new(std::fs::File::open(&f).unwrap()).unwrap();
        for r in reader.get_row_iter(None).unwrap() {
            let r = r.unwrap();
            let mut row: Row = r
                .get_column_iter()
                .map(|(k, v)| (k.clone(), V::of_field(v)))
                .collect();
            row.insert("node".into(), V::S(node.clone()));
            row.insert("rank".into(), V::I(rank));
            row.insert("_file".into(), V::S(parts[2].clone()));
            rows.push(row);
        }
    }
    rows
}

/// The rows of an SQL query over the profile, by column name.
fn query(p: &Profile, sql: &str) -> Vec<Row> {
    let cols = std::cell::RefCell::new(Vec::new());
    let mut rows = Vec::new();
    p.query_each(sql, &mut |c| *cols.borrow_mut() = c.to_vec(), &mut |vals| {
        rows.push(
            cols.borrow()
                .iter()
                .cloned()
                .zip(vals.iter().map(V::of_sql))
                .collect(),
        );
        Ok(())
    })
    .unwrap();
    rows
}

/// `rows` projected on `cols`, sorted.
fn project(rows: &[Row], cols: &[&str]) -> Vec<Vec<V>> {
    let mut out: Vec<Vec<V>> = rows
        .iter()
        .map(|r| {
            cols.iter()
                .map(|c| {
                    r.get(*c)
                        .unwrap_or_else(|| panic!("no column {c} in {r:?}"))
                        .clone()
                })
                .collect()
        })
        .collect();
    out.sort_by(|a, b| a.partial_cmp(b).unwrap());
    out
}

fn open(files: &[PathBuf]) -> Profile {
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    Profile::open(&names).unwrap()
}

/// Converts `inputs` with the binary into `<dir>/<name>.parquet`.
fn convert(dir: &Path, inputs: &[&str], name: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec!["convert", "-i"];
    args.extend_from_slice(inputs);
    args.extend(["-f", "parquet", "-o", name, "-d", "out"]);
    args.extend_from_slice(extra);
    let o = strobe(&args, dir);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("M rows/s"), "{}", stderr(&o));
    dir.join("out").join(format!("{name}.parquet"))
}

/// Each table of the dataset holds what SQL over the databases returns.
fn check_against_sql(ds: &Path, p: &Profile) {
    let run = p.run().unwrap();
    let (procs, shifts) = (run.processes, run.shifts);
    let align = |guid: &str, t: i64| t + shifts[guid];
    let settings: HashMap<(String, String), String> = query(
        p,
        "SELECT guid, name, value FROM strobe_settings WHERE name LIKE 'mpi.%'",
    )
    .into_iter()
    .map(|r| {
        (
            (r["guid"].str().to_string(), r["name"].str().to_string()),
            r["value"].str().to_string(),
        )
    })
    .collect();
    let rank_of = |guid: &str| {
        settings
            .get(&(guid.to_string(), "mpi.rank".to_string()))
            .map_or(-1, |r| r.parse::<i64>().unwrap())
    };
    let host_of: HashMap<String, String> = procs
        .iter()
        .map(|p| (p.guid.clone(), p.hostname.clone()))
        .collect();

    // Every file sits in its process's partition, named by its guid.
    for t in TABLES {
        for r in read_table(ds, t) {
            let guid = r["guid"].str();
            assert_eq!(r["_file"].str(), format!("{guid}.parquet"));
            assert_eq!(r["node"].str(), host_of[guid], "{t}");
            assert_eq!(r["rank"].int(), rank_of(guid), "{t}");
        }
    }

    // processes
    let pq = read_table(ds, "processes");
    let sql = query(
        p,
        "SELECT guid, pid, ppid, command, hostname, machine_id, start, \"end\" FROM processes",
    );
    let cols = [
        "guid",
        "pid",
        "ppid",
        "command",
        "hostname",
        "machine_id",
        "start",
        "end",
    ];
    assert_eq!(project(&pq, &cols), project(&sql, &cols));
    for r in &pq {
        let guid = r["guid"].str();
        let get = |n: &str| settings.get(&(guid.to_string(), n.to_string()));
        assert_eq!(
            r["world_size"],
            get("mpi.world_size").map_or(V::Null, |v| V::I(v.parse().unwrap()))
        );
        assert_eq!(
            r["job"],
            get("mpi.job").map_or(V::Null, |v| V::S(v.clone()))
        );
        assert_eq!(
            r["launcher"],
            get("mpi.launcher").map_or(V::Null, |v| V::S(v.clone()))
        );
        assert_eq!(r["start_aligned"].int(), align(guid, r["start"].int()));
        assert_eq!(r["end_aligned"].int(), align(guid, r["end"].int()));
    }

    // threads
    let pq = read_table(ds, "threads");
    let cols = ["guid", "pid", "tid", "name", "start", "end"];
    assert_eq!(
        project(&pq, &cols),
        project(
            &query(
                p,
                "SELECT guid, pid, tid, name, start, \"end\" FROM threads"
            ),
            &cols
        )
    );

    // regions, their arguments and the MPI columns
    let pq = read_table(ds, "regions");
    let sql = query(
        p,
        "SELECT guid, pid, tid, start, \"end\", duration, name, category, corr_id, stack_id, event_id FROM regions",
    );
    assert_eq!(pq.len(), sql.len());
    let cols = [
        "guid", "pid", "tid", "start", "end", "duration", "name", "category", "corr_id", "stack_id",
    ];
    assert_eq!(project(&pq, &cols), project(&sql, &cols));
    let mut args: HashMap<(String, i64), BTreeMap<String, String>> = HashMap::new();
    for a in query(
        p,
        "SELECT R.guid, R.start, R.tid, A.name, A.value FROM regions R JOIN rocpd_arg A ON A.event_id = R.event_id AND A.guid = R.guid",
    ) {
        args.entry((a["guid"].str().to_string(), a["start"].int()))
            .or_default()
            .insert(a["name"].str().to_string(), a["value"].str().to_string());
    }
    let mut with_args = 0;
    for r in &pq {
        let guid = r["guid"].str();
        assert_eq!(r["start_aligned"].int(), align(guid, r["start"].int()));
        assert_eq!(r["end_aligned"].int(), align(guid, r["end"].int()));
        let want = args.get(&(guid.to_string(), r["start"].int()));
        match (&r["args"], want) {
            (V::Null, None) => {}
            (V::S(json), Some(want)) => {
                with_args += 1;
                let got: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(json).unwrap();
                let got: BTreeMap<String, String> = got
                    .into_iter()
                    .map(|(k, v)| {
                        let v = match v {
                            serde_json::Value::String(s) => s,
                            other => other.to_string(),
                        };
                        (k, v)
                    })
                    .collect();
                assert_eq!(&got, want, "{r:?}");
                for c in ["bytes", "recv_bytes", "peer", "tag", "root", "comm_size"] {
                    let w = want.get(c).map_or(V::Null, |v| V::I(v.parse().unwrap()));
                    assert_eq!(r[c], w, "{c} of {r:?}");
                }
                assert_eq!(
                    r["comm"],
                    want.get("comm").map_or(V::Null, |v| V::S(v.clone()))
                );
            }
            other => panic!("arguments differ: {other:?} for {r:?}"),
        }
    }
    assert_eq!(with_args, args.len());

    // samples
    let pq = read_table(ds, "samples");
    let sql = query(
        p,
        "SELECT guid, pid, tid, timestamp, kind, COALESCE(weight_ns, 0) AS weight_ns, stack_id FROM strobe_samples",
    );
    let cols = [
        "guid",
        "pid",
        "tid",
        "timestamp",
        "kind",
        "weight_ns",
        "stack_id",
    ];
    assert_eq!(project(&pq, &cols), project(&sql, &cols));
    for r in &pq {
        let guid = r["guid"].str();
        assert_eq!(
            r["timestamp_aligned"].int(),
            align(guid, r["timestamp"].int())
        );
        let frames = match r["stack_id"] {
            V::I(id) => p.resolve_stack(guid, id).unwrap(),
            _ => Vec::new(),
        };
        let leaf = frames.first();
        assert_eq!(
            r["function"],
            leaf.map_or(V::Null, |f| V::S(f.display_name())),
            "{r:?}"
        );
        assert_eq!(
            r["module"],
            leaf.and_then(|f| f.module.as_deref())
                .map_or(V::Null, |m| V::S(m.to_string()))
        );
    }

    // stacks: every stack the events name, frame by frame (depth 0: leaf)
    let pq = read_table(ds, "stacks");
    let mut stacks: BTreeMap<(String, i64), Vec<&Row>> = BTreeMap::new();
    for r in &pq {
        stacks
            .entry((r["guid"].str().to_string(), r["stack_id"].int()))
            .or_default()
            .push(r);
    }
    let named: Vec<(String, i64)> = query(
        p,
        "SELECT DISTINCT guid, stack_id FROM rocpd_event WHERE stack_id IS NOT NULL ORDER BY guid, stack_id",
    )
    .into_iter()
    .map(|r| (r["guid"].str().to_string(), r["stack_id"].int()))
    .collect();
    assert_eq!(stacks.keys().cloned().collect::<Vec<_>>(), named);
    for ((guid, id), mut rows) in stacks {
        rows.sort_by_key(|r| r["depth"].int());
        let frames = p.resolve_stack(&guid, id).unwrap();
        assert_eq!(rows.len(), frames.len());
        for (k, (r, f)) in rows.iter().zip(&frames).enumerate() {
            assert_eq!(r["depth"].int(), k as i64);
            assert_eq!(r["function"].str(), f.display_name());
            assert_eq!(
                r["module"],
                f.module.as_deref().map_or(V::Null, |m| V::S(m.into()))
            );
            assert_eq!(r["rel_pc"].int(), f.rel_pc as i64);
            assert_eq!(
                r["file"],
                f.file.as_deref().map_or(V::Null, |m| V::S(m.into()))
            );
            assert_eq!(r["line"], f.line.map_or(V::Null, |l| V::I(l.into())));
        }
    }

    // counters
    let pq = read_table(ds, "counters");
    let sql = query(
        p,
        "SELECT guid, pid, tid, name, units AS unit, timestamp, value FROM strobe_counters",
    );
    let cols = ["guid", "pid", "tid", "name", "unit", "timestamp", "value"];
    assert_eq!(project(&pq, &cols), project(&sql, &cols));
    for r in &pq {
        assert_eq!(
            r["timestamp_aligned"].int(),
            align(r["guid"].str(), r["timestamp"].int())
        );
    }

    // The marker's counts are the rows.
    let marker: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ds.join("_strobe.json")).unwrap()).unwrap();
    assert_eq!(marker["format"], "strobe-parquet");
    for t in TABLES {
        assert_eq!(
            marker["tables"][t]["rows"].as_u64().unwrap(),
            read_table(ds, t).len() as u64,
            "{t}"
        );
    }
}

#[test]
fn an_mpi_job_converts_to_a_partitioned_dataset_equal_to_its_databases() {
    let dir = tempfile::tempdir().unwrap();
    let files = mpi_fixture::write_job(&dir.path().join("run"));
    let ds = convert(dir.path(), &["run"], "job", &[]);
    assert!(ds.join("_strobe.json").is_file());
    // No staging directory is left beside it.
    let names: Vec<String> = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["job.parquet"]);
    // Partitions: node-a holds ranks 0, 1 and the launcher (-1), node-b rank 2.
    let mut parts: Vec<String> = parquet_files(&ds.join("regions"))
        .iter()
        .map(|f| {
            let rel = f
                .parent()
                .unwrap()
                .strip_prefix(ds.join("regions"))
                .unwrap();
            rel.display().to_string()
        })
        .collect();
    parts.sort();
    assert_eq!(
        parts,
        [
            "node=node-a/rank=-1",
            "node=node-a/rank=0",
            "node=node-a/rank=1",
            "node=node-b/rank=2"
        ]
    );
    let p = open(&files);
    check_against_sql(&ds, &p);
    // The MPI calls are all there, and ranks 1 and 2 are on rank 0's clock:
    // their aligned times differ from the raw ones, by a drifting offset.
    let regions = read_table(&ds, "regions");
    let mpi = regions
        .iter()
        .filter(|r| r["category"] == V::S("mpi".into()))
        .count() as u64;
    assert_eq!(mpi, u64::from(mpi_fixture::RANKS) * mpi_fixture::ROUNDS * 7);
    for rank in 1..mpi_fixture::RANKS as i64 {
        let shifts: std::collections::BTreeSet<i64> = regions
            .iter()
            .filter(|r| r["rank"].int() == rank)
            .map(|r| r["start_aligned"].int() - r["start"].int())
            .collect();
        assert!(
            shifts.len() > 10,
            "rank {rank}: {} distinct shifts",
            shifts.len()
        );
    }
}

#[test]
fn more_databases_than_can_be_attached_convert_the_same() {
    // 13 processes: the reader reads them in place rather than attached.
    let dir = tempfile::tempdir().unwrap();
    let files = mpi_fixture::write_ranks(&dir.path().join("run"), 12);
    assert!(files.len() > strobe_db::reader::MAX_ATTACHED);
    let ds = convert(dir.path(), &["run"], "many", &[]);
    let p = open(&files);
    check_against_sql(&ds, &p);
    let processes = read_table(&ds, "processes");
    let mut ranks: Vec<i64> = processes.iter().map(|r| r["rank"].int()).collect();
    ranks.sort_unstable();
    assert_eq!(ranks, (-1..12).collect::<Vec<i64>>());
    assert!(processes
        .iter()
        .all(|r| r["world_size"] == V::I(12) || r["rank"].int() == -1));
}

#[test]
fn small_batches_and_row_groups_write_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let files = mpi_fixture::write_job(&dir.path().join("run"));
    let p = open(&files);
    let a = dir.path().join("a.parquet");
    let b = dir.path().join("b.parquet");
    let sa = write_parquet_with(&p, &a, &ParquetOptions::default()).unwrap();
    let sb = write_parquet_with(
        &p,
        &b,
        &ParquetOptions {
            batch_rows: 7,
            row_group_rows: 30,
            workers: 3,
            // Large tables on their own, samples and counters read by
            // three threads in turns.
            split_rows: 40,
            readers: 3,
        },
    )
    .unwrap();
    assert_eq!(sa.tables, sb.tables);
    for t in TABLES {
        let ra = read_table(&a, t);
        let rb = read_table(&b, t);
        assert_eq!(ra, rb, "{t}");
    }
    // Row groups of at most 35 rows (whole batches of 7 up to 30+).
    let f = &parquet_files(&b.join("samples"))[0];
    let meta = SerializedFileReader::new(std::fs::File::open(f).unwrap())
        .unwrap()
        .metadata()
        .clone();
    assert!(meta.num_row_groups() > 3, "{}", meta.num_row_groups());
    assert!(meta.row_groups().iter().all(|g| g.num_rows() <= 35));
    check_against_sql(&b, &p);
}

#[test]
fn arguments_stored_out_of_event_order_still_meet_their_regions() {
    let dir = tempfile::tempdir().unwrap();
    let files = mpi_fixture::write_job(&dir.path().join("run"));
    // Rewrite rank 0's arguments in reverse event order.
    {
        let conn = rusqlite::Connection::open(&files[0]).unwrap();
        let table: String = conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_arg_%'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        conn.execute_batch(&format!(
            "CREATE TEMP TABLE x AS SELECT event_id, position, type, name, value, extdata FROM \"{table}\";
             DELETE FROM \"{table}\";
             INSERT INTO \"{table}\" (event_id, position, type, name, value, extdata)
               SELECT event_id, position, type, name, value, extdata FROM x ORDER BY event_id DESC, position;"
        ))
        .unwrap();
    }
    let ds = convert(dir.path(), &["run"], "job", &[]);
    check_against_sql(&ds, &open(&files));
}

#[test]
fn a_time_window_keeps_what_the_views_keep() {
    let dir = tempfile::tempdir().unwrap();
    // One node's processes (the nodes' raw clocks are seconds apart).
    let files: Vec<PathBuf> = mpi_fixture::write_job(&dir.path().join("run"))
        .into_iter()
        .filter(|f| f.starts_with(dir.path().join("run/node-a")))
        .collect();
    let ds = convert(
        dir.path(),
        &["run/node-a"],
        "part",
        &["--start", "30%", "--end", "60%"],
    );
    let mut p = open(&files);
    p.set_window(
        Some(strobe_db::TimeBound::Percent(30.0)),
        Some(strobe_db::TimeBound::Percent(60.0)),
    )
    .unwrap();
    let count = |sql: &str| query(&p, sql)[0]["n"].int() as usize;
    let regions = count("SELECT COUNT(*) AS n FROM regions");
    assert!(regions > 0 && regions < count("SELECT COUNT(*) AS n FROM rocpd_region") + 1);
    assert_eq!(read_table(&ds, "regions").len(), regions);
    assert_eq!(
        read_table(&ds, "samples").len(),
        count("SELECT COUNT(*) AS n FROM strobe_samples")
    );
    assert_eq!(
        read_table(&ds, "counters").len(),
        count("SELECT COUNT(*) AS n FROM strobe_counters")
    );
    check_against_sql(&ds, &p);
    let full = open(&files);
    assert!(regions < query(&full, "SELECT COUNT(*) AS n FROM regions")[0]["n"].int() as usize);
}

#[test]
fn bad_inputs_and_outputs_fail_clearly_and_leave_no_dataset() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("junk.db"), b"this is not a database at all").unwrap();
    let o = strobe(
        &[
            "convert", "-i", "junk.db", "-f", "parquet", "-o", "x", "-d", "out",
        ],
        dir.path(),
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("not an SQLite database"),
        "{}",
        stderr(&o)
    );
    let left: Vec<_> = std::fs::read_dir(dir.path().join("out"))
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");

    // An output name taken by something that is not a dataset is refused.
    mpi_fixture::write_job(&dir.path().join("run"));
    std::fs::create_dir_all(dir.path().join("out/mine.parquet")).unwrap();
    std::fs::write(dir.path().join("out/mine.parquet/keep.txt"), b"mine").unwrap();
    let o = strobe(
        &[
            "convert", "-i", "run", "-f", "parquet", "-o", "mine", "-d", "out",
        ],
        dir.path(),
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("is not a strobe Parquet dataset"),
        "{}",
        stderr(&o)
    );
    assert!(dir.path().join("out/mine.parquet/keep.txt").is_file());
    assert!(!dir.path().join("out/mine.parquet.partial").exists());

    // A dataset is replaced whole by a new conversion (nothing of the old
    // one stays), and `-o NAME.parquet` names the same directory.
    let ds = convert(dir.path(), &["run"], "job", &[]);
    std::fs::write(ds.join("regions/stale.parquet"), b"old").unwrap();
    let o = strobe(
        &[
            "convert",
            "-i",
            "run",
            "-f",
            "parquet",
            "-o",
            "job.parquet",
            "-d",
            "out",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(ds.join("_strobe.json").is_file());
    assert!(!ds.join("regions/stale.parquet").exists());
    assert!(!dir.path().join("out/job.parquet.old").exists());
    assert!(!dir.path().join("out/job.parquet.parquet").exists());

    // A database cut short is refused with the reader's message.
    let full = std::fs::read(dir.path().join("run/node-a/3000.db")).unwrap();
    std::fs::write(dir.path().join("cut.db"), &full[..full.len() / 3]).unwrap();
    let o = strobe(
        &[
            "convert", "-i", "cut.db", "-f", "parquet", "-o", "cut", "-d", "out",
        ],
        dir.path(),
    );
    assert!(!o.status.success());
    assert!(!dir.path().join("out/cut.parquet").exists());
    assert!(!dir.path().join("out/cut.parquet.partial").exists());
}

#[test]
fn a_real_run_converts_and_reads_back_equal() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_program(dir.path(), "regions");
    let o = strobe_command()
        .args(["sample", "-q", "--output-dir", "runs", "--"])
        .arg(&prog)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let files = databases(&dir.path().join("runs"));
    assert!(!files.is_empty());
    let ds = convert(dir.path(), &["runs"], "real", &[]);
    let p = open(&files);
    check_against_sql(&ds, &p);
    let regions = read_table(&ds, "regions");
    // Two threads, 5 outer regions each with 2 inner ones and a marker.
    let named = |n: &str| {
        regions
            .iter()
            .filter(|r| r["name"] == V::S(n.into()))
            .count()
    };
    assert_eq!(
        (named("outer"), named("inner"), named("checkpoint")),
        (10, 20, 10)
    );
    assert!(!read_table(&ds, "samples").is_empty());
    assert!(regions.iter().all(|r| r["rank"].int() == -1));
}

/// Writes the MPI fixture where `STROBE_TEST_MPI_RUN` says, for running
/// the pytest suite (python/tests/test_parquet.py) by hand:
/// `STROBE_TEST_MPI_RUN=/tmp/mpi-run cargo test -p strobe-cli --test
/// convert_parquet -- --ignored write_the_mpi_fixture`.
#[test]
#[ignore = "writes the pytest suite's MPI fixture on request"]
fn write_the_mpi_fixture() {
    let dir = std::env::var_os("STROBE_TEST_MPI_RUN").expect("set STROBE_TEST_MPI_RUN");
    let dir = PathBuf::from(dir);
    let _ = std::fs::remove_dir_all(&dir);
    let files = mpi_fixture::write_job(&dir);
    println!("wrote {} databases under {}", files.len(), dir.display());
}
