//! Seeing what a loop did and does (DESIGN.md "Beyond the spec"): the JSONL
//! run log (`--log`, `LOOPX_LOG`), `loopx status`, and `--verbose`.

use crate::util::procs;
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::*;
use procs::*;

/// The log's lines, each parsed (a torn line fails the test).
fn events(path: &Path) -> Vec<Value> {
    let text = fs::read_to_string(path).expect("read the log");
    assert!(text.ends_with('\n'), "the log ends with a whole line");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect()
}

/// RFC 3339 UTC with milliseconds: `2026-11-24T17:30:05.123Z`.
fn is_rfc3339_ms(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, &c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            19 => c == b'.',
            23 => c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// `index` hands a result to `check` with goto; `check` fails its first
/// attempt (exit 2), then stops with a result.
fn goto_retry_stop() -> Project {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "$LOOPX_BIN output --result \"to check\" --goto check\n",
    )
    .script(
        "w",
        "check.sh",
        "cat >/dev/null\n[ \"$LOOPX_ATTEMPT\" = 1 ] && exit 2\n\
         $LOOPX_BIN output --result \"checked\" --stop\n",
    );
    p
}

// ---------------------------------------------------------------- --log

#[test]
fn run_log_records_every_event_field_by_field() {
    let p = goto_retry_stop();
    p.loopx(&[
        "run",
        "--log",
        "run.jsonl",
        "--retry",
        "1",
        "--retry-delay",
        "0",
        "w",
    ])
    .stderr("loopx: w:check failed (exit 2); retry 1 of 1 in 0s\n")
    .run();
    let log = p.path("run.jsonl");
    assert_eq!(
        fs::metadata(&log).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let ev = events(&log);
    assert_eq!(
        kinds(&ev),
        [
            "run_start",
            "script_start",
            "script_end",
            "script_start",
            "script_end",
            "retry",
            "script_start",
            "script_end",
            "run_end"
        ]
    );
    let run_id = ev[0]["run_id"].as_str().unwrap();
    assert_eq!(run_id.len(), 16);
    for e in &ev {
        assert_eq!(e["v"], 1, "{e}");
        assert_eq!(e["run_id"], run_id, "{e}");
        assert!(is_rfc3339_ms(e["time"].as_str().unwrap()), "{e}");
    }
    let start = &ev[0];
    assert_eq!(start["version"], env!("CARGO_PKG_VERSION"));
    assert!(start["pid"].as_u64().unwrap() > 0);
    assert_eq!(start["root"], p.root().to_str().unwrap());
    assert_eq!(start["target"], "w");
    assert_eq!(
        start["options"],
        serde_json::json!({"max_iterations": null, "env_file": null, "timeout_ms": null,
            "max_time_ms": null, "retry": 1, "retry_delay_ms": 0})
    );
    let targets: Vec<(u64, u64, &str)> = ev
        .iter()
        .filter(|e| e["event"] == "script_start")
        .map(|e| {
            (
                e["iteration"].as_u64().unwrap(),
                e["attempt"].as_u64().unwrap(),
                e["target"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        targets,
        [(1, 1, "w:index"), (2, 1, "w:check"), (2, 2, "w:check")]
    );
    let index_end = &ev[2];
    assert_eq!(index_end["exit_code"], 0);
    assert_eq!(index_end["signal"], Value::Null);
    assert!(index_end["duration_ms"].is_u64());
    assert_eq!(
        index_end["stdout_bytes"],
        r#"{"result":"to check","goto":"check"}"#.len() + 1
    );
    assert_eq!(
        index_end["output"],
        serde_json::json!({"structured": true, "stop": false, "goto": "check",
            "result_bytes": 8, "result_head": "to check"})
    );
    let failed = &ev[4];
    assert_eq!(
        (failed["exit_code"].as_i64(), failed["attempt"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(
        failed["output"],
        Value::Null,
        "a failed run's stdout is not parsed (§7.2)"
    );
    assert_eq!(ev[5]["why"], "failed (exit 2)");
    assert_eq!(ev[5]["delay_ms"], 0);
    assert_eq!(ev[7]["output"]["stop"], true);
    let end = &ev[8];
    assert_eq!(end["reason"], "stop");
    assert_eq!(end["exit_code"], 0);
    assert_eq!(end["iterations"], 2);
    assert!(end["duration_ms"].is_u64());
    assert_eq!(end["error"], Value::Null);
}

#[test]
fn result_head_is_the_first_200_characters() {
    let p = Project::new();
    let long = "é".repeat(300);
    p.script("w", "index.sh", &format!("printf '%s' '{long}'\n"));
    p.loopx(&["run", "-n", "1", "--log", "log", "w"]).run();
    let ev = events(&p.path("log"));
    let out = &ev[2]["output"];
    assert_eq!(out["structured"], false);
    assert_eq!(out["result_bytes"], long.len());
    assert_eq!(out["result_head"], "é".repeat(200));
}

/// Each way a run ends, as run_end says it.
#[test]
fn run_end_gives_the_reason_and_exit_code() {
    let p = Project::new();
    p.script("w", "index.sh", "")
        .script("w", "stop.sh", "$LOOPX_BIN output --stop\n")
        .script("w", "fail.sh", "exit 5\n")
        .script("w", "badgoto.sh", "$LOOPX_BIN output --goto nowhere\n")
        .script("w", "slow.sh", "sleep 0.3\n")
        .script("w", "hang.sh", "sleep 30\n");
    for (args, reason, code, stderr) in [
        (&["w:stop"][..], "stop", 0, ""),
        (&["-n", "2", "w"], "max_iterations", 0, ""),
        (&["-n", "0", "w"], "max_iterations", 0, ""),
        (
            &["--max-time", "200ms", "w:slow"],
            "max_time",
            0,
            "loopx: stopped: --max-time 200ms reached after 1 iteration\n",
        ),
        (
            &["w:fail"],
            "script_failed",
            1,
            "loopx: error: script w:fail exited with code 5; stopping the loop\n",
        ),
        (
            &["w:badgoto"],
            "invalid_goto",
            1,
            "loopx: error: workflow 'w' has no script 'nowhere' (goto 'nowhere' from w:badgoto) \
             (scripts: badgoto, fail, hang, index, slow, stop)\n",
        ),
        (
            &["--timeout", "200ms", "w:hang"],
            "timed_out",
            124,
            "loopx: error: w:hang timed out after 200ms; its process group was terminated\n",
        ),
        (
            &["ghost"],
            "error",
            1,
            "loopx: error: workflow 'ghost' not found in .loopx/ (workflows: w)\n",
        ),
    ] {
        let _ = fs::remove_file(p.path("log"));
        let mut all = vec!["run", "--log", "log"];
        all.extend_from_slice(args);
        p.loopx(&all).status(code).stderr(stderr).run();
        let ev = events(&p.path("log"));
        let end = ev.last().unwrap();
        assert_eq!(end["event"], "run_end", "{args:?}");
        assert_eq!(end["reason"], reason, "{args:?}");
        assert_eq!(end["exit_code"], code, "{args:?}");
        if code != 0 {
            assert!(
                end["error"].as_str().is_some_and(|e| !e.is_empty()),
                "{end}"
            );
        }
        if reason == "timed_out" {
            let t = ev
                .iter()
                .find(|e| e["event"] == "timeout")
                .expect("a timeout event");
            assert_eq!(t["timeout_ms"], 200);
            assert_eq!(t["target"], "w:hang");
        }
    }
}

#[test]
fn an_interrupted_run_logs_the_signal_reason() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo $$ > \"$LOOPX_PROJECT_ROOT/pid\"\nsleep 30\n",
    );
    let run = p.loopx(&["run", "--log", "log", "w"]).status(143).start();
    read_pid(&p, "pid");
    run.signal(libc::SIGTERM);
    run.finish();
    let end = events(&p.path("log")).pop().unwrap();
    assert_eq!(
        (end["reason"].as_str(), end["exit_code"].as_i64()),
        (Some("signal"), Some(143))
    );
}

#[test]
fn a_log_that_cannot_be_opened_is_a_usage_error_before_anything_runs() {
    let p = Project::new();
    p.script("w", "index.sh", "echo ran >> \"$LOOPX_PROJECT_ROOT/ran\"\n");
    p.loopx(&["run", "--log", "no/such/dir/log", "w"])
        .usage_error(
            "cannot open the run log no/such/dir/log",
            "loopx run --help",
        )
        .run();
    p.loopx(&["run", "w"])
        .env("LOOPX_LOG", p.path("no/such/dir/log"))
        .status(1)
        .stderr_contains("cannot open the run log")
        .run();
    assert!(!p.exists("ran"));
}

/// `loopx <args>` in `p` with the file size limit at `kib` KiB (bash's
/// `ulimit -f` unit) and SIGXFSZ ignored, in the child only: a write past
/// the limit is then short, or fails with EFBIG, as on a full disk.
fn with_file_limit(p: &Project, kib: u64, args: &[&str]) -> Run {
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c")
        .arg(format!("ulimit -f {kib}; trap '' XFSZ; exec \"$0\" \"$@\""))
        .arg(loopx_bin())
        .args(args)
        .current_dir(p.root());
    isolate(&mut cmd, p.home());
    Run::command(cmd)
}

/// A whole log line of exactly `len` bytes, newline included.
fn padding_line(len: usize) -> String {
    let pad = len - r#"{"pad":""}"#.len() - 1;
    format!("{{\"pad\":\"{}\"}}\n", "x".repeat(pad))
}

#[test]
fn a_log_write_that_fails_later_is_warned_once_and_the_loop_goes_on() {
    let p = Project::new();
    p.script("w", "index.sh", "echo ran >> \"$LOOPX_PROJECT_ROOT/ran\"\n");
    // A log already at the size limit: every append fails with EFBIG.
    p.file("log", &padding_line(1024));
    let o = with_file_limit(&p, 1, &["run", "-n", "3", "--log", "log", "w"])
        .stderr_contains("loopx: warning: cannot write the run log log: File too large")
        .run();
    assert_eq!(o.stderr.matches("warning").count(), 1, "{o}");
    assert_eq!(p.read("ran").lines().count(), 3);
    assert_eq!(p.read("log"), padding_line(1024));
}

#[test]
fn a_short_write_is_truncated_back_to_where_its_line_started() {
    let p = Project::new();
    p.script("w", "index.sh", "");
    // 900 bytes of whole lines under a 1024-byte limit: run_start (over 124
    // bytes) is written short and cut back; later lines fit until one
    // straddles the limit again.
    p.file("log", &padding_line(900));
    let o = with_file_limit(&p, 1, &["run", "-n", "3", "--log", "log", "w"])
        .stderr_contains("loopx: warning: cannot write the run log log: ")
        .run();
    assert_eq!(o.stderr.lines().count(), 1, "{o}");
    let ev = events(&p.path("log"));
    assert_eq!(ev[0]["pad"].as_str().map(str::len), Some(900 - 11));
    assert!(
        ev[1..].iter().all(|e| e["event"] != "run_start"),
        "run_start did not fit: {ev:?}"
    );
}

#[test]
fn a_torn_last_line_is_terminated_before_the_next_runs_first_line() {
    let p = Project::new();
    p.script("w", "index.sh", "");
    // What a run killed mid-write, or a full disk under an older loopx,
    // leaves behind.
    let torn = r#"{"v":1,"event":"script_end","time":"2026"#;
    p.file("log", torn);
    p.loopx(&["run", "-n", "1", "--log", "log", "w"]).run();
    let text = p.read("log");
    let (first, rest) = text.split_once('\n').expect("a line break");
    assert_eq!(first, torn, "{text}");
    let rest: Vec<Value> = rest
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{text}")))
        .collect();
    assert_eq!(
        kinds(&rest),
        ["run_start", "script_start", "script_end", "run_end"]
    );
    assert!(text.ends_with('\n'));
}

/// The log is a regular file of the user's, never reached through a
/// symbolic link: in a shared directory `log` could point at ~/.bashrc.
#[test]
fn a_log_through_a_symlink_is_refused_and_its_target_untouched() {
    let p = Project::new();
    p.script("w", "index.sh", "echo ran >> \"$LOOPX_PROJECT_ROOT/ran\"\n");
    p.file("bashrc", "alias ll='ls -l'\n")
        .symlink("bashrc", "log")
        .symlink("missing", "dangling");
    for (args, env) in [
        (&["run", "-n", "1", "--log", "log", "w"][..], None),
        (&["run", "-n", "1", "w"][..], Some(p.path("log"))),
        (&["run", "-n", "1", "--log", "dangling", "w"][..], None),
    ] {
        let mut run = p.loopx(args);
        if let Some(log) = &env {
            run = run.env("LOOPX_LOG", log);
        }
        run.usage_error(
            "it is a symbolic link, which loopx does not follow for its log",
            "loopx run --help",
        )
        .run();
    }
    assert_eq!(p.read("bashrc"), "alias ll='ls -l'\n");
    assert!(!p.exists("missing"), "nothing was created through the link");
    assert!(!p.exists("ran"));
}

#[test]
fn a_log_owned_by_another_user_is_refused() {
    if !is_root() {
        return skip(
            "a_log_owned_by_another_user_is_refused",
            "chown to nobody needs root",
        );
    }
    let p = Project::new();
    p.script("w", "index.sh", "echo ran >> \"$LOOPX_PROJECT_ROOT/ran\"\n");
    p.file("log", "");
    std::os::unix::fs::chown(p.path("log"), Some(65534), Some(65534)).unwrap();
    p.loopx(&["run", "-n", "1", "--log", "log", "w"])
        .usage_error(
            "refusing the run log log: it belongs to uid 65534, not to you (uid 0)",
            "loopx run --help",
        )
        .run();
    assert_eq!(p.read("log"), "");
    assert!(!p.exists("ran"));
}

#[test]
fn a_log_that_is_not_a_regular_file_is_refused() {
    let p = Project::new();
    p.script("w", "index.sh", "echo ran >> \"$LOOPX_PROJECT_ROOT/ran\"\n");
    p.dir("adir");
    // SAFETY: mkfifo on a path of this test's own.
    assert_eq!(
        unsafe { libc::mkfifo(c_path(&p.path("fifo")).as_ptr(), 0o600) },
        0
    );
    for (log, what) in [
        ("adir", "a directory"),
        // Without a reader, an open for writing would block forever.
        ("fifo", "a named pipe (FIFO)"),
        ("/dev/null", "a device"),
    ] {
        p.loopx(&["run", "-n", "1", "--log", log, "w"])
            .usage_error(
                &format!("refusing the run log {log}: it is {what}, not a regular file"),
                "loopx run --help",
            )
            .run();
    }
    assert!(!p.exists("ran"));
}

#[test]
fn log_dash_writes_the_log_to_stdout_and_stderr_stays_the_same() {
    let p = goto_retry_stop();
    let args = ["--retry", "1", "--retry-delay", "0", "w"];
    let stderr = "loopx: w:check failed (exit 2); retry 1 of 1 in 0s\n";
    let expected = [
        "run_start",
        "script_start",
        "script_end",
        "script_start",
        "script_end",
        "retry",
        "script_start",
        "script_end",
        "run_end",
    ];
    for env in [false, true] {
        let mut all = vec!["run"];
        if !env {
            all.extend(["--log", "-"]);
        }
        all.extend(args);
        // Every byte of stdout is the log, checked below.
        let mut run = p
            .loopx(&all)
            .stderr(stderr)
            .stdout_contains("{\"v\":1,\"event\":\"run_start\"");
        if env {
            run = run.env("LOOPX_LOG", "-");
        }
        let o = run.run();
        // Every byte of stdout is the log: nothing else of loopx goes there.
        let ev: Vec<Value> = o
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{o}")))
            .collect();
        assert!(o.stdout.ends_with('\n'), "{o}");
        assert_eq!(kinds(&ev), expected, "{o}");
        assert!(!p.exists("-"), "no file named '-'");
    }
    // Without the log, the same stderr and an empty stdout.
    let mut all = vec!["run"];
    all.extend(args);
    p.loopx(&all).stdout("").stderr(stderr).run();
    // Under the JS API stdout is the channel: '-' is refused there.
    let o = p
        .loopx(&["__api", "1", "--log", "-", "--", "w"])
        .status(1)
        .stdout_contains(r#""type":"error""#)
        .stdout_contains("under the JS API")
        .run();
    assert_eq!(o.stdout.lines().count(), 1, "{o}");
    assert!(!p.exists("-"));
}

#[test]
fn loopx_log_in_the_environment_logs_and_the_flag_wins() {
    let p = Project::new();
    p.script("w", "index.sh", "");
    p.loopx(&["run", "-n", "1", "w"])
        .env("LOOPX_LOG", p.path("env.jsonl"))
        .run();
    assert_eq!(kinds(&events(&p.path("env.jsonl"))).len(), 4);
    p.loopx(&["run", "-n", "1", "--log", "flag.jsonl", "w"])
        .env("LOOPX_LOG", p.path("env.jsonl"))
        .run();
    assert_eq!(
        kinds(&events(&p.path("env.jsonl"))).len(),
        4,
        "the flag won"
    );
    assert_eq!(kinds(&events(&p.path("flag.jsonl"))).len(), 4);
}

#[test]
fn concurrent_runs_appending_to_one_log_leave_only_whole_lines() {
    let p = Project::new();
    // Long results make long lines: torn writes would show.
    p.script(
        "w",
        "index.sh",
        &format!("printf '%s' '{}'\n", "x".repeat(190)),
    );
    let log = p.path("shared.jsonl");
    let args = ["run", "-n", "150", "--log", log.to_str().unwrap(), "w"];
    // One run may only grow the file to 64 KiB (its own lines alone pass
    // that, while the others write too): its append across the limit is
    // short, and cut back. It starts first, so the file is below the limit
    // when its first line goes out.
    let mut runs = vec![with_file_limit(&p, 64, &args)
        .stderr_contains("cannot write the run log")
        .start()];
    wait_until("its first line", || size(&log) > 0);
    runs.extend((0..2).map(|_| p.loopx(&args).start()));
    for run in runs {
        run.finish();
    }
    let ev = events(&log);
    let ids: BTreeSet<&str> = ev.iter().map(|e| e["run_id"].as_str().unwrap()).collect();
    let mut counts: Vec<usize> = ids
        .iter()
        .map(|id| ev.iter().filter(|e| e["run_id"] == *id).count())
        .collect();
    counts.sort_unstable();
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert!(counts[0] < 2 + 2 * 150, "{counts:?}");
    assert_eq!(counts[1..], [2 + 2 * 150; 2], "{counts:?}");
}

// ---------------------------------------------------------------- status

/// A private state directory for `loopx status` (XDG_RUNTIME_DIR).
fn runtime_dir(p: &Project) -> PathBuf {
    let d = p.home().join("run");
    fs::create_dir_all(&d).unwrap();
    fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).unwrap();
    d
}

fn status(p: &Project, args: &[&str]) -> Run {
    let mut all = vec!["status"];
    all.extend_from_slice(args);
    p.loopx(&all).env("XDG_RUNTIME_DIR", runtime_dir(p))
}

#[test]
fn status_shows_a_run_in_a_long_script_and_forgets_it_after_sigkill() {
    let p = Project::new();
    p.script("ralph", "index.sh", "$LOOPX_BIN output --goto think\n")
        .script(
            "ralph",
            "think.sh",
            "echo $$ > \"$LOOPX_PROJECT_ROOT/pid\"\nexec sleep 30\n",
        );
    let run = p
        .loopx(&["run", "ralph"])
        .env("XDG_RUNTIME_DIR", runtime_dir(&p))
        .signal(libc::SIGKILL)
        .start();
    let script = read_pid(&p, "pid");
    // The state file is written within a tenth of a second of each event.
    wait_until("status shows ralph:think", || {
        status(&p, &[])
            .stdout_any("polled until it lists ralph:think")
            .run()
            .stdout
            .contains("ralph:think")
    });
    let o = status(&p, &[])
        .stdout_contains("PID ")
        .stdout_contains("  ralph:think  ")
        .run();
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", o.stdout);
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["PID", "PROJECT", "TARGET", "SCRIPT", "ITERATION", "ELAPSED"]
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        row[..5],
        [
            run.pid().to_string().as_str(),
            p.root().to_str().unwrap(),
            "ralph",
            "ralph:think",
            "2"
        ]
    );
    // Columns line up under their headers.
    assert_eq!(lines[0].find("TARGET"), lines[1].find("ralph "));

    let json = status(&p, &["--json"])
        .stdout_any("the JSON, parsed below")
        .run();
    let json: Value = serde_json::from_str(&json.stdout).unwrap();
    let item = &json.as_array().unwrap()[0];
    assert_eq!(item["pid"], run.pid());
    assert_eq!(item["project"], p.root().to_str().unwrap());
    assert_eq!(item["script"], "ralph:think");
    assert_eq!(item["state"], "running");
    assert_eq!(item["iteration"], 2);
    assert!(item["elapsed_ms"].is_u64());

    let file = runtime_dir(&p).join(format!("loopx/{}.json", run.pid()));
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    run.signal(libc::SIGKILL);
    // The orphaned script holds loopx's stderr: the test ends its group.
    // SAFETY: signalling a process group this test started.
    unsafe { libc::kill(-script, libc::SIGKILL) };
    run.finish();
    assert!(file.exists(), "a killed run cannot clean up");
    // No longer live; resumable now (its checkpoint stays, README "Resume").
    let out = status(&p, &[])
        .stdout_contains("killed (no word from loopx)")
        .run();
    assert!(
        out.stdout.starts_with("no loopx runs\n\nRESUMABLE"),
        "{out}"
    );
    assert!(!file.exists(), "the stale entry was deleted");
    let json = status(&p, &["--json"])
        .stdout_any("the JSON, parsed below")
        .run();
    let json: Value = serde_json::from_str(&json.stdout).unwrap();
    let states: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["resumable"]);
}

#[test]
fn a_status_file_whose_pid_now_belongs_to_another_process_is_dropped() {
    let p = Project::new();
    let dir = runtime_dir(&p).join("loopx");
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    // The test's own pid is alive, but its start time is not this.
    let me = std::process::id();
    let stale = dir.join(format!("{me}.json"));
    fs::write(
        &stale,
        format!(r#"{{"v":1,"pid":{me},"start_time":"1","root":"/x","target":"t","script":"t:index","iteration":1,"attempt":1,"state":"running","run_started_ms":0}}"#),
    )
    .unwrap();
    status(&p, &[]).stdout("no loopx runs\n").run();
    assert!(!stale.exists());
}

#[test]
fn the_status_file_goes_when_the_run_ends() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "for _ in $(seq 500); do ls \"$XDG_RUNTIME_DIR\"/loopx/*.json >/dev/null 2>&1 && break; sleep 0.01; done\n\
         ls \"$XDG_RUNTIME_DIR/loopx\" > \"$LOOPX_PROJECT_ROOT/seen\"\n",
    );
    p.loopx(&["run", "-n", "1", "w"])
        .env("XDG_RUNTIME_DIR", runtime_dir(&p))
        .run();
    assert!(
        p.read("seen").trim().ends_with(".json"),
        "{}",
        p.read("seen")
    );
    assert_eq!(
        fs::read_dir(runtime_dir(&p).join("loopx")).unwrap().count(),
        0
    );
}

#[test]
fn without_xdg_runtime_dir_state_lives_in_a_private_temp_directory() {
    let p = Project::new();
    let tmp = p.home().join("tmp");
    fs::create_dir_all(&tmp).unwrap();
    p.script(
        "w",
        "index.sh",
        "ls -ld \"$TMPDIR\"/loopx-* > \"$LOOPX_PROJECT_ROOT/seen\"\n",
    );
    p.loopx(&["run", "-n", "1", "w"])
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", &tmp)
        .run();
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let seen = p.read("seen");
    assert!(seen.starts_with("drwx------"), "{seen}");
    assert!(seen.trim_end().ends_with(&format!("loopx-{uid}")), "{seen}");
}

/// A `loopx-<uid>` someone else made in the shared temporary directory,
/// or one open to others: runs keep no state there, so `status` says so
/// instead of listing nothing.
#[test]
fn a_state_directory_not_private_to_the_user_is_named_and_never_used() {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let cases = [
        ("someone else's, open to all", Some(65534), 0o777),
        ("someone else's, private", Some(65534), 0o700),
        ("mine, open to all", None, 0o777),
        ("mine, readable by the group", None, 0o750),
    ];
    for (label, owner, mode) in cases {
        if owner.is_some() && !is_root() {
            skip(
                "a_state_directory_not_private_to_the_user_is_named_and_never_used",
                &format!("{label}: chown needs root"),
            );
            continue;
        }
        let p = Project::new();
        p.script("w", "index.sh", "");
        let tmp = p.home().join("tmp");
        let dir = tmp.join(format!("loopx-{uid}"));
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).unwrap();
        if let Some(owner) = owner {
            std::os::unix::fs::chown(&dir, Some(owner), Some(owner)).unwrap();
        }
        let why = match owner {
            Some(o) => format!("it belongs to uid {o}, not to you (uid {uid})"),
            None => format!("it is open to other users (mode {mode:04o}; loopx needs 0700)"),
        };
        p.loopx(&["status"])
            .env_remove("XDG_RUNTIME_DIR")
            .env("TMPDIR", &tmp)
            .status(1)
            .stdout("")
            .stderr(&format!(
                "loopx: error: cannot list runs: {} is not used for run state, as {why}; \
                 remove it, or set XDG_RUNTIME_DIR to a private directory of yours\n",
                dir.display()
            ))
            .run();
        p.loopx(&["run", "-n", "1", "w"])
            .env_remove("XDG_RUNTIME_DIR")
            .env("TMPDIR", &tmp)
            .run();
        assert!(names(&dir).is_empty(), "{label}: {:?}", names(&dir));
    }
}

#[test]
fn status_is_listed_in_top_help_and_run_status_runs_a_workflow() {
    let p = Project::new();
    p.script(
        "status",
        "index.sh",
        "echo workflow >&2\n$LOOPX_BIN output --stop\n",
    );
    p.loopx(&["run", "status"]).stderr("workflow\n").run();
    let help = p
        .loopx(&["-h"])
        .stdout_contains("\nUsage:\n  loopx <command>")
        .run();
    assert!(
        help.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("status ")),
        "{}",
        help.stdout
    );
    status(&p, &["--bogus"])
        .usage_error("only --json", "loopx status --help")
        .run();
}

