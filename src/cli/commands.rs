//! The command table: every subcommand of loopx, each with its usage,
//! summary, help text, option rows and, beside them, its parser (after
//! ripgrep's flag definitions). Parsing (cli/mod.rs), help (help.rs) and
//! completions (completions.rs) read this module, and it reads none of them,
//! so the arrows run one way. A new subcommand is one entry here, with its
//! parser next to it; it never shadows a workflow, since workflows run only
//! through `loopx run` (§4.1, DESIGN.md "Beyond the spec").

use std::ffi::OsString;

use crate::agent::run::Args as AgentArgs;
use crate::cli::command::{Command, Shell, SHELLS};
use crate::cli::flags::{self, Doc, Flag, HelpAt, Parsed, Row};
use crate::cli::run_flags;
use crate::install::InstallArgs;
use crate::json_query;
use crate::output::Output;

/// One subcommand: `loopx <name> ...`.
pub struct Subcommand {
    pub name: &'static str,
    /// One line on what it does (completion menus).
    pub summary: &'static str,
    /// Its forms after `loopx `, each with a one-line summary: the top
    /// help's lines and the help's `Usage:` lines.
    pub forms: &'static [(&'static str, &'static str)],
    /// Help text between the usage and the options.
    pub about: &'static str,
    /// Help text after the options, if any.
    pub after: &'static str,
    /// The options, in help order (`-h, --help` is implied).
    pub options: fn() -> Vec<Doc>,
    /// Where `-h`/`--help` means help (§4.2 for run and install).
    pub help_at: HelpAt,
    /// What a shell completes the first operand with.
    pub operand: Operand,
    /// The help a usage error points to.
    pub see: &'static str,
    /// Parses the arguments after the name; errors are usage messages.
    pub parse: fn(Vec<OsString>) -> Result<Command, String>,
    /// Internal (the JS API's channel): in no help, list or completion.
    pub hidden: bool,
}

/// What a shell offers for a command's first operand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand {
    Nothing,
    /// This project's `workflow` and `workflow:script` names, from
    /// `loopx completions --targets`.
    Targets,
    /// Directory names (install's local sources).
    Directories,
    /// A fixed set of words.
    Words(&'static [&'static str]),
}

fn docs<'a, R: Row + 'a>(rows: impl IntoIterator<Item = &'a R>) -> Vec<Doc> {
    rows.into_iter().map(Row::doc).collect()
}

/// The table, in help order.
pub static COMMANDS: &[Subcommand] = &[
    RUN,
    VERSION,
    OUTPUT,
    ENV,
    INSTALL,
    STATUS,
    FORGET,
    INIT,
    JSON,
    AGENT,
    RESUME,
    COMPLETIONS,
    API,
];

/// Where every usage error of `run` (and of the API, which passes run's
/// options) points.
pub const RUN_HELP: &str = "loopx run --help";

/// `command`'s `rows`, parsed with its help rule: `None` when help is
/// asked for, else the positionals.
fn options<T>(
    command: &Subcommand,
    rows: &[Flag<T>],
    args: Vec<OsString>,
    into: &mut T,
) -> Result<Option<Vec<String>>, String> {
    let rows: Vec<&Flag<T>> = rows.iter().collect();
    Ok(
        match flags::parse(command.name, &rows, command.help_at, args, into)? {
            Parsed::Help => None,
            Parsed::Args(m) => Some(m.positionals),
        },
    )
}

fn lossy(s: OsString) -> String {
    s.into_string()
        .unwrap_or_else(|s| s.to_string_lossy().into_owned())
}

// `loopx run` (its rows: run_flags.rs, from run_options.rs).

