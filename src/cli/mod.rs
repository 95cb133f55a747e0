//! The command line (§4.1–4.3, §12): argv to a `Command` (command.rs)
//! without touching the file system. Arrows run one way: this module and
//! help.rs and completions.rs read the command table (commands.rs), whose
//! entries carry each subcommand's option rows and parser; the table reads
//! the option grammar (flags.rs) and run's rows (run_flags.rs, adapted from
//! run_options.rs). Every usage error names the problem and the help to
//! consult.

pub mod command;
pub mod commands;
pub mod completions;
pub mod flags;
pub mod help;
pub mod run_flags;

use std::ffi::OsString;

pub use command::Command;
use commands::RUN_HELP;

use crate::error::Error;

const TOP_HELP: &str = "loopx --help";

fn lossy(s: OsString) -> String {
    s.into_string()
        .unwrap_or_else(|s| s.to_string_lossy().into_owned())
}

/// Parses the arguments after `loopx`.
pub fn parse(args: Vec<OsString>) -> Result<Command, Error> {
    let mut args = args.into_iter();
    let Some(first) = args.next() else {
        // Bare `loopx` is top-level help (§4.1).
        return Ok(Command::TopHelp);
    };
    let rest: Vec<OsString> = args.collect();
    let first = lossy(first);
    // §4.2: top-level -h wins over everything after it.
    if first == "-h" || first == "--help" {
        return Ok(Command::TopHelp);
    }
    if let Some(command) = commands::find(&first) {
        return (command.parse)(rest).map_err(|message| Error::usage(message, command.see));
    }
    Err(not_a_command(&first))
}

/// The usage error for a first argument that is no command, saying what
/// to type instead.
fn not_a_command(first: &str) -> Error {
    // Habits from other tools stay errors (§4.2), with what to type.
    if ["--version", "-V", "-v"].contains(&first) {
        return Error::usage(
            format!("unknown option '{first}': to print the version, run: loopx version"),
            TOP_HELP,
        );
    }
    if let Some(doc) = run_option(first) {
        let value = if doc.takes_value() { " <value>" } else { "" };
        return Error::usage(
            format!(
                "'{first}' is an option of 'loopx run', not of loopx itself: \
                 loopx run {first}{value} <workflow>"
            ),
            RUN_HELP,
        );
    }
    if first.starts_with('-') {
        return Error::usage(
            format!("unknown option '{first}' (the only top-level option is -h/--help)"),
            TOP_HELP,
        );
    }
    if first == "help" {
        return Error::usage(
            "unknown command 'help': for help, run: loopx -h (or loopx <command> -h); \
             to run a workflow named 'help': loopx run help",
            TOP_HELP,
        );
    }
    Error::usage(
        format!(
            "unknown command '{first}' (commands: {}); to run a workflow named '{first}': loopx run {first}",
            commands::names()
        ),
        TOP_HELP,
    )
}

