//! The consumer side of the sample rings: decoding what the handler wrote
//! (`strobe_wire::sample`) and handing it to a [`SampleSink`].
//!
//! The producer (the handler) knows nothing of where samples go; whoever
//! drains a ring (the collector, or a test) decides. Never runs in a
//! signal handler.

use strobe_wire::ring::{Corrupt, ShmRing};
use strobe_wire::sample::{decode_sample, Sample};

/// Receives drained samples.
pub trait SampleSink {
    /// One sample; the frames are only valid during the call.
    fn deliver(&mut self, sample: &Sample<'_>);
}

/// Moves every sample out of `ring` into `sink`; malformed records are
/// skipped. Returns the number of samples delivered.
pub fn drain_samples(ring: &ShmRing, sink: &mut dyn SampleSink) -> Result<usize, Corrupt> {
    let mut delivered = 0;
    ring.drain(|payload| {
        if let Some(sample) = decode_sample(payload) {
            sink.deliver(&sample);
            delivered += 1;
        }
    })?;
    Ok(delivered)
}
