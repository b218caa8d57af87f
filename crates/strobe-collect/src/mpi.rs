//! MPI records into database rows.
//!
//! Owns decoding the runtime's `MPI_CALL` records into a region's name,
//! start and arguments (`bytes`, `recv_bytes`, `peer`, `tag`, `root`,
//! `comm`, `comm_size`, `flow_out`, `flow_in`: docs/mpi.md) and
//! `MPI_CLOCK` records into clock-comparison rows. It never writes to a
//! database itself and never trusts a record's lengths.

use strobe_db::ClockSync;
use strobe_wire::record::{mpi_fields, mpi_phase, read, MpiCallBody, MpiClockBody, MPI_FUNCTIONS};

/// One argument of an MPI region: name, type, value.
pub type MpiArg = (&'static str, &'static str, String);

/// A decoded MPI call: function name, entry time, arguments.
pub struct MpiCall {
    pub name: &'static str,
    pub begin_ns: u64,
    pub args: Vec<MpiArg>,
}

/// Decodes an `MPI_CALL` record's bytes; `None` when malformed.
pub fn call(bytes: &[u8]) -> Option<MpiCall> {
    let body = read::<MpiCallBody>(bytes)?;
    let name = MPI_FUNCTIONS.get(usize::from(body.function))?;
    let rest = &bytes[std::mem::size_of::<MpiCallBody>()..];
    let comm_len = usize::from(body.comm_len).min(rest.len());
    let (comm, more) = rest.split_at(comm_len);
    let has = |f: u16| body.fields & f != 0;
    let mut args = Vec::new();
    let int = |v: i64| v.to_string();
    if has(mpi_fields::BYTES) {
        args.push(("bytes", "int", body.bytes.to_string()));
    }
    if has(mpi_fields::RECV_BYTES) {
        args.push(("recv_bytes", "int", body.recv_bytes.to_string()));
    }
    if has(mpi_fields::PEER) {
        args.push(("peer", "int", int(body.peer.into())));
    }
    if has(mpi_fields::TAG) {
        args.push(("tag", "int", int(body.tag.into())));
    }
    if has(mpi_fields::ROOT) {
        args.push(("root", "int", int(body.root.into())));
    }
    if !comm.is_empty() {
        args.push(("comm", "str", String::from_utf8_lossy(comm).into_owned()));
        args.push(("comm_size", "int", int(body.comm_size.into())));
    }
    if has(mpi_fields::FLOW_OUT) {
        args.push(("flow_out", "int", body.flow_out.to_string()));
    }
    if has(mpi_fields::FLOW_IN) {
        args.push(("flow_in", "int", body.flow_in.to_string()));
        for k in more.chunks_exact(8) {
            let k = u64::from_le_bytes(k.try_into().unwrap_or_default());
            args.push(("flow_in", "int", k.to_string()));
        }
    }
    Some(MpiCall {
        name,
        begin_ns: body.begin_ns,
        args,
    })
}

