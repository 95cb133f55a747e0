//! Workflow and script discovery against the real binary: what counts as a
//! workflow and a script (§2.1, §5.1), collisions (§5.2), name restrictions
//! (§5.3), validation scope (§5.4), the discovery cache, target validation
//! after discovery (§4.1) and the missing `.loopx/` directory (§7.2).

use std::time::Duration;

use crate::util::*;

const STOP: &str = r#"{"stop":true}"#;

fn log(p: &Project) -> String {
    if p.exists("log") {
        p.read("log")
    } else {
        String::new()
    }
}

/// A project with `.loopx/good/index.sh`, which logs `good` and stops.
fn good() -> Project {
    let p = Project::new();
    p.script("good", "index.sh", &logging_script("good", STOP));
    p
}

/// What `good()` adds beside `good` changes nothing: `good` runs without a
/// warning, and `run -h` lists it alone, without one either.
#[track_caller]
fn good_alone_runs_and_is_listed(p: &Project) {
    p.loopx(&["run", "good"]).run();
    assert_eq!(log(p), "good\n");
    let o = p
        .loopx(&["run", "-h"])
        .stdout_contains("Usage: loopx run ")
        .run();
    assert_eq!(listed_workflows(&o.stdout), ["good"]);
}

/// `loopx run <target>` refused at validation: exit 1, nothing on stdout,
/// nothing ran, and stderr names every needle.
#[track_caller]
fn refused(p: &Project, target: &str, needles: &[&str]) -> Outcome {
    let mut run = p
        .loopx(&["run", target])
        .timeout(Duration::from_secs(15))
        .status(1)
        .stdout("");
    for n in needles {
        run = run.stderr_contains(n);
    }
    let o = run.run();
    assert_eq!(log(p), "", "nothing may run");
    o
}

/// `loopx run -h`: exit 0, help on stdout, a warning naming every needle.
#[track_caller]
fn help_warns(p: &Project, needles: &[&str]) -> Outcome {
    let mut run = p
        .loopx(&["run", "-h"])
        .stderr_contains("warning")
        .stdout_contains("-n");
    for n in needles {
        run = run.stderr_contains(n);
    }
    run.run()
}

/// The names run help lists as workflows, i.e. the first word of each line
/// after the line that mentions `.loopx/`. Reads only as much structure as
/// needed: lines listing workflows are indented and start with the name.
fn listed_workflows(help: &str) -> Vec<String> {
    let mut lines = help.lines().skip_while(|l| !l.contains(".loopx"));
    lines.next();
    lines
        .filter(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| !w.starts_with('('))
        .map(String::from)
        .collect()
}

fn run_help_workflows(p: &Project) -> Vec<String> {
    let o = p
        .loopx(&["run", "-h"])
        .stdout_contains("Usage: loopx run ")
        .run();
    listed_workflows(&o.stdout)
}

/// The line of workflow `wf` in run help's text `help`.
fn help_line(help: &str, wf: &str) -> String {
    help.lines()
        .find(|l| l.trim_start().starts_with(&format!("{wf} ")))
        .unwrap_or_else(|| panic!("no line for {wf}:\n{help}"))
        .to_string()
}

/// Run help's text for a project without warnings.
fn run_help(p: &Project) -> String {
    p.loopx(&["run", "-h"])
        .stdout_contains("Usage: loopx run ")
        .run()
        .stdout
}

// ---------------------------------------------------------------- §2.1 / §5.1 workflows

#[test]
fn workflow_is_a_subdirectory_with_a_top_level_script() {
    let p = good();
    p.loopx(&["run", "good"]).stdout("").run();
    assert_eq!(log(&p), "good\n");
    assert_eq!(run_help_workflows(&p), ["good"]);
}

