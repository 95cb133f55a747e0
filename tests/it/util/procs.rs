//! Helpers for process-level tests: loopx started in its own process group so
//! a test can send it real signals, polling for readiness files, looking for
//! surviving processes in /proc, and a pseudo-terminal driver.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::util::{isolate, loopx_bin, Project};

/// How long any readiness wait may take before the test fails.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Polls until `path` exists and is non-empty.
#[track_caller]
pub fn wait_for_file(path: &Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(text) = fs::read_to_string(path) {
            if !text.is_empty() {
                return text;
            }
        }
        assert!(
            start.elapsed() < READY_TIMEOUT,
            "timed out waiting for {}",
            path.display()
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Polls until `cond` holds.
#[track_caller]
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < READY_TIMEOUT, "timed out waiting: {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// Reads a pid written by a script (`echo $$ > file`).
#[track_caller]
pub fn read_pid(p: &Project, rel: &str) -> i32 {
    let text = wait_for_file(&p.path(rel));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("pid in {rel}: {text:?}: {e}"))
}

/// A heartbeat loop: appends to `$LOOPX_PROJECT_ROOT/<file>` every 50 ms.
pub fn heartbeat(file: &str) -> String {
    format!("while :; do echo x >> \"$LOOPX_PROJECT_ROOT/{file}\"; sleep 0.05; done")
}

/// A project whose script `w:index` records its pid in `script.pid`, then
/// runs a foreground grandchild that runs `setup` (a trap, say), records
/// its pid in `grandchild.pid` and writes the heartbeat `hb`.
pub fn grandchild_project(setup: &str) -> Project {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        &format!(
            "echo $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\n\
             bash -c '{setup}echo $$ > \"$LOOPX_PROJECT_ROOT/grandchild.pid\"; {}'\n",
            heartbeat("hb")
        ),
    );
    p
}

