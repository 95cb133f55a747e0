//! The watcher: nothing outlives loopx (DESIGN.md "Beyond the spec"). When
//! loopx itself dies without ending its run (SIGKILL, the OOM killer, a
//! crash), the script and what it started would run on unsupervised. So
//! each run starts one small process, a fresh copy of loopx in a mode of its
//! own, that waits on a pipe whose write end only loopx holds:
//! - loopx ends normally: it writes one byte and reaps the watcher, which
//!   exits without touching anything (a natural end leaves background
//!   processes be, README "Signals and process groups");
//! - loopx dies: the pipe reaches end-of-file without that byte, and the
//!   watcher ends the run's processes as loopx would have: SIGTERM, the
//!   grace period of §7.3, then SIGKILL; then it exits.
//!
//! Which processes are the run's, once loopx is gone and its children have
//! been re-parented: every script inherits one descriptor of loopx's, the
//! mark (a copy of the pipe's read end), and so does what it starts, setsid
//! escapees and double-forked daemons included; from those, their
//! descendants, and the members of process groups and sessions the run
//! made (never loopx's own group or session, which hold its shell and the
//! user's other jobs, nor one led by a process outside the run). Processes
//! that existed before the run (a `tee` of `2> >(tee log)`) hold no mark
//! and are left be.
//!
//! The mark is an anonymous pipe, which nothing can open by name: a file
//! (the checkpoint, which scripts also inherit so that `loopx resume` sees
//! the run alive, resume.rs) is opened by anyone who reads it, and every
//! `loopx run` opens all checkpoints as it starts (checkpoint::prune). A
//! watcher that went by the checkpoint took such a loopx, started in the
//! same shell, for one of its run's processes and ended it. Where the run
//! shares a process group with others (a script that had not yet moved to
//! its own group), the watcher signals its processes one by one, each
//! checked to be still the process it found (pidfd, start time).
//!
//! Linux only (it reads /proc); elsewhere no watcher starts.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::raw::c_char;
use std::time::{Duration, Instant};

use crate::proc::descendants::{self, Proc};
use crate::proc::process::GRACE;

/// argv[0] of a watcher: what `main` looks for before anything else.
const NAME: &str = "loopx-watcher";

/// The lowest descriptor number the mark takes in scripts: above the
/// 0–9 that scripts redirect themselves (`exec 3>file`).
const MARK_MIN_FD: libc::c_int = 10;

/// How often the watcher looks again while it ends the run.
const TICK: Duration = Duration::from_millis(25);

/// After SIGKILL, how long to wait for the kernel to finish the processes.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// loopx's side of a running watcher.
pub struct Watcher {
    pid: libc::pid_t,
    /// The write end; only loopx holds it (close-on-exec).
    alive: Option<OwnedFd>,
    /// The mark, inherited by every script (not close-on-exec): a copy of
    /// the pipe's read end.
    mark: Option<OwnedFd>,
    /// A copy of the checkpoint's locked descriptor, inherited by every
    /// script (resume.rs); not the watcher's concern.
    lock: Option<OwnedFd>,
}

/// A watcher ready to start: its pipe and the mark exist (so the first
/// script inherits the mark), the process does not yet. The supervisor
/// starts it right after it has spawned the first script
/// (supervisor.rs), so the watcher's spawn (a vfork and an exec of loopx,
/// ~0.5 ms) does not delay the script; it is up long before anything
/// could need it, but loopx killed in those microseconds leaves the first
/// script unwatched.
pub struct Pending {
    read: OwnedFd,
    alive: OwnedFd,
    mark: OwnedFd,
    lock: Option<OwnedFd>,
}

impl Watcher {
    /// Prepares the watcher of this run; `lock` is the checkpoint's locked
    /// descriptor, if the run keeps one: scripts inherit a copy of it too
    /// (resume.rs), beside the mark, a copy of the pipe's read end. None
    /// when it cannot (no /proc, no descriptors): the run goes on
    /// unwatched, as before watchers existed.
    pub fn prepare(lock: Option<RawFd>) -> Option<Pending> {
        if !cfg!(target_os = "linux") {
            return None;
        }
        let (read, alive) = pipe().ok()?;
        let mark = dup_inheritable(read.as_raw_fd()).ok()?;
        let lock = match lock {
            Some(fd) => Some(dup_inheritable(fd).ok()?),
            None => None,
        };
        Some(Pending {
            read,
            alive,
            mark,
            lock,
        })
    }

    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }
}

