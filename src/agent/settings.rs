//! The agent settings a run was started with (`AGENT` and the `AGENT_*`
//! variables, from the environment, `-e` or the global env file): recorded
//! with the run's checkpoint and given back by `loopx resume` when the
//! resuming shell does not set them again (docs/agent.md "Resuming").
//! Without this, a run started with `AGENT=gemini` exported and resumed
//! from a shell without it silently switched to claude. Pure: the engine
//! gathers the variables and prints the lines.

use std::collections::BTreeMap;
use std::ffi::OsStr;

/// Name → value, sorted by name.
pub type Settings = BTreeMap<String, String>;

/// Words that mark a variable as a secret: never recorded, whatever its
/// prefix (`AGENT_API_KEY`, `AGENT_GH_TOKEN`).
const SECRET_WORDS: [&str; 8] = [
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
];

/// Settings whose values are command lines, where a user may have put a
/// key inline: named in messages, their values never shown.
const COMMAND_LINES: [&str; 2] = ["AGENT_CMD", "AGENT_ARGS"];

/// Bounds that keep the record small (the checkpoint's record is read
/// whole, state_file.rs): a longer value, or settings past the count, are
/// not carried.
const VALUE_MAX: usize = 16 * 1024;
const COUNT_MAX: usize = 64;

/// Whether `name` is an agent setting worth carrying over a resume.
pub fn is_setting(name: &str) -> bool {
    (name == "AGENT" || name.starts_with("AGENT_"))
        && !SECRET_WORDS.iter().any(|w| name.contains(w))
}

/// The settings in force: each layer over the ones before (the inherited
/// environment, then the env files), as the scripts will see them.
/// Names or values that are not text are left out.
pub fn in_force<'a>(layers: impl IntoIterator<Item = (&'a OsStr, &'a OsStr)>) -> Settings {
    let mut s = Settings::new();
    for (name, value) in layers {
        let (Some(name), Some(value)) = (name.to_str(), value.to_str()) else {
            continue;
        };
        let room = s.len() < COUNT_MAX || s.contains_key(name);
        if is_setting(name) && value.len() <= VALUE_MAX && room {
            s.insert(name.to_string(), value.to_string());
        }
    }
    s
}

/// What a resume does with the settings its run started with.
#[derive(Debug, Default, PartialEq)]
pub struct Carried {
    /// Saved settings the resuming shell does not set: given back.
    pub restored: Settings,
    /// Settings set differently now (or only now, or no longer): name, the
    /// value at the start, the value now. The new value is used.
    pub changed: Vec<(String, Option<String>, Option<String>)>,
    /// What the resumed run runs with, recorded for the next resume.
    pub merged: Settings,
}

/// Compares the settings saved with the run to those in force now. A
/// setting the user does not set again comes back; one they set again
/// wins, and is reported as a change.
pub fn carry(saved: &Settings, now: &Settings) -> Carried {
    let mut c = Carried {
        merged: now.clone(),
        ..Carried::default()
    };
    for (name, was) in saved {
        match now.get(name) {
            None => {
                c.restored.insert(name.clone(), was.clone());
                c.merged.insert(name.clone(), was.clone());
            }
            Some(v) if v != was => {
                c.changed
                    .push((name.clone(), Some(was.clone()), Some(v.clone())));
            }
            Some(_) => {}
        }
    }
    for (name, v) in now {
        if !saved.contains_key(name) {
            c.changed.push((name.clone(), None, Some(v.clone())));
        }
    }
    c.changed.sort();
    c
}

fn shown(name: &str, value: &str) -> String {
    if COMMAND_LINES.contains(&name) {
        "(a command line, not shown)".to_string()
    } else {
        format!("'{}'", crate::text::shown(value))
    }
}

/// `NAME=value` as a shell would take it back: quoted unless plain.
fn assignment(name: &str, value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/:@%+-".contains(c));
    match () {
        _ if COMMAND_LINES.contains(&name) => name.to_string(),
        _ if plain => format!("{name}={value}"),
        _ => format!("{name}={}", shown(name, value)),
    }
}

