//! The framed packet stream of a Perfetto trace.
//!
//! Owns [`Packets`]: frames each `TracePacket` as a `Trace.packet` field
//! and gathers framed packets into chunks of up to [`OUT_CHUNK`] bytes
//! before they are written to the output. Packets come either as prost
//! messages ([`Packets::emit`]) or, on the hot paths (plain track events,
//! samples of interned stacks), as their fields, encoded one by one into
//! the same bytes prost writes for the whole message, without building
//! it: lengths from prost's field encoders (`prost::encoding`), varints
//! written here ([`put_varint`]). It never decides what a packet says:
//! ids, interning and timestamps are the writer's.

use std::io::Write;

use prost::encoding::{
    double, encoded_len_varint, int32, key_len, message, uint32, uint64, WireType,
};
use prost::Message;

use super::proto::{InternedData, TracePacket, SEQ_NEEDS_INCREMENTAL_STATE};
use crate::error::Result;

/// The packet sequence all data is written on.
pub(super) const SEQ: u32 = 1;

/// Bytes of framed packets gathered before they are written to the output
/// at once.
const OUT_CHUNK: usize = 1 << 20;

/// Appends `v` as a varint: the bytes of prost's `encode_varint`, but
/// pushed on the `Vec` (prost's writes each byte through
/// `BufMut::put_u8`, which took a region-heavy trace's conversion about
/// 12% more CPU time).
#[inline]
fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

/// Appends the key of field `tag` with wire type `wire`.
#[inline]
fn put_key(b: &mut Vec<u8>, tag: u32, wire: WireType) {
    put_varint(b, u64::from((tag << 3) | wire as u32));
}

/// Appends varint field `tag` holding `v`: what prost writes for a
/// `uint32`, `uint64` or `int32` field (an `int32` sign-extended to 64
/// bits first).
#[inline]
fn put_uint(b: &mut Vec<u8>, tag: u32, v: u64) {
    put_key(b, tag, WireType::Varint);
    put_varint(b, v);
}

/// A trace packet's timestamp (field 8) and trusted sequence id (field
/// 10), as every hand-encoded packet begins.
#[inline]
fn put_packet_head(b: &mut Vec<u8>, ts: u64) {
    put_uint(b, 8, ts);
    put_uint(b, 10, u64::from(SEQ));
}

/// Bytes of [`put_packet_head`]'s fields.
#[inline]
fn packet_head_len(ts: u64) -> usize {
    uint64::encoded_len(8, &ts) + uint32::encoded_len(10, &SEQ)
}

/// The key and length of a length-delimited field `tag` of `len` bytes.
#[inline]
fn put_len_key(b: &mut Vec<u8>, tag: u32, len: usize) {
    put_key(b, tag, WireType::LengthDelimited);
    put_varint(b, len as u64);
}

/// Bytes of a length-delimited field `tag` of `len` bytes.
#[inline]
fn len_field_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

/// The output of a trace: framed packets on their way to `out`.
pub(super) struct Packets<W: Write> {
    out: W,
    /// Framed packets not yet handed to `out` (up to [`OUT_CHUNK`]).
    pending_out: Vec<u8>,
    /// A packet encoded by prost, before it is framed.
    buf: Vec<u8>,
    /// Packets written.
    count: u64,
}

impl<W: Write> Packets<W> {
    pub(super) fn new(out: W) -> Self {
        Packets {
            out,
            pending_out: Vec::with_capacity(OUT_CHUNK + 4096),
            buf: Vec::with_capacity(256),
            count: 0,
        }
    }

    /// Packets written so far.
    pub(super) fn count(&self) -> u64 {
        self.count
    }

    /// Starts a packet of `len` bytes: writes its frame header (the
    /// `Trace.packet` key and length) and reserves room for it. Returns
    /// where the packet's bytes start, for [`Packets::end_packet`].
    #[inline]
    fn begin_packet(&mut self, len: usize) -> (usize, usize) {
        self.pending_out.reserve(len_field_len(1, len));
        put_len_key(&mut self.pending_out, 1, len);
        (self.pending_out.len(), len)
    }

    /// Ends the packet begun at `start` (checking, in debug builds, that
    /// it has the length its header says): counts it and hands full
    /// chunks to the output.
    #[inline]
    fn end_packet(&mut self, (start, len): (usize, usize)) -> Result<()> {
        debug_assert_eq!(self.pending_out.len() - start, len, "packet length");
        self.count += 1;
        if self.pending_out.len() >= OUT_CHUNK {
            self.flush_pending()?;
        }
        Ok(())
    }

    fn flush_pending(&mut self) -> Result<()> {
        self.out.write_all(&self.pending_out)?;
        self.pending_out.clear();
        Ok(())
    }

    /// Writes a packet prost encodes.
    pub(super) fn emit(&mut self, p: &TracePacket) -> Result<()> {
        self.buf.clear();
        p.encode(&mut self.buf)
            .expect("a Vec grows to any encoded length");
        let at = self.begin_packet(self.buf.len());
        self.pending_out.extend_from_slice(&self.buf);
        self.end_packet(at)
    }