impl Pending {
    /// Starts the watcher; None when the spawn fails (the run goes on
    /// unwatched).
    pub fn start(self) -> Option<Watcher> {
        let pid = spawn(self.read.as_raw_fd(), self.mark.as_raw_fd()).ok()?;
        Some(Watcher {
            pid,
            alive: Some(self.alive),
            mark: Some(self.mark),
            lock: self.lock,
        })
    }
}

impl Drop for Watcher {
    /// The run is over: tells the watcher so, and reaps it. A panic skips
    /// this (the watcher then ends what is left, as after a crash).
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        self.mark = None;
        self.lock = None;
        if let Some(fd) = self.alive.take() {
            // SAFETY: writing one byte from a static buffer to our pipe.
            unsafe {
                libc::write(fd.as_raw_fd(), b"x".as_ptr().cast(), 1);
            }
        }
        reap(self.pid, Duration::from_secs(1));
    }
}

/// Waits up to `limit` for the watcher to exit and reaps it; one stopped
/// or stuck is left to init rather than holding loopx's exit.
fn reap(pid: libc::pid_t, limit: Duration) {
    let until = Instant::now() + limit;
    wait_for_exit(pid, limit);
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own child with a valid status pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        // Reaped, or already reaped by the supervisor's reap_all.
        if r != 0 || Instant::now() >= until {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Waits, up to `limit`, for our child `pid` to exit, without reaping it:
/// a poll on its pidfd (Linux 5.3+), which wakes the moment it exits, where
/// polling `waitpid` every 200 µs would add that much to every run's end.
/// Returns at once where there are no pidfds; a signal may end it early.
fn wait_for_exit(pid: libc::pid_t, limit: Duration) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: pidfd_open on our own child returns a fresh descriptor (owned
    // here) or -1; poll on it with a valid pollfd.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0);
        let Ok(fd) = RawFd::try_from(fd) else {
            return;
        };
        if fd < 0 {
            return;
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        libc::poll(&mut p, 1, limit.as_millis().min(i32::MAX as u128) as i32);
    }
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two fresh descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A copy of `fd` that children inherit, at `MARK_MIN_FD` or above when the
/// descriptor limit allows.
fn dup_inheritable(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD on a descriptor the caller owns returns a fresh one
    // (without FD_CLOEXEC), owned here.
    unsafe {
        let mut copy = libc::fcntl(fd, libc::F_DUPFD, MARK_MIN_FD);
        if copy < 0 {
            copy = libc::fcntl(fd, libc::F_DUPFD, 3);
        }
        if copy < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(copy))
    }
}

/// What the watcher is told on its command line: the pipe's read end, the
/// mark's device and inode, and loopx's pid, process group and session,
/// taken by loopx as it starts the watcher (so before it can die).
#[derive(Debug, PartialEq, Eq)]
struct Orders {
    pipe: RawFd,
    mark: (u64, u64),
    loopx: libc::pid_t,
    pgid: libc::pid_t,
    sid: libc::pid_t,
}

fn ids() -> [libc::pid_t; 3] {
    // SAFETY: getpid, getpgid(0) and getsid(0) ask about this process.
    unsafe { [libc::getpid(), libc::getpgid(0), libc::getsid(0)] }
}

/// Starts the watcher: this binary again (/proc/self/exe), argv[0]
/// `loopx-watcher`, in a process group of its own (a Ctrl-C or a signal to
/// loopx's group must not end it), in `/`, with /dev/null for stdio (it
/// must hold neither loopx's stdout nor its terminal). `pipe` is
/// close-on-exec: the watcher gets a copy made here; `mark` is a copy of
/// the same pipe end.
fn spawn(pipe: RawFd, mark: RawFd) -> io::Result<libc::pid_t> {
    let [pid, pgid, sid] = ids();
    let (dev, ino) = file_id(mark);
    let inherited = dup_inheritable(pipe)?;
    let args: Vec<CString> = [
        NAME.to_string(),
        inherited.as_raw_fd().to_string(),
        dev.to_string(),
        ino.to_string(),
        pid.to_string(),
        pgid.to_string(),
        sid.to_string(),
    ]
    .into_iter()
    .map(|a| CString::new(a).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput)))
    .collect::<io::Result<_>>()?;
    let mut argv: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let envp: [*const c_char; 1] = [std::ptr::null()];
    let exe = c"/proc/self/exe";
    let null = c"/dev/null";
    let root = c"/";
    let mut child: libc::pid_t = 0;
    // SAFETY: the attribute and action objects are initialised before use
    // and destroyed after; every pointer handed over lives until
    // posix_spawn returns.
    unsafe {
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        libc::posix_spawnattr_init(&mut attr);
        libc::posix_spawn_file_actions_init(&mut actions);
        for fd in 0..3 {
            libc::posix_spawn_file_actions_addopen(
                &mut actions,
                fd,
                null.as_ptr(),
                libc::O_RDWR,
                0,
            );
        }
        libc::posix_spawn_file_actions_addchdir_np(&mut actions, root.as_ptr());
        // Deaf to signals from its first instruction: born with all of
        // them blocked (those ending loopx, the terminal's stops, SIGPIPE),
        // and never unblocking them, it needs no `sigaction` of its own.
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::posix_spawnattr_setsigmask(&mut attr, &all);
        libc::posix_spawnattr_setpgroup(&mut attr, 0);
        // One `sigaction` each in the child for loopx's handlers (signals.rs).
        let default = crate::proc::signals::caught();
        libc::posix_spawnattr_setsigdefault(&mut attr, &default);
        let flags = libc::POSIX_SPAWN_SETPGROUP
            | libc::POSIX_SPAWN_SETSIGMASK
            | libc::POSIX_SPAWN_SETSIGDEF;
        libc::posix_spawnattr_setflags(&mut attr, flags as _);
        let r = libc::posix_spawn(
            &mut child,
            exe.as_ptr(),
            &actions,
            &attr,
            argv.as_ptr() as *const *mut c_char,
            envp.as_ptr() as *const *mut c_char,
        );
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
    }
    Ok(child)
}

