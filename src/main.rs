//! loopx: loop scripts that drive agent CLIs. `main` only dispatches; each
//! concern lives in its own module.

mod agent;
mod api;
mod checkpoint;
mod cli;
mod clock;
mod delegate;
mod discovery;
mod duration;
mod engine;
mod env;
mod envfile;
mod error;
mod hooks;
mod init;
mod install;
mod js_assets;
mod js_compat;
mod json;
mod json_query;
mod messages;
mod names;
mod otel;
mod output;
mod package_json;
mod path_search;
mod proc;
mod report;
mod resolve;
mod resume;
mod run_log;
mod run_options;
mod runtime;
mod script_env;
mod self_exe;
mod semver_range;
mod state_file;
mod status;
mod target;
#[cfg(test)]
mod testing;
mod text;
mod version_check;
mod wait;

use std::io::{self, Write};

use messages::print_stdout;

use cli::Command;
use error::Error;

fn main() {
    // The run's watcher is this binary too (proc/watcher.rs): it must not
    // parse a command line, delegate, or touch a project.
    proc::watcher::run_if_watcher();
    let code = match dispatch() {
        Ok(()) => 0,
        Err(err) => {
            if !err.is_silent() {
                // Escaped: an error may quote a file's or a script's text.
                let text = err.to_string();
                let _ = writeln!(io::stderr(), "loopx: error: {}", text::terminal_safe(&text));
            }
            err.exit_code()
        }
    };
    std::process::exit(code);
}

fn dispatch() -> Result<(), Error> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // §3.2: delegation happens before any command parsing.
    delegate::maybe_delegate(&args);
    match cli::parse(args)? {
        Command::TopHelp => print_stdout(&cli::help::top()),
        // §11.2: the one help that looks at .loopx/.
        Command::Help("run") => print_stdout(&cli::help::run_help(&current_dir()?)),
        Command::Help(name) => print_stdout(&cli::help::of(name)),
        Command::Version => print_stdout(concat!(env!("CARGO_PKG_VERSION"), "\n")),
        Command::Output { out, extensions } => {
            print_stdout(&(output::to_json_with(&out, &extensions) + "\n"))
        }
        Command::EnvSet { name, value } => env::set(&name, &value),
        Command::EnvRemove { name } => env::remove(&name),
        Command::EnvList => env::list(),
        Command::Run(args) => engine::run(&args, &mut engine::Cli),
        Command::Api { protocol, args } => api::run(&protocol, &args),
        Command::Install(args) => install::install(&args),
        Command::Status { json } => status::list(json),
        Command::Json(query) => json_query::run_stdio(&query),
        Command::Agent(args) => std::process::exit(agent::run::run(&args)),
        Command::Resume { id, given } => engine::resume(id.as_deref(), |saved| given.apply(saved)),
        Command::Init { workflow } => init::init(workflow.as_deref()),
        Command::Forget { id } => resume::forget(id.as_deref()),
        Command::Completions(shell) => print_stdout(&cli::completions::script(shell)),
        Command::CompletionTargets => print_stdout(&cli::completions::targets(&current_dir()?)),
    }
}

fn current_dir() -> Result<std::path::PathBuf, Error> {
    std::env::current_dir().map_err(|e| Error::io("cannot determine the current directory", e))
}
