//! The set of definitions: reading them (built-in, files, the
//! `STROBE_METRICS` file), merging them by name and looking them up.
//!
//! Owns [`MetricSet`], its storage in definition order and its index by
//! name, and the choice between the TOML and XML readers. It must never
//! parse either form itself (that is [`super::toml_file`] and
//! [`super::xml_file`]) nor plan evaluations (that is [`super::plan`]).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;

use super::toml_file::parse_toml_defs;
use super::xml_file::XmlParser;
use super::{line_col, machine_archs, syntax, Counter, Definition, DefsError, Metric, ENV_VAR};

const BUILTIN_TEXT: &str = include_str!("../builtin_metrics.toml");
const BUILTIN_ORIGIN: &str = "builtin_metrics.toml";

/// A set of definitions, in definition order, looked up by name.
#[derive(Debug, Clone, Default)]
pub struct MetricSet {
    defs: Vec<Definition>,
    index: HashMap<String, usize>,
}

impl MetricSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in metrics (IPC, CPI, miss ratios, stall ratios, CPU
    /// utilisation, rates per second) over perf's generic event names.
    pub fn builtin() -> Self {
        Self::parse_toml(BUILTIN_TEXT, BUILTIN_ORIGIN)
            .expect("builtin_metrics.toml is valid (checked by tests/defs.rs)")
    }

    /// Reads a definitions file, TOML or XML (detected by content), with
    /// the XML sections of this machine's architectures
    /// ([`machine_archs`]).
    pub fn load(path: &Path) -> Result<Self, DefsError> {
        let archs = machine_archs();
        let archs: Vec<&str> = archs.iter().map(String::as_str).collect();
        Self::load_with_archs(path, &archs)
    }

    /// Like [`MetricSet::load`], with the XML architecture names given.
    pub fn load_with_archs(path: &Path, archs: &[&str]) -> Result<Self, DefsError> {
        Self::load_inner(path, archs, "check the path")
    }

    fn load_inner(path: &Path, archs: &[&str], hint: &'static str) -> Result<Self, DefsError> {
        let bytes = std::fs::read(path).map_err(|source| DefsError::Io {
            path: path.to_path_buf(),
            source,
            hint,
        })?;
        let origin = path.display().to_string();
        let text = String::from_utf8(bytes).map_err(|e| {
            let at = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(e.as_bytes());
            syntax(
                &origin,
                line_col(&text, at),
                "the file is not UTF-8 text; save it as UTF-8".to_string(),
            )
        })?;
        Self::parse(&text, &origin, archs)
    }

    /// Parses definitions text, XML or TOML detected by content (see the
    /// module documentation).
    pub fn parse(text: &str, origin: &str, archs: &[&str]) -> Result<Self, DefsError> {
        if looks_like_xml(text) {
            Self::parse_xml(text, origin, archs)
        } else {
            Self::parse_toml(text, origin)
        }
    }

    /// Parses the TOML form. `origin` names the text in errors.
    pub fn parse_toml(text: &str, origin: &str) -> Result<Self, DefsError> {
        parse_toml_defs(text, origin)
    }

    /// Parses the seed's XML form, taking `<global>` and the sections
    /// whose tags match one of `archs` (ASCII case ignored).
    pub fn parse_xml(text: &str, origin: &str, archs: &[&str]) -> Result<Self, DefsError> {
        XmlParser::new(text, origin, archs).run()
    }

    /// The built-in set merged with the file named by `STROBE_METRICS`,
    /// if that is set and not empty (an error if it cannot be read).
    pub fn from_env() -> Result<Self, DefsError> {
        Self::from_env_value(std::env::var_os(ENV_VAR).as_deref())
    }

    /// [`MetricSet::from_env`] with the variable's value given (for
    /// tests and callers that read the environment themselves).
    pub fn from_env_value(value: Option<&OsStr>) -> Result<Self, DefsError> {
        let mut set = Self::builtin();
        if let Some(path) = value.filter(|v| !v.is_empty()) {
            let archs = machine_archs();
            let archs: Vec<&str> = archs.iter().map(String::as_str).collect();
            let file = Self::load_inner(
                Path::new(path),
                &archs,
                "fix the path in STROBE_METRICS or unset it",
            )?;
            set.merge(file);
        }
        Ok(set)
    }

    /// Adds one definition; one of the same name is replaced in place.
    pub fn insert(&mut self, def: Definition) {
        match self.index.get(def.name()) {
            Some(&i) => self.defs[i] = def,
            None => {
                self.index.insert(def.name().to_string(), self.defs.len());
                self.defs.push(def);
            }
        }
    }

    /// Merges `other` over this set: its definitions replace those of
    /// the same name (keeping their place), new names are appended.
    pub fn merge(&mut self, other: MetricSet) {
        for def in other.defs {
            self.insert(def);
        }
    }

    /// The definition of `name`.
    pub fn get(&self, name: &str) -> Option<&Definition> {
        self.index.get(name).map(|&i| &self.defs[i])
    }

    /// The derived metric `name`.
    pub fn metric(&self, name: &str) -> Option<&Metric> {
        match self.get(name) {
            Some(Definition::Metric(m)) => Some(m),
            _ => None,
        }
    }

    /// The counter `name`.
    pub fn counter(&self, name: &str) -> Option<&Counter> {
        match self.get(name) {
            Some(Definition::Counter(c)) => Some(c),
            _ => None,
        }
    }

    /// All definitions in order.
    pub fn definitions(&self) -> impl Iterator<Item = &Definition> {
        self.defs.iter()
    }

    /// The derived metrics in order.
    pub fn metrics(&self) -> impl Iterator<Item = &Metric> {
        self.defs.iter().filter_map(|d| match d {
            Definition::Metric(m) => Some(m),
            _ => None,
        })
    }

    /// The counters in order.
    pub fn counters(&self) -> impl Iterator<Item = &Counter> {
        self.defs.iter().filter_map(|d| match d {
            Definition::Counter(c) => Some(c),
            _ => None,
        })
    }

    /// Number of definitions.
    pub fn len(&self) -> usize {
        self.defs.len()
    }

    /// Whether the set holds no definitions.
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }
}

fn looks_like_xml(text: &str) -> bool {
    text.trim_start_matches('\u{feff}')
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| l.starts_with('<'))
}
