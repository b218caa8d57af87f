//! Profiling contexts: `strobe_metrics_open`/`close`, groups, the sampling
//! functions (`start`, `stop`, `read`, `get_data` and their group
//! versions) and `get_metrics`.
//!
//! Owns [`Context`]: the caller's feature array (pointer only; the caller
//! keeps it alive until close), the plan that computes each feature from
//! counters ([`crate::defs::Plan`]), one [`Counters`] per group (so a
//! group starts, stops and reads as one, its rusage/procfs counters with
//! it), each group's readings at its start (its counts are reset there;
//! enabled and running times are taken as differences from that reading,
//! so a multiplexed count is scaled by its own interval's ratio), and the
//! latest value of every counter, which `get_metrics` evaluates. Owns the
//! registry of open contexts: every handle from C is looked up there
//! (an unknown pointer is an error, not a crash) and held by an `Arc` for
//! the call, so a completion callback may close its context.
//!
//! Owns the header's types that name a context: the group a context hands
//! out ([`Group`]), its completion callback ([`ContextCallback`]) and the
//! properties it is opened with ([`Properties`]); the assertions at the
//! bottom pin their layouts as [`super::types`] does for the rest.
//!
//! Must never hold the context's lock or a borrow of caller memory while a
//! caller's callback runs, never write a feature's fields other than
//! `data`, and never read or write the features after close.

mod calls;
mod open;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::ffi::c_void;
use std::ops::Range;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use super::status::{CResult, Error, Status};
use super::types::{target, Data, Feature, ALL_GROUPS};
use crate::counting::{CountError, Counters, Reading};
use crate::defs::Plan;

/// `strobe_metrics_group_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Group {
    /// Group index.
    pub index: u32,
    /// The group's features (owned by the context).
    pub features: *mut *mut Feature,
    /// How many.
    pub feature_count: u32,
    /// The context handle.
    pub context: *mut Context,
}

impl Group {
    /// An empty group (null pointers).
    pub const EMPTY: Group = Group {
        index: 0,
        features: std::ptr::null_mut(),
        feature_count: 0,
        context: std::ptr::null_mut(),
    };
}

/// `strobe_metrics_context_callback_t`.
pub type ContextCallback = Option<unsafe extern "C" fn(group: *mut Group, arg: *mut c_void)>;

/// `strobe_metrics_properties_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Properties {
    /// Completion callback.
    pub callback: ContextCallback,
    /// Its argument.
    pub callback_arg: *mut c_void,
    /// The seed's HSA queue: must be null.
    pub queue: *mut c_void,
    /// Ignored.
    pub queue_depth: u32,
    /// A [`target`] value.
    pub target: u32,
    /// Thread or process id, 0 = the caller.
    pub pid: i32,
    /// [`flags`](super::types::flags).
    pub flags: u32,
    /// Most perf events per group; 0 = each PMU's own.
    pub max_slots: u32,
    /// Must be 0.
    pub reserved0: u32,
    /// Must be 0.
    pub reserved: [u64; 4],
}

impl Default for Properties {
    fn default() -> Self {
        Properties {
            callback: None,
            callback_arg: std::ptr::null_mut(),
            queue: std::ptr::null_mut(),
            queue_depth: 0,
            target: target::THREAD,
            pid: 0,
            flags: 0,
            max_slots: 0,
            reserved0: 0,
            reserved: [0; 4],
        }
    }
}

/// A profiling context (`strobe_metrics_t`). C sees only its address,
/// which is the handle looked up in the registry of open contexts.
pub struct Context {
    callback: ContextCallback,
    callback_arg: *mut c_void,
    /// Each group's features, the arrays `strobe_metrics_group_t.features`
    /// point into.
    members: Vec<Box<[*mut Feature]>>,
    state: Mutex<State>,
}

// SAFETY: the raw pointers a context holds (the caller's features, the
// callback argument, the member arrays it owns) are only dereferenced as
// the header's contract allows: the caller keeps the features alive until
// close and does not use a context concurrently with its close. Every
// mutable field is behind the mutex.
unsafe impl Send for Context {}
// SAFETY: as for Send: shared access goes through the mutex or reads
// fields that never change after open.
unsafe impl Sync for Context {}

