//! Start-up in two stages; this is stage 1, and the segments of a process
//! and of a forked child.
//!
//! * Stage 1 runs as this library's constructor (`.init_array`), before the
//!   program's `main`: it decodes the launcher's configuration, creates the
//!   process's segment and hands it to the collector. It starts no thread
//!   and every descriptor it opens is closed before it returns.
//! * Stage 2 (`stage2`) runs from the `__libc_start_main` wrapper, just
//!   before the program's `main`: the sampler, the main thread, threads
//!   other libraries started, and the tracing subscriber.
//!
//! Owns what stage 1 decides (whether and how this process is profiled,
//! read by stage 2 and by the tracing subscriber), creating and describing
//! segments, and saying why a process is not profiled. Never runs in a
//! signal handler.

use std::sync::OnceLock;
use strobe_core::clock::{now_ns, tsc_pair};
use strobe_wire::config::{RuntimeConfig, COLLECTOR_ENV, CONFIG_ENV};
use strobe_wire::record::{info, InfoWriter};
use strobe_wire::segment::Segment;

/// What stage 1 prepared for stage 2.
struct Prepared {
    config: RuntimeConfig,
    segment: &'static Segment,
}

static PREPARED: OnceLock<Option<Prepared>> = OnceLock::new();
/// The arguments the image started with (a forked child reports them
/// too).
static ARGUMENTS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();

/// Stage 1: this library's constructor. **Runs before `main`**: no thread is
/// started here.
extern "C" fn stage1(
    argc: libc::c_int,
    argv: *const *const libc::c_char,
    _envp: *const *const libc::c_char,
) {
    let _ = std::panic::catch_unwind(|| {
        crate::threads::init_exit_key();
        PREPARED.get_or_init(|| prepare(argc, argv));
    });
}

#[used]
#[link_section = ".init_array"]
static STAGE1: extern "C" fn(libc::c_int, *const *const libc::c_char, *const *const libc::c_char) =
    stage1;

/// The arguments of this process.
fn arguments(argc: libc::c_int, argv: *const *const libc::c_char) -> Vec<Vec<u8>> {
    if argv.is_null() {
        return Vec::new();
    }
    (0..argc.max(0) as usize)
        .filter_map(|i| {
            // SAFETY: glibc passes argc valid pointers in argv.
            let p = unsafe { *argv.add(i) };
            // SAFETY: each argument is NUL-terminated.
            (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes().to_vec())
        })
        .collect()
}

/// Decodes the configuration and hands a fresh segment to the collector.
fn prepare(argc: libc::c_int, argv: *const *const libc::c_char) -> Option<Prepared> {
    if std::env::var_os(CONFIG_ENV).is_none() && std::env::var_os(COLLECTOR_ENV).is_none() {
        if !crate::self_start::wanted() {
            return None;
        }
        // Preloaded without `strobe sample`: start a collector.
        if let Err(e) = crate::self_start::start_collector() {
            profiling_off(&e.to_string());
            return None;
        }
    }
    let config = match std::env::var(CONFIG_ENV) {
        Ok(text) => match RuntimeConfig::decode(&text) {
            Ok(c) => c,
            Err(e) => {
                profiling_off(&e.to_string());
                return None;
            }
        },
        Err(_) => {
            profiling_off(
                "it was not started by `strobe sample` (no launcher configuration in the \
                 environment)",
            );
            return None;
        }
    };
    crate::log::set_verbosity(config.verbose as i64);
    let segment = create_segment(&config, ARGUMENTS.get_or_init(|| arguments(argc, argv)))?;
    Some(Prepared { config, segment })
}

