//! The printer: a built-in debugging subscriber that writes one line per
//! notification (timestamp, stream, type, event name, source location,
//! unique id, instance, metadata), like the seed's basic collector.
//!
//! Owns its output writer behind a mutex: it formats and locks on every
//! notification, so it is for debugging, never for measurement.

use std::collections::HashSet;
use std::ffi::CStr;
use std::io::Write;
use std::sync::{Arc, Mutex};

use crate::callbacks::Notification;
use crate::framework::Framework;
use crate::framework::{StreamInit, Subscriber};
use crate::types::{object_type, tool_id, trace_point, StreamId};

/// The printer subscriber.
#[derive(Clone)]
pub struct Printer {
    inner: Arc<Inner>,
}

struct Inner {
    out: Mutex<Box<dyn Write + Send>>,
    registered: Mutex<HashSet<(u64, StreamId)>>,
}

/// Renders a metadata value for display.
fn render_object(kind: u8, data: &[u8]) -> String {
    match (kind, data.len()) {
        (object_type::STRING, _) | (object_type::UNKNOWN, _) => {
            String::from_utf8_lossy(data.strip_suffix(&[0]).unwrap_or(data)).into_owned()
        }
        (object_type::SIGNED_INTEGER, 8) => {
            i64::from_ne_bytes(data.try_into().expect("len 8")).to_string()
        }
        (object_type::UNSIGNED_INTEGER, 8) => {
            u64::from_ne_bytes(data.try_into().expect("len 8")).to_string()
        }
        (object_type::FLOATING, 8) => {
            f64::from_ne_bytes(data.try_into().expect("len 8")).to_string()
        }
        (object_type::BOOLEAN, 1) => (data[0] != 0).to_string(),
        _ => format!("<{} bytes>", data.len()),
    }
}

/// Formats one notification as the printer's line (no trailing newline).
pub fn format_notification(n: &Notification<'_>) -> String {
    let fw = n.framework;
    let stream = fw
        .stream_name(n.stream)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| format!("#{}", n.stream));
    let ty = match trace_point::name(n.trace_type) {
        Some(t) => t.to_string(),
        None if tool_id(n.trace_type) != 0 => {
            let vendor = fw
                .vendor_name(tool_id(n.trace_type))
                .map(|v| String::from_utf8_lossy(&v).into_owned())
                .unwrap_or_default();
            format!("{vendor}:{:#06x}", n.trace_type)
        }
        None => format!("{:#06x}", n.trace_type),
    };
    let mut line = format!(
        "{} stream={} type={} instance={}",
        strobe_core::clock::now_ns(),
        stream,
        ty,
        n.instance
    );
    if let Some(ev) = n.event {
        line.push_str(&format!(" uid={}", ev.unique_id));
        if let Some(p) = ev.payload() {
            if let Some(name) = p.name() {
                line.push_str(&format!(" name={}", name.to_string_lossy()));
            }
            if let Some(file) = p.source_file() {
                line.push_str(&format!(" at={}", file.to_string_lossy()));
                if let Some(l) = p.line() {
                    line.push_str(&format!(":{l}"));
                    if let Some(c) = p.column() {
                        line.push_str(&format!(":{c}"));
                    }
                }
            }
            if let Some(a) = p.code_ptr() {
                line.push_str(&format!(" addr={a:#x}"));
            }
        }
        if let Ok(md) = fw.metadata(ev) {
            for (k, v) in md {
                let key = fw
                    .lookup_string(k)
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let val = fw
                    .lookup_object(v)
                    .map(|o| render_object(o.kind, &o.data))
                    .unwrap_or_default();
                line.push_str(&format!(" {key}={val}"));
            }
        }
    }
    if let Some(p) = n.parent {
        line.push_str(&format!(" parent={}", p.unique_id));
    }
    line
}

impl Printer {
    /// A printer writing to stderr.
    pub fn stderr() -> Self {
        Self::to_writer(Box::new(std::io::stderr()))
    }

    /// A printer writing to `out`.
    pub fn to_writer(out: Box<dyn Write + Send>) -> Self {
        Printer {
            inner: Arc::new(Inner {
                out: Mutex::new(out),
                registered: Mutex::new(HashSet::new()),
            }),
        }
    }

    /// Subscribes to every predefined type of `stream` on `framework`.
    pub fn attach(&self, framework: &Framework, stream: StreamId) {
        let key = (framework.id(), stream);
        if !self
            .inner
            .registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key)
        {
            return;
        }
        for &t in trace_point::ALL_PREDEFINED {
            let inner = self.inner.clone();
            let _ = framework.register_callback(stream, t, move |n| {
                let line = format_notification(n);
                let mut out = inner.out.lock().unwrap_or_else(|e| e.into_inner());
                let _ = writeln!(out, "{line}");
            });
        }
    }
}

impl Subscriber for Printer {
    fn name(&self) -> &str {
        "strobe-printer"
    }
    fn init(&self, framework: &Framework, stream: &StreamInit<'_>) {
        self.attach(framework, stream.id);
    }
    fn finish(&self, _framework: &Framework, stream_name: &CStr) {
        let mut out = self.inner.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "stream {} finalized", stream_name.to_string_lossy());
        let _ = out.flush();
    }
}
