//! Opening counters on a process or thread, in groups the PMU can
//! schedule, and starting, stopping and reading them.
//!
//! Owns [`Counters`]: perf events opened through `perf-event2` (pinned)
//! in groups (a leader plus members, read format `GROUP |
//! TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING | ID`, so one `read(2)` on the
//! leader returns the whole group with the times that scale multiplexed
//! counts), the rusage/procfs/`duration_time` counters read beside them,
//! and the per-thread totals of an inherited process target. Never
//! allocates, locks or formats on [`Counters::read_into`] for perf groups
//! and for the calling process's or thread's own soft counters (one
//! `read(2)` per group into a buffer allocated at open); never prints;
//! never changes the target other than attaching counters to it.
//!
//! # Groups
//!
//! Perf events are grouped per PMU in the order given, at most
//! [`OpenOptions::max_slots`] (else the PMU's
//! [`pmu_slots`](crate::catalog::pmu_slots)) per group. Software-context
//! events (software, tracepoints, `msr`) form groups of their own, of any
//! size unless `max_slots` or `STROBE_PMU_SLOTS` caps them: they take no
//! hardware counter and never need multiplexing, so kept apart from the
//! hardware groups they always run 100% of the enabled time.
//! [`OpenOptions::single_group`] puts every perf event in one group (led
//! by the first hardware event; software members then share its
//! schedule) and fails, naming how many groups would be needed, when they
//! do not fit. Non-perf counters are in no group.
//!
//! Reads bypass `perf-event2`'s `read_group`, which allocates a buffer
//! and a `GroupData` per call: [`Counters::read_into`] does one
//! `libc::read` on the leader's descriptor into the group's own buffer and
//! matches values to counters by the ids the kernel returns.
//!
//! Group leaders are opened disabled (with `enable_on_exec` when asked),
//! members enabled, so a group starts and stops as one. Inherited group
//! reads need Linux 4.13 or later.
//!
//! # Targets
//!
//! * [`Target::Process`]`(pid)`: the task `pid` (the calling process when
//!   0 or its own pid) and, with [`OpenOptions::inherit`], every thread
//!   and child process it creates *after* the open, summed. Threads that
//!   already existed are not counted (`strobe stat` opens the counters on
//!   a forked child that waits on a pipe before `exec`, with `inherit` and
//!   `enable_on_exec`, so everything it runs is counted from the exec).
//!   Rusage fields of the calling process use `getrusage(RUSAGE_SELF)`
//!   (every thread, whenever created).
//! * [`Target::Thread`]`(tid)`: one thread (`0` = the calling thread),
//!   for per-thread and per-region counting.
//!
//! # enable_on_exec
//!
//! `perf-event2` sets `enable_on_exec` on a counter observing another
//! pid directly, so no raw `perf_event_open` is needed here. With it the
//! groups are not enabled by [`Counters::open`]; the kernel enables each
//! leader when the target calls `execve`. Soft counters cannot see the
//! exec: they count from the open, cumulative ones from zero (the
//! target's whole life, which for a just-forked child is the time since
//! the exec plus a few microseconds).
//!
//! # Per-thread totals
//!
//! [`Counters::open_per_thread`] adds `inherit_stat` and a ring that
//! collects each inherited thread's totals as it exits (see
//! `thread_exits.rs` for why that ring is a separate dummy event set up
//! with raw `mmap` and `ioctl`); [`Counters::per_thread`] returns them.

pub(crate) mod perf;
mod plan;
mod soft;
mod thread_exits;

use crate::catalog::{CounterKind, CounterSpec, Source, ToolCounter};
use soft::{Soft, SoftWhat, Whose};
use std::io;
use std::os::fd::AsRawFd;
use strobe_core::clock::now_ns;
use strobe_core::thread::gettid;
use thread_exits::ThreadExits;

/// Whom the counters observe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A process (0 = the calling process): its task and, with
    /// `inherit`, the threads and children it creates after the open.
    Process(libc::pid_t),
    /// One thread (0 = the calling thread).
    Thread(libc::pid_t),
}

/// How counters are opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Count the threads and child processes the target creates after
    /// the open too (perf's `inherit`).
    pub inherit: bool,
    /// Leave the counters disabled until the target calls `execve`.
    pub enable_on_exec: bool,
    /// At most this many perf events per group (every PMU, software ones
    /// included); `None` = each PMU's [`pmu_slots`](crate::catalog::pmu_slots).
    pub max_slots: Option<usize>,
    /// Every perf event in one group, or an error.
    pub single_group: bool,
}

