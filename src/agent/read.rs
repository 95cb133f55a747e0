//! An agent CLI's stdout, line by line or as one document, handed to the
//! reader of its format (claude.rs, codex.rs, gemini.rs), which fill in the
//! run's `Facts` (stream.rs). Kept apart from stream.rs so the readers can
//! use its helpers without an import cycle.

use crate::agent::stream::{Facts, Kind};
use crate::agent::{claude, codex, gemini};
use crate::json;

/// Reads one line of stdout into `facts`; returns the steps to show, raw
/// (progress.rs escapes and shortens them). `now` is the wall clock in
/// seconds since the epoch, for reset times.
pub fn read_line(kind: Kind, line: &str, facts: &mut Facts, now: u64) -> Vec<String> {
    facts.events += 1;
    let mut steps = Vec::new();
    if kind == Kind::Plain {
        facts.text.push_str(line);
        facts.text.push('\n');
        steps.push(line.to_string());
        return steps;
    }
    let Some(value) = json::parse(line.trim()) else {
        return steps;
    };
    match kind {
        Kind::Claude => steps.extend(claude::read(&value, facts, now)),
        Kind::Codex => steps.extend(codex::read(&value, facts)),
        Kind::Gemini => gemini::read(&value, facts, &mut steps),
        Kind::Plain => {}
    }
    steps
}

/// The whole stdout as one JSON document (`--output-format json`): claude
/// and gemini print a single object instead of a stream.
pub fn read_document(kind: Kind, text: &str, facts: &mut Facts, now: u64) {
    let Some(value) = json::parse(text.trim()) else {
        return;
    };
    match kind {
        Kind::Claude => {
            claude::read(&value, facts, now);
        }
        Kind::Gemini => gemini::read_document(&value, facts),
        _ => {}
    }
}
