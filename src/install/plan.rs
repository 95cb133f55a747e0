//! The preflight phase of `loopx install` (§10.3–§10.8): which workflows the
//! source holds, which are selected, and every reason not to install them,
//! gathered across all selected workflows before anything is written
//! (§10.7: one aggregated error).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::install::classify::{self, Layout};
use crate::names::is_valid_name;
use crate::version_check;

/// One workflow to install.
#[derive(Debug, PartialEq, Eq)]
pub struct Planned {
    /// The name, which is also the destination `.loopx/<name>` (§10.5).
    pub name: String,
    /// Its directory in the fetched source.
    pub dir: PathBuf,
    /// `-y` replaces a workflow already at the destination.
    pub replace: bool,
}

/// What the user asked for, besides the source.
pub struct Request<'a> {
    /// The name a single-workflow source gets (repository or archive name).
    pub single_name: &'a str,
    /// `-w <name>` (§10.8).
    pub only: Option<&'a str>,
    /// `-y` (§10.5, §10.6).
    pub yes: bool,
}

/// Runs every preflight check on the source at `root` for installing into
/// `loopx_dir`. Warnings (broken package.json, mismatches accepted by `-y`)
/// go to stderr as they are found; failures come back together.
pub fn preflight(root: &Path, req: &Request<'_>, loopx_dir: &Path) -> Result<Vec<Planned>, Error> {
    let fail = |failures: Vec<String>| Error::InstallPreflight { failures };
    let layout = classify::layout(root).map_err(|e| fail(vec![e]))?;
    let selected = select(root, &layout, req).map_err(|e| fail(vec![e]))?;

    let mut failures = Vec::new();
    if let Some(problem) = loopx_dir_problem(loopx_dir) {
        failures.push(problem);
    }
    let mut planned = Vec::new();
    for (name, dir) in selected {
        let before = failures.len();
        if let Some(problem) = outside_source(root, &dir, &name) {
            failures.push(problem);
            continue;
        }
        failures.extend(classify::validate_workflow(&dir, &name));
        match classify::escaping_symlinks(&dir) {
            Ok(links) => failures.extend(links.into_iter().map(|(link, target)| {
                format!(
                    "workflow '{name}': symlink '{}' points outside the workflow ('{}'); \
                     a workflow must be self-contained",
                    link.display(),
                    target.display()
                )
            })),
            Err(e) => failures.push(format!("workflow '{name}': cannot read its files: {e}")),
        }
        // An invalid name is no path to look at (it could be `..`).
        let replace = if is_valid_name(&name) {
            match collision(&loopx_dir.join(&name), &name, req.yes) {
                Ok(replace) => replace,
                Err(problem) => {
                    failures.push(problem);
                    false
                }
            }
        } else {
            false
        };
        let outcome = version_check::check(&dir);
        if let Some(warning) = outcome.broken_warning(&name) {
            crate::messages::warn(&warning);
        } else if let Some(mismatch) = outcome.mismatch(&name) {
            if req.yes {
                crate::messages::warn(&format!("{mismatch}; installing anyway (-y)"));
            } else {
                failures.push(format!("{mismatch}; use -y to install it anyway"));
            }
        }
        if failures.len() == before {
            planned.push(Planned { name, dir, replace });
        }
    }
    if failures.is_empty() {
        Ok(planned)
    } else {
        Err(fail(failures))
    }
}

/// §10.3 and §10.8: the (name, directory) pairs to install.
fn select(
    root: &Path,
    layout: &Layout,
    req: &Request<'_>,
) -> Result<Vec<(String, PathBuf)>, String> {
    match (layout, req.only) {
        (Layout::Zero, _) => Err(
            "the source contains no workflows: no script files (.sh, .js, .jsx, .ts, .tsx) \
             at its root and no top-level directory containing script files"
                .to_string(),
        ),
        (Layout::Single, Some(only)) => Err(format!(
            "-w {only}: the source is a single workflow (it has script files at its root), \
             so there is nothing to select; install it without -w (as '{}')",
            req.single_name
        )),
        (Layout::Single, None) => Ok(vec![(req.single_name.to_string(), root.to_path_buf())]),
        (Layout::Multi(names), Some(only)) => {
            if names.iter().any(|n| n == only) {
                Ok(vec![(only.to_string(), root.join(only))])
            } else {
                Err(format!(
                    "-w {only}: the source has no workflow named '{only}' (workflows: {})",
                    names.join(", ")
                ))
            }
        }
        (Layout::Multi(names), None) => {
            Ok(names.iter().map(|n| (n.clone(), root.join(n))).collect())
        }
    }
}

