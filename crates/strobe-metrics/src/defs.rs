//! Metric definition files: counters ("basic metrics") and derived metrics.
//!
//! Owns reading definitions (the built-in set, TOML files, the seed's XML
//! files, the file named by `STROBE_METRICS`), merging them (later
//! definitions override earlier ones by name), and planning: turning the
//! names a user asks for into the distinct catalog event specs to count
//! and compiled expressions that compute each requested value from them.
//! It must never open counters, touch the catalog or print: it hands
//! event spec strings to the caller and evaluates the values it is given.
//! Parsers here must never panic on any input; every error names the
//! file, line and column and says what to change.
//!
//! # Definitions
//!
//! A [`Counter`] is a named event of a PMU *block* (seed 003: "counter
//! name, block name, event id"); [`Counter::spec`] writes it as the event
//! string the catalog reads. A [`Metric`] is derived: an expression (see
//! [`crate::expr`]) over counter names, other derived metrics and plain
//! catalog event names (`cycles`, `` `task-clock` ``, ...). All names share
//! one namespace and are case-sensitive.
//!
//! # TOML form
//!
//! ```toml
//! [[counter]]
//! name = "L1_MISS"        # required
//! block = "cpu"           # optional PMU name; empty: `event` is a catalog event as is
//! event = "0x3c"          # required: a number (33, "0x3c") or an event name ("cycles")
//! description = "..."     # optional (alias: descr)
//! unit = "events"         # optional
//!
//! [[metric]]
//! name = "IPC"                        # required
//! expr = "instructions / cycles"      # required
//! description = "..."                 # optional (alias: descr)
//! unit = "instructions/cycle"         # optional
//! ```
//!
//! Unknown keys are errors. Definitions are taken in file order; a name
//! defined twice in one file is an error.
//!
//! # XML form (seed 003)
//!
//! ```text
//! <gfx8>
//!     <metric name=L1_CYCLES_COUNTER block=L1 event=0 >
//!     <metric name=L1_MISS_COUNTER block=L1 event=33 >
//! </gfx8>
//! <global>
//!     <metric name=L1_MISS_RATIO expr=L1_CYCLES_COUNT/ L1_MISS_COUNTER ></metric>
//! </global>
//! ```
//!
//! * Top-level elements are *sections* named for an architecture (any
//!   tag: `<x86_64>`, `<zen4>`, `<gfx9>`) or `<global>`. `<global>`
//!   always applies; another section applies when its tag equals, ignoring
//!   ASCII case, one of the architecture names in use: those passed to
//!   [`MetricSet::parse_xml`], or for [`MetricSet::load`] those of
//!   [`machine_archs`]. Sections in other architectures are still checked
//!   for errors. Sections do not nest; attributes on a section are ignored.
//! * Inside a section, `<metric ...>` entries: with `event=` (and
//!   optionally `block=`) a counter, with `expr=` a derived metric; `name=`
//!   is required, `descr=`/`description=` and `unit=` are optional, other
//!   attributes are errors. The closing `</metric>` and `/>` are optional.
//! * Attribute values are quoted with `"` or `'` (may span lines; the
//!   entities `&lt; &gt; &amp; &quot; &apos; &#N; &#xN;` are decoded) or
//!   unquoted. An unquoted value runs to the `>` (or `/>`) that ends the
//!   tag, or to whitespace followed by the next `word=` attribute, so
//!   `expr=L1_CYCLES_COUNT/ L1_MISS_COUNTER >` is the expression
//!   `L1_CYCLES_COUNT/ L1_MISS_COUNTER`; trailing whitespace is dropped.
//! * Comments `<!-- -->`, `<?...?>` and `<!...>` declarations are
//!   skipped; text between tags (like the seed's `. . .`) is ignored.
//! * Entries are taken in file order; a name defined again in a later
//!   applicable section replaces the earlier definition; a name defined
//!   twice in one section is an error.
//!
//! A file is read as XML when its first line that is neither blank nor a
//! `#` comment starts with `<`, else as TOML.
//!
//! # Architecture names of this machine
//!
//! [`machine_archs`]: `std::env::consts::ARCH` (`x86_64`, `aarch64`, ...),
//! its common alias (`amd64`, `arm64`), and on x86 the vendor from
//! `/proc/cpuinfo` (`amd`, `intel`) and for AMD the core generation
//! (`zen`, plus `zen1` ... `zen5` from the CPU family and model).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::expr::{self, CompileError, Expr, Program, MAX_DEPTH};

/// The environment variable naming a definitions file merged over the
/// built-in set by [`MetricSet::from_env`].
pub const ENV_VAR: &str = "STROBE_METRICS";

const BUILTIN_TEXT: &str = include_str!("builtin_metrics.toml");
const BUILTIN_ORIGIN: &str = "builtin_metrics.toml";

/// Most expression nodes one planned metric may expand to once the
/// derived metrics it uses are substituted.
pub const MAX_EXPANDED_NODES: usize = 100_000;