/// The orders in a watcher's argv, or None when this process is not one.
fn orders(args: &[std::ffi::OsString]) -> Option<Orders> {
    let [name, pipe, dev, ino, loopx, pgid, sid] = args else {
        return None;
    };
    if name != NAME {
        return None;
    }
    let num = |s: &std::ffi::OsString| s.to_str()?.parse().ok();
    let id = |s: &std::ffi::OsString| s.to_str()?.parse().ok();
    Some(Orders {
        pipe: num(pipe)?,
        mark: (id(dev)?, id(ino)?),
        loopx: num(loopx)?,
        pgid: num(pgid)?,
        sid: num(sid)?,
    })
}

/// Called first thing in `main`: when this process is a watcher, does the
/// watcher's work and exits; otherwise returns at once.
pub fn run_if_watcher() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let Some(orders) = orders(&args) else {
        return;
    };
    settle(orders.pipe);
    if loopx_died(orders.pipe) {
        end_the_run(&orders);
    }
    std::process::exit(0);
}

/// The watcher's own setup: a name of its own (so `pkill -x loopx` does not
/// take it along), holding no descriptor but the mark and /dev/null. It is
/// deaf to the signals that end loopx already: it was spawned with every
/// signal blocked (`spawn`).
fn settle(pipe: RawFd) {
    // SAFETY: prctl with a NUL-terminated name; closing descriptors this
    // fresh process inherited and does not use.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"loopx-watcher".as_ptr(), 0, 0, 0);
        for fd in open_fds() {
            if fd > 2 && fd != pipe {
                libc::close(fd);
            }
        }
    }
}

