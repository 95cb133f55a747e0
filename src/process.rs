//! Running one script: its own process group, stdout captured, stderr passed
//! through, stdin fed from memory, signals forwarded (§6.2, §7.2, §7.3).
//!
//! One thread multiplexes everything with poll(2): the script's stdout, its
//! stdin (written non-blocking, so a script that never reads stdin cannot
//! deadlock the loop) and the signal self-pipe (SIGCHLD wakes us when the
//! script exits, SIGINT/SIGTERM are forwarded to its group).

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::signals::Signals;

/// §7.3: how long a signalled process group gets before SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

/// What to start.
pub struct Launch<'a> {
    /// `workflow:script`, for messages.
    pub label: &'a str,
    /// The script file, checked after a failure to tell a vanished file
    /// (§5.1) from an ordinary non-zero exit.
    pub script: &'a Path,
    pub program: &'a Path,
    pub args: &'a [OsString],
    pub cwd: &'a Path,
    pub env: &'a [(OsString, OsString)],
    /// Variables the runtime itself needs (runtime.rs), applied last.
    pub runtime_env: &'a [(OsString, OsString)],
    /// Bytes for the script's stdin; `None` gives it an empty stdin.
    pub stdin: Option<&'a [u8]>,
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor owned by the caller.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Bytes readable right now without blocking.
fn readable_bytes(fd: RawFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int.
    if unsafe { libc::ioctl(fd, libc::FIONREAD as _, &mut n) } < 0 {
        return 0;
    }
    n.max(0) as usize
}

const CHUNK: usize = 64 * 1024;

enum ReadOutcome {
    /// No more data for now.
    WouldBlock,
    Eof,
}

