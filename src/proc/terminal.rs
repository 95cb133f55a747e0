//! The controlling terminal, when loopx runs in its foreground (README,
//! "Signals and process groups").
//!
//! Every script runs in its own process group (§7.3), and a background group
//! that reads the terminal is stopped by SIGTTIN; so while a script runs,
//! its group is the terminal's foreground group and loopx takes the terminal
//! back when it ends. Interactive agent CLIs work that way.
//!
//! A Ctrl-C typed then goes to the script's group, not to loopx. So that it
//! always reaches loopx too (even when the script is stuck, say in
//! `out=$(agent)` while a background child holds the pipe), the group gets
//! a member of loopx's own first: a *sentinel*, a forked copy of loopx that
//! only waits, with SIGINT's default action. It leads the group, takes the
//! terminal for it before the script starts (so the script never runs a
//! single instruction in the background), and dies of the Ctrl-C, which
//! loopx sees as a child ending by SIGINT.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::proc::process::{group_alive, kill_group};

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

pub struct Terminal {
    /// A close-on-exec duplicate of the terminal descriptor.
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
    pub fn give(&self, pgid: libc::pid_t) {
        if self.foreground() == self.own {
            // SAFETY: tcsetpgrp on the terminal descriptor.
            without_sigttou(|| unsafe { libc::tcsetpgrp(self.fd.as_raw_fd(), pgid) });
        }
    }

    /// Whether `pgid` has the terminal now.
    pub fn held_by(&self, pgid: libc::pid_t) -> bool {
        self.foreground() == pgid
    }

    /// Takes the terminal back from `pgid`, if that group still holds it or
    /// the terminal was left to a group with no process left (a program in
    /// the script moved it to a group of its own). A live group of someone
    /// else is the user's shell, which took the terminal after a `bg`.
    pub fn take_back(&self, pgid: libc::pid_t) {
        let fg = self.foreground();
        if fg == pgid || (fg > 0 && fg != self.own && !group_alive(fg)) {
            // SAFETY: tcsetpgrp on the terminal descriptor.
            without_sigttou(|| unsafe { libc::tcsetpgrp(self.fd.as_raw_fd(), self.own) });
        }
    }

    /// Puts back the modes loopx started with.
    pub fn restore_modes(&self) {
        if self.foreground() == self.own {
            // SAFETY: tcsetattr with modes read from this terminal.
            without_sigttou(|| unsafe {
                libc::tcsetattr(self.fd.as_raw_fd(), libc::TCSADRAIN, &self.modes)
            });
        }
    }

    /// Job control for a script holding the terminal: when it stops (Ctrl-Z),
    /// loopx takes the terminal back and stops itself, so the user's shell
    /// sees the job stopped and gets the terminal; `fg` continues loopx,
    /// which hands the terminal back and continues the script's group.
    pub fn suspend_with(&self, pgid: libc::pid_t) {
        self.take_back(pgid);
        // SAFETY: a signal to our own group. SIGTSTP is discarded in an
        // orphaned process group: then we simply go on.
        unsafe {
            libc::kill(0, libc::SIGTSTP);
        }
        self.give(pgid);
        kill_group(pgid, libc::SIGCONT);
    }
}

/// Starts a sentinel (see the module comment). `group`: the group to join,
/// or None to lead a new one. Returns its pid, which is the new group's id.
pub fn spawn_sentinel(group: Option<libc::pid_t>) -> std::io::Result<libc::pid_t> {
    let pgid = group.unwrap_or(0);
    // SAFETY: the child makes only async-signal-safe calls (setpgid,
    // sigaction, sigprocmask, close, pause, _exit) and never returns.
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if pid == 0 {
            sentinel_body(pgid);
        }
        // Also from the parent, so the group exists when spawn returns
        // (the usual race between fork and the child's own setpgid).
        libc::setpgid(pid, if pgid == 0 { pid } else { pgid });
        Ok(pid)
    }
}

/// The sentinel's life: join the group, let SIGINT (and SIGHUP, unless loopx
/// ignores it, as under nohup) kill it, ignore what is not a Ctrl-C, hold
/// none of loopx's descriptors, wait.
unsafe fn sentinel_body(pgid: libc::pid_t) -> ! {
    if libc::setpgid(0, pgid) != 0 {
        libc::_exit(0);
    }
    let mut sa: libc::sigaction = std::mem::zeroed();
    libc::sigemptyset(&mut sa.sa_mask);
    sa.sa_sigaction = libc::SIG_DFL;
    libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    let mut old: libc::sigaction = std::mem::zeroed();
    libc::sigaction(libc::SIGHUP, std::ptr::null(), &mut old);
    if old.sa_sigaction != libc::SIG_IGN {
        libc::sigaction(libc::SIGHUP, &sa, std::ptr::null_mut());
    }
    // A SIGTERM or SIGQUIT sent to the script's group is not a Ctrl-C; loopx
    // ends the sentinel itself when the script is done.
    sa.sa_sigaction = libc::SIG_IGN;
    for sig in [libc::SIGTERM, libc::SIGQUIT, libc::SIGCHLD, libc::SIGPIPE] {
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    // loopx's descriptors: stdio (its stdout may be read to EOF by
    // someone), the signal pipe, the terminal, a log. None is needed here.
    for fd in 0..256 {
        libc::close(fd);
    }
    loop {
        libc::pause();
    }
}
