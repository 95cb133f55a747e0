//! The write phase of `loopx install` (§10.7): stage every workflow in a
//! hidden directory inside `.loopx/` (so it is on the same filesystem and
//! commit is a rename), then move them into place one by one.
//!
//! The staging directory is named `.loopx-install-…`: not a valid workflow
//! name, and it never holds top-level scripts itself, so a `loopx run` that
//! happens to start meanwhile does not discover it (§2.1).
//!
//! An install killed outright leaves its staging directory behind; the next
//! install removes it (scratch.rs `sweep`). A kill in the middle of a `-y`
//! replacement may have moved the old workflow into it without moving the
//! new one into place yet: the sweep puts the old one back, so each workflow
//! is always there in its old or its new form.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::install::plan::Planned;
use crate::install::scratch::Scratch;

/// Stages and commits `plan` into `loopx_dir`, creating it when missing.
/// On a failure before commit, `.loopx/` is left as it was: the staging
/// directory goes, and so does `.loopx/` when this call created it.
/// `before_commit` is the last chance to stop (an interrupt): once the
/// commit starts, it runs to the end.
pub fn write(
    plan: &[Planned],
    loopx_dir: &Path,
    before_commit: &mut dyn FnMut() -> Result<(), Error>,
) -> Result<(), Error> {
    let created = match fs::DirBuilder::new().mode(0o755).create(loopx_dir) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
        Err(e) => {
            return Err(Error::io(
                format!("cannot create {}", loopx_dir.display()),
                e,
            ))
        }
    };
    let result = stage_and_commit(plan, loopx_dir, before_commit);
    if created && result.is_err() {
        // Only succeeds when empty: after a partial commit it stays.
        let _ = fs::remove_dir(loopx_dir);
    }
    result
}

/// The name of staging directories inside `.loopx/`.
const STAGING_PREFIX: &str = ".loopx-install-";

/// Where `commit_one` moves a workflow that `-y` replaces.
const REPLACED_PREFIX: &str = ".replaced-";

/// Removes the staging directories that installs killed before they could
/// clean up left in `loopx_dir`, putting back any workflow they had moved
/// aside. Runs before preflight, so the collision checks see `.loopx/` as
/// the user left it.
pub fn sweep_stale(loopx_dir: &Path) {
    Scratch::sweep(loopx_dir, STAGING_PREFIX, |stale| {
        restore_replaced(stale, loopx_dir)
    });
}

/// Moves the workflows in a dead install's staging directory that it had
/// moved aside back into `.loopx/`, where their place is still empty.
fn restore_replaced(stale: &Path, loopx_dir: &Path) {
    let Ok(entries) = fs::read_dir(stale) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(name) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(REPLACED_PREFIX))
        else {
            continue;
        };
        let dest = loopx_dir.join(name);
        if crate::names::is_valid_name(name)
            && fs::symlink_metadata(&dest).is_err()
            && fs::rename(entry.path(), &dest).is_ok()
        {
            crate::messages::warn(&format!(
                "an interrupted install had moved workflow '{name}' aside; put it back \
                 into .loopx/{name}"
            ));
        }
    }
}

fn stage_and_commit(
    plan: &[Planned],
    loopx_dir: &Path,
    before_commit: &mut dyn FnMut() -> Result<(), Error>,
) -> Result<(), Error> {
    let staging = Scratch::create(loopx_dir, STAGING_PREFIX).map_err(|e| {
        Error::io(
            format!(
                "cannot install into {}: cannot create a staging directory there",
                loopx_dir.display()
            ),
            e,
        )
    })?;
    for w in plan {
        copy_tree(&w.dir, &staging.path().join(&w.name)).map_err(|err| Error::InstallStaging {
            workflow: w.name.clone(),
            err,
        })?;
    }
    before_commit()?;
    commit(plan, staging.path(), loopx_dir)
    // `staging` is dropped here, with any replaced workflows moved into it.
}

