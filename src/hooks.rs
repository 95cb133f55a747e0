//! Event hooks (`--on-event`, `LOOPX_ON_EVENT`; docs/watching.md "Hooks"):
//! a shell command run through `/bin/sh -c` with one JSON event on its
//! stdin and `LOOPX_EVENT`, `LOOPX_RUN_ID` and `LOOPX_EXIT_CODE` in its
//! environment. Best effort: it runs in a process group of its own, for at
//! most [`LIMIT`], and is ended (the whole group) when a signal reaches
//! loopx meanwhile, so the supervisor's signals still win. Its failure is
//! said once per run and never changes the run's exit code.

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::messages;
use crate::proc::{process, signals};

/// The longest a hook may run; then its process group is killed.
pub const LIMIT: Duration = Duration::from_secs(10);

pub struct Hook {
    command: OsString,
    run_id: String,
    /// Whether a failure was said already (once per run).
    said: bool,
}

impl Hook {
    /// The hook of `--on-event`, else of `LOOPX_ON_EVENT`; none when both
    /// are unset or empty.
    pub fn new(option: Option<&OsString>, run_id: &str) -> Option<Hook> {
        let command = option
            .cloned()
            .or_else(|| std::env::var_os("LOOPX_ON_EVENT"))
            .filter(|c| !c.is_empty())?;
        Some(Hook {
            command,
            run_id: run_id.to_string(),
            said: false,
        })
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Runs the hook for `event` with `json` on its stdin, and waits for it
    /// (bounded). `exit_code`: the run's, or the failed script's.
    pub fn fire(&mut self, event: &str, exit_code: Option<i64>, json: &str) {
        let signals_before = signals::received();
        let problem = match self.spawn(event, exit_code) {
            Ok(child) => finish(child, json, signals_before),
            Err(err) => Some(format!("cannot be run: {err}")),
        };
        if let Some(problem) = problem {
            if !std::mem::replace(&mut self.said, true) {
                messages::warn(&format!(
                    "the event hook ({event}) {problem}; the run goes on, \
                     and further hook failures are not shown"
                ));
            }
        }
    }

    fn spawn(&self, event: &str, exit_code: Option<i64>) -> std::io::Result<Child> {
        // Its stdout joins loopx's stderr: stdout is the run's (or the
        // API's channel).
        let out = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map_or_else(|_| Stdio::null(), Stdio::from);
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(&self.command)
            .env("LOOPX_EVENT", event)
            .env("LOOPX_RUN_ID", &self.run_id)
            .stdin(Stdio::piped())
            .stdout(out)
            .process_group(0);
        match exit_code {
            Some(code) => cmd.env("LOOPX_EXIT_CODE", code.to_string()),
            None => cmd.env_remove("LOOPX_EXIT_CODE"),
        };
        cmd.spawn()
    }
}

/// Feeds `json` to the hook and waits for it: at most [`LIMIT`], and not
/// past a signal that reaches loopx. What went wrong, if anything.
fn finish(mut child: Child, json: &str, signals_before: u32) -> Option<String> {
    if let Some(mut stdin) = child.stdin.take() {
        // Small (a pipe holds it whole); a hook that does not read is fine.
        let _ = stdin.write_all(json.as_bytes());
        let _ = stdin.write_all(b"\n");
    }
    let pgid = child.id() as libc::pid_t;
    let until = Instant::now() + LIMIT;
    let problem = loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return None,
            Ok(Some(status)) => break describe(status),
            Ok(None) => {}
            Err(err) => break format!("cannot be waited for: {err}"),
        }
        if signals::received() != signals_before {
            // Not a failure of the hook's: loopx is being interrupted.
            process::kill_group(pgid, libc::SIGKILL);
            let _ = child.wait();
            return None;
        }
        if Instant::now() >= until {
            break format!("took longer than {}s and was ended", LIMIT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // What the hook left behind in its group goes with it.
    process::kill_group(pgid, libc::SIGKILL);
    let _ = child.wait();
    Some(problem)
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("failed (exit {code})"),
        (None, Some(sig)) => format!("failed (killed by {})", crate::error::signal_name(sig)),
        (None, None) => "failed".to_string(),
    }
}
