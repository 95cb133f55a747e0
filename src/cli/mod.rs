//! The command line: its table (commands.rs), the option grammar
//! (flags.rs), `run`'s options (run_flags.rs), help and completions.
//!
//! Command-line grammar (§4.1–4.3, §12): turns argv into a `Command` without
//! touching the filesystem. The command table (commands.rs) says which
//! parser below takes a subcommand's arguments; the option rows they apply
//! are in the table too. Every usage error names the problem and the help to
//! consult.

pub mod commands;
pub mod completions;
pub mod flags;
pub mod help;
pub mod run_flags;

use std::ffi::OsString;

use crate::cli::completions::Shell;
use crate::error::Error;
use crate::install::InstallArgs;
use crate::json_query;
use crate::output::Output;
use crate::run_options::RunOptions;
use commands::RUN_HELP;
use flags::{Flag, HelpAt, Parsed};

const TOP_HELP: &str = "loopx --help";

#[derive(Debug, PartialEq)]
pub enum Command {
    TopHelp,
    /// `loopx <name> -h`: the help of that entry of the command table.
    Help(&'static str),
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
    Run(RunOptions),
    Install(InstallArgs),
    /// `loopx resume [<run-id>] [options]` (beyond the spec).
    Resume {
        id: Option<String>,
        given: run_flags::Given,
    },
    /// `loopx status [--json]`: the runs alive now.
    /// `loopx json`: values from JSON on stdin.
    Json(json_query::Query),
    Status {
        json: bool,
    },
    /// `loopx init [<workflow>]` (beyond the spec).
    Init {
        workflow: Option<String>,
    },
    /// `loopx forget <run-id>` or `--all` (None).
    Forget {
        id: Option<String>,
    },
    /// `loopx completions <shell>` (beyond the spec).
    Completions(Shell),
    /// `loopx completions --targets`: what the scripts complete `run` with.
    CompletionTargets,
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

/// The table's rows for `command`, parsed with its help rule.
fn options<T>(
    command: &str,
    rows: &[Flag<T>],
    args: Vec<OsString>,
    into: &mut T,
) -> Result<Option<Vec<String>>, String> {
    let help_at = commands::find(command).map_or(HelpAt::OptionPosition, |c| c.help_at);
    let rows: Vec<&Flag<T>> = rows.iter().collect();
    Ok(match flags::parse(command, &rows, help_at, args, into)? {
        Parsed::Help => None,
        Parsed::Args(m) => Some(m.positionals),
    })
}

/// `loopx run`'s arguments, by run's rows (run_flags.rs).
pub fn parse_run(rest: Vec<OsString>) -> Result<Command, String> {
    Ok(match run_flags::parse(rest)? {
        run_flags::Parsed::Help => Command::Help("run"),
        run_flags::Parsed::Run(options) => Command::Run(options),
    })
}

/// `loopx resume [<run-id>] [options]`: run's rows but `--resume`.
pub fn parse_resume(rest: Vec<OsString>) -> Result<Command, String> {
    Ok(match run_flags::parse_resume(rest)? {
        run_flags::ParsedResume::Help => Command::Help("resume"),
        run_flags::ParsedResume::Resume { id, given } => Command::Resume { id, given },
    })
}

/// `__api <protocol> <run options and target>`: the run grammar, minus help.
pub fn parse_api(rest: Vec<OsString>) -> Result<Command, String> {
    let mut rest = rest.into_iter();
    let protocol = rest.next().map(lossy).unwrap_or_default();
    match parse_run(rest.collect())? {
        Command::Run(args) => Ok(Command::Api { protocol, args }),
        _ => Err("the API channel does not take -h".to_string()),
    }
}

/// `loopx version` takes nothing (§4.3).
pub fn parse_version(rest: Vec<OsString>) -> Result<Command, String> {
    let Some(positionals) = options::<()>("version", &[], rest, &mut ())? else {
        return Ok(Command::Help("version"));
    };
    match positionals.first() {
        None => Ok(Command::Version),
        Some(extra) => Err(format!("'loopx version' takes no arguments, got '{extra}'")),
    }
}

/// What `loopx output`'s rows store (commands.rs).
#[derive(Debug, Default)]
pub struct OutputArgs {
    pub out: Output,
    pub retry_after: Option<String>,
    pub cost_usd: Option<String>,
}

/// `loopx output [--result <v>] [--goto <target>] [--stop]` (§4.3) and the
/// output extensions.
pub fn parse_output(rest: Vec<OsString>) -> Result<Command, String> {
    let mut a = OutputArgs::default();
    let Some(positionals) = options("output", commands::OUTPUT_FLAGS, rest, &mut a)? else {
        return Ok(Command::Help("output"));
    };
    if let Some(v) = positionals.first() {
        return Err(format!("loopx output takes only options, got '{v}'"));
    }
    let OutputArgs {
        out,
        retry_after,
        cost_usd,
    } = a;
    if out == Output::default() && retry_after.is_none() && cost_usd.is_none() {
        let all: Vec<String> = commands::OUTPUT_FLAGS
            .iter()
            .map(|f| f.doc().spec())
            .collect();
        return Err(format!(
            "loopx output needs at least one of {}",
            all.join(", ")
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
pub fn parse_status(rest: Vec<OsString>) -> Result<Command, String> {
    let mut json = false;
    let Some(positionals) = options("status", commands::STATUS_FLAGS, rest, &mut json)? else {
        return Ok(Command::Help("status"));
    };
    match positionals.first() {
        None => Ok(Command::Status { json }),
        Some(other) => Err(format!("'loopx status' takes only --json, got '{other}'")),
    }
}

/// `loopx init [<workflow>]` (beyond the spec).
pub fn parse_init(rest: Vec<OsString>) -> Result<Command, String> {
    let mut none = ();
    let Some(positionals) = options::<()>("init", &[], rest, &mut none)? else {
        return Ok(Command::Help("init"));
    };
    match positionals.as_slice() {
        [] => Ok(Command::Init { workflow: None }),
        [one] => Ok(Command::Init {
            workflow: Some(one.clone()),
        }),
        [_, extra, ..] => Err(format!(
            "'loopx init' takes one workflow name at most, got also '{extra}'"
        )),
    }
}

/// `loopx forget <run-id> | --all` (beyond the spec).
pub fn parse_forget(rest: Vec<OsString>) -> Result<Command, String> {
    let mut all = false;
    let Some(positionals) = options("forget", commands::FORGET_FLAGS, rest, &mut all)? else {
        return Ok(Command::Help("forget"));
    };
    match (all, positionals.as_slice()) {
        (true, []) => Ok(Command::Forget { id: None }),
        (false, [id]) => Ok(Command::Forget {
            id: Some(id.clone()),
        }),
        (false, []) => Err("'loopx forget' needs a run id (see loopx status), or --all".into()),
        (true, [id, ..]) => Err(format!(
            "'loopx forget' takes a run id or --all, not both (got '{id}')"
        )),
        (false, [_, extra, ..]) => Err(format!(
            "'loopx forget' takes one run id, got also '{extra}'"
        )),
    }
}

/// `loopx json [--lines] <path>...` (beyond the spec).
pub fn parse_json(rest: Vec<OsString>) -> Result<Command, String> {
    let mut lines = false;
    let Some(paths) = options("json", commands::JSON_FLAGS, rest, &mut lines)? else {
        return Ok(Command::Help("json"));
    };
    if paths.is_empty() {
        return Err("'loopx json' needs at least one path, e.g. .result".into());
    }
    let paths = paths
        .iter()
        .map(|p| json_query::parse_path(p))
        .collect::<Result<_, _>>()?;
    Ok(Command::Json(json_query::Query { lines, paths }))
}

/// `loopx completions bash|zsh|fish`, or `--targets` (beyond the spec).
pub fn parse_completions(rest: Vec<OsString>) -> Result<Command, String> {
    let mut targets = false;
    let Some(positionals) = options(
        "completions",
        commands::COMPLETIONS_FLAGS,
        rest,
        &mut targets,
    )?
    else {
        return Ok(Command::Help("completions"));
    };
    let shells = crate::cli::completions::SHELLS.join(", ");
    match (targets, positionals.as_slice()) {
        (true, []) => Ok(Command::CompletionTargets),
        (true, [extra, ..]) => Err(format!(
            "'loopx completions --targets' takes no shell, got '{extra}'"
        )),
        (false, []) => Err("missing shell: loopx completions bash|zsh|fish".to_string()),
        (false, [shell]) => Shell::from_name(shell)
            .map(Command::Completions)
            .ok_or_else(|| format!("unknown shell '{shell}' (shells: {shells})")),
        (false, [_, extra, ..]) => Err(format!(
            "'loopx completions' takes one shell, got also '{extra}'"
        )),
    }
}

/// `loopx env set|remove|list`. Plain operands, so values may start with
/// '-': `-h`/`--help` is help anywhere but as `env set`'s value
/// (`loopx env set K -h` sets K to `-h`).
pub fn parse_env(rest: Vec<OsString>) -> Result<Command, String> {
    let args: Vec<String> = rest.into_iter().map(lossy).collect();
    let is_help = |a: &String| a == "-h" || a == "--help";
    let value_at = match args.first().map(String::as_str) {
        Some("set") => Some(2),
        _ => None,
    };
    if args
        .iter()
        .enumerate()
        .any(|(i, a)| is_help(a) && Some(i) != value_at)
    {
        return Ok(Command::Help("env"));
    }
    let rest = args.get(1..).unwrap_or_default();
    match args.first().map(String::as_str) {
        Some("set") => match rest {
            [name, value] => Ok(Command::EnvSet {
                name: name.clone(),
                value: value.clone(),
            }),
            _ => Err(format!(
                "'loopx env set' takes a name and a value, got {}: loopx env set <name> <value>",
                count(rest.len())
            )),
        },
        Some("remove") => match rest {
            [name] => Ok(Command::EnvRemove { name: name.clone() }),
            _ => Err(format!(
                "'loopx env remove' takes one name, got {}: loopx env remove <name>",
                count(rest.len())
            )),
        },
        Some("list") => match rest {
            [] => Ok(Command::EnvList),
            [extra, ..] => Err(format!(
                "'loopx env list' takes no arguments, got '{extra}'"
            )),
        },
        Some(other) => Err(format!(
            "unknown env command '{other}' (expected set, remove or list)"
        )),
        None => Err("missing env command: loopx env set|remove|list".to_string()),
    }
}

fn count(n: usize) -> String {
    match n {
        0 => "no arguments".to_string(),
        1 => "1 argument".to_string(),
        n => format!("{n} arguments"),
    }
}

/// What `loopx install`'s rows store (commands.rs).
#[derive(Debug, Default)]
pub struct InstallOptions {
    pub workflow: Option<String>,
    pub yes: bool,
}

/// `loopx install [options] <source>`, with run's §4.2 rules: `-h`
/// anywhere is help, duplicates and unknown options are usage errors.
pub fn parse_install(rest: Vec<OsString>) -> Result<Command, String> {
    let mut o = InstallOptions::default();
    let Some(mut sources) = options("install", commands::INSTALL_FLAGS, rest, &mut o)? else {
        return Ok(Command::Help("install"));
    };
    match sources.len() {
        0 => Err("missing source: loopx install [options] <source>".to_string()),
        1 => Ok(Command::Install(InstallArgs {
            source: sources.remove(0),
            workflow: o.workflow,
            yes: o.yes,
        })),
        n => Err(format!(
            "expected one source, got {n}: {}",
            // Sources may carry credentials (install::redact).
            sources
                .iter()
                .map(|s| crate::install::redact::url(s))
                .collect::<Vec<_>>()
                .join(" ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_needs_a_path_and_knows_its_option() {
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
