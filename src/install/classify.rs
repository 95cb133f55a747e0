//! Workflow classification (§10.3) and install-time validation (§10.4) of a
//! source root (a clone, or an extracted archive after wrapper stripping).
//!
//! Symlinks are followed as in discovery (§5.1): a symlink to a file with a
//! script extension is a script, a symlink to a directory is a directory, and
//! names come from the link, not its target. A broken symlink is neither.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::discovery::{scan_workflow, script_files};
use crate::install::archive::check_symlink_target;
use crate::names::is_valid_name;

/// What a source root holds (§10.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// The root has script files: the whole root is one workflow.
    Single,
    /// No root-level scripts; these top-level directories (sorted) each hold
    /// at least one top-level script and are workflows.
    Multi(Vec<String>),
    /// Nothing installable.
    Zero,
}

/// Classifies `root` by §10.3: root-level script files win unconditionally;
/// otherwise each top-level directory with a top-level script is a workflow,
/// and directories without one are skipped silently.
pub fn layout(root: &Path) -> Result<Layout, String> {
    let unreadable = |path: &Path, e: io::Error| format!("cannot read {}: {e}", path.display());
    if !script_files(root)
        .map_err(|e| unreadable(root, e))?
        .is_empty()
    {
        return Ok(Layout::Single);
    }
    let mut workflows = Vec::new();
    for entry in fs::read_dir(root).map_err(|e| unreadable(root, e))? {
        let entry = entry.map_err(|e| unreadable(root, e))?;
        let path = entry.path();
        if !fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        if !script_files(&path)
            .map_err(|e| unreadable(&path, e))?
            .is_empty()
        {
            workflows.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    workflows.sort();
    Ok(if workflows.is_empty() {
        Layout::Zero
    } else {
        Layout::Multi(workflows)
    })
}

/// "A workflow by structure" (§2.1, §10.5): a directory (symlinks followed)
/// holding at least one top-level file with a supported script extension.
/// Unreadable directories are not workflows.
pub fn is_workflow_dir(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_dir())
        && script_files(path).is_ok_and(|files| !files.is_empty())
}

/// Every §10.4 problem of the workflow in `dir`, to be installed as `name`:
/// an invalid workflow name, invalid script names, and script names shared by
/// several files (the same checks and wording as discovery, §5.2, §5.3). A
/// missing `index` script is allowed. Empty means valid.
pub fn validate_workflow(dir: &Path, name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if !is_valid_name(name) {
        problems.push(format!(
            "invalid workflow name '{name}' (workflow names match [a-zA-Z0-9_][a-zA-Z0-9_-]*)"
        ));
    }
    if let Err(e) = scan_workflow(name, dir, &mut problems) {
        problems.push(format!("cannot read {}: {e}", dir.display()));
    }
    problems
}

/// The symlinks under `dir` that could lead outside it once installed, as
/// (path relative to `dir`, link target). A workflow must be
/// self-contained (§10.3): its links may only point within its own tree, by
/// the same rule archive extraction applies (relative, leading `..`s that
/// stay inside, no `..` after a name). Symlinks are not followed, so the walk
/// visits each directory once.
pub fn escaping_symlinks(dir: &Path) -> io::Result<Vec<(PathBuf, PathBuf)>> {
    let mut found = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let mut entries: Vec<_> = fs::read_dir(dir.join(&rel))?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let child = rel.join(entry.file_name());
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(child);
            } else if kind.is_symlink() {
                let target = fs::read_link(entry.path())?;
                if check_symlink_target(&child, &target).is_err() {
                    found.push((child, target));
                }
            }
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::testutil::{tree, TempDir};
    use std::os::unix::fs::symlink;

    fn multi(names: &[&str]) -> Layout {
        Layout::Multi(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn root_scripts_make_a_single_workflow_whatever_the_subdirectories_hold() {
        let tmp = TempDir::new("classify-single");
        tree(
            tmp.path(),
            &[
                "index.ts",
                "package.json",
                "lib/helpers.ts",
                "other/index.sh",
            ],
        );
        assert_eq!(layout(tmp.path()), Ok(Layout::Single));
        // Any supported extension counts, not just `index`.
        let tmp = TempDir::new("classify-single-tsx");
        tree(tmp.path(), &["eslint.config.js", "flow/index.sh"]);
        assert_eq!(layout(tmp.path()), Ok(Layout::Single));
    }

    #[test]
    fn directories_with_top_level_scripts_make_a_multi_workflow_source() {
        let tmp = TempDir::new("classify-multi");
        tree(
            tmp.path(),
            &[
                "README.md",
                "LICENSE",
                "ralph/index.sh",
                "ralph/check.sh",
                "pipeline/setup.tsx",
                "docs/guide.md",
                "nested/deeper/index.sh",
                "mjs-only/index.mjs",
                "dotfile/.sh",
            ],
        );
        fs::create_dir(tmp.path().join("empty")).unwrap();
        assert_eq!(layout(tmp.path()), Ok(multi(&["pipeline", "ralph"])));
    }

    #[test]
    fn nothing_installable_is_zero() {
        let tmp = TempDir::new("classify-zero");
        assert_eq!(layout(tmp.path()), Ok(Layout::Zero));
        tree(
            tmp.path(),
            &["README.md", "docs/a.md", "x/y/z.sh", "index.cjs"],
        );
        // A directory named like a script is not a script file.
        fs::create_dir(tmp.path().join("index.sh")).unwrap();
        assert_eq!(layout(tmp.path()), Ok(Layout::Zero));
    }

    #[test]
    fn symlinks_are_followed_and_named_by_the_link() {
        let tmp = TempDir::new("classify-links");
        tree(tmp.path(), &["store/real-flow/main.sh", "store/script.sh"]);
        let src = tmp.path().join("src");
        fs::create_dir(&src).unwrap();
        symlink(tmp.path().join("store/real-flow"), src.join("linked")).unwrap();
        symlink(tmp.path().join("missing"), src.join("broken")).unwrap();
        symlink(tmp.path().join("missing.sh"), src.join("broken.sh")).unwrap();
        assert_eq!(layout(&src), Ok(multi(&["linked"])));

        symlink(tmp.path().join("store/script.sh"), src.join("run.sh")).unwrap();
        assert_eq!(layout(&src), Ok(Layout::Single));
    }

    #[test]
    fn unreadable_root_is_an_error() {
        let tmp = TempDir::new("classify-missing");
        let err = layout(&tmp.path().join("nope")).unwrap_err();
        assert!(err.contains("cannot read"), "{err}");
    }

    #[test]
    fn workflow_by_structure() {
        let tmp = TempDir::new("classify-structure");
        tree(tmp.path(), &["flow/a.sh", "data/readme.md", "file.sh"]);
        symlink(tmp.path().join("flow"), tmp.path().join("link")).unwrap();
        assert!(is_workflow_dir(&tmp.path().join("flow")));
        assert!(is_workflow_dir(&tmp.path().join("link")));
        assert!(!is_workflow_dir(&tmp.path().join("data")));
        assert!(!is_workflow_dir(&tmp.path().join("file.sh")));
        assert!(!is_workflow_dir(&tmp.path().join("absent")));
    }

    #[test]
    fn a_valid_workflow_has_no_problems_even_without_index() {
        let tmp = TempDir::new("validate-ok");
        tree(
            tmp.path(),
            &[
                "setup.sh",
                "check-ready.ts",
                "_x.jsx",
                "lib/index.sh",
                "lib/index.ts",
                "bad name.md",
            ],
        );
        assert_eq!(
            validate_workflow(tmp.path(), "my-flow_2"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn reports_every_problem() {
        let tmp = TempDir::new("validate-bad");
        tree(
            tmp.path(),
            &[
                "index.sh",
                "check.sh",
                "check.ts",
                "check.tsx",
                "my script.sh",
                "a.b.js",
                "-dash.sh",
                "ok.sh",
                "ok.md",
            ],
        );
        let problems = validate_workflow(tmp.path(), "bad:name");
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(problems[0].contains("invalid workflow name 'bad:name'"));
        let invalid: Vec<_> = problems
            .iter()
            .filter(|p| p.contains("has an invalid name"))
            .collect();
        assert_eq!(invalid.len(), 3, "{problems:#?}");
        assert!(invalid.iter().any(|p| p.contains("'my script.sh'")));
        assert!(invalid.iter().any(|p| p.contains("'a.b.js'")));
        assert!(invalid.iter().any(|p| p.contains("'-dash.sh'")));
        assert_eq!(
            problems.last().unwrap(),
            "name collision in workflow 'bad:name': script 'check' is defined by \
             check.sh, check.ts and check.tsx"
        );
    }

    #[test]
    fn collisions_count_symlinked_scripts() {
        let tmp = TempDir::new("validate-links");
        tree(tmp.path(), &["flow/check.sh", "elsewhere/check.ts"]);
        symlink(
            tmp.path().join("elsewhere/check.ts"),
            tmp.path().join("flow/check.ts"),
        )
        .unwrap();
        let problems = validate_workflow(&tmp.path().join("flow"), "flow");
        assert_eq!(
            problems,
            [
                "name collision in workflow 'flow': script 'check' is defined by \
                 check.sh and check.ts"
            ]
        );
    }

    #[test]
    fn symlinks_must_stay_inside_the_workflow() {
        let tmp = TempDir::new("escaping-links");
        let flow = tmp.path().join("flow");
        tree(&flow, &["index.sh", "lib/helper.sh", "lib/deep/x.md"]);
        symlink("lib/helper.sh", flow.join("ok.sh")).unwrap();
        symlink("../helper.sh", flow.join("lib/deep/up")).unwrap();
        symlink("../shared/run.sh", flow.join("run.sh")).unwrap();
        symlink("/etc/passwd", flow.join("lib/abs")).unwrap();
        symlink("deep/../../../x", flow.join("lib/mid")).unwrap();
        let found = escaping_symlinks(&flow).unwrap();
        let paths: Vec<_> = found.iter().map(|(p, _)| p.to_str().unwrap()).collect();
        assert_eq!(paths, ["lib/abs", "lib/mid", "run.sh"]);
        assert_eq!(found[2].1, Path::new("../shared/run.sh"));
    }

    #[test]
    fn unreadable_workflow_is_a_problem() {
        let tmp = TempDir::new("validate-missing");
        let problems = validate_workflow(&tmp.path().join("gone"), "gone");
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("cannot read"));
    }
}
