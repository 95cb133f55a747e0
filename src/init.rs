//! `loopx init [<workflow>]` (DESIGN.md "Beyond the spec"): a runnable
//! starting point in the current project's `.loopx/`, never overwriting
//! anything.
//!
//! - Without a name, or with a name that is not a ready-made workflow: a
//!   one-script workflow (`.loopx/main/index.sh` by default), whose script
//!   says in comments what a script does (§2.3 output, goto, stop).
//! - `ralph`, `build-audit-fix`, `issue-runner`: that ready-made workflow,
//!   installed from `workflows.tar.gz` of this binary's own release, as
//!   `loopx install -w <name> <url>` would (§10: same checks, same staging,
//!   nothing written on failure), then the files of its `init/` directory
//!   (PROMPT.md, TASK.md, issue-runner.env: what it reads, with comments
//!   on what to put there) copied to the project root, unless there.
//!
//! Why fetched and not embedded: the ready-made workflows are text that
//! compresses to about 50 KB, a share of the static binary's 1.5 MB budget
//! (scripts/build-release.sh) better left to code. Fetching the release's own
//! tarball, pinned to this version, gives the same files as `loopx install`
//! does; `LOOPX_DOWNLOAD_URL` points it at a mirror (air-gapped hosts), as
//! for install.sh and the npm package. The default workflow is a few lines
//! and is written from here, offline.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::Error;
use crate::install::{self, InstallArgs};
use crate::messages::print_stdout;

/// The ready-made workflows of every release (dist/workflows).
pub const READY_MADE: &[&str] = &["ralph", "build-audit-fix", "issue-runner"];

/// The workflow `loopx init` writes without a name.
pub const DEFAULT_NAME: &str = "main";

/// Where releases are published (DESIGN.md "Release artifacts").
const RELEASES: &str = "https://github.com/loopx-dev/loopx/releases";

/// The one-script workflow's script.
const ONE_SCRIPT: &str = r#"#!/bin/bash
# A loopx workflow script. loopx runs it in its workflow's directory
# (.loopx/<workflow>/), and reads its stdout as its answer:
#   - "$LOOPX_BIN" output --stop                  ends the loop;
#   - "$LOOPX_BIN" output --result "$x" --goto b  runs b.sh of this workflow
#     next, with $x on its stdin (other workflows: --goto workflow:script);
#   - anything else (plain text, nothing) starts the loop again here.
# So print logs to stderr (>&2), never to stdout. A non-zero exit ends the
# loop with an error (unless --retry is given).
# Variables: LOOPX_PROJECT_ROOT (where you ran loopx), LOOPX_RUN_ID, and
# those of an env file given with -e. The authoring guide:
# https://github.com/loopx-dev/loopx/blob/main/dist/workflows/AUTHORING.md
set -euo pipefail

echo "working in $LOOPX_PROJECT_ROOT ..." >&2
# Your step goes here: run an agent CLI, a build, a check.

"$LOOPX_BIN" output --result "done" --stop
"#;

/// Creates `path` with `text`, failing if anything is there already.
fn create_new(path: &Path, text: &str, mode: u32) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    file.write_all(text.as_bytes())
}

/// `loopx init [<workflow>]` in the project root (the cwd).
pub fn init(name: Option<&str>) -> Result<(), Error> {
    let root = std::env::current_dir()
        .map_err(|e| Error::io("cannot determine the current directory", e))?;
    let name = name.unwrap_or(DEFAULT_NAME);
    // §5.3's rules: what discovery would refuse is not written.
    if !crate::names::is_valid_name(name) {
        return Err(Error::usage(
            format!(
                "invalid workflow name '{name}': names use letters, digits, '-' and '_', \
                 and start with a letter, a digit or '_'"
            ),
            "loopx init --help",
        ));
    }
    let dir = root.join(".loopx").join(name);
    // Never overwrite: a workflow of that name, or anything at its path.
    if dir.symlink_metadata().is_ok() {
        return Err(Error::InitExists {
            workflow: name.to_string(),
            ready_made: READY_MADE.contains(&name),
        });
    }
    if READY_MADE.contains(&name) {
        return ready_made(&root, name);
    }
    fs::create_dir_all(root.join(".loopx"))
        .and_then(|()| fs::create_dir(&dir))
        .map_err(|e| Error::io(format!("cannot create .loopx/{name}"), e))?;
    create_new(&dir.join("index.sh"), ONE_SCRIPT, 0o755)
        .map_err(|e| Error::io(format!("cannot write .loopx/{name}/index.sh"), e))?;
    print_stdout(&format!(
        "wrote .loopx/{name}/index.sh, a workflow of one script to start from\n\
         next: edit it, then run it with `loopx run {name}` (once: `loopx run -n 1 {name}`)\n"
    ))
}

/// The release's workflows.tar.gz for this version.
fn workflows_url() -> String {
    let base = std::env::var("LOOPX_DOWNLOAD_URL")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| RELEASES.to_string());
    format!(
        "{}/download/v{}/workflows.tar.gz",
        base.trim_end_matches('/'),
        env!("CARGO_PKG_VERSION")
    )
}

fn ready_made(root: &Path, name: &str) -> Result<(), Error> {
    install::install(&InstallArgs {
        source: workflows_url(),
        workflow: Some(name.to_string()),
        yes: false,
    })?;
    // The files the workflow reads from the project root, with comments on
    // what to put there, ship in its init/ directory (dist/workflows): kept
    // beside the workflow, out of the binary.
    let from = root.join(".loopx").join(name).join("init");
    let mut files: Vec<String> = fs::read_dir(&from)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut said = String::new();
    let mut run = format!("loopx run {name}");
    for file in &files {
        let text = fs::read_to_string(from.join(file))
            .map_err(|e| Error::io(format!("cannot read .loopx/{name}/init/{file}"), e))?;
        match create_new(&root.join(file), &text, 0o644) {
            Ok(()) => said.push_str(&format!("wrote {file}, to fill in\n")),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                said.push_str(&format!("kept {file}, which was there already\n"))
            }
            Err(e) => return Err(Error::io(format!("cannot write {file}"), e)),
        }
        if file.ends_with(".env") {
            run = format!("loopx run -e {file} {name}");
        }
    }
    said.push_str(&format!(
        "next: edit {}, read .loopx/{name}/README.md, then `{run}`\n",
        files.join(", ")
    ));
    print_stdout(&said)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ready_made_workflow_ships_the_files_init_writes() {
        let dist = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/workflows");
        for w in READY_MADE {
            let init = dist.join(w).join("init");
            assert!(
                fs::read_dir(&init).is_ok_and(|mut d| d.next().is_some()),
                "{w}"
            );
        }
        assert!(crate::names::is_valid_name(DEFAULT_NAME));
    }
}
