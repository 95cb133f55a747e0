//! Running one script: its own process group, stdout captured, stderr passed
//! through, stdin fed from memory, signals forwarded (§6.2, §7.2, §7.3).
//!
//! One thread multiplexes everything with poll(2): the script's stdout, its
//! stdin (written non-blocking, so a script that never reads stdin cannot
//! deadlock the loop) and the signal self-pipe (SIGCHLD wakes us when the
//! script exits or stops, SIGINT/SIGTERM/SIGHUP are forwarded to its group).
//! On a terminal the script's group also gets the terminal's foreground
//! while it runs (`Terminal`).

use std::ffi::OsString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
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
    /// Bytes for the script's stdin; `None` gives it an empty stdin.
    pub stdin: Option<&'a [u8]>,
    /// The terminal to hand to the script while it runs (see `Terminal`).
    pub terminal: Option<&'a Terminal>,
    /// The API channel (api.rs). If its other end closes while the script
    /// runs, the consumer's process is gone: §9.1's consumer-driven
    /// cancellation (SIGTERM to the group, SIGKILL after the grace period),
    /// rather than an agent running on for hours for nobody.
    pub consumer: Option<RawFd>,
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
///
/// Most scripts print a few bytes: those reads land on the stack and `buf`
/// grows by what came. Sizing `buf` for a whole chunk instead would be a
/// fresh 64 KiB block per iteration, which musl's malloc maps and unmaps
/// each time, with a page fault per 4 KiB. Once `buf` holds a chunk, the
/// output is large and reads go to its tail, zeroed first: that faults the
/// fresh pages in here, while the script goes on writing, rather than
/// inside read(), which would hold the script's writes back meanwhile (B6:
/// ~7% slower on 2 cores).
fn read_available(
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
        let dest: *mut u8 = if large {
            buf.resize(len + want, 0);
            buf[len..].as_mut_ptr()
        } else {
            stack.as_mut_ptr().cast()
        };
        // SAFETY: `dest` is valid for `want` bytes of writes: the resized
        // tail of `buf`, or the stack buffer (CHUNK >= want bytes).
        let n = unsafe { libc::read(fd, dest.cast(), want) };
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
        if large {
            buf.truncate(len + n);
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
            ours = Some(decode(status));
        }
    }
    ours
}

fn decode(status: libc::c_int) -> Status {
    if libc::WIFSIGNALED(status) {
        Status::Signal(libc::WTERMSIG(status))
    } else {
        Status::Code(libc::WEXITSTATUS(status))
    }
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

/// Reaps descendants of earlier scripts that ended since the last look
/// (we are their subreaper). One non-blocking waitpid when there are none.
pub fn reap_orphans() {
    reap(-1);
}

/// Runs `f` with SIGTTOU blocked in this thread: tcsetpgrp from a background
/// process group is then allowed instead of stopping the caller.
fn without_sigttou<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: sigset manipulation on local values; the previous mask is
    // restored before returning.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        let r = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        r
    }
}

/// The controlling terminal, when loopx runs in its foreground (README,
/// "Signals and process groups"). Every script runs in its own process group
/// (§7.3), and a background group that reads the terminal is stopped by
/// SIGTTIN; so while a script runs, its group is made the terminal's
/// foreground group and loopx takes the terminal back when it ends.
pub struct Terminal {
    /// A close-on-exec duplicate of the terminal descriptor: between fork and
    /// exec the child's 0/1/2 are already its own pipes, so the hand-over
    /// needs a descriptor of its own.
    fd: OwnedFd,
    /// loopx's own process group, foreground when loopx started.
    own: libc::pid_t,
    /// The terminal modes at start, restored after a script that was killed
    /// or interrupted (a full-screen program may leave raw mode behind).
    modes: libc::termios,
}

