//! Unattended runs (DESIGN.md "Beyond the spec"): `--timeout`, `--max-time`,
//! `--retry` and `--retry-delay`, the variables LOOPX_ITERATION,
//! LOOPX_ATTEMPT and LOOPX_RUN_ID, and a Ctrl-C that always lands.
//!
//! Scripts write pid files and markers; the tests wait on those, not on fixed
//! sleeps, and bound every wait generously.

use crate::util::procs;
use std::time::{Duration, Instant};

use crate::util::*;
use procs::*;

/// Lines of a file the scripts append to, empty when absent.
fn lines(p: &Project, rel: &str) -> Vec<String> {
    if !p.exists(rel) {
        return Vec::new();
    }
    p.read(rel).lines().map(str::to_string).collect()
}

// ---------------------------------------------------------------- --timeout

#[test]
fn timeout_terminates_a_group_whose_grandchild_ignores_sigterm_and_exits_124() {
    let p = grandchild_project("trap \"\" TERM; ");
    let started = Instant::now();
    let run = p
        .loopx(&["run", "--timeout", "1s", "w"])
        .status(124)
        .stdout("")
        .stderr("loopx: error: w:index timed out after 1s; its process group was terminated\n")
        .start();
    let pgid = read_pid(&p, "script.pid");
    let grandchild = read_pid(&p, "grandchild.pid");
    run.finish();
    let took = started.elapsed();
    // SIGTERM at 1 s is ignored by the grandchild; SIGKILL follows the 5 s
    // grace period, and loopx exits only once the group is gone.
    assert!(took >= Duration::from_secs(6), "{took:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert!(!alive(grandchild), "the grandchild survived");
    assert_group_gone(pgid);
}

#[test]
fn timeout_ends_an_obedient_script_without_waiting_out_the_grace_period() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\nsleep 30\n",
    );
    let started = Instant::now();
    p.loopx(&["run", "--timeout", "300ms", "w"])
        .status(124)
        .stderr_contains("w:index timed out after 300ms; its process group was terminated")
        .run();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_group_gone(read_pid(&p, "script.pid"));
}

#[test]
fn a_script_within_its_timeout_runs_as_without_one() {
    let p = Project::new();
    p.script("w", "index.sh", "echo ran >&2\n$LOOPX_BIN output --stop\n");
    p.loopx(&["run", "--timeout", "1h", "w"])
        .stdout("")
        .stderr("ran\n")
        .run();
}

// ---------------------------------------------------------------- --retry

/// `index` hands `payload` to `check`, which fails with exit 3 until its
/// attempt number reaches `succeed_at` (never, with 0) and records
/// "iteration attempt input" for each run.
fn retrying_project(succeed_at: u32) -> Project {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "$LOOPX_BIN output --result payload --goto check\n",
    )
    .script(
        "w",
        "check.sh",
        &format!(
            "echo \"$LOOPX_ITERATION $LOOPX_ATTEMPT $(cat)\" >> \"$LOOPX_PROJECT_ROOT/runs\"\n\
                 if [ \"$LOOPX_ATTEMPT\" != {succeed_at} ]; then exit 3; fi\n\
                 $LOOPX_BIN output --stop\n"
        ),
    );
    p
}

#[test]
fn retry_runs_a_failed_script_again_with_the_same_input() {
    let p = retrying_project(2);
    p.loopx(&["run", "--retry", "3", "--retry-delay", "0", "w"])
        .stdout("")
        .stderr("loopx: w:check failed (exit 3); retry 1 of 3 in 0s\n")
        .run();
    assert_eq!(lines(&p, "runs"), ["2 1 payload", "2 2 payload"]);
}

#[test]
fn a_retry_is_not_an_iteration() {
    // index is iteration 1, check iteration 2 however many attempts it takes.
    let p = retrying_project(3);
    p.loopx(&["run", "-n", "2", "--retry", "5", "--retry-delay", "0", "w"])
        .stderr(
            "loopx: w:check failed (exit 3); retry 1 of 5 in 0s\n\
             loopx: w:check failed (exit 3); retry 2 of 5 in 0s\n",
        )
        .run();
    assert_eq!(
        lines(&p, "runs"),
        ["2 1 payload", "2 2 payload", "2 3 payload"]
    );
}

#[test]
fn retries_used_up_exit_as_without_them_after_doubling_delays() {
    let p = retrying_project(0);
    p.loopx(&["run", "--retry", "2", "--retry-delay", "100ms", "w"])
        .status(1)
        .stdout("")
        // The run is kept (it failed at its second script): the resume
        // line follows the error.
        .stderr_contains(
            "loopx: w:check failed (exit 3); retry 1 of 2 in 100ms\n\
         loopx: w:check failed (exit 3); retry 2 of 2 in 200ms\n\
         loopx: error: script w:check exited with code 3; stopping the loop\n\
         loopx: the run can be resumed: loopx resume ",
        )
        .run();
    assert_eq!(lines(&p, "runs").len(), 3);
}