// ---------------------------------------------------------------- --verbose

#[test]
fn verbose_prints_one_line_per_script_run_and_the_end() {
    let p = goto_retry_stop();
    p.script("w", "again.sh", "");
    let o = p
        .loopx(&["run", "-v", "--retry", "1", "--retry-delay", "0", "w"])
        .stderr_any("checked line by line below, durations masked")
        .run();
    let lines: Vec<String> = o
        .stderr
        .lines()
        .map(|l| {
            // "in 12ms" varies: keep the shape.
            let (before, after) = l.split_once(" in ").unwrap_or((l, ""));
            let rest = after.split_once(' ').map_or("", |(_, r)| r);
            format!("{before} in _ {rest}").trim_end().to_string()
        })
        .collect();
    assert_eq!(
        lines,
        [
            "loopx: [1] w:index exit 0 in _ → goto check",
            "loopx: [2] w:check exit 2 in _",
            "loopx: w:check failed (exit 2); retry 1 of 1 in _",
            "loopx: [2] w:check exit 0 in _ → stop",
            "loopx: run ended: stop after 2 iterations in _ (exit 0)",
        ],
        "{}",
        o.stderr
    );
    p.loopx(&["run", "--verbose", "-n", "1", "w:again"])
        .stderr_contains("loopx: [1] w:again exit 0 in ")
        .stderr_contains("→ restart\n")
        .run();
}

