//! The command-line grammar against the real binary: `run` targets and
//! options (§4.1, §4.2), `version` and `output` (§4.3), the three help forms
//! (§11) and the exit codes and usage errors (§12).

use std::io::ErrorKind;
use std::net::TcpListener;

use crate::util::*;

const STOP: &str = r#"{"stop":true}"#;
const TOP_HELP: &str = "loopx --help";
const RUN_HELP: &str = "loopx run --help";
const INSTALL_HELP: &str = "loopx install --help";
const OUTPUT_HELP: &str = "loopx output --help";

/// `.loopx/ralph/` with `index` and `check-ready`, each logging its name and
/// stopping the loop.
fn ralph() -> Project {
    let p = Project::new();
    p.script("ralph", "index.sh", &logging_script("ralph:index", STOP))
        .script(
            "ralph",
            "check-ready.sh",
            &logging_script("ralph:check-ready", STOP),
        );
    p
}

/// Adds a workflow whose discovery produces a collision: any command that
/// discovers prints about it, so a silent stderr proves no discovery ran.
fn break_discovery(p: &Project) {
    p.script("broken", "check.sh", "")
        .script("broken", "check.ts", "");
}

fn log(p: &Project) -> String {
    if p.exists("log") {
        p.read("log")
    } else {
        String::new()
    }
}

/// Whether some line of `text` starts (after indentation) with `word`
/// followed by a space or the end of the line.
fn lists_command(text: &str, word: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim_start();
        l == word || l.starts_with(&format!("{word} "))
    })
}

fn top_help() -> String {
    Project::bare()
        .loopx(&["--help"])
        .stdout_contains("\nUsage:\n  loopx <command>")
        .run()
        .stdout
}

fn run_help(p: &Project) -> String {
    p.loopx(&["run", "--help"])
        .stdout_contains("Usage: loopx run ")
        .run()
        .stdout
}

// ---------------------------------------------------------------- §4.1

#[test]
fn run_bare_workflow_runs_its_index_script() {
    let p = ralph();
    p.loopx(&["run", "ralph"]).stdout("").run();
    assert_eq!(log(&p), "ralph:index\n");
}

#[test]
fn run_workflow_colon_script_runs_that_script() {
    let p = ralph();
    p.loopx(&["run", "ralph:check-ready"]).stdout("").run();
    assert_eq!(log(&p), "ralph:check-ready\n");
}

#[test]
fn run_workflow_colon_index_is_the_same_as_the_bare_workflow() {
    let p = ralph();
    p.loopx(&["run", "ralph:index"]).run();
    p.loopx(&["run", "ralph"]).run();
    assert_eq!(log(&p), "ralph:index\nralph:index\n");
}

#[test]
fn run_without_target_is_a_usage_error_without_discovery() {
    // In a project whose .loopx/ would fail validation and in one without
    // .loopx/: the missing target is reported, nothing about .loopx/.
    let broken = ralph();
    break_discovery(&broken);
    let bare = Project::bare();
    for p in [&broken, &bare] {
        for args in [&["run"][..], &["run", "-n", "5"], &["run", "-e", "x.env"]] {
            p.loopx(args)
                .usage_error("target", RUN_HELP)
                .stderr_lacks("check")
                .stderr_lacks(".loopx")
                .run();
        }
    }
    assert_eq!(log(&broken), "");
}

#[test]
fn run_with_more_than_one_positional_is_a_usage_error() {
    let p = ralph();
    p.loopx(&["run", "ralph", "bar"])
        .usage_error("bar", RUN_HELP)
        .stderr_contains("ralph")
        .run();
    p.loopx(&["run", "-n", "1", "ralph", "ralph:check-ready"])
        .usage_error("ralph:check-ready", RUN_HELP)
        .run();
    assert_eq!(log(&p), "");
}

#[test]
fn bare_loopx_shows_top_level_help_without_discovery() {
    let p = ralph();
    break_discovery(&p);
    p.loopx(&[]).stdout(&top_help()).run();
    assert_eq!(log(&p), "");
}

#[test]
fn unknown_subcommand_is_a_usage_error() {
    let p = Project::bare();
    p.loopx(&["foo"]).usage_error("'foo'", TOP_HELP).run();
    p.loopx(&["foo", "ralph", "-n", "1"])
        .usage_error("'foo'", TOP_HELP)
        .run();
}

#[test]
fn workflow_name_in_subcommand_position_is_not_run_implicitly() {
    let p = ralph();
    p.loopx(&["ralph"]).usage_error("'ralph'", TOP_HELP).run();
    p.loopx(&["ralph:index"])
        .usage_error("'ralph:index'", TOP_HELP)
        .run();
    assert_eq!(log(&p), "");
}