/// Decodes an `MPI_CLOCK` record: the comparison row and the rank and
/// world size it reports.
pub fn clock(bytes: &[u8]) -> Option<(ClockSync<'static>, i32, i32)> {
    let c = read::<MpiClockBody>(bytes)?;
    let phase = match c.phase {
        mpi_phase::INIT => "init",
        mpi_phase::FINALIZE => "finalize",
        _ => return None,
    };
    Some((
        ClockSync {
            phase,
            local_ns: c.local_ns,
            offset_ns: c.offset_ns,
            rtt_ns: c.rtt_ns,
            reference_rank: c.reference_rank,
        },
        c.rank,
        c.world_size,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use strobe_wire::record::as_bytes;

    #[test]
    fn a_send_decodes_to_its_arguments() {
        let body = MpiCallBody {
            begin_ns: 5,
            bytes: 800,
            flow_out: 42,
            function: MPI_FUNCTIONS.iter().position(|f| *f == "MPI_Send").unwrap() as u16,
            fields: mpi_fields::BYTES | mpi_fields::PEER | mpi_fields::TAG | mpi_fields::FLOW_OUT,
            comm_len: 5,
            peer: 3,
            tag: 7,
            comm_size: 4,
            ..Default::default()
        };
        let mut bytes = as_bytes(&body).to_vec();
        bytes.extend_from_slice(b"world");
        let c = call(&bytes).unwrap();
        assert_eq!((c.name, c.begin_ns), ("MPI_Send", 5));
        let names: Vec<_> = c.args.iter().map(|a| (a.0, a.2.as_str())).collect();
        assert_eq!(
            names,
            [
                ("bytes", "800"),
                ("peer", "3"),
                ("tag", "7"),
                ("comm", "world"),
                ("comm_size", "4"),
                ("flow_out", "42")
            ]
        );
        assert!(call(&bytes[..10]).is_none());
    }

    fn index(name: &str) -> u16 {
        MPI_FUNCTIONS.iter().position(|f| *f == name).unwrap() as u16
    }

    #[test]
    fn a_completion_names_every_message_it_received() {
        let body = MpiCallBody {
            begin_ns: 1,
            recv_bytes: 64,
            flow_in: 11,
            function: index("MPI_Waitall"),
            fields: mpi_fields::RECV_BYTES | mpi_fields::FLOW_IN,
            comm_len: 4,
            comm_size: 2,
            ..Default::default()
        };
        let mut bytes = as_bytes(&body).to_vec();
        bytes.extend_from_slice(b"self");
        for k in [12u64, 13] {
            bytes.extend_from_slice(&k.to_le_bytes());
        }
        // A partial key at the end is left out.
        bytes.extend_from_slice(&[1, 2, 3]);
        let c = call(&bytes).unwrap();
        assert_eq!(c.name, "MPI_Waitall");
        let args: Vec<_> = c.args.iter().map(|a| (a.0, a.1, a.2.as_str())).collect();
        assert_eq!(
            args,
            [
                ("recv_bytes", "int", "64"),
                ("comm", "str", "self"),
                ("comm_size", "int", "2"),
                ("flow_in", "int", "11"),
                ("flow_in", "int", "12"),
                ("flow_in", "int", "13")
            ]
        );
    }

    #[test]
    fn a_call_says_only_what_its_fields_mark_and_bad_records_are_refused() {
        let body = MpiCallBody {
            begin_ns: 9,
            bytes: 5,
            peer: -3,
            root: 2,
            tag: 77,
            flow_out: 99,
            function: index("MPI_Bcast"),
            fields: mpi_fields::ROOT,
            ..Default::default()
        };
        let c = call(as_bytes(&body)).unwrap();
        assert_eq!((c.name, c.begin_ns), ("MPI_Bcast", 9));
        let args: Vec<_> = c.args.iter().map(|a| (a.0, a.2.as_str())).collect();
        assert_eq!(args, [("root", "2")], "no comm without its id");
        // Keys after the body are only read for a call that received.
        let mut more = as_bytes(&body).to_vec();
        more.extend_from_slice(&5u64.to_le_bytes());
        assert_eq!(call(&more).unwrap().args.len(), 1);
        // A communicator id longer than the record: what there is.
        let cut = MpiCallBody {
            comm_len: 1000,
            ..body
        };
        let mut bytes = as_bytes(&cut).to_vec();
        bytes.extend_from_slice(b"wor");
        let c = call(&bytes).unwrap();
        assert!(c.args.iter().any(|a| a.0 == "comm" && a.2 == "wor"));
        // Not UTF-8: replaced, not refused.
        let mut odd = as_bytes(&MpiCallBody {
            comm_len: 2,
            ..body
        })
        .to_vec();
        odd.extend_from_slice(b"\xff\xfe");
        assert!(call(&odd)
            .unwrap()
            .args
            .iter()
            .any(|a| a.2 == "\u{fffd}\u{fffd}"));
        // A function index past the table.
        let unknown = MpiCallBody {
            function: MPI_FUNCTIONS.len() as u16,
            ..body
        };
        assert!(call(as_bytes(&unknown)).is_none());
        assert!(call(&[]).is_none());
        let whole = as_bytes(&body);
        for n in 0..whole.len() {
            assert!(call(&whole[..n]).is_none(), "{n} bytes");
        }
    }

    #[test]
    fn a_clock_comparison_decodes_for_either_phase_and_no_other() {
        let body = MpiClockBody {
            local_ns: 1_000,
            offset_ns: -250,
            rtt_ns: 40,
            rank: 3,
            world_size: 8,
            reference_rank: 0,
            phase: mpi_phase::INIT,
        };
        let (sync, rank, world) = clock(as_bytes(&body)).unwrap();
        assert_eq!(
            (
                sync.phase,
                sync.local_ns,
                sync.offset_ns,
                sync.rtt_ns,
                sync.reference_rank
            ),
            ("init", 1_000, -250, 40, 0)
        );
        assert_eq!((rank, world), (3, 8));
        let finalize = MpiClockBody {
            phase: mpi_phase::FINALIZE,
            ..body
        };
        assert_eq!(clock(as_bytes(&finalize)).unwrap().0.phase, "finalize");
        let other = MpiClockBody { phase: 2, ..body };
        assert!(clock(as_bytes(&other)).is_none());
        assert!(clock(&as_bytes(&body)[..39]).is_none());
    }
}
