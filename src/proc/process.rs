//! Starting a script and talking to it (§6.2, §7.2, §7.3): its own process
//! group, stdout a pipe, stdin a pipe fed from memory or empty, stderr
//! inherited. This module spawns and reports; supervisor.rs waits, and
//! engine.rs decides what an ending means for the loop.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::raw::c_char;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

/// §7.3: how long a signalled process group gets before SIGKILL (the
/// supervisor's timer and the watcher both wait this long).
pub const GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// What to start.
pub struct Launch<'a> {
    pub program: &'a Path,
    pub args: &'a [OsString],
    pub cwd: &'a Path,
    /// `NAME=value` pointers, null-terminated (script_env.rs).
    pub envp: &'a [*const c_char],
    /// Whether stdin is fed (the piped result, §6.6) or empty (§6.7).
    pub piped_stdin: bool,
    /// The process group to join; None makes the script a group of its own
    /// (§7.3: signals go to the script's whole group).
    pub group: Option<libc::pid_t>,
}

/// A running script.
pub struct Child {
    pub pid: libc::pid_t,
    /// The process group its descendants share.
    pub pgid: libc::pid_t,
    pub stdout: OwnedFd,
    pub stdin: Option<OwnedFd>,
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Code(i32),
    Signal(i32),
}

/// A pipe whose ends are close-on-exec (the child's copies are dup2'd onto
/// its 0/1, which clears the flag there) and non-blocking on loopx's side.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe writes two fresh descriptors into `fds`.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    for fd in [&r, &w] {
        set_cloexec(fd.as_raw_fd())?;
    }
    Ok((r, w))
}

fn set_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor owned by the caller.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFD);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFD, fl | libc::FD_CLOEXEC) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor owned by the caller.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Checks a posix_spawn* return value (they return the error, not -1).
fn check(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

/// posix_spawn's attributes and file actions, destroyed on drop.
struct SpawnSetup {
    attr: libc::posix_spawnattr_t,
    actions: libc::posix_spawn_file_actions_t,
}

impl SpawnSetup {
    fn new() -> io::Result<Box<SpawnSetup>> {
        // SAFETY: zeroed storage initialised by the init calls before use;
        // boxed so the initialised objects never move.
        unsafe {
            let mut s: Box<SpawnSetup> = Box::new(std::mem::zeroed());
            check(libc::posix_spawnattr_init(&mut s.attr))?;
            if let Err(e) = check(libc::posix_spawn_file_actions_init(&mut s.actions)) {
                libc::posix_spawnattr_destroy(&mut s.attr);
                return Err(e);
            }
            Ok(s)
        }
    }
}

impl Drop for SpawnSetup {
    fn drop(&mut self) {
        // SAFETY: both were initialised in `new`.
        unsafe {
            libc::posix_spawn_file_actions_destroy(&mut self.actions);
            libc::posix_spawnattr_destroy(&mut self.attr);
        }
    }
}

/// Starts `launch`. posix_spawn (a vfork-like clone under musl and glibc):
/// no copy of loopx's page tables per iteration, and the exec error, if
/// any, comes back as the result.
pub fn spawn(launch: &Launch) -> io::Result<Child> {
    let program = cstring(launch.program.as_os_str())?;
    let cwd = cstring(launch.cwd.as_os_str())?;
    let args: Vec<CString> = std::iter::once(Ok(program.clone()))
        .chain(launch.args.iter().map(|a| cstring(a)))
        .collect::<io::Result<_>>()?;
    let mut argv: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(ptr::null());

    let (stdout_r, stdout_w) = pipe()?;
    // stdin is a pipe either way: fed with the piped result, or closed at
    // once (an empty stdin that needs no /dev/null, so a bare chroot works).
    let (stdin_r, stdin_w) = pipe()?;
    let mut s = SpawnSetup::new()?;
    // SAFETY: the setup objects are initialised; every pointer handed over
    // (paths, argv, envp) lives until posix_spawn returns.
    let pid = unsafe {
        let actions = &mut s.actions;
        check(libc::posix_spawn_file_actions_adddup2(
            actions,
            stdin_r.as_raw_fd(),
            0,
        ))?;
        check(libc::posix_spawn_file_actions_adddup2(
            actions,
            stdout_w.as_raw_fd(),
            1,
        ))?;
        check(libc::posix_spawn_file_actions_addchdir_np(
            actions,
            cwd.as_ptr(),
        ))?;
        let attr = &mut s.attr;
        // The Rust runtime ignores SIGPIPE; scripts get the default back (a
        // `yes | head` in a script must end). An ignored SIGHUP (nohup)
        // stays ignored, as exec keeps it. The signals loopx catches are
        // named too: `posix_spawn` then resets each with one `sigaction`
        // in the child, not a query and a set (signals.rs).
        let mut default = crate::proc::signals::caught();
        libc::sigaddset(&mut default, libc::SIGPIPE);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        check(libc::posix_spawnattr_setsigdefault(attr, &default))?;
        check(libc::posix_spawnattr_setsigmask(attr, &empty))?;
        check(libc::posix_spawnattr_setpgroup(
            attr,
            launch.group.unwrap_or(0),
        ))?;
        let flags = libc::POSIX_SPAWN_SETPGROUP
            | libc::POSIX_SPAWN_SETSIGDEF
            | libc::POSIX_SPAWN_SETSIGMASK;
        check(libc::posix_spawnattr_setflags(attr, flags as _))?;
        let mut pid: libc::pid_t = 0;
        check(libc::posix_spawn(
            &mut pid,
            program.as_ptr(),
            actions,
            attr,
            argv.as_ptr() as *const *mut c_char,
            launch.envp.as_ptr() as *const *mut c_char,
        ))?;
        pid
    };
    drop((stdout_w, stdin_r));
    set_nonblocking(stdout_r.as_raw_fd())?;
    let stdin = if launch.piped_stdin {
        set_nonblocking(stdin_w.as_raw_fd())?;
        Some(stdin_w)
    } else {
        None
    };
    Ok(Child {
        pid,
        pgid: launch.group.unwrap_or(pid),
        stdout: stdout_r,
        stdin,
    })
}

/// Bytes readable right now without blocking.
pub fn readable_bytes(fd: RawFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int.
    if unsafe { libc::ioctl(fd, libc::FIONREAD as _, &mut n) } < 0 {
        return 0;
    }
    n.max(0) as usize
}

const CHUNK: usize = 64 * 1024;

#[derive(Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// No more data for now.
    WouldBlock,
    Eof,
}

