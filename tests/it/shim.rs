//! The npm shim (dist/npm/bin/loopx.js) leaves nothing behind (README
//! "Reliability notes"). On the spawn path (Node < 22.15, Bun) the binary is
//! the shim's child and watches it: a shim killed outright, even by SIGKILL,
//! ends the run as SIGTERM does (§7.3: the script's group gets SIGTERM, the
//! grace period, then SIGKILL). On the execve path (Node >= 22.15) the shim
//! becomes the binary: there is no process in between to lose.
//!
//! The shim runs the binary under test through LOOPX_BINARY_PATH. Scripts
//! record loopx's pid (`$PPID`) and their process group; the tests wait on
//! those files and on /proc, never on fixed sleeps.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util::procs::*;
use crate::util::*;

/// The grace period of §7.3.
const GRACE: Duration = Duration::from_secs(5);

fn shim() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/npm/bin/loopx.js")
}

/// The system node (Node 20 in CI).
fn node() -> PathBuf {
    which("node").expect("node must be on PATH for the shim tests")
}

/// LOOPX_TEST_NODE22, else where scripts/test.sh installs it.
fn node22() -> PathBuf {
    std::env::var_os("LOOPX_TEST_NODE22")
        .map(PathBuf::from)
        .or_else(|| Some(ci_cache().join("node22/node_modules/.bin/node")))
        .filter(|p| p.is_file())
        .expect("Node 22 not found: set LOOPX_TEST_NODE22 (scripts/test.sh installs it)")
}

fn has_execve(node: &Path) -> bool {
    let out = Command::new(node)
        .args(["-p", "typeof process.execve"])
        .output()
        .expect("run node");
    String::from_utf8_lossy(&out.stdout).trim() == "function"
}

/// A script that records loopx's pid and its own group, then writes a
/// heartbeat; `setup` runs first (a trap, say).
fn project(setup: &str) -> Project {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        &format!(
            "{setup}\nread -r _ _ _ _ pgid _ < /proc/$$/stat\n\
             echo $pgid > \"$LOOPX_PROJECT_ROOT/script.pgid\"\n\
             echo $PPID > \"$LOOPX_PROJECT_ROOT/loopx.pid\"\n{}\n",
            heartbeat("hb")
        ),
    );
    p
}

/// `<node> bin/loopx.js run -n 1 w` in `p`, running the binary under test.
fn shim_run(p: &Project, node: &Path, preload: Option<&Path>) -> Run {
    let mut cmd = Command::new(node);
    cmd.arg(shim())
        .args(["run", "-n", "1", "w"])
        .current_dir(p.root());
    isolate(&mut cmd, p.home());
    cmd.env("LOOPX_BINARY_PATH", loopx_bin());
    cmd.env_remove("NODE_OPTIONS");
    if let Some(pre) = preload {
        cmd.env("NODE_OPTIONS", format!("--import={}", pre.display()));
    }
    Run::command(cmd)
}

/// A preload that takes process.execve away: the spawn path on any Node.
fn spawn_path_preload(p: &Project) -> PathBuf {
    p.file("spawn-path.mjs", "delete process.execve;\n");
    p.path("spawn-path.mjs")
}

/// The parent pid of `pid`, from /proc.
fn ppid(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let rest = &stat[stat.rfind(')').expect(")") + 2..];
    rest.split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("ppid")
}

