//! The supervisor: one poll(2) loop that owns everything loopx waits on
//! while a loop runs (DESIGN.md "Beyond the spec"): the signal self-pipe,
//! the API channel, the current script and one timer.
//!
//! While a script runs it is in one of three states:
//! - `Running`: its stdout is read, its stdin fed; the timer is the
//!   `--timeout` deadline, if any.
//! - `Terminating`: loopx asked the group to end (a forwarded interrupt, a
//!   timeout, a consumer gone, a script stuck on the terminal); the timer is
//!   the end of the §7.3 grace period.
//! - `Killed`: SIGKILL was sent; the timer is when loopx stops waiting for
//!   a process the kernel has not yet finished off.
//!
//! Between scripts it is idle: waiting for the consumer's next request, a
//! retry delay, or nothing at all. Events are signals (a first interrupt, a
//! repeated one), the consumer going away or asking for the next output, the
//! script exiting or stopping, and the timer coming due.
//!
//! The supervisor reports how a script ended (`Finished`); engine.rs decides
//! what that means for the loop.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::duration;
use crate::error::Error;
use crate::messages;
use crate::proc::descendants;
use crate::proc::process::{self, Child, Launch, ReadOutcome, Status, Waited};
use crate::proc::signals::{Events, Signals};
use crate::proc::terminal::{self, Terminal};
use crate::proc::watcher;

pub use crate::proc::process::GRACE;

/// After SIGKILL, how long to wait for the kernel to finish the group (a
/// process in uninterruptible sleep dies when it wakes up).
const KILL_WAIT: Duration = Duration::from_secs(2);

/// How often to look whether the rest of a group has gone, once its leader
/// has: the last member's exit is not always an event of ours.
const GROUP_TICK: Duration = Duration::from_millis(20);

/// How long after a Ctrl-C at the terminal loopx says that it is waiting;
/// a script that ends at once makes no noise.
const NOTICE_AFTER: Duration = Duration::from_millis(500);

/// Why a script run ended, when loopx ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The script ended by itself.
    Natural,
    /// `--timeout` passed; the group was terminated.
    TimedOut,
    /// An interrupt (§7.3) ended the run; the group was terminated.
    Interrupted(i32),
    /// The API's consumer went away (§9.1); the group was terminated.
    ConsumerGone,
    /// The script was stopped for using a terminal loopx does not hold.
    NeedsTerminal(i32),
}

/// A script run, as it ended.
pub struct Finished {
    pub status: Status,
    pub stdout: Vec<u8>,
    pub ending: Ending,
}

/// What to run and how.
pub struct Script<'a> {
    pub launch: Launch<'a>,
    /// The piped input (§6.6); empty stdin when None.
    pub stdin: Option<&'a [u8]>,
    pub timeout: Option<Duration>,
    /// `workflow:script`, for messages.
    pub label: &'a str,
}

/// The script's state while it runs (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running { timeout_at: Option<Instant> },
    Terminating { kill_at: Instant },
    Killed { give_up_at: Instant },
}

/// The API's request channel: one line `next` per request; EOF or a hang-up
/// while a script runs means the consumer is gone (api.rs).
struct Channel {
    fd: RawFd,
    line: Vec<u8>,
}

pub struct Supervisor {
    /// The watcher, to start once the first script is spawned, then
    /// started (watcher.rs); told the run is over when this is dropped,
    /// first (fields drop in order): its exit's SIGCHLD still finds the
    /// handlers' pipe open.
    pending_watcher: Option<watcher::Pending>,
    watcher: Option<watcher::Watcher>,
    signals: Signals,
    channel: Option<Channel>,
    terminal: Option<Terminal>,
    /// loopx's children that are not the run's to end (descendants.rs).
    spared: Vec<libc::pid_t>,
}

fn pollfd(fd: RawFd, events: i16) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Milliseconds until `at`, rounded up so the wake-up is never early; -1
/// (wait for ever) without a timer.
fn poll_timeout(at: Option<Instant>) -> i32 {
    match at {
        None => -1,
        Some(at) => {
            let left = at.saturating_duration_since(Instant::now());
            let ms = left.as_nanos().div_ceil(1_000_000);
            ms.min(i32::MAX as u128) as i32
        }
    }
}

fn earliest(times: &[Option<Instant>]) -> Option<Instant> {
    times.iter().flatten().min().copied()
}

/// `now + d`, or None (no deadline) when that is beyond what Instant holds.
pub fn deadline(d: Duration) -> Option<Instant> {
    Instant::now().checked_add(d)
}