    /// Encodes a plain track event (no annotations, no flows) by hand: the
    /// hot path of large traces. The bytes are those prost writes for the
    /// same [`TracePacket`] (fields in tag order).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn track_event(
        &mut self,
        ts: u64,
        ty: i32,
        track: u64,
        name_iid: Option<u64>,
        cat_iid: Option<u64>,
        counter: Option<f64>,
        interned: Option<&InternedData>,
    ) -> Result<()> {
        let ev_len = cat_iid.map_or(0, |c| uint64::encoded_len(3, &c))
            + int32::encoded_len(9, &ty)
            + name_iid.map_or(0, |n| uint64::encoded_len(10, &n))
            + uint64::encoded_len(11, &track)
            + counter.map_or(0, |v| double::encoded_len(44, &v));
        let len = packet_head_len(ts)
            + len_field_len(11, ev_len)
            + interned.map_or(0, |i| message::encoded_len(12, i))
            + uint32::encoded_len(13, &SEQ_NEEDS_INCREMENTAL_STATE);
        let at = self.begin_packet(len);
        let b = &mut self.pending_out;
        put_packet_head(b, ts);
        put_len_key(b, 11, ev_len);
        if let Some(c) = cat_iid {
            put_uint(b, 3, c);
        }
        put_uint(b, 9, ty as u64);
        if let Some(n) = name_iid {
            put_uint(b, 10, n);
        }
        put_uint(b, 11, track);
        if let Some(v) = counter {
            put_key(b, 44, WireType::SixtyFourBit);
            b.extend_from_slice(&v.to_le_bytes());
        }
        if let Some(i) = interned {
            message::encode(12, i, b);
        }
        put_uint(b, 13, u64::from(SEQ_NEEDS_INCREMENTAL_STATE));
        self.end_packet(at)
    }

    /// Encodes an on-CPU sample whose call stack is already interned (or
    /// absent) by hand: a `PerfSample` packet, the same bytes prost writes.
    #[inline]
    pub(super) fn sample(
        &mut self,
        ts: u64,
        pid: u32,
        tid: u32,
        callstack: Option<u64>,
    ) -> Result<()> {
        let sample_len = uint32::encoded_len(2, &pid)
            + uint32::encoded_len(3, &tid)
            + callstack.map_or(0, |c| uint64::encoded_len(4, &c));
        let len = packet_head_len(ts)
            + uint32::encoded_len(13, &SEQ_NEEDS_INCREMENTAL_STATE)
            + len_field_len(66, sample_len);
        let at = self.begin_packet(len);
        let b = &mut self.pending_out;
        put_packet_head(b, ts);
        put_uint(b, 13, u64::from(SEQ_NEEDS_INCREMENTAL_STATE));
        put_len_key(b, 66, sample_len);
        put_uint(b, 2, u64::from(pid));
        put_uint(b, 3, u64::from(tid));
        if let Some(c) = callstack {
            put_uint(b, 4, c);
        }
        self.end_packet(at)
    }

    /// Writes what is left and flushes; returns the output.
    pub(super) fn finish(mut self) -> Result<W> {
        self.flush_pending()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::proto::*;
    use super::*;

    /// `p` framed as one packet of a trace, as prost writes it.
    fn framed(p: TracePacket) -> Vec<u8> {
        Trace { packet: vec![p] }.encode_to_vec()
    }

    /// Values at every varint length boundary.
    const VALUES: [u64; 8] = [0, 1, 127, 128, 16_383, 16_384, 1 << 35, u64::MAX];

    #[test]
    fn hand_encoded_track_events_are_the_bytes_prost_writes() {
        let interned = InternedData {
            event_names: vec![EventName {
                iid: Some(300),
                name: Some("a name".into()),
            }],
            ..Default::default()
        };
        for (k, &v) in VALUES.iter().enumerate() {
            let ty = [TYPE_SLICE_BEGIN, TYPE_COUNTER, -1][k % 3];
            let some = |x: u64| (k % 2 == 0).then_some(x);
            let counter = (k % 4 < 2).then_some(v as f64 / 3.0);
            let inter = (k % 3 == 1).then_some(&interned);
            let mut p = Packets::new(Vec::new());
            p.track_event(v, ty, v ^ 1, some(v), some(v / 2), counter, inter)
                .unwrap();
            let want = framed(TracePacket {
                timestamp: Some(v),
                trusted_packet_sequence_id: Some(SEQ),
                sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
                track_event: Some(TrackEvent {
                    r#type: Some(ty),
                    track_uuid: Some(v ^ 1),
                    name_iid: some(v),
                    category_iids: some(v / 2).into_iter().collect(),
                    double_counter_value: counter,
                    ..Default::default()
                }),
                interned_data: inter.cloned(),
                ..Default::default()
            });
            assert_eq!(p.count(), 1);
            assert_eq!(p.finish().unwrap(), want, "value {v}");
        }
    }

    #[test]
    fn hand_encoded_samples_are_the_bytes_prost_writes() {
        for (k, &v) in VALUES.iter().enumerate() {
            let (pid, tid) = (v as u32, (v >> 7) as u32);
            let callstack = (k % 2 == 0).then_some(v);
            let mut p = Packets::new(Vec::new());
            p.sample(v, pid, tid, callstack).unwrap();
            let want = framed(TracePacket {
                timestamp: Some(v),
                trusted_packet_sequence_id: Some(SEQ),
                sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
                perf_sample: Some(PerfSample {
                    cpu: None,
                    pid: Some(pid),
                    tid: Some(tid),
                    callstack_iid: callstack,
                }),
                ..Default::default()
            });
            assert_eq!(p.finish().unwrap(), want, "value {v}");
        }
    }
}
