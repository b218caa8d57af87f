//! The writer thread: turns the batches the collector thread copied into
//! each process's database and finishes the processes that ended.
//!
//! Owns the processes being recorded (by image id) and the kernel samples'
//! state, and adds every finished database and note to the run's report.
//! Never reads a ring: the collector thread does.

use crate::batch::Batch;
use crate::process::Process;
use crate::{kernel_writer, lock, Shared};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use strobe_wire::segment::Segment;

/// What the collector thread tells the writer thread, in order.
pub enum ToWriter {
    /// A new process image (its segment arrived).
    Started {
        id: u64,
        pid: i32,
        segment: Arc<Segment>,
    },
    /// Records of image `id`.
    Records { id: u64, batch: Batch },
    /// Image `id` ended (the process ended, or runs a new image).
    Ended { id: u64 },
    /// Records of the kernel's sampling rings.
    Kernel { batch: Batch },
    /// The kernel samples thread `tid` of `pid` (which has the runtime).
    KernelThread { pid: i32, tid: i32 },
    /// The kernel samples every thread of `pid` (a static image the
    /// runtime could not be loaded into).
    KernelProcess { pid: i32 },
}

/// The writer thread: records batches, finishes ended images and adds
/// their results to the report.
pub fn write(shared: &Shared, from: mpsc::Receiver<ToWriter>) {
    let options = &shared.options;
    let mut processes: HashMap<u64, Process> = HashMap::new();
    let mut kernel = kernel_writer::KernelWriter::default();
    let mut unspool_failed = 0;
    for message in from {
        match message {
            ToWriter::Started { id, pid, segment } => {
                let mut process = Process::new(pid, segment);
                let before = kernel.runtime_started(pid, id);
                if let Some(earlier) = before.and_then(|b| process.continue_from(b)) {
                    report_finished(shared, earlier);
                }
                processes.insert(id, process);
            }
            ToWriter::KernelProcess { pid } => kernel.process_sampled(pid),
            ToWriter::KernelThread { pid, tid } => {
                let image = kernel.thread_sampled(pid, tid);
                if let Some(p) = image.and_then(|id| processes.get_mut(&id)) {
                    p.sampled_by_kernel(tid);
                }
            }
            ToWriter::Kernel { mut batch } => {
                let weight = batch.weight();
                unspool(shared, &mut batch, &mut unspool_failed);
                let for_all = shared.kernel_for_all.load(Ordering::SeqCst);
                for ended in kernel.apply(&batch, &mut processes, options, for_all) {
                    report_finished(shared, ended);
                }
                shared.queued.fetch_sub(weight, Ordering::SeqCst);
            }
            ToWriter::Records { id, mut batch } => {
                let weight = batch.weight();
                unspool(shared, &mut batch, &mut unspool_failed);
                if let Some(p) = processes.get_mut(&id) {
                    p.apply(batch, options);
                }
                shared.queued.fetch_sub(weight, Ordering::SeqCst);
            }
            ToWriter::Ended { id } => {
                kernel.runtime_ended(id);
                if let Some(p) = processes.remove(&id) {
                    report_finished(shared, p);
                }
            }
        }
    }
    let (rest, lost) = kernel.finish();
    for p in rest {
        report_finished(shared, p);
    }
    if lost > 0 {
        lock(&shared.report).notes.push(format!(
            "the kernel dropped {lost} sample records (its rings were full)"
        ));
    }
}

/// Reads back the records of `batch` the collector spilled to disk. A
/// failure is said once (`failed`); those records are missing.
fn unspool(shared: &Shared, batch: &mut Batch, failed: &mut u64) {
    let Some(on_disk) = batch.spilled.as_ref().map(|s| s.len()) else {
        return;
    };
    shared.spooled.fetch_sub(on_disk as u64, Ordering::SeqCst);
    if let Err(e) = batch.unspill() {
        *failed += 1;
        if *failed == 1 {
            lock(&shared.report).notes.push(format!(
                "records the collector kept on disk could not be read back ({e}): they are missing"
            ));
        }
    }
}

/// Finishes `p` and adds its database and notes to the report.
fn report_finished(shared: &Shared, p: Process) {
    let (pid, command) = (p.pid, p.command());
    let (db, notes) = p.finish(&shared.options);
    let mut report = lock(&shared.report);
    report.databases.extend(db);
    for n in notes {
        report.notes.push(format!("pid {pid} ({command}): {n}"));
    }
}
