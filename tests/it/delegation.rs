//! §3.2 project-root delegation, with a stand-in local loopx that reports
//! how it was called.

use crate::util::*;

/// A fake `node_modules/.bin/loopx` that prints its arguments and
/// LOOPX_DELEGATED, and exits with code 7.
fn local_loopx(p: &Project) {
    write_executable(
        &p.path("node_modules/.bin/loopx"),
        "#!/bin/sh\necho \"local loopx: $* delegated=${LOOPX_DELEGATED-unset}\"\nexit 7\n",
    );
}

#[test]
fn declared_local_loopx_runs_with_same_arguments_and_its_exit_status() {
    for field in ["dependencies", "devDependencies", "optionalDependencies"] {
        let p = Project::bare();
        p.file(
            "package.json",
            &format!(r#"{{"{field}": {{"loopx": "^0.1.0"}}}}"#),
        );
        local_loopx(&p);
        p.loopx(&["run", "-n", "3", "ralph"])
            .status(7)
            .stdout("local loopx: run -n 3 ralph delegated=1\n")
            .run();
    }
}

#[test]
fn delegation_happens_before_command_parsing() {
    let p = Project::bare();
    p.file("package.json", r#"{"devDependencies": {"loopx": "*"}}"#);
    local_loopx(&p);
    // Not a valid command for this loopx, but the local one decides.
    p.loopx(&["frobnicate", "--x"])
        .status(7)
        .stdout("local loopx: frobnicate --x delegated=1\n")
        .run();
    p.loopx(&["version"])
        .status(7)
        .stdout("local loopx: version delegated=1\n")
        .run();
}

#[test]
fn loopx_delegated_set_skips_delegation_even_when_empty() {
    let p = Project::bare();
    p.file("package.json", r#"{"dependencies": {"loopx": "1"}}"#);
    local_loopx(&p);
    for value in ["1", ""] {
        p.loopx(&["version"])
            .env("LOOPX_DELEGATED", value)
            .stdout(&format!("{}\n", env!("CARGO_PKG_VERSION")))
            .run();
    }
}

#[test]
fn no_package_json_means_no_delegation_and_no_warning() {
    let p = Project::bare();
    local_loopx(&p);
    // The global loopx answers.
    p.loopx(&["version"])
        .stdout(&format!("{}\n", env!("CARGO_PKG_VERSION")))
        .run();
}

#[test]
fn undeclared_local_binary_is_not_used() {
    let p = Project::bare();
    p.file(
        "package.json",
        r#"{"name": "app", "peerDependencies": {"loopx": "1"}}"#,
    );
    local_loopx(&p);
    // The global loopx answers.
    p.loopx(&["version"])
        .stdout(&format!("{}\n", env!("CARGO_PKG_VERSION")))
        .run();
}

#[test]
fn declared_but_missing_binary_warns_and_runs_global() {
    let p = Project::bare();
    p.file("package.json", r#"{"devDependencies": {"loopx": "1"}}"#);
    p.loopx(&["version"])
        .stdout(&format!("{}\n", env!("CARGO_PKG_VERSION")))
        .stderr_contains("node_modules/.bin/loopx")
        .stderr_contains("npm install")
        .run();
}

#[test]
fn invalid_package_json_warns_and_runs_global() {
    let p = Project::bare();
    p.file("package.json", "{\"devDependencies\": {\"loopx\": \"1\"},}");
    local_loopx(&p);
    p.loopx(&["version"])
        .stdout(&format!("{}\n", env!("CARGO_PKG_VERSION")))
        .stderr_contains("package.json is not valid JSON")
        .run();
}

#[test]
fn unreadable_package_json_warns_and_runs_global() {
    let p = Project::bare();
    // A directory cannot be read as a file, even by root.
    p.dir("package.json");
    local_loopx(&p);
    p.loopx(&["version"])
        .stdout(&format!("{}\n", env!("CARGO_PKG_VERSION")))
        .stderr_contains("cannot read package.json")
        .run();
}

#[test]
fn only_the_invocation_cwd_counts_not_its_ancestors() {
    let p = Project::bare();
    p.file("package.json", r#"{"devDependencies": {"loopx": "1"}}"#);
    local_loopx(&p);
    p.dir("sub");
    let mut run = p
        .loopx(&["version"])
        .stdout(&format!("{}\n", env!("CARGO_PKG_VERSION")));
    run.cmd.current_dir(p.path("sub"));
    run.run();
}

#[test]
fn after_delegation_loopx_bin_is_the_realpath_of_the_local_binary() {
    let p = Project::new();
    p.file(
        "package.json",
        r#"{"devDependencies": {"loopx": "^0.1.0"}}"#,
    );
    // As npm lays it out: .bin/loopx -> ../loopx/bin/loopx -> the binary,
    // both links relative.
    let native = p.path("node_modules/loopx/native/loopx");
    copy_loopx_to(&native);
    p.symlink("../native/loopx", "node_modules/loopx/bin/loopx");
    p.symlink("../loopx/bin/loopx", "node_modules/.bin/loopx");
    p.script(
        "wf",
        "index.sh",
        "printf '%s\\n%s' \"$LOOPX_BIN\" \"$LOOPX_DELEGATED\" > \"$LOOPX_PROJECT_ROOT/got\"\n\
         $LOOPX_BIN output --stop\n",
    );
    p.loopx(&["run", "wf"]).run();
    let real = std::fs::canonicalize(&native).expect("realpath");
    assert_ne!(real, std::fs::canonicalize(loopx_bin()).expect("realpath"));
    assert_eq!(p.read("got"), format!("{}\n1", real.display()));
}

/// A local "binary" that is a bash script, as npm's `.bin` link to a shim
/// can be: it prints the two variables §3.2 hands over with delegation.
#[test]
fn delegation_sets_loopx_bin_for_every_command() {
    let p = Project::bare();
    p.file("package.json", r#"{"devDependencies": {"loopx": "*"}}"#);
    let shim = p.path("node_modules/loopx/bin/shim.sh");
    write_executable(
        &shim,
        "#!/bin/bash\necho \"bin=${LOOPX_BIN-unset} delegated=${LOOPX_DELEGATED-unset}\"\n",
    );
    p.symlink("../loopx/bin/shim.sh", "node_modules/.bin/loopx");
    let real = std::fs::canonicalize(&shim).expect("realpath");
    let expected = format!("bin={} delegated=1\n", real.display());
    for args in [
        &[][..],
        &["-h"],
        &["run", "ralph"],
        &["run", "-h"],
        &["version"],
        &["output", "--stop"],
        &["env", "list"],
        &["install", "org/repo"],
        &["no-such-command"],
    ] {
        p.loopx(args)
            .env_remove("LOOPX_BIN")
            .stdout(&expected)
            .run();
    }
}

/// A workflow's package.json declares the loopx range it needs (§3.2); the
/// scripts' `"$LOOPX_BIN" output` runs in that directory, and must neither
/// warn about a missing local loopx nor hand over to one.
#[test]
fn loopx_bin_called_from_a_workflow_with_a_package_json_is_not_delegated() {
    let p = Project::new();
    p.file(
        ".loopx/w/package.json",
        r#"{"dependencies": {"loopx": ">=0.0.1"}}"#,
    )
    .script(
        "w",
        "index.sh",
        "\"$LOOPX_BIN\" output --result ok --goto next\n",
    )
    .script("w", "next.sh", "\"$LOOPX_BIN\" output --stop\n");
    p.loopx(&["run", "w"]).run();
    // With a local binary there too, the run's own binary still answers.
    write_executable(
        &p.path(".loopx/w/node_modules/.bin/loopx"),
        "#!/bin/sh\necho '{\"result\":\"delegated\",\"stop\":true}'\n",
    );
    p.loopx(&["run", "-n", "2", "--log", "log", "w"]).run();
    assert!(!p.read("log").contains("delegated"), "{}", p.read("log"));
}

#[test]
fn a_package_json_that_is_a_fifo_or_over_8_mib_warns_and_runs_global() {
    // §3.2: unreadable, so a warning, no delegation, the global loopx runs.
    // Read before anything else: a fifo must not keep loopx waiting.
    let p = Project::bare();
    local_loopx(&p);
    let status = std::process::Command::new("mkfifo")
        .arg(p.path("package.json"))
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo");
    let version = format!("{}\n", env!("CARGO_PKG_VERSION"));
    p.loopx(&["version"])
        .timeout(std::time::Duration::from_secs(30))
        .stdout(&version)
        .stderr(
            "loopx: warning: cannot read package.json (not a regular file but a fifo); \
             not looking for a project-local loopx\n",
        )
        .run();
    std::fs::remove_file(p.path("package.json")).expect("rm fifo");
    // Declares loopx: read whole, this would delegate.
    let padding = " ".repeat(9 << 20);
    p.file(
        "package.json",
        &format!(r#"{{"devDependencies":{{"loopx":"*"}}}}{padding}"#),
    );
    p.loopx(&["version"])
        .stdout(&version)
        .stderr(
            "loopx: warning: cannot read package.json (larger than 8 MiB, the limit); \
             not looking for a project-local loopx\n",
        )
        .run();
}
