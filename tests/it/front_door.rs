//! The first hour with loopx (issue 24): notes on probable mistakes at a
//! terminal (DESIGN.md "Beyond the spec": never without one, never under the
//! API), errors that point the way (§5, §7.2), and TypeScript that cannot
//! run found before the first script. Local-directory installs are in
//! install.rs, beside the other sources.

use crate::util::procs::run_on_pty;
use crate::util::*;
use std::fs;
use std::path::Path;

/// What a note looks like: `loopx: note: <script>: <text>`.
fn note(script: &str, text: &str) -> String {
    format!("loopx: note: {script}: {text}")
}

const BEFORE: &str = "stdout has text before its JSON object; only a whole JSON object is \
                      parsed, so all of stdout is the result (print other text to stderr)";
const AFTER: &str = "stdout has text after its JSON object; only a whole JSON object is \
                     parsed, so all of stdout is the result (print other text to stderr)";
const STOP_STRING: &str =
    "stop is \"true\" (a string); only the JSON value true stops the loop, so it goes on";
const RESTARTED: &str = "the loop restarted 20 times in ";

/// Workflows whose output is a probable mistake, each with the note it
/// gets: text before the JSON, text after it, one of -v's notes, and a
/// loop that restarts on plain text until -n ends it.
fn mistakes() -> (Project, Vec<(&'static str, &'static str, String)>) {
    let p = Project::new();
    p.script(
        "before",
        "index.sh",
        "echo working\nprintf '{\"stop\":true}'\n",
    )
    .script("after", "index.sh", "printf '{\"stop\":true}\\ndone\\n'\n")
    .script("string", "index.sh", "printf '{\"stop\":\"true\"}'\n")
    .script("plain", "index.sh", "echo 'all done'\n");
    let cases = vec![
        ("before", "1", note("before:index", BEFORE)),
        ("after", "1", note("after:index", AFTER)),
        ("string", "1", note("string:index", STOP_STRING)),
        ("plain", "25", note("plain:index", RESTARTED)),
    ];
    (p, cases)
}

#[test]
fn at_a_terminal_probable_mistakes_are_noted_by_default() {
    let (p, cases) = mistakes();
    for (workflow, n, expected) in cases {
        let out = run_on_pty(&p, &["run", "-n", n, workflow], &[]);
        assert_eq!(out.exit, "0", "{workflow}: {}", out.transcript);
        assert_eq!(
            out.transcript.matches(&expected).count(),
            1,
            "{workflow}: once: {expected}\n{}",
            out.transcript
        );
        // -v's per-script lines stay -v's.
        assert!(!out.transcript.contains("[1] "), "{}", out.transcript);
    }
}

#[test]
fn the_restart_note_says_how_to_stop_a_loop() {
    let (p, _) = mistakes();
    let out = run_on_pty(&p, &["run", "-n", "60", "plain"], &[]);
    assert_eq!(out.exit, "0", "{}", out.transcript);
    let line = out
        .transcript
        .lines()
        .find(|l| l.contains(RESTARTED))
        .unwrap_or_else(|| panic!("no restart note: {}", out.transcript));
    assert!(
        line.ends_with(
            "on plain-text output (no goto, no stop), and restarts until interrupted; \
             a script ends the loop with `\"$LOOPX_BIN\" output --stop` \
             (`output({ stop: true })` in JS/TS)"
        ),
        "{line:?}"
    );
    // Once per run, however long it goes on.
    assert_eq!(out.transcript.matches(RESTARTED).count(), 1);
}

#[test]
fn a_loop_that_restarts_slowly_or_with_structured_output_is_not_noted() {
    let p = Project::new();
    // Structured output that restarts (no goto, no stop) is deliberate.
    p.script("w", "index.sh", "printf '{\"result\":\"again\"}'\n");
    let out = run_on_pty(&p, &["run", "-n", "30", "w"], &[]);
    assert_eq!(out.exit, "0", "{}", out.transcript);
    assert!(!out.transcript.contains("note:"), "{}", out.transcript);
}