#[test]
fn subdirectory_without_top_level_scripts_is_not_a_workflow() {
    let p = good();
    p.file(".loopx/docs/README.md", "# notes\n")
        .file(
            ".loopx/nested/lib/index.sh",
            "echo no >> \"$LOOPX_PROJECT_ROOT/log\"\n",
        )
        .dir(".loopx/empty");
    for target in ["docs", "nested", "nested:index", "empty"] {
        let wf = target.split(':').next().unwrap_or(target);
        refused(&p, target, &[&format!("'{wf}'")]);
    }
    let o = p
        .loopx(&["run", "-h"])
        .stdout_contains("Usage: loopx run ")
        .run();
    assert_eq!(listed_workflows(&o.stdout), ["good"]);
}

#[test]
fn subdirectory_without_scripts_is_ignored_even_with_an_invalid_name() {
    // Not a workflow, so its name is never validated (§5.1: no warning).
    let p = good();
    p.file(".loopx/my.notes/README.md", "x\n")
        .file(".loopx/bad name/lib/x.sh", "")
        .dir(".loopx/.git/hooks");
    p.loopx(&["run", "good"]).run();
    assert_eq!(log(&p), "good\n");
    p.loopx(&["run", "-h"])
        .stdout_contains("Usage: loopx run ")
        .run();
}

#[test]
fn loose_files_in_loopx_dir_are_not_workflows() {
    let p = good();
    p.file(".loopx/ralph.sh", &logging_script("loose", STOP))
        .file(".loopx/index.sh", &logging_script("loose", STOP))
        .file(".loopx/bad name.ts", "");
    refused(&p, "ralph", &["'ralph'"]);
    refused(&p, "index", &["'index'"]);
    // Their names are not validated either.
    good_alone_runs_and_is_listed(&p);
}

#[test]
fn legacy_directory_script_with_package_json_main_is_not_a_workflow() {
    let p = good();
    p.file(
        ".loopx/legacy/package.json",
        r#"{"main": "src/main.sh", "type": "module"}"#,
    )
    .file(".loopx/legacy/src/main.sh", &logging_script("legacy", STOP));
    refused(&p, "legacy", &["'legacy'"]);
    assert_eq!(run_help_workflows(&p), ["good"]);
}

// ---------------------------------------------------------------- §2.1 / §5.1 scripts

#[test]
fn every_supported_extension_is_a_script() {
    let p = Project::new();
    for f in ["a.sh", "b.js", "c.jsx", "d.ts", "e.tsx"] {
        p.script("all", f, "");
    }
    let line = help_line(&run_help(&p), "all");
    for s in ["a", "b", "c", "d", "e"] {
        assert!(
            line.split([' ', ',']).any(|w| w == s),
            "{s} missing from {line:?}"
        );
    }
    // A workflow made only of JS/TS scripts is still a workflow.
    let q = Project::new();
    q.script("tsonly", "main.ts", "");
    assert_eq!(run_help_workflows(&q), ["tsonly"]);
}

#[test]
fn scripts_in_workflow_subdirectories_are_not_discovered() {
    let p = Project::new();
    p.script("w", "index.sh", &logging_script("w:index", STOP))
        .script("w", "lib/helper.sh", &logging_script("helper", STOP))
        .script("w", "lib/index.ts", "")
        // Invalid names and collisions below the top level are not checked.
        .script("w", "lib/bad name.sh", "")
        .script("w", "lib/helper.ts", "")
        // A directory named like a script is not a script.
        .dir(".loopx/w/tool.sh");
    refused(&p, "w:helper", &["'helper'", "'w'"]);
    refused(&p, "w:tool", &["'tool'", "'w'"]);
    p.loopx(&["run", "w"]).run();
    assert_eq!(log(&p), "w:index\n");
    let line = help_line(&run_help(&p), "w");
    assert!(
        !line.contains("helper") && !line.contains("tool"),
        "{line:?}"
    );
}

