//! Signal handling (§7.3): SIGINT/SIGTERM forwarded to the script's whole
//! process group, the 5-second grace period, escalation on a second signal,
//! signals between iterations, and Ctrl-C typed at a terminal that the script
//! holds (README, "Signals and process groups").
//!
//! loopx runs in its own process group and gets real signals from the test.
//! Scripts write pid files and heartbeats; the tests wait on those files, not
//! on fixed sleeps. The grace-period tests take about 5 s each by nature.

use crate::util::procs;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use crate::util::*;
use procs::*;

/// The grace period of §7.3.
const GRACE: Duration = Duration::from_secs(5);

/// A script that records its pid, starts a heartbeat job that ignores
/// SIGINT (and SIGHUP, so a terminal's hang-up cannot be what ends it),
/// says READY on stderr, then sleeps. The job records its pid once it
/// ignores the signals, and READY waits for that: a Ctrl-C typed on READY
/// must not find the job still able to die of it.
fn script_with_stubborn_job() -> String {
    format!(
        "echo $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\n{RECORD_PGID}\
         ( trap '' INT HUP; echo $BASHPID > \"$LOOPX_PROJECT_ROOT/job.pid\"; {} ) &\n\
         until [ -s \"$LOOPX_PROJECT_ROOT/job.pid\" ]; do sleep 0.01; done\n\
         echo READY >&2\n\
         sleep 30\n",
        heartbeat("hb")
    )
}

/// Records the script's process group in `script.pgid`: at a terminal it is
/// not the script's pid (the group is led by loopx's sentinel, src/proc/terminal.rs).
const RECORD_PGID: &str =
    "read -r _ _ _ _ pgid _ < /proc/$$/stat; echo $pgid > \"$LOOPX_PROJECT_ROOT/script.pgid\"\n";