#[test]
fn verbose_points_out_outputs_that_are_probably_mistakes() {
    let p = Project::new();
    for (name, stdout) in [
        ("broken", "{\"goto\": \"next\""),
        ("cased", r#"{"Goto":"next"}"#),
        ("nested", r#"{"data":{"result":"x"}}"#),
        ("stopstr", r#"{"stop":"true"}"#),
        ("gotonum", r#"{"goto":3}"#),
    ] {
        p.script(
            "w",
            &format!("{name}.sh"),
            &format!("printf '%s' '{stdout}'\n"),
        );
    }
    for (name, note) in [
        ("broken", "stdout starts with '{' but is not valid JSON"),
        (
            "cased",
            "'Goto' is not a field of the output (did you mean 'goto'?)",
        ),
        ("nested", "'result' is nested inside 'data'"),
        (
            "stopstr",
            "stop is \"true\" (a string); only the JSON value true stops the loop, so it goes on",
        ),
        (
            "gotonum",
            "goto is a number, not a string, so it is ignored",
        ),
    ] {
        let target = format!("w:{name}");
        p.loopx(&["run", "-v", "-n", "1", &target])
            .stderr_contains(&format!("loopx: note: {target}: {note}"))
            .run();
        // Notes only: without -v, §2.3's silence.
        p.loopx(&["run", "-n", "1", &target]).run();
    }
}

// ---------------------------------------------------------------- unused

/// Every file under `dir`, with its size.
fn tree(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let path = e.path();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                pending.push(path.clone());
            }
            out.push((path, if meta.is_dir() { 0 } else { meta.len() }));
        }
    }
    out.sort();
    out
}

#[test]
fn without_log_or_verbose_nothing_new_is_written_or_printed() {
    let p = goto_retry_stop();
    let runtime = runtime_dir(&p);
    let before = (tree(p.root()), tree(p.home()));
    p.loopx(&["run", "--retry", "1", "--retry-delay", "0", "w"])
        .env("XDG_RUNTIME_DIR", &runtime)
        .stdout("")
        // Only the retry line the user asked for with --retry.
        .stderr("loopx: w:check failed (exit 2); retry 1 of 1 in 0s\n")
        .run();
    let (root, mut home) = (tree(p.root()), tree(p.home()));
    // The status directory may now exist, empty (the file went at the end),
    // and so may the checkpoints' (the run finished: its checkpoint went).
    let state = p.home().join(".local");
    home.retain(|(path, _)| path != &runtime.join("loopx") && !path.starts_with(&state));
    assert_eq!((root, home), before);
    assert_eq!(
        fs::read_dir(state.join("state/loopx/runs"))
            .unwrap()
            .count(),
        0,
        "no checkpoint left"
    );
}