/// One script's run: the child, its pipes, and what has happened so far.
struct Run<'a> {
    script: &'a Script<'a>,
    pid: libc::pid_t,
    /// The process group its descendants share (the sentinel's, if any).
    pgid: libc::pid_t,
    stdout: Option<OwnedFd>,
    stdin: Option<OwnedFd>,
    written: usize,
    captured: Vec<u8>,
    state: State,
    ending: Ending,
    /// The script's own status, once it has exited.
    leader: Option<Status>,
    /// The group's sentinel while the script holds the terminal.
    sentinel: Option<libc::pid_t>,
    /// When to say that loopx waits for the group (terminal only).
    notice_at: Option<Instant>,
    /// Said already: once per run.
    noticed: bool,
}

impl Supervisor {
    /// `channel`: the API's request descriptor; `terminal`: the terminal to
    /// share with scripts (CLI in a terminal's foreground only).
    pub fn new(signals: Signals, channel: Option<RawFd>, terminal: Option<Terminal>) -> Supervisor {
        Supervisor {
            pending_watcher: None,
            watcher: None,
            signals,
            channel: channel.map(|fd| Channel {
                fd,
                line: Vec::new(),
            }),
            terminal,
            spared: Vec::new(),
        }
    }

    /// The watcher to start right after the first script is spawned.
    pub fn watch(&mut self, pending: Option<watcher::Pending>) {
        self.pending_watcher = pending;
    }

    /// Leaves these children of loopx, and what they start, alone when
    /// loopx ends a script: those it had before the run (the `tee` of a
    /// `2> >(tee log)`) and its watcher (watcher.rs).
    pub fn spare(&mut self, pids: Vec<libc::pid_t>) {
        self.spared = pids;
    }

    fn escapees(&self, skip_group: Option<libc::pid_t>) -> descendants::Targets {
        descendants::find(skip_group, &self.spared)
    }

