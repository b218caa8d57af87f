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
    descends_through(pid, known, |p| stat(p).map(|s| s.ppid))
}

/// [`descends`] with the parents `parent_of` gives (`None` once a process
/// is gone): a parent of 0 or of the process itself ends the line.
pub fn descends_through(
    pid: i32,
    known: impl Fn(i32) -> bool,
    parent_of: impl Fn(i32) -> Option<i32>,
) -> bool {
    let mut p = pid;
    for _ in 0..GENERATIONS {
        if known(p) {
            return true;
        }
        match parent_of(p) {
            Some(ppid) if ppid > 0 && ppid != p => p = ppid,
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

    /// Parents by pid, as `/proc` would say.
    fn family(pairs: &[(i32, i32)]) -> impl Fn(i32) -> Option<i32> + '_ {
        |pid| {
            pairs
                .iter()
                .find(|(p, _)| *p == pid)
                .map(|(_, parent)| *parent)
        }
    }

    #[test]
    fn a_process_descends_from_any_known_ancestor_and_from_nothing_else() {
        // 1 ← 100 (the run's root) ← 200 ← 300; 400 is another's child.
        let parents = family(&[(100, 1), (200, 100), (300, 200), (400, 1)]);
        let root = |p| p == 100;
        assert!(descends_through(300, root, &parents));
        assert!(descends_through(200, root, &parents));
        assert!(descends_through(100, root, &parents), "the root itself");
        assert!(!descends_through(400, root, &parents));
        assert!(!descends_through(1, root, &parents));
        // A process whose entry is gone: only itself can be known.
        assert!(!descends_through(999, root, &parents));
        assert!(descends_through(999, |p| p == 999, &parents));
        // Known in the middle of the line (an announced child).
        assert!(descends_through(300, |p| p == 200, &parents));
        assert!(
            !descends_through(200, |p| p == 300, &parents),
            "not upwards"
        );
    }

    #[test]
    fn a_line_of_parents_that_loops_or_never_ends_is_cut() {
        // A line the program cannot make, but `/proc` read at the wrong
        // moment (pids reused) could show: it ends, it does not spin.
        let looping = family(&[(10, 20), (20, 30), (30, 10)]);
        assert!(!descends_through(10, |p| p == 1, &looping));
        assert!(descends_through(10, |p| p == 30, &looping));
        assert!(!descends_through(5, |p| p == 1, family(&[(5, 5)])));
        assert!(!descends_through(5, |p| p == 0, family(&[(5, 0)])));
        assert!(!descends_through(5, |p| p == -1, family(&[(5, -1)])));
        // Deeper than the generations looked at: not found.
        let asked = std::cell::Cell::new(0usize);
        let endless = |p: i32| {
            asked.set(asked.get() + 1);
            Some(p + 1)
        };
        assert!(!descends_through(1, |p| p == i32::MAX, endless));
        assert_eq!(asked.get(), GENERATIONS);
        let deep = GENERATIONS as i32;
        assert!(descends_through(1, |p| p == deep, |p| Some(p + 1)));
        assert!(!descends_through(1, |p| p == deep + 1, |p| Some(p + 1)));
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
