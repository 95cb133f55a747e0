//! Workflow-level loopx version declarations (§3.2 "Workflow-level version
//! declaration", §10.6): does the running loopx satisfy the range a
//! workflow's `package.json` declares? Shared by the loop (a warning on
//! first entry into a workflow) and by `loopx install` (a blocking preflight
//! failure unless `-y`).

use std::path::Path;

use semver::Version;

use crate::json::Value;
use crate::package_json::{self, PackageJson};
use crate::semver_range;

/// The version of this binary, the one every range is checked against.
pub const RUNNING: &str = env!("CARGO_PKG_VERSION");

/// What a workflow's `package.json` says about the running version.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// No `package.json`, or no `loopx` in `dependencies`/`devDependencies`.
    Undeclared,
    /// The declared range holds for the running version.
    Satisfied,
    /// A valid range the running version does not satisfy.
    Mismatch { range: String, field: &'static str },
    /// The file exists but cannot be read (a warning, then no check).
    Unreadable(String),
    /// The file is not valid JSON (a warning, then no check).
    InvalidJson,
    /// The `loopx` value in `field` is not a valid npm range (a warning,
    /// then no check).
    InvalidRange { field: &'static str },
}

impl Outcome {
    /// The §3.2 warning for a broken `package.json`, for `workflow`; `None`
    /// for the outcomes that are not package.json failures.
    pub fn broken_warning(&self, workflow: &str) -> Option<String> {
        let file = format!("workflow '{workflow}': package.json");
        match self {
            Outcome::Unreadable(err) => Some(format!(
                "{file} cannot be read ({err}); skipping its loopx version check"
            )),
            Outcome::InvalidJson => Some(format!(
                "{file} is not valid JSON; skipping its loopx version check"
            )),
            // Not the specifier itself: it can be anything, long, multi-line
            // or made of words that would read as another kind of problem.
            Outcome::InvalidRange { field } => Some(format!(
                "{file} {field} gives loopx a specifier that is not valid semver; \
                 it is not checked"
            )),
            _ => None,
        }
    }

    /// The mismatch sentence for `workflow`, without advice; `None` unless
    /// this is a mismatch.
    pub fn mismatch(&self, workflow: &str) -> Option<String> {
        match self {
            Outcome::Mismatch { range, field } => Some(format!(
                "workflow '{workflow}' requires loopx version {range} (package.json {field}), \
                 but the running version is {RUNNING}"
            )),
            _ => None,
        }
    }
}

/// §3.2 runtime check, on first entry into a workflow: warnings on stderr,
/// never an error.
pub fn warn_on_entry(workflow: &str, workflow_dir: &Path) {
    let outcome = check(workflow_dir);
    if let Some(msg) = outcome.broken_warning(workflow) {
        crate::messages::warn(&msg);
    } else if let Some(msg) = outcome.mismatch(workflow) {
        crate::messages::warn(&format!("{msg}; continuing anyway"));
    }
}

/// Checks the `package.json` in `workflow_dir` against the running version.
pub fn check(workflow_dir: &Path) -> Outcome {
    match package_json::read(&workflow_dir.join("package.json")) {
        PackageJson::Missing => Outcome::Undeclared,
        PackageJson::Unreadable(err) => Outcome::Unreadable(err.to_string()),
        PackageJson::InvalidJson => Outcome::InvalidJson,
        PackageJson::Parsed(pkg) => check_declaration(&pkg, RUNNING),
    }
}

/// §3.2: `dependencies` wins over `devDependencies`; `optionalDependencies`
/// and `peerDependencies` are not version declarations at workflow level.
fn check_declaration(pkg: &Value, running: &str) -> Outcome {
    let declared = ["dependencies", "devDependencies"]
        .into_iter()
        .find_map(|field| package_json::dependency(pkg, field, "loopx").map(|v| (field, v)));
    let Some((field, value)) = declared else {
        return Outcome::Undeclared;
    };
    let invalid = Outcome::InvalidRange { field };
    let Value::String(range) = value else {
        return invalid;
    };
    let Ok(parsed) = semver_range::parse(range) else {
        return invalid;
    };
    // The crate version is always valid semver; if it somehow were not,
    // no declared range could be judged, which is not the workflow's fault.
    let Ok(version) = Version::parse(running) else {
        return Outcome::Satisfied;
    };
    if parsed.satisfies(&version) {
        Outcome::Satisfied
    } else {
        Outcome::Mismatch {
            range: range.clone(),
            field,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    fn outcome(text: &str, running: &str) -> Outcome {
        check_declaration(&json::parse(text).expect("valid JSON"), running)
    }

    #[test]
    fn satisfied_and_mismatched_ranges() {
        assert_eq!(
            outcome(r#"{"dependencies":{"loopx":"^1.2"}}"#, "1.4.0"),
            Outcome::Satisfied
        );
        assert_eq!(
            outcome(r#"{"devDependencies":{"loopx":">=2 <3"}}"#, "1.4.0"),
            Outcome::Mismatch {
                range: ">=2 <3".to_string(),
                field: "devDependencies"
            }
        );
    }

    #[test]
    fn dependencies_beat_dev_dependencies() {
        let both = r#"{"dependencies":{"loopx":"^1"},"devDependencies":{"loopx":"^2"}}"#;
        assert_eq!(outcome(both, "1.0.0"), Outcome::Satisfied);
        assert_eq!(
            outcome(both, "2.0.0"),
            Outcome::Mismatch {
                range: "^1".to_string(),
                field: "dependencies"
            }
        );
        // An invalid range in dependencies is not rescued by devDependencies.
        let invalid = r#"{"dependencies":{"loopx":"not a range"},"devDependencies":{"loopx":"*"}}"#;
        assert_eq!(
            outcome(invalid, "1.0.0"),
            Outcome::InvalidRange {
                field: "dependencies"
            }
        );
    }

    #[test]
    fn optional_and_peer_dependencies_are_ignored() {
        let text = r#"{"optionalDependencies":{"loopx":"^9"},"peerDependencies":{"loopx":"^9"}}"#;
        assert_eq!(outcome(text, "1.0.0"), Outcome::Undeclared);
        assert_eq!(
            outcome(r#"{"name":"x","dependencies":{"other":"1"}}"#, "1.0.0"),
            Outcome::Undeclared
        );
    }

    #[test]
    fn non_string_or_unparsable_ranges_are_invalid() {
        for text in [
            r#"{"dependencies":{"loopx":2}}"#,
            r#"{"devDependencies":{"loopx":">=banana"}}"#,
        ] {
            assert!(
                matches!(outcome(text, "1.0.0"), Outcome::InvalidRange { .. }),
                "{text}"
            );
        }
    }

    #[test]
    fn messages_name_the_workflow_range_and_running_version() {
        let m = Outcome::Mismatch {
            range: "^9".to_string(),
            field: "dependencies",
        };
        assert_eq!(
            m.mismatch("ralph").unwrap(),
            format!(
                "workflow 'ralph' requires loopx version ^9 (package.json dependencies), \
                 but the running version is {RUNNING}"
            )
        );
        assert!(m.broken_warning("ralph").is_none());
        assert!(Outcome::InvalidJson
            .broken_warning("ralph")
            .unwrap()
            .contains("not valid JSON"));
        assert!(Outcome::Satisfied.mismatch("ralph").is_none());
    }

    /// Each kind of problem reads as its own kind: scripts around loopx tell
    /// a mismatch from a broken declaration by its words.
    #[test]
    fn an_invalid_specifier_is_not_worded_like_a_mismatch() {
        let warning = Outcome::InvalidRange {
            field: "devDependencies",
        }
        .broken_warning("ralph")
        .unwrap();
        assert!(warning.contains("not valid semver"), "{warning}");
        assert!(warning.contains("devDependencies"), "{warning}");
        for word in ["version", "range", "mismatch", "satisf"] {
            assert!(!warning.contains(word), "{word} in {warning}");
        }
    }
}
