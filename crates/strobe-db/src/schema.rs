//! The schema: rocpd v3 tables, strobe_ tables, unsuffixed views, data views.
//!
//! Owns every `CREATE` statement strobe-db issues: the twenty rocpd tables
//! and the strobe tables (physically suffixed per process; some of them,
//! the JIT symbol, metric and causal-profiling tables, optional: files
//! written before them lack them), the unsuffixed
//! views over one or many suffixes, the standard rocpd data and summary
//! views, and the indexes a merge creates. It must never insert data; the
//! writer, merge and reader call it. `docs/schema.md` documents all of it.

use rusqlite::Connection;

/// The rocpd schema version strobe writes and the newest it reads.
pub const SCHEMA_VERSION: i64 = 3;

/// The twenty rocpd tables, in creation order.
pub const ROCPD_TABLES: [&str; 20] = [
    "rocpd_metadata",
    "rocpd_string",
    "rocpd_info_node",
    "rocpd_info_process",
    "rocpd_info_thread",
    "rocpd_info_agent",
    "rocpd_info_queue",
    "rocpd_info_stream",
    "rocpd_info_pmc",
    "rocpd_info_code_object",
    "rocpd_info_kernel_symbol",
    "rocpd_track",
    "rocpd_event",
    "rocpd_arg",
    "rocpd_pmc_event",
    "rocpd_region",
    "rocpd_sample",
    "rocpd_kernel_dispatch",
    "rocpd_memory_copy",
    "rocpd_memory_allocate",
];

/// The strobe tables (what rocpd lacks), in creation order.
pub const STROBE_TABLES: [&str; 5] = [
    "strobe_settings",
    "strobe_module",
    "strobe_frame",
    "strobe_callsite",
    "strobe_counter_sample",
];

/// Every suffixed table a profile must have: rocpd's then strobe's.
pub fn all_tables() -> impl Iterator<Item = &'static str> {
    ROCPD_TABLES.iter().chain(STROBE_TABLES.iter()).copied()
}

/// Suffixed tables added after files were first written, each with its
/// stored columns besides `id` and `guid`: created with every new profile,
/// but a file without them is still a valid profile (readers and merge take
/// them where present; their unsuffixed views show no rows of a process
/// that lacks them).
pub const OPTIONAL_TABLES: [(&str, &[&str]); 7] = [
    (JIT_SYMBOL_TABLE, &["start", "size", "name"]),
    (
        METRIC_TABLE,
        &[
            "name",
            "kind",
            "expression",
            "unit",
            "description",
            "requested",
        ],
    ),
    (
        CAUSAL_EXPERIMENT_TABLE,
        &[
            "variant",
            "mode",
            "selection",
            "file",
            "line",
            "function",
            "speedup",
            "start_ns",
            "duration_ns",
            "delay_ns",
            "selected_samples",
            "period_ns",
        ],
    ),
    (
        CAUSAL_PROGRESS_TABLE,
        &[
            "experiment",
            "name",
            "kind",
            "visits",
            "departures",
            "in_flight",
        ],
    ),
    (CAUSAL_SAMPLE_TABLE, &["location", "count"]),
    (
        CLOCK_SYNC_TABLE,
        &["phase", "local_ns", "offset_ns", "rtt_ns", "reference_rank"],
    ),
    (
        REGION_STATS_TABLE,
        &[
            "thread_id",
            "name_id",
            "calls",
            "total_ns",
            "self_ns",
            "kept",
        ],
    ),
];

/// The exact statistics of a run's user-API regions per thread and name,
/// kept when a time filter (`trace_time_filter`) stores only the longer
/// regions: `thread_id` and `name_id` are row ids (of `rocpd_info_thread`
/// and `rocpd_string`), `calls` every completed region, `total_ns` their
/// summed durations, `self_ns` the same less the time of regions nested in
/// them, `kept` how many `rocpd_region` holds and `kept_ns` their summed
/// durations.
pub const REGION_STATS_TABLE: &str = "strobe_region_stats";

/// `CREATE TABLE IF NOT EXISTS` for [`REGION_STATS_TABLE`].
const REGION_STATS_DDL: &str = r#"
CREATE TABLE IF NOT EXISTS "strobe_region_stats{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "thread_id" INTEGER NOT NULL, "name_id" INTEGER NOT NULL, "calls" INTEGER NOT NULL,
  "total_ns" BIGINT NOT NULL, "self_ns" BIGINT NOT NULL, "kept" INTEGER NOT NULL,
  "kept_ns" BIGINT NOT NULL);
"#;

/// The table of clock comparisons with a reference process (MPI rank 0,
/// made by the MPI wrappers at `MPI_Init` and `MPI_Finalize`): at this
/// process's monotonic `local_ns` the reference's clock read `local_ns +
/// offset_ns`; `rtt_ns` is the round trip that bounds the error.
pub const CLOCK_SYNC_TABLE: &str = "strobe_clock_sync";

/// `CREATE TABLE IF NOT EXISTS` for [`CLOCK_SYNC_TABLE`].
const CLOCK_SYNC_DDL: &str = r#"
CREATE TABLE IF NOT EXISTS "strobe_clock_sync{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "phase" TEXT NOT NULL, "local_ns" BIGINT NOT NULL, "offset_ns" BIGINT NOT NULL,
  "rtt_ns" BIGINT NOT NULL, "reference_rank" INTEGER NOT NULL);
"#;

/// The table of causal-profiling experiments (`strobe causal`): one row
/// per experiment, what was virtually sped up, by how much, for how long
/// and how much delay that inserted. See `docs/schema.md`.
pub const CAUSAL_EXPERIMENT_TABLE: &str = "strobe_causal_experiment";

/// The table of what each causal experiment measured: one row per
/// experiment and progress point (`experiment` is the experiment's row id,
/// joined together with `guid`).
pub const CAUSAL_PROGRESS_TABLE: &str = "strobe_causal_progress";

/// The table of the samples a causal run counted in scope, per source line
/// (`file:line`) or function: what Coz writes as its `samples` lines.
pub const CAUSAL_SAMPLE_TABLE: &str = "strobe_causal_sample";

