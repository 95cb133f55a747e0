//! The first hour, round two (issue 36): what a new user meets in the
//! unattended setting and on the first steps, each tested the way the user
//! meets it. Every run here declares its stdout and its stderr.

use crate::util::procs::{run_on_pty, wait_until};
use crate::util::*;
use serde_json::Value;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// The restart note's start (report.rs, restart_note).
const RESTARTED: &str = "loopx: note: plain:index: the loop restarted 20 times in ";
/// What `loopx status` shows beside such a run's script.
const RESTARTING: &str = "restarting on plain-text output: no goto, no stop";

/// A private state directory for `loopx status` (XDG_RUNTIME_DIR).
fn runtime_dir(p: &Project) -> PathBuf {
    let d = p.home().join("run");
    fs::create_dir_all(&d).expect("create the runtime dir");
    fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).expect("chmod the runtime dir");
    d
}

fn events(p: &Project, rel: &str) -> Vec<Value> {
    p.read(rel)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

// ------------------------------------------------ a loop that only restarts

/// A script that prints plain text, left unattended (stderr a file or a
/// pipe): once on stderr, once in the run log, and in `loopx status` for as
/// long as it runs. The loop itself goes on as §7.1 says.
#[test]
fn a_plain_text_loop_is_reported_once_on_stderr_in_the_log_and_in_status() {
    let p = Project::new();
    p.script("plain", "index.sh", "echo 'all done'\n");
    let rt = runtime_dir(&p);
    let run = p
        .loopx(&["run", "--log", "run.jsonl", "plain"])
        .env("XDG_RUNTIME_DIR", &rt)
        .status(130)
        .stdout("")
        .stderr_contains(RESTARTED)
        .stderr_contains("loopx: the run can be resumed: loopx resume ")
        .start();
    let status = |args: &[&str]| {
        let mut all = vec!["status"];
        all.extend_from_slice(args);
        p.loopx(&all)
            .env("XDG_RUNTIME_DIR", &rt)
            .stdout_any("the runs, read below")
    };
    wait_until("loopx status shows the note", || {
        status(&[]).run().stdout.contains(RESTARTING)
    });
    let json: Value =
        serde_json::from_str(&status(&["--json"]).run().stdout).expect("status --json");
    assert_eq!(json[0]["note"], RESTARTING, "{json}");
    run.signal(libc::SIGINT);
    let out = run.finish();
    assert_eq!(out.stderr.matches(RESTARTED).count(), 1, "{out}");
    let notes: Vec<Value> = events(&p, "run.jsonl")
        .into_iter()
        .filter(|e| e["event"] == "note")
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0]["kind"], "restart_loop");
    assert_eq!(notes[0]["target"], "plain:index");
    assert!(notes[0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("(no goto, no stop)")));
}

/// At a terminal a stray line before the JSON is noted once for the
/// script, not on every iteration.
#[test]
fn at_a_terminal_a_note_comes_once_per_script_not_every_iteration() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo working\nprintf '{\"result\":\"x\"}'\n",
    );
    let out = run_on_pty(&p, &["run", "-n", "5", "w"], &[]);
    assert_eq!(out.exit, "0", "{}", out.transcript);
    assert_eq!(
        out.transcript
            .matches("loopx: note: w:index: stdout has text before its JSON object")
            .count(),
        1,
        "{}",
        out.transcript
    );
}

// ------------------------------------------------------------- resuming

/// The checkpoints kept in the test's home (`$XDG_STATE_HOME/loopx/runs`).
fn kept(p: &Project) -> Vec<String> {
    let Ok(entries) = fs::read_dir(p.home().join(".local/state/loopx/runs")) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(".ckpt").map(str::to_string)
        })
        .collect();
    ids.sort();
    ids
}

/// `index` hands over to `work`, which does what `body` says: the run is
/// past its first iteration when it ends there.
fn two_steps(body: &str) -> Project {
    let p = Project::new();
    p.script("w", "index.sh", "\"$LOOPX_BIN\" output --goto work\n")
        .script("w", "work.sh", body);
    p
}

