//! What the runtime inside a profiled process needs to know, resolved by
//! the launcher and carried in one environment variable.
//!
//! Owns the fields, their defaults and the text encoding. The runtime
//! decodes it with no config-file parser and no settings registry: a
//! malformed value is an error naming the field, never a guess. Encoding
//! and decoding allocate: they run in the launcher and at the runtime's
//! start-up, never in a signal handler.

use crate::segment::Layout;

/// Environment variable carrying the encoded [`RuntimeConfig`].
pub const CONFIG_ENV: &str = "STROBE_INTERNAL_RUNTIME";
/// Environment variable naming the collector's socket (abstract namespace).
pub const COLLECTOR_ENV: &str = "STROBE_INTERNAL_COLLECTOR";

/// The runtime's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeConfig {
    /// CPU-time sampling rate in Hz; 0 = off.
    pub cputime_hz: f64,
    /// Its signal; 0 = choose a free real-time signal.
    pub cputime_signal: i32,
    /// Real-time sampling rate in Hz; 0 = off.
    pub realtime_hz: f64,
    /// Its signal; 0 = choose a free real-time signal.
    pub realtime_signal: i32,
    /// Most frames per sample.
    pub max_depth: u32,
    /// Segment sizes.
    pub layout: Layout,
    /// Regions, markers and tracing notifications are recorded.
    pub tracing: bool,
    /// Event records wait for room (true) or are dropped when a ring is
    /// full.
    pub lossless: bool,
    /// Longest a thread waits for room for one event record, in ns.
    pub wait_ns: u64,
    /// Forked children are profiled.
    pub fork_follow: bool,
    /// The `verbose` setting.
    pub verbose: i32,
    /// The `output_file` template.
    pub output_file: String,
    /// Hot-path events (regions, markers, tracing notifications) carry
    /// time-stamp counter ticks, which the collector turns into
    /// `CLOCK_MONOTONIC` nanoseconds (the launcher sets it only where the
    /// kernel itself keeps time with an invariant TSC).
    pub tsc: bool,
    /// Counters read on every thread around regions and with every
    /// sample (`sampling_events` and what `sampling_metrics` needs), as
    /// canonical names the counter catalog resolves, in the launcher's
    /// order (records carry their values in this order). Empty: none, and
    /// the program gets no descriptor for them.
    pub counters: Vec<String>,
    /// The process takes part in causal profiling: every sample is
    /// checked against the experiment the collector runs, and threads
    /// pause for the delay they owe (see [`crate::causal`]).
    pub causal: bool,
    /// Whether the CPU-time (0) and real-time (1) samplers take samples
    /// from the process's first instant (no delay, no trace periods): the
    /// runtime sets the segment's `sampling_on` flags so before the
    /// collector has looked at the process (it may be slow to, on a loaded
    /// machine), instead of missing what the program does until then.
    pub sampling_at_start: [bool; 2],
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cputime_hz: 250.0,
            cputime_signal: 0,
            realtime_hz: 0.0,
            realtime_signal: 0,
            max_depth: 512,
            layout: Layout {
                slots: 8192,
                sample_ring_bytes: 64 * 1024,
                event_ring_bytes: 256 * 1024,
            },
            tracing: true,
            lossless: true,
            wait_ns: 1_000_000_000,
            fork_follow: true,
            verbose: 0,
            output_file: "%hostname%/%pid%.db".into(),
            tsc: false,
            counters: Vec::new(),
            causal: false,
            sampling_at_start: [true; 2],
        }
    }
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            ';' | '%' | '=' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn unescape(text: &str) -> Option<String> {
    let mut out = Vec::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl RuntimeConfig {
    /// The text carried in [`CONFIG_ENV`].
    pub fn encode(&self) -> String {
        let fields: [(&str, String); 19] = [
            ("cputime_hz", self.cputime_hz.to_string()),
            ("cputime_signal", self.cputime_signal.to_string()),
            ("realtime_hz", self.realtime_hz.to_string()),
            ("realtime_signal", self.realtime_signal.to_string()),
            ("max_depth", self.max_depth.to_string()),
            ("slots", self.layout.slots.to_string()),
            ("sample_ring", self.layout.sample_ring_bytes.to_string()),
            ("event_ring", self.layout.event_ring_bytes.to_string()),
            ("tracing", u8::from(self.tracing).to_string()),
            ("lossless", u8::from(self.lossless).to_string()),
            ("wait_ns", self.wait_ns.to_string()),
            ("fork_follow", u8::from(self.fork_follow).to_string()),
            ("verbose", self.verbose.to_string()),
            ("output_file", escape(&self.output_file)),
            ("tsc", u8::from(self.tsc).to_string()),
            ("counters", escape(&self.counters.join("\n"))),
            ("causal", u8::from(self.causal).to_string()),
            (
                "cputime_at_start",
                u8::from(self.sampling_at_start[0]).to_string(),
            ),
            (
                "realtime_at_start",
                u8::from(self.sampling_at_start[1]).to_string(),
            ),
        ];
        fields
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";")
    }

    /// Decodes [`encode`](Self::encode)'s text. Unknown fields are
    /// ignored (a newer launcher); a bad value is an error naming it.
    pub fn decode(text: &str) -> Result<RuntimeConfig, String> {
        let mut c = RuntimeConfig::default();
        for field in text.split(';').filter(|f| !f.is_empty()) {
            let (key, value) = field
                .split_once('=')
                .ok_or_else(|| format!("{CONFIG_ENV}: '{field}' is not key=value"))?;
            let bad = || format!("{CONFIG_ENV}: bad value '{value}' for {key}");
            let flag = |v: &str| match v {
                "0" => Ok(false),
                "1" => Ok(true),
                _ => Err(bad()),
            };
            match key {
                "cputime_hz" => c.cputime_hz = value.parse().map_err(|_| bad())?,
                "cputime_signal" => c.cputime_signal = value.parse().map_err(|_| bad())?,
                "realtime_hz" => c.realtime_hz = value.parse().map_err(|_| bad())?,
                "realtime_signal" => c.realtime_signal = value.parse().map_err(|_| bad())?,
                "max_depth" => c.max_depth = value.parse().map_err(|_| bad())?,
                "slots" => c.layout.slots = value.parse().map_err(|_| bad())?,
                "sample_ring" => c.layout.sample_ring_bytes = value.parse().map_err(|_| bad())?,
                "event_ring" => c.layout.event_ring_bytes = value.parse().map_err(|_| bad())?,
                "tracing" => c.tracing = flag(value)?,
                "lossless" => c.lossless = flag(value)?,
                "wait_ns" => c.wait_ns = value.parse().map_err(|_| bad())?,
                "fork_follow" => c.fork_follow = flag(value)?,
                "verbose" => c.verbose = value.parse().map_err(|_| bad())?,
                "output_file" => c.output_file = unescape(value).ok_or_else(bad)?,
                "tsc" => c.tsc = flag(value)?,
                "causal" => c.causal = flag(value)?,
                "cputime_at_start" => c.sampling_at_start[0] = flag(value)?,
                "realtime_at_start" => c.sampling_at_start[1] = flag(value)?,
                "counters" => {
                    c.counters = unescape(value)
                        .ok_or_else(bad)?
                        .split('\n')
                        .filter(|n| !n.is_empty())
                        .map(str::to_string)
                        .collect()
                }
                _ => {}
            }
        }
        for (hz, name) in [(c.cputime_hz, "cputime_hz"), (c.realtime_hz, "realtime_hz")] {
            if !(hz >= 0.0 && hz.is_finite()) {
                return Err(format!("{CONFIG_ENV}: {name} must be a rate ≥ 0"));
            }
        }
        if c.cputime_signal != 0 && c.cputime_signal == c.realtime_signal {
            return Err(format!(
                "{CONFIG_ENV}: both samplers use signal {}",
                c.cputime_signal
            ));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_awkward_text() {
        let c = RuntimeConfig {
            realtime_hz: 1000.5,
            tracing: false,
            output_file: "a;b=%pid%.db".into(),
            counters: vec!["task-clock".into(), "cpu/event=0x3c,umask=0x00/".into()],
            causal: true,
            sampling_at_start: [false, true],
            ..Default::default()
        };
        assert_eq!(RuntimeConfig::decode(&c.encode()).unwrap(), c);
    }

    #[test]
    fn bad_values_are_named() {
        let e = RuntimeConfig::decode("cputime_hz=fast").unwrap_err();
        assert!(e.contains("cputime_hz") && e.contains("fast"), "{e}");
        assert!(RuntimeConfig::decode("lossless=2").is_err());
        assert!(RuntimeConfig::decode("cputime_signal=40;realtime_signal=40").is_err());
        assert_eq!(
            RuntimeConfig::decode("future_field=1").unwrap(),
            RuntimeConfig::default()
        );
    }
}
