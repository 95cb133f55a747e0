//! Private scratch directories for an install: the download/clone area and
//! the staging area (§10.7, §10.9). Each is created fresh with a name no one
//! else holds (mkdir is atomic and fails on an existing path) and is removed
//! with everything in it when dropped, so every exit path cleans up.
//!
//! Every exit path but one: a loopx killed outright (SIGKILL, a crash, a
//! power cut) runs no cleanup. So each directory is named after its owner's
//! pid and held under an flock for its whole life; the next install sweeps
//! away those whose lock is free and whose owner is gone (`sweep`). The lock
//! is what makes that safe: the kernel releases it when its holder dies,
//! whatever the pid has come to mean since.

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::proc::sys;

pub struct Scratch {
    path: PathBuf,
    /// The directory, open and flock'ed while it is in use (None where the
    /// filesystem has no locks; `sweep` then still checks the pid).
    _lock: Option<fs::File>,
}

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
                Ok(()) => {
                    let lock = lock_dir(&path).ok().flatten();
                    return Ok(Scratch { path, _lock: lock });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => {
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the `<prefix>…` directories in `parent` that installs killed
    /// before they could clean up left behind, after `salvage` has had a
    /// look inside each (the staging area may hold a workflow moved aside).
    /// Directories of running installs (lock held, or owner alive) stay;
    /// anything that cannot be inspected or removed is left alone.
    pub fn sweep(parent: &Path, prefix: &str, mut salvage: impl FnMut(&Path)) {
        let Ok(entries) = fs::read_dir(parent) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
                continue;
            };
            if !entry.file_type().is_ok_and(|t| t.is_dir()) || owner_alive(rest) {
                continue;
            }
            let path = entry.path();
            // Ok(None): no locks here; the pid check above has to do.
            let Ok(_lock) = lock_dir(&path) else {
                continue;
            };
            salvage(&path);
            let _ = fs::remove_dir_all(&path);
        }
    }
}

/// Opens `dir` (never through a symlink) and takes its flock without
/// waiting. Err when another process holds it; Ok(None) when the
/// filesystem does not support locks.
fn lock_dir(dir: &Path) -> io::Result<Option<fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)?;
    let Err(err) = sys::try_lock(&file) else {
        return Ok(Some(file));
    };
    match err.raw_os_error() {
        Some(libc::ENOLCK) | Some(libc::EOPNOTSUPP) => Ok(None),
        _ => Err(err),
    }
}

/// Whether the pid a scratch name starts with (`<pid>-…`) is a live
/// process. Unparsable names count as alive: they are not ours to delete.
fn owner_alive(rest: &str) -> bool {
    let Some(pid) = rest
        .split('-')
        .next()
        .and_then(|p| p.parse::<libc::pid_t>().ok())
        .filter(|&p| p > 0)
    else {
        return true;
    };
    sys::process_exists(pid)
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // remove_dir_all removes symlinks, never what they point to. The
        // lock is released after, when `_lock` drops.
        let _ = fs::remove_dir_all(&self.path);
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

    #[test]
    fn sweep_removes_only_what_dead_installs_left() {
        let tmp = TempDir::new("scratch-sweep");
        // A live install: its lock is held.
        let live = Scratch::create(tmp.path(), ".s-").unwrap();
        // A dead install: no lock, and no process with that pid (pid_max
        // is at most 2^22).
        let dead = tmp.path().join(".s-99999999-1-0");
        fs::create_dir(&dead).unwrap();
        fs::write(dead.join("file"), b"x").unwrap();
        // Our own pid is alive, whoever holds the name.
        let ours = tmp.path().join(format!(".s-{}-5-0", std::process::id()));
        fs::create_dir(&ours).unwrap();
        // Names that are not ours, and a file with the prefix.
        let other = tmp.path().join("unrelated");
        fs::create_dir(&other).unwrap();
        fs::write(tmp.path().join(".s-99999999-2-0"), b"x").unwrap();

        let mut salvaged = Vec::new();
        Scratch::sweep(tmp.path(), ".s-", |p| salvaged.push(p.to_path_buf()));
        assert_eq!(salvaged, std::slice::from_ref(&dead));
        assert!(!dead.exists());
        assert!(live.path().is_dir() && ours.is_dir() && other.is_dir());
        assert!(tmp.path().join(".s-99999999-2-0").is_file());
    }

    #[test]
    fn sweep_leaves_a_locked_directory_whatever_its_name_says() {
        let tmp = TempDir::new("scratch-locked");
        let dir = tmp.path().join(".s-99999999-3-0");
        fs::create_dir(&dir).unwrap();
        let held = lock_dir(&dir).unwrap();
        assert!(held.is_some());
        Scratch::sweep(tmp.path(), ".s-", |_| panic!("salvaged a live directory"));
        assert!(dir.is_dir());
        drop(held);
        Scratch::sweep(tmp.path(), ".s-", |_| {});
        assert!(!dir.exists());
    }
}