#[test]
fn unknown_subcommand_followed_by_help_flag_is_an_error_not_help() {
    let p = Project::bare();
    p.loopx(&["foo", "-h"]).usage_error("'foo'", TOP_HELP).run();
    p.loopx(&["foo", "--help"])
        .usage_error("'foo'", TOP_HELP)
        .run();
}

#[test]
fn run_default_runs_the_workflow_named_default() {
    let p = Project::new();
    p.script(
        "default",
        "index.sh",
        &logging_script("default:index", STOP),
    );
    p.loopx(&["run", "default"]).stdout("").run();
    assert_eq!(log(&p), "default:index\n");
}

#[test]
fn workflows_named_like_subcommands_run_the_workflow() {
    let p = Project::new();
    let names = [
        "version",
        "run",
        "output",
        "env",
        "install",
        "status",
        "resume",
        "completions",
    ];
    for name in names {
        p.script(name, "index.sh", &logging_script(name, STOP));
    }
    for name in names {
        p.loopx(&["run", name]).stdout("").run();
    }
    assert_eq!(log(&p), names.map(|n| format!("{n}\n")).concat());
}

// ---------------------------------------------------------------- §4.2 top level

#[test]
fn top_level_help_flags_print_top_help_without_discovery() {
    let p = ralph();
    break_discovery(&p);
    let expected = top_help();
    for args in [&["-h"][..], &["--help"]] {
        p.loopx(args).stdout(&expected).run();
    }
}

#[test]
fn top_level_help_wins_over_everything_after_it() {
    let p = ralph();
    break_discovery(&p);
    let expected = top_help();
    for args in [
        &["-h", "run", "ralph"][..],
        &["--help", "run", "ralph"],
        &["-h", "run", "-h"],
        &["-h", "foo"],
        &["-h", "--unknown"],
        &["-h", "-n", "5", "ralph"],
        &["--help", "install"],
        &["-h", "version"],
    ] {
        // Top-level help, not run help, and no discovery (the collision in
        // `broken` would otherwise be reported).
        p.loopx(args).stdout(&expected).run();
    }
    assert_eq!(log(&p), "");
}

#[test]
fn unknown_top_level_flag_is_a_usage_error() {
    let p = ralph();
    p.loopx(&["--unknown"])
        .usage_error("--unknown", TOP_HELP)
        .run();
    p.loopx(&["--unknown", "run", "ralph"])
        .usage_error("--unknown", TOP_HELP)
        .run();
    p.loopx(&["-x"]).usage_error("-x", TOP_HELP).run();
    assert_eq!(log(&p), "");
}

/// §4.2 keeps `--version`, `-V` and `help` errors; the message says what
/// to type instead.
#[test]
fn version_and_help_habits_are_usage_errors_that_say_what_to_type() {
    let p = Project::bare();
    for habit in ["--version", "-V"] {
        p.loopx(&[habit])
            .usage_error("run: loopx version", TOP_HELP)
            .stdout("")
            .run();
    }
    p.loopx(&["help"])
        .usage_error("for help, run: loopx -h", TOP_HELP)
        .stdout("")
        .run();
}

#[test]
fn top_help_says_how_bash_scripts_give_output_and_lists_the_exit_codes() {
    let help = top_help();
    for needle in ["$LOOPX_BIN output", "\"result\"", "\"goto\"", "\"stop\""] {
        assert!(help.contains(needle), "{needle} in\n{help}");
    }
    // §12 and DESIGN.md "Beyond the spec": every exit code loopx has, one a
    // line under "Exit codes:".
    let codes = help
        .split("\nExit codes:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no exit codes in\n{help}"));
    let listed: Vec<&str> = codes
        .lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(listed, ["0", "1", "75", "124", "128+N"], "{help}");
}

#[test]
fn top_level_n_is_a_usage_error() {
    let p = ralph();
    p.loopx(&["-n", "5", "ralph"])
        .usage_error("-n", RUN_HELP)
        .run();
    assert_eq!(log(&p), "");
}

#[test]
fn top_level_e_is_a_usage_error() {
    let p = ralph();
    p.file(".env", "X=1\n");
    p.loopx(&["-e", ".env", "ralph"])
        .usage_error("-e", RUN_HELP)
        .run();
    assert_eq!(log(&p), "");
}

// ---------------------------------------------------------------- §4.2 run options

