//! Waits and spend (DESIGN.md "Beyond the spec"): a script's `retry_after`
//! runs the same script again later with the same input, neither an
//! iteration nor a retry; `--max-wait` and `--max-time` bound a wait (exit
//! 75); `cost_usd` adds up and `--max-cost` budgets it.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::procs::{read_pid, wait_until};
use crate::util::*;

/// The run log's lines, parsed.
fn events(path: &Path) -> Vec<Value> {
    let text = fs::read_to_string(path).expect("read the log");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn log_lines(p: &Project) -> Vec<String> {
    if !p.exists("log") {
        return Vec::new();
    }
    p.read("log").lines().map(str::to_string).collect()
}

/// A script that logs `<name> <iteration> <waits> <stdin>` and, while
/// `LOOPX_WAITS` is below `waits`, asks to run again after `after` seconds;
/// then prints `then`.
fn waiting(name: &str, waits: u32, after: &str, then: &str) -> String {
    format!(
        "printf '%s %s %s %s\\n' {name} \"$LOOPX_ITERATION\" \"$LOOPX_WAITS\" \"$(cat)\" \
         >> \"$LOOPX_PROJECT_ROOT/log\"\n\
         if [ \"$LOOPX_WAITS\" -lt {waits} ]; then printf '{{\"retry_after\":{after}}}'; \
         else printf '%s' {}; fi\n",
        sh_quote(then)
    )
}

#[test]
fn a_wait_runs_the_same_script_again_and_is_not_an_iteration() {
    let p = Project::new();
    p.script("w", "index.sh", &waiting("index", 2, "0.1", ""));
    let out = p
        .loopx(&["run", "-n", "1", "w"])
        .stderr_contains("loopx: w:index asked to wait until ")
        .run();
    // -n 1: one iteration, run three times; LOOPX_WAITS counts the waits.
    assert_eq!(log_lines(&p), ["index 1 0 ", "index 1 1 ", "index 1 2 "]);
    assert_eq!(out.stderr.lines().count(), 2, "one line per wait\n{out}");
    for line in out.stderr.lines() {
        assert!(line.ends_with(" (in 1s); Ctrl-C to stop"), "{line}");
    }
}

#[test]
fn the_input_is_kept_across_a_wait() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        r#"printf '{"result":"payload","goto":"b"}'"#,
    )
    .script("w", "b.sh", &waiting("b", 1, "0", r#"{"stop":true}"#));
    p.loopx(&["run", "w"])
        .stderr_contains("loopx: w:b asked to wait until ")
        .run();
    assert_eq!(log_lines(&p), ["b 2 0 payload", "b 2 1 payload"]);
}

#[test]
fn a_wait_given_as_a_time_already_past_runs_the_script_again_at_once() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        &waiting("index", 1, r#""2001-01-01T00:00:00Z""#, r#"{"stop":true}"#),
    );
    p.loopx(&["run", "w"])
        .stderr_contains("asked to wait until 2001-01-01T00:00:00Z (in 0s)")
        .run();
    assert_eq!(log_lines(&p), ["index 1 0 ", "index 1 1 "]);
}

#[test]
fn stop_beats_retry_after() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        r#"printf '{"stop":true,"retry_after":3600}'"#,
    );
    p.loopx(&["run", "w"]).run();
}

#[test]
fn a_goto_beside_retry_after_is_ignored_and_verbose_notes_it() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "printf 'index %s\\n' \"$LOOPX_WAITS\" >> \"$LOOPX_PROJECT_ROOT/log\"\n\
         if [ \"$LOOPX_WAITS\" = 0 ]; then printf '{\"goto\":\"b\",\"retry_after\":0}'; \
         else printf '{\"stop\":true}'; fi\n",
    )
    .script("w", "b.sh", "echo b >> \"$LOOPX_PROJECT_ROOT/log\"\n");
    p.loopx(&["run", "w"])
        .stderr_contains("asked to wait until")
        .run();
    assert_eq!(log_lines(&p), ["index 0", "index 1"]);
    p.file("log", "");
    p.loopx(&["run", "-v", "w"])
        .stderr_contains("asked to wait until")
        .stderr_contains("note: w:index: the goto beside retry_after is ignored")
        .run();
}

