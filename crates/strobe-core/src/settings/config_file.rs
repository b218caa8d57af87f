//! The TOML config file: reading it into (key, value) pairs.
//!
//! Owns reading the file format only (what the keys mean is the
//! resolver's). Reads the one file it is given; writes nothing.

use super::error::SettingsError;
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
