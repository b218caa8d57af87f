//! Symbolization storage: reading frames that need names and writing names.
//!
//! Owns the two sides of post-run symbolization on a database: listing the
//! frames of each process with their module (path, build id, load address)
//! and updating `strobe_frame` rows with function, file and line; and
//! keeping the perf-map entries (JIT code) that named frames in no module
//! in `strobe_jit_symbol`, so that they can be named again once the map
//! file is gone; and telling which OS process a profile is of and when it
//! lived (which perf map can be its own). It never resolves a symbol itself
//! (`strobe-symbols` does), never reads a perf map and never writes other
//! tables.

use std::path::Path;

use rusqlite::{params, Connection};

use crate::error::{Result, SqlContext};
use crate::writer::records::FrameId;

/// Symbol information for one frame, from symbolization after the run.
#[derive(Debug, Clone, Default)]
pub struct FrameSymbols<'a> {
    /// The frame to update.
    pub frame: FrameId,
    /// Function name (demangled), if resolved.
    pub function: Option<&'a str>,
    /// Source file, if known.
    pub file: Option<&'a str>,
    /// Source line, if known.
    pub line: Option<u32>,
}

/// A frame waiting for a name, with what a symbolizer needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsymbolizedFrame {
    /// Process suffix the frame belongs to.
    pub suffix: String,
    /// Frame row id within that process.
    pub frame: FrameId,
    /// Module path (`None` when the pc fell outside every module).
    pub module_path: Option<String>,
    /// Module build id in hex.
    pub build_id: Option<String>,
    /// Module load address.
    pub load_address: Option<u64>,
    /// Module file offset of its first mapping.
    pub file_offset: Option<u64>,
    /// Pc relative to the module's load address (absolute without module).
    pub rel_pc: u64,
}

pub(crate) fn update_frames(
    conn: &Connection,
    suffix: &str,
    symbols: &[FrameSymbols<'_>],
) -> rusqlite::Result<()> {
    let mut st = conn.prepare_cached(&format!(
        "UPDATE \"strobe_frame{suffix}\" SET function = ?2, file = ?3, line = ?4 WHERE id = ?1"
    ))?;
    for s in symbols {
        st.execute(params![s.frame.0, s.function, s.file, s.line])?;
    }
    Ok(())
}

/// Lists every frame of every process in the file at `path` whose function
/// name is still NULL. Memory grows with the number of distinct frames.
pub fn unsymbolized_frames(path: &Path) -> Result<Vec<UnsymbolizedFrame>> {
    let conn = Connection::open(path).at(path)?;
    let mut out = Vec::new();
    for suffix in crate::inputs::suffixes_in(&conn, "main").at(path)? {
        let mut st = conn
            .prepare(&format!(
                "SELECT F.id, M.path, M.build_id, M.load_address, M.file_offset, F.rel_pc
                 FROM \"strobe_frame{suffix}\" F LEFT JOIN \"strobe_module{suffix}\" M ON M.id = F.module_id
                 WHERE F.function IS NULL ORDER BY F.id"
            ))
            .at(path)?;
        let rows = st
            .query_map([], |r| {
                Ok(UnsymbolizedFrame {
                    suffix: suffix.clone(),
                    frame: FrameId(r.get(0)?),
                    module_path: r.get(1)?,
                    build_id: r.get(2)?,
                    load_address: r.get::<_, Option<i64>>(3)?.map(|v| v as u64),
                    file_offset: r.get::<_, Option<i64>>(4)?.map(|v| v as u64),
                    rel_pc: r.get::<_, i64>(5)? as u64,
                })
            })
            .at(path)?;
        for r in rows {
            out.push(r.at(path)?);
        }
    }
    Ok(out)
}

/// Writes symbols for frames of the process `suffix` in a closed database
/// file, in one transaction.
pub fn set_frame_symbols(path: &Path, suffix: &str, symbols: &[FrameSymbols<'_>]) -> Result<()> {
    let mut conn = Connection::open(path).at(path)?;
    let tx = conn.transaction().at(path)?;
    update_frames(&tx, suffix, symbols).at(path)?;
    tx.commit().at(path)
}

/// A module of a process as `strobe_module` records it: enough to place
/// an absolute pc in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleSpan {
    /// Module path.
    pub path: String,
    /// Build id in hex.
    pub build_id: Option<String>,
    /// Load address (the bias: pc minus it is the module-relative pc).
    pub load_address: u64,
    /// Bytes mapped from the load address.
    pub size: u64,
}

/// The modules recorded for process `suffix`, each distinct (path,
/// build id, load address, size) once.
pub fn process_modules(path: &Path, suffix: &str) -> Result<Vec<ModuleSpan>> {
    let conn = crate::inputs::open_read_only(path)?;
    let mut st = conn
        .prepare(&format!(
            "SELECT DISTINCT path, build_id, load_address, size FROM \"strobe_module{suffix}\""
        ))
        .at(path)?;
    let rows = st
        .query_map([], |r| {
            Ok(ModuleSpan {
                path: r.get(0)?,
                build_id: r.get(1)?,
                load_address: r.get::<_, i64>(2)? as u64,
                size: r.get::<_, i64>(3)? as u64,
            })
        })
        .at(path)?;
    rows.map(|r| r.at(path)).collect()
}

/// Which OS process the tables with a suffix describe and when it lived,
/// on the realtime clock (Unix epoch ns), where the database tells it:
/// its start and end are monotonic, and the clock snapshot taken when the
/// database was created converts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessLifetime {
    /// The OS pid.
    pub pid: i64,
    /// When it started.
    pub start_unix_ns: Option<i128>,
    /// When it ended.
    pub end_unix_ns: Option<i128>,
}

