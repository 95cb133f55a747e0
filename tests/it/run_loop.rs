//! The loop through real bash scripts: transitions (§2.2), structured output
//! (§2.3), bash execution and injected variables (§3.4, §6.1, §6.2), input
//! piping (§6.6, §6.7), the basic loop and its errors (§7.1, §7.2).
//!
//! Scripts append a line per execution to `$LOOPX_PROJECT_ROOT/log`, so the
//! log is the observable order of iterations and what each one read.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::util::*;

/// A script that logs `name<stdin>` (stdin with trailing newlines stripped,
/// as `$(cat)` does) and prints `stdout` verbatim.
fn step(name: &str, stdout: &str) -> String {
    format!(
        "printf '%s<%s>\\n' {} \"$(cat)\" >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '%s' {}\n",
        sh_quote(name),
        sh_quote(stdout)
    )
}

/// `{"goto":"<target>"}` for targets that need no JSON escaping.
fn goto(target: &str) -> String {
    format!(r#"{{"goto":"{target}"}}"#)
}

/// The log lines so far; none when no script ran.
fn log(p: &Project) -> Vec<String> {
    if !p.exists("log") {
        return Vec::new();
    }
    p.read("log").lines().map(str::to_string).collect()
}

fn clear_log(p: &Project) {
    let _ = fs::remove_file(p.path("log"));
}

// ---------------------------------------------------------------- §2.2 loop

#[test]
fn spec_example_chain_runs_in_order() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        &step("ralph:index", &goto("check-ready")),
    )
    .script(
        "ralph",
        "check-ready.sh",
        &step("ralph:check-ready", &goto("review-adr:request-feedback")),
    )
    .script(
        "review-adr",
        "request-feedback.sh",
        &step("review-adr:request-feedback", &goto("apply-feedback")),
    )
    .script(
        "review-adr",
        "apply-feedback.sh",
        &step("review-adr:apply-feedback", ""),
    )
    // Decoys for the wrong readings of the chain: a workflow named like
    // the bare goto, the bare name in the starting workflow, and the
    // index of the workflow the chain ends in.
    .script(
        "check-ready",
        "index.sh",
        &step("WRONG check-ready:index", ""),
    )
    .script(
        "ralph",
        "apply-feedback.sh",
        &step("WRONG ralph:apply-feedback", ""),
    )
    .script(
        "review-adr",
        "index.sh",
        &step("WRONG review-adr:index", ""),
    );
    p.loopx(&["run", "-n", "5", "ralph"]).stdout("").run();
    assert_eq!(
        log(&p),
        [
            "ralph:index<>",
            "ralph:check-ready<>",
            "review-adr:request-feedback<>",
            "review-adr:apply-feedback<>",
            "ralph:index<>",
        ]
    );
}

#[test]
fn goto_bare_name_stays_in_current_workflow() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        &step("ralph:index", &goto("check-ready")),
    )
    .script("ralph", "check-ready.sh", &step("ralph:check-ready", ""))
    .script("check-ready", "index.sh", &step("check-ready:index", ""));
    p.loopx(&["run", "-n", "2", "ralph"]).run();
    assert_eq!(log(&p), ["ralph:index<>", "ralph:check-ready<>"]);
}

#[test]
fn goto_qualified_same_workflow_equals_bare() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        &step("ralph:index", &goto("ralph:check-ready")),
    )
    .script("ralph", "check-ready.sh", &step("ralph:check-ready", ""));
    p.loopx(&["run", "-n", "3", "ralph"]).run();
    assert_eq!(
        log(&p),
        ["ralph:index<>", "ralph:check-ready<>", "ralph:index<>"]
    );
}

#[test]
fn goto_bare_name_after_cross_workflow_goto_targets_its_own_workflow() {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("ralph:index", &goto("other:a")))
        .script("ralph", "b.sh", &step("WRONG ralph:b", ""))
        .script("other", "a.sh", &step("other:a", &goto("b")))
        .script("other", "b.sh", &step("other:b", ""));
    p.loopx(&["run", "-n", "3", "ralph"]).run();
    assert_eq!(log(&p), ["ralph:index<>", "other:a<>", "other:b<>"]);
}

