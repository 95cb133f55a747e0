//! loopx on any Linux host (README "Reliability notes"): `.sh` scripts run
//! with a bash found on PATH where there is no `/bin/bash` (§6.2), and fail
//! with one clear message where there is none; LOOPX_BIN comes from argv[0]
//! where there is no `/proc` (§3.4); and the static release binary runs a
//! bash workflow in a bare root holding nothing but itself, a static bash and
//! a static busybox.
//!
//! Hiding `/bin/bash` (a private mount namespace) and entering a bare root
//! (chroot) need root. Without it, or without the static bash and busybox
//! packages (Debian: bash-static, busybox-static; .ci/run installs them),
//! these tests print why they skip and pass.
#![cfg(target_os = "linux")]

use crate::util;
use crate::util::{procs, release};
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::util::{c_path, is_root, skip, Outcome, Project, Run, TempDir};
use procs::{alive, wait_for_file};

use release::TARGET;

// ---------------------------------------------------------------- helpers

/// In the child, before exec: a private mount namespace in which a tmpfs
/// covers the directory holding the real `/bin/bash` (`/usr/bin` on
/// merged-/usr systems), so no `/bin/bash` exists for loopx.
fn hide_bin_bash(cmd: &mut Command) {
    let real = fs::canonicalize("/bin/bash").expect("/bin/bash on the test host");
    let dir = c_path(real.parent().expect("parent"));
    let (root, tmpfs) = (c_path(Path::new("/")), CString::new("tmpfs").unwrap());
    // SAFETY: unshare and mount are async-signal-safe system calls; every
    // pointer is to a CString that outlives the child's exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(io::Error::last_os_error());
            }
            let flags = libc::MS_REC | libc::MS_PRIVATE;
            let none = std::ptr::null();
            if libc::mount(none, root.as_ptr(), none, flags, none.cast()) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::mount(tmpfs.as_ptr(), dir.as_ptr(), tmpfs.as_ptr(), 0, none.cast()) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Runs `run` (its expectations declared) with `/bin/bash` hidden; `None`
/// (after printing why) where a mount namespace cannot be had, which a
/// trial `loopx version` under the same hook finds out first (the binary
/// under test: a system tool may live in the hidden directory).
fn run_without_bin_bash(test: &str, mut run: util::Run) -> Option<Outcome> {
    if !is_root() {
        skip(
            test,
            "hiding /bin/bash needs a mount namespace, and so root",
        );
        return None;
    }
    let mut probe = Command::new(util::loopx_bin());
    probe.arg("version").stdout(Stdio::null());
    hide_bin_bash(&mut probe);
    if let Err(e) = probe.stdin(Stdio::null()).status() {
        skip(test, &format!("cannot hide /bin/bash here: {e}"));
        return None;
    }
    hide_bin_bash(&mut run.cmd);
    Some(run.run())
}

/// A workflow that records which bash ran it and whether `/bin/bash` was
/// visible, then hands a result over to a second script.
fn bash_probe_project() -> Project {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        "echo \"$BASH\" > \"$LOOPX_PROJECT_ROOT/bash\"\n\
         if [ -e /bin/bash ]; then echo visible > \"$LOOPX_PROJECT_ROOT/bin-bash\"; fi\n\
         \"$LOOPX_BIN\" output --result 'handed over' --goto next\n",
    );
    p.script(
        "ralph",
        "next.sh",
        "read -r line; echo \"$line\" > \"$LOOPX_PROJECT_ROOT/got\"\n\
         \"$LOOPX_BIN\" output --stop\n",
    );
    p
}

// ---------------------------------------------------------------- bash on PATH

#[test]
fn sh_scripts_run_with_the_bash_on_path_where_there_is_no_bin_bash() {
    let p = bash_probe_project();
    let tmp = TempDir::new("path-bash");
    // A copy of the host's bash outside the hidden directory, reached
    // through a symlink on PATH, as NixOS profiles do.
    let store = tmp.path().join("store");
    let bin = tmp.path().join("bin");
    fs::create_dir_all(&store).unwrap();
    fs::create_dir_all(&bin).unwrap();
    fs::copy(fs::canonicalize("/bin/bash").unwrap(), store.join("bash")).unwrap();
    symlink(store.join("bash"), bin.join("bash")).unwrap();
    let path = format!("{}:{}", tmp.path().join("empty").display(), bin.display());
    let run = p.loopx(&["run", "ralph"]).env("PATH", &path).stdout("");
    if run_without_bin_bash("sh_scripts_run_with_the_bash_on_path", run).is_none() {
        return;
    }
    assert!(!p.exists("bin-bash"), "/bin/bash was not hidden");
    assert_eq!(p.read("bash").trim(), bin.join("bash").to_str().unwrap());
    assert_eq!(p.read("got"), "handed over\n");
}