/// What a feature is computed from.
#[derive(Clone, Copy, Debug)]
enum Role {
    /// A counter: reading `k` of group `group`; `scaled` when its catalog
    /// scale is not 1 (the value is a DOUBLE in its unit).
    Counter {
        group: usize,
        k: usize,
        scaled: bool,
    },
    /// A derived metric (plan output = feature index).
    Derived,
}

struct GroupState {
    counters: Counters,
    /// Plan counter slot of each reading.
    slots: Vec<usize>,
    /// Catalog scale of each reading.
    scales: Vec<f64>,
    /// Readings at the last start, after the reset.
    base: Vec<Reading>,
    /// The last readings.
    now: Vec<Reading>,
    /// `(count, value)` of each reading over the last interval.
    values: Vec<Option<(u64, f64)>>,
    running: bool,
    started: bool,
}

struct State {
    features: *mut Feature,
    roles: Vec<Role>,
    plan: Plan,
    groups: Vec<GroupState>,
    /// Latest value of each plan counter, in its unit.
    latest: Vec<Option<f64>>,
    outputs: Vec<Option<f64>>,
}

/// Open contexts by address.
static OPEN: LazyLock<Mutex<HashMap<usize, Arc<Context>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn open_contexts() -> MutexGuard<'static, HashMap<usize, Arc<Context>>> {
    OPEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// The open context behind handle `h`.
pub(crate) fn lookup(h: *mut Context) -> CResult<Arc<Context>> {
    if h.is_null() {
        return Err(Error::invalid("the context is NULL"));
    }
    open_contexts().get(&(h as usize)).cloned().ok_or_else(|| {
        Error::invalid(format!(
            "{h:p} is not an open context (closed already, or never returned by \
             strobe_metrics_open)"
        ))
    })
}

impl Context {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The number of groups.
    pub fn group_count(&self) -> usize {
        self.members.len()
    }

    /// The C view of group `g` with handle `h`.
    fn group_c(&self, g: usize, h: *mut Context) -> Group {
        let m = &self.members[g];
        Group {
            index: g as u32,
            features: m.as_ptr() as *mut *mut Feature,
            feature_count: m.len() as u32,
            context: h,
        }
    }

    /// The groups `index` selects.
    fn select(&self, index: u32) -> CResult<Range<usize>> {
        let n = self.group_count();
        if index == ALL_GROUPS {
            Ok(0..n)
        } else if (index as usize) < n {
            Ok(index as usize..index as usize + 1)
        } else {
            Err(Error::invalid(format!(
                "group {index} does not exist: the context has {n} group{} (0..{}), or \
                 STROBE_METRICS_ALL_GROUPS",
                if n == 1 { "" } else { "s" },
                n.saturating_sub(1)
            )))
        }
    }

    fn start(&self, index: u32) -> CResult {
        let range = self.select(index)?;
        let mut st = self.state();
        for g in range {
            st.start(g)?;
        }
        Ok(())
    }

    fn stop(&self, index: u32) -> CResult {
        let range = self.select(index)?;
        let mut st = self.state();
        for g in range {
            st.stop(g)?;
        }
        Ok(())
    }

    fn read(&self, index: u32) -> CResult {
        let range = self.select(index)?;
        let mut st = self.state();
        for g in range {
            st.read(g)?;
        }
        Ok(())
    }

    /// Stops and reads the selected groups, then calls the completion
    /// callback for each, with no lock held (it may close the context:
    /// `this` keeps it alive until the loop ends).
    fn get_data(this: &Arc<Context>, h: *mut Context, index: u32) -> CResult {
        let range = this.select(index)?;
        {
            let mut st = this.state();
            for g in range.clone() {
                st.stop(g)?;
                st.read(g)?;
            }
        }
        if let Some(cb) = this.callback {
            for g in range {
                let mut group = this.group_c(g, h);
                // SAFETY: the caller registered `cb` with the documented
                // type; `group` is a live local whose `features` array the
                // Arc keeps alive during the call.
                unsafe { cb(&mut group, this.callback_arg) };
            }
        }
        Ok(())
    }

    fn get_metrics(&self) -> CResult {
        let mut st = self.state();
        let st = &mut *st;
        st.plan.evaluate(&st.latest, &mut st.outputs);
        for (i, role) in st.roles.iter().enumerate() {
            if let Role::Derived = role {
                let d = st.outputs[i].map_or(Data::UNINIT, Data::double);
                // SAFETY: `i` indexes the caller's array, alive until close.
                unsafe { std::ptr::addr_of_mut!((*st.features.add(i)).data).write(d) };
            }
        }
        Ok(())
    }