/// §10.7 step 2: for each workflow, move a `-y`-replaced entry aside (into
/// the staging directory, so it is deleted with it; a symlink moves as
/// itself and its target is untouched), then rename the staged workflow into
/// place. A failure stops here and reports what was and was not committed.
pub fn commit(plan: &[Planned], staging: &Path, loopx_dir: &Path) -> Result<(), Error> {
    for (i, w) in plan.iter().enumerate() {
        if let Err(err) = commit_one(w, staging, loopx_dir) {
            return Err(Error::InstallCommit {
                workflow: w.name.clone(),
                err,
                committed: plan[..i].iter().map(|w| w.name.clone()).collect(),
                not_committed: plan[i..].iter().map(|w| w.name.clone()).collect(),
            });
        }
    }
    Ok(())
}

fn commit_one(w: &Planned, staging: &Path, loopx_dir: &Path) -> io::Result<()> {
    let dest = loopx_dir.join(&w.name);
    // Named after the workflow, so a later sweep knows where it belongs.
    let aside = staging.join(format!("{REPLACED_PREFIX}{}", w.name));
    let mut moved_aside = false;
    if w.replace {
        match fs::rename(&dest, &aside) {
            Ok(()) => moved_aside = true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    // rename() would silently replace an empty directory that appeared since
    // the preflight check; refuse instead.
    let result = if fs::symlink_metadata(&dest).is_ok() {
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} appeared during the install", dest.display()),
        ))
    } else {
        fs::rename(staging.join(&w.name), &dest)
    };
    if result.is_err() && moved_aside {
        // Put the replaced workflow back; nothing else can be done if this fails.
        let _ = fs::rename(&aside, &dest);
    }
    result
}

