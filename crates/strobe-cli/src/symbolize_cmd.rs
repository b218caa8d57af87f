//! `strobe symbolize`: names the unnamed frames of profile databases after
//! the run (a run with `--no-symbols`, debug files installed since, a
//! database copied from another machine).
//!
//! Owns the command's arguments and report lines; the symbolization is
//! `symbolize`'s. It writes frame names into the given databases and
//! nothing else.

use anyhow::Context;
use clap::Args;

/// Arguments of `strobe symbolize`.
#[derive(Debug, Args)]
pub struct SymbolizeArgs {
    /// Databases: files, directories (searched for *.db) or globs. Default: the latest run,
    /// `<output_dir>/latest` (`strobe-output/latest`).
    #[arg(short = 'i', long = "input", num_args = 1..)]
    pub inputs: Vec<String>,
    /// Also read source files and lines (DWARF; slower, more memory).
    #[arg(long)]
    pub lines: bool,
}

/// Runs `strobe symbolize`.
pub fn run(a: SymbolizeArgs) -> anyhow::Result<()> {
    let inputs = if a.inputs.is_empty() {
        vec![crate::run_dir::default_input()?.display().to_string()]
    } else {
        a.inputs
    };
    let files = strobe_db::inputs::expand_inputs(&inputs)?;
    for db in &files {
        let s = crate::symbolize::symbolize_database(db, a.lines)
            .with_context(|| format!("symbolizing {}", db.display()))?;
        eprintln!(
            "{}: named {} of {} unnamed frames{}",
            db.display(),
            s.named,
            s.frames,
            if s.missing_modules > 0 {
                format!(
                    " ({} modules could not be read on this machine)",
                    s.missing_modules
                )
            } else {
                String::new()
            }
        );
    }
    Ok(())
}