/// One counter's value: the raw count and the group's enabled and
/// running times (equal unless the group was multiplexed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// The count (for soft counters, the value; see the catalog's unit).
    pub raw: u64,
    /// Nanoseconds the counter was enabled.
    pub enabled_ns: u64,
    /// Nanoseconds it was actually counting (on the PMU).
    pub running_ns: u64,
}

impl Reading {
    /// The count scaled to the whole enabled time (`raw × enabled /
    /// running`), or `None` when it never ran ("not counted").
    pub fn scaled(&self) -> Option<f64> {
        if self.running_ns == 0 {
            return None;
        }
        if self.running_ns >= self.enabled_ns {
            return Some(self.raw as f64);
        }
        Some(self.raw as f64 * self.enabled_ns as f64 / self.running_ns as f64)
    }

    /// `100 × running / enabled`, perf's `(xx.xx%)`; `None` when never
    /// enabled.
    pub fn percent_running(&self) -> Option<f64> {
        if self.enabled_ns == 0 {
            return None;
        }
        Some(100.0 * self.running_ns as f64 / self.enabled_ns as f64)
    }
}

/// Why counters could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum CountError {
    /// A perf event could not be opened.
    #[error("cannot count `{event}`: {reason}")]
    Open {
        /// The counter's name.
        event: String,
        /// The errno (0 if not from the kernel).
        errno: i32,
        /// What it means.
        reason: String,
    },
    /// `single_group` was asked for and the counters need more groups.
    #[error("the counters need {needed} groups and one was asked for: {detail}")]
    Groups {
        /// How many groups they need.
        needed: usize,
        /// Why.
        detail: String,
    },
    /// The options do not fit the target.
    #[error("{0}")]
    Options(String),
    /// A group could not be enabled, disabled, reset or read.
    #[error("{what} of counter group {group}: {source}")]
    Io {
        /// The operation.
        what: &'static str,
        /// The group.
        group: usize,
        /// The error.
        source: io::Error,
    },
    /// A group number that does not exist.
    #[error("there is no counter group {0}")]
    NoGroup(usize),
    /// `read_into` was given a slice of the wrong length.
    #[error("read_into needs {expected} readings, the slice holds {got}")]
    Length {
        /// How many counters there are.
        expected: usize,
        /// The slice's length.
        got: usize,
    },
}

/// One perf group: the leader first, then members in spec order.
struct Group {
    counters: Vec<perf_event::Counter>,
    /// Spec index of each counter.
    specs: Vec<usize>,
    /// Kernel id of each counter, in the order the kernel reports them.
    ids: Vec<u64>,
    /// `nr, time_enabled, time_running, (value, id) × nr`.
    buf: Vec<u64>,
}

impl Group {
    fn leader(&mut self) -> &mut perf_event::Counter {
        &mut self.counters[0]
    }

    /// One `read(2)` of the whole group into `buf`.
    fn read_raw(&mut self, g: usize) -> Result<(), CountError> {
        let fd = self.counters[0].as_raw_fd();
        let bytes = self.buf.len() * 8;
        loop {
            // SAFETY: `buf` is an owned, initialised u64 buffer of `bytes`
            // bytes; `fd` is the open group leader.
            let n = unsafe { libc::read(fd, self.buf.as_mut_ptr().cast(), bytes) };
            if n >= 0 {
                if (n as usize) < 24 + 16 * self.counters.len() {
                    return Err(CountError::Io {
                        what: "read",
                        group: g,
                        source: io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!("short read of {n} bytes (the group could not be scheduled)"),
                        ),
                    });
                }
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(CountError::Io {
                    what: "read",
                    group: g,
                    source: e,
                });
            }
        }
    }

    /// Writes the group's readings at their spec indices.
    fn scatter(&self, out: &mut [Reading]) {
        let (en, run) = (self.buf[1], self.buf[2]);
        let nr = (self.buf[0] as usize).min(self.counters.len());
        for k in 0..nr {
            let value = self.buf[3 + 2 * k];
            let id = self.buf[4 + 2 * k];
            // The kernel reports the leader then the members in the order
            // they joined; look the id up only if that ever differs.
            let slot = if self.ids[k] == id {
                k
            } else {
                match self.ids.iter().position(|&i| i == id) {
                    Some(s) => s,
                    None => continue,
                }
            };
            out[self.specs[slot]] = Reading {
                raw: value,
                enabled_ns: en,
                running_ns: run,
            };
        }
    }
}

/// Counters opened on one target. See the module documentation.
pub struct Counters {
    specs: Vec<CounterSpec>,
    groups: Vec<Group>,
    /// Group of each spec (None for soft counters).
    group_of: Vec<Option<usize>>,
    soft: Soft,
    target_pid: libc::pid_t,
    thread_exits: Option<ThreadExits>,
}

