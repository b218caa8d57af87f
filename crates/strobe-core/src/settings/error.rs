//! What can go wrong while resolving settings: a rejected value and where
//! it was written, an unknown key or name, an unreadable or malformed
//! config file.
//!
//! Owns the error types and their messages only. Never decides what is an
//! error (the resolver and the config-file reader do) and never prints.

use std::fmt;
use std::path::PathBuf;

/// Where a bad value was written, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// An environment variable.
    Env(String),
    /// A command-line flag (without dashes).
    Flag(String),
    /// A key in a config file.
    Config {
        /// The file.
        file: PathBuf,
        /// The key.
        key: String,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Env(var) => write!(f, "environment variable {var}"),
            Origin::Flag(flag) => write!(f, "flag --{flag}"),
            Origin::Config { file, key } => write!(f, "'{key}' in config file {}", file.display()),
        }
    }
}

/// A value that its setting's type rejects, and where it was written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid value '{value}' for {origin}: {reason}; expected {expected}")]
pub struct InvalidValue {
    /// Canonical setting name.
    pub setting: &'static str,
    /// Where the value was written.
    pub origin: Origin,
    /// The value as written.
    pub value: String,
    /// Why it was rejected.
    pub reason: String,
    /// The accepted form.
    pub expected: String,
}

/// One problem found while resolving settings.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A value that its setting's type rejects.
    #[error(transparent)]
    Invalid(Box<InvalidValue>),
    /// A config-file key that names no setting.
    #[error("unknown setting '{key}' in config file {}{hint}", file.display())]
    UnknownConfigKey {
        /// The file.
        file: PathBuf,
        /// The key.
        key: String,
        /// " (did you mean …?)" or empty.
        hint: String,
    },
    /// A setting name given programmatically or as a flag that does not exist.
    #[error("unknown setting '{name}'{hint}; `strobe avail --settings` lists them all")]
    UnknownSetting {
        /// The name.
        name: String,
        /// " (did you mean …?)" or empty.
        hint: String,
    },
    /// The config file could not be read.
    #[error("cannot read config file {}: {source}; check the path given by --config or STROBE_CONFIG", file.display())]
    ConfigRead {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The config file is not TOML.
    #[error("config file {} is not valid TOML: {message}", file.display())]
    ConfigSyntax {
        /// The file.
        file: PathBuf,
        /// The parser's message (with line and column).
        message: String,
    },
}

/// Every problem found while resolving settings (at least one).
#[derive(Debug)]
pub struct SettingsErrors(pub Vec<SettingsError>);

impl fmt::Display for SettingsErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SettingsErrors {}

pub(super) fn did_you_mean(suggestion: Option<&str>) -> String {
    suggestion.map_or(String::new(), |s| format!(" (did you mean {s}?)"))
}
