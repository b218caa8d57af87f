//! The code causal profiling can select in one process: which addresses
//! are in scope, and which line (or function) each belongs to.
//!
//! Built from the process's executable mappings (`/proc/PID/maps`), each
//! module's DWARF line table (through `gimli`) and its function symbols,
//! filtered by the scope settings (binary, source file and function
//! regular expressions). A module without line information is selectable
//! by function only.
//!
//! Owns reading line tables and symbols and the address → unit lookup.
//! Never reads the process's memory, and runs on a thread of its own (a
//! large binary's line table takes a while): never on the thread that
//! copies the rings.

use crate::elf::ElfFile;
use crate::profile::Module;
use regex::Regex;
use std::collections::HashMap;

/// What one experiment can select.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A source line (all the code generated for it).
    Line,
    /// A whole function.
    Function,
}

/// The scope settings, compiled.
#[derive(Debug, Clone)]
pub struct Scope {
    /// Modules whose path matches are in scope; `None`: the main
    /// executable only.
    pub binary: Option<Regex>,
    /// Source files whose path matches are in scope.
    pub source: Regex,
    /// Functions whose (demangled) name matches are in scope.
    pub function: Regex,
}

impl Scope {
    /// Compiles the three settings' regular expressions (an empty binary
    /// scope means the main executable); the error names the setting.
    pub fn compile(binary: &str, source: &str, function: &str) -> Result<Scope, String> {
        let compile = |text: &str, name: &str| {
            Regex::new(text).map_err(|e| format!("{name} is not a valid regular expression: {e}"))
        };
        Ok(Scope {
            binary: if binary.is_empty() {
                None
            } else {
                Some(compile(binary, "causal_binary_scope")?)
            },
            source: compile(source, "causal_source_scope")?,
            function: compile(function, "causal_function_scope")?,
        })
    }
}

/// A selectable unit: a line, or a function.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// `file:line`, or the function's name.
    pub label: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub function: Option<String>,
}

/// The code in scope of one process.
#[derive(Debug, Default)]
pub struct CodeMap {
    /// Sorted, disjoint (start, end, unit) address ranges.
    ranges: Vec<(u64, u64, u32)>,
    pub units: Vec<Unit>,
    /// Modules in scope (paths).
    pub modules: Vec<String>,
}

/// A function of one module: (start, end, demangled name), by file
/// address.
type Function = (u64, u64, String);

/// Demangles a C++ or Rust symbol (Rust's hash suffix dropped); other
/// names as they are.
fn demangle(raw: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(raw) {
        return format!("{d:#}");
    }
    if raw.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(raw) {
            if let Ok(text) = sym.demangle() {
                return text;
            }
        }
    }
    raw.to_string()
}

fn functions_of(elf: &ElfFile) -> Vec<Function> {
    let mut functions: Vec<Function> = elf
        .functions()
        .into_iter()
        .map(|(start, size, name)| (start, start + size, demangle(&name)))
        .collect();
    functions.sort_by_key(|f| (f.0, std::cmp::Reverse(f.1)));
    functions.dedup_by_key(|f| f.0);
    functions
}

fn function_at(functions: &[Function], address: u64) -> Option<&Function> {
    let i = functions.partition_point(|f| f.0 <= address);
    functions[..i].last().filter(|f| address < f.1)
}

/// One row range of a line table: [start, end) at `file:line`.
struct LineRow {
    start: u64,
    end: u64,
    file: String,
    line: u32,
}

/// The line table of `elf` as address ranges (file addresses). Empty
/// without DWARF line information.
fn line_rows(elf: &ElfFile) -> Vec<LineRow> {
    read_line_rows(elf).unwrap_or_default()
}