/// Waits (bounded by `limit` past `from`) until loopx and the script's
/// group are gone; returns how long after `from` that was.
#[track_caller]
fn gone_within(loopx: i32, pgid: i32, from: Instant, limit: Duration) -> Duration {
    loop {
        if !alive(loopx) && group_members(pgid).iter().all(|&m| !alive(m)) {
            return from.elapsed();
        }
        if from.elapsed() > limit {
            // Leave nothing running, then fail.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
                libc::kill(loopx, libc::SIGKILL);
            }
            panic!("loopx {loopx} or group {pgid} still alive {limit:?} after the shim was killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Spawn path: SIGKILL the shim once the script runs; loopx must end the
/// script's group as for SIGTERM. Returns the time from the kill until
/// loopx and the group were gone.
fn sigkill_the_shim(setup: &str, limit: Duration) -> Duration {
    let p = project(setup);
    let preload = spawn_path_preload(&p);
    let run = shim_run(&p, &node(), Some(&preload))
        .signal(libc::SIGKILL)
        .stdout("")
        .start();
    let pgid = read_pid(&p, "script.pgid");
    let loopx = read_pid(&p, "loopx.pid");
    wait_until("heartbeat", || size(&p.path("hb")) > 0);
    assert_eq!(
        ppid(loopx),
        run.pid(),
        "spawn path: loopx is the shim's child"
    );
    run.signal(libc::SIGKILL);
    let killed = Instant::now();
    let took = gone_within(loopx, pgid, killed, limit);
    run.finish();
    took
}

#[test]
fn shim_killed_by_sigkill_ends_the_run_as_sigterm_does() {
    // A script that exits on SIGTERM is gone within 3 s of the shim's death.
    let took = sigkill_the_shim("", Duration::from_secs(3));
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[test]
fn shim_killed_by_sigkill_a_script_ignoring_sigterm_is_killed_after_the_grace_period() {
    let took = sigkill_the_shim("trap '' TERM", GRACE + Duration::from_secs(3));
    assert!(
        took >= GRACE - Duration::from_millis(300),
        "killed before the grace period ended: {took:?}"
    );
}

#[test]
fn the_shim_pid_never_reaches_scripts() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "printf '%s' \"${LOOPX_SHIM_PID-unset}\" > \"$LOOPX_PROJECT_ROOT/seen\"\n",
    );
    let preload = spawn_path_preload(&p);
    shim_run(&p, &node(), Some(&preload)).stdout("").run();
    assert_eq!(p.read("seen"), "unset");
}

#[test]
fn a_binary_whose_shim_is_already_gone_exits_143_at_once() {
    // The race the parent-death signal leaves open: the shim died before
    // loopx asked for it. loopx sees a LOOPX_SHIM_PID that is not its parent
    // and no longer alive.
    let p = Project::new();
    p.script("w", "index.sh", "touch \"$LOOPX_PROJECT_ROOT/ran\"\n");
    let mut dead = Command::new("true").spawn().expect("spawn true");
    let pid = dead.id();
    dead.wait().expect("wait");
    p.loopx(&["run", "-n", "1", "w"])
        .env("LOOPX_SHIM_PID", pid.to_string())
        .status(143)
        .stdout("")
        .run();
    assert!(!p.exists("ran"), "no script runs once the shim is gone");
}

#[test]
fn execve_path_the_shim_becomes_loopx_and_sigterm_ends_the_run() {
    let node = node22();
    if !has_execve(&node) {
        skip(
            "execve_path_the_shim_becomes_loopx_and_sigterm_ends_the_run",
            "LOOPX_TEST_NODE22 is older than 22.15 (no process.execve)",
        );
        return;
    }
    let p = project("");
    let run = shim_run(&p, &node, None).status(143).stdout("").start();
    let pgid = read_pid(&p, "script.pgid");
    let loopx = read_pid(&p, "loopx.pid");
    wait_until("heartbeat", || size(&p.path("hb")) > 0);
    // Nothing in between: the pid the caller holds is loopx's.
    assert_eq!(loopx, run.pid(), "the shim replaced itself with loopx");
    let exe = std::fs::read_link(format!("/proc/{loopx}/exe")).expect("exe");
    assert_eq!(
        std::fs::canonicalize(exe).expect("canonical exe"),
        std::fs::canonicalize(loopx_bin()).expect("canonical loopx")
    );
    run.signal(libc::SIGTERM);
    run.finish();
    assert_group_gone(pgid);
}

#[test]
fn execve_path_sigkill_of_the_loopx_command_leaves_no_process_of_the_run() {
    // On Node >= 22.15 the npm `loopx` command is the binary itself: a
    // SIGKILL of it is a SIGKILL of loopx, and the run's watcher ends the
    // script, its child and its setsid escapee.
    let node = node22();
    if !has_execve(&node) {
        skip(
            "execve_path_sigkill_of_the_loopx_command_leaves_no_process_of_the_run",
            "LOOPX_TEST_NODE22 is older than 22.15 (no process.execve)",
        );
        return;
    }
    let p = project(
        "sleep 1000 & echo $! > \"$LOOPX_PROJECT_ROOT/child.pid\"\n\
         setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > \"$LOOPX_PROJECT_ROOT/esc.pid\"",
    );
    let run = shim_run(&p, &node, None)
        .signal(libc::SIGKILL)
        .stdout("")
        .stderr("")
        .start();
    let pgid = read_pid(&p, "script.pgid");
    let loopx = read_pid(&p, "loopx.pid");
    let child = read_pid(&p, "child.pid");
    let esc = read_pid(&p, "esc.pid");
    wait_until("heartbeat", || size(&p.path("hb")) > 0);
    assert_eq!(loopx, run.pid(), "the shim replaced itself with loopx");
    run.signal(libc::SIGKILL);
    run.finish();
    let mut pids = vec![child, esc];
    pids.extend(group_members(pgid));
    assert_all_gone_within(
        "the run after its loopx was SIGKILLed",
        &pids,
        Duration::from_secs(10),
    );
}
