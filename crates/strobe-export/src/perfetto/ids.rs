//! Track uuids and flow ids of a Perfetto trace.
//!
//! Owns every track uuid (process, thread, overlap lane, counter) and flow
//! id (correlation, message) of a trace, all made by one stable hash; a
//! process's and a thread's uuid and a message's flow id are public, for
//! tools that link to a trace. It never encodes a packet
//! and never keeps state: the same input always gives the same id.

/// A stable, non-zero 64-bit hash (FNV-1a) used for track uuids and flow ids.
fn hash64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in *p {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.max(1)
}

/// Track uuid of a process.
pub fn process_uuid(guid: &str) -> u64 {
    hash64(&[b"p", guid.as_bytes()])
}
/// Track uuid of a thread.
pub fn thread_uuid(guid: &str, tid: i64) -> u64 {
    hash64(&[b"t", guid.as_bytes(), &tid.to_le_bytes()])
}

/// Track uuid of lane `k` of a thread: an extra child track of the
/// thread for regions that overlap without nesting.
pub(super) fn lane_uuid(guid: &str, tid: i64, k: usize) -> u64 {
    hash64(&[
        b"l",
        guid.as_bytes(),
        &tid.to_le_bytes(),
        &(k as u64).to_le_bytes(),
    ])
}

/// Track uuid of counter `name` of a thread (`tid`) or of its process
/// (`None`).
pub(super) fn counter_uuid(guid: &str, tid: Option<i64>, name: &str) -> u64 {
    hash64(&[
        b"c",
        guid.as_bytes(),
        &tid.unwrap_or(-1).to_le_bytes(),
        name.as_bytes(),
    ])
}

/// Flow id of a correlation id: a flow within its process.
pub(super) fn correlation_flow_id(guid: &str, corr: i64) -> u64 {
    hash64(&[b"f", guid.as_bytes(), &corr.to_le_bytes()])
}

/// Flow id of a message key: the value of a region's `flow_out` (send
/// side) or `flow_in` (receive side) argument. It depends on the key
/// alone, never on the process, so that the two ends, recorded by
/// different processes, link. A key is a u64 in decimal; anything else is
/// hashed as text.
pub fn message_flow_id(key: &str) -> u64 {
    let key = key.trim();
    match key.parse::<u64>() {
        Ok(v) => hash64(&[b"mpi", &v.to_le_bytes()]),
        Err(_) => hash64(&[b"mpi", key.as_bytes()]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_flow_ids_depend_on_the_key_alone() {
        assert_eq!(
            message_flow_id("18446744073709551615"),
            message_flow_id(" 18446744073709551615")
        );
        assert_ne!(message_flow_id("1"), message_flow_id("2"));
        // Text that is no u64 is hashed as text, never as 0 or an error.
        assert_ne!(message_flow_id("x1"), message_flow_id("0"));
        assert_ne!(message_flow_id("x1"), message_flow_id("x2"));
        // Not a correlation flow of any process.
        assert_ne!(message_flow_id("5"), correlation_flow_id("a", 5));
    }
}