/// A counter ("basic metric"): a named event of a PMU block.
#[derive(Debug, Clone, PartialEq)]
pub struct Counter {
    /// The name expressions and requests use.
    pub name: String,
    /// The PMU (`cpu`, `L1`, ...); empty: `event` is a catalog event name.
    pub block: String,
    /// The event: a number (decimal or `0x` hex) or an event name.
    pub event: String,
    /// What it counts.
    pub description: Option<String>,
    /// The unit of its values.
    pub unit: Option<String>,
    /// Where it was defined (`file:line:column`).
    pub defined_at: String,
}

impl Counter {
    /// The event string the catalog understands: `event` as is when the
    /// block is empty, `block/event=N/` for a numeric event, and
    /// `block/event/` for a named event of that PMU.
    pub fn spec(&self) -> String {
        if self.block.is_empty() {
            self.event.clone()
        } else if is_numeric_event(&self.event) {
            format!("{}/event={}/", self.block, self.event)
        } else {
            format!("{}/{}/", self.block, self.event)
        }
    }
}

/// Whether an event is written as a number: decimal digits or `0x` and
/// hex digits.
pub fn is_numeric_event(event: &str) -> bool {
    let hex = event
        .strip_prefix("0x")
        .or_else(|| event.strip_prefix("0X"));
    match hex {
        Some(h) => !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()),
        None => !event.is_empty() && event.chars().all(|c| c.is_ascii_digit()),
    }
}

/// A derived metric: an expression over counters, events and other
/// derived metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// The name requests use.
    pub name: String,
    /// The parsed expression.
    pub expr: Expr,
    /// The expression as written in the file.
    pub expr_text: String,
    /// What it measures.
    pub description: Option<String>,
    /// The unit of its values.
    pub unit: Option<String>,
    /// Where it was defined (`file:line:column`).
    pub defined_at: String,
}

/// One definition: a counter or a derived metric.
#[derive(Debug, Clone, PartialEq)]
pub enum Definition {
    /// A counter ("basic metric").
    Counter(Counter),
    /// A derived metric.
    Metric(Metric),
}

impl Definition {
    /// The defined name.
    pub fn name(&self) -> &str {
        match self {
            Definition::Counter(c) => &c.name,
            Definition::Metric(m) => &m.name,
        }
    }

    /// The description, if any.
    pub fn description(&self) -> Option<&str> {
        match self {
            Definition::Counter(c) => c.description.as_deref(),
            Definition::Metric(m) => m.description.as_deref(),
        }
    }

    /// The unit, if any.
    pub fn unit(&self) -> Option<&str> {
        match self {
            Definition::Counter(c) => c.unit.as_deref(),
            Definition::Metric(m) => m.unit.as_deref(),
        }
    }

    /// Where it was defined (`file:line:column`).
    pub fn defined_at(&self) -> &str {
        match self {
            Definition::Counter(c) => &c.defined_at,
            Definition::Metric(m) => &m.defined_at,
        }
    }
}

/// Why definitions could not be read or a plan could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DefsError {
    /// A definitions file is malformed at a known place.
    #[error("{origin}:{line}:{column}: {message}")]
    Syntax {
        /// The file (or other origin) the text came from.
        origin: String,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// What is wrong and what to do.
        message: String,
    },
    /// A definitions file could not be read.
    #[error("cannot read metric definitions from {}: {source}; {hint}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
        /// What to do about it.
        hint: &'static str,
    },
    /// Derived metrics refer to each other in a cycle.
    #[error(
        "derived metrics refer to each other in a cycle: {} ({}); change one of these \
         expressions so that it no longer refers back",
        cycle.join(" -> "),
        locations.join(", ")
    )]
    Cycle {
        /// The names around the cycle, the first repeated at the end.
        cycle: Vec<String>,
        /// `name at file:line:column` for each metric in the cycle.
        locations: Vec<String>,
    },
    /// A request names nothing usable.
    #[error("cannot plan metric {name:?}: {reason}")]
    BadRequest {
        /// The requested name.
        name: String,
        /// What is wrong and what to do.
        reason: String,
    },
    /// A metric expands to an expression too large or deep to evaluate.
    #[error("metric `{metric}` cannot be evaluated: {reason}")]
    TooComplex {
        /// The requested metric.
        metric: String,
        /// What is wrong and what to do.
        reason: String,
    },
}

impl DefsError {
    /// The `(line, column)` of a syntax error.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            DefsError::Syntax { line, column, .. } => Some((*line, *column)),
            _ => None,
        }
    }
}

// ------------------------------------------------------------- helpers

/// 1-based line and column (in characters) of byte offset `at`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let mut at = at;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

fn syntax(origin: &str, (line, column): (usize, usize), message: String) -> DefsError {
    DefsError::Syntax {
        origin: origin.to_string(),
        line,
        column,
        message,
    }
}

