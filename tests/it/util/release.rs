//! The release tree as scripts/build-release.sh writes it (DESIGN.md
//! "Release artifacts"), for the tests that install loopx or its workflows
//! the way users get them, built once per test run and shared.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::util::Run;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The host's release target, the one build-release.sh can build here.
#[cfg(target_arch = "x86_64")]
pub const TARGET: &str = "x86_64-unknown-linux-musl";
#[cfg(target_arch = "aarch64")]
pub const TARGET: &str = "aarch64-unknown-linux-musl";

/// A release tree and what build-release.sh printed building it.
pub struct Tree {
    pub out: PathBuf,
    pub stdout: String,
}

/// The release tree for the host's target, built once per test run into
/// `$CARGO_TARGET_TMPDIR/release/tree` (with npm's cache, where npm pack
/// keeps its logs, beside it).
pub fn host_release() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("release");
        let out = dir.join("tree");
        let _ = std::fs::remove_dir_all(&out);
        let mut cmd = Command::new("bash");
        cmd.arg(Path::new(ROOT).join("scripts/build-release.sh"))
            .args(["--target", TARGET, "--out"])
            .arg(&out)
            .env("npm_config_cache", dir.join("npm-cache"));
        let o = Run::command(cmd)
            .timeout(Duration::from_secs(900))
            .stdout_contains(" release tree in ")
            .stderr_any("cargo and npm report their progress on stderr")
            .run();
        Tree {
            out,
            stdout: o.stdout,
        }
    })
}

/// `<tree>/download/v<version>`: where the release's assets are.
pub fn version_dir(tree: &Path) -> PathBuf {
    tree.join(format!("download/v{VERSION}"))
}