#[test]
fn non_script_files_in_a_workflow_are_ignored() {
    let p = Project::new();
    p.script("w", "index.sh", &logging_script("w:index", STOP));
    for f in [
        "README.md",
        "config.json",
        "output.schema.json",
        "notes.txt",
        "Makefile",
        "index.sh.bak",
        "my notes.md",
        "index.json",
    ] {
        p.script("w", f, "");
    }
    refused(&p, "w:README", &["'README'"]);
    refused(&p, "w:Makefile", &["'Makefile'"]);
    // `index.json` does not collide with `index.sh`, and `my notes.md` is
    // not an invalid script name.
    p.loopx(&["run", "w"]).run();
    assert_eq!(log(&p), "w:index\n");
    p.loopx(&["run", "-h"])
        .stdout_contains("Usage: loopx run ")
        .run();
}

#[test]
fn mjs_and_cjs_files_are_not_scripts() {
    let p = Project::new();
    p.script("w", "index.sh", &logging_script("w:index", STOP))
        .script("w", "tool.mjs", "")
        .script("w", "tool.cjs", "")
        .script("esm", "index.mjs", "")
        .script("cjs", "index.cjs", "");
    refused(&p, "w:tool", &["'tool'"]);
    refused(&p, "esm", &["'esm'"]);
    refused(&p, "cjs", &["'cjs'"]);
    // tool.mjs and tool.cjs share a base name but are no collision.
    p.loopx(&["run", "w"]).run();
    assert_eq!(run_help_workflows(&p), ["w"]);
}

#[test]
fn symlinked_workflow_dir_is_discovered_under_the_link_name() {
    let p = good();
    p.file(
        "shared/real-flow/index.sh",
        &logging_script("via-link", STOP),
    )
    .symlink("../shared/real-flow", ".loopx/alias");
    refused(&p, "real-flow", &["'real-flow'"]);
    p.loopx(&["run", "alias"]).run();
    assert_eq!(log(&p), "via-link\n");
    assert_eq!(run_help_workflows(&p), ["alias", "good"]);
}

#[test]
fn symlinked_workflow_dir_gets_the_link_name_in_loopx_workflow() {
    let p = Project::new();
    p.file(
        "shared/real-flow/index.sh",
        "echo \"$LOOPX_WORKFLOW\" >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '{\"stop\":true}'\n",
    )
    .symlink("../shared/real-flow", ".loopx/alias");
    p.loopx(&["run", "alias"]).run();
    assert_eq!(log(&p), "alias\n");
}

#[test]
fn symlinked_script_file_is_discovered_under_the_link_name() {
    let p = Project::new();
    p.script("w", "index.sh", &logging_script("w:index", STOP))
        // The target's name would be invalid as a script name; only the
        // link's name counts.
        .file("scripts/tool.v2.sh", &logging_script("linked", STOP))
        .symlink("../../scripts/tool.v2.sh", ".loopx/w/go.sh");
    refused(&p, "w:tool", &["'tool'"]);
    refused(&p, "w:tool.v2", &["'tool.v2'"]);
    p.loopx(&["run", "w:go"]).run();
    assert_eq!(log(&p), "linked\n");
    let line = help_line(&run_help(&p), "w");
    assert!(line.contains("go"), "{line:?}");
}

#[test]
fn symlink_with_an_invalid_name_is_invalid_even_if_its_target_is_not() {
    let p = good();
    p.file("scripts/fine.sh", "")
        .symlink("../../scripts/fine.sh", ".loopx/w/not.fine.sh");
    refused(&p, "good", &["not.fine.sh", "'w'"]);
}

// ---------------------------------------------------------------- §5.3 names

#[test]
fn invalid_workflow_names_are_fatal_for_run() {
    for bad in ["my.workflow", "-flow", "has space", ".hidden", "wörk"] {
        let p = good();
        p.script(bad, "index.sh", "");
        refused(&p, "good", &[bad]);
    }
}

