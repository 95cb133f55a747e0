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
