//! The machine mode behind the JavaScript `run()` / `runPromise()` (§9).
//! It is internal: not in any help text, only spoken by dist/npm's api.js,
//! and versioned so a mismatched binary is detected with a clear error.
//!
//! Invocation: `loopx __api <protocol> [run options] -- <target>` with the
//! project root as cwd. The options are those of `loopx run` (the table in run_options.rs):
//! `-n`, `-e <abs path>`, `--timeout`, `--max-time`, `--retry`,
//! `--retry-delay`.
//!
//! The binary's stdout is the channel to the JS side (scripts' stdout is
//! captured, so nothing else writes there); stderr passes through as in the
//! CLI. Each message is one JSON object on one line:
//!
//! - `{"type":"output","output":{...}}` after each iteration, `output` as
//!   `JSON.stringify` writes an Output (§2.3).
//! - `{"type":"done"}` when the loop ended normally (stop, the -n limit, or
//!   the consumer stopped asking).
//! - `{"type":"error","message":"...","exitCode":N,"reason":"..."}` when it
//!   failed; the message is the CLI's wording, and nothing is printed to
//!   stderr for it; the reason is `Error::reason`.
//! - `{"type":"protocol","supported":"1","version":"x.y.z"}` when the
//!   requested protocol is not this binary's; then it exits with code 1.
//!
//! The first iteration starts at once (the JS side spawns the binary on the
//! first `next()`). After an output that is not the last, the binary starts
//! nothing until it reads a line `next` on stdin: the loop is pulled by the
//! consumer. EOF on stdin means the consumer is gone (`break`, `return()`
//! between iterations, or its process exited): the loop ends quietly with
//! `done`. If the channel closes while a script runs (the consumer's process
//! exited or died: the JS side itself never closes it then), the script's
//! group is terminated as for SIGTERM and the loop ends the same quiet way.
//! SIGTERM behaves as in the CLI (forwarded to the script's group,
//! SIGKILL after the grace period), which is how the JS side cancels a
//! running script (`return()` or an abort during an iteration).
//!
//! No delegation (§3.2) happens in this mode: the JS API runs the binary of
//! the package that was imported, which is already the project's pinned one.

use std::io::{self, Write};
use std::os::fd::RawFd;

use crate::engine::{self, Observer};
use crate::error::Error;
use crate::json::write_json_string;
use crate::output::{self, Output};
use crate::proc::supervisor::Supervisor;
use crate::run_options::RunOptions;

pub const PROTOCOL: &str = "1";

/// The argument that selects this mode (cli/mod.rs).
pub const MODE: &str = "__api";

fn send(line: &str) -> Result<(), Error> {
    let mut out = io::stdout().lock();
    out.write_all(line.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(|e| Error::io("cannot write to the API channel", e))
}

struct Api;

impl Observer for Api {
    fn output(&mut self, out: &Output, last: bool, sup: &mut Supervisor) -> Result<bool, Error> {
        send(&format!(
            "{{\"type\":\"output\",\"output\":{}}}",
            output::to_json(out)
        ))?;
        if last {
            return Ok(true);
        }
        sup.next_requested()
    }

    fn channel(&self) -> Option<RawFd> {
        Some(0)
    }

    fn owns_stdout(&self) -> bool {
        true
    }
}

/// Runs the machine mode; every outcome is reported on the channel, so the
/// returned error (if any) is silent and only carries the exit code.
pub fn run(protocol: &str, args: &RunOptions) -> Result<(), Error> {
    if protocol != PROTOCOL {
        let mut msg = String::from("{\"type\":\"protocol\",\"supported\":");
        write_json_string(&mut msg, PROTOCOL);
        msg.push_str(",\"version\":");
        write_json_string(&mut msg, env!("CARGO_PKG_VERSION"));
        msg.push('}');
        send(&msg)?;
        return Err(Error::Reported { code: 1 });
    }
    match engine::run(args, &mut Api) {
        // A consumer gone mid-script ends the loop like one gone between
        // iterations: quietly, as `break` does (§9.1).
        Ok(()) | Err(Error::ConsumerGone) => {
            // After EOF on stdin the consumer may be gone altogether (its
            // process exited): a closed channel is then no failure to report.
            let _ = send("{\"type\":\"done\"}");
            Ok(())
        }
        Err(err) => {
            let mut msg = String::from("{\"type\":\"error\",\"message\":");
            write_json_string(&mut msg, &err.to_string());
            msg.push_str(&format!(
                ",\"exitCode\":{},\"reason\":\"{}\"}}",
                err.exit_code(),
                err.reason()
            ));
            // If the channel itself is gone there is no one left to tell.
            let _ = send(&msg);
            Err(Error::Reported {
                code: err.exit_code(),
            })
        }
    }
}
