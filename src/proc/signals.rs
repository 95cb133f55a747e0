//! Signal reception for `loopx run` (§7.3). The handler does only
//! async-signal-safe work: it writes one byte per signal into a non-blocking
//! self-pipe. Everything else happens in normal code: the supervisor's poll
//! loop (supervisor.rs) watches the pipe's read end.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

/// Signals other than SIGCHLD that reached the handler: for code that waits
/// outside the supervisor (hooks.rs), a change means loopx was interrupted.
static RECEIVED: AtomicU32 = AtomicU32::new(0);

/// How many signals other than SIGCHLD loopx has caught so far.
pub fn received() -> u32 {
    RECEIVED.load(Ordering::Relaxed)
}

/// loopx's own pid. Between fork and exec a child still runs this handler
/// with the inherited self-pipe; its bytes would read as a second signal.
static OWN_PID: AtomicI32 = AtomicI32::new(-1);

/// Set on a byte when the sender was our parent process. The npm shim forwards
/// every SIGINT it gets, and a Ctrl-C at the terminal reaches both it and us:
/// the forwarded copy must not count as a second Ctrl-C. A parent that sends
/// signals on its own (a supervisor, a test) must still be able to escalate,
/// so copies are matched by count, not dropped (see `Signals::count`).
const FROM_PARENT: u8 = 0x80;

#[cfg(any(target_os = "linux", target_os = "android"))]
unsafe fn errno_location() -> *mut libc::c_int {
    libc::__errno_location()
}

#[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
unsafe fn errno_location() -> *mut libc::c_int {
    libc::__error()
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: only async-signal-safe calls (getpid, getppid, write) and errno is
    // restored so the interrupted code never sees it change.
    unsafe {
        let errno = errno_location();
        let saved = *errno;
        if libc::getpid() != OWN_PID.load(Ordering::Relaxed) {
            *errno = saved;
            return;
        }
        if sig != libc::SIGCHLD {
            RECEIVED.fetch_add(1, Ordering::Relaxed);
        }
        let mut byte = sig as u8;
        if sig != libc::SIGCHLD && !info.is_null() && (*info).si_pid() == libc::getppid() {
            byte |= FROM_PARENT;
        }
        let fd = WRITE_FD.load(Ordering::Relaxed);
        if fd >= 0 {
            // A full pipe means wake-ups are already pending; losing the byte
            // is harmless for SIGCHLD, and interrupts are rare enough that the
            // 64 KiB pipe never fills with them.
            libc::write(fd, (&byte as *const u8).cast(), 1);
        }
        *errno = saved;
    }
}

/// Makes sure the handler runs on an alternate signal stack (SA_ONSTACK).
/// On the main stack, a SIGCHLD that arrives while loopx is deep in a call
/// puts the handler's frame below everything touched so far: after
/// thousands of iterations a stack page can become resident for the first
/// time, and the soak benchmark (B7) would show memory that grew by chance.
/// Rust's runtime usually gives the main thread an alternate stack already
/// (for its stack-overflow report); when it has none, one is made here, for
/// the life of the process.
fn ensure_altstack() {
    const SIZE: usize = 64 * 1024;
    // SAFETY: sigaltstack with a null new stack only reads the current one;
    // the new stack is leaked, so it outlives every handler run on it.
    unsafe {
        let mut current: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &mut current) == 0
            && current.ss_flags & libc::SS_DISABLE == 0
        {
            return;
        }
        let stack = Box::leak(vec![0u8; SIZE].into_boxed_slice());
        let new = libc::stack_t {
            ss_sp: stack.as_mut_ptr().cast(),
            ss_flags: 0,
            ss_size: SIZE,
        };
        // Without it the handler runs on the main stack, as before.
        libc::sigaltstack(&new, std::ptr::null_mut());
    }
}

/// What the pipe reported since the last drain.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Events {
    /// A child changed state: reap it.
    pub child: bool,
    /// The first ending signal (`ENDING`) of this run, when it arrived in
    /// this drain.
    pub first_interrupt: Option<i32>,
    /// A further, genuine interrupt after the first one (escalation).
    pub repeated_interrupt: bool,
}

/// The signals that end a run: SIGINT and SIGTERM (§7.3), and every other
/// signal whose default action would kill loopx and orphan the script's
/// group (SIGHUP: a closed terminal; the rest as tini handles them). Each is
/// forwarded to the group with the grace period, and the exit code is
/// 128 + N. Not SIGPIPE (the Rust runtime ignores it), not SIGXFSZ (loopx
/// writes files with it ignored), nor the synchronous faults.
pub const ENDING: &[i32] = &[
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGXCPU,
    // Linux's power-failure signal; other systems have none by that name.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    libc::SIGPWR,
];