/// Every ending a resume can carry on says how: after Ctrl-C (a signal,
/// so no error line), a failure and a timeout, the last line is
/// `loopx resume <run-id>` with the id of the run kept.
#[test]
fn ctrl_c_a_failure_and_a_timeout_each_end_with_the_resume_command() {
    let resume_line = |p: &Project| {
        let ids = kept(p);
        assert_eq!(ids.len(), 1, "one run kept: {ids:?}");
        format!("loopx: the run can be resumed: loopx resume {}\n", ids[0])
    };

    // Ctrl-C (SIGINT to loopx, as the terminal sends it to the group).
    let p = two_steps("echo started > \"$LOOPX_PROJECT_ROOT/started\"\nexec sleep 30\n");
    let run = p
        .loopx(&["run", "w"])
        .status(130)
        .stdout("")
        .stderr_contains("loopx: the run can be resumed: loopx resume ")
        .start();
    crate::util::procs::wait_for_file(&p.path("started"));
    run.signal(libc::SIGINT);
    let out = run.finish();
    assert_eq!(out.stderr, resume_line(&p), "{out}");

    // A failure.
    let p = two_steps("exit 3\n");
    let out = p
        .loopx(&["run", "w"])
        .status(1)
        .stdout("")
        .stderr_contains("loopx: error: script w:work exited with code 3; stopping the loop\n")
        .stderr_contains("loopx: the run can be resumed: loopx resume ")
        .run();
    assert_eq!(
        out.stderr,
        format!(
            "loopx: error: script w:work exited with code 3; stopping the loop\n{}",
            resume_line(&p)
        )
    );

    // A timeout.
    let p = two_steps("exec sleep 30\n");
    let out = p
        .loopx(&["run", "--timeout", "200ms", "w"])
        .status(124)
        .stdout("")
        .stderr_contains("loopx: error: w:work timed out after 200ms")
        .stderr_contains("loopx: the run can be resumed: loopx resume ")
        .run();
    assert!(out.stderr.ends_with(&resume_line(&p)), "{out}");
}

/// Endings no resume can help are not kept, and say nothing of resuming:
/// a failure in the very first script (nothing to carry on: a missing
/// file, a setting not given), and loopx refusing what is on disk (a goto
/// to a script that is not there: a resume would meet it again).
#[test]
fn endings_no_resume_can_help_keep_nothing() {
    let p = Project::new();
    p.script("w", "index.sh", "cat TASK.md >&2 || exit 1\n");
    p.loopx(&["run", "w"])
        .status(1)
        .stdout("")
        .stderr_contains("TASK.md")
        .stderr_contains("loopx: error: script w:index exited with code 1; stopping the loop\n")
        .stderr_lacks("loopx resume")
        .run();
    assert_eq!(kept(&p), Vec::<String>::new());

    let p = two_steps("\"$LOOPX_BIN\" output --goto nowhere\n");
    p.loopx(&["run", "w"])
        .status(1)
        .stdout("")
        .stderr_contains("has no script 'nowhere'")
        .stderr_lacks("loopx resume")
        .run();
    assert_eq!(kept(&p), Vec::<String>::new());
}

/// `loopx forget <id>` drops one kept run, `--all` every one; neither
/// touches a run that finished, and a prefix names a run as for resume.
#[test]
fn forget_drops_a_kept_run_or_every_one() {
    let p = two_steps("exit 3\n");
    let fail = || {
        p.loopx(&["run", "w"])
            .status(1)
            .stdout("")
            .stderr_contains("loopx: the run can be resumed: loopx resume ")
            .run()
    };
    fail();
    fail();
    fail();
    let ids = kept(&p);
    assert_eq!(ids.len(), 3);
    p.loopx(&["forget", &ids[0][..8]])
        .stdout(&format!("forgot run {}\n", ids[0]))
        .stderr("")
        .run();
    assert_eq!(kept(&p), ids[1..]);
    p.loopx(&["resume", &ids[0]])
        .status(1)
        .stdout("")
        .stderr_contains(&format!("no resumable run '{}'", ids[0]))
        .run();
    let out = p
        .loopx(&["forget", "--all"])
        .stdout_any("one line per run, in any order: checked below")
        .run();
    let mut forgot: Vec<&str> = out.stdout.lines().collect();
    forgot.sort_unstable();
    assert_eq!(
        forgot,
        [
            format!("forgot run {}", ids[1]),
            format!("forgot run {}", ids[2])
        ]
    );
    assert_eq!(kept(&p), Vec::<String>::new());
    p.loopx(&["forget", "--all"])
        .stdout("no kept runs\n")
        .stderr("")
        .run();
    p.loopx(&["forget"])
        .usage_error(
            "needs a run id (see loopx status), or --all",
            "loopx forget --help",
        )
        .run();
    p.loopx(&["forget", "--all", &ids[0]])
        .usage_error("a run id or --all, not both", "loopx forget --help")
        .run();
    // Listed in the top help and completed by the shells.
    p.loopx(&["-h"])
        .stdout_contains("  forget --all ")
        .stdout_contains("  init [<workflow>] ")
        .stderr("")
        .run();
    for shell in ["bash", "zsh", "fish"] {
        p.loopx(&["completions", shell])
            .stdout_contains("forget")
            .stdout_contains("init")
            .stderr("")
            .run();
    }
}