/// Reads until EAGAIN/EOF, or until `limit` bytes when given.
fn read_available(
    fd: RawFd,
    buf: &mut Vec<u8>,
    mut limit: Option<usize>,
) -> io::Result<ReadOutcome> {
    loop {
        let want = match limit {
            Some(0) => return Ok(ReadOutcome::WouldBlock),
            Some(l) => l.min(CHUNK),
            None => CHUNK,
        };
        let len = buf.len();
        buf.resize(len + want, 0);
        // SAFETY: reading into the freshly resized tail of `buf`.
        let n = unsafe { libc::read(fd, buf[len..].as_mut_ptr().cast(), want) };
        if n < 0 {
            buf.truncate(len);
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(ReadOutcome::WouldBlock),
                _ => return Err(err),
            }
        }
        let n = n as usize;
        buf.truncate(len + n);
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
fn write_available(fd: RawFd, data: &[u8], pos: &mut usize) -> bool {
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

/// How a reaped child ended.
#[derive(Debug, Clone, Copy)]
enum Status {
    Code(i32),
    Signal(i32),
}

/// Reaps every exited child without blocking; returns our script's status
/// once it has ended. Other children are descendants of earlier scripts that
/// were re-parented to us (we are their subreaper): reaping them keeps the
/// process table clean over long runs.
fn reap(pid: libc::pid_t) -> Option<Status> {
    let mut ours = None;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid with a valid status pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r <= 0 {
            break;
        }
        if r == pid {
            ours = Some(if libc::WIFSIGNALED(status) {
                Status::Signal(libc::WTERMSIG(status))
            } else {
                Status::Code(libc::WEXITSTATUS(status))
            });
        }
    }
    ours
}

fn group_alive(pgid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

fn kill_group(pgid: libc::pid_t, sig: i32) {
    // SAFETY: signalling our child's process group; failure (ESRCH) means
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

/// Runs the script to completion. Ok(stdout) only for exit code 0 (§7.2).
pub fn run(launch: &Launch, signals: &mut Signals) -> Result<Vec<u8>, Error> {
    let mut cmd = Command::new(launch.program);
    cmd.args(launch.args)
        .current_dir(launch.cwd)
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .envs(launch.runtime_env.iter().map(|(k, v)| (k, v)))
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .stdin(if launch.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    let mut child = cmd.spawn().map_err(|err| Error::Spawn {
        script: launch.label.to_string(),
        program: launch.program.display().to_string(),
        err,
    })?;
    let pid = child.id() as libc::pid_t;
    let io_err = |err| Error::io(format!("supervising script {}", launch.label), err);

    let mut stdout: Option<OwnedFd> = child.stdout.take().map(OwnedFd::from);
    let mut stdin: Option<OwnedFd> = child.stdin.take().map(OwnedFd::from);
    for fd in stdout.iter().chain(stdin.iter()) {
        set_nonblocking(fd.as_raw_fd()).map_err(io_err)?;
    }
    let input = launch.stdin.unwrap_or(&[]);
    let mut written = 0usize;
    let mut captured = Vec::new();
    let mut deadline: Option<Instant> = None;

    let status = loop {
        let mut fds = Vec::with_capacity(3);
        fds.push(libc::pollfd {
            fd: signals.fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        if let Some(fd) = &stdout {
            fds.push(libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if let Some(fd) = &stdin {
            fds.push(libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            });
        }
        let timeout = match deadline {
            Some(d) => d
                .saturating_duration_since(Instant::now())
                .as_millis()
                .min(i32::MAX as u128) as i32,
            None => -1,
        };
        // SAFETY: `fds` is a valid array of pollfd for its length.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if r < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(io_err(err));
            }
        }

        let ev = signals.drain();
        if let Some(sig) = ev.first_interrupt {
            // §7.3: forward to the whole group, then allow the grace period.
            kill_group(pid, sig);
            deadline = Some(Instant::now() + GRACE);
        } else if ev.repeated_interrupt {
            // A second Ctrl-C means "stop now": escalate at once. The exit
            // code stays that of the first signal.
            kill_group(pid, libc::SIGKILL);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            kill_group(pid, libc::SIGKILL);
        }

        let mut idx = 1;
        if let Some(fd) = &stdout {
            if fds[idx].revents != 0 {
                if let ReadOutcome::Eof =
                    read_available(fd.as_raw_fd(), &mut captured, None).map_err(io_err)?
                {
                    stdout = None;
                }
            }
            idx += 1;
        }
        if let Some(fd) = &stdin {
            if fds[idx].revents != 0
                && (!write_available(fd.as_raw_fd(), input, &mut written) || written == input.len())
            {
                stdin = None;
            }
        }
        if stdin.is_some() && written == input.len() {
            stdin = None;
        }

        if ev.child || r == 0 {
            if let Some(status) = reap(pid) {
                break status;
            }
        }
    };

    // The script has exited. Take what it wrote before exiting, but do not
    // wait for EOF: a background process may hold the pipe open for ever.
    if let Some(fd) = stdout.take() {
        let fd = fd.as_raw_fd();
        read_available(fd, &mut captured, Some(readable_bytes(fd))).map_err(io_err)?;
    }
    drop(stdin);
    drop(child);

    if let Some(sig) = signals.interrupted() {
        wait_for_group(
            pid,
            signals,
            deadline.unwrap_or_else(|| Instant::now() + GRACE),
        );
        return Err(Error::Interrupted { signal: sig });
    }
    match status {
        Status::Code(0) => Ok(captured),
        Status::Code(code) => {
            if !launch.script.exists() {
                return Err(Error::Spawn {
                    script: launch.label.to_string(),
                    program: launch.program.display().to_string(),
                    err: io::Error::new(
                        io::ErrorKind::NotFound,
                        "the script file no longer exists",
                    ),
                });
            }
            Err(Error::ScriptFailed {
                script: launch.label.to_string(),
                code,
            })
        }
        Status::Signal(signal) => Err(Error::ScriptKilled {
            script: launch.label.to_string(),
            signal,
        }),
    }
}

/// After an interrupt: waits until no process of the group remains, or kills
/// it when the grace period ends (§7.3). A second interrupt escalates at once.
fn wait_for_group(pgid: libc::pid_t, signals: &mut Signals, deadline: Instant) {
    let mut killed = false;
    loop {
        reap(pgid);
        if !group_alive(pgid) {
            return;
        }
        let now = Instant::now();
        if now >= deadline || killed {
            if !killed {
                kill_group(pgid, libc::SIGKILL);
                killed = true;
                continue;
            }
            // SIGKILL cannot be ignored; give the kernel a moment to finish.
            if now >= deadline + Duration::from_secs(1) {
                return;
            }
        }
        let mut pfd = libc::pollfd {
            fd: signals.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd. Short ticks: group exit is not an event.
        unsafe { libc::poll(&mut pfd, 1, 20) };
        if signals.drain().repeated_interrupt && !killed {
            kill_group(pgid, libc::SIGKILL);
            killed = true;
        }
    }
}