/// `.loopx/tick/index.sh`: logs `tick` and never stops on its own.
fn ticking() -> Project {
    let p = Project::new();
    p.script("tick", "index.sh", &logging_script("tick", ""));
    p
}

#[test]
fn run_options_and_target_may_appear_in_any_order() {
    for args in [
        &["run", "-n", "2", "tick"][..],
        &["run", "tick", "-n", "2"],
        &["run", "-n2", "tick"],
        &["run", "-e", "vars.env", "tick", "-n", "2"],
        &["run", "tick", "-n", "2", "-e", "vars.env"],
    ] {
        let p = ticking();
        p.file("vars.env", "X=1\n");
        p.loopx(args).stdout("").run();
        assert_eq!(log(&p), "tick\ntick\n", "{args:?}");
    }
}

#[test]
fn run_e_option_value_is_the_env_file_to_load() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo \"$FROM_FILE\" >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '{\"stop\":true}'\n",
    );
    p.file("local.env", "FROM_FILE=hello\n");
    p.loopx(&["run", "w", "-e", "local.env"]).run();
    assert_eq!(log(&p), "hello\n");
}

#[test]
fn run_n_zero_validates_the_target_but_runs_nothing() {
    let p = ticking();
    p.loopx(&["run", "-n", "0", "tick"]).stdout("").run();
    assert_eq!(log(&p), "");
    // Validation still happens.
    p.loopx(&["run", "-n", "0", "nope"])
        .status(1)
        .stdout("")
        .stderr_contains("'nope'")
        .run();
}

#[test]
fn run_n_accepts_non_negative_integers() {
    let p = ticking();
    p.loopx(&["run", "-n", "3", "tick"]).run();
    assert_eq!(log(&p), "tick\ntick\ntick\n");
}

#[test]
fn run_n_rejects_negative_and_non_integer_values() {
    let p = ticking();
    for bad in ["-1", "1.5", "abc", "", "1e3", "0x10", " 5", "5 ", "five"] {
        p.loopx(&["run", "-n", bad, "tick"])
            .usage_error(&format!("'{bad}'"), RUN_HELP)
            .stderr_contains("-n")
            .run();
    }
    assert_eq!(log(&p), "");
}

#[test]
fn run_n_without_a_value_is_a_usage_error() {
    let p = ticking();
    p.loopx(&["run", "tick", "-n"])
        .usage_error("-n", RUN_HELP)
        .run();
    p.loopx(&["run", "tick", "-e"])
        .usage_error("-e", RUN_HELP)
        .run();
    assert_eq!(log(&p), "");
}

#[test]
fn duplicate_n_in_run_is_a_usage_error() {
    let p = ticking();
    for args in [
        &["run", "-n", "5", "-n", "10", "tick"][..],
        &["run", "-n", "1", "tick", "-n", "1"],
    ] {
        p.loopx(args).usage_error("-n", RUN_HELP).run();
    }
    assert_eq!(log(&p), "");
}

#[test]
fn duplicate_e_in_run_is_a_usage_error() {
    let p = ticking();
    p.file("a.env", "A=1\n").file("b.env", "B=1\n");
    p.loopx(&["run", "-e", "a.env", "-e", "b.env", "tick"])
        .usage_error("-e", RUN_HELP)
        .run();
    assert_eq!(log(&p), "");
}

#[test]
fn unknown_run_flag_is_a_usage_error() {
    let p = ticking();
    for (args, flag) in [
        (&["run", "--unknown", "tick"][..], "--unknown"),
        (&["run", "tick", "--unknown"], "--unknown"),
        (&["run", "-x", "tick"], "-x"),
        (&["run", "--n", "1", "tick"], "--n"),
    ] {
        p.loopx(args).usage_error(flag, RUN_HELP).run();
    }
    assert_eq!(log(&p), "");
}

#[test]
fn run_usage_errors_come_before_discovery() {
    // Neither a missing .loopx/ nor an invalid one is reported: the command
    // line is rejected first.
    let bare = Project::bare();
    let broken = Project::new();
    break_discovery(&broken);
    for p in [&bare, &broken] {
        for (args, needle) in [
            (&["run", "--unknown", "tick"][..], "--unknown"),
            (&["run", "-n", "5", "-n", "10", "tick"], "-n"),
            (&["run", "-n", "bad", "tick"], "'bad'"),
            (&["run", "a", "b"], "a b"),
        ] {
            p.loopx(args)
                .usage_error(needle, RUN_HELP)
                .stderr_lacks(".loopx")
                .stderr_lacks("check")
                .run();
        }
    }
}

// ---------------------------------------------------------------- §4.2 run -h

