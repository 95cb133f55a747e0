//! ShellCheck over every shell file of the repository, found by extension
//! (`.sh`, `.bash`) or by a shell shebang (`#!/bin/sh`, `#!/usr/bin/env
//! bash`, ...) among the files git tracks or would track, so that a new
//! script is checked without a change here. The inline scripts of the
//! action and the examples are checked in `fleet.rs`, the fakes of the
//! workflow tests in `workflows.rs`.

use crate::util::{self, Run};
use std::fs;
use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Whether a first line is a shebang naming a POSIX-family shell, directly
/// (`#!/bin/bash`) or through env (`#!/usr/bin/env bash`).
fn is_shell_shebang(first_line: &str) -> bool {
    let Some(rest) = first_line.strip_prefix("#!") else {
        return false;
    };
    let mut words = rest.split_whitespace();
    let mut prog = words.next().unwrap_or("");
    if prog.rsplit('/').next() == Some("env") {
        prog = words.find(|w| !w.starts_with('-')).unwrap_or("");
    }
    matches!(
        prog.rsplit('/').next(),
        Some("sh" | "bash" | "dash" | "ksh" | "bash-static")
    )
}

/// Every shell file of the repository, relative to its root, sorted.
fn shell_files() -> Vec<String> {
    let mut cmd = Command::new("git");
    cmd.args([
        "ls-files",
        "-z",
        "--cached",
        "--others",
        "--exclude-standard",
    ])
    .current_dir(ROOT);
    let listed = Run::command(cmd)
        .stdout_any("the file list, read below")
        .run();
    let mut files: Vec<String> = listed
        .stdout
        .split('\0')
        .filter(|f| !f.is_empty())
        .filter(|f| {
            let path = Path::new(ROOT).join(f);
            if !path.is_file() {
                return false; // deleted in the working tree
            }
            if f.ends_with(".sh") || f.ends_with(".bash") {
                return true;
            }
            let mut head = [0u8; 128];
            let n = fs::File::open(&path)
                .and_then(|mut h| h.read(&mut head))
                .unwrap_or(0);
            let head = String::from_utf8_lossy(&head[..n]);
            is_shell_shebang(head.lines().next().unwrap_or(""))
        })
        .map(str::to_string)
        .collect();
    files.sort();
    files.dedup();
    files
}

#[test]
fn shebangs_are_recognised() {
    for (line, shell) in [
        ("#!/bin/sh", true),
        ("#!/bin/bash", true),
        ("#!/usr/bin/env bash", true),
        ("#!/usr/bin/env -S bash -e", true),
        ("#! /bin/dash", true),
        ("#!/usr/bin/env node", false),
        ("#!/usr/bin/env python3", false),
        ("#!/bin/zsh", false),
        ("# a comment", false),
        ("", false),
    ] {
        assert_eq!(is_shell_shebang(line), shell, "{line:?}");
    }
}

#[test]
fn every_shell_file_passes_shellcheck() {
    let files = shell_files();
    // The discovery itself: files by shebang alone and by extension.
    for known in [
        ".ci/run",
        "install.sh",
        "scripts/test.sh",
        "scripts/stress.sh",
        "dist/action/run.sh",
        "dist/workflows/ralph/index.sh",
        "dist/workflows/build-audit-fix/lib/common.sh",
    ] {
        assert!(
            files.iter().any(|f| f == known),
            "{known} not found in {files:?}"
        );
    }
    // -x: follow `source`d files; each file's shell comes from its
    // shebang, or from a `# shellcheck shell=` directive in a library.
    let mut cmd = Command::new(util::shellcheck());
    cmd.arg("-x").args(&files).current_dir(ROOT);
    // About 30 s of CPU for the whole repository, on two shared cores.
    Run::command(cmd).timeout(Duration::from_secs(600)).run();
}
