//! Test helpers: temporary projects with `.loopx/` workflows and a runner for
//! the real `loopx` binary, so each test reads like the spec clause it checks.

pub mod agent_mocks;
pub mod http;
pub mod procs;
pub mod release;

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// The binary under test.
pub fn loopx_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loopx"))
}

/// Copies the binary under test to `dest`, creating its directories: a
/// loopx installed somewhere else (a project's node_modules, a bare copy).
pub fn copy_loopx_to(dest: &Path) {
    fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
    cp(&loopx_bin(), dest);
}

/// `cp src dest`, in a child process: see `write_executable`.
fn cp(src: &Path, dest: &Path) {
    let status = Command::new("cp")
        .arg("--")
        .arg(src)
        .arg(dest)
        .status()
        .expect("run cp");
    assert!(status.success(), "cp {} {}", src.display(), dest.display());
}

/// Writes a file the tests then execute directly (a fake CLI, a stand-in
/// loopx), mode 0755. The file that is executed is written by a `cp`
/// child: a file this process held open for writing may still be open in
/// a child another test thread is forking just then, and executing it
/// would fail with "Text file busy" (ETXTBSY).
pub fn write_executable(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = path.parent().expect("parent");
    fs::create_dir_all(dir).expect("mkdir");
    let staged = dir.join(format!(
        ".staged-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    fs::write(&staged, body).expect("write");
    cp(&staged, path);
    fs::remove_file(&staged).expect("remove the staged copy");
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "loopx-test-{tag}-{}-{n}-{nanos}",
            std::process::id()
        ));
        fs::create_dir_all(&dir).expect("create temp dir");
        // Canonical, so paths compare equal to what the binary reports.
        TempDir(fs::canonicalize(&dir).expect("canonicalize temp dir"))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Undo permission changes tests make so cleanup can proceed.
        let _ = Command::new("chmod")
            .arg("-R")
            .arg("u+rwx")
            .arg(&self.0)
            .status();
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A project root with its own private HOME and XDG_CONFIG_HOME.
pub struct Project {
    // Held for its Drop: the directories go when the project does.
    _tmp: TempDir,
    root: PathBuf,
    home: PathBuf,
}

impl Project {
    /// A project with an empty `.loopx/`.
    pub fn new() -> Project {
        let p = Project::bare();
        fs::create_dir_all(p.root.join(".loopx")).expect("create .loopx");
        p
    }

    /// A project without `.loopx/`.
    pub fn bare() -> Project {
        let tmp = TempDir::new("proj");
        let root = tmp.path().join("project");
        let home = tmp.path().join("home");
        fs::create_dir_all(&root).expect("create root");
        fs::create_dir_all(home.join(".config")).expect("create home");
        Project {
            _tmp: tmp,
            root,
            home,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    /// `$XDG_CONFIG_HOME/loopx/env` as the binary sees it.
    pub fn global_env_path(&self) -> PathBuf {
        self.home.join(".config").join("loopx").join("env")
    }

    /// Writes the global env file.
    pub fn global_env(&self, text: &str) -> &Project {
        let p = self.global_env_path();
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write global env");
        self
    }

    /// Writes `.loopx/<workflow>/<file>`.
    pub fn script(&self, workflow: &str, file: &str, body: &str) -> &Project {
        self.file(&format!(".loopx/{workflow}/{file}"), body)
    }

    /// Writes a file relative to the project root, creating directories.
    pub fn file(&self, rel: &str, body: &str) -> &Project {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(&p, body).expect("write file");
        self
    }

    pub fn dir(&self, rel: &str) -> &Project {
        fs::create_dir_all(self.root.join(rel)).expect("mkdir");
        self
    }

    pub fn symlink(&self, target: &str, link: &str) -> &Project {
        let l = self.root.join(link);
        fs::create_dir_all(l.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink(target, l).expect("symlink");
        self
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.root.join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.root.join(rel).exists()
    }

    /// `loopx <args>` in the project root.
    pub fn loopx(&self, args: &[&str]) -> Run {
        self.loopx_at(&loopx_bin(), args)
    }

    /// Like `loopx`, but starts the binary through `bin` (e.g. a symlink).
    pub fn loopx_at(&self, bin: &Path, args: &[&str]) -> Run {
        let mut cmd = Command::new(bin);
        cmd.args(args).current_dir(&self.root);
        isolate(&mut cmd, &self.home);
        Run::command(cmd)
    }
}

/// Strips loopx's own variables from the inherited environment and points
/// HOME/XDG_CONFIG_HOME at a private directory.
pub fn isolate(cmd: &mut Command, home: &Path) {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("LOOPX_") {
            cmd.env_remove(k);
        }
    }
    // XDG_CACHE_HOME too: standalone JS/TS runs write their helpers there.
    // XDG_STATE_HOME: resume checkpoints stay in the test's own home.
    cmd.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env_remove("XDG_CACHE_HOME");
    default_signals(cmd);
}

/// Starts the child with every signal at its default disposition and none
/// blocked, whatever the test harness inherited: run under `nohup`, the
/// harness ignores SIGHUP, and loopx keeps a signal ignored on entry
/// ignored (§7.3 under nohup), so a test of SIGHUP would hang.
pub fn default_signals(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal and sigprocmask are async-signal-safe; the closure
    // allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            for sig in 1..32 {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::signal(sig, libc::SIG_DFL);
                }
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        });
    }
}