/// Every example of the §4.2 `run -h` short-circuit, plus the long form.
const RUN_HELP_SHORT_CIRCUITS: &[&[&str]] = &[
    &["run", "-h"],
    &["run", "--help"],
    &["run", "-h", "ralph"],
    &["run", "ralph", "-h"],
    &["run", "ralph:check-ready", "-h"],
    &["run", "-h", "-e", "missing.env"],
    &["run", "-h", "-n", "bad"],
    &["run", "-h", "-n", "5", "-n", "10"],
    &["run", "-h", "foo", "bar"],
    &["run", "-h", "--unknown"],
    &["run", "--unknown", "--help"],
    &["run", "-n", "-1", "ralph", "--help"],
];

/// An option that takes a value does not swallow a following `-h`: help is
/// "present" wherever the token stands (§4.2).
#[test]
fn help_after_an_option_that_takes_a_value_is_still_help() {
    let p = ralph();
    let expected = run_help(&p);
    for args in [
        &["run", "-n", "-h"][..],
        &["run", "-e", "-h"],
        &["run", "-e", "--help", "ralph"],
        &["run", "ralph", "-n", "--help"],
    ] {
        p.loopx(args).stdout(&expected).run();
    }
    assert_eq!(log(&p), "");
    let install_help = p
        .loopx(&["install", "-h"])
        .stdout_contains("Usage: loopx install ")
        .run()
        .stdout;
    for args in [
        &["install", "-w", "-h"][..],
        &["install", "--workflow", "--help"],
        &["install", "-w", "-h", "org/repo"],
    ] {
        p.loopx(args).stdout(&install_help).run();
    }
    // Top level stays as it is: `-n` there is a usage error (§4.2).
    p.loopx(&["-n", "5", "-h"])
        .usage_error("-n", RUN_HELP)
        .run();
}

#[test]
fn run_help_short_circuit_ignores_all_other_run_arguments() {
    let p = ralph();
    let expected = run_help(&p);
    assert!(expected.contains("ralph"), "{expected}");
    for args in RUN_HELP_SHORT_CIRCUITS {
        p.loopx(args).stdout(&expected).run();
    }
    // Nothing ran, and the env file was never looked for.
    assert_eq!(log(&p), "");
}

#[test]
fn run_help_short_circuit_exits_zero_without_loopx_dir() {
    let p = Project::bare();
    let expected = p
        .loopx(&["run", "--help"])
        .stderr_contains(".loopx")
        .stdout_contains("Usage: loopx run ")
        .run()
        .stdout;
    for args in RUN_HELP_SHORT_CIRCUITS {
        p.loopx(args)
            .stderr_contains(".loopx")
            .stdout(&expected)
            .run();
    }
    assert!(!p.exists(".loopx"));
}

// ---------------------------------------------------------------- §4.2 install parsing

#[test]
fn install_without_source_is_a_usage_error() {
    let p = Project::bare();
    p.loopx(&["install"])
        .usage_error("source", INSTALL_HELP)
        .run();
    p.loopx(&["install", "-y"])
        .usage_error("source", INSTALL_HELP)
        .run();
    assert!(!p.exists(".loopx"));
}

#[test]
fn install_duplicate_flag_is_a_usage_error() {
    let p = Project::bare();
    for args in [
        &["install", "-w", "a", "-w", "b", "org/repo"][..],
        &["install", "--workflow", "a", "-w", "b", "org/repo"],
        &["install", "-y", "-y", "org/repo"],
    ] {
        let flag = if args[1] == "-y" { "-y" } else { "-w" };
        p.loopx(args).usage_error(flag, INSTALL_HELP).run();
    }
    assert!(!p.exists(".loopx"));
}

#[test]
fn install_unknown_flag_is_a_usage_error() {
    let p = Project::bare();
    p.loopx(&["install", "--unknown", "org/repo"])
        .usage_error("--unknown", INSTALL_HELP)
        .run();
    p.loopx(&["install", "org/repo", "-x"])
        .usage_error("-x", INSTALL_HELP)
        .run();
    assert!(!p.exists(".loopx"));
}

