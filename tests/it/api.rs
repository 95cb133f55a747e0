//! The internal machine mode behind the JS API (§9, DESIGN "API protocol"),
//! spoken directly: one JSON line per message on stdout, pulled with `next`
//! lines on stdin. The JS side's own tests are in dist/npm/test/api.test.js.

use crate::util::*;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `loopx __api 1 <args>` in the project with piped stdio.
fn spawn_api(p: &Project, args: &[&str]) -> std::process::Child {
    let mut cmd = Command::new(loopx_bin());
    cmd.arg("__api")
        .args(args)
        .current_dir(p.root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    isolate(&mut cmd, p.home());
    cmd.spawn().expect("spawn loopx __api")
}

fn wait_for_file(p: &Project, rel: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !p.exists(rel) {
        assert!(Instant::now() < deadline, "{rel} never appeared");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for a child whose stdout the test has read itself: (code, stderr).
fn finish(mut child: std::process::Child) -> (Option<i32>, String) {
    let mut err = String::new();
    let mut stderr = child.stderr.take().expect("stderr");
    std::io::Read::read_to_string(&mut stderr, &mut err).expect("read stderr");
    (child.wait().expect("wait").code(), err)
}

fn log_lines(p: &Project) -> usize {
    if p.exists("log") {
        p.read("log").lines().count()
    } else {
        0
    }
}

#[test]
fn api_mode_pulls_each_iteration_with_next_and_ends_on_eof() {
    let p = Project::new();
    p.script("w", "index.sh", &logging_script("ran", r#"{"result":"r"}"#));
    let mut child = spawn_api(&p, &["1", "--", "w"]);
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().expect("a line").expect("read");
    assert_eq!(first, r#"{"type":"output","output":{"result":"r"}}"#);
    stdin.write_all(b"next\n").expect("write next");
    let second = lines.next().expect("a line").expect("read");
    assert_eq!(second, first);
    // The consumer is gone: the loop ends without a third iteration.
    drop(stdin);
    assert_eq!(
        lines.next().expect("a line").expect("read"),
        r#"{"type":"done"}"#
    );
    assert!(lines.next().is_none());
    assert_eq!(finish(child), (Some(0), String::new()));
    assert_eq!(log_lines(&p), 2);
}

#[test]
fn api_mode_consumer_gone_during_a_script_terminates_its_group_and_starts_nothing() {
    // The channel closes while the script runs: the consumer's process is
    // gone (§9.1, consumer-driven cancellation). The script and its
    // background grandchild are terminated; nothing else starts.
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo ran >> \"$LOOPX_PROJECT_ROOT/log\"\n\
         sleep 300 &\n\
         echo $! > \"$LOOPX_PROJECT_ROOT/grandchild\"\n\
         : > \"$LOOPX_PROJECT_ROOT/ready\"\n\
         wait\n\
         printf '{\"result\":\"x\"}'\n",
    );
    let mut run = p
        .loopx(&["__api", "1", "--", "w"])
        .stdout("{\"type\":\"done\"}\n")
        .timeout(Duration::from_secs(20))
        .start_with_stdin(Stdio::piped());
    wait_for_file(&p, "ready");
    let grandchild: i32 = p.read("grandchild").trim().parse().expect("pid");
    let started = Instant::now();
    drop(run.child.stdin.take());
    run.finish();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "SIGTERM ended the group without waiting out the grace period"
    );
    // SAFETY-free check: signal 0 only asks whether the pid exists.
    let alive = Command::new("kill")
        .args(["-0", &grandchild.to_string()])
        .stderr(Stdio::null())
        .status()
        .expect("kill -0")
        .success();
    assert!(!alive, "the script's grandchild outlived the consumer");
    assert_eq!(log_lines(&p), 1);
}

#[test]
fn api_mode_consumer_process_gone_ends_quietly() {
    // Both ends of the channel closed, as when the consumer's process exits:
    // no "broken pipe" error on stderr, no further iteration.
    let p = Project::new();
    p.script("w", "index.sh", &logging_script("ran", r#"{"result":"r"}"#));
    let mut child = spawn_api(&p, &["1", "--", "w"]);
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("read");
    assert!(first.starts_with(r#"{"type":"output""#), "{first}");
    drop(stdout);
    drop(child.stdin.take());
    assert_eq!(finish(child), (Some(0), String::new()));
    assert_eq!(log_lines(&p), 1);
}

#[test]
fn api_mode_reports_errors_with_the_cli_message_and_prints_nothing() {
    let p = Project::new();
    p.script("w", "index.sh", "exit 3\n");
    p.loopx(&["__api", "1", "--", "nope"])
        .status(1)
        .stdout(
            "{\"type\":\"error\",\"message\":\"workflow 'nope' not found in .loopx/ (workflows: w)\",\"exitCode\":1,\"reason\":\"error\"}\n",
        ).run();
    p.loopx(&["__api", "1", "--", "w"])
        .status(1)
        .stdout(
            "{\"type\":\"error\",\"message\":\"script w:index exited with code 3; stopping the loop\",\"exitCode\":1,\"reason\":\"script_failed\"}\n",
        ).run();
}

#[test]
fn api_mode_protocol_mismatch_names_the_supported_version() {
    let p = Project::new();
    p.script("w", "index.sh", &logging_script("ran", ""));
    p.loopx(&["__api", "999", "--", "w"])
        .status(1)
        .stdout(&format!(
            "{{\"type\":\"protocol\",\"supported\":\"1\",\"version\":\"{}\"}}\n",
            env!("CARGO_PKG_VERSION")
        ))
        .run();
    assert!(!p.exists("log"));
}

#[test]
fn api_mode_never_delegates_to_a_project_local_loopx() {
    // §3.2 delegation is for the global CLI; the JS API already runs the
    // imported package's own binary.
    let p = Project::new();
    p.file("package.json", r#"{"devDependencies": {"loopx": "*"}}"#);
    write_executable(
        &p.path("node_modules/.bin/loopx"),
        "#!/bin/sh\necho delegated >> \"$PWD/log\"\nexit 7\n",
    );
    p.script("w", "index.sh", "printf '{\"stop\":true}'\n");
    // The channel stays open, as a live consumer keeps it.
    let mut child = spawn_api(&p, &["1", "--", "w"]);
    let stdin = child.stdin.take();
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().expect("stdout"), &mut stdout)
        .expect("read stdout");
    assert_eq!(
        stdout,
        "{\"type\":\"output\",\"output\":{\"stop\":true}}\n{\"type\":\"done\"}\n"
    );
    drop(stdin);
    assert_eq!(finish(child), (Some(0), String::new()));
    assert!(!p.exists("log"));
}

#[test]
fn api_mode_is_not_in_help() {
    let p = Project::new();
    p.loopx(&["--help"])
        .stdout_contains("\nUsage:\n  loopx <command>")
        .stdout_lacks("__api")
        .run();
}