    /// Whether group `g` is running (for the intercepting API).
    pub(crate) fn is_running(&self, g: usize) -> bool {
        self.state().groups.get(g).is_some_and(|gs| gs.running)
    }
}

fn io(e: CountError) -> Error {
    match e {
        CountError::Io { .. } => Error::new(Status::ERROR_IO, e.to_string()),
        other => Error::new(Status::ERROR, other.to_string()),
    }
}

impl State {
    fn start(&mut self, g: usize) -> CResult {
        let gs = &mut self.groups[g];
        if gs.running {
            return Ok(());
        }
        gs.counters.reset().map_err(io)?;
        gs.counters.read_into(&mut gs.base).map_err(io)?;
        gs.counters.enable().map_err(io)?;
        gs.running = true;
        gs.started = true;
        Ok(())
    }

    fn stop(&mut self, g: usize) -> CResult {
        let gs = &mut self.groups[g];
        if !gs.running {
            return Ok(());
        }
        gs.counters.disable().map_err(io)?;
        gs.running = false;
        Ok(())
    }

    /// Reads group `g` into its counter features and the latest values.
    fn read(&mut self, g: usize) -> CResult {
        let gs = &mut self.groups[g];
        gs.counters.read_into(&mut gs.now).map_err(io)?;
        for k in 0..gs.slots.len() {
            let (cur, base) = (gs.now[k], gs.base[k]);
            let en = cur.enabled_ns.saturating_sub(base.enabled_ns);
            let run = cur.running_ns.saturating_sub(base.running_ns);
            let v = if !gs.started || (run == 0 && en > 0) {
                None
            } else if run >= en {
                Some((cur.raw, cur.raw as f64))
            } else {
                let v = cur.raw as f64 * en as f64 / run as f64;
                Some((v.round() as u64, v))
            };
            gs.values[k] = v;
            self.latest[gs.slots[k]] = v.map(|(_, x)| x * gs.scales[k]);
        }
        for (i, role) in self.roles.iter().enumerate() {
            let Role::Counter { group, k, scaled } = *role else {
                continue;
            };
            if group != g {
                continue;
            }
            let gs = &self.groups[g];
            let d = match gs.values[k] {
                None => Data::UNINIT,
                Some((_, v)) if scaled => Data::double(v * gs.scales[k]),
                Some((c, _)) => Data::int64(c),
            };
            // SAFETY: `i` indexes the caller's array, alive until close.
            unsafe { std::ptr::addr_of_mut!((*self.features.add(i)).data).write(d) };
        }
        Ok(())
    }
}

pub(crate) use calls::{group_context, group_get_data, group_start};
pub use calls::{
    strobe_metrics_close, strobe_metrics_get_data, strobe_metrics_get_group,
    strobe_metrics_get_metrics, strobe_metrics_group_count, strobe_metrics_group_get_data,
    strobe_metrics_group_read, strobe_metrics_group_start, strobe_metrics_group_stop,
    strobe_metrics_open, strobe_metrics_read, strobe_metrics_start, strobe_metrics_stop,
};

// The layouts the header documents (64-bit Linux).
#[cfg(target_pointer_width = "64")]
mod layout {
    use super::{Group, Properties};
    use std::mem::{offset_of, size_of};

    const _: () = assert!(size_of::<Group>() == 32);
    const _: () = assert!(offset_of!(Group, features) == 8);
    const _: () = assert!(offset_of!(Group, feature_count) == 16);
    const _: () = assert!(offset_of!(Group, context) == 24);
    const _: () = assert!(size_of::<Properties>() == 80);
    const _: () = assert!(offset_of!(Properties, queue_depth) == 24);
    const _: () = assert!(offset_of!(Properties, target) == 28);
    const _: () = assert!(offset_of!(Properties, pid) == 32);
    const _: () = assert!(offset_of!(Properties, flags) == 36);
    const _: () = assert!(offset_of!(Properties, max_slots) == 40);
    const _: () = assert!(offset_of!(Properties, reserved0) == 44);
    const _: () = assert!(offset_of!(Properties, reserved) == 48);
}
