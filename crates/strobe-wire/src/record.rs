//! The event records that travel through a segment's event rings, the
//! counter readings they carry, and the process information in the
//! segment's header. (Sample records are [`crate::sample`]'s.)
//!
//! Owns the byte layouts, written by the runtime and decoded by the
//! collector. Encoding never allocates (it writes into ring space or fixed
//! stack arrays); decoding never trusts a length it has not checked.

/// A counter value that could not be read (the counter did not open on
/// this thread, the program closed its descriptor, a read failed, or the
/// sample interrupted the thread while it read its counters for a region:
/// the change then goes to the thread's next sample).
pub const COUNTER_MISSING: u64 = u64::MAX;

/// One counter reading as region records carry it: the cumulative count
/// and the counter's enabled and running times (equal unless the kernel
/// multiplexed it). `raw` is [`COUNTER_MISSING`] when it was not read.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterReading {
    pub raw: u64,
    pub enabled_ns: u64,
    pub running_ns: u64,
}

/// Bytes of one [`CounterReading`].
pub const COUNTER_READING_BYTES: usize = std::mem::size_of::<CounterReading>();

impl CounterReading {
    /// A reading that is missing.
    pub const MISSING: CounterReading = CounterReading {
        raw: COUNTER_MISSING,
        enabled_ns: 0,
        running_ns: 0,
    };

    /// Whether a value was read.
    pub fn is_present(&self) -> bool {
        self.raw != COUNTER_MISSING
    }

    /// The count since the counter was enabled, scaled to its enabled
    /// time when it was multiplexed (`raw × enabled / running`); `None`
    /// when missing or when it never ran but counted.
    pub fn scaled_total(&self) -> Option<u64> {
        self.delta_since(&CounterReading {
            raw: 0,
            enabled_ns: 0,
            running_ns: 0,
        })
    }

    /// The change from `begin` to `self`, scaled to the enabled time when
    /// the counter was multiplexed in between (`Δraw × Δenabled /
    /// Δrunning`); `None` when either reading is missing, the count went
    /// backwards or the counter never ran in between.
    pub fn delta_since(&self, begin: &CounterReading) -> Option<u64> {
        if !self.is_present() || !begin.is_present() || self.raw < begin.raw {
            return None;
        }
        let raw = self.raw - begin.raw;
        let enabled = self.enabled_ns.saturating_sub(begin.enabled_ns);
        let running = self.running_ns.saturating_sub(begin.running_ns);
        if running >= enabled {
            return Some(raw);
        }
        if running == 0 {
            return (raw == 0).then_some(0);
        }
        let scaled = u128::from(raw) * u128::from(enabled) / u128::from(running);
        Some(scaled.min(u128::from(COUNTER_MISSING - 1)) as u64)
    }
}

/// The counter readings at the front of `bytes` (whole readings only).
pub fn counter_readings(bytes: &[u8]) -> impl Iterator<Item = CounterReading> + '_ {
    bytes
        .chunks_exact(COUNTER_READING_BYTES)
        .filter_map(read::<CounterReading>)
}