/// Creates this process's segment, describes the process in it and hands
/// it to the collector. `None` (and a message) when that fails.
pub fn create_segment(config: &RuntimeConfig, args: &[Vec<u8>]) -> Option<&'static Segment> {
    let collector = collector_address()?;
    // SAFETY: getpid/getppid have no preconditions.
    let (pid, ppid) = unsafe { (libc::getpid(), libc::getppid()) };
    let (segment, fd) = match Segment::create(config.layout, pid, ppid, now_ns(), tsc_pair()) {
        Ok(s) => s,
        Err(e) => {
            profiling_off(&format!("cannot create its shared memory: {e}"));
            return None;
        }
    };
    describe(&segment, config, args);
    if let Err(e) = crate::connect::hand_over_to(&collector, &fd) {
        profiling_off(&format!("cannot reach the collector ({e})"));
        return None;
    }
    drop(fd);
    Some(segment.leak())
}

/// Says why this process is not profiled.
fn profiling_off(why: &str) {
    crate::log::emit(&format!("profiling is off for this process: {why}"));
}

/// The collector's address, from the launcher's environment. `None` (and
/// a message) without one.
fn collector_address() -> Option<crate::connect::Address> {
    let Ok(name) = std::env::var(COLLECTOR_ENV) else {
        profiling_off("no collector to send data to");
        return None;
    };
    match strobe_wire::socket::abstract_address(&name) {
        Ok(a) => Some(a),
        Err(e) => {
            profiling_off(&format!("cannot reach the collector ({e})"));
            None
        }
    }
}

/// What describes every process of this image whatever its pid, taken
/// once, at start-up: the executable, the arguments and the recorded
/// environment as encoded entries, and the identity the output name is
/// made from (its environment cut to the variables the template names). A
/// forked child is described by its parent's (its environment as the
/// parent started), and so reads no environment and allocates little:
/// every page a child writes is a copy.
struct ImageDescription {
    entries: Vec<u8>,
    identity: strobe_core::output_path::ProcessIdentity,
}

static IMAGE: OnceLock<ImageDescription> = OnceLock::new();

fn image_description(config: &RuntimeConfig, args: &[Vec<u8>]) -> &'static ImageDescription {
    IMAGE.get_or_init(|| {
        let mut w = InfoWriter::default();
        let exe = strobe_core::modules::own_executable();
        if !exe.is_empty() {
            w.put(info::EXE, exe.as_bytes());
        }
        for a in args {
            w.put(info::ARG, a);
        }
        for (k, v) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if recorded_variable(&k) {
                w.put(info::ENV, format!("{k}={}", v.to_string_lossy()).as_bytes());
            }
        }
        let mut identity = strobe_core::output_path::ProcessIdentity::current();
        identity
            .env
            .retain(|name, _| config.output_file.contains(name.as_str()));
        ImageDescription {
            entries: w.finish(),
            identity,
        }
    })
}

/// Whether the environment variable `name` is recorded with the process:
/// strobe's settings (not its internal variables), the preload list, the
/// OpenMP thread count and XPTI's variables.
fn recorded_variable(name: &str) -> bool {
    (name.starts_with("STROBE_") && !name.starts_with("STROBE_INTERNAL_"))
        || name == "LD_PRELOAD"
        || name == "OMP_NUM_THREADS"
        || name.starts_with("XPTI_")
}

/// The process information the collector records.
fn describe_process(config: &RuntimeConfig, args: &[Vec<u8>]) -> Vec<u8> {
    let image = image_description(config, args);
    let mut w = InfoWriter::continuing(image.entries.clone());
    let mut id = image.identity.clone();
    id.pid = std::process::id();
    // SAFETY: getppid has no preconditions.
    id.ppid = unsafe { libc::getppid() } as u32;
    match strobe_core::output_path::expand_template(&config.output_file, &id) {
        Ok(name) => {
            w.put(info::DB_NAME, name.as_os_str().as_encoded_bytes());
        }
        Err(e) => {
            w.put(info::WARNING, format!("output_file: {e}").as_bytes());
        }
    }
    let start = strobe_core::clock::ClockSnapshot::take();
    w.put(info::PROCESS_START_UNIX, &start.realtime_ns.to_le_bytes());
    w.finish()
}

