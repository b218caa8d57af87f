//! Resolution: defaults, config file, environment and flags, in that order
//! of increasing precedence, into one [`Settings`] value.
//!
//! Owns precedence, error collection and unknown-variable warnings. Never
//! reads the process environment unless asked
//! ([`SettingsLoader::with_process_env`]), never prints, never exits.

use super::config_file::read_config;
use super::error::{did_you_mean, InvalidValue, Origin, SettingsError, SettingsErrors};
use super::registry::{DefaultValue, Key, SettingDef, SETTINGS};
use super::suggest::nearest;
use super::value::{Kind, Value};
use super::{INTERNAL_ENV_PREFIX, RESERVED_ENV_VARS};
use crate::timewindow::TimeWindows;
use std::path::{Path, PathBuf};

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The registry default (or no value).
    Default,
    /// The config file.
    Config(PathBuf),
    /// A `STROBE_*` environment variable.
    Env,
    /// A command-line flag.
    Flag,
}

impl Source {
    /// Short name for tables and JSON: `default`, `config`, `env`, `flag`.
    pub fn name(&self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::Config(_) => "config",
            Source::Env => "env",
            Source::Flag => "flag",
        }
    }
}

/// A setting's resolved value and its source.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The value, or `None` when unset or inheriting.
    pub value: Option<Value>,
    /// Where it came from.
    pub source: Source,
}

/// Collects the sources of settings, then resolves them with [`load`](Self::load).
#[derive(Debug, Default, Clone)]
pub struct SettingsLoader {
    env: Vec<(String, String)>,
    flags: Vec<(String, String)>,
    config: Option<PathBuf>,
}

impl SettingsLoader {
    /// A loader with no sources: every setting at its default.
    pub fn new() -> SettingsLoader {
        SettingsLoader::default()
    }

    /// Takes the `STROBE_*` variables of this process's environment.
    /// Variables whose value is not UTF-8 are kept, lossily converted, so
    /// that they are reported as invalid rather than silently ignored.
    pub fn with_process_env(self) -> SettingsLoader {
        let vars = std::env::vars_os().filter_map(|(k, v)| {
            let k = k.into_string().ok()?;
            k.starts_with("STROBE_")
                .then(|| (k, v.to_string_lossy().into_owned()))
        });
        self.env(vars)
    }

