//! Event hooks (docs/watching.md "Hooks"): `--on-event` / `LOOPX_ON_EVENT`
//! run a shell command with one JSON event on stdin, once per event; best
//! effort, bounded, never changing the run's exit code nor holding up a
//! signal.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::procs::{alive, read_pid, wait_until};
use crate::util::*;

/// A hook that appends `<event> <exit code>` to `hooks.txt` and the JSON it
/// got to `events.jsonl`.
const RECORD: &str = "printf '%s %s\\n' \"$LOOPX_EVENT\" \"${LOOPX_EXIT_CODE-}\" >> hooks.txt; \
                      cat >> events.jsonl";

/// The hook lines, and the events' JSON, checked against them.
fn recorded(p: &Project) -> Vec<String> {
    let lines: Vec<String> = p.read("hooks.txt").lines().map(str::to_string).collect();
    let events: Vec<Value> = p
        .read("events.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), events.len(), "{lines:?} {events:?}");
    for (line, ev) in lines.iter().zip(&events) {
        assert_eq!(ev["v"], 1, "{ev}");
        assert_eq!(
            Some(line.split(' ').next().unwrap_or("")),
            ev["event"].as_str()
        );
        assert_eq!(ev["run_id"].as_str().map(str::len), Some(16), "{ev}");
    }
    lines
}

#[test]
fn each_event_runs_the_hook_exactly_once() {
    // A wait, a failed attempt and its retry, then stop.
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "if [ \"$LOOPX_WAITS\" = 0 ]; then printf '{\"retry_after\":0}'; \
         elif [ \"$LOOPX_ATTEMPT\" = 1 ]; then exit 3; \
         else printf '{\"stop\":true}'; fi\n",
    );
    p.loopx(&[
        "run",
        "--retry",
        "1",
        "--retry-delay",
        "0",
        "--on-event",
        RECORD,
        "w",
    ])
    .stderr_contains("retry 1 of 1")
    .stderr_any("the wait and retry notices")
    .run();
    assert_eq!(recorded(&p), ["wait ", "script_failed 3", "run_end 0"]);
    let events = p.read("events.jsonl");
    let failed: Value = serde_json::from_str(events.lines().nth(1).unwrap_or("")).unwrap();
    assert_eq!(failed["target"], "w:index");
    assert_eq!(failed["exit_code"], 3);
    let end: Value = serde_json::from_str(events.lines().nth(2).unwrap_or("")).unwrap();
    assert_eq!(
        (&end["reason"], &end["exit_code"]),
        (&"stop".into(), &0.into())
    );

    // A budget reached, from LOOPX_ON_EVENT.
    let p = Project::new();
    p.script("w", "index.sh", "printf '{\"cost_usd\":1}'\n");
    p.loopx(&["run", "--max-cost", "1", "w"])
        .env("LOOPX_ON_EVENT", RECORD)
        .stderr_contains("stopped: --max-cost 1 reached")
        .run();
    assert_eq!(recorded(&p), ["budget 0", "run_end 0"]);

    // A stop that can be resumed: a wait past --max-wait (exit 75).
    let p = Project::new();
    p.script("w", "index.sh", "printf '{\"retry_after\":3600}'\n");
    p.loopx(&["run", "--max-wait", "1m", "--on-event", RECORD, "w"])
        .status(75)
        .stderr_contains("can be resumed")
        .run();
    assert_eq!(recorded(&p), ["resumable 75", "run_end 75"]);
    // The option wins over the variable.
    let p = Project::new();
    p.script("w", "index.sh", "exit 2\n");
    p.loopx(&["run", "--on-event", RECORD, "w"])
        .env("LOOPX_ON_EVENT", "echo wrong >> hooks.txt")
        .status(1)
        .stderr_contains("exited with code 2")
        .run();
    assert_eq!(recorded(&p), ["script_failed 2", "run_end 1"]);
}

#[test]
fn a_failing_hook_is_noted_once_and_changes_nothing() {
    let p = Project::new();
    p.script("w", "index.sh", "exit 3\n");
    let out = p
        .loopx(&["run", "--retry", "2", "--retry-delay", "0", "w"])
        .env("LOOPX_ON_EVENT", "echo ran >> hooks.txt; exit 4")
        .status(1)
        .stderr_contains("the event hook (script_failed) failed (exit 4); the run goes on")
        .stderr_contains("exited with code 3")
        .stderr_any("retry notices")
        .run();
    assert_eq!(out.stderr.matches("event hook").count(), 1, "{out}");
    // Three failed attempts and the end: four hook runs.
    assert_eq!(p.read("hooks.txt").lines().count(), 4);
}

