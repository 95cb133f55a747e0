//! Private scratch directories for an install: the download/clone area and
//! the staging area (§10.7, §10.9). Each is created fresh with a name no one
//! else holds (mkdir is atomic and fails on an existing path) and is removed
//! with everything in it when dropped, so every exit path cleans up.

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub struct Scratch(PathBuf);

impl Scratch {
    /// Creates `<parent>/<prefix><unique>`, readable by the owner only.
    pub fn create(parent: &Path, prefix: &str) -> io::Result<Scratch> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let mut attempt = 0;
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = parent.join(format!("{prefix}{}-{nanos:x}-{n}", std::process::id()));
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(Scratch(path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => {
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // remove_dir_all removes symlinks, never what they point to.
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::testutil::TempDir;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn unique_private_and_removed_on_drop_without_following_links() {
        let tmp = TempDir::new("scratch");
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("keep"), b"x").unwrap();
        let a = Scratch::create(tmp.path(), ".s-").unwrap();
        let b = Scratch::create(tmp.path(), ".s-").unwrap();
        assert_ne!(a.path(), b.path());
        let mode = fs::metadata(a.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        fs::create_dir(a.path().join("sub")).unwrap();
        std::os::unix::fs::symlink(&outside, a.path().join("sub/link")).unwrap();
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists());
        assert!(outside.join("keep").exists());
        assert!(b.path().exists());
    }
}
