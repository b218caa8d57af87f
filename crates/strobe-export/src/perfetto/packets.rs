//! The framed packet stream of a Perfetto trace.
//!
//! Owns [`Packets`]: frames each `TracePacket` as a `Trace.packet` field
//! and gathers framed packets into chunks of up to [`OUT_CHUNK`] bytes
//! before they are written to the output. Packets come either as prost
//! messages ([`Packets::emit`]) or, on the hot paths (plain track events,
//! samples of interned stacks), as their fields, encoded by hand into the
//! same bytes prost writes for them. It never decides what a packet
//! says: ids, interning and timestamps are the writer's.

use std::io::Write;

use prost::Message;

use super::proto::{InternedData, TracePacket, SEQ_NEEDS_INCREMENTAL_STATE};
use crate::error::Result;

/// The packet sequence all data is written on.
pub(super) const SEQ: u32 = 1;

/// Bytes of framed packets gathered before they are written to the output
/// at once.
const OUT_CHUNK: usize = 1 << 20;

/// A trace packet's timestamp (field 8) and trusted sequence id (field
/// 10), as every hand-encoded packet begins.
#[inline]
fn put_packet_head(b: &mut Vec<u8>, ts: u64) {
    put_key(b, 8, 0);
    put_varint(b, ts);
    put_key(b, 10, 0);
    put_varint(b, u64::from(SEQ));
}

/// Bytes of `v` as a varint.
#[inline]
fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[inline]
fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}
#[inline]
fn put_key(buf: &mut Vec<u8>, field: u32, wire: u32) {
    put_varint(buf, u64::from((field << 3) | wire));
}

/// The output of a trace: framed packets on their way to `out`.
pub(super) struct Packets<W: Write> {
    out: W,
    /// Framed packets not yet handed to `out` (up to [`OUT_CHUNK`]).
    pending_out: Vec<u8>,
    /// A packet encoded by prost, before it is framed.
    buf: Vec<u8>,
    inter_buf: Vec<u8>,
    /// Packets written.
    count: u64,
}

impl<W: Write> Packets<W> {
    pub(super) fn new(out: W) -> Self {
        Packets {
            out,
            pending_out: Vec::with_capacity(OUT_CHUNK + 4096),
            buf: Vec::with_capacity(256),
            inter_buf: Vec::with_capacity(256),
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
        self.pending_out.reserve(1 + 10 + len);
        self.pending_out.push(0x0a);
        put_varint(&mut self.pending_out, len as u64);
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
        let ev_len = cat_iid.map_or(0, |c| 1 + varint_len(c))
            + 1
            + varint_len(ty as u64)
            + name_iid.map_or(0, |n| 1 + varint_len(n))
            + 1
            + varint_len(track)
            + counter.map_or(0, |_| 2 + 8);
        let inter_len = match interned {
            Some(i) => {
                self.inter_buf.clear();
                i.encode(&mut self.inter_buf)
                    .expect("a Vec grows to any encoded length");
                let n = self.inter_buf.len();
                1 + varint_len(n as u64) + n
            }
            None => 0,
        };
        let len = 1 + varint_len(ts) + 2 + 1 + varint_len(ev_len as u64) + ev_len + inter_len + 2;
        let at = self.begin_packet(len);
        let b = &mut self.pending_out;
        put_packet_head(b, ts);
        put_key(b, 11, 2);
        put_varint(b, ev_len as u64);
        if let Some(c) = cat_iid {
            put_key(b, 3, 0);
            put_varint(b, c);
        }
        put_key(b, 9, 0);
        put_varint(b, ty as u64);
        if let Some(n) = name_iid {
            put_key(b, 10, 0);
            put_varint(b, n);
        }
        put_key(b, 11, 0);
        put_varint(b, track);
        if let Some(v) = counter {
            put_key(b, 44, 1);
            b.extend_from_slice(&v.to_le_bytes());
        }
        if interned.is_some() {
            put_key(b, 12, 2);
            put_varint(b, self.inter_buf.len() as u64);
            b.extend_from_slice(&self.inter_buf);
        }
        put_key(b, 13, 0);
        put_varint(b, u64::from(SEQ_NEEDS_INCREMENTAL_STATE));
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
        let sample_len = 1
            + varint_len(u64::from(pid))
            + 1
            + varint_len(u64::from(tid))
            + callstack.map_or(0, |c| 1 + varint_len(c));
        let len = 1 + varint_len(ts) + 2 + 2 + 2 + varint_len(sample_len as u64) + sample_len;
        let at = self.begin_packet(len);
        let b = &mut self.pending_out;
        put_packet_head(b, ts);
        put_key(b, 13, 0);
        put_varint(b, u64::from(SEQ_NEEDS_INCREMENTAL_STATE));
        put_key(b, 66, 2);
        put_varint(b, sample_len as u64);
        put_key(b, 2, 0);
        put_varint(b, u64::from(pid));
        put_key(b, 3, 0);
        put_varint(b, u64::from(tid));
        if let Some(c) = callstack {
            put_key(b, 4, 0);
            put_varint(b, c);
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