/// A workflow directory of the source that is a symlink is installed as the
/// directory it points to, which must then be part of the source too.
fn outside_source(root: &Path, dir: &Path, name: &str) -> Option<String> {
    if !fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return None;
    }
    let inside = match (fs::canonicalize(root), fs::canonicalize(dir)) {
        (Ok(root), Ok(dir)) => dir.starts_with(&root) && dir != root,
        _ => false,
    };
    (!inside).then(|| {
        format!(
            "workflow '{name}': it is a symlink to a directory outside the source; \
             a workflow must be self-contained"
        )
    })
}

/// `.loopx` must be a directory, or absent (then install creates it).
fn loopx_dir_problem(loopx_dir: &Path) -> Option<String> {
    match fs::metadata(loopx_dir) {
        Ok(meta) if meta.is_dir() => None,
        Ok(_) => Some(format!(
            "{} exists but is not a directory; move it away so install can create .loopx/",
            loopx_dir.display()
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // A dangling symlink would make creating the directory fail.
            fs::symlink_metadata(loopx_dir).ok().map(|_| {
                format!(
                    "{} is a symlink to nothing; fix or remove it",
                    loopx_dir.display()
                )
            })
        }
        Err(e) => Some(format!("cannot inspect {}: {e}", loopx_dir.display())),
    }
}

/// §10.5 for `dest` = `.loopx/<name>`: Ok(false) when free, Ok(true) when a
/// workflow there is to be replaced (`-y`), Err when the install must refuse.
fn collision(dest: &Path, name: &str, yes: bool) -> Result<bool, String> {
    match fs::symlink_metadata(dest) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        // `.loopx` missing or not a directory is reported on its own.
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Ok(false),
        Err(e) => Err(format!("cannot inspect .loopx/{name}: {e}")),
        // The structural check follows a symlink (§5.1 policy).
        Ok(_) if classify::is_workflow_dir(dest) => {
            if yes {
                Ok(true)
            } else {
                Err(format!(
                    "workflow '{name}' already exists at .loopx/{name}; \
                     use -y to replace it"
                ))
            }
        }
        Ok(meta) => {
            let what = if meta.file_type().is_symlink() {
                "a symlink to something that is not a workflow"
            } else if meta.is_dir() {
                "a directory with no script files"
            } else {
                "a file, not a workflow directory"
            };
            Err(format!(
                ".loopx/{name} already exists and is {what}; -y only replaces workflows, \
                 so move or remove it first"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::testutil::{tree, TempDir};
    use std::os::unix::fs::symlink;

    fn req<'a>(only: Option<&'a str>, yes: bool) -> Request<'a> {
        Request {
            single_name: "repo",
            only,
            yes,
        }
    }

    fn failures(result: Result<Vec<Planned>, Error>) -> Vec<String> {
        match result {
            Err(Error::InstallPreflight { failures }) => failures,
            other => panic!("expected a preflight failure, got {other:?}"),
        }
    }

    #[test]
    fn single_workflow_takes_the_source_name() {
        let tmp = TempDir::new("plan-single");
        let src = tmp.path().join("src");
        tree(&src, &["index.sh", "lib/a.sh"]);
        let plan = preflight(&src, &req(None, false), &tmp.path().join(".loopx")).unwrap();
        assert_eq!(
            plan,
            [Planned {
                name: "repo".to_string(),
                dir: src.clone(),
                replace: false
            }]
        );
        let err = failures(preflight(
            &src,
            &req(Some("a"), false),
            &tmp.path().join(".loopx"),
        ));
        assert!(err[0].contains("single workflow"), "{err:?}");
    }

    #[test]
    fn every_failure_of_every_workflow_is_reported() {
        let tmp = TempDir::new("plan-aggregate");
        let src = tmp.path().join("src");
        let loopx = tmp.path().join(".loopx");
        tree(
            &src,
            &[
                "a/index.sh",
                "b/check.sh",
                "b/check.ts",
                "c/index.sh",
                "d/index.sh",
            ],
        );
        fs::write(
            src.join("d/package.json"),
            r#"{"dependencies":{"loopx":">=999"}}"#,
        )
        .unwrap();
        tree(&loopx, &["c/index.sh"]);
        let err = failures(preflight(&src, &req(None, false), &loopx));
        assert_eq!(err.len(), 3, "{err:#?}");
        assert!(err[0].contains("'check'"));
        assert!(err[1].contains("use -y to replace"));
        assert!(err[2].contains(">=999"));
        // -y accepts the replacement and the mismatch, not the collision in b.
        let err = failures(preflight(&src, &req(None, true), &loopx));
        assert_eq!(err.len(), 1, "{err:#?}");
        // Selecting a valid workflow ignores its invalid sibling (§10.8).
        let plan = preflight(&src, &req(Some("c"), true), &loopx).unwrap();
        assert_eq!(plan.len(), 1);
        assert!(plan[0].replace);
    }

    #[test]
    fn non_workflow_destinations_are_never_replaced() {
        let tmp = TempDir::new("plan-nonworkflow");
        let src = tmp.path().join("src");
        let loopx = tmp.path().join(".loopx");
        tree(
            &src,
            &["a/index.sh", "b/index.sh", "c/index.sh", "d/index.sh"],
        );
        tree(&loopx, &["a/notes.md", "b", "store/x.sh"]);
        symlink(loopx.join("store/x.sh"), loopx.join("c")).unwrap();
        symlink(loopx.join("store"), loopx.join("d")).unwrap();
        let err = failures(preflight(&src, &req(None, true), &loopx));
        assert_eq!(err.len(), 3, "{err:#?}");
        assert!(err[0].contains("a directory with no script files"));
        assert!(err[1].contains("a file"));
        assert!(err[2].contains("a symlink"));
        // d is a symlink to a workflow: replaceable.
        let plan = preflight(&src, &req(Some("d"), true), &loopx).unwrap();
        assert!(plan[0].replace);
    }

    #[test]
    fn unknown_selection_and_zero_workflows() {
        let tmp = TempDir::new("plan-select");
        let src = tmp.path().join("src");
        tree(&src, &["a/index.sh", "b/index.sh", "docs/x.md"]);
        let err = failures(preflight(&src, &req(Some("docs"), false), tmp.path()));
        assert_eq!(
            err,
            ["-w docs: the source has no workflow named 'docs' (workflows: a, b)"]
        );
        let empty = tmp.path().join("empty");
        tree(&empty, &["README.md"]);
        let err = failures(preflight(&empty, &req(None, false), tmp.path()));
        assert!(err[0].contains("no workflows"));
    }

    #[test]
    fn symlinked_workflows_must_point_into_the_source() {
        let tmp = TempDir::new("plan-linked");
        let src = tmp.path().join("src");
        tree(&src, &["real/index.sh"]);
        tree(tmp.path(), &["elsewhere/index.sh"]);
        symlink("real", src.join("alias")).unwrap();
        symlink(tmp.path().join("elsewhere"), src.join("outside")).unwrap();
        let loopx = tmp.path().join(".loopx");
        let err = failures(preflight(&src, &req(None, false), &loopx));
        assert_eq!(err.len(), 1, "{err:#?}");
        assert!(err[0].starts_with("workflow 'outside': it is a symlink"));
        let plan = preflight(&src, &req(Some("alias"), false), &loopx).unwrap();
        assert_eq!(plan[0].dir, src.join("alias"));
    }

    #[test]
    fn a_loopx_file_is_a_failure() {
        let tmp = TempDir::new("plan-loopx-file");
        let src = tmp.path().join("src");
        tree(&src, &["index.sh", ".loopx"]);
        let err = failures(preflight(&src, &req(None, false), &src.join(".loopx")));
        assert!(err[0].contains("not a directory"), "{err:?}");
    }
}
