//! The release tree as scripts/build-release.sh writes it (DESIGN.md
//! "Release artifacts"), for the tests that install loopx or its workflows
//! the way users get them. Include it with
//! `#[path = "util/release.rs"] mod release;` next to `mod util;`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::util::wait_with_output;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The host's release target, the one build-release.sh can build here.
#[cfg(target_arch = "x86_64")]
pub const TARGET: &str = "x86_64-unknown-linux-musl";
#[cfg(target_arch = "aarch64")]
pub const TARGET: &str = "aarch64-unknown-linux-musl";

/// The release tree for the host's target, built once per test binary into
/// `$CARGO_TARGET_TMPDIR/<name>/tree` (with npm's cache, where npm pack
/// keeps its logs, beside it). Call it with one `name` per test binary.
pub fn host_release(name: &str) -> &'static Path {
    static TREE: OnceLock<PathBuf> = OnceLock::new();
    TREE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
        let out = dir.join("tree");
        let _ = std::fs::remove_dir_all(&out);
        let child = Command::new("bash")
            .arg(Path::new(ROOT).join("scripts/build-release.sh"))
            .args(["--target", TARGET, "--out"])
            .arg(&out)
            .env("npm_config_cache", dir.join("npm-cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn build-release.sh");
        wait_with_output(child, Duration::from_secs(900)).success();
        out
    })
}

/// `<tree>/download/v<version>`: where the release's assets are.
pub fn version_dir(tree: &Path) -> PathBuf {
    tree.join(format!("download/v{VERSION}"))
}
