//! Every process loopx still has below it, wherever it went (README
//! "Reliability"). A script's descendant may leave the script's process
//! group: `setsid`, Node's `detached: true` (which agent CLIs use for their
//! tool commands). Signals to the script's group (§7.3) miss it. When loopx
//! itself ends a script (a signal, `--timeout`, the API consumer gone), it
//! ends these too, found by walking /proc: a descendant is a process whose
//! parent chain leads to loopx. Since loopx is a subreaper
//! (process::become_subreaper), an escapee whose parent died is re-parented
//! to loopx and stays in the chain.
//!
//! Linux only: elsewhere there is no /proc to walk and nothing is found.

use std::collections::{HashMap, HashSet};

/// One process as /proc/<pid>/stat shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    pub pid: libc::pid_t,
    pub ppid: libc::pid_t,
    pub pgid: libc::pid_t,
    /// The session (the watcher tells run and foreign sessions apart).
    pub sid: libc::pid_t,
    /// Exited, not yet reaped: nothing left to signal.
    pub zombie: bool,
    /// When it started (clock ticks after boot): with the pid, names the
    /// process, as a pid alone may be reused (the watcher checks it before
    /// it signals).
    pub start: u64,
}

/// Parses `/proc/<pid>/stat`. The command name is in parentheses and may
/// hold spaces and parentheses itself, so fields are counted from the last
/// `)`.
pub fn parse_stat(pid: libc::pid_t, text: &str) -> Option<Proc> {
    let rest = text.get(text.rfind(')')? + 1..)?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    let sid = fields.next()?.parse().ok()?;
    // Field 22, starttime: the 16th after the session (field 6).
    let start = fields.nth(15).and_then(|f| f.parse().ok()).unwrap_or(0);
    Some(Proc {
        pid,
        ppid,
        pgid,
        sid,
        zombie: matches!(state, "Z" | "X"),
        start,
    })
}

/// Whom to signal so that every live descendant gets the signal once.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Targets {
    /// Process groups made only of descendants: signalled as a whole, so a
    /// process forked meanwhile in one of them gets the signal too.
    pub groups: Vec<libc::pid_t>,
    /// Descendants in a group they share with others (loopx's own group,
    /// say, which holds loopx's parent): signalled one by one.
    pub pids: Vec<libc::pid_t>,
}

impl Targets {
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.pids.is_empty()
    }
}

/// The live descendants of `root` in `procs`, as groups and single pids;
/// `skip_group` (the script's own group, signalled already) left out, and
/// the subtrees of the `spared` children of `root` too: children loopx had
/// before its first script (a `tee` of `2> >(tee log)`) and its watcher
/// are not the run's to end.
pub fn targets(
    root: libc::pid_t,
    skip_group: Option<libc::pid_t>,
    spared: &[libc::pid_t],
    procs: &[Proc],
) -> Targets {
    let mut children: HashMap<libc::pid_t, Vec<&Proc>> = HashMap::new();
    for p in procs {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut below: HashSet<libc::pid_t> = HashSet::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        for c in children.get(&pid).into_iter().flatten() {
            let spare = pid == root && spared.contains(&c.pid);
            // A pid seen twice would mean a cycle in a torn snapshot.
            if !spare && c.pid != root && below.insert(c.pid) {
                todo.push(c.pid);
            }
        }
    }
    grouped(|pid| below.contains(&pid), skip_group, procs)
}

/// The live processes of a set (`is_in`) as targets: a process group made
/// only of them is signalled as a whole, others pid by pid.
pub fn grouped(
    is_in: impl Fn(libc::pid_t) -> bool,
    skip_group: Option<libc::pid_t>,
    procs: &[Proc],
) -> Targets {
    // A group qualifies when no live process outside the set is in it.
    let mut foreign: HashSet<libc::pid_t> = HashSet::new();
    for p in procs {
        if !p.zombie && !is_in(p.pid) {
            foreign.insert(p.pgid);
        }
    }
    let mut t = Targets::default();
    for p in procs {
        if p.zombie || !is_in(p.pid) || Some(p.pgid) == skip_group {
            continue;
        }
        if foreign.contains(&p.pgid) {
            t.pids.push(p.pid);
        } else if !t.groups.contains(&p.pgid) {
            t.groups.push(p.pgid);
        }
    }
    t.groups.sort_unstable();
    t.pids.sort_unstable();
    t
}

/// Every process in /proc now (those that vanish while it is read are left
/// out).
#[cfg(target_os = "linux")]
pub fn snapshot() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut procs = Vec::new();
    let mut path = String::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        path.clear();
        path.push_str("/proc/");
        path.push_str(&pid.to_string());
        path.push_str("/stat");
        if let Some(p) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| parse_stat(pid, &text))
        {
            procs.push(p);
        }
    }
    procs
}