/// The lines a resume says about its agent settings (none when nothing
/// was carried and nothing changed).
pub fn describe(c: &Carried) -> Vec<String> {
    let mut lines = Vec::new();
    if !c.restored.is_empty() {
        let list: Vec<String> = c.restored.iter().map(|(n, v)| assignment(n, v)).collect();
        lines.push(format!(
            "resumed with the agent settings the run was started with: {} \
             (set them to change them)",
            list.join(", ")
        ));
    }
    for (name, was, now) in &c.changed {
        let value = |v: &Option<String>| match v {
            Some(v) => shown(name, v),
            None => "unset".to_string(),
        };
        lines.push(format!(
            "{name} is {} now ({} when the run started): the new value is used",
            value(now),
            value(was)
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn only_agent_settings_are_kept_and_never_secrets() {
        let vars = [
            ("AGENT", "gemini"),
            ("AGENT_ALLOW", "npm test"),
            ("AGENT_API_KEY", "sk-1"),
            ("AGENT_GH_TOKEN", "ghp"),
            ("AGENTS", "x"),
            ("PATH", "/bin"),
            ("ANTHROPIC_API_KEY", "sk-2"),
        ];
        let s = in_force(vars.iter().map(|(k, v)| (OsStr::new(k), OsStr::new(v))));
        assert_eq!(
            s,
            settings(&[("AGENT", "gemini"), ("AGENT_ALLOW", "npm test")])
        );
    }

    #[test]
    fn the_record_stays_small() {
        let long = "x".repeat(VALUE_MAX + 1);
        let names: Vec<String> = (0..COUNT_MAX + 10).map(|i| format!("AGENT_{i}")).collect();
        let mut vars: Vec<(&str, &str)> = vec![("AGENT_ARGS", &long)];
        vars.extend(names.iter().map(|n| (n.as_str(), "1")));
        let s = in_force(vars.iter().map(|(k, v)| (OsStr::new(*k), OsStr::new(*v))));
        assert_eq!(s.len(), COUNT_MAX);
        assert!(!s.contains_key("AGENT_ARGS"));
    }

    #[test]
    fn a_later_layer_wins() {
        let vars = [("AGENT", "claude"), ("AGENT", "codex")];
        let s = in_force(vars.iter().map(|(k, v)| (OsStr::new(k), OsStr::new(v))));
        assert_eq!(s, settings(&[("AGENT", "codex")]));
    }

    #[test]
    fn a_setting_not_set_again_comes_back() {
        let saved = settings(&[("AGENT", "gemini"), ("AGENT_IDLE_TIMEOUT", "5m")]);
        let c = carry(&saved, &Settings::new());
        assert_eq!(c.restored, saved);
        assert_eq!(c.merged, saved);
        assert!(c.changed.is_empty());
        assert_eq!(
            describe(&c),
            ["resumed with the agent settings the run was started with: \
              AGENT=gemini, AGENT_IDLE_TIMEOUT=5m (set them to change them)"]
        );
    }

    #[test]
    fn a_setting_set_again_wins_and_is_said() {
        let saved = settings(&[("AGENT", "gemini"), ("AGENT_ALLOW", "npm test")]);
        let now = settings(&[("AGENT_ALLOW", "npm test,make"), ("AGENT_FRESH", "1")]);
        let c = carry(&saved, &now);
        assert_eq!(c.restored, settings(&[("AGENT", "gemini")]));
        assert_eq!(
            c.merged,
            settings(&[
                ("AGENT", "gemini"),
                ("AGENT_ALLOW", "npm test,make"),
                ("AGENT_FRESH", "1")
            ])
        );
        assert_eq!(
            describe(&c)[1..],
            [
                "AGENT_ALLOW is 'npm test,make' now ('npm test' when the run started): \
                 the new value is used",
                "AGENT_FRESH is '1' now (unset when the run started): the new value is used",
            ]
        );
    }

    #[test]
    fn the_same_settings_say_nothing() {
        let s = settings(&[("AGENT", "codex")]);
        let c = carry(&s, &s);
        assert!(describe(&c).is_empty());
        assert_eq!(c.merged, s);
    }

    #[test]
    fn command_lines_are_named_not_shown() {
        let saved = settings(&[("AGENT_CMD", "my-agent --key sk-9")]);
        let now = settings(&[("AGENT_CMD", "my-agent --key sk-10")]);
        let lines = describe(&carry(&saved, &now));
        assert!(!lines.concat().contains("sk-"), "{lines:?}");
        let back = describe(&carry(&saved, &Settings::new()));
        assert!(!back.concat().contains("sk-"), "{back:?}");
        assert!(back[0].contains("AGENT_CMD"), "{back:?}");
    }

    #[test]
    fn values_are_escaped() {
        let saved = settings(&[("AGENT", "a\u{1b}[2J")]);
        let lines = describe(&carry(&saved, &Settings::new()));
        assert!(!lines[0].contains('\u{1b}'), "{lines:?}");
    }
}
