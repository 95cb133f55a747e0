//! The npm shim as loopx's parent (dist/npm/bin/loopx.js). Where the shim
//! cannot replace itself with loopx (Node before 22.15, Bun), it stays in
//! between and forwards signals. If it dies without forwarding (SIGKILL, or
//! a signal that beat its handlers), loopx would run on under a new parent
//! with nobody to stop it, and the script with it. The shim names itself in
//! `LOOPX_SHIM_PID`; loopx asks the kernel for SIGTERM when that parent dies
//! (PR_SET_PDEATHSIG, Linux), so the run ends as SIGTERM ends it (§7.3: the
//! script's group terminated with the grace period, exit 143).
//!
//! The variable is the shim's business alone: it never reaches scripts
//! (engine.rs leaves it out of their environment).

use std::ffi::OsStr;

use crate::proc::signals::Signals;

/// Set by the npm shim on its spawn path: its own pid.
pub const VAR: &str = "LOOPX_SHIM_PID";

/// The shim's pid from the variable's value: a positive decimal number.
pub fn parse(value: Option<&OsStr>) -> Option<libc::pid_t> {
    let text = value?.to_str()?;
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|&pid: &libc::pid_t| pid > 1)
}

/// What to do about the shim, from what the process sees after asking for
/// the parent-death signal.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    /// The shim is the parent: the kernel will signal its death.
    Watched,
    /// The shim is already gone (it died before the request): end now.
    Gone,
    /// The shim lives but is not the parent (a wrapper in between): not
    /// ours to watch.
    NotParent,
}

pub fn check(shim: libc::pid_t, parent: libc::pid_t, shim_alive: bool) -> Check {
    if parent == shim {
        Check::Watched
    } else if shim_alive {
        Check::NotParent
    } else {
        Check::Gone
    }
}

/// Watches the shim named by `LOOPX_SHIM_PID`, if any. Call right after
/// the signal handlers are installed (signals.rs).
pub fn watch(signals: &mut Signals) {
    let Some(shim) = parse(std::env::var_os(VAR).as_deref()) else {
        return;
    };
    watch_pid(signals, shim);
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn watch_pid(signals: &mut Signals, shim: libc::pid_t) {
    // Without the handler the signal would kill loopx outright: no watch.
    let Ok(sig) = signals.catch_parent_death() else {
        return;
    };
    // First the request, then the look at the parent: a shim that dies in
    // between is seen one way or the other.
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0);
    }
    // A zombie counts as gone: its parent may not have reaped it yet.
    let alive = std::fs::read_to_string(format!("/proc/{shim}/stat"))
        .ok()
        .and_then(|text| crate::proc::descendants::parse_stat(shim, &text))
        .is_some_and(|p| !p.zombie);
    // SAFETY: getppid cannot fail.
    let parent = unsafe { libc::getppid() };
    // SAFETY: signalling this process, or clearing its own request.
    unsafe {
        match check(shim, parent, alive) {
            Check::Watched => {}
            Check::Gone => {
                libc::kill(libc::getpid(), sig);
            }
            Check::NotParent => {
                libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0);
            }
        }
    }
}

/// No parent-death signal elsewhere; the shim replaces itself with loopx
/// where Node can (process.execve), which leaves nothing to watch.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn watch_pid(_signals: &mut Signals, _shim: libc::pid_t) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_pid_is_taken() {
        let p = |s: &str| parse(Some(OsStr::new(s)));
        assert_eq!(p("4242"), Some(4242));
        for bad in ["", "0", "1", "-5", "+5", " 5", "5x", "99999999999"] {
            assert_eq!(p(bad), None, "{bad:?}");
        }
        assert_eq!(parse(None), None);
    }

    #[test]
    fn a_shim_that_died_first_ends_the_run() {
        assert_eq!(check(10, 10, true), Check::Watched);
        // Re-parented to init or a subreaper, and the shim is gone.
        assert_eq!(check(10, 1, false), Check::Gone);
        assert_eq!(check(10, 7, true), Check::NotParent);
    }
}