/// `CREATE TABLE IF NOT EXISTS` for the three causal tables: `{s}` and
/// `{g}` as in [`TABLE_DDL`].
const CAUSAL_DDL: &str = r#"
CREATE TABLE IF NOT EXISTS "strobe_causal_experiment{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "variant" TEXT NOT NULL, "mode" TEXT NOT NULL, "selection" TEXT NOT NULL,
  "file" TEXT, "line" INTEGER, "function" TEXT, "speedup" REAL NOT NULL,
  "start_ns" BIGINT NOT NULL, "duration_ns" BIGINT NOT NULL, "delay_ns" BIGINT NOT NULL,
  "selected_samples" INTEGER NOT NULL, "period_ns" BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS "strobe_causal_progress{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "experiment" INTEGER NOT NULL, "name" TEXT NOT NULL, "kind" TEXT NOT NULL,
  "visits" INTEGER NOT NULL, "departures" INTEGER NOT NULL, "in_flight" INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS "strobe_causal_sample{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "location" TEXT NOT NULL, "count" INTEGER NOT NULL);
"#;

/// The table that keeps the derived-metric definitions a run used
/// (`sampling_metrics`), so that metrics are computed from the stored
/// counters at read time without the definition file: `name`, `kind`
/// (`metric`, or `counter` for a named event of a PMU block a metric
/// refers to), `expression` (a metric's expression as written; a
/// counter's event spec), `unit`, `description`, `requested` (1 for the
/// metrics asked for, 0 for those only referred to).
pub const METRIC_TABLE: &str = "strobe_metric";

/// `CREATE TABLE IF NOT EXISTS` for [`METRIC_TABLE`].
const METRIC_DDL: &str = r#"
CREATE TABLE IF NOT EXISTS "strobe_metric{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "name" TEXT NOT NULL, "kind" TEXT NOT NULL, "expression" TEXT NOT NULL,
  "unit" TEXT, "description" TEXT, "requested" INTEGER NOT NULL DEFAULT 1);
"#;

/// The table that keeps the perf-map entries (JIT code) naming a
/// process's frames in no module, so that they can be named again after
/// the map file is gone: `start`, `size` (bytes) and `name`.
pub const JIT_SYMBOL_TABLE: &str = "strobe_jit_symbol";

/// `CREATE TABLE IF NOT EXISTS` for [`JIT_SYMBOL_TABLE`]: `{s}` and `{g}`
/// as in [`TABLE_DDL`].
const JIT_SYMBOL_DDL: &str = r#"
CREATE TABLE IF NOT EXISTS "strobe_jit_symbol{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "start" BIGINT NOT NULL, "size" BIGINT NOT NULL, "name" TEXT NOT NULL);
"#;

/// Creates the JIT symbol table of process `suffix` (guid `guid`) in the
/// connection's main schema unless it exists: new profiles get it from
/// [`create_tables`]; symbolization adds it to files written before it.
pub fn create_jit_symbol_table(
    conn: &Connection,
    suffix: &str,
    guid: &str,
) -> rusqlite::Result<()> {
    conn.execute_batch(
        &JIT_SYMBOL_DDL
            .replace("{GUID}", GUID)
            .replace("{s}", suffix)
            .replace("{g}", guid),
    )
}

/// Whether `schema` (`main` or an ATTACH alias) holds table `name`.
pub fn has_table(conn: &Connection, schema: &str, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        &format!(
            "SELECT count(*) FROM \"{}\".sqlite_master WHERE type = 'table' AND name = ?1",
            schema.replace('"', "\"\"")
        ),
        [name],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// Time columns of each table, used to restrict views to a time window:
/// `(table, start column, end column)`; for instants both are the same.
pub const TIMED_TABLES: [(&str, &str, &str); 6] = [
    ("rocpd_region", "start", "end"),
    ("rocpd_sample", "timestamp", "timestamp"),
    ("rocpd_kernel_dispatch", "start", "end"),
    ("rocpd_memory_copy", "start", "end"),
    ("rocpd_memory_allocate", "start", "end"),
    ("strobe_counter_sample", "timestamp", "timestamp"),
];

/// The `guid` column: the same value in every row of a process's tables,
/// so it is computed, not stored (a stored one cost 37 bytes per row).
const GUID: &str = r#""guid" TEXT NOT NULL GENERATED ALWAYS AS ('{g}') VIRTUAL"#;

/// Table bodies: `{s}` is replaced by the suffix, `{g}` by the guid and
/// `{GUID}` by the guid column definition.
const TABLE_DDL: &str = r#"
CREATE TABLE "rocpd_metadata{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "tag" TEXT NOT NULL,
  "value" TEXT NOT NULL);
CREATE TABLE "rocpd_string{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "string" TEXT NOT NULL UNIQUE ON CONFLICT ABORT);
CREATE TABLE "rocpd_info_node{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "hash" BIGINT NOT NULL UNIQUE, "machine_id" TEXT NOT NULL UNIQUE,
  "system_name" TEXT, "hostname" TEXT, "release" TEXT, "version" TEXT,
  "hardware_name" TEXT, "domain_name" TEXT);
