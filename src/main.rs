//! loopx: loop scripts that drive agent CLIs. `main` only dispatches; each
//! concern lives in its own module.

mod api;
mod bounded_read;
mod checkpoint;
mod cli;
mod clock;
mod delegate;
mod descendants;
mod discovery;
mod duration;
mod engine;
mod env;
mod envfile;
mod error;
mod help;
mod install;
mod js_assets;
mod js_compat;
mod json;
mod messages;
mod names;
mod output;
mod package_json;
mod process;
mod report;
mod resolve;
mod resume;
mod run_flags;
mod run_log;
mod run_options;
mod runtime;
mod script_env;
mod self_exe;
mod semver_range;
mod shim_parent;
mod signals;
mod status;
mod supervisor;
mod target;
mod terminal;
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
    let code = match dispatch() {
        Ok(()) => 0,
        Err(err) => {
            if !err.is_silent() {
                let _ = writeln!(io::stderr(), "loopx: error: {err}");
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
        Command::TopHelp => print_stdout(help::TOP),
        Command::Version => print_stdout(concat!(env!("CARGO_PKG_VERSION"), "\n")),
        Command::Output { out, extensions } => {
            print_stdout(&(output::to_json_with(&out, &extensions) + "\n"))
        }
        Command::EnvSet { name, value } => env::set(&name, &value),
        Command::EnvRemove { name } => env::remove(&name),
        Command::EnvList => env::list(),
        Command::RunHelp => {
            let root = std::env::current_dir()
                .map_err(|e| Error::io("cannot determine the current directory", e))?;
            print_stdout(&help::run_help(&root))
        }
        Command::Run(args) => engine::run(&args, &mut engine::Cli),
        Command::Api { protocol, args } => api::run(&protocol, &args),
        Command::InstallHelp => print_stdout(help::INSTALL),
        Command::Install(args) => install::install(&args),
        Command::Status { json } => status::list(json),
        Command::ResumeHelp => print_stdout(help::RESUME),
        Command::Resume { id, given } => engine::resume(id.as_deref(), |saved| given.apply(saved)),
    }
}