#[test]
fn a_script_killed_by_a_signal_is_retried() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo x >> \"$LOOPX_PROJECT_ROOT/runs\"\n\
         if [ \"$LOOPX_ATTEMPT\" = 1 ]; then kill -SEGV $$; fi\n\
         $LOOPX_BIN output --stop\n",
    );
    p.loopx(&["run", "--retry", "1", "--retry-delay", "0", "w"])
        .stderr("loopx: w:index failed (killed by SIGSEGV); retry 1 of 1 in 0s\n")
        .run();
    assert_eq!(lines(&p, "runs").len(), 2);
}

#[test]
fn a_timed_out_script_is_retried_and_exits_124_when_retries_run_out() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo x >> \"$LOOPX_PROJECT_ROOT/runs\"\nsleep 30\n",
    );
    p.loopx(&[
        "run",
        "--timeout",
        "300ms",
        "--retry",
        "1",
        "--retry-delay",
        "0",
        "w",
    ])
    .status(124)
    .stderr(
        "loopx: w:index timed out after 300ms; retry 1 of 1 in 0s\n\
         loopx: error: w:index timed out after 300ms; its process group was terminated\n",
    )
    .run();
    assert_eq!(lines(&p, "runs").len(), 2);
}

#[test]
fn ctrl_c_during_a_retry_wait_exits_130_at_once() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo x >> \"$LOOPX_PROJECT_ROOT/runs\"\nexit 2\n",
    );
    // The run log's retry event is written as the wait begins: the
    // readiness mark, instead of a fixed sleep after the first attempt.
    // (A delay is capped at 30 minutes.)
    let run = p
        .loopx(&[
            "run",
            "--log",
            "log",
            "--retry",
            "1",
            "--retry-delay",
            "1h",
            "w",
        ])
        .status(130)
        .stderr("loopx: w:index failed (exit 2); retry 1 of 1 in 30m\n")
        .start();
    wait_until("the retry wait", || {
        lines(&p, "log")
            .iter()
            .any(|l| l.contains("\"event\":\"retry\""))
    });
    let signalled = Instant::now();
    run.signal(libc::SIGINT);
    run.finish();
    assert!(signalled.elapsed() < Duration::from_secs(5));
    assert_eq!(lines(&p, "runs").len(), 1, "the retry must not start");
}

// ---------------------------------------------------------------- --max-time

#[test]
fn max_time_lets_the_running_script_finish_and_starts_no_other() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo start >> \"$LOOPX_PROJECT_ROOT/runs\"\nsleep 1.5\n\
         echo end >> \"$LOOPX_PROJECT_ROOT/runs\"\n",
    );
    p.loopx(&["run", "--max-time", "1s", "w"])
        .stdout("")
        .stderr("loopx: stopped: --max-time 1s reached after 1 iteration\n")
        .run();
    assert_eq!(lines(&p, "runs"), ["start", "end"]);
}

#[test]
fn max_time_counts_every_iteration_before_it() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo x >> \"$LOOPX_PROJECT_ROOT/runs\"\nsleep 0.2\n",
    );
    let o = p
        .loopx(&["run", "--max-time", "1s", "w"])
        // Exactly, below, once the iterations are counted.
        .stderr_contains("loopx: stopped: --max-time 1s reached after ")
        .run();
    let n = lines(&p, "runs").len();
    // About 5; fewer on a loaded machine, never more than fit in 1 s.
    assert!((1..=6).contains(&n), "{n} iterations");
    let plural = if n == 1 { "" } else { "s" };
    assert_eq!(
        o.stderr,
        format!("loopx: stopped: --max-time 1s reached after {n} iteration{plural}\n"),
        "{o}"
    );
}

#[test]
fn no_retry_starts_past_the_budget() {
    let p = retrying_project(0);
    p.loopx(&[
        "run",
        "--max-time",
        "2s",
        "--retry",
        "3",
        "--retry-delay",
        "1h",
        "w",
    ])
    // The retry could only start after the budget: the failure stands.
    .status(1)
    .stderr_contains(
        "loopx: error: script w:check exited with code 3; stopping the loop\n\
         loopx: the run can be resumed: loopx resume ",
    )
    .run();
    assert_eq!(lines(&p, "runs").len(), 1);
}

// ---------------------------------------------------------------- variables