CREATE TABLE "rocpd_info_process{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "nid" INTEGER NOT NULL, "ppid" INTEGER, "pid" INTEGER NOT NULL,
  "init" BIGINT, "fini" BIGINT, "start" BIGINT, "end" BIGINT, "command" TEXT,
  "environment" JSONB DEFAULT '{}' NOT NULL, "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_info_thread{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "nid" INTEGER NOT NULL, "ppid" INTEGER, "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL,
  "name" TEXT, "start" BIGINT, "end" BIGINT, "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_info_agent{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL,
  "type" TEXT CHECK ("type" IN ('CPU', 'GPU')),
  "absolute_index" INTEGER, "logical_index" INTEGER, "type_index" INTEGER, "uuid" INTEGER,
  "name" TEXT, "model_name" TEXT, "vendor_name" TEXT, "product_name" TEXT, "user_name" TEXT,
  "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_info_queue{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "name" TEXT,
  "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_info_stream{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "name" TEXT,
  "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_info_pmc{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "agent_id" INTEGER,
  "target_arch" TEXT CHECK ("target_arch" IN ('CPU', 'GPU')),
  "event_code" INT, "instance_id" INTEGER, "name" TEXT NOT NULL, "symbol" TEXT NOT NULL,
  "description" TEXT, "long_description" TEXT DEFAULT '', "component" TEXT,
  "units" TEXT DEFAULT '', "value_type" TEXT CHECK ("value_type" IN ('ABS', 'ACCUM', 'RELATIVE')),
  "block" TEXT, "expression" TEXT, "is_constant" INTEGER, "is_derived" INTEGER,
  "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_info_code_object{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "agent_id" INTEGER, "uri" TEXT,
  "load_base" BIGINT, "load_size" BIGINT, "load_delta" BIGINT,
  "storage_type" TEXT CHECK ("storage_type" IN ('FILE', 'MEMORY')),
  "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_info_kernel_symbol{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "code_object_id" INTEGER NOT NULL,
  "kernel_name" TEXT, "display_name" TEXT, "kernel_object" INTEGER,
  "kernarg_segment_size" INTEGER, "kernarg_segment_alignment" INTEGER,
  "group_segment_size" INTEGER, "private_segment_size" INTEGER, "sgpr_count" INTEGER,
  "arch_vgpr_count" INTEGER, "accum_vgpr_count" INTEGER,
  "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_track{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "nid" INTEGER NOT NULL, "pid" INTEGER, "tid" INTEGER, "name_id" INTEGER,
  "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_event{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "category_id" INTEGER, "stack_id" INTEGER, "parent_stack_id" INTEGER,
  "correlation_id" INTEGER, "call_stack" JSONB, "line_info" JSONB,
  "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_arg{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "event_id" INTEGER NOT NULL, "position" INTEGER NOT NULL, "type" TEXT NOT NULL,
  "name" TEXT NOT NULL, "value" TEXT, "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_pmc_event{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "event_id" INTEGER, "pmc_id" INTEGER NOT NULL, "value" REAL DEFAULT 0.0,
  "extdata" JSONB DEFAULT '{}');
CREATE TABLE "rocpd_region{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL,
  "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "name_id" INTEGER NOT NULL,
  "event_id" INTEGER, "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_sample{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "track_id" INTEGER NOT NULL, "timestamp" BIGINT NOT NULL, "event_id" INTEGER,
  "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_kernel_dispatch{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER,
  "agent_id" INTEGER NOT NULL, "kernel_id" INTEGER NOT NULL, "dispatch_id" INTEGER NOT NULL,
  "queue_id" INTEGER NOT NULL, "stream_id" INTEGER NOT NULL,
  "start" BIGINT NOT NULL, "end" BIGINT NOT NULL,
  "private_segment_size" INTEGER, "group_segment_size" INTEGER,
  "workgroup_size_x" INTEGER NOT NULL, "workgroup_size_y" INTEGER NOT NULL,
  "workgroup_size_z" INTEGER NOT NULL, "grid_size_x" INTEGER NOT NULL,
  "grid_size_y" INTEGER NOT NULL, "grid_size_z" INTEGER NOT NULL,
  "region_name_id" INTEGER, "event_id" INTEGER, "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_memory_copy{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER,
  "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "name_id" INTEGER NOT NULL,
  "dst_agent_id" INTEGER, "dst_address" INTEGER, "src_agent_id" INTEGER, "src_address" INTEGER,
  "size" INTEGER NOT NULL, "queue_id" INTEGER, "stream_id" INTEGER,
  "region_name_id" INTEGER, "event_id" INTEGER, "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "rocpd_memory_allocate{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER, "agent_id" INTEGER,
  "type" TEXT CHECK ("type" IN ('ALLOC', 'FREE', 'REALLOC', 'RECLAIM')),
  "level" TEXT CHECK ("level" IN ('REAL', 'VIRTUAL', 'SCRATCH')),
  "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "address" INTEGER, "size" INTEGER NOT NULL,
  "queue_id" INTEGER, "stream_id" INTEGER, "event_id" INTEGER,
  "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "strobe_settings{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "name" TEXT NOT NULL, "value" TEXT);
CREATE TABLE "strobe_module{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "pid" INTEGER NOT NULL, "path" TEXT NOT NULL, "build_id" TEXT,
  "load_address" BIGINT NOT NULL, "size" BIGINT NOT NULL, "file_offset" BIGINT DEFAULT 0,
  "load_time" BIGINT, "unload_time" BIGINT, "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE "strobe_frame{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "module_id" INTEGER, "rel_pc" BIGINT NOT NULL,
  "function" TEXT, "file" TEXT, "line" INTEGER, "inlined" INTEGER DEFAULT 0);
CREATE TABLE "strobe_callsite{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "parent_id" INTEGER, "frame_id" INTEGER NOT NULL, "depth" INTEGER NOT NULL);
CREATE TABLE "strobe_counter_sample{s}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {GUID},
  "pmc_id" INTEGER NOT NULL, "track_id" INTEGER, "timestamp" BIGINT NOT NULL,
  "value" REAL NOT NULL);
"#;

/// Creates all suffixed tables of one process (in the connection's main
/// schema) and its `rocpd_metadata` rows. No indexes.
pub fn create_tables(conn: &Connection, suffix: &str, guid: &str) -> rusqlite::Result<()> {
    let ddl = TABLE_DDL
        .replace("{GUID}", GUID)
        .replace("{s}", suffix)
        .replace("{g}", guid);
    conn.execute_batch(&ddl)?;
    create_jit_symbol_table(conn, suffix, guid)?;
    for ddl in [METRIC_DDL, CAUSAL_DDL, CLOCK_SYNC_DDL, REGION_STATS_DDL] {
        conn.execute_batch(
            &ddl.replace("{GUID}", GUID)
                .replace("{s}", suffix)
                .replace("{g}", guid),
        )?;
    }
    conn.execute(
        &format!("INSERT INTO \"rocpd_metadata{suffix}\" (tag, value) VALUES ('schema_version', ?1), ('uuid', ?2), ('guid', ?3), ('strobe_version', ?4)"),
        rusqlite::params![SCHEMA_VERSION.to_string(), suffix, guid, env!("CARGO_PKG_VERSION")],
    )?;
    Ok(())
}

