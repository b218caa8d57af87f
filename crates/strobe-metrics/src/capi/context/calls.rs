//! The C entry points on contexts and groups: `strobe_metrics_open`,
//! `close`, the group accessors and the sampling functions with their
//! group versions (those the intercepting API shares too).
//!
//! Owns turning a C handle into an open [`Context`] (through the
//! registry) and each call's `guard` (status, last error, no unwinding
//! into C). It must never dereference a handle that is not in the
//! registry, nor hold the registry lock while a context's callback runs.

use std::sync::Arc;

use super::open::open;
use super::{lookup, open_contexts, Context};
use super::{Group, Properties};
use crate::capi::status::{guard, CResult, Error, Status};
use crate::capi::types::{Feature, ALL_GROUPS};

/// Runs `f` on the open context behind `h`.
fn with_context(h: *mut Context, f: impl FnOnce(&Arc<Context>) -> CResult) -> CResult {
    let ctx = lookup(h)?;
    f(&ctx)
}

/// The context and index of a C group.
///
/// # Safety
/// `group` is null or points to a readable group.
unsafe fn group_ref(group: *const Group) -> CResult<(Arc<Context>, *mut Context, u32)> {
    if group.is_null() {
        return Err(Error::invalid("the group is NULL"));
    }
    // SAFETY: non-null, readable per the function contract.
    let g = unsafe { group.read() };
    let ctx = lookup(g.context)?;
    if g.index as usize >= ctx.group_count() {
        return Err(Error::invalid(format!(
            "group index {} does not exist in its context ({} groups)",
            g.index,
            ctx.group_count()
        )));
    }
    Ok((ctx, g.context, g.index))
}

/// `strobe_metrics_open`: opens a context counting `features`.
///
/// # Safety
/// `features` points to `feature_count` features that stay valid until
/// [`strobe_metrics_close`]; `context` is null or writable; `properties`
/// is null or readable; feature names are null or NUL-terminated.
pub unsafe extern "C" fn strobe_metrics_open(
    features: *mut Feature,
    feature_count: u32,
    context: *mut *mut Context,
    mode: u32,
    properties: *const Properties,
) -> Status {
    guard("strobe_metrics_open", || {
        // SAFETY: forwarded caller contract.
        unsafe { open(features, feature_count, context, mode, properties) }
    })
}

/// `strobe_metrics_close`: closes the context and releases it.
///
/// # Safety
/// None beyond passing a handle (an unknown one is an error).
pub unsafe extern "C" fn strobe_metrics_close(context: *mut Context) -> Status {
    guard("strobe_metrics_close", || {
        if context.is_null() {
            return Err(Error::invalid("the context is NULL"));
        }
        let removed = open_contexts().remove(&(context as usize));
        match removed {
            // Dropped here, or by the last call still using it.
            Some(ctx) => {
                drop(ctx);
                Ok(())
            }
            None => Err(Error::invalid(format!(
                "{context:p} is not an open context (closed already?)"
            ))),
        }
    })
}

/// `strobe_metrics_group_count`.
///
/// # Safety
/// `count` is null or writable.
pub unsafe extern "C" fn strobe_metrics_group_count(
    context: *mut Context,
    count: *mut u32,
) -> Status {
    guard("strobe_metrics_group_count", || {
        with_context(context, |ctx| {
            if count.is_null() {
                return Err(Error::invalid("count is NULL"));
            }
            // SAFETY: non-null, writable per the contract.
            unsafe { count.write(ctx.group_count() as u32) };
            Ok(())
        })
    })
}

/// `strobe_metrics_get_group`.
///
/// # Safety
/// `group` is null or writable.
pub unsafe extern "C" fn strobe_metrics_get_group(
    context: *mut Context,
    index: u32,
    group: *mut Group,
) -> Status {
    guard("strobe_metrics_get_group", || {
        with_context(context, |ctx| {
            if group.is_null() {
                return Err(Error::invalid("group is NULL"));
            }
            if index == ALL_GROUPS {
                return Err(Error::invalid(
                    "STROBE_METRICS_ALL_GROUPS is not a group; ask for 0..count-1",
                ));
            }
            let g = ctx.select(index)?.start;
            // SAFETY: non-null, writable per the contract.
            unsafe { group.write(ctx.group_c(g, context)) };
            Ok(())
        })
    })
}