#[test]
fn invalid_script_names_are_fatal_for_run() {
    for bad in [
        "bad name.sh",
        "-x.sh",
        "a.b.sh",
        ".hidden.ts",
        "a:b.sh",
        "ünï.js",
    ] {
        let p = good();
        p.script("good", bad, "");
        refused(&p, "good", &[bad, "'good'"]);
    }
}

#[test]
fn invalid_script_name_in_sibling_workflow_is_fatal_for_run() {
    let p = good();
    p.script("broken", "index.sh", "")
        .script("broken", "bad name.sh", "");
    refused(&p, "good", &["bad name.sh", "'broken'"]);
    // Also with -n 0, which still validates (§4.2).
    p.loopx(&["run", "-n", "0", "good"])
        .status(1)
        .stdout("")
        .stderr_contains("bad name.sh")
        .run();
}

#[test]
fn invalid_names_are_warnings_for_run_help() {
    let p = good();
    p.script("my.workflow", "index.sh", "")
        .script("broken", "-x.sh", "")
        .script("broken", "bad name.sh", "");
    let o = help_warns(&p, &["my.workflow", "-x.sh", "bad name.sh", "'broken'"]);
    // §5.3: the invalid entries are listed too, next to the valid workflow.
    assert_eq!(
        listed_workflows(&o.stdout),
        ["broken", "good", "my.workflow"]
    );
    let broken = help_line(&o.stdout, "broken");
    assert!(
        broken.contains("-x") && broken.contains("bad name"),
        "{broken:?}"
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let p = good();
    p.script("my.workflow", "index.sh", "")
        .script("broken", "bad name.sh", "")
        .script("broken", "check.sh", "")
        .script("broken", "check.ts", "");
    refused(
        &p,
        "good",
        &["my.workflow", "bad name.sh", "check.sh", "check.ts"],
    );
}

// ---------------------------------------------------------------- §5.2 collisions

#[test]
fn same_base_name_collision_is_fatal_for_run_and_lists_both_files() {
    let p = Project::new();
    p.script("w", "index.sh", &logging_script("w:index", STOP))
        .script("w", "check.sh", "")
        .script("w", "check.ts", "");
    refused(&p, "w", &["check.sh", "check.ts", "'w'"]);
    refused(&p, "w:check", &["check.sh", "check.ts"]);
    // The message says what kind of problem it is.
    p.loopx(&["run", "w"])
        .status(1)
        .stderr_contains(
            "name collision in workflow 'w': script 'check' is defined by check.sh and check.ts",
        )
        .run();
}

#[test]
fn collision_lists_every_conflicting_file() {
    let p = Project::new();
    p.script("w", "index.sh", "")
        .script("w", "check.sh", "")
        .script("w", "check.js", "")
        .script("w", "check.tsx", "");
    refused(&p, "w", &["check.sh", "check.js", "check.tsx"]);
}

#[test]
fn collision_of_index_scripts_is_fatal_for_run() {
    let p = Project::new();
    p.script("w", "index.sh", "").script("w", "index.ts", "");
    refused(&p, "w", &["index.sh", "index.ts"]);
}

#[test]
fn collision_in_sibling_workflow_is_fatal_for_run() {
    let p = good();
    p.script("broken", "check.sh", "")
        .script("broken", "check.ts", "");
    refused(&p, "good", &["check.sh", "check.ts", "'broken'"]);
}

#[test]
fn same_script_name_in_different_workflows_is_no_collision() {
    let p = good();
    p.script("other", "index.sh", "")
        .script("other", "check.sh", "");
    // `.js`, not `.ts`: a TypeScript script this machine cannot run would
    // be warned about before the first script (runtime.rs).
    p.script("good", "check.js", "");
    p.loopx(&["run", "good"]).run();
    assert_eq!(log(&p), "good\n");
}

#[test]
fn collisions_are_warnings_for_run_help() {
    let p = good();
    p.script("broken", "check.sh", "")
        .script("broken", "check.ts", "");
    let o = help_warns(&p, &["check.sh", "check.ts", "'broken'"]);
    assert!(listed_workflows(&o.stdout).contains(&"good".to_string()));
    assert_eq!(log(&p), "");
}

// ---------------------------------------------------------------- §7.2 missing .loopx/

#[test]
fn missing_loopx_dir_is_an_error_that_tells_how_to_create_it() {
    let p = Project::bare();
    let o = p
        .loopx(&["run", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains(".loopx")
        .run();
    assert!(
        o.stderr.contains("loopx init") || o.stderr.to_lowercase().contains("create"),
        "{}",
        o.stderr
    );
    assert!(!p.exists(".loopx"));
}

#[test]
fn loopx_file_instead_of_directory_counts_as_missing() {
    let p = Project::bare();
    p.file(".loopx", "not a directory\n");
    p.loopx(&["run", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains(".loopx")
        .run();
}

#[test]
fn loopx_dir_of_an_ancestor_is_not_searched() {
    let p = good();
    p.dir("sub");
    p.loopx(&["run", "good"])
        .current_dir(p.path("sub"))
        .status(1)
        .stdout("")
        .stderr_contains(".loopx")
        .run();
    assert_eq!(log(&p), "");
    // Run help in the subdirectory lists nothing from the parent either.
    p.loopx(&["run", "-h"])
        .current_dir(p.path("sub"))
        .stderr_contains(".loopx")
        .stdout_contains("Usage: loopx run ")
        .stdout_lacks("good")
        .run();
}

#[test]
fn commands_without_loopx_requirement_do_not_discover() {
    // §5.4: version, output, env and top-level help neither need nor
    // validate .loopx/; a broken one produces no warning.
    let p = good();
    p.script("broken", "check.sh", "")
        .script("broken", "check.ts", "");
    let version = format!("{}\n", env!("CARGO_PKG_VERSION"));
    for (args, stdout) in [
        (&["version"][..], Some(version.as_str())),
        (&["output", "--stop"], Some("{\"stop\":true}\n")),
        (&["env", "list"], Some("")),
        (&["-h"], None),
        (&[], None),
    ] {
        let run = p.loopx(args);
        match stdout {
            Some(exact) => run.stdout(exact),
            None => run.stdout_contains("\nUsage:\n  loopx <command>"),
        }
        .run();
    }
}

// ---------------------------------------------------------------- §5.1 cache

#[test]
fn workflow_added_mid_loop_is_not_visible_to_a_later_goto() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "mkdir -p \"$LOOPX_PROJECT_ROOT/.loopx/late\"\n\
         printf 'printf x' > \"$LOOPX_PROJECT_ROOT/.loopx/late/index.sh\"\n\
         echo w >> \"$LOOPX_PROJECT_ROOT/log\"\n\
         printf '{\"goto\":\"late:index\"}'\n",
    );
    p.loopx(&["run", "w"])
        .status(1)
        .stdout("")
        .stderr_contains("'late'")
        .run();
    assert_eq!(log(&p), "w\n");
    // The next invocation sees it.
    assert_eq!(run_help_workflows(&p), ["late", "w"]);
}

#[test]
fn script_added_mid_loop_is_not_visible_to_a_later_goto() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "printf 'printf x' > added.sh\n\
         echo w >> \"$LOOPX_PROJECT_ROOT/log\"\n\
         printf '{\"goto\":\"added\"}'\n",
    );
    p.loopx(&["run", "w"])
        .status(1)
        .stdout("")
        .stderr_contains("'added'")
        .run();
    assert_eq!(log(&p), "w\n");
}

#[test]
fn script_edit_takes_effect_on_the_next_iteration() {
    // index -> step (old) -> index, which swaps step's content -> step (new).
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "if [ -f \"$LOOPX_PROJECT_ROOT/log\" ]; then cp \"$LOOPX_PROJECT_ROOT/step-v2.sh\" step.sh; fi\n\
         printf '{\"goto\":\"step\"}'\n",
    )
    .script("w", "step.sh", &logging_script("old", ""))
    .file("step-v2.sh", &logging_script("new", STOP));
    p.loopx(&["run", "w"]).stdout("").run();
    assert_eq!(log(&p), "old\nnew\n");
}