/// What a run is expected to end with. Strict by default (just's `Test` is
/// the model): exit 0, an empty stdout and an empty stderr, unless the test
/// declares otherwise.
struct Expect {
    status: Status,
    stdout: Vec<Text>,
    stderr: Vec<Text>,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Status {
    Code(i32),
    Signal(i32),
}

enum Text {
    Is(String),
    Contains(String),
    Lacks(String),
    /// Exactly this many lines.
    Lines(usize),
    /// Not checked, for the reason given: the test reads it itself, or it
    /// is another tool's.
    Any(String),
}

impl Text {
    /// Whether this check says what the stream holds (so the default
    /// "empty" no longer applies); `Lacks` alone does not.
    fn is_positive(&self) -> bool {
        !matches!(self, Text::Lacks(_))
    }

    fn failure(&self, stream: &str, actual: &str) -> Option<String> {
        match self {
            Text::Is(want) if actual != want => Some(format!(
                "{stream} should be exactly:\n{want}\n--- (end of expected {stream})"
            )),
            Text::Contains(needle) if !actual.contains(needle.as_str()) => {
                Some(format!("{stream} should contain {needle:?}"))
            }
            Text::Lacks(needle) if actual.contains(needle.as_str()) => {
                Some(format!("{stream} should not contain {needle:?}"))
            }
            Text::Lines(n) if actual.lines().count() != *n => {
                Some(format!("{stream} should have {n} lines"))
            }
            _ => None,
        }
    }
}

/// The first way `actual` fails `checks`; with no positive check, the
/// stream must be empty.
fn text_failure(stream: &str, checks: &[Text], actual: &str) -> Option<String> {
    if !checks.iter().any(Text::is_positive) && !actual.is_empty() {
        return Some(format!(
            "{stream} should be empty (declare what it holds if that is expected)"
        ));
    }
    checks.iter().find_map(|c| c.failure(stream, actual))
}

/// A configured invocation with its expectations; `run()` (or `start()` and
/// `Running::finish()`) executes it and checks them.
#[must_use = "a Run does nothing until .run() or .start()"]
pub struct Run {
    pub cmd: Command,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
    expect: Expect,
}

impl Run {
    /// Any command (npm, bash, a fake CLI) with the same strict checks.
    pub fn command(cmd: Command) -> Run {
        Run {
            cmd,
            stdin: None,
            timeout: Duration::from_secs(60),
            expect: Expect {
                status: Status::Code(0),
                stdout: Vec::new(),
                stderr: Vec::new(),
            },
        }
    }

    pub fn env(mut self, k: &str, v: impl Into<OsString>) -> Run {
        self.cmd.env(k, v.into());
        self
    }

    pub fn env_remove(mut self, k: &str) -> Run {
        self.cmd.env_remove(k);
        self
    }

    pub fn arg(mut self, a: impl AsRef<std::ffi::OsStr>) -> Run {
        self.cmd.arg(a);
        self
    }

    pub fn stdin(mut self, data: &[u8]) -> Run {
        self.stdin = Some(data.to_vec());
        self
    }

    /// Runs in `dir` instead of the project root.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Run {
        self.cmd.current_dir(dir.as_ref());
        self
    }