    /// Adds environment variables (only `STROBE_*` ones matter).
    pub fn env<K: Into<String>, V: Into<String>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> SettingsLoader {
        self.env
            .extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Adds a command-line value for the setting `name` (underscores or dashes).
    pub fn flag(mut self, name: &str, raw: &str) -> SettingsLoader {
        self.flags.push((name.replace('-', "_"), raw.to_string()));
        self
    }

    /// Uses this config file (overrides `STROBE_CONFIG`).
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> SettingsLoader {
        self.config = Some(path.into());
        self
    }

    /// Resolves every setting. Collects every problem before failing.
    pub fn load(self) -> Result<Settings, SettingsErrors> {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        let mut resolved: Vec<Resolved> = SETTINGS
            .iter()
            .map(|def| Resolved {
                value: default_value(def),
                source: Source::Default,
            })
            .collect();

        let config_file = self.config.clone().or_else(|| {
            self.env
                .iter()
                .rev()
                .find(|(k, v)| k == "STROBE_CONFIG" && !v.trim().is_empty())
                .map(|(_, v)| PathBuf::from(v.trim()))
        });
        if let Some(file) = &config_file {
            match read_config(file) {
                Ok(entries) => {
                    for (key, value) in entries {
                        let Some(def) = SettingDef::by_name(&key) else {
                            let hint = did_you_mean(nearest(&key, SETTINGS.iter().map(|d| d.name)));
                            errors.push(SettingsError::UnknownConfigKey {
                                file: file.clone(),
                                key,
                                hint,
                            });
                            continue;
                        };
                        let origin = Origin::Config {
                            file: file.clone(),
                            key: key.clone(),
                        };
                        match def.kind.parse_toml(&value) {
                            Ok(v) => {
                                resolved[def.key as usize] = Resolved {
                                    value: Some(v),
                                    source: Source::Config(file.clone()),
                                }
                            }
                            Err(reason) => {
                                errors.push(invalid(def, origin, &value.to_string(), reason))
                            }
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }

        let env_names: Vec<String> = SETTINGS.iter().map(SettingDef::env_var).collect();
        for (var, raw) in &self.env {
            if !var.starts_with("STROBE_")
                || RESERVED_ENV_VARS.contains(&var.as_str())
                || var.starts_with(INTERNAL_ENV_PREFIX)
            {
                continue;
            }
            let Some(def) = SettingDef::by_env_var(var) else {
                let hint = did_you_mean(nearest(var, env_names.iter().map(String::as_str)));
                warnings.push(format!(
                    "{var} is not a strobe setting and is ignored{hint}"
                ));
                continue;
            };
            set(
                &mut resolved,
                &mut errors,
                def,
                Origin::Env(var.clone()),
                raw,
                Source::Env,
            );
        }

        for (name, raw) in &self.flags {
            let Some(def) = SettingDef::by_name(name) else {
                let hint = did_you_mean(nearest(name, SETTINGS.iter().map(|d| d.name)));
                errors.push(SettingsError::UnknownSetting {
                    name: name.clone(),
                    hint,
                });
                continue;
            };
            set(
                &mut resolved,
                &mut errors,
                def,
                Origin::Flag(def.flag()),
                raw,
                Source::Flag,
            );
        }

        if !errors.is_empty() {
            return Err(SettingsErrors(errors));
        }
        Ok(Settings {
            resolved,
            config_file,
            warnings,
        })
    }
}

fn default_value(def: &SettingDef) -> Option<Value> {
    match def.default {
        DefaultValue::Text(text) => Some(
            def.kind
                .parse(text)
                .unwrap_or_else(|e| panic!("default of {} does not parse: {e}", def.name)),
        ),
        DefaultValue::Inherit(_) | DefaultValue::Unset => None,
    }
}

fn invalid(def: &SettingDef, origin: Origin, raw: &str, reason: String) -> SettingsError {
    SettingsError::Invalid(Box::new(InvalidValue {
        setting: def.name,
        origin,
        value: raw.to_string(),
        reason,
        expected: def.kind.accepted_form(),
    }))
}

fn set(
    resolved: &mut [Resolved],
    errors: &mut Vec<SettingsError>,
    def: &SettingDef,
    origin: Origin,
    raw: &str,
    source: Source,
) {
    match def.kind.parse(raw) {
        Ok(value) => {
            resolved[def.key as usize] = Resolved {
                value: Some(value),
                source,
            }
        }
        Err(reason) => errors.push(invalid(def, origin, raw, reason)),
    }
}

/// Every setting's effective value. Cheap to clone; immutable.
#[derive(Debug, Clone)]
pub struct Settings {
    resolved: Vec<Resolved>,
    config_file: Option<PathBuf>,
    warnings: Vec<String>,
}

impl Settings {
    /// Every setting at its default.
    pub fn defaults() -> Settings {
        SettingsLoader::new()
            .load()
            .expect("defaults always resolve")
    }

    /// The resolved entry of `key` (its own value, not inherited).
    pub fn resolved(&self, key: Key) -> &Resolved {
        &self.resolved[key as usize]
    }

    /// The effective value: its own, or the one it inherits; `None` if unset.
    pub fn value(&self, key: Key) -> Option<&Value> {
        let r = &self.resolved[key as usize];
        match (&r.value, SettingDef::of(key).default) {
            (Some(v), _) => Some(v),
            (None, DefaultValue::Inherit(parent)) => self.value(parent),
            (None, _) => None,
        }
    }

    /// Where the effective value comes from (following inheritance).
    pub fn source(&self, key: Key) -> &Source {
        let r = &self.resolved[key as usize];
        match (&r.value, SettingDef::of(key).default) {
            (None, DefaultValue::Inherit(parent)) => self.source(parent),
            _ => &r.source,
        }
    }

    /// Every definition with its resolved entry, in registry order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static SettingDef, &Resolved)> {
        SETTINGS.iter().zip(&self.resolved)
    }

    /// The config file that was read, if any.
    pub fn config_file(&self) -> Option<&Path> {
        self.config_file.as_deref()
    }

    /// Warnings about unknown `STROBE_*` variables.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The environment that carries every non-default setting to a child
    /// process (what `strobe sample` hands the profiled program).
    pub fn to_env(&self) -> Vec<(String, String)> {
        self.iter()
            .filter(|(_, r)| r.source != Source::Default)
            .filter_map(|(def, r)| Some((def.env_var(), r.value.as_ref()?.to_raw(&def.kind))))
            .collect()
    }

    fn typed<'a, T>(
        &'a self,
        key: Key,
        wanted: &str,
        get: impl FnOnce(&'a Value) -> Option<T>,
    ) -> T {
        let def = SettingDef::of(key);
        self.value(key).and_then(get).unwrap_or_else(|| {
            panic!(
                "strobe bug: setting {} ({}) read as {wanted}",
                def.name,
                def.kind.name()
            )
        })
    }

    /// A bool setting.
    pub fn bool(&self, key: Key) -> bool {
        self.typed(key, "bool", |v| match v {
            Value::Bool(b) => Some(*b),
            _ => None,
        })
    }

    /// An integer setting.
    pub fn int(&self, key: Key) -> i64 {
        self.typed(key, "integer", |v| match v {
            Value::Int(n) => Some(*n),
            _ => None,
        })
    }

    /// A float setting.
    pub fn float(&self, key: Key) -> f64 {
        self.typed(key, "float", |v| match v {
            Value::Float(x) => Some(*x),
            _ => None,
        })
    }

    /// A duration setting, in nanoseconds.
    pub fn duration_ns(&self, key: Key) -> u64 {
        self.typed(key, "duration", |v| match v {
            Value::Duration(ns) => Some(*ns),
            _ => None,
        })
    }

    /// A text, enum or path-template setting.
    pub fn text(&self, key: Key) -> &str {
        self.typed(key, "text", |v| match v {
            Value::Str(s) => Some(s.as_str()),
            Value::Enum(w) => Some(*w),
            _ => None,
        })
    }

    /// A list setting.
    pub fn list(&self, key: Key) -> &[String] {
        self.typed(key, "list", |v| match v {
            Value::List(items) => Some(items.as_slice()),
            _ => None,
        })
    }

    /// A path setting; `None` when unset.
    pub fn path(&self, key: Key) -> Option<&Path> {
        assert!(
            matches!(SettingDef::of(key).kind, Kind::Path),
            "strobe bug: setting {} read as path",
            SettingDef::of(key).name
        );
        match self.value(key)? {
            Value::Path(p) => Some(p.as_path()),
            _ => None,
        }
    }

    /// A time-windows setting.
    pub fn windows(&self, key: Key) -> &TimeWindows {
        self.typed(key, "time windows", |v| match v {
            Value::TimeWindows(w) => Some(w),
            _ => None,
        })
    }
}