/// `strobe_metrics_get_metrics`: evaluates the derived metrics.
///
/// # Safety
/// The context's features are still valid.
pub unsafe extern "C" fn strobe_metrics_get_metrics(context: *mut Context) -> Status {
    guard("strobe_metrics_get_metrics", || {
        with_context(context, |ctx| ctx.get_metrics())
    })
}

/// `strobe_metrics_start`.
///
/// # Safety
/// The context's features are still valid.
pub unsafe extern "C" fn strobe_metrics_start(context: *mut Context, group_index: u32) -> Status {
    guard("strobe_metrics_start", || {
        with_context(context, |ctx| ctx.start(group_index))
    })
}

/// `strobe_metrics_stop`.
///
/// # Safety
/// The context's features are still valid.
pub unsafe extern "C" fn strobe_metrics_stop(context: *mut Context, group_index: u32) -> Status {
    guard("strobe_metrics_stop", || {
        with_context(context, |ctx| ctx.stop(group_index))
    })
}

/// `strobe_metrics_read`.
///
/// # Safety
/// The context's features are still valid.
pub unsafe extern "C" fn strobe_metrics_read(context: *mut Context, group_index: u32) -> Status {
    guard("strobe_metrics_read", || {
        with_context(context, |ctx| ctx.read(group_index))
    })
}

/// `strobe_metrics_get_data`.
///
/// # Safety
/// The context's features are still valid; the completion callback is of
/// the documented type.
pub unsafe extern "C" fn strobe_metrics_get_data(
    context: *mut Context,
    group_index: u32,
) -> Status {
    guard("strobe_metrics_get_data", || {
        with_context(context, |ctx| Context::get_data(ctx, context, group_index))
    })
}

/// Starts a C group (for the intercepting API too).
///
/// # Safety
/// `group` is null or readable.
pub(crate) unsafe fn group_start(group: *const Group) -> CResult {
    // SAFETY: forwarded contract.
    let (ctx, _, index) = unsafe { group_ref(group) }?;
    ctx.start(index)
}

/// Stops, reads and completes a C group (for the intercepting API too).
///
/// # Safety
/// `group` is null or readable.
pub(crate) unsafe fn group_get_data(group: *const Group) -> CResult {
    // SAFETY: forwarded contract.
    let (ctx, h, index) = unsafe { group_ref(group) }?;
    Context::get_data(&ctx, h, index)
}

/// The context and index of a C group, for the intercepting API.
///
/// # Safety
/// `group` is null or readable.
pub(crate) unsafe fn group_context(group: *const Group) -> CResult<(Arc<Context>, usize)> {
    // SAFETY: forwarded contract.
    let (ctx, _, index) = unsafe { group_ref(group) }?;
    Ok((ctx, index as usize))
}

/// `strobe_metrics_group_start`.
///
/// # Safety
/// `group` is null or a group filled by `strobe_metrics_get_group`.
pub unsafe extern "C" fn strobe_metrics_group_start(group: *mut Group) -> Status {
    // SAFETY: forwarded contract.
    guard("strobe_metrics_group_start", || unsafe {
        group_start(group)
    })
}

/// `strobe_metrics_group_stop`.
///
/// # Safety
/// `group` is null or a group filled by `strobe_metrics_get_group`.
pub unsafe extern "C" fn strobe_metrics_group_stop(group: *mut Group) -> Status {
    guard("strobe_metrics_group_stop", || {
        // SAFETY: forwarded contract.
        let (ctx, _, index) = unsafe { group_ref(group) }?;
        ctx.stop(index)
    })
}

/// `strobe_metrics_group_read`.
///
/// # Safety
/// `group` is null or a group filled by `strobe_metrics_get_group`.
pub unsafe extern "C" fn strobe_metrics_group_read(group: *mut Group) -> Status {
    guard("strobe_metrics_group_read", || {
        // SAFETY: forwarded contract.
        let (ctx, _, index) = unsafe { group_ref(group) }?;
        ctx.read(index)
    })
}

/// `strobe_metrics_group_get_data`.
///
/// # Safety
/// `group` is null or a group filled by `strobe_metrics_get_group`.
pub unsafe extern "C" fn strobe_metrics_group_get_data(group: *mut Group) -> Status {
    // SAFETY: forwarded contract.
    guard("strobe_metrics_group_get_data", || unsafe {
        group_get_data(group)
    })
}
