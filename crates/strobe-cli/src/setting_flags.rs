//! One command-line flag per registered setting, generated from the
//! registry, and the resolution of settings for a command.
//!
//! Owns the translation between clap and `strobe_core::settings`. Commands
//! flatten [`SettingFlags`] to accept `--sampling-freq 500` and friends;
//! nothing here is written by hand per setting.

use anyhow::Result;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use std::path::Path;
use strobe_core::settings::{Category, Kind, Settings, SettingsLoader, SETTINGS};

/// The values given for setting flags, in registry order.
#[derive(Debug, Clone, Default)]
pub struct SettingFlags {
    /// (setting name, raw value) for every flag present.
    pub given: Vec<(&'static str, String)>,
}

fn heading(category: Category) -> &'static str {
    match category {
        Category::General => "General settings",
        Category::Output => "Output settings",
        Category::Sampling => "Sampling settings",
        Category::Tracing => "Tracing settings",
        Category::Buffer => "Buffer settings",
        Category::Causal => "Causal profiling settings",
    }
}

/// A setting's default as `--help` shows it.
fn default_text(def: &strobe_core::settings::SettingDef) -> String {
    match def.default {
        strobe_core::settings::DefaultValue::Text("")
        | strobe_core::settings::DefaultValue::Unset => "none".into(),
        strobe_core::settings::DefaultValue::Text(text) => text.into(),
        strobe_core::settings::DefaultValue::Inherit(parent) => {
            format!(
                "that of --{}",
                strobe_core::settings::SETTINGS[parent as usize].flag()
            )
        }
    }
}

impl Args for SettingFlags {
    fn augment_args(mut cmd: Command) -> Command {
        for def in SETTINGS {
            let mut arg = Arg::new(def.name)
                .long(def.flag())
                .value_name(def.kind.placeholder())
                .help(def.description)
                .long_help(format!(
                    "{}\n[{}: {}; default: {}; env: {}]",
                    def.description,
                    def.kind.name(),
                    def.kind.accepted_form(),
                    default_text(def),
                    def.env_var()
                ))
                .help_heading(heading(def.category))
                .action(ArgAction::Set)
                .allow_hyphen_values(false);
            if matches!(def.kind, Kind::Bool) {
                // `--use-sampling` alone means true; `--use-sampling=false` is explicit.
                arg = arg
                    .num_args(0..=1)
                    .require_equals(true)
                    .default_missing_value("true");
            }
            cmd = cmd.arg(arg);
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for SettingFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let given = SETTINGS
            .iter()
            .filter_map(|def| {
                let raw = matches.get_one::<String>(def.name)?;
                Some((def.name, raw.clone()))
            })
            .collect();
        Ok(SettingFlags { given })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// Settings that could not be resolved (strobe exits with 2, like a usage
/// error): every problem, one per line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidSettings(String);

/// Resolves the settings of a command: its flags, this process's
/// environment and the config file. Warnings about unknown `STROBE_*`
/// variables go to stderr; invalid values are an error listing them all.
pub fn load_settings(config: Option<&Path>, flags: &SettingFlags) -> Result<Settings> {
    let mut loader = SettingsLoader::new().with_process_env();
    if let Some(path) = config {
        loader = loader.config_file(path);
    }
    for (name, raw) in &flags.given {
        loader = loader.flag(name, raw);
    }
    let settings = loader.load().map_err(|errors| {
        let n = errors.0.len();
        InvalidSettings(format!(
            "{errors}\n({n} invalid setting{}; `strobe avail --settings` shows every setting and its accepted form)",
            if n == 1 { "" } else { "s" }
        ))
    })?;
    for warning in settings.warnings() {
        eprintln!("strobe: warning: {warning}");
    }
    Ok(settings)
}
