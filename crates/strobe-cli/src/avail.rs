//! `strobe avail`: what strobe can do here and how it is configured.
//!
//! Owns printing of the settings table, its JSON form and the generated
//! config file. Reads settings through `setting_flags::load_settings`; never
//! changes them.

use crate::setting_flags::{load_settings, SettingFlags};
use anyhow::{bail, Context, Result};
use clap::Args;
use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use std::path::{Path, PathBuf};
use strobe_core::settings::{
    generate_config, Category, DefaultValue, SettingDef, Settings, SETTINGS,
};

/// Options of `strobe avail`.
#[derive(Debug, Args)]
pub struct AvailArgs {
    /// List every setting with its variable, flag, type, default, effective value and source
    /// (the default when nothing else is asked).
    #[arg(long)]
    settings: bool,

    /// List the measurement components: what each records, where it is
    /// stored, and the settings that enable it.
    #[arg(long)]
    components: bool,

    /// List what can be counted (perf hardware, cache and software events, PMU events from
    /// sysfs, rusage and /proc values), each probed: whether it works here, and why not.
    #[arg(long)]
    counters: bool,

    /// List the derived metrics (built in, and from the file in STROBE_METRICS).
    #[arg(long)]
    metrics: bool,

    /// Only this category of settings (general, output, sampling, tracing, buffer).
    #[arg(long, value_name = "C", value_parser = parse_category)]
    category: Option<Category>,

    /// Add each setting's description to the table.
    #[arg(long)]
    describe: bool,

    /// Print JSON instead of a table.
    #[arg(long, conflicts_with = "markdown")]
    json: bool,

    /// Print the settings reference as Markdown (docs/settings.md is this output).
    #[arg(long)]
    markdown: bool,

    /// Write a commented TOML config file with every setting's effective value (to FILE, or
    /// stdout when FILE is omitted or '-'); `--config FILE` reads it back.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    generate_config: Option<PathBuf>,

    /// Overwrite FILE if it exists (with --generate-config).
    #[arg(long, requires = "generate_config")]
    force: bool,

    #[command(flatten)]
    flags: SettingFlags,
}

fn parse_category(name: &str) -> Result<Category, String> {
    Category::from_name(name).ok_or_else(|| {
        let names: Vec<_> = Category::ALL.iter().map(|c| c.name()).collect();
        format!(
            "unknown category '{name}'; use one of: {}",
            names.join(", ")
        )
    })
}

/// Runs `strobe avail`.
pub fn run(args: &AvailArgs, config: Option<&Path>) -> Result<()> {
    let settings = load_settings(config, &args.flags)?;
    if let Some(target) = &args.generate_config {
        return write_config(&settings, target, args.force);
    }
    if args.counters || args.metrics {
        if args.counters {
            crate::avail_counters::print_counters(args.json)?;
        }
        if args.metrics {
            crate::avail_counters::print_metrics(args.json)?;
        }
        return Ok(());
    }
    if args.components {
        print_components(args.json)?;
        if !args.settings {
            return Ok(());
        }
    }
    let defs: Vec<&SettingDef> = SETTINGS
        .iter()
        .filter(|d| args.category.is_none_or(|c| d.category == c))
        .collect();
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&settings_json(&settings, &defs))?
        );
    } else if args.markdown {
        print!("{}", settings_markdown(&defs));
    } else {
        print_table(&settings, &defs, args.describe);
    }
    Ok(())
}

fn write_config(settings: &Settings, target: &Path, force: bool) -> Result<()> {
    let text = generate_config(settings);
    if target == Path::new("-") {
        print!("{text}");
        return Ok(());
    }
    if target.exists() && !force {
        bail!(
            "{} already exists; pass --force to overwrite it or choose another file",
            target.display()
        );
    }
    std::fs::write(target, text).with_context(|| format!("cannot write {}", target.display()))?;
    eprintln!("strobe: wrote {}", target.display());
    Ok(())
}

fn default_text(def: &SettingDef) -> String {
    match def.default {
        DefaultValue::Text("") => "\"\"".into(),
        DefaultValue::Text(t) => t.into(),
        DefaultValue::Inherit(parent) => format!("= {}", SettingDef::of(parent).name),
        DefaultValue::Unset => "(unset)".into(),
    }
}