#[cfg(not(target_os = "linux"))]
pub fn snapshot() -> Vec<Proc> {
    Vec::new()
}

/// loopx's live descendants outside `skip_group` and the `spared`
/// subtrees, now.
pub fn find(skip_group: Option<libc::pid_t>, spared: &[libc::pid_t]) -> Targets {
    // SAFETY: getpid cannot fail.
    let own = unsafe { libc::getpid() };
    targets(own, skip_group, spared, &snapshot())
}

/// loopx's children now (before its first script: what the shell started
/// under it, such as the `tee` of a `2> >(tee log)`). Read from the
/// kernel's list of the main thread's children, else from all of /proc.
pub fn children_now() -> Vec<libc::pid_t> {
    // SAFETY: getpid cannot fail.
    let own = unsafe { libc::getpid() };
    let listed = std::fs::read_to_string(format!("/proc/{own}/task/{own}/children"));
    match listed {
        Ok(text) => text
            .split_ascii_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
        Err(_) => snapshot()
            .iter()
            .filter(|p| p.ppid == own)
            .map(|p| p.pid)
            .collect(),
    }
}

/// Sends `sig` to every target.
pub fn signal(t: &Targets, sig: i32) {
    // SAFETY: signalling descendants of loopx (and groups made of them
    // only); ESRCH means the target is gone already, which is the aim.
    unsafe {
        for &g in &t.groups {
            libc::kill(-g, sig);
        }
        for &p in &t.pids {
            libc::kill(p, sig);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: i32, ppid: i32, pgid: i32) -> Proc {
        Proc {
            pid,
            ppid,
            pgid,
            sid: pgid,
            zombie: false,
            start: 0,
        }
    }

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let text = "4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 120 0 0 0";
        assert_eq!(parse_stat(4242, text), Some(p(4242, 17, 4242)));
        let full = "9 (x) S 1 9 9 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 123456 0 0";
        assert_eq!(parse_stat(9, full).map(|p| p.start), Some(123456));
        assert_eq!(parse_stat(7, "7 (x) S 1 7 3 0").map(|p| p.sid), Some(3));
        let zombie = parse_stat(5, "5 (sh) Z 1 5 5 0").expect("parsed");
        assert!(zombie.zombie);
        assert_eq!(parse_stat(5, "5 (sh"), None);
        assert_eq!(parse_stat(5, "5 (sh) S x 5 5"), None);
    }

    #[test]
    fn escapees_in_their_own_session_are_found_through_reparenting() {
        // loopx 100 (group 90, its shell's); the script 200 (group 200) with
        // a child 201; an escapee 300 (setsid) re-parented to loopx, whose
        // child 301 shares its group; 400 is unrelated.
        let procs = [
            p(90, 1, 90),
            p(100, 90, 90),
            p(200, 100, 200),
            p(201, 200, 200),
            p(300, 100, 300),
            p(301, 300, 300),
            p(400, 1, 400),
        ];
        let t = targets(100, Some(200), &[], &procs);
        assert_eq!(t.groups, [300]);
        assert!(t.pids.is_empty());
        let t = targets(100, None, &[], &procs);
        assert_eq!(t.groups, [200, 300]);
    }

    #[test]
    fn a_group_shared_with_other_processes_is_signalled_pid_by_pid() {
        // Descendant 210 joined loopx's own group 90 (which holds the shell
        // 90); 220 joined an unrelated group 400.
        let procs = [
            p(90, 1, 90),
            p(100, 90, 90),
            p(200, 100, 200),
            p(210, 200, 90),
            p(220, 200, 400),
            p(400, 1, 400),
        ];
        let t = targets(100, Some(200), &[], &procs);
        assert!(t.groups.is_empty());
        assert_eq!(t.pids, [210, 220]);
    }

    #[test]
    fn zombies_and_loopx_itself_are_not_targets() {
        let mut z = p(300, 100, 300);
        z.zombie = true;
        let procs = [p(100, 90, 100), z];
        assert!(targets(100, None, &[], &procs).is_empty());
        // loopx leads its own group: the group is never a target.
        let procs = [p(100, 90, 100), p(200, 100, 100)];
        assert_eq!(targets(100, None, &[], &procs).pids, [200]);
    }

    #[test]
    fn spared_children_and_their_subtrees_are_left_alone() {
        // loopx 100 had a `tee` 150 (with a child 151) before its first
        // script 200; its watcher is 160.
        let procs = [
            p(100, 90, 100),
            p(150, 100, 100),
            p(151, 150, 100),
            p(160, 100, 160),
            p(200, 100, 200),
        ];
        let t = targets(100, None, &[150, 160], &procs);
        assert_eq!(t.groups, [200]);
        assert!(t.pids.is_empty());
        assert_eq!(targets(100, None, &[], &procs).pids, [150, 151]);
    }
}
