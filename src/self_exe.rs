//! Where the running loopx binary is: `LOOPX_BIN` (§3.4), the realpath of
//! the effective binary.
//!
//! The kernel's answer (`/proc/self/exe` on Linux) is the reliable one, but
//! chroots and sandboxes often have no `/proc`. Then argv[0] is the next
//! best witness: a path with a slash names the binary relative to the
//! working directory (the shell passes it as typed), a bare name is what the
//! shell found on PATH.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The realpath of the running binary, or an error naming every way tried.
pub fn locate() -> Result<PathBuf, Error> {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let cwd = std::env::current_dir();
    locate_with(
        std::env::current_exe(),
        &argv0,
        cwd.as_deref().ok(),
        std::env::var_os("PATH").as_deref(),
    )
}

/// [`locate`] with its inputs given: what `current_exe` said, argv[0], the
/// working directory and PATH.
fn locate_with(
    current_exe: io::Result<PathBuf>,
    argv0: &OsStr,
    cwd: Option<&Path>,
    path: Option<&OsStr>,
) -> Result<PathBuf, Error> {
    let mut tried = Vec::new();
    let reported = match current_exe {
        Ok(exe) => match std::fs::canonicalize(&exe) {
            Ok(real) => return Ok(real),
            // e.g. "/usr/bin/loopx (deleted)" after an upgrade replaced it.
            Err(e) => {
                tried.push(format!("the kernel reports {}, but: {e}", exe.display()));
                Some(exe)
            }
        },
        Err(e) => {
            tried.push(format!("the kernel did not say ({e})"));
            None
        }
    };
    match from_argv0(argv0, cwd, path) {
        Ok(real) => return Ok(real),
        Err(why) => tried.push(why),
    }
    // A path the kernel gave is still better than nothing.
    reported.ok_or(Error::NoOwnBinary { tried })
}

/// The binary argv[0] names: resolved against `cwd` when it holds a slash,
/// searched on `path` otherwise, as the shell that started loopx did.
fn from_argv0(argv0: &OsStr, cwd: Option<&Path>, path: Option<&OsStr>) -> Result<PathBuf, String> {
    let shown = argv0.to_string_lossy();
    if argv0.is_empty() {
        return Err("argv[0] is empty".to_string());
    }
    let candidate = if argv0.as_encoded_bytes().contains(&b'/') {
        let given = Path::new(argv0);
        match (given.is_absolute(), cwd) {
            (true, _) => given.to_path_buf(),
            (false, Some(cwd)) => cwd.join(given),
            (false, None) => {
                return Err(format!(
                    "argv[0] '{shown}' is relative and the working directory is unknown"
                ))
            }
        }
    } else {
        let found = path.and_then(|p| crate::path_search::which(&shown, Some(p)));
        found.ok_or_else(|| {
            let on = path.map_or_else(|| OsString::from("(unset)"), OsStr::to_os_string);
            format!(
                "argv[0] '{shown}' was not found on PATH {}",
                on.to_string_lossy()
            )
        })?
    };
    match std::fs::canonicalize(&candidate) {
        Ok(real) if real.is_file() => Ok(real),
        Ok(real) => Err(format!(
            "argv[0] '{shown}' leads to {}, not a file",
            real.display()
        )),
        Err(e) => Err(format!("argv[0] '{shown}' ({}): {e}", candidate.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::testutil::TempDir;
    use std::os::unix::fs::PermissionsExt;

    fn no_proc() -> io::Result<PathBuf> {
        Err(io::Error::from(io::ErrorKind::NotFound))
    }

    fn exe(dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn the_kernels_answer_wins_and_is_resolved() {
        let tmp = TempDir::new("self-exe-kernel");
        let real = exe(tmp.path(), "loopx");
        std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();
        let got = locate_with(Ok(tmp.path().join("link")), OsStr::new("other"), None, None);
        assert_eq!(got.unwrap(), std::fs::canonicalize(&real).unwrap());
    }

    #[test]
    fn without_proc_argv0_with_a_slash_is_resolved_against_the_working_directory() {
        let tmp = TempDir::new("self-exe-rel");
        std::fs::create_dir(tmp.path().join("bin")).unwrap();
        let real = exe(&tmp.path().join("bin"), "loopx");
        let got = locate_with(no_proc(), OsStr::new("./bin/loopx"), Some(tmp.path()), None);
        assert_eq!(got.unwrap(), std::fs::canonicalize(&real).unwrap());
        let abs = locate_with(no_proc(), real.as_os_str(), None, None);
        assert_eq!(abs.unwrap(), std::fs::canonicalize(&real).unwrap());
    }

    #[test]
    fn without_proc_a_bare_argv0_is_searched_on_path() {
        let tmp = TempDir::new("self-exe-path");
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let real = exe(&b, "loopx");
        let path = std::env::join_paths([&a, &b]).unwrap();
        let got = locate_with(no_proc(), OsStr::new("loopx"), None, Some(&path));
        assert_eq!(got.unwrap(), std::fs::canonicalize(&real).unwrap());
    }

    #[test]
    fn failure_names_every_way_tried() {
        let tmp = TempDir::new("self-exe-fail");
        let path = tmp.path().as_os_str().to_os_string();
        let err = locate_with(no_proc(), OsStr::new("loopx"), None, Some(&path)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("the kernel did not say ("), "{msg}");
        assert!(
            msg.contains("argv[0] 'loopx' was not found on PATH"),
            "{msg}"
        );
        let err = locate_with(no_proc(), OsStr::new("./gone"), Some(tmp.path()), None);
        let msg = err.unwrap_err().to_string();
        assert!(msg.contains("argv[0] './gone' ("), "{msg}");
    }

    #[test]
    fn a_deleted_binary_is_still_reported_when_argv0_fails_too() {
        let reported = PathBuf::from("/nonexistent/loopx (deleted)");
        let got = locate_with(Ok(reported.clone()), OsStr::new(""), None, None);
        assert_eq!(got.unwrap(), reported);
    }
}
