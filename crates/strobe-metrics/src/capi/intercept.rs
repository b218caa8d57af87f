//! The intercepting API: per-region counters for tools, the CPU
//! counterpart of seed 003's per-dispatch callbacks.
//!
//! Owns the registration (`strobe_metrics_set_intercepting` /
//! `remove_intercepting`: the tool's `region_begin` and `region_end`
//! callbacks and their user data) and the dispatch the runtime drives
//! around every region: [`intercept_region_begin`] asks the tool for a
//! group and starts it, [`intercept_region_end`] stops and reads it
//! (filling the features' data and calling the context's completion
//! callback) and then calls the tool's `region_end`. Open regions are
//! kept on a per-thread stack, matched by depth. The C entry points
//! `strobe_metrics_intercept_region_begin/end` are the same for C callers.
//!
//! Owns the header's types of this API: the tool's callbacks
//! ([`RegionBeginCallback`], [`RegionEndCallback`]) and the table that
//! registers them ([`Intercepting`]), layout pinned at the bottom.
//!
//! When no tool is registered and no region it saw is still open, both
//! dispatch functions cost one or two relaxed atomic loads and nothing
//! else. Must never call a tool while holding a lock, never dispatch
//! re-entrantly (regions a tool's callback opens are ignored), and never
//! let a tool's failure reach the runtime other than as a status.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::context::Group;
use super::context::{group_context, group_get_data, group_start};
use super::status::{guard, CResult, Error, Status};
use super::types::CallbackData;

/// `strobe_metrics_callback_t`: the tool's region-begin callback.
pub type RegionBeginCallback = Option<
    unsafe extern "C" fn(
        callback_data: *const CallbackData,
        user_data: *mut c_void,
        group: *mut *mut Group,
    ) -> Status,
>;

/// `strobe_metrics_region_end_callback_t`.
pub type RegionEndCallback = Option<
    unsafe extern "C" fn(
        callback_data: *const CallbackData,
        user_data: *mut c_void,
        group: *mut Group,
    ) -> Status,
>;

/// `strobe_metrics_intercepting_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Intercepting {
    /// Required.
    pub region_begin: RegionBeginCallback,
    /// Optional.
    pub region_end: RegionEndCallback,
}

/// A region as the runtime reports it to [`intercept_region_begin`] and
/// [`intercept_region_end`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RegionEvent<'a> {
    /// Kernel thread id of the region; 0 = the calling thread.
    pub thread_id: u64,
    /// Its name (may be `None` at the end: the begin's is used).
    pub name: Option<&'a CStr>,
    /// A [`super::types::region_kind`] value.
    pub kind: u32,
    /// Nesting depth on its thread (0 = outermost); an end must carry its
    /// begin's depth. [`DEPTH_FROM_STACK`] at both ends lets this module
    /// count it (the runtime's way).
    pub depth: u32,
    /// `CLOCK_MONOTONIC` ns of the begin or end; 0 = now.
    pub time_ns: u64,
}

/// A [`RegionEvent::depth`] that asks for the depth to be the number of
/// regions open on the thread, and for an end to match the innermost:
/// for a caller that does not count nesting itself. Regions that began
/// before a tool registered are not counted.
pub const DEPTH_FROM_STACK: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Registration {
    callbacks: Intercepting,
    data: *mut c_void,
    generation: u64,
}

// SAFETY: `data` is the tool's pointer, handed back to the tool's own
// callbacks on whatever thread a region runs, as the header documents.
unsafe impl Send for Registration {}

static ACTIVE: AtomicBool = AtomicBool::new(false);
static OPEN_REGIONS: AtomicUsize = AtomicUsize::new(0);
static GENERATION: AtomicU64 = AtomicU64::new(0);
static REGISTRATION: Mutex<Option<Registration>> = Mutex::new(None);

/// A region whose begin was dispatched, waiting for its end.
struct OpenRegion {
    name: Option<CString>,
    kind: u32,
    thread_id: u64,
    depth: u32,
    begin_ns: u64,
    group: Option<Group>,
    generation: u64,
    /// The tool's `region_begin` was called (else the region is only kept
    /// so that ends still match their begins after the tool left).
    told: bool,
}