/// Fields of /proc/<pid>/stat after the command name: state, ppid, pgrp, ...
fn stat_fields(pid: &str) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Every process (zombies included) whose process group is `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").expect("read /proc").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(pid) = name.parse::<i32>() else {
            continue;
        };
        if let Some(f) = stat_fields(&name) {
            if f.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid) {
                found.push(pid);
            }
        }
    }
    found
}

/// Whether `pid` is a live (non-zombie) process.
pub fn alive(pid: i32) -> bool {
    match stat_fields(&pid.to_string()) {
        Some(f) => f.first().map(String::as_str) != Some("Z"),
        None => false,
    }
}

/// Asserts that no process of the group remains. Checked right after loopx
/// exited: §7.3 requires the group to be gone before loopx exits.
#[track_caller]
pub fn assert_group_gone(pgid: i32) {
    let left = group_members(pgid);
    assert!(
        left.is_empty(),
        "processes of group {pgid} outlived loopx: {left:?}"
    );
}

/// The size of a heartbeat file, 0 when absent.
pub fn size(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// A Python program that runs a command on a fresh pseudo-terminal (as its
/// controlling terminal, in the terminal's foreground process group) and
/// plays steps against it: `--wait TEXT` waits until TEXT appears on the
/// terminal (after what the previous `--wait` matched), `--send TEXT` types TEXT (Python escapes: `\x03` is Ctrl-C),
/// `--wait-fg FILE` waits until the process whose pid is in FILE runs in the
/// terminal's foreground process group (`self`: the command run on the
/// terminal).
/// It prints `exit <code>` (negative for a signal) and then the transcript.
/// When a step times out, it kills every process of the terminal's session
/// (the command and whatever it started), so a failing test leaves nothing.
const PTY_DRIVER: &str = r#"
import os, pty, sys, time, select
args = sys.argv[1:]
steps = []
while args and args[0] != '--':
    steps.append((args[0], args[1]))
    args = args[2:]
cmd = args[1:]
pid, master = pty.fork()
if pid == 0:
    os.execv(cmd[0], cmd)
out = b''
pos = 0
def give_up(why):
    print('exit ' + why)
    sys.stdout.write(out.decode(errors='replace'))
    for p in os.listdir('/proc'):
        try:
            if p.isdigit() and open('/proc/%s/stat' % p).read().rsplit(')', 1)[1].split()[3] == str(pid):
                os.kill(int(p), 9)
        except (OSError, IndexError):
            pass
    sys.exit(0)
def pump(t):
    global out
    r, _, _ = select.select([master], [], [], t)
    if r:
        try:
            d = os.read(master, 65536)
        except OSError:
            d = b''
        out += d
deadline = time.time() + float(os.environ.get('PTY_TIMEOUT', '60'))
for kind, arg in steps:
    if kind == '--wait':
        while out.find(arg.encode(), pos) < 0:
            if time.time() > deadline:
                give_up('timeout waiting for ' + arg)
            pump(0.02)
        pos = out.find(arg.encode(), pos) + len(arg)
    elif kind == '--wait-fg':
        # Until the process whose pid is in file `arg` runs (not stopped)
        # and its group is the terminal's foreground group.
        while True:
            if time.time() > deadline:
                give_up('timeout waiting for the foreground')
            pump(0.02)
            try:
                spid = str(pid) if arg == 'self' else open(arg).read().strip()
                f = open('/proc/%s/stat' % spid).read().rsplit(')', 1)[1].split()
            except (OSError, IndexError):
                continue
            if f[0] in ('Z', 'X'):
                # It ended without ever getting the terminal back: say so at
                # once rather than wait out the deadline.
                give_up('ended before it ran in the foreground')
            if f[0] not in ('T', 't') and f[2] == f[5]:
                break
    elif kind == '--send':
        os.write(master, arg.encode().decode('unicode_escape').encode('latin-1'))
while True:
    p, st = os.waitpid(pid, os.WNOHANG)
    if p == pid:
        break
    if time.time() > deadline:
        give_up('timeout')
    pump(0.02)
try:
    while True:
        r, _, _ = select.select([master], [], [], 0)
        if not r:
            break
        d = os.read(master, 65536)
        if not d:
            break
        out += d
except OSError:
    pass
print('exit', os.waitstatus_to_exitcode(st))
sys.stdout.write(out.decode(errors='replace'))
"#;

/// What the pty driver reported.
pub struct PtyOutcome {
    /// loopx's exit code, or "timeout...".
    pub exit: String,
    /// Everything loopx and its scripts wrote to the terminal.
    pub transcript: String,
}

/// Runs `loopx <args>` in `p` on a pseudo-terminal, playing `steps`.
pub fn run_on_pty(p: &Project, args: &[&str], steps: &[(&str, &str)]) -> PtyOutcome {
    let mut argv = vec![loopx_bin().to_string_lossy().into_owned()];
    argv.extend(args.iter().map(|a| a.to_string()));
    run_program_on_pty(p, &argv, steps)
}

/// Runs any program (absolute path first) on a pseudo-terminal.
pub fn run_program_on_pty(p: &Project, argv: &[String], steps: &[(&str, &str)]) -> PtyOutcome {
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(PTY_DRIVER);
    for (kind, arg) in steps {
        cmd.arg(kind).arg(arg);
    }
    cmd.arg("--").args(argv);
    cmd.current_dir(p.root());
    isolate(&mut cmd, p.home());
    let out = cmd.output().expect("python3 runs the pty driver");
    assert!(
        out.status.success(),
        "pty driver failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    PtyOutcome {
        exit: first.trim_start_matches("exit ").to_string(),
        transcript: rest.to_string(),
    }
}

/// The run's watcher (src/proc/watcher.rs): loopx's child named
/// `loopx-watcher`, if it has one.
pub fn watcher_of(loopx: i32) -> Option<i32> {
    let kids = fs::read_to_string(format!("/proc/{loopx}/task/{loopx}/children")).ok()?;
    kids.split_whitespace()
        .filter_map(|k| k.parse().ok())
        // argv[0], set by the exec itself: the comm name comes a moment
        // later (the watcher renames itself), and a look in between missed it.
        .find(|k: &i32| {
            fs::read(format!("/proc/{k}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).next() == Some(b"loopx-watcher"))
        })
}

/// Waits up to `limit` until none of `pids` is alive; SIGKILLs what is left
/// and fails otherwise, naming it.
#[track_caller]
pub fn assert_all_gone_within(what: &str, pids: &[i32], limit: Duration) {
    let start = Instant::now();
    while pids.iter().any(|&p| alive(p)) {
        if start.elapsed() > limit {
            let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
            for &p in &left {
                // SAFETY: ending a process the test's own run started.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            panic!("{what}: still alive after {limit:?}: {left:?}");
        }
        thread::sleep(Duration::from_millis(20));
    }
}
