//! Opening perf events through `perf-event2`, and saying in words why one
//! could not be opened.
//!
//! Owns the translation of a [`PerfEvent`] into a `perf_event::Builder`
//! (type, config words, privilege exclusions; the kernel is counted where
//! `perf_event_paranoid` or root allows it, as `perf stat` does), the
//! probe open used by the catalog, and the errno explanations. Never
//! reads or enables a counter and never keeps one open on its own.

use crate::catalog::counter::{CounterKind, PerfEvent};
use crate::catalog::slots::{core_pmu_in, is_core_pmu};
use crate::catalog::sysfs::Roots;
use perf_event::events::Software;
use perf_event::Builder;
use std::io;

/// Whether counting the kernel is allowed by default: as root, or when
/// `perf_event_paranoid` is 1 or less.
pub(crate) fn include_kernel_default() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    paranoid().is_none_or(|p| p <= 1)
}

/// `kernel.perf_event_paranoid`.
pub(crate) fn paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// A builder for `ev`, disabled, not yet told whom to observe.
pub(crate) fn builder(ev: &PerfEvent, include_kernel: bool) -> Builder<'static> {
    let mut b = Builder::new(Software::DUMMY);
    {
        let a = b.attrs_mut();
        a.type_ = ev.type_;
        a.config = ev.config;
        a.config1 = ev.config1;
        a.config2 = ev.config2;
        a.config3 = ev.config3;
    }
    let exclude_kernel = ev.exclude_kernel.unwrap_or(!include_kernel);
    b.exclude_user(ev.exclude_user);
    b.exclude_kernel(exclude_kernel);
    b.exclude_hv(exclude_kernel);
    b
}

/// Whether an open that failed with `err` should be retried without the
/// kernel (the default asked for it and the system refused).
pub(crate) fn retry_without_kernel(ev: &PerfEvent, include_kernel: bool, err: &io::Error) -> bool {
    include_kernel
        && ev.exclude_kernel.is_none()
        && matches!(err.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))
}

/// Opens `ev` on the calling thread and closes it: `Ok` if it can be
/// counted here.
pub(crate) fn probe(ev: &PerfEvent, kind: CounterKind) -> Result<(), String> {
    let include_kernel = include_kernel_default();
    let attempt = |incl: bool| builder(ev, incl).observe_self().any_cpu().build().map(drop);
    match attempt(include_kernel) {
        Ok(()) => Ok(()),
        Err(e) if retry_without_kernel(ev, include_kernel, &e) => {
            attempt(false).map_err(|e| explain(kind, ev, &e))
        }
        Err(e) => Err(explain(kind, ev, &e)),
    }
}

/// The error's text without Rust's ` (os error N)` suffix.
pub(crate) fn strerror(err: &io::Error) -> String {
    let s = err.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Why `ev` could not be opened, in words a user can act on.
pub(crate) fn explain(kind: CounterKind, ev: &PerfEvent, err: &io::Error) -> String {
    let sys = format!("perf_event_open: {}", strerror(err));
    let hardware = matches!(kind, CounterKind::Hardware | CounterKind::HardwareCache)
        || (kind == CounterKind::Raw && is_core_pmu(&ev.pmu));
    match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
            if hardware && core_pmu_in(&Roots::system()).is_none() {
                format!("no hardware PMU on this machine ({sys}); VMs often have none")
            } else if hardware {
                format!("not supported by this CPU's PMU ({sys})")
            } else {
                format!("not supported by this kernel or VM ({sys})")
            }
        }
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "permission denied ({sys}); kernel.perf_event_paranoid is {}: run as root, give \
             the program CAP_PERFMON, or lower it (`sysctl kernel.perf_event_paranoid=1`)",
            paranoid().map_or("unknown".to_string(), |p| p.to_string())
        ),
        Some(libc::EINVAL) => format!(
            "the kernel rejected the event ({sys}): a configuration the PMU does not accept, \
             or a PMU that counts per CPU only (uncore) and cannot follow a task"
        ),
        Some(libc::ESRCH) => format!("no such process or thread ({sys})"),
        Some(libc::EMFILE) | Some(libc::ENFILE) => {
            format!("too many open files ({sys}); raise `ulimit -n`")
        }
        Some(libc::ENOSPC) => format!("too many events for the PMU in one group ({sys})"),
        Some(libc::EBUSY) => format!("the PMU is in exclusive use by someone else ({sys})"),
        _ if err.kind() == io::ErrorKind::Unsupported => {
            format!("this kernel is older than the perf_event_attr strobe uses ({err})")
        }
        _ => sys,
    }
}
