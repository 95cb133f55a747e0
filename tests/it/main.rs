//! The integration tests: one binary, one module per feature, each spawning
//! the built `loopx` against temporary projects through `util`'s strict
//! `Run` builder (exit 0 and an empty stderr unless a test says otherwise).

mod util;

mod agent_cmd;
mod agents;
mod api;
mod cli;
mod completions;
mod delegation;
mod discovery;
mod env;
mod escapees;
mod first_hour;
mod fleet;
mod front_door;
mod gh_forge;
mod hooks;
mod hostile;
mod hosts;
mod install;
mod install_faults;
mod js;
mod json;
mod module_map;
mod npm_package;
mod npm_release;
mod observe;
mod otel;
mod process;
mod release;
mod resume;
mod run_loop;
mod shellcheck;
mod shim;
mod signals;
mod state_files;
mod tail;
mod unattended;
mod version_check;
mod waits;
mod workflows;
