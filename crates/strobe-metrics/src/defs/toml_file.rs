//! The TOML form of definitions files (see the module documentation of
//! [`super`]).
//!
//! Owns the serde layout of `[[counter]]` and `[[metric]]` tables and
//! turning them, in file order, into a [`MetricSet`] with errors that
//! point into the file. It must never panic on any input nor read files:
//! it is handed the text.

use std::collections::HashMap;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::{
    check_counter, check_name, line_col, parse_metric_expr, syntax, Counter, Definition, DefsError,
    Metric, MetricSet,
};

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

pub(super) fn parse_toml_defs(text: &str, origin: &str) -> Result<MetricSet, DefsError> {
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
