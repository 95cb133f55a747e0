//! Installs that meet faults (§10.7, README "Reliability notes"): a
//! read-only `.loopx/`, a disk that fills up mid-install, `git` or `curl`
//! missing, loopx killed with SIGKILL mid-install, a server that stalls or
//! trickles mid-download, sources over the size limit (a gzip bomb, a
//! download without a length, a repository of zeros). Each leaves `.loopx/`
//! exactly as it was (paths, kinds, contents, modes) and says what went
//! wrong, with exit code 1; after a SIGKILL the next install succeeds and
//! leaves nothing behind.
//!
//! A read-only bind mount, a small tmpfs and a FIFO mounted over a file
//! need root; without it those parts print why they skip (a read-only
//! `.loopx/` is then made with permission bits, which root ignores).
#![cfg(target_os = "linux")]

use std::ffi::CString;
use std::fs;
use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use flate2::write::GzEncoder;
use flate2::Compression;

use crate::util::http::{Response, Server};
use crate::util::procs::{alive, wait_until};
use crate::util::{c_path, is_root, names, skip, Outcome, Project, Run, TempDir};

// ---------------------------------------------------------------- helpers

fn write_file(path: &Path, body: &[u8], mode: u32) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, body).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@loopx.invalid"])
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git (the tests need it; .ci/run installs it)");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Every path under `dir` with its kind, mode and content: "exactly as it
/// was" compares these.
fn snapshot(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            let meta = fs::symlink_metadata(&path).unwrap();
            let mode = meta.mode() & 0o7777;
            if meta.file_type().is_symlink() {
                out.push(format!(
                    "{rel} -> {}",
                    fs::read_link(&path).unwrap().display()
                ));
            } else if meta.is_dir() {
                out.push(format!("{rel}/ {mode:o}"));
                pending.push(path);
            } else {
                let body = fs::read(&path).unwrap();
                out.push(format!(
                    "{rel} {mode:o} {:?}",
                    String::from_utf8_lossy(&body)
                ));
            }
        }
    }
    out.sort();
    out
}

/// A project whose `.loopx/` already holds a workflow, a private TMPDIR for
/// loopx, and a git repository `flow.git` to install.
struct Fixture {
    p: Project,
    tmp: TempDir,
    url: String,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with_files(&[("index.sh", b"#!/bin/bash\necho new >&2\n")])
    }

    fn with_files(files: &[(&str, &[u8])]) -> Fixture {
        let p = Project::new();
        write_file(&p.path(".loopx/keep/index.sh"), b"#!/bin/bash\n", 0o755);
        write_file(&p.path(".loopx/keep/notes.txt"), b"mine", 0o600);
        let tmp = TempDir::new("faults");
        fs::create_dir_all(tmp.path().join("tmp")).unwrap();
        let repo = tmp.path().join("repos/flow.git");
        fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q"]);
        for (rel, body) in files {
            write_file(&repo.join(rel), body, 0o755);
        }
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "init"]);
        let url = format!("file://{}", repo.display());
        Fixture { p, tmp, url }
    }

    fn tmpdir(&self) -> PathBuf {
        self.tmp.path().join("tmp")
    }

    fn loopx_dir(&self) -> PathBuf {
        self.p.path(".loopx")
    }

    fn install(&self, args: &[&str]) -> Run {
        let mut all = vec!["install"];
        all.extend_from_slice(args);
        self.p.loopx(&all).env("TMPDIR", self.tmpdir())
    }

    /// A directory of stand-in tools (shell scripts) put first on PATH.
    fn tools(&self, tools: &[(&str, &str)]) -> String {
        let bin = self.tmp.path().join("bin");
        for (name, script) in tools {
            write_file(&bin.join(name), script.as_bytes(), 0o755);
        }
        format!("{}:/usr/bin:/bin", bin.display())
    }

    /// `install` expected to fail: exit 1, nothing on stdout, and stderr
    /// containing `error`.
    fn install_fails(&self, args: &[&str], error: &str) -> Run {
        self.install(args)
            .status(1)
            .stdout("")
            .stderr_contains(error)
    }

    /// After a failed install: `.loopx/` as `before`, no temporary
    /// directory left.
    #[track_caller]
    fn assert_untouched(&self, o: &Outcome, before: &[String]) {
        assert_eq!(snapshot(&self.loopx_dir()), before, "{o}");
        assert_eq!(names(&self.tmpdir()), Vec::<String>::new(), "{o}");
    }
}

