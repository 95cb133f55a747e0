//! The npm package of a release, installed the way users install it
//! (DESIGN.md "Getting the binary through npm", "Release artifacts").
//!
//! scripts/build-release.sh builds the release tree once per run (the host's
//! musl archive and `loopx-<version>.tgz`); a server on 127.0.0.1 serves that
//! tree as the mirror named by LOOPX_DOWNLOAD_URL, and its request log shows
//! when the binary was fetched. npm, pnpm and Bun install the tarball into
//! temp prefixes for a user whose HOME and XDG directories are temp dirs too.
//!
//! What comes from the npm registry (tsx and its dependencies, pnpm itself)
//! goes through caches under ${XDG_CACHE_HOME:-~/.cache}/loopx-ci, shared
//! between runs to keep these tests fast; nothing else is written outside
//! the tests' temp dirs.
#![cfg(target_os = "linux")]

use crate::util::{bun, ci_cache, wait_with_output, Outcome, Project, TempDir};
use crate::util::{http, release};
use http::{Response, Server};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::{chown, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use release::{TARGET, VERSION};

/// Installs fetch tsx (and esbuild) through the shared npm cache.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// The archive's path on the mirror, as the package asks for it.
fn archive_path() -> String {
    format!("/download/v{VERSION}/loopx-{TARGET}.tar.gz")
}

/// Runs `cmd` to completion with stdin closed; panics after `timeout`.
fn run(cmd: &mut Command, timeout: Duration) -> Outcome {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    wait_with_output(child, timeout)
}

fn sha256_hex(bytes: &[u8], scratch: &Path) -> String {
    let file = scratch.join("to-hash");
    fs::write(&file, bytes).expect("write bytes to hash");
    let out = run(Command::new("sha256sum").arg(&file), RUN_TIMEOUT);
    out.success();
    out.stdout
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

// ------------------------------------------------------------ the release

/// The release tree scripts/build-release.sh writes for the host's target.
struct Tree {
    out: PathBuf,
}

impl Tree {
    fn vdir(&self) -> PathBuf {
        self.out.join(format!("download/v{VERSION}"))
    }

    /// The npm package: `loopx-<version>.tgz`.
    fn tgz(&self) -> PathBuf {
        self.vdir().join(format!("loopx-{VERSION}.tgz"))
    }

    /// The checksum SHA256SUMS lists for `name`.
    fn listed_sum(&self, name: &str) -> String {
        let sums = fs::read_to_string(self.vdir().join("SHA256SUMS")).expect("read SHA256SUMS");
        sums.lines()
            .find_map(|l| l.strip_suffix(&format!("  {name}")))
            .unwrap_or_else(|| panic!("SHA256SUMS has no line for {name}:\n{sums}"))
            .to_string()
    }

    /// The binary inside the host's archive.
    fn binary(&self) -> Vec<u8> {
        let archive = self.out.join(archive_path().trim_start_matches('/'));
        let out = run(
            Command::new("tar").arg("-xzOf").arg(&archive).arg("loopx"),
            RUN_TIMEOUT,
        );
        out.success();
        out.stdout_bytes
    }
}

/// The one release build the tests share.
fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let tree = Tree {
            out: release::host_release().out.as_path().to_path_buf(),
        };
        assert!(tree.tgz().is_file(), "no npm package in the release tree");
        tree
    })
}

// ------------------------------------------------------------ the user

/// A user's machine: a private HOME with its XDG directories and an npm
/// prefix, all in a temp dir; LOOPX_DOWNLOAD_URL names the test's mirror.
struct User {
    tmp: TempDir,
    mirror: String,
}