    pub fn timeout(mut self, t: Duration) -> Run {
        self.timeout = t;
        self
    }

    // ------------------------------------------------------- expectations

    /// Expects exit code `code` (default 0).
    pub fn status(mut self, code: i32) -> Run {
        self.expect.status = Status::Code(code);
        self
    }

    /// Expects death by signal `sig`.
    pub fn signal(mut self, sig: i32) -> Run {
        self.expect.status = Status::Signal(sig);
        self
    }

    /// Expects stdout to be exactly `text`.
    pub fn stdout(mut self, text: &str) -> Run {
        self.expect.stdout.push(Text::Is(text.to_string()));
        self
    }

    /// Expects stdout to contain `needle` (repeatable).
    pub fn stdout_contains(mut self, needle: &str) -> Run {
        self.expect.stdout.push(Text::Contains(needle.to_string()));
        self
    }

    /// Expects stdout not to contain `needle`; alone, stdout must still be
    /// empty.
    pub fn stdout_lacks(mut self, needle: &str) -> Run {
        self.expect.stdout.push(Text::Lacks(needle.to_string()));
        self
    }

    /// Leaves stdout unchecked, for the reason `why`: another tool's
    /// chatter (npm, cargo, git), or the test reads `Outcome::stdout`
    /// itself right after.
    pub fn stdout_any(mut self, why: &str) -> Run {
        self.expect.stdout.push(Text::Any(reason(why)));
        self
    }

    /// Expects stderr to be exactly `text` (default: empty).
    pub fn stderr(mut self, text: &str) -> Run {
        self.expect.stderr.push(Text::Is(text.to_string()));
        self
    }

    /// Expects stderr to contain `needle` (repeatable).
    pub fn stderr_contains(mut self, needle: &str) -> Run {
        self.expect.stderr.push(Text::Contains(needle.to_string()));
        self
    }

    /// Expects stderr not to contain `needle`; alone, stderr must still be
    /// empty.
    pub fn stderr_lacks(mut self, needle: &str) -> Run {
        self.expect.stderr.push(Text::Lacks(needle.to_string()));
        self
    }

    /// Leaves stderr unchecked, for the reason `why`: another tool's
    /// chatter (npm, cargo, git), or the test reads `Outcome::stderr`
    /// itself right after.
    pub fn stderr_any(mut self, why: &str) -> Run {
        self.expect.stderr.push(Text::Any(reason(why)));
        self
    }

    /// A usage error: exit 1, nothing on stdout, and on stderr exactly one
    /// line naming the problem (containing `needle`), then the help hint.
    pub fn usage_error(self, needle: &str, help: &str) -> Run {
        let hint = format!("\nhint: see '{help}'\n");
        self.status(1)
            .stdout("")
            .stderr_contains("loopx: error: ")
            .stderr_contains(needle)
            .stderr_contains(&hint)
            .stderr_lines(2)
    }

    fn stderr_lines(mut self, n: usize) -> Run {
        self.expect.stderr.push(Text::Lines(n));
        self
    }

    // ---------------------------------------------------------- execution

    /// Runs to completion (killed after the timeout), then checks every
    /// expectation; a failure shows the command, cwd, status and output.
    #[track_caller]
    pub fn run(mut self) -> Outcome {
        let stdin = if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        self.cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(stdin);
        let desc = describe(&self.cmd);
        let mut child = self
            .cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", desc.command));
        if let Some(data) = self.stdin.take() {
            let mut w = child.stdin.take().expect("stdin");
            thread::spawn(move || {
                let _ = w.write_all(&data);
            });
        }
        let out = collect(child, self.timeout, desc);
        out.check(&self.expect);
        out
    }

    /// Starts the command in the background, leader of its own process
    /// group (so signals sent to it cannot reach the test harness), with
    /// piped stdout/stderr; `Running::finish` checks the expectations.
    pub fn start(self) -> Running {
        self.start_with_stdin(Stdio::null())
    }

    pub fn start_with_stdin(mut self, stdin: Stdio) -> Running {
        use std::os::unix::process::CommandExt;
        self.cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(stdin)
            .process_group(0);
        let desc = describe(&self.cmd);
        let child = self
            .cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", desc.command));
        Running {
            child,
            desc,
            expect: self.expect,
            timeout: self.timeout,
        }
    }
}

