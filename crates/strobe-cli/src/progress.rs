//! Progress bars for reading many profile databases.
//!
//! Owns the bar `query`, `summary` and `convert` show on stderr while they
//! check their inputs and while a profile read in place (more than ten
//! databases, see strobe-db's `federation`) is scanned one database after
//! the other: what is being read, databases done out of all, rate and time
//! left. A bar appears only after a second of work and only when stderr is
//! a terminal (indicatif draws nothing elsewhere, so tests and pipes see no
//! bar). It never prints anything else and never changes what a command
//! computes.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long work runs before its bar appears.
const DELAY: Duration = Duration::from_secs(1);

/// A bar that shows itself after [`DELAY`], on a terminal only.
#[derive(Clone)]
struct Bar {
    bar: ProgressBar,
    started: Instant,
}

impl Bar {
    fn new() -> Bar {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {msg} [{bar:30}] {human_pos}/{human_len} databases ({per_sec}, eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        Bar {
            bar,
            started: Instant::now(),
        }
    }

    fn update(&self, what: &str, done: usize, total: usize) {
        if self.bar.is_hidden() && self.started.elapsed() >= DELAY {
            // Draws only when stderr is a terminal.
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        if self.bar.length() != Some(total as u64) {
            self.bar.set_length(total as u64);
            self.bar.reset_eta();
        }
        if self.bar.message() != what {
            self.bar.set_message(what.to_string());
        }
        self.bar.set_position(done as u64);
    }
}

/// Opens the inputs as `strobe_db::Profile::open` does, with a bar over
/// the check of every file when that takes more than a second.
pub fn open_profile<S: AsRef<str>>(inputs: &[S]) -> anyhow::Result<strobe_db::Profile> {
    let bar = Bar::new();
    let p = strobe_db::Profile::open_with_progress(inputs, &|what, done, total| {
        bar.update(what, done, total)
    });
    bar.bar.finish_and_clear();
    Ok(p?)
}

/// A bar over the scans of a profile read in place, until dropped.
pub struct ScanBar<'p> {
    profile: &'p strobe_db::Profile,
    bar: Bar,
}

impl<'p> ScanBar<'p> {
    /// Shows the scans of `profile` (nothing for an attached profile, whose
    /// queries run in SQLite alone) as `what: <table>`.
    pub fn start(profile: &'p strobe_db::Profile, what: &str) -> ScanBar<'p> {
        let bar = Bar::new();
        let b = bar.clone();
        let what = what.to_string();
        profile.set_scan_progress(Some(Box::new(move |object, done, total| {
            b.update(&format!("{what} ({object})"), done, total)
        })));
        ScanBar { profile, bar }
    }
}

impl Drop for ScanBar<'_> {
    fn drop(&mut self) {
        self.profile.set_scan_progress(None);
        self.bar.bar.finish_and_clear();
    }
}
