//! Pieces of loopx's one-line messages: user- or script-supplied text, and
//! sizes as a user would write them.

use std::borrow::Cow;

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

/// A size as people would write it for `LOOPX_INSTALL_MAX_SIZE`
/// (install/limits.rs parses that): the largest suffix that divides it
/// exactly, else bytes.
pub fn format_size(bytes: u64) -> String {
    for (shift, suffix) in [(30, "G"), (20, "M"), (10, "K")] {
        if bytes > 0 && bytes % (1 << shift) == 0 {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    if bytes == 1 {
        "1 byte".to_string()
    } else {
        format!("{bytes} bytes")
    }
}

/// A message of loopx's, which may span lines (an error and its hint), as
/// it goes to the terminal: every control character but the newline is
/// escaped as [`shown`] escapes it. The last line of defence: a message
/// built from a file's or a script's text (`stop is ESC[2J`) can neither
/// clear the screen nor rewrite what was printed before it, even where the
/// text was not passed through [`shown`].
pub fn terminal_safe(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\n') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for line in s.split_inclusive('\n') {
        match line.strip_suffix('\n') {
            Some(body) => {
                out.push_str(&shown(body));
                out.push('\n');
            }
            None => out.push_str(&shown(line)),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_safe_keeps_newlines_and_escapes_every_other_control() {
        assert!(matches!(terminal_safe("a\nhint: b"), Cow::Borrowed(_)));
        assert_eq!(
            terminal_safe("stop is \u{1b}[2J\r\nhint: x\u{7}"),
            "stop is \\u{1b}[2J\\r\nhint: x\\u{7}"
        );
    }

    #[test]
    fn shown_escapes_control_characters_only() {
        assert!(matches!(shown("plain é ☃ 'q'"), Cow::Borrowed(_)));
        assert_eq!(shown("a\nb\r\tc"), "a\\nb\\r\\tc");
        assert_eq!(
            shown("\u{1b}[31mred\u{7f}\u{85}"),
            "\\u{1b}[31mred\\u{7f}\\u{85}"
        );
    }

    #[test]
    fn sizes_are_shown_with_the_largest_exact_suffix() {
        assert_eq!(format_size(512 << 20), "512M");
        assert_eq!(format_size(1 << 30), "1G");
        assert_eq!(format_size(1536 << 10), "1536K");
        assert_eq!(format_size(100_000), "100000 bytes");
        assert_eq!(format_size(1), "1 byte");
    }
}