/// Kinds of event records.
pub mod event {
    /// The slot's thread started (`arg` unused); bytes: its kernel name
    /// then (may be empty), which names the thread until a later name
    /// does (the main thread, and threads still running at exit, never
    /// send a [`THREAD_END`]).
    pub const THREAD_START: u16 = 1;
    /// The slot's thread ended; bytes: its CPU time in ns (u64 LE), then
    /// its name.
    pub const THREAD_END: u16 = 2;
    /// The program named the slot's thread; bytes: the name.
    pub const THREAD_NAME: u16 = 3;
    /// Defines string `arg` of this process; bytes: the text.
    pub const STRING: u16 = 4;
    /// A region named by string `arg` opens on the slot's thread. Bytes:
    /// when the process counts (`sampling_events`), one
    /// [`super::CounterReading`] per counter, read just before.
    pub const REGION_BEGIN: u16 = 5;
    /// The innermost open region of the slot's thread closes. Bytes: the
    /// counter readings, as for `REGION_BEGIN`, read just after.
    pub const REGION_END: u16 = 6;
    /// An instant marker named by string `arg`.
    pub const MARK: u16 = 7;
    /// A tracing-framework notification; `arg`: the string id of its
    /// event's name (0: none; the collector then names it `event <uid>`);
    /// bytes: an [`super::XptiBody`], then, for the begin and end of
    /// a pair when the process counts, the counter readings as for
    /// `REGION_BEGIN`.
    pub const XPTI: u16 = 8;
    // 9 named a tracing event by its unique id until event names became
    // string ids (`XPTI`'s `arg`): retired, never to be reused.
    /// A loaded module; bytes: a [`super::ModuleBody`] then build id and path.
    pub const MODULE: u16 = 10;
    /// This thread started a child process (`fork`, `posix_spawn`, or a
    /// `vfork` child about to `exec`). `arg` is an exec reason: `NONE`
    /// when the child's runtime will connect (the collector waits for it
    /// even if the parent ends first), otherwise why the image the child
    /// runs will not be profiled. Bytes: the child's pid (i32 LE), then
    /// the image's path when known.
    pub const CHILD: u16 = 11;
    /// Something the run's report should say about this process (a
    /// counter that cannot be counted here, say); bytes: the text.
    pub const NOTE: u16 = 12;
    /// A completed MPI call of the slot's thread (the head's timestamp is
    /// its return); bytes: an [`super::MpiCallBody`], the communicator's id
    /// (`comm_len` bytes), then further received-message keys (u64 LE
    /// each) when one call completed several receives.
    pub const MPI_CALL: u16 = 13;
    /// A clock comparison with the reference rank; bytes: an
    /// [`super::MpiClockBody`].
    pub const MPI_CLOCK: u16 = 14;
    /// An XPTI dispatcher announced a stream to the runtime (its
    /// `xptiTraceInit` ran). `arg` is the stream id as
    /// [`super::XptiBody::stream_id`] carries it (0: the dispatcher could not
    /// be found, so the stream has no id); bytes: the stream's name.
    pub const XPTI_STREAM: u16 = 15;
}

/// Set in [`XptiBody::stream_id`] (and in the `arg` of an
/// [`event::XPTI_STREAM`] record) for streams of the C-ABI dispatcher the
/// program loaded (`XPTI_FRAMEWORK_DISPATCHER`), whose ids are counted apart
/// from those of the runtime's own Rust framework.
pub const XPTI_C_STREAM: u32 = 0x100;

/// MPI functions, by the index an [`MpiCallBody`] carries.
pub const MPI_FUNCTIONS: &[&str] = &[
    "MPI_Init",
    "MPI_Init_thread",
    "MPI_Finalize",
    "MPI_Send",
    "MPI_Ssend",
    "MPI_Bsend",
    "MPI_Rsend",
    "MPI_Recv",
    "MPI_Sendrecv",
    "MPI_Sendrecv_replace",
    "MPI_Probe",
    "MPI_Isend",
    "MPI_Issend",
    "MPI_Ibsend",
    "MPI_Irsend",
    "MPI_Irecv",
    "MPI_Wait",
    "MPI_Waitall",
    "MPI_Waitany",
    "MPI_Waitsome",
    "MPI_Test",
    "MPI_Testall",
    "MPI_Testany",
    "MPI_Testsome",
    "MPI_Barrier",
    "MPI_Bcast",
    "MPI_Reduce",
    "MPI_Allreduce",
    "MPI_Gather",
    "MPI_Gatherv",
    "MPI_Scatter",
    "MPI_Scatterv",
    "MPI_Allgather",
    "MPI_Allgatherv",
    "MPI_Alltoall",
    "MPI_Alltoallv",
    "MPI_Reduce_scatter",
    "MPI_Reduce_scatter_block",
    "MPI_Scan",
    "MPI_Exscan",
    "MPI_Ibarrier",
    "MPI_Ibcast",
    "MPI_Ireduce",
    "MPI_Iallreduce",
    "MPI_Win_create",
    "MPI_Win_allocate",
    "MPI_Win_free",
    "MPI_Put",
    "MPI_Get",
    "MPI_Accumulate",
    "MPI_Win_fence",
    "MPI_Win_lock",
    "MPI_Win_unlock",
    "MPI_Win_flush",
    "MPI_Comm_dup",
    "MPI_Comm_split",
    "MPI_Comm_create",
    "MPI_Comm_free",
];