#[test]
fn script_removed_mid_loop_fails_when_reached() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "rm other.sh\necho w >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '{\"goto\":\"other\"}'\n",
    )
    .script("w", "other.sh", &logging_script("other", STOP));
    p.loopx(&["run", "w"])
        .status(1)
        .stdout("")
        .stderr_contains("w:other")
        .run();
    assert_eq!(log(&p), "w\n");
}

// ---------------------------------------------------------------- §2.1 / §4.1 targets

#[test]
fn missing_workflow_is_an_error_naming_it() {
    let p = good();
    refused(&p, "nope", &["'nope'"]);
    refused(&p, "nope:index", &["'nope'"]);
}

#[test]
fn missing_script_is_an_error_naming_it_and_the_workflow() {
    let p = good();
    refused(&p, "good:nope", &["'nope'", "'good'"]);
}

#[test]
fn missing_index_is_an_error_only_when_the_script_is_omitted() {
    let p = Project::new();
    p.script("tools", "lint.sh", &logging_script("tools:lint", STOP));
    refused(&p, "tools", &["'tools'", "index"]);
    refused(&p, "tools:index", &["'tools'", "'index'"]);
    p.loopx(&["run", "tools:lint"]).run();
    assert_eq!(log(&p), "tools:lint\n");
}