fn read_line_rows(elf: &ElfFile) -> Result<Vec<LineRow>, gimli::Error> {
    use gimli::{EndianSlice, LittleEndian};
    let load = |id: gimli::SectionId| -> Result<EndianSlice<'_, LittleEndian>, gimli::Error> {
        let data = elf.section(id.name()).map_or(&[][..], |s| s.data);
        Ok(EndianSlice::new(data, LittleEndian))
    };
    let dwarf = gimli::Dwarf::load(load)?;
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        let Some(program) = unit.line_program.clone() else {
            continue;
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
                    let name = match names.get(&file) {
                        Some(n) => n.clone(),
                        None => {
                            let n = file_name(&dwarf, &unit, header, file, &comp_dir);
                            names.insert(file, n.clone());
                            n
                        }
                    };
                    out.push(LineRow {
                        start,
                        end: row.address(),
                        file: name,
                        line,
                    });
                }
            }
            if !row.end_sequence() {
                let line = row.line().map_or(0, |l| l.get() as u32);
                open = Some((row.address(), row.file_index(), line));
            }
        }
    }
    Ok(out)
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

impl CodeMap {
    /// The code in scope among `modules` (`main`: the program's
    /// executable, for the default binary scope).
    pub fn build(modules: &[Module], main: &str, scope: &Scope, mode: Mode) -> CodeMap {
        let mut map = CodeMap::default();
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut seen = std::collections::HashSet::new();
        for m in modules {
            let in_scope = match &scope.binary {
                Some(re) => re.is_match(&m.path),
                None => m.path == main,
            };
            if !in_scope || !seen.insert(m.path.clone()) {
                continue;
            }
            let Some(elf) = ElfFile::read(&m.path) else {
                continue;
            };
            map.modules.push(m.path.clone());
            let functions = functions_of(&elf);
            // Function mode reads the line table only to check a source
            // scope.
            let rows = if mode == Mode::Line || !scope.source.as_str().is_empty() {
                line_rows(&elf)
            } else {
                Vec::new()
            };
            if mode == Mode::Line && !rows.is_empty() {
                map.add_lines(&rows, &functions, m.bias, scope, &mut ids);
            } else {
                // Function mode, or no line table: functions are the units.
                map.add_functions(&rows, &functions, m.bias, scope, &mut ids);
            }
        }
        map.ranges.sort_unstable();
        // Overlapping rows (a line table's duplicates): the first wins.
        let mut kept: Vec<(u64, u64, u32)> = Vec::with_capacity(map.ranges.len());
        for r in map.ranges.drain(..) {
            match kept.last() {
                Some(last) if r.0 < last.1 => {
                    if r.1 > last.1 {
                        kept.push((last.1, r.1, r.2));
                    }
                }
                _ => kept.push(r),
            }
        }
        map.ranges = kept;
        map
    }

    /// Adds `[start, end)` (file addresses, moved by `bias`) to `unit`,
    /// one unit per label.
    fn add(&mut self, ids: &mut HashMap<String, u32>, bias: u64, start: u64, end: u64, unit: Unit) {
        let next = self.units.len() as u32;
        let units = &mut self.units;
        let id = *ids.entry(unit.label.clone()).or_insert_with(|| {
            units.push(unit);
            next
        });
        self.ranges
            .push((start.wrapping_add(bias), end.wrapping_add(bias), id));
    }

    /// Line mode: each row whose file and function are in scope.
    fn add_lines(
        &mut self,
        rows: &[LineRow],
        functions: &[Function],
        bias: u64,
        scope: &Scope,
        ids: &mut HashMap<String, u32>,
    ) {
        for row in rows {
            let f = function_at(functions, row.start);
            let function_ok = f.map_or(scope.function.as_str().is_empty(), |f| {
                scope.function.is_match(&f.2)
            });
            if !function_ok || !scope.source.is_match(&row.file) {
                continue;
            }
            let unit = Unit {
                label: format!("{}:{}", row.file, row.line),
                file: Some(row.file.clone()),
                line: Some(row.line),
                function: f.map(|f| f.2.clone()),
            };
            self.add(ids, bias, row.start, row.end, unit);
        }
    }

