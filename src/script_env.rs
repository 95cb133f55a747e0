//! The environment scripts run with (§8.3): the inherited one, under the env
//! files, under loopx's own variables (§3.4), plus what a runtime needs
//! (runtime.rs).
//!
//! It is kept in loopx's own environment, set up once per run, so every
//! spawn passes it on as it is. Handing `Command` the variables instead
//! makes it copy, sort and re-encode the whole environment on every spawn:
//! with 35 inherited variables that was ~80% of the instructions loopx
//! itself spent per iteration (callgrind, `run -n 200` of an empty script).
//!
//! loopx is single-threaded while it runs scripts, and the settings it takes
//! from its own environment (runtime::Settings) are read before `install`,
//! so writing the environment changes nothing but what scripts inherit.

use std::ffi::{OsStr, OsString};

pub struct ScriptEnv {
    workflow: Option<OsString>,
    /// The runtime's variables set now, each with its value before.
    runtime: Vec<(OsString, OsString, Option<OsString>)>,
}

impl ScriptEnv {
    /// Sets `vars` in this process's environment, later entries over earlier
    /// ones. Names and values are valid environment strings: env-file keys
    /// are checked and NUL-free (envfile.rs), the rest are loopx's own.
    pub fn install(vars: &[(OsString, OsString)]) -> ScriptEnv {
        for (name, value) in vars {
            std::env::set_var(name, value);
        }
        ScriptEnv {
            workflow: None,
            runtime: Vec::new(),
        }
    }

    /// `LOOPX_WORKFLOW` (§3.4): written only when it changes.
    pub fn set_workflow(&mut self, name: &str) {
        if self.workflow.as_deref() != Some(OsStr::new(name)) {
            std::env::set_var("LOOPX_WORKFLOW", name);
            self.workflow = Some(name.into());
        }
    }

    /// The variables the next script's runtime needs, on top of the rest.
    /// Those of the previous script that this one does not set go back to
    /// what they were.
    pub fn set_runtime(&mut self, vars: &[(OsString, OsString)]) {
        let same = self.runtime.len() == vars.len()
            && self
                .runtime
                .iter()
                .zip(vars)
                .all(|((n, v, _), (name, value))| n == name && v == value);
        if same {
            return;
        }
        for (name, _, before) in self.runtime.drain(..).rev() {
            match before {
                Some(value) => std::env::set_var(&name, value),
                None => std::env::remove_var(&name),
            }
        }
        for (name, value) in vars {
            let before = std::env::var_os(name);
            std::env::set_var(name, value);
            self.runtime.push((name.clone(), value.clone(), before));
        }
    }
}
