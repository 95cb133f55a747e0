//! `loopx tail` and the run's kept event lines (DESIGN.md "Beyond the
//! spec": watching; docs/watching.md, docs/reliability.md).

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::procs::*;
use crate::util::*;

fn runs_dir(home: &Path) -> PathBuf {
    home.join(".local/state/loopx/runs")
}

/// The ids of the runs whose lines are kept under `home`.
fn kept_ids(home: &Path) -> Vec<String> {
    let mut ids: Vec<String> = names(&runs_dir(home))
        .into_iter()
        .filter_map(|n| n.strip_suffix(".events.jsonl").map(str::to_string))
        .collect();
    ids.sort();
    ids
}

fn only_id(p: &Project) -> String {
    let ids = kept_ids(p.home());
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0].clone()
}

/// Waits until the tail `pid` has a run's kept lines open: it follows.
fn wait_following(pid: i32) {
    let fds = PathBuf::from(format!("/proc/{pid}/fd"));
    wait_until("tail opens the run's lines", || {
        fs::read_dir(&fds).is_ok_and(|d| {
            d.flatten().any(|e| {
                fs::read_link(e.path())
                    .is_ok_and(|t| t.to_string_lossy().ends_with(".events.jsonl"))
            })
        })
    });
}

/// A workflow that counts to 3 with goto, then stops.
fn counter(p: &Project) {
    p.script(
        "w",
        "index.sh",
        "n=$(cat); n=${n:-0}\nif [ \"$n\" -ge 2 ]; then printf '{\"stop\":true}'; \
         else printf '{\"goto\":\"index\",\"result\":\"%s\"}' $((n+1)); fi\n",
    );
}

#[test]
fn tail_of_an_ended_run_prints_its_events_and_exits_with_its_code() {
    let p = Project::new();
    counter(&p);
    p.loopx(&["run", "w"]).run();
    let out = p
        .loopx(&["tail"])
        .stdout_contains("[1] w:index started")
        .stdout_contains("[1] w:index exit 0 in ")
        .stdout_contains("→ goto index")
        .stdout_contains("[3] w:index exit 0 in ")
        .stdout_contains("→ stop")
        .stdout_contains("run ended: stop after 3 iterations")
        .stdout_contains("(exit 0)")
        .run();
    assert_eq!(out.stdout.lines().count(), 8, "{out}");
    assert!(out
        .stdout
        .lines()
        .next()
        .is_some_and(|l| l.contains("started: w in")));
    // A failed run: its code, and how to resume it (it failed past its
    // first iteration, so it is kept).
    p.script(
        "f",
        "index.sh",
        "[ -n \"$(cat)\" ] && exit 3\nprintf '{\"goto\":\"index\",\"result\":\"again\"}'\n",
    );
    p.loopx(&["run", "f"])
        .status(1)
        .stderr_contains("exited with code 3")
        .run();
    p.loopx(&["tail"])
        .status(1)
        .stdout_contains("[2] f:index exit 3 in ")
        .stdout_contains("run ended: script_failed after 2 iterations")
        .stderr_contains("loopx: resume it with: loopx resume ")
        .run();
}

#[test]
fn tail_json_prints_the_run_log_lines() {
    let p = Project::new();
    counter(&p);
    p.loopx(&["run", "--log", "log.jsonl", "w"]).run();
    let id = only_id(&p);
    p.loopx(&["tail", "--json", &id])
        .stdout(&p.read("log.jsonl"))
        .run();
    // A unique prefix is enough.
    p.loopx(&["tail", "--json", &id[..6]])
        .stdout(&p.read("log.jsonl"))
        .run();
}

#[test]
fn tail_follows_a_live_run_until_it_ends_with_its_code() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "[ -z \"$(cat)\" ] && printf '{\"goto\":\"index\",\"result\":\"again\"}' && exit 0\n\
         echo x > \"$LOOPX_PROJECT_ROOT/started\"\n\
         while [ ! -e \"$LOOPX_PROJECT_ROOT/go\" ]; do sleep 0.05; done\nexit 4\n",
    );
    let run = p
        .loopx(&["run", "w"])
        .status(1)
        .stderr_contains("exited with code 4")
        .start();
    wait_for_file(&p.path("started"));
    let id = only_id(&p);
    let tail = p
        .loopx(&["tail"])
        .status(1)
        .stdout_contains("[2] w:index started")
        .stdout_contains("[2] w:index exit 4 in ")
        .stdout_contains("run ended: script_failed")
        .stderr(&format!("loopx: resume it with: loopx resume {id}\n"))
        .start();
    // tail has the run's file open: it is following.
    wait_following(tail.pid());
    fs::write(p.path("go"), "").expect("go");
    run.finish();
    tail.finish();
}

