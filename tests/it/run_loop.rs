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

/// A loop over logging scripts: each of `scripts` is (`workflow:script`,
/// what it prints), and logs `workflow:script<stdin>`; after `loopx run
/// <args>` (exit 0, nothing on stdout or stderr) the log must be `log`.
struct LoopCase {
    /// The spec clause, shown when the case fails.
    clause: &'static str,
    scripts: &'static [(&'static str, &'static str)],
    args: &'static [&'static str],
    log: &'static [&'static str],
}

fn loop_project(scripts: &[(&str, &str)]) -> Project {
    let p = Project::new();
    for (target, stdout) in scripts {
        let (workflow, script) = target.split_once(':').expect("workflow:script");
        p.script(workflow, &format!("{script}.sh"), &step(target, stdout));
    }
    p
}

#[track_caller]
fn check_loop_cases(cases: &[LoopCase]) {
    for c in cases {
        let p = loop_project(c.scripts);
        let mut args = vec!["run"];
        args.extend_from_slice(c.args);
        let out = p.loopx(&args).stdout("").run();
        assert_eq!(log(&p), c.log, "{}\n{out}", c.clause);
    }
}

#[test]
fn goto_targets_resolve_as_section_2_2_says() {
    // Decoys (never in the expected log) stand where a wrong reading of the
    // goto would land.
    check_loop_cases(&[
        LoopCase {
            clause: "§2.2: a bare goto names a script of the current workflow",
            scripts: &[
                ("ralph:index", r#"{"goto":"check-ready"}"#),
                ("ralph:check-ready", ""),
                ("check-ready:index", ""),
            ],
            args: &["-n", "2", "ralph"],
            log: &["ralph:index<>", "ralph:check-ready<>"],
        },
        LoopCase {
            clause: "§2.2: a qualified goto into the same workflow equals the bare one",
            scripts: &[
                ("ralph:index", r#"{"goto":"ralph:check-ready"}"#),
                ("ralph:check-ready", ""),
            ],
            args: &["-n", "3", "ralph"],
            log: &["ralph:index<>", "ralph:check-ready<>", "ralph:index<>"],
        },
        LoopCase {
            clause: "§2.2: after a cross-workflow goto, a bare goto stays in the new workflow",
            scripts: &[
                ("ralph:index", r#"{"goto":"other:a"}"#),
                ("ralph:b", ""),
                ("other:a", r#"{"goto":"b"}"#),
                ("other:b", ""),
            ],
            args: &["-n", "3", "ralph"],
            log: &["ralph:index<>", "other:a<>", "other:b<>"],
        },
        LoopCase {
            clause: "§2.2: another workflow's index is reached by its qualified form",
            scripts: &[
                ("ralph:index", r#"{"goto":"other:index"}"#),
                ("other:index", ""),
            ],
            args: &["-n", "2", "ralph"],
            log: &["ralph:index<>", "other:index<>"],
        },
        LoopCase {
            clause: "§2.2: a self-goto is an iteration and pipes its result",
            scripts: &[("ralph:index", r#"{"result":"again","goto":"index"}"#)],
            args: &["-n", "3", "ralph"],
            log: &["ralph:index<>", "ralph:index<again>", "ralph:index<again>"],
        },
        LoopCase {
            clause: "§2.2: without a goto the loop resets to the starting target",
            scripts: &[
                ("ralph:index", r#"{"goto":"a"}"#),
                ("ralph:a", r#"{"goto":"b"}"#),
                ("ralph:b", r#"{"result":"from b"}"#),
            ],
            args: &["-n", "6", "ralph"],
            log: &[
                "ralph:index<>",
                "ralph:a<>",
                "ralph:b<>",
                "ralph:index<>",
                "ralph:a<>",
                "ralph:b<>",
            ],
        },
        LoopCase {
            clause: "§2.2: a cross-workflow goto keeps the starting target",
            scripts: &[
                ("ralph:index", r#"{"goto":"other:x"}"#),
                ("other:x", ""),
                ("other:index", ""),
            ],
            args: &["-n", "4", "ralph"],
            log: &["ralph:index<>", "other:x<>", "ralph:index<>", "other:x<>"],
        },
        LoopCase {
            clause: "§2.1, §4.1: `run <workflow>` starts at its index",
            scripts: &[("ralph:aaa", ""), ("ralph:index", "")],
            args: &["-n", "2", "ralph"],
            log: &["ralph:index<>", "ralph:index<>"],
        },
        LoopCase {
            clause: "§4.1: `run <workflow>:index` is the same",
            scripts: &[("ralph:aaa", ""), ("ralph:index", "")],
            args: &["-n", "2", "ralph:index"],
            log: &["ralph:index<>", "ralph:index<>"],
        },
        LoopCase {
            clause: "§4.1: `run <workflow>:<script>` is the starting target",
            scripts: &[("ralph:index", ""), ("ralph:check", r#"{"goto":"index"}"#)],
            args: &["-n", "4", "ralph:check"],
            log: &[
                "ralph:check<>",
                "ralph:index<>",
                "ralph:check<>",
                "ralph:index<>",
            ],
        },
    ]);
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
fn stop_and_the_n_limit_end_the_loop_before_the_goto_is_resolved() {
    check_loop_cases(&[
        LoopCase {
            clause: "§7.1: -n reached (step 10) comes before goto validation (step 11)",
            scripts: &[("ralph:index", r#"{"goto":"a:b:c"}"#)],
            args: &["-n", "1", "ralph"],
            log: &["ralph:index<>"],
        },
        LoopCase {
            clause: "§2.3: stop beats goto",
            scripts: &[
                ("ralph:index", r#"{"result":"r","goto":"a","stop":true}"#),
                ("ralph:a", ""),
            ],
            args: &["ralph"],
            log: &["ralph:index<>"],
        },
        LoopCase {
            clause: "§2.3: with stop, the goto is not even validated",
            scripts: &[("ralph:index", r#"{"goto":"::","stop":true}"#)],
            args: &["ralph"],
            log: &["ralph:index<>"],
        },
        LoopCase {
            clause: "§2.3: stop true ends the loop with exit 0",
            scripts: &[
                ("ralph:index", r#"{"goto":"a"}"#),
                ("ralph:a", r#"{"stop":true}"#),
            ],
            args: &["ralph"],
            log: &["ralph:index<>", "ralph:a<>"],
        },
    ]);
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
fn n_zero_still_validates_the_run_as_section_7_1_says() {
    // §7.1, §4.2: -n 0 runs nothing, but everything before the first
    // iteration is still checked: exit 1, nothing on stdout, the error
    // naming the problem, and no script run.
    fn good() -> Project {
        let p = Project::new();
        p.script("ralph", "index.sh", &step("index", "")).script(
            "other",
            "check.sh",
            &step("check", ""),
        );
        p
    }
    fn collision() -> Project {
        let p = good();
        p.script("broken", "a.sh", "").script("broken", "a.ts", "");
        p
    }
    fn bad_script_name() -> Project {
        let p = good();
        p.script("ralph", "-bad.sh", "");
        p
    }
    // (the clause, the project, the arguments after `run -n 0`, what the
    // error names)
    type Case = (
        &'static str,
        fn() -> Project,
        &'static [&'static str],
        &'static [&'static str],
    );
    let cases: &[Case] = &[
        ("§4.1: a missing workflow", good, &["nope"], &["'nope'"]),
        ("§4.1: a missing script", good, &["ralph:nope"], &["'nope'"]),
        (
            "§2.1: a missing default entry point",
            good,
            &["other"],
            &["'other'", "index"],
        ),
        ("§4.1: an empty target", good, &[""], &["''"]),
        ("§4.1: target ':'", good, &[":"], &["':'"]),
        ("§4.1: target ':index'", good, &[":index"], &["':index'"]),
        ("§4.1: target 'ralph:'", good, &["ralph:"], &["'ralph:'"]),
        (
            "§4.1: target 'ralph:index:x'",
            good,
            &["ralph:index:x"],
            &["'ralph:index:x'"],
        ),
        (
            "§4.1: target 'bad name'",
            good,
            &["bad name"],
            &["'bad name'"],
        ),
        (
            "§8.2: a missing -e file",
            good,
            &["-e", "missing.env", "ralph"],
            &["missing.env"],
        ),
        (
            "§5.2, §5.4: a collision in a sibling workflow",
            collision,
            &["ralph"],
            &["broken"],
        ),
        (
            "§5.3: an invalid script name",
            bad_script_name,
            &["ralph"],
            &["-bad.sh"],
        ),
        (
            "§5.1: no .loopx directory",
            Project::bare,
            &["ralph"],
            &[".loopx"],
        ),
    ];
    for &(clause, project, args, names) in cases {
        let p = project();
        let mut argv = vec!["run", "-n", "0"];
        argv.extend_from_slice(args);
        let mut run = p.loopx(&argv).status(1).stdout("");
        for n in names {
            run = run.stderr_contains(n);
        }
        let out = run.run();
        assert!(log(&p).is_empty(), "{clause}: nothing may run\n{out}");
    }
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
        .script("other", "x.sh", &step("other:x", ""))
        .script("other", "index.sh", &step("other:index", ""));
    p
}

#[test]
fn a_bad_goto_fails_at_transition_time() {
    // §2.2, §7.1 step 11, §7.2: a goto is resolved when it is followed; one
    // that is invalid or names nothing stops the loop with exit 1, the
    // error naming the goto and the script that issued it.
    let cases: &[(&str, &str)] = &[
        ("§2.2: an empty goto", ""),
        ("§2.2: goto ':'", ":"),
        ("§2.2: goto ':x'", ":x"),
        ("§2.2: goto 'other:'", "other:"),
        ("§2.2: goto 'a:b:c'", "a:b:c"),
        ("§5.3: goto 'bad name'", "bad name"),
        ("§5.3: goto '-x'", "-x"),
        ("§5.3: goto 'other:-x'", "other:-x"),
        ("§5.3: goto '-w:x'", "-w:x"),
        ("§2.2: an unknown workflow", "nope:x"),
        ("§2.2: an unknown script", "missing"),
        (
            "§2.2: an unknown script of another workflow",
            "other:missing",
        ),
        ("§2.2: an unknown script, qualified", "ralph:missing"),
        (
            "§2.2: a bare workflow name is a script of the current one",
            "other",
        ),
    ];
    for &(clause, value) in cases {
        let p = failing_goto_project(value);
        let out = p
            .loopx(&["run", "ralph"])
            .status(1)
            .stdout("")
            .stderr_contains(&format!("'{value}'"))
            .stderr_contains("ralph:a")
            .run();
        assert_eq!(log(&p), ["index<>", "a<>"], "{clause}\n{out}");
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

#[test]
fn output_that_is_not_a_transition_resets_the_loop() {
    // §2.3: only a JSON object's boolean `stop: true` and string `goto`
    // are transitions; anything else is a raw result, and the next
    // iteration is a reset to the starting target (never the decoy ralph:b
    // a `goto "b"` wrongly followed would reach). Three iterations.
    let cases: &[(&str, &[&str])] = &[
        ("empty stdout", &[""]),
        (
            "stdout that is not JSON",
            &[
                "goto: b",
                "b",
                "b\n",
                r#"{"goto":"b""#,
                r#"{goto:"b"}"#,
                r#"{"goto":"b"} trailing"#,
                r#"{"goto":"b",}"#,
            ],
        ),
        (
            "a JSON object without the known fields (case matters)",
            &[
                "{}",
                r#"{"Goto":"b"}"#,
                r#"{"next":"b","GOTO":"b"}"#,
                r#"{"data":{"goto":"b"}}"#,
            ],
        ),
        (
            "JSON arrays and primitives",
            &[r#"[{"goto":"b"}]"#, r#""b""#, "42", "true", "null", r#"[]"#],
        ),
        (
            "a goto that is not a string is absent",
            &[
                r#"{"goto":5}"#,
                r#"{"goto":null}"#,
                r#"{"goto":true}"#,
                r#"{"goto":["b"]}"#,
                r#"{"goto":{"b":"b"}}"#,
                r#"{"result":"r","goto":7}"#,
            ],
        ),
        (
            "a stop other than boolean true is ignored",
            &[
                r#"{"stop":"true"}"#,
                r#"{"stop":"false"}"#,
                r#"{"stop":1}"#,
                r#"{"stop":null}"#,
                r#"{"stop":[true]}"#,
                r#"{"stop":false}"#,
            ],
        ),
    ];
    for &(clause, outputs) in cases {
        for stdout in outputs {
            let p = output_project(stdout);
            let out = p.loopx(&["run", "-n", "3", "ralph"]).stdout("").run();
            assert_eq!(
                log(&p),
                ["index<>", "a<>", "index<>"],
                "§2.3, {clause}: a printed {stdout:?}\n{out}"
            );
        }
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
