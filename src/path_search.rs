//! Finding a program on PATH, as a shell does. Below both runtime.rs (which
//! looks up bash, node, bun and tsx) and self_exe.rs (which looks up a bare
//! argv[0]), so neither has to import the other for it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The first executable `name` on `path`.
pub fn which(name: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

/// A regular file (after symlinks) with an execute bit.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
