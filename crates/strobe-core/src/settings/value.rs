//! Setting types and values: how a raw text or TOML value becomes a typed
//! value, and how a value is written back.
//!
//! Owns the parsing rules and the "accepted form" every error message
//! quotes. Knows nothing about where a value came from (see `resolve.rs`).

use crate::duration::{parse_duration_ns, DisplayDuration};
use crate::timewindow::TimeWindows;
use std::fmt;
use std::path::PathBuf;

/// The type of a setting, with its constraints.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// `true`/`false` (also `1/0`, `yes/no`, `on/off`).
    Bool,
    /// A whole number within `min..=max`.
    Int { min: i64, max: i64 },
    /// A finite number within `min..=max`.
    Float { min: f64, max: f64 },
    /// Free text.
    Str,
    /// Items separated by `sep` (a TOML array in config files).
    List { sep: char },
    /// A duration: plain seconds or with a unit (`500ms`, `2s`, `1m`).
    Duration,
    /// A file-system path (`~/` expands to the home directory).
    Path,
    /// One of a fixed set of words.
    Enum(&'static [&'static str]),
    /// Time-window specs (`[clock:]delay[:duration[:cycles]] ...`).
    TimeWindows,
    /// A path with `%placeholder%`s (see [`crate::output_path`]).
    PathTemplate,
}

impl Kind {
    /// The type's short name, as `strobe avail` shows it.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Bool => "bool",
            Kind::Int { .. } => "integer",
            Kind::Float { .. } => "float",
            Kind::Str => "string",
            Kind::List { .. } => "list",
            Kind::Duration => "duration",
            Kind::Path => "path",
            Kind::Enum(_) => "enum",
            Kind::TimeWindows => "time windows",
            Kind::PathTemplate => "path template",
        }
    }

    /// What a valid value looks like, for error messages and `--help`.
    pub fn accepted_form(&self) -> String {
        match self {
            Kind::Bool => "true or false (also 1/0, yes/no, on/off)".into(),
            Kind::Int { min, max } => format!("a whole number from {min} to {max}"),
            Kind::Float { min, max } => format!("a number from {min} to {max}"),
            Kind::Str => "any text".into(),
            Kind::List { sep } => format!("items separated by '{sep}'"),
            Kind::Duration => {
                "seconds, or a number with a unit: ns, us, ms, s, m, h (e.g. 500ms, 2s, 1m)".into()
            }
            Kind::Path => "a file or directory path".into(),
            Kind::Enum(choices) => format!("one of: {}", choices.join(", ")),
            Kind::TimeWindows => {
                "space-separated [clock:]delay[:duration[:cycles]] specs, clock one of realtime, \
                 monotonic, process_cputime, thread_cputime (e.g. realtime:10:1:5)"
                    .into()
            }
            Kind::PathTemplate => {
                "a path; placeholders %hostname%, %pid%, %ppid%, %rank%, %env{NAME}%".into()
            }
        }
    }

    /// A short placeholder for `--help` (`<N>`, `<DURATION>`, ...).
    pub fn placeholder(&self) -> &'static str {
        match self {
            Kind::Bool => "BOOL",
            Kind::Int { .. } => "N",
            Kind::Float { .. } => "X",
            Kind::Str => "TEXT",
            Kind::List { .. } => "LIST",
            Kind::Duration => "DURATION",
            Kind::Path => "PATH",
            Kind::Enum(_) => "WORD",
            Kind::TimeWindows => "SPECS",
            Kind::PathTemplate => "TEMPLATE",
        }
    }

    /// Parses a raw text value (from the environment, a flag, or a config
    /// file string). The error is the reason alone; the caller adds where
    /// the value came from.
    pub fn parse(&self, raw: &str) -> Result<Value, String> {
        let t = raw.trim();
        match *self {
            Kind::Bool => match t.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => Ok(Value::Bool(true)),
                "false" | "0" | "no" | "off" => Ok(Value::Bool(false)),
                _ => Err("not a boolean".into()),
            },
            Kind::Int { min, max } => {
                let n: i64 = t
                    .replace('_', "")
                    .parse()
                    .map_err(|_| "not a whole number".to_string())?;
                if n < min || n > max {
                    return Err("out of range".into());
                }
                Ok(Value::Int(n))
            }
            Kind::Float { min, max } => {
                let x: f64 = t.parse().map_err(|_| "not a number".to_string())?;
                if !x.is_finite() {
                    return Err("not a finite number".into());
                }
                if x < min || x > max {
                    return Err("out of range".into());
                }
                Ok(Value::Float(x))
            }
            Kind::Str => Ok(Value::Str(raw.to_string())),
            Kind::List { sep } => Ok(Value::List(
                t.split(sep)
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
            )),
            Kind::Duration => parse_duration_ns(t)
                .map(Value::Duration)
                .map_err(|e| e.reason.to_string()),
            Kind::Path => {
                if t.is_empty() {
                    return Err("the path is empty".into());
                }
                Ok(Value::Path(expand_home(t)))
            }
            Kind::Enum(choices) => choices
                .iter()
                .find(|c| c.eq_ignore_ascii_case(t))
                .map(|c| Value::Enum(c))
                .ok_or_else(|| "not one of the choices".to_string()),
            Kind::TimeWindows => t
                .parse::<TimeWindows>()
                .map(Value::TimeWindows)
                .map_err(|e| e.to_string()),
            Kind::PathTemplate => crate::output_path::validate_template(t)
                .map(|()| Value::Str(t.to_string()))
                .map_err(|e| e.to_string()),
        }
    }

    /// Parses a value from a TOML config file: native TOML types where they
    /// fit (booleans, numbers, arrays), strings for everything.
    pub fn parse_toml(&self, value: &toml::Value) -> Result<Value, String> {
        match (self, value) {
            (_, toml::Value::String(s)) => self.parse(s),
            (Kind::Bool, toml::Value::Boolean(b)) => Ok(Value::Bool(*b)),
            (Kind::Int { .. }, toml::Value::Integer(n)) => self.parse(&n.to_string()),
            (Kind::Float { .. }, toml::Value::Integer(n)) => self.parse(&n.to_string()),
            (Kind::Float { .. }, toml::Value::Float(x)) => self.parse(&x.to_string()),
            (Kind::Duration, toml::Value::Integer(n)) => self.parse(&n.to_string()),
            (Kind::Duration, toml::Value::Float(x)) => self.parse(&x.to_string()),
            (Kind::List { .. }, toml::Value::Array(items)) => items
                .iter()
                .map(|item| match item {
                    toml::Value::String(s) => Ok(s.clone()),
                    other => Err(format!("list items must be strings, found {other}")),
                })
                .collect::<Result<_, _>>()
                .map(Value::List),
            (_, other) => Err(format!("a {} was given", other.type_str())),
        }
    }
}

fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// A typed setting value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A boolean.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A number.
    Float(f64),
    /// Text.
    Str(String),
    /// A list of items.
    List(Vec<String>),
    /// Nanoseconds.
    Duration(u64),
    /// A path.
    Path(PathBuf),
    /// One of an enum's words (as registered).
    Enum(&'static str),
    /// Time-window specs.
    TimeWindows(TimeWindows),
}

impl Value {
    /// The value as an environment variable would spell it, parseable back
    /// by the same [`Kind`]. `sep` is the list separator of the kind.
    pub fn to_raw(&self, kind: &Kind) -> String {
        match self {
            Value::List(items) => {
                let sep = match kind {
                    Kind::List { sep } => *sep,
                    _ => ',',
                };
                items.join(&sep.to_string())
            }
            other => other.to_string(),
        }
    }

    /// The value as a TOML value for a generated config file.
    pub fn to_toml(&self) -> toml::Value {
        match self {
            Value::Bool(b) => toml::Value::Boolean(*b),
            Value::Int(n) => toml::Value::Integer(*n),
            Value::Float(x) => toml::Value::Float(*x),
            Value::List(items) => {
                toml::Value::Array(items.iter().cloned().map(toml::Value::String).collect())
            }
            other => toml::Value::String(other.to_string()),
        }
    }

    /// The value as JSON for `strobe avail --json`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Bool(b) => (*b).into(),
            Value::Int(n) => (*n).into(),
            Value::Float(x) => (*x).into(),
            Value::List(items) => items.clone().into(),
            other => other.to_string().into(),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(n) => write!(f, "{n}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => f.write_str(s),
            Value::List(items) => f.write_str(&items.join(",")),
            Value::Duration(ns) => write!(f, "{}", DisplayDuration(*ns)),
            Value::Path(p) => write!(f, "{}", p.display()),
            Value::Enum(w) => f.write_str(w),
            Value::TimeWindows(w) => write!(f, "{w}"),
        }
    }
}