impl User {
    fn new(tag: &str, mirror: &str) -> User {
        let tmp = TempDir::new(tag);
        fs::create_dir_all(tmp.path().join("home")).expect("create home");
        User {
            tmp,
            mirror: mirror.to_string(),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn home(&self) -> PathBuf {
        self.path("home")
    }

    fn prefix(&self) -> PathBuf {
        self.path("prefix")
    }

    /// Where `npm install -g --prefix` puts the package.
    fn npm_package(&self) -> PathBuf {
        self.prefix().join("lib/node_modules/loopx")
    }

    /// Where the package keeps a binary when its own directory cannot.
    fn cached_binary(&self) -> PathBuf {
        self.home().join(format!(".cache/loopx/{VERSION}/loopx"))
    }

    /// `program` run as this user: nothing of the test's own environment
    /// that could steer npm, pnpm, Bun or loopx gets through.
    fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if ["LOOPX_", "npm_", "NPM_", "XDG_", "BUN_", "PNPM_"]
                .iter()
                .any(|p| key.starts_with(p))
            {
                cmd.env_remove(&*key);
            }
        }
        let home = self.home();
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![self.prefix().join("bin")];
        dirs.extend(std::env::split_paths(&path));
        cmd.env("HOME", &home)
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("npm_config_cache", ci_cache().join("npm-cache"))
            .env("npm_config_update_notifier", "false")
            .env("npm_config_audit", "false")
            .env("npm_config_fund", "false")
            .env("LOOPX_DOWNLOAD_URL", &self.mirror)
            .env("PATH", std::env::join_paths(dirs).expect("PATH"))
            .current_dir(&home);
        cmd
    }

    /// `npm install -g --prefix <prefix> <extra> <the release's tgz>`.
    fn npm_install_g(&self, extra: &[&str]) -> Outcome {
        self.npm_install_g_from(tree().tgz().as_os_str(), extra)
    }

    /// `npm install -g --prefix <prefix> <extra> <package>`.
    fn npm_install_g_from(&self, package: &OsStr, extra: &[&str]) -> Outcome {
        let out = run(
            self.command("npm")
                .args(["install", "-g", "--prefer-offline", "--prefix"])
                .arg(self.prefix())
                .args(extra)
                .arg(package),
            INSTALL_TIMEOUT,
        );
        out.success();
        out
    }

    /// `loopx <args>` through the command npm installed.
    fn loopx(&self, args: &[&str]) -> Outcome {
        run(
            self.command(self.prefix().join("bin/loopx")).args(args),
            RUN_TIMEOUT,
        )
    }
}

/// Asserts a `loopx version` that printed the version and nothing else.
#[track_caller]
fn assert_version_quietly(out: &Outcome) {
    out.success()
        .stdout_is(&format!("{VERSION}\n"))
        .stderr_empty();
}

/// Asserts a first `loopx version`: one progress line naming the URL, then
/// the version.
#[track_caller]
fn assert_version_after_download(out: &Outcome, server: &Server) {
    out.success()
        .stdout_is(&format!("{VERSION}\n"))
        .stderr_is(&format!(
            "loopx: downloading {} ...\n",
            server.url_for(&archive_path())
        ));
}