/// Where one set of suffixed tables lives: the schema alias (`main`, or
/// the name an input was attached as) and the suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSet {
    /// Schema name in the connection (`main` or an ATTACH alias).
    pub schema: String,
    /// The process suffix, leading underscore included.
    pub suffix: String,
}

/// A time window applied to the unsuffixed views of timed tables: rows
/// overlapping `[start, end]` are kept (instants: `start <= t <= end`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ViewWindow {
    /// Inclusive lower bound in ns, if any.
    pub start: Option<i64>,
    /// Inclusive upper bound in ns, if any.
    pub end: Option<i64>,
}

/// The `WHERE` restricting timed table `table` to rows overlapping the
/// window (empty for a table without times or an open window).
pub(crate) fn window_clause(table: &str, w: &ViewWindow) -> String {
    let Some((_, s, e)) = TIMED_TABLES.iter().find(|(t, _, _)| *t == table) else {
        return String::new();
    };
    let mut parts = Vec::new();
    if let Some(lo) = w.start {
        parts.push(format!("\"{e}\" >= {lo}"));
    }
    if let Some(hi) = w.end {
        parts.push(format!("\"{s}\" <= {hi}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", parts.join(" AND "))
    }
}

/// Creates the unsuffixed views (`rocpd_region`, …) as `UNION ALL` over the
/// given table sets, then the standard data and summary views on top. With
/// `temp`, all views are TEMP (needed when they reference attached
/// schemas); otherwise they are created in `main` (only valid when every set
/// lives in `main`). Existing views of the same names are replaced.
pub fn create_views(
    conn: &Connection,
    sets: &[TableSet],
    temp: bool,
    window: &ViewWindow,
) -> rusqlite::Result<()> {
    let kind = if temp { "TEMP VIEW" } else { "VIEW" };
    let target = if temp { "temp" } else { "main" };
    let mut sql = String::new();
    for name in DATA_VIEW_NAMES.iter().rev() {
        sql.push_str(&format!("DROP VIEW IF EXISTS {target}.\"{name}\";\n"));
    }
    for table in all_tables() {
        sql.push_str(&format!("DROP VIEW IF EXISTS {target}.\"{table}\";\n"));
        let body = if sets.is_empty() {
            // No process at all: an empty view with no columns would break
            // the data views, so select from nothing with a typed shape.
            return Err(rusqlite::Error::InvalidQuery);
        } else {
            sets.iter()
                .map(|t| {
                    // Persistent views must not name a schema: the file may
                    // later be attached under another name.
                    let schema = if temp {
                        format!("\"{}\".", t.schema)
                    } else {
                        String::new()
                    };
                    format!(
                        "SELECT * FROM {schema}\"{}{}\"{}",
                        table,
                        t.suffix,
                        window_clause(table, window)
                    )
                })
                .collect::<Vec<_>>()
                .join(" UNION ALL ")
        };
        sql.push_str(&format!("CREATE {kind} \"{table}\" AS {body};\n"));
    }
    for (table, columns) in OPTIONAL_TABLES {
        sql.push_str(&format!("DROP VIEW IF EXISTS {target}.\"{table}\";\n"));
        sql.push_str(&format!(
            "CREATE {kind} \"{table}\" AS {};\n",
            optional_view_body(conn, table, columns, sets, temp)?
        ));
    }
    sql.push_str(&DATA_VIEWS.replace("CREATE VIEW", &format!("CREATE {kind}")));
    conn.execute_batch(&sql)
}

/// The `UNION ALL` body of an optional table's view over the sets that
/// have it, ending in a row-less select that gives the view its columns
/// (so it exists, empty, when no set has the table).
fn optional_view_body(
    conn: &Connection,
    table: &str,
    stored: &[&str],
    sets: &[TableSet],
    temp: bool,
) -> rusqlite::Result<String> {
    let columns = ["id", "guid"]
        .iter()
        .chain(stored)
        .map(|c| format!("\"{c}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let mut parts = Vec::new();
    for t in sets {
        if !has_table(conn, &t.schema, &format!("{table}{}", t.suffix))? {
            continue;
        }
        let schema = if temp {
            format!("\"{}\".", t.schema)
        } else {
            String::new()
        };
        parts.push(format!(
            "SELECT {columns} FROM {schema}\"{table}{}\"",
            t.suffix
        ));
    }
    let empty = ["id", "guid"]
        .iter()
        .chain(stored)
        .map(|c| format!("NULL AS \"{c}\""))
        .collect::<Vec<_>>()
        .join(", ");
    parts.push(format!("SELECT {empty} WHERE 0"));
    Ok(parts.join(" UNION ALL "))
}

/// Indexes a merge creates once all rows are in (never while writing).
pub fn create_indexes(conn: &Connection, suffix: &str) -> rusqlite::Result<()> {
    let s = suffix;
    conn.execute_batch(&format!(
        r#"
CREATE INDEX IF NOT EXISTS "idx_region{s}_start" ON "rocpd_region{s}" ("start");
CREATE INDEX IF NOT EXISTS "idx_region{s}_event" ON "rocpd_region{s}" ("event_id");
CREATE INDEX IF NOT EXISTS "idx_sample{s}_ts" ON "rocpd_sample{s}" ("timestamp");
CREATE INDEX IF NOT EXISTS "idx_sample{s}_event" ON "rocpd_sample{s}" ("event_id");
CREATE INDEX IF NOT EXISTS "idx_arg{s}_event" ON "rocpd_arg{s}" ("event_id");
CREATE INDEX IF NOT EXISTS "idx_counter{s}_ts" ON "strobe_counter_sample{s}" ("pmc_id", "timestamp");
CREATE INDEX IF NOT EXISTS "idx_callsite{s}_parent" ON "strobe_callsite{s}" ("parent_id");
"#
    ))
}

/// Names of the standard views created by [`create_views`] on top of the
/// unsuffixed table views, in creation order.
pub const DATA_VIEW_NAMES: [&str; 27] = [
    "code_objects",
    "kernel_symbols",
    "processes",
    "threads",
    "regions",
    "region_args",
    "samples",
    "sample_regions",
    "regions_and_samples",
    "kernels",
    "pmc_info",
    "pmc_events",
    "events_args",
    "stream_args",
    "memory_copies",
    "memory_allocations",
    "scratch_memory",
    "counters_collection",
    "top_kernels",
    "busy",
    "top",
    "strobe_frames",
    "strobe_sample_stacks",
    "strobe_counters",
    "strobe_samples",
    "strobe_region_counters",
    "strobe_causal_points",
];

/// The standard views (rocpd's names and columns; our SQL). Joins use the
/// row id and `guid`, per the rocpd join rule.
const DATA_VIEWS: &str = r#"
CREATE VIEW "code_objects" AS
SELECT CO.id, CO.guid, CO.nid, P.pid, A.absolute_index AS agent_abs_index, CO.uri,
  CO.load_base, CO.load_size, CO.load_delta, CO.storage_type AS storage_type_str,
  json_extract(CO.extdata, '$.size') AS code_object_size,
  json_extract(CO.extdata, '$.storage_type') AS storage_type,
  json_extract(CO.extdata, '$.memory_base') AS memory_base,
  json_extract(CO.extdata, '$.memory_size') AS memory_size
FROM "rocpd_info_code_object" CO
  LEFT JOIN "rocpd_info_agent" A ON A.id = CO.agent_id AND A.guid = CO.guid
  JOIN "rocpd_info_process" P ON P.id = CO.pid AND P.guid = CO.guid;

CREATE VIEW "kernel_symbols" AS
SELECT KS.id, KS.guid, KS.nid, P.pid, KS.code_object_id, KS.kernel_name, KS.display_name,
  KS.kernel_object, KS.kernarg_segment_size, KS.kernarg_segment_alignment,
  KS.group_segment_size, KS.private_segment_size, KS.sgpr_count, KS.arch_vgpr_count,
  KS.accum_vgpr_count,
  json_extract(KS.extdata, '$.size') AS kernel_symbol_size,
  json_extract(KS.extdata, '$.kernel_id') AS kernel_id,
  json_extract(KS.extdata, '$.kernel_code_entry_byte_offset') AS kernel_code_entry_byte_offset,
  json_extract(KS.extdata, '$.formatted_kernel_name') AS formatted_kernel_name,
  json_extract(KS.extdata, '$.demangled_kernel_name') AS demangled_kernel_name,
  json_extract(KS.extdata, '$.truncated_kernel_name') AS truncated_kernel_name,
  json_extract(KS.extdata, '$.kernel_address.handle') AS kernel_address
FROM "rocpd_info_kernel_symbol" KS
  JOIN "rocpd_info_process" P ON P.id = KS.pid AND P.guid = KS.guid;

CREATE VIEW "processes" AS
SELECT N.id AS nid, N.machine_id, N.system_name, N.hostname, N.release AS system_release,
  N.version AS system_version, P.guid, P.ppid, P.pid, P.init, P.start, P."end", P.fini, P.command
FROM "rocpd_info_process" P
  JOIN "rocpd_info_node" N ON N.id = P.nid AND N.guid = P.guid;

CREATE VIEW "threads" AS
SELECT N.id AS nid, N.machine_id, N.system_name, N.hostname, N.release AS system_release,
  N.version AS system_version, P.guid, P.ppid, P.pid, T.tid, T.start, T."end", T.name
FROM "rocpd_info_thread" T
  JOIN "rocpd_info_process" P ON P.id = T.pid AND P.guid = T.guid
  JOIN "rocpd_info_node" N ON N.id = T.nid AND N.guid = T.guid;

CREATE VIEW "regions" AS
SELECT R.id, R.guid,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  S.string AS name, R.nid, P.pid, T.tid, R.start, R."end", (R."end" - R.start) AS duration,
  R.event_id, E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id, E.extdata,
  E.call_stack, E.line_info
FROM "rocpd_region" R
  JOIN "rocpd_event" E ON E.id = R.event_id AND E.guid = R.guid
  JOIN "rocpd_string" S ON S.id = R.name_id AND S.guid = R.guid
  JOIN "rocpd_info_process" P ON P.id = R.pid AND P.guid = R.guid
  JOIN "rocpd_info_thread" T ON T.id = R.tid AND T.guid = R.guid;

CREATE VIEW "region_args" AS
SELECT R.id, R.guid, R.nid, P.pid, A.type, A.name, A.value
FROM "rocpd_region" R
  JOIN "rocpd_event" E ON E.id = R.event_id AND E.guid = R.guid
  JOIN "rocpd_arg" A ON A.event_id = E.id AND A.guid = R.guid
  JOIN "rocpd_info_process" P ON P.id = R.pid AND P.guid = R.guid;

CREATE VIEW "samples" AS
SELECT R.id, R.guid,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = T.name_id AND RS.guid = T.guid) AS name,
  T.nid, P.pid, TH.tid, R.timestamp, R.event_id, E.stack_id, E.parent_stack_id,
  E.correlation_id AS corr_id, E.extdata, E.call_stack, E.line_info
FROM "rocpd_sample" R
  JOIN "rocpd_track" T ON T.id = R.track_id AND T.guid = R.guid
  JOIN "rocpd_event" E ON E.id = R.event_id AND E.guid = R.guid
  JOIN "rocpd_info_process" P ON P.id = T.pid AND P.guid = T.guid
  JOIN "rocpd_info_thread" TH ON TH.id = T.tid AND TH.guid = T.guid;

CREATE VIEW "sample_regions" AS
SELECT S.id, S.guid, S.category, S.name, S.nid, S.pid, S.tid, S.timestamp AS start,
  S.timestamp AS "end", 0 AS duration, S.event_id, S.stack_id, S.parent_stack_id, S.corr_id,
  S.extdata, S.call_stack, S.line_info
FROM "samples" S;

CREATE VIEW "regions_and_samples" AS
SELECT * FROM "regions" UNION ALL SELECT * FROM "sample_regions";

CREATE VIEW "kernels" AS
SELECT K.id, K.guid, T.tid,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  R.string AS region, S.display_name AS name, K.nid, P.pid,
  A.absolute_index AS agent_abs_index, A.logical_index AS agent_log_index,
  A.type_index AS agent_type_index, A.type AS agent_type, S.code_object_id, K.kernel_id,
  K.dispatch_id, K.stream_id, K.queue_id, Q.name AS queue, ST.name AS stream, K.start, K."end",
  (K."end" - K.start) AS duration, K.grid_size_x AS grid_x, K.grid_size_y AS grid_y,
  K.grid_size_z AS grid_z, K.workgroup_size_x AS workgroup_x, K.workgroup_size_y AS workgroup_y,
  K.workgroup_size_z AS workgroup_z, K.group_segment_size AS lds_size,
  K.private_segment_size AS scratch_size, S.group_segment_size AS static_lds_size,
  S.private_segment_size AS static_scratch_size, E.stack_id, E.parent_stack_id,
  E.correlation_id AS corr_id
FROM "rocpd_kernel_dispatch" K
  JOIN "rocpd_info_agent" A ON A.id = K.agent_id AND A.guid = K.guid
  JOIN "rocpd_event" E ON E.id = K.event_id AND E.guid = K.guid
  LEFT JOIN "rocpd_string" R ON R.id = K.region_name_id AND R.guid = K.guid
  JOIN "rocpd_info_kernel_symbol" S ON S.id = K.kernel_id AND S.guid = K.guid
  LEFT JOIN "rocpd_info_stream" ST ON ST.id = K.stream_id AND ST.guid = K.guid
  LEFT JOIN "rocpd_info_queue" Q ON Q.id = K.queue_id AND Q.guid = K.guid
  JOIN "rocpd_info_process" P ON P.id = K.pid AND P.guid = K.guid
  LEFT JOIN "rocpd_info_thread" T ON T.id = K.tid AND T.guid = K.guid;

CREATE VIEW "pmc_info" AS
SELECT PI.id, PI.guid, PI.nid, P.pid, A.absolute_index AS agent_abs_index, PI.is_constant,
  PI.is_derived, PI.name, PI.description, PI.block, PI.expression
FROM "rocpd_info_pmc" PI
  LEFT JOIN "rocpd_info_agent" A ON A.id = PI.agent_id AND A.guid = PI.guid
  JOIN "rocpd_info_process" P ON P.id = PI.pid AND P.guid = PI.guid;

CREATE VIEW "pmc_events" AS
SELECT PE.id, PE.guid, PE.pmc_id, E.id AS event_id,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  (SELECT display_name FROM "rocpd_info_kernel_symbol" KS WHERE KS.id = K.kernel_id AND KS.guid = K.guid) AS name,
  K.nid, P.pid, K.dispatch_id, K.start, K."end", (K."end" - K.start) AS duration,
  PI.name AS counter_name, PE.value AS counter_value
FROM "rocpd_pmc_event" PE
  JOIN "rocpd_info_pmc" PI ON PI.id = PE.pmc_id AND PI.guid = PE.guid
  JOIN "rocpd_event" E ON E.id = PE.event_id AND E.guid = PE.guid
  JOIN "rocpd_kernel_dispatch" K ON K.event_id = PE.event_id AND K.guid = PE.guid
  JOIN "rocpd_info_process" P ON P.id = K.pid AND P.guid = K.guid;

CREATE VIEW "events_args" AS
SELECT E.id AS event_id,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  E.stack_id, E.parent_stack_id, E.correlation_id, A.position AS arg_position,
  A.type AS arg_type, A.name AS arg_name, A.value AS arg_value, E.call_stack, E.line_info,
  A.extdata
FROM "rocpd_event" E
  JOIN "rocpd_arg" A ON A.event_id = E.id AND A.guid = E.guid;

CREATE VIEW "stream_args" AS
SELECT A.id AS argument_id, A.event_id, A.position AS arg_position, A.type AS arg_type,
  A.value AS arg_value, json_extract(A.extdata, '$.stream_id') AS stream_id, S.nid, P.pid,
  S.name AS stream_name, S.extdata
FROM "rocpd_arg" A
  JOIN "rocpd_info_stream" S ON S.id = json_extract(A.extdata, '$.stream_id') AND S.guid = A.guid
  JOIN "rocpd_info_process" P ON P.id = S.pid AND P.guid = S.guid
WHERE A.name = 'stream';

CREATE VIEW "memory_copies" AS
SELECT M.id, M.guid,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  M.nid, P.pid, T.tid, M.start, M."end", (M."end" - M.start) AS duration, S.string AS name,
  R.string AS region_name, M.stream_id, M.queue_id, ST.name AS stream_name, Q.name AS queue_name,
  M.size, DA.name AS dst_device, DA.absolute_index AS dst_agent_abs_index,
  DA.logical_index AS dst_agent_log_index, DA.type_index AS dst_agent_type_index,
  DA.type AS dst_agent_type, M.dst_address, SA.name AS src_device,
  SA.absolute_index AS src_agent_abs_index, SA.logical_index AS src_agent_log_index,
  SA.type_index AS src_agent_type_index, SA.type AS src_agent_type, M.src_address,
  E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id
FROM "rocpd_memory_copy" M
  JOIN "rocpd_string" S ON S.id = M.name_id AND S.guid = M.guid
  LEFT JOIN "rocpd_string" R ON R.id = M.region_name_id AND R.guid = M.guid
  LEFT JOIN "rocpd_info_agent" DA ON DA.id = M.dst_agent_id AND DA.guid = M.guid
  LEFT JOIN "rocpd_info_agent" SA ON SA.id = M.src_agent_id AND SA.guid = M.guid
  LEFT JOIN "rocpd_info_queue" Q ON Q.id = M.queue_id AND Q.guid = M.guid
  LEFT JOIN "rocpd_info_stream" ST ON ST.id = M.stream_id AND ST.guid = M.guid
  JOIN "rocpd_event" E ON E.id = M.event_id AND E.guid = M.guid
  JOIN "rocpd_info_process" P ON P.id = M.pid AND P.guid = M.guid
  LEFT JOIN "rocpd_info_thread" T ON T.id = M.tid AND T.guid = M.guid;

CREATE VIEW "memory_allocations" AS
SELECT M.id, M.guid,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  M.nid, P.pid, T.tid, M.start, M."end", (M."end" - M.start) AS duration, M.type, M.level,
  A.name AS agent_name, A.absolute_index AS agent_abs_index, A.logical_index AS agent_log_index,
  A.type_index AS agent_type_index, A.type AS agent_type, M.address, M.size, M.queue_id,
  Q.name AS queue_name, M.stream_id, ST.name AS stream_name, E.stack_id, E.parent_stack_id,
  E.correlation_id AS corr_id
FROM "rocpd_memory_allocate" M
  LEFT JOIN "rocpd_info_agent" A ON A.id = M.agent_id AND A.guid = M.guid
  LEFT JOIN "rocpd_info_queue" Q ON Q.id = M.queue_id AND Q.guid = M.guid
  LEFT JOIN "rocpd_info_stream" ST ON ST.id = M.stream_id AND ST.guid = M.guid
  JOIN "rocpd_event" E ON E.id = M.event_id AND E.guid = M.guid
  JOIN "rocpd_info_process" P ON P.id = M.pid AND P.guid = M.guid
  LEFT JOIN "rocpd_info_thread" T ON T.id = M.tid AND T.guid = M.guid;

CREATE VIEW "scratch_memory" AS
SELECT M.id, M.guid, M.nid, P.pid, M.type AS operation, A.name AS agent_name,
  A.absolute_index AS agent_abs_index, A.logical_index AS agent_log_index,
  A.type_index AS agent_type_index, A.type AS agent_type, M.queue_id, T.tid,
  json_extract(M.extdata, '$.flags') AS alloc_flags, M.start, M."end", M.size, M.address,
  E.correlation_id, E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  E.extdata AS event_extdata
FROM "rocpd_memory_allocate" M
  LEFT JOIN "rocpd_info_agent" A ON A.id = M.agent_id AND A.guid = M.guid
  JOIN "rocpd_event" E ON E.id = M.event_id AND E.guid = M.guid
  JOIN "rocpd_info_process" P ON P.id = M.pid AND P.guid = M.guid
  LEFT JOIN "rocpd_info_thread" T ON T.id = M.tid AND T.guid = M.guid
WHERE M.level = 'SCRATCH';

CREATE VIEW "counters_collection" AS
SELECT MIN(PE.id) AS id, PE.guid, K.dispatch_id, K.kernel_id, E.id AS event_id,
  E.correlation_id, E.stack_id, E.parent_stack_id, P.pid, T.tid, K.agent_id,
  A.absolute_index AS agent_abs_index, A.logical_index AS agent_log_index,
  A.type_index AS agent_type_index, A.type AS agent_type, K.queue_id,
  K.grid_size_x, K.grid_size_y, K.grid_size_z,
  (K.grid_size_x * K.grid_size_y * K.grid_size_z) AS grid_size, S.display_name AS kernel_name,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = K.region_name_id AND RS.guid = K.guid) AS kernel_region,
  K.workgroup_size_x, K.workgroup_size_y, K.workgroup_size_z,
  (K.workgroup_size_x * K.workgroup_size_y * K.workgroup_size_z) AS workgroup_size,
  K.group_segment_size AS lds_block_size, K.private_segment_size AS scratch_size,
  S.arch_vgpr_count AS vgpr_count, S.accum_vgpr_count, S.sgpr_count,
  PI.name AS counter_name, PI.symbol AS counter_symbol, PI.component, PI.description, PI.block,
  PI.expression, PI.value_type, PI.id AS counter_id, SUM(PE.value) AS value, K.start, K."end",
  PI.is_constant, PI.is_derived, (K."end" - K.start) AS duration,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  K.nid, E.extdata, S.code_object_id
FROM "rocpd_pmc_event" PE
  JOIN "rocpd_info_pmc" PI ON PI.id = PE.pmc_id AND PI.guid = PE.guid
  JOIN "rocpd_event" E ON E.id = PE.event_id AND E.guid = PE.guid
  JOIN "rocpd_kernel_dispatch" K ON K.event_id = PE.event_id AND K.guid = PE.guid
  JOIN "rocpd_info_agent" A ON A.id = K.agent_id AND A.guid = K.guid
  JOIN "rocpd_info_kernel_symbol" S ON S.id = K.kernel_id AND S.guid = K.guid
  JOIN "rocpd_info_process" P ON P.id = K.pid AND P.guid = K.guid
  LEFT JOIN "rocpd_info_thread" T ON T.id = K.tid AND T.guid = K.guid
GROUP BY PE.guid, K.dispatch_id, PI.name, K.agent_id;

CREATE VIEW "top_kernels" AS
SELECT S.display_name AS name, COUNT(K.kernel_id) AS total_calls,
  SUM(K."end" - K.start) / 1000.0 AS total_duration,
  (SUM(K."end" - K.start) / COUNT(K.kernel_id)) / 1000.0 AS average,
  SUM(K."end" - K.start) * 100.0 / (SELECT SUM(A."end" - A.start) FROM "rocpd_kernel_dispatch" A) AS percentage
FROM "rocpd_kernel_dispatch" K
  JOIN "rocpd_info_kernel_symbol" S ON S.id = K.kernel_id AND S.guid = K.guid
GROUP BY name ORDER BY total_duration DESC;

CREATE VIEW "busy" AS
SELECT G.agent_id, AG.type, G.GpuTime, W.WallTime, G.GpuTime * 1.0 / W.WallTime AS Busy
FROM (SELECT agent_id, guid, SUM("end" - start) AS GpuTime FROM (
        SELECT agent_id, guid, "end", start FROM "rocpd_kernel_dispatch"
        UNION ALL SELECT dst_agent_id AS agent_id, guid, "end", start FROM "rocpd_memory_copy")
      GROUP BY agent_id, guid) G
  CROSS JOIN (SELECT MAX("end") - MIN(start) AS WallTime FROM (
        SELECT "end", start FROM "rocpd_kernel_dispatch"
        UNION ALL SELECT "end", start FROM "rocpd_memory_copy")) W
  JOIN "rocpd_info_agent" AG ON AG.id = G.agent_id AND AG.guid = G.guid;

CREATE VIEW "top" AS
SELECT name, COUNT(*) AS total_calls, SUM(duration) / 1000.0 AS total_duration,
  (SUM(duration) / COUNT(*)) / 1000.0 AS average,
  SUM(duration) * 100.0 / total_time AS percentage
FROM (SELECT KS.display_name AS name, (KD."end" - KD.start) AS duration
        FROM "rocpd_kernel_dispatch" KD
        JOIN "rocpd_info_kernel_symbol" KS ON KS.id = KD.kernel_id AND KS.guid = KD.guid
      UNION ALL
      SELECT RS.string AS name, (MC."end" - MC.start) AS duration
        FROM "rocpd_memory_copy" MC JOIN "rocpd_string" RS ON RS.id = MC.name_id AND RS.guid = MC.guid
      UNION ALL
      SELECT RS.string AS name, (RR."end" - RR.start) AS duration
        FROM "rocpd_region" RR JOIN "rocpd_string" RS ON RS.id = RR.name_id AND RS.guid = RR.guid
     ) operations
  CROSS JOIN (SELECT SUM("end" - start) AS total_time FROM (
        SELECT "end", start FROM "rocpd_kernel_dispatch"
        UNION ALL SELECT "end", start FROM "rocpd_memory_copy"
        UNION ALL SELECT "end", start FROM "rocpd_region")) TOTAL
GROUP BY name ORDER BY total_duration DESC;

CREATE VIEW "strobe_frames" AS
SELECT F.id, F.guid, F.module_id, M.path AS module, M.build_id, M.load_address, F.rel_pc,
  F.function, F.file, F.line
FROM "strobe_frame" F
  LEFT JOIN "strobe_module" M ON M.id = F.module_id AND M.guid = F.guid;

CREATE VIEW "strobe_sample_stacks" AS
WITH RECURSIVE walk(sample_id, guid, timestamp, callsite, depth) AS (
  SELECT S.id, S.guid, S.timestamp, E.stack_id, 0
    FROM "rocpd_sample" S JOIN "rocpd_event" E ON E.id = S.event_id AND E.guid = S.guid
    WHERE E.stack_id IS NOT NULL
  UNION ALL
  SELECT W.sample_id, W.guid, W.timestamp, C.parent_id, W.depth + 1
    FROM walk W JOIN "strobe_callsite" C ON C.id = W.callsite AND C.guid = W.guid
    WHERE C.parent_id IS NOT NULL)
SELECT W.sample_id, W.guid, W.timestamp, W.depth, F.id AS frame_id, F.module, F.rel_pc,
  F.function, F.file, F.line
FROM walk W
  JOIN "strobe_callsite" C ON C.id = W.callsite AND C.guid = W.guid
  JOIN "strobe_frames" F ON F.id = C.frame_id AND F.guid = C.guid;

CREATE VIEW "strobe_samples" AS
SELECT S.id, S.guid, P.pid, TH.tid, S.timestamp,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS kind,
  E.stack_id, json_extract(S.extdata, '$.weight_ns') AS weight_ns,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = T.name_id AND RS.guid = T.guid) AS track
