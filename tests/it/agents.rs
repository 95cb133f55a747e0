//! `loopx agent` and the ready-made workflows with the real agent CLIs:
//! Claude Code, Codex and Gemini CLI at the versions of
//! scripts/agent-clis.txt, each talking to a mock of its API on 127.0.0.1
//! (util::agent_mocks), with loopx agent's presets
//! (`AGENT=claude|codex|gemini`). Each test runs once per preset; they
//! are few, as each one starts the real CLIs (tests/it/agent_cmd.rs covers
//! the classes with recorded streams and fake CLIs).
//!
//! The workflows are copied from dist/workflows (tests/it/workflows.rs
//! covers installing them from the release).
#![cfg(target_os = "linux")]

use crate::util::agent_mocks::{Agent, Fault, Mock, Reply, Turn};
use crate::util::{procs, Project, Run};
use serde_json::Value;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A project with `workflow` copied from dist/workflows into .loopx/.
fn project_with(workflow: &str) -> Project {
    let p = Project::new();
    let status = Command::new("cp")
        .arg("-R")
        .arg(Path::new(ROOT).join("dist/workflows").join(workflow))
        .arg(p.path(".loopx"))
        .status()
        .expect("cp");
    assert!(status.success());
    let _ = fs::remove_dir_all(p.path(&format!(".loopx/{workflow}/runs")));
    p
}

/// `loopx <args>` in `p`, talking to `mock` with the real CLI. The CLIs
/// print progress and their own notes: stderr is checked by each test.
fn loopx(p: &Project, mock: &Mock, args: &[&str]) -> Run {
    mock.env(p.loopx(args), p.home())
        .env("AGENT_LIMIT_WAIT", "1s")
        .timeout(Duration::from_secs(240))
}

