//! Descendants that left the script's process group (README "Signals and
//! process groups"): `setsid`, Node's `detached: true` (which agent CLIs use
//! for tool commands). Signals to the group miss them; when loopx itself
//! ends a script (a signal, `--timeout`), it ends them too, with the same
//! grace period. A natural end leaves them be, like any background process.
//!
//! Escapees record their own pid; the tests wait on those files.

use std::time::{Duration, Instant};

use crate::util::procs::*;
use crate::util::*;

/// The grace period of §7.3.
const GRACE: Duration = Duration::from_secs(5);

/// Kills the escapee when the test ends, passed or failed.
struct Escapee(i32);

impl Drop for Escapee {
    fn drop(&mut self) {
        if alive(self.0) {
            // SAFETY: signalling a process this test's script started.
            unsafe {
                libc::kill(self.0, libc::SIGKILL);
            }
        }
    }
}

/// Fields of /proc/<pid>/stat after the name: the session is the 4th.
fn session(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let rest = &stat[stat.rfind(')').expect(")") + 2..];
    rest.split_whitespace()
        .nth(3)
        .and_then(|f| f.parse().ok())
        .expect("session")
}

/// How the escapee leaves the script's group and session.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// `setsid` in a bash script.
    Setsid,
    /// Node's `spawn(..., { detached: true })`, as agent CLIs do.
    NodeDetached,
}

/// A project whose script starts an escapee of `kind` that runs `body`
/// (bash) and records its pid in `esc.pid`, then waits (or exits, when
/// `then` says so).
fn project(kind: Kind, body: &str, then: &str) -> Project {
    let p = Project::new();
    let inner = format!("echo $$ > \"$LOOPX_PROJECT_ROOT/esc.pid\"; {body}");
    let start = match kind {
        Kind::Setsid => format!("setsid bash -c '{inner}' </dev/null >/dev/null 2>&1 &\n"),
        Kind::NodeDetached => format!(
            "node -e 'require(\"child_process\").spawn(\"bash\", [\"-c\", process.argv[1]], \
             {{ detached: true, stdio: \"ignore\" }}).unref()' '{inner}'\n"
        ),
    };
    p.script(
        "w",
        "index.sh",
        &format!(
            "echo $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\n{start}\
             until [ -s \"$LOOPX_PROJECT_ROOT/esc.pid\" ]; do sleep 0.01; done\n{then}\n"
        ),
    );
    p
}

/// Waits for the escapee's pid and checks that it did escape: a session of
/// its own, outside the script's group.
fn escapee(p: &Project) -> Escapee {
    let esc = Escapee(read_pid(p, "esc.pid"));
    assert_eq!(
        session(esc.0),
        esc.0,
        "the escapee leads a session of its own"
    );
    esc
}

#[test]
fn a_signal_ends_escapees_too() {
    for (kind, sig, code) in [
        (Kind::Setsid, libc::SIGTERM, 143),
        (Kind::Setsid, libc::SIGINT, 130),
        (Kind::NodeDetached, libc::SIGINT, 130),
    ] {
        let label = format!("{kind:?} + signal {sig}");
        let p = project(kind, "exec sleep 1000", "sleep 1000");
        let run = p.loopx(&["run", "w"]).status(code).stdout("").start();
        let script = read_pid(&p, "script.pid");
        let esc = escapee(&p);
        run.signal(sig);
        run.finish();
        assert!(!alive(esc.0), "{label}: the escapee outlived loopx");
        assert_group_gone(script);
    }
}

#[test]
fn an_escapee_ignoring_sigterm_is_killed_when_the_grace_period_ends() {
    let p = project(
        Kind::Setsid,
        "trap \"\" TERM; while :; do sleep 0.05; done",
        "sleep 1000",
    );
    let run = p.loopx(&["run", "w"]).status(143).stdout("").start();
    let script = read_pid(&p, "script.pid");
    let esc = escapee(&p);
    run.signal(libc::SIGTERM);
    let signalled = Instant::now();
    run.finish();
    let took = signalled.elapsed();
    assert!(
        took >= GRACE - Duration::from_millis(300),
        "loopx exited before the grace period ended: {took:?}"
    );
    assert!(!alive(esc.0), "the escapee outlived loopx");
    assert_group_gone(script);
}

#[test]
fn a_timeout_ends_escapees_too() {
    let p = project(Kind::Setsid, "exec sleep 1000", "sleep 1000");
    p.loopx(&["run", "--timeout", "1s", "w"])
        .status(124)
        .stdout("")
        .stderr("loopx: error: w:index timed out after 1s; its process group was terminated\n")
        .run();
    let esc = Escapee(read_pid(&p, "esc.pid"));
    assert!(!alive(esc.0), "the escapee outlived loopx");
    assert_group_gone(read_pid(&p, "script.pid"));
}

#[test]
fn a_natural_end_leaves_escapees_alone() {
    // README: background processes are not killed when a script exits
    // normally; an escapee is one.
    let p = project(Kind::Setsid, "exec sleep 1000", "printf '{\"stop\":true}'");
    p.loopx(&["run", "w"]).stdout("").run();
    let esc = escapee(&p);
    assert!(alive(esc.0), "the escapee was killed at a natural end");
}