#[test]
fn without_any_bash_a_sh_workflow_fails_before_the_first_iteration() {
    let p = bash_probe_project();
    let tmp = TempDir::new("no-bash");
    let run = p
        .loopx(&["run", "ralph"])
        .env("PATH", tmp.path().join("empty"))
        .status(1)
        .stdout("")
        .stderr(
            "loopx: error: cannot run ralph:index: loopx runs .sh scripts with bash, and there is \
             no /bin/bash and no bash on PATH; install bash (e.g. `apk add bash` on Alpine, \
             `apt-get install bash` on Debian) or put it on PATH\n",
        );
    if run_without_bin_bash("without_any_bash_a_sh_workflow_fails", run).is_none() {
        return;
    }
    assert!(!p.exists("bash"));
}

// ---------------------------------------------------------------- bare roots

/// The static release binary, taken from the archive of the release tree
/// scripts/build-release.sh builds (util/release.rs).
fn release_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let tree = release::host_release().out.as_path();
        let archive = release::version_dir(tree).join(format!("loopx-{TARGET}.tar.gz"));
        let file = fs::File::open(&archive).expect("open the release archive");
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
        let bin = tree.join("loopx");
        for entry in tar.entries().expect("read archive") {
            let mut entry = entry.expect("entry");
            if entry.path().expect("path").file_name() == Some("loopx".as_ref()) {
                entry.unpack(&bin).expect("unpack loopx");
                return bin;
            }
        }
        panic!("no loopx in {}", archive.display());
    })
}

/// Whether `path` is an ELF executable without a program interpreter, i.e.
/// statically linked (it needs no libc in the root).
fn is_static_elf(path: &Path) -> bool {
    let Ok(elf) = fs::read(path) else {
        return false;
    };
    let le = |at: usize, n: usize| -> Option<u64> {
        let bytes = elf.get(at..at + n)?;
        Some(
            bytes
                .iter()
                .rev()
                .fold(0, |acc, &b| (acc << 8) | u64::from(b)),
        )
    };
    // 64-bit little-endian ELF only (the hosts these tests run on).
    if elf.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (le(0x20, 8), le(0x36, 2), le(0x38, 2))
    else {
        return false;
    };
    const PT_INTERP: u64 = 3;
    (0..phnum).all(|i| le((phoff + i * phentsize) as usize, 4).is_some_and(|t| t != PT_INTERP))
}

/// The first of `candidates` that is a static executable.
fn static_tool(candidates: &[&str]) -> Option<PathBuf> {
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| is_static_elf(p))
}

/// A minimal root: the static loopx at /usr/local/bin/loopx, a static bash
/// at /bin/bash, a static busybox at /bin/busybox (with /bin/sleep), the
/// /dev/null every container runtime provides, and empty /proj and /home.
/// No /proc, no libc, no Node.
struct BareRoot {
    tmp: TempDir,
}