/// The signal the kernel sends loopx when the npm shim dies
/// (shim_parent.rs). A real-time one: the kernel sends it once per exiting
/// thread of the parent (each re-parents loopx to the next), so it may come
/// several times for one death, and as SIGTERM those copies would read as a
/// second SIGTERM ("stop now", no grace period). It counts as one SIGTERM,
/// once (`Signals::drain`).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn parent_death_signal() -> i32 {
    libc::SIGRTMAX()
}

/// Counts are kept per signal number; the pipe carries 7 bits of it.
const SLOTS: usize = 128;

/// Index of a signal in `Signals::counts`.
fn slot(sig: i32) -> usize {
    (sig as usize) % SLOTS
}

/// The signals routed to the self-pipe so far, one bit each: children get
/// them back at their default in the one `sigaction` each that
/// `posix_spawn` makes for them (`caught`), rather than a query and a set.
static CAUGHT: AtomicU64 = AtomicU64::new(0);

/// Signal `sig`'s bit in `CAUGHT` (signals 1 to 64).
fn bit(sig: i32) -> u64 {
    1u64.checked_shl((sig as u32).wrapping_sub(1)).unwrap_or(0)
}

/// The signals `catch` routed to the pipe, as a set (process.rs and
/// watcher.rs give them their default in children).
pub fn caught() -> libc::sigset_t {
    let bits = CAUGHT.load(Ordering::Relaxed);
    // SAFETY: a zeroed sigset initialised by sigemptyset, then filled.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in 1..=64 {
            if bits & bit(sig) != 0 {
                libc::sigaddset(&mut set, sig);
            }
        }
        set
    }
}

/// Routes `sig` to the self-pipe, unless it was ignored (inherited through
/// exec): such a signal stays ignored, as the shell meant it (nohup's
/// SIGHUP; SIGINT and SIGQUIT for a `&` job without job control), the
/// classic `if (signal(s, SIG_IGN) != SIG_IGN)`. One `sigaction` each, which
/// returns the old action; an ignored one is then put back (while the
/// signals are blocked, `install`: none is caught in between).
fn catch_unless_ignored(sig: i32) -> io::Result<()> {
    let old = set_handler(sig)?;
    if old.sa_sigaction == libc::SIG_IGN {
        // SAFETY: restoring the action sigaction just returned.
        unsafe {
            libc::sigaction(sig, &old, std::ptr::null_mut());
        }
        return Ok(());
    }
    CAUGHT.fetch_or(bit(sig), Ordering::Relaxed);
    Ok(())
}

/// Installs the handler for `sig`; returns the action it replaced.
fn set_handler(sig: i32) -> io::Result<libc::sigaction> {
    // SAFETY: a zeroed sigaction with our handler and an empty mask; the
    // old action is written into a zeroed struct.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, &sa, &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(old)
    }
}

/// Routes `sig` to the self-pipe.
fn catch(sig: i32) -> io::Result<()> {
    set_handler(sig)?;
    CAUGHT.fetch_or(bit(sig), Ordering::Relaxed);
    Ok(())
}

/// The `ENDING` signals blocked in this thread until dropped (then the
/// mask is as before).
struct Blocked(libc::sigset_t);

impl Blocked {
    fn ending() -> Blocked {
        // SAFETY: sigsets initialised by sigemptyset before use;
        // pthread_sigmask on this thread with valid pointers.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &sig in ENDING {
                libc::sigaddset(&mut set, sig);
            }
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut old);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            Blocked(old)
        }
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask `ending` saved.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut());
        }
    }
}

/// Owner of the self-pipe. One per process, created by `install`.
pub struct Signals {
    read: OwnedFd,
    write: OwnedFd,
    /// The first interrupt received: its number decides the exit code.
    first: Option<i32>,
    /// Interrupts received per signal number and origin [other, parent].
    counts: [[u32; 2]; SLOTS],
    /// Genuine interrupts so far (see `count`).
    genuine: u32,
    /// The parent-death signal, once it is caught (`catch_parent_death`).
    death: Option<i32>,
    /// Whether it arrived: only its first copy counts.
    parent_died: bool,
}