/// The run option `arg` spells (`-n`, `--timeout`, `--log=x`), if any.
fn run_option(arg: &str) -> Option<flags::Doc> {
    let name = arg.split('=').next().unwrap_or(arg);
    (commands::find("run")?.options)()
        .into_iter()
        .find(|d| d.spellings().iter().any(|s| s == name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::command::Shell;
    use crate::install::InstallArgs;
    use crate::output::Output;
    use crate::run_options::RunOptions;

    #[test]
    fn json_needs_a_path_and_knows_its_option() {
        let parse_json = commands::find("json").unwrap().parse;
        let parse = |args: &[&str]| parse_json(args.iter().map(OsString::from).collect());
        assert!(matches!(parse(&["-h"]), Ok(Command::Help("json"))));
        assert!(matches!(
            parse(&[".a", "--help"]),
            Ok(Command::Help("json"))
        ));
        assert!(parse(&[]).unwrap_err().contains("at least one path"));
        assert!(parse(&["--lines"]).is_err());
        assert!(parse(&["--lines", "--lines", "."]).is_err());
        assert!(parse(&["-x", "."]).unwrap_err().contains("'-x'"));
        assert!(parse(&["result"]).unwrap_err().contains("starts with '.'"));
        match parse(&["--lines", ".a", ".b"]) {
            Ok(Command::Json(q)) => assert!(q.lines && q.paths.len() == 2),
            other => panic!("{other:?}"),
        }
    }
    use std::path::PathBuf;

    fn parse_strs(args: &[&str]) -> Result<Command, Error> {
        parse(args.iter().map(OsString::from).collect())
    }

    fn usage_message(args: &[&str]) -> String {
        match parse_strs(args) {
            Err(Error::Usage { message, .. }) => message,
            other => panic!("expected a usage error for {args:?}, got {other:?}"),
        }
    }

    fn run(target: &str, n: Option<u64>, e: Option<&str>) -> Command {
        Command::Run(RunOptions {
            max_iterations: n,
            env_file: e.map(PathBuf::from),
            ..RunOptions::new(target)
        })
    }

    #[test]
    fn top_level() {
        assert_eq!(parse_strs(&[]).unwrap(), Command::TopHelp);
        assert_eq!(
            parse_strs(&["-h", "run", "ralph"]).unwrap(),
            Command::TopHelp
        );
        assert_eq!(
            parse_strs(&["--help", "--bogus"]).unwrap(),
            Command::TopHelp
        );
        assert!(usage_message(&["foo"]).contains("unknown command 'foo'"));
        assert!(usage_message(&["foo", "-h"]).contains("unknown command 'foo'"));
        assert!(usage_message(&["--unknown"]).contains("'--unknown'"));
        assert!(usage_message(&["-n", "5", "ralph"]).contains("'-n'"));
        assert!(usage_message(&["-e", ".env", "ralph"]).contains("'-e'"));
        assert!(usage_message(&["version", "x"]).contains("takes no arguments"));
        for habit in ["--version", "-V", "-v"] {
            assert!(
                usage_message(&[habit]).contains("run: loopx version"),
                "{habit}"
            );
        }
        assert!(usage_message(&["help"]).contains("run: loopx -h"));
        assert_eq!(
            parse_strs(&["status"]).unwrap(),
            Command::Status { json: false }
        );
        assert_eq!(
            parse_strs(&["status", "--json"]).unwrap(),
            Command::Status { json: true }
        );
        assert!(usage_message(&["status", "-x"]).contains("only --json"));
        assert_eq!(
            parse_strs(&["run", "status"]).unwrap(),
            run("status", None, None)
        );
    }

    #[test]
    fn run_options_in_any_order() {
        assert_eq!(
            parse_strs(&["run", "ralph"]).unwrap(),
            run("ralph", None, None)
        );
        assert_eq!(
            parse_strs(&["run", "-n", "5", "ralph", "-e", "x.env"]).unwrap(),
            run("ralph", Some(5), Some("x.env"))
        );
        assert_eq!(
            parse_strs(&["run", "ralph:check", "-n5"]).unwrap(),
            run("ralph:check", Some(5), None)
        );
        // Subcommand names are ordinary workflow names after `run`.
        assert_eq!(
            parse_strs(&["run", "version"]).unwrap(),
            run("version", None, None)
        );
        // Target strings are validated after discovery, not here.
        assert_eq!(parse_strs(&["run", ""]).unwrap(), run("", None, None));
        assert_eq!(
            parse_strs(&["run", "a:b:c"]).unwrap(),
            run("a:b:c", None, None)
        );
    }

    #[test]
    fn run_help_short_circuits_everything() {
        for args in [
            &["run", "-h"][..],
            &["run", "--help"],
            &["run", "-h", "ralph"],
            &["run", "ralph", "-h"],
            &["run", "-h", "-e", "missing.env"],
            &["run", "-h", "-n", "bad"],
            &["run", "-h", "-n", "5", "-n", "10"],
            &["run", "-h", "foo", "bar"],
            &["run", "-h", "--unknown"],
            &["run", "--unknown", "--help"],
            // An option that takes a value does not swallow -h (§4.2).
            &["run", "-n", "-h"],
            &["run", "-e", "-h"],
            &["run", "-e", "--help", "ralph"],
        ] {
            assert_eq!(parse_strs(args).unwrap(), Command::Help("run"), "{args:?}");
        }
        assert_eq!(
            parse_strs(&["run", "--unknown", "--help"]).unwrap(),
            Command::Help("run")
        );
        assert_eq!(
            parse_strs(&["run", "-h", "--unknown"]).unwrap(),
            Command::Help("run")
        );
    }

    #[test]
    fn run_usage_errors() {
        assert!(usage_message(&["run"]).contains("missing target"));
        assert!(usage_message(&["run", "-n", "5"]).contains("missing target"));
        assert!(usage_message(&["run", "ralph", "bar"]).contains("expected one target"));
        assert!(usage_message(&["run", "--unknown", "ralph"]).contains("'--unknown'"));
        assert!(usage_message(&["run", "-x", "ralph"]).contains("'-x'"));
        assert!(usage_message(&["run", "-n", "5", "-n", "10", "ralph"]).contains("more than once"));
        assert!(usage_message(&["run", "-e", "a", "-e", "b", "ralph"]).contains("more than once"));
        assert!(usage_message(&["run", "-n", "-1", "ralph"]).contains("non-negative integer"));
        assert!(usage_message(&["run", "-n", "1.5", "ralph"]).contains("non-negative integer"));
        assert!(usage_message(&["run", "-n", "abc", "ralph"]).contains("non-negative integer"));
        assert!(usage_message(&["run", "-n", "", "ralph"]).contains("non-negative integer"));
        assert_eq!(
            parse_strs(&["run", "-n", "99999999999999999999999", "ralph"]).unwrap(),
            run("ralph", Some(u64::MAX), None)
        );
        assert!(usage_message(&["run", "ralph", "-n"]).contains("needs a value"));
    }

    #[test]
    fn output_flags() {
        let out = |r: Option<&str>, g: Option<&str>, s: bool| Command::Output {
            out: Output {
                result: r.map(String::from),
                goto: g.map(String::from),
                stop: s,
            },
            extensions: Vec::new(),
        };
        assert_eq!(
            parse_strs(&["output", "--result", "x"]).unwrap(),
            out(Some("x"), None, false)
        );
        assert_eq!(
            parse_strs(&["output", "--goto", "a:b:c", "--result", "-5", "--stop"]).unwrap(),
            out(Some("-5"), Some("a:b:c"), true)
        );
        assert_eq!(
            parse_strs(&["output", "--result="]).unwrap(),
            out(Some(""), None, false)
        );
        assert!(usage_message(&["output"]).contains("at least one"));
        assert!(usage_message(&["output", "--bogus"]).contains("'--bogus'"));
        assert!(usage_message(&["output", "--result"]).contains("needs a value"));
        assert!(usage_message(&["output", "--stop", "--stop"]).contains("more than once"));
        assert!(usage_message(&["output", "x"]).contains("only options"));
    }

    #[test]
    fn env_commands() {
        assert_eq!(
            parse_strs(&["env", "set", "K", "-v"]).unwrap(),
            Command::EnvSet {
                name: "K".into(),
                value: "-v".into()
            }
        );
        assert_eq!(
            parse_strs(&["env", "remove", "K"]).unwrap(),
            Command::EnvRemove { name: "K".into() }
        );
        assert_eq!(parse_strs(&["env", "list"]).unwrap(), Command::EnvList);
        assert!(usage_message(&["env"]).contains("missing env command"));
        assert!(usage_message(&["env", "set", "K"]).contains("got 1 argument:"));
        assert!(usage_message(&["env", "set", "K", "v", "x"]).contains("got 3 arguments"));
        assert!(usage_message(&["env", "remove"]).contains("got no arguments"));
        assert!(usage_message(&["env", "list", "x"]).contains("'x'"));
        assert!(usage_message(&["env", "frob"]).contains("'frob'"));
    }

    #[test]
    fn install_options() {
        assert_eq!(
            parse_strs(&["install", "-h", "--bogus", "-w"]).unwrap(),
            Command::Help("install")
        );
        for args in [
            &["install", "-w", "-h"][..],
            &["install", "--workflow", "--help"],
            &["install", "-w", "-h", "org/repo"],
        ] {
            assert_eq!(
                parse_strs(args).unwrap(),
                Command::Help("install"),
                "{args:?}"
            );
        }
        assert_eq!(
            parse_strs(&["install", "-y", "org/repo", "--workflow", "a"]).unwrap(),
            Command::Install(InstallArgs {
                source: "org/repo".into(),
                workflow: Some("a".into()),
                yes: true
            })
        );
        assert!(usage_message(&["install"]).contains("missing source"));
        assert!(usage_message(&["install", "-w", "a", "-w", "b", "s"]).contains("more than once"));
        assert!(usage_message(&["install", "-y", "-y", "s"]).contains("more than once"));
        assert!(usage_message(&["install", "--unknown", "s"]).contains("'--unknown'"));
    }

    #[test]
    fn help_in_option_position_only_outside_run_install_resume() {
        let help = |name: &str| Command::Help(commands::find(name).unwrap().name);
        for (args, name) in [
            (&["version", "-h"][..], "version"),
            (&["status", "--json", "--help"], "status"),
            (&["output", "--stop", "-h"], "output"),
            (&["env", "-h"], "env"),
            (&["env", "set", "-h"], "env"),
            (&["env", "list", "--help"], "env"),
            (&["completions", "zsh", "-h"], "completions"),
            (&["resume", "-n", "-h"], "resume"),
        ] {
            assert_eq!(parse_strs(args).unwrap(), help(name), "{args:?}");
        }
        assert_eq!(
            parse_strs(&["env", "set", "K", "-h"]).unwrap(),
            Command::EnvSet {
                name: "K".into(),
                value: "-h".into()
            }
        );
        match parse_strs(&["output", "--result", "-h"]).unwrap() {
            Command::Output { out, .. } => assert_eq!(out.result.as_deref(), Some("-h")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn completions_take_one_known_shell_or_targets() {
        assert_eq!(
            parse_strs(&["completions", "fish"]).unwrap(),
            Command::Completions(Shell::Fish)
        );
        assert_eq!(
            parse_strs(&["completions", "--targets"]).unwrap(),
            Command::CompletionTargets
        );
        assert!(usage_message(&["completions", "tcsh"]).contains("unknown shell 'tcsh'"));
        assert!(usage_message(&["completions"]).contains("missing shell"));
        assert!(usage_message(&["completions", "bash", "zsh"]).contains("'zsh'"));
        assert_eq!(
            parse_strs(&["run", "completions"]).unwrap(),
            run("completions", None, None)
        );
    }

    #[test]
    fn unknown_command_lists_the_table() {
        let message = usage_message(&["frob"]);
        assert!(
            message.contains(&format!("(commands: {})", commands::names())),
            "{message}"
        );
        assert!(!message.contains(crate::api::MODE), "{message}");
        assert!(usage_message(&["--max-time", "5"]).contains("option of 'loopx run'"));
    }
}