impl BareRoot {
    /// `None` (after printing why) where the test cannot run.
    fn new(test: &str) -> Option<BareRoot> {
        if !is_root() {
            skip(test, "entering a bare root needs chroot, and so root");
            return None;
        }
        let Some(bash) = static_tool(&["/bin/bash-static", "/usr/bin/bash-static"]) else {
            skip(test, "no static bash (Debian: apt-get install bash-static)");
            return None;
        };
        let Some(busybox) = static_tool(&["/bin/busybox", "/usr/bin/busybox"]) else {
            skip(
                test,
                "no static busybox (Debian: apt-get install busybox-static)",
            );
            return None;
        };
        let tmp = TempDir::new("bare-root");
        let root = tmp.path();
        for dir in ["bin", "usr/local/bin", "dev", "proj", "home"] {
            fs::create_dir_all(root.join(dir)).unwrap();
        }
        let install = |from: &Path, to: &str| {
            fs::copy(from, root.join(to)).unwrap();
            fs::set_permissions(root.join(to), fs::Permissions::from_mode(0o755)).unwrap();
        };
        install(release_binary(), "usr/local/bin/loopx");
        install(&bash, "bin/bash");
        install(&busybox, "bin/busybox");
        symlink("busybox", root.join("bin/sleep")).unwrap();
        let null = c_path(&root.join("dev/null"));
        // SAFETY: a plain system call on a valid C string.
        let made =
            unsafe { libc::mknod(null.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
        assert_eq!(made, 0, "mknod /dev/null: {}", io::Error::last_os_error());
        Some(BareRoot { tmp })
    }

    fn path(&self, inside: &str) -> PathBuf {
        self.tmp.path().join(inside.trim_start_matches('/'))
    }

    fn write(&self, inside: &str, text: &str) {
        let p = self.path(inside);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    /// `argv0 args...` run as /usr/local/bin/loopx inside the root, in
    /// /proj, with nothing of the host's environment.
    fn loopx(&self, argv0: &str, args: &[&str]) -> Run {
        let mut cmd = Command::new("/usr/local/bin/loopx");
        cmd.arg0(argv0)
            .args(args)
            .env_clear()
            .env("PATH", "/bin:/usr/local/bin")
            .env("HOME", "/home");
        let root = c_path(self.tmp.path());
        let proj = c_path(Path::new("/proj"));
        // SAFETY: chroot and chdir are async-signal-safe system calls on
        // CStrings that outlive the exec; the program path is resolved after
        // them, inside the root.
        unsafe {
            cmd.pre_exec(move || {
                if libc::chroot(root.as_ptr()) != 0 || libc::chdir(proj.as_ptr()) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Run::command(cmd)
    }
}

#[test]
fn without_proc_loopx_bin_comes_from_argv0() {
    let Some(root) = BareRoot::new("without_proc_loopx_bin_comes_from_argv0") else {
        return;
    };
    root.write(
        "/proj/.loopx/ralph/index.sh",
        "if [ -e /proc/self ]; then echo yes > /proj/has-proc; fi\n\
         echo \"$LOOPX_BIN\" >> /proj/loopx-bin\n\
         \"$LOOPX_BIN\" output --goto next\n",
    );
    root.write(
        "/proj/.loopx/ralph/next.sh",
        "echo next >> /proj/loopx-bin\n\"$LOOPX_BIN\" output --stop\n",
    );
    // As typed: an absolute path, a bare name found on PATH, a relative path.
    for argv0 in ["/usr/local/bin/loopx", "loopx", "../usr/local/bin/loopx"] {
        root.loopx(argv0, &["run", "ralph"]).stdout("").run();
    }
    assert!(!root.path("/proj/has-proc").exists(), "the root has /proc");
    assert_eq!(
        fs::read_to_string(root.path("/proj/loopx-bin")).unwrap(),
        "/usr/local/bin/loopx\nnext\n".repeat(3)
    );

    // argv[0] that names nothing: the error says what was tried.
    root.loopx("not-loopx", &["run", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains("loopx: error: cannot determine the path of the loopx binary")
        .stderr_contains("the kernel did not say (")
        .stderr_contains("/proc")
        .stderr_contains("argv[0] 'not-loopx' was not found on PATH /bin:/usr/local/bin")
        .stderr_contains("hint: mount /proc, or start loopx by its full path")
        .run();
}

#[test]
fn the_static_binary_runs_a_bash_workflow_in_a_bare_root() {
    let Some(root) = BareRoot::new("the_static_binary_runs_a_bash_workflow_in_a_bare_root") else {
        return;
    };
    // Env files: a global one written by `loopx env set`, a local one by hand.
    root.loopx("loopx", &["env", "set", "GREETING", "hello world"])
        .run();
    root.write("/proj/local.env", "PLACE='bare root'\n");
    root.write(
        "/proj/.loopx/flow/index.sh",
        "echo \"index: $GREETING in $PLACE\" >> /proj/log\n\
         \"$LOOPX_BIN\" output --result \"payload from index\" --goto check\n",
    );
    root.write(
        "/proj/.loopx/flow/check.sh",
        "read -r line\necho \"check: $line\" >> /proj/log\n\
         \"$LOOPX_BIN\" output --goto other:wait\n",
    );
    // Waits in a busybox sleep (a grandchild of loopx) until Ctrl-C.
    root.write(
        "/proj/.loopx/other/wait.sh",
        "echo wait >> /proj/log\nsleep 300 &\necho $! > /proj/sleep.pid\n\
         echo $$ > /proj/wait.pid\nwait\n",
    );

    // Past its first iteration, the interrupted run is kept and says how
    // to carry it on.
    let loopx = root
        .loopx("loopx", &["run", "-e", "local.env", "flow"])
        .status(130)
        .stdout("")
        .stderr_contains("loopx: the run can be resumed: loopx resume ")
        .start();
    let pid_in = |f: &str| -> i32 { wait_for_file(&root.path(f)).trim().parse().unwrap() };
    let (sleep_pid, wait_pid) = (pid_in("/proj/sleep.pid"), pid_in("/proj/wait.pid"));
    // Ctrl-C: the terminal signals loopx's foreground process group.
    // SAFETY: signalling the group of our own child (its leader: Run::start).
    assert_eq!(unsafe { libc::kill(-loopx.pid(), libc::SIGINT) }, 0);
    loopx.finish();
    assert_eq!(
        fs::read_to_string(root.path("/proj/log")).unwrap(),
        "index: hello world in bare root\ncheck: payload from index\nwait\n"
    );
    assert!(!alive(sleep_pid), "the script's sleep outlived loopx");
    assert!(!alive(wait_pid), "the script outlived loopx");
    assert_eq!(
        fs::read_to_string(root.path("/home/.config/loopx/env")).unwrap(),
        "GREETING=\"hello world\"\n"
    );
    root.loopx("loopx", &["env", "list"])
        .stdout("GREETING=hello world\n")
        .run();
}