/// In the child before exec: a private mount namespace (so mounts made for
/// the test, or by its stand-in tools, vanish with loopx), then `extra`.
fn in_private_mounts(
    cmd: &mut Command,
    extra: impl Fn() -> io::Result<()> + Send + Sync + 'static,
) {
    let root = c_path(Path::new("/"));
    // SAFETY: unshare and mount are async-signal-safe system calls on
    // CStrings moved into the hook; `extra` makes only such calls too.
    unsafe {
        cmd.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(io::Error::last_os_error());
            }
            let none = std::ptr::null();
            let flags = libc::MS_REC | libc::MS_PRIVATE;
            if libc::mount(none, root.as_ptr(), none, flags, none.cast()) != 0 {
                return Err(io::Error::last_os_error());
            }
            extra()
        });
    }
}

// ---------------------------------------------------------------- read-only .loopx/

#[test]
fn read_only_loopx_dir_is_left_as_it_was_with_a_clear_error() {
    let f = Fixture::new();
    let before = snapshot(&f.loopx_dir());
    let mut run = f.install(&[&f.url]);
    let reason = if is_root() {
        // Root writes through permission bits: a read-only bind mount of
        // .loopx/ onto itself, in loopx's own mount namespace.
        let dir = c_path(&f.loopx_dir());
        in_private_mounts(&mut run.cmd, move || {
            let none = std::ptr::null();
            // SAFETY: see in_private_mounts.
            unsafe {
                if libc::mount(dir.as_ptr(), dir.as_ptr(), none, libc::MS_BIND, none.cast()) != 0 {
                    return Err(io::Error::last_os_error());
                }
                let ro = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
                if libc::mount(none, dir.as_ptr(), none, ro, none.cast()) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
        "Read-only file system"
    } else {
        fs::set_permissions(f.loopx_dir(), fs::Permissions::from_mode(0o555)).unwrap();
        "Permission denied"
    };
    let o = run
        .status(1)
        .stdout("")
        .stderr_contains(&format!(
            "loopx: error: cannot install into {}: cannot create a staging directory there: {reason}",
            f.loopx_dir().display()
        ))
        .run();
    if !is_root() {
        fs::set_permissions(f.loopx_dir(), fs::Permissions::from_mode(0o755)).unwrap();
    }
    f.assert_untouched(&o, &before);
}

// ---------------------------------------------------------------- disk full

/// A tmpfs of `size` mounted at `dir` for the test's lifetime.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> io::Result<SmallDisk> {
        fs::create_dir_all(dir)?;
        let (src, fstype) = (
            CString::new("tmpfs").unwrap(),
            CString::new("tmpfs").unwrap(),
        );
        let data = CString::new(format!("size={size},mode=0755")).unwrap();
        let target = c_path(dir);
        // SAFETY: mount with valid C strings.
        let r = unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                data.as_ptr().cast(),
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(SmallDisk(dir.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let target = c_path(&self.0);
        // SAFETY: unmounting what `mount` mounted; lazily, so a file still
        // open somewhere cannot keep it.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

#[test]
fn disk_filling_up_mid_install_leaves_loopx_dir_as_it_was() {
    const TEST: &str = "disk_filling_up_mid_install_leaves_loopx_dir_as_it_was";
    if !is_root() {
        return skip(TEST, "mounting a small tmpfs needs root");
    }
    // A workflow of 4 MiB (2 MiB of it in one file) for a disk of 1 MiB.
    let blob = vec![b'x'; 2 << 20];
    let f = Fixture::with_files(&[
        ("index.sh", b"#!/bin/bash\n"),
        ("a.bin", b"small"),
        ("data/blob.bin", &blob),
        ("data/z.bin", &blob),
    ]);
    let disk = f.tmp.path().join("disk");
    let _small = match SmallDisk::mount(&disk, "1m") {
        Ok(m) => m,
        Err(e) => return skip(TEST, &format!("cannot mount a tmpfs here: {e}")),
    };
    // The project lives on the small disk; the download does not.
    let root = disk.join("project");
    write_file(&root.join(".loopx/keep/index.sh"), b"#!/bin/bash\n", 0o755);
    write_file(&root.join(".loopx/keep/notes.txt"), b"mine", 0o600);
    let before = snapshot(&root.join(".loopx"));
    let o = f
        .install_fails(
            &[&f.url],
            "loopx: error: cannot stage workflow 'flow': No space left on device",
        )
        .stderr_contains("nothing was installed")
        .current_dir(&root)
        .run();
    assert_eq!(snapshot(&root.join(".loopx")), before, "{o}");
    assert_eq!(names(&f.tmpdir()), Vec::<String>::new(), "{o}");
}

// ---------------------------------------------------------------- missing tools

#[test]
fn missing_git_or_curl_leaves_loopx_dir_as_it_was_and_names_the_tool() {
    let f = Fixture::new();
    let before = snapshot(&f.loopx_dir());
    let empty = f.tmp.path().join("empty-bin");
    fs::create_dir_all(&empty).unwrap();
    for (source, error) in [
        (
            f.url.as_str(),
            "`git` was not found on PATH; loopx install needs it to clone git sources",
        ),
        (
            "http://127.0.0.1:9/flow.tar.gz",
            "`curl` was not found on PATH; loopx install needs it to download tarball sources",
        ),
    ] {
        let o = f.install_fails(&[source], error).env("PATH", &empty).run();
        f.assert_untouched(&o, &before);
    }
}

// ---------------------------------------------------------------- SIGKILL

/// After a killed install: the next one succeeds, and neither `.loopx/` nor
/// the TMPDIR keeps anything of either.
fn next_install_succeeds_and_cleans_up(f: &Fixture) {
    f.install(&[&f.url])
        .stdout("installed workflow 'flow' into .loopx/flow\n")
        .run();
    assert_eq!(names(&f.loopx_dir()), ["flow", "keep"]);
    assert_eq!(names(&f.tmpdir()), Vec::<String>::new());
    assert_eq!(
        fs::read_to_string(f.p.path(".loopx/flow/index.sh")).unwrap(),
        "#!/bin/bash\necho new >&2\n"
    );
}

#[test]
fn sigkill_while_fetching_then_the_next_install_cleans_up() {
    let f = Fixture::new();
    let before = snapshot(&f.loopx_dir());
    let ready = f.tmp.path().join("ready");
    // A git that starts a clone (into its last argument), says its pid,
    // then hangs (as itself: exec).
    let path = f.tools(&[(
        "git",
        "#!/bin/sh\nfor a; do dest=$a; done\n\
         mkdir -p \"$dest\" && echo partial > \"$dest/index.sh\"\n\
         echo $$ > \"$READY\"\nexec sleep 1000\n",
    )]);
    let loopx = f
        .install(&["org/flow"])
        .env("PATH", path)
        .env("READY", &ready)
        .signal(libc::SIGKILL)
        .start();
    let mut git_pid = 0;
    wait_until("the fake git started", || {
        let text = fs::read_to_string(&ready).unwrap_or_default();
        git_pid = text.trim().parse().unwrap_or(0);
        text.ends_with('\n') && git_pid > 0
    });
    loopx.signal(libc::SIGKILL);
    loopx.finish();
    // The orphaned fake git goes too, by its pid.
    // SAFETY: the fake git this test started.
    unsafe { libc::kill(git_pid, libc::SIGKILL) };
    wait_until("the fake git is gone", || !alive(git_pid));
    assert_eq!(snapshot(&f.loopx_dir()), before);
    let left = names(&f.tmpdir());
    assert!(
        left.len() == 1 && left[0].starts_with("loopx-install-"),
        "{left:?}"
    );
    next_install_succeeds_and_cleans_up(&f);
}

#[test]
fn sigkill_while_staging_then_the_next_install_cleans_up() {
    const TEST: &str = "sigkill_while_staging_then_the_next_install_cleans_up";
    if !is_root() {
        return skip(
            TEST,
            "holding loopx inside staging needs a mount, and so root",
        );
    }
    let f = Fixture::new();
    let before = snapshot(&f.loopx_dir());
    // A git whose checkout holds a file with a FIFO mounted over it:
    // staging copies the file, so loopx blocks reading the FIFO, inside
    // staging, until the test writes (it never does; it kills loopx there).
    // `clone` (into its last argument) makes an empty `.git`; `-C <dir>
    // ls-tree` lists one small file; `-C <dir> checkout` writes the files.
    let fifo = f.tmp.path().join("fifo");
    let made = unsafe { libc::mkfifo(c_path(&fifo).as_ptr(), 0o600) };
    assert_eq!(made, 0, "mkfifo: {}", io::Error::last_os_error());
    let path = f.tools(&[(
        "git",
        "#!/bin/sh\ncase \"$1 $3\" in\n\
         '-C ls-tree') printf '100644 blob 0 12\\tindex.sh\\0' ;;\n\
         '-C checkout') printf '#!/bin/bash\\n' > \"$2/index.sh\" && : > \"$2/stuck\" &&\n\
           exec mount --bind \"$FIFO\" \"$2/stuck\" ;;\n\
         *) for a; do dest=$a; done; mkdir -p \"$dest/.git\" ;;\n\
         esac\n",
    )]);
    let mut run = f
        .install(&["org/flow"])
        .env("PATH", path)
        .env("FIFO", &fifo)
        .signal(libc::SIGKILL);
    in_private_mounts(&mut run.cmd, || Ok(()));
    let loopx = run.start();
    // Opening the FIFO for writing without blocking succeeds once loopx
    // has it open for reading: loopx is then inside staging.
    let fifo_c = c_path(&fifo);
    let mut writer = -1;
    wait_until("loopx reads the FIFO while staging", || {
        // SAFETY: open with a valid path; the descriptor is closed below.
        writer = unsafe { libc::open(fifo_c.as_ptr(), libc::O_WRONLY | libc::O_NONBLOCK) };
        writer >= 0
    });
    let staging: Vec<String> = names(&f.loopx_dir())
        .into_iter()
        .filter(|n| n.starts_with(".loopx-install-"))
        .collect();
    assert_eq!(staging.len(), 1, "no staging directory while staging");
    loopx.signal(libc::SIGKILL);
    loopx.finish();
    // SAFETY: closing our descriptor.
    unsafe { libc::close(writer) };
    // The dead install's staging directory is still there...
    assert!(f.loopx_dir().join(&staging[0]).is_dir());
    // ...and nothing else of it in .loopx/.
    let mut without: Vec<String> = snapshot(&f.loopx_dir())
        .into_iter()
        .filter(|l| !l.starts_with(".loopx-install-"))
        .collect();
    without.sort();
    assert_eq!(without, before);
    next_install_succeeds_and_cleans_up(&f);
}

// ---------------------------------------------------------------- stalled server

/// A server that answers one request with the headers and the first bytes
/// of a large body, then sends nothing more until it is dropped.
struct StallingServer {
    url: String,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl StallingServer {
    fn start() -> StallingServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/flow.tar.gz", listener.local_addr().unwrap());
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = thread::spawn(move || {
            let Ok((mut conn, _)) = listener.accept() else {
                return;
            };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/gzip\r\n\
                  Content-Length: 1000000\r\n\r\n\x1f\x8b\x08\x00\x00\x00",
            );
            let _ = conn.flush();
            // Stall: hold the connection open until the test is done.
            let _ = stopped.recv_timeout(Duration::from_secs(120));
        });
        StallingServer {
            url,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for StallingServer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_download_that_stalls_gives_up_after_the_stall_timeout() {
    let f = Fixture::new();
    let before = snapshot(&f.loopx_dir());
    let server = StallingServer::start();
    let start = Instant::now();
    let error = stalled("download", &server.url);
    let o = f
        .install_fails(&[&server.url], &error)
        .env("LOOPX_INSTALL_STALL_TIMEOUT", "2")
        .timeout(Duration::from_secs(60))
        .run();
    let took = start.elapsed();
    f.assert_untouched(&o, &before);
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(
        took < Duration::from_secs(30),
        "gave up only after {took:?}"
    );
}

#[test]
fn a_stall_timeout_that_is_not_a_number_of_seconds_is_refused() {
    let f = Fixture::new();
    let before = snapshot(&f.loopx_dir());
    for bad in ["abc", "0", "-1", "1.5", "2s"] {
        let error = format!(
            "LOOPX_INSTALL_STALL_TIMEOUT must be a whole number of seconds (at least 1), got '{bad}'"
        );
        let o = f
            .install_fails(&["http://127.0.0.1:9/flow.tar.gz"], &error)
            .env("LOOPX_INSTALL_STALL_TIMEOUT", bad)
            .run();
        f.assert_untouched(&o, &before);
    }
}

/// The error of an install abandoned by the stall rule (2 s in these tests).
fn stalled(what: &str, url: &str) -> String {
    format!(
        "loopx: error: {what} of {url} stalled: less than 1024 bytes/s arrived for 2s \
         (LOOPX_INSTALL_STALL_TIMEOUT), so loopx gave up; nothing was installed\n\
         hint: LOOPX_INSTALL_STALL_TIMEOUT=<seconds> waits longer\n"
    )
}

/// Fails if any process's command line mentions `needle` (a test server's
/// address): a curl, git or git-remote-http outliving the install.
#[track_caller]
fn assert_no_process_mentions(needle: &str) {
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        if !name
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        // Gone since the listing, or a zombie (empty): not running.
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert!(
            !cmdline.contains(needle),
            "pid {name:?} still running: {cmdline}"
        );
    }
}

// ---------------------------------------------------------------- trickling server

/// README "Reliability notes": under 1024 bytes/s for the stall timeout is a
/// stall, not only silence. A server dripping 2 bytes a second would keep
/// the install going for ever otherwise.
#[test]
fn a_download_that_trickles_gives_up_after_the_stall_timeout() {
    let f = Fixture::new();
    let before = snapshot(&f.loopx_dir());
    let server = Server::new().unwrap();
    server.route(
        "/slow.tar.gz",
        Response::ok(vec![0u8; 64 << 10]).drip(2, Duration::from_secs(1)),
    );
    let url = server.url_for("/slow.tar.gz");
    let start = Instant::now();
    let o = f
        .install_fails(&[&url], &stalled("download", &url))
        .env("LOOPX_INSTALL_STALL_TIMEOUT", "2")
        .timeout(Duration::from_secs(30))
        .run();
    let took = start.elapsed();
    f.assert_untouched(&o, &before);
    assert_no_process_mentions(&server.url());
    assert!(took >= Duration::from_secs(2), "{took:?}");
}

/// The same rule for git over HTTP: a dumb-HTTP repository (plain files,
/// `git update-server-info`) served 2 bytes a second.
#[test]
fn a_git_clone_that_trickles_gives_up_after_the_stall_timeout() {
    let f = Fixture::new();
    let before = snapshot(&f.loopx_dir());
    let served = f.tmp.path().join("served");
    fs::create_dir_all(&served).unwrap();
    let repo = f.tmp.path().join("repos/flow.git");
    git(
        &served,
        &["clone", "-q", "--bare", repo.to_str().unwrap(), "flow.git"],
    );
    git(&served.join("flow.git"), &["update-server-info"]);
    let server = Server::serve_dir(&served).unwrap();
    server.drip_all(2, Duration::from_secs(1));
    let url = server.url_for("/flow.git");
    let start = Instant::now();
    let o = f
        .install_fails(&[&url], &stalled("git clone", &url))
        .env("LOOPX_INSTALL_STALL_TIMEOUT", "2")
        .timeout(Duration::from_secs(30))
        .run();
    let took = start.elapsed();
    f.assert_untouched(&o, &before);
    assert_no_process_mentions(&server.url());
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(
        server.paths().iter().any(|p| p == "/flow.git/info/refs"),
        "{:?}",
        server.paths()
    );
}

// ---------------------------------------------------------------- size limit

/// A `.tar.gz` of these files.
fn tar_gz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    for (path, body) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o755);
        b.append_data(&mut h, path, *body).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

/// Bytes that gzip cannot shrink (xorshift), so an archive of them is as
/// large as they are.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The error of an install over a 1M limit; `what` is what went over.
fn too_large(what: &str) -> String {
    format!(
        "loopx: error: {what} is larger than the install size limit of 1M \
         (LOOPX_INSTALL_MAX_SIZE), so loopx gave up; nothing was installed\n\
         hint: LOOPX_INSTALL_MAX_SIZE=<bytes, or with a K, M or G suffix> raises it\n"
    )
}

/// README "Reliability notes": a gzip bomb (8 MiB of zeros in a few
/// kilobytes) stops at the limit instead of filling the disk.
#[test]
fn a_tarball_that_unpacks_over_the_size_limit_is_refused() {
    let f = Fixture::new();
    let before = snapshot(&f.loopx_dir());
    let zeros = vec![0u8; 8 << 20];
    let bomb = tar_gz(&[("flow/index.sh", b"#!/bin/bash\n"), ("flow/zeros", &zeros)]);
    assert!(bomb.len() < 64 << 10, "{}", bomb.len());
    let server = Server::new().unwrap();
    server.route("/bomb.tar.gz", Response::ok(bomb));
    let url = server.url_for("/bomb.tar.gz");
    let o = f
        .install_fails(
            &[&url],
            &too_large(&format!("the content of the tarball {url}")),
        )
        .env("LOOPX_INSTALL_MAX_SIZE", "1M")
        .run();
    f.assert_untouched(&o, &before);
}

/// The download itself is counted: curl stops early on a `Content-Length`
/// over the limit, and loopx stops it on a body sent without one.
#[test]
fn a_download_over_the_size_limit_is_stopped_with_or_without_a_length() {
    let f = Fixture::new();
    let before = snapshot(&f.loopx_dir());
    // A valid tarball of 3 MiB that does not compress.
    let noise = noise(3 << 20);
    let big = tar_gz(&[("flow/index.sh", b"#!/bin/bash\n"), ("flow/noise", &noise)]);
    assert!(big.len() > 3 << 20);
    let server = Server::new().unwrap();
    server.route("/sized.tar.gz", Response::ok(big.clone()));
    server.route("/unsized.tar.gz", Response::ok(big).without_length());
    for path in ["/sized.tar.gz", "/unsized.tar.gz"] {
        let url = server.url_for(path);
        let o = f
            .install_fails(&[&url], &too_large(&format!("the download of {url}")))
            .env("LOOPX_INSTALL_MAX_SIZE", "1M")
            .run();
        f.assert_untouched(&o, &before);
    }
    assert_no_process_mentions(&server.url());
    // Under a limit it fits, the same tarball installs.
    f.install(&["-y", &server.url_for("/unsized.tar.gz")])
        .env("LOOPX_INSTALL_MAX_SIZE", "4M")
        .stdout("installed workflow 'unsized' into .loopx/unsized\n")
        .run();
}

/// A repository is checked against the limit by the size of its files,
/// before they are checked out.
#[test]
fn a_repository_over_the_size_limit_is_refused() {
    let zeros = vec![0u8; 2 << 20];
    let f = Fixture::with_files(&[("index.sh", b"#!/bin/bash\n"), ("data/zeros", &zeros)]);
    let before = snapshot(&f.loopx_dir());
    let o = f
        .install_fails(&[&f.url], &too_large(&format!("the checkout of {}", f.url)))
        .env("LOOPX_INSTALL_MAX_SIZE", "1M")
        .run();
    f.assert_untouched(&o, &before);
    f.install(&[&f.url])
        .env("LOOPX_INSTALL_MAX_SIZE", "3M")
        .stdout("installed workflow 'flow' into .loopx/flow\n")
        .run();
}

#[test]
fn a_size_limit_that_is_not_a_size_is_refused() {
    let f = Fixture::new();
    let before = snapshot(&f.loopx_dir());
    for bad in [
        "abc",
        "0",
        "-1",
        "1.5M",
        "10MB",
        "1T",
        "1 M",
        "99999999999G",
    ] {
        let error = format!(
            "loopx: error: LOOPX_INSTALL_MAX_SIZE must be a size in bytes, or with a K, M or G \
             suffix (e.g. 512M), got '{bad}'\n"
        );
        let o = f
            .install_fails(&[&f.url], &error)
            .env("LOOPX_INSTALL_MAX_SIZE", bad)
            .run();
        f.assert_untouched(&o, &before);
    }
}