/// Parses the expression of metric `metric`. `verbatim` is where the
/// expression text starts in the file when the file holds it verbatim
/// (then errors point into the file); `None` when escapes or entities
/// make positions differ (then errors point at `fallback`, the value, and
/// say where in the expression).
fn parse_metric_expr(
    origin: &str,
    metric: &str,
    text: &str,
    verbatim: Option<(usize, usize)>,
    fallback: (usize, usize),
) -> Result<Expr, DefsError> {
    match verbatim {
        Some((line, column)) => expr::parse_at(text, line, column).map_err(|e| {
            syntax(
                origin,
                (e.line, e.column),
                format!("in the expression of metric `{metric}`: {}", e.message),
            )
        }),
        None => expr::parse(text).map_err(|e| {
            syntax(
                origin,
                fallback,
                format!(
                    "in the expression of metric `{metric}`, at line {}, column {} of the \
                     expression: {}",
                    e.line, e.column, e.message
                ),
            )
        }),
    }
}

fn check_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("empty name; give the counter or metric a name".to_string());
    }
    if name.trim() != name {
        return Err(format!(
            "name {name:?} has leading or trailing whitespace; remove it"
        ));
    }
    if name.contains('`') || name.contains('\n') {
        return Err(format!(
            "name {name:?} contains '`' or a newline, which expressions cannot refer to; \
             rename it"
        ));
    }
    Ok(())
}

fn check_counter(name: &str, block: &str, event: &str) -> Result<(), String> {
    if event.trim().is_empty() {
        return Err(format!(
            "counter `{name}` has an empty event; give event= a number or an event name"
        ));
    }
    if block.is_empty() && is_numeric_event(event) {
        return Err(format!(
            "counter `{name}` has the numeric event {event} but no block; name the PMU \
             it belongs to, e.g. block=cpu"
        ));
    }
    Ok(())
}

