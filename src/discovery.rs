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
    /// The `.loopx/` directory itself.
    pub dir: PathBuf,
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

/// The nearest directory above `dir` that has a `.loopx/`: §5.1 never
/// looks there, but someone running loopx from a subdirectory of a project
/// probably meant it (Error::NoLoopxDir says so).
pub fn loopx_dir_above(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .skip(1)
        .find(|a| has_loopx_dir(a))
        .map(Path::to_path_buf)
}

/// JavaScript and TypeScript extensions that are not script extensions
/// (names.rs), with the one that is: files people expect to run.
const IGNORED_EXTENSIONS: [(&str, &str); 4] =
    [("mjs", "js"), ("cjs", "js"), ("mts", "ts"), ("cts", "ts")];

/// `index.mjs` → `index.js`: the name an ignored file would run under.
fn runnable_name(file_name: &str) -> Option<String> {
    let (base, ext) = file_name.rsplit_once('.')?;
    let (_, to) = IGNORED_EXTENSIONS.iter().find(|(from, _)| *from == ext)?;
    (!base.is_empty()).then(|| format!("{base}.{to}"))
}

/// What a directory holds that bears on why it is not a workflow.
#[derive(Debug, Default, PartialEq, Eq)]
struct Contents {
    /// Top-level files with an ignored JS/TS extension, sorted.
    ignored: Vec<String>,
    /// Subdirectories holding script files, sorted.
    script_dirs: Vec<String>,
}

fn contents(dir: &Path) -> Contents {
    let mut c = Contents::default();
    let Ok(entries) = fs::read_dir(dir) else {
        return c;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        match fs::metadata(&path) {
            Ok(m) if m.is_file() && runnable_name(&name).is_some() => c.ignored.push(name),
            Ok(m) if m.is_dir() && script_files(&path).is_ok_and(|f| !f.is_empty()) => {
                c.script_dirs.push(name)
            }
            _ => {}
        }
    }
    c.ignored.sort();
    c.script_dirs.sort();
    c
}

/// `a`, `a and b`, `a, b and 2 more`: at most a few names.
fn few(names: &[String]) -> String {
    let shown: Vec<String> = names.iter().map(|n| shown(n).into_owned()).collect();
    match shown.len() {
        0..=3 => and_list(&shown.iter().map(String::as_str).collect::<Vec<_>>()),
        n => format!("{}, {} and {} more", shown[0], shown[1], n - 2),
    }
}

/// The words for ignored files: `index.mjs is ignored (rename it to
/// index.js: ...)`.
fn ignored_words(ignored: &[String]) -> String {
    let why = ".js and .ts scripts run as ES modules";
    match ignored {
        [one] => format!(
            "{} is ignored (rename it to {}: {why})",
            shown(one),
            shown(&runnable_name(one).unwrap_or_default())
        ),
        many => format!(
            "{} are ignored (rename them to .js or .ts: {why})",
            few(many)
        ),
    }
}

/// Why there is no workflow `name` in `loopx_dir` when something there
/// looks meant as one: a directory without top-level scripts (an
/// `index.mjs`, scripts in `src/`), or a script file directly in `.loopx/`.
/// For the error of a target or goto naming it (§5.1, §7.2).
pub fn why_no_workflow(loopx_dir: &Path, name: &str) -> Option<String> {
    if !crate::names::is_valid_name(name) {
        return None;
    }
    let dir = loopx_dir.join(name);
    if fs::metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Some(not_a_workflow_words(name, &contents(&dir)));
    }
    let file = fs::read_dir(loopx_dir).ok()?.flatten().find_map(|e| {
        let file_name = e.file_name().into_string().ok()?;
        let (base, _) = crate::names::split_script_name(&file_name)?;
        (base == name && fs::metadata(e.path()).is_ok_and(|m| m.is_file())).then_some(file_name)
    })?;
    let ext = file.rsplit_once('.').map_or("sh", |(_, e)| e);
    Some(format!(
        ".loopx/{file} is a file, not a workflow: a workflow is a directory \
         (.loopx/{name}/index.{ext})"
    ))
}

fn not_a_workflow_words(name: &str, c: &Contents) -> String {
    let mut words = format!(
        ".loopx/{name}/ is not a workflow: it has no .sh, .js, .jsx, .ts or .tsx file \
         at its top level"
    );
    if !c.ignored.is_empty() {
        words.push_str("; ");
        words.push_str(&ignored_words(&c.ignored));
    }
    if !c.script_dirs.is_empty() {
        let dirs: Vec<String> = c.script_dirs.iter().map(|d| format!("{d}/")).collect();
        words.push_str(&format!(
            "; scripts in subdirectories ({}) are not run",
            few(&dirs)
        ));
    }
    words
}

