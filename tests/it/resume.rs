//! Resume (DESIGN.md "Beyond the spec"): every CLI run keeps a checkpoint;
//! a run that did not finish by stop, `-n`, `--max-time` or `--max-cost`
//! can be carried on with `loopx resume` (or `loopx run --resume`), which
//! runs again the script that was about to run or running, with its input,
//! under the same run id and iteration.

use std::fs;
use std::path::PathBuf;

use serde_json::Value;

use crate::util::procs::{alive, group_members, read_pid, wait_until, watcher_of};
use crate::util::*;

/// Where the project's runs keep their checkpoints (Project gives each
/// test its own HOME, so `~/.local/state`).
fn runs_dir(p: &Project) -> PathBuf {
    p.home().join(".local/state/loopx/runs")
}

fn checkpoints(p: &Project) -> Vec<String> {
    let Ok(entries) = fs::read_dir(runs_dir(p)) else {
        return Vec::new();
    };
    let mut v: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(".ckpt").map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

fn lines(p: &Project, rel: &str) -> Vec<String> {
    if !p.exists(rel) {
        return Vec::new();
    }
    p.read(rel).lines().map(str::to_string).collect()
}

/// `index` hands "the input" to `b` along a goto; `b` logs what it sees
/// (`b <run id> <iteration> <stdin>`), then fails while the file `broken`
/// exists, else stops.
fn handoff() -> Project {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo index >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '{\"result\":\"the input\",\"goto\":\"b\"}'\n",
    )
    .script(
        "w",
        "b.sh",
        "printf 'b %s %s %s\\n' \"$LOOPX_RUN_ID\" \"$LOOPX_ITERATION\" \"$(cat)\" >> \"$LOOPX_PROJECT_ROOT/log\"\n\
         [ -e \"$LOOPX_PROJECT_ROOT/broken\" ] && exit 3\n\
         printf '{\"stop\":true}'\n",
    )
    .file("broken", "");
    p
}

const B_FAILED: &str = "loopx: error: script w:b exited with code 3; stopping the loop\n";
/// The line after every ending that keeps the run, before its id.
const RESUME_LINE: &str = "loopx: the run can be resumed: loopx resume ";

/// A run of `handoff()` whose `b` fails: its error, then the resume line.
fn b_fails(r: Run) -> Run {
    r.status(1)
        .stdout("")
        .stderr_contains(B_FAILED)
        .stderr_contains(RESUME_LINE)
}

#[test]
fn runs_that_finish_leave_no_checkpoint() {
    let p = Project::new();
    p.script("w", "index.sh", "printf '{\"stop\":true}'");
    p.loopx(&["run", "w"]).run();
    p.script("n", "index.sh", "");
    p.loopx(&["run", "-n", "2", "n"]).run();
    assert_eq!(checkpoints(&p), Vec::<String>::new());
}

#[test]
fn a_failed_run_is_resumed_where_it_stopped() {
    let p = handoff();
    let out = b_fails(p.loopx(&["run", "--log", "run.jsonl", "w"])).run();
    let ids = checkpoints(&p);
    assert_eq!(ids.len(), 1, "a failed run stays resumable");
    // The error, then how to carry the run on.
    assert_eq!(out.stderr, format!("{B_FAILED}{RESUME_LINE}{}\n", ids[0]));
    fs::remove_file(p.path("broken")).expect("fix b");
    p.loopx(&["resume"]).run();
    let id = &ids[0];
    // b ran again with its input, same run id and iteration; index did not.
    assert_eq!(
        lines(&p, "log"),
        [
            "index".to_string(),
            format!("b {id} 2 the input"),
            format!("b {id} 2 the input"),
        ]
    );
    assert_eq!(checkpoints(&p), Vec::<String>::new(), "finished: gone");
    // The log goes on under the same run id.
    let text = p.read("run.jsonl");
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"run_resume"), "{kinds:?}");
    assert!(events.iter().all(|e| e["run_id"] == id.as_str()), "{text}");
    assert_eq!(events.last().unwrap()["reason"], "stop");
}

