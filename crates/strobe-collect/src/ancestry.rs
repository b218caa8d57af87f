//! Other processes as `/proc/PID/stat` shows them: whether one ended,
//! whose child it is, and whether it descends from processes the caller
//! knows.
//!
//! Owns reading that file (the command between its parentheses may hold
//! anything, spaces and parentheses included: the fields that follow
//! start after the last `)`). Never signals, opens or waits for a process.

/// Most generations looked at to find whether a process descends from
/// another.
const GENERATIONS: usize = 4096;

/// What `/proc/PID/stat` says of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Its state letter (`R`, `S`, `Z`, …).
    pub state: u8,
    /// Its parent.
    pub ppid: i32,
}

/// `pid`'s state and parent; `None` once it is gone.
pub fn stat(pid: i32) -> Option<Stat> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    let ppid = fields.next()?.parse().ok()?;
    Some(Stat { state, ppid })
}

/// Whether `pid` ended (a zombie, or gone).
pub fn ended(pid: i32) -> bool {
    stat(pid).is_none_or(|s| matches!(s.state, b'Z' | b'X'))
}

/// Whether `pid` or one of its ancestors (at most [`GENERATIONS`] up) is
/// one `known` accepts.
pub fn descends(pid: i32, known: impl Fn(i32) -> bool) -> bool {
    let mut p = pid;
    for _ in 0..GENERATIONS {
        if known(p) {
            return true;
        }
        match stat(p) {
            Some(s) if s.ppid > 0 && s.ppid != p => p = s.ppid,
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_its_parent_and_descends_from_it() {
        let me = std::process::id() as i32;
        // SAFETY: getppid has no preconditions.
        let parent = unsafe { libc::getppid() };
        assert_eq!(stat(me).map(|s| s.ppid), Some(parent));
        assert!(!ended(me));
        assert!(descends(me, |p| p == parent));
        assert!(descends(me, |p| p == me));
        assert!(!descends(me, |p| p == i32::MAX));
        assert_eq!(stat(i32::MAX), None);
        assert!(ended(i32::MAX));
    }

    #[test]
    fn a_child_that_exited_has_ended_before_it_is_reaped() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        // A zombie until waited for.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !ended(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(stat(pid).map(|s| s.state), Some(b'Z'));
        child.wait().unwrap();
    }
}