/// What stage 1 prepared for stage 2: the configuration and the segment
/// handed to the collector. `None` before stage 1 ran, or when this
/// process is not profiled.
pub fn prepared() -> Option<(&'static RuntimeConfig, &'static Segment)> {
    match PREPARED.get() {
        Some(Some(prepared)) => Some((&prepared.config, prepared.segment)),
        _ => None,
    }
}

/// Whether this process records tracing notifications, or may still (its
/// constructor has not run yet): `false` once start-up decided that
/// profiling or tracing is off here.
pub fn collects_tracing() -> bool {
    if let Some(rt) = crate::state::current() {
        return rt.config.tracing;
    }
    match PREPARED.get() {
        None => true,
        Some(None) => false,
        Some(Some(prepared)) => prepared.config.tracing,
    }
}

/// A forked child's segment, describing it as its image was described:
/// with the runtime's own sampler (`own_sampler`), in private memory, with
/// the collector's address to hand it to later; without, shared and
/// handed over at once. `None` (and a message) when that fails.
pub fn create_child_segment(
    config: &RuntimeConfig,
    own_sampler: bool,
) -> Option<(&'static Segment, Option<crate::connect::Address>)> {
    let args: &[Vec<u8>] = ARGUMENTS.get().map_or(&[], Vec::as_slice);
    if own_sampler {
        create_private_segment(config, args).map(|(segment, collector)| (segment, Some(collector)))
    } else {
        create_segment(config, args).map(|segment| (segment, None))
    }
}

/// A forked child's segment in private memory, describing the process,
/// and the collector's address to hand it to later. `None` (and a
/// message) when that fails.
fn create_private_segment(
    config: &RuntimeConfig,
    args: &[Vec<u8>],
) -> Option<(&'static Segment, crate::connect::Address)> {
    let collector = collector_address()?;
    // SAFETY: getpid/getppid have no preconditions.
    let (pid, ppid) = unsafe { (libc::getpid(), libc::getppid()) };
    let segment = match Segment::create_private(config.layout, pid, ppid, now_ns(), tsc_pair()) {
        Ok(s) => s,
        Err(e) => {
            profiling_off(&format!("cannot create its memory for records: {e}"));
            return None;
        }
    };
    describe(&segment, config, args);
    Some((segment.leak(), collector))
}