#[test]
fn resume_names_a_run_by_a_unique_prefix_and_options_given_replace_the_saved() {
    let p = handoff();
    b_fails(p.loopx(&["run", "w"])).run();
    let id = checkpoints(&p).remove(0);
    // Still broken, and now with a retry given to resume: two attempts.
    p.loopx(&["resume", "--retry", "1", "--retry-delay", "0", &id[..6]])
        .status(1)
        .stderr_contains("loopx: w:b failed (exit 3); retry 1 of 1 in 0s\n")
        .stderr_contains(B_FAILED)
        .stderr_contains(&format!("{RESUME_LINE}{id}\n"))
        .run();
    assert_eq!(lines(&p, "log").len(), 4, "index, b, then b twice");
    p.loopx(&["resume", "ffffffffffffffff"])
        .status(1)
        .stderr_contains("no resumable run 'ffffffffffffffff'")
        .stderr_contains(&id)
        .run();
}

#[test]
fn nothing_to_resume_says_so() {
    let p = Project::new();
    p.loopx(&["resume"])
        .status(1)
        .stderr_contains("no resumable run in ")
        .run();
}

#[test]
fn a_run_killed_with_sigkill_is_resumed_once_its_scripts_are_gone() {
    let p = handoff();
    fs::remove_file(p.path("broken")).expect("b succeeds");
    // b waits for `go` the first time, recording its pid.
    p.script(
        "w",
        "b.sh",
        "printf 'b %s %s %s\\n' \"$LOOPX_RUN_ID\" \"$LOOPX_ITERATION\" \"$(cat)\" >> \"$LOOPX_PROJECT_ROOT/log\"\n\
         if [ ! -e \"$LOOPX_PROJECT_ROOT/once\" ]; then\n\
           touch \"$LOOPX_PROJECT_ROOT/once\"; echo $$ > \"$LOOPX_PROJECT_ROOT/b.pid\"\n\
           while :; do sleep 0.05; done\n\
         fi\n\
         printf '{\"stop\":true}'\n",
    );
    let run = p.loopx(&["run", "w"]).signal(libc::SIGKILL).start();
    let pgid = read_pid(&p, "b.pid");
    // Loopx and its watcher both die at once (an OOM kill of both, say),
    // so nothing ends the script.
    let watcher = watcher_of(run.pid()).expect("loopx has a watcher");
    // SAFETY: killing the watcher of this test's own run.
    unsafe { libc::kill(watcher, libc::SIGKILL) };
    run.signal(libc::SIGKILL);
    wait_until("loopx is gone", || {
        fs::read_to_string(format!("/proc/{}/stat", run.pid()))
            .map_or(true, |st| st.contains(") Z "))
    });
    // loopx is gone, its script runs on (holding loopx's output pipes):
    // resume refuses, naming the group.
    p.loopx(&["resume"])
        .status(1)
        .stderr_contains(&format!("process group {pgid}"))
        .run();
    // SAFETY: ending the group this test's run left behind.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    wait_until("the old script group is gone", || {
        group_members(pgid).iter().all(|&pid| !alive(pid))
    });
    run.finish();
    p.loopx(&["resume"]).run();
    let log = lines(&p, "log");
    assert_eq!(log.len(), 3, "{log:?}");
    assert_eq!(log[1], log[2], "b again, same run id, iteration and input");
    assert!(log[2].ends_with(" 2 the input"), "{log:?}");
    assert_eq!(checkpoints(&p), Vec::<String>::new());
}

