//! The few libc calls that modules outside the process layer need, behind
//! safe wrappers: file locks, the user's ids and home directory, whether a
//! process exists, and keeping signals off a helper thread.
//!
//! Why here: `unsafe` code lives only under `src/proc/`, so each call is
//! written, and its safety argued, once. Every wrapper takes what the call
//! needs in a form that cannot be wrong (a borrowed descriptor, a plain
//! number) and returns what std would: `io::Result`, `bool`, `Option`.

use std::ffi::{CStr, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// What one `lstat` says of a file, as much of it as state files need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub regular: bool,
    pub uid: u32,
    pub size: u64,
    /// Last modification, milliseconds since the epoch.
    pub mtime_ms: i64,
}

/// The entries of the directory `dir` whose names `wanted` accepts, each
/// with its `lstat` (a link is seen as one), taken relative to the open
/// directory (`fstatat`): one name to look up per entry, not the whole
/// path. An entry that vanished in between is left out.
pub fn stat_entries(
    dir: &std::path::Path,
    wanted: impl Fn(&str) -> bool,
) -> io::Result<Vec<(String, Stat)>> {
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut found = Vec::new();
    // SAFETY: opendir on a NUL-terminated path; readdir's entries are read
    // before the next readdir, and d_name is NUL-terminated; fstatat on the
    // stream's own descriptor into a zeroed struct; closedir once.
    unsafe {
        let stream = libc::opendir(path.as_ptr());
        if stream.is_null() {
            return Err(io::Error::last_os_error());
        }
        let fd = libc::dirfd(stream);
        loop {
            let entry = libc::readdir(stream);
            if entry.is_null() {
                break;
            }
            let name = CStr::from_ptr((*entry).d_name.as_ptr());
            let Ok(text) = name.to_str() else { continue };
            if !wanted(text) {
                continue;
            }
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstatat(fd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) != 0 {
                continue;
            }
            found.push((
                text.to_string(),
                Stat {
                    regular: st.st_mode & libc::S_IFMT == libc::S_IFREG,
                    uid: st.st_uid,
                    size: st.st_size as u64,
                    mtime_ms: st.st_mtime as i64 * 1000 + st.st_mtime_nsec as i64 / 1_000_000,
                },
            ));
        }
        libc::closedir(stream);
    }
    Ok(found)
}

/// The real uid: whose directories loopx's state and checkpoints live in.
pub fn uid() -> u32 {
    // SAFETY: getuid takes nothing and cannot fail.
    unsafe { libc::getuid() }
}

/// The effective uid: the one files are created with and access is
/// checked against.
pub fn euid() -> u32 {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() }
}

/// The home directory the password database gives the real uid; None when
/// there is no entry, it has no directory, or the directory is empty.
pub fn passwd_home() -> Option<PathBuf> {
    let mut buf: Vec<libc::c_char> = vec![0; 1024];
    loop {
        // SAFETY: all-zero is a valid `passwd` (null pointers, zero ids);
        // getpwuid_r fills it with pointers into `buf`, which outlives them.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the length given.
        let rc = unsafe {
            libc::getpwuid_r(
                libc::getuid(),
                &mut pwd,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        // The entry did not fit: grow the buffer, within reason.
        if rc == libc::ERANGE && buf.len() < (1 << 20) {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 || found.is_null() || pwd.pw_dir.is_null() {
            return None;
        }
        // SAFETY: on success pw_dir is a NUL-terminated string inside `buf`,
        // which is still alive and unchanged here.
        let dir = unsafe { CStr::from_ptr(pwd.pw_dir) }.to_bytes();
        return (!dir.is_empty()).then(|| PathBuf::from(OsStr::from_bytes(dir)));
    }
}

/// `flock` with `op` on a descriptor the caller holds open.
fn flock(fd: impl AsFd, op: libc::c_int) -> io::Result<()> {
    // SAFETY: flock touches no memory; the borrow keeps the descriptor open
    // for the call.
    if unsafe { libc::flock(fd.as_fd().as_raw_fd(), op) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Takes the exclusive lock without waiting: `Err` with `EWOULDBLOCK` when
/// another open file description holds it (`ENOLCK`/`EOPNOTSUPP` where the
/// file system has no locks).
pub fn try_lock(fd: impl AsFd) -> io::Result<()> {
    flock(fd, libc::LOCK_EX | libc::LOCK_NB)
}

/// Takes the exclusive lock, waiting for it. A signal can end the wait:
/// then `Err` of kind `Interrupted`, and the caller decides whether to retry.
pub fn lock(fd: impl AsFd) -> io::Result<()> {
    flock(fd, libc::LOCK_EX)
}

/// Releases a lock taken with [`lock`] or [`try_lock`] (closing the last
/// descriptor of the file description releases it too).
pub fn unlock(fd: impl AsFd) -> io::Result<()> {
    flock(fd, libc::LOCK_UN)
}

/// Signal 0 to `pid`: `Ok` when the process exists and may be signalled;
/// `ESRCH` when there is no such process, `EPERM` when it exists but is
/// another user's. As kill(2), 0 and negative numbers name process groups.
pub fn signal_zero(pid: libc::pid_t) -> io::Result<()> {
    // SAFETY: signal 0 delivers nothing; it only checks for existence and
    // permission.
    if unsafe { libc::kill(pid, 0) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether a process `pid` exists, whoever's it is (EPERM means it does).
pub fn process_exists(pid: libc::pid_t) -> bool {
    match signal_zero(pid) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() == Some(libc::EPERM),
    }
}

/// Blocks every signal in the calling thread, for helper threads: signals
/// are the loop's business (signals.rs), and a helper that took one would
/// hide it from the loop's self-pipe.
pub fn block_signals_in_this_thread() {
    // SAFETY: `all` is a local signal set that sigfillset initialises before
    // pthread_sigmask reads it; the old mask is not asked for (null).
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

/// The local zone's offset from UTC at `t` (seconds since the epoch), in
/// seconds east; 0 when the C library cannot tell.
pub fn utc_offset(t: i64) -> i64 {
    // libc marks musl's time_t deprecated (it is to become 64-bit, as it
    // already is on the targets loopx builds for); the C call needs it.
    #[allow(deprecated)]
    let t = t as libc::time_t;
    // SAFETY: localtime_r writes only into the zeroed tm it is given.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return 0;
        }
        tm.tm_gmtoff as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    #[test]
    fn a_second_description_cannot_take_a_held_lock() {
        let path = std::env::temp_dir().join(format!("loopx-sys-lock-{}", std::process::id()));
        let a = File::create(&path).expect("create the lock file");
        let b = File::open(&path).expect("open it again");
        try_lock(&a).expect("the first lock");
        let err = try_lock(&b).expect_err("held by the other description");
        assert_eq!(err.raw_os_error(), Some(libc::EWOULDBLOCK));
        unlock(&a).expect("unlock");
        try_lock(&b).expect("free again");
        lock(&b).expect("a lock already held is taken again");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn this_process_exists() {
        let me = libc::pid_t::try_from(std::process::id()).expect("a pid fits pid_t");
        assert!(process_exists(me));
        assert!(signal_zero(me).is_ok());
    }
}
