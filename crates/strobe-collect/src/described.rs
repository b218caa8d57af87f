//! What the runtime wrote in a segment about its process and its threads'
//! sampling: the process's description (executable, arguments, recorded
//! environment, database name, start time, warnings) and each slot's
//! sample counters.
//!
//! Owns reading those parts of a segment; a database name that would leave
//! the run directory is replaced by the pid. Never writes a segment and
//! never reads the rings.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use strobe_wire::record::{info, info_entries};
use strobe_wire::segment::Segment;

/// What the runtime said about the process.
pub struct Described {
    pub exe: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub db_name: PathBuf,
    pub start_unix_ns: u64,
    pub warnings: Vec<String>,
}

impl Described {
    /// The command line, for messages.
    pub fn command(&self) -> String {
        if self.args.is_empty() {
            self.exe.clone()
        } else {
            self.args.join(" ")
        }
    }
}

/// What the runtime wrote about its process in the segment.
pub fn describe(segment: &Segment) -> Described {
    let mut d = Described {
        exe: String::new(),
        args: Vec::new(),
        env: Vec::new(),
        db_name: PathBuf::new(),
        start_unix_ns: 0,
        warnings: Vec::new(),
    };
    let bytes = segment.info();
    for (key, value) in info_entries(&bytes) {
        let text = String::from_utf8_lossy(value).into_owned();
        match key {
            info::EXE => d.exe = text,
            info::ARG => d.args.push(text),
            info::ENV => {
                if let Some((k, v)) = text.split_once('=') {
                    d.env.push((k.to_string(), v.to_string()));
                }
            }
            info::DB_NAME => d.db_name = PathBuf::from(text),
            info::PROCESS_START_UNIX => {
                d.start_unix_ns = value.try_into().map(u64::from_le_bytes).unwrap_or(0)
            }
            info::WARNING => d.warnings.push(text),
            _ => {}
        }
    }
    if d.db_name.as_os_str().is_empty()
        || d.db_name.is_absolute()
        || d.db_name
            .components()
            .any(|c| c == std::path::Component::ParentDir)
    {
        d.db_name = PathBuf::from(format!("{}.db", segment.header().pid));
    }
    d
}

/// Sample counters of slot `i`: taken, lost (full), lost (nested),
/// overruns, incomplete, lost (small alternate stack).
pub fn sample_counters(segment: &Segment, i: u32) -> [u64; 6] {
    let slot = segment.slot(i);
    [
        &slot.taken,
        &slot.lost_full,
        &slot.lost_reentrant,
        &slot.overruns,
        &slot.incomplete,
        &slot.lost_altstack,
    ]
    .map(|c| c.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use strobe_wire::record::InfoWriter;
    use strobe_wire::segment::Layout;

    const LAYOUT: Layout = Layout {
        slots: 4,
        sample_ring_bytes: 4096,
        event_ring_bytes: 4096,
    };

    /// A segment of pid 77 whose process information is `info`.
    fn segment(info: &[u8]) -> Segment {
        let (segment, _fd) = Segment::create(LAYOUT, 77, 1, 0, (0, 0)).unwrap();
        segment.write_info(info);
        segment
    }

    #[test]
    fn the_runtimes_description_of_its_process_is_read_back() {
        let mut w = InfoWriter::default();
        w.put(info::EXE, b"/usr/bin/prog")
            .put(info::ARG, b"prog")
            .put(info::ARG, b"two words")
            .put(info::ENV, b"STROBE_X=a=b")
            .put(info::ENV, b"NOT_A_PAIR")
            .put(info::DB_NAME, b"node1/77.db")
            .put(
                info::PROCESS_START_UNIX,
                &1_700_000_000_123u64.to_le_bytes(),
            )
            .put(info::WARNING, b"output_file: something")
            .put(200, b"a key of a later runtime");
        let d = describe(&segment(&w.finish()));
        assert_eq!(d.exe, "/usr/bin/prog");
        assert_eq!(d.args, ["prog", "two words"]);
        assert_eq!(d.env, [("STROBE_X".to_string(), "a=b".to_string())]);
        assert_eq!(d.db_name, PathBuf::from("node1/77.db"));
        assert_eq!(d.start_unix_ns, 1_700_000_000_123);
        assert_eq!(d.warnings, ["output_file: something"]);
        assert_eq!(d.command(), "prog two words");
    }

    #[test]
    fn a_database_name_outside_the_run_directory_is_replaced_by_the_pid() {
        for name in [
            &b""[..],
            b"/etc/passwd",
            b"../outside.db",
            b"host/../../outside.db",
        ] {
            let mut w = InfoWriter::default();
            w.put(info::DB_NAME, name);
            let d = describe(&segment(&w.finish()));
            assert_eq!(d.db_name, PathBuf::from("77.db"), "{name:?}");
        }
        // No description at all.
        let d = describe(&segment(b""));
        assert_eq!(d.db_name, PathBuf::from("77.db"));
        assert_eq!(d.command(), "");
    }

    #[test]
    fn a_damaged_description_keeps_what_came_before_the_damage() {
        let mut w = InfoWriter::default();
        w.put(info::EXE, b"/bin/x")
            .put(info::PROCESS_START_UNIX, &[1, 2, 3])
            .put(info::ARG, b"x");
        let mut bytes = w.finish();
        // An entry claiming more bytes than there are.
        bytes.extend_from_slice(&[info::ARG, 0xff, 0xff, 0, 0, b'y']);
        let d = describe(&segment(&bytes));
        assert_eq!(d.exe, "/bin/x");
        assert_eq!(d.start_unix_ns, 0, "not 8 bytes: no time");
        assert_eq!(d.args, ["x"]);
        assert_eq!(d.command(), "x");
    }
}