#[test]
fn goto_another_workflows_index_needs_the_qualified_form() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        &step("ralph:index", &goto("other:index")),
    )
    .script("other", "index.sh", &step("other:index", ""));
    p.loopx(&["run", "-n", "2", "ralph"]).run();
    assert_eq!(log(&p), ["ralph:index<>", "other:index<>"]);

    // The bare workflow name is read as a script of the current workflow.
    let p = Project::new();
    p.script("ralph", "index.sh", &step("ralph:index", &goto("other")))
        .script("other", "index.sh", &step("other:index", ""));
    p.loopx(&["run", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains("'other'")
        .stderr_contains("ralph:index")
        .run();
    assert_eq!(log(&p), ["ralph:index<>"]);
}

#[test]
fn self_goto_counts_as_an_iteration() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        &step("ralph:index", r#"{"result":"again","goto":"index"}"#),
    );
    p.loopx(&["run", "-n", "3", "ralph"]).run();
    // Three executions, the later two reached by the self-goto (which pipes
    // the result like any other goto).
    assert_eq!(
        log(&p),
        ["ralph:index<>", "ralph:index<again>", "ralph:index<again>"]
    );
}

#[test]
fn n_counts_every_execution_including_goto_hops() {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", &goto("a")))
        .script("ralph", "a.sh", &step("a", &goto("other:b")))
        .script("other", "b.sh", &step("b", ""));
    let full = ["index<>", "a<>", "b<>", "index<>", "a<>", "b<>", "index<>"];
    for n in 1..=full.len() {
        clear_log(&p);
        p.loopx(&["run", "-n", &n.to_string(), "ralph"])
            .stdout("")
            .run();
        assert_eq!(log(&p), full[..n], "-n {n}");
    }
}

#[test]
fn n_limit_ends_the_loop_before_the_last_goto_is_resolved() {
    // §7.1: step 10 (-n reached) comes before step 11 (goto validation).
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", &goto("a:b:c")));
    p.loopx(&["run", "-n", "1", "ralph"]).stdout("").run();
    assert_eq!(log(&p), ["index<>"]);
}

#[test]
fn n_zero_validates_but_runs_nothing() {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", ""))
        .file("local.env", "A=1\n");
    p.loopx(&["run", "-n", "0", "ralph"]).stdout("").run();
    p.loopx(&["run", "-n", "0", "-e", "local.env", "ralph:index"])
        .stdout("")
        .run();
    assert!(log(&p).is_empty(), "no script may run with -n 0");
}

#[test]
fn n_zero_still_fails_on_a_missing_target() {
    // (what is missing, the target, what the error names)
    let cases: &[(&str, &str, &[&str])] = &[
        ("workflow", "nope", &["'nope'"]),
        ("script", "ralph:nope", &["'nope'"]),
        ("default entry point", "other", &["'other'", "index"]),
    ];
    for &(missing, target, names) in cases {
        let p = Project::new();
        p.script("ralph", "index.sh", &step("index", "")).script(
            "other",
            "check.sh",
            &step("check", ""),
        );
        let mut run = p.loopx(&["run", "-n", "0", target]).status(1).stdout("");
        for n in names {
            run = run.stderr_contains(n);
        }
        run.run();
        assert!(log(&p).is_empty(), "missing {missing}: nothing may run");
    }
}

#[test]
fn n_zero_still_fails_on_invalid_target() {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", ""));
    for target in ["", ":", ":index", "ralph:", "ralph:index:x", "bad name"] {
        p.loopx(&["run", "-n", "0", target])
            .status(1)
            .stdout("")
            .stderr_contains(&format!("'{target}'"))
            .run();
    }
    assert!(log(&p).is_empty());
}