const RUN: Subcommand = Subcommand {
    name: "run",
    summary: "Run a workflow script in a loop",
    forms: &[(
        "run [options] <workflow>[:<script>]",
        "Run a workflow script in a loop",
    )],
    about: "\
Runs <workflow>:<script> (default script: index) and loops: a script's stdout
is its structured output {\"result\", \"goto\", \"stop\"}; goto moves to another
script, stop ends the loop, otherwise the loop restarts at the target.
Durations read 500ms, 90s, 15m, 2h or 1h30m; a bare number is seconds.",
    after: "",
    options: || docs(run_flags::run_flags()),
    help_at: HelpAt::Anywhere,
    operand: Operand::Targets,
    see: RUN_HELP,
    parse: parse_run,
    hidden: false,
};

/// `loopx run`'s arguments, by run's rows (run_flags.rs).
fn parse_run(rest: Vec<OsString>) -> Result<Command, String> {
    Ok(match run_flags::parse(rest)? {
        run_flags::Parsed::Help => Command::Help("run"),
        run_flags::Parsed::Run(options) => Command::Run(options),
    })
}

// `loopx version` (§4.3).

const VERSION: Subcommand = Subcommand {
    name: "version",
    summary: "Print the loopx version",
    forms: &[("version", "Print the loopx version")],
    about: "Prints the version of loopx (the bare version, like 1.2.3) on stdout.",
    after: "",
    options: Vec::new,
    help_at: HelpAt::OptionPosition,
    operand: Operand::Nothing,
    see: "loopx version --help",
    parse: parse_version,
    hidden: false,
};

/// `loopx version` takes nothing (§4.3).
fn parse_version(rest: Vec<OsString>) -> Result<Command, String> {
    let Some(positionals) = options::<()>(&VERSION, &[], rest, &mut ())? else {
        return Ok(Command::Help("version"));
    };
    match positionals.first() {
        None => Ok(Command::Version),
        Some(extra) => Err(format!("'loopx version' takes no arguments, got '{extra}'")),
    }
}

// `loopx output` (§4.3).

const OUTPUT: Subcommand = Subcommand {
    name: "output",
    summary: "Print structured output (for bash scripts)",
    // Two forms, so the top help names every option within 80 columns.
    forms: &[
        (
            "output [--result <v>] [--goto <target>] [--stop]",
            "Print structured output (for bash scripts)",
        ),
        (
            "output [--retry-after <when>] [--cost-usd <usd>]",
            "Also ask for a wait, or report a cost",
        ),
    ],
    about: "\
Prints a script's structured output as one JSON object on stdout, for bash
scripts: `$LOOPX_BIN output --result \"$summary\" --goto review`. At least
one option is needed. The goto target is checked when the loop follows it,
not here. A value may start with '-' (even -h).",
    after: "",
    options: || docs(OUTPUT_FLAGS),
    help_at: HelpAt::OptionPosition,
    operand: Operand::Nothing,
    see: "loopx output --help",
    parse: parse_output,
    hidden: false,
};

/// `loopx output [--result <v>] [--goto <target>] [--stop]` (§4.3) and the
/// output extensions.
fn parse_output(rest: Vec<OsString>) -> Result<Command, String> {
    let mut a = OutputArgs::default();
    let Some(positionals) = options(&OUTPUT, OUTPUT_FLAGS, rest, &mut a)? else {
        return Ok(Command::Help("output"));
    };
    if let Some(v) = positionals.first() {
        return Err(format!("loopx output takes only options, got '{v}'"));
    }
    let OutputArgs {
        out,
        retry_after,
        cost_usd,
        permanent,
        class,
    } = a;
    let permanent = permanent.then(|| "true".to_string());
    let class = class.map(|c| format!("\"{c}\""));
    let none =
        retry_after.is_none() && cost_usd.is_none() && permanent.is_none() && class.is_none();
    if out == Output::default() && none {
        let all: Vec<String> = OUTPUT_FLAGS.iter().map(|f| f.doc().spec()).collect();
        return Err(format!(
            "loopx output needs at least one of {}",
            all.join(", ")
        ));
    }
    let extensions = [
        ("retry_after", retry_after),
        ("cost_usd", cost_usd),
        ("permanent", permanent),
        ("class", class),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k, v?)))
    .collect();
    Ok(Command::Output { out, extensions })
}

/// What `loopx output`'s rows store.
#[derive(Debug, Default)]
struct OutputArgs {
    pub out: Output,
    pub retry_after: Option<String>,
    pub cost_usd: Option<String>,
    /// `--permanent` and `--class`: a failing script's word on its failure.
    pub permanent: bool,
    pub class: Option<String>,
}