#[test]
fn without_a_terminal_stderr_stays_exactly_the_specs() {
    // The strict Run: exit 0 and an empty stderr. (Without -n, a loop that
    // only restarts on plain text is said once whatever stderr is:
    // first_hour.rs.)
    let (p, cases) = mistakes();
    for (workflow, n, _) in cases {
        p.loopx(&["run", "-n", n, workflow]).stdout("").run();
    }
}

#[test]
fn with_verbose_the_notes_come_without_a_terminal_too() {
    let (p, cases) = mistakes();
    for (workflow, n, expected) in cases {
        let out = p
            .loopx(&["run", "-v", "-n", n, workflow])
            .stderr_contains(&expected)
            .stderr_contains("run ended: max_iterations")
            .run();
        assert_eq!(out.stderr.matches(&expected).count(), 1, "{out}");
    }
}

#[test]
fn under_the_api_no_notes_even_at_a_terminal() {
    // The API's terminal is its consumer's: the machine mode (§9) run on a
    // terminal still says nothing on stderr about the outputs.
    let (p, cases) = mistakes();
    for (workflow, _, _) in cases {
        let out = run_on_pty(&p, &["__api", "1", "-n", "1", workflow], &[]);
        assert_eq!(out.exit, "0", "{workflow}: {}", out.transcript);
        assert!(
            out.transcript.contains("{\"type\":\"done\"}"),
            "{}",
            out.transcript
        );
        assert!(!out.transcript.contains("note:"), "{}", out.transcript);
    }
}

// ------------------------------------------------- errors that point the way

/// A real path, as the binary sees its working directory.
fn real(path: &Path) -> String {
    fs::canonicalize(path)
        .expect("realpath")
        .display()
        .to_string()
}

/// §7.2: no `.loopx/` at all is one error line, and a hint that says how to
/// get a workflow rather than the same thing again.
#[test]
fn without_loopx_the_error_says_so_once_and_points_to_init() {
    let p = Project::bare();
    p.loopx(&["run", "x"])
        .status(1)
        .stdout("")
        .stderr(&format!(
            "loopx: error: no .loopx/ directory in {}\nhint: `loopx init` writes a workflow \
             to start from (.loopx/main/index.sh); `loopx init -h` lists the ready-made ones\n",
            real(p.root())
        ))
        .run();
}

/// §5.1: loopx looks only in the current directory; from a subdirectory of
/// a project, §7.2's message gains the directory that has a `.loopx/`.
#[test]
fn from_a_subdirectory_the_error_names_the_directory_with_loopx() {
    let p = Project::new();
    p.script("w", "index.sh", "").dir("src/deep");
    let deep = p.path("src/deep");
    p.loopx(&["run", "w"])
        .current_dir(&deep)
        .status(1)
        .stderr(&format!(
            "loopx: error: no .loopx/ directory in {}\nhint: run loopx from {}, which has \
             one (or `loopx init` to start one here)\n",
            real(&deep),
            real(p.root())
        ))
        .run();
    assert!(!p.exists("src/deep/.loopx"));
}

#[test]
fn a_target_written_as_a_path_or_a_file_name_suggests_the_one_that_exists() {
    let p = Project::new();
    p.script("ralph", "index.sh", "")
        .script("ralph", "review.sh", "")
        .script("pipe", "finish.sh", "");
    for (target, why, meant) in [
        (
            "ralph/review",
            "'ralph/review' is not a valid name",
            "ralph:review",
        ),
        (
            "pipe:finish.sh",
            "script name 'finish.sh' is not allowed",
            "pipe:finish",
        ),
        ("ralph.sh", "'ralph.sh' is not a valid name", "ralph"),
        (
            ".loopx/pipe/finish.sh",
            "is not a valid name",
            "pipe:finish",
        ),
    ] {
        p.loopx(&["run", target])
            .status(1)
            .stderr_contains(&format!("loopx: error: invalid target '{target}': "))
            .stderr_contains(why)
            .stderr_contains(&format!(
                "\nhint: did you mean '{meant}'? A target is workflow:script, without a path \
                 or a file extension\n"
            ))
            .run();
    }
    // Nothing that exists: no guess.
    p.loopx(&["run", "ralph/nope"])
        .status(1)
        .stderr_contains("invalid target 'ralph/nope'")
        .stderr_lacks("did you mean")
        .run();
}

