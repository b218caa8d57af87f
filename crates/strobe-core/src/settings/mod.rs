//! The settings registry: every knob of strobe, its sources and its value.
//!
//! A setting has a name, an environment variable (`STROBE_<NAME>`), a CLI
//! flag (`--<name-with-dashes>`), a type, a default, a description and a
//! category (see [`registry`]). Its value comes from, highest first: a CLI
//! flag, the environment, the config file (`--config FILE` or
//! `STROBE_CONFIG`, TOML), the default.
//!
//! This module owns definitions, parsing and precedence. It never reads
//! the process environment on its own initiative (callers hand it the
//! variables), never prints, and never exits.

mod config_file;
mod error;
mod generate;
pub mod registry;
mod resolve;
mod suggest;
pub mod value;

pub use error::{Origin, SettingsError, SettingsErrors};
pub use generate::generate_config;
pub use registry::{Category, DefaultValue, Key, SettingDef, SETTINGS};
pub use resolve::{Resolved, Settings, SettingsLoader, Source};
pub use suggest::nearest;
pub use value::{Kind, Value};

/// Environment variables that start with `STROBE_` but are not settings:
/// the config file, the MPI rank, world size and job of a process started
/// without an MPI launcher, the strobe executable, the metric definition
/// file and the PMU slot override (both read by strobe-metrics, also
/// inside programs that embed it), and the clock skew the MPI clock
/// comparison adds (a test knob, docs/mpi.md).
pub const RESERVED_ENV_VARS: [&str; 8] = [
    "STROBE_CONFIG",
    "STROBE_RANK",
    "STROBE_WORLD_SIZE",
    "STROBE_JOB",
    "STROBE_MPI_CLOCK_SKEW_NS",
    "STROBE_BIN",
    "STROBE_METRICS",
    "STROBE_PMU_SLOTS",
];

/// Prefix of variables strobe sets for its own processes (not settings).
pub const INTERNAL_ENV_PREFIX: &str = "STROBE_INTERNAL_";
