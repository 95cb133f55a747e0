//! loopx's own state files read back safely: checkpoints, their saved
//! inputs and status files (DESIGN.md "Beyond the spec": state files are
//! read only when they are regular files owned by the user in the user's
//! own directories, without following links, with a size bound).
//!
//! Why: what these files say decides what runs. A checkpoint's saved
//! options name an env file, and an env file setting `BASH_ENV` runs code
//! in every script; so a file someone else planted must never be read. And
//! reading must neither hang nor exhaust memory: a fifo named like a
//! checkpoint would block `open` and `read` for ever, a link to /dev/zero
//! or a 3 GB sparse file would be read to the end. So every file is opened
//! with `O_NOFOLLOW` (a link fails to open) and `O_NONBLOCK` (a fifo opens
//! at once), then checked with `fstat` on the open descriptor (no race with
//! a rename) before a byte is read: a regular file, the user's, within the
//! bound.

use std::fmt;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::proc::sys;

/// The most a record-like state file (a checkpoint record, a status file)
/// may hold: far above a real one (a few hundred bytes plus the paths it
/// names), far below what hurts.
pub const RECORD_LIMIT: u64 = 1024 * 1024;

/// Why a directory is not safely the user's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirProblem {
    Symlink,
    NotDir,
    /// Another user's (the owner's uid).
    Owner(u32),
    /// The user's, but open to others (its mode).
    Open(u32),
}

impl fmt::Display for DirProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirProblem::Symlink => f.write_str("it is a symbolic link"),
            DirProblem::NotDir => f.write_str("it is not a directory"),
            DirProblem::Owner(owner) => write!(
                f,
                "it belongs to uid {owner}, not to you (uid {})",
                sys::uid()
            ),
            DirProblem::Open(mode) => write!(
                f,
                "it is open to other users (mode {mode:04o}; loopx needs 0700)"
            ),
        }
    }
}

/// What is wrong with a directory, from its `lstat`; None when it is a
/// directory of `uid`'s closed to everyone else.
pub fn dir_problem(meta: &Metadata, uid: u32) -> Option<DirProblem> {
    let mode = meta.permissions().mode() & 0o7777;
    if meta.file_type().is_symlink() {
        Some(DirProblem::Symlink)
    } else if !meta.is_dir() {
        Some(DirProblem::NotDir)
    } else if meta.uid() != uid {
        Some(DirProblem::Owner(meta.uid()))
    } else if mode & 0o077 != 0 {
        Some(DirProblem::Open(mode))
    } else {
        None
    }
}

/// Makes sure the existing `dir` is private to the user. A directory of
/// the user's that lost its privacy (Kubernetes' `fsGroup` makes a volume's
/// tree group-writable and setgid on every pod start) is made private
/// again: it is ours to chmod, and refusing it would silently lose every
/// checkpoint. Anything else wrong is the caller's to report. `Ok(false)`
/// when there is no such directory.
pub fn private_dir(dir: &Path) -> Result<bool, DirProblem> {
    let meta = match fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(_) => return Ok(false),
    };
    match dir_problem(&meta, sys::uid()) {
        None => Ok(true),
        Some(DirProblem::Open(mode)) => fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map(|()| true)
            .map_err(|_| DirProblem::Open(mode)),
        Some(problem) => Err(problem),
    }
}

/// Makes sure the existing `dir` is the user's and that no one else can
/// write it: for caches of code (js_assets.rs), where a directory others
/// may read is fine but one they may write is not (they could swap a file
/// after it was checked). One of ours writable by others loses that write
/// permission; a read-only one stays read-only. `Ok(false)` when missing.
pub fn unwritable_by_others(dir: &Path) -> Result<bool, DirProblem> {
    let meta = match fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(_) => return Ok(false),
    };
    match dir_problem(&meta, sys::uid()) {
        None => Ok(true),
        Some(DirProblem::Open(mode)) if mode & 0o022 == 0 => Ok(true),
        Some(DirProblem::Open(mode)) => {
            fs::set_permissions(dir, fs::Permissions::from_mode(mode & 0o7755))
                .map(|()| true)
                .map_err(|_| DirProblem::Open(mode))
        }
        Some(problem) => Err(problem),
    }
}

/// Why a file is not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileProblem {
    /// A fifo, a device, a socket or a directory.
    NotRegular(&'static str),
    /// Another user's (the owner's uid).
    Owner(u32),
    /// Larger than the bound (its size).
    TooLarge(u64),
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileProblem::NotRegular(kind) => write!(f, "it is not a regular file but {kind}"),
            FileProblem::Owner(owner) => write!(f, "it belongs to uid {owner}, not to you"),
            FileProblem::TooLarge(size) => write!(f, "it is too large ({size} bytes)"),
        }
    }
}

/// What is wrong with a file, from its `fstat`; None when it is a regular
/// file of `uid`'s of at most `limit` bytes.
pub fn file_problem(meta: &Metadata, uid: u32, limit: u64) -> Option<FileProblem> {
    let kind = meta.file_type();
    if !kind.is_file() {
        return Some(FileProblem::NotRegular(if kind.is_fifo() {
            "a fifo"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_dir() {
            "a directory"
        } else {
            "a device"
        }));
    }
    if meta.uid() != uid {
        return Some(FileProblem::Owner(meta.uid()));
    }
    (meta.len() > limit).then_some(FileProblem::TooLarge(meta.len()))
}

/// Checks an open state file with `fstat` (see the module comment). A
/// problem is an error of kind `InvalidData` saying what it is.
pub fn check(file: &File, limit: u64) -> io::Result<()> {
    match file_problem(&file.metadata()?, sys::uid(), limit) {
        None => Ok(()),
        Some(problem) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            problem.to_string(),
        )),
    }
}