fn getpid() -> libc::pid_t {
    // SAFETY: getpid has no preconditions and cannot fail.
    unsafe { libc::getpid() }
}

impl Counters {
    /// Opens `specs` on `target`: perf events in groups (see the module
    /// documentation), soft counters beside them. Counters start
    /// disabled (or armed for the target's `execve` with
    /// `enable_on_exec`); [`Counters::enable`] starts them.
    ///
    /// An event that cannot be opened is an error naming it and saying
    /// why (permission and `perf_event_paranoid`, no PMU in a VM, ...).
    pub fn open(
        specs: &[CounterSpec],
        target: Target,
        opts: &OpenOptions,
    ) -> Result<Counters, CountError> {
        Self::open_impl(specs, target, opts, false)
    }

    /// [`Counters::open`] that also collects each inherited thread's
    /// totals as it exits, for [`Counters::per_thread`]. Needs a
    /// [`Target::Process`] and `inherit`; costs one more descriptor and a
    /// 260 KiB ring.
    pub fn open_per_thread(
        specs: &[CounterSpec],
        target: Target,
        opts: &OpenOptions,
    ) -> Result<Counters, CountError> {
        if !matches!(target, Target::Process(_)) || !opts.inherit {
            return Err(CountError::Options(
                "per-thread totals need a process target opened with `inherit`".into(),
            ));
        }
        Self::open_impl(specs, target, opts, true)
    }

    /// The group index of each spec when every group is opened by itself
    /// (one pass each, as `strobe stat --passes` runs them), for `specs`
    /// grouped with `max_slots` as [`Counters::open`] would. Counters that
    /// are not perf events are counted with pass 0.
    pub fn plan_groups(specs: &[CounterSpec], max_slots: Option<usize>) -> Vec<usize> {
        let mut out = vec![0; specs.len()];
        for (g, members) in plan::plan(specs, max_slots).iter().enumerate() {
            for &i in members {
                out[i] = g;
            }
        }
        out
    }

