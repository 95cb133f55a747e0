//! User- or script-supplied text inside loopx's one-line messages.

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