/// The descriptors this process has open.
fn open_fds() -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Waits for loopx's word: true when the pipe ended without it (loopx
/// died), false when loopx said the run is over.
fn loopx_died(pipe: RawFd) -> bool {
    let mut byte = 0u8;
    loop {
        // SAFETY: reading one byte into a local.
        let n = unsafe { libc::read(pipe, (&mut byte as *mut u8).cast(), 1) };
        if n >= 0 {
            return n == 0;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return false;
        }
    }
}

/// Ends the run's processes: SIGTERM (and SIGCONT, for stopped ones) to
/// each as it is found, SIGKILL once the grace period is over; done when
/// none is left, or the kernel has had `KILL_WAIT` to finish them.
fn end_the_run(orders: &Orders) {
    let start = Instant::now();
    let mut termed: Vec<libc::pid_t> = Vec::new();
    // SAFETY: closing the watcher's own pipe, which it needs no more (and
    // which may be the mark).
    unsafe {
        libc::close(orders.pipe);
    }
    loop {
        let procs = descendants::snapshot();
        // SAFETY: getpid cannot fail.
        let me = unsafe { libc::getpid() };
        let run = run_processes(&procs, &marked(orders.mark), orders, me);
        if run.is_empty() {
            return;
        }
        let late = start.elapsed() >= GRACE;
        if late && start.elapsed() >= GRACE + KILL_WAIT {
            return;
        }
        let is_run = |pid| run.binary_search(&pid).is_ok();
        if late {
            let t = targets(is_run, &run, &procs, orders, me);
            signal(&t, &procs, libc::SIGKILL);
        } else {
            // SIGTERM once to each, as it is found.
            let fresh = |pid| is_run(pid) && !termed.contains(&pid);
            let t = targets(fresh, &run, &procs, orders, me);
            signal(&t, &procs, libc::SIGTERM);
            signal(&t, &procs, libc::SIGCONT);
            termed.extend_from_slice(&run);
        }
        std::thread::sleep(TICK);
    }
}

/// What `fd` is open on, as (device, inode).
fn file_id(fd: RawFd) -> (u64, u64) {
    // SAFETY: fstat into a zeroed stat struct.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return (0, 0);
        }
        (st.st_dev, st.st_ino)
    }
}

/// The processes that hold a descriptor of the file `name` (device,
/// inode), sorted.
fn marked(name: (u64, u64)) -> Vec<libc::pid_t> {
    use std::os::unix::fs::MetadataExt;
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds
            .flatten()
            .any(|fd| std::fs::metadata(fd.path()).is_ok_and(|m| (m.dev(), m.ino()) == name));
        if holds {
            found.push(pid);
        }
    }
    found.sort_unstable();
    found
}

/// Whether the process group or session `id` is one the run made: never
/// loopx's own (`original`) or the watcher's; one whose leader (the
/// process whose pid is `id`) is of the run (`in_run`), or is gone (its
/// pid cannot be taken again while the group or session lasts). One led by
/// a live process outside the run was not made for it: a process of the run
/// that joined it (`setpgid` into a job of loopx's shell) is the run's, the
/// rest of that group is not.
fn made_by_run(
    id: libc::pid_t,
    original: libc::pid_t,
    procs: &[Proc],
    in_run: impl Fn(libc::pid_t) -> bool,
    me: libc::pid_t,
) -> bool {
    if id == original || id == me || id <= 1 {
        return false;
    }
    match procs.iter().find(|p| p.pid == id) {
        Some(leader) => leader.zombie || in_run(id),
        None => true,
    }
}

