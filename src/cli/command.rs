//! What a command line asks for: the `Command` the parsers of the command
//! table (commands.rs) return and main.rs dispatches. A leaf of `cli/`, so
//! the table, help and completions can all name it without a cycle.

use crate::cli::run_flags::Given;
use crate::install::InstallArgs;
use crate::json_query;
use crate::output::Output;
use crate::run_options::RunOptions;

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
        given: Given,
    },
    /// `loopx json`: values from JSON on stdin.
    Json(json_query::Query),
    /// `loopx agent`: one agent step (docs/agent.md).
    Agent(crate::agent::run::Args),
    /// `loopx status [--json]`: the runs alive now.
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

/// The shells `loopx completions` writes a script for (completions.rs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// The shells, as `loopx completions` names them.
pub const SHELLS: &[&str] = &["bash", "zsh", "fish"];

impl Shell {
    pub fn from_name(name: &str) -> Option<Shell> {
        match name {
            "bash" => Some(Shell::Bash),
            "zsh" => Some(Shell::Zsh),
            "fish" => Some(Shell::Fish),
            _ => None,
        }
    }
}
