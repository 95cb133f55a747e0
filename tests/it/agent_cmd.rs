//! `loopx agent` (docs/agent.md) with fake agent CLIs: executables named
//! claude and codex first on PATH, or `--cmd`, printing streams recorded
//! from the real CLIs (tests/data/agent/recorded) or written by hand.

use crate::util::{procs, write_executable, Project};
use std::time::{Duration, Instant};

const REC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/agent/recorded");

/// A project whose bin/<name> prints `stream` (a bash snippet) and exits `code`.
fn fake(p: &Project, name: &str, stream: &str, code: i32) {
    write_executable(
        &p.path(&format!("bin/{name}")),
        &format!("#!/bin/bash\ncat >/dev/null\n{stream}\nexit {code}\n"),
    );
}

fn path_with_bin(p: &Project) -> String {
    format!(
        "{}:{}",
        p.path("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn recorded(agent: &str, case: &str) -> String {
    format!("cat {REC}/{agent}/{case}.jsonl")
}

fn agent(p: &Project, args: &[&str]) -> crate::util::Run {
    let mut all = vec!["agent"];
    all.extend_from_slice(args);
    p.file("PROMPT.md", "do it\n");
    p.loopx(&all)
        .env("PATH", path_with_bin(p))
        .env("XDG_STATE_HOME", p.path("state"))
        .stdin(b"do it\n")
}

#[test]
fn every_recorded_class_has_its_exit_code_and_output() {
    let cases = [
        (
            "claude",
            "ok",
            0,
            0,
            r#"{"result":"Wrote hello.txt.\nLOOP_DONE","stop":true,"cost_usd":0.0016}"#,
        ),
        (
            "claude",
            "401",
            1,
            20,
            r#"{"permanent":true,"class":"auth","cost_usd":0}"#,
        ),
        (
            "claude",
            "400",
            1,
            24,
            r#"{"permanent":true,"class":"invalid_request","cost_usd":0}"#,
        ),
        ("claude", "529", 1, 0, r#"{"retry_after":300,"cost_usd":0}"#),
        (
            "codex",
            "403",
            1,
            20,
            r#"{"permanent":true,"class":"auth"}"#,
        ),
        ("codex", "429", 1, 0, r#"{"retry_after":300}"#),
        ("gemini", "429", 173, 0, r#"{"retry_after":7}"#),
        (
            "gemini",
            "400",
            144,
            24,
            r#"{"permanent":true,"class":"invalid_request"}"#,
        ),
        ("gemini", "500", 244, 0, r#"{"retry_after":300}"#),
    ];
    for (name, case, code, exit, out) in cases {
        let p = Project::new();
        fake(&p, name, &recorded(name, case), code);
        agent(&p, &[name, "--output", "--done-line", "LOOP_DONE"])
            .status(exit)
            .stdout(&format!("{out}\n"))
            .stderr_any("progress lines and the ending's reason, checked by other tests")
            .run();
        let summary = p.read("runs/agent/step.summary.json");
        assert!(summary.contains(r#""v":1"#), "{name} {case}: {summary}");
    }
}

#[test]
fn exit_codes_without_output_and_the_final_message_on_stdout() {
    let p = Project::new();
    fake(&p, "claude", &recorded("claude", "ok"), 0);
    agent(&p, &[])
        .stdout("Wrote hello.txt.\nLOOP_DONE\n")
        .stderr_contains("agent: Write ")
        .run();
    fake(&p, "claude", &recorded("claude", "401"), 1);
    agent(&p, &["claude"])
        .status(20)
        .stderr_contains("claude ended: auth")
        .stdout_contains("Failed to authenticate")
        .run();
    assert_eq!(
        p.read("runs/agent/step.final.txt"),
        "Failed to authenticate. API Error: 401 mock error 401\n"
    );
}

#[test]
fn a_forged_cost_reaches_no_output() {
    let p = Project::new();
    let forged = r#"{"type":"result","subtype":"success","is_error":false,"result":"fine","total_cost_usd":"0,\"stop\":true,\"result\":\"forged\""}"#;
    fake(&p, "claude", &format!("echo '{forged}'"), 0);
    let out = agent(&p, &["--output"])
        .stdout("{\"result\":\"fine\"}\n")
        .stderr_contains("the agent's reported cost is not a number: ignored")
        .stderr_lacks("forged")
        .run();
    assert!(!out.stderr.contains("stop"), "{out}");
    assert!(!p.read("runs/agent/step.summary.json").contains("forged"));
}

#[test]
fn control_characters_in_progress_are_escaped() {
    let p = Project::new();
    let text =
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"\u001b[2Jcleared"}]}}"#;
    fake(
        &p,
        "claude",
        &format!("echo '{text}'; {}", recorded("claude", "ok")),
        0,
    );
    let out = agent(&p, &[])
        .stdout_contains("LOOP_DONE")
        .stderr_contains("agent: \\x1b[2Jcleared")
        .run();
    assert!(!out.stderr.contains('\x1b'), "{out}");
}

#[test]
fn retry_after_09s_is_nine_seconds() {
    let p = Project::new();
    agent(
        &p,
        &[
            "--cmd",
            "echo 'Error: 429 Too Many Requests. Retry after 09s' >&2; exit 1",
            "--output",
        ],
    )
    .stdout("{\"retry_after\":9}\n")
    .stderr_contains("command ended: rate_limited, waiting 9s")
    .run();
}

#[test]
fn a_usage_limit_falls_back_to_the_next_agent_until_its_reset() {
    let p = Project::new();
    let reset = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let limited = format!(
        r#"echo '{{"type":"system","subtype":"init","session_id":"s1"}}'
echo '{{"type":"rate_limit_event","rate_limit_info":{{"status":"rejected","resetsAt":{reset},"rateLimitType":"five_hour"}}}}'
echo '{{"type":"result","subtype":"success","is_error":true,"result":"You have hit your limit"}}'"#
    );
    fake(&p, "claude", &limited, 1);
    fake(&p, "codex", &recorded("codex", "ok"), 0);
    agent(&p, &["claude,codex", "--output"])
        .stdout("{\"result\":\"Wrote hello.txt.\\nLOOP_DONE\"}\n")
        .stderr_contains("claude hit its usage limit: trying codex")
        .stderr_any("codex's progress lines")
        .run();
    // claude rests until its reset: the next step runs codex at once.
    fake(&p, "claude", "echo must-not-run; exit 3", 3);
    agent(&p, &["claude,codex", "--output"])
        .stdout("{\"result\":\"Wrote hello.txt.\\nLOOP_DONE\"}\n")
        .stderr_contains("claude rests until ")
        .stderr_any("the agent's progress lines")
        .run();
    // Alone, it waits for the reset instead of running.
    let out = agent(&p, &["claude", "--output"])
        .stdout_any("the wait is read below")
        .stderr_any("the agent's progress lines")
        .run();
    let wait: u64 = out
        .stdout
        .trim()
        .trim_start_matches("{\"retry_after\":")
        .trim_end_matches('}')
        .parse()
        .expect("a wait");
    assert!((3500..=3600).contains(&wait), "{out}");
}

#[test]
fn the_quota_threshold_pauses_the_next_step() {
    let p = Project::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let warn = format!(
        r#"echo '{{"type":"rate_limit_event","rate_limit_info":{{"status":"allowed_warning","utilization":0.95,"resetsAt":{}}}}}'; {}"#,
        now + 600,
        recorded("claude", "ok")
    );
    fake(&p, "claude", &warn, 0);
    agent(&p, &["--pause-at", "90", "--output"])
        .stdout_contains("\"result\"")
        .stderr_contains("is at 95% of its quota")
        .stderr_any("the agent's progress lines")
        .run();
    let out = agent(&p, &["--pause-at", "90", "--output"])
        .stderr_contains("claude rests until")
        .stderr_any("the agent's progress lines")
        .stdout_any("the wait is read below")
        .run();
    assert!(out.stdout.starts_with("{\"retry_after\":"), "{out}");
}

/// Runs `cmd` as the agent with `--idle-timeout 1s`: it must end as hung
/// (exit 31) and leave its process group gone (`cmd` writes its pid).
fn ends_hung(p: &Project, cmd: &str) {
    agent(p, &["--cmd", cmd, "--idle-timeout", "1s", "--output"])
        .status(31)
        .stdout("{\"class\":\"hung\"}\n")
        .stderr_contains("no event from the agent for 1s: ending it")
        .stderr_any("the agent's progress lines")
        .timeout(Duration::from_secs(30))
        .run();
    procs::assert_group_gone(procs::read_pid(p, "pid"));
}

#[test]
fn a_hang_is_caught_by_the_idle_timeout_and_nothing_is_left() {
    let p = Project::new();
    let start = Instant::now();
    ends_hung(&p, "echo started; echo $$ > pid; sleep 600");
    assert!(start.elapsed() < Duration::from_secs(15));
}

/// docs/agent.md: a CLI's start-up, before its first event, is not a hang
/// (at least 60 s); the idle timeout counts from the first event.
#[test]
fn the_idle_timeout_counts_from_the_first_event() {
    let p = Project::new();
    ends_hung(&p, "sleep 2; echo first; echo $$ > pid; sleep 600");
    // Ended after its first line, not during its 2 s start.
    assert_eq!(p.read("runs/agent/step.events.jsonl"), "first\n");
}

#[test]
fn a_missing_cli_is_permanent_and_says_how_to_install_it() {
    let p = Project::new();
    agent(&p, &["gemini", "--output"])
        .env("PATH", "/nonexistent")
        .status(25)
        .stdout("{\"permanent\":true,\"class\":\"missing\"}\n")
        .stderr_contains("gemini is not installed (not on PATH): npm install -g @google/gemini-cli")
        .stderr_any("the agent's progress lines")
        .run();
    p.file("empty.md", "");
    agent(&p, &["--prompt", "empty.md"])
        .status(25)
        .stderr_contains("the prompt file empty.md is empty")
        .run();
    agent(&p, &[])
        .stdin(b"\n")
        .status(25)
        .stderr_contains("the prompt on stdin is empty")
        .run();
    agent(&p, &["--prompt", "nope.md"])
        .status(25)
        .stderr_contains("no prompt file at nope.md")
        .run();
}

#[test]
fn a_crashed_step_resumes_its_session() {
    let p = Project::new();
    fake(
        &p,
        "claude",
        r#"echo "$@" >> args; echo '{"type":"system","subtype":"init","session_id":"abc-1"}'"#,
        1,
    );
    agent(&p, &[])
        .status(32)
        .stderr_any("the agent's progress lines")
        .run();
    agent(&p, &[])
        .status(32)
        .stderr_contains("carrying on claude's session")
        .stderr_any("the agent's progress lines")
        .run();
    agent(&p, &["--fresh"])
        .status(32)
        .stderr_any("the agent's progress lines")
        .run();
    let args = p.read("args");
    let lines: Vec<&str> = args.lines().collect();
    assert!(!lines[0].contains("--resume"), "{args}");
    assert!(lines[1].ends_with("--resume abc-1"), "{args}");
    assert!(!lines[2].contains("--resume"), "{args}");
}

/// DESIGN.md: a failure the script marks permanent is not retried by
/// --retry; its class shows in the run log's script_end event.
#[test]
fn a_missing_cli_is_not_retried_under_retry() {
    let p = Project::new();
    p.file("PROMPT.md", "do it\n");
    p.script(
        "w",
        "index.sh",
        "echo run >> \"$LOOPX_PROJECT_ROOT/starts\"\nexec \"$LOOPX_BIN\" agent gemini --output --prompt \"$LOOPX_PROJECT_ROOT/PROMPT.md\"\n",
    );
    p.loopx(&[
        "run",
        "--retry",
        "2",
        "--retry-delay",
        "0",
        "--log",
        "run.jsonl",
        "w",
    ])
    .env("PATH", "/nonexistent")
    .env("XDG_STATE_HOME", p.path("state"))
    .status(1)
    .stderr_contains("gemini is not installed")
    .stderr_contains("(missing): permanent, not retried")
    .stderr_any("loopx's own error line for the failed script")
    .run();
    assert_eq!(p.read("starts"), "run\n");
    let log = p.read("run.jsonl");
    assert!(log.contains(r#""class":"missing""#), "{log}");
}

/// Without --retry, a permanent mark changes nothing; a plain failure
/// is still retried.
#[test]
fn a_failure_without_a_mark_is_retried() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo run >> \"$LOOPX_PROJECT_ROOT/starts\"\necho '{\"class\":\"hung\"}'\nexit 31\n",
    );
    p.loopx(&["run", "--retry", "1", "--retry-delay", "0", "w"])
        .status(1)
        .stderr_contains("retry 1 of 1")
        .stderr_any("the agent's progress lines")
        .run();
    assert_eq!(p.read("starts"), "run\nrun\n");
}

/// A session the CLI cannot carry on (it never saved it) is replaced by a
/// new one at once, not taken for a permanent failure.
#[test]
fn a_session_that_cannot_be_resumed_starts_a_new_one() {
    let p = Project::new();
    let script = format!(
        r#"echo "$@" >> args
case "$*" in *--resume*) echo 'No conversation found with session ID: abc-1' >&2; exit 1 ;; esac
[ -e crashed ] && {{ {}; exit 0; }}
touch crashed; echo '{{"type":"system","subtype":"init","session_id":"abc-1"}}'; exit 1"#,
        recorded("claude", "ok")
    );
    fake(&p, "claude", &script, 0);
    agent(&p, &[])
        .status(32)
        .stderr_any("the agent's progress lines")
        .run();
    agent(&p, &[])
        .stdout_contains("LOOP_DONE")
        .stderr_contains("claude could not resume its session: starting a new one")
        .stderr_any("the agent's progress lines")
        .run();
    let args = p.read("args");
    assert_eq!(args.lines().count(), 3, "{args}");
}

/// SIGTERM to loopx agent (loopx run's --timeout, a supervisor) ends the
/// agent's own process group too: 128+15, nothing left.
#[test]
fn a_signal_to_loopx_agent_ends_the_agent() {
    let p = Project::new();
    p.file("PROMPT.md", "do it\n");
    let running = p
        .loopx(&[
            "agent",
            "--cmd",
            "echo $$ > pid.tmp; mv pid.tmp pid; sleep 600",
            "--prompt",
            "PROMPT.md",
        ])
        .env("XDG_STATE_HOME", p.path("state"))
        .status(143)
        .start();
    procs::wait_for_file(&p.path("pid"));
    let pid = procs::read_pid(&p, "pid");
    running.signal(libc::SIGTERM);
    running.finish();
    procs::assert_group_gone(pid);
}

/// The class a failed script named shows in `loopx status` while the run
/// waits to retry it.
#[test]
fn status_shows_the_class_of_the_failure_being_retried() {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new();
    let rt = p.home().join("run");
    std::fs::create_dir_all(&rt).unwrap();
    std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(0o700)).unwrap();
    p.script(
        "w",
        "index.sh",
        "\"$LOOPX_BIN\" output --class hung\nexit 31\n",
    );
    let run = p
        .loopx(&["run", "--retry", "1", "--retry-delay", "1m", "w"])
        .env("XDG_RUNTIME_DIR", &rt)
        .status(143)
        .stderr_contains("w:index failed (exit 31); retry 1 of 1 in 1m")
        .start();
    let status = |args: &[&str]| {
        let mut all = vec!["status"];
        all.extend_from_slice(args);
        p.loopx(&all)
            .env("XDG_RUNTIME_DIR", &rt)
            .stdout_any("read below")
            .run()
            .stdout
    };
    procs::wait_until("status shows the retry", || {
        status(&[]).contains("waiting to retry")
    });
    assert!(
        status(&[]).contains("w:index (waiting to retry after hung)"),
        "{}",
        status(&[])
    );
    assert!(
        status(&["--json"]).contains(r#""class":"hung""#),
        "{}",
        status(&["--json"])
    );
    run.signal(libc::SIGTERM);
    run.finish();
}

/// docs/agent.md "From bash": one line runs the step; a rate limit waits
/// (retry_after) and runs the step again; the done line stops the loop;
/// the cost reaches --max-cost's sum.
#[test]
fn the_one_line_workflow_waits_on_a_limit_and_stops_when_done() {
    let p = Project::new();
    p.file("PROMPT.md", "do it\n");
    let limited = r#"echo '{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429 Too Many Requests. Retry after 1s","total_cost_usd":0.5}'"#;
    let script = format!(
        "[ -e seen ] && {{ {}; exit 0; }}\ntouch seen\n{limited}",
        recorded("claude", "ok")
    );
    fake(&p, "claude", &script, 1);
    p.script(
        "w",
        "index.sh",
        "exec \"$LOOPX_BIN\" agent --output --done-line LOOP_DONE --prompt \"$LOOPX_PROJECT_ROOT/PROMPT.md\"\n",
    );
    p.loopx(&["run", "--log", "run.jsonl", "w"])
        .env("PATH", path_with_bin(&p))
        .env("XDG_STATE_HOME", p.path("state"))
        .stderr_contains("claude ended: rate_limited, waiting 1s")
        .stderr_contains("w: Wrote hello.txt.")
        .run();
    let log = p.read("run.jsonl");
    assert!(log.contains(r#""event":"wait""#), "{log}");
    assert!(log.contains(r#""reason":"stop""#), "{log}");
    assert!(log.contains(r#""cost_usd":0.5016"#), "{log}");
    let dir = p.path(".loopx/w/runs");
    let runs: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(runs.len(), 1);
    assert!(runs[0]
        .path()
        .join("iteration-1.wait-1.summary.json")
        .is_file());
}

/// The loop of the refusal tests: iteration 1 passes, iteration 2 runs
/// the fake claude, which is refused `npm test` unless `AGENT_ALLOW`
/// allows it (its arguments say so), and counts its starts.
fn refusing_loop(p: &Project) {
    p.file("PROMPT.md", "run the tests\n");
    fake(
        p,
        "claude",
        r#"echo start >> "$LOOPX_PROJECT_ROOT/starts"
echo '{"type":"system","subtype":"init","session_id":"s-1"}'
case "$*" in
  *'Bash(npm test)'*) echo '{"type":"result","subtype":"success","is_error":false,"result":"tests pass\nLOOP_DONE","session_id":"s-1","total_cost_usd":0.01}' ;;
  *) echo '{"type":"result","subtype":"success","is_error":false,"result":"I may not run the tests","session_id":"s-1","total_cost_usd":0.01,"permission_denials":[{"tool_name":"Bash","tool_use_id":"t1","tool_input":{"command":"npm test"}}]}' ;;
esac"#,
        0,
    );
    p.script(
        "w",
        "index.sh",
        "[ \"$LOOPX_ITERATION\" = 1 ] && exit 0\n\
         exec \"$LOOPX_BIN\" agent claude --output --done-line LOOP_DONE --prompt \"$LOOPX_PROJECT_ROOT/PROMPT.md\"\n",
    );
}

/// docs/agent.md "Permission refusals": a refused step fails for good
/// (not retried), the run stays resumable, and a resume under the same
/// allow-list does not start the agent again; once AGENT_ALLOW allows
/// what was refused, the resume runs it and the loop finishes.
#[test]
fn a_permission_refusal_blocks_a_resumed_step_only_while_its_allow_list_holds() {
    let p = Project::new();
    refusing_loop(&p);
    let with = |r: crate::util::Run| {
        r.env("PATH", path_with_bin(&p))
            .env("XDG_STATE_HOME", p.path("state"))
    };
    with(p.loopx(&["run", "--retry", "2", "--retry-delay", "0", "w"]))
        .env("AGENT_ALLOW", "make lint")
        .status(1)
        .stderr_contains("it was denied Bash npm test")
        .stderr_contains("(permission_denied): permanent, not retried")
        .stderr_contains("loopx: the run can be resumed: loopx resume ")
        .stderr_any("the agent's progress lines")
        .run();
    assert_eq!(p.read("starts"), "start\n", "not retried");
    // Resumed under the same allow-list (carried by the run): refused at
    // once, without starting the agent.
    with(p.loopx(&["resume"]))
        .status(1)
        .stderr_contains("AGENT_ALLOW='make lint'")
        .stderr_contains(
            "this step was refused a permission (it was denied Bash npm test) under the same \
             settings: not run again",
        )
        .stderr_contains("loopx: the run can be resumed: loopx resume ")
        .stderr_any("loopx's error line")
        .run();
    assert_eq!(p.read("starts"), "start\n", "the agent did not start");
    // Widened: the resume runs the agent, which now may run the tests.
    with(p.loopx(&["resume"]))
        .env("AGENT_ALLOW", "make lint,npm test")
        .stderr_contains(
            "AGENT_ALLOW is 'make lint,npm test' now ('make lint' when the run started): \
             the new value is used",
        )
        .stderr_any("the agent's progress lines")
        .run();
    assert_eq!(p.read("starts"), "start\nstart\n");
}

/// docs/agent.md "Files kept": a directory keeps the files of the newest
/// AGENT_KEEP_STEPS steps; older steps' files go, anything else stays.
#[test]
fn the_files_of_the_oldest_steps_beyond_the_bound_are_removed() {
    let p = Project::new();
    fake(&p, "claude", &recorded("claude", "ok"), 0);
    p.file("runs/d/notes.txt", "mine\n");
    for step in ["s1", "s2", "s3"] {
        agent(&p, &["--dir", "runs/d", "--step", step])
            .env("AGENT_KEEP_STEPS", "2")
            .stdout_any("the final message")
            .stderr_any("the agent's progress lines")
            .run();
    }
    let mut left: Vec<String> = std::fs::read_dir(p.path("runs/d"))
        .expect("the step directory")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert!(left.contains(&"notes.txt".to_string()), "{left:?}");
    assert!(left.iter().all(|f| !f.starts_with("s1.")), "{left:?}");
    for step in ["s2", "s3"] {
        assert!(
            left.contains(&format!("{step}.summary.json")),
            "{step}: {left:?}"
        );
    }
}
