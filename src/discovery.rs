//! Workflow and script discovery in `.loopx/` (§2.1, §5). Discovery reports
//! every problem it sees instead of stopping at the first, so `run` can refuse
//! with the full list and `run -h` can show them all as warnings (§5.4).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::names::{is_valid_name, split_script_name};
use crate::text::shown;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bash,
    /// `.js`, `.jsx`, `.ts`, `.tsx` (§6.3).
    Js,
}

#[derive(Debug, Clone)]
pub struct Script {
    pub name: String,
    /// The path through `.loopx/<workflow>/<file>` as named by the link when
    /// symlinks are involved (§5.1: names come from the link, not its target).
    pub path: PathBuf,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub struct Workflow {
    pub name: String,
    pub dir: PathBuf,
    /// By script name. On a same-base-name collision the first file in name
    /// order is kept and the collision is recorded as a problem.
    pub scripts: BTreeMap<String, Script>,
}

impl Workflow {
    pub fn script_names(&self) -> Vec<String> {
        self.scripts.keys().cloned().collect()
    }
}

/// Everything found under `.loopx/`, cached for the whole loop (§5.1).
#[derive(Debug, Default)]
pub struct Discovery {
    pub workflows: BTreeMap<String, Workflow>,
    /// Validation problems across all workflows (§5.2, §5.3), in a stable order.
    pub problems: Vec<String>,
}

impl Discovery {
    pub fn workflow_names(&self) -> Vec<String> {
        self.workflows.keys().cloned().collect()
    }
}

/// The `.loopx/` directory of a project root (§5.1: never an ancestor's).
pub fn loopx_dir(project_root: &Path) -> PathBuf {
    project_root.join(".loopx")
}

/// Whether `.loopx/` exists as a directory (following a symlink).
pub fn has_loopx_dir(project_root: &Path) -> bool {
    fs::metadata(loopx_dir(project_root)).is_ok_and(|m| m.is_dir())
}

/// The supported script files directly inside `dir`, as (file name, path,
/// base name, extension), sorted by file name. Symlinks are followed; entries
/// that are not regular files after following (directories, broken links,
/// fifos) are not scripts (§2.1).
pub fn script_files(dir: &Path) -> io::Result<Vec<ScriptFile>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let file_name = entry.file_name();
        let path = entry.path();
        let Some(name) = file_name.to_str() else {
            // A non-UTF-8 name cannot be a valid script name; if it carries a
            // script extension it is reported, otherwise ignored like any file.
            let lossy = file_name.to_string_lossy().into_owned();
            if split_script_name(&lossy).is_some() && is_file(&path) {
                found.push(ScriptFile {
                    file_name: lossy.clone(),
                    base: lossy,
                    ext: String::new(),
                    path,
                    utf8: false,
                });
            }
            continue;
        };
        let Some((base, ext)) = split_script_name(name) else {
            continue;
        };
        if !is_file(&path) {
            continue;
        }
        found.push(ScriptFile {
            file_name: name.to_string(),
            base: base.to_string(),
            ext: ext.to_string(),
            path,
            utf8: true,
        });
    }
    found.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    Ok(found)
}

#[derive(Debug, Clone)]
pub struct ScriptFile {
    pub file_name: String,
    pub base: String,
    pub ext: String,
    pub path: PathBuf,
    utf8: bool,
}

fn is_file(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[&str]) -> String {
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => items.concat(),
    }
}

/// Scans one workflow directory, appending its problems to `problems`.
pub fn scan_workflow(name: &str, dir: &Path, problems: &mut Vec<String>) -> io::Result<Workflow> {
    let files = script_files(dir)?;
    let mut scripts: BTreeMap<String, Script> = BTreeMap::new();
    let mut by_base: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for f in &files {
        by_base.entry(&f.base).or_default().push(&f.file_name);
        if !f.utf8 || !is_valid_name(&f.base) {
            problems.push(format!(
                "workflow '{}': script file '{}' has an invalid name \
                 (script names match [a-zA-Z0-9_][a-zA-Z0-9_-]*)",
                shown(name),
                shown(&f.file_name)
            ));
        }
        let kind = if f.ext == "sh" { Kind::Bash } else { Kind::Js };
        scripts.entry(f.base.clone()).or_insert_with(|| Script {
            name: f.base.clone(),
            path: f.path.clone(),
            kind,
        });
    }
    for (base, names) in by_base {
        if names.len() > 1 {
            problems.push(format!(
                "name collision in workflow '{}': script '{}' is defined by {}",
                shown(name),
                shown(base),
                shown(&and_list(&names))
            ));
        }
    }
    Ok(Workflow {
        name: name.to_string(),
        dir: dir.to_path_buf(),
        scripts,
    })
}

/// Discovers every workflow under `loopx_dir` (§5.1). Fails only when
/// `.loopx/` itself cannot be listed; problems inside it are collected.
pub fn discover(loopx_dir: &Path) -> io::Result<Discovery> {
    let mut entries: Vec<(String, PathBuf)> = Vec::new();
    for entry in fs::read_dir(loopx_dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        entries.push((name, entry.path()));
    }
    entries.sort();

    let mut d = Discovery::default();
    for (name, path) in entries {
        // Only directories are workflow candidates; loose files in `.loopx/`
        // are never discovered (§5.1). Symlinks are followed.
        if !fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let mut problems = Vec::new();
        let workflow = match scan_workflow(&name, &path, &mut problems) {
            Ok(w) => w,
            Err(err) => {
                d.problems.push(format!(
                    "cannot read workflow directory .loopx/{}: {err}",
                    shown(&name)
                ));
                continue;
            }
        };
        if workflow.scripts.is_empty() {
            // Not a workflow: no top-level script files (§2.1). No warning.
            continue;
        }
        if !is_valid_name(&name) {
            d.problems.push(format!(
                "workflow directory '{}' has an invalid name \
                 (workflow names match [a-zA-Z0-9_][a-zA-Z0-9_-]*)",
                shown(&name)
            ));
        }
        d.problems.append(&mut problems);
        d.workflows.insert(name, workflow);
    }
    Ok(d)
}