    fn open_impl(
        specs: &[CounterSpec],
        target: Target,
        opts: &OpenOptions,
        per_thread: bool,
    ) -> Result<Counters, CountError> {
        let layout = if opts.single_group {
            plan::single(specs, opts.max_slots)?
        } else {
            plan::plan(specs, opts.max_slots)
        };
        let (observe, whose, target_pid) = match target {
            Target::Process(pid) if pid == 0 || pid == getpid() => {
                (Some(getpid()), Whose::SelfProcess, getpid())
            }
            Target::Process(pid) => (Some(pid), Whose::Process(pid), pid),
            Target::Thread(tid) if tid == 0 || tid == gettid() => {
                let tid = gettid();
                (None, Whose::SelfThread(tid), tid)
            }
            Target::Thread(tid) => {
                let own = std::path::Path::new(&format!("/proc/self/task/{tid}")).exists();
                let whose = if own {
                    Whose::SelfThread(tid)
                } else {
                    Whose::Thread(tid)
                };
                (Some(tid), whose, tid)
            }
        };
        let include_kernel = perf::include_kernel_default();
        let mut group_of = vec![None; specs.len()];
        let mut groups = Vec::with_capacity(layout.len());
        for (g, members) in layout.iter().enumerate() {
            let mut group = Group {
                counters: Vec::with_capacity(members.len()),
                specs: Vec::with_capacity(members.len()),
                ids: Vec::with_capacity(members.len()),
                buf: vec![0u64; 3 + 2 * members.len()],
            };
            for (k, &i) in members.iter().enumerate() {
                let Source::Perf(ev) = &specs[i].source else {
                    continue;
                };
                let open = |incl: bool, group: &mut Group| {
                    let mut b = perf::builder(ev, incl);
                    match observe {
                        Some(pid) => b.observe_pid(pid),
                        None => b.observe_self(),
                    };
                    b.any_cpu()
                        .inherit(opts.inherit)
                        .inherit_stat(per_thread)
                        .read_format(
                            perf_event::ReadFormat::GROUP
                                | perf_event::ReadFormat::TOTAL_TIME_ENABLED
                                | perf_event::ReadFormat::TOTAL_TIME_RUNNING
                                | perf_event::ReadFormat::ID,
                        );
                    if k == 0 {
                        b.enabled(false).enable_on_exec(opts.enable_on_exec);
                        b.build()
                    } else {
                        b.enabled(true);
                        b.build_with_group(&mut group.counters[0])
                    }
                };
                let counter = match open(include_kernel, &mut group) {
                    Ok(c) => Ok(c),
                    Err(e) if perf::retry_without_kernel(ev, include_kernel, &e) => {
                        open(false, &mut group)
                    }
                    Err(e) => Err(e),
                }
                .map_err(|e| CountError::Open {
                    event: specs[i].name.clone(),
                    errno: e.raw_os_error().unwrap_or(0),
                    reason: perf::explain(specs[i].kind, ev, &e),
                })?;
                group.ids.push(counter.id());
                group.counters.push(counter);
                group.specs.push(i);
                group_of[i] = Some(g);
            }
            groups.push(group);
        }
        let soft_specs: Vec<(usize, SoftWhat)> = specs
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match &s.source {
                Source::Perf(_) => None,
                Source::Rusage(f) => Some((i, SoftWhat::Rusage(*f))),
                Source::Proc(f) => Some((i, SoftWhat::Proc(*f))),
                Source::Tool(ToolCounter::DurationTime) => Some((i, SoftWhat::Duration)),
            })
            .collect();
        let mut soft = Soft::new(whose, soft_specs);
        if opts.enable_on_exec {
            soft.enable_from_start(now_ns());
        }
        let thread_exits = if per_thread {
            let all: Vec<&perf_event::Counter> =
                groups.iter().flat_map(|g| g.counters.iter()).collect();
            let ids: Vec<(u64, usize)> = groups
                .iter()
                .flat_map(|g| g.ids.iter().copied().zip(g.specs.iter().copied()))
                .collect();
            let pid = observe.unwrap_or(target_pid);
            Some(
                ThreadExits::new(pid, &all, ids, specs.len()).map_err(|e| CountError::Open {
                    event: "per-thread ring (dummy event)".into(),
                    errno: e.raw_os_error().unwrap_or(0),
                    reason: perf::explain(CounterKind::Software, &dummy_event(), &e),
                })?,
            )
        } else {
            None
        };
        Ok(Counters {
            specs: specs.to_vec(),
            groups,
            group_of,
            soft,
            target_pid,
            thread_exits,
        })
    }

    /// The specs, in the order readings come.
    pub fn specs(&self) -> &[CounterSpec] {
        &self.specs
    }

    /// How many counters (readings) there are.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether there are no counters.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// How many perf groups were opened.
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// The perf group of counter `i`; `None` for counters that are not
    /// perf events (or an `i` out of range).
    pub fn group_of(&self, i: usize) -> Option<usize> {
        self.group_of.get(i).copied().flatten()
    }

    /// How many file descriptors the counters hold: one per perf event,
    /// plus one for the per-thread ring. Soft counters hold none (they
    /// open their files at each read).
    pub fn fd_count(&self) -> usize {
        self.groups.iter().map(|g| g.counters.len()).sum::<usize>()
            + usize::from(self.thread_exits.is_some())
    }

    fn group(&mut self, g: usize) -> Result<&mut Group, CountError> {
        self.groups.get_mut(g).ok_or(CountError::NoGroup(g))
    }

    /// Starts every counter.
    pub fn enable(&mut self) -> Result<(), CountError> {
        for g in 0..self.groups.len() {
            self.enable_group(g)?;
        }
        self.soft.enable(now_ns());
        Ok(())
    }

    /// Stops every counter; values are kept.
    pub fn disable(&mut self) -> Result<(), CountError> {
        for g in 0..self.groups.len() {
            self.disable_group(g)?;
        }
        self.soft.disable(now_ns());
        Ok(())
    }

    /// Sets every count to zero. Enabled and running times keep their
    /// totals (the kernel's `PERF_EVENT_IOC_RESET` leaves them), so a
    /// multiplexed count read after a reset is scaled by the ratio since
    /// the open; `duration_time` restarts from zero.
    pub fn reset(&mut self) -> Result<(), CountError> {
        for g in 0..self.groups.len() {
            let group = self.group(g)?;
            group
                .leader()
                .reset_group()
                .map_err(|source| CountError::Io {
                    what: "reset",
                    group: g,
                    source,
                })?;
        }
        self.soft.reset(now_ns());
        Ok(())
    }

    /// Starts perf group `g`.
    pub fn enable_group(&mut self, g: usize) -> Result<(), CountError> {
        self.group(g)?
            .leader()
            .enable_group()
            .map_err(|source| CountError::Io {
                what: "enable",
                group: g,
                source,
            })
    }

    /// Stops perf group `g`.
    pub fn disable_group(&mut self, g: usize) -> Result<(), CountError> {
        self.group(g)?
            .leader()
            .disable_group()
            .map_err(|source| CountError::Io {
                what: "disable",
                group: g,
                source,
            })
    }

    /// Reads perf group `g` (one `read(2)`) into `out`, which holds one
    /// reading per spec; only that group's entries are written.
    pub fn read_group(&mut self, g: usize, out: &mut [Reading]) -> Result<(), CountError> {
        self.check_len(out)?;
        let group = self.group(g)?;
        group.read_raw(g)?;
        group.scatter(out);
        Ok(())
    }

    fn check_len(&self, out: &[Reading]) -> Result<(), CountError> {
        if out.len() != self.specs.len() {
            return Err(CountError::Length {
                expected: self.specs.len(),
                got: out.len(),
            });
        }
        Ok(())
    }

    /// Reads every counter into `out` (one reading per spec, in spec
    /// order): one `read(2)` per perf group into a buffer allocated at
    /// open, no allocation (see the module documentation for the soft
    /// counters' exceptions).
    pub fn read_into(&mut self, out: &mut [Reading]) -> Result<(), CountError> {
        self.check_len(out)?;
        for (g, group) in self.groups.iter_mut().enumerate() {
            group.read_raw(g)?;
            group.scatter(out);
        }
        if !self.soft.is_empty() {
            self.soft.read_into(now_ns(), out);
        }
        Ok(())
    }

    /// Reads every counter, in spec order.
    pub fn read(&mut self) -> Result<Vec<Reading>, CountError> {
        let mut out = vec![Reading::default(); self.specs.len()];
        self.read_into(&mut out)?;
        Ok(out)
    }

    /// Makes the rusage counters report `usage` (what `wait4` returned for
    /// the reaped target) from now on, so they hold the child's totals.
    pub fn apply_final_rusage(&mut self, usage: &libc::rusage) {
        self.soft.apply_final_rusage(usage);
    }

    /// Decodes the thread exits the kernel has written since the last
    /// call (a no-op without [`Counters::open_per_thread`]). Call it now
    /// and then when the target runs many short threads, so the ring does
    /// not overflow.
    pub fn collect_thread_exits(&mut self) {
        if let Some(t) = &mut self.thread_exits {
            t.drain();
        }
    }

    /// Thread exits that did not fit in the ring (lost records).
    pub fn thread_exits_lost(&self) -> u64 {
        self.thread_exits.as_ref().map_or(0, |t| t.lost)
    }

    /// Per-thread totals of a target opened with
    /// [`Counters::open_per_thread`]: `(pid, tid, readings)` for each
    /// inherited thread or child that has exited, in exit order, then one
    /// row `(target, target, ...)` with the rest: the target's own task
    /// plus threads still running (and threads whose records were lost,
    /// see [`Counters::thread_exits_lost`]) — the total minus the exited
    /// rows. Soft counters are not per thread: their readings here are
    /// zero with no running time. Empty without `open_per_thread`.
    pub fn per_thread(
        &mut self,
    ) -> Result<Vec<(libc::pid_t, libc::pid_t, Vec<Reading>)>, CountError> {
        if self.thread_exits.is_none() {
            return Ok(Vec::new());
        }
        let total = self.read()?;
        let t = self.thread_exits.as_mut().expect("checked above");
        t.drain();
        let n = self.specs.len();
        let mut rest: Vec<Reading> = (0..n)
            .map(|i| {
                if self.group_of[i].is_some() {
                    total[i]
                } else {
                    Reading::default()
                }
            })
            .collect();
        let mut rows = Vec::with_capacity(t.exits.len() + 1);
        for exit in &t.exits {
            let readings: Vec<Reading> =
                exit.values.iter().map(|v| v.unwrap_or_default()).collect();
            for (r, v) in rest.iter_mut().zip(&readings) {
                r.raw = r.raw.saturating_sub(v.raw);
                r.enabled_ns = r.enabled_ns.saturating_sub(v.enabled_ns);
                r.running_ns = r.running_ns.saturating_sub(v.running_ns);
            }
            rows.push((exit.pid, exit.tid, readings));
        }
        rows.push((self.target_pid, self.target_pid, rest));
        Ok(rows)
    }
}

fn dummy_event() -> crate::catalog::PerfEvent {
    crate::catalog::PerfEvent {
        pmu: "software".into(),
        type_: 1,
        config: 9,
        config1: 0,
        config2: 0,
        config3: 0,
        exclude_user: false,
        exclude_kernel: None,
    }
}

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counters")
            .field(
                "specs",
                &self
                    .specs
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .field(
                "groups",
                &self
                    .groups
                    .iter()
                    .map(|g| g.specs.clone())
                    .collect::<Vec<_>>(),
            )
            .field("target_pid", &self.target_pid)
            .field("per_thread", &self.thread_exits.is_some())
            .finish()
    }
}