/// Whether a daily sweep is due, by the stamp file `stamp` (checkpoints'
/// and kept event lines each have one): it is when the stamp is missing,
/// not a regular file, or not written within the `every_ms` before
/// `now_ms` (a stamp from the future, a clock set back, counts as old).
/// When due, the stamp is renewed first, so runs starting at once rarely
/// sweep together; the others pay one `stat`.
pub fn sweep_due(stamp: &Path, now_ms: i64, every_ms: i64) -> bool {
    let last = fs::symlink_metadata(stamp)
        .ok()
        .filter(|m| m.file_type().is_file())
        .map(|m| m.mtime() * 1000);
    if last.is_some_and(|t| (0..every_ms).contains(&now_ms.saturating_sub(t))) {
        return false;
    }
    let _ = fs::remove_file(stamp);
    let _ = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(stamp);
    true
}

/// Opens the state file at `path` read-only, without following a link or
/// waiting on a fifo, and [`check`]s it.
pub fn open(path: &Path, limit: u64) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(said_plainly)?;
    check(&file, limit)?;
    Ok(file)
}

/// `O_NOFOLLOW`'s refusal (ELOOP, "too many levels of symbolic links") in
/// words that say what is there.
pub fn said_plainly(err: io::Error) -> io::Error {
    if err.raw_os_error() == Some(libc::ELOOP) {
        io::Error::new(io::ErrorKind::InvalidData, "it is a symbolic link")
    } else {
        err
    }
}

/// Reads a file [`open`] checked, from where it stands, never more than
/// `limit` bytes: it may have grown since the check.
pub fn read_open(file: &File, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            FileProblem::TooLarge(bytes.len() as u64).to_string(),
        ));
    }
    Ok(bytes)
}

/// [`open`] then [`read_open`].
pub fn read(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    read_open(&open(path, limit)?, limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("loopx-state-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("temp dir");
        d
    }

    #[test]
    fn a_sweep_is_due_once_a_day_and_after_a_clock_set_back() {
        let d = temp("sweep");
        let stamp = d.join(".pruned");
        let day = 24 * 3600 * 1000;
        let now = crate::clock::unix_ms(std::time::SystemTime::now()) as i64;
        assert!(sweep_due(&stamp, now, day), "no stamp yet");
        assert!(stamp.is_file(), "renewed first");
        assert!(!sweep_due(&stamp, now + 1000, day), "swept a moment ago");
        assert!(sweep_due(&stamp, now + day + 1000, day), "a day on");
        // The stamp is now (renewed above); a clock set back a day sees it
        // from the future: old.
        assert!(sweep_due(&stamp, now - day, day));
        let _ = fs::remove_dir_all(&d);
    }

    fn refusal(path: &Path, limit: u64) -> String {
        match read(path, limit) {
            Ok(bytes) => panic!("{path:?} was read: {} bytes", bytes.len()),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn only_regular_files_of_ours_within_the_bound_are_read() {
        let d = temp("files");
        let ok = d.join("ok");
        fs::write(&ok, "hello").expect("write");
        assert_eq!(read(&ok, 5).expect("read"), b"hello");
        assert_eq!(refusal(&ok, 4), "it is too large (5 bytes)");
        // A link is not followed, whatever it points at.
        std::os::unix::fs::symlink("/dev/zero", d.join("zero")).expect("symlink");
        assert_eq!(refusal(&d.join("zero"), 5), "it is a symbolic link");
        // A fifo neither blocks the open nor the read.
        let fifo = d.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        assert_eq!(refusal(&fifo, 5), "it is not a regular file but a fifo");
        assert_eq!(
            refusal(Path::new("/dev/null"), 5),
            "it is not a regular file but a device"
        );
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_or_directory_of_another_user_is_refused() {
        let d = temp("owner");
        let meta = fs::metadata(&d).expect("stat");
        let me = meta.uid();
        assert_eq!(dir_problem(&meta, me + 1), Some(DirProblem::Owner(me)));
        let f = d.join("f");
        fs::write(&f, "x").expect("write");
        let meta = fs::metadata(&f).expect("stat");
        assert_eq!(
            file_problem(&meta, me + 1, 10),
            Some(FileProblem::Owner(me))
        );
        assert_eq!(file_problem(&meta, me, 10), None);
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_directory_is_private_only_when_closed_to_others() {
        let d = temp("dirmode");
        let meta = |mode| {
            fs::set_permissions(&d, fs::Permissions::from_mode(mode)).expect("chmod");
            fs::symlink_metadata(&d).expect("stat")
        };
        let me = meta(0o700).uid();
        assert_eq!(dir_problem(&meta(0o700), me), None);
        assert_eq!(dir_problem(&meta(0o777), me), Some(DirProblem::Open(0o777)));
        assert_eq!(
            DirProblem::Open(0o2770).to_string(),
            "it is open to other users (mode 2770; loopx needs 0700)"
        );
        let f = d.join("f");
        fs::write(&f, "").expect("write");
        assert_eq!(
            dir_problem(&fs::symlink_metadata(&f).expect("stat"), me),
            Some(DirProblem::NotDir)
        );
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_directory_of_ours_that_lost_its_privacy_is_made_private_again() {
        let d = temp("mode");
        fs::set_permissions(&d, fs::Permissions::from_mode(0o2770)).expect("chmod");
        assert_eq!(private_dir(&d), Ok(true));
        let mode = fs::metadata(&d).expect("stat").permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700);
        assert_eq!(private_dir(&d.join("missing")), Ok(false));
        let link = d.join("link");
        std::os::unix::fs::symlink(&d, &link).expect("symlink");
        assert_eq!(private_dir(&link), Err(DirProblem::Symlink));
        let _ = fs::remove_dir_all(&d);
    }
}