#[test]
fn tail_of_a_waiting_run_says_when_and_how_to_resume() {
    let p = Project::new();
    p.script("w", "index.sh", "printf '{\"retry_after\":5000}'\n");
    p.loopx(&["run", "--max-wait", "1s", "w"])
        .status(75)
        .stderr_contains("longer than --max-wait")
        .run();
    let id = only_id(&p);
    p.loopx(&["tail"])
        .status(75)
        .stdout_contains("run ended: wait after 1 iteration")
        .stdout_contains("(exit 75)")
        .stderr_contains(&format!("resume it then with: loopx resume {id}"))
        .run();
}

#[test]
fn an_unknown_run_is_a_clear_error() {
    let p = Project::new();
    p.loopx(&["tail"])
        .status(1)
        .stderr_contains("loopx: error: no run of ")
        .run();
    counter(&p);
    p.loopx(&["run", "w"]).run();
    p.loopx(&["tail", "0123456789abcdef"])
        .status(1)
        .stderr_contains("loopx: error: no run '0123456789abcdef' is kept in ")
        .run();
    p.loopx(&["tail", "a", "b"])
        .usage_error("takes one run id", "loopx tail --help")
        .run();
}

#[test]
fn a_run_of_another_project_is_not_picked_by_default() {
    let p = Project::new();
    let other = Project::new();
    counter(&p);
    other.script("elsewhere", "index.sh", "printf '{\"stop\":true}'\n");
    let state = p.home().join(".local/state");
    p.loopx(&["run", "w"]).run();
    // The other project's run is later, in the same state directory.
    other
        .loopx(&["run", "elsewhere"])
        .env("XDG_STATE_HOME", &state)
        .run();
    p.loopx(&["tail"])
        .stdout_contains("[1] w:index started")
        .stdout_lacks("elsewhere")
        .run();
    // Named, it is shown from anywhere.
    let ids = kept_ids(p.home());
    assert_eq!(ids.len(), 2, "{ids:?}");
    let theirs = ids
        .iter()
        .find(|id| {
            fs::read_to_string(runs_dir(p.home()).join(format!("{id}.events.jsonl")))
                .is_ok_and(|t| t.contains("elsewhere"))
        })
        .expect("the other run");
    p.loopx(&["tail", theirs])
        .stdout_contains("[1] elsewhere:index exit 0")
        .run();
}

#[test]
fn the_kept_lines_are_bounded_and_keep_the_newest() {
    let p = Project::new();
    p.script("w", "index.sh", "echo more\n");
    p.loopx(&["run", "-n", "60", "w"])
        .env("LOOPX_EVENTS_MAX_BYTES", "4096")
        .run();
    let id = only_id(&p);
    let runs = runs_dir(p.home());
    let now = fs::read_to_string(runs.join(format!("{id}.events.jsonl"))).expect("read");
    let older = fs::read_to_string(runs.join(format!("{id}.events.jsonl.1"))).expect("read .1");
    assert!(
        now.len() <= 4096 && older.len() <= 4096,
        "{} {}",
        now.len(),
        older.len()
    );
    assert!(now.contains("\"event\":\"run_end\""), "{now}");
    assert!(!older.contains("\"event\":\"run_start\""), "{older}");
    p.loopx(&["tail"])
        .stdout_contains("[60] w:index exit 0")
        .stdout_contains("run ended: max_iterations after 60 iterations")
        .stdout_lacks("[1] w:index started")
        .run();
}

/// A run that fails in its second iteration (resumable), then succeeds
/// on resume.
fn failed_once(p: &Project) -> String {
    p.script(
        "w",
        "index.sh",
        "if [ -e \"$LOOPX_PROJECT_ROOT/ok\" ]; then printf '{\"stop\":true}'\n\
         elif [ -z \"$(cat)\" ]; then printf '{\"goto\":\"index\",\"result\":\"again\"}'\n\
         else exit 3; fi\n",
    );
    p.loopx(&["run", "w"])
        .status(1)
        .stderr_contains("exited with code 3")
        .run();
    p.file("ok", "");
    only_id(p)
}