#[test]
fn a_directory_that_is_not_a_workflow_is_named_when_it_is_asked_for() {
    let p = Project::new();
    p.script("w", "index.sh", "printf '{\"goto\":\"esm:index\"}'\n")
        .script("w", "check.mjs", "")
        .script("esm", "index.mjs", "")
        .file(".loopx/nested/src/index.ts", "")
        .file(".loopx/solo.sh", "");
    let cases = [
        (
            "esm",
            "workflow 'esm' not found in .loopx/ (workflows: w)\nhint: .loopx/esm/ is not a \
             workflow: it has no .sh, .js, .jsx, .ts or .tsx file at its top level; index.mjs \
             is ignored (rename it to index.js: .js and .ts scripts run as ES modules)",
        ),
        (
            "nested",
            "workflow 'nested' not found in .loopx/ (workflows: w)\nhint: .loopx/nested/ is not \
             a workflow: it has no .sh, .js, .jsx, .ts or .tsx file at its top level; scripts in \
             subdirectories (src/) are not run",
        ),
        (
            "solo",
            "workflow 'solo' not found in .loopx/ (workflows: w)\nhint: .loopx/solo.sh is a file, \
             not a workflow: a workflow is a directory (.loopx/solo/index.sh)",
        ),
        (
            "w:check",
            "workflow 'w' has no script 'check' (scripts: index)\nhint: check.mjs is ignored \
             (rename it to check.js: .js and .ts scripts run as ES modules)",
        ),
    ];
    for (target, message) in cases {
        p.loopx(&["run", target])
            .status(1)
            .stderr(&format!("loopx: error: {message}\n"))
            .run();
    }
    // A goto to it says the same (§7.2: the goto is named too).
    p.loopx(&["run", "w"])
        .status(1)
        .stderr_contains(
            "workflow 'esm' not found in .loopx/ (goto 'esm:index' from w:index) (workflows: w)\n\
             hint: .loopx/esm/ is not a workflow",
        )
        .run();
}

#[test]
fn a_bash_script_with_crlf_line_endings_that_fails_says_so() {
    let p = Project::new();
    // Saved on Windows: `true\r` is no command.
    p.script(
        "w",
        "index.sh",
        "true\r\nprintf '{\"stop\":true}'\r\ntrue\r\n",
    );
    let path = real(&p.path(".loopx/w/index.sh"));
    p.loopx(&["run", "w"])
        .status(1)
        // bash's own words first, then loopx's error and the hint.
        .stderr_contains("command not found")
        .stderr_contains(&format!(
            "loopx: error: script w:index exited with code 127; stopping the loop\n\
             hint: {path} has Windows (CRLF) line endings, and bash reads each \\r as part of \
             the line (`$'\\r': command not found`); convert the file, e.g. \
             `sed -i 's/\\r$//' {path}`\n"
        ))
        .run();
    // A failure without CRLF has no such hint; a CRLF script that succeeds
    // is never read.
    let q = Project::new();
    q.script("w", "index.sh", "exit 3\n");
    q.loopx(&["run", "w"])
        .status(1)
        .stderr("loopx: error: script w:index exited with code 3; stopping the loop\n")
        .run();
}

