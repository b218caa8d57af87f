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

mod archs;
mod plan;
mod set;
mod toml_file;
mod xml_file;

use std::path::PathBuf;

use crate::expr::{self, Expr};

pub use archs::{archs_from_cpuinfo, machine_archs};
pub use plan::Plan;
pub use set::MetricSet;

/// The environment variable naming a definitions file merged over the
/// built-in set by [`MetricSet::from_env`].
pub const ENV_VAR: &str = "STROBE_METRICS";

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
