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
}
