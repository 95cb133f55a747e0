//! The `.env` grammar shared by the global env file and `-e` files (§8.1).

use crate::js_compat::is_js_whitespace;

/// Keys are `[A-Za-z_][A-Za-z0-9_]*` (§8.1, §4.3 `env set`).
pub fn is_valid_key(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphabetic() || b == b'_' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A non-blank, non-comment line that holds no valid `KEY=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based line number.
    pub line: usize,
    pub problem: Problem,
}

/// What is wrong with an ignored line. Not its text: a rejected line is
/// often a secret written the wrong way (`export API_KEY=sk-...`), and the
/// warning lands in CI and cron logs. A key is kept only when it matches
/// the key pattern, so it cannot be part of a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    NoEquals,
    /// `export KEY=...`, as in a shell script.
    Export(String),
    /// Whitespace before the key or before the `=` (§8.1: none allowed).
    Whitespace(String),
    /// What comes before `=` is not a key, not even trimmed.
    InvalidKey,
    /// A NUL byte in the value of this key.
    Nul(String),
}

impl Problem {
    /// What is wrong, for a warning; never a value.
    pub fn describe(&self) -> String {
        match self {
            Problem::NoEquals => "it has no '=' (expected KEY=VALUE)".into(),
            Problem::Export(key) => {
                format!("'export' before {key}; env files are plain KEY=VALUE lines, drop 'export'")
            }
            Problem::Whitespace(key) => format!(
                "whitespace around the key {key}; write {key}=VALUE with none before the key or '='"
            ),
            Problem::InvalidKey => {
                "the text before '=' is not a valid key ([A-Za-z_][A-Za-z0-9_]*)".into()
            }
            Problem::Nul(key) => format!("the value of {key} holds a NUL byte"),
        }
    }

    /// Why `key_part`, the text before the first '=', is not a key.
    fn of_key(key_part: &str) -> Problem {
        let trimmed = key_part.trim_matches(is_js_whitespace);
        if let Some(rest) = trimmed.strip_prefix("export") {
            let key = rest.trim_start_matches(is_js_whitespace);
            if key.len() < rest.len() && is_valid_key(key) {
                return Problem::Export(key.to_string());
            }
        }
        if is_valid_key(trimmed) {
            Problem::Whitespace(trimmed.to_string())
        } else {
            Problem::InvalidKey
        }
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// Assignments in file order; duplicates are kept, so callers that fold
    /// them into a map get "last occurrence wins" (§8.1).
    pub vars: Vec<(String, String)>,
    pub bad_lines: Vec<BadLine>,
}

/// The key/value of one line, or `None` for blank and comment lines.
enum Line<'a> {
    Skip,
    Var(&'a str, &'a str),
    Bad(Problem),
}

fn parse_line(line: &str) -> Line<'_> {
    let trimmed = line.trim_start_matches(is_js_whitespace);
    // A comment is a line starting with '#'; indentation before it is still a
    // comment rather than a malformed assignment.
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Line::Skip;
    }
    // No whitespace around '=': the key is everything before the first '=',
    // so `KEY =v` has the key "KEY " and is rejected (§8.1).
    let Some((key, value)) = line.split_once('=') else {
        return Line::Bad(Problem::NoEquals);
    };
    if !is_valid_key(key) {
        return Line::Bad(Problem::of_key(key));
    }
    // An environment string cannot hold a NUL byte, so such a value could
    // never reach a script: the line is reported like any unusable line.
    if value.contains('\0') {
        return Line::Bad(Problem::Nul(key.to_string()));
    }
    Line::Var(key, unquote(value.trim_end_matches(is_js_whitespace)))
}

/// Strips one pair of matching outer quotes; nothing inside is interpreted.
fn unquote(v: &str) -> &str {
    let b = v.as_bytes();
    if b.len() >= 2 && (b[0] == b'"' || b[0] == b'\'') && b[b.len() - 1] == b[0] {
        &v[1..v.len() - 1]
    } else {
        v
    }
}

/// Text of an env file without a leading UTF-8 byte order mark, which some
/// editors write: it is an encoding marker, not part of the first key.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

pub fn parse(text: &str) -> Parsed {
    let text = strip_bom(text);
    let mut out = Parsed::default();
    for (i, line) in text.lines().enumerate() {
        match parse_line(line) {
            Line::Skip => {}
            Line::Var(k, v) => out.vars.push((k.to_string(), v.to_string())),
            Line::Bad(problem) => out.bad_lines.push(BadLine {
                line: i + 1,
                problem,
            }),
        }
    }
    out
}

/// The key a line assigns, if any; `env set`/`env remove` use it to find the
/// lines they replace while leaving every other line as the user wrote it.
pub fn line_key(line: &str) -> Option<&str> {
    match parse_line(line) {
        Line::Var(k, _) => Some(k),
        _ => None,
    }
}

/// `KEY="value"` with the value written literally (§4.3 `env set`): the
/// parser strips exactly one pair of outer quotes, so any value without a
/// line break round-trips, including quotes, `#`, `=` and trailing spaces.
pub fn assignment(key: &str, value: &str) -> String {
    format!("{key}=\"{value}\"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(text: &str) -> Vec<(String, String)> {
        parse(text).vars
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn plain_assignments_and_trailing_whitespace() {
        assert_eq!(
            vars("A=1\nB=two words  \n"),
            [kv("A", "1"), kv("B", "two words")]
        );
        assert_eq!(vars("A=\n"), [kv("A", "")]);
        assert_eq!(vars("A=x\r\n"), [kv("A", "x")]);
        assert_eq!(vars("A=b=c"), [kv("A", "b=c")]);
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let p = parse("# c\n\n   \n  # indented\nA=1 # not a comment\n");
        assert_eq!(p.vars, [kv("A", "1 # not a comment")]);
        assert!(p.bad_lines.is_empty());
    }

    #[test]
    fn quotes_are_stripped_only_when_matched() {
        assert_eq!(vars("A=\"hi there\""), [kv("A", "hi there")]);
        assert_eq!(vars("A='x'"), [kv("A", "x")]);
        assert_eq!(vars("A=\"hello"), [kv("A", "\"hello")]);
        assert_eq!(vars("A='world"), [kv("A", "'world")]);
        assert_eq!(vars("A=\"x'"), [kv("A", "\"x'")]);
        assert_eq!(vars("A=\""), [kv("A", "\"")]);
        assert_eq!(vars("A=\"\""), [kv("A", "")]);
        assert_eq!(vars("A=\"a\"b\""), [kv("A", "a\"b")]);
        assert_eq!(vars("A=\"  padded  \"  "), [kv("A", "  padded  ")]);
    }

    #[test]
    fn trailing_whitespace_is_what_js_trim_end_strips() {
        assert_eq!(
            vars("A=x \u{a0}\u{3000}\u{feff}\u{2028}\u{b}\u{c}\t\r\nB=y\u{85}\nC=\"q\"\u{a0}"),
            [kv("A", "x"), kv("B", "y\u{85}"), kv("C", "q")]
        );
        // Leading whitespace of a value is kept.
        assert_eq!(vars("A=\u{a0}x"), [kv("A", "\u{a0}x")]);
        // A line of JS whitespace only is blank.
        assert_eq!(parse("\u{a0}\u{feff}\u{3000}\n"), Parsed::default());
    }

    #[test]
    fn a_leading_byte_order_mark_is_not_part_of_the_first_key() {
        assert_eq!(vars("\u{feff}A=1\nB=2"), [kv("A", "1"), kv("B", "2")]);
        assert_eq!(
            parse("A=1\n\u{feff}B=2").bad_lines,
            [BadLine {
                line: 2,
                problem: Problem::Whitespace("B".into())
            }]
        );
    }

    #[test]
    fn crlf_line_endings() {
        let p = parse("# c\r\nA=1\r\nB=\"two\"\r\n\r\nbad\r\n");
        assert_eq!(p.vars, [kv("A", "1"), kv("B", "two")]);
        assert_eq!(p.bad_lines.len(), 1);
        assert_eq!(p.bad_lines[0].line, 5);
    }

    #[test]
    fn export_prefix_and_spaces_around_equals_are_invalid_lines() {
        let p = parse("export A=1\nB =2\nC= 3\n  D=4\nE\t=5");
        assert_eq!(p.vars, [kv("C", " 3")]);
        let lines: Vec<usize> = p.bad_lines.iter().map(|b| b.line).collect();
        assert_eq!(lines, [1, 2, 4, 5]);
    }

    #[test]
    fn a_value_with_a_nul_byte_is_an_invalid_line() {
        let p = parse("A=x\0y\nB=1");
        assert_eq!(p.vars, [kv("B", "1")]);
        assert_eq!(p.bad_lines[0].line, 1);
    }

    #[test]
    fn no_multiline_values() {
        // The quote is unmatched on its line, so it is kept; the next line
        // is a line of its own (here without '=', so invalid).
        let p = parse("A=\"one\ntwo\"\nB=2");
        assert_eq!(p.vars, [kv("A", "\"one"), kv("B", "2")]);
        assert_eq!(p.bad_lines.len(), 1);
        assert_eq!(p.bad_lines[0].problem, Problem::NoEquals);
    }

    #[test]
    fn no_escape_sequences() {
        assert_eq!(vars(r#"A="\n\t""#), [kv("A", r"\n\t")]);
    }

    #[test]
    fn duplicates_are_kept_in_order_for_last_wins() {
        assert_eq!(vars("A=1\nA=2"), [kv("A", "1"), kv("A", "2")]);
    }

    #[test]
    fn invalid_lines_are_reported_with_line_numbers() {
        let p = parse("GOOD=1\nnoequals\n1BAD=x\nKEY WITH SPACES=v\nKEY =v\n =v\n-X=1\nOK_2=y");
        assert_eq!(p.vars, [kv("GOOD", "1"), kv("OK_2", "y")]);
        let lines: Vec<usize> = p.bad_lines.iter().map(|b| b.line).collect();
        assert_eq!(lines, [2, 3, 4, 5, 6, 7]);
        let problems: Vec<Problem> = p.bad_lines.into_iter().map(|b| b.problem).collect();
        assert_eq!(
            problems,
            [
                Problem::NoEquals,
                Problem::InvalidKey,
                Problem::InvalidKey,
                Problem::Whitespace("KEY".into()),
                Problem::InvalidKey,
                Problem::InvalidKey,
            ]
        );
    }

    #[test]
    fn problems_name_a_key_only_when_it_is_one_and_never_a_value() {
        let secret = "sk-live-0123456789";
        let cases = [
            (
                format!("export OPENAI_API_KEY={secret}"),
                Problem::Export("OPENAI_API_KEY".into()),
            ),
            (format!("export\tK={secret}"), Problem::Export("K".into())),
            (format!("  K = {secret}"), Problem::Whitespace("K".into())),
            (
                format!("exportK ={secret}"),
                Problem::Whitespace("exportK".into()),
            ),
            (format!("export {secret}={secret}"), Problem::InvalidKey),
            (format!("{secret}={secret}"), Problem::InvalidKey),
            (secret.to_string(), Problem::NoEquals),
            (format!("K={secret}\0"), Problem::Nul("K".into())),
        ];
        for (line, want) in cases {
            let p = parse(&line);
            assert_eq!(p.bad_lines.len(), 1, "{line:?}");
            let problem = &p.bad_lines[0].problem;
            assert_eq!(problem, &want, "{line:?}");
            assert!(!problem.describe().contains(secret), "{line:?}");
        }
    }

    #[test]
    fn keys() {
        for ok in ["A", "_", "a_1", "PATH", "_X9"] {
            assert!(is_valid_key(ok), "{ok}");
        }
        for bad in ["", "1A", "A-B", "A B", "É", "A.B"] {
            assert!(!is_valid_key(bad), "{bad}");
        }
    }

    #[test]
    fn assignment_round_trips_awkward_values() {
        for v in [
            "", "a b", "#x", "a=b", "\"q\"", "'s'", "trail  ", "  lead", "\\n", "\"",
        ] {
            let line = assignment("K", v);
            assert_eq!(vars(&line), [kv("K", v)], "{line:?}");
            assert_eq!(line_key(&line), Some("K"));
        }
    }
}

/// Property tests: any bytes parse without a panic into valid keys and
/// in-range line numbers; every value `env set` can write reads back.
#[cfg(test)]
pub(crate) mod props {
    use super::*;
    use crate::testing::config;
    use proptest::prelude::*;

    /// Lines that exercise the grammar: comments, quotes, bad keys, JS
    /// whitespace, a BOM, NUL, bytes that are not UTF-8.
    pub fn env_text() -> impl Strategy<Value = Vec<u8>> {
        let line = prop_oneof![
            prop::sample::select(vec![
                "A=1",
                "NAME=old",
                "NAME='q'",
                "NAME=\"x",
                "# c",
                "  # c",
                "",
                "   ",
                "NAME =x",
                " NAME=1",
                "\u{feff}NAME=2",
                "export A=1",
                "noequals",
                "1BAD=x",
                "A=x\0y",
                "A=\u{a0}v\u{3000}",
                "=",
                "NAME=\"\"",
                "A=b=c",
                "\r",
            ])
            .prop_map(|l| l.as_bytes().to_vec()),
            prop::collection::vec(any::<u8>(), 0..16),
        ];
        (
            any::<bool>(),
            prop::collection::vec((line, prop::sample::select(vec!["\n", "\r\n", ""])), 0..10),
        )
            .prop_map(|(bom, lines)| {
                let mut text = if bom {
                    "\u{feff}".as_bytes().to_vec()
                } else {
                    Vec::new()
                };
                for (line, end) in lines {
                    text.extend(line);
                    text.extend_from_slice(if end.is_empty() {
                        b"\n"
                    } else {
                        end.as_bytes()
                    });
                }
                text
            })
    }

    /// A value `loopx env set` accepts (§4.3): anything without a line break
    /// (or NUL, which no argument can hold).
    pub fn value() -> impl Strategy<Value = String> {
        prop_oneof![any::<String>(), "[ \"'#=a\\\\\u{a0}\u{feff}\t]{0,8}",]
            .prop_map(|v| v.replace(['\n', '\r', '\0'], ""))
    }

    proptest! {
        #![proptest_config(config(1024))]

        #[test]
        fn any_bytes_parse_without_panicking(
            bytes in prop_oneof![prop::collection::vec(any::<u8>(), 0..256), env_text()]
        ) {
            let text = String::from_utf8_lossy(&bytes);
            let parsed = parse(&text);
            let lines = strip_bom(&text).lines().count();
            for (key, value) in &parsed.vars {
                prop_assert!(is_valid_key(key), "{key:?}");
                prop_assert!(!value.contains('\n') && !value.contains('\0'));
            }
            for bad in &parsed.bad_lines {
                prop_assert!((1..=lines).contains(&bad.line));
            }
            for line in text.lines() {
                let _ = line_key(line);
            }
        }

        #[test]
        fn every_value_env_set_writes_reads_back(
            key in "[A-Za-z_][A-Za-z0-9_]{0,12}",
            value in value(),
        ) {
            let line = assignment(&key, &value);
            prop_assert_eq!(parse(&line).vars, vec![(key.clone(), value)]);
            prop_assert_eq!(line_key(&line), Some(key.as_str()));
        }
    }
}
