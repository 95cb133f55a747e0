//! The npm package's script-side files (helpers, module hooks, Bun preload),
//! embedded in the binary for standalone installs (DESIGN.md "JS/TS runtime",
//! §3.3): a loopx installed without npm still makes `import "loopx"` work.
//!
//! They are written once per version into
//! `${XDG_CACHE_HOME:-~/.cache}/loopx/<version>/js/`, each file atomically
//! (temp file + rename), and checked byte for byte whenever a run first
//! reaches a JS/TS script, so a damaged or stale copy is rewritten.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::state_file;

/// The package.json beside the helpers: the version, as lib/native.js
/// reads it to pick a release. index.js and api.js are ESM `.js` files:
/// this makes Node read them as modules, as the npm package's own
/// package.json does.
const PACKAGE_JSON: &str = concat!(
    "{ \"name\": \"loopx\", \"version\": \"",
    env!("CARGO_PKG_VERSION"),
    "\", \"type\": \"module\" }\n"
);

/// One embedded file, as build.rs deflated it from dist/npm.
macro_rules! deflated {
    ($rel:literal, $file:literal) => {
        (
            $rel,
            include_bytes!(concat!(env!("OUT_DIR"), "/", $file, ".deflate")) as &[u8],
        )
    };
}

/// Relative path and deflated content of every file a script may load but
/// package.json. Deflated (build.rs) because the static binary has a size
/// budget; inflated only when a run first reaches a JS/TS script.
const DEFLATED: &[(&str, &[u8])] = &[
    // output() and input(), run() and runPromise().
    deflated!("index.js", "index.js"),
    // run()/runPromise() (§9), loaded by index.js only when called.
    deflated!("api.js", "api.js"),
    deflated!("lib/native.js", "lib_native.js"),
    deflated!("lib/ustar.js", "lib_ustar.js"),
    // The hooks (and on Node >= 22.15 the TypeScript transpile cache).
    deflated!("loader/register.mjs", "loader_register.mjs"),
    // Node < 22.15: the hooks on Node's hooks thread.
    deflated!("loader/hooks.mjs", "loader_hooks.mjs"),
    deflated!("loader/bun-preload.js", "loader_bun-preload.js"),
    deflated!("loader/tsconfig.json", "loader_tsconfig.json"),
];

/// Every file a script may load, with its content.
pub fn files() -> io::Result<Vec<(&'static str, Vec<u8>)>> {
    let mut all = vec![("package.json", PACKAGE_JSON.as_bytes().to_vec())];
    for (rel, deflated) in DEFLATED {
        let mut content = Vec::new();
        flate2::read::DeflateDecoder::new(*deflated).read_to_end(&mut content)?;
        all.push((rel, content));
    }
    Ok(all)
}

/// `${XDG_CACHE_HOME:-$HOME/.cache}/loopx/<version>/js`. A relative
/// XDG_CACHE_HOME is invalid per the XDG spec and ignored (as lib/native.js
/// does for the downloaded binary, which lives beside this directory).
pub fn cache_dir(xdg_cache_home: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    let base = match xdg_cache_home {
        Some(x) if x.is_absolute() => x.to_path_buf(),
        _ => home.filter(|h| !h.as_os_str().is_empty())?.join(".cache"),
    };
    Some(
        base.join("loopx")
            .join(env!("CARGO_PKG_VERSION"))
            .join("js"),
    )
}

/// Makes sure `dir` holds exactly the embedded files; returns `dir`.
pub fn ensure(dir: &Path) -> Result<(), Error> {
    let fail = |err: io::Error| Error::HelperCache {
        dir: dir.to_path_buf(),
        err,
    };
    for (rel, content) in files().map_err(fail)? {
        let content = content.as_slice();
        let path = dir.join(rel);
        let parent = path.parent().unwrap_or(dir);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(fail)?;
        trusted_dirs(dir, parent).map_err(fail)?;
        // Only a regular file of the user's counts as the helper: another
        // user's copy, even with the right bytes, could change after this
        // check (DESIGN.md "Beyond the spec": state files).
        let have = state_file::read(&path, content.len() as u64);
        if have.is_ok_and(|have| have == *content) {
            continue;
        }
        write_atomically(&path, content).map_err(fail)?;
    }
    Ok(())
}

