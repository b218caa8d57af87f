//! Run directories: where one `strobe sample` run puts its databases, and
//! which run is the latest.
//!
//! Owns the layout `<output_dir>/<command>-<YYYYmmdd>-<HHMMSS>[-N]/` (the
//! collector writes `<host>/<pid>.db` inside it) and the `<output_dir>/latest`
//! symlink naming the newest run, plus finding that run for commands given
//! no `-i` (the `output_dir` setting: `STROBE_OUTPUT_DIR`, the config file
//! named by `STROBE_CONFIG`, default `strobe-output`, relative to the current
//! directory).
//!
//! It must never reuse, empty or remove a run directory: each run gets a
//! directory of its own, created atomically (`mkdir`, never `mkdir -p` on the
//! run itself), and the only thing it ever replaces is the `latest` symlink,
//! atomically (a new symlink renamed over the old one), so a reader never
//! sees `latest` missing or half-written. It never writes inside a run.
//!
//! Self-contained (std, libc, anyhow, strobe-core) so that its tests can
//! include it directly.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use strobe_core::escape::for_terminal;

use anyhow::{bail, Context};

/// Name of the symlink in the output directory that points at the newest run.
pub(crate) const LATEST: &str = "latest";

/// Default of the `output_dir` setting, used when settings cannot say.
pub(crate) const DEFAULT_OUTPUT_DIR: &str = "strobe-output";

/// Most runs of one command started within the same second.
const MAX_SAME_SECOND: u32 = 10_000;

/// Creates a new run directory for `command` in `output_dir` (created if
/// missing) and points `<output_dir>/latest` at it; returns the run
/// directory (`output_dir` joined with its name).
///
/// The name is the command's file name reduced to `[A-Za-z0-9._-]` (other
/// characters become `_`; leading dots and dashes are dropped; at most 64
/// characters; `run` if nothing is left), then the local date and time:
/// `app-20250102-030405`. When that exists (two runs in the same second) it
/// takes `app-20250102-030405-2`, `-3`, …: each candidate is made with
/// `mkdir(2)`, which fails if the name exists, so concurrent runs never
/// share a directory.
///
/// `latest` is a relative symlink (`latest -> app-20250102-030405`), so the
/// output directory can be moved or copied as a whole. Failing to update it
/// (say `latest` is a real directory) is a warning on stderr, not an error:
/// the run itself can go on.
pub(crate) fn create(output_dir: &Path, command: &str) -> anyhow::Result<PathBuf> {
    create_at(output_dir, command, SystemTime::now())
}

/// [`create`] with the clock given (tests pin it to provoke collisions).
pub(crate) fn create_at(
    output_dir: &Path,
    command: &str,
    now: SystemTime,
) -> anyhow::Result<PathBuf> {
    make_output_dir(output_dir)?;
    let base = format!("{}-{}", command_name(command), local_stamp(now));
    for n in 1..=MAX_SAME_SECOND {
        let name = if n == 1 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let run = output_dir.join(&name);
        match std::fs::create_dir(&run) {
            Ok(()) => {
                if let Err(e) = point_latest(output_dir, &name) {
                    eprintln!("strobe: warning: {}", for_terminal(&format!("{e:#}")));
                }
                return Ok(run);
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "cannot create the run directory {} (check that {} is writable)",
                        run.display(),
                        output_dir.display()
                    )
                })
            }
        }
    }
    bail!(
        "{}: {MAX_SAME_SECOND} runs named {base} already exist; remove some or choose another output_dir",
        output_dir.display()
    )
}

/// Creates `output_dir` (and its parents) when missing.
fn make_output_dir(output_dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(output_dir).with_context(|| {
        format!(
            "cannot create the output directory {} (check the output_dir setting and that its parent is writable)",
            output_dir.display()
        )
    })
}

/// The run directory one MPI job's ranks share: `<command>-job-<job>` in
/// `output_dir` (the job id reduced like a command name), made by the
/// first rank to get there and joined by the others; rank 0 points
/// `latest` at it. Each rank's database has its own name (pid, host), so
/// ranks never write the same file. A directory left by an earlier job
/// with the same id is joined too (launchers reuse ids only across
/// reboots or pid wrap-around).
pub(crate) fn join_job(
    output_dir: &Path,
    command: &str,
    job: &str,
    points_latest: bool,
) -> anyhow::Result<PathBuf> {
    make_output_dir(output_dir)?;
    let name = format!("{}-job-{}", command_name(command), command_name(job));
    let run = output_dir.join(&name);
    match std::fs::create_dir(&run) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists && run.is_dir() => {}
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                "cannot create the run directory {} of MPI job {job} (check that {} is writable)",
                run.display(),
                output_dir.display()
            )
            })
        }
    }
    if points_latest {
        if let Err(e) = point_latest(output_dir, &name) {
            eprintln!("strobe: warning: {}", for_terminal(&format!("{e:#}")));
        }
    }
    Ok(run)
}

