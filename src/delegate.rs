//! Project-root delegation (§3.2): a project that pins its own loopx gets
//! that version for the whole session. Decided before any argument parsing,
//! from the invocation cwd only (no ancestor search).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::package_json::{self, PackageJson};

/// What to do about a local loopx.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Run this binary, optionally after printing a warning.
    Stay(Option<String>),
    /// Hand over to the project's `node_modules/.bin/loopx`.
    Delegate(PathBuf),
}

/// §3.2 "Resolution order" and "Project-root package.json failure modes".
pub fn decide(root: &Path) -> Decision {
    let pkg = match package_json::read(&root.join("package.json")) {
        PackageJson::Missing => return Decision::Stay(None),
        PackageJson::Unreadable(e) => {
            return Decision::Stay(Some(format!(
                "cannot read package.json ({e}); not looking for a project-local loopx"
            )))
        }
        PackageJson::InvalidJson => {
            return Decision::Stay(Some(
                "package.json is not valid JSON; not looking for a project-local loopx".into(),
            ))
        }
        PackageJson::Parsed(v) => v,
    };
    let declared = ["dependencies", "devDependencies", "optionalDependencies"]
        .iter()
        .any(|field| package_json::dependency(&pkg, field, "loopx").is_some());
    if !declared {
        // An undeclared node_modules/.bin/loopx is never used.
        return Decision::Stay(None);
    }
    let local = root.join("node_modules").join(".bin").join("loopx");
    if local.is_file() {
        Decision::Delegate(local)
    } else {
        Decision::Stay(Some(format!(
            "package.json declares loopx but {} does not exist (run `npm install`?); \
             using this loopx instead",
            Path::new("node_modules/.bin/loopx").display()
        )))
    }
}

/// Delegates when §3.2 says so, replacing this process with the local loopx;
/// returns only when this binary should go on. `LOOPX_DELEGATED` — set, even
/// to an empty value — marks a process that was already delegated to.
pub fn maybe_delegate(args: &[OsString]) {
    if std::env::var_os("LOOPX_DELEGATED").is_some() {
        return;
    }
    // The JS API's machine mode (api.rs) is started by the imported package
    // for its own binary: that package already is the project's version.
    if args.first().is_some_and(|a| a == crate::api::MODE) {
        return;
    }
    // `"$LOOPX_BIN" output` from a script: LOOPX_BIN is the run's binary,
    // chosen after delegation (§3.4, §8.3), and the script's cwd is its
    // workflow directory, whose package.json declares the workflow's loopx
    // range (§3.2), not a project to hand over to.
    if invoked_as_loopx_bin() {
        return;
    }
    let Ok(root) = std::env::current_dir() else {
        return;
    };
    match decide(&root) {
        Decision::Stay(None) => {}
        Decision::Stay(Some(warning)) => crate::messages::warn(&warning),
        Decision::Delegate(local) => {
            use std::os::unix::process::CommandExt;
            // exec: the local loopx becomes this process, so signals, stdio
            // and the exit status are its own with nothing in between.
            // LOOPX_PACKAGE_DIR named this version's package (set by its npm
            // shim): scripts must get the local version's helpers (§3.3),
            // which its own shim names again, or its binary carries.
            // §3.2/§8.3: LOOPX_BIN is the realpath of the effective binary,
            // the local one, from the moment it takes over.
            let effective = std::fs::canonicalize(&local).unwrap_or_else(|_| local.clone());
            let err = std::process::Command::new(&local)
                .args(args)
                .env("LOOPX_DELEGATED", "1")
                .env("LOOPX_BIN", effective)
                .env_remove("LOOPX_PACKAGE_DIR")
                .exec();
            crate::messages::warn(&format!(
                "cannot start the project-local loopx {}: {err}; using this loopx instead",
                local.display()
            ));
        }
    }
}

/// Whether this process is the binary `LOOPX_BIN` names (a realpath, as is
/// the running executable's path).
fn invoked_as_loopx_bin() -> bool {
    let Some(bin) = std::env::var_os("LOOPX_BIN") else {
        return false;
    };
    std::env::current_exe().is_ok_and(|exe| exe.as_os_str() == bin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
    fn dir(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("loopx-delegate-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(d.join("node_modules/.bin")).expect("mkdir");
        Dir(d)
    }

    #[test]
    fn every_dependency_field_counts_for_delegation() {
        for field in ["dependencies", "devDependencies", "optionalDependencies"] {
            let d = dir(field);
            fs::write(
                d.0.join("package.json"),
                format!(r#"{{"{field}":{{"loopx":"1"}}}}"#),
            )
            .expect("write");
            fs::write(d.0.join("node_modules/.bin/loopx"), "").expect("write");
            assert_eq!(
                decide(&d.0),
                Decision::Delegate(d.0.join("node_modules/.bin/loopx"))
            );
        }
    }

    #[test]
    fn failure_modes() {
        let d = dir("modes");
        assert_eq!(decide(&d.0), Decision::Stay(None));
        fs::write(d.0.join("node_modules/.bin/loopx"), "").expect("write");
        fs::write(
            d.0.join("package.json"),
            r#"{"peerDependencies":{"loopx":"1"}}"#,
        )
        .expect("write");
        assert_eq!(decide(&d.0), Decision::Stay(None));
        fs::write(d.0.join("package.json"), "{not json").expect("write");
        assert!(matches!(decide(&d.0), Decision::Stay(Some(w)) if w.contains("not valid JSON")));
        fs::remove_file(d.0.join("node_modules/.bin/loopx")).expect("rm");
        fs::write(
            d.0.join("package.json"),
            r#"{"devDependencies":{"loopx":"1"}}"#,
        )
        .expect("write");
        assert!(matches!(decide(&d.0), Decision::Stay(Some(w)) if w.contains("npm install")));
    }
}