/// The one run directory of `workflow`.
fn run_dir(p: &Project, workflow: &str) -> std::path::PathBuf {
    let runs = p.path(&format!(".loopx/{workflow}/runs"));
    let dirs: Vec<_> = fs::read_dir(&runs)
        .unwrap_or_else(|e| panic!("ls {}: {e}", runs.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// The live processes whose working directory or arguments lie under
/// `dir` (as scripts/test.sh finds leftovers).
fn processes_under(dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").expect("/proc").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.is_empty() {
            continue;
        }
        let args = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let cwd = fs::read_link(entry.path().join("cwd"))
            .map(|c| c.display().to_string())
            .unwrap_or_default();
        if format!("{cwd}/ {args}").contains(&format!("{dir}/")) {
            found.push(format!("{name}: {args}"));
        }
    }
    found
}

/// Fails when a process is left under `dir`, after killing them all.
fn assert_nothing_left(dir: &Path) {
    let mut left = processes_under(dir);
    for _ in 0..100 {
        if left.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
        left = processes_under(dir);
    }
    for l in &left {
        if let Some(pid) = l.split(':').next().and_then(|p| p.parse::<i32>().ok()) {
            // SAFETY: killing a process this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    panic!("processes left running: {left:?}");
}

/// Kills what a failed test left running under its project (a test that
/// panics midway leaves its loopx, its agent and their children).
struct Cleanup(std::path::PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        // What the agents printed, for the failure's post-mortem.
        let mut files = Vec::new();
        collect_files(&self.0, &mut files);
        collect_files(&self.0.parent().expect("temp dir").join("home"), &mut files);
        for f in files {
            let name = f.display().to_string();
            if name.ends_with(".events.jsonl") || name.contains("/sessions/") {
                let mut text = fs::read_to_string(&f).unwrap_or_default();
                if name.contains("/sessions/") {
                    // Codex's rollout: its tool calls and their outputs.
                    text = text
                        .lines()
                        .filter(|l| l.contains("function_call") || l.contains("exec_command"))
                        .collect::<Vec<_>>()
                        .join("\n");
                }
                let cut: String = text.chars().take(6000).collect();
                eprintln!("--- {name}\n{cut}");
            }
        }
        for l in processes_under(&self.0) {
            if let Some(pid) = l.split(':').next().and_then(|p| p.parse::<i32>().ok()) {
                // SAFETY: killing a process this test started.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// Every file under `dir`.
fn collect_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            collect_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// The events of a run log.
fn log_events(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The progress line loopx agent prints for a file write, per CLI.
fn write_step(agent: Agent) -> &'static str {
    match agent {
        Agent::Claude => "ralph: Write ",
        Agent::Codex => "ralph: run ",
        Agent::Gemini => "ralph: write_file ",
    }
}

/// A step's summary.json, parsed.
fn summary(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The 200-status model requests: the turns the model answered.
fn answered(mock: &Mock) -> usize {
    mock.model_requests()
        .iter()
        .filter(|r| r.status == 200)
        .count()
}

/// The classic loop: write hello.txt, then say the done line.
fn hello(root: &Path) -> impl Fn(&Turn) -> Reply + Send + Sync + 'static {
    let file = root.join("hello.txt").display().to_string();
    move |turn: &Turn| {
        if turn.tool_results == 0 {
            Reply::Write(file.clone(), "hello\n".into())
        } else {
            Reply::Text("Wrote hello.txt.\nLOOP_DONE".into())
        }
    }
}

fn ralph_prompt(p: &Project, size: usize) {
    let mut prompt = String::from("Write hello.txt saying hello, then print LOOP_DONE.\n\n");
    while prompt.len() < size {
        prompt.push_str("Background the agent may read: lorem ipsum dolor sit amet.\n");
    }
    prompt.push_str("END-OF-PROMPT\n");
    p.file("PROMPT.md", &prompt);
}

// ---------------------------------------------------------------- tests

/// The loop finishes and the file exists; a 200 KiB prompt reaches the API
/// whole (on the CLI's stdin, never in argv); each step shows on stderr;
/// the run directory keeps the events, the final message, the stderr and
/// the summary. Gemini CLI echoes the prompt as one 200 KiB event: with
/// its stdout a pipe, it lost that event's tail and all that followed in
/// about half the runs (it exits with writes still queued; see spawn in
/// src/agent/run.rs).
fn writes_a_file_and_finishes(agent: Agent) {
    let p = project_with("ralph");
    let _cleanup = Cleanup(p.root().to_path_buf());
    ralph_prompt(&p, 200 * 1024);
    let mock = Mock::start(agent, hello(p.root()));
    loopx(&p, &mock, &["run", "--timeout", "3m", "ralph"])
        .stderr_contains(write_step(agent))
        .stderr_contains("ralph: the agent marked the task done after 1 iteration(s)")
        .stderr_lacks("Terminated")
        .run();
    assert_eq!(p.read("hello.txt"), "hello\n");
    let first = &mock.model_requests()[0];
    let api = match agent {
        Agent::Claude => "/v1/messages",
        Agent::Codex => "/v1/responses",
        Agent::Gemini => "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
    };
    assert_eq!(first.path, api);
    let body = first.body.to_string();
    assert!(
        body.contains("END-OF-PROMPT"),
        "the whole prompt reached the API"
    );
    assert!(body.contains("Write hello.txt saying hello"));
    let run = run_dir(&p, "ralph");
    let final_text = fs::read_to_string(run.join("iteration-1.final.txt")).expect("final");
    assert!(final_text.contains("LOOP_DONE"), "{final_text}");
    let events = fs::read_to_string(run.join("iteration-1.events.jsonl")).expect("events");
    assert!(events.lines().count() >= 3, "{events}");
    assert!(run.join("iteration-1.stderr.log").is_file());
    let s = summary(&run.join("iteration-1.summary.json"));
    assert_eq!(s["class"], "done", "{s}");
    assert_eq!(s["agent"], agent.name(), "{s}");
    assert!(s["session"].is_string(), "the CLI named its session: {s}");
    assert_nothing_left(p.root());
}

/// A 429 becomes a wait (`retry_after`): the run log has a `wait` event,
/// the step runs again and the run finishes.
fn a_429_becomes_a_wait_and_then_finishes(agent: Agent) {
    let p = project_with("ralph");
    let _cleanup = Cleanup(p.root().to_path_buf());
    ralph_prompt(&p, 1000);
    let mock = Mock::start(agent, hello(p.root()));
    mock.fail(Fault::Status(429, Some(1)));
    loopx(
        &p,
        &mock,
        &["run", "--log", "run.jsonl", "--timeout", "3m", "ralph"],
    )
    .stderr_contains(&format!(
        "ralph: {} ended: rate_limited, waiting ",
        agent.name()
    ))
    .stderr_contains("ralph: the agent marked the task done after 1 iteration(s)")
    .run();
    assert_eq!(p.read("hello.txt"), "hello\n");
    let events = log_events(&p.path("run.jsonl"));
    assert!(
        events.iter().any(|e| e["event"] == "wait"),
        "a wait event: {events:?}"
    );
    let run = run_dir(&p, "ralph");
    let first = summary(&run.join("iteration-1.summary.json"));
    assert_eq!(first["class"], "rate_limited", "{first}");
    assert!(
        first["retry_after"]
            .as_u64()
            .is_some_and(|w| (1..=300).contains(&w)),
        "{first}"
    );
    assert_eq!(
        summary(&run.join("iteration-1.wait-1.summary.json"))["class"],
        "done"
    );
    assert_nothing_left(p.root());
}

/// An auth error (Claude Code: a 403, which it reports as a "success"
/// with `is_error`; the others: a 401) is classified `auth`, a permanent
/// failure: `--retry 2` does not run the step again, and the mock sees
/// one model request.
fn an_auth_error_is_permanent_and_not_retried(agent: Agent) {
    let p = project_with("ralph");
    let _cleanup = Cleanup(p.root().to_path_buf());
    ralph_prompt(&p, 1000);
    let mock = Mock::start(agent, hello(p.root()));
    let status = if agent == Agent::Claude { 403 } else { 401 };
    mock.fail(Fault::Status(status, None));
    loopx(
        &p,
        &mock,
        &[
            "run",
            "--log",
            "run.jsonl",
            "--retry",
            "2",
            "--retry-delay",
            "0",
            "ralph",
        ],
    )
    .status(1)
    .stderr_contains(&format!("ralph: {} ended: auth (", agent.name()))
    .stderr_contains("loopx: ralph:index failed (exit 20) (auth): permanent, not retried")
    .run();
    assert_eq!(
        mock.model_requests().len(),
        1,
        "{:?}",
        mock.model_requests()
    );
    assert!(!p.exists("hello.txt"));
    let ends: Vec<Value> = log_events(&p.path("run.jsonl"))
        .into_iter()
        .filter(|e| e["event"] == "script_end")
        .collect();
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["class"], "auth", "{ends:?}");
    assert_nothing_left(p.root());
}

/// The hang detector's timeout in the tests: longer than the CLI takes to
/// print its first event on a loaded machine (Gemini CLI, a Node program,
/// takes about 8 s on two busy cores; the others are native).
fn idle_timeout(agent: Agent) -> &'static str {
    match agent {
        Agent::Gemini => "30s",
        _ => "8s",
    }
}

/// The model's reply: write hello.txt, then (once) a stream that starts
/// and stops mid-way, then the done line.
fn hello_then_a_stall(root: &Path) -> impl Fn(&Turn) -> Reply + Send + Sync + 'static {
    let file = root.join("hello.txt").display().to_string();
    let stalled = AtomicUsize::new(0);
    move |turn: &Turn| {
        if turn.tool_results == 0 {
            Reply::Write(file.clone(), "hello\n".into())
        } else if stalled.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::Fault(Fault::Hang)
        } else {
            Reply::Text("Wrote hello.txt.\nLOOP_DONE".into())
        }
    }
}

/// A stream that stops mid-way (after a tool call, the next answer starts
/// and goes silent): the hang detector ends the agent's group within
/// seconds of the idle timeout (class `hung`, exit 31) and no process is
/// left.
fn a_stalled_stream_is_ended_by_the_hang_detector(agent: Agent) {
    let p = Project::new();
    let _cleanup = Cleanup(p.root().to_path_buf());
    p.file("prompt.md", "Write hello.txt saying hello.\n");
    let mock = Mock::start(agent, hello_then_a_stall(p.root()));
    let started = std::time::Instant::now();
    let idle = idle_timeout(agent);
    let out = loopx(
        &p,
        &mock,
        &[
            "agent",
            "--idle-timeout",
            idle,
            "--dir",
            "runs",
            "--step",
            "s",
            "--prompt",
            "prompt.md",
        ],
    )
    .status(31)
    .stderr_contains(&format!(
        "agent: no event from the agent for {idle}: ending it"
    ))
    .stderr_contains(&format!("agent: {} ended: hung", agent.name()))
    .run();
    let took = started.elapsed();
    // The CLI's start and its first turn, the idle timeout, a 3 s grace.
    assert!(took < Duration::from_secs(90), "took {took:?}: {out}");
    assert!(
        p.exists("hello.txt"),
        "it stalled mid-way, not before: {:?}\n{}",
        mock.requests()
            .iter()
            .map(|r| (
                &r.path,
                r.status,
                r.body.to_string().chars().take(3000).collect::<String>()
            ))
            .collect::<Vec<_>>(),
        fs::read_to_string(p.path("runs/s.events.jsonl")).unwrap_or_default()
    );
    assert_eq!(answered(&mock), 2, "{:?}", mock.model_requests());
    let s = summary(&p.path("runs/s.summary.json"));
    assert_eq!(s["class"], "hung", "{s}");
    assert_nothing_left(p.root());
}

/// A step retried after a hang carries on the agent's session: the mock
/// sees the first attempt's conversation (its tool call and result) in
/// the retry's first request, and the run finishes.
fn a_retried_step_carries_on_its_session(agent: Agent) {
    let p = project_with("ralph");
    let _cleanup = Cleanup(p.root().to_path_buf());
    ralph_prompt(&p, 1000);
    let mock = Mock::start(agent, hello_then_a_stall(p.root()));
    loopx(
        &p,
        &mock,
        &["run", "--retry", "1", "--retry-delay", "0", "ralph"],
    )
    .env("AGENT_IDLE_TIMEOUT", idle_timeout(agent))
    .stderr_contains(&format!("ralph: {} ended: hung", agent.name()))
    .stderr_contains(&format!("ralph: carrying on {}'s session", agent.name()))
    .stderr_contains("ralph: the agent marked the task done after 1 iteration(s)")
    .run();
    let run = run_dir(&p, "ralph");
    let first = summary(&run.join("iteration-1.summary.json"));
    let retry = summary(&run.join("iteration-1.attempt-2.summary.json"));
    assert_eq!(first["class"], "hung", "{first}");
    assert_eq!(retry["class"], "done", "{retry}");
    assert_eq!(retry["resumed"], true, "{retry}");
    let session = first["session"]
        .as_str()
        .expect("the first attempt's session");
    assert_eq!(retry["session"], session, "the same session: {retry}");
    // The retry's first request holds the first attempt's tool result: the
    // conversation went on where it stopped.
    let requests = mock.model_requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    let resumed = &requests[2].body;
    let results = match agent {
        Agent::Claude => resumed.to_string().matches("\"tool_result\"").count(),
        Agent::Codex => resumed.to_string().matches("function_call_output").count(),
        Agent::Gemini => resumed.to_string().matches("functionResponse").count(),
    };
    assert!(results >= 1, "the retry started over: {resumed}");
    if agent == Agent::Claude {
        // Claude Code names its session in each request's metadata.
        assert!(resumed.to_string().contains(session), "{resumed}");
    }
    assert_nothing_left(p.root());
}

/// A refused tool call is a permanent failure (`permission_denied`): the
/// run stops with what was refused and `--retry` does not start the agent
/// again.
fn a_denied_write_is_permanent(agent: Agent) {
    let p = project_with("ralph");
    let _cleanup = Cleanup(p.root().to_path_buf());
    ralph_prompt(&p, 1000);
    // Outside the project (and, for Codex, outside its sandbox's writable
    // roots: /tmp and $TMPDIR are among them).
    let outside = match agent {
        Agent::Codex => format!("/var/tmp/loopx-test-denied-{}", std::process::id()),
        _ => p
            .root()
            .parent()
            .expect("parent")
            .join("outside.txt")
            .display()
            .to_string(),
    };
    let denied = match agent {
        // Not a file it may write: outside the working directory.
        Agent::Claude => Reply::Write(outside.clone(), "x".into()),
        // Not a command it may run: git and AGENT_ALLOW only.
        Agent::Gemini => Reply::Shell("touch denied.txt".into()),
        // A write the sandbox refuses.
        Agent::Codex => Reply::Shell(format!("printf x > {outside}")),
    };
    let mock = Mock::start(agent, move |turn: &Turn| {
        if turn.tool_results == 0 {
            denied.clone()
        } else {
            Reply::Text("I could not.\nLOOP_DONE".into())
        }
    });
    loopx(
        &p,
        &mock,
        &["run", "--retry", "1", "--retry-delay", "0", "ralph"],
    )
    .status(1)
    .stderr_contains(&format!(
        "ralph: {} ended: permission_denied (it was denied ",
        agent.name()
    ))
    .stderr_contains(
        "ralph: the agent was denied a permission it needs: allow the command with AGENT_ALLOW",
    )
    .stderr_contains("(permission_denied): permanent, not retried")
    .run();
    let wrote_outside = Path::new(&outside).exists();
    let _ = fs::remove_file(&outside);
    assert!(!wrote_outside, "{outside} was written");
    assert!(!p.exists("denied.txt"));
    assert!(answered(&mock) <= 2, "the retry did not start the agent");
    assert_nothing_left(p.root());
}

/// Ctrl-C while the agent's tool command runs: loopx exits 130 and no
/// process is left, the tool command's included.
fn ctrl_c_while_a_tool_runs_leaves_nothing(agent: Agent) {
    let p = project_with("ralph");
    let _cleanup = Cleanup(p.root().to_path_buf());
    ralph_prompt(&p, 1000);
    let flag = p.path("started.flag").display().to_string();
    let cmd = format!("touch {flag} && sleep 600");
    let mock = Mock::start(agent, move |turn: &Turn| {
        if turn.tool_results == 0 {
            Reply::Shell(cmd.clone())
        } else {
            Reply::Text("done\nLOOP_DONE".into())
        }
    });
    let running = loopx(&p, &mock, &["run", "ralph"])
        .env("AGENT_ALLOW", "touch,sleep")
        .status(130)
        .stderr_any("the CLIs' own notes on SIGINT vary; the exit code and the processes count")
        .start();
    let flag = p.path("started.flag");
    let mut running = running;
    procs::wait_until("the tool command starts (or loopx ends)", || {
        flag.exists() || matches!(running.child.try_wait(), Ok(Some(_)))
    });
    running.signal(libc::SIGINT);
    running.finish();
    assert_nothing_left(p.root());
}

/// build-audit-fix converges: the audit rejects, the fixer fixes, the
/// second audit approves; the report says so, round by round.
fn build_audit_fix_converges(agent: Agent) {
    let p = project_with("build-audit-fix");
    let _cleanup = Cleanup(p.root().to_path_buf());
    p.file("TASK.md", "Write app.txt saying hello.\n");
    let app = p.path("app.txt").display().to_string();
    let fixed = p.path("fixed.txt").display().to_string();
    let audits = AtomicUsize::new(0);
    let mock = Mock::start(agent, move |turn: &Turn| {
        let role = [
            "You are the builder",
            "You are the auditor",
            "You are the fixer",
        ]
        .iter()
        .position(|r| turn.prompt.contains(r));
        match (role, turn.tool_results) {
            (Some(0), 0) => Reply::Write(app.clone(), "hello\n".into()),
            (Some(0), _) => Reply::Text("Built app.txt.".into()),
            (Some(1), _) => {
                if audits.fetch_add(1, Ordering::SeqCst) == 0 {
                    Reply::Text("app.txt must also say fixed.\nVERDICT: CHANGES REQUESTED".into())
                } else {
                    Reply::Text("All good.\n**VERDICT: APPROVED**".into())
                }
            }
            // A new file: Claude Code's Write does not overwrite a file it
            // has not read.
            (Some(2), 0) => Reply::Write(fixed.clone(), "fixed\n".into()),
            (Some(2), _) => Reply::Text("Fixed.".into()),
            _ => Reply::Text("?".into()),
        }
    });
    loopx(&p, &mock, &["run", "--timeout", "3m", "build-audit-fix"])
        .env("TEST_CMD", "grep -q hello app.txt")
        .stderr_contains("build-audit-fix: approved in round 2")
        .stderr_lacks("Terminated")
        .run();
    assert_eq!(p.read("app.txt"), "hello\n");
    assert_eq!(p.read("fixed.txt"), "fixed\n");
    let report = p.read(".loopx/build-audit-fix/report.md");
    assert!(
        report.contains("- Result: **approved** in round 2"),
        "{report}"
    );
    assert!(
        report.contains("| 1 | skipped | passed | changes requested | no |"),
        "{report}"
    );
    assert!(
        report.contains("| 2 | skipped | passed | approved | yes |"),
        "{report}"
    );
    assert!(report.contains("## Last audit\n\nAll good."), "{report}");
    let run = run_dir(&p, "build-audit-fix");
    for f in [
        "build.final.txt",
        "fix-1.final.txt",
        "round-1/audit.md",
        "round-2/audit.events.jsonl",
        "round-2/audit.summary.json",
    ] {
        assert!(run.join(f).is_file(), "{f}");
    }
    assert_nothing_left(p.root());
}

/// issue-runner with the real CLI (the forge is the fake gh of
/// tests/it/workflows.rs): the issue's text reaches the model inside the
/// prompt, the agent's final message is read from its stream, and its
/// route moves the issue: needs-human, with its reasons as a comment.
fn issue_runner_routes_an_issue_by_the_agents_final_message(agent: Agent) {
    let lab = crate::workflows::issue_runner(&[(3, "alice", "2024-01-02T00:00:00Z", "agent:todo")]);
    let _cleanup = Cleanup(lab.p.root().to_path_buf());
    let mock = Mock::start(agent, |_: &Turn| {
        Reply::Text("The issue asks for a decision on the API.\nROUTE: needs-human".into())
    });
    let fake_gh = lab.tools.join("gh");
    mock.env(lab.runner(&["--timeout", "3m"]), lab.p.home())
        .env("FORGE_CMD", &fake_gh)
        .env("AGENT_LIMIT_WAIT", "1s")
        .timeout(Duration::from_secs(240))
        .stderr_contains("issue-runner: took #3 (agent:todo -> agent:working)")
        .stderr_contains("issue-runner: #3: the agent routed it to 'needs-human'")
        .stderr_contains("issue-runner: #3 moved to agent:needs-human")
        .run();
    assert_eq!(lab.labels(3), ["agent:needs-human"]);
    let comments = lab.comments(3);
    assert!(
        comments.contains("The issue asks for a decision on the API."),
        "{comments}"
    );
    let prompt = &mock.model_requests()[0].body.to_string();
    assert!(prompt.contains("The body of issue 3."), "{prompt}");
    assert_nothing_left(lab.p.root());
}

macro_rules! per_preset {
    ($($test:ident),* $(,)?) => {
        mod claude { $( #[test] fn $test() { super::$test(super::Agent::Claude) } )* }
        mod codex { $( #[test] fn $test() { super::$test(super::Agent::Codex) } )* }
        mod gemini { $( #[test] fn $test() { super::$test(super::Agent::Gemini) } )* }
    };
}

per_preset!(
    writes_a_file_and_finishes,
    a_429_becomes_a_wait_and_then_finishes,
    an_auth_error_is_permanent_and_not_retried,
    a_stalled_stream_is_ended_by_the_hang_detector,
    a_retried_step_carries_on_its_session,
    a_denied_write_is_permanent,
    ctrl_c_while_a_tool_runs_leaves_nothing,
    build_audit_fix_converges,
    issue_runner_routes_an_issue_by_the_agents_final_message,
);

/// Records tests/data/agent/recorded again with the pinned CLIs, each case
/// through `loopx agent`'s preset against the mock: run it after raising
/// scripts/agent-clis.txt, then the unit tests of src/agent/ and
/// tests/it/agent_cmd.rs check the readers against the new streams:
/// `cargo test --test it -- --ignored agents::record_streams`. Each case's
/// exit code is the class loopx agent gave it.
#[test]
#[ignore = "writes tests/data/agent/recorded: run after raising scripts/agent-clis.txt"]
fn record_streams() {
    let cases: [(&str, i32); 10] = [
        ("ok", 0),
        ("shell", 0),
        ("429", 11),
        ("401", 20),
        ("403", 20),
        ("400", 24),
        ("500", 12),
        ("529", 12),
        ("ok-json", 0),
        ("429-json", 11),
    ];
    for agent in [Agent::Claude, Agent::Codex, Agent::Gemini] {
        let dest = Path::new(ROOT)
            .join("tests/data/agent/recorded")
            .join(agent.name());
        for (case, exit) in cases {
            let p = Project::new();
            let _cleanup = Cleanup(p.root().to_path_buf());
            p.file(
                "prompt.md",
                "Write hello.txt saying hello, then print LOOP_DONE.\n",
            );
            let shell = case == "shell";
            let file = p.path("hello.txt").display().to_string();
            let mock = Mock::start(agent, move |turn: &Turn| match turn.tool_results {
                0 if shell => Reply::Shell("touch denied.txt".into()),
                0 => Reply::Write(file.clone(), "hello\n".into()),
                _ => Reply::Text("Wrote hello.txt.\nLOOP_DONE".into()),
            });
            if let Ok(status) = case.trim_end_matches("-json").parse::<u16>() {
                mock.fail(Fault::Status(status, (status == 429).then_some(7)));
                if status == 400 {
                    // Claude Code 2.1.332 sends a request refused with a
                    // 400 again, whatever CLAUDE_CODE_MAX_RETRIES says.
                    for _ in 0..5 {
                        mock.fail(Fault::Status(status, None));
                    }
                }
            }
            let json_cmd = match agent {
                Agent::Claude => Some(
                    "claude -p --output-format json --permission-mode acceptEdits \
                     --allowedTools 'Bash(git:*)'",
                ),
                Agent::Gemini => Some(
                    "gemini --output-format json --skip-trust --approval-mode auto_edit \
                     --allowed-tools 'run_shell_command(git)'",
                ),
                // Codex has no JSON document: its -json cases are its stream.
                Agent::Codex => None,
            };
            let mut args = vec![
                "agent",
                "--dir",
                "runs",
                "--step",
                "s",
                "--prompt",
                "prompt.md",
            ];
            if shell {
                args.extend(["--allow", "touch"]);
            }
            if let (true, Some(cmd)) = (case.ends_with("-json"), json_cmd) {
                args.extend(["--cmd", cmd]);
            }
            loopx(&p, &mock, &args)
                .status(exit)
                .stdout_any("the final message, recorded with the events")
                .stderr_any("progress and the CLI's notes, recorded below")
                .run();
            let s = summary(&p.path("runs/s.summary.json"));
            let rc = s["exit"]
                .as_i64()
                .map_or_else(|| "signal".to_string(), |c| c.to_string());
            fs::create_dir_all(&dest).expect("mkdir");
            fs::copy(
                p.path("runs/s.events.jsonl"),
                dest.join(format!("{case}.jsonl")),
            )
            .expect("events");
            fs::copy(
                p.path("runs/s.stderr.log"),
                dest.join(format!("{case}.stderr")),
            )
            .expect("stderr");
            fs::write(dest.join(format!("{case}.rc")), format!("{rc}\n")).expect("rc");
        }
    }
}