/// The run's live processes in `procs`, sorted: those `marked` (sorted),
/// then their descendants and the other members of the process groups and
/// sessions the run made ([`made_by_run`]), until nothing more joins.
fn run_processes(
    procs: &[Proc],
    marked: &[libc::pid_t],
    orders: &Orders,
    me: libc::pid_t,
) -> Vec<libc::pid_t> {
    let never = |p: &Proc| p.zombie || p.pid == me || p.pid == orders.loopx || p.pid == 1;
    let mut run: Vec<libc::pid_t> = procs
        .iter()
        .filter(|p| !never(p) && marked.binary_search(&p.pid).is_ok())
        .map(|p| p.pid)
        .collect();
    run.sort_unstable();
    loop {
        let (mut groups, mut sessions) = (Vec::new(), Vec::new());
        let in_run = |pid: libc::pid_t| run.binary_search(&pid).is_ok();
        for p in procs.iter().filter(|p| in_run(p.pid)) {
            if made_by_run(p.pgid, orders.pgid, procs, in_run, me) {
                groups.push(p.pgid);
            }
            if made_by_run(p.sid, orders.sid, procs, in_run, me) {
                sessions.push(p.sid);
            }
        }
        let in_run = |pid: libc::pid_t| run.binary_search(&pid).is_ok();
        let joining: Vec<libc::pid_t> = procs
            .iter()
            .filter(|p| !never(p) && !in_run(p.pid))
            .filter(|p| in_run(p.ppid) || groups.contains(&p.pgid) || sessions.contains(&p.sid))
            .map(|p| p.pid)
            .collect();
        if joining.is_empty() {
            return run;
        }
        run.extend(joining);
        run.sort_unstable();
    }
}

/// Whom to signal among the processes `is_in` picks from the `run`
/// (sorted): a process group the run made ([`made_by_run`]) with no live
/// member outside the set as a whole (a process forked in it meanwhile
/// gets the signal too); every other process by itself. Never loopx's own
/// group or the watcher's.
fn targets(
    is_in: impl Fn(libc::pid_t) -> bool,
    run: &[libc::pid_t],
    procs: &[Proc],
    orders: &Orders,
    me: libc::pid_t,
) -> descendants::Targets {
    let mut t = descendants::grouped(&is_in, None, procs);
    let in_run = |pid| run.binary_search(&pid).is_ok();
    let (whole, single): (Vec<_>, Vec<_>) = t
        .groups
        .iter()
        .partition(|&&g| made_by_run(g, orders.pgid, procs, in_run, me));
    t.groups = whole;
    for g in single {
        t.pids.extend(
            procs
                .iter()
                .filter(|p| p.pgid == g && !p.zombie && is_in(p.pid))
                .map(|p| p.pid),
        );
    }
    t.pids.sort_unstable();
    t.pids.dedup();
    t
}

/// Sends `sig` to the targets: groups with `kill`, each single process only
/// if it is still the one `procs` saw (same start time), through a pidfd
/// so that its pid cannot be taken by another process in between.
fn signal(t: &descendants::Targets, procs: &[Proc], sig: libc::c_int) {
    for &g in &t.groups {
        // SAFETY: signalling a process group the run made (`targets`);
        // ESRCH (gone already) is the aim.
        unsafe {
            libc::kill(-g, sig);
        }
    }
    for &pid in &t.pids {
        if let Some(seen) = procs.iter().find(|p| p.pid == pid) {
            signal_if_same(seen, sig);
        }
    }
}