// ------------------------------------------------------------ the set

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

    /// Plans the evaluation of `names`: each is a derived metric, a
    /// defined counter or (anything else) a catalog event name.
    pub fn plan(&self, names: &[&str]) -> Result<Plan, DefsError> {
        let mut plan = Plan {
            counters: Vec::new(),
            outputs: Vec::new(),
            steps: Vec::new(),
            units: Vec::new(),
            descriptions: Vec::new(),
        };
        for &name in names {
            if let Err(reason) = check_name(name) {
                return Err(DefsError::BadRequest {
                    name: name.to_string(),
                    reason,
                });
            }
            let step = match self.get(name) {
                Some(Definition::Metric(m)) => {
                    let mut path = vec![m.name.clone()];
                    let mut budget = MAX_EXPANDED_NODES;
                    let expanded = self.expand(&m.expr, &mut path, 0, &mut budget, name)?;
                    let counters = &mut plan.counters;
                    let program = expanded
                        .compile(|spec| Some(slot_of(counters, spec)))
                        .map_err(|e| DefsError::TooComplex {
                            metric: name.to_string(),
                            reason: match e {
                                CompileError::TooDeep => format!(
                                    "with the derived metrics it uses substituted, its \
                                     expression nests more than {MAX_DEPTH} levels; \
                                     simplify it"
                                ),
                                other => other.to_string(),
                            },
                        })?;
                    Step::Derived(program)
                }
                Some(Definition::Counter(c)) => {
                    Step::Counter(slot_of(&mut plan.counters, &c.spec()))
                }
                None => Step::Counter(slot_of(&mut plan.counters, name)),
            };
            let def = self.get(name);
            plan.outputs.push(name.to_string());
            plan.steps.push(step);
            plan.units
                .push(def.and_then(Definition::unit).map(str::to_string));
            plan.descriptions
                .push(def.and_then(Definition::description).map(str::to_string));
        }
        Ok(plan)
    }

    /// `e` with every derived metric it names substituted by its
    /// (expanded) expression and every counter by its event spec.
    fn expand(
        &self,
        e: &Expr,
        path: &mut Vec<String>,
        depth: usize,
        budget: &mut usize,
        top: &str,
    ) -> Result<Expr, DefsError> {
        if depth > MAX_DEPTH {
            return Err(DefsError::TooComplex {
                metric: top.to_string(),
                reason: format!(
                    "with the derived metrics it uses substituted, its expression nests \
                     more than {MAX_DEPTH} levels; simplify it"
                ),
            });
        }
        if *budget == 0 {
            return Err(DefsError::TooComplex {
                metric: top.to_string(),
                reason: format!(
                    "with the derived metrics it uses substituted, its expression has more \
                     than {MAX_EXPANDED_NODES} terms; simplify it"
                ),
            });
        }
        *budget -= 1;
        Ok(match e {
            Expr::Num(v) => Expr::Num(*v),
            Expr::Name(n) => match self.get(n) {
                Some(Definition::Metric(m)) => {
                    if let Some(at) = path.iter().position(|p| p == &m.name) {
                        let mut cycle: Vec<String> = path[at..].to_vec();
                        let locations = cycle
                            .iter()
                            .map(|c| match self.get(c) {
                                Some(d) => format!("{c} at {}", d.defined_at()),
                                None => c.clone(),
                            })
                            .collect();
                        cycle.push(m.name.clone());
                        return Err(DefsError::Cycle { cycle, locations });
                    }
                    path.push(m.name.clone());
                    let inner = self.expand(&m.expr, path, depth + 1, budget, top)?;
                    path.pop();
                    inner
                }
                Some(Definition::Counter(c)) => Expr::Name(c.spec()),
                None => Expr::Name(n.clone()),
            },
            Expr::Neg(inner) => Expr::Neg(Box::new(self.expand(
                inner,
                path,
                depth + 1,
                budget,
                top,
            )?)),
            Expr::Binary(op, l, r) => Expr::Binary(
                *op,
                Box::new(self.expand(l, path, depth + 1, budget, top)?),
                Box::new(self.expand(r, path, depth + 1, budget, top)?),
            ),
            Expr::Call(f, args) => Expr::Call(
                *f,
                args.iter()
                    .map(|a| self.expand(a, path, depth + 1, budget, top))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }
}

fn slot_of(counters: &mut Vec<String>, spec: &str) -> usize {
    match counters.iter().position(|c| c == spec) {
        Some(i) => i,
        None => {
            counters.push(spec.to_string());
            counters.len() - 1
        }
    }
}

fn looks_like_xml(text: &str) -> bool {
    text.trim_start_matches('\u{feff}')
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| l.starts_with('<'))
}

// ---------------------------------------------------------------- plan

#[derive(Debug, Clone)]
enum Step {
    /// A requested counter: pass its slot through.
    Counter(usize),
    /// A derived metric compiled over the counter slots.
    Derived(Program),
}

/// What to count for a list of requested names and how to compute each
/// from the counts.
#[derive(Debug, Clone)]
pub struct Plan {
    counters: Vec<String>,
    outputs: Vec<String>,
    steps: Vec<Step>,
    units: Vec<Option<String>>,
    descriptions: Vec<Option<String>>,
}

impl Plan {
    /// The distinct catalog event specs to count, in first-use order;
    /// [`Plan::evaluate`] takes their values in this order.
    pub fn counters(&self) -> &[String] {
        &self.counters
    }

    /// The requested names, in request order; [`Plan::evaluate`] writes
    /// their values in this order.
    pub fn outputs(&self) -> &[String] {
        &self.outputs
    }

    /// Number of outputs.
    pub fn len(&self) -> usize {
        self.outputs.len()
    }

    /// Whether nothing was requested.
    pub fn is_empty(&self) -> bool {
        self.outputs.is_empty()
    }

    /// The unit of output `i`, when its definition gives one (plain
    /// catalog events have none here; the catalog knows theirs).
    pub fn unit(&self, i: usize) -> Option<&str> {
        self.units.get(i)?.as_deref()
    }

    /// The description of output `i`, when its definition gives one.
    pub fn description(&self, i: usize) -> Option<&str> {
        self.descriptions.get(i)?.as_deref()
    }

    /// Whether output `i` is a derived metric (else a counter passed
    /// through).
    pub fn is_derived(&self, i: usize) -> bool {
        matches!(self.steps.get(i), Some(Step::Derived(_)))
    }

    /// Computes the outputs from the counter values (`counter_values[j]`
    /// is the value of `counters()[j]`; `None`: not counted). Missing
    /// inputs, division by zero and non-finite results give `None`. Writes
    /// `min(out.len(), outputs().len())` values; never allocates or panics.
    pub fn evaluate(&self, counter_values: &[Option<f64>], out: &mut [Option<f64>]) {
        for (step, o) in self.steps.iter().zip(out.iter_mut()) {
            *o = match step {
                Step::Counter(i) => counter_values
                    .get(*i)
                    .copied()
                    .flatten()
                    .filter(|v| v.is_finite()),
                Step::Derived(p) => p.eval(counter_values),
            };
        }
    }
}

// -------------------------------------------------------- architectures

/// The architecture names of this machine, for choosing XML sections
/// (see the module documentation).
pub fn machine_archs() -> Vec<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    archs_from_cpuinfo(std::env::consts::ARCH, &cpuinfo)
}