#[test]
fn the_run_log_records_each_wait() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        &waiting("index", 1, "0.2", r#"{"stop":true}"#),
    );
    p.loopx(&["run", "--log", "run.jsonl", "w"])
        .stderr_contains("asked to wait until")
        .run();
    let events = events(&p.path("run.jsonl"));
    let wait: Vec<&Value> = events.iter().filter(|e| e["event"] == "wait").collect();
    assert_eq!(wait.len(), 1, "{events:?}");
    let w = wait[0];
    assert_eq!(w["iteration"], 1);
    assert_eq!(w["target"], "w:index");
    assert!(
        w["seconds"]
            .as_f64()
            .is_some_and(|s| (0.0..=0.2).contains(&s)),
        "{w}"
    );
    assert!(w["until"].as_str().is_some_and(|u| u.ends_with('Z')), "{w}");
}

/// A script that records its pid, then asks for a long wait.
fn long_wait(p: &Project) {
    p.script(
        "w",
        "index.sh",
        "echo $$ > \"$LOOPX_PROJECT_ROOT/script.pid\"\nprintf '{\"retry_after\":3600}'\n",
    );
}

#[test]
fn a_signal_during_a_wait_ends_the_run_at_once() {
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let p = Project::new();
        long_wait(&p);
        let run = p
            .loopx(&["run", "--log", "run.jsonl", "w"])
            .status(code)
            .stderr_contains("loopx: w:index asked to wait until ")
            .start();
        read_pid(&p, "script.pid");
        wait_until("the wait event", || {
            fs::read_to_string(p.path("run.jsonl")).is_ok_and(|t| t.contains("\"event\":\"wait\""))
        });
        let sent = Instant::now();
        run.signal(sig);
        run.finish();
        assert!(
            sent.elapsed() < Duration::from_secs(3),
            "signal {sig}: took {:?}",
            sent.elapsed()
        );
    }
}

#[test]
fn a_wait_longer_than_max_wait_ends_the_run_with_75_at_once() {
    let p = Project::new();
    long_wait(&p);
    let started = Instant::now();
    let out = p
        .loopx(&["run", "--max-wait", "10m", "w"])
        .status(75)
        .stderr_contains("loopx: error: w:index asked to run again at ")
        .stderr_contains("(in 1h), longer than --max-wait 10m")
        .stderr_contains("loopx resume ")
        .run();
    assert!(started.elapsed() < Duration::from_secs(5), "{out}");
    assert_eq!(out.stderr.lines().count(), 1, "{out}");
}

#[test]
fn a_run_ended_by_a_wait_logs_when_it_asked_to_run_again() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        r#"printf '{"retry_after":"2099-01-01T00:00:00Z"}'"#,
    );
    p.loopx(&["run", "--log", "run.jsonl", "w"])
        .status(75)
        .stderr_contains("asked to run again at 2099-01-01T00:00:00Z")
        .run();
    let events = events(&p.path("run.jsonl"));
    let end = events.last().expect("run_end");
    assert_eq!(end["event"], "run_end");
    assert_eq!(end["reason"], "wait");
    assert_eq!(end["exit_code"], 75);
    assert_eq!(end["resume_at"], "2099-01-01T00:00:00.000Z");
    // Each key once: serde_json would keep the last of duplicates silently.
    let last = fs::read_to_string(p.path("run.jsonl")).expect("log");
    let last = last.lines().last().expect("a line");
    assert_eq!(last.matches("\"resume_at\"").count(), 1, "{last}");
}

