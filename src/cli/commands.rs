//! The command table: every subcommand of loopx, with its usage, summary,
//! help text, options and parser, in one place (after ripgrep's flag
//! definitions). It drives parsing (cli/mod.rs), the top help's command list
//! and every command's `-h` (help.rs), the "unknown command" message and the
//! shell completions (completions.rs). A new subcommand is one entry here
//! and one parser in cli/mod.rs; it never shadows a workflow, since workflows
//! run only through `loopx run` (§4.1, DESIGN.md "Beyond the spec").

use std::ffi::OsString;

use crate::cli::flags::{Doc, Flag, HelpAt};
use crate::cli::run_flags;
use crate::cli::{self, Command, InstallOptions, OutputArgs};

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

fn docs<T>(flags: Vec<&Flag<T>>) -> Vec<Doc> {
    flags.into_iter().map(Flag::doc).collect()
}

pub const RUN_HELP: &str = "loopx run --help";

pub static COMMANDS: &[Subcommand] = &[
    Subcommand {
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
        parse: cli::parse_run,
        hidden: false,
    },
    Subcommand {
        name: "version",
        summary: "Print the loopx version",
        forms: &[("version", "Print the loopx version")],
        about: "Prints the version of loopx (the bare version, like 1.2.3) on stdout.",
        after: "",
        options: Vec::new,
        help_at: HelpAt::OptionPosition,
        operand: Operand::Nothing,
        see: "loopx version --help",
        parse: cli::parse_version,
        hidden: false,
    },
    Subcommand {
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
        options: || docs(OUTPUT_FLAGS.iter().collect()),
        help_at: HelpAt::OptionPosition,
        operand: Operand::Nothing,
        see: "loopx output --help",
        parse: cli::parse_output,
        hidden: false,
    },
    Subcommand {
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
        parse: cli::parse_env,
        hidden: false,
    },
    Subcommand {
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
        options: || docs(INSTALL_FLAGS.iter().collect()),
        help_at: HelpAt::Anywhere,
        operand: Operand::Directories,
        see: "loopx install --help",
        parse: cli::parse_install,
        hidden: false,
    },
    Subcommand {
        name: "status",
        summary: "List the loopx runs alive and resumable",
        forms: &[("status [--json]", "List the loopx runs alive and resumable")],
        about: "\
Lists the loopx runs of this user that are alive now, then the runs that
ended early and can be resumed with `loopx resume`.",
        after: "",
        options: || docs(STATUS_FLAGS.iter().collect()),
        help_at: HelpAt::OptionPosition,
        operand: Operand::Nothing,
        see: "loopx status --help",
        parse: cli::parse_status,
        hidden: false,
    },
    Subcommand {
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
        options: || docs(FORGET_FLAGS.iter().collect()),
        help_at: HelpAt::OptionPosition,
        operand: Operand::Nothing,
        see: "loopx forget --help",
        parse: cli::parse_forget,
        hidden: false,
    },
    Subcommand {
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
        parse: cli::parse_init,
        hidden: false,
    },
    Subcommand {
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
        options: || docs(JSON_FLAGS.iter().collect()),
        help_at: HelpAt::OptionPosition,
        operand: Operand::Nothing,
        see: "loopx json --help",
        parse: cli::parse_json,
        hidden: false,
    },
    Subcommand {
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
        parse: cli::parse_resume,
        hidden: false,
    },
    Subcommand {
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
        options: || docs(COMPLETIONS_FLAGS.iter().collect()),
        help_at: HelpAt::OptionPosition,
        operand: Operand::Words(crate::cli::completions::SHELLS),
        see: "loopx completions --help",
        parse: cli::parse_completions,
        hidden: false,
    },
    Subcommand {
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
        parse: cli::parse_api,
        hidden: true,
    },
];

// The options of the commands but run's (run_flags.rs, shared with resume):
// one row each, applied by flags.rs.

/// `loopx output` (§4.3); `--retry-after` and `--cost-usd` are the output
/// extensions (DESIGN.md), stored as the JSON values they print as. The
/// goto value is not validated here: that happens when the loop resolves it.
pub const OUTPUT_FLAGS: &[Flag<OutputArgs>] = &[
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
];

/// `loopx install` (§4.2, §10.5, §10.6, §10.8).
pub const INSTALL_FLAGS: &[Flag<InstallOptions>] = &[
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

/// `loopx status`: whether to print JSON.
pub const STATUS_FLAGS: &[Flag<bool>] = &[Flag {
    short: None,
    long: Some("json"),
    value: "",
    help: &["Print a JSON array instead of a table"],
    apply: |json, _| {
        *json = true;
        Ok(())
    },
}];

/// `loopx forget`: whether every kept run goes.
pub const FORGET_FLAGS: &[Flag<bool>] = &[Flag {
    short: None,
    long: Some("all"),
    value: "",
    help: &["Drop every kept run of this user"],
    apply: |all, _| {
        *all = true;
        Ok(())
    },
}];

/// `loopx json`: whether stdin is JSONL.
pub const JSON_FLAGS: &[Flag<bool>] = &[Flag {
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

/// `loopx completions`: whether to print the targets instead of a script.
pub const COMPLETIONS_FLAGS: &[Flag<bool>] = &[Flag {
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

fn lossy(s: OsString) -> String {
    s.into_string()
        .unwrap_or_else(|s| s.to_string_lossy().into_owned())
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
            "run, version, output, env, install, status, forget, init, json, resume, completions"
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