thread_local! {
    static REGIONS: RefCell<Vec<OpenRegion>> = const { RefCell::new(Vec::new()) };
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Marks the thread as dispatching; `None` when it already is (a tool's
/// callback opened a region) or its locals are gone.
struct Busy;

impl Busy {
    fn enter() -> Option<Busy> {
        BUSY.try_with(|b| (!b.replace(true)).then_some(Busy))
            .ok()
            .flatten()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = BUSY.try_with(|b| b.set(false));
    }
}

fn registration() -> Option<Registration> {
    *REGISTRATION.lock().unwrap_or_else(|e| e.into_inner())
}

fn now_or(t: u64) -> u64 {
    if t == 0 {
        strobe_core::clock::now_ns()
    } else {
        t
    }
}

fn name_ptr(n: Option<&CString>) -> *const c_char {
    n.map_or(std::ptr::null(), |n| n.as_ptr())
}

fn region_label(n: Option<&CStr>) -> String {
    n.map_or_else(
        || "(unnamed)".to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Whether a tool is registered: the runtime may skip building region
/// events when it is not (one relaxed load).
pub fn intercepting_active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Called by the runtime as a region begins on the calling thread: asks
/// the tool's `region_begin` for a group and starts it. Returns the
/// tool's status, or the failure to start the group (recorded for
/// `strobe_metrics_errno`); `SUCCESS` when no tool is registered.
#[inline]
pub fn intercept_region_begin(ev: &RegionEvent<'_>) -> Status {
    if !dispatching() {
        return Status::SUCCESS;
    }
    guard("strobe_metrics_intercept_region_begin", || begin(ev))
}

/// Whether region begins and ends go further than this check: a tool is
/// registered, or regions it saw are still open.
#[inline]
fn dispatching() -> bool {
    ACTIVE.load(Ordering::Relaxed) || OPEN_REGIONS.load(Ordering::Relaxed) != 0
}

/// Called by the runtime as a region ends on the calling thread: stops
/// and reads the region's group (the features' data filled, the
/// context's completion callback called), then calls the tool's
/// `region_end`. Regions begun deeper and still open are ended first;
/// an end with no matching begin does nothing.
#[inline]
pub fn intercept_region_end(ev: &RegionEvent<'_>) -> Status {
    if !dispatching() {
        return Status::SUCCESS;
    }
    guard("strobe_metrics_intercept_region_end", || end(ev))
}

fn begin(ev: &RegionEvent<'_>) -> CResult {
    let Some(_busy) = Busy::enter() else {
        return Ok(());
    };
    let depth = if ev.depth == DEPTH_FROM_STACK {
        REGIONS.try_with(|r| r.borrow().len() as u32).unwrap_or(0)
    } else {
        ev.depth
    };
    let reg = registration();
    let mut open = OpenRegion {
        thread_id: if ev.thread_id == 0 {
            strobe_core::thread::gettid() as u64
        } else {
            ev.thread_id
        },
        kind: ev.kind,
        depth,
        begin_ns: now_or(ev.time_ns),
        name: ev.name.map(CStr::to_owned),
        group: None,
        generation: reg.map_or(0, |r| r.generation),
        told: false,
    };
    let Some((reg, region_begin)) = reg.and_then(|r| Some((r, r.callbacks.region_begin?))) else {
        // No tool now, but regions it saw are still open: keep this one
        // so that their ends still find them.
        push_open(open);
        return Ok(());
    };
    open.told = true;
    let data = CallbackData {
        thread_id: open.thread_id,
        region_name: name_ptr(open.name.as_ref()),
        region_kind: open.kind,
        depth: open.depth,
        begin_ns: open.begin_ns,
        end_ns: 0,
    };
    let mut gp: *mut Group = std::ptr::null_mut();
    // SAFETY: the tool registered `region_begin` with the documented type;
    // `data` and `gp` are live locals.
    let status = unsafe { region_begin(&data, reg.data, &mut gp) };
    let mut result = Ok(());
    if !status.is_success() {
        result = Err(Error::new(
            status,
            format!(
                "the tool's region_begin returned {} for region `{}`; nothing is counted for it",
                status.name(),
                region_label(ev.name)
            ),
        ));
    } else if !gp.is_null() {
        // SAFETY: the tool returned a pointer to a group it filled with
        // strobe_metrics_get_group; it is copied at once.
        let g = unsafe { gp.read() };
        // SAFETY: `g` is a live local.
        match unsafe { group_context(&g) } {
            // A nested region given a running group counts nothing: its
            // end would stop the outer region's counting.
            Ok((ctx, idx)) if ctx.is_running(idx) => {}
            Ok(_) => {
                // SAFETY: `g` is a live local.
                match unsafe { group_start(&g) } {
                    Ok(()) => open.group = Some(g),
                    Err(e) => result = Err(e),
                }
            }
            Err(e) => {
                result = Err(Error::new(
                    e.status,
                    format!(
                        "the group region_begin returned for region `{}`: {}",
                        region_label(ev.name),
                        e.message
                    ),
                ))
            }
        }
    }
    push_open(open);
    result
}

fn push_open(open: OpenRegion) {
    if REGIONS.try_with(|r| r.borrow_mut().push(open)).is_ok() {
        OPEN_REGIONS.fetch_add(1, Ordering::Relaxed);
    }
}

fn end(ev: &RegionEvent<'_>) -> CResult {
    let Some(_busy) = Busy::enter() else {
        return Ok(());
    };
    let popped: Vec<OpenRegion> = REGIONS
        .try_with(|r| {
            let mut r = r.borrow_mut();
            let mut out = Vec::new();
            if ev.depth == DEPTH_FROM_STACK {
                out.extend(r.pop());
                return out;
            }
            while r.last().is_some_and(|o| o.depth > ev.depth) {
                out.extend(r.pop());
            }
            if r.last().is_some_and(|o| o.depth == ev.depth) {
                out.extend(r.pop());
            }
            out
        })
        .unwrap_or_default();
    if popped.is_empty() {
        return Ok(());
    }
    OPEN_REGIONS.fetch_sub(popped.len(), Ordering::Relaxed);
    let end_ns = now_or(ev.time_ns);
    let mut result = Ok(());
    for mut o in popped {
        if o.name.is_none() {
            o.name = ev.name.map(CStr::to_owned);
        }
        let r = finish(o, end_ns);
        if result.is_ok() {
            result = r;
        }
    }
    result
}

/// Completes one region: its group's data, then the tool's `region_end`
/// (when the registration that saw its begin is still in place).
fn finish(o: OpenRegion, end_ns: u64) -> CResult {
    let mut result = Ok(());
    let mut group = o.group;
    if let Some(g) = &group {
        // SAFETY: `g` is the library's own copy of the group.
        if let Err(e) = unsafe { group_get_data(g) } {
            result = Err(Error::new(
                e.status,
                format!(
                    "collecting the group of region `{}`: {}",
                    region_label(o.name.as_deref()),
                    e.message
                ),
            ));
        }
    }
    let reg = registration().filter(|r| o.told && r.generation == o.generation);
    if let Some(region_end) = reg.and_then(|r| r.callbacks.region_end) {
        let data = CallbackData {
            thread_id: o.thread_id,
            region_name: name_ptr(o.name.as_ref()),
            region_kind: o.kind,
            depth: o.depth,
            begin_ns: o.begin_ns,
            end_ns,
        };
        let gp = group
            .as_mut()
            .map_or(std::ptr::null_mut(), |g| g as *mut Group);
        let user = reg.map_or(std::ptr::null_mut(), |r| r.data);
        // SAFETY: the tool registered `region_end` with the documented
        // type; `data` and the group copy are live locals.
        let status = unsafe { region_end(&data, user, gp) };
        if !status.is_success() && result.is_ok() {
            result = Err(Error::new(
                status,
                format!(
                    "the tool's region_end returned {} for region `{}`",
                    status.name(),
                    region_label(o.name.as_deref())
                ),
            ));
        }
    }
    result
}

/// `strobe_metrics_set_intercepting`: registers the tool's callbacks
/// (replacing earlier ones).
///
/// # Safety
/// The callbacks are null or functions of the documented types; `data` is
/// what they expect.
pub unsafe extern "C" fn strobe_metrics_set_intercepting(
    callbacks: Intercepting,
    data: *mut c_void,
) -> Status {
    guard("strobe_metrics_set_intercepting", || {
        if callbacks.region_begin.is_none() {
            return Err(Error::invalid("callbacks.region_begin is NULL"));
        }
        let mut reg = REGISTRATION.lock().unwrap_or_else(|e| e.into_inner());
        *reg = Some(Registration {
            callbacks,
            data,
            generation: GENERATION.fetch_add(1, Ordering::Relaxed) + 1,
        });
        ACTIVE.store(true, Ordering::Relaxed);
        Ok(())
    })
}

/// `strobe_metrics_remove_intercepting`: unregisters them.
pub extern "C" fn strobe_metrics_remove_intercepting() -> Status {
    guard("strobe_metrics_remove_intercepting", || {
        let mut reg = REGISTRATION.lock().unwrap_or_else(|e| e.into_inner());
        *reg = None;
        ACTIVE.store(false, Ordering::Relaxed);
        Ok(())
    })
}

/// `strobe_metrics_intercepting_active`: 1 when a tool is registered.
pub extern "C" fn strobe_metrics_intercepting_active() -> u32 {
    super::status::guard_value("strobe_metrics_intercepting_active", 0, || {
        u32::from(intercepting_active())
    })
}

/// The event of C callback data, with the begin or the end time.
///
/// # Safety
/// `data` is non-null and readable, its name null or NUL-terminated and
/// live for `'a`.
unsafe fn event<'a>(data: *const CallbackData, at_end: bool) -> RegionEvent<'a> {
    // SAFETY: per the function contract.
    let d = unsafe { data.read() };
    RegionEvent {
        thread_id: d.thread_id,
        name: if d.region_name.is_null() {
            None
        } else {
            // SAFETY: per the function contract.
            Some(unsafe { CStr::from_ptr(d.region_name) })
        },
        kind: d.region_kind,
        depth: d.depth,
        time_ns: if at_end { d.end_ns } else { d.begin_ns },
    }
}

/// `strobe_metrics_intercept_region_begin`: [`intercept_region_begin`] for
/// C callers (the runtime).
///
/// # Safety
/// `data` is null or readable, its name null or NUL-terminated.
pub unsafe extern "C" fn strobe_metrics_intercept_region_begin(
    data: *const CallbackData,
) -> Status {
    if !ACTIVE.load(Ordering::Relaxed) {
        return Status::SUCCESS;
    }
    guard("strobe_metrics_intercept_region_begin", || {
        if data.is_null() {
            return Err(Error::invalid("the callback data is NULL"));
        }
        // SAFETY: non-null; the rest is the caller's contract.
        begin(&unsafe { event(data, false) })
    })
}

/// `strobe_metrics_intercept_region_end`: [`intercept_region_end`] for C
/// callers (the runtime).
///
/// # Safety
/// `data` is null or readable, its name null or NUL-terminated.
pub unsafe extern "C" fn strobe_metrics_intercept_region_end(data: *const CallbackData) -> Status {
    if !ACTIVE.load(Ordering::Relaxed) && OPEN_REGIONS.load(Ordering::Relaxed) == 0 {
        return Status::SUCCESS;
    }
    guard("strobe_metrics_intercept_region_end", || {
        if data.is_null() {
            return Err(Error::invalid("the callback data is NULL"));
        }
        // SAFETY: non-null; the rest is the caller's contract.
        end(&unsafe { event(data, true) })
    })
}

// The layout the header documents (64-bit Linux).
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Intercepting>() == 16);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::context::{
        strobe_metrics_close, strobe_metrics_get_group, strobe_metrics_open, Context,
    };
    use crate::capi::status::last_error;
    use crate::capi::types::{data_kind, feature_kind, Data, Feature};

    /// What the test tool saw. Features and groups are boxed so their
    /// addresses stay put while the vectors grow.
    #[allow(clippy::vec_box)]
    struct Tool {
        begins: Vec<(String, u32)>,
        ends: Vec<(String, u32, bool, Option<f64>)>,
        features: Vec<Box<[Feature; 1]>>,
        contexts: Vec<*mut Context>,
        groups: Vec<Box<Group>>,
        /// Status region_begin returns for a region named `fail`.
        fail_status: Status,
    }

    unsafe extern "C" fn on_begin(
        d: *const CallbackData,
        user: *mut c_void,
        out: *mut *mut Group,
    ) -> Status {
        // SAFETY: the library passes live data and the registered `Tool`.
        let (d, tool) = unsafe { (&*d, &mut *user.cast::<Tool>()) };
        // SAFETY: the runtime side of the test passes names.
        let name = unsafe { CStr::from_ptr(d.region_name) }
            .to_string_lossy()
            .into_owned();
        tool.begins.push((name.clone(), d.depth));
        if name == "fail" {
            return tool.fail_status;
        }
        if name == "plain" {
            return Status::SUCCESS;
        }
        let mut f = Box::new([Feature {
            kind: feature_kind::METRIC,
            name: c"task-clock".as_ptr(),
            parameters: std::ptr::null(),
            parameter_count: 0,
            data: Data::UNINIT,
        }]);
        let mut ctx: *mut Context = std::ptr::null_mut();
        // SAFETY: the boxed array lives in `tool` until the test ends.
        let st = unsafe { strobe_metrics_open(f.as_mut_ptr(), 1, &mut ctx, 0, std::ptr::null()) };
        if !st.is_success() {
            return st;
        }
        let mut g = Box::new(Group::EMPTY);
        // SAFETY: `ctx` was just opened; `g` is writable.
        let st = unsafe { strobe_metrics_get_group(ctx, 0, &mut *g) };
        // SAFETY: the group lives in `tool`; the library copies it.
        unsafe { *out = &mut *g };
        tool.features.push(f);
        tool.contexts.push(ctx);
        tool.groups.push(g);
        st
    }

    unsafe extern "C" fn on_end(
        d: *const CallbackData,
        user: *mut c_void,
        g: *mut Group,
    ) -> Status {
        // SAFETY: the library passes live data and the registered `Tool`.
        let (d, tool) = unsafe { (&*d, &mut *user.cast::<Tool>()) };
        // SAFETY: names are C strings.
        let name = unsafe { CStr::from_ptr(d.region_name) }
            .to_string_lossy()
            .into_owned();
        let value = if g.is_null() {
            None
        } else {
            // SAFETY: a group of an open context with one feature.
            unsafe { (**(*g).features).data.as_f64() }
        };
        tool.ends
            .push((name.clone(), d.depth, d.end_ns >= d.begin_ns, value));
        if name == "end-fails" {
            Status(77)
        } else {
            Status::SUCCESS
        }
    }

    fn ev(name: &CStr, depth: u32) -> RegionEvent<'_> {
        RegionEvent {
            name: Some(name),
            depth,
            ..RegionEvent::default()
        }
    }

    /// Burns `ms` milliseconds of this thread's CPU time.
    fn burn(ms: u64) {
        use strobe_core::clock::Clock;
        let end = Clock::ThreadCpu.read_ns() + ms * 1_000_000;
        let mut x = 0u64;
        while Clock::ThreadCpu.read_ns() < end {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }

    // One test: the registration is process-wide.
    #[test]
    fn regions_get_their_own_counts_and_tool_errors_come_back_as_statuses() {
        assert!(!intercepting_active());
        // Nothing registered: free, successful, nothing recorded.
        assert_eq!(intercept_region_begin(&ev(c"x", 0)), Status::SUCCESS);
        assert_eq!(intercept_region_end(&ev(c"x", 0)), Status::SUCCESS);

        let mut tool = Tool {
            begins: Vec::new(),
            ends: Vec::new(),
            features: Vec::new(),
            contexts: Vec::new(),
            groups: Vec::new(),
            fail_status: Status(42),
        };
        let cbs = Intercepting {
            region_begin: None,
            region_end: Some(on_end),
        };
        // SAFETY: valid callbacks and the `Tool` they expect.
        unsafe {
            assert_eq!(
                strobe_metrics_set_intercepting(cbs, std::ptr::null_mut()),
                Status::ERROR_INVALID_ARGUMENT
            );
            let cbs = Intercepting {
                region_begin: Some(on_begin),
                region_end: Some(on_end),
            };
            assert_eq!(
                strobe_metrics_set_intercepting(cbs, (&mut tool as *mut Tool).cast()),
                Status::SUCCESS
            );
        }
        assert!(intercepting_active());

        // An outer region counting over an inner one, and a plain one.
        assert_eq!(intercept_region_begin(&ev(c"outer", 0)), Status::SUCCESS);
        burn(20);
        assert_eq!(intercept_region_begin(&ev(c"inner", 1)), Status::SUCCESS);
        burn(20);
        assert_eq!(
            intercept_region_end(&RegionEvent {
                depth: 1,
                ..Default::default()
            }),
            Status::SUCCESS
        );
        assert_eq!(intercept_region_begin(&ev(c"plain", 1)), Status::SUCCESS);
        assert_eq!(intercept_region_end(&ev(c"plain", 1)), Status::SUCCESS);
        assert_eq!(intercept_region_end(&ev(c"outer", 0)), Status::SUCCESS);

        if tool.contexts.is_empty() {
            eprintln!("skipped the counting checks: {}", last_error().1);
        } else {
            let inner = tool.ends[0].3.expect("inner has a value");
            let outer = tool.ends[2].3.expect("outer has a value");
            assert!(inner >= 15e6, "inner {inner}");
            assert!(outer >= inner + 15e6, "outer {outer} inner {inner}");
            assert_eq!(
                tool.ends[0].0, "inner",
                "the begin's name is used at the end"
            );
            assert_eq!(tool.ends[1].3, None, "plain counts nothing");
        }
        assert!(tool.ends.iter().all(|e| e.2), "end_ns >= begin_ns");

        // A failing region_begin: its status comes back, nothing counted,
        // its end still pairs with it.
        assert_eq!(intercept_region_begin(&ev(c"fail", 0)), Status(42));
        let (errno, msg) = last_error();
        assert_eq!(errno, Status(42));
        assert!(msg.contains("region `fail`"), "{msg}");
        assert_eq!(intercept_region_end(&ev(c"fail", 0)), Status::SUCCESS);
        assert_eq!(tool.ends.last().unwrap().0, "fail");
        // A failing region_end.
        assert_eq!(
            intercept_region_begin(&ev(c"end-fails", 0)),
            Status::SUCCESS
        );
        assert_eq!(intercept_region_end(&ev(c"end-fails", 0)), Status(77));
        assert!(last_error()
            .1
            .contains("region_end returned unknown status 77"));
        // An end without a begin does nothing.
        let ends = tool.ends.len();
        assert_eq!(intercept_region_end(&ev(c"stray", 0)), Status::SUCCESS);
        assert_eq!(tool.ends.len(), ends);
        // Unclosed deeper regions are ended with their parent.
        assert_eq!(intercept_region_begin(&ev(c"a", 0)), Status::SUCCESS);
        assert_eq!(intercept_region_begin(&ev(c"b", 1)), Status::SUCCESS);
        assert_eq!(intercept_region_end(&ev(c"a", 0)), Status::SUCCESS);
        let names: Vec<&str> = tool.ends[ends..].iter().map(|e| e.0.as_str()).collect();
        assert_eq!(names, ["b", "a"]);

        // The runtime's way: depths counted here, an end is the innermost.
        let from_stack = |name: Option<&'static CStr>| RegionEvent {
            name,
            depth: DEPTH_FROM_STACK,
            ..RegionEvent::default()
        };
        let (begins, ends) = (tool.begins.len(), tool.ends.len());
        assert_eq!(
            intercept_region_begin(&from_stack(Some(c"p"))),
            Status::SUCCESS
        );
        assert_eq!(
            intercept_region_begin(&from_stack(Some(c"plain"))),
            Status::SUCCESS
        );
        assert_eq!(intercept_region_end(&from_stack(None)), Status::SUCCESS);
        assert_eq!(intercept_region_end(&from_stack(None)), Status::SUCCESS);
        assert_eq!(
            tool.begins[begins..],
            [("p".into(), 0), ("plain".into(), 1)]
        );
        let told: Vec<(&str, u32)> = tool.ends[ends..]
            .iter()
            .map(|e| (e.0.as_str(), e.1))
            .collect();
        assert_eq!(told, [("plain", 1), ("p", 0)]);

        // After removal a region begun before still completes its group,
        // without region_end; regions begun since do not take its end.
        assert_eq!(
            intercept_region_begin(&from_stack(Some(c"late"))),
            Status::SUCCESS
        );
        assert_eq!(strobe_metrics_remove_intercepting(), Status::SUCCESS);
        assert!(!intercepting_active());
        let ends = tool.ends.len();
        assert_eq!(
            intercept_region_begin(&from_stack(Some(c"since"))),
            Status::SUCCESS
        );
        assert_eq!(intercept_region_end(&from_stack(None)), Status::SUCCESS);
        assert_eq!(
            OPEN_REGIONS.load(Ordering::Relaxed),
            1,
            "`late` is still open"
        );
        assert_eq!(intercept_region_end(&from_stack(None)), Status::SUCCESS);
        assert_eq!(tool.ends.len(), ends);
        if let Some(f) = tool.features.last() {
            assert_eq!(f[0].data.kind, data_kind::INT64);
        }
        assert_eq!(OPEN_REGIONS.load(Ordering::Relaxed), 0);
        for ctx in tool.contexts.drain(..) {
            // SAFETY: each was opened by the tool.
            assert_eq!(unsafe { strobe_metrics_close(ctx) }, Status::SUCCESS);
        }
    }
}