#[test]
fn install_help_needs_no_source_and_makes_no_network_request() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let tarball = format!("http://127.0.0.1:{port}/wf.tar.gz");
    let git = format!("http://127.0.0.1:{port}/repo.git");

    let p = Project::bare();
    let o = p
        .loopx(&["install", "-h"])
        .stdout_contains("Usage: loopx install ")
        .run();
    let expected = o.stdout.clone();
    for needle in ["-w", "--workflow", "-y", "git", "tar"] {
        assert!(
            o.stdout.contains(needle),
            "install help lacks {needle:?}\n{o}"
        );
    }
    for args in [
        &["install", "--help"][..],
        &["install", "-h", tarball.as_str()],
        &["install", git.as_str(), "--help"],
        &[
            "install",
            "--unknown",
            "-w",
            "a",
            "-w",
            "b",
            "-y",
            "-y",
            "-h",
            tarball.as_str(),
        ],
        &["install", "-h", "a", "b"],
    ] {
        p.loopx(args).stdout(&expected).run();
    }
    // A connection would sit in the listen backlog even though loopx is gone.
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok((_, peer)) => panic!("install help connected to the source ({peer})"),
        Err(e) => panic!("accept: {e}"),
    }
    // Nor does it look at or create .loopx/: no warning about a broken one.
    assert!(!p.exists(".loopx"));
    let broken = Project::new();
    break_discovery(&broken);
    broken.loopx(&["install", "-h"]).stdout(&expected).run();
}

// ---------------------------------------------------------------- §4.3 version

#[test]
fn version_prints_the_bare_package_version() {
    let p = Project::bare();
    p.loopx(&["version"])
        .stdout(&format!("{}\n", env!("CARGO_PKG_VERSION")))
        .run();
}

#[test]
fn version_needs_no_valid_loopx_dir() {
    let p = Project::new();
    break_discovery(&p);
    p.loopx(&["version"])
        .stdout(&format!("{}\n", env!("CARGO_PKG_VERSION")))
        .run();
}

// ---------------------------------------------------------------- §4.3 output

/// `loopx output <args>` outside any project, with `expect` declaring how
/// it ends.
#[track_caller]
fn output(args: &[&str], expect: impl FnOnce(Run) -> Run) -> Outcome {
    let mut full = vec!["output"];
    full.extend_from_slice(args);
    let p = Project::bare();
    expect(p.loopx(&full)).run()
}

#[track_caller]
fn output_is(args: &[&str], json: &str) {
    output(args, |r| r.stdout(&format!("{json}\n")));
}

