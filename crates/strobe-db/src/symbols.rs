//! Symbolization storage: reading frames that need names and writing names.
//!
//! Owns the two sides of post-run symbolization on a database: listing the
//! frames of each process with their module (path, build id, load address)
//! and updating `strobe_frame` rows with function, file and line. It never
//! resolves a symbol itself (the CLI does that with blazesym) and never
//! touches other tables.

use std::path::Path;

use rusqlite::{params, Connection};

use crate::error::{Result, SqlContext};
use crate::writer::{FrameId, FrameSymbols};

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