/// Why `workflow` has no script `script` when a file looks meant as it:
/// `check.mjs` for `check`.
pub fn why_no_script(workflow: &Workflow, script: &str) -> Option<String> {
    let ignored: Vec<String> = contents(&workflow.dir)
        .ignored
        .into_iter()
        .filter(|f| f.rsplit_once('.').is_some_and(|(base, _)| base == script))
        .collect();
    (!ignored.is_empty()).then(|| ignored_words(&ignored))
}

/// Whether a script file has CRLF line endings, for the hint on a failed
/// bash script. Reads at most the first MiB: enough to see a line end.
pub fn has_crlf(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(1 << 20).read_to_end(&mut head))
        .is_ok_and(|_| head.windows(2).any(|w| w == b"\r\n"))
}

/// Whether a bash script runs a command named `loopx` (at the start of a
/// command, not in a comment, not `$LOOPX_BIN` or a path), for the hint on
/// a script that exited 127. Reads at most the first MiB.
pub fn calls_bare_loopx(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::new();
    if fs::File::open(path)
        .and_then(|f| f.take(1 << 20).read_to_end(&mut head))
        .is_err()
    {
        return false;
    }
    String::from_utf8_lossy(&head).lines().any(runs_loopx)
}

/// Whether one line of bash runs `loopx` as a command.
fn runs_loopx(line: &str) -> bool {
    let code = line.trim_start();
    if code.starts_with('#') {
        return false;
    }
    let bytes = code.as_bytes();
    code.match_indices("loopx").any(|(i, _)| {
        let before = i.checked_sub(1).map(|j| bytes[j]);
        let after = bytes.get(i + 5).copied();
        let starts_command = match before {
            None => true,
            // After ` #` the rest of the line is a comment (quotes aside).
            Some(b) => b" \t;|&(`{".contains(&b) && !code[..i].contains(" #"),
        };
        let ends_word = after.map_or(true, |b| b == b' ' || b == b'\t' || b == b';' || b == b')');
        starts_command && ends_word && !is_argument(&code[..i])
    })
}

/// Whether text before a word makes it an argument rather than a command:
/// the previous word is a plain word (`echo loopx`), not an operator.
fn is_argument(before: &str) -> bool {
    let before = before.trim_end();
    match before.chars().last() {
        None => false,
        Some(c) => {
            !";|&(`{".contains(c)
                && !before.ends_with("then")
                && !before.ends_with("do")
                && !before.ends_with("else")
                && !before.ends_with("exec")
                && !before.ends_with("time")
                && !before.ends_with('!')
        }
    }
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

    let mut d = Discovery {
        dir: loopx_dir.to_path_buf(),
        ..Discovery::default()
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn loopx_by_name_is_found_where_it_is_a_command() {
        for line in [
            "loopx output --stop",
            "  loopx output --result \"$x\"",
            "out=$(loopx json .result <events)",
            "grep x f | loopx json .a",
            "if true; then loopx output --stop; fi",
            "true && loopx output --stop",
        ] {
            assert!(runs_loopx(line), "{line}");
        }
        for line in [
            "\"$LOOPX_BIN\" output --stop",
            "$LOOPX_BIN output --stop",
            "# loopx output --stop",
            "echo 'use loopx here' >&2",
            "npx loopx run w",
            "/usr/local/bin/loopx output --stop",
            "cd loopx-work",
            "x=1 # then loopx",
        ] {
            assert!(!runs_loopx(line), "{line}");
        }
    }

    #[test]
    fn ignored_files_are_named_with_the_name_that_would_run() {
        assert_eq!(runnable_name("index.mjs").as_deref(), Some("index.js"));
        assert_eq!(runnable_name("a.b.cts").as_deref(), Some("a.b.ts"));
        assert_eq!(runnable_name(".mjs"), None);
        assert_eq!(runnable_name("index.json"), None);
        assert_eq!(
            ignored_words(&strings(&["index.mjs"])),
            "index.mjs is ignored (rename it to index.js: .js and .ts scripts run as ES modules)"
        );
        assert_eq!(
            ignored_words(&strings(&["a.cjs", "b.mts", "c.mjs", "d.mjs"])),
            "a.cjs, b.mts and 2 more are ignored (rename them to .js or .ts: \
             .js and .ts scripts run as ES modules)"
        );
    }

    #[test]
    fn a_directory_that_is_not_a_workflow_says_why() {
        let words = |ignored: &[&str], dirs: &[&str]| {
            not_a_workflow_words(
                "ralph",
                &Contents {
                    ignored: strings(ignored),
                    script_dirs: strings(dirs),
                },
            )
        };
        assert_eq!(
            words(&[], &[]),
            ".loopx/ralph/ is not a workflow: it has no .sh, .js, .jsx, .ts or .tsx file at its top level"
        );
        assert_eq!(
            words(&["index.mjs"], &["src"]),
            ".loopx/ralph/ is not a workflow: it has no .sh, .js, .jsx, .ts or .tsx file at its \
             top level; index.mjs is ignored (rename it to index.js: .js and .ts scripts run as \
             ES modules); scripts in subdirectories (src/) are not run"
        );
    }
}