/// Which optional fields of an [`MpiCallBody`] hold a value.
pub mod mpi_fields {
    pub const BYTES: u16 = 1;
    pub const RECV_BYTES: u16 = 2;
    pub const PEER: u16 = 4;
    pub const TAG: u16 = 8;
    pub const ROOT: u16 = 16;
    pub const FLOW_OUT: u16 = 32;
    pub const FLOW_IN: u16 = 64;
    /// `begin_ns` is in time-stamp counter ticks, like the head's
    /// timestamp (which then has [`super::event_flags::TSC`]); the
    /// collector converts both.
    pub const TICKS: u16 = 128;
}

/// A completed MPI call (see [`event::MPI_CALL`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MpiCallBody {
    /// Entry (`CLOCK_MONOTONIC` ns).
    pub begin_ns: u64,
    /// Bytes sent (or contributed, for collectives).
    pub bytes: u64,
    /// Bytes received (`MPI_Sendrecv`, receives and completed waits).
    pub recv_bytes: u64,
    /// Key of the message this call sent.
    pub flow_out: u64,
    /// Key of a message this call received.
    pub flow_in: u64,
    /// Index into [`MPI_FUNCTIONS`].
    pub function: u16,
    /// [`mpi_fields`] present.
    pub fields: u16,
    /// Bytes of the communicator id after the body.
    pub comm_len: u16,
    pub reserved: u16,
    /// Peer's rank in the communicator.
    pub peer: i32,
    pub tag: i32,
    pub root: i32,
    /// Size of the communicator (0 when unknown).
    pub comm_size: i32,
}

impl MpiCallBody {
    /// Converts a record's tick `begin_ns` with `to_ns`, in place; `end_ns`
    /// (the converted head timestamp) bounds it.
    pub fn begin_to_ns(record_body: &mut [u8], end_ns: u64, to_ns: impl Fn(u64) -> u64) {
        let Some(mut body) = read::<MpiCallBody>(record_body) else {
            return;
        };
        if body.fields & mpi_fields::TICKS == 0 {
            return;
        }
        body.fields &= !mpi_fields::TICKS;
        body.begin_ns = to_ns(body.begin_ns).min(end_ns);
        record_body[..std::mem::size_of::<MpiCallBody>()].copy_from_slice(as_bytes(&body));
    }
}

/// When a clock comparison was made.
pub mod mpi_phase {
    /// Just after `MPI_Init` returned.
    pub const INIT: u32 = 0;
    /// Just before `MPI_Finalize` ran.
    pub const FINALIZE: u32 = 1;
}

/// One clock comparison (see [`event::MPI_CLOCK`]): at this process's
/// `local_ns` the reference rank's clock read `local_ns + offset_ns`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MpiClockBody {
    pub local_ns: u64,
    pub offset_ns: i64,
    /// The shortest round trip of the exchange, which bounds the error.
    pub rtt_ns: u64,
    /// This process's rank in `MPI_COMM_WORLD`.
    pub rank: i32,
    /// `MPI_COMM_WORLD`'s size.
    pub world_size: i32,
    /// The rank compared with.
    pub reference_rank: i32,
    /// [`mpi_phase`].
    pub phase: u32,
}

/// Fixed part of every event record (16 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventHead {
    /// One of [`event`].
    pub kind: u16,
    /// [`event_flags`].
    pub flags: u16,
    /// Kind-specific (a string id).
    pub arg: u32,
    /// `CLOCK_MONOTONIC` nanoseconds, or time-stamp counter ticks when
    /// `flags` has [`event_flags::TSC`] (the collector converts them before
    /// anything else reads the record).
    pub timestamp_ns: u64,
}

/// Flags of an [`EventHead`].
pub mod event_flags {
    /// The timestamp is in time-stamp counter ticks.
    pub const TSC: u16 = 1;
}

/// Bytes of [`EventHead`].
pub const EVENT_HEAD_BYTES: usize = std::mem::size_of::<EventHead>();

impl EventHead {
    /// The head's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        as_bytes(self)
    }
}

/// A tracing notification (the fields the database needs).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XptiBody {
    pub unique_id: u64,
    pub parent_unique_id: u64,
    pub instance: u64,
    pub user_data: u64,
    /// The stream's id; [`XPTI_C_STREAM`] set for a C-ABI dispatcher's.
    pub stream_id: u32,
    pub trace_type: u16,
    pub reserved: u16,
}

/// A loaded module: addresses in the process, then `build_id_len` bytes of
/// build id and the path.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModuleBody {
    pub bias: u64,
    pub text_start: u64,
    pub text_end: u64,
    pub mapped_start: u64,
    pub mapped_end: u64,
    pub build_id_len: u32,
    pub reserved: u32,
}