#[test]
fn n_zero_still_fails_on_missing_env_file() {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", ""));
    p.loopx(&["run", "-n", "0", "-e", "missing.env", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains("missing.env")
        .run();
    assert!(log(&p).is_empty());
}

#[test]
fn n_zero_still_fails_on_validation_problems() {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", ""))
        // A same-base-name collision in a sibling workflow (§5.2, §5.4).
        .script("broken", "a.sh", "")
        .script("broken", "a.ts", "");
    p.loopx(&["run", "-n", "0", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains("broken")
        .run();
    // An invalid script name (§5.3).
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", ""))
        .script("ralph", "-bad.sh", "");
    p.loopx(&["run", "-n", "0", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains("-bad.sh")
        .run();
    assert!(log(&p).is_empty());
}

#[test]
fn n_zero_still_fails_without_loopx_dir() {
    let p = Project::bare();
    p.loopx(&["run", "-n", "0", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains(".loopx")
        .run();
}

#[test]
fn stop_beats_goto() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        &step("index", r#"{"result":"r","goto":"a","stop":true}"#),
    )
    .script("ralph", "a.sh", &step("a", ""));
    p.loopx(&["run", "ralph"]).stdout("").run();
    assert_eq!(log(&p), ["index<>"]);

    // With stop, the goto is not even validated.
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        &step("index", r#"{"goto":"::","stop":true}"#),
    );
    p.loopx(&["run", "ralph"]).stdout("").run();
    assert_eq!(log(&p), ["index<>"]);
}

#[test]
fn stop_true_ends_the_loop_with_exit_0() {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", &goto("a")))
        .script("ralph", "a.sh", &step("a", r#"{"stop":true}"#));
    p.loopx(&["run", "ralph"]).stdout("").run();
    assert_eq!(log(&p), ["index<>", "a<>"]);
}

#[test]
fn no_goto_resets_to_starting_target_after_a_chain() {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", &goto("a")))
        .script("ralph", "a.sh", &step("a", &goto("b")))
        .script("ralph", "b.sh", &step("b", r#"{"result":"from b"}"#));
    p.loopx(&["run", "-n", "6", "ralph"]).run();
    assert_eq!(log(&p), ["index<>", "a<>", "b<>", "index<>", "a<>", "b<>"]);
}

#[test]
fn run_bare_workflow_means_its_index() {
    let p = Project::new();
    p.script("ralph", "aaa.sh", &step("aaa", ""))
        .script("ralph", "index.sh", &step("index", ""));
    p.loopx(&["run", "-n", "2", "ralph"]).run();
    assert_eq!(log(&p), ["index<>", "index<>"]);
    clear_log(&p);
    p.loopx(&["run", "-n", "2", "ralph:index"]).run();
    assert_eq!(log(&p), ["index<>", "index<>"]);
}

#[test]
fn run_explicit_script_is_the_starting_target() {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", "")).script(
        "ralph",
        "check.sh",
        &step("check", &goto("index")),
    );
    p.loopx(&["run", "-n", "4", "ralph:check"]).run();
    assert_eq!(log(&p), ["check<>", "index<>", "check<>", "index<>"]);
}

#[test]
fn cross_workflow_goto_keeps_the_starting_target() {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("ralph:index", &goto("other:x")))
        .script("other", "x.sh", &step("other:x", ""))
        .script("other", "index.sh", &step("WRONG other:index", ""));
    p.loopx(&["run", "-n", "4", "ralph"]).run();
    assert_eq!(
        log(&p),
        ["ralph:index<>", "other:x<>", "ralph:index<>", "other:x<>"]
    );
}

/// A project where ralph:index goes to ralph:a, and ralph:a issues `value`.
fn failing_goto_project(value: &str) -> Project {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", &goto("a")))
        .script(
            "ralph",
            "a.sh",
            &step("a", &format!(r#"{{"result":"r","goto":"{value}"}}"#)),
        )
        .script("other", "x.sh", &step("other:x", ""));
    p
}

#[test]
fn goto_invalid_target_string_fails_at_transition_time() {
    for value in [
        "", ":", ":x", "other:", "a:b:c", "bad name", "-x", "other:-x", "-w:x",
    ] {
        let p = failing_goto_project(value);
        p.loopx(&["run", "ralph"])
            .status(1)
            .stdout("")
            .stderr_contains(&format!("'{value}'"))
            .stderr_contains("ralph:a")
            .run();
        assert_eq!(log(&p), ["index<>", "a<>"], "goto {value:?}");
    }
}

#[test]
fn goto_unknown_workflow_fails_at_transition_time() {
    let p = failing_goto_project("nope:x");
    p.loopx(&["run", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains("'nope:x'")
        .stderr_contains("ralph:a")
        .run();
    assert_eq!(log(&p), ["index<>", "a<>"]);
}

#[test]
fn goto_unknown_script_fails_at_transition_time() {
    for value in ["missing", "other:missing", "ralph:missing"] {
        let p = failing_goto_project(value);
        p.loopx(&["run", "ralph"])
            .status(1)
            .stdout("")
            .stderr_contains(&format!("'{value}'"))
            .stderr_contains("ralph:a")
            .run();
        assert_eq!(log(&p), ["index<>", "a<>"], "goto {value:?}");
    }
}

#[test]
fn script_exiting_non_zero_stops_the_loop_with_exit_1() {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", &goto("a")))
        .script(
            "ralph",
            "a.sh",
            "echo a >> \"$LOOPX_PROJECT_ROOT/log\"\necho 'a is failing' >&2\nexit 3\n",
        );
    p.loopx(&["run", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains("a is failing")
        .stderr_contains("ralph:a")
        .run();
    assert_eq!(log(&p), ["index<>", "a"]);
}

#[test]
fn stdout_of_a_failing_script_is_not_parsed() {
    // A goto it printed must not be followed.
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        "echo index >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '{\"goto\":\"b\"}'\nexit 1\n",
    )
    .script("ralph", "b.sh", &step("b", ""));
    p.loopx(&["run", "ralph"])
        .status(1)
        .stdout("")
        .stderr("loopx: error: script ralph:index exited with code 1; stopping the loop\n")
        .run();
    assert_eq!(log(&p), ["index"]);

    // A stop it printed does not turn the failure into a clean exit.
    let p = Project::new();
    p.script("ralph", "index.sh", "printf '{\"stop\":true}'\nexit 2\n");
    p.loopx(&["run", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains("ralph:index")
        .run();
}

#[test]
fn script_killed_by_a_signal_stops_the_loop_with_exit_1() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        "echo index >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '{\"goto\":\"index\"}'\nkill -KILL $$\n",
    );
    p.loopx(&["run", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains("ralph:index")
        .run();
    assert_eq!(log(&p), ["index"]);
}

#[test]
fn cli_never_prints_results_to_stdout() {
    // (script stdout, run flags, loopx's exit code)
    let cases: &[(&str, &[&str], i32)] = &[
        ("plain text result\n", &["-n", "2"], 0),
        (r#"{"result":"json result"}"#, &["-n", "2"], 0),
        (r#"{"result":"piped","goto":"end"}"#, &["-n", "2"], 0),
        (r#"{"result":"final","stop":true}"#, &[], 0),
        (r#"{"result":"before a bad goto","goto":"a:b:c"}"#, &[], 1),
        (r#"[1,2,3]"#, &["-n", "3"], 0),
    ];
    for &(stdout, flags, code) in cases {
        let p = Project::new();
        p.script("ralph", "index.sh", &step("index", stdout))
            .script("ralph", "end.sh", &step("end", r#"{"result":"end"}"#));
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.push("ralph");
        let run = p.loopx(&args).status(code).stdout("");
        // The bad goto is reported; nothing else is.
        let run = if code == 0 {
            run
        } else {
            run.stderr_contains("a:b:c")
        };
        run.run();
        assert!(!log(&p).is_empty(), "{stdout}: scripts ran");
    }
    // Nor the stdout of a failing script.
    let p = Project::new();
    p.script("ralph", "index.sh", "echo 'failing output'\nexit 1\n");
    p.loopx(&["run", "ralph"])
        .status(1)
        .stdout("")
        .stderr("loopx: error: script ralph:index exited with code 1; stopping the loop\n")
        .run();
}

// --------------------------------------------------- §2.3 structured output

/// ralph:index goes to ralph:a, which prints `stdout`; ralph:b is a decoy
/// that any `goto "b"` wrongly followed would reach.
fn output_project(stdout: &str) -> Project {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", &goto("a")))
        .script("ralph", "a.sh", &step("a", stdout))
        .script("ralph", "b.sh", &step("b", ""));
    p
}

/// Runs three iterations and checks that the one after `a` was a reset.
#[track_caller]
fn assert_resets_after(stdout: &str) {
    let p = output_project(stdout);
    p.loopx(&["run", "-n", "3", "ralph"]).stdout("").run();
    assert_eq!(
        log(&p),
        ["index<>", "a<>", "index<>"],
        "a printed {stdout:?}"
    );
}

#[test]
fn empty_stdout_resets_the_loop() {
    assert_resets_after("");
}

#[test]
fn non_json_stdout_is_a_raw_result() {
    for stdout in [
        "goto: b",
        "b",
        "b\n",
        r#"{"goto":"b""#,
        r#"{goto:"b"}"#,
        r#"{"goto":"b"} trailing"#,
        r#"{"goto":"b",}"#,
    ] {
        assert_resets_after(stdout);
    }
}

#[test]
fn json_object_without_known_fields_is_a_raw_result() {
    for stdout in [
        "{}",
        r#"{"Goto":"b"}"#,
        r#"{"next":"b","GOTO":"b"}"#,
        r#"{"data":{"goto":"b"}}"#,
    ] {
        assert_resets_after(stdout);
    }
}

#[test]
fn json_arrays_and_primitives_are_a_raw_result() {
    for stdout in [r#"[{"goto":"b"}]"#, r#""b""#, "42", "true", "null", r#"[]"#] {
        assert_resets_after(stdout);
    }
}

#[test]
fn non_string_result_is_coerced_with_string_and_piped() {
    for (json, expected) in [
        ("42", "42"),
        ("1.5e3", "1500"),
        ("-0", "0"),
        ("0.1", "0.1"),
        ("1e21", "1e+21"),
        ("null", "null"),
        ("true", "true"),
        ("false", "false"),
        (r#"{"a":1}"#, "[object Object]"),
        ("[1,[2,3],null]", "1,2,3,"),
        ("[]", ""),
        (r#""text""#, "text"),
    ] {
        let p = Project::new();
        p.script(
            "ralph",
            "index.sh",
            &format!("printf '%s' '{{\"result\":{json},\"goto\":\"b\"}}'\n"),
        )
        .script(
            "ralph",
            "b.sh",
            "cat > \"$LOOPX_PROJECT_ROOT/stdin\"\nprintf '{\"stop\":true}'\n",
        );
        p.loopx(&["run", "ralph"]).stdout("").run();
        assert_eq!(p.read("stdin"), expected, "result {json}");
    }
}

#[test]
fn non_string_goto_is_treated_as_absent() {
    for stdout in [
        r#"{"goto":5}"#,
        r#"{"goto":null}"#,
        r#"{"goto":true}"#,
        r#"{"goto":["b"]}"#,
        r#"{"goto":{"b":"b"}}"#,
        r#"{"result":"r","goto":7}"#,
    ] {
        assert_resets_after(stdout);
    }
}

#[test]
fn stop_other_than_boolean_true_is_ignored() {
    for stdout in [
        r#"{"stop":"true"}"#,
        r#"{"stop":"false"}"#,
        r#"{"stop":1}"#,
        r#"{"stop":null}"#,
        r#"{"stop":[true]}"#,
        r#"{"stop":false}"#,
    ] {
        assert_resets_after(stdout);
    }
}

#[test]
fn extra_json_fields_are_ignored() {
    let p = output_project(r#"{"goto":"b","GOTO":"index","extra":{"stop":true},"Stop":true}"#);
    p.loopx(&["run", "-n", "3", "ralph"]).run();
    assert_eq!(log(&p), ["index<>", "a<>", "b<>"]);
}

#[test]
fn result_is_piped_only_along_goto() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        &step("index", r#"{"result":"R1","goto":"b"}"#),
    )
    .script("ralph", "b.sh", &step("b", r#"{"result":"R2"}"#));
    p.loopx(&["run", "-n", "4", "ralph"]).run();
    assert_eq!(log(&p), ["index<>", "b<R1>", "index<>", "b<R1>"]);
}

#[test]
fn goto_without_result_gives_the_target_empty_stdin() {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", &goto("b")))
        .script("ralph", "b.sh", &step("b", ""));
    // loopx's own stdin never reaches a script.
    p.loopx(&["run", "-n", "2", "ralph"])
        .stdin(b"LEAKED\n")
        .run();
    assert_eq!(log(&p), ["index<>", "b<>"]);
}

#[test]
fn first_and_reset_iterations_get_empty_stdin() {
    let p = Project::new();
    p.script("ralph", "index.sh", &step("index", "raw result"));
    p.loopx(&["run", "-n", "3", "ralph"])
        .stdin(b"LEAKED\n")
        .run();
    assert_eq!(log(&p), ["index<>", "index<>", "index<>"]);
}

#[test]
fn result_is_piped_byte_for_byte() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        r#"printf '%s' '{"result":"line 1\nline 2\n\ttab \"q\" \u00e9\u2603 \\\n\n","goto":"b"}'"#,
    )
    .script(
        "ralph",
        "b.sh",
        "cat > \"$LOOPX_PROJECT_ROOT/stdin\"\nprintf '{\"stop\":true}'\n",
    );
    p.loopx(&["run", "ralph"]).run();
    assert_eq!(p.read("stdin"), "line 1\nline 2\n\ttab \"q\" é☃ \\\n\n");
}

#[test]
fn a_large_result_of_varied_bytes_is_piped_byte_for_byte() {
    // ~2.6 MB in writes of all sizes: every chunk must land in order,
    // wherever loopx reads it into (process.rs read_available).
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        "printf '{\"goto\":\"b\",\"result\":\"'\nseq 1 400000 | tr '\\n' ' '\nprintf '\"}'\n",
    )
    .script(
        "ralph",
        "b.sh",
        "cat > \"$LOOPX_PROJECT_ROOT/stdin\"\nprintf '{\"stop\":true}'\n",
    );
    p.loopx(&["run", "ralph"]).run();
    let expected: String = (1..=400000).map(|i| format!("{i} ")).collect();
    assert!(p.read("stdin") == expected, "the piped result differs");
}

const EIGHT_MIB: usize = 8 * 1024 * 1024;

/// ralph:index emits an 8 MiB result with a goto to ralph:b.
fn large_result_project(b_body: &str) -> Project {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        &format!(
            "printf '{{\"goto\":\"b\",\"result\":\"'\nhead -c {EIGHT_MIB} /dev/zero | tr '\\0' x\nprintf '\"}}'\n"
        ),
    )
    .script("ralph", "b.sh", b_body);
    p
}

#[test]
fn large_result_to_a_script_that_never_reads_stdin_does_not_deadlock() {
    let p =
        large_result_project("echo b >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '{\"stop\":true}'\n");
    p.loopx(&["run", "ralph"]).stdout("").run();
    assert_eq!(log(&p), ["b"]);

    // The target writes a lot of stdout before (never) reading stdin: loopx
    // must drain stdout while stdin is still pending.
    let p = large_result_project(
        "printf '{\"stop\":true,\"result\":\"'\nhead -c 4194304 /dev/zero | tr '\\0' y\nprintf '\"}'\necho b >> \"$LOOPX_PROJECT_ROOT/log\"\n",
    );
    p.loopx(&["run", "ralph"]).stdout("").run();
    assert_eq!(log(&p), ["b"]);
}

#[test]
fn large_result_is_piped_whole() {
    let p = large_result_project(
        "tr -d x | wc -c > \"$LOOPX_PROJECT_ROOT/rest\"\nprintf '{\"stop\":true}'\n",
    );
    p.loopx(&["run", "ralph"]).run();
    // Every byte was an 'x', and nothing else came through.
    assert_eq!(p.read("rest").trim(), "0");
    let p =
        large_result_project("wc -c > \"$LOOPX_PROJECT_ROOT/size\"\nprintf '{\"stop\":true}'\n");
    p.loopx(&["run", "ralph"]).run();
    assert_eq!(p.read("size").trim(), EIGHT_MIB.to_string());
}

#[test]
fn loopx_output_helper_drives_the_loop() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        "set -e\necho index >> \"$LOOPX_PROJECT_ROOT/log\"\n\"$LOOPX_BIN\" output --result \"hello world\" --goto next\n",
    )
    .script(
        "ralph",
        "next.sh",
        "set -e\necho \"next<$(cat)>\" >> \"$LOOPX_PROJECT_ROOT/log\"\n$LOOPX_BIN output --goto other:last\n",
    )
    .script(
        "other",
        "last.sh",
        "set -e\necho \"last<$(cat)>\" >> \"$LOOPX_PROJECT_ROOT/log\"\n$LOOPX_BIN output --result ignored --stop\n",
    );
    p.loopx(&["run", "ralph"]).stdout("").run();
    assert_eq!(log(&p), ["index", "next<hello world>", "last<>"]);
}

#[test]
fn loopx_output_goto_is_validated_only_by_the_loop() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        "set -e\n\"$LOOPX_BIN\" output --goto 'a:b:c'\necho index >> \"$LOOPX_PROJECT_ROOT/log\"\n",
    );
    p.loopx(&["run", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains("'a:b:c'")
        .stderr_contains("ralph:index")
        .run();
    // `loopx output` succeeded, so the script went on to log.
    assert_eq!(log(&p), ["index"]);
}

// ------------------------------------------------------ §6 bash execution

#[test]
fn script_cwd_is_the_workflow_directory() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        "pwd -P >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '{\"goto\":\"other:x\"}'\n",
    )
    .script("other", "x.sh", "pwd -P >> \"$LOOPX_PROJECT_ROOT/log\"\n");
    p.loopx(&["run", "-n", "2", "ralph"]).run();
    let ralph = fs::canonicalize(p.path(".loopx/ralph")).expect("canonicalize");
    let other = fs::canonicalize(p.path(".loopx/other")).expect("canonicalize");
    assert_eq!(
        log(&p),
        [ralph.display().to_string(), other.display().to_string()]
    );
}

#[test]
fn script_stderr_passes_through_unchanged() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        "printf 'first line\\n\\tindented \\303\\251\\n' >&2\nprintf '{\"goto\":\"b\"}'\n",
    )
    .script(
        "ralph",
        "b.sh",
        "printf 'no trailing newline' >&2\nprintf '{\"stop\":true}'\n",
    );
    p.loopx(&["run", "ralph"])
        .stdout("")
        .stderr("first line\n\tindented é\nno trailing newline")
        .run();
}

#[test]
fn script_runs_with_bin_bash_without_exec_bit_or_shebang() {
    let p = Project::new();
    // Bash-only syntax, no shebang, mode 0644.
    p.script(
        "ralph",
        "index.sh",
        "declare -A m=([k]=bash)\n[[ -n $BASH_VERSION ]] && echo \"${m[k]}\" >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '{\"goto\":\"b\"}'\n",
    )
    // A shebang naming another interpreter, executable: still run by bash.
    .script(
        "ralph",
        "b.sh",
        "#!/bin/false\n[[ -n $BASH_VERSION ]] && echo b >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '{\"stop\":true}'\n",
    );
    let index = p.path(".loopx/ralph/index.sh");
    fs::set_permissions(&index, fs::Permissions::from_mode(0o644)).expect("chmod");
    let b = p.path(".loopx/ralph/b.sh");
    fs::set_permissions(&b, fs::Permissions::from_mode(0o755)).expect("chmod");
    p.loopx(&["run", "ralph"]).run();
    assert_eq!(log(&p), ["bash", "b"]);
}

#[test]
fn loopx_bin_is_the_realpath_of_the_binary() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        "set -e\nprintf '%s\\n' \"$LOOPX_BIN\" >> \"$LOOPX_PROJECT_ROOT/log\"\n\"$LOOPX_BIN\" version >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '{\"stop\":true}'\n",
    );
    let real = fs::canonicalize(loopx_bin()).expect("canonicalize binary");
    let expected = [
        real.display().to_string(),
        env!("CARGO_PKG_VERSION").to_string(),
    ];
    p.loopx(&["run", "ralph"]).run();
    assert_eq!(log(&p), expected);

    // Started through a symlink, LOOPX_BIN is still the resolved binary.
    clear_log(&p);
    let link_dir = TempDir::new("bin-link");
    let link = link_dir.path().join("loopx-link");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    p.loopx_at(&link, &["run", "ralph"]).run();
    assert_eq!(log(&p), expected);
}

#[test]
fn loopx_project_root_is_the_project_root() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        "printf '%s\\n' \"$LOOPX_PROJECT_ROOT\" > \"$LOOPX_PROJECT_ROOT/root\"\nprintf '{\"stop\":true}'\n",
    );
    p.loopx(&["run", "ralph"]).run();
    assert_eq!(p.read("root"), format!("{}\n", p.root().display()));
}

#[test]
fn loopx_workflow_is_the_current_scripts_workflow() {
    let p = Project::new();
    let log_workflow = |stdout: &str| {
        format!(
            "echo \"$LOOPX_WORKFLOW\" >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '%s' {}\n",
            sh_quote(stdout)
        )
    };
    p.script("ralph", "index.sh", &log_workflow(&goto("other:x")))
        .script("other", "x.sh", &log_workflow(&goto("y")))
        .script("other", "y.sh", &log_workflow(""));
    p.loopx(&["run", "-n", "4", "ralph"]).run();
    assert_eq!(log(&p), ["ralph", "other", "other", "ralph"]);
}

#[test]
fn each_script_runs_in_its_own_process_group() {
    let p = Project::new();
    // pid, its pgid, the pgid of a child of the script, loopx's pgid.
    p.script(
        "ralph",
        "index.sh",
        "echo $$ $(ps -o pgid= $$) $(bash -c 'ps -o pgid= $$') $(ps -o pgid= $PPID) >> \"$LOOPX_PROJECT_ROOT/log\"\n",
    );
    p.loopx(&["run", "-n", "2", "ralph"]).run();
    let lines = log(&p);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let mut pids = Vec::new();
    for line in &lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 4, "{line}");
        let (pid, pgid, child_pgid, loopx_pgid) = (f[0], f[1], f[2], f[3]);
        assert_eq!(pgid, pid, "the script leads its own group: {line}");
        assert_eq!(child_pgid, pgid, "its children share the group: {line}");
        assert_ne!(loopx_pgid, pgid, "not loopx's group: {line}");
        pids.push(pid.to_string());
    }
    assert_ne!(pids[0], pids[1], "one group per script execution");
}

// ------------------------------------------------------------ the demo

#[test]
fn bundled_demo_workflow_shows_goto_piping_and_stop() {
    // README set-up command: `loopx run demo` from a fresh clone. It must
    // stop by itself, log its steps on stderr and print nothing on stdout.
    let p = Project::new();
    let repo_demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".loopx/demo");
    p.dir(".loopx/demo");
    for entry in fs::read_dir(&repo_demo).expect("read .loopx/demo") {
        let entry = entry.expect("entry");
        fs::copy(entry.path(), p.path(".loopx/demo").join(entry.file_name()))
            .expect("copy demo script");
    }
    p.loopx(&["run", "demo"])
        .timeout(std::time::Duration::from_secs(30))
        .stdout("")
        .stderr(
            "[demo:index] starting a countdown from 3\n\
             [demo:countdown] got 3 on stdin\n\
             [demo:countdown] got 2 on stdin\n\
             [demo:countdown] got 1 on stdin\n\
             [demo:finish] liftoff! stopping the loop\n",
        )
        .run();
}

#[test]
fn deeply_nested_result_is_coerced_without_crashing() {
    // JSON.parse accepts any depth; String([[[...]]]) is "". 200k levels
    // would overflow a recursive parser's stack.
    let depth = 200_000;
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        &format!(
            "printf '{{\"goto\":\"b\",\"result\":'\nhead -c {depth} /dev/zero | tr '\\0' '['\n\
             head -c {depth} /dev/zero | tr '\\0' ']'\nprintf '}}'\n"
        ),
    )
    .script("ralph", "b.sh", &step("b", r#"{"stop":true}"#));
    p.loopx(&["run", "ralph"]).stdout("").run();
    assert_eq!(log(&p), ["b<>"]);

    // Unclosed, it is not JSON: a raw result, so no goto and a reset.
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        &format!(
            "echo index >> \"$LOOPX_PROJECT_ROOT/log\"\n\
             printf '{{\"goto\":\"b\",\"result\":'\nhead -c {depth} /dev/zero | tr '\\0' '['\n"
        ),
    )
    .script("ralph", "b.sh", &step("b", ""));
    p.loopx(&["run", "-n", "2", "ralph"]).stdout("").run();
    assert_eq!(log(&p), ["index", "index"]);
}
