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

use crate::util::{bun, ci_cache, is_root, names, Project, Run, TempDir};
use crate::util::{http, release};
use http::{Response, Server};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::{chown, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
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

/// `program <args>`, run with stdin closed and the strict checks.
fn tool(program: &str, args: &[&OsStr]) -> Run {
    let mut cmd = Command::new(program);
    cmd.args(args);
    Run::command(cmd).timeout(RUN_TIMEOUT)
}

fn sha256_hex(bytes: &[u8], scratch: &Path) -> String {
    let file = scratch.join("to-hash");
    fs::write(&file, bytes).expect("write bytes to hash");
    tool("sha256sum", &[file.as_os_str()])
        .stdout_contains(&format!("  {}\n", file.display()))
        .run()
        .stdout
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
        tool(
            "tar",
            &["-xzOf".as_ref(), archive.as_os_str(), "loopx".as_ref()],
        )
        .stdout_any("the binary's bytes, returned")
        .run()
        .stdout_bytes
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
    fn command(&self, program: impl AsRef<OsStr>) -> Run {
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
        Run::command(cmd).timeout(RUN_TIMEOUT)
    }

    /// `npm install -g --prefix <prefix> <extra> <the release's tgz>`.
    fn npm_install_g(&self, extra: &[&str]) {
        self.npm_install_g_from(tree().tgz().as_os_str(), extra)
    }

    /// `npm install -g --prefix <prefix> <extra> <package>`.
    fn npm_install_g_from(&self, package: &OsStr, extra: &[&str]) {
        let mut npm = self.command("npm");
        npm.cmd
            .args(["install", "-g", "--prefer-offline", "--prefix"])
            .arg(self.prefix())
            .args(extra)
            .arg(package);
        // npm reports its progress and warnings on stderr.
        npm.timeout(INSTALL_TIMEOUT)
            .stdout_any("npm's summary (added N packages in Ns)")
            .stderr_any("npm reports its progress and warnings on stderr")
            .run();
    }

    /// `loopx <args>` through the command npm installed.
    fn loopx(&self, args: &[&str]) -> Run {
        let mut loopx = self.command(self.prefix().join("bin/loopx"));
        loopx.cmd.args(args);
        loopx
    }
}

/// A `loopx version` that prints the version and nothing else.
fn version_quietly(r: Run) -> Run {
    r.stdout(&format!("{VERSION}\n"))
}

/// The progress line of a download of the host's archive from `server`.
fn download_line(server: &Server) -> String {
    format!(
        "loopx: downloading {} ...\n",
        server.url_for(&archive_path())
    )
}

/// A first `loopx version`: one progress line naming the URL, then the
/// version.
fn version_after_download(r: Run, server: &Server) -> Run {
    r.stdout(&format!("{VERSION}\n"))
        .stderr(&download_line(server))
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

    version_quietly(user.loopx(&["version"])).run();
    assert_eq!(server.paths().len(), 1, "the run fetched nothing");
    assert!(!exists(&user.home().join(".cache/loopx")));
}

/// The first hour after `npm install -g loopx`: npm's bin entry is the
/// binary itself (the install script put it there), so no shim tells it
/// where the package's tsx is. The up-front check of a workflow's
/// TypeScript and JSX scripts must find it where the run does, not warn
/// about a script that then runs fine (runtime.rs, warn_unrunnable).
#[test]
fn npm_install_g_runs_a_workflow_with_ts_and_tsx_scripts_without_a_false_warning() {
    let server = Server::serve_dir(&tree().out).expect("start server");
    let user = User::new("npm-ts-check", &server.url());
    user.npm_install_g(&[]);
    let p = Project::new();
    p.script(
        "review",
        "index.sh",
        "\"$LOOPX_BIN\" output --result draft --goto summarize\n",
    );
    // .tsx: JSX needs tsx on every Node, type stripping or not.
    p.script(
        "review",
        "summarize.tsx",
        "import { input, output } from \"loopx\";\n\
         const text: string = await input();\n\
         output({ result: `summary of ${text}`, goto: \"sink\" });\n",
    );
    p.script(
        "review",
        "sink.sh",
        "cat > \"$LOOPX_PROJECT_ROOT/got\"\n$LOOPX_BIN output --stop\n",
    );
    // Strict: an empty stderr, so no warning.
    user.loopx(&["run", "review"])
        .current_dir(p.root())
        .stdout("")
        .run();
    assert_eq!(p.read("got"), "summary of draft");
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

    version_after_download(user.loopx(&["version"]), &server).run();
    assert_eq!(server.paths(), [tgz_path.clone(), archive_path()]);
    assert_eq!(
        fs::read(user.npm_package().join("native/loopx")).expect("native/loopx"),
        tree().binary()
    );
    assert_eq!(
        names(&user.npm_package().join("native")),
        ["loopx"],
        "no temp file is left"
    );

    version_quietly(user.loopx(&["version"])).run();
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
    let run_as_nobody = is_root();
    let as_user = |args: &[&str]| {
        let mut r = user.loopx(args);
        if run_as_nobody {
            r.cmd.uid(65534).gid(65534);
        }
        r
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
        tool(
            "chmod",
            &[
                "-R".as_ref(),
                "a-w".as_ref(),
                user.npm_package().as_os_str(),
            ],
        )
        .run();
    }

    version_after_download(as_user(&["version"]), &server).run();
    assert!(!exists(&user.npm_package().join("native")));
    let cached = user.cached_binary();
    assert_eq!(
        fs::read(&cached).expect("the cached binary"),
        tree().binary()
    );
    assert_eq!(fs::metadata(&cached).expect("stat").mode() & 0o777, 0o755);
    assert_eq!(
        names(cached.parent().expect("cache dir")),
        ["loopx"],
        "no temp file is left"
    );

    version_quietly(as_user(&["version"])).run();
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
    tool(
        "tar",
        &[
            "-czf".as_ref(),
            tampered_path.as_os_str(),
            "-C".as_ref(),
            evil.as_os_str(),
            "loopx".as_ref(),
        ],
    )
    .run();
    let tampered = fs::read(&tampered_path).expect("read tampered archive");
    let got = sha256_hex(&tampered, user.tmp.path());
    server.route(&archive_path(), Response::ok(tampered));

    // With install scripts on: the install goes through, the binary does not.
    user.npm_install_g(&[]);
    assert_eq!(server.paths(), [archive_path()], "postinstall tried");
    assert!(!exists(&user.npm_package().join("native")));

    let mut r = user.loopx(&["version"]).status(1).stdout("");
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
        r = r.stderr_contains(&needle);
    }
    r.run();
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
        let mut r = user
            .loopx(&["version"])
            .env("LOOPX_DOWNLOAD_URL", &base)
            .status(1)
            .stdout("");
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
            r = r.stderr_contains(&needle);
        }
        r.run();
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
    user.command(bun())
        .arg("add")
        .arg("-g")
        .arg(tree().tgz())
        .env("BUN_INSTALL", &bun_install)
        .env("BUN_INSTALL_CACHE_DIR", ci_cache().join("bun-cache"))
        .timeout(INSTALL_TIMEOUT)
        .stdout_contains("installed loopx@")
        .stderr_any("Bun reports its progress on stderr")
        .run();
    let bin = bun_install.join("bin/loopx");

    // Bun runs no install script of a package it was not told to trust, so
    // the binary may come at install time or now; either way, once.
    let out = version_quietly(user.command(bun()).arg(&bin).arg("version"))
        .stderr_any("empty or the download line, checked below")
        .run();
    assert!(
        out.stderr.is_empty() || out.stderr == download_line(&server),
        "stderr should be empty or the download line\n{out}"
    );
    assert_eq!(server.paths(), [archive_path()]);
    version_quietly(user.command(bun()).arg(&bin).arg("version")).run();
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
        tool(
            "npm",
            &[
                "install".as_ref(),
                "--no-audit".as_ref(),
                "--no-fund".as_ref(),
                "--prefix".as_ref(),
                staging.as_os_str(),
                "pnpm@10".as_ref(),
            ],
        )
        .env("npm_config_cache", ci_cache().join("npm-cache"))
        .env("npm_config_update_notifier", "false")
        .timeout(INSTALL_TIMEOUT)
        .stderr_any("npm reports its progress and warnings on stderr")
        .run();
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
        user.command(program)
            .env("PNPM_HOME", &pnpm_home)
            .env("PATH", &path)
    };
    pnpm_cmd(pnpm())
        .arg("add")
        .arg("-g")
        .arg("--store-dir")
        .arg(ci_cache().join("pnpm-store"))
        .arg(tree().tgz())
        .timeout(INSTALL_TIMEOUT)
        .stdout_contains("Ignored build scripts")
        .stderr_any("pnpm reports its warnings on stderr")
        .run();
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
    version_after_download(pnpm_cmd(&loopx).arg("version"), &server).run();
    assert_eq!(
        fs::read(package.join("native/loopx")).expect("native/loopx"),
        tree().binary()
    );
    version_quietly(pnpm_cmd(&loopx).arg("version")).run();
    assert_eq!(server.paths(), [archive_path()], "the second run fetched");
}