#[test]
fn output_prints_each_flag_alone() {
    output_is(&["--result", "done"], r#"{"result":"done"}"#);
    output_is(&["--goto", "next-step"], r#"{"goto":"next-step"}"#);
    output_is(&["--stop"], r#"{"stop":true}"#);
}

#[test]
fn output_orders_keys_result_goto_stop_whatever_the_flag_order() {
    let all = r#"{"result":"r","goto":"g","stop":true}"#;
    output_is(&["--result", "r", "--goto", "g", "--stop"], all);
    output_is(&["--stop", "--goto", "g", "--result", "r"], all);
    output_is(&["--goto", "g", "--stop", "--result", "r"], all);
    output_is(
        &["--goto", "review-adr:request-feedback", "--result", "x"],
        r#"{"result":"x","goto":"review-adr:request-feedback"}"#,
    );
    output_is(
        &["--stop", "--result", "r"],
        r#"{"result":"r","stop":true}"#,
    );
}

#[test]
fn output_escapes_strings_like_json_stringify() {
    // JSON.stringify: short escapes for \b \f \n \r \t, \u00xx (lowercase
    // hex) for other controls, backslash and quote escaped; '/', DEL,
    // non-ASCII and U+2028 are written as they are.
    output_is(
        &["--result", "say \"hi\" \\ back/slash"],
        r#"{"result":"say \"hi\" \\ back/slash"}"#,
    );
    output_is(
        &["--result", "\u{8}\u{c}\n\r\t"],
        r#"{"result":"\b\f\n\r\t"}"#,
    );
    output_is(
        &["--result", "\u{1}\u{1b}\u{1f}\u{7f}"],
        "{\"result\":\"\\u0001\\u001b\\u001f\u{7f}\"}",
    );
    output_is(
        &["--goto", "héllo ✓ 😀 \u{2028}"],
        "{\"goto\":\"héllo ✓ 😀 \u{2028}\"}",
    );
    output_is(&["--result", ""], r#"{"result":""}"#);
    output_is(
        &["--result", "line1\nline2\n"],
        r#"{"result":"line1\nline2\n"}"#,
    );
}

#[test]
fn output_does_not_validate_goto_targets() {
    for target in ["", ":", ":s", "w:", "a:b:c", "bad name", "my.workflow:x"] {
        let json = format!(r#"{{"goto":"{target}"}}"#);
        output_is(&["--goto", target], &json);
    }
}

#[test]
fn output_accepts_values_starting_with_a_dash() {
    output_is(&["--result", "-5"], r#"{"result":"-5"}"#);
    output_is(&["--goto", "-x"], r#"{"goto":"-x"}"#);
    output_is(
        &["--result", "--weird", "--stop"],
        r#"{"result":"--weird","stop":true}"#,
    );
}

#[test]
fn output_without_flags_is_an_error() {
    output(&[], |r| r.usage_error("--result", OUTPUT_HELP));
}

#[test]
fn output_rejects_unknown_flags_and_missing_values() {
    output(&["--bogus"], |r| r.usage_error("--bogus", OUTPUT_HELP));
    output(&["--result"], |r| r.usage_error("--result", OUTPUT_HELP));
    output(&["--stop", "--goto"], |r| {
        r.usage_error("--goto", OUTPUT_HELP)
    });
    output(&["done"], |r| r.usage_error("done", OUTPUT_HELP));
}

#[test]
fn output_needs_no_valid_loopx_dir() {
    let p = Project::new();
    break_discovery(&p);
    p.loopx(&["output", "--stop"])
        .stdout("{\"stop\":true}\n")
        .run();
}

// ---------------------------------------------------------------- §11 help

#[test]
fn top_help_lists_the_subcommands() {
    let help = top_help();
    for cmd in ["run", "version", "output", "env", "install"] {
        assert!(lists_command(&help, cmd), "{cmd} missing from:\n{help}");
    }
    assert!(help.contains("loopx"), "{help}");
}

/// The subcommands the top help lists, in order: the first word of each
/// line of its "Commands:" section.
pub fn listed_commands(help: &str) -> Vec<String> {
    let section = help
        .split("\nCommands:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no Commands: in\n{help}"));
    let mut names: Vec<String> = section
        .lines()
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    names.dedup();
    names
}

#[test]
fn top_help_lists_every_subcommand_once() {
    // §11.1's five, and those beyond the spec (DESIGN.md).
    assert_eq!(
        listed_commands(&top_help()),
        [
            "run",
            "version",
            "output",
            "env",
            "install",
            "status",
            "forget",
            "init",
            "json",
            "agent",
            "resume",
            "tail",
            "completions"
        ]
    );
}

#[test]
fn every_subcommand_has_help_with_its_usage_and_options() {
    // Every command of the top help answers -h and --help alike, with its
    // usage first and -h among its options, on stdout, exit 0. Only run
    // help looks at .loopx/ (§11.2): the others stay silent in a project
    // whose discovery would warn.
    let broken = ralph();
    break_discovery(&broken);
    let good = ralph();
    for name in listed_commands(&top_help()) {
        let p = if name == "run" { &good } else { &broken };
        let help = p
            .loopx(&[&name, "-h"])
            .stdout_contains(&format!("Usage: loopx {name}"))
            .run()
            .stdout;
        assert!(
            help.starts_with(&format!("Usage: loopx {name}")),
            "{name}:\n{help}"
        );
        assert!(help.contains("\nOptions:\n"), "{name}:\n{help}");
        assert!(help.contains("  -h, --help "), "{name}:\n{help}");
        assert!(help.lines().all(|l| l.len() <= 80), "{name}:\n{help}");
        p.loopx(&[&name, "--help"]).stdout(&help).run();
    }
    assert_eq!(log(&broken), "");
}

#[test]
fn each_help_lists_the_options_its_command_takes() {
    let help = |args: &[&str]| {
        Project::new()
            .loopx(args)
            .stdout_contains("Usage: loopx ")
            .run()
            .stdout
    };
    for (command, options) in [
        (
            "output",
            &[
                "--result <value>",
                "--goto <target>",
                "--stop",
                "--retry-after",
                "--cost-usd",
            ][..],
        ),
        ("install", &["-w, --workflow <name>", "-y"]),
        ("status", &["--json"]),
        ("completions", &["--targets", "bash", "zsh", "fish"]),
        (
            "env",
            &["env set <name> <value>", "env remove <name>", "env list"],
        ),
    ] {
        let text = help(&[command, "--help"]);
        for option in options {
            assert!(text.contains(option), "{command}: {option}\n{text}");
        }
    }
    // resume takes run's options but --resume, which it always does.
    let run = help(&["run", "-h"]);
    let resume = help(&["resume", "-h"]);
    for option in [
        "-n <count>",
        "-e <path>",
        "--timeout <duration>",
        "--log <path>",
    ] {
        assert!(run.contains(option) && resume.contains(option), "{option}");
    }
    assert!(
        run.contains("--resume") && !resume.contains("  --resume"),
        "{resume}"
    );
}

#[test]
fn help_flag_as_a_value_is_the_value_outside_run_install_and_resume() {
    // §4.2's short-circuit is run's and install's (and resume's, which
    // takes run's options); elsewhere -h is help only where an option may
    // stand.
    let p = Project::new();
    p.loopx(&["env", "set", "K", "-h"]).run();
    p.loopx(&["env", "set", "L", "--help"]).run();
    p.loopx(&["env", "list"]).stdout("K=-h\nL=--help\n").run();
    output_is(&["--result", "-h"], r#"{"result":"-h"}"#);
    output_is(
        &["--goto=--help", "--stop"],
        r#"{"goto":"--help","stop":true}"#,
    );
    let output_help = Project::bare()
        .loopx(&["output", "-h"])
        .stdout_contains("Usage: loopx output ")
        .run()
        .stdout;
    for args in [
        &["output", "--result", "x", "-h"][..],
        &["output", "--bogus", "--help"],
    ] {
        Project::bare().loopx(args).stdout(&output_help).run();
    }
    let env_help = p
        .loopx(&["env", "--help"])
        .stdout_contains("Usage: loopx env ")
        .run()
        .stdout;
    for args in [
        &["env", "-h"][..],
        &["env", "set", "-h"],
        &["env", "remove", "--help"],
        &["env", "list", "-h"],
        &["env", "set", "K", "v", "-h"],
    ] {
        p.loopx(args).stdout(&env_help).run();
    }
    assert_eq!(
        std::fs::read_to_string(p.global_env_path()).expect("global env"),
        "K=\"-h\"\nL=\"--help\"\n"
    );
    for (command, args) in [
        ("status", &["status", "--json", "-h"][..]),
        ("version", &["version", "--help"]),
        ("completions", &["completions", "bash", "-h"]),
        ("resume", &["resume", "-n", "-h"]),
        ("resume", &["resume", "--bogus", "--timeout", "--help"]),
        ("install", &["install", "-w", "-h"]),
    ] {
        let help = p
            .loopx(&[command, "-h"])
            .stdout_contains(&format!("Usage: loopx {command}"))
            .run()
            .stdout;
        p.loopx(args).stdout(&help).run();
    }
}

#[test]
fn usage_errors_of_a_subcommand_point_to_its_help() {
    let p = Project::bare();
    for (args, needle, help) in [
        (&["version", "x"][..], "'x'", "loopx version --help"),
        (&["status", "x"], "only --json", "loopx status --help"),
        (
            &["status", "--json", "--json"],
            "more than once",
            "loopx status --help",
        ),
        (&["env", "frob"], "'frob'", "loopx env --help"),
        (
            &["output", "--stop", "--stop"],
            "more than once",
            OUTPUT_HELP,
        ),
        (&["output", "--cost-usd", "-1"], "'-1'", OUTPUT_HELP),
        (
            &["completions"],
            "missing shell",
            "loopx completions --help",
        ),
        (
            &["completions", "tcsh"],
            "'tcsh'",
            "loopx completions --help",
        ),
        (
            &["completions", "--targets", "bash"],
            "'bash'",
            "loopx completions --help",
        ),
        (&["resume", "--resume"], "'--resume'", "loopx resume --help"),
        (
            &["resume", "a", "b"],
            "at most one run id",
            "loopx resume --help",
        ),
        (&["install", "-w"], "needs a value", INSTALL_HELP),
    ] {
        p.loopx(args).usage_error(needle, help).run();
    }
}

#[test]
fn unknown_command_message_names_every_command() {
    let names = listed_commands(&top_help()).join(", ");
    Project::bare()
        .loopx(&["frob"])
        .usage_error(&format!("(commands: {names})"), TOP_HELP)
        .run();
}

#[test]
fn a_run_option_at_top_level_says_it_belongs_to_run() {
    let p = Project::bare();
    for (flag, value) in [("--timeout", "5"), ("--log", "x"), ("--resume", "ralph")] {
        p.loopx(&[flag, value])
            .usage_error(&format!("'{flag}' is an option of 'loopx run'"), RUN_HELP)
            .run();
    }
}

#[test]
fn top_help_does_not_list_workflows() {
    let p = ralph();
    p.script("zebra-flow", "index.sh", "");
    p.loopx(&["-h"])
        .stdout_contains("\nUsage:\n  loopx <command>")
        .stdout_lacks("zebra-flow")
        .run();
}

#[test]
fn run_help_lists_the_options() {
    let help = run_help(&Project::new());
    for needle in ["-n", "-e", "-h", "<workflow>"] {
        assert!(help.contains(needle), "{needle} missing from:\n{help}");
    }
}

#[test]
fn run_help_lists_workflows_and_scripts_and_marks_index() {
    let p = ralph();
    p.script("tools", "lint.sh", "")
        .script("tools", "fmt.sh", "")
        .script("pipe", "index.ts", "")
        .script("pipe", "setup.ts", "");
    let help = run_help(&p);
    let line = |wf: &str| -> String {
        help.lines()
            .find(|l| l.trim_start().starts_with(&format!("{wf} ")))
            .unwrap_or_else(|| panic!("no line for {wf}:\n{help}"))
            .to_string()
    };
    let ralph = line("ralph");
    for needle in ["index", "check-ready", "default"] {
        assert!(ralph.contains(needle), "{needle} missing from {ralph:?}");
    }
    let pipe = line("pipe");
    for needle in ["index", "setup", "default"] {
        assert!(pipe.contains(needle), "{needle} missing from {pipe:?}");
    }
    // A workflow without index has no default entry point to mark.
    let tools = line("tools");
    for needle in ["lint", "fmt"] {
        assert!(tools.contains(needle), "{needle} missing from {tools:?}");
    }
    assert!(!tools.contains("default"), "{tools:?}");
}

#[test]
fn run_help_without_loopx_dir_warns_and_omits_the_workflow_section() {
    let bare = Project::bare();
    let o = bare
        .loopx(&["run", "-h"])
        .stderr_contains("no .loopx/ directory in ")
        // The first hour: the way to a first workflow is named.
        .stderr_contains("`loopx init` writes a workflow to start from")
        .stdout_contains("Usage: loopx run ")
        .run();
    assert!(o.stderr.to_lowercase().contains("warning"), "{}", o.stderr);
    // The same usage text as with workflows, minus their listing.
    let with = run_help(&ralph());
    assert!(
        with.starts_with(&o.stdout) && with.len() > o.stdout.len(),
        "without .loopx/:\n{}\nwith:\n{with}",
        o.stdout
    );
    assert!(!o.stdout.contains("ralph"));
}

#[test]
fn env_commands_need_no_valid_loopx_dir() {
    // §5.4: `loopx env *` neither requires nor validates .loopx/.
    let p = Project::new();
    break_discovery(&p);
    p.loopx(&["env", "list"]).run();
}

// ------------------------------------------------- §12 one-line messages

#[test]
fn usage_error_stays_one_line_when_an_argument_holds_a_line_break() {
    // §12: a one-line message naming the problem, then the hint; control
    // characters from the command line are shown escaped.
    let p = ralph();
    p.loopx(&["run", "a\nb", "c"])
        .usage_error("a\\nb c", RUN_HELP)
        .run();
    p.loopx(&["foo\nbar"])
        .usage_error("'foo\\nbar'", TOP_HELP)
        .run();
    p.loopx(&["run", "-n", "1\n", "ralph"])
        .usage_error("'1\\n'", RUN_HELP)
        .run();
    p.loopx(&["output", "--stop", "x\ty"])
        .usage_error("x\\ty", OUTPUT_HELP)
        .run();
    assert_eq!(log(&p), "");
}

#[test]
fn invalid_target_with_control_characters_is_reported_on_one_line() {
    let p = ralph();
    let o = p
        .loopx(&["run", "ral\nph\u{1b}[2J"])
        .status(1)
        .stdout("")
        .stderr_contains("'ral\\nph\\u{1b}[2J'")
        .run();
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert_eq!(log(&p), "");
}

// ---------------------------------------------------- non-UTF-8 arguments

#[test]
fn output_decodes_non_utf8_arguments_with_replacement_characters() {
    // Node decodes argv as UTF-8 with U+FFFD for invalid bytes; so does loopx.
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let p = Project::bare();
    let mut r = p.loopx(&["output", "--result"]);
    r.cmd.arg(OsStr::from_bytes(b"caf\xe9 \xff!"));
    r.stdout("{\"result\":\"caf\u{FFFD} \u{FFFD}!\"}\n").run();
    // An encoded surrogate is three invalid bytes, not a lone surrogate for
    // JSON.stringify to escape: Node shows three U+FFFD as well.
    let mut r = p.loopx(&["output", "--goto"]);
    r.cmd.arg(OsStr::from_bytes(b"\xed\xa0\x80"));
    r.stdout("{\"goto\":\"\u{FFFD}\u{FFFD}\u{FFFD}\"}\n").run();
}
