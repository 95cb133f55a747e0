//! docs/development.md's module map names every file under src/, one line
//! each, so a newcomer finds a concern from the map alone; these tests keep
//! it from going stale as files are added, moved or removed.

use std::path::{Path, PathBuf};

const DOC: &str = "docs/development.md";
const HEADING: &str = "## Module map";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The map: the lines of the section under `HEADING`, up to the next `## `.
fn map_section() -> String {
    let text = std::fs::read_to_string(repo().join(DOC)).expect("docs/development.md is readable");
    let start = text
        .find(HEADING)
        .unwrap_or_else(|| panic!("{DOC} has no '{HEADING}' section"));
    let body = &text[start + HEADING.len()..];
    let end = body.find("\n## ").unwrap_or(body.len());
    body[..end].to_string()
}

/// The paths the map names: each entry line starts with "- `src/...`".
fn mapped_paths(section: &str) -> Vec<String> {
    section
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- `"))
        .filter_map(|l| l.split('`').next())
        .filter(|p| p.starts_with("src/"))
        .map(str::to_string)
        .collect()
}

fn source_files(dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("src/ is readable")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(repo()).expect("under the repository");
            out.push(rel.to_string_lossy().into_owned());
        }
    }
}

#[test]
fn every_file_under_src_is_in_the_module_map() {
    let mapped = mapped_paths(&map_section());
    let mut files = Vec::new();
    source_files(&repo().join("src"), &mut files);
    let missing: Vec<_> = files.iter().filter(|f| !mapped.contains(f)).collect();
    assert!(
        missing.is_empty(),
        "{DOC} ('{HEADING}') does not name these files; add a line for each: {missing:?}"
    );
}

#[test]
fn every_file_the_module_map_names_exists() {
    let gone: Vec<_> = mapped_paths(&map_section())
        .into_iter()
        .filter(|p| !repo().join(p).is_file())
        .collect();
    assert!(
        gone.is_empty(),
        "{DOC} names files that do not exist: {gone:?}"
    );
}

#[test]
fn the_module_map_names_each_file_once() {
    let mut mapped = mapped_paths(&map_section());
    let all = mapped.len();
    mapped.sort();
    mapped.dedup();
    assert_eq!(mapped.len(), all, "{DOC} names a file twice");
}
