//! Target strings: `workflow[:script]` on the CLI, `script` or
//! `workflow:script` in goto (§4.1, §2.2). One parser serves both contexts so
//! the validation rules cannot drift apart.

use std::fmt;

use crate::names::is_valid_name;
use crate::text::shown;

/// A syntactically valid target string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// No colon. On the CLI a workflow (its `index`); in goto a script of the
    /// current workflow (§2.2).
    Bare(&'a str),
    /// `workflow:script`.
    Qualified(&'a str, &'a str),
}

/// Why a target string was rejected (§4.1 "Target validation").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    Empty,
    BareColon,
    LeadingColon,
    TrailingColon,
    MultipleColons,
    BadWorkflowName(String),
    BadScriptName(String),
    BadName(String),
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::Empty => f.write_str("the target is empty"),
            Invalid::BareColon => f.write_str("a bare ':' names no workflow and no script"),
            Invalid::LeadingColon => f.write_str("the workflow name before ':' is missing"),
            Invalid::TrailingColon => f.write_str("the script name after ':' is missing"),
            Invalid::MultipleColons => f.write_str("':' may appear at most once"),
            Invalid::BadWorkflowName(n) => write!(
                f,
                "workflow name '{}' is not allowed (names match [a-zA-Z0-9_][a-zA-Z0-9_-]*)",
                shown(n)
            ),
            Invalid::BadScriptName(n) => write!(
                f,
                "script name '{}' is not allowed (names match [a-zA-Z0-9_][a-zA-Z0-9_-]*)",
                shown(n)
            ),
            Invalid::BadName(n) => write!(
                f,
                "'{}' is not a valid name (names match [a-zA-Z0-9_][a-zA-Z0-9_-]*)",
                shown(n)
            ),
        }
    }
}

pub fn parse(s: &str) -> Result<Target<'_>, Invalid> {
    if s.is_empty() {
        return Err(Invalid::Empty);
    }
    if s == ":" {
        return Err(Invalid::BareColon);
    }
    match s.split_once(':') {
        None if is_valid_name(s) => Ok(Target::Bare(s)),
        None => Err(Invalid::BadName(s.to_string())),
        Some((_, rest)) if rest.contains(':') => Err(Invalid::MultipleColons),
        Some(("", _)) => Err(Invalid::LeadingColon),
        Some((_, "")) => Err(Invalid::TrailingColon),
        Some((w, _)) if !is_valid_name(w) => Err(Invalid::BadWorkflowName(w.to_string())),
        Some((_, sc)) if !is_valid_name(sc) => Err(Invalid::BadScriptName(sc.to_string())),
        Some((w, sc)) => Ok(Target::Qualified(w, sc)),
    }
}

impl<'a> Target<'a> {
    /// CLI / API reading (§4.1): a bare name is a workflow; the script part
    /// defaults to `index`. Returns (workflow, script, script_was_given).
    pub fn for_run(self) -> (&'a str, &'a str, bool) {
        match self {
            Target::Bare(w) => (w, "index", false),
            Target::Qualified(w, s) => (w, s, true),
        }
    }

    /// goto reading (§2.2): a bare name is a script of `current` workflow.
    pub fn for_goto(self, current: &'a str) -> (&'a str, &'a str) {
        match self {
            Target::Bare(s) => (current, s),
            Target::Qualified(w, s) => (w, s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_forms() {
        assert_eq!(parse("ralph"), Ok(Target::Bare("ralph")));
        assert_eq!(
            parse("ralph:check-ready"),
            Ok(Target::Qualified("ralph", "check-ready"))
        );
        assert_eq!(parse("_a:b_1"), Ok(Target::Qualified("_a", "b_1")));
    }

    #[test]
    fn every_invalid_form_of_section_4_1() {
        assert_eq!(parse(""), Err(Invalid::Empty));
        assert_eq!(parse(":"), Err(Invalid::BareColon));
        assert_eq!(parse(":script"), Err(Invalid::LeadingColon));
        assert_eq!(parse("workflow:"), Err(Invalid::TrailingColon));
        assert_eq!(parse("a:b:c"), Err(Invalid::MultipleColons));
        assert_eq!(parse("::"), Err(Invalid::MultipleColons));
        assert_eq!(parse("a::"), Err(Invalid::MultipleColons));
        assert_eq!(parse("-a"), Err(Invalid::BadName("-a".into())));
        assert_eq!(parse("a b"), Err(Invalid::BadName("a b".into())));
        assert_eq!(
            parse("-w:index"),
            Err(Invalid::BadWorkflowName("-w".into()))
        );
        assert_eq!(parse("w:a.b"), Err(Invalid::BadScriptName("a.b".into())));
    }

    #[test]
    fn run_reading_defaults_to_index() {
        assert_eq!(parse("ralph").unwrap().for_run(), ("ralph", "index", false));
        assert_eq!(parse("ralph:x").unwrap().for_run(), ("ralph", "x", true));
        assert_eq!(
            parse("ralph:index").unwrap().for_run(),
            ("ralph", "index", true)
        );
    }

    #[test]
    fn goto_reading_keeps_bare_names_in_the_current_workflow() {
        assert_eq!(
            parse("check").unwrap().for_goto("ralph"),
            ("ralph", "check")
        );
        assert_eq!(parse("other:x").unwrap().for_goto("ralph"), ("other", "x"));
    }
}

/// Property tests against an oracle written from §4.1's wording: a target
/// is a name, or two names around exactly one colon; names match
/// `[a-zA-Z0-9_][a-zA-Z0-9_-]*`.
#[cfg(test)]
mod props {
    use super::*;
    use crate::testing::config;
    use proptest::prelude::*;

    fn name_ok(s: &str) -> bool {
        let ok =
            |c: char, first: bool| c.is_ascii_alphanumeric() || c == '_' || (!first && c == '-');
        let mut chars = s.chars();
        chars.next().is_some_and(|c| ok(c, true)) && chars.all(|c| ok(c, false))
    }

    /// Short strings over the characters that matter, and any string.
    fn target_text() -> impl Strategy<Value = String> {
        let c = prop::sample::select(vec!['a', 'Z', '0', '_', '-', ':', '.', ' ', 'é', '/', '\0']);
        prop_oneof![
            3 => prop::collection::vec(c, 0..8).prop_map(|v| v.into_iter().collect()),
            1 => any::<String>(),
        ]
    }

    proptest! {
        #![proptest_config(config(1024))]

        #[test]
        fn targets_are_names_around_at_most_one_colon(s in target_text()) {
            let parts: Vec<&str> = s.split(':').collect();
            let want = match parts[..] {
                [bare] if name_ok(bare) => Some(Target::Bare(bare)),
                [w, sc] if name_ok(w) && name_ok(sc) => Some(Target::Qualified(w, sc)),
                _ => None,
            };
            let got = parse(&s);
            if let Err(why) = &got {
                let _ = why.to_string();
            }
            prop_assert_eq!(got.ok(), want);
            if let Some(t) = want {
                let (w, sc, given) = t.for_run();
                prop_assert_eq!(given, s.contains(':'));
                prop_assert_eq!(if given { format!("{w}:{sc}") } else { w.to_string() }, s.clone());
                // goto: a bare name is a script of the current workflow.
                let want_goto = if given { (w, sc) } else { ("current", w) };
                prop_assert_eq!(t.for_goto("current"), want_goto);
                if !given {
                    prop_assert_eq!(sc, "index");
                }
            }
        }
    }
}
