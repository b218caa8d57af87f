//! pprof output (gzip-compressed `profile.proto`).
//!
//! Owns the `profile.proto` messages (prost, field numbers from
//! google/pprof `proto/profile.proto`) and [`write_pprof`]: one sample per
//! distinct (process, thread, stack) with three values, `samples/count`
//! (on-CPU samples), `cpu/nanoseconds` (the summed weights of the on-CPU
//! samples, see `strobe_db::Profile::time_kind`) and `off_cpu/nanoseconds`
//! (the summed weights of the `off_cpu` samples: blocked time), locations
//! per distinct frame, functions per distinct name, mappings per module
//! with build ids, `pid`/`tid` labels. Aggregation happens in SQLite;
//! memory grows with distinct stacks and frames, never with samples. It
//! never does anything but encode.

#![allow(missing_docs)]

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use flate2::write::GzEncoder;
use prost::Message;
use strobe_db::visit::{ModuleRow, Order, ProcessSamples, ProfileSink, Run, Stream};
use strobe_db::Profile;

use crate::error::{ExportError, Result};

#[derive(Clone, PartialEq, prost::Message)]
pub struct PprofProfile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}
impl Strings {
    fn new() -> Self {
        let mut s = Strings::default();
        s.get("");
        s
    }
    fn get(&mut self, v: &str) -> i64 {
        if let Some(i) = self.index.get(v) {
            return *i;
        }
        let i = self.table.len() as i64;
        self.table.push(v.to_string());
        self.index.insert(v.to_string(), i);
        i
    }
}

/// What a pprof conversion wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PprofStats {
    /// On-CPU samples (the `samples/count` total).
    pub samples: u64,
    /// On-CPU time (ns, the `cpu/nanoseconds` total).
    pub cpu_ns: u64,
    /// Off-CPU samples.
    pub off_cpu_samples: u64,
    /// Off-CPU (blocked) time (ns, the `off_cpu/nanoseconds` total).
    pub off_cpu_ns: u64,
    /// Distinct (process, thread, stack) entries.
    pub entries: u64,
    /// The sampling period (the profile's `period`; what an on-CPU sample
    /// without a recorded weight stands for).
    pub period_ns: i64,
}

/// The pprof encoder as a sink of the profile: modules first, then the
/// samples counted per stack, one process at a time (its stacks resolved
/// by the reader).
struct Pprof {
    prof: PprofProfile,
    s: Strings,
    k_pid: i64,
    k_tid: i64,
    /// (guid, path) → module.
    modules: HashMap<(String, Arc<str>), ModuleRow>,
    mappings: HashMap<(String, Arc<str>), u64>,
    functions: HashMap<String, u64>,
    locations: HashMap<crate::FrameKey, u64>,
    st: PprofStats,
}

impl ProfileSink for Pprof {
    type Error = ExportError;

    fn order(&self) -> Order {
        Order::Sequence(&[Stream::SampleCounts])
    }

    fn resolve_counted_stacks(&self) -> bool {
        true
    }

    fn begin(&mut self, run: &Run) -> Result<()> {
        for m in &run.modules {
            self.modules
                .insert((m.guid.clone(), m.path.clone()), m.clone());
        }
        Ok(())
    }

