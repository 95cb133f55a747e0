//! What loopx itself says to people: warnings and notices on stderr, and
//! command output on stdout. Errors are rendered by error.rs; everything
//! else user-facing goes through here, so every line has the same shape
//! (`loopx: warning: ...`, `loopx: ...`) and a closed stream never kills
//! loopx.

use std::io::{self, Write};

use crate::error::Error;
use crate::text::terminal_safe;

/// A warning on stderr; a closed stderr is not worth dying for. Control
/// characters other than newlines are escaped (text::terminal_safe).
pub fn warn(msg: &str) {
    let _ = writeln!(io::stderr(), "loopx: warning: {}", terminal_safe(msg));
}

/// A line about the run itself (`loopx: stopped: ...`, a retry), on stderr,
/// escaped like a warning.
pub fn notice(msg: &str) {
    let _ = writeln!(io::stderr(), "loopx: {}", terminal_safe(msg));
}

/// Writes to stdout in one go. A closed stdout ends loopx quietly with the
/// status a shell expects from a broken pipe, never a panic.
pub fn print_stdout(text: &str) -> Result<(), Error> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Err(Error::StdoutClosed),
        Err(err) => Err(Error::io("cannot write to stdout", err)),
    }
}