fn set_flags(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain fcntl calls on a descriptor we own.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
        let fdfl = libc::fcntl(fd, libc::F_GETFD);
        if fdfl < 0 || libc::fcntl(fd, libc::F_SETFD, fdfl | libc::FD_CLOEXEC) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

impl Drop for Signals {
    /// The pipe closes: the handlers (still installed) must not write to a
    /// descriptor number that something else may open next.
    fn drop(&mut self) {
        let _ = WRITE_FD.compare_exchange(
            self.write.as_raw_fd(),
            -1,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
}

impl Signals {
    /// Installs handlers for the `ENDING` signals and SIGCHLD. Call once,
    /// before the first script starts.
    pub fn install() -> io::Result<Signals> {
        let signals = Signals::pipe()?;
        ensure_altstack();
        // SAFETY: getpid cannot fail.
        OWN_PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
        WRITE_FD.store(signals.write.as_raw_fd(), Ordering::Relaxed);
        // Blocked while the handlers go in: a signal ignored on entry is
        // put back to ignored before any can be caught (and setting
        // SIG_IGN discards one pending). 2 + 12 system calls in all.
        let blocked = Blocked::ending();
        for &sig in ENDING {
            catch_unless_ignored(sig)?;
        }
        // Without SA_NOCLDSTOP, stops are reported too: a script stopped by
        // Ctrl-Z while it holds the terminal must stop loopx as well
        // (process.rs).
        catch(libc::SIGCHLD)?;
        drop(blocked);
        Ok(signals)
    }

    /// Routes the parent-death signal to the pipe (shim_parent.rs);
    /// returns its number.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub fn catch_parent_death(&mut self) -> io::Result<i32> {
        let sig = parent_death_signal();
        catch(sig)?;
        self.death = Some(sig);
        Ok(sig)
    }

    /// The self-pipe alone, no handlers yet.
    fn pipe() -> io::Result<Signals> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe writes two fresh descriptors into `fds`.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned here.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        set_flags(read.as_raw_fd())?;
        set_flags(write.as_raw_fd())?;
        Ok(Signals {
            read,
            write,
            first: None,
            counts: [[0; 2]; SLOTS],
            genuine: 0,
            death: None,
            parent_died: false,
        })
    }

    pub fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// The interrupt that ends this run, if one arrived.
    pub fn interrupted(&self) -> Option<i32> {
        self.first
    }

    /// Records an interrupt that reached the script's group instead of
    /// loopx: a Ctrl-C typed while the script held the terminal
    /// (terminal.rs). Reported like one that came through the pipe.
    pub fn note_interrupt(&mut self, signal: i32) -> Events {
        self.counts[slot(signal)][0] += 1;
        let mut ev = Events::default();
        self.count_genuine(signal, &mut ev);
        ev
    }

    /// Updates the first interrupt and the escalation state after a count.
    fn count_genuine(&mut self, sig: i32, ev: &mut Events) {
        self.first.get_or_insert(sig);
        let genuine = self.count();
        if genuine > self.genuine {
            if self.genuine == 0 {
                ev.first_interrupt = self.first;
            }
            if genuine >= 2 {
                ev.repeated_interrupt = true;
            }
            self.genuine = genuine;
        }
    }

    /// Distinct interrupts: a Ctrl-C reaching both loopx and the npm shim
    /// arrives twice (directly, and forwarded by the parent), so per signal
    /// the larger of the two origins' counts is what the user sent.
    fn count(&self) -> u32 {
        self.counts.iter().map(|c| c[0].max(c[1])).sum()
    }

    /// Reads everything queued in the pipe without blocking.
    pub fn drain(&mut self) -> Events {
        let mut ev = Events::default();
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: reading into a stack buffer of the given length.
            let n = unsafe { libc::read(self.fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                // EAGAIN (empty), or EINTR: anything left wakes poll again.
                break;
            }
            for &b in &buf[..n as usize] {
                let sig = i32::from(b & !FROM_PARENT);
                if sig == libc::SIGCHLD {
                    ev.child = true;
                    continue;
                }
                if Some(sig) == self.death {
                    // The shim is gone: as a SIGTERM from anyone else, once.
                    if !self.parent_died {
                        self.parent_died = true;
                        self.counts[slot(libc::SIGTERM)][0] += 1;
                        self.count_genuine(libc::SIGTERM, &mut ev);
                    }
                    continue;
                }
                let origin = usize::from(b & FROM_PARENT != 0);
                self.counts[slot(sig)][origin] += 1;
                self.count_genuine(sig, &mut ev);
            }
        }
        ev
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe without handlers, fed by hand with what the handler writes.
    fn feed(bytes: &[u8]) -> (Signals, Events) {
        let mut s = Signals::pipe().expect("pipe");
        // SAFETY: writing a small buffer into our own pipe.
        let n = unsafe { libc::write(s.write.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        assert_eq!(n, bytes.len() as isize);
        let ev = s.drain();
        (s, ev)
    }

    const INT: u8 = libc::SIGINT as u8;
    const TERM: u8 = libc::SIGTERM as u8;

    #[test]
    fn an_alternate_signal_stack_is_made_only_when_there_is_none() {
        // In a thread of its own: the alternate stack is per thread.
        std::thread::spawn(|| {
            let query = || {
                // SAFETY: reads the current alternate stack into `s`.
                unsafe {
                    let mut s: libc::stack_t = std::mem::zeroed();
                    assert_eq!(libc::sigaltstack(std::ptr::null(), &mut s), 0);
                    s
                }
            };
            let none = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disabling this thread's alternate stack.
            assert_eq!(unsafe { libc::sigaltstack(&none, std::ptr::null_mut()) }, 0);
            ensure_altstack();
            let made = query();
            assert_eq!(made.ss_flags & libc::SS_DISABLE, 0);
            assert_eq!(made.ss_size, 64 * 1024);
            ensure_altstack();
            assert_eq!(query().ss_sp, made.ss_sp, "an existing stack is kept");
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn first_interrupt_decides_the_exit_signal() {
        let (s, ev) = feed(&[TERM]);
        assert_eq!(ev.first_interrupt, Some(libc::SIGTERM));
        assert!(!ev.repeated_interrupt);
        assert_eq!(s.interrupted(), Some(libc::SIGTERM));
    }

    #[test]
    fn a_ctrl_c_forwarded_by_the_parent_is_not_a_second_one() {
        // Typed Ctrl-C reaches loopx and the npm shim, which forwards it.
        let (_, ev) = feed(&[INT, INT | FROM_PARENT]);
        assert_eq!(ev.first_interrupt, Some(libc::SIGINT));
        assert!(!ev.repeated_interrupt);
        let (_, ev) = feed(&[INT | FROM_PARENT, INT]);
        assert!(!ev.repeated_interrupt);
    }

    #[test]
    fn two_ctrl_c_through_the_shim_escalate() {
        let (_, ev) = feed(&[INT, INT | FROM_PARENT, INT, INT | FROM_PARENT]);
        assert!(ev.repeated_interrupt);
    }

    #[test]
    fn a_parent_signalling_twice_escalates() {
        let (s, ev) = feed(&[INT | FROM_PARENT, INT | FROM_PARENT]);
        assert!(ev.repeated_interrupt);
        assert_eq!(s.interrupted(), Some(libc::SIGINT));
    }

    #[test]
    fn a_different_second_signal_escalates_and_keeps_the_first() {
        let (s, ev) = feed(&[INT, TERM | FROM_PARENT]);
        assert!(ev.repeated_interrupt);
        assert_eq!(s.interrupted(), Some(libc::SIGINT));
    }

    #[test]
    fn every_ending_signal_is_an_interrupt_but_pipe_and_xfsz_are_not_handled() {
        let (s, ev) = feed(&[libc::SIGUSR1 as u8]);
        assert_eq!(ev.first_interrupt, Some(libc::SIGUSR1));
        assert_eq!(s.interrupted(), Some(libc::SIGUSR1));
        assert!(!ENDING.contains(&libc::SIGPIPE));
        assert!(!ENDING.contains(&libc::SIGXFSZ));
        assert!(!ENDING.contains(&libc::SIGSEGV));
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn the_parent_dying_is_one_sigterm_however_many_copies_come() {
        let death = parent_death_signal() as u8;
        let mut s = Signals::pipe().expect("pipe");
        s.death = Some(i32::from(death));
        // A SIGTERM the shim forwarded, then its death, announced once per
        // exiting thread, some while loopx was still its child.
        let bytes = [TERM | FROM_PARENT, death | FROM_PARENT, death, death];
        // SAFETY: writing a small buffer into our own pipe.
        let n = unsafe { libc::write(s.write.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        assert_eq!(n, bytes.len() as isize);
        let ev = s.drain();
        assert_eq!(ev.first_interrupt, Some(libc::SIGTERM));
        assert!(!ev.repeated_interrupt, "one death is not a second signal");
        assert_eq!(s.interrupted(), Some(libc::SIGTERM));
    }

    #[test]
    fn sigchld_is_a_wake_up_not_an_interrupt() {
        let (s, ev) = feed(&[libc::SIGCHLD as u8]);
        assert!(ev.child);
        assert_eq!(ev.first_interrupt, None);
        assert_eq!(s.interrupted(), None);
    }

    #[test]
    fn a_ctrl_c_noted_from_the_terminal_counts_for_escalation() {
        let (mut s, _) = feed(&[]);
        let ev = s.note_interrupt(libc::SIGINT);
        assert_eq!(ev.first_interrupt, Some(libc::SIGINT));
        assert_eq!(s.interrupted(), Some(libc::SIGINT));
        assert!(s.note_interrupt(libc::SIGINT).repeated_interrupt);
        let n = unsafe { libc::write(s.write.as_raw_fd(), [INT].as_ptr().cast(), 1) };
        assert_eq!(n, 1);
        assert!(s.drain().repeated_interrupt);
    }
}