/// An interactive bash (job control on) with the prompt `SHELL> `, for
/// run_program_on_pty.
fn interactive_bash() -> Vec<String> {
    [
        "/usr/bin/env",
        "PS1=SHELL> ",
        "/bin/bash",
        "--norc",
        "--noprofile",
        "-i",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Asserts that the heartbeat file no longer grows.
#[track_caller]
fn assert_heartbeat_stopped(p: &Project, file: &str) {
    let before = size(&p.path(file));
    thread::sleep(Duration::from_millis(300));
    assert_eq!(
        size(&p.path(file)),
        before,
        "{file} still grows: a process of the group survived"
    );
}

fn forwarded_signal_ends_the_group(sig: i32, code: i32) {
    let p = grandchild_project("");
    let run = p.loopx(&["run", "w"]).status(code).stdout("").start();
    let pgid = read_pid(&p, "script.pid");
    let grandchild = read_pid(&p, "grandchild.pid");
    wait_until("heartbeat", || size(&p.path("hb")) > 0);
    run.signal(sig);
    run.finish();
    assert!(!alive(grandchild), "the grandchild survived");
    assert_group_gone(pgid);
    assert_heartbeat_stopped(&p, "hb");
}

#[test]
fn sigint_is_forwarded_to_the_whole_group_and_exits_130() {
    forwarded_signal_ends_the_group(libc::SIGINT, 130);
}

#[test]
fn sigterm_is_forwarded_to_the_whole_group_and_exits_143() {
    forwarded_signal_ends_the_group(libc::SIGTERM, 143);
}

#[test]
fn sighup_is_forwarded_like_sigterm_and_exits_129() {
    forwarded_signal_ends_the_group(libc::SIGHUP, 129);
}

#[test]
fn every_terminating_signal_ends_the_group_and_exits_128_plus_n() {
    // Beyond §7.3's SIGINT/SIGTERM: every signal whose default action would
    // kill loopx and orphan the group is handled alike, as tini does.
    for sig in [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGTERM,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGXCPU,
        libc::SIGPWR,
    ] {
        let p = grandchild_project("");
        let run = p
            .loopx(&["run", "w"])
            .status(128 + sig)
            .stdout("")
            // The script's bash reports a child killed by some of these
            // ("Quit", "User defined signal 1"); loopx itself says nothing.
            .stderr_any("bash reports a child killed by some signals (Quit, ...)")
            .stderr_lacks("loopx")
            .start();
        let pgid = read_pid(&p, "script.pid");
        let grandchild = read_pid(&p, "grandchild.pid");
        wait_until("heartbeat", || size(&p.path("hb")) > 0);
        run.signal(sig);
        run.finish();
        assert!(!alive(grandchild), "signal {sig}: the grandchild survived");
        let left = group_members(pgid);
        assert!(left.is_empty(), "signal {sig}: group {pgid} left {left:?}");
    }
}

#[test]
fn a_signal_ignored_on_entry_stays_ignored() {
    // The nohup rule, for every handled signal: ignored when loopx starts
    // (by the caller's choice), it is nothing to loopx.
    for sig in ["USR1", "QUIT", "INT"] {
        let p = Project::new();
        p.script(
            "w",
            "index.sh",
            "echo $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\n\
             until [ -e \"$LOOPX_PROJECT_ROOT/go\" ]; do sleep 0.02; done\n\
             printf '{\"stop\":true}'\n",
        );
        let mut cmd = std::process::Command::new("bash");
        cmd.arg("-c")
            .arg(format!("trap '' {sig}; exec \"$@\""))
            .arg("bash")
            .arg(loopx_bin())
            .args(["run", "w"])
            .current_dir(p.root());
        isolate(&mut cmd, p.home());
        let running = Run::command(cmd).stdout("").start();
        read_pid(&p, "script.pid");
        let num = match sig {
            "USR1" => libc::SIGUSR1,
            "QUIT" => libc::SIGQUIT,
            _ => libc::SIGINT,
        };
        running.signal(num);
        std::fs::write(p.path("go"), "").expect("write go");
        running.finish();
    }
}

#[test]
fn sighup_ignored_on_entry_stays_ignored() {
    // Under nohup (SIGHUP ignored when loopx starts), a hang-up is nothing.
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\n\
         until [ -e \"$LOOPX_PROJECT_ROOT/go\" ]; do sleep 0.02; done\n\
         printf '{\"stop\":true}'\n",
    );
    // The disposition is set in the child's bash, never in the test process.
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c")
        .arg("trap '' HUP; exec \"$@\"")
        .arg("bash")
        .arg(loopx_bin())
        .args(["run", "w"])
        .current_dir(p.root());
    isolate(&mut cmd, p.home());
    let running = Run::command(cmd).stdout("").start();
    read_pid(&p, "script.pid");
    running.signal(libc::SIGHUP);
    std::fs::write(p.path("go"), "").expect("write go");
    running.finish();
}

#[test]
fn script_ignoring_sigterm_is_killed_after_the_grace_period() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        &format!(
            "trap '' TERM\necho $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\n{}\n",
            heartbeat("hb")
        ),
    );
    let run = p.loopx(&["run", "w"]).status(143).stdout("").start();
    let pgid = read_pid(&p, "script.pid");
    wait_until("heartbeat", || size(&p.path("hb")) > 0);
    run.signal(libc::SIGTERM);
    let signalled = Instant::now();
    run.finish();
    let took = signalled.elapsed();
    assert!(
        took >= GRACE - Duration::from_millis(300),
        "killed before the grace period ended: {took:?}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert_group_gone(pgid);
    assert_heartbeat_stopped(&p, "hb");
}

/// A script whose background job (SIGINT ignored, as bash does for `&` in a
/// non-interactive shell) writes a heartbeat while the script waits.
fn background_job_project() -> Project {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        &format!(
            "echo $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\n\
             {{ {}; }} &\n\
             echo $! > \"$LOOPX_PROJECT_ROOT/job.pid\"\n\
             wait\n",
            heartbeat("hb")
        ),
    );
    p
}

#[test]
fn background_job_ignoring_sigint_is_killed_when_the_grace_period_ends() {
    let p = background_job_project();
    let run = p.loopx(&["run", "w"]).status(130).stdout("").start();
    let pgid = read_pid(&p, "script.pid");
    let job = read_pid(&p, "job.pid");
    wait_until("heartbeat", || size(&p.path("hb")) > 0);
    run.signal(libc::SIGINT);
    let signalled = Instant::now();
    // The script itself ends at once; its job ignores SIGINT and goes on.
    wait_until("the script to end", || !alive(pgid));
    let after = size(&p.path("hb"));
    wait_until("the job to outlive the script", || {
        size(&p.path("hb")) > after
    });
    run.finish();
    let took = signalled.elapsed();
    assert!(
        took >= GRACE - Duration::from_millis(300),
        "loopx exited before the grace period ended: {took:?}"
    );
    assert!(!alive(job), "the background job survived loopx");
    assert_group_gone(pgid);
    assert_heartbeat_stopped(&p, "hb");
}

/// First signal, wait until it was handled (the script is gone, its job
/// lives on), then a second one: SIGKILL at once, exit code of the first.
fn second_signal_escalates(second: i32) {
    let p = background_job_project();
    let run = p.loopx(&["run", "w"]).status(130).stdout("").start();
    let pgid = read_pid(&p, "script.pid");
    let job = read_pid(&p, "job.pid");
    wait_until("heartbeat", || size(&p.path("hb")) > 0);
    run.signal(libc::SIGINT);
    let signalled = Instant::now();
    wait_until("the script to end", || !alive(pgid));
    run.signal(second);
    run.finish();
    let took = signalled.elapsed();
    assert!(
        took < GRACE - Duration::from_millis(500),
        "the second signal did not escalate: {took:?}"
    );
    assert!(!alive(job), "the background job survived loopx");
    assert_group_gone(pgid);
    assert_heartbeat_stopped(&p, "hb");
}