#[test]
fn a_bash_script_that_calls_loopx_by_name_and_fails_127_is_told_about_loopx_bin() {
    // §3.4: scripts reach loopx as "$LOOPX_BIN"; `loopx` by name is not on
    // the scripts' PATH here (a standalone binary in a directory of its own).
    let p = Project::new();
    p.script("w", "index.sh", "loopx output --stop\n");
    let path = real(&p.path(".loopx/w/index.sh"));
    p.loopx(&["run", "w"])
        .env("PATH", "/usr/bin:/bin")
        .status(1)
        .stdout("")
        // bash's own words first, then loopx's error and the hint.
        .stderr_contains("loopx: command not found")
        .stderr_contains(&format!(
            "loopx: error: script w:index exited with code 127; stopping the loop\n\
             hint: {path} calls `loopx` by name, and exit code 127 is bash's \"command not \
             found\"; scripts call the loopx that runs them as \"$LOOPX_BIN\" (e.g. \
             `\"$LOOPX_BIN\" output --stop`), which needs no loopx on PATH\n"
        ))
        .run();
    // Another command not found gets no such hint.
    let q = Project::new();
    q.script("w", "index.sh", "no-such-tool --flag\n");
    q.loopx(&["run", "w"])
        .env("PATH", "/usr/bin:/bin")
        .status(1)
        .stdout("")
        .stderr_contains("no-such-tool: command not found")
        .stderr_lacks("hint:")
        .run();
}

// ------------------------------------------------- TypeScript up front

/// A directory holding only a `node` that answers loopx's type-stripping
/// probe with `answer` and runs nothing else: a PATH with no tsx and no Bun.
fn fake_node(p: &Project, answer: &str) -> std::path::PathBuf {
    let dir = p.home().join("fake-bin");
    write_executable(
        &dir.join("node"),
        &format!(
            "#!/bin/bash\nfor a in \"$@\"; do [ \"$a\" = -p ] && {{ echo {answer}; exit 0; }}; \
             done\necho \"node ran $*\" >&2\nexit 9\n"
        ),
    );
    dir
}

#[test]
fn typescript_no_runtime_can_run_is_warned_about_before_the_first_script() {
    let p = Project::new();
    p.script(
        "wf",
        "index.sh",
        "echo RAN >&2\nprintf '{\"goto\":\"review\"}'\n",
    )
    .script("wf", "review.ts", "")
    .script("wf", "ui.tsx", "");
    let bin = fake_node(&p, "undefined");
    // stderr is read below, in order: warning, the first script, the error.
    let out = p
        .loopx(&["run", "wf"])
        .env("PATH", &bin)
        .status(1)
        .stderr_any("read below, in order: warning, first script, error")
        .run();
    let warning = "loopx: warning: workflow 'wf' has scripts that cannot run here: review.ts, \
                   ui.tsx (TypeScript and JSX need tsx or Bun, or for .ts a Node that strips \
                   types, 22.10 and later); the loop stops with an error if it reaches one\n\
                   hint: install loopx with `npm install -g loopx` (it brings tsx), or \
                   `npm install -D tsx` in the project, or install Bun and set \
                   LOOPX_JS_RUNTIME=bun\nRAN\n";
    assert!(out.stderr.starts_with(warning), "{out}");
    assert!(
        out.stderr[warning.len()..]
            .starts_with("loopx: error: cannot run wf:review: no TypeScript runtime found"),
        "{out}"
    );
}

#[test]
fn typescript_a_runtime_can_run_is_not_warned_about() {
    // A Node that strips types runs .ts; only JSX would need more. Nothing
    // runs but the bash script, which stops the loop.
    let p = Project::new();
    p.script("wf", "index.sh", "printf '{\"stop\":true}'\n")
        .script("wf", "review.ts", "");
    let bin = fake_node(&p, "strip");
    p.loopx(&["run", "wf"]).env("PATH", &bin).run();
    // The same Node with a .jsx script: warned about, the run goes on.
    p.script("wf", "view.jsx", "");
    p.loopx(&["run", "wf"])
        .env("PATH", &bin)
        .stderr_contains("has a script that cannot run here: view.jsx")
        .run();
    // The starting script itself fails at once: no warning before it.
    let q = Project::new();
    q.script("wf", "index.ts", "");
    let bin = fake_node(&q, "undefined");
    q.loopx(&["run", "wf"])
        .env("PATH", &bin)
        .status(1)
        .stderr_contains("loopx: error: cannot run wf:index: no TypeScript runtime found")
        .stderr_lacks("warning")
        .run();
}