/// The pid and lifetime of process `suffix` in the file at `path`
/// (`""`: a single-process file's one process); `None` without a process
/// row.
pub fn process_lifetime(path: &Path, suffix: &str) -> Result<Option<ProcessLifetime>> {
    use rusqlite::OptionalExtension;
    let conn = crate::inputs::open_read_only(path)?;
    let s = suffix.replace('"', "");
    let Some((pid, start, end)) = conn
        .query_row(
            &format!("SELECT pid, start, \"end\" FROM \"rocpd_info_process{s}\""),
            [],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Option<i64>>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                ))
            },
        )
        .optional()
        .at(path)?
    else {
        return Ok(None);
    };
    let clock = |name: &str| -> Option<i128> {
        conn.query_row(
            &format!("SELECT value FROM \"strobe_settings{s}\" WHERE name = ?1"),
            [name],
            |r| r.get::<_, String>(0),
        )
        .ok()?
        .trim()
        .parse()
        .ok()
    };
    let offset = clock("clock.realtime_ns")
        .zip(clock("clock.monotonic_ns"))
        .map(|(real, mono)| real - mono);
    Ok(Some(ProcessLifetime {
        pid,
        start_unix_ns: offset.zip(start).map(|(o, t)| o + i128::from(t)),
        end_unix_ns: offset.zip(end).map(|(o, t)| o + i128::from(t)),
    }))
}

/// One perf-map entry: code at `start..start + size` (absolute addresses
/// in the process) is the function `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitSymbol {
    /// First address.
    pub start: u64,
    /// Length in bytes.
    pub size: u64,
    /// Function name as the JIT wrote it.
    pub name: String,
}

/// The JIT symbols stored for process `suffix` (in insertion order);
/// empty when the file has none or predates the table.
pub fn jit_symbols(path: &Path, suffix: &str) -> Result<Vec<JitSymbol>> {
    let conn = crate::inputs::open_read_only(path)?;
    let table = format!("{}{suffix}", crate::schema::JIT_SYMBOL_TABLE);
    if !crate::schema::has_table(&conn, "main", &table).at(path)? {
        return Ok(Vec::new());
    }
    let mut st = conn
        .prepare(&format!(
            "SELECT start, size, name FROM \"{table}\" ORDER BY id"
        ))
        .at(path)?;
    let rows = st
        .query_map([], |r| {
            Ok(JitSymbol {
                start: r.get::<_, i64>(0)? as u64,
                size: r.get::<_, i64>(1)? as u64,
                name: r.get(2)?,
            })
        })
        .at(path)?;
    rows.map(|r| r.at(path)).collect()
}

/// Adds `symbols` to the JIT symbols of process `suffix` in a closed
/// database file, in one transaction, skipping entries already stored;
/// creates the table in a file written before it existed.
pub fn store_jit_symbols(path: &Path, suffix: &str, symbols: &[JitSymbol]) -> Result<()> {
    let mut conn = Connection::open(path).at(path)?;
    let tx = conn.transaction().at(path)?;
    let guid: String = tx
        .query_row(
            &format!("SELECT value FROM \"rocpd_metadata{suffix}\" WHERE tag = 'guid'"),
            [],
            |r| r.get(0),
        )
        .at(path)?;
    crate::schema::create_jit_symbol_table(&tx, suffix, &guid).at(path)?;
    {
        let table = format!("{}{suffix}", crate::schema::JIT_SYMBOL_TABLE);
        let mut st = tx
            .prepare(&format!(
                "INSERT INTO \"{table}\" (start, size, name) SELECT ?1, ?2, ?3
                 WHERE NOT EXISTS (SELECT 1 FROM \"{table}\" WHERE start = ?1 AND size = ?2 AND name = ?3)"
            ))
            .at(path)?;
        for s in symbols {
            st.execute(params![s.start as i64, s.size as i64, s.name])
                .at(path)?;
        }
    }
    tx.commit().at(path)
}