#[test]
fn second_sigint_during_the_grace_period_kills_at_once_and_keeps_130() {
    second_signal_escalates(libc::SIGINT);
}

#[test]
fn sigterm_after_sigint_escalates_and_keeps_the_first_exit_code() {
    second_signal_escalates(libc::SIGTERM);
}

#[test]
fn signal_while_the_script_still_runs_the_grace_period_then_second_signal() {
    // The second signal arrives while the script itself is still alive
    // (it ignores SIGINT): escalation does not wait for the script to end.
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        &format!(
            "trap 'echo int >> \"$LOOPX_PROJECT_ROOT/got\"' INT\n\
             echo $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\n{}\n",
            heartbeat("hb")
        ),
    );
    let run = p.loopx(&["run", "w"]).status(130).stdout("").start();
    let pgid = read_pid(&p, "script.pid");
    wait_until("heartbeat", || size(&p.path("hb")) > 0);
    run.signal(libc::SIGINT);
    let signalled = Instant::now();
    wait_for_file(&p.path("got"));
    assert!(alive(pgid), "the script traps SIGINT and goes on");
    run.signal(libc::SIGINT);
    run.finish();
    assert!(signalled.elapsed() < GRACE - Duration::from_millis(500));
    assert_group_gone(pgid);
}

#[test]
fn signal_between_iterations_exits_at_once_without_another_iteration() {
    // The API machine mode waits for `next` between iterations with no
    // script running: a deterministic "between iterations" (§7.3).
    let p = Project::new();
    p.script("w", "index.sh", &logging_script("index", ""));
    let mut run = p
        .loopx(&["__api", "1", "--", "w"])
        .start_with_stdin(Stdio::piped());
    let stdin = run.child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(run.child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("first message");
    assert!(line.starts_with("{\"type\":\"output\""), "{line}");
    // No child of loopx is running now.
    run.signal(libc::SIGINT);
    let mut rest = String::new();
    stdout.read_line(&mut rest).expect("final message");
    let status = run.child.wait().expect("wait");
    drop(stdin);
    assert_eq!(status.code(), Some(130));
    assert!(rest.contains("\"exitCode\":130"), "{rest}");
    assert_eq!(p.read("log"), "index\n", "no further iteration started");
}

#[test]
fn interrupt_from_inside_a_script_stops_the_loop_before_the_next_iteration() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo run >> \"$LOOPX_PROJECT_ROOT/log\"\nkill -TERM $PPID\nexit 0\n",
    );
    p.loopx(&["run", "-n", "5", "w"])
        .status(143)
        .stdout("")
        .start()
        .finish();
    assert_eq!(p.read("log"), "run\n");
}

// --- Ctrl-C typed at a terminal the script holds --------------------------

#[test]
fn ctrl_c_at_the_terminal_ends_the_loop_with_130() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        &format!(
            "{RECORD_PGID}echo READY >&2\nread -r line </dev/tty\n\
             echo \"$line\" >> \"$LOOPX_PROJECT_ROOT/log\"\n"
        ),
    );
    let out = run_on_pty(
        &p,
        &["run", "w"],
        &[("--wait", "READY"), ("--send", "\\x03")],
    );
    assert_eq!(out.exit, "130", "{}", out.transcript);
    assert!(
        !p.exists("log"),
        "the read was interrupted, no line arrived"
    );
    assert!(!out.transcript.contains("error"), "{}", out.transcript);
    assert_group_gone(read_pid(&p, "script.pgid"));
}

#[test]
fn ctrl_c_at_the_terminal_leaves_no_process_of_the_group() {
    // The script's background job ignores SIGINT (and SIGHUP, so the
    // terminal's hang-up cannot be what ends it): loopx must kill it when
    // the grace period ends, before it exits.
    let p = Project::new();
    p.script("w", "index.sh", &script_with_stubborn_job());
    let started = Instant::now();
    let out = run_on_pty(
        &p,
        &["run", "w"],
        &[("--wait", "READY"), ("--send", "\\x03")],
    );
    assert_eq!(out.exit, "130", "{}", out.transcript);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "sleep 30 was not interrupted"
    );
    let job = read_pid(&p, "job.pid");
    assert!(!alive(job), "the background job survived loopx");
    assert_group_gone(read_pid(&p, "script.pgid"));
    assert_heartbeat_stopped(&p, "hb");
}