#[test]
fn run_resume_starts_a_new_run_when_there_is_none_and_resumes_one_otherwise() {
    let p = handoff();
    b_fails(p.loopx(&["run", "--resume", "w"])).run();
    let first = checkpoints(&p);
    assert_eq!(first.len(), 1);
    fs::remove_file(p.path("broken")).expect("fix b");
    p.loopx(&["run", "--resume", "w"]).run();
    let log = lines(&p, "log");
    assert_eq!(log.len(), 3, "resumed at b, not started again: {log:?}");
    assert!(log[2].starts_with(&format!("b {} 2", first[0])), "{log:?}");
    assert_eq!(checkpoints(&p), Vec::<String>::new());
}

#[test]
fn status_lists_resumable_runs_with_the_command_to_resume() {
    let p = handoff();
    b_fails(p.loopx(&["run", "w"])).run();
    let id = checkpoints(&p).remove(0);
    p.loopx(&["status"])
        .stdout_contains(&format!("loopx resume {id}"))
        .stdout_contains("script_failed")
        .run();
    let json = p
        .loopx(&["status", "--json"])
        .stdout_any("the JSON, parsed below")
        .run();
    let json: Value = serde_json::from_str(&json.stdout).expect("status --json");
    let resumable: Vec<&Value> = json
        .as_array()
        .expect("an array of runs")
        .iter()
        .filter(|r| r["state"] == "resumable")
        .collect();
    assert_eq!(resumable.len(), 1, "{json}");
    assert_eq!(resumable[0]["run_id"], id.as_str());
    assert_eq!(resumable[0]["target"], "w");
    assert_eq!(resumable[0]["reason"], "script_failed");
}

#[test]
fn a_wait_that_outlasts_the_budget_stays_resumable_until_the_same_time() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "printf 'index %s\\n' \"$LOOPX_WAITS\" >> \"$LOOPX_PROJECT_ROOT/log\"\n\
         if [ \"$LOOPX_WAITS\" = 0 ]; then printf '{\"retry_after\":2}'; else printf '{\"stop\":true}'; fi\n",
    );
    p.loopx(&["run", "--max-wait", "1s", "w"])
        .status(75)
        .stderr_contains("longer than --max-wait 1s")
        .run();
    assert_eq!(checkpoints(&p).len(), 1);
    // Resumed with a longer --max-wait: it waits out the saved deadline.
    p.loopx(&["resume", "--max-wait", "1m"])
        .stderr_contains("w:index asked to wait until")
        .run();
    assert_eq!(lines(&p, "log"), ["index 0", "index 1"]);
}

#[test]
fn resume_refuses_while_a_process_of_the_run_lives_even_one_without_the_run_id() {
    // A failed run's script left a background job that dropped
    // LOOPX_RUN_ID from its environment. It still holds the run's lock (an
    // inherited descriptor), so resume refuses, naming its group, rather
    // than run the same step a second time beside it.
    // (In its second script: a run that fails in its first is not kept.)
    let p = Project::new();
    p.script("w", "index.sh", "\"$LOOPX_BIN\" output --goto b\n");
    p.script(
        "w",
        "b.sh",
        "if [ ! -e \"$LOOPX_PROJECT_ROOT/once\" ]; then\n\
           touch \"$LOOPX_PROJECT_ROOT/once\"\n\
           env -u LOOPX_RUN_ID setsid sleep 1000 </dev/null >/dev/null 2>&1 &\n\
           echo $! > \"$LOOPX_PROJECT_ROOT/bg.pid\"\n\
           exit 2\n\
         fi\n\
         printf '{\"stop\":true}'\n",
    );
    p.loopx(&["run", "w"])
        .status(1)
        .stdout("")
        .stderr_contains("w:b")
        .stderr_contains("loopx: the run can be resumed: loopx resume ")
        .run();
    let bg = read_pid(&p, "bg.pid");
    let _end = KillOnDrop(bg);
    wait_until("the job dropped the run id", || {
        fs::read(format!("/proc/{bg}/environ"))
            .is_ok_and(|e| !e.windows(12).any(|w| w == b"LOOPX_RUN_ID"))
    });
    p.loopx(&["resume"])
        .status(1)
        .stdout("")
        .stderr_contains(&format!("process group {bg}"))
        .run();
    // SAFETY: ending the job this test's run left behind.
    unsafe { libc::kill(bg, libc::SIGKILL) };
    wait_until("the job is gone", || !alive(bg));
    p.loopx(&["resume"]).stdout("").run();
}

