//! Test helpers: temporary projects with `.loopx/` workflows and a runner for
//! the real `loopx` binary, so each test reads like the spec clause it checks.
#![allow(dead_code)]

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
    tmp: TempDir,
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
        Project { tmp, root, home }
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
        Run {
            cmd,
            stdin: None,
            timeout: Duration::from_secs(60),
        }
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
    cmd.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env_remove("XDG_CACHE_HOME");
}

/// A configured invocation.
pub struct Run {
    pub cmd: Command,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
}

impl Run {
    pub fn env(mut self, k: &str, v: impl Into<OsString>) -> Run {
        self.cmd.env(k, v.into());
        self
    }

    pub fn env_remove(mut self, k: &str) -> Run {
        self.cmd.env_remove(k);
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

    /// Runs to completion (killing it after the timeout) and captures output.
    pub fn run(mut self) -> Outcome {
        self.cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            });
        let mut child = self.cmd.spawn().expect("spawn loopx");
        if let Some(data) = self.stdin.take() {
            let mut w = child.stdin.take().expect("stdin");
            thread::spawn(move || {
                let _ = w.write_all(&data);
            });
        }
        wait_with_output(child, self.timeout)
    }
}

/// Waits for a child with a deadline, reading its stdout/stderr in threads.
pub fn wait_with_output(mut child: Child, timeout: Duration) -> Outcome {
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!("loopx did not finish within {timeout:?}");
        }
        thread::sleep(Duration::from_millis(5));
    };
    let stdout = t_out.join().expect("stdout thread");
    let stderr = t_err.join().expect("stderr thread");
    use std::os::unix::process::ExitStatusExt;
    Outcome {
        code: status.code(),
        signal: status.signal(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        stdout_bytes: stdout,
    }
}

#[derive(Debug)]
pub struct Outcome {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub stdout_bytes: Vec<u8>,
}

impl Outcome {
    #[track_caller]
    pub fn code(&self, expected: i32) -> &Outcome {
        assert_eq!(
            self.code,
            Some(expected),
            "exit code\n--- stdout:\n{}\n--- stderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    #[track_caller]
    pub fn success(&self) -> &Outcome {
        self.code(0)
    }

    #[track_caller]
    pub fn failure(&self) -> &Outcome {
        self.code(1)
    }

    #[track_caller]
    pub fn stdout_is(&self, expected: &str) -> &Outcome {
        assert_eq!(
            self.stdout, expected,
            "stdout\n--- stderr:\n{}",
            self.stderr
        );
        self
    }

    #[track_caller]
    pub fn stdout_empty(&self) -> &Outcome {
        self.stdout_is("")
    }

    #[track_caller]
    pub fn stderr_empty(&self) -> &Outcome {
        assert_eq!(self.stderr, "", "stderr\n--- stdout:\n{}", self.stdout);
        self
    }

    #[track_caller]
    pub fn stderr_is(&self, expected: &str) -> &Outcome {
        assert_eq!(
            self.stderr, expected,
            "stderr\n--- stdout:\n{}",
            self.stdout
        );
        self
    }

    #[track_caller]
    pub fn stderr_has(&self, needle: &str) -> &Outcome {
        assert!(
            self.stderr.contains(needle),
            "stderr should contain {needle:?}\n--- stderr:\n{}",
            self.stderr
        );
        self
    }

    #[track_caller]
    pub fn stderr_lacks(&self, needle: &str) -> &Outcome {
        assert!(
            !self.stderr.contains(needle),
            "stderr should not contain {needle:?}\n--- stderr:\n{}",
            self.stderr
        );
        self
    }

    #[track_caller]
    pub fn stderr_is_empty(&self) -> &Outcome {
        assert_eq!(self.stderr, "", "stderr should be empty");
        self
    }

    #[track_caller]
    pub fn stdout_has(&self, needle: &str) -> &Outcome {
        assert!(
            self.stdout.contains(needle),
            "stdout should contain {needle:?}\n--- stdout:\n{}",
            self.stdout
        );
        self
    }

    /// A usage error: exit 1, one line naming the problem, then a hint.
    #[track_caller]
    pub fn usage_error(&self, needle: &str, help: &str) -> &Outcome {
        self.failure().stdout_empty().stderr_has(needle);
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(
            lines.len(),
            2,
            "usage error is message + hint:\n{}",
            self.stderr
        );
        assert!(lines[0].starts_with("loopx: error: "), "{}", self.stderr);
        assert_eq!(lines[1], format!("hint: see '{help}'"));
        self
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