#[test]
fn kept_lines_that_are_a_link_are_neither_written_through_nor_read() {
    let p = Project::new();
    let id = failed_once(&p);
    let kept = runs_dir(p.home()).join(format!("{id}.events.jsonl"));
    fs::remove_file(&kept).expect("rm");
    p.file("mine", "my own file\n");
    std::os::unix::fs::symlink(p.path("mine"), &kept).expect("symlink");
    p.loopx(&["resume"])
        .stderr_contains("loopx: warning: not keeping this run's event lines in ")
        .stderr_contains("it is a symbolic link")
        .run();
    assert_eq!(p.read("mine"), "my own file\n");
    p.loopx(&["tail", &id])
        .status(1)
        .stderr(&format!(
            "loopx: error: cannot read the events of run {id}: it is a symbolic link\n"
        ))
        .run();
}

#[test]
fn kept_lines_of_another_user_are_not_read() {
    if !is_root() {
        skip(
            "kept_lines_of_another_user_are_not_read",
            "needs root to chown",
        );
        return;
    }
    let p = Project::new();
    let id = failed_once(&p);
    let kept = runs_dir(p.home()).join(format!("{id}.events.jsonl"));
    std::os::unix::fs::chown(&kept, Some(65534), None).expect("chown");
    p.loopx(&["tail", &id])
        .status(1)
        .stderr_contains("it belongs to uid 65534, not to you")
        .run();
}

#[test]
fn a_resumed_run_goes_on_in_the_same_lines() {
    let p = Project::new();
    let id = failed_once(&p);
    p.loopx(&["resume"]).run();
    p.loopx(&["tail", &id])
        .stdout_contains("run ended: script_failed")
        .stdout_contains(&format!("run {id} resumed at iteration 2"))
        .stdout_contains("run ended: stop")
        .run();
}

/// issue 33: `loopx tail` follows a run while it is resumed: it starts
/// with what the run did before, and ends with the resumed run's end.
#[test]
fn tail_follows_a_run_while_it_is_resumed() {
    let p = Project::new();
    let id = failed_once(&p);
    // The resumed script holds until told to go on.
    p.script(
        "w",
        "index.sh",
        "echo x > \"$LOOPX_PROJECT_ROOT/started\"\n\
         while [ ! -e \"$LOOPX_PROJECT_ROOT/go\" ]; do sleep 0.05; done\n\
         printf '{\"stop\":true}'\n",
    );
    let resumed = p.loopx(&["resume"]).start();
    wait_for_file(&p.path("started"));
    let tail = p
        .loopx(&["tail"])
        .stdout_contains("run ended: script_failed")
        .stdout_contains(&format!("run {id} resumed at iteration 2"))
        .stdout_contains("run ended: stop")
        .start();
    wait_following(tail.pid());
    fs::write(p.path("go"), "").expect("go");
    resumed.finish();
    tail.finish();
}

#[test]
fn the_agents_progress_inside_a_run_is_shown() {
    let p = Project::new();
    write_executable(
        &p.path("bin/claude"),
        &format!(
            "#!/bin/bash\ncat >/dev/null\ncat {}/tests/data/agent/recorded/claude/ok.jsonl\n",
            env!("CARGO_MANIFEST_DIR")
        ),
    );
    p.script(
        "w",
        "index.sh",
        "echo 'do it' | \"$LOOPX_BIN\" agent --output 2>/dev/null\n",
    );
    let path = format!(
        "{}:{}",
        p.path("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    p.loopx(&["run", "-n", "1", "w"]).env("PATH", &path).run();
    p.loopx(&["tail"])
        .stdout_contains("  agent w: Write ")
        .stdout_contains("  agent w: Wrote hello.txt.")
        .stdout_contains("cost $0.0016")
        .stdout_contains("run ended: max_iterations")
        .run();
}

#[test]
fn a_run_killed_without_its_last_line_ends_the_tail_with_1() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo $$ > \"$LOOPX_PROJECT_ROOT/pid\"\nsleep 30\n",
    );
    let run = p.loopx(&["run", "w"]).signal(libc::SIGKILL).start();
    let script = read_pid(&p, "pid");
    run.signal(libc::SIGKILL);
    run.finish();
    // Its watcher ends the script.
    wait_until("the script is gone", || !alive(script));
    p.loopx(&["tail"])
        .status(1)
        .stdout_contains("[1] w:index started")
        .stderr_contains("ended without saying how")
        .run();
}