#[test]
fn a_hanging_hook_is_ended_in_bounded_time() {
    let p = Project::new();
    p.script("w", "index.sh", "printf '{\"stop\":true}'\n");
    let hook = "echo $$ > hook.pid; sleep 600 & echo $! > sleep.pid; wait";
    let t0 = Instant::now();
    p.loopx(&["run", "--on-event", hook, "w"])
        .stderr_contains("the event hook (run_end) took longer than 10s and was ended")
        .run();
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(20), "{took:?}");
    // Its whole group went: the sleep too.
    for f in ["hook.pid", "sleep.pid"] {
        let pid = read_pid(&p, f);
        wait_until("the hook's processes end", || !alive(pid));
    }
}

#[test]
fn a_signal_ends_a_running_hook_and_wins() {
    // The hook of the wait hangs; SIGTERM ends it and the run at once.
    let p = Project::new();
    p.script("w", "index.sh", "printf '{\"retry_after\":600}'\n");
    let hook = "[ \"$LOOPX_EVENT\" = wait ] || exit 0; echo $$ > hook.pid; exec sleep 600";
    let run = p
        .loopx(&["run", "--on-event", hook, "w"])
        .status(143)
        .stderr_any("the wait notice")
        .start();
    let pid = {
        wait_until("the hook starts", || {
            p.exists("hook.pid") && !p.read("hook.pid").is_empty()
        });
        read_pid(&p, "hook.pid")
    };
    let t0 = Instant::now();
    run.signal(libc::SIGTERM);
    let out = run.finish();
    assert!(t0.elapsed() < Duration::from_secs(5), "{out}");
    assert!(!alive(pid), "{out}");
    assert!(!out.stderr.contains("event hook"), "{out}");
}

/// The hook commands of docs/watching.md's recipes, in order.
fn recipes() -> Vec<String> {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/watching.md"),
    )
    .expect("docs/watching.md");
    let hooks = doc.split("## Hooks").nth(1).unwrap_or("");
    let hooks = hooks.split("\n## ").next().unwrap_or("");
    hooks
        .split("--on-event '")
        .skip(1)
        .filter_map(|rest| rest.split_once('\'').map(|(cmd, _)| cmd.to_string()))
        .collect()
}

#[test]
fn the_recipes_in_watching_md_work_as_written() {
    let recipes = recipes();
    assert_eq!(recipes.len(), 3, "{recipes:?}");
    // Stand-ins for curl, notify-send and sendmail: each appends its
    // arguments and stdin to <name>.txt in the project.
    let p = Project::new();
    for tool in ["curl", "notify-send", "sendmail"] {
        write_executable(
            &p.path(&format!("bin/{tool}")),
            &format!("#!/bin/sh\n{{ printf '%s|' \"$@\"; echo; cat; }} >> \"$OUT/{tool}.txt\"\n"),
        );
    }
    p.script("ralph", "index.sh", "exit 2\n");
    let path = format!(
        "{}:{}",
        p.path("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for recipe in &recipes {
        p.loopx(&["run", "--on-event", recipe, "ralph"])
            .env("PATH", &path)
            .env("OUT", p.root())
            .env("WEBHOOK_URL", "https://hooks.example.com/loopx")
            .status(1)
            .stderr_contains("exited with code 2")
            .run();
    }
    let curl = p.read("curl.txt");
    let lines: Vec<&str> = curl.lines().collect();
    assert_eq!(lines.len(), 4, "{curl}");
    assert!(lines[0].ends_with("|--data-binary|@-|https://hooks.example.com/loopx|"));
    assert!(
        lines[1].starts_with("{\"v\":1,\"event\":\"script_failed\""),
        "{curl}"
    );
    assert!(
        lines[3].starts_with("{\"v\":1,\"event\":\"run_end\""),
        "{curl}"
    );
    // Once, at the end (its stdin, the event, follows its arguments).
    let notify = p.read("notify-send.txt");
    let args = notify.lines().next().unwrap_or("");
    assert!(args.starts_with("loopx: run ended|run "), "{notify}");
    assert!(args.ends_with(" exited with 1|"), "{notify}");
    assert_eq!(notify.matches("loopx: run ended").count(), 1, "{notify}");
    let mail = p.read("sendmail.txt");
    assert!(
        mail.starts_with("-t|\nTo: me@example.com\nSubject: loopx script_failed (run "),
        "{mail}"
    );
    assert_eq!(mail.matches("\n\n{\"v\":1,\"event\":").count(), 2, "{mail}");
}
