//! DWARF line tables: which source line each address of a module was
//! compiled from.
//!
//! Owns reading a module's line programs (through `gimli`) into address
//! ranges with their file (made absolute with the compilation directory)
//! and line. Reads every line table of the file at once (a large binary's
//! takes a while and some memory: callers run it off any latency-critical
//! thread). Never fails on bad DWARF: it keeps the rows read before the
//! error, or none.

use crate::elf::ElfFile;
use gimli::{EndianSlice, RunTimeEndian};
use std::collections::HashMap;

/// One row range of a line table: `[start, end)` (file addresses) at
/// `file:line`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRow {
    /// First address.
    pub start: u64,
    /// End (exclusive).
    pub end: u64,
    /// Source file path.
    pub file: String,
    /// Line (never 0).
    pub line: u32,
}

/// The line table of `elf` as address ranges. Empty without DWARF line
/// information or where it cannot be read.
pub fn line_rows(elf: &ElfFile) -> Vec<LineRow> {
    read_line_rows(elf).unwrap_or_default()
}

type Reader<'a> = EndianSlice<'a, RunTimeEndian>;

fn read_line_rows(elf: &ElfFile) -> Result<Vec<LineRow>, gimli::Error> {
    let endian = if elf.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let sections = elf.sections();
    let load = |id: gimli::SectionId| -> Result<Reader<'_>, gimli::Error> {
        let data = sections
            .iter()
            .find(|s| s.name == id.name().as_bytes())
            .and_then(|s| elf.data(s))
            .unwrap_or(&[]);
        Ok(EndianSlice::new(data, endian))
    };
    let dwarf = gimli::Dwarf::load(load)?;
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        unit_rows(&dwarf, &unit, &mut out)?;
    }
    Ok(out)
}

/// Appends the rows of `unit`'s line program to `out`.
fn unit_rows<'a>(
    dwarf: &gimli::Dwarf<Reader<'a>>,
    unit: &gimli::Unit<Reader<'a>>,
    out: &mut Vec<LineRow>,
) -> Result<(), gimli::Error> {
    let Some(program) = unit.line_program.clone() else {
        return Ok(());
    };
    let comp_dir = unit
        .comp_dir
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut rows = program.rows();
    let mut open: Option<(u64, u64, u32)> = None;
    while let Some((header, row)) = rows.next_row()? {
        if let Some((start, file, line)) = open.take() {
            if row.address() > start && line > 0 {
                let name = names
                    .entry(file)
                    .or_insert_with(|| file_name(dwarf, unit, header, file, &comp_dir));
                out.push(LineRow {
                    start,
                    end: row.address(),
                    file: name.clone(),
                    line,
                });
            }
        }
        if !row.end_sequence() {
            let line = row.line().map_or(0, |l| l.get() as u32);
            open = Some((row.address(), row.file_index(), line));
        }
    }
    Ok(())
}

/// The path of file `index` of a line program: its directory (the
/// compilation directory for relative ones) joined with its name.
fn file_name<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    header: &gimli::LineProgramHeader<R>,
    index: u64,
    comp_dir: &str,
) -> String {
    let text = |attr| {
        dwarf
            .attr_string(unit, attr)
            .ok()
            .and_then(|r| r.to_string_lossy().ok().map(|s| s.into_owned()))
    };
    let Some(file) = header.file(index) else {
        return "??".into();
    };
    let name = text(file.path_name()).unwrap_or_else(|| "??".into());
    if name.starts_with('/') {
        return name;
    }
    let dir = file.directory(header).and_then(text).unwrap_or_default();
    let dir = if dir.starts_with('/') || comp_dir.is_empty() {
        dir
    } else if dir.is_empty() {
        comp_dir.to_string()
    } else {
        format!("{comp_dir}/{dir}")
    };
    if dir.is_empty() {
        name
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_crates_files_are_in_this_binarys_line_table() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let rows = line_rows(&ElfFile::open(&exe).unwrap());
        for file in ["src/lines.rs", "src/elf.rs"] {
            assert!(
                rows.iter().any(|r| r.file.ends_with(file)),
                "no row of {file}"
            );
        }
        assert!(rows.iter().all(|r| r.start < r.end && r.line > 0));
        assert!(
            rows.iter().all(|r| r.file.starts_with('/')),
            "absolute paths"
        );
    }
}