#[test]
fn workflow_without_index_does_not_block_other_workflows() {
    let p = good();
    p.script("tools", "lint.sh", "");
    p.loopx(&["run", "good"]).run();
    p.loopx(&["run", "-h"])
        .stdout_contains("Usage: loopx run ")
        .run();
    assert_eq!(log(&p), "good\n");
}

/// Target strings §4.1 rejects in every context, each with a substring the
/// error must show (the target itself, or the offending name).
const INVALID_TARGETS: &[&str] = &[
    "",
    ":",
    ":index",
    ":s",
    "good:",
    "w:",
    "a:b:c",
    "good:index:x",
    "::",
    "bad name",
    "my.workflow",
    "good:a.b",
    "good:-x",
    "wörk",
];

#[test]
fn invalid_target_strings_are_rejected_after_discovery() {
    let p = good();
    for target in INVALID_TARGETS {
        let o = refused(&p, target, &[&format!("'{target}'")]);
        // Exit 1, but not a usage error (§12): no pointer to the help.
        assert!(!o.stderr.contains("hint: see '"), "{o}");
    }
}

#[test]
fn missing_loopx_dir_wins_over_an_invalid_target() {
    // §4.1: invalid targets are rejected at the point of a missing workflow,
    // i.e. after discovery, which first needs .loopx/ (§7.1 step 1, §7.2).
    let p = Project::bare();
    for target in INVALID_TARGETS {
        let o = p
            .loopx(&["run", target])
            .status(1)
            .stdout("")
            .stderr_contains(".loopx")
            .run();
        assert!(!o.stderr.contains("invalid target"), "{o}");
        assert!(!o.stderr.contains(&format!("'{target}'")), "{o}");
    }
}

#[test]
fn validation_errors_win_over_an_invalid_target() {
    let p = good();
    p.script("broken", "check.sh", "")
        .script("broken", "check.ts", "");
    for target in [":", "a:b:c", ""] {
        let o = refused(&p, target, &["check.sh", "check.ts"]);
        assert!(!o.stderr.contains("invalid target"), "{o}");
    }
}

#[test]
fn invalid_target_is_rejected_even_with_n_zero() {
    let p = good();
    p.loopx(&["run", "-n", "0", "a:b:c"])
        .status(1)
        .stdout("")
        .stderr_contains("'a:b:c'")
        .run();
}