fn exists(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

/// A project whose TypeScript workflow imports `output` from "loopx" and
/// reports the runtime that ran it; a bash script stores that report.
fn ts_project() -> Project {
    let p = Project::new();
    p.script(
        "wf",
        "index.ts",
        "import { output } from \"loopx\";\n\
         const runtime: string = process.versions.bun ? \"bun\" : \"node\";\n\
         output({ result: `${runtime} ran the TypeScript`, goto: \"sink\" });\n",
    );
    p.script(
        "wf",
        "sink.sh",
        "cat > \"$LOOPX_PROJECT_ROOT/got\"\n$LOOPX_BIN output --stop\n",
    );
    p
}

// ------------------------------------------------------------------- npm

#[test]
fn npm_install_g_with_scripts_fetches_the_binary_at_install_time() {
    let server = Server::serve_dir(&tree().out).expect("start server");
    let user = User::new("npm-scripts", &server.url());
    // npm's default runs the package's postinstall.
    user.npm_install_g(&[]);
    assert_eq!(
        server.paths(),
        [archive_path()],
        "fetched during the install"
    );
    let native = user.npm_package().join("native/loopx");
    assert_eq!(
        fs::read(&native).expect("native/loopx after the install"),
        tree().binary()
    );
    let mode = fs::metadata(&native).expect("stat native/loopx").mode();
    assert_eq!(mode & 0o777, 0o755);

    assert_version_quietly(&user.loopx(&["version"]));
    assert_eq!(server.paths().len(), 1, "the run fetched nothing");
    assert!(!exists(&user.home().join(".cache/loopx")));
}

#[test]
fn npm_install_g_ignore_scripts_fetches_verifies_and_runs_on_first_use_only() {
    let server = Server::serve_dir(&tree().out).expect("start server");
    let user = User::new("npm-no-scripts", &server.url());
    // The package itself from the mirror too, as the README shows.
    let tgz_path = format!("/download/v{VERSION}/loopx-{VERSION}.tgz");
    user.npm_install_g_from(server.url_for(&tgz_path).as_ref(), &["--ignore-scripts"]);
    assert_eq!(
        server.paths(),
        std::slice::from_ref(&tgz_path),
        "only the package"
    );
    assert!(!exists(&user.npm_package().join("native")));
    // The package pins the release's archives (and only those).
    assert_eq!(
        fs::read(user.npm_package().join("SHA256SUMS")).expect("the package's SHA256SUMS"),
        fs::read_to_string(tree().vdir().join("SHA256SUMS"))
            .expect("SHA256SUMS")
            .lines()
            .filter(|l| !l.ends_with(".tgz"))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
            .into_bytes()
    );

    assert_version_after_download(&user.loopx(&["version"]), &server);
    assert_eq!(server.paths(), [tgz_path.clone(), archive_path()]);
    assert_eq!(
        fs::read(user.npm_package().join("native/loopx")).expect("native/loopx"),
        tree().binary()
    );
    let entries: Vec<_> = fs::read_dir(user.npm_package().join("native"))
        .expect("ls native")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(entries, ["loopx"], "no temp file is left");

    assert_version_quietly(&user.loopx(&["version"]));
    assert_eq!(
        server.paths(),
        [tgz_path, archive_path()],
        "the second run fetched"
    );

    // The installed package runs TypeScript under Node with its own tsx.
    let p = ts_project();
    p.loopx_at(&user.prefix().join("bin/loopx"), &["run", "wf"])
        .stdout("")
        .run();
    assert_eq!(p.read("got"), "node ran the TypeScript");
}

#[test]
fn a_package_dir_the_user_cannot_write_puts_the_binary_in_the_users_cache() {
    let server = Server::serve_dir(&tree().out).expect("start server");
    let user = User::new("npm-read-only", &server.url());
    user.npm_install_g(&["--ignore-scripts"]);

    // As after `sudo npm install -g`: the package belongs to root and the
    // user is someone else. Tests running as root run loopx as nobody;
    // otherwise the package is made read-only.
    let run_as_nobody = unsafe { libc::geteuid() } == 0;
    let as_user = |args: &[&str]| {
        let mut cmd = user.command(user.prefix().join("bin/loopx"));
        cmd.args(args);
        if run_as_nobody {
            cmd.uid(65534).gid(65534);
        }
        run(&mut cmd, RUN_TIMEOUT)
    };
    if run_as_nobody {
        for dir in user.npm_package().ancestors().skip(1) {
            let mode = fs::metadata(dir).expect("stat").mode();
            assert!(
                mode & 0o001 != 0,
                "{} is not searchable by other users, so this test cannot run the \
                 package as nobody: point TMPDIR at a directory they can reach",
                dir.display()
            );
        }
        chown_tree(&user.home(), 65534, 65534);
    } else {
        let o = run(
            Command::new("chmod")
                .args(["-R", "a-w"])
                .arg(user.npm_package()),
            RUN_TIMEOUT,
        );
        o.success();
    }

    assert_version_after_download(&as_user(&["version"]), &server);
    assert!(!exists(&user.npm_package().join("native")));
    let cached = user.cached_binary();
    assert_eq!(
        fs::read(&cached).expect("the cached binary"),
        tree().binary()
    );
    assert_eq!(fs::metadata(&cached).expect("stat").mode() & 0o777, 0o755);
    let entries: Vec<_> = fs::read_dir(cached.parent().expect("cache dir"))
        .expect("ls cache")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(entries, ["loopx"], "no temp file is left");

    assert_version_quietly(&as_user(&["version"]));
    assert_eq!(server.paths(), [archive_path()], "the second run fetched");
}

fn chown_tree(dir: &Path, uid: u32, gid: u32) {
    chown(dir, Some(uid), Some(gid)).unwrap_or_else(|e| panic!("chown {}: {e}", dir.display()));
    for entry in fs::read_dir(dir).expect("ls").flatten() {
        let path = entry.path();
        if entry.file_type().expect("file type").is_dir() {
            chown_tree(&path, uid, gid);
        } else {
            chown(&path, Some(uid), Some(gid))
                .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
        }
    }
}

#[test]
fn a_tampered_archive_on_the_mirror_is_refused_and_nothing_is_installed() {
    let tree = tree();
    let server = Server::serve_dir(&tree.out).expect("start server");
    let user = User::new("npm-tampered", &server.url());

    // A well-formed archive whose loopx would leave a mark if it ever ran.
    let mark = user.path("tampered-binary-ran");
    let evil = user.path("evil");
    fs::create_dir_all(&evil).expect("mkdir");
    fs::write(
        evil.join("loopx"),
        format!("#!/bin/sh\n: > '{}'\necho {VERSION}\n", mark.display()),
    )
    .expect("write fake loopx");
    fs::set_permissions(evil.join("loopx"), fs::Permissions::from_mode(0o755)).expect("chmod");
    let tampered_path = user.path("tampered.tar.gz");
    run(
        Command::new("tar")
            .arg("-czf")
            .arg(&tampered_path)
            .arg("-C")
            .arg(&evil)
            .arg("loopx"),
        RUN_TIMEOUT,
    )
    .success();
    let tampered = fs::read(&tampered_path).expect("read tampered archive");
    let got = sha256_hex(&tampered, user.tmp.path());
    server.route(&archive_path(), Response::ok(tampered));

    // With install scripts on: the install goes through, the binary does not.
    user.npm_install_g(&[]);
    assert_eq!(server.paths(), [archive_path()], "postinstall tried");
    assert!(!exists(&user.npm_package().join("native")));

    let out = user.loopx(&["version"]);
    out.failure().stdout_empty();
    let url = server.url_for(&archive_path());
    let expected = tree.listed_sum(&format!("loopx-{TARGET}.tar.gz"));
    for needle in [
        format!("loopx: downloading {url} ...\n"),
        "loopx: checksum mismatch: ".to_string(),
        format!("  tried:    {url}\n"),
        format!("sha256 {expected} "),
        format!("  got:      sha256 {got}\n"),
        "LOOPX_DOWNLOAD_URL to a mirror".to_string(),
        format!("LOOPX_BINARY_PATH to a loopx {VERSION} binary"),
        "nothing was installed or run".to_string(),
    ] {
        out.stderr_has(&needle);
    }
    assert!(!exists(&mark), "the tampered binary ran");
    assert!(!exists(&user.npm_package().join("native")));
    assert!(!exists(&user.home().join(".cache/loopx")));
}

#[test]
fn offline_or_missing_downloads_name_the_url_the_checksum_and_the_ways_out() {
    let tree = tree();
    let server = Server::serve_dir(&tree.out).expect("start server");
    let user = User::new("npm-failures", &server.url());
    user.npm_install_g(&["--ignore-scripts"]);
    let expected = tree.listed_sum(&format!("loopx-{TARGET}.tar.gz"));

    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", listener.local_addr().expect("addr"))
    };
    server.route(&archive_path(), Response::status(404));
    for (base, why) in [
        (server.url(), "(HTTP 404)".to_string()),
        (closed, "(ECONNREFUSED); are you offline?".to_string()),
    ] {
        let url = format!("{base}{}", archive_path());
        let mut cmd = user.command(user.prefix().join("bin/loopx"));
        let out = run(
            cmd.arg("version").env("LOOPX_DOWNLOAD_URL", &base),
            RUN_TIMEOUT,
        );
        out.failure().stdout_empty();
        for needle in [
            format!("loopx: could not download the loopx binary {why}\n"),
            format!("  tried:    {url}\n"),
            format!(
                "  expected: loopx-{TARGET}.tar.gz of loopx {VERSION}, sha256 {expected} (from {}/SHA256SUMS)\n",
                user.npm_package().display()
            ),
            "  either set LOOPX_DOWNLOAD_URL to a mirror of the releases\n".to_string(),
            format!("  or set LOOPX_BINARY_PATH to a loopx {VERSION} binary\n"),
        ] {
            out.stderr_has(&needle);
        }
        assert!(!exists(&user.npm_package().join("native")), "{why}");
        assert!(!exists(&user.home().join(".cache/loopx")), "{why}");
    }
}