    /// Waits in poll(2) for `fds` (the signal pipe is added first) or the
    /// timer; returns the signal events.
    fn wait(&mut self, fds: &mut [libc::pollfd], timer: Option<Instant>) -> Result<Events, Error> {
        fds[0] = pollfd(self.signals.fd(), libc::POLLIN);
        // SAFETY: `fds` is a valid array of pollfd for its length.
        let r = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                poll_timeout(timer),
            )
        };
        if r < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(Error::io("waiting for the script", err));
            }
        }
        Ok(self.signals.drain())
    }

    /// Between iterations (§7.3): an interrupt that arrived ends the run at
    /// once; descendants of earlier scripts that ended since are reaped.
    pub fn between_scripts(&mut self) -> Result<(), Error> {
        self.signals.drain();
        process::reap_all(|_, _| {});
        match self.signals.interrupted() {
            Some(signal) => Err(Error::Interrupted { signal }),
            None => Ok(()),
        }
    }

    /// Idle for `d` (a retry delay). An interrupt ends the run at once
    /// (§7.3, no script is running); so does a consumer that goes away.
    pub fn sleep(&mut self, d: Duration) -> Result<(), Error> {
        let until = deadline(d);
        loop {
            self.between_scripts()?;
            if until.is_some_and(|u| Instant::now() >= u) {
                return Ok(());
            }
            let mut fds = [pollfd(-1, 0); 2];
            if let Some(c) = &self.channel {
                // No events asked: only a hang-up matters here.
                fds[1] = pollfd(c.fd, 0);
            }
            self.wait(&mut fds, until)?;
            if fds[1].revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                return Err(Error::ConsumerGone);
            }
        }
    }

    /// API only: waits for the consumer's next request. Ok(false) when it
    /// is gone (EOF).
    pub fn next_requested(&mut self) -> Result<bool, Error> {
        loop {
            self.between_scripts()?;
            let Some(fd) = self.channel.as_ref().map(|c| c.fd) else {
                return Ok(true);
            };
            // A request that came with an earlier read.
            if let Some(answer) = self.buffered_request()? {
                return Ok(answer);
            }
            let mut fds = [pollfd(-1, 0), pollfd(fd, libc::POLLIN)];
            self.wait(&mut fds, None)?;
            if fds[1].revents == 0 {
                continue;
            }
            if let Some(answer) = self.read_request()? {
                return Ok(answer);
            }
        }
    }

    /// Reads what the channel has; Some once a whole request or EOF came.
    fn read_request(&mut self) -> Result<Option<bool>, Error> {
        let Some(channel) = self.channel.as_mut() else {
            return Ok(Some(true));
        };
        let mut buf = [0u8; 64];
        // SAFETY: reading into a stack buffer of its length.
        let n = unsafe { libc::read(channel.fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            return match err.kind() {
                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => Ok(None),
                _ => Err(Error::io("reading the API channel", err)),
            };
        }
        if n == 0 {
            return Ok(Some(false));
        }
        channel.line.extend_from_slice(&buf[..n as usize]);
        self.buffered_request()
    }

    /// The first whole request line read so far, if any.
    fn buffered_request(&mut self) -> Result<Option<bool>, Error> {
        let Some(channel) = self.channel.as_mut() else {
            return Ok(Some(true));
        };
        let Some(end) = channel.line.iter().position(|&b| b == b'\n') else {
            return Ok(None);
        };
        let line: Vec<u8> = channel.line.drain(..=end).collect();
        if line == b"next\n" {
            Ok(Some(true))
        } else {
            Err(Error::io(
                "unexpected request on the API channel",
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    String::from_utf8_lossy(&line[..line.len() - 1]).into_owned(),
                ),
            ))
        }
    }

    /// Runs one script to its end. Err only when it cannot be started or
    /// supervised; every way it can end is a `Finished`.
    pub fn run_script(&mut self, script: &Script) -> Result<Finished, Error> {
        let spawn_error = |err| Error::Spawn {
            script: script.label.to_string(),
            program: script.launch.program.display().to_string(),
            err,
        };
        let sentinel = match &self.terminal {
            Some(t) => {
                let pid = terminal::spawn_sentinel(None).map_err(spawn_error)?;
                // The group takes the terminal before the script exists.
                t.give(pid);
                Some(pid)
            }
            None => None,
        };
        let launch = Launch {
            group: sentinel.or(script.launch.group),
            ..script.launch
        };
        let child = match process::spawn(&launch) {
            Ok(child) => child,
            Err(err) => {
                if let (Some(t), Some(pid)) = (&self.terminal, sentinel) {
                    end_sentinel(pid);
                    t.take_back(pid);
                }
                return Err(spawn_error(err));
            }
        };
        if let Some(pending) = self.pending_watcher.take() {
            // After the spawn: the script need not wait for it.
            self.watcher = pending.start();
            self.spared
                .extend(self.watcher.as_ref().map(watcher::Watcher::pid));
        }
        let Child {
            pid,
            pgid,
            stdout,
            stdin,
        } = child;
        let mut run = Run {
            script,
            pid,
            pgid,
            stdout: Some(stdout),
            stdin,
            written: 0,
            captured: Vec::new(),
            state: State::Running {
                timeout_at: script.timeout.and_then(deadline),
            },
            ending: Ending::Natural,
            leader: None,
            sentinel,
            notice_at: None,
            noticed: false,
        };
        self.supervise(&mut run)?;
        Ok(Finished {
            status: run.leader.unwrap_or(Status::Signal(libc::SIGKILL)),
            stdout: run.captured,
            ending: run.ending,
        })
    }

    fn supervise(&mut self, run: &mut Run) -> Result<(), Error> {
        let io_err = |err| Error::io(format!("supervising script {}", run.script.label), err);
        loop {
            if let Some(done) = self.finished(run) {
                return done;
            }
            let timer = self.timer(run);
            let mut fds = [pollfd(-1, 0); 4];
            if let Some(fd) = &run.stdout {
                fds[1] = pollfd(fd.as_raw_fd(), libc::POLLIN);
            }
            if let Some(fd) = &run.stdin {
                fds[2] = pollfd(fd.as_raw_fd(), libc::POLLOUT);
            }
            if let (Some(c), Ending::Natural) = (&self.channel, run.ending) {
                // No events asked: only a hang-up (always reported) matters,
                // and a stray request line must not make poll spin.
                fds[3] = pollfd(c.fd, 0);
            }
            let ev = self.wait(&mut fds, timer)?;
            self.on_signals(run, ev);
            if fds[3].revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                self.end_group(run, Ending::ConsumerGone, libc::SIGTERM);
            }
            if ev.child || timer.is_some_and(|t| Instant::now() >= t) {
                self.on_children(run);
            }
            self.on_timer(run);
            if let Some(fd) = &run.stdout {
                if fds[1].revents != 0
                    && process::read_available(fd.as_raw_fd(), &mut run.captured, None)
                        .map_err(io_err)?
                        == ReadOutcome::Eof
                {
                    run.stdout = None;
                }
            }
            let input = run.script.stdin.unwrap_or(&[]);
            if let Some(fd) = &run.stdin {
                if fds[2].revents != 0
                    && !process::write_available(fd.as_raw_fd(), input, &mut run.written)
                {
                    run.stdin = None;
                }
            }
            if run.written == input.len() {
                run.stdin = None;
            }
        }
    }

    /// Whether supervision is over: the script has exited and, when loopx
    /// ended it, its whole group too (§7.3) and every other descendant of
    /// loopx, or the wait after SIGKILL ran out. A natural end leaves
    /// background processes be (README).
    fn finished(&mut self, run: &mut Run) -> Option<Result<(), Error>> {
        run.leader?;
        if run.ending == Ending::Natural {
            return Some(Ok(()));
        }
        // Escapees too (descendants.rs): those loopx signalled when it ended
        // the script, and any that joined them since.
        let gone = !process::group_alive(run.pgid) && self.escapees(None).is_empty();
        let given_up =
            matches!(run.state, State::Killed { give_up_at } if Instant::now() >= give_up_at);
        if !(gone || given_up) {
            return None;
        }
        // What loopx ended is reaped now, not left as a zombie for init
        // (escapees re-parented to loopx, the subreaper, among them).
        process::reap_all(|_, _| {});
        if let Some(t) = &self.terminal {
            t.restore_modes();
        }
        Some(Ok(()))
    }

    fn timer(&self, run: &Run) -> Option<Instant> {
        let state = match run.state {
            State::Running { timeout_at } => timeout_at,
            State::Terminating { kill_at } => Some(kill_at),
            State::Killed { give_up_at } => Some(give_up_at),
        };
        let tick = (run.leader.is_some() && run.ending != Ending::Natural)
            .then(|| Instant::now() + GROUP_TICK);
        earliest(&[state, run.notice_at, tick])
    }

    fn on_signals(&mut self, run: &mut Run, ev: Events) {
        if let Some(sig) = ev.first_interrupt {
            // §7.3: forward to the whole group, then the grace period.
            self.end_group(run, Ending::Interrupted(sig), sig);
        } else if ev.repeated_interrupt {
            // A second Ctrl-C means "stop now". The exit code stays that of
            // the first signal.
            self.kill(run, Instant::now());
        }
    }

    /// An interrupt that reached the script's group rather than loopx (a
    /// Ctrl-C at the terminal, seen through the sentinel or the script's
    /// own status): as if loopx had received it, but not sent again.
    fn on_terminal_interrupt(&mut self, run: &mut Run, sig: i32) {
        let ev = self.signals.note_interrupt(sig);
        if ev.first_interrupt.is_some() {
            self.end_group(run, Ending::Interrupted(sig), 0);
        } else if ev.repeated_interrupt {
            self.kill(run, Instant::now());
        }
    }

    /// loopx ends the script's group for `why`: `sig` to the group (0 for
    /// none: it already had it), then the grace period. A later reason does
    /// not restart the grace period; an interrupt's exit code wins.
    fn end_group(&mut self, run: &mut Run, why: Ending, sig: i32) {
        let interrupt = |e: Ending| matches!(e, Ending::Interrupted(_));
        if run.ending == Ending::Natural || (interrupt(why) && !interrupt(run.ending)) {
            run.ending = why;
        }
        if sig != 0 {
            process::kill_group(run.pgid, sig);
        }
        // Every other descendant loopx has, wherever it went (setsid, a
        // detached child): the same signal, or the one the group got from
        // the terminal, and the same grace period.
        let escapees = match (sig, why) {
            (0, Ending::Interrupted(s)) => s,
            (0, _) => libc::SIGTERM,
            (s, _) => s,
        };
        descendants::signal(&self.escapees(Some(run.pgid)), escapees);
        if let Ending::NeedsTerminal(_) = why {
            process::kill_group(run.pgid, libc::SIGCONT);
        }
        if let State::Running { .. } = run.state {
            run.state = State::Terminating {
                kill_at: Instant::now() + GRACE,
            };
        }
        if self.terminal.is_some() && interrupt(why) && !run.noticed {
            run.noticed = true;
            run.notice_at = Some(Instant::now() + NOTICE_AFTER);
        }
    }

    /// The script and the other children: exits, stops, the sentinel.
    fn on_children(&mut self, run: &mut Run) {
        if run.leader.is_none() {
            match (process::wait_one(run.pid), &self.terminal) {
                (Some(Waited::Stopped(_)), Some(t)) => t.suspend_with(run.pgid),
                // The script touched the terminal while loopx does not hold
                // it (started with `&`, or under the JS API): the kernel
                // stops it there for good. End it with an error that says so.
                (Some(Waited::Stopped(sig @ (libc::SIGTTIN | libc::SIGTTOU))), None) => {
                    self.end_group(run, Ending::NeedsTerminal(sig), libc::SIGTERM);
                }
                (Some(Waited::Ended(status)), _) => self.leader_exited(run, status),
                _ => {}
            }
        }
        let (pid, sentinel) = (run.pid, run.sentinel);
        let mut ended = Vec::new();
        process::reap_all(|p, status| {
            if p == pid || Some(p) == sentinel {
                ended.push((p, status));
            }
        });
        for (p, status) in ended {
            if p == pid {
                self.leader_exited(run, status);
            } else {
                self.sentinel_ended(run, status);
            }
        }
    }

    fn sentinel_ended(&mut self, run: &mut Run, status: Status) {
        run.sentinel = None;
        let Status::Signal(sig @ (libc::SIGINT | libc::SIGHUP)) = status else {
            return;
        };
        self.on_terminal_interrupt(run, sig);
        // A fresh sentinel for the next Ctrl-C, while the group still holds
        // the terminal.
        if let (None, Some(t)) = (run.leader, &self.terminal) {
            if t.held_by(run.pgid) {
                // Without a fresh one (fork failed), the grace period still
                // ends the group.
                run.sentinel = terminal::spawn_sentinel(Some(run.pgid)).ok();
            }
        }
    }

    fn leader_exited(&mut self, run: &mut Run, status: Status) {
        if run.leader.is_some() {
            return;
        }
        run.leader = Some(status);
        // Take what is in the pipe now (everything the script wrote before
        // it exited) but do not wait for EOF: a background process may hold
        // the pipe open for ever (README, "Signals and process groups").
        if let Some(fd) = run.stdout.take() {
            let fd = fd.as_raw_fd();
            let _ =
                process::read_available(fd, &mut run.captured, Some(process::readable_bytes(fd)));
        }
        run.stdin = None;
        if self.terminal.is_none() {
            return;
        }
        // The sentinel's own end may not have been seen yet: a Ctrl-C it
        // died of counts before the script's status is judged.
        if let Some(pid) = run.sentinel.take() {
            if let Some(status) = end_sentinel(pid) {
                self.sentinel_ended(run, status);
            }
        }
        // The terminal goes back to loopx as soon as the script itself is
        // gone; what is left of its group runs on in the background, as
        // after a shell job's leader exits.
        if let Some(t) = &self.terminal {
            t.take_back(run.pgid);
        }
        // A Ctrl-C typed while the script held the terminal reached only its
        // group: a script that died of it, or exited with the shell's
        // "interrupted" status 130, ends the loop as if loopx had received it.
        if run.ending == Ending::Natural
            && matches!(status, Status::Signal(libc::SIGINT) | Status::Code(130))
        {
            self.on_terminal_interrupt(run, libc::SIGINT);
        }
        if let (Status::Signal(_), Some(t)) = (status, &self.terminal) {
            t.restore_modes();
        }
    }

    fn on_timer(&mut self, run: &mut Run) {
        let now = Instant::now();
        match run.state {
            State::Running {
                timeout_at: Some(at),
            } if now >= at => {
                self.end_group(run, Ending::TimedOut, libc::SIGTERM);
            }
            State::Terminating { kill_at } if now >= kill_at => self.kill(run, now),
            _ => {}
        }
        if run.notice_at.is_some_and(|at| now >= at) {
            run.notice_at = None;
            if let State::Terminating { kill_at } = run.state {
                let left = kill_at.saturating_duration_since(now);
                let secs = Duration::from_secs(left.as_millis().div_ceil(1000) as u64);
                messages::notice(&format!(
                    "waiting up to {} for {} to exit (Ctrl-C again to kill it now)",
                    duration::format(secs),
                    run.script.label
                ));
            }
        }
    }

    /// SIGKILL to the script's group and every other descendant, now.
    fn kill(&self, run: &mut Run, now: Instant) {
        if let State::Killed { .. } = run.state {
            return;
        }
        process::kill_group(run.pgid, libc::SIGKILL);
        descendants::signal(&self.escapees(Some(run.pgid)), libc::SIGKILL);
        run.state = State::Killed {
            give_up_at: now + KILL_WAIT,
        };
    }
}

/// Ends a sentinel and reaps it; its status if it had died by itself.
fn end_sentinel(pid: libc::pid_t) -> Option<Status> {
    // SAFETY: signalling and reaping our own child.
    unsafe {
        let mut status: libc::c_int = 0;
        if libc::waitpid(pid, &mut status, libc::WNOHANG) == pid {
            return Some(process::decode(status));
        }
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, &mut status, 0);
    }
    None
}