// ---------------------------------------------------------------- init

/// `loopx init` in an empty directory: a workflow of one script that runs
/// as it is, then refuses to write over it.
#[test]
fn init_writes_a_runnable_workflow_and_never_overwrites_it() {
    let p = Project::bare();
    p.loopx(&["init"])
        .stdout(
            "wrote .loopx/main/index.sh, a workflow of one script to start from\n\
             next: edit it, then run it with `loopx run main` (once: `loopx run -n 1 main`)\n",
        )
        .stderr("")
        .run();
    let script = p.path(".loopx/main/index.sh");
    let mode = fs::metadata(&script)
        .expect("index.sh")
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "executable");
    p.loopx(&["run", "main"])
        .stdout("")
        .stderr(&format!(
            "working in {} ...\n",
            fs::canonicalize(p.root()).expect("realpath").display()
        ))
        .run();
    // Edited, then init again: refused, the file as the user left it.
    fs::write(&script, "# mine\n").expect("edit");
    p.loopx(&["init"])
        .status(1)
        .stdout("")
        .stderr(
            "loopx: error: .loopx/main already exists; nothing was written\n\
             hint: run it with `loopx run main`, or start another: `loopx init <name>`\n",
        )
        .run();
    assert_eq!(p.read(".loopx/main/index.sh"), "# mine\n");
    // Another name is another workflow of one script.
    p.loopx(&["init", "nightly"])
        .stdout_contains("wrote .loopx/nightly/index.sh")
        .stderr("")
        .run();
    p.loopx(&["init", "a/b"])
        .usage_error("invalid workflow name 'a/b'", "loopx init --help")
        .run();
}

/// `loopx init ralph` (and the other ready-made ones): the workflow from
/// this version's release, and the file it reads, with comments, beside
/// it; in a project that has one of that name already, nothing.
#[test]
fn init_a_ready_made_workflow_installs_it_from_the_release_with_its_template() {
    let server = http::Server::serve_dir(&release::host_release().out).expect("serve the release");
    let p = Project::bare();
    let init = |args: &[&str]| p.loopx(args).env("LOOPX_DOWNLOAD_URL", server.url());
    for (workflow, file, run) in [
        ("ralph", "PROMPT.md", "loopx run ralph"),
        ("build-audit-fix", "TASK.md", "loopx run build-audit-fix"),
        (
            "issue-runner",
            "issue-runner.env",
            "loopx run -e issue-runner.env issue-runner",
        ),
    ] {
        let out = init(&["init", workflow])
            .stdout_contains(&format!("wrote {file}, to fill in\n"))
            .stdout_contains(&format!(
                "next: edit {file}, read .loopx/{workflow}/README.md, then `{run}`\n"
            ))
            .stderr("")
            .run();
        assert!(p.exists(&format!(".loopx/{workflow}/index.sh")), "{out}");
        assert!(
            p.exists(&format!(".loopx/{workflow}/AUTHORING.md")),
            "{out}"
        );
        let template = p.read(file);
        assert!(
            template.starts_with("<!--") || template.starts_with('#'),
            "{file} starts with its comments:\n{template}"
        );
        // Again: refused, nothing fetched, the template as it was.
        let before = server.requests().len();
        init(&["init", workflow])
            .status(1)
            .stdout("")
            .stderr_contains(&format!(
                "loopx: error: .loopx/{workflow} already exists; nothing was written\n"
            ))
            .run();
        assert_eq!(server.requests().len(), before, "nothing fetched");
        assert_eq!(p.read(file), template);
    }
    // The files it reads are the user's: a PROMPT.md already there stays.
    let q = Project::bare();
    q.file("PROMPT.md", "my prompt\n");
    q.loopx(&["init", "ralph"])
        .env("LOOPX_DOWNLOAD_URL", server.url())
        .stdout_contains("kept PROMPT.md, which was there already\n")
        .stderr("")
        .run();
    assert_eq!(q.read("PROMPT.md"), "my prompt\n");
    // The run help lists the three without a warning.
    p.loopx(&["run", "-h"])
        .stdout_contains("ralph")
        .stdout_contains("build-audit-fix")
        .stdout_contains("issue-runner")
        .stderr("")
        .run();
}