/// Copies the tree at `src` (following it if it is itself a symlink) to the
/// new directory `dst`. Inside, symlinks are copied as symlinks (preflight
/// has checked they stay inside), regular files get mode 0755 when any
/// execute bit is set and 0644 otherwise, and anything else (fifos, sockets,
/// devices) is skipped.
pub fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    let mut pending: Vec<(PathBuf, PathBuf)> = vec![(src.to_path_buf(), dst.to_path_buf())];
    while let Some((from, to)) = pending.pop() {
        fs::DirBuilder::new().mode(0o755).create(&to)?;
        for entry in fs::read_dir(&from)? {
            let entry = entry?;
            let (source, target) = (entry.path(), to.join(entry.file_name()));
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push((source, target));
            } else if kind.is_symlink() {
                std::os::unix::fs::symlink(fs::read_link(&source)?, &target)?;
            } else if kind.is_file() {
                let executable = entry.metadata()?.permissions().mode() & 0o111 != 0;
                fs::copy(&source, &target)?;
                let mode = if executable { 0o755 } else { 0o644 };
                fs::set_permissions(&target, fs::Permissions::from_mode(mode))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::testutil::TempDir;
    use std::os::unix::fs::symlink;

    fn planned(name: &str, dir: &Path, replace: bool) -> Planned {
        Planned {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            replace,
        }
    }

    #[test]
    fn copies_files_directories_and_links_with_normalised_modes() {
        let tmp = TempDir::new("copy-tree");
        let src = tmp.path().join("src");
        fs::create_dir_all(src.join("lib/deep")).unwrap();
        fs::write(src.join("index.sh"), b"#!/bin/bash").unwrap();
        fs::set_permissions(src.join("index.sh"), fs::Permissions::from_mode(0o4711)).unwrap();
        fs::write(src.join("lib/deep/data.txt"), b"data").unwrap();
        fs::set_permissions(
            src.join("lib/deep/data.txt"),
            fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        symlink("lib/deep/data.txt", src.join("link")).unwrap();
        let dst = tmp.path().join("dst");
        copy_tree(&src, &dst).unwrap();
        let mode = |p: &str| fs::metadata(dst.join(p)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode("index.sh"), 0o755);
        assert_eq!(mode("lib/deep/data.txt"), 0o644);
        assert_eq!(
            fs::read_link(dst.join("link")).unwrap(),
            Path::new("lib/deep/data.txt")
        );
        assert_eq!(fs::read(dst.join("link")).unwrap(), b"data");
    }

    #[test]
    fn commit_failure_reports_committed_and_not_committed() {
        let tmp = TempDir::new("commit-fail");
        let staging = tmp.path().join("staging");
        let loopx = tmp.path().join(".loopx");
        fs::create_dir_all(staging.join("a")).unwrap();
        fs::create_dir_all(&loopx).unwrap();
        // `b` was never staged, so its rename fails.
        let plan = [
            planned("a", tmp.path(), false),
            planned("b", tmp.path(), false),
            planned("c", tmp.path(), false),
        ];
        match commit(&plan, &staging, &loopx) {
            Err(e @ Error::InstallCommit { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.starts_with("cannot move workflow 'b' into .loopx/"),
                    "{msg}"
                );
                assert!(msg.contains("\ncommitted: a\nnot committed: b, c"), "{msg}");
            }
            other => panic!("expected a commit failure, got {other:?}"),
        }
        assert!(loopx.join("a").is_dir());
    }

    #[test]
    fn a_failed_replacement_puts_the_old_workflow_back() {
        let tmp = TempDir::new("commit-restore");
        let staging = tmp.path().join("staging");
        let loopx = tmp.path().join(".loopx");
        fs::create_dir_all(&staging).unwrap();
        fs::create_dir_all(loopx.join("a")).unwrap();
        fs::write(loopx.join("a/index.sh"), b"old").unwrap();
        let plan = [planned("a", tmp.path(), true)];
        assert!(commit(&plan, &staging, &loopx).is_err());
        assert_eq!(fs::read(loopx.join("a/index.sh")).unwrap(), b"old");
    }

    #[test]
    fn a_dead_installs_staging_goes_and_a_workflow_it_moved_aside_comes_back() {
        let tmp = TempDir::new("commit-sweep");
        let loopx = tmp.path().join(".loopx");
        // Killed between moving `old` aside and moving its replacement in;
        // `kept` had already been replaced (its new version is in place).
        let stale = loopx.join(".loopx-install-99999999-1-0");
        fs::create_dir_all(stale.join(".replaced-old")).unwrap();
        fs::write(stale.join(".replaced-old/index.sh"), b"old").unwrap();
        fs::create_dir_all(stale.join(".replaced-kept")).unwrap();
        fs::create_dir_all(stale.join("half-staged")).unwrap();
        fs::create_dir_all(loopx.join("kept")).unwrap();
        fs::write(loopx.join("kept/index.sh"), b"new").unwrap();
        let src = tmp.path().join("src");
        fs::create_dir_all(&src).unwrap();
        fs::write(src.join("index.sh"), b"x").unwrap();

        sweep_stale(&loopx);
        write(&[planned("fresh", &src, false)], &loopx, &mut || Ok(())).unwrap();
        let mut names: Vec<String> = fs::read_dir(&loopx)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["fresh", "kept", "old"]);
        assert_eq!(fs::read(loopx.join("old/index.sh")).unwrap(), b"old");
        assert_eq!(fs::read(loopx.join("kept/index.sh")).unwrap(), b"new");
    }

    #[test]
    fn an_interrupt_before_commit_writes_nothing() {
        let tmp = TempDir::new("stage-interrupt");
        let loopx = tmp.path().join(".loopx");
        let good = tmp.path().join("good");
        fs::create_dir_all(&good).unwrap();
        fs::write(good.join("index.sh"), b"x").unwrap();
        let plan = [planned("good", &good, false)];
        let result = write(&plan, &loopx, &mut || Err(Error::Interrupted { signal: 2 }));
        assert!(matches!(result, Err(Error::Interrupted { signal: 2 })));
        assert!(!loopx.exists());
    }

    #[test]
    fn staging_failure_names_the_workflow_and_leaves_loopx_as_it_was() {
        let tmp = TempDir::new("stage-fail");
        let loopx = tmp.path().join(".loopx");
        let good = tmp.path().join("good");
        fs::create_dir_all(&good).unwrap();
        fs::write(good.join("index.sh"), b"x").unwrap();
        let plan = [
            planned("good", &good, false),
            planned("gone", &tmp.path().join("vanished"), false),
        ];
        match write(&plan, &loopx, &mut || Ok(())) {
            Err(e @ Error::InstallStaging { .. }) => {
                assert!(
                    e.to_string().starts_with("cannot stage workflow 'gone': "),
                    "{e}"
                );
            }
            other => panic!("expected a staging failure, got {other:?}"),
        }
        // .loopx/ did not exist before, so it does not exist after.
        assert!(!loopx.exists());
        fs::create_dir(&loopx).unwrap();
        assert!(write(&plan, &loopx, &mut || Ok(())).is_err());
        assert_eq!(fs::read_dir(&loopx).unwrap().count(), 0);
    }
}