/// The architecture names for `arch` (as in `std::env::consts::ARCH`)
/// and the text of `/proc/cpuinfo`.
pub fn archs_from_cpuinfo(arch: &str, cpuinfo: &str) -> Vec<String> {
    let mut out = vec![arch.to_string()];
    match arch {
        "x86_64" => out.push("amd64".to_string()),
        "aarch64" => out.push("arm64".to_string()),
        _ => {}
    }
    let field = |key: &str| -> Option<&str> {
        cpuinfo
            .lines()
            .take_while(|l| !l.trim().is_empty())
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim())
            })
    };
    let number = |key: &str| -> Option<u32> { field(key)?.parse().ok() };
    match field("vendor_id") {
        Some("AuthenticAMD") => {
            out.push("amd".to_string());
            let gen = match (number("cpu family"), number("model")) {
                (Some(0x17), Some(m)) if m >= 0x30 => Some("zen2"),
                (Some(0x17), Some(_)) => Some("zen1"),
                (Some(0x19), Some(m))
                    if (0x10..=0x1f).contains(&m)
                        || (0x60..=0x7f).contains(&m)
                        || (0xa0..=0xaf).contains(&m) =>
                {
                    Some("zen4")
                }
                (Some(0x19), Some(_)) => Some("zen3"),
                (Some(0x1a), Some(_)) => Some("zen5"),
                _ => None,
            };
            if let Some(gen) = gen {
                out.push("zen".to_string());
                out.push(gen.to_string());
            }
        }
        Some("GenuineIntel") => out.push("intel".to_string()),
        _ => {}
    }
    out
}

// ---------------------------------------------------------------- TOML

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlFile {
    #[serde(default)]
    counter: Vec<TomlCounter>,
    #[serde(default)]
    metric: Vec<TomlMetric>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlCounter {
    name: Spanned<String>,
    #[serde(default)]
    block: String,
    event: Spanned<toml::Value>,
    #[serde(default, alias = "descr")]
    description: Option<String>,
    #[serde(default)]
    unit: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlMetric {
    name: Spanned<String>,
    expr: Spanned<String>,
    #[serde(default, alias = "descr")]
    description: Option<String>,
    #[serde(default)]
    unit: Option<String>,
}

/// Where the content of the TOML string at `span` starts, when the file
/// holds `value` verbatim there (no escapes).
fn toml_string_start(text: &str, span: Range<usize>, value: &str) -> Option<usize> {
    let raw = text.get(span)?;
    let (open, close) = if raw.starts_with("\"\"\"") || raw.starts_with("'''") {
        (3, 3)
    } else if raw.starts_with('"') || raw.starts_with('\'') {
        (1, 1)
    } else {
        return None;
    };
    let mut body = raw.get(open..raw.len().checked_sub(close)?)?;
    let mut skip = open;
    if open == 3 {
        if let Some(rest) = body.strip_prefix("\r\n") {
            body = rest;
            skip += 2;
        } else if let Some(rest) = body.strip_prefix('\n') {
            body = rest;
            skip += 1;
        }
    }
    (body == value).then_some(skip)
}

fn parse_toml_defs(text: &str, origin: &str) -> Result<MetricSet, DefsError> {
    let file: TomlFile = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        let message = e.message().trim_end();
        let message = if message.contains("field") || message.contains("invalid type") {
            format!(
                "{message}; a definitions file holds [[counter]] tables (name, event, \
                 optional block, description, unit) and [[metric]] tables (name, expr, \
                 optional description, unit)"
            )
        } else {
            format!("invalid TOML: {message}")
        };
        syntax(origin, line_col(text, at), message)
    })?;
    // Entries in file order.
    let mut entries: Vec<(usize, Result<TomlCounter, TomlMetric>)> = file
        .counter
        .into_iter()
        .map(|c| (c.name.span().start, Ok(c)))
        .chain(
            file.metric
                .into_iter()
                .map(|m| (m.name.span().start, Err(m))),
        )
        .collect();
    entries.sort_by_key(|(at, _)| *at);

    let mut set = MetricSet::new();
    let mut seen: HashMap<String, (usize, usize)> = HashMap::new();
    for (at, entry) in entries {
        let pos = line_col(text, at);
        let defined_at = format!("{origin}:{}:{}", pos.0, pos.1);
        let def = match entry {
            Ok(c) => {
                let name = c.name.get_ref().clone();
                check_name(&name).map_err(|m| syntax(origin, pos, m))?;
                let event_pos = line_col(text, c.event.span().start);
                let event = match c.event.get_ref() {
                    toml::Value::Integer(i) if *i >= 0 => i.to_string(),
                    toml::Value::String(s) => s.clone(),
                    _ => {
                        return Err(syntax(
                            origin,
                            event_pos,
                            format!(
                                "counter `{name}`: event must be a non-negative number \
                                 (like 33) or a string (like \"0x3c\" or \"cycles\")"
                            ),
                        ))
                    }
                };
                check_counter(&name, &c.block, &event).map_err(|m| syntax(origin, event_pos, m))?;
                Definition::Counter(Counter {
                    name,
                    block: c.block,
                    event,
                    description: c.description,
                    unit: c.unit,
                    defined_at,
                })
            }
            Err(m) => {
                let name = m.name.get_ref().clone();
                check_name(&name).map_err(|msg| syntax(origin, pos, msg))?;
                let span = m.expr.span();
                let expr_text = m.expr.get_ref().clone();
                let start = toml_string_start(text, span.clone(), &expr_text)
                    .map(|skip| line_col(text, span.start + skip));
                let expr = parse_metric_expr(
                    origin,
                    &name,
                    &expr_text,
                    start,
                    line_col(text, span.start),
                )?;
                Definition::Metric(Metric {
                    name,
                    expr,
                    expr_text,
                    description: m.description,
                    unit: m.unit,
                    defined_at,
                })
            }
        };
        if let Some(first) = seen.get(def.name()) {
            return Err(syntax(
                origin,
                pos,
                format!(
                    "`{}` is defined twice in this file (first at line {}, column {}); \
                     remove or rename one",
                    def.name(),
                    first.0,
                    first.1
                ),
            ));
        }
        seen.insert(def.name().to_string(), pos);
        set.insert(def);
    }
    Ok(set)
}