/// A command started by `Run::start`.
#[must_use = "finish() waits for the command and checks its expectations"]
pub struct Running {
    pub child: Child,
    desc: Described,
    expect: Expect,
    timeout: Duration,
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child.
        let r = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(r, 0, "kill({}, {sig})", self.pid());
    }

    /// Waits for the exit (within the run's timeout), collects the output
    /// and checks the expectations.
    #[track_caller]
    pub fn finish(self) -> Outcome {
        let out = collect(self.child, self.timeout, self.desc);
        out.check(&self.expect);
        out
    }
}

/// How long a run's output pipes may stay open after it exited.
const PIPES_TIMEOUT: Duration = Duration::from_secs(20);

/// The command line and working directory, for failure messages.
struct Described {
    command: String,
    cwd: String,
}

fn describe(cmd: &Command) -> Described {
    let mut command = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        command.push(' ');
        command.push_str(&sh_quote(&a.to_string_lossy()));
    }
    let cwd = cmd
        .get_current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|| "(the test's own)".to_string());
    Described { command, cwd }
}

/// Waits for a child with a deadline, reading its stdout/stderr in threads.
fn collect(mut child: Child, timeout: Duration, desc: Described) -> Outcome {
    // Each stream is read to its end in a thread of its own; the ends come
    // back through a channel, so a descendant still holding a pipe (a
    // script that outlived the process under test) fails the test with a
    // message instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel::<(bool, Vec<u8>)>();
    let readers: [(bool, Box<dyn Read + Send>); 2] = [
        (true, Box::new(child.stdout.take().expect("stdout"))),
        (false, Box::new(child.stderr.take().expect("stderr"))),
    ];
    for (is_stdout, mut stream) in readers {
        let tx = tx.clone();
        thread::spawn(move || {
            let mut v = Vec::new();
            let _ = stream.read_to_end(&mut v);
            let _ = tx.send((is_stdout, v));
        });
    }
    drop(tx);
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "did not finish within {timeout:?}\n--- command: {}\n--- cwd: {}",
                desc.command, desc.cwd
            );
        }
        thread::sleep(Duration::from_millis(5));
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        match rx.recv_timeout(PIPES_TIMEOUT) {
            Ok((true, v)) => stdout = v,
            Ok((false, v)) => stderr = v,
            Err(_) => panic!(
                "exited ({status}), but its stdout or stderr stayed open for {PIPES_TIMEOUT:?}: \
                 a process it started still holds them\n--- command: {}\n--- cwd: {}",
                desc.command, desc.cwd
            ),
        }
    }
    use std::os::unix::process::ExitStatusExt;
    Outcome {
        code: status.code(),
        signal: status.signal(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        stdout_bytes: stdout,
        command: desc.command,
        cwd: desc.cwd,
    }
}

/// A waiver's reason: required, so a waiver says why.
fn reason(why: &str) -> String {
    assert!(
        !why.trim().is_empty(),
        "a waiver (stdout_any, stderr_any) needs a reason"
    );
    why.to_string()
}

/// How a run ended. Its `Display` is the context every failure shows.
#[derive(Debug)]
pub struct Outcome {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub stdout_bytes: Vec<u8>,
    command: String,
    cwd: String,
}

impl Outcome {
    fn status(&self) -> Option<Status> {
        match (self.code, self.signal) {
            (Some(c), _) => Some(Status::Code(c)),
            (None, Some(s)) => Some(Status::Signal(s)),
            _ => None,
        }
    }