/// Checks every directory from `loopx/` (two above `dir`, when the path has
/// cache_dir's shape) down to `parent`: each the user's, and writable by no
/// one else (state_file::unwritable_by_others). Whoever could write one
/// could swap a helper, code that runs, after `ensure` checked it.
fn trusted_dirs(dir: &Path, parent: &Path) -> io::Result<()> {
    let top = dir
        .ancestors()
        .nth(2)
        .filter(|d| d.file_name() == Some(std::ffi::OsStr::new("loopx")))
        .unwrap_or(dir);
    for d in parent.ancestors().take_while(|d| d.starts_with(top)) {
        if let Err(problem) = state_file::unwritable_by_others(d) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{}: {problem}", d.display()),
            ));
        }
    }
    Ok(())
}

/// Writes a sibling temp file and renames it over `path`, so a concurrent
/// loopx (or a crash) never leaves a half-written helper behind.
fn write_atomically(path: &Path, content: &[u8]) -> io::Result<()> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = fs::write(&tmp, content).and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("loopx-assets-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn cache_dir_prefers_an_absolute_xdg_cache_home() {
        let v = env!("CARGO_PKG_VERSION");
        assert_eq!(
            cache_dir(Some(Path::new("/x")), Some(Path::new("/h"))),
            Some(PathBuf::from(format!("/x/loopx/{v}/js")))
        );
        assert_eq!(
            cache_dir(Some(Path::new("rel")), Some(Path::new("/h"))),
            Some(PathBuf::from(format!("/h/.cache/loopx/{v}/js")))
        );
        assert_eq!(cache_dir(None, None), None);
    }

    #[test]
    fn ensure_writes_every_file_and_repairs_a_damaged_one() {
        let d = temp("ensure");
        ensure(&d).expect("first write");
        let files = files().expect("inflate");
        for (rel, content) in &files {
            assert_eq!(fs::read(d.join(rel)).expect("read"), *content, "{rel}");
        }
        fs::write(d.join("index.js"), "corrupt").expect("write");
        fs::remove_file(d.join("loader/hooks.mjs")).expect("rm");
        ensure(&d).expect("repair");
        for (rel, content) in &files {
            assert_eq!(fs::read(d.join(rel)).expect("read"), *content, "{rel}");
        }
        // No temp files are left behind.
        let stray: Vec<_> = fs::read_dir(&d)
            .expect("ls")
            .chain(fs::read_dir(d.join("loader")).expect("ls"))
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(stray.is_empty(), "{stray:?}");
        let _ = fs::remove_dir_all(&d);
    }

    /// Every file an embedded file refers to (`from "./x"`, `new URL("../x",
    /// import.meta.url)`) is embedded too: index.js may grow (run() and
    /// runPromise()), and a file it needs but the cache lacks would break
    /// `import "loopx"` in standalone installs only.
    #[test]
    fn embedded_files_refer_only_to_embedded_files() {
        let mut checked = 0;
        let files = files().expect("inflate");
        for (rel, content) in &files {
            let text = std::str::from_utf8(content).expect("utf-8");
            for marker in ["from \"", "from '", "new URL(\"", "import(\""] {
                for part in text.split(marker).skip(1) {
                    let quote = marker.chars().last().unwrap_or('"');
                    let target = part.split(quote).next().unwrap_or("");
                    // A query (register.mjs?hooks-thread) names the same file.
                    let target = target.split(['?', '#']).next().unwrap_or("");
                    if !target.starts_with("./") && !target.starts_with("../") {
                        continue;
                    }
                    let mut full: Vec<&str> = rel.split('/').collect();
                    full.pop();
                    for seg in target.split('/') {
                        match seg {
                            "." => {}
                            ".." => {
                                full.pop();
                            }
                            s => full.push(s),
                        }
                    }
                    let full = full.join("/");
                    assert!(
                        files.iter().any(|(f, _)| *f == full),
                        "{rel} refers to {target} ({full}), which is not embedded"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 4, "found only {checked} references");
    }
}