impl Terminal {
    /// The terminal on stdin or stderr, if it is loopx's controlling terminal
    /// and loopx's process group is its foreground group.
    pub fn detect() -> Option<Terminal> {
        // SAFETY: plain queries on the standard descriptors.
        unsafe {
            let own = libc::getpgrp();
            for fd in [0, 2] {
                if libc::isatty(fd) != 1 || libc::tcgetpgrp(fd) != own {
                    continue;
                }
                let mut modes: libc::termios = std::mem::zeroed();
                if libc::tcgetattr(fd, &mut modes) != 0 {
                    continue;
                }
                let dup = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
                if dup < 0 {
                    return None;
                }
                return Some(Terminal {
                    fd: OwnedFd::from_raw_fd(dup),
                    own,
                    modes,
                });
            }
        }
        None
    }

    fn foreground(&self) -> libc::pid_t {
        // SAFETY: a query on a descriptor loopx keeps open.
        unsafe { libc::tcgetpgrp(self.fd.as_raw_fd()) }
    }

    /// Gives the terminal to `pgid`, only while loopx holds it: if the user
    /// moved loopx to the background, nothing is taken from the shell.
    fn give(&self, pgid: libc::pid_t) {
        if self.foreground() == self.own {
            // SAFETY: tcsetpgrp on the terminal descriptor.
            without_sigttou(|| unsafe { libc::tcsetpgrp(self.fd.as_raw_fd(), pgid) });
        }
    }

    /// Takes the terminal back from `pgid`, if that group still holds it or
    /// the terminal was left to a group with no process left (a program in
    /// the script moved it to a group of its own). A live group of someone
    /// else is the user's shell, which took the terminal after a `bg`.
    fn take_back(&self, pgid: libc::pid_t) {
        let fg = self.foreground();
        if fg == pgid || (fg > 0 && fg != self.own && !group_alive(fg)) {
            // SAFETY: tcsetpgrp on the terminal descriptor.
            without_sigttou(|| unsafe { libc::tcsetpgrp(self.fd.as_raw_fd(), self.own) });
        }
    }

    /// Puts back the modes loopx started with.
    fn restore_modes(&self) {
        if self.foreground() == self.own {
            // SAFETY: tcsetattr with modes read from this terminal.
            without_sigttou(|| unsafe {
                libc::tcsetattr(self.fd.as_raw_fd(), libc::TCSADRAIN, &self.modes)
            });
        }
    }
}

/// Hands the terminal over in the child, between fork and exec, so the script
/// never runs a single instruction in the background. Only async-signal-safe
/// calls: sigprocmask, tcgetpgrp, tcsetpgrp, getpid.
fn take_terminal_in_child(fd: RawFd, loopx_group: libc::pid_t) {
    // SAFETY: see above; the mask is restored before exec.
    unsafe {
        if libc::tcgetpgrp(fd) != loopx_group {
            return;
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTTOU);
        libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old);
        libc::tcsetpgrp(fd, libc::getpid());
        libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// Takes the terminal back when dropped, so no early return leaves a dead
/// or finished group in the foreground.
struct Foreground<'a> {
    terminal: &'a Terminal,
    pgid: libc::pid_t,
}

impl Drop for Foreground<'_> {
    fn drop(&mut self) {
        // pgid 0: the spawn failed, perhaps after the child took the
        // terminal; its group is gone, and take_back reclaims it from a dead
        // group.
        self.terminal.take_back(self.pgid);
    }
}

/// A change of the script seen with WUNTRACED.
enum Waited {
    /// Stopped by this signal.
    Stopped(i32),
    Ended(Status),
}