    #[track_caller]
    fn check(&self, e: &Expect) {
        let failure = if self.status() != Some(e.status) {
            Some(format!("status should be {:?}", e.status))
        } else {
            text_failure("stdout", &e.stdout, &self.stdout)
                .or_else(|| text_failure("stderr", &e.stderr, &self.stderr))
        };
        if let Some(f) = failure {
            let mut waived = String::new();
            for (stream, checks) in [("stdout", &e.stdout), ("stderr", &e.stderr)] {
                for c in checks.iter() {
                    if let Text::Any(why) = c {
                        waived.push_str(&format!("({stream} not checked: {why})\n"));
                    }
                }
            }
            panic!("{f}\n{waived}{self}");
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = match (self.code, self.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            _ => "unknown".to_string(),
        };
        write!(
            f,
            "--- command: {}\n--- cwd: {}\n--- status: {status}\n--- stdout:\n{}\n--- stderr:\n{}\n--- end",
            self.command, self.cwd, self.stdout, self.stderr
        )
    }
}

/// A bash script that appends `line` to `$LOOPX_PROJECT_ROOT/log` and prints
/// `stdout`. Tests read the log to see which scripts ran in which order.
pub fn logging_script(line: &str, stdout: &str) -> String {
    format!(
        "echo {line} >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '%s' '{}'\n",
        stdout.replace('\'', r"'\''")
    )
}

/// `s` as one single-quoted bash word.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// An executable on the test's own PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Where scripts/test.sh installs the tools the tests need, and the caches
/// shared between test runs for what tests fetch from the npm registry:
/// `${XDG_CACHE_HOME:-$HOME/.cache}/loopx-ci`.
pub fn ci_cache() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
        .expect("neither XDG_CACHE_HOME nor HOME is set");
    base.join("loopx-ci")
}

/// Bun: on PATH (scripts/test.sh puts it there), else where scripts/test.sh
/// installs it.
pub fn bun() -> PathBuf {
    which("bun")
        .or_else(|| {
            let p = ci_cache().join("node_modules/.bin/bun");
            p.is_file().then_some(p)
        })
        .expect("bun not found on PATH nor in the cache dir: scripts/test.sh installs it")
}

/// ShellCheck: on PATH (scripts/test.sh puts it there), else where
/// scripts/test.sh installs it.
pub fn shellcheck() -> PathBuf {
    which("shellcheck")
        .or_else(|| {
            let p = ci_cache().join("python/bin/shellcheck");
            p.is_file().then_some(p)
        })
        .expect("shellcheck not found on PATH nor in the cache dir: scripts/test.sh installs it")
}

/// Whether the tests run as root (some need mounts, chroot or tmpfs).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Prints why a test does not run here; the test then passes.
pub fn skip(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why}");
}

/// A path as a C string, for a direct system call.
pub fn c_path(p: &Path) -> std::ffi::CString {
    std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("path without NUL")
}

/// The names directly inside `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The builder's own rules: what a test that says nothing expects.
mod strictness {
    use super::Run;
    use std::process::Command;

    fn sh(script: &str) -> Run {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script);
        Run::command(cmd)
    }

    #[test]
    #[should_panic(expected = "stderr should be empty")]
    fn undeclared_stderr_fails_the_run() {
        sh("echo surprise >&2").run();
    }

    #[test]
    #[should_panic(expected = "stdout should be empty")]
    fn undeclared_stdout_fails_the_run() {
        sh("echo surprise").run();
    }

    #[test]
    #[should_panic(expected = "stdout should be empty")]
    fn stdout_lacks_alone_still_expects_an_empty_stdout() {
        sh("echo other").stdout_lacks("warning").run();
    }

    #[test]
    #[should_panic(expected = "a waiver (stdout_any, stderr_any) needs a reason")]
    fn a_waiver_needs_a_reason() {
        let _ = sh("true").stdout_any(" ");
    }

    #[test]
    #[should_panic(expected = "(stdout not checked: parsed below)")]
    fn a_failure_names_the_waivers_and_why() {
        sh("echo out; exit 2").stdout_any("parsed below").run();
    }

    #[test]
    #[should_panic(expected = "status should be Code(0)")]
    fn undeclared_failure_fails_the_run() {
        sh("exit 3").run();
    }

    #[test]
    #[should_panic(expected = "stderr should be empty")]
    fn stderr_lacks_alone_still_expects_an_empty_stderr() {
        sh("echo other >&2").stderr_lacks("warning").run();
    }

    #[test]
    fn declared_outcomes_pass() {
        sh("echo out; echo err >&2; exit 3")
            .status(3)
            .stdout("out\n")
            .stderr("err\n")
            .run();
        sh("echo 'loopx: error: bad -x' >&2; echo \"hint: see 'loopx -h'\" >&2; exit 1")
            .usage_error("-x", "loopx -h")
            .run();
    }

    #[test]
    #[should_panic(expected = "--- stderr:\nerr\n")]
    fn a_failure_shows_the_output() {
        sh("echo err >&2; exit 2").status(2).stdout("x").run();
    }
}
