//! The ready-made workflows with the real agent CLIs (issue 25): Claude
//! Code, Codex and Gemini CLI at the versions of scripts/agent-clis.txt,
//! each talking to a mock of its API on 127.0.0.1 (util::agent_mocks), with
//! the adapter's presets (dist/agent/agent.sh; `AGENT=claude|codex|gemini`).
//! Each test runs once per preset.
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
        for l in processes_under(&self.0) {
            if let Some(pid) = l.split(':').next().and_then(|p| p.parse::<i32>().ok()) {
                // SAFETY: killing a process this test started.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
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

/// The progress line the adapter prints for a file write, per CLI.
fn write_step(agent: Agent) -> &'static str {
    match agent {
        Agent::Claude => "ralph: Write ",
        Agent::Codex => "ralph: run ",
        Agent::Gemini => "ralph: write_file ",
    }
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
/// the run directory keeps the events, the final message and the stderr.
fn ralph_writes_the_file_and_finishes(agent: Agent) {
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
    assert_nothing_left(p.root());
}

/// A 429 becomes a wait (`retry_after`): the run log has a `wait` event,
/// the step runs again and the run finishes. Needs the engine's waits.
fn a_rate_limit_becomes_a_wait_and_the_run_finishes(agent: Agent) {
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
    .stderr_contains("the agent hit a usage or rate limit: waiting ")
    .stderr_contains("ralph: the agent marked the task done after 1 iteration(s)")
    .run();
    assert_eq!(p.read("hello.txt"), "hello\n");
    let events = log_events(&p.path("run.jsonl"));
    assert!(
        events.iter().any(|e| e["event"] == "wait"),
        "a wait event: {events:?}"
    );
    let run = run_dir(&p, "ralph");
    assert!(run.join("iteration-1.events.jsonl").is_file());
    assert!(run.join("iteration-1.wait-1.final.txt").is_file());
    assert_nothing_left(p.root());
}

/// A stream that hangs ends by --timeout (exit 124), and nothing is left.
fn a_hung_stream_ends_by_the_timeout(agent: Agent) {
    let p = project_with("ralph");
    let _cleanup = Cleanup(p.root().to_path_buf());
    ralph_prompt(&p, 1000);
    let mock = Mock::start(agent, hello(p.root()));
    mock.fail(Fault::Hang);
    loopx(&p, &mock, &["run", "--timeout", "20s", "ralph"])
        .status(124)
        .stderr_contains("loopx: error: ralph:index timed out after 20s")
        .stderr_lacks("Terminated")
        .run();
    assert_eq!(mock.model_requests().len(), 1, "the hang is what timed out");
    assert!(!p.exists("hello.txt"));
    assert_nothing_left(p.root());
}

/// A refused tool call fails the script with what was refused, and the
/// retry fails the same way without starting the agent again.
fn a_denied_write_fails_the_script(agent: Agent) {
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
    .stderr_contains("ralph: the agent was denied a permission it needs: ")
    .stderr_contains("AGENT_ALLOW")
    .stderr_contains("ralph: not starting the agent again: it was denied")
    .run();
    let wrote_outside = Path::new(&outside).exists();
    let _ = fs::remove_file(&outside);
    assert!(!wrote_outside, "{outside} was written");
    assert!(!p.exists("denied.txt"));
    let first_turns = mock
        .model_requests()
        .iter()
        .filter(|r| r.status == 200)
        .count();
    assert!(first_turns <= 2, "the retry did not start the agent");
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
    let report = p.read("build-audit-fix-report.md");
    assert!(
        report.contains("- Result: **approved** in round 2"),
        "{report}"
    );
    assert!(
        report.contains("| 1 | skipped | passed | changes requested |"),
        "{report}"
    );
    assert!(
        report.contains("| 2 | skipped | passed | approved |"),
        "{report}"
    );
    assert!(report.contains("## Last audit\n\nAll good."), "{report}");
    let run = run_dir(&p, "build-audit-fix");
    for f in [
        "build.final.txt",
        "fix-1.final.txt",
        "round-1/audit.md",
        "round-2/audit.events.jsonl",
    ] {
        assert!(run.join(f).is_file(), "{f}");
    }
    assert_nothing_left(p.root());
}

macro_rules! per_preset {
    ($($test:ident),* $(,)?) => {
        mod claude { $( #[test] fn $test() { super::$test(super::Agent::Claude) } )* }
        mod codex { $( #[test] fn $test() { super::$test(super::Agent::Codex) } )* }
        mod gemini { $( #[test] fn $test() { super::$test(super::Agent::Gemini) } )* }
    };
}

per_preset!(
    ralph_writes_the_file_and_finishes,
    a_rate_limit_becomes_a_wait_and_the_run_finishes,
    a_hung_stream_ends_by_the_timeout,
    a_denied_write_fails_the_script,
    ctrl_c_while_a_tool_runs_leaves_nothing,
    build_audit_fix_converges,
);