/// Checks the script alone, including stops (Ctrl-Z while it held the
/// terminal, or SIGTTIN).
fn wait_script(pid: libc::pid_t) -> Option<Waited> {
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

/// Job control for a script holding the terminal: when it stops, loopx takes
/// the terminal back and stops itself, so the user's shell sees the job
/// stopped and gets the terminal; `fg` continues loopx, which hands the
/// terminal back and continues the script's group.
fn suspend_with(terminal: &Terminal, pgid: libc::pid_t) {
    terminal.take_back(pgid);
    // SAFETY: signals to ourselves and to the script's group. SIGTSTP is
    // discarded in an orphaned process group: then we simply go on.
    unsafe {
        libc::kill(0, libc::SIGTSTP);
    }
    terminal.give(pgid);
    kill_group(pgid, libc::SIGCONT);
}

/// Runs the script to completion. Ok(stdout) only for exit code 0 (§7.2).
pub fn run(launch: &Launch, signals: &mut Signals) -> Result<Vec<u8>, Error> {
    let mut cmd = Command::new(launch.program);
    cmd.args(launch.args)
        .current_dir(launch.cwd)
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .stdin(if launch.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    if let Some(terminal) = launch.terminal {
        let (fd, own) = (terminal.fd.as_raw_fd(), terminal.own);
        // SAFETY: the hook only makes async-signal-safe calls.
        unsafe {
            cmd.pre_exec(move || {
                take_terminal_in_child(fd, own);
                Ok(())
            });
        }
    }
    let mut foreground = launch
        .terminal
        .map(|terminal| Foreground { terminal, pgid: 0 });
    let mut child = cmd.spawn().map_err(|err| Error::Spawn {
        script: launch.label.to_string(),
        program: launch.program.display().to_string(),
        err,
    })?;
    let pid = child.id() as libc::pid_t;
    if let Some(fg) = foreground.as_mut() {
        fg.pgid = pid;
    }
    let io_err = |err| Error::io(format!("supervising script {}", launch.label), err);

    let mut stdout: Option<OwnedFd> = child.stdout.take().map(OwnedFd::from);
    let mut stdin: Option<OwnedFd> = child.stdin.take().map(OwnedFd::from);
    for fd in stdout.iter().chain(stdin.iter()) {
        set_nonblocking(fd.as_raw_fd()).map_err(io_err)?;
    }
    let input = launch.stdin.unwrap_or(&[]);
    let mut written = 0usize;
    let mut captured = Vec::new();
    // §7.3: set when an interrupt was forwarded; SIGKILL follows at this time.
    let mut deadline: Option<Instant> = None;
    let mut killed = false;
    let mut consumer = launch.consumer;
    // Set when loopx itself ends the script's group for a reason of its own
    // (the consumer went away; the script needs a terminal it cannot have):
    // the error the run then ends with.
    let mut ended_by: Option<Error> = None;

    let status = loop {
        let none = libc::pollfd {
            fd: -1,
            events: 0,
            revents: 0,
        };
        let mut fds = [none; 4];
        fds[0] = libc::pollfd {
            fd: signals.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // A negative fd is ignored by poll: the slots stay fixed.
        if let Some(fd) = &stdout {
            fds[1].fd = fd.as_raw_fd();
            fds[1].events = libc::POLLIN;
        }
        if let Some(fd) = &stdin {
            fds[2].fd = fd.as_raw_fd();
            fds[2].events = libc::POLLOUT;
        }
        if let Some(fd) = consumer {
            // No events asked: only a hang-up (always reported) matters, and
            // a stray request line must not make poll spin.
            fds[3].fd = fd;
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
        if fds[3].revents & (libc::POLLHUP | libc::POLLERR) != 0 {
            consumer = None;
            if signals.interrupted().is_none() && ended_by.is_none() {
                ended_by = Some(Error::ConsumerGone);
                kill_group(pid, libc::SIGTERM);
                deadline = Some(Instant::now() + GRACE);
            }
        }
        if let Some(sig) = ev.first_interrupt {
            // §7.3: forward to the whole group, then allow the grace period.
            kill_group(pid, sig);
            deadline = Some(Instant::now() + GRACE);
        } else if ev.repeated_interrupt && !killed {
            // A second Ctrl-C means "stop now": escalate at once. The exit
            // code stays that of the first signal.
            kill_group(pid, libc::SIGKILL);
            killed = true;
        }
        if !killed && deadline.is_some_and(|d| Instant::now() >= d) {
            kill_group(pid, libc::SIGKILL);
            killed = true;
        }
        if killed {
            // Nothing left to time: the script's exit (SIGCHLD) wakes us.
            deadline = None;
        }

        if let Some(fd) = &stdout {
            if fds[1].revents != 0
                && matches!(
                    read_available(fd.as_raw_fd(), &mut captured, None).map_err(io_err)?,
                    ReadOutcome::Eof
                )
            {
                stdout = None;
            }
        }
        if let Some(fd) = &stdin {
            if fds[2].revents != 0
                && (!write_available(fd.as_raw_fd(), input, &mut written) || written == input.len())
            {
                stdin = None;
            }
        }
        if stdin.is_some() && written == input.len() {
            stdin = None;
        }

        if ev.child || r == 0 {
            let mut ended = None;
            match (wait_script(pid), launch.terminal) {
                (Some(Waited::Stopped(_)), Some(terminal)) => suspend_with(terminal, pid),
                // The script touched the terminal while loopx does not hold
                // it (started with `&`, or under the JS API): the kernel
                // stops it there for good, and the loop would hang without
                // a word. End it with an error that says so instead.
                (Some(Waited::Stopped(signal @ (libc::SIGTTIN | libc::SIGTTOU))), None)
                    if ended_by.is_none() =>
                {
                    ended_by = Some(Error::ScriptNeedsTerminal {
                        script: launch.label.to_string(),
                        signal,
                    });
                    kill_group(pid, libc::SIGTERM);
                    kill_group(pid, libc::SIGCONT);
                    deadline.get_or_insert_with(|| Instant::now() + GRACE);
                }
                (Some(Waited::Ended(status)), _) => ended = Some(status),
                _ => {}
            }
            if let Some(status) = reap(pid).or(ended) {
                break status;
            }
        }
    };

    // The script has exited. Take what is in the pipe now — everything the
    // script wrote before it exited — but do not wait for EOF: a background
    // process may hold the pipe open for ever (README, "Signals and process
    // groups").
    if let Some(fd) = stdout.take() {
        let fd = fd.as_raw_fd();
        read_available(fd, &mut captured, Some(readable_bytes(fd))).map_err(io_err)?;
    }
    drop(stdin);
    drop(child);
    // The terminal goes back to loopx as soon as the script itself is gone;
    // what is left of its group runs on in the background, as after a shell
    // job's leader exits.
    drop(foreground);

    // A Ctrl-C typed while the script held the terminal reached only the
    // script's group: a script that died of it, or exited with the shell's
    // "interrupted" status 130, ends the loop as if loopx had received it.
    if launch.terminal.is_some()
        && matches!(status, Status::Signal(libc::SIGINT) | Status::Code(130))
    {
        signals.note_interrupt(libc::SIGINT);
    }
    // An interrupt, or a reason of loopx's own: what is left of the group
    // gets the rest of its grace period (§7.3), then the run ends with it.
    let ending = match signals.interrupted() {
        Some(signal) => Some(Error::Interrupted { signal }),
        None => ended_by,
    };
    if let Some(err) = ending {
        let deadline = if killed {
            Instant::now()
        } else {
            deadline.unwrap_or_else(|| Instant::now() + GRACE)
        };
        wait_for_group(pid, signals, deadline);
        if let Some(terminal) = launch.terminal {
            terminal.restore_modes();
        }
        return Err(err);
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
        Status::Signal(signal) => {
            if let Some(terminal) = launch.terminal {
                terminal.restore_modes();
            }
            Err(Error::ScriptKilled {
                script: launch.label.to_string(),
                signal,
            })
        }
    }
}

/// After an interrupt: waits until no process of the group remains, or kills
/// it when the grace period ends (§7.3). A second interrupt escalates at once.
/// Group exit is not an event, so it is checked on short ticks.
fn wait_for_group(pgid: libc::pid_t, signals: &mut Signals, deadline: Instant) {
    let mut killed = false;
    let mut killed_at = Instant::now();
    loop {
        reap(-1);
        if !group_alive(pgid) {
            return;
        }
        let now = Instant::now();
        if !killed && now >= deadline {
            kill_group(pgid, libc::SIGKILL);
            killed = true;
            killed_at = now;
            continue;
        }
        // SIGKILL cannot be ignored; give the kernel a moment to finish
        // (a process in uninterruptible sleep dies when it wakes up).
        if killed && now >= killed_at + Duration::from_secs(2) {
            return;
        }
        let mut pfd = libc::pollfd {
            fd: signals.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 20) };
        if signals.drain().repeated_interrupt && !killed {
            kill_group(pgid, libc::SIGKILL);
            killed = true;
            killed_at = Instant::now();
        }
    }
}
