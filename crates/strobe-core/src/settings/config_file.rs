//! The TOML config file: reading it, and generating a commented one that
//! reads back to the same settings.
//!
//! Owns the file format only. Reads the one file it is given; writes
//! nothing (the caller decides where generated text goes).

use super::registry::{Category, DefaultValue, SETTINGS};
use super::resolve::{Settings, SettingsError};
use std::fmt::Write as _;
use std::path::Path;

/// Reads a config file into (key, value) pairs in file order.
pub(super) fn read_config(file: &Path) -> Result<Vec<(String, toml::Value)>, SettingsError> {
    let text = std::fs::read_to_string(file).map_err(|source| SettingsError::ConfigRead {
        file: file.to_path_buf(),
        source,
    })?;
    let table: toml::Table =
        text.parse()
            .map_err(|e: toml::de::Error| SettingsError::ConfigSyntax {
                file: file.to_path_buf(),
                message: e.to_string().trim().replace('\n', " "),
            })?;
    Ok(table.into_iter().collect())
}

/// A commented TOML config file holding every setting's effective value,
/// grouped by category. Settings without a value of their own (unset, or
/// inheriting another) are present as comments. `--config` reads the file
/// back to exactly these values.
pub fn generate_config(settings: &Settings) -> String {
    let mut out = String::new();
    out.push_str(
        "# strobe configuration file, written by `strobe avail --generate-config`.\n\
         # Use it with `strobe --config FILE ...` or STROBE_CONFIG=FILE.\n\
         # Precedence: command-line flags > STROBE_* environment variables > this file > defaults.\n",
    );
    for category in Category::ALL {
        let _ = write!(out, "\n# ===== {} =====\n", category.name());
        for (def, resolved) in settings.iter().filter(|(d, _)| d.category == category) {
            let _ = writeln!(out, "\n# {}", def.description);
            let _ = writeln!(
                out,
                "# type: {} ({}); env: {}; flag: --{}",
                def.kind.name(),
                def.kind.accepted_form(),
                def.env_var(),
                def.flag()
            );
            match (&resolved.value, def.default) {
                (Some(value), _) => {
                    let _ = writeln!(out, "{} = {}", def.name, value.to_toml());
                }
                (None, DefaultValue::Inherit(parent)) => {
                    let _ = writeln!(
                        out,
                        "# {} = ...  (unset: inherits {})",
                        def.name, SETTINGS[parent as usize].name
                    );
                }
                (None, _) => {
                    let _ = writeln!(out, "# {} = ...  (unset)", def.name);
                }
            }
        }
    }
    out
}
