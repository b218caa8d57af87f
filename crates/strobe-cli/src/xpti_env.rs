//! The environment the `xpti` setting (`strobe sample --xpti`) gives the
//! program, so that XPTI-instrumented runtimes (SYCL, Unified Runtime)
//! load a dispatcher and hand their notifications to strobe's runtime.
//!
//! Owns the values of the three XPTI variables: `XPTI_TRACE_ENABLE=1`,
//! `XPTI_FRAMEWORK_DISPATCHER` (the user's own wins; otherwise
//! `libstrobe_xpti.so`, found by [`crate::runtime_lib::locate_dispatcher`])
//! and `XPTI_SUBSCRIBERS` (the user's subscribers kept, the runtime
//! appended). Unlike strobe's `STROBE_*` variables these are meant for the
//! program: the runtimes read them. Never changes strobe's own environment.

use anyhow::Result;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// The variable that turns XPTI tracing on.
pub const TRACE_ENABLE: &str = "XPTI_TRACE_ENABLE";
/// The variable naming the dispatcher a runtime's proxy loads.
pub const DISPATCHER: &str = "XPTI_FRAMEWORK_DISPATCHER";
/// The variable listing subscriber libraries (comma-separated).
pub const SUBSCRIBERS: &str = "XPTI_SUBSCRIBERS";

/// The XPTI variables for a program whose preloaded runtime is `runtime`.
/// `user_dispatcher` and `user_subscribers`: the values the user set (an
/// empty value counts as unset); `locate`: finds strobe's dispatcher, only
/// called when the user named none (its error stops the launch).
pub fn variables(
    runtime: &Path,
    user_dispatcher: Option<&OsStr>,
    user_subscribers: Option<&OsStr>,
    locate: impl FnOnce() -> Result<PathBuf>,
) -> Result<Vec<(OsString, OsString)>> {
    let mut env = vec![(TRACE_ENABLE.into(), "1".into())];
    if user_dispatcher.is_none_or(OsStr::is_empty) {
        env.push((DISPATCHER.into(), locate()?.into_os_string()));
    }
    let runtime = runtime.as_os_str();
    let mut subscribers = OsString::new();
    if let Some(theirs) = user_subscribers.filter(|s| !s.is_empty()) {
        let listed = theirs
            .as_encoded_bytes()
            .split(|&b| b == b',')
            .any(|entry| entry.trim_ascii() == runtime.as_encoded_bytes());
        if listed {
            return Ok(env);
        }
        subscribers.push(theirs);
        subscribers.push(",");
    }
    subscribers.push(runtime);
    env.push((SUBSCRIBERS.into(), subscribers));
    Ok(env)
}

/// [`variables`] with the user's values from strobe's environment.
pub fn for_program(runtime: &Path) -> Result<Vec<(OsString, OsString)>> {
    let dispatcher = std::env::var_os(DISPATCHER);
    let subscribers = std::env::var_os(SUBSCRIBERS);
    variables(
        runtime,
        dispatcher.as_deref(),
        subscribers.as_deref(),
        || crate::runtime_lib::locate_dispatcher(runtime),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(env: &'a [(OsString, OsString)], key: &str) -> Option<&'a str> {
        env.iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.to_str().unwrap())
    }

    #[test]
    fn strobes_dispatcher_and_the_runtime_as_the_only_subscriber() {
        let env = variables(Path::new("/rt.so"), None, None, || {
            Ok(PathBuf::from("/x.so"))
        })
        .unwrap();
        assert_eq!(get(&env, TRACE_ENABLE), Some("1"));
        assert_eq!(get(&env, DISPATCHER), Some("/x.so"));
        assert_eq!(get(&env, SUBSCRIBERS), Some("/rt.so"));
    }

    #[test]
    fn the_users_dispatcher_wins_and_their_subscribers_stay() {
        let env = variables(
            Path::new("/rt.so"),
            Some(OsStr::new("/intel/libxptifw.so")),
            Some(OsStr::new("/a.so,/b.so")),
            || panic!("not searched when the user named a dispatcher"),
        )
        .unwrap();
        assert_eq!(get(&env, DISPATCHER), None, "left as the user set it");
        assert_eq!(get(&env, SUBSCRIBERS), Some("/a.so,/b.so,/rt.so"));
        let again = variables(
            Path::new("/rt.so"),
            Some(OsStr::new("/d.so")),
            Some(OsStr::new("/a.so, /rt.so")),
            || unreachable!(),
        )
        .unwrap();
        assert_eq!(get(&again, SUBSCRIBERS), None, "already listed");
    }

    #[test]
    fn empty_values_count_as_unset_and_a_missing_dispatcher_is_an_error() {
        let env = variables(
            Path::new("/rt.so"),
            Some(OsStr::new("")),
            Some(OsStr::new("")),
            || Ok(PathBuf::from("/x.so")),
        )
        .unwrap();
        assert_eq!(get(&env, DISPATCHER), Some("/x.so"));
        assert_eq!(get(&env, SUBSCRIBERS), Some("/rt.so"));
        let e = variables(Path::new("/rt.so"), None, None, || {
            anyhow::bail!("no dispatcher")
        });
        assert!(e.is_err());
    }
}
