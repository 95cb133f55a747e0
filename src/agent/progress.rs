//! One line of progress per agent step, safe to print on a terminal: the
//! step's first non-blank line, control characters escaped (an agent's
//! text holding ESC[2J must not clear the user's screen), cut to a width.

/// The longest step shown, in characters.
const WIDTH: usize = 160;

/// `label: step`, escaped and shortened; `None` for a blank step.
pub fn line(label: &str, step: &str) -> Option<String> {
    let first = step.lines().find(|l| !l.trim().is_empty())?;
    Some(format!(
        "{}: {}",
        escape(label),
        shorten(&escape(first.trim()))
    ))
}

/// Control characters as `\xNN` (`\t` stays a space); everything else as is.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\t' => out.push(' '),
            c if c.is_control() => {
                out.push_str("\\x");
                out.push_str(&format!("{:02x}", c as u32 & 0xff));
            }
            c => out.push(c),
        }
    }
    out
}

fn shorten(s: &str) -> String {
    if s.chars().count() <= WIDTH {
        return s.to_string();
    }
    let mut cut: String = s.chars().take(WIDTH - 3).collect();
    cut.push_str("...");
    cut
}

/// A tool call as one step: its name and its main argument.
pub fn tool(name: &str, arg: Option<&str>) -> String {
    match arg {
        Some(a) if !a.is_empty() => format!("{name} {a}"),
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_control_characters() {
        let l = line("ralph", "\x1b[2Jcleared\x07").unwrap();
        assert_eq!(l, "ralph: \\x1b[2Jcleared\\x07");
        assert!(!l.contains('\x1b'));
        assert_eq!(escape("a\u{9b}b"), "a\\x9bb");
    }

    #[test]
    fn first_non_blank_line_shortened() {
        assert_eq!(line("a", "\n  \nhello\nworld").unwrap(), "a: hello");
        assert_eq!(line("a", " \n"), None);
        let long = "x".repeat(500);
        assert_eq!(line("a", &long).unwrap().chars().count(), 3 + WIDTH);
    }

    #[test]
    fn tool_steps() {
        assert_eq!(tool("Write", Some("/a.txt")), "Write /a.txt");
        assert_eq!(tool("TodoWrite", None), "TodoWrite");
    }
}