#[test]
fn a_wait_past_the_max_time_budget_ends_the_run_with_75_at_once() {
    let p = Project::new();
    p.script("w", "index.sh", r#"printf '{"retry_after":60}'"#);
    let started = Instant::now();
    p.loopx(&["run", "--max-time", "10s", "w"])
        .status(75)
        .stderr_contains("(in 1m), past the --max-time 10s budget")
        .run();
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn invalid_extension_values_fail_the_run_naming_script_field_and_value() {
    let cases = [
        (
            r#"{"retry_after":-1}"#,
            "invalid retry_after -1 from w:index",
        ),
        (
            r#"{"retry_after":"tomorrow"}"#,
            "invalid retry_after \"tomorrow\" from w:index",
        ),
        (
            r#"{"retry_after":true}"#,
            "invalid retry_after true from w:index",
        ),
        (
            r#"{"retry_after":null}"#,
            "invalid retry_after null from w:index",
        ),
        (r#"{"cost_usd":-0.5}"#, "invalid cost_usd -0.5 from w:index"),
        (
            r#"{"result":"r","cost_usd":"1"}"#,
            "invalid cost_usd \"1\" from w:index",
        ),
    ];
    for (stdout, message) in cases {
        let p = Project::new();
        p.script(
            "w",
            "index.sh",
            &format!("printf '%s' {}", sh_quote(stdout)),
        );
        p.loopx(&["run", "w"])
            .status(1)
            .stderr_contains(&format!("loopx: error: {message}: "))
            .run();
    }
}

#[test]
fn max_cost_stops_after_the_script_that_reached_it() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo ran >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '{\"cost_usd\":2}'\n",
    );
    p.loopx(&["run", "--max-cost", "5", "--log", "run.jsonl", "w"])
        .stderr("loopx: stopped: --max-cost 5 reached after 3 iterations ($6.00)\n")
        .run();
    assert_eq!(log_lines(&p).len(), 3);
    let events = events(&p.path("run.jsonl"));
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "script_end")
        .collect();
    assert!(ends.iter().all(|e| e["cost_usd"] == 2.0), "{ends:?}");
    let end = events.last().expect("run_end");
    assert_eq!(end["event"], "run_end");
    assert_eq!(end["reason"], "max_cost");
    assert_eq!(end["exit_code"], 0);
    assert_eq!(end["cost_usd"], 6.0);
}

#[test]
fn max_cost_below_a_cent_says_what_was_spent_not_zero() {
    // Agent runs that cost a fraction of a cent each (a cheap model, a short
    // prompt) must not read `($0.00)` when the budget stops them.
    let p = Project::new();
    p.script("w", "index.sh", "\"$LOOPX_BIN\" output --cost-usd 0.0014\n");
    p.loopx(&["run", "--max-cost", "0.004", "w"])
        .stdout("")
        .stderr("loopx: stopped: --max-cost 0.004 reached after 3 iterations ($0.0042)\n")
        .run();
}

#[test]
fn cost_is_counted_from_any_top_level_object_and_never_changes_the_result() {
    // An object with only cost_usd is plain text to §2.3: its whole text is
    // the result, and no goto happens; the cost still counts.
    let p = Project::new();
    p.script("w", "index.sh", r#"printf '{"cost_usd":0.25}'"#);
    p.loopx(&["run", "-n", "2", "--log", "run.jsonl", "w"])
        .run();
    let events = events(&p.path("run.jsonl"));
    let end = events.last().expect("run_end");
    assert_eq!(end["cost_usd"], 0.5);
}

#[test]
fn loopx_output_writes_the_extension_fields() {
    let p = Project::bare();
    p.loopx(&["output", "--retry-after", "1h30m", "--cost-usd", "0.25"])
        .stdout("{\"retry_after\":5400,\"cost_usd\":0.25}\n")
        .run();
    p.loopx(&[
        "output",
        "--result",
        "r",
        "--retry-after",
        "2026-11-25T14:00:00Z",
    ])
    .stdout("{\"result\":\"r\",\"retry_after\":\"2026-11-25T14:00:00Z\"}\n")
    .run();
    for bad in [
        &["output", "--retry-after", "soon"][..],
        &["output", "--cost-usd", "-1"],
    ] {
        p.loopx(bad)
            .status(1)
            .stdout("")
            .stderr_contains("loopx: error: ")
            .stderr_contains(bad[2])
            .run();
    }
}