/// Kills a process the test's run left behind when the test ends, passed
/// or failed.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if alive(self.0) {
            // SAFETY: signalling a process this test's script started.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
}

/// docs/agent.md "Resuming": the agent settings a run was started with
/// (`AGENT`, `AGENT_*`, never secrets) are recorded with it; a resume from
/// a shell that does not set them gets them back, and one that sets them
/// again uses the new values, saying which changed.
#[test]
fn a_resume_keeps_the_agent_settings_the_run_was_started_with() {
    let p = handoff();
    p.script(
        "w",
        "b.sh",
        "printf '%s %s %s\\n' \"${AGENT-unset}\" \"${AGENT_IDLE_TIMEOUT-unset}\" \"${AGENT_API_KEY-unset}\" >> \"$LOOPX_PROJECT_ROOT/seen\"\n\
         [ -e \"$LOOPX_PROJECT_ROOT/broken\" ] && exit 3\n\
         printf '{\"stop\":true}'\n",
    );
    b_fails(p.loopx(&["run", "w"]))
        .env("AGENT", "gemini")
        .env("AGENT_IDLE_TIMEOUT", "5m")
        .env("AGENT_API_KEY", "sk-do-not-keep")
        .run();
    let id = &checkpoints(&p)[0];
    let kept = fs::read_to_string(runs_dir(&p).join(format!("{id}.ckpt"))).expect("checkpoint");
    assert!(kept.contains(r#""AGENT":"gemini""#), "{kept}");
    assert!(
        !kept.contains("sk-do-not-keep"),
        "a secret was recorded: {kept}"
    );
    // From a shell without them: given back, and said.
    b_fails(p.loopx(&["resume"]))
        .env_remove("AGENT")
        .stderr_contains(
            "loopx: resumed with the agent settings the run was started with: \
             AGENT=gemini, AGENT_IDLE_TIMEOUT=5m (set them to change them)\n",
        )
        .run();
    // Set again: the new value wins, and the change is said.
    fs::remove_file(p.path("broken")).expect("fix b");
    p.loopx(&["resume"])
        .env("AGENT", "codex")
        .stderr_contains(
            "loopx: AGENT is 'codex' now ('gemini' when the run started): the new value is used\n",
        )
        .stderr_contains("AGENT_IDLE_TIMEOUT=5m")
        .run();
    assert_eq!(
        lines(&p, "seen"),
        [
            "gemini 5m sk-do-not-keep",
            "gemini 5m unset",
            "codex 5m unset"
        ]
    );
}

/// The same for a setting from the global env file: removed from it
/// before the resume, it still holds for the run that started with it.
#[test]
fn a_resume_keeps_an_agent_setting_from_the_global_env_file() {
    let p = handoff();
    p.script(
        "w",
        "b.sh",
        "echo \"${AGENT-unset}\" >> \"$LOOPX_PROJECT_ROOT/seen\"\n\
         [ -e \"$LOOPX_PROJECT_ROOT/broken\" ] && exit 3\n\
         printf '{\"stop\":true}'\n",
    );
    p.loopx(&["env", "set", "AGENT", "gemini"]).run();
    b_fails(p.loopx(&["run", "w"])).run();
    p.loopx(&["env", "remove", "AGENT"]).run();
    fs::remove_file(p.path("broken")).expect("fix b");
    p.loopx(&["resume"])
        .stderr_contains("resumed with the agent settings the run was started with: AGENT=gemini")
        .run();
    assert_eq!(lines(&p, "seen"), ["gemini", "gemini"]);
}