#[test]
fn non_utf8_script_name_is_invalid() {
    use std::os::unix::ffi::OsStrExt;
    let p = good();
    p.script("w", "index.sh", "");
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.sh");
    std::fs::write(p.path(".loopx/w").join(name), "").expect("write");
    refused(&p, "good", &["'w'", "caf\u{fffd}.sh"]);
    help_warns(&p, &["'w'", "caf\u{fffd}.sh"]);
}

#[test]
fn non_utf8_workflow_name_is_invalid() {
    use std::os::unix::ffi::OsStrExt;
    let p = good();
    let dir = p
        .path(".loopx")
        .join(std::ffi::OsStr::from_bytes(b"fl\xf6w"));
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("index.sh"), "").expect("write");
    refused(&p, "good", &["'fl\u{fffd}w'"]);
    help_warns(&p, &["'fl\u{fffd}w'"]);
}

#[test]
fn missing_env_file_is_reported_before_an_invalid_target() {
    // §7.1: env files load (step 2) before the target is resolved (step 3),
    // and §4.1 puts invalid targets at the point of a missing workflow.
    let p = good();
    let o = p
        .loopx(&["run", "-e", "missing.env", "a:b:c"])
        .status(1)
        .stdout("")
        .stderr_contains("missing.env")
        .run();
    assert!(!o.stderr.contains("'a:b:c'"), "{o}");
}

#[test]
fn validation_errors_win_over_a_missing_env_file() {
    // §7.1: discovery and validation (step 1) come before env loading.
    let p = good();
    p.script("broken", "check.sh", "")
        .script("broken", "check.ts", "");
    refused(&p, "good", &["check.sh", "check.ts"]);
    let o = p
        .loopx(&["run", "-e", "missing.env", "good"])
        .status(1)
        .stdout("")
        .stderr_contains("check.ts")
        .run();
    assert!(!o.stderr.contains("missing.env"), "{o}");
}

#[test]
fn non_utf8_target_is_an_invalid_target() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let p = good();
    let mut r = p.loopx(&["run"]);
    r.cmd.arg(OsStr::from_bytes(b"go\xffod"));
    r.status(1)
        .stdout("")
        .stderr_contains("invalid target 'go\u{fffd}od'")
        .stderr_lacks("hint: see '")
        .run();
    assert_eq!(log(&p), "");
}

#[test]
fn broken_symlinks_are_neither_scripts_nor_workflows() {
    // §5.1 follows symlinks; one that leads nowhere is no file and no
    // directory, so it is ignored like any other non-script entry.
    let p = good();
    p.symlink("../../nowhere.sh", ".loopx/good/dangling.sh")
        .symlink("../nowhere", ".loopx/ghost");
    refused(&p, "good:dangling", &["'dangling'"]);
    refused(&p, "ghost", &["'ghost'"]);
    good_alone_runs_and_is_listed(&p);
}

#[test]
fn package_json_main_field_does_not_change_the_entry_point() {
    // §2.1: the entry point is always `index`; a `main` field is ignored,
    // and a package.json is not a script.
    let p = Project::new();
    p.script("w", "index.sh", &logging_script("w:index", STOP))
        .script("w", "other.sh", &logging_script("w:other", STOP))
        .file(
            ".loopx/w/package.json",
            r#"{"name":"w","main":"other.sh","type":"module"}"#,
        );
    refused(&p, "w:package", &["'package'"]);
    p.loopx(&["run", "w"]).run();
    assert_eq!(log(&p), "w:index\n");
}

#[test]
fn run_help_lists_a_name_with_a_line_break_escaped_on_one_line() {
    // §5.3 / §11.2: listed with a warning; the listing stays one line per
    // workflow.
    let p = good();
    p.script("bad\nname", "x.sh", "");
    let o = help_warns(&p, &["'bad\\nname'"]);
    assert_eq!(listed_workflows(&o.stdout), ["bad\\nname", "good"]);
    refused(&p, "good", &["'bad\\nname'"]);
}