fn value_text(settings: &Settings, def: &SettingDef) -> String {
    match settings.value(def.key) {
        Some(v) if v.to_string().is_empty() => "\"\"".into(),
        Some(v) => v.to_string(),
        None => "(unset)".into(),
    }
}

fn source_text(settings: &Settings, def: &SettingDef) -> String {
    let own = settings.resolved(def.key).value.is_some();
    match (own, def.default) {
        (false, DefaultValue::Inherit(parent)) => format!(
            "{} (via {})",
            settings.source(def.key).name(),
            SettingDef::of(parent).name
        ),
        _ => settings.source(def.key).name().into(),
    }
}

fn print_table(settings: &Settings, defs: &[&SettingDef], describe: bool) {
    if let Some(file) = settings.config_file() {
        println!("config file: {}", file.display());
    }
    for category in Category::ALL {
        let rows: Vec<_> = defs.iter().filter(|d| d.category == category).collect();
        if rows.is_empty() {
            continue;
        }
        let mut table = Table::new();
        table
            .load_preset(UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Dynamic);
        let mut header = vec![
            "Setting",
            "Variable / flag",
            "Type",
            "Default",
            "Value",
            "Source",
        ];
        if describe {
            header.push("Description");
        }
        table.set_header(header);
        for def in rows {
            let mut row = vec![
                def.name.to_string(),
                format!("{}\n--{}", def.env_var(), def.flag()),
                def.kind.name().to_string(),
                default_text(def),
                value_text(settings, def),
                source_text(settings, def),
            ];
            if describe {
                row.push(def.description.to_string());
            }
            table.add_row(row);
        }
        println!("\n{} settings", category.name());
        println!("{table}");
    }
}

fn settings_json(settings: &Settings, defs: &[&SettingDef]) -> serde_json::Value {
    let items: Vec<serde_json::Value> = defs
        .iter()
        .map(|def| {
            let inherits = match def.default {
                DefaultValue::Inherit(parent) => Some(SettingDef::of(parent).name),
                _ => None,
            };
            let default = match def.default {
                DefaultValue::Text(t) => Some(t),
                _ => None,
            };
            serde_json::json!({
                "name": def.name,
                "category": def.category.name(),
                "env": def.env_var(),
                "flag": format!("--{}", def.flag()),
                "type": def.kind.name(),
                "accepted": def.kind.accepted_form(),
                "default": default,
                "inherits": inherits,
                "value": settings.value(def.key).map(|v| v.to_json()),
                "source": settings.source(def.key).name(),
                "description": def.description,
            })
        })
        .collect();
    serde_json::json!({
        "config_file": settings.config_file().map(|p| p.display().to_string()),
        "settings": items,
    })
}

fn settings_markdown(defs: &[&SettingDef]) -> String {
    let mut out = String::from(
        "# Settings\n\n\
         Every strobe setting, generated by `strobe avail --markdown` (a test keeps this file in \
         step with the code). A setting's value comes from, highest precedence first: its \
         command-line flag, its `STROBE_*` environment variable, the config file (`--config FILE` \
         or `STROBE_CONFIG=FILE`, TOML, keys are the setting names), its default. \
         `strobe avail` shows the effective value of each and where it came from; \
         `strobe avail --generate-config FILE` writes a config file with every setting.\n",
    );
    for category in Category::ALL {
        let rows: Vec<_> = defs.iter().filter(|d| d.category == category).collect();
        if rows.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "\n## {}\n\n| setting | variable / flag | type | default | description |\n|---|---|---|---|---|\n",
            category.name()
        ));
        for def in rows {
            out.push_str(&format!(
                "| `{}` | `{}`<br>`--{}` | {}: {} | `{}` | {} |\n",
                def.name,
                def.env_var(),
                def.flag(),
                def.kind.name(),
                def.kind.accepted_form().replace('|', "\\|"),
                default_text(def),
                def.description
            ));
        }
    }
    out
}

fn print_components(json: bool) -> Result<()> {
    use crate::components::COMPONENTS;
    if json {
        let items: Vec<serde_json::Value> = COMPONENTS
            .iter()
            .map(|c| {
                serde_json::json!({
                    "name": c.name,
                    "records": c.records,
                    "stored_in": c.stored_in,
                    "settings": c.settings,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(());
    }
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(["Component", "Records", "Stored in", "Settings"]);
    for c in COMPONENTS {
        table.add_row([c.name, c.records, c.stored_in, c.settings]);
    }
    println!("{table}");
    Ok(())
}
