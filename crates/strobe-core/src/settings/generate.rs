//! A commented TOML config file written from resolved settings, which
//! `--config` reads back to the same values.
//!
//! Owns the generated text only. Writes nothing itself (the caller decides
//! where the text goes) and reads no file.

use super::registry::{Category, DefaultValue, SETTINGS};
use super::resolve::Settings;
use std::fmt::Write as _;

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