#[test]
fn scripts_get_their_iteration_attempt_and_the_run_id() {
    let p = Project::new();
    p.file(
        "vars.env",
        "LOOPX_ITERATION=from-file\nLOOPX_RUN_ID=from-file\n",
    );
    p.script(
        "w",
        "index.sh",
        "echo \"$LOOPX_ITERATION $LOOPX_ATTEMPT $LOOPX_RUN_ID\" >> \"$LOOPX_PROJECT_ROOT/runs\"\n",
    );
    let run = |p: &Project| {
        p.loopx(&["run", "-n", "3", "-e", "vars.env", "w"])
            .env("LOOPX_ATTEMPT", "inherited")
            .run();
    };
    run(&p);
    let first = lines(&p, "runs");
    assert_eq!(first.len(), 3);
    let id = first[0].split(' ').nth(2).unwrap().to_string();
    assert_eq!(id.len(), 16, "{id}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    assert_eq!(first, [1, 2, 3].map(|i| format!("{i} 1 {id}")));
    run(&p);
    let second = lines(&p, "runs");
    assert_ne!(
        second[3].split(' ').nth(2).unwrap(),
        id,
        "a new run, a new id"
    );
}

// ---------------------------------------------------------------- grammar

#[test]
fn new_options_follow_the_grammar_of_n() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo ran >> \"$LOOPX_PROJECT_ROOT/runs\"\n",
    );
    for (flag, good, bad) in [
        ("--timeout", "5s", "5x"),
        ("--max-time", "1h30m", "1.5h"),
        ("--retry", "2", "-1"),
        ("--retry-delay", "500ms", "soon"),
    ] {
        p.loopx(&["run", flag, good, flag, good, "w"])
            .usage_error("more than once", "loopx run --help")
            .run();
        p.loopx(&["run", flag, bad, "w"])
            .usage_error(
                &format!("invalid value '{bad}' for {flag}"),
                "loopx run --help",
            )
            .run();
        p.loopx(&["run", "w", flag])
            .usage_error("needs a value", "loopx run --help")
            .run();
        // Ignored under -h (§4.2).
        p.loopx(&["run", flag, bad, "-h"])
            .stdout_contains("Usage: loopx run ")
            .run();
    }
    p.loopx(&["run", "--timeout", "0", "w"])
        .usage_error("longer than zero", "loopx run --help")
        .run();
    assert!(lines(&p, "runs").is_empty());
}

// ---------------------------------------------------------------- Ctrl-C

/// A script stuck in `out=$(agent)`: the agent leaves a background child
/// that ignores SIGINT and holds the pipe, so bash waits for ever.
fn stuck_in_command_substitution() -> Project {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        "echo $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\n\
         read -r _ _ _ _ pgid _ < /proc/$$/stat; echo $pgid > \"$LOOPX_PROJECT_ROOT/script.pgid\"\n\
         out=$(bash -c '( trap \"\" INT; echo $BASHPID > \"$LOOPX_PROJECT_ROOT/holder.pid\"; exec sleep 300 ) & exec sleep 300')\n\
         echo \"never: $out\" >&2\n",
    );
    p
}

#[test]
fn second_ctrl_c_at_a_terminal_ends_a_script_stuck_on_its_pipe() {
    let p = stuck_in_command_substitution();
    let o = run_on_pty(
        &p,
        &["run", "ralph"],
        &[
            ("--wait-fg", p.path("holder.pid").to_str().unwrap()),
            ("--send", "\\x03"),
            (
                "--wait",
                "loopx: waiting up to 5s for ralph:index to exit (Ctrl-C again to kill it now)",
            ),
            ("--send", "\\x03"),
        ],
    );
    assert_eq!(o.exit, "130", "{}", o.transcript);
    assert_eq!(
        o.transcript.matches("waiting up to").count(),
        1,
        "{}",
        o.transcript
    );
    assert!(
        !alive(read_pid(&p, "holder.pid")),
        "the pipe holder survived"
    );
    assert!(!alive(read_pid(&p, "script.pid")));
    assert_group_gone(read_pid(&p, "script.pgid"));
}

#[test]
fn one_ctrl_c_at_a_terminal_ends_a_stuck_script_after_the_grace_period() {
    let p = stuck_in_command_substitution();
    let started = Instant::now();
    let o = run_on_pty(
        &p,
        &["run", "ralph"],
        &[
            ("--wait-fg", p.path("holder.pid").to_str().unwrap()),
            ("--send", "\\x03"),
        ],
    );
    assert_eq!(o.exit, "130", "{}", o.transcript);
    assert!(started.elapsed() >= Duration::from_secs(5));
    assert!(
        o.transcript.contains("waiting up to 5s for ralph:index"),
        "{}",
        o.transcript
    );
    let holder = read_pid(&p, "holder.pid");
    assert!(!alive(holder), "the pipe holder survived");
    assert_group_gone(read_pid(&p, "script.pgid"));
}