// ------------------------------------------------------------------- Bun

#[test]
fn bun_add_g_runs_loopx_version_and_a_ts_workflow_that_imports_output() {
    let server = Server::serve_dir(&tree().out).expect("start server");
    let user = User::new("bun-g", &server.url());
    let bun_install = user.path("bun");
    run(
        user.command(bun())
            .args(["add", "-g"])
            .arg(tree().tgz())
            .env("BUN_INSTALL", &bun_install)
            .env("BUN_INSTALL_CACHE_DIR", ci_cache().join("bun-cache")),
        INSTALL_TIMEOUT,
    )
    .success();
    let bin = bun_install.join("bin/loopx");

    let out = run(user.command(bun()).arg(&bin).arg("version"), RUN_TIMEOUT);
    out.success().stdout_is(&format!("{VERSION}\n"));
    // Bun runs no install script of a package it was not told to trust, so
    // the binary may come at install time or now; either way, once.
    assert_eq!(server.paths(), [archive_path()]);
    let out = run(user.command(bun()).arg(&bin).arg("version"), RUN_TIMEOUT);
    assert_version_quietly(&out);
    assert_eq!(server.paths().len(), 1, "the second run fetched");

    let p = ts_project();
    p.loopx_at(&bun(), &[&bin.display().to_string(), "run", "wf"])
        .stdout("")
        .run();
    assert_eq!(p.read("got"), "bun ran the TypeScript");
}

