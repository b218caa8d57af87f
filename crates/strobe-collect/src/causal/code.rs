//! The code causal profiling can select in one process: which addresses
//! are in scope, and which line (or function) each belongs to.
//!
//! Built from the process's executable mappings (`/proc/PID/maps`), each
//! module's DWARF line table (through `gimli`) and its function symbols,
//! filtered by the scope settings (binary, source file and function
//! regular expressions). A module without line information is selectable
//! by function only.
//!
//! Owns choosing the units in scope and the address → unit lookup; the
//! line tables and symbols are read by `strobe-symbols`. Never reads the
//! process's memory, and runs on a thread of its own (a large binary's
//! line table takes a while): never on the thread that copies the rings.

use crate::profile::Module;
use regex::Regex;
use std::collections::HashMap;
use strobe_symbols::functions::Functions;
use strobe_symbols::lines::{line_rows, LineRow};
use strobe_symbols::ElfFile;

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
            let Some(elf) = ElfFile::open_native(&m.path) else {
                continue;
            };
            map.modules.push(m.path.clone());
            let functions = Functions::of(&elf);
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
        functions: &Functions,
        bias: u64,
        scope: &Scope,
        ids: &mut HashMap<String, u32>,
    ) {
        for row in rows {
            let f = functions.at(row.start);
            let function_ok = f.map_or(scope.function.as_str().is_empty(), |f| {
                scope.function.is_match(&f.name)
            });
            if !function_ok || !scope.source.is_match(&row.file) {
                continue;
            }
            let unit = Unit {
                label: format!("{}:{}", row.file, row.line),
                file: Some(row.file.clone()),
                line: Some(row.line),
                function: f.map(|f| f.name.clone()),
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
        functions: &Functions,
        bias: u64,
        scope: &Scope,
        ids: &mut HashMap<String, u32>,
    ) {
        let mut by_start: Vec<&LineRow> = rows.iter().collect();
        by_start.sort_unstable_by_key(|r| r.start);
        for f in functions.iter() {
            if !scope.function.is_match(&f.name) {
                continue;
            }
            let at = by_start.partition_point(|r| r.start < f.start);
            let file = by_start
                .get(at)
                .filter(|r| r.start < f.end)
                .map(|r| r.file.clone());
            if !scope.source.as_str().is_empty()
                && !file.as_deref().is_some_and(|p| scope.source.is_match(p))
            {
                continue;
            }
            self.add(ids, bias, f.start, f.end, function_unit(&f.name, file));
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
        let modules = strobe_symbols::proc_maps::executable_modules(pid);
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