/// The bytes of a plain `repr(C)` value.
pub fn as_bytes<T: Copy>(value: &T) -> &[u8] {
    // SAFETY: the wire types are repr(C) plain old data with explicit
    // padding fields; reading their bytes is sound.
    unsafe { std::slice::from_raw_parts(value as *const T as *const u8, std::mem::size_of::<T>()) }
}

/// Reads a plain `repr(C)` value from the front of `bytes`.
pub fn read<T: Copy>(bytes: &[u8]) -> Option<T> {
    (bytes.len() >= std::mem::size_of::<T>())
        // SAFETY: enough bytes; read_unaligned copes with alignment; the
        // wire types accept any bit pattern.
        .then(|| unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const T) })
}

/// One decoded event record.
#[derive(Debug, Clone, Copy)]
pub struct EventView<'a> {
    /// The fixed part.
    pub head: EventHead,
    /// What follows it.
    pub bytes: &'a [u8],
}

/// Decodes an event ring payload; `None` when malformed.
pub fn decode_event(payload: &[u8]) -> Option<EventView<'_>> {
    let head = read::<EventHead>(payload)?;
    Some(EventView {
        head,
        bytes: &payload[EVENT_HEAD_BYTES..],
    })
}

/// Keys of the process information (key byte, u32 LE length, bytes).
pub mod info {
    /// Absolute path of the executable.
    pub const EXE: u8 = 1;
    /// One command-line argument (repeated, in order).
    pub const ARG: u8 = 2;
    /// One recorded environment variable, `NAME=value` (repeated).
    pub const ENV: u8 = 3;
    /// The database file name relative to the host directory, from the
    /// `output_file` template.
    pub const DB_NAME: u8 = 4;
    /// The process's start time (u64 LE `CLOCK_MONOTONIC` ns) from
    /// `/proc/self/stat`.
    pub const PROCESS_START: u8 = 5;
    /// The process's start on the realtime clock (u64 LE Unix ns).
    pub const PROCESS_START_UNIX: u8 = 6;
    /// A message the runtime could not say otherwise (one per entry).
    pub const WARNING: u8 = 7;
}

/// Builds the process information.
#[derive(Default)]
pub struct InfoWriter {
    bytes: Vec<u8>,
}

impl InfoWriter {
    /// A writer that goes on after `entries`, encoded by another writer.
    pub fn continuing(entries: Vec<u8>) -> Self {
        InfoWriter { bytes: entries }
    }

    /// Adds one entry.
    pub fn put(&mut self, key: u8, value: &[u8]) -> &mut Self {
        self.bytes.push(key);
        self.bytes
            .extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(value);
        self
    }

    /// The encoded entries.
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }
}

