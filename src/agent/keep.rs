//! How much of the agent's files a directory keeps (docs/agent.md "Files
//! kept"): the files of the newest `AGENT_KEEP_STEPS` steps (200 by
//! default), so that a week-long loop's run directory stays bounded
//! (docs/performance.md "A week-long run's state"). Only files loopx agent
//! names are ever removed; anything else in the directory is left alone.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::proc::sys;

/// Steps kept when `AGENT_KEEP_STEPS` is unset.
pub const DEFAULT: usize = 200;

/// The endings of the files `loopx agent` writes for a step.
const ENDINGS: [&str; 8] = [
    ".events.jsonl",
    ".final.txt",
    ".stderr.log",
    ".summary.json",
    ".prompt",
    ".session",
    ".last-class",
    ".refused",
];

/// The step a file of ours belongs to (`iteration-3` for
/// `iteration-3.wait-1.attempt-2.events.jsonl`); None for any other file.
pub fn step_of(name: &str) -> Option<&str> {
    let base = ENDINGS.iter().find_map(|e| name.strip_suffix(e))?;
    let base = strip_counter(base, ".attempt-");
    let base = strip_counter(base, ".wait-");
    (!base.is_empty()).then_some(base)
}

/// `base` without a trailing `<tag><digits>`.
fn strip_counter<'a>(base: &'a str, tag: &str) -> &'a str {
    match base.rsplit_once(tag) {
        Some((head, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => base,
    }
}

/// The files to remove so that only the newest `keep` steps remain: a
/// step is as new as its newest file. `keep` 0 keeps everything.
pub fn to_prune(files: &[(String, i64)], keep: usize) -> Vec<String> {
    if keep == 0 {
        return Vec::new();
    }
    let mut by_step: HashMap<&str, i64> = HashMap::new();
    for (name, mtime) in files {
        if let Some(step) = step_of(name) {
            let t = by_step.entry(step).or_insert(*mtime);
            *t = (*t).max(*mtime);
        }
    }
    if by_step.len() <= keep {
        return Vec::new();
    }
    let mut newest: Vec<(i64, &str)> = by_step.into_iter().map(|(s, t)| (t, s)).collect();
    newest.sort_unstable_by(|a, b| b.cmp(a));
    let old: HashSet<&str> = newest[keep..].iter().map(|(_, s)| *s).collect();
    files
        .iter()
        .filter(|(name, _)| step_of(name).is_some_and(|s| old.contains(&s)))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Removes the files of all but the newest `keep` steps in `dir`: the
/// user's regular files only, never through a link. Best effort.
pub fn prune(dir: &Path, keep: usize) {
    if keep == 0 {
        return;
    }
    let uid = sys::uid();
    let Ok(entries) = sys::stat_entries(dir, |n| step_of(n).is_some()) else {
        return;
    };
    let files: Vec<(String, i64)> = entries
        .into_iter()
        .filter(|(_, st)| st.regular && st.uid == uid)
        .map(|(name, st)| (name, st.mtime_ms))
        .collect();
    for name in to_prune(&files, keep) {
        let _ = std::fs::remove_file(dir.join(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_belong_to_their_step_whatever_the_wait_and_attempt() {
        assert_eq!(
            step_of("iteration-3.wait-1.attempt-2.events.jsonl"),
            Some("iteration-3")
        );
        assert_eq!(step_of("iteration-3.summary.json"), Some("iteration-3"));
        assert_eq!(step_of("agent.session"), Some("agent"));
        assert_eq!(step_of("ci-fix-2.refused"), Some("ci-fix-2"));
        // Not ours: left alone.
        assert_eq!(step_of("agent.prompt.md"), None);
        assert_eq!(step_of("notes.txt"), None);
        assert_eq!(step_of(".summary.json"), None);
    }

    #[test]
    fn only_the_newest_steps_are_kept() {
        let files: Vec<(String, i64)> = [
            ("iteration-1.events.jsonl", 10),
            ("iteration-1.summary.json", 11),
            ("iteration-2.events.jsonl", 20),
            ("iteration-2.attempt-2.events.jsonl", 35),
            ("iteration-3.events.jsonl", 30),
            ("iteration-3.session", 31),
            ("keep-me.txt", 1),
        ]
        .iter()
        .map(|(n, t)| (n.to_string(), *t))
        .collect();
        let mut gone = to_prune(&files, 2);
        gone.sort();
        assert_eq!(
            gone,
            ["iteration-1.events.jsonl", "iteration-1.summary.json"]
        );
        assert!(to_prune(&files, 3).is_empty());
        assert!(to_prune(&files, 0).is_empty(), "0 keeps everything");
    }
}