/// The code blocks of docs/js.md's API section, as a user copies them: the
/// shell steps (with the release's package for `npm install loopx`) and
/// `loop.mjs`, in a fresh `npm init -y` project (CommonJS by default, so
/// top-level await needs the `.mjs` the example uses).
#[test]
fn the_api_example_of_docs_js_runs_as_copied_into_an_npm_init_project() {
    let doc = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/js.md"))
        .expect("docs/js.md");
    let api = &doc[doc
        .find("## The programmatic API")
        .expect("the API section")..];
    let block = |fence: &str| -> String {
        let start = api
            .find(fence)
            .unwrap_or_else(|| panic!("no {fence} block"))
            + fence.len();
        let end = start + api[start..].find("\n```").expect("the block's end");
        api[start..end].trim_start_matches('\n').to_string()
    };
    let steps = block("```sh");
    let script = block("```js");
    assert!(steps.contains("npm install loopx\n"), "{steps}");
    assert!(steps.ends_with("node loop.mjs"), "{steps}");

    let server = Server::serve_dir(&tree().out).expect("start server");
    let user = User::new("npm-api-example", &server.url());
    let app = user.path("app");
    fs::create_dir_all(&app).expect("create the app dir");
    fs::write(app.join("loop.mjs"), &script).expect("write loop.mjs");
    let steps = steps.replace(
        "npm install loopx\n",
        &format!("npm install --prefer-offline {}\n", tree().tgz().display()),
    );
    let mut sh = user.command("bash");
    sh.cmd
        .args(["-euo", "pipefail", "-c", &steps])
        .current_dir(&app);
    let out = sh
        .timeout(INSTALL_TIMEOUT)
        // npm's own chatter on both streams; loopx's script logs on stderr.
        .stdout_any("npm init prints package.json; the loop's lines are checked below")
        .stderr_any("npm's progress and the script's log line")
        .run();
    assert!(
        out.stdout.ends_with("done\nrunPromise: 1 output(s)\n"),
        "{out}"
    );
    assert!(app.join(".loopx/main/index.sh").is_file(), "{out}");
}