/// The entries of encoded process information, stopping at the first
/// malformed one.
pub fn info_entries(bytes: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        let (&key, after) = rest.split_first()?;
        let len = u32::from_le_bytes(after.get(..4)?.try_into().ok()?) as usize;
        let value = after.get(4..4 + len)?;
        rest = &after[4 + len..];
        Some((key, value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_deltas_scale_multiplexed_counts_and_refuse_missing_ones() {
        let r = |raw, enabled_ns, running_ns| CounterReading {
            raw,
            enabled_ns,
            running_ns,
        };
        assert_eq!(r(150, 20, 20).delta_since(&r(100, 10, 10)), Some(50));
        assert_eq!(r(150, 30, 20).delta_since(&r(100, 10, 10)), Some(100));
        assert_eq!(r(100, 30, 10).delta_since(&r(100, 10, 10)), Some(0));
        assert_eq!(r(150, 30, 10).delta_since(&r(100, 10, 10)), None);
        assert_eq!(CounterReading::MISSING.delta_since(&r(1, 1, 1)), None);
        assert_eq!(r(1, 1, 1).delta_since(&CounterReading::MISSING), None);
        assert_eq!(r(1, 1, 1).delta_since(&r(2, 1, 1)), None);
        let bytes: Vec<u8> = [r(1, 2, 3), CounterReading::MISSING]
            .iter()
            .flat_map(|c| as_bytes(c).to_vec())
            .collect();
        let back: Vec<_> = counter_readings(&bytes).collect();
        assert_eq!(back, [r(1, 2, 3), CounterReading::MISSING]);
    }

    #[test]
    fn info_round_trips_and_stops_at_a_cut() {
        let mut w = InfoWriter::default();
        w.put(info::EXE, b"/bin/x")
            .put(info::ARG, b"a")
            .put(info::ARG, b"");
        let bytes = w.finish();
        let all: Vec<_> = info_entries(&bytes).collect();
        assert_eq!(
            all,
            vec![
                (info::EXE, &b"/bin/x"[..]),
                (info::ARG, &b"a"[..]),
                (info::ARG, &b""[..])
            ]
        );
        assert_eq!(info_entries(&bytes[..bytes.len() - 3]).count(), 2);
    }

    #[test]
    fn the_record_layouts_are_the_contract() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<EventHead>(), EVENT_HEAD_BYTES);
        assert_eq!(EVENT_HEAD_BYTES, 16);
        assert_eq!(offset_of!(EventHead, kind), 0);
        assert_eq!(offset_of!(EventHead, flags), 2);
        assert_eq!(offset_of!(EventHead, arg), 4);
        assert_eq!(offset_of!(EventHead, timestamp_ns), 8);
        assert_eq!(COUNTER_READING_BYTES, 24);
        assert_eq!(size_of::<XptiBody>(), 40);
        assert_eq!(offset_of!(XptiBody, stream_id), 32);
        assert_eq!(offset_of!(XptiBody, trace_type), 36);
        assert_eq!(size_of::<ModuleBody>(), 48);
        assert_eq!(offset_of!(ModuleBody, build_id_len), 40);
        assert_eq!(size_of::<MpiCallBody>(), 64);
        assert_eq!(offset_of!(MpiCallBody, function), 40);
        assert_eq!(offset_of!(MpiCallBody, comm_len), 44);
        assert_eq!(offset_of!(MpiCallBody, peer), 48);
        assert_eq!(offset_of!(MpiCallBody, comm_size), 60);
        assert_eq!(size_of::<MpiClockBody>(), 40);
        assert_eq!(offset_of!(MpiClockBody, rank), 24);
        assert_eq!(offset_of!(MpiClockBody, phase), 36);
    }

    #[test]
    fn events_round_trip_with_their_bytes_and_short_ones_are_refused() {
        let head = EventHead {
            kind: event::MODULE,
            flags: event_flags::TSC,
            arg: 7,
            timestamp_ns: 1234,
        };
        let body = ModuleBody {
            bias: 0x1000,
            text_start: 0x2000,
            text_end: 0x3000,
            mapped_start: 0x1000,
            mapped_end: 0x4000,
            build_id_len: 2,
            reserved: 0,
        };
        let mut payload = head.as_bytes().to_vec();
        payload.extend_from_slice(as_bytes(&body));
        payload.extend_from_slice(b"\xab\xcd/lib/x.so");
        let e = decode_event(&payload).unwrap();
        assert_eq!(e.head, head);
        assert_eq!(read::<ModuleBody>(e.bytes), Some(body));
        assert_eq!(&e.bytes[48..], b"\xab\xcd/lib/x.so");
        assert!(decode_event(&payload[..15]).is_none());
        assert!(read::<ModuleBody>(&e.bytes[..47]).is_none());
    }

    #[test]
    fn an_mpi_calls_ticks_become_nanoseconds_once() {
        let body = MpiCallBody {
            begin_ns: 1000,
            fields: mpi_fields::TICKS | mpi_fields::BYTES,
            ..Default::default()
        };
        let mut bytes = as_bytes(&body).to_vec();
        bytes.extend_from_slice(b"comm");
        MpiCallBody::begin_to_ns(&mut bytes, 10_000, |t| t * 3);
        let converted = read::<MpiCallBody>(&bytes).unwrap();
        assert_eq!(converted.begin_ns, 3000);
        assert_eq!(converted.fields, mpi_fields::BYTES);
        assert_eq!(&bytes[64..], b"comm", "what follows the body is kept");
        // Already converted: left alone; bounded by the end.
        MpiCallBody::begin_to_ns(&mut bytes, 10_000, |t| t * 3);
        assert_eq!(read::<MpiCallBody>(&bytes).unwrap().begin_ns, 3000);
        let mut late = as_bytes(&body).to_vec();
        MpiCallBody::begin_to_ns(&mut late, 2000, |t| t * 3);
        assert_eq!(read::<MpiCallBody>(&late).unwrap().begin_ns, 2000);
    }
}