/// Reads until EAGAIN/EOF, or until `limit` bytes when given.
///
/// Most scripts print a few bytes: those reads land on the stack and `buf`
/// grows by what came. Sizing `buf` for a whole chunk instead would be a
/// fresh 64 KiB block per iteration, which musl's malloc maps and unmaps
/// each time, with a page fault per 4 KiB. Once `buf` holds a chunk, the
/// output is large and reads go to its tail, zeroed first: that faults the
/// fresh pages in here, while the script goes on writing, rather than
/// inside read(), which would hold the script's writes back meanwhile (B6:
/// ~7% slower on 2 cores).
pub fn read_available(
    fd: RawFd,
    buf: &mut Vec<u8>,
    mut limit: Option<usize>,
) -> io::Result<ReadOutcome> {
    let mut stack = [MaybeUninit::<u8>::uninit(); CHUNK];
    loop {
        let want = match limit {
            Some(0) => return Ok(ReadOutcome::WouldBlock),
            Some(l) => l.min(CHUNK),
            None => CHUNK,
        };
        let len = buf.len();
        let large = len >= CHUNK;
        // Large: into the vector's spare capacity, zeroed first: faulting
        // the fresh pages in here is cheaper than read() faulting them in
        // the kernel (0.09 s against 0.13 s of wall for 64 MiB), and
        // `write_bytes` is one memset whatever the opt-level (`resize`
        // became a byte loop at opt-level "z").
        let dest: *mut u8 = if large {
            buf.reserve(want);
            let spare: *mut u8 = buf.spare_capacity_mut().as_mut_ptr().cast();
            // SAFETY: `reserve` made room for `want` bytes at `spare`.
            unsafe { std::ptr::write_bytes(spare, 0, want) };
            spare
        } else {
            stack.as_mut_ptr().cast()
        };
        // SAFETY: `dest` is valid for `want` bytes of writes: the reserved
        // spare capacity of `buf`, or the stack buffer (CHUNK >= want bytes).
        let n = unsafe { libc::read(fd, dest.cast(), want) };
        if n < 0 {
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(ReadOutcome::WouldBlock),
                _ => return Err(err),
            }
        }
        let n = n as usize;
        if large {
            // SAFETY: read() initialized the first `n` bytes past `len`,
            // within the capacity reserved above.
            unsafe { buf.set_len(len + n) };
        } else {
            // SAFETY: read() initialized the first `n` bytes of `stack`.
            buf.extend_from_slice(unsafe { std::slice::from_raw_parts(stack.as_ptr().cast(), n) });
        }
        if n == 0 {
            return Ok(ReadOutcome::Eof);
        }
        if let Some(l) = limit.as_mut() {
            *l -= n;
        }
    }
}

/// Writes as much of `data[*pos..]` as the pipe takes. Returns false when the
/// reader is gone (EPIPE: the script closed stdin or exited) — not an error,
/// the script simply did not want the rest.
pub fn write_available(fd: RawFd, data: &[u8], pos: &mut usize) -> bool {
    while *pos < data.len() {
        let rest = &data[*pos..];
        // SAFETY: writing from a live slice of the given length.
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return true,
                _ => return false,
            }
        }
        *pos += n as usize;
    }
    true
}

pub fn decode(status: libc::c_int) -> Status {
    if libc::WIFSIGNALED(status) {
        Status::Signal(libc::WTERMSIG(status))
    } else {
        Status::Code(libc::WEXITSTATUS(status))
    }
}

/// A change of one child seen with WUNTRACED.
pub enum Waited {
    /// Stopped by this signal.
    Stopped(i32),
    Ended(Status),
}

/// Checks one child, stops included, without blocking.
pub fn wait_one(pid: libc::pid_t) -> Option<Waited> {
    let mut status: libc::c_int = 0;
    // SAFETY: waitpid with a valid status pointer, non-blocking.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG | libc::WUNTRACED) };
    if r != pid {
        None
    } else if libc::WIFSTOPPED(status) {
        Some(Waited::Stopped(libc::WSTOPSIG(status)))
    } else {
        Some(Waited::Ended(decode(status)))
    }
}

/// Reaps every exited child without blocking, calling `seen` for each.
/// Besides the script, loopx's children are descendants of earlier scripts
/// re-parented to it (it is their subreaper): reaping them keeps the process
/// table clean over long runs.
pub fn reap_all(mut seen: impl FnMut(libc::pid_t, Status)) {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid with a valid status pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r <= 0 {
            break;
        }
        seen(r, decode(status));
    }
}

pub fn group_alive(pgid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

pub fn kill_group(pgid: libc::pid_t, sig: i32) {
    // SAFETY: signalling a script's process group; failure (ESRCH) means
    // the group is already gone, which is what we want.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// Makes loopx the reaper of orphaned descendants of its scripts (Linux), so
/// "the group has exited" can be observed and no zombie outlives a run.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}