FROM "rocpd_sample" S
  JOIN "rocpd_track" T ON T.id = S.track_id AND T.guid = S.guid
  JOIN "rocpd_event" E ON E.id = S.event_id AND E.guid = S.guid
  JOIN "rocpd_info_process" P ON P.id = T.pid AND P.guid = T.guid
  JOIN "rocpd_info_thread" TH ON TH.id = T.tid AND TH.guid = T.guid;

CREATE VIEW "strobe_counters" AS
SELECT CS.id, CS.guid, P.pid, TH.tid, PI.name, PI.units, CS.timestamp, CS.value
FROM "strobe_counter_sample" CS
  JOIN "rocpd_info_pmc" PI ON PI.id = CS.pmc_id AND PI.guid = CS.guid
  JOIN "rocpd_info_process" P ON P.id = PI.pid AND P.guid = PI.guid
  LEFT JOIN "rocpd_track" T ON T.id = CS.track_id AND T.guid = CS.guid
  LEFT JOIN "rocpd_info_thread" TH ON TH.id = T.tid AND TH.guid = T.guid;

CREATE VIEW "strobe_region_counters" AS
SELECT PE.id, PE.guid, R.id AS region_id, P.pid, TH.tid,
  (SELECT string FROM "rocpd_string" RS WHERE RS.id = R.name_id AND RS.guid = R.guid) AS name,
  R.start, R."end", (R."end" - R.start) AS duration, PI.name AS counter, PI.units,
  PE.value
FROM "rocpd_pmc_event" PE
  JOIN "rocpd_info_pmc" PI ON PI.id = PE.pmc_id AND PI.guid = PE.guid
  JOIN "rocpd_region" R ON R.event_id = PE.event_id AND R.guid = PE.guid
  JOIN "rocpd_info_process" P ON P.id = R.pid AND P.guid = R.guid
  JOIN "rocpd_info_thread" TH ON TH.id = R.tid AND TH.guid = R.guid;

CREATE VIEW "strobe_causal_points" AS
SELECT E.id AS experiment, E.guid, E.variant, E.mode, E.selection, E.file, E.line, E.function,
  E.speedup, E.start_ns, E.duration_ns, E.delay_ns, E.selected_samples, E.period_ns,
  P.name AS progress, P.kind, P.visits, P.departures, P.in_flight
FROM "strobe_causal_progress" P
  JOIN "strobe_causal_experiment" E ON E.id = P.experiment AND E.guid = P.guid;
"#;