    fn sample_counts(&mut self, ps: ProcessSamples) -> Result<()> {
        for g in ps.groups {
            let (pid, tid, stack) = (g.pid, g.tid, g.stack_id);
            let guid = g.guid.to_string();
            let frames = match stack {
                Some(id) => ps
                    .stacks
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| Arc::from(Vec::new())),
                None => std::sync::Arc::from(Vec::new()),
            };

            let mut loc_ids = Vec::with_capacity(frames.len());
            for f in frames.iter() {
                let key = (guid.clone(), f.module.clone(), f.rel_pc, f.function.clone());
                let id = match self.locations.get(&key) {
                    Some(i) => *i,
                    None => {
                        let name = f.display_name();
                        let fid = match self.functions.get(&name) {
                            Some(i) => *i,
                            None => {
                                let id = self.prof.function.len() as u64 + 1;
                                let n = self.s.get(&name);
                                let file = f.file.as_deref().map(|x| self.s.get(x)).unwrap_or(0);
                                self.prof.function.push(Function {
                                    id,
                                    name: n,
                                    system_name: n,
                                    filename: file,
                                });
                                self.functions.insert(name, id);
                                id
                            }
                        };
                        let (mapping_id, address) = match &f.module {
                            Some(m) => {
                                let mk = (guid.clone(), m.clone());
                                let mid = match self.mappings.get(&mk) {
                                    Some(i) => *i,
                                    None => {
                                        let id = self.prof.mapping.len() as u64 + 1;
                                        let info = self.modules.get(&mk);
                                        let start = info.map(|i| i.load_address).unwrap_or(0);
                                        self.prof.mapping.push(Mapping {
                                            id,
                                            memory_start: start,
                                            memory_limit: start + info.map(|i| i.size).unwrap_or(0),
                                            file_offset: 0,
                                            filename: self.s.get(m),
                                            build_id: info
                                                .and_then(|i| i.build_id.as_deref())
                                                .map(|b| self.s.get(b))
                                                .unwrap_or(0),
                                            has_functions: f.function.is_some(),
                                        });
                                        self.mappings.insert(mk.clone(), id);
                                        id
                                    }
                                };
                                let base =
                                    self.modules.get(&mk).map(|i| i.load_address).unwrap_or(0);
                                (mid, base + f.rel_pc)
                            }
                            None => (0, f.rel_pc),
                        };
                        let id = self.prof.location.len() as u64 + 1;
                        self.prof.location.push(Location {
                            id,
                            mapping_id,
                            address,
                            line: vec![Line {
                                function_id: fid,
                                line: f.line.map(|l| l as i64).unwrap_or(0),
                            }],
                        });
                        self.locations.insert(key, id);
                        id
                    }
                };
                loc_ids.push(id);
            }
            self.prof.sample.push(Sample {
                location_id: loc_ids,
                value: vec![
                    i64::try_from(g.samples).unwrap_or(i64::MAX),
                    i64::try_from(g.cpu_ns).unwrap_or(i64::MAX),
                    i64::try_from(g.off_cpu_ns).unwrap_or(i64::MAX),
                ],
                label: vec![
                    Label {
                        key: self.k_pid,
                        str: 0,
                        num: pid,
                    },
                    Label {
                        key: self.k_tid,
                        str: 0,
                        num: tid,
                    },
                ],
            });
            self.st.samples += g.samples;
            self.st.cpu_ns += g.cpu_ns;
            self.st.off_cpu_samples += g.off_cpu_samples;
            self.st.off_cpu_ns += g.off_cpu_ns;
            self.st.entries += 1;
        }
        Ok(())
    }
}

/// Writes the samples of a profile as a gzip-compressed pprof profile
/// (default sample type `cpu`; `go tool pprof -sample_index=off_cpu`
/// shows blocked time). Fails with [`ExportError::Empty`] when there are
/// no samples.
pub fn write_pprof<W: Write>(p: &Profile, out: W) -> Result<PprofStats> {
    let period = p.sampling_period_ns();
    let bounds = p.run_bounds()?;
    let mut s = Strings::new();
    let prof = PprofProfile {
        sample_type: vec![
            ValueType {
                r#type: s.get("samples"),
                unit: s.get("count"),
            },
            ValueType {
                r#type: s.get("cpu"),
                unit: s.get("nanoseconds"),
            },
            ValueType {
                r#type: s.get("off_cpu"),
                unit: s.get("nanoseconds"),
            },
        ],
        period_type: Some(ValueType {
            r#type: s.get("cpu"),
            unit: s.get("nanoseconds"),
        }),
        period,
        default_sample_type: s.get("cpu"),
        ..Default::default()
    };
    let (k_pid, k_tid) = (s.get("pid"), s.get("tid"));
    let mut sink = Pprof {
        prof,
        s,
        k_pid,
        k_tid,
        modules: HashMap::new(),
        mappings: HashMap::new(),
        functions: HashMap::new(),
        locations: HashMap::new(),
        st: PprofStats {
            period_ns: period,
            ..Default::default()
        },
    };
    p.visit(&mut sink)?;
    let Pprof {
        mut prof,
        mut s,
        st,
        ..
    } = sink;
    if st.samples + st.off_cpu_samples == 0 {
        return Err(ExportError::Empty {
            what: "pprof".into(),
            needed: "samples".into(),
        });
    }
    if let Some(b) = bounds {
        // The window's length when one is set (`--start/--end`).
        let (from, to) = p.window();
        let start = from.map_or(b.start, |s| s.max(b.start));
        let end = to.map_or(b.end, |e| e.min(b.end));
        prof.duration_nanos = (end - start).max(0);
    }
    prof.string_table = std::mem::take(&mut s.table);
    let mut gz = GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&prof.encode_to_vec())?;
    gz.finish()?.flush()?;
    Ok(st)
}
