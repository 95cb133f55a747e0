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

/// A script with a background child and a setsid escapee, each recording
/// its pid, then waiting.
fn family() -> Project {
    project(
        Kind::Setsid,
        "exec sleep 1000",
        "sleep 1000 & echo $! > \"$LOOPX_PROJECT_ROOT/child.pid\"\nsleep 1000",
    )
}

#[test]
fn sigkill_of_loopx_leaves_no_process_of_its_run() {
    // DESIGN.md "Beyond the spec": nothing outlives loopx, even SIGKILL:
    // the run's watcher ends the script, its children and its escapees.
    let p = family();
    let run = p
        .loopx(&["run", "w"])
        .signal(libc::SIGKILL)
        .stdout("")
        .stderr("")
        .start();
    let script = read_pid(&p, "script.pid");
    let esc = escapee(&p);
    let child = read_pid(&p, "child.pid");
    let watcher = watcher_of(run.pid());
    run.signal(libc::SIGKILL);
    run.finish();
    assert_all_gone_within(
        "the run after loopx was SIGKILLed",
        &[script, child, esc.0],
        Duration::from_secs(10),
    );
    // Zombies aside (init reaps them): loopx is not their parent any more.
    assert_all_gone_within(
        "the script's group",
        &group_members(script),
        Duration::from_secs(1),
    );
    // Its work done, the watcher exits within a second.
    let watcher = watcher.expect("loopx had a watcher");
    assert_all_gone_within("the watcher", &[watcher], Duration::from_secs(1));
}

#[test]
fn a_natural_end_reaps_the_watcher_and_leaves_no_zombie() {
    // One watcher per run, a child of loopx; when loopx ends normally the
    // watcher exits too, and loopx reaps it.
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "cat /proc/$PPID/task/$PPID/children > \"$LOOPX_PROJECT_ROOT/kids\"\n",
    );
    p.loopx(&["run", "-n", "3", "w"])
        .stdout("")
        .stderr("")
        .run();
    let kids: Vec<i32> = p
        .read("kids")
        .split_whitespace()
        .map(|k| k.parse().expect("pid"))
        .collect();
    assert_eq!(kids.len(), 2, "the script and one watcher: {kids:?}");
    for k in kids {
        assert!(
            !std::path::Path::new(&format!("/proc/{k}")).exists(),
            "{k} outlived loopx, perhaps as a zombie"
        );
    }
}

#[test]
fn escapees_loopx_ends_are_reaped_by_loopx_not_left_to_init() {
    // Under a subreaper that reaps nothing until loopx has exited, a zombie
    // loopx left behind would be re-parented to it and seen.
    let p = project(Kind::Setsid, "exec sleep 1000", "sleep 1000");
    let wrapper = "import ctypes, os, subprocess, sys\n\
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)\n\
        code = subprocess.run(sys.argv[1:]).returncode\n\
        me = str(os.getpid())\n\
        left = []\n\
        for pid in filter(str.isdigit, os.listdir('/proc')):\n\
        \x20   try:\n\
        \x20       st = open('/proc/%s/stat' % pid).read()\n\
        \x20   except OSError:\n\
        \x20       continue\n\
        \x20   f = st[st.rfind(')') + 2:].split()\n\
        \x20   if f[1] == me:\n\
        \x20       left.append(pid + ':' + f[0])\n\
        print(code, ' '.join(left))\n";
    let mut cmd = std::process::Command::new("python3");
    cmd.arg("-c")
        .arg(wrapper)
        .arg(crate::util::loopx_bin())
        .args(["run", "--timeout", "1s", "w"])
        .current_dir(p.root());
    crate::util::isolate(&mut cmd, p.home());
    Run::command(cmd)
        .stdout("124 \n")
        .stderr("loopx: error: w:index timed out after 1s; its process group was terminated\n")
        .run();
    let esc = Escapee(read_pid(&p, "esc.pid"));
    assert!(!alive(esc.0), "the escapee outlived loopx");
}

#[test]
fn a_timeout_spares_the_log_reader_the_shell_started_under_loopx() {
    // `2> >(tee -a log >&2)`: bash starts tee as a child of what becomes
    // loopx. Only the script's tree is loopx's to end: tee lives on, so the
    // retry's output and the final error reach the log and exit is 124.
    let p = Project::new();
    p.script("w", "index.sh", "echo attempt >&2\nsleep 1000\n");
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c")
        .arg("\"$0\" run --timeout 1s --retry 1 --retry-delay 0 w 2> >(tee -a log >&2)")
        .arg(crate::util::loopx_bin())
        .current_dir(p.root());
    crate::util::isolate(&mut cmd, p.home());
    let expected = "attempt\n\
        loopx: w:index timed out after 1s; retry 1 of 1 in 0s\n\
        attempt\n\
        loopx: error: w:index timed out after 1s; its process group was terminated\n";
    Run::command(cmd)
        .status(124)
        .stdout("")
        .stderr(expected)
        .run();
    crate::util::procs::wait_until("tee wrote the log", || {
        std::fs::read_to_string(p.path("log")).is_ok_and(|l| l == expected)
    });
}

/// A run with a checkpoint whose script records its pid, starts a child
/// that ignores SIGTERM (so that the watcher, once loopx is SIGKILLed,
/// goes on looking for the run's processes through the grace period), and
/// waits.
fn stubborn() -> Project {
    let p = Project::new();
    p.script(
        "a",
        "index.sh",
        "echo $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\n\
         ( trap '' TERM; exec sleep 1000 ) &\n\
         echo $! > \"$LOOPX_PROJECT_ROOT/child.pid\"\n\
         echo started >&2\n\
         sleep 1000\n",
    );
    p
}

#[test]
fn the_watcher_spares_a_process_that_opened_the_run_s_checkpoint() {
    // Every `loopx run` opens all checkpoints as it starts (to prune old
    // ones), `loopx resume` lists them, a user may `cat` one: holding the
    // run's checkpoint open does not make a process part of the run. (A
    // watcher that went by the checkpoint ended such a loopx, started in
    // the same shell: `scripts/stress.sh --sigkill` saw it exit 143.)
    let p = stubborn();
    let run = p
        .loopx(&["run", "a"])
        .signal(libc::SIGKILL)
        .stdout("")
        .stderr("started\n")
        .start();
    let script = read_pid(&p, "script.pid");
    let child = read_pid(&p, "child.pid");
    let runs = p.home().join(".local/state/loopx/runs");
    let ckpt = std::fs::read_dir(&runs)
        .expect("the checkpoint directory")
        .flatten()
        .map(|e| e.path())
        .find(|f| f.extension().is_some_and(|x| x == "ckpt"))
        .expect("the run's checkpoint");
    let opened = std::fs::File::open(&ckpt).expect("open the checkpoint");
    let mut holder = {
        use std::os::unix::process::CommandExt;
        std::process::Command::new("sleep")
            .arg("1000")
            .stdin(opened)
            .process_group(0)
            .spawn()
            .expect("spawn sleep")
    };
    let holder_pid = holder.id() as i32;
    // The watcher takes its name once it runs (it starts as `exe`).
    wait_until("loopx's watcher", || watcher_of(run.pid()).is_some());
    let watcher = watcher_of(run.pid()).expect("loopx had a watcher");
    run.signal(libc::SIGKILL);
    run.finish();
    assert_all_gone_within(
        "the run after loopx was SIGKILLed",
        &[script, child, watcher],
        GRACE + Duration::from_secs(5),
    );
    let spared = alive(holder_pid);
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(spared, "the watcher ended a process outside the run");
}
