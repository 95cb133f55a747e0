//! What loopx itself says to people: warnings and notices on stderr, and
//! command output on stdout. Errors are rendered by error.rs; everything
//! else user-facing goes through here, so every line has the same shape
//! (`loopx: warning: ...`, `loopx: ...`) and a closed stream never kills
//! loopx.

use std::borrow::Cow;
use std::io::{self, Write};

use crate::error::Error;

/// A warning on stderr; a closed stderr is not worth dying for.
pub fn warn(msg: &str) {
    let _ = writeln!(io::stderr(), "loopx: warning: {msg}");
}

/// A line about the run itself (`loopx: stopped: ...`, a retry), on stderr.
pub fn notice(msg: &str) {
    let _ = writeln!(io::stderr(), "loopx: {msg}");
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

/// User- or script-supplied text as it appears inside a one-line message:
/// control characters (a newline in a target, an escape sequence in a goto
/// value) are written as escapes, so they can neither split the message
/// (§12: one line naming the problem) nor drive the terminal.
pub fn shown(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_escapes_control_characters_only() {
        assert!(matches!(shown("plain é ☃ 'q'"), Cow::Borrowed(_)));
        assert_eq!(shown("a\nb\r\tc"), "a\\nb\\r\\tc");
        assert_eq!(
            shown("\u{1b}[31mred\u{7f}\u{85}"),
            "\\u{1b}[31mred\\u{7f}\\u{85}"
        );
    }
}
