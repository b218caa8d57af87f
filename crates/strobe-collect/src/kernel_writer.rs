//! Recording the kernel's samples, on the writer thread.
//!
//! Owns, per process the kernel samples: its unwinder (modules from
//! `/proc/PID/maps` at its first sample and from mapping records after),
//! pairing each thread's context-switch sample, switch-out and switch-in
//! records into off-CPU samples (also when the switch-in was read first,
//! from another CPU's ring), the process image the samples go to (the runtime's, when the runtime is
//! in the process and its own sampler is off, else one of its own that
//! ends when the kernel says the process exited or exec'd), and the count
//! of records the kernel dropped. Never records a thread twice: in `auto`
//! mode the samples of a process that has the runtime are left out, but
//! for the threads the collector handed to the kernel.

use crate::batch::Batch;
use crate::kernel::records::{decode, time_of, Record};
use crate::kernel::unwind::ProcessUnwinder;
use crate::process::Process;
use crate::source::Source;
use crate::Options;
use std::collections::HashMap;
use strobe_db::SampleKind;
use strobe_wire::sample::{Sample, TimerClock};

/// The unwinder of process `pid`, made (from its memory map) on first use.
fn unwinder_of(unwinders: &mut HashMap<i32, ProcessUnwinder>, pid: i32) -> &mut ProcessUnwinder {
    unwinders
        .entry(pid)
        .or_insert_with(|| ProcessUnwinder::for_process(pid))
}

/// A kernel sample as the database writer takes it (the kernel reads no
/// CPU time or RSS for it).
fn kernel_sample(tid: i32, time_ns: u64, complete: bool, frames: &[u64]) -> Sample<'_> {
    Sample {
        tid,
        timestamp_ns: time_ns,
        cpu_time_ns: 0,
        peak_rss_kb: 0,
        clock: TimerClock::ThreadCpu,
        complete,
        overruns: 0,
        frames,
        counters: &[],
    }
}

/// The writer's kernel-sampling state.
#[derive(Default)]
pub struct KernelWriter {
    unwinders: HashMap<i32, ProcessUnwinder>,
    targets: Targets,
    lost: u64,
    /// Processes whose main thread exited (finished at the end of the run
    /// or when their pid is reused).
    exited: std::collections::HashSet<i32>,
    /// Threads that left their CPU: where, by tid, until they come back.
    off_cpu: HashMap<i32, SwitchedOut>,
    /// Switch-in records read before the switch-out they end (a thread can
    /// leave one CPU and come back on another whose ring was read first):
    /// tid → when it came back.
    early_in: HashMap<i32, u64>,
}

/// A thread that left its CPU: its stack then, and whether it blocked
/// (a preempted thread could have gone on running: not off-CPU time).
struct SwitchedOut {
    pid: i32,
    time_ns: u64,
    frames: Vec<u64>,
    complete: bool,
    blocked: bool,
    /// When it came back, if that record was read first.
    back_ns: Option<u64>,
}

/// Where the kernel's records go.
#[derive(Default)]
struct Targets {
    /// Processes with no runtime, by pid.
    own: HashMap<i32, Process>,
    /// Processes with the runtime: pid → the writer's image id.
    runtime: HashMap<i32, u64>,
    /// Threads of processes with the runtime that the kernel samples (the
    /// in-program sampler cannot reach them).
    threads: std::collections::HashSet<(i32, i32)>,
}

impl Targets {
    /// The process image the records of thread `tid` of `pid` go to: the
    /// runtime's image (when the kernel samples it: `for_all`, or a thread
    /// the runtime cannot sample), else one of the writer's own (first
    /// seen at `time_ns`).
    fn route<'p>(
        &'p mut self,
        processes: &'p mut HashMap<u64, Process>,
        for_all: bool,
        (pid, tid): (i32, i32),
        time_ns: u64,
    ) -> Option<&'p mut Process> {
        match self.runtime.get(&pid) {
            Some(id) if for_all || self.threads.contains(&(pid, tid)) => processes.get_mut(id),
            Some(_) => None,
            None => Some(
                self.own
                    .entry(pid)
                    .or_insert_with(|| Process::kernel_only(pid, time_ns)),
            ),
        }
    }
}

impl KernelWriter {
    /// The runtime of `pid` connected as image `id`; returns the process
    /// of its own the kernel sampled under that pid before (an image that
    /// exec'd into one with the runtime), for the caller to finish.
    pub fn runtime_started(&mut self, pid: i32, id: u64) -> Option<Process> {
        self.targets.runtime.insert(pid, id);
        self.targets.own.remove(&pid)
    }

    /// The kernel samples thread `tid` of `pid`, which has the runtime;
    /// returns the image id of `pid`.
    pub fn thread_sampled(&mut self, pid: i32, tid: i32) -> Option<u64> {
        self.targets.threads.insert((pid, tid));
        self.targets.runtime.get(&pid).copied()
    }

    /// The kernel samples every thread of `pid`, which runs an image with
    /// no runtime: its records go to a process of the writer's own, even
    /// before the runtime image it replaces is seen to end.
    pub fn process_sampled(&mut self, pid: i32) {
        self.targets.runtime.remove(&pid);
    }

    /// Image `id` of the runtime ended.
    pub fn runtime_ended(&mut self, id: u64) {
        self.targets.runtime.retain(|_, v| *v != id);
    }

