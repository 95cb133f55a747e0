//! Runtime workflow version checks (§3.2 "Workflow-level version
//! declaration", "Cross-workflow version checking", §7.1 steps 4, 5, 11e):
//! warnings on stderr, once per workflow on first entry, never fatal.

use crate::util::Project;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A bash script that says on stderr that it ran, then prints `stdout`.
fn marker(name: &str, stdout: &str) -> String {
    format!("echo 'ran {name}' >&2\nprintf '%s' '{stdout}'\n")
}

fn requires(range: &str) -> String {
    format!(r#"{{"dependencies":{{"loopx":"{range}"}}}}"#)
}

fn mismatch_warning(workflow: &str, range: &str) -> String {
    format!(
        "loopx: warning: workflow '{workflow}' requires loopx version {range} (package.json dependencies), \
         but the running version is {VERSION}; continuing anyway"
    )
}

#[test]
fn starting_workflow_mismatch_warns_once_before_the_first_iteration_and_continues() {
    let p = Project::new();
    p.script("ralph", "index.sh", &marker("ralph", ""))
        .file(".loopx/ralph/package.json", &requires(">=999.0.0"));
    let o = p
        .loopx(&["run", "-n", "3", "ralph"])
        .stderr_any("checked line by line below")
        .run();
    let warning = mismatch_warning("ralph", ">=999.0.0");
    assert_eq!(o.stderr.matches(&warning).count(), 1, "{}", o.stderr);
    assert_eq!(o.stderr.matches("ran ralph").count(), 3, "{}", o.stderr);
    assert!(o.stderr.starts_with(&warning), "{}", o.stderr);
}

#[test]
fn satisfied_or_undeclared_versions_are_silent() {
    let p = Project::new();
    p.script("a", "index.sh", &marker("a", r#"{"goto":"b:index"}"#))
        .file(".loopx/a/package.json", &requires(&format!("^{VERSION}")))
        .script("b", "index.sh", &marker("b", r#"{"stop":true}"#))
        .file(
            ".loopx/b/package.json",
            r#"{"name":"b","dependencies":{"x":"1"}}"#,
        );
    p.loopx(&["run", "a"]).stderr("ran a\nran b\n").run();
}

#[test]
fn goto_into_a_workflow_checks_it_on_first_entry_only() {
    // a -> b:index -> (no goto) -> a -> b -> ... : b is entered three times.
    let p = Project::new();
    p.script("a", "index.sh", &marker("a", r#"{"goto":"b:index"}"#))
        .file(".loopx/a/package.json", &requires("<0.0.1"))
        .script("b", "index.sh", &marker("b", ""))
        .file(".loopx/b/package.json", &requires(">=999"));
    let warn_a = mismatch_warning("a", "<0.0.1");
    let warn_b = mismatch_warning("b", ">=999");
    let expected = format!("{warn_a}\nran a\n{warn_b}\nran b\nran a\nran b\nran a\nran b\n");
    p.loopx(&["run", "-n", "6", "a"]).stderr(&expected).run();
}

#[test]
fn the_check_follows_target_resolution() {
    // §7.1: resolution errors come first, and an unresolved target is never
    // entered, so its workflow is not checked.
    let p = Project::new();
    p.script("a", "index.sh", &marker("a", r#"{"goto":"b:missing"}"#))
        .script("b", "index.sh", &marker("b", ""))
        .file(".loopx/b/package.json", &requires(">=999"));
    p.loopx(&["run", "b:nope"])
        .status(1)
        .stderr("loopx: error: workflow 'b' has no script 'nope' (scripts: index)\n")
        .run();
    p.loopx(&["run", "a"])
        .status(1)
        .stderr_contains("workflow 'b' has no script 'missing'")
        .stderr_lacks("warning")
        .run();
}

#[test]
fn n_zero_skips_the_version_check() {
    let p = Project::new();
    p.script("ralph", "index.sh", &marker("ralph", ""))
        .file(".loopx/ralph/package.json", &requires(">=999"));
    p.loopx(&["run", "-n", "0", "ralph"]).stdout("").run();
}

#[test]
fn dependencies_beat_dev_dependencies() {
    let p = Project::new();
    p.script("ok", "index.sh", &marker("ok", r#"{"stop":true}"#))
        .file(
            ".loopx/ok/package.json",
            r#"{"dependencies":{"loopx":"*"},"devDependencies":{"loopx":">=999"}}"#,
        );
    p.loopx(&["run", "ok"]).stderr("ran ok\n").run();

    p.script("dev", "index.sh", &marker("dev", r#"{"stop":true}"#))
        .file(
            ".loopx/dev/package.json",
            r#"{"devDependencies":{"loopx":">=999"}}"#,
        );
    p.loopx(&["run", "dev"])
        .stderr_contains("requires loopx version >=999 (package.json devDependencies)")
        .run();
}

#[test]
fn optional_and_peer_dependencies_are_ignored() {
    let p = Project::new();
    p.script("ralph", "index.sh", &marker("ralph", r#"{"stop":true}"#))
        .file(
            ".loopx/ralph/package.json",
            r#"{"optionalDependencies":{"loopx":">=999"},"peerDependencies":{"loopx":">=999"}}"#,
        );
    p.loopx(&["run", "ralph"]).stderr("ran ralph\n").run();
}

#[test]
fn broken_package_json_warns_once_and_never_blocks() {
    let p = Project::new();
    p.script("a", "index.sh", &marker("a", r#"{"goto":"b:index"}"#))
        .file(".loopx/a/package.json", "{ not json")
        .script("b", "index.sh", &marker("b", r#"{"goto":"c:index"}"#))
        .file(".loopx/b/package.json", &requires("banana"))
        .script("c", "index.sh", &marker("c", ""))
        // A directory where the file should be: present but unreadable.
        .dir(".loopx/c/package.json");
    let o = p
        .loopx(&["run", "-n", "6", "a"])
        .stderr_any("checked line by line below")
        .run();
    for warning in [
        "loopx: warning: workflow 'a': package.json is not valid JSON; skipping its loopx version check",
        "loopx: warning: workflow 'b': package.json dependencies gives loopx a specifier that is not valid semver; it is not checked",
        "loopx: warning: workflow 'c': package.json cannot be read (",
    ] {
        assert_eq!(o.stderr.matches(warning).count(), 1, "{warning}\n{}", o.stderr);
    }
    assert_eq!(o.stderr.matches("ran ").count(), 6, "{}", o.stderr);
}

#[test]
fn a_bare_goto_within_the_workflow_does_not_recheck() {
    let p = Project::new();
    p.script("ralph", "index.sh", &marker("index", r#"{"goto":"next"}"#))
        .script("ralph", "next.sh", &marker("next", ""))
        .file(".loopx/ralph/package.json", &requires(">=999"));
    let o = p
        .loopx(&["run", "-n", "4", "ralph"])
        .stderr_any("checked line by line below")
        .run();
    assert_eq!(o.stderr.matches("warning").count(), 1, "{}", o.stderr);
}

/// Scripts around loopx tell the kinds apart by their words: a mismatch
/// says "version"; an invalid specifier says "not valid semver", names the
/// field, and neither repeats the specifier (it can be anything) nor uses
/// the mismatch's words.
#[test]
fn an_invalid_specifier_warning_reads_differently_from_a_version_mismatch() {
    let p = Project::new();
    p.script("a", "index.sh", &marker("a", r#"{"goto":"b:index"}"#))
        .file(
            ".loopx/a/package.json",
            r#"{"devDependencies":{"loopx":"any range\nwill satisfy me"}}"#,
        )
        .script("b", "index.sh", &marker("b", r#"{"stop":true}"#))
        .file(".loopx/b/package.json", &requires(">=999"));
    let o = p
        .loopx(&["run", "a"])
        .stderr_any("checked line by line below")
        .run();
    let lines: Vec<&str> = o.stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(lines.len(), 2, "{}", o.stderr);
    let (invalid, mismatch) = (lines[0], lines[1]);
    assert!(invalid.contains("not valid semver") && invalid.contains("devDependencies"));
    for word in ["version", "range", "mismatch", "satisf", "will"] {
        assert!(!invalid.contains(word), "{word:?} in {invalid}");
    }
    assert!(
        mismatch.contains("requires loopx version >=999"),
        "{mismatch}"
    );
}

#[test]
fn a_package_json_that_is_a_fifo_or_over_8_mib_warns_and_the_run_goes_on() {
    // §3.2: a package.json that cannot be read gives a warning and no check.
    // A fifo would keep loopx waiting for a writer; a huge file (or a
    // device) would be read whole.
    let p = Project::new();
    p.script("a", "index.sh", &marker("a", r#"{"goto":"b:index"}"#))
        .script("b", "index.sh", &marker("b", r#"{"stop":true}"#))
        .file(
            ".loopx/b/package.json",
            &format!(r#"{{"description":"{}"}}"#, "x".repeat(9 << 20)),
        );
    let status = std::process::Command::new("mkfifo")
        .arg(p.path(".loopx/a/package.json"))
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo");
    p.loopx(&["run", "a"])
        .timeout(std::time::Duration::from_secs(30))
        .stderr(
            "loopx: warning: workflow 'a': package.json cannot be read \
             (not a regular file but a fifo); skipping its loopx version check\n\
             ran a\n\
             loopx: warning: workflow 'b': package.json cannot be read \
             (larger than 8 MiB, the limit); skipping its loopx version check\n\
             ran b\n",
        )
        .run();
}