    /// Function mode (or a module without line table): each function in
    /// scope; a source scope is checked against the file of the line at
    /// the function's start (without a line table, only an empty source
    /// scope admits a function).
    fn add_functions(
        &mut self,
        rows: &[LineRow],
        functions: &[Function],
        bias: u64,
        scope: &Scope,
        ids: &mut HashMap<String, u32>,
    ) {
        let mut by_start: Vec<&LineRow> = rows.iter().collect();
        by_start.sort_unstable_by_key(|r| r.start);
        for f in functions {
            if !scope.function.is_match(&f.2) {
                continue;
            }
            let at = by_start.partition_point(|r| r.start < f.0);
            let file = by_start
                .get(at)
                .filter(|r| r.start < f.1)
                .map(|r| r.file.clone());
            if !scope.source.as_str().is_empty()
                && !file.as_deref().is_some_and(|p| scope.source.is_match(p))
            {
                continue;
            }
            self.add(ids, bias, f.0, f.1, function_unit(&f.2, file));
        }
    }

    /// The unit at `address`.
    pub fn unit_at(&self, address: u64) -> Option<u32> {
        let i = self.ranges.partition_point(|r| r.0 <= address);
        self.ranges[..i]
            .last()
            .filter(|r| address < r.1)
            .map(|r| r.2)
    }

    /// Every range in scope, adjacent ones merged.
    pub fn scope_ranges(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &(start, end, _) in &self.ranges {
            match out.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => out.push((start, end)),
            }
        }
        out
    }

    /// The ranges of one unit, adjacent ones merged.
    pub fn unit_ranges(&self, unit: u32) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &(start, end, _) in self.ranges.iter().filter(|r| r.2 == unit) {
            match out.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => out.push((start, end)),
            }
        }
        out
    }

    /// The unit `name` names: its label, or a `file:line` whose file is a
    /// path suffix of the unit's (`main.c:42` for `/src/app/main.c:42`).
    pub fn find(&self, name: &str) -> Option<u32> {
        let position = self.units.iter().position(|u| {
            u.label == name
                || (u.line.is_some()
                    && u.label.ends_with(name)
                    && u.label[..u.label.len() - name.len()].ends_with('/'))
        })?;
        Some(position as u32)
    }

    /// Whether nothing is in scope.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

fn function_unit(name: &str, file: Option<String>) -> Unit {
    Unit {
        label: name.to_string(),
        file,
        line: None,
        function: Some(name.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn marker_function(x: u64) -> u64 {
        x.wrapping_mul(2654435761) ^ 7
    }

    fn everything() -> Scope {
        Scope {
            binary: None,
            source: Regex::new("").unwrap(),
            function: Regex::new("").unwrap(),
        }
    }

    #[test]
    fn this_binarys_own_lines_and_functions_are_found() {
        std::hint::black_box(marker_function(3));
        let pid = std::process::id() as i32;
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let main = exe.to_str().unwrap();
        let modules = crate::maps::executable_modules(pid);
        let address = marker_function as *const () as u64;

        let lines = CodeMap::build(&modules, main, &everything(), Mode::Line);
        let unit = &lines.units[lines.unit_at(address).expect("own code in scope") as usize];
        assert!(
            unit.file.as_deref().unwrap().ends_with("causal/code.rs"),
            "{unit:?}"
        );
        assert!(unit
            .function
            .as_deref()
            .unwrap()
            .contains("marker_function"));
        assert!(!lines
            .unit_ranges(lines.unit_at(address).unwrap())
            .is_empty());

        let only = Scope {
            function: Regex::new("marker_function").unwrap(),
            ..everything()
        };
        let functions = CodeMap::build(&modules, main, &only, Mode::Function);
        let id = functions.unit_at(address).unwrap();
        assert!(functions.units[id as usize]
            .label
            .contains("marker_function"));
        assert_eq!(functions.units.len(), 1, "{:?}", functions.units);
        assert_eq!(functions.find(&functions.units[0].label), Some(id));
        let label = lines.units[lines.unit_at(address).unwrap() as usize]
            .label
            .clone();
        let short = label.rsplit('/').next().unwrap();
        assert_eq!(lines.find(short), lines.unit_at(address), "{short}");
        assert_eq!(
            lines.find("ode.rs:1"),
            None,
            "a suffix is a whole file name"
        );
        assert_eq!(functions.scope_ranges().len(), 1);

        let elsewhere = Scope {
            source: Regex::new("no_such_file\\.c$").unwrap(),
            ..everything()
        };
        assert!(CodeMap::build(&modules, main, &elsewhere, Mode::Line).is_empty());
    }
}