#[test]
fn second_ctrl_c_at_the_terminal_kills_the_rest_of_the_group_at_once() {
    // First Ctrl-C: the script (holding the terminal) dies, its job ignores
    // SIGINT and lives on. loopx has the terminal again, so the second
    // Ctrl-C reaches loopx: SIGKILL to the group without waiting out the
    // grace period.
    let p = Project::new();
    p.script("w", "index.sh", &script_with_stubborn_job());
    let started = Instant::now();
    let out = run_on_pty(
        &p,
        &["run", "w"],
        &[
            ("--wait", "READY"),
            ("--send", "\\x03"),
            // loopx has the terminal back: the script is gone.
            ("--wait-fg", "self"),
            ("--send", "\\x03"),
        ],
    );
    assert_eq!(out.exit, "130", "{}", out.transcript);
    assert!(
        started.elapsed() < GRACE - Duration::from_millis(500),
        "the second Ctrl-C did not escalate"
    );
    assert!(
        !alive(read_pid(&p, "job.pid")),
        "the background job survived"
    );
    assert_group_gone(read_pid(&p, "script.pgid"));
}

#[test]
fn script_handling_ctrl_c_at_the_terminal_with_exit_130_ends_the_loop() {
    // A CLI that handles Ctrl-C itself and exits 130 while holding the
    // terminal ends the loop like a script killed by SIGINT.
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo run >> \"$LOOPX_PROJECT_ROOT/log\"\ntrap 'exit 130' INT\necho READY >&2\nwhile :; do sleep 0.05; done\n",
    );
    let out = run_on_pty(
        &p,
        &["run", "-n", "3", "w"],
        &[("--wait", "READY"), ("--send", "\\x03")],
    );
    assert_eq!(out.exit, "130", "{}", out.transcript);
    assert_eq!(p.read("log"), "run\n");
}

#[test]
fn without_a_terminal_a_script_exiting_130_is_an_ordinary_failure() {
    // The 130 rule is for Ctrl-C at a terminal only (README); elsewhere
    // §7.2 applies.
    let p = Project::new();
    p.script("w", "index.sh", "exit 130\n");
    p.loopx(&["run", "w"])
        .status(1)
        .stderr_contains("w:index")
        .stderr_contains("130")
        .run();
}

#[test]
fn ctrl_z_stops_script_and_loopx_together_and_fg_resumes_both() {
    // An interactive shell on a terminal runs loopx; the script holds the
    // terminal. Ctrl-Z: the shell must see the job stopped and get its
    // prompt back; `fg`: the script gets the terminal again and reads it.
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\necho READY >&2\nread -r line </dev/tty\necho \"got:$line\" > \"$LOOPX_PROJECT_ROOT/got\"\nprintf '{\"stop\":true}'\n",
    );
    let argv = interactive_bash();
    let command = format!("{} run w\\n", sh_quote(&loopx_bin().to_string_lossy()));
    let pid_file = p.path("script.pid").to_string_lossy().into_owned();
    let out = run_program_on_pty(
        &p,
        &argv,
        &[
            ("--wait", "SHELL> "),
            ("--send", &command),
            ("--wait", "READY"),
            ("--send", "\\x1a"),
            ("--wait", "Stopped"),
            ("--wait", "SHELL> "),
            ("--send", "fg\\n"),
            ("--wait-fg", &pid_file),
            ("--send", "hello\\n"),
            ("--wait", "SHELL> "),
            ("--send", "echo STATUS=$?; exit\\n"),
        ],
    );
    assert_eq!(out.exit, "0", "{}", out.transcript);
    assert!(out.transcript.contains("STATUS=0"), "{}", out.transcript);
    assert_eq!(p.read("got"), "got:hello\n");
}

#[test]
fn a_script_reading_the_terminal_while_loopx_runs_in_the_background_fails_instead_of_hanging() {
    // `loopx run w &` from an interactive shell: loopx is not in the
    // terminal's foreground, so it cannot hand the terminal to the script.
    // The kernel stops a script that reads it (SIGTTIN); left at that, the
    // loop would wait for ever without a word. loopx ends it with an error.
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\nread -r line </dev/tty\necho \"got:$line\" > \"$LOOPX_PROJECT_ROOT/got\"\n",
    );
    let argv = interactive_bash();
    let command = format!(
        "{} run w & wait $!; echo STATUS=$?\\n",
        sh_quote(&loopx_bin().to_string_lossy())
    );
    let out = run_program_on_pty(
        &p,
        &argv,
        &[
            ("--wait", "SHELL> "),
            ("--send", &command),
            ("--wait", "STATUS="),
            ("--wait", "SHELL> "),
            ("--send", "exit\\n"),
        ],
    );
    assert_eq!(out.exit, "0", "{}", out.transcript);
    assert!(out.transcript.contains("STATUS=1"), "{}", out.transcript);
    assert!(
        out.transcript
            .contains("script w:index tried to read from the terminal"),
        "{}",
        out.transcript
    );
    assert!(!p.exists("got"), "the script read the terminal");
    assert_group_gone(read_pid(&p, "script.pid"));
}
