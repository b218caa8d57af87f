//! Output path templates: `%hostname%/%pid%.db` and friends.
//!
//! Owns the placeholder grammar and its expansion for one process. Reads
//! the process's identity (host name, pid, ppid, MPI rank, environment) only
//! through [`ProcessIdentity`], so expansion is a pure function.

use std::collections::HashMap;
use std::path::PathBuf;

/// Why a template is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `%name%` that strobe does not know.
    #[error("unknown placeholder '%{0}%'; use %hostname%, %pid%, %ppid%, %rank% or %env{{NAME}}%")]
    Unknown(String),
    /// A `%` with no closing `%`.
    #[error("unclosed placeholder starting at '{0}'; placeholders look like %pid% (write %% for a literal %)")]
    Unclosed(String),
    /// The template is empty.
    #[error("the path template is empty")]
    Empty,
}

/// What a template may refer to.
#[derive(Debug, Clone, Default)]
pub struct ProcessIdentity {
    /// Host name.
    pub hostname: String,
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// MPI rank (0 when not launched by MPI).
    pub rank: u32,
    /// Environment variables `%env{NAME}%` may read.
    pub env: HashMap<String, String>,
}

/// Environment variables MPI launchers set to the process's rank, in the
/// order they are consulted.
pub const RANK_VARIABLES: [&str; 6] = [
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "PMIX_RANK",
    "MV2_COMM_WORLD_RANK",
    "SLURM_PROCID",
    "STROBE_RANK",
];

impl ProcessIdentity {
    /// The calling process's identity, read from the kernel and environment.
    pub fn current() -> ProcessIdentity {
        let env: HashMap<String, String> = std::env::vars().collect();
        let rank = RANK_VARIABLES
            .iter()
            .find_map(|v| env.get(*v).and_then(|r| r.trim().parse().ok()))
            .unwrap_or(0);
        ProcessIdentity {
            hostname: hostname(),
            pid: std::process::id(),
            // SAFETY: getppid has no preconditions and cannot fail.
            ppid: unsafe { libc::getppid() } as u32,
            rank,
            env,
        }
    }
}

/// The machine's host name (`uname` nodename), or `localhost` if unknown.
pub fn hostname() -> String {
    // SAFETY: utsname is plain old data; uname fills it.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable utsname.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return "localhost".into();
    }
    let bytes: Vec<u8> = uts
        .nodename
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    match String::from_utf8(bytes) {
        Ok(name) if !name.is_empty() => name,
        _ => "localhost".into(),
    }
}

enum Piece<'a> {
    Literal(&'a str),
    Hostname,
    Pid,
    Ppid,
    Rank,
    Env(&'a str),
}

fn pieces(template: &str) -> Result<Vec<Piece<'_>>, TemplateError> {
    if template.trim().is_empty() {
        return Err(TemplateError::Empty);
    }
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('%') {
        out.push(Piece::Literal(&rest[..open]));
        let after = &rest[open + 1..];
        let close = after
            .find('%')
            .ok_or_else(|| TemplateError::Unclosed(rest[open..].to_string()))?;
        let name = &after[..close];
        out.push(match name {
            "" => Piece::Literal("%"),
            "hostname" => Piece::Hostname,
            "pid" => Piece::Pid,
            "ppid" => Piece::Ppid,
            "rank" => Piece::Rank,
            _ => match name.strip_prefix("env{").and_then(|n| n.strip_suffix('}')) {
                Some(var) if !var.is_empty() => Piece::Env(var),
                _ => return Err(TemplateError::Unknown(name.to_string())),
            },
        });
        rest = &after[close + 1..];
    }
    out.push(Piece::Literal(rest));
    Ok(out)
}

/// Checks a template without expanding it.
pub fn validate_template(template: &str) -> Result<(), TemplateError> {
    pieces(template).map(|_| ())
}

/// Expands a template for one process. `%env{NAME}%` of an unset variable
/// expands to nothing.
pub fn expand_template(template: &str, id: &ProcessIdentity) -> Result<PathBuf, TemplateError> {
    let mut out = String::new();
    for piece in pieces(template)? {
        match piece {
            Piece::Literal(s) => out.push_str(s),
            Piece::Hostname => out.push_str(&id.hostname),
            Piece::Pid => out.push_str(&id.pid.to_string()),
            Piece::Ppid => out.push_str(&id.ppid.to_string()),
            Piece::Rank => out.push_str(&id.rank.to_string()),
            Piece::Env(var) => out.push_str(id.env.get(var).map_or("", String::as_str)),
        }
    }
    Ok(PathBuf::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> ProcessIdentity {
        ProcessIdentity {
            hostname: "node7".into(),
            pid: 4242,
            ppid: 1,
            rank: 3,
            env: HashMap::from([("JOB".to_string(), "run42".to_string())]),
        }
    }

    #[test]
    fn expands_every_placeholder() {
        let p = expand_template("%env{JOB}%/%hostname%/%rank%-%pid%-%ppid%%%.db", &id()).unwrap();
        assert_eq!(p, PathBuf::from("run42/node7/3-4242-1%.db"));
        assert_eq!(
            expand_template("x%env{NOPE}%y", &id()).unwrap(),
            PathBuf::from("xy")
        );
    }

    #[test]
    fn rejects_bad_templates() {
        assert_eq!(
            validate_template("%pdi%.db"),
            Err(TemplateError::Unknown("pdi".into()))
        );
        assert_eq!(
            validate_template("a/%pid"),
            Err(TemplateError::Unclosed("%pid".into()))
        );
        assert_eq!(
            validate_template("%env{}%"),
            Err(TemplateError::Unknown("env{}".into()))
        );
        assert_eq!(validate_template(" "), Err(TemplateError::Empty));
    }

    #[test]
    fn current_identity_is_this_process() {
        let me = ProcessIdentity::current();
        assert_eq!(me.pid, std::process::id());
        assert!(!me.hostname.is_empty());
        assert!(me.ppid > 0);
    }
}