/// The run `<output_dir>/latest` points at (`output_dir` joined with the
/// link's target), if the link exists and leads to a directory. A `latest`
/// that is itself a directory (made by hand) is taken as the run.
pub(crate) fn latest(output_dir: &Path) -> Option<PathBuf> {
    let link = output_dir.join(LATEST);
    let run = match std::fs::read_link(&link) {
        Ok(target) => output_dir.join(target),
        Err(_) => link,
    };
    run.is_dir().then_some(run)
}

/// The output directory named by the `output_dir` setting, from this
/// process's `STROBE_*` variables and the config file `STROBE_CONFIG` names
/// (the `--config` flag is not seen by `summary`, `convert` and `query`),
/// default `strobe-output`; relative paths are relative to the current
/// directory, as for `strobe sample`.
pub(crate) fn configured_output_dir() -> anyhow::Result<PathBuf> {
    use strobe_core::settings::{Key, SettingsLoader};
    let settings = SettingsLoader::new()
        .with_process_env()
        .load()
        .map_err(|errors| {
            anyhow::anyhow!(
                "{errors}\n(no -i given: the output_dir setting is needed to find the latest run; fix the settings above or pass -i FILE)"
            )
        })?;
    Ok(settings
        .path(Key::OutputDir)
        .unwrap_or(Path::new(DEFAULT_OUTPUT_DIR))
        .to_path_buf())
}

/// The input of a command given no `-i`: the latest run of the configured
/// output directory (see [`configured_output_dir`]). Says on stderr which
/// run it reads; fails with what was looked for and what to do when there
/// is none.
pub(crate) fn default_input() -> anyhow::Result<PathBuf> {
    let dir = configured_output_dir()?;
    let link = dir.join(LATEST);
    if let Some(run) = latest(&dir) {
        eprintln!(
            "strobe: no -i given: reading the latest run, {}",
            run.display()
        );
        return Ok(run);
    }
    match std::fs::read_link(&link) {
        Ok(target) => bail!(
            "no -i given and {} points to {}, which no longer exists: run `strobe sample -- CMD` again or pass -i FILE",
            link.display(),
            target.display()
        ),
        Err(_) => bail!(
            "no -i given and {} does not exist: run `strobe sample -- CMD` first or pass -i FILE",
            link.display()
        ),
    }
}

/// The command's file name reduced to `[A-Za-z0-9._-]` (see [`create`]).
pub(crate) fn command_name(command: &str) -> String {
    let base = Path::new(command)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let clean: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let clean: String = clean
        .trim_start_matches(['.', '-'])
        .chars()
        .take(64)
        .collect();
    if clean.is_empty() {
        "run".to_string()
    } else {
        clean
    }
}

/// `YYYYmmdd-HHMMSS` in local time (UTC when the local time zone cannot be
/// determined).
fn local_stamp(now: SystemTime) -> String {
    let secs = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .try_into()
        .unwrap_or(libc::time_t::MAX);
    // SAFETY: `libc::tm` is integers plus (on glibc) a `tm_zone` pointer, for
    // all of which zero is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals of the right types;
    // localtime_r is the thread-safe variant and writes only into `tm`.
    let mut ok = !unsafe { libc::localtime_r(&secs, &mut tm) }.is_null();
    if !ok {
        // SAFETY: as above, for gmtime_r.
        ok = !unsafe { libc::gmtime_r(&secs, &mut tm) }.is_null();
    }
    if !ok {
        return format!("{secs}");
    }
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// Points `<output_dir>/latest` at `name` atomically: a new relative
/// symlink under a temporary name, renamed over `latest`.
fn point_latest(output_dir: &Path, name: &str) -> anyhow::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let link = output_dir.join(LATEST);
    for _ in 0..100 {
        let tmp = output_dir.join(format!(
            ".{LATEST}.{}.{}.tmp",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        match std::os::unix::fs::symlink(name, &tmp) {
            Ok(()) => {}
            // Left by a killed process that had our pid: take another name.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("cannot point {} at {name}", link.display()))
            }
        }
        return std::fs::rename(&tmp, &link).or_else(|e| {
            let _ = std::fs::remove_file(&tmp);
            Err(e).with_context(|| {
                format!(
                    "cannot point {} at {name} (it should be a symlink; remove it if it is anything else)",
                    link.display()
                )
            })
        });
    }
    bail!(
        "cannot point {} at {name}: no free temporary name in {}",
        link.display(),
        output_dir.display()
    )
}

/// The program name of `pid` (its first argument), for the run directory.
pub fn program_name(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .and_then(|b| {
            b.split(|&c| c == 0)
                .next()
                .map(|a| String::from_utf8_lossy(a).into_owned())
        })
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| format!("pid{pid}"))
}