    /// Records a batch of kernel records; returns the processes of its own
    /// that ended (exit or exec) for the caller to finish.
    pub fn apply(
        &mut self,
        batch: &Batch,
        processes: &mut HashMap<u64, Process>,
        options: &Options,
        for_all: bool,
    ) -> Vec<Process> {
        let mut ended = Vec::new();
        // The batch holds one CPU's ring after another: records are
        // applied in time order, so a process's exec and its new mappings,
        // or its last samples and its exit, come in the order they
        // happened.
        let mut order: Vec<(u64, &std::ops::Range<usize>)> = batch
            .records
            .iter()
            .filter(|(source, _, _)| *source == Source::Kernel)
            .map(|(_, _, range)| (time_of(&batch.bytes[range.clone()]), range))
            .collect();
        order.sort_by_key(|&(time, _)| time);
        for (_, range) in order {
            match decode(&batch.bytes[range.clone()]) {
                Some(Record::Sample(s)) => {
                    let Some(target) =
                        self.targets
                            .route(processes, for_all, (s.pid, s.tid), s.time_ns)
                    else {
                        continue;
                    };
                    let unwinder = unwinder_of(&mut self.unwinders, s.pid);
                    let (frames, complete) = unwinder.unwind_sample(&s, options.max_depth);
                    let sample = kernel_sample(s.tid, s.time_ns, complete, &frames);
                    let weight = s.period;
                    target.kernel_sample(
                        &sample,
                        SampleKind::Cpu,
                        weight,
                        &unwinder.modules,
                        options,
                    );
                }
                Some(Record::SwitchSample(s)) => {
                    let (frames, complete) = unwinder_of(&mut self.unwinders, s.pid)
                        .unwind_sample(&s, options.max_depth);
                    let back_ns = self.early_in.remove(&s.tid).filter(|&t| t >= s.time_ns);
                    self.off_cpu.insert(
                        s.tid,
                        SwitchedOut {
                            pid: s.pid,
                            time_ns: s.time_ns,
                            frames,
                            complete,
                            blocked: false,
                            back_ns,
                        },
                    );
                }
                Some(Record::Switch {
                    tid,
                    out: true,
                    preempted,
                    ..
                }) => {
                    let Some(switched) = self.off_cpu.get_mut(&tid) else {
                        continue;
                    };
                    if preempted {
                        self.off_cpu.remove(&tid);
                    } else if let Some(back_ns) = switched.back_ns {
                        if let Some(switched) = self.off_cpu.remove(&tid) {
                            self.record_off_cpu(
                                tid, switched, back_ns, processes, options, for_all,
                            );
                        }
                    } else {
                        switched.blocked = true;
                    }
                }
                Some(Record::Switch {
                    tid,
                    time_ns,
                    out: false,
                    ..
                }) => match self.off_cpu.remove(&tid) {
                    Some(switched) if switched.blocked => {
                        self.record_off_cpu(tid, switched, time_ns, processes, options, for_all);
                    }
                    // Back before its switch-out record was read: that
                    // record says whether it was a wait.
                    Some(mut switched) => {
                        switched.back_ns = Some(time_ns);
                        self.off_cpu.insert(tid, switched);
                    }
                    None => {
                        self.early_in.insert(tid, time_ns);
                    }
                },
                Some(Record::Mmap {
                    pid,
                    start,
                    len,
                    offset,
                    executable: true,
                    path,
                }) if path.starts_with('/') => {
                    if let Some(m) =
                        strobe_symbols::proc_maps::module_for_mapping(start, offset, len, path)
                    {
                        unwinder_of(&mut self.unwinders, pid).add(m);
                    }
                }
                Some(Record::Lost { lost }) => {
                    self.lost += lost;
                    // Switches may be among them: a wait half seen would
                    // pair with a later switch into one long wrong one.
                    self.off_cpu.clear();
                    self.early_in.clear();
                }
                // The rings are read one CPU after another, not in time
                // order: a process's last samples may come after its
                // main thread's exit record. It stays open until the run
                // ends, or until a new process reuses its pid.
                Some(Record::Task {
                    pid,
                    tid,
                    exit: false,
                }) if pid == tid && self.exited.remove(&pid) => {
                    self.unwinders.remove(&pid);
                    ended.extend(self.targets.own.remove(&pid));
                }
                Some(Record::Task {
                    pid,
                    tid,
                    exit: true,
                }) => {
                    self.off_cpu.remove(&tid);
                    self.early_in.remove(&tid);
                    if pid == tid {
                        self.exited.insert(pid);
                    }
                }
                Some(Record::Comm { pid, exec: true }) => {
                    // A new image: new modules, a new database.
                    self.unwinders.insert(pid, ProcessUnwinder::empty(pid));
                    ended.extend(self.targets.own.remove(&pid));
                }
                _ => {}
            }
        }
        ended
    }

    /// Records the time thread `tid` spent blocked, from `switched` until
    /// `back_ns`, as an off-CPU sample.
    fn record_off_cpu(
        &mut self,
        tid: i32,
        switched: SwitchedOut,
        back_ns: u64,
        processes: &mut HashMap<u64, Process>,
        options: &Options,
        for_all: bool,
    ) {
        let Some(target) =
            self.targets
                .route(processes, for_all, (switched.pid, tid), switched.time_ns)
        else {
            return;
        };
        let modules = self
            .unwinders
            .get(&switched.pid)
            .map_or(&[][..], |u| &u.modules[..]);
        let sample = kernel_sample(tid, switched.time_ns, switched.complete, &switched.frames);
        let weight = back_ns.saturating_sub(switched.time_ns);
        target.kernel_sample(&sample, SampleKind::OffCpu, weight, modules, options);
    }

    /// The processes of its own still open, and the records the kernel
    /// dropped, at the end of the run.
    pub fn finish(self) -> (Vec<Process>, u64) {
        (self.targets.own.into_values().collect(), self.lost)
    }
}
