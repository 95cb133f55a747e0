//! Command-line grammar (§4.1–4.3, §12): turns argv into a `Command` without
//! touching the filesystem. Every usage error names the problem and the help
//! to consult.

use std::ffi::OsString;

use lexopt::prelude::*;

use crate::error::Error;
use crate::install::InstallArgs;
use crate::output::Output;
use crate::run_flags::{self, help_requested, Parsed};
use crate::run_options::RunOptions;

const TOP_HELP: &str = "loopx --help";
const RUN_HELP: &str = "loopx run --help";
const INSTALL_HELP: &str = "loopx install --help";
const RESUME_HELP: &str = "loopx resume --help";

#[derive(Debug, PartialEq)]
pub enum Command {
    TopHelp,
    Version,
    /// `loopx output`: §4.3's fields, and the extension fields as JSON
    /// values in their fixed order.
    Output {
        out: Output,
        extensions: Vec<(&'static str, String)>,
    },
    EnvSet {
        name: String,
        value: String,
    },
    EnvRemove {
        name: String,
    },
    EnvList,
    RunHelp,
    Run(RunOptions),
    InstallHelp,
    Install(InstallArgs),
    /// `loopx resume [<run-id>] [options]` (beyond the spec).
    ResumeHelp,
    Resume {
        id: Option<String>,
        given: crate::run_flags::Given,
    },
    /// `loopx status [--json]`: the runs alive now.
    Status {
        json: bool,
    },
    /// The internal machine mode of the JS API (api.rs); never in help.
    Api {
        protocol: String,
        args: RunOptions,
    },
}

fn lossy(s: OsString) -> String {
    s.into_string()
        .unwrap_or_else(|s| s.to_string_lossy().into_owned())
}

fn option_name(arg: &lexopt::Arg) -> String {
    match arg {
        Short(c) => format!("-{c}"),
        Long(l) => format!("--{l}"),
        Value(v) => v.to_string_lossy().into_owned(),
    }
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
    match first.as_str() {
        // §4.2: top-level -h wins over everything after it.
        "-h" | "--help" => Ok(Command::TopHelp),
        "run" => parse_run(rest),
        "version" => no_arguments(rest, "version").map(|_| Command::Version),
        "output" => parse_output(rest),
        "resume" => match crate::run_flags::parse_resume(rest) {
            Ok(crate::run_flags::ParsedResume::Help) => Ok(Command::ResumeHelp),
            Ok(crate::run_flags::ParsedResume::Resume { id, given }) => {
                Ok(Command::Resume { id, given })
            }
            Err(message) => Err(Error::usage(message, RESUME_HELP)),
        },
        "env" => parse_env(rest),
        "install" => parse_install(rest),
        "status" => parse_status(rest),
        crate::api::MODE => parse_api(rest),
        "-n" | "-e" => Err(Error::usage(
            format!("'{first}' is an option of 'loopx run', not of loopx itself: loopx run {first} <value> <workflow>"),
            RUN_HELP,
        )),
        // Habits from other tools stay errors (§4.2), with what to type.
        "--version" | "-V" | "-v" => Err(Error::usage(
            format!("unknown option '{first}': to print the version, run: loopx version"),
            TOP_HELP,
        )),
        flag if flag.starts_with('-') => Err(Error::usage(
            format!("unknown option '{flag}' (the only top-level option is -h/--help)"),
            TOP_HELP,
        )),
        "help" => Err(Error::usage(
            "unknown command 'help': for help, run: loopx -h (or loopx run -h, loopx install -h); \
             to run a workflow named 'help': loopx run help",
            TOP_HELP,
        )),
        other => Err(Error::usage(
            format!(
                "unknown command '{other}' (commands: run, version, output, env, install, status, resume); \
                 to run a workflow named '{other}': loopx run {other}"
            ),
            TOP_HELP,
        )),
    }
}

fn no_arguments(rest: Vec<OsString>, command: &str) -> Result<(), Error> {
    match rest.first() {
        None => Ok(()),
        Some(extra) => Err(Error::usage(
            format!(
                "'loopx {command}' takes no arguments, got '{}'",
                extra.to_string_lossy()
            ),
            TOP_HELP,
        )),
    }
}

/// `loopx run`'s arguments, by the option table (run_flags.rs).
fn parse_run(rest: Vec<OsString>) -> Result<Command, Error> {
    match run_flags::parse(rest) {
        Ok(Parsed::Help) => Ok(Command::RunHelp),
        Ok(Parsed::Run(options)) => Ok(Command::Run(options)),
        Err(message) => Err(Error::usage(message, RUN_HELP)),
    }
}

/// `__api <protocol> <run options and target>`: the run grammar, minus help.
fn parse_api(rest: Vec<OsString>) -> Result<Command, Error> {
    let mut rest = rest.into_iter();
    let protocol = rest.next().map(lossy).unwrap_or_default();
    match parse_run(rest.collect())? {
        Command::Run(args) => Ok(Command::Api { protocol, args }),
        _ => Err(Error::usage("the API channel does not take -h", TOP_HELP)),
    }
}

/// `loopx output [--result <v>] [--goto <target>] [--stop]` (§4.3). The goto
/// value is not validated here: that happens when the loop resolves it.
fn parse_output(rest: Vec<OsString>) -> Result<Command, Error> {
    let mut p = lexopt::Parser::from_args(rest);
    let mut out = Output::default();
    let mut seen_result = false;
    let mut seen_goto = false;
    let mut seen_stop = false;
    let mut retry_after: Option<String> = None;
    let mut cost_usd: Option<String> = None;
    let usage = |msg: String| Error::usage(msg, TOP_HELP);
    while let Some(arg) = p.next().map_err(|e| usage(format!("loopx output: {e}")))? {
        let name = option_name(&arg);
        let extension = match arg {
            Long("retry-after") => Some((&mut retry_after, "retry_after")),
            Long("cost-usd") => Some((&mut cost_usd, "cost_usd")),
            _ => None,
        };
        if let Some((slot, _)) = extension {
            if slot.is_some() {
                return Err(usage(format!("option '{name}' given more than once")));
            }
            let value = lossy(
                p.value()
                    .map_err(|_| usage(format!("option '{name}' needs a value")))?,
            );
            let json = if name == "--retry-after" {
                crate::wait::output_retry_after(&value)
            } else {
                crate::wait::output_cost_usd(&value)
            }
            .map_err(|why| usage(format!("invalid value '{value}' for {name}: {why}")))?;
            *slot = Some(json);
            continue;
        }
        let seen = match arg {
            Long("result") => &mut seen_result,
            Long("goto") => &mut seen_goto,
            Long("stop") => &mut seen_stop,
            Value(v) => {
                return Err(usage(format!(
                    "loopx output takes only options, got '{}'",
                    v.to_string_lossy()
                )))
            }
            _ => {
                return Err(usage(format!(
                    "unknown option '{name}' for 'loopx output' (options: --result <value>, --goto <target>, --stop, --retry-after <when>, --cost-usd <usd>)"
                )))
            }
        };
        if *seen {
            return Err(usage(format!("option '{name}' given more than once")));
        }
        *seen = true;
        if name == "--stop" {
            out.stop = true;
            continue;
        }
        let value = p
            .value()
            .map_err(|_| usage(format!("option '{name}' needs a value")))?;
        let value = lossy(value);
        if name == "--result" {
            out.result = Some(value);
        } else {
            out.goto = Some(value);
        }
    }
    if !(seen_result || seen_goto || seen_stop || retry_after.is_some() || cost_usd.is_some()) {
        return Err(usage(
            "loopx output needs at least one of --result <value>, --goto <target>, --stop, \
             --retry-after <when>, --cost-usd <usd>"
                .into(),
        ));
    }
    let extensions = [("retry_after", retry_after), ("cost_usd", cost_usd)]
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect();
    Ok(Command::Output { out, extensions })
}

/// `loopx status [--json]`. Beyond the spec, so it takes nothing else (a
/// workflow named `status` runs with `loopx run status`, §4.1).
fn parse_status(rest: Vec<OsString>) -> Result<Command, Error> {
    let args: Vec<String> = rest.into_iter().map(lossy).collect();
    match args.as_slice() {
        [] => Ok(Command::Status { json: false }),
        [flag] if flag == "--json" => Ok(Command::Status { json: true }),
        [other, ..] => Err(Error::usage(
            format!("'loopx status' takes only --json, got '{other}'"),
            TOP_HELP,
        )),
    }
}

/// `loopx env set|remove|list`. Plain positionals, so values may start
/// with '-'.
fn parse_env(rest: Vec<OsString>) -> Result<Command, Error> {
    let args: Vec<String> = rest.into_iter().map(lossy).collect();
    let usage = |msg: &str| Error::usage(msg.to_string(), TOP_HELP);
    let rest = args.get(1..).unwrap_or_default();
    match args.first().map(String::as_str) {
        Some("set") => match rest {
            [name, value] => Ok(Command::EnvSet {
                name: name.clone(),
                value: value.clone(),
            }),
            _ => Err(usage(&format!(
                "'loopx env set' takes a name and a value, got {}: loopx env set <name> <value>",
                count(rest.len())
            ))),
        },
        Some("remove") => match rest {
            [name] => Ok(Command::EnvRemove { name: name.clone() }),
            _ => Err(usage(&format!(
                "'loopx env remove' takes one name, got {}: loopx env remove <name>",
                count(rest.len())
            ))),
        },
        Some("list") => match rest {
            [] => Ok(Command::EnvList),
            [extra, ..] => Err(usage(&format!(
                "'loopx env list' takes no arguments, got '{extra}'"
            ))),
        },
        Some(other) => Err(usage(&format!(
            "unknown env command '{other}' (expected set, remove or list)"
        ))),
        None => Err(usage("missing env command: loopx env set|remove|list")),
    }
}

fn count(n: usize) -> String {
    match n {
        0 => "no arguments".to_string(),
        1 => "1 argument".to_string(),
        n => format!("{n} arguments"),
    }
}

/// `loopx install [options] <source>` with the same -h short-circuit and
/// duplicate/unknown-flag rules as `run` (§4.2).
fn parse_install(rest: Vec<OsString>) -> Result<Command, Error> {
    // §4.2, as for run: -h anywhere, even as -w's value, is help.
    if help_requested(&rest) {
        return Ok(Command::InstallHelp);
    }
    let mut p = lexopt::Parser::from_args(rest);
    let mut help = false;
    let mut first_error: Option<String> = None;
    let mut sources: Vec<String> = Vec::new();
    let mut workflow: Option<String> = None;
    let mut yes = false;
    loop {
        let arg = match p.next() {
            Ok(Some(arg)) => arg,
            Ok(None) => break,
            Err(err) => {
                first_error.get_or_insert(err.to_string());
                continue;
            }
        };
        let name = option_name(&arg);
        match arg {
            Short('h') | Long("help") => help = true,
            Short('w') | Long("workflow") => match p.value() {
                Ok(_) if workflow.is_some() => {
                    first_error
                        .get_or_insert("option '-w/--workflow' given more than once".to_string());
                }
                Ok(v) => workflow = Some(lossy(v)),
                Err(_) => {
                    first_error.get_or_insert(format!("option '{name}' needs a value"));
                }
            },
            Short('y') if yes => {
                first_error.get_or_insert("option '-y' given more than once".to_string());
            }
            Short('y') => yes = true,
            Value(v) => sources.push(lossy(v)),
            _ => {
                let _ = p.optional_value();
                first_error.get_or_insert(format!("unknown option '{name}' for 'loopx install'"));
            }
        }
    }
    if help {
        return Ok(Command::InstallHelp);
    }
    if let Some(msg) = first_error {
        return Err(Error::usage(msg, INSTALL_HELP));
    }
    match sources.len() {
        0 => Err(Error::usage(
            "missing source: loopx install [options] <source>",
            INSTALL_HELP,
        )),
        1 => Ok(Command::Install(InstallArgs {
            source: sources.remove(0),
            workflow,
            yes,
        })),
        n => Err(Error::usage(
            format!(
                "expected one source, got {n}: {}",
                // Sources may carry credentials (install::redact).
                sources
                    .iter()
                    .map(|s| crate::install::redact::url(s))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            INSTALL_HELP,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
            assert_eq!(parse_strs(args).unwrap(), Command::RunHelp, "{args:?}");
        }
        assert_eq!(
            parse_strs(&["run", "--unknown", "--help"]).unwrap(),
            Command::RunHelp
        );
        assert_eq!(
            parse_strs(&["run", "-h", "--unknown"]).unwrap(),
            Command::RunHelp
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
            Command::InstallHelp
        );
        for args in [
            &["install", "-w", "-h"][..],
            &["install", "--workflow", "--help"],
            &["install", "-w", "-h", "org/repo"],
        ] {
            assert_eq!(parse_strs(args).unwrap(), Command::InstallHelp, "{args:?}");
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
}
