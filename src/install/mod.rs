//! `loopx install` (§10): classify the source, fetch it into a private
//! temporary directory, run every preflight check, then stage and commit
//! into `.loopx/`. Each step lives in its own module:
//! - `source`: §10.1 source detection and the names derived from it, and
//!   local directories (beyond §10.1);
//! - `fetch`: `git clone` / `curl` + `archive` (safe in-process extraction,
//!   and the copy of a local directory under the same rules),
//!   within `limits` (size, stall), every URL shown through `redact`;
//! - `classify`: §10.3 layout, §10.4 validation, self-containment;
//! - `plan`: §10.5–§10.8 preflight, one aggregated error;
//! - `commit`: §10.7 stage-then-commit, §10.9 cleanup;
//! - `scratch`: the temporary directories, removed on every exit path.
//!
//! The summary of what was installed goes to stdout (it is the command's
//! result); warnings and errors go to stderr.

pub mod archive;
pub mod classify;
pub mod commit;
pub mod fetch;
pub mod limits;
pub mod plan;
pub mod redact;
pub mod scratch;
pub mod source;

use std::io::Write;

use crate::discovery;
use crate::error::Error;
use crate::proc::signals::Signals;
use scratch::Scratch;
use source::Source;

/// What `loopx install` is asked for (§4.2, §10).
#[derive(Debug, PartialEq, Eq)]
pub struct InstallArgs {
    pub source: String,
    /// `-w <name>` (§10.8).
    pub workflow: Option<String>,
    /// `-y` (§10.5, §10.6).
    pub yes: bool,
}

/// The name of the download/clone directories in the system temp directory.
const WORK_PREFIX: &str = "loopx-install-";

/// `loopx install [-w <name>] [-y] <source>` in the project root (the cwd).
pub fn install(args: &InstallArgs) -> Result<(), Error> {
    let mut source =
        source::classify(&args.source).map_err(|message| Error::InstallSource { message })?;
    // A local directory is found now, and named after its realpath (`.`
    // is named after the current directory, not ".").
    let local_name = match &mut source {
        Source::Local { path } => {
            let (real, name) =
                source::resolve_local(path).map_err(|message| Error::InstallSource { message })?;
            *path = real;
            name
        }
        _ => String::new(),
    };
    let limits = limits::Limits::from_env()?;
    let project_root = std::env::current_dir()
        .map_err(|e| Error::io("cannot determine the current directory", e))?;
    // Ctrl-C during a fetch must still clean up: the handlers only record
    // the signal, checked between steps (the tools themselves get the
    // terminal's SIGINT and stop).
    let mut signals =
        Signals::install().map_err(|e| Error::io("cannot install signal handlers", e))?;
    let mut check_interrupt = || {
        signals.drain();
        match signals.interrupted() {
            Some(signal) => Err(Error::Interrupted { signal }),
            None => Ok(()),
        }
    };

    // Installs killed outright (SIGKILL) leave their directories behind;
    // the next one removes them (scratch.rs).
    let loopx_dir = discovery::loopx_dir(&project_root);
    commit::sweep_stale(&loopx_dir);
    let temp_dir = std::env::temp_dir();
    Scratch::sweep(&temp_dir, WORK_PREFIX, |_| {});
    let work = Scratch::create(&temp_dir, WORK_PREFIX)
        .map_err(|e| Error::io("cannot create a temporary directory", e))?;
    let fetched = fetch::fetch(&source, work.path(), &limits);
    // A Ctrl-C also stops git or curl; report the interrupt, not their failure.
    check_interrupt()?;
    let root = fetched?;

    let single_name = match &source {
        Source::Git { repo_name, .. } => repo_name,
        Source::Tarball { archive_name, .. } => archive_name,
        Source::Local { .. } => &local_name,
    };
    let planned = plan::preflight(
        &root,
        &plan::Request {
            single_name,
            only: args.workflow.as_deref(),
            yes: args.yes,
        },
        &loopx_dir,
    )?;
    check_interrupt()?;

    commit::write(&planned, &loopx_dir, &mut check_interrupt)?;
    print_summary(&planned);
    Ok(())
}

/// One line per installed workflow. The install has happened, so a closed
/// stdout is no reason to report failure.
fn print_summary(planned: &[plan::Planned]) {
    let mut text = String::new();
    for w in planned {
        let replaced = if w.replace { " (replaced)" } else { "" };
        text.push_str(&format!(
            "installed workflow '{name}' into .loopx/{name}{replaced}\n",
            name = w.name
        ));
    }
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

#[cfg(test)]
pub(crate) mod testutil {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory under the system temp dir, removed on drop.
    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> TempDir {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let path = std::env::temp_dir().join(format!(
                "loopx-test-{tag}-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    /// Creates files holding `x` (and their parent directories) under `root`.
    pub fn tree(root: &Path, files: &[&str]) {
        for file in files {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"x").unwrap();
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