// ----------------------------------------------------------------- XML

struct XmlParser<'a> {
    text: &'a str,
    origin: &'a str,
    archs: &'a [&'a str],
    pos: usize,
    line: usize,
    column: usize,
}

struct Section {
    name: String,
    at: (usize, usize),
    applies: bool,
    seen: HashMap<String, (usize, usize)>,
}

struct Attr {
    name: String,
    name_at: (usize, usize),
    value: String,
    /// Where the value text starts, when the file holds it verbatim.
    verbatim_at: Option<(usize, usize)>,
    value_at: (usize, usize),
}

fn is_tag_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')
}

fn is_attr_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

/// Whether `rest` starts with `word=` (spaces allowed before `=`).
fn attr_follows(rest: &str) -> bool {
    let mut chars = rest.chars().peekable();
    match chars.next() {
        Some(c) if is_attr_start(c) => {}
        _ => return false,
    }
    while chars.peek().is_some_and(|&c| is_tag_char(c)) {
        chars.next();
    }
    while chars.peek().is_some_and(|c| c.is_whitespace()) {
        chars.next();
    }
    chars.next() == Some('=')
}

fn decode_entities(raw: &str) -> String {
    if !raw.contains('&') {
        return raw.to_string();
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let decoded = rest.find(';').and_then(|end| {
            let ent = &rest[1..end];
            let c = match ent {
                "lt" => Some('<'),
                "gt" => Some('>'),
                "amp" => Some('&'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => {
                    let num = if let Some(h) =
                        ent.strip_prefix("#x").or_else(|| ent.strip_prefix("#X"))
                    {
                        u32::from_str_radix(h, 16).ok()
                    } else if let Some(d) = ent.strip_prefix('#') {
                        d.parse().ok()
                    } else {
                        None
                    };
                    num.and_then(char::from_u32)
                }
            };
            c.map(|c| (c, end + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

impl<'a> XmlParser<'a> {
    fn new(text: &'a str, origin: &'a str, archs: &'a [&'a str]) -> Self {
        XmlParser {
            text,
            origin,
            archs,
            pos: 0,
            line: 1,
            column: 1,
        }
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn at(&self) -> (usize, usize) {
        (self.line, self.column)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    /// Moves to byte offset `to` (at or after the current one).
    fn advance_to(&mut self, to: usize) {
        while self.pos < to && self.bump().is_some() {}
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
    }

    fn err(&self, at: (usize, usize), message: String) -> DefsError {
        syntax(self.origin, at, message)
    }

    fn found(&self) -> String {
        match self.peek() {
            Some(c) => format!("{c:?}"),
            None => "the end of the file".to_string(),
        }
    }

    /// Skips a construct that starts here and ends with `end`.
    fn skip_past(&mut self, end: &str, what: &str) -> Result<(), DefsError> {
        let start = self.at();
        match self.rest().find(end) {
            Some(i) => {
                self.advance_to(self.pos + i + end.len());
                Ok(())
            }
            None => Err(self.err(start, format!("{what} is never closed; add {end}"))),
        }
    }

    fn tag_name(&mut self) -> Result<String, DefsError> {
        let start = self.pos;
        while self.peek().is_some_and(is_tag_char) {
            self.bump();
        }
        if self.pos == start {
            return Err(self.err(
                self.at(),
                format!(
                    "expected a tag name after '<', found {}; write <metric ...>, \
                     <global> or an architecture section like <x86_64>",
                    self.found()
                ),
            ));
        }
        Ok(self.text[start..self.pos].to_string())
    }

    fn run(mut self) -> Result<MetricSet, DefsError> {
        let mut set = MetricSet::new();
        let mut section: Option<Section> = None;
        let mut metric_open = false;
        loop {
            while self.peek().is_some_and(|c| c != '<') {
                self.bump();
            }
            if self.peek().is_none() {
                break;
            }
            let tag_at = self.at();
            if self.rest().starts_with("<!--") {
                self.skip_past("-->", "comment")?;
                continue;
            }
            if self.rest().starts_with("<?") {
                self.skip_past("?>", "processing instruction")?;
                continue;
            }
            if self.rest().starts_with("<!") {
                self.skip_past(">", "declaration")?;
                continue;
            }
            if self.rest().starts_with("</") {
                self.bump();
                self.bump();
                let name = self.tag_name()?;
                self.skip_ws();
                if self.peek() != Some('>') {
                    return Err(self.err(
                        self.at(),
                        format!("expected '>' to end </{name}>, found {}", self.found()),
                    ));
                }
                self.bump();
                if name == "metric" {
                    if !metric_open {
                        return Err(self.err(
                            tag_at,
                            "</metric> without an open <metric ...>; remove it".to_string(),
                        ));
                    }
                    metric_open = false;
                    continue;
                }
                match &section {
                    Some(s) if s.name == name => {
                        section = None;
                        metric_open = false;
                    }
                    Some(s) => {
                        return Err(self.err(
                            tag_at,
                            format!(
                                "</{name}> does not close the open section <{}> (line {}, \
                                 column {}); write </{}>",
                                s.name, s.at.0, s.at.1, s.name
                            ),
                        ))
                    }
                    None => {
                        return Err(self.err(
                            tag_at,
                            format!("</{name}> without an open <{name}>; remove it"),
                        ))
                    }
                }
                continue;
            }
            // An opening tag.
            self.bump();
            let name = self.tag_name()?;
            let (attrs, self_closing) = self.attributes(&name, tag_at)?;
            if name == "metric" {
                let Some(sec) = section.as_mut() else {
                    return Err(self.err(
                        tag_at,
                        "<metric> outside a section; put it inside <global>...</global> or \
                         an architecture section like <x86_64>...</x86_64>"
                            .to_string(),
                    ));
                };
                let def = self.entry(attrs, tag_at)?;
                if let Some(first) = sec.seen.get(def.name()) {
                    return Err(self.err(
                        tag_at,
                        format!(
                            "`{}` is defined twice in section <{}> (first at line {}, column \
                             {}); remove or rename one",
                            def.name(),
                            sec.name,
                            first.0,
                            first.1
                        ),
                    ));
                }
                sec.seen.insert(def.name().to_string(), tag_at);
                if sec.applies {
                    set.insert(def);
                }
                metric_open = !self_closing;
                continue;
            }
            if let Some(s) = &section {
                return Err(self.err(
                    tag_at,
                    format!(
                        "<{name}> inside section <{}> (line {}, column {}): sections do not \
                         nest and entries are written <metric ...>; close </{}> first",
                        s.name, s.at.0, s.at.1, s.name
                    ),
                ));
            }
            if self_closing {
                continue;
            }
            let applies = name.eq_ignore_ascii_case("global")
                || self.archs.iter().any(|a| a.eq_ignore_ascii_case(&name));
            section = Some(Section {
                name,
                at: tag_at,
                applies,
                seen: HashMap::new(),
            });
            metric_open = false;
        }
        if let Some(s) = section {
            return Err(self.err(
                s.at,
                format!("section <{}> is never closed; add </{}>", s.name, s.name),
            ));
        }
        Ok(set)
    }

    /// Reads attributes up to and including the `>` or `/>` that ends the
    /// tag; returns them and whether the tag closed itself.
    fn attributes(
        &mut self,
        tag: &str,
        tag_at: (usize, usize),
    ) -> Result<(Vec<Attr>, bool), DefsError> {
        let unclosed = |p: &Self| {
            p.err(
                tag_at,
                format!("tag <{tag}> is never closed; add '>' at the end of it"),
            )
        };
        let mut attrs = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => return Err(unclosed(self)),
                Some('>') => {
                    self.bump();
                    return Ok((attrs, false));
                }
                Some('/') if self.rest().starts_with("/>") => {
                    self.bump();
                    self.bump();
                    return Ok((attrs, true));
                }
                Some(c) if is_attr_start(c) => {
                    let name_at = self.at();
                    let start = self.pos;
                    while self.peek().is_some_and(is_tag_char) {
                        self.bump();
                    }
                    let name = self.text[start..self.pos].to_string();
                    self.skip_ws();
                    if self.peek() != Some('=') {
                        return Err(self.err(
                            self.at(),
                            format!(
                                "expected '=' after the attribute name `{name}` in <{tag}>, \
                                 found {}; write {name}=value",
                                self.found()
                            ),
                        ));
                    }
                    self.bump();
                    self.skip_ws();
                    attrs.push(self.value(name, name_at, tag, tag_at)?);
                }
                Some(_) => {
                    return Err(self.err(
                        self.at(),
                        format!(
                            "unexpected {} in <{tag}>; expected an attribute like name=value, \
                             '>' or '/>'",
                            self.found()
                        ),
                    ))
                }
            }
        }
    }

    /// Reads the value of attribute `name` (whose `=` has been read).
    fn value(
        &mut self,
        name: String,
        name_at: (usize, usize),
        tag: &str,
        tag_at: (usize, usize),
    ) -> Result<Attr, DefsError> {
        let attr = name.as_str();
        let value_at = self.at();
        if let Some(q @ ('"' | '\'')) = self.peek() {
            self.bump();
            let start_at = self.at();
            let start = self.pos;
            let Some(len) = self.rest().find(q) else {
                return Err(self.err(
                    value_at,
                    format!("the value of `{attr}` is never closed; add the closing {q}"),
                ));
            };
            self.advance_to(start + len);
            let raw = &self.text[start..self.pos];
            self.bump();
            let value = decode_entities(raw);
            let verbatim = (value == raw).then_some(start_at);
            return Ok(Attr {
                name,
                name_at,
                value,
                verbatim_at: verbatim,
                value_at: start_at,
            });
        }
        let start = self.pos;
        let mut end;
        loop {
            end = self.pos;
            match self.peek() {
                None => {
                    return Err(self.err(
                        tag_at,
                        format!("tag <{tag}> is never closed; add '>' at the end of it"),
                    ))
                }
                Some('>') => break,
                Some('/') if self.rest().starts_with("/>") => break,
                Some('<') => {
                    return Err(self.err(
                        self.at(),
                        format!(
                            "unexpected '<' in the value of `{attr}`: is the '>' that ends \
                             <{tag}> missing?"
                        ),
                    ))
                }
                Some(c) if c.is_whitespace() => {
                    self.skip_ws();
                    let rest = self.rest();
                    if rest.is_empty()
                        || rest.starts_with('>')
                        || rest.starts_with("/>")
                        || attr_follows(rest)
                    {
                        break;
                    }
                }
                Some(_) => {
                    self.bump();
                }
            }
        }
        let raw = &self.text[start..end];
        if raw.is_empty() {
            return Err(self.err(
                value_at,
                format!(
                    "expected a value after `{attr}=`, found {}; write {attr}=value or \
                     {attr}=\"value\"",
                    self.found()
                ),
            ));
        }
        let value = decode_entities(raw);
        let verbatim = (value == raw).then_some(value_at);
        Ok(Attr {
            name,
            name_at,
            value,
            verbatim_at: verbatim,
            value_at,
        })
    }

    fn entry(&self, attrs: Vec<Attr>, tag_at: (usize, usize)) -> Result<Definition, DefsError> {
        const KNOWN: [&str; 7] = [
            "name",
            "block",
            "event",
            "expr",
            "descr",
            "description",
            "unit",
        ];
        let mut got: HashMap<&'static str, Attr> = HashMap::new();
        for a in attrs {
            let Some(key) = KNOWN.iter().find(|k| **k == a.name) else {
                return Err(self.err(
                    a.name_at,
                    format!(
                        "unknown attribute `{}` in <metric>; expected name, block, event, \
                         expr, descr (or description) and unit",
                        a.name
                    ),
                ));
            };
            let key: &'static str = if *key == "descr" { "description" } else { key };
            if got.contains_key(key) {
                return Err(self.err(
                    a.name_at,
                    format!(
                        "attribute `{}` given twice in one <metric>; keep one",
                        a.name
                    ),
                ));
            }
            got.insert(key, a);
        }
        let defined_at = format!("{}:{}:{}", self.origin, tag_at.0, tag_at.1);
        let Some(name_attr) = got.remove("name") else {
            return Err(self.err(
                tag_at,
                "<metric> without name=; add name=SOME_NAME".to_string(),
            ));
        };
        let name = name_attr.value;
        check_name(&name).map_err(|m| self.err(name_attr.value_at, m))?;
        let description = got.remove("description").map(|a| a.value);
        let unit = got.remove("unit").map(|a| a.value);
        let block = got.remove("block");
        let event = got.remove("event");
        if let Some(e) = got.remove("expr") {
            if let Some(extra) = block.as_ref().or(event.as_ref()) {
                return Err(self.err(
                    extra.name_at,
                    format!(
                        "metric `{name}` has both expr= and {}=; a <metric> is either a \
                         counter (block=, event=) or derived (expr=)",
                        extra.name
                    ),
                ));
            }
            let expr = parse_metric_expr(self.origin, &name, &e.value, e.verbatim_at, e.value_at)?;
            return Ok(Definition::Metric(Metric {
                name,
                expr,
                expr_text: e.value.trim().to_string(),
                description,
                unit,
                defined_at,
            }));
        }
        let Some(event) = event else {
            return Err(self.err(
                tag_at,
                format!(
                    "metric `{name}` has neither event= (a counter, with block=) nor expr= \
                     (a derived metric); add one"
                ),
            ));
        };
        let block = block
            .map(|b| b.value.trim().to_string())
            .unwrap_or_default();
        let event_text = event.value.trim().to_string();
        check_counter(&name, &block, &event_text).map_err(|m| self.err(event.value_at, m))?;
        Ok(Definition::Counter(Counter {
            name,
            block,
            event: event_text,
            description,
            unit,
            defined_at,
        }))
    }
}