/// Signals `seen` if the process with its pid is still it.
fn signal_if_same(seen: &Proc, sig: libc::c_int) {
    let same = || {
        std::fs::read_to_string(format!("/proc/{}/stat", seen.pid))
            .ok()
            .and_then(|text| descendants::parse_stat(seen.pid, &text))
            .is_some_and(|now| now.start == seen.start && !now.zombie)
    };
    // SAFETY: pidfd_open on a pid returns a fresh descriptor (owned here)
    // or fails.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, seen.pid, 0) };
    if fd < 0 {
        // No pidfds (Linux before 5.3): checked, then signalled by pid.
        if same() {
            // SAFETY: signalling the process just checked to be the one seen.
            unsafe {
                libc::kill(seen.pid, sig);
            }
        }
        return;
    }
    // SAFETY: the descriptor was just opened and is owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    // The pidfd names whoever had the pid when it was opened; if /proc
    // shows the process seen after that, the pidfd names it.
    if same() {
        // SAFETY: pidfd_send_signal on a valid pidfd, no siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd.as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: i32, ppid: i32, pgid: i32, sid: i32) -> Proc {
        Proc {
            pid,
            ppid,
            pgid,
            sid,
            zombie: false,
            start: 0,
        }
    }

    #[test]
    fn only_its_own_argv_makes_a_watcher() {
        let args = |v: &[&str]| v.iter().map(|s| s.into()).collect::<Vec<_>>();
        assert_eq!(
            orders(&args(&[NAME, "10", "7", "42", "100", "90", "80"])),
            Some(Orders {
                pipe: 10,
                mark: (7, 42),
                loopx: 100,
                pgid: 90,
                sid: 80
            })
        );
        let loopx = ["loopx", "10", "7", "42", "100", "90", "80"];
        assert_eq!(orders(&args(&loopx)), None);
        assert_eq!(orders(&args(&[NAME, "10", "7", "42", "100", "90"])), None);
        assert_eq!(
            orders(&args(&[NAME, "x", "7", "42", "100", "90", "80"])),
            None
        );
    }

    #[test]
    fn the_run_is_what_holds_the_mark_and_what_shares_its_groups_and_sessions() {
        // loopx 100 (dead) was in group 90 and session 80 with its shell 90
        // and a `tee` 95. The script 200 (group 200) holds the mark; its
        // sentinel 199 leads the group without it; a child 201 closed it;
        // an escapee 300 (setsid, re-parented to init) holds it, and its
        // daemon 310 (own group, same session) does not; 400 is unrelated;
        // 500 is the watcher itself.
        let procs = [
            p(90, 1, 90, 80),
            p(95, 1, 90, 80),
            p(199, 1, 200, 80),
            p(200, 1, 200, 80),
            p(201, 200, 200, 80),
            p(300, 1, 300, 300),
            p(310, 1, 310, 300),
            p(400, 1, 400, 400),
            p(500, 1, 500, 80),
        ];
        let run = run_processes(&procs, &[200, 300, 500], &dead_loopx(), 500);
        assert_eq!(run, [199, 200, 201, 300, 310]);
    }

    fn dead_loopx() -> Orders {
        Orders {
            pipe: 10,
            mark: (7, 42),
            loopx: 100,
            pgid: 90,
            sid: 80,
        }
    }

    #[test]
    fn loopx_s_group_and_session_and_groups_led_outside_the_run_never_join() {
        // loopx 100 (dead) shared group 90 and session 80 with its shell 90
        // and another loopx 110. Its script 200 was forked and still sits in
        // group 90 (no setpgid yet); 210 of the run moved into a job 95 of
        // the shell (led by 95, alive, with a member 96); 220 of the run
        // leads a group 220 whose member 221 has no mark; 230 of the run is
        // in a group 229 whose leader is gone, with 231.
        let procs = [
            p(90, 1, 90, 80),
            p(110, 90, 90, 80),
            p(200, 1, 90, 80),
            p(95, 90, 95, 80),
            p(96, 90, 95, 80),
            p(210, 1, 95, 80),
            p(220, 1, 220, 80),
            p(221, 1, 220, 80),
            p(230, 1, 229, 80),
            p(231, 1, 229, 80),
        ];
        let run = run_processes(&procs, &[200, 210, 220, 230], &dead_loopx(), 500);
        assert_eq!(run, [200, 210, 220, 221, 230, 231]);
        let is_run = |pid| run.binary_search(&pid).is_ok();
        let t = targets(is_run, &run, &procs, &dead_loopx(), 500);
        assert_eq!(t.groups, [220, 229]);
        assert_eq!(t.pids, [200, 210]);
    }

    #[test]
    fn loopx_s_group_is_never_signalled_as_a_whole() {
        // Only the run's script 200 (not yet in a group of its own) is left
        // in loopx's group 90: still signalled by pid alone.
        let procs = [p(200, 1, 90, 80), p(300, 1, 300, 300)];
        let run = run_processes(&procs, &[200, 300], &dead_loopx(), 500);
        assert_eq!(run, [200, 300]);
        let t = targets(|pid| run.contains(&pid), &run, &procs, &dead_loopx(), 500);
        assert_eq!(t.groups, [300]);
        assert_eq!(t.pids, [200]);
    }
}