/// `loopx output` (§4.3); `--retry-after` and `--cost-usd` are the output
/// extensions (DESIGN.md), stored as the JSON values they print as. The
/// goto value is not validated here: that happens when the loop resolves it.
const OUTPUT_FLAGS: &[Flag<OutputArgs>] = &[
    Flag {
        short: None,
        long: Some("result"),
        value: "<value>",
        help: &["The result: the next script's input"],
        apply: |a, v| {
            a.out.result = Some(lossy(v));
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("goto"),
        value: "<target>",
        help: &[
            "The script to run next: <script> of this",
            "workflow, or <workflow>:<script>",
        ],
        apply: |a, v| {
            a.out.goto = Some(lossy(v));
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("stop"),
        value: "",
        help: &["End the loop after this script (exit 0)"],
        apply: |a, _| {
            a.out.stop = true;
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("retry-after"),
        value: "<when>",
        help: &[
            "Run this script again later with the same input:",
            "seconds, a duration, or an RFC 3339 time",
        ],
        apply: |a, v| {
            a.retry_after = Some(crate::wait::output_retry_after(&lossy(v))?);
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("cost-usd"),
        value: "<usd>",
        help: &[
            "What this script run spent, in US dollars",
            "(what `loopx run --max-cost` adds up)",
        ],
        apply: |a, v| {
            a.cost_usd = Some(crate::wait::output_cost_usd(&lossy(v))?);
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("permanent"),
        value: "",
        help: &[
            "For a failing script: its failure is permanent,",
            "`loopx run --retry` does not run it again",
        ],
        apply: |a, _| {
            a.permanent = true;
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("class"),
        value: "<name>",
        help: &[
            "For a failing script: the kind of failure, shown",
            "in the run log (letters, digits, _ and -)",
        ],
        apply: |a, v| {
            let name = lossy(v);
            let ok = !name.is_empty()
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !ok {
                return Err(format!(
                    "expected a name of letters, digits, _ and -, got '{name}'"
                ));
            }
            a.class = Some(name);
            Ok(())
        },
    },
];

// `loopx env` (§4.3, §8).

const ENV: Subcommand = Subcommand {
    name: "env",
    summary: "Set, remove or list global environment variables",
    forms: &[
        (
            "env set <name> <value>",
            "Set a global environment variable",
        ),
        ("env remove <name>", "Remove a global environment variable"),
        ("env list", "List global environment variables"),
    ],
    about: "\
Global environment variables, kept in $XDG_CONFIG_HOME/loopx/env (default
~/.config/loopx/env) and given to every script; `loopx run -e <path>`
overrides them. Names match [A-Za-z_][A-Za-z0-9_]*; a value is one line and
may start with '-' (`loopx env set K -h` sets K to -h). `list` prints
NAME=value lines, sorted; removing a missing name is not an error.",
    after: "",
    options: Vec::new,
    help_at: HelpAt::OptionPosition,
    operand: Operand::Words(&["set", "remove", "list"]),
    see: "loopx env --help",
    parse: parse_env,
    hidden: false,
};

/// `loopx env set|remove|list`. Plain operands, so values may start with
/// '-': `-h`/`--help` is help anywhere but as `env set`'s value
/// (`loopx env set K -h` sets K to `-h`).
fn parse_env(rest: Vec<OsString>) -> Result<Command, String> {
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

// `loopx install` (§10).

const INSTALL: Subcommand = Subcommand {
    name: "install",
    summary: "Install workflows into .loopx/",
    forms: &[(
        "install [options] <source>",
        "Install workflows into .loopx/",
    )],
    about: "\
Installs the workflows of <source> into .loopx/ (created when missing).

Sources:
  <org>/<repo>                   GitHub shorthand, cloned from
                                 https://github.com/<org>/<repo>.git
                                 (write the full URL for a .git name)
  https://github.com/<o>/<r>     a repository on github.com, gitlab.com or
                                 bitbucket.org (optionally .git or a
                                 trailing /); other paths there are not git
  <any URL ending in .git>       any other git repository (https, ssh, git,
                                 file, or user@host:path.git)
  <URL of a .tar.gz or .tgz>     a tarball over http(s) or file; the query
                                 and fragment are ignored for the name
  /path, ./path, ../path         a local directory, copied like a clone of
                                 it (.git skipped, links must stay inside)
Git sources are cloned with the system git (shallow, no prompts); tarballs
are downloaded with the system curl (redirects followed) and extracted by
loopx, refusing entries that would land outside the archive.

A source with script files at its root is one workflow, named after the
repository or archive (all its files are installed). Otherwise each
top-level directory with script files is a workflow of its own and only
those directories are installed.",
    after: "\
Nothing is installed unless every selected workflow passes: valid names,
no two scripts sharing a name, no existing entry at .loopx/<name> (-y
replaces only existing workflows, never other files or directories), and
the workflow's package.json loopx range. All problems are listed at once.
Each installed workflow is printed on stdout. Dependencies are not installed:
run `npm install` in the workflow directory if it needs any.",
    options: || docs(INSTALL_FLAGS),
    help_at: HelpAt::Anywhere,
    operand: Operand::Directories,
    see: "loopx install --help",
    parse: parse_install,
    hidden: false,
};

/// `loopx install [options] <source>`, with run's §4.2 rules: `-h`
/// anywhere is help, duplicates and unknown options are usage errors.
fn parse_install(rest: Vec<OsString>) -> Result<Command, String> {
    let mut o = InstallOptions::default();
    let Some(mut sources) = options(&INSTALL, INSTALL_FLAGS, rest, &mut o)? else {
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

/// What `loopx install`'s rows store.
#[derive(Debug, Default)]
struct InstallOptions {
    pub workflow: Option<String>,
    pub yes: bool,
}

/// `loopx install` (§4.2, §10.5, §10.6, §10.8).
const INSTALL_FLAGS: &[Flag<InstallOptions>] = &[
    Flag {
        short: Some('w'),
        long: Some("workflow"),
        value: "<name>",
        help: &["Install only this workflow of a multi-workflow source"],
        apply: |a, v| {
            a.workflow = Some(lossy(v));
            Ok(())
        },
    },
    Flag {
        short: Some('y'),
        long: None,
        value: "",
        help: &[
            "Replace existing workflows of the same name and",
            "install despite a loopx version requirement",
            "the running loopx does not meet",
        ],
        apply: |a, _| {
            a.yes = true;
            Ok(())
        },
    },
];

// `loopx status` (beyond the spec).

const STATUS: Subcommand = Subcommand {
    name: "status",
    summary: "List the loopx runs alive and resumable",
    forms: &[("status [--json]", "List the loopx runs alive and resumable")],
    about: "\
Lists the loopx runs of this user that are alive now, then the runs that
ended early and can be resumed with `loopx resume`.",
    after: "",
    options: || docs(STATUS_FLAGS),
    help_at: HelpAt::OptionPosition,
    operand: Operand::Nothing,
    see: "loopx status --help",
    parse: parse_status,
    hidden: false,
};

/// `loopx status [--json]`. Beyond the spec, so it takes nothing else (a
/// workflow named `status` runs with `loopx run status`, §4.1).
fn parse_status(rest: Vec<OsString>) -> Result<Command, String> {
    let mut json = false;
    let Some(positionals) = options(&STATUS, STATUS_FLAGS, rest, &mut json)? else {
        return Ok(Command::Help("status"));
    };
    match positionals.first() {
        None => Ok(Command::Status { json }),
        Some(other) => Err(format!("'loopx status' takes only --json, got '{other}'")),
    }
}

/// `loopx status`: whether to print JSON.
const STATUS_FLAGS: &[Flag<bool>] = &[Flag {
    short: None,
    long: Some("json"),
    value: "",
    help: &["Print a JSON array instead of a table"],
    apply: |json, _| {
        *json = true;
        Ok(())
    },
}];

// `loopx forget` (beyond the spec).

const FORGET: Subcommand = Subcommand {
    name: "forget",
    summary: "Drop a kept run: nothing to resume",
    forms: &[
        ("forget <run-id>", "Drop a kept run: nothing to resume"),
        ("forget --all", "Drop every kept run of this user"),
    ],
    about: "\
Drops the checkpoint of a run that ended early (what `loopx resume` would
carry on), named by its id or a unique prefix of it, as `loopx status`
lists them; --all drops every one. A run still running is refused.",
    after: "",
    options: || docs(FORGET_FLAGS),
    help_at: HelpAt::OptionPosition,
    operand: Operand::Nothing,
    see: "loopx forget --help",
    parse: parse_forget,
    hidden: false,
};

/// `loopx forget <run-id> | --all`.
fn parse_forget(rest: Vec<OsString>) -> Result<Command, String> {
    let mut all = false;
    let Some(positionals) = options(&FORGET, FORGET_FLAGS, rest, &mut all)? else {
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

/// `loopx forget`: whether every kept run goes.
const FORGET_FLAGS: &[Flag<bool>] = &[Flag {
    short: None,
    long: Some("all"),
    value: "",
    help: &["Drop every kept run of this user"],
    apply: |all, _| {
        *all = true;
        Ok(())
    },
}];

// `loopx init` (beyond the spec).

const INIT: Subcommand = Subcommand {
    name: "init",
    summary: "Write a starting workflow into .loopx/",
    forms: &[(
        "init [<workflow>]",
        "Write a starting workflow into .loopx/",
    )],
    about: "\
Writes a runnable starting point into this project's .loopx/, never
overwriting anything. Without a name, a workflow of one commented script,
.loopx/main/index.sh; with a name, that workflow of one script, unless it
is one of the ready-made workflows, ralph, build-audit-fix or issue-runner:
that one is installed from this version's release (workflows.tar.gz, or
LOOPX_DOWNLOAD_URL's mirror), and the file it reads is written beside it
for you to fill in (PROMPT.md, TASK.md, issue-runner.env).",
    after: "",
    options: Vec::new,
    help_at: HelpAt::OptionPosition,
    operand: Operand::Words(crate::init::READY_MADE),
    see: "loopx init --help",
    parse: parse_init,
    hidden: false,
};

/// `loopx init [<workflow>]`: one name at most.
fn parse_init(rest: Vec<OsString>) -> Result<Command, String> {
    let Some(positionals) = options::<()>(&INIT, &[], rest, &mut ())? else {
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

// `loopx json` (beyond the spec).

const JSON: Subcommand = Subcommand {
    name: "json",
    summary: "Print values from JSON on stdin",
    forms: &[(
        "json [--lines] <path>...",
        "Print values from JSON on stdin",
    )],
    about: "\
Reads JSON on stdin and prints the values at <path>s: strings raw, other
values as JSON, a missing value as an empty field; several paths on one
line, separated by tabs. A path is . (the whole value) or .key.key...; a
number indexes an array (-1 is its last item). For bash workflows, which
need nothing but loopx (no jq).",
    after: "\
When fields share a line (several paths, or --lines), a backslash, newline,
carriage return or tab in them is written \\\\, \\n, \\r, \\t (printf '%b'
reverses it). Exit status 1 for a document that is not JSON (without
--lines).

Example:
  claude -p --output-format stream-json --verbose <prompt.md |
    loopx json --lines .type .message.content.0.name",
    options: || docs(JSON_FLAGS),
    help_at: HelpAt::OptionPosition,
    operand: Operand::Nothing,
    see: "loopx json --help",
    parse: parse_json,
    hidden: false,
};

/// `loopx json [--lines] <path>...` (beyond the spec).
fn parse_json(rest: Vec<OsString>) -> Result<Command, String> {
    let mut lines = false;
    let Some(paths) = options(&JSON, JSON_FLAGS, rest, &mut lines)? else {
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

/// `loopx json`: whether stdin is JSONL.
const JSON_FLAGS: &[Flag<bool>] = &[Flag {
    short: None,
    long: Some("lines"),
    value: "",
    help: &[
        "Read JSONL: one document per line, one output line",
        "each, as they come (lines that are not JSON are skipped)",
    ],
    apply: |lines, _| {
        *lines = true;
        Ok(())
    },
}];

// `loopx resume` (beyond the spec): run's rows but `--resume`.

const AGENT: Subcommand = Subcommand {
    name: "agent",
    summary: "Run an agent CLI for one workflow step",
    forms: &[(
        "agent [<agent>[,<agent>...]] [options] < prompt",
        "Run an agent CLI for one workflow step",
    )],
    about: "\
Runs Claude Code, Codex or Gemini CLI (default: $AGENT, else claude) headless
with loopx's preset, or --cmd, with the prompt on its stdin; prints a line of
progress per step on stderr, keeps its events, final message, stderr and a
summary, and exits with the class of its ending. A comma list falls back to
the next agent on a usage limit. Without --output, stdout is the final
message. See docs/agent.md.",
    after: "\
Exit codes: 0 done; 10 usage_limit, 11 rate_limited, 12 overloaded (waits:
0 with --output); 20 auth, 21 billing, 22 disabled, 23 permission_denied,
24 invalid_request, 25 missing (permanent); 30 turn_limit, 31 hung,
32 crashed; 1 loopx's own error.

Example:
  exec \"$LOOPX_BIN\" agent --output --done-line LOOP_DONE < PROMPT.md",
    options: || docs(AGENT_FLAGS),
    help_at: HelpAt::OptionPosition,
    operand: Operand::Words(&["claude", "codex", "gemini"]),
    see: "loopx agent --help",
    parse: parse_agent,
    hidden: false,
};

/// `loopx agent [<agent>[,<agent>...]] [options]` (beyond the spec).
fn parse_agent(rest: Vec<OsString>) -> Result<Command, String> {
    let mut args = AgentArgs::default();
    let Some(positionals) = options(&AGENT, AGENT_FLAGS, rest, &mut args)? else {
        return Ok(Command::Help("agent"));
    };
    match positionals.as_slice() {
        [] => {}
        [agents] => args.agents = Some(agents.clone()),
        [_, extra, ..] => {
            return Err(format!(
                "'loopx agent' takes one agent or a comma list, got also '{extra}'"
            ))
        }
    }
    Ok(Command::Agent(args))
}

/// `loopx agent`'s options (docs/agent.md).
const AGENT_FLAGS: &[Flag<AgentArgs>] = &[
    Flag {
        short: None,
        long: Some("cmd"),
        value: "<command line>",
        help: &[
            "Run this command instead of the preset, prompt",
            "on its stdin ($AGENT_CMD)",
        ],
        apply: |a, v| set_once(&mut a.cmd, lossy(v)),
    },
    Flag {
        short: None,
        long: Some("prompt"),
        value: "<path>",
        help: &["Read the prompt from this file (default: stdin)"],
        apply: |a, v| set_once(&mut a.prompt, v.into()),
    },
    Flag {
        short: None,
        long: Some("output"),
        value: "",
        help: &[
            "Print loopx structured output for the ending:",
            "result, retry_after, cost_usd, or the class",
        ],
        apply: |a, _| {
            a.output = true;
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("done-line"),
        value: "<text>",
        help: &[
            "With --output: stop the loop when the final",
            "message has this line",
        ],
        apply: |a, v| set_once(&mut a.done_line, lossy(v)),
    },
    Flag {
        short: None,
        long: Some("dir"),
        value: "<path>",
        help: &[
            "Keep the step's files here",
            "(default: runs/$LOOPX_RUN_ID)",
        ],
        apply: |a, v| set_once(&mut a.dir, v.into()),
    },
    Flag {
        short: None,
        long: Some("step"),
        value: "<name>",
        help: &[
            "The step's name in its files and sessions",
            "(default: iteration-$LOOPX_ITERATION)",
        ],
        apply: |a, v| set_once(&mut a.step, lossy(v)),
    },
    Flag {
        short: None,
        long: Some("workdir"),
        value: "<path>",
        help: &["Run the agent here (default: $LOOPX_PROJECT_ROOT)"],
        apply: |a, v| set_once(&mut a.workdir, v.into()),
    },
    Flag {
        short: None,
        long: Some("allow"),
        value: "<commands>",
        help: &[
            "Commands the agent may run besides git,",
            "comma-separated (added to $AGENT_ALLOW)",
        ],
        apply: |a, v| set_once(&mut a.allow, lossy(v)),
    },
    Flag {
        short: None,
        long: Some("idle-timeout"),
        value: "<duration>",
        help: &[
            "End the agent after this long without an event",
            "(class hung; default 10m; $AGENT_IDLE_TIMEOUT)",
        ],
        apply: |a, v| {
            let d = crate::duration::parse(&lossy(v))?;
            set_once(&mut a.idle_timeout, d)
        },
    },
    Flag {
        short: None,
        long: Some("pause-at"),
        value: "<percent>",
        help: &[
            "After a step at this quota utilization or more,",
            "wait for the reset ($AGENT_PAUSE_AT)",
        ],
        apply: |a, v| {
            let text = lossy(v);
            let p: f64 = text
                .parse()
                .ok()
                .filter(|p: &f64| *p > 0.0 && *p <= 100.0)
                .ok_or_else(|| format!("expected a percentage from 1 to 100, got '{text}'"))?;
            set_once(&mut a.pause_at, p)
        },
    },
    Flag {
        short: None,
        long: Some("fresh"),
        value: "",
        help: &[
            "Start a new agent session, never resume one",
            "($AGENT_FRESH=1)",
        ],
        apply: |a, _| {
            a.fresh = true;
            Ok(())
        },
    },
];

/// An option given twice is a usage error (§4.2's grammar).
fn set_once<T>(slot: &mut Option<T>, v: T) -> Result<(), String> {
    if slot.is_some() {
        return Err("given twice".into());
    }
    *slot = Some(v);
    Ok(())
}

const RESUME: Subcommand = Subcommand {
    name: "resume",
    summary: "Carry on a run that stopped early",
    forms: &[(
        "resume [<run-id>] [options]",
        "Carry on a run that stopped early",
    )],
    about: "\
Carries on a run that ended early: by a signal, a failed or timed-out
script, a wait that outlasted its budget (exit 75), a crash or a reboot.
Without <run-id> (or a unique prefix of it), the current project's most
recent resumable run. The script that was about to run or running runs
again with its saved input (at least once), under the same run id and
iteration; spent time and money carry over. Options are `loopx run`'s and
replace the saved ones. `loopx status` lists resumable runs.",
    after: "",
    options: || docs(run_flags::resume_flags()),
    help_at: HelpAt::Anywhere,
    operand: Operand::Nothing,
    see: "loopx resume --help",
    parse: parse_resume,
    hidden: false,
};

/// `loopx resume [<run-id>] [options]`: run's rows but `--resume`.
fn parse_resume(rest: Vec<OsString>) -> Result<Command, String> {
    Ok(match run_flags::parse_resume(rest)? {
        run_flags::ParsedResume::Help => Command::Help("resume"),
        run_flags::ParsedResume::Resume { id, given } => Command::Resume { id, given },
    })
}

// `loopx completions` (beyond the spec).

const COMPLETIONS: Subcommand = Subcommand {
    name: "completions",
    summary: "Print a shell completion script",
    forms: &[(
        "completions bash|zsh|fish",
        "Print a shell completion script",
    )],
    about: "\
Prints a completion script for the shell: subcommands, their options and,
for `loopx run`, the workflows and scripts of the current project.
  bash  eval \"$(loopx completions bash)\" in ~/.bashrc, or save it as
        ~/.local/share/bash-completion/completions/loopx
  zsh   save it as _loopx in a directory of $fpath (before compinit)
  fish  save it as ~/.config/fish/completions/loopx.fish
The scripts ask `loopx completions --targets` for the targets as they
complete: it prints each `workflow` and `workflow:script` of ./.loopx/,
one a line, and nothing (exit 0) where there is none.",
    after: "",
    options: || docs(COMPLETIONS_FLAGS),
    help_at: HelpAt::OptionPosition,
    operand: Operand::Words(SHELLS),
    see: "loopx completions --help",
    parse: parse_completions,
    hidden: false,
};

/// `loopx completions bash|zsh|fish`, or `--targets` (beyond the spec).
fn parse_completions(rest: Vec<OsString>) -> Result<Command, String> {
    let mut targets = false;
    let Some(positionals) = options(&COMPLETIONS, COMPLETIONS_FLAGS, rest, &mut targets)? else {
        return Ok(Command::Help("completions"));
    };
    let shells = SHELLS.join(", ");
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

/// `loopx completions`: whether to print the targets instead of a script.
const COMPLETIONS_FLAGS: &[Flag<bool>] = &[Flag {
    short: None,
    long: Some("targets"),
    value: "",
    help: &[
        "Print this project's workflow and workflow:script",
        "names, one a line (what the scripts complete with)",
    ],
    apply: |targets, _| {
        *targets = true;
        Ok(())
    },
}];

// The JS API's channel (api.rs, §9): run's rows, in no help.

const API: Subcommand = Subcommand {
    name: crate::api::MODE,
    summary: "",
    forms: &[],
    about: "",
    after: "",
    options: || docs(run_flags::run_flags()),
    help_at: HelpAt::Anywhere,
    operand: Operand::Nothing,
    // Its problems are run's: the API passes run options.
    see: RUN_HELP,
    parse: parse_api,
    hidden: true,
};

/// `__api <protocol> <run options and target>`: the run grammar, minus help.
fn parse_api(rest: Vec<OsString>) -> Result<Command, String> {
    let mut rest = rest.into_iter();
    let protocol = rest.next().map(lossy).unwrap_or_default();
    match parse_run(rest.collect())? {
        Command::Run(args) => Ok(Command::Api { protocol, args }),
        _ => Err("the API channel does not take -h".to_string()),
    }
}

/// The exit codes (§12, DESIGN.md "Beyond the spec"), for the top help.
pub const EXIT_CODES: &[(&str, &str)] = &[
    (
        "0",
        "the loop stopped or a limit was reached; a command succeeded",
    ),
    (
        "1",
        "an error (usage, validation, install), or a script failed",
    ),
    ("75", "a wait outlasted its budget; the run is resumable"),
    ("124", "a script timed out and no retry was left"),
    ("128+N", "ended by signal N (130 for Ctrl-C)"),
];

/// The entry for `loopx <name>`, hidden ones included.
pub fn find(name: &str) -> Option<&'static Subcommand> {
    COMMANDS.iter().find(|c| c.name == name)
}

/// The commands a user sees, in help order.
pub fn visible() -> impl Iterator<Item = &'static Subcommand> {
    COMMANDS.iter().filter(|c| !c.hidden)
}

/// `run, version, ...`: for the "unknown command" message.
pub fn names() -> String {
    visible().map(|c| c.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_consistent() {
        for c in COMMANDS {
            if c.hidden {
                continue;
            }
            assert_eq!(c.see, format!("loopx {} --help", c.name));
            assert!(!c.forms.is_empty(), "{}", c.name);
            for (form, summary) in c.forms {
                assert!(form.starts_with(c.name), "{form}");
                assert!(!summary.is_empty(), "{form}");
            }
            assert!(c.about.lines().all(|l| l.len() <= 80), "{}", c.name);
            assert!(c.after.lines().all(|l| l.len() <= 80), "{}", c.name);
            // An option is spelled one way per command.
            let mut spellings: Vec<String> = (c.options)()
                .iter()
                .flat_map(Doc::spellings)
                .chain(["-h".to_string(), "--help".to_string()])
                .collect();
            let n = spellings.len();
            spellings.sort();
            spellings.dedup();
            assert_eq!(spellings.len(), n, "{}", c.name);
        }
    }

    #[test]
    fn names_are_unique_and_list_the_visible_commands() {
        let mut all: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), COMMANDS.len());
        assert_eq!(
            names(),
            "run, version, output, env, install, status, forget, init, json, agent, resume, completions"
        );
        assert!(find(crate::api::MODE).is_some_and(|c| c.hidden));
    }

    #[test]
    fn resume_has_run_options_but_resume() {
        let run = (find("run").unwrap().options)();
        let resume = (find("resume").unwrap().options)();
        assert_eq!(resume.len() + 1, run.len());
        assert!(run.iter().any(|d| d.long == Some("resume")));
        assert!(resume.iter().all(|d| d.long != Some("resume")));
    }

    #[test]
    fn exit_codes_are_the_five_of_the_design() {
        let codes: Vec<&str> = EXIT_CODES.iter().map(|(c, _)| *c).collect();
        assert_eq!(codes, ["0", "1", "75", "124", "128+N"]);
    }
}

/// Property test: what `loopx output` prints reads back (output.rs, §2.3)
/// as the fields it was given, for every combination and order of flags.
#[cfg(test)]
mod props {
    use crate::cli::Command;
    use crate::output::{self, Output};
    use crate::testing::config;
    use proptest::prelude::*;
    use std::ffi::OsString;

    /// `loopx output` arguments for the given fields, in the given order,
    /// each value as `--flag value` or `--flag=value`.
    fn output_args(
        result: &Option<String>,
        goto: &Option<String>,
        stop: bool,
        order: &[usize],
        joined: &[bool],
    ) -> Vec<OsString> {
        let mut flags: Vec<Vec<String>> = Vec::new();
        for (name, value) in [("--result", result), ("--goto", goto)] {
            if let Some(v) = value {
                flags.push(if joined[flags.len()] {
                    vec![format!("{name}={v}")]
                } else {
                    vec![name.to_string(), v.clone()]
                });
            }
        }
        if stop {
            flags.push(vec!["--stop".to_string()]);
        }
        let mut args = vec![OsString::from("output")];
        let n = flags.len();
        for i in order.iter().map(|i| i % n.max(1)).chain(0..n) {
            if let Some(flag) = flags.get_mut(i).filter(|f| !f.is_empty()) {
                args.extend(flag.drain(..).map(OsString::from));
            }
        }
        args
    }

    proptest! {
        #![proptest_config(config(1024))]

        #[test]
        fn loopx_output_reads_back_as_the_fields_it_was_given(
            result in proptest::option::of(any::<String>()),
            goto in proptest::option::of(any::<String>()),
            stop in any::<bool>(),
            order in prop::collection::vec(0usize..3, 3),
            joined in prop::collection::vec(any::<bool>(), 2),
        ) {
            let args = output_args(&result, &goto, stop, &order, &joined);
            match crate::cli::parse(args.clone()) {
                Ok(Command::Output { out, .. }) => {
                    let want = Output { result, goto, stop };
                    prop_assert_eq!(&out, &want, "{:?}", args);
                    prop_assert_eq!(output::parse(output::to_json(&out).into_bytes()), want);
                }
                Ok(_) => prop_assert!(false, "{args:?} is not `loopx output`"),
                // No flag at all is the one usage error (§4.3).
                Err(e) => prop_assert!(result.is_none() && goto.is_none() && !stop, "{args:?}: {e}"),
            }
        }
    }
}