// ------------------------------------------------------------------ pnpm

/// pnpm 10, whose default blocks dependencies' install scripts, installed
/// from the npm registry into the shared cache on first use.
fn pnpm() -> &'static Path {
    static PNPM: OnceLock<PathBuf> = OnceLock::new();
    PNPM.get_or_init(|| {
        let dir = ci_cache().join("pnpm10");
        let bin = dir.join("node_modules/.bin/pnpm");
        if bin.is_file() {
            return bin;
        }
        // Installed beside and renamed into place: a concurrent run (or one
        // killed halfway) never leaves a half-installed pnpm behind.
        let staging = ci_cache().join(format!("pnpm10.tmp-{}", std::process::id()));
        let _ = fs::remove_dir_all(&staging);
        fs::create_dir_all(&staging).expect("create pnpm staging dir");
        run(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&staging)
                .arg("pnpm@10")
                .env("npm_config_cache", ci_cache().join("npm-cache"))
                .env("npm_config_update_notifier", "false"),
            INSTALL_TIMEOUT,
        )
        .success();
        if let Err(e) = fs::rename(&staging, &dir) {
            let _ = fs::remove_dir_all(&staging);
            assert!(bin.is_file(), "install pnpm into {}: {e}", dir.display());
        }
        bin
    })
}

#[test]
fn pnpm_add_g_with_scripts_blocked_fetches_the_binary_on_first_run() {
    let server = Server::serve_dir(&tree().out).expect("start server");
    let user = User::new("pnpm-g", &server.url());
    let pnpm_home = user.path("pnpm-home");
    let path = std::env::join_paths(std::iter::once(pnpm_home.clone()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    let pnpm_cmd = |program: &Path| {
        let mut cmd = user.command(program);
        cmd.env("PNPM_HOME", &pnpm_home).env("PATH", &path);
        cmd
    };
    let out = run(
        pnpm_cmd(pnpm())
            .args(["add", "-g", "--store-dir"])
            .arg(ci_cache().join("pnpm-store"))
            .arg(tree().tgz()),
        INSTALL_TIMEOUT,
    );
    out.success().stdout_has("Ignored build scripts");
    assert!(server.paths().is_empty(), "{:?}", server.paths());
    let global = fs::read_dir(pnpm_home.join("global"))
        .expect("pnpm's global dir")
        .flatten()
        .next()
        .expect("a global layout dir")
        .path();
    let package = global.join("node_modules/loopx");
    assert!(
        package.join("package.json").is_file(),
        "{}",
        package.display()
    );
    assert!(!exists(&package.join("native")));

    let loopx = pnpm_home.join("loopx");
    let first = run(pnpm_cmd(&loopx).arg("version"), RUN_TIMEOUT);
    assert_version_after_download(&first, &server);
    assert_eq!(
        fs::read(package.join("native/loopx")).expect("native/loopx"),
        tree().binary()
    );
    assert_version_quietly(&run(pnpm_cmd(&loopx).arg("version"), RUN_TIMEOUT));
    assert_eq!(server.paths(), [archive_path()], "the second run fetched");
}