/// Writes the process's description and the samplers' first state into
/// `segment`.
fn describe(segment: &Segment, config: &RuntimeConfig, args: &[Vec<u8>]) {
    segment.write_info(&describe_process(config, args));
    for (flag, on) in segment
        .header()
        .sampling_on
        .iter()
        .zip(config.sampling_at_start)
    {
        flag.store(u32::from(on), std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testing::SMALL;
    use std::sync::atomic::Ordering;
    use strobe_wire::record::info_entries;

    #[test]
    fn strobes_settings_and_a_few_others_are_recorded_from_the_environment() {
        for name in [
            "STROBE_SAMPLING_FREQ",
            "STROBE_",
            "LD_PRELOAD",
            "OMP_NUM_THREADS",
            "XPTI_SUBSCRIBERS",
            "XPTI_TRACE_ENABLE",
        ] {
            assert!(recorded_variable(name), "{name}");
        }
        for name in [
            "STROBE_INTERNAL_RUNTIME",
            "STROBE_INTERNAL_COLLECTOR",
            "PATH",
            "HOME",
            "LD_PRELOAD_X",
            "OMP_NUM_THREADS_2",
            "strobe_sampling_freq",
            "MY_STROBE_X",
            "",
        ] {
            assert!(!recorded_variable(name), "{name}");
        }
    }

    #[test]
    fn the_arguments_are_read_up_to_argc_skipping_null_entries() {
        let args = [c"prog", c"--flag", c""];
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.insert(1, std::ptr::null());
        argv.push(std::ptr::null());
        assert_eq!(
            arguments(4, argv.as_ptr()),
            [b"prog".to_vec(), b"--flag".to_vec(), Vec::new()]
        );
        assert_eq!(arguments(2, argv.as_ptr()), [b"prog".to_vec()]);
        assert!(arguments(-1, argv.as_ptr()).is_empty());
        assert!(arguments(3, std::ptr::null()).is_empty());
    }

    /// The arguments every test describes this process with (the image's
    /// description is taken once per process).
    fn args() -> [Vec<u8>; 3] {
        [b"prog".to_vec(), b"two words".to_vec(), Vec::new()]
    }

    fn described(config: &RuntimeConfig) -> Vec<(u8, Vec<u8>)> {
        let bytes = describe_process(config, &args());
        info_entries(&bytes).map(|(k, v)| (k, v.to_vec())).collect()
    }

    #[test]
    fn the_process_description_decodes_into_what_the_collector_records() {
        let config = RuntimeConfig {
            output_file: "%hostname%/%pid%-%ppid%.db".into(),
            ..RuntimeConfig::default()
        };
        let before = strobe_core::clock::ClockSnapshot::take().realtime_ns;
        let entries = described(&config);
        let after = strobe_core::clock::ClockSnapshot::take().realtime_ns;
        let values = |key: u8| -> Vec<&[u8]> {
            entries
                .iter()
                .filter(|(k, _)| *k == key)
                .map(|(_, v)| v.as_slice())
                .collect()
        };
        let exe = strobe_core::modules::own_executable();
        assert_eq!(values(info::EXE), [exe.as_bytes()]);
        assert_eq!(values(info::ARG), [&b"prog"[..], b"two words", b""]);
        // SAFETY: getppid has no preconditions.
        let ppid = unsafe { libc::getppid() };
        let db = format!(
            "{}/{}-{ppid}.db",
            strobe_core::output_path::hostname(),
            std::process::id()
        );
        assert_eq!(values(info::DB_NAME), [db.as_bytes()]);
        let start = values(info::PROCESS_START_UNIX);
        assert_eq!(start.len(), 1);
        let start = u64::from_le_bytes(start[0].try_into().unwrap());
        assert!((before..=after).contains(&start));
        assert!(values(info::WARNING).is_empty());
        for env in values(info::ENV) {
            let text = std::str::from_utf8(env).unwrap();
            let (name, _) = text.split_once('=').unwrap();
            assert!(recorded_variable(name), "{text}");
        }
        // The entries come in one order: the image's, then this process's.
        let keys: Vec<u8> = entries.iter().map(|(k, _)| *k).collect();
        let first_db = keys.iter().position(|&k| k == info::DB_NAME).unwrap();
        assert!(keys[..first_db]
            .iter()
            .all(|&k| matches!(k, info::EXE | info::ARG | info::ENV)));
    }

    #[test]
    fn a_bad_output_template_is_a_warning_for_the_collector_not_a_name() {
        let config = RuntimeConfig {
            output_file: "%pdi%.db".into(),
            ..RuntimeConfig::default()
        };
        let entries = described(&config);
        assert!(entries.iter().all(|(k, _)| *k != info::DB_NAME));
        let warnings: Vec<String> = entries
            .iter()
            .filter(|(k, _)| *k == info::WARNING)
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
            .collect();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("output_file: "), "{warnings:?}");
        assert!(warnings[0].contains("pdi"), "{warnings:?}");
    }

    #[test]
    fn a_new_segment_holds_the_description_and_the_samplers_first_state() {
        let (segment, _fd) = Segment::create(SMALL, 1, 1, 0, (0, 0)).unwrap();
        let config = RuntimeConfig {
            layout: SMALL,
            sampling_at_start: [false, true],
            ..RuntimeConfig::default()
        };
        describe(&segment, &config, &args());
        let flags: Vec<u32> = segment
            .header()
            .sampling_on
            .iter()
            .map(|f| f.load(Ordering::Relaxed))
            .collect();
        assert_eq!(flags, [0, 1]);
        let info = segment.info();
        assert!(info_entries(&info).any(|(k, _)| k == info::DB_NAME));
    }
}
