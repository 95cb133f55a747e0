//! The release pipeline and the installer (DESIGN.md "Release artifacts").
//!
//! scripts/build-release.sh runs once for the host's musl target into a
//! directory of our own; install.sh is then piped into `sh` on stdin, as
//! `curl -fsSL <url>/install.sh | sh` does, against a local HTTP mirror of
//! that tree, with HOME and TMPDIR in temp directories.
#![cfg(target_os = "linux")]

use crate::util::{http, release};
use crate::util::{which, Run};
use http::{Response, Server};
use release::{TARGET, VERSION};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The budget of the x86_64 musl binary, as in scripts/build-release.sh.
const SIZE_LIMIT: u64 = 1_500_000;

/// What install.sh runs besides the downloader (see its header).
const INSTALL_TOOLS: &[&str] = &[
    "uname",
    "mktemp",
    "mkdir",
    "cp",
    "chmod",
    "mv",
    "rm",
    "tar",
    "gzip",
    "sha256sum",
];

fn asset() -> String {
    format!("loopx-{TARGET}.tar.gz")
}

/// The npm package of the release.
fn npm_tgz() -> String {
    format!("loopx-{VERSION}.tgz")
}

// ---------------------------------------------------------------- helpers

/// A directory under cargo's per-target temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::SeqCst);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("release-tests")
            .join(format!("{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        TempDir(dir)
    }

    fn join(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    }
    fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn write_exe(path: &Path, text: &str) {
    write(path, text);
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// `program args...`, to be run with `Run`'s strict checks.
fn cmd<S: AsRef<std::ffi::OsStr>>(program: impl AsRef<std::ffi::OsStr>, args: &[S]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args);
    cmd
}

fn system_path() -> String {
    std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into())
}

/// A directory of symlinks to exactly `tools`, to stand in for PATH.
fn tool_dir(dir: &Path, tools: &[&str]) -> PathBuf {
    fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    for tool in tools {
        let Some(real) = which(tool) else {
            panic!("`{tool}` is not installed; this test needs it (see docs/development.md, \"Set up\")")
        };
        symlink(&real, dir.join(tool)).unwrap_or_else(|e| panic!("symlink {tool}: {e}"));
    }
    dir.to_path_buf()
}

/// install.sh's first line on stdout: what it installs, from where.
fn installing(from: &str) -> String {
    format!("Installing loopx ({TARGET}) from {from}\n")
}

fn sha256_hex(path: &Path) -> String {
    Run::command(cmd("sha256sum", &[path]))
        .stdout_contains(&format!("  {}\n", path.display()))
        .run()
        .stdout
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Runs `loopx version` with no environment at all and PATH holding only an
/// empty directory: no node, no shell tools.
fn version_of(bin: &Path, scratch: &Path) -> String {
    let empty = scratch.join("empty-path");
    fs::create_dir_all(&empty).unwrap_or_else(|e| panic!("create {}: {e}", empty.display()));
    let mut version = cmd(bin, &["version"]);
    version.env_clear().env("PATH", &empty).current_dir(scratch);
    Run::command(version)
        .stdout_any("the version, compared by the caller")
        .run()
        .stdout
}

// ------------------------------------------------------------ the release

struct Build {
    out: PathBuf,
    stdout: String,
}

impl Build {
    fn vdir(&self) -> PathBuf {
        self.out.join(format!("download/v{VERSION}"))
    }

    fn archive(&self) -> PathBuf {
        self.vdir().join(asset())
    }

    fn install_sh(&self) -> Vec<u8> {
        read(&self.out.join("install.sh"))
    }

    fn npm_tgz(&self) -> PathBuf {
        self.vdir().join(npm_tgz())
    }
}

/// build-release.sh (of `root`, a checkout) with npm's cache, where npm pack
/// keeps its logs, in our temp dir.
fn build_release_cmd(root: &Path) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("scripts/build-release.sh"))
        .env(
            "npm_config_cache",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("release-tests/npm-cache"),
        )
        .stdin(Stdio::null());
    cmd
}

fn build_release(out: &Path, target_dir: Option<&Path>) -> Build {
    let mut cmd = build_release_cmd(Path::new(ROOT));
    cmd.args(["--target", TARGET, "--out"]).arg(out);
    if let Some(dir) = target_dir {
        cmd.env("CARGO_TARGET_DIR", dir);
    }
    let o = Run::command(cmd)
        .timeout(Duration::from_secs(900))
        .stdout_contains(" release tree in ")
        .stderr_any("cargo and npm report their progress on stderr")
        .run();
    Build {
        out: out.to_path_buf(),
        stdout: o.stdout,
    }
}

/// The one build the tests share (util/release.rs).
fn release() -> &'static Build {
    static BUILD: OnceLock<Build> = OnceLock::new();
    BUILD.get_or_init(|| {
        let tree = release::host_release();
        Build {
            out: tree.out.clone(),
            stdout: tree.stdout.clone(),
        }
    })
}

struct Entry {
    name: String,
    mode: u64,
    uid: u64,
    gid: u64,
    mtime: u64,
    uname: String,
    gname: String,
    kind: u8,
    data: Vec<u8>,
}

fn gunzip(path: &Path) -> Vec<u8> {
    let mut gzip = cmd("gzip", &["-dc"]);
    gzip.arg(path);
    Run::command(gzip)
        .stdout_any("the archive's bytes, returned")
        .run()
        .stdout_bytes
}

fn octal(field: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(field);
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    // npm's tar (portable mode) leaves owner fields empty: no owner, 0.
    if text.is_empty() {
        return 0;
    }
    u64::from_str_radix(text, 8).unwrap_or_else(|e| panic!("octal field {text:?}: {e}"))
}

fn cstr(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// Parses a ustar stream (the format build-release.sh writes).
fn untar(tar: &[u8]) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut at = 0;
    while at + 512 <= tar.len() {
        let h = &tar[at..at + 512];
        if h.iter().all(|&b| b == 0) {
            break;
        }
        assert_eq!(
            &h[257..263],
            b"ustar\0",
            "entry {} is not ustar",
            entries.len()
        );
        let size = octal(&h[124..136]) as usize;
        let data_at = at + 512;
        let prefix = cstr(&h[345..500]);
        let name = cstr(&h[0..100]);
        entries.push(Entry {
            name: if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            },
            mode: octal(&h[100..108]),
            uid: octal(&h[108..116]),
            gid: octal(&h[116..124]),
            mtime: octal(&h[136..148]),
            uname: cstr(&h[265..297]),
            gname: cstr(&h[297..329]),
            kind: h[156],
            data: tar[data_at..data_at + size].to_vec(),
        });
        at = data_at + size.div_ceil(512) * 512;
    }
    entries
}

fn le(bytes: &[u8], at: usize, n: usize) -> u64 {
    let field = bytes
        .get(at..at + n)
        .unwrap_or_else(|| panic!("ELF file too short for a field at {at}"));
    field
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// (has a PT_INTERP program header, number of DT_NEEDED entries) of an
/// ELF64 little-endian file. A static binary has neither.
fn elf_dynamic_needs(elf: &[u8]) -> (bool, usize) {
    assert_eq!(
        elf.get(..6),
        Some(&b"\x7fELF\x02\x01"[..]),
        "not an ELF64 LE file"
    );
    let phoff = le(elf, 32, 8) as usize;
    let phentsize = le(elf, 54, 2) as usize;
    let phnum = le(elf, 56, 2) as usize;
    let mut interp = false;
    let mut needed = 0;
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        match le(elf, ph, 4) {
            3 => interp = true,
            2 => {
                let (off, size) = (le(elf, ph + 8, 8) as usize, le(elf, ph + 32, 8) as usize);
                for d in (off..off + size).step_by(16) {
                    match le(elf, d, 8) {
                        0 => break,
                        1 => needed += 1,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    (interp, needed)
}

/// Builds `download/v<version>/` of a fake release whose `loopx` is a shell
/// script printing `reports`, and serves it from `server`.
fn serve_fake_release(server: &Server, scratch: &Path, version: &str, reports: &str) {
    let stage = scratch.join(format!("fake-{version}"));
    write_exe(
        &stage.join("loopx"),
        &format!("#!/bin/sh\necho {reports}\n"),
    );
    let archive = scratch.join(format!("fake-{version}.tar.gz"));
    tar_loopx(&archive, &stage);
    let sums = format!("{}  {}\n", sha256_hex(&archive), asset());
    let dir = format!("/download/v{version}");
    server.route(&format!("{dir}/{}", asset()), Response::ok(read(&archive)));
    server.route(&format!("{dir}/SHA256SUMS"), Response::ok(sums));
}

/// `tar -czf <archive> -C <stage> loopx`.
fn tar_loopx(archive: &Path, stage: &Path) {
    let mut tar = cmd("tar", &["-czf"]);
    tar.arg(archive).arg("-C").arg(stage).arg("loopx");
    Run::command(tar).run();
}

// ---------------------------------------------------------- the installer

/// One user's machine: a HOME, a TMPDIR and an environment for install.sh.
struct Machine {
    dir: TempDir,
    env: Vec<(String, String)>,
}

impl Machine {
    fn new(tag: &str, url: &str) -> Machine {
        let dir = TempDir::new(tag);
        for d in ["home", "tmp"] {
            fs::create_dir_all(dir.join(d)).unwrap_or_else(|e| panic!("create {d}: {e}"));
        }
        let env = vec![
            ("HOME".into(), dir.join("home").display().to_string()),
            ("TMPDIR".into(), dir.join("tmp").display().to_string()),
            ("PATH".into(), system_path()),
            ("LOOPX_DOWNLOAD_URL".into(), url.to_string()),
        ];
        Machine { dir, env }
    }

    fn set(&mut self, key: &str, value: impl AsRef<Path>) -> &mut Machine {
        self.env.retain(|(k, _)| k != key);
        self.env
            .push((key.to_string(), value.as_ref().display().to_string()));
        self
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Puts a `uname` answering `os` (-s) and `arch` (-m) first on PATH.
    fn fake_platform(&mut self, os: &str, arch: &str) {
        write_exe(
            &self.path("fake/uname"),
            &format!("#!/bin/sh\ncase $1 in -m) echo {arch} ;; *) echo {os} ;; esac\n"),
        );
        let path = format!("{}:{}", self.path("fake").display(), system_path());
        self.set("PATH", path);
    }

    fn default_bin(&self) -> PathBuf {
        self.path("home/.local/bin/loopx")
    }

    /// `… | sh -s -- args`: the script arrives on stdin.
    fn install(&self, script: &[u8], args: &[&str]) -> Run {
        self.install_with("sh", script, args)
    }

    fn install_with(&self, shell: &str, script: &[u8], args: &[&str]) -> Run {
        Run::command(self.shell(shell, args)).stdin(script)
    }

    /// `shell -s -- args` in HOME with this machine's environment.
    fn shell(&self, shell: &str, args: &[&str]) -> Command {
        // Resolved on our PATH: the child's PATH may hold only chosen tools.
        let shell_path = which(shell).unwrap_or_else(|| panic!("`{shell}` is not installed"));
        let mut cmd = Command::new(shell_path);
        cmd.arg("-s")
            .arg("--")
            .args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(self.path("home"));
        cmd
    }

    /// Like `install`, but whatever the shell makes of `script` (a cut
    /// one may fail to parse, run a half-written command, or do nothing):
    /// not checked, as `Run` always checks an exit status.
    fn install_unchecked(&self, script: &[u8]) -> Output {
        let mut child = self
            .shell("sh", &[])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn sh: {e}"));
        if let Some(mut stdin) = child.stdin.take() {
            // A shell that exits early closes the pipe; that is its answer.
            let _ = stdin.write_all(script);
        }
        child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("wait for sh: {e}"))
    }

    /// install.sh cleans its temporary files on every exit path.
    fn assert_tmp_clean(&self) {
        let left: Vec<_> = fs::read_dir(self.path("tmp"))
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "install.sh left temp files: {left:?}");
    }
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn repo_install_sh() -> Vec<u8> {
    read(&Path::new(ROOT).join("install.sh"))
}

// ------------------------------------------------------------ build tests

#[test]
fn archive_holds_static_binary_readme_and_license() {
    let build = release();
    let gz = read(&build.archive());
    // gzip -n: no file name flag, no timestamp.
    assert_eq!(&gz[..3], b"\x1f\x8b\x08");
    assert_eq!(gz[3] & 0x08, 0, "gzip header carries a file name");
    assert_eq!(&gz[4..8], &[0, 0, 0, 0], "gzip header carries a timestamp");

    let entries = untar(&gunzip(&build.archive()));
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["LICENSE", "README.md", "loopx"]);
    for e in &entries {
        assert_eq!(e.kind, b'0', "{} is not a regular file", e.name);
        assert_eq!((e.uid, e.gid), (0, 0), "{} owner", e.name);
        assert_eq!(
            (e.uname.as_str(), e.gname.as_str()),
            ("", ""),
            "{} owner names",
            e.name
        );
        assert_eq!(e.mtime, entries[0].mtime, "{} mtime differs", e.name);
        let want = if e.name == "loopx" { 0o755 } else { 0o644 };
        assert_eq!(e.mode, want, "{} mode", e.name);
    }
    assert!(entries[0].mtime > 0, "mtime should be the commit time");
    assert_eq!(entries[0].data, read(&Path::new(ROOT).join("dist/LICENSE")));
    assert_eq!(entries[1].data, read(&Path::new(ROOT).join("README.md")));
    let license = String::from_utf8_lossy(&entries[0].data);
    assert!(license.starts_with("MIT License"), "{license}");
    assert!(
        license.contains("Copyright (c) 2026 the loopx authors"),
        "{license}"
    );

    let binary = &entries[2].data;
    assert_eq!(elf_dynamic_needs(binary), (false, 0), "loopx is not static");
    assert!(
        (binary.len() as u64) <= SIZE_LIMIT,
        "binary is {} bytes, over {SIZE_LIMIT}",
        binary.len()
    );

    let scratch = TempDir::new("archive");
    let bin = scratch.join("loopx");
    write(&bin, binary);
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).expect("chmod loopx");
    assert_eq!(version_of(&bin, &scratch.0), format!("{VERSION}\n"));
}

#[test]
fn build_reports_the_stripped_binary_size() {
    let build = release();
    let entries = untar(&gunzip(&build.archive()));
    let size = entries[2].data.len();
    let line = build
        .stdout
        .lines()
        .find(|l| l.contains(TARGET))
        .unwrap_or_else(|| panic!("no line for {TARGET} in:\n{}", build.stdout));
    assert!(
        line.contains(&format!("binary {size:>8} bytes")),
        "size {size} not reported in {line:?}"
    );
}

#[test]
fn sha256sums_cover_every_asset_and_latest_mirrors_the_version() {
    let build = release();
    let vdir = build.vdir();
    let sums = String::from_utf8(read(&vdir.join("SHA256SUMS"))).expect("SHA256SUMS is UTF-8");
    let mut listed = Vec::new();
    for line in sums.lines() {
        let (sum, name) = line
            .split_once("  ")
            .unwrap_or_else(|| panic!("not sha256sum format: {line:?}"));
        assert_eq!(sum.len(), 64, "{line:?}");
        assert_eq!(sum, sha256_hex(&vdir.join(name)), "checksum of {name}");
        listed.push(name.to_string());
    }
    assert_eq!(
        listed,
        [
            "install.sh".to_string(),
            asset(),
            "workflows.tar.gz".into(),
            npm_tgz()
        ]
    );
    assert_eq!(
        dir_names(&vdir),
        [
            "SHA256SUMS".to_string(),
            "install.sh".into(),
            npm_tgz(),
            asset(),
            "workflows.tar.gz".into()
        ]
    );

    let latest = build.out.join("latest/download");
    assert_eq!(dir_names(&latest), dir_names(&vdir));
    for name in dir_names(&vdir) {
        assert_eq!(
            read(&latest.join(&name)),
            read(&vdir.join(&name)),
            "latest/{name}"
        );
    }
    assert_eq!(
        build.install_sh(),
        repo_install_sh(),
        "dist/release/install.sh"
    );
    assert_eq!(read(&vdir.join("install.sh")), repo_install_sh());
}

#[test]
fn two_builds_of_one_commit_are_byte_identical() {
    let first = release();
    // A second build from scratch: its own target directory and output.
    let scratch = TempDir::new("rebuild");
    let second = build_release(&scratch.join("out"), Some(&scratch.join("target")));
    assert!(
        read(&first.archive()) == read(&second.archive()),
        "archives differ between two builds"
    );
    assert!(
        read(&first.npm_tgz()) == read(&second.npm_tgz()),
        "npm packages differ between two builds"
    );
    assert!(
        read(&first.vdir().join("workflows.tar.gz"))
            == read(&second.vdir().join("workflows.tar.gz")),
        "workflows.tar.gz differs between two builds"
    );
    assert_eq!(
        read(&first.vdir().join("SHA256SUMS")),
        read(&second.vdir().join("SHA256SUMS"))
    );
}

#[test]
fn workflows_tarball_is_dist_workflows_in_one_directory_with_fixed_owners_modes_and_times() {
    let build = release();
    let tgz = build.vdir().join("workflows.tar.gz");
    let gz = read(&tgz);
    assert_eq!(gz[3] & 0x08, 0, "gzip header carries a file name");
    assert_eq!(&gz[4..8], &[0, 0, 0, 0], "gzip header carries a timestamp");
    let entries = untar(&gunzip(&tgz));
    let mut files: Vec<String> = entries
        .iter()
        .filter(|e| e.kind == b'0')
        .map(|e| e.name.clone())
        .collect();
    files.sort();
    // Under one workflows/ directory, which `loopx install` unwraps; the
    // authoring guide also beside each workflow (the top level is not
    // installed, §10.1).
    let dist = Path::new(ROOT).join("dist/workflows");
    let mut want: Vec<String> = files_under(&dist, &[])
        .iter()
        .map(|f| format!("workflows/{f}"))
        .collect();
    for w in files_under(&dist, &[])
        .iter()
        .filter_map(|f| f.strip_suffix("/index.sh"))
    {
        want.push(format!("workflows/{w}/AUTHORING.md"));
    }
    want.sort();
    assert_eq!(files, want);
    assert_eq!(entries[0].name, "workflows/");
    for e in &entries {
        assert!(
            e.kind == b'0' || e.kind == b'5',
            "{}: not a file or directory",
            e.name
        );
        assert_eq!(
            (e.uid, e.gid, e.uname.as_str(), e.gname.as_str()),
            (0, 0, "", ""),
            "{}",
            e.name
        );
        assert_eq!(e.mtime, entries[0].mtime, "{} mtime", e.name);
        let want = if e.kind == b'5' || e.name.ends_with(".sh") {
            0o755
        } else {
            0o644
        };
        assert_eq!(e.mode, want, "{} mode", e.name);
        if e.kind == b'0' {
            let mut source = Path::new(ROOT).join("dist").join(&e.name);
            if e.name.ends_with("/AUTHORING.md") {
                source = Path::new(ROOT).join("dist/workflows/AUTHORING.md");
            }
            assert!(
                e.data == read(&source),
                "{} differs from the checkout",
                e.name
            );
        }
    }
}

/// Every file under `dir` (relative paths, sorted), skipping `skip` names.
fn files_under(dir: &Path, skip: &[&str]) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, skip: &[&str], out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("ls {}: {e}", dir.display())) {
            let entry = entry.expect("dir entry");
            let path = entry.path();
            let rel = path.strip_prefix(root).expect("under root");
            if skip.iter().any(|s| rel == Path::new(s)) {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, skip, out);
            } else {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, skip, &mut out);
    out.sort();
    out
}

#[test]
fn npm_package_is_dist_npm_with_the_release_checksums_and_the_license() {
    let build = release();
    let entries = untar(&gunzip(&build.npm_tgz()));
    let mut names: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
    names.sort();
    // What users run, and nothing else: no tests, no lockfile, no
    // node_modules, no binary (it is fetched for the user's platform).
    let npm = Path::new(ROOT).join("dist/npm");
    let mut want: Vec<String> = files_under(
        &npm,
        &[
            "test",
            "node_modules",
            "native",
            "package-lock.json",
            "SHA256SUMS",
        ],
    );
    want.extend(["LICENSE".to_string(), "SHA256SUMS".to_string()]);
    let mut want: Vec<String> = want.iter().map(|f| format!("package/{f}")).collect();
    want.sort();
    assert_eq!(names, want);

    let file = |name: &str| -> &Entry {
        entries
            .iter()
            .find(|e| e.name == format!("package/{name}"))
            .unwrap_or_else(|| panic!("{name} is not in the package"))
    };
    for name in files_under(
        &npm,
        &["test", "node_modules", "native", "package-lock.json"],
    ) {
        assert_eq!(file(&name).data, read(&npm.join(&name)), "{name}");
    }
    assert_eq!(
        file("LICENSE").data,
        read(&Path::new(ROOT).join("dist/LICENSE"))
    );
    assert_eq!(file("bin/loopx.js").mode & 0o777, 0o755);
    let package_json = String::from_utf8_lossy(&file("package.json").data).into_owned();
    assert!(
        package_json.contains(&format!("\"version\": \"{VERSION}\"")),
        "{package_json}"
    );

    // The package's SHA256SUMS is the release's, but for the package's own
    // line (a file cannot hold its own checksum).
    let sums = String::from_utf8(read(&build.vdir().join("SHA256SUMS"))).expect("UTF-8");
    let without_package: String = sums
        .lines()
        .filter(|l| !l.ends_with(&format!("  {}", npm_tgz())))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        String::from_utf8_lossy(&file("SHA256SUMS").data),
        without_package
    );
    assert!(without_package.contains(&asset()), "{without_package}");
}

#[test]
fn assembling_the_archives_packs_the_same_npm_package_and_sums() {
    // The release workflow gathers archives built elsewhere and runs
    // --assemble: it must produce the tree a build produces, byte for byte.
    let build = release();
    let scratch = TempDir::new("assemble");
    let vdir = scratch.join(&format!("out/download/v{VERSION}"));
    write(&vdir.join(asset()), read(&build.archive()));
    let mut assemble = build_release_cmd(Path::new(ROOT));
    assemble
        .args(["--assemble", "--out"])
        .arg(scratch.join("out"));
    // npm pack names the package it wrote on stderr too.
    Run::command(assemble)
        .stdout_contains("  install.sh\n")
        .stderr_contains(&format!("build-release: assembled {}\n", vdir.display()))
        .run();
    assert!(read(&vdir.join(npm_tgz())) == read(&build.npm_tgz()));
    assert_eq!(
        read(&vdir.join("SHA256SUMS")),
        read(&build.vdir().join("SHA256SUMS"))
    );
    assert_eq!(
        dir_names(&scratch.join("out/latest/download")),
        dir_names(&build.vdir())
    );
}

/// A copy of the files build-release.sh reads before it builds anything,
/// with dist/npm/package.json at `npm_version`.
fn scratch_checkout(scratch: &TempDir, npm_version: &str) -> PathBuf {
    let root = scratch.join("checkout");
    for file in [
        "scripts/build-release.sh",
        "Cargo.toml",
        "install.sh",
        "README.md",
        "dist/LICENSE",
    ] {
        write(&root.join(file), read(&Path::new(ROOT).join(file)));
    }
    let package_json = String::from_utf8(read(&Path::new(ROOT).join("dist/npm/package.json")))
        .expect("package.json is UTF-8")
        .replacen(
            &format!("\"version\": \"{VERSION}\""),
            &format!("\"version\": \"{npm_version}\""),
            1,
        );
    write(&root.join("dist/npm/package.json"), package_json);
    root
}

#[test]
fn a_package_json_version_unlike_cargo_tomls_fails_the_build_before_building() {
    let scratch = TempDir::new("npm-version");
    let root = scratch_checkout(&scratch, "9.9.9");
    for args in [&["--target", TARGET][..], &["--assemble"][..]] {
        let mut build = build_release_cmd(&root);
        build.args(args).arg("--out").arg(scratch.join("out"));
        Run::command(build)
            .status(1)
            .stderr(&format!(
                "build-release: error: version mismatch: Cargo.toml says {VERSION} but \
                 dist/npm/package.json says 9.9.9; set both to the version being released\n"
            ))
            .run();
        assert!(!scratch.join("out/download").exists(), "{args:?}");
    }
}

#[test]
fn an_archive_holding_another_version_fails_the_assembly() {
    let scratch = TempDir::new("archive-version");
    let root = scratch_checkout(&scratch, VERSION);
    let stage = scratch.join("stage");
    write_exe(&stage.join("loopx"), "#!/bin/sh\necho 0.0.9\n");
    let vdir = scratch.join(&format!("out/download/v{VERSION}"));
    fs::create_dir_all(&vdir).expect("mkdir vdir");
    tar_loopx(&vdir.join(asset()), &stage);

    let mut assemble = build_release_cmd(&root);
    assemble
        .args(["--assemble", "--out"])
        .arg(scratch.join("out"));
    Run::command(assemble)
        .status(1)
        .stderr_contains(&format!(
            "build-release: error: version mismatch: download/v{VERSION}/{} holds loopx 0.0.9 but Cargo.toml says {VERSION}\n",
            asset()
        ))
        .run();
    assert_eq!(dir_names(&vdir), [asset()], "nothing was written beside it");
    assert!(!scratch.join("out/latest").exists());
}

// -------------------------------------------------------- installer tests

#[test]
fn installs_latest_into_home_local_bin() {
    let build = release();
    let server = Server::serve_dir(&build.out).expect("start server");
    let m = Machine::new("latest", &server.url());
    m.install(&build.install_sh(), &[])
        .stdout_contains(&format!(
            "Installed loopx {VERSION} to {}",
            m.default_bin().display()
        ))
        .run();
    // ~/.local/bin did not exist: it was created.
    assert_eq!(dir_names(&m.path("home/.local/bin")), ["loopx"]);
    assert_eq!(
        read(&m.default_bin()),
        untar(&gunzip(&build.archive()))[2].data
    );
    let mode = fs::metadata(m.default_bin()).expect("stat loopx").mode();
    assert_eq!(mode & 0o777, 0o755);
    assert_eq!(
        version_of(&m.default_bin(), &m.dir.0),
        format!("{VERSION}\n")
    );
    assert_eq!(
        server.paths(),
        [
            "/latest/download/SHA256SUMS".to_string(),
            format!("/latest/download/{}", asset())
        ]
    );
    m.assert_tmp_clean();
}

#[test]
fn pinned_version_uses_the_versioned_path_with_or_without_v() {
    let build = release();
    let server = Server::serve_dir(&build.out).expect("start server");
    let pinned = format!("/download/v{VERSION}/{}", asset());

    // LOOPX_VERSION=v1.2.3, and bash as the shell this time.
    let mut m = Machine::new("pinned-env", &server.url());
    m.set("LOOPX_VERSION", format!("v{VERSION}"));
    m.install_with("bash", &build.install_sh(), &[])
        .stdout_contains(&format!("Installed loopx {VERSION} to "))
        .run();
    assert_eq!(
        version_of(&m.default_bin(), &m.dir.0),
        format!("{VERSION}\n")
    );
    assert!(server.paths().contains(&pinned), "{:?}", server.paths());

    // --version 1.2.3 wins over LOOPX_VERSION.
    let mut m = Machine::new("pinned-flag", &server.url());
    m.set("LOOPX_VERSION", "v9.9.9");
    let before = server.requests().len();
    m.install(&build.install_sh(), &["--version", VERSION])
        .stdout_contains(&format!("Installed loopx {VERSION} to "))
        .run();
    assert_eq!(server.paths()[before + 1], pinned);

    // A version that was never released: a clear error, nothing installed.
    // Its errors carry the script's own name, not `loopx install`'s (a
    // subcommand that does something else).
    m.install(&build.install_sh(), &["--version", "9.9.9"])
        .status(1)
        .stderr_contains("install.sh: error: ")
        .stderr_lacks("loopx install:")
        .stderr_contains("/download/v9.9.9/SHA256SUMS")
        .stderr_contains("is 9.9.9 a released version?")
        .stdout(&installing("release v9.9.9"))
        .run();
    m.assert_tmp_clean();
}

#[test]
fn follows_redirects_like_github_latest_with_curl() {
    let build = release();
    let server = Server::serve_dir(&build.out).expect("start server");
    let pinned = format!("/download/v{VERSION}");
    // GitHub answers /latest/download/<asset> with a 302 to the tagged asset.
    server.route(
        "/latest/download/SHA256SUMS",
        Response::redirect(302, &server.url_for(&format!("{pinned}/SHA256SUMS"))),
    );
    server.route(
        &format!("/latest/download/{}", asset()),
        Response::redirect(302, &format!("{pinned}/{}", asset())),
    );
    let m = Machine::new("redirect", &server.url());
    m.install(&build.install_sh(), &[])
        .stdout_contains(&format!("Installed loopx {VERSION} to "))
        .run();
    assert_eq!(
        version_of(&m.default_bin(), &m.dir.0),
        format!("{VERSION}\n")
    );
    assert_eq!(server.paths().len(), 4, "{:?}", server.paths());
    let agent = server.requests()[0]
        .header("user-agent")
        .unwrap_or("")
        .to_string();
    assert!(agent.starts_with("curl/"), "downloaded with {agent:?}");
}

#[test]
fn checksum_mismatch_installs_nothing_and_keeps_an_existing_install() {
    let build = release();
    let server = Server::serve_dir(&build.out).expect("start server");
    let good = sha256_hex(&build.archive());
    let bad: String = good
        .chars()
        .map(|c| if c == '0' { '1' } else { '0' })
        .collect();
    server.route(
        "/latest/download/SHA256SUMS",
        Response::ok(format!("{bad}  {}\n", asset())),
    );

    // Fresh machine: not even the install directory appears.
    let m = Machine::new("mismatch", &server.url());
    m.install(&build.install_sh(), &[])
        .status(1)
        .stderr_contains("checksum mismatch")
        .stderr_contains(&bad)
        .stderr_contains(&good)
        .stderr_contains("nothing was installed")
        .stdout(&installing("the latest release"))
        .run();
    assert!(!m.path("home/.local").exists(), "install dir was created");
    m.assert_tmp_clean();

    // An existing install stays as it was, with nothing beside it.
    let m = Machine::new("mismatch-existing", &server.url());
    write_exe(&m.default_bin(), "#!/bin/sh\necho 0.0.1\n");
    m.install(&build.install_sh(), &[])
        .status(1)
        .stderr_contains("checksum mismatch")
        .stdout(&installing("the latest release"))
        .run();
    assert_eq!(read(&m.default_bin()), b"#!/bin/sh\necho 0.0.1\n");
    assert_eq!(dir_names(&m.path("home/.local/bin")), ["loopx"]);
    m.assert_tmp_clean();

    // A listed sum that is not 64 lowercase hex digits is refused as such.
    for sum in [&good[..63], &good.to_uppercase(), "sha256:abc"] {
        let body = format!("{sum}  {}\n", asset());
        server.route("/latest/download/SHA256SUMS", Response::ok(body));
        m.install(&build.install_sh(), &[])
            .status(1)
            .stderr_contains("malformed SHA256SUMS entry")
            .stdout(&installing("the latest release"))
            .run();
        assert_eq!(read(&m.default_bin()), b"#!/bin/sh\necho 0.0.1\n");
    }
}

#[test]
fn failed_or_truncated_download_keeps_an_existing_install() {
    let build = release();
    let server = Server::serve_dir(&build.out).expect("start server");
    let path = format!("/latest/download/{}", asset());
    let archive = read(&build.archive());
    let mut truncated = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        archive.len()
    )
    .into_bytes();
    truncated.extend_from_slice(&archive[..archive.len() / 2]);

    for (what, response) in [
        ("404", Response::status(404)),
        ("500", Response::status(500)),
        ("truncated", Response::raw(truncated)),
    ] {
        server.route(&path, response);
        let m = Machine::new("failed-download", &server.url());
        write_exe(&m.default_bin(), "#!/bin/sh\necho 0.0.1\n");
        let o = m
            .install(&build.install_sh(), &[])
            .status(1)
            .stderr_contains(&format!("could not download {}", server.url_for(&path)))
            .stdout(&installing("the latest release"))
            .run();
        assert_eq!(
            read(&m.default_bin()),
            b"#!/bin/sh\necho 0.0.1\n",
            "{what}: {o}"
        );
        assert_eq!(
            dir_names(&m.path("home/.local/bin")),
            ["loopx"],
            "{what}: {o}"
        );
        m.assert_tmp_clean();
    }
}

#[test]
fn rerunning_upgrades_in_place() {
    let build = release();
    let server = Server::serve_dir(&build.out).expect("start server");
    let m = Machine::new("upgrade", &server.url());
    serve_fake_release(&server, &m.dir.0, "0.0.1", "0.0.1");
    // A release whose binary reports another version is refused.
    serve_fake_release(&server, &m.dir.0, "0.0.2", "0.0.1");

    m.install(&build.install_sh(), &["--version", "0.0.1"])
        .stdout_contains("Installed loopx 0.0.1 to ")
        .run();
    assert_eq!(version_of(&m.default_bin(), &m.dir.0), "0.0.1\n");
    let old_inode = fs::metadata(m.default_bin()).expect("stat").ino();

    m.install(&build.install_sh(), &["--version", "0.0.2"])
        .status(1)
        .stderr_contains("reports version '0.0.1'")
        .stdout(&installing("release v0.0.2"))
        .run();
    assert_eq!(version_of(&m.default_bin(), &m.dir.0), "0.0.1\n");

    m.install(&build.install_sh(), &[])
        .stdout_contains(&format!("Installed loopx {VERSION}"))
        .run();
    assert_eq!(
        version_of(&m.default_bin(), &m.dir.0),
        format!("{VERSION}\n")
    );
    // Replaced by a rename (a new file), not rewritten under a running reader.
    assert_ne!(
        fs::metadata(m.default_bin()).expect("stat").ino(),
        old_inode
    );
    assert_eq!(dir_names(&m.path("home/.local/bin")), ["loopx"]);
    m.assert_tmp_clean();
}

#[test]
fn missing_install_dir_is_created_from_env_or_flag() {
    let build = release();
    let server = Server::serve_dir(&build.out).expect("start server");

    let mut m = Machine::new("dir-env", &server.url());
    let deep = m.path("opt/a/b/bin");
    m.set("LOOPX_INSTALL_DIR", &deep);
    m.install(&build.install_sh(), &[])
        .stdout_contains(&format!("Installed loopx {VERSION} to "))
        .run();
    assert_eq!(
        version_of(&deep.join("loopx"), &m.dir.0),
        format!("{VERSION}\n")
    );
    assert!(!m.path("home/.local").exists());

    // --dir wins over LOOPX_INSTALL_DIR, and a relative one is taken from
    // the current directory (HOME here).
    let rel = m.path("home/rel/bin/loopx");
    m.install(&build.install_sh(), &["--dir", "rel/bin/"])
        .stdout_contains(&format!("to {}\n", rel.display()))
        .run();
    assert_eq!(version_of(&rel, &m.dir.0), format!("{VERSION}\n"));
}

#[test]
fn path_hint_only_when_the_dir_is_not_on_path() {
    let build = release();
    let server = Server::serve_dir(&build.out).expect("start server");
    let mut m = Machine::new("path-hint", &server.url());
    let bin_dir = m.path("home/.local/bin");

    m.install(&build.install_sh(), &[])
        .stdout_contains(&format!("{} is not on your PATH", bin_dir.display()))
        .stdout_contains(&format!("export PATH=\"{}:$PATH\"", bin_dir.display()))
        .run();

    let path = format!("{}:{}", bin_dir.display(), system_path());
    m.set("PATH", &path);
    let o = m
        .install(&build.install_sh(), &[])
        .stdout(&format!(
            "{}Installed loopx {VERSION} to {}/loopx\n",
            installing("the latest release"),
            bin_dir.display()
        ))
        .run();
    assert!(!o.stdout.contains("not on your PATH"), "{o}");

    // On PATH but shadowed by another loopx earlier on PATH: a warning.
    let shadow = m.path("shadow");
    write_exe(&shadow.join("loopx"), "#!/bin/sh\necho 0.0.0\n");
    m.set("PATH", format!("{}:{path}", shadow.display()));
    m.install(&build.install_sh(), &[])
        .stderr_contains("comes before")
        .stdout(&format!(
            "{}Installed loopx {VERSION} to {}/loopx\n",
            installing("the latest release"),
            bin_dir.display()
        ))
        .run();
}

#[test]
fn quiet_help_and_bad_options() {
    let build = release();
    let server = Server::serve_dir(&build.out).expect("start server");
    let m = Machine::new("options", &server.url());

    m.install(&build.install_sh(), &["-q"]).stdout("").run();
    assert_eq!(
        version_of(&m.default_bin(), &m.dir.0),
        format!("{VERSION}\n")
    );

    let before = server.requests().len();
    let mut help = m.install(&build.install_sh(), &["--help"]);
    for word in [
        "LOOPX_VERSION",
        "LOOPX_INSTALL_DIR",
        "LOOPX_DOWNLOAD_URL",
        "--quiet",
    ] {
        help = help.stdout_contains(word);
    }
    help.run();
    m.install(&build.install_sh(), &["--bogus"])
        .status(2)
        .stderr_contains("'--bogus'")
        .run();
    m.install(&build.install_sh(), &["--version", "1.2.3; rm -rf /"])
        .status(2)
        .stderr_contains("'1.2.3; rm -rf /'")
        .run();
    assert_eq!(
        server.requests().len(),
        before,
        "help or a bad option downloaded"
    );
}

#[test]
fn wget_is_used_when_curl_is_absent() {
    if which("wget").is_none() {
        panic!("wget is not installed: this test needs it (apt-get install wget, as .ci/run does)");
    }
    let build = release();
    let server = Server::serve_dir(&build.out).expect("start server");
    let pinned = format!("/download/v{VERSION}");
    server.route(
        "/latest/download/SHA256SUMS",
        Response::redirect(302, &format!("{pinned}/SHA256SUMS")),
    );
    let mut m = Machine::new("wget", &server.url());
    let tools: Vec<&str> = INSTALL_TOOLS.iter().copied().chain(["wget"]).collect();
    let bin = tool_dir(&m.path("tools"), &tools);
    assert!(!bin.join("curl").exists());
    m.set("PATH", &bin);

    m.install(&build.install_sh(), &[])
        .stdout_contains(&format!("Installed loopx {VERSION} to "))
        .run();
    assert_eq!(
        version_of(&m.default_bin(), &m.dir.0),
        format!("{VERSION}\n")
    );
    let agents: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.header("user-agent").unwrap_or("").to_string())
        .collect();
    assert_eq!(agents.len(), 3, "{:?}", server.paths());
    assert!(agents.iter().all(|a| a.starts_with("Wget/")), "{agents:?}");
    m.assert_tmp_clean();
}

#[test]
fn neither_curl_nor_wget_is_a_clear_error() {
    let server = Server::new().expect("start server");
    let mut m = Machine::new("no-downloader", &server.url());
    let bin = tool_dir(&m.path("tools"), INSTALL_TOOLS);
    m.set("PATH", &bin);
    m.install(&repo_install_sh(), &[])
        .status(1)
        .stderr_contains("need curl or wget")
        .run();
    assert!(!m.path("home/.local").exists());
    m.assert_tmp_clean();
}

#[test]
fn unsupported_platforms_are_named() {
    let server = Server::new().expect("start server");
    for (os, arch, want) in [
        (
            "FreeBSD",
            "x86_64",
            "unsupported operating system 'FreeBSD'",
        ),
        ("MINGW64_NT-10.0", "x86_64", "on Windows use WSL"),
        (
            "Linux",
            "riscv64",
            "unsupported architecture 'riscv64' (uname -m) on Linux",
        ),
        ("Darwin", "ppc", "unsupported architecture 'ppc'"),
    ] {
        let mut m = Machine::new("platform", &server.url());
        m.fake_platform(os, arch);
        m.install(&repo_install_sh(), &[])
            .status(1)
            .stderr_contains(want)
            .run();
        assert!(!m.path("home/.local").exists());
        m.assert_tmp_clean();
    }
    assert!(server.requests().is_empty(), "{:?}", server.paths());
}

#[test]
fn supported_platforms_map_to_release_targets() {
    // The mirror lists no asset, so the error names the target it looked for.
    let server = Server::new().expect("start server");
    server.route("/latest/download/SHA256SUMS", Response::ok(""));
    for (os, arch, target) in [
        ("Linux", "x86_64", "x86_64-unknown-linux-musl"),
        ("Linux", "amd64", "x86_64-unknown-linux-musl"),
        ("Linux", "aarch64", "aarch64-unknown-linux-musl"),
        ("Linux", "arm64", "aarch64-unknown-linux-musl"),
        ("Darwin", "arm64", "aarch64-apple-darwin"),
        ("Darwin", "x86_64", "x86_64-apple-darwin"),
    ] {
        let mut m = Machine::new("mapping", &server.url());
        // Linux's sysctl knows no sysctl.proc_translated: not under Rosetta.
        m.fake_platform(os, arch);
        m.install(&repo_install_sh(), &[])
            .status(1)
            .stderr_contains(&format!("no loopx build for {target}"))
            .stdout(&format!(
                "Installing loopx ({target}) from the latest release\n"
            ))
            .run();
    }
}

#[test]
fn installed_binary_runs_without_node() {
    let build = release();
    let server = Server::serve_dir(&build.out).expect("start server");
    let m = Machine::new("no-node", &server.url());
    m.install(&build.install_sh(), &[])
        .stdout_contains(&format!("Installed loopx {VERSION} to "))
        .run();
    // version_of runs it with an empty environment and a PATH with nothing
    // on it, so neither node nor anything else can be found.
    let empty = m.path("empty-path");
    assert_eq!(
        version_of(&m.default_bin(), &m.dir.0),
        format!("{VERSION}\n")
    );
    assert_eq!(dir_names(&empty), Vec::<String>::new());

    // The bundled demo workflow (goto, stdin piping, stop) runs with a PATH
    // that offers only the few tools its scripts use: no node anywhere.
    let project = m.path("project");
    let demo = project.join(".loopx/demo");
    fs::create_dir_all(&demo).unwrap_or_else(|e| panic!("create {}: {e}", demo.display()));
    let repo_demo = Path::new(env!("CARGO_MANIFEST_DIR")).join(".loopx/demo");
    for entry in fs::read_dir(&repo_demo).expect("read the demo workflow") {
        let entry = entry.expect("demo entry");
        fs::copy(entry.path(), demo.join(entry.file_name())).expect("copy demo script");
    }
    let tools = m.path("tools-path");
    fs::create_dir_all(&tools).unwrap_or_else(|e| panic!("create {}: {e}", tools.display()));
    let cat = ["/usr/bin/cat", "/bin/cat"]
        .iter()
        .map(Path::new)
        .find(|p| p.exists())
        .expect("cat is installed");
    symlink(cat, tools.join("cat")).expect("link cat");
    let mut demo = cmd(m.default_bin(), &["run", "demo"]);
    demo.env_clear()
        .env("PATH", &tools)
        .env("HOME", &m.dir.0)
        .current_dir(&project);
    // The CLI never prints results; the demo's scripts talk on stderr.
    Run::command(demo)
        .stdout("")
        .stderr_contains("[demo:finish] liftoff! stopping the loop")
        .run();
}

#[test]
fn a_truncated_script_runs_nothing() {
    let script = repo_install_sh();
    let text = String::from_utf8(script.clone()).expect("install.sh is UTF-8");
    let last = text.trim_end().lines().last().unwrap_or_default();
    assert_eq!(last, "main \"$@\"", "the last line must be the only call");
    let server = Server::new().expect("start server");
    let m = Machine::new("truncated", &server.url());

    // Control: the whole script does reach the server.
    m.install(&script, &[])
        .status(1)
        .stderr_contains("could not download")
        .stdout(&installing("the latest release"))
        .run();
    let whole = server.requests().len();
    assert!(whole > 0, "the complete script made no request");

    let body = text.trim_end().len() - last.len();
    for i in 1..40 {
        let cut = body * i / 40;
        let o = m.install_unchecked(&script[..cut]);
        assert_eq!(
            server.requests().len(),
            whole,
            "cut at byte {cut} made a request: {o:?}"
        );
        assert!(
            !m.path("home/.local").exists(),
            "cut at byte {cut} created a dir"
        );
        m.assert_tmp_clean();
    }
}

#[test]
fn install_sh_parses_in_dash_and_bash_and_build_release_has_help() {
    // ShellCheck over both (install.sh as sh, by its shebang):
    // shellcheck.rs, every shell file of the repository.
    let install = Path::new(ROOT).join("install.sh");
    for shell in ["dash", "bash"] {
        if which(shell).is_none() {
            panic!("`{shell}` is not installed; this test needs it");
        }
        Run::command(cmd(shell, &[Path::new("-n"), &install])).run();
    }
    assert!(
        fs::read_to_string(&install)
            .expect("read install.sh")
            .starts_with("#!/bin/sh\n"),
        "install.sh is checked as sh by its shebang"
    );
    let build = Path::new(ROOT).join("scripts/build-release.sh");
    Run::command(cmd("bash", &[build.as_path(), Path::new("--help")]))
        .stdout_contains("--target")
        .run();
}

/// Loads release.yml with a real YAML parser (PyYAML; .ci/run makes sure it
/// is there): substring checks alone would pass a file GitHub cannot parse.
/// `check` is Python run with `wf` (the parsed file) and `jobs` in scope;
/// returns what it prints.
fn check_release_workflow(check: &str) -> String {
    let path = Path::new(ROOT).join(".github/workflows/release.yml");
    let program = format!(
        "import sys, yaml\n\
         wf = yaml.safe_load(open(sys.argv[1]))\n\
         jobs = wf['jobs']\n\
         def step(job, name):\n    \
             found = [s for s in jobs[job]['steps'] if s.get('name') == name]\n    \
             assert len(found) == 1, (job, name)\n    \
             return found[0]\n\
         def uses(job, action):\n    \
             return [s for s in jobs[job]['steps'] if s.get('uses', '').startswith(action)]\n\
         {check}"
    );
    let mut python = cmd("python3", &["-c", &program]);
    python.arg(&path);
    Run::command(python)
        .stdout_any("what `check` prints, compared by the caller")
        .run()
        .stdout
}

#[test]
fn release_workflow_builds_every_target_with_the_same_script() {
    let path = Path::new(ROOT).join(".github/workflows/release.yml");
    let wf = String::from_utf8(read(&path)).expect("release.yml is UTF-8");
    let out = check_release_workflow(
        "on = wf.get('on', wf.get(True))\n\
         assert on['push']['tags'] == ['v*'], on\n\
         assert set(jobs) == {'build', 'release', 'publish'}, jobs.keys()\n\
         assert jobs['release']['needs'] == 'build'\n\
         assert jobs['release']['permissions']['contents'] == 'write'\n\
         print(len(jobs['build']['strategy']['matrix']['include']))\n",
    );
    assert_eq!(out.trim(), "4", "four build targets");
    assert!(
        wf.contains("- \"v*\"") || wf.contains("- 'v*'"),
        "no v* tag trigger"
    );
    for target in [
        "x86_64-unknown-linux-musl",
        "aarch64-unknown-linux-musl",
        "x86_64-apple-darwin",
        "aarch64-apple-darwin",
    ] {
        assert!(wf.contains(target), "release.yml does not build {target}");
    }
    assert!(
        wf.contains("scripts/build-release.sh --target"),
        "build jobs"
    );
    assert!(
        wf.contains("scripts/build-release.sh --assemble"),
        "release job"
    );
}

#[test]
fn release_workflow_publishes_the_release_tgz_to_npm_after_the_github_release() {
    // The publish job runs after the release job, takes the tarball the
    // release job assembled and uploaded (no checkout, no re-pack), and
    // publishes it with provenance and the token from the secrets.
    let script = check_release_workflow(
        "pub = jobs['publish']\n\
         assert pub['needs'] == 'release', pub['needs']\n\
         assert pub['permissions'] == {'contents': 'read', 'id-token': 'write'}, pub['permissions']\n\
         assert not uses('publish', 'actions/checkout'), 'the publish job re-packs nothing'\n\
         up = uses('release', 'actions/upload-artifact')\n\
         assert len(up) == 1 and up[0]['with']['name'] == 'npm-package', up\n\
         assert 'dist/release/download/${{ github.ref_name }}/loopx-*.tgz' in up[0]['with']['path'].splitlines(), up\n\
         steps = jobs['release']['steps']\n\
         gh = [i for i, s in enumerate(steps) if s.get('name') == 'Publish the GitHub release']\n\
         assert gh and gh[0] < steps.index(up[0]), 'the tarball is handed on after the GitHub release'\n\
         down = uses('publish', 'actions/download-artifact')\n\
         assert len(down) == 1 and down[0]['with'] == {'name': 'npm-package', 'path': 'dist/release/download/${{ github.ref_name }}'}, down\n\
         node = uses('publish', 'actions/setup-node')\n\
         assert node[0]['with']['registry-url'] == 'https://registry.npmjs.org', node\n\
         s = step('publish', 'Publish the npm package')\n\
         assert s['env'] == {'NODE_AUTH_TOKEN': '${{ secrets.NPM_TOKEN }}'}, s['env']\n\
         assert s['shell'] == 'bash'\n\
         sys.stdout.write(s['run'])\n",
    );

    // The step itself, run as GitHub runs it (bash -eo pipefail) against the
    // release's tarball, with an npm that records what it is asked.
    let build = release();
    let scratch = TempDir::new("publish");
    let dir = scratch.join(&format!("work/dist/release/download/v{VERSION}"));
    write(&dir.join(npm_tgz()), read(&build.npm_tgz()));
    write(
        &dir.join("SHA256SUMS"),
        read(&build.vdir().join("SHA256SUMS")),
    );
    let log = scratch.join("npm.log");
    write_exe(
        &scratch.join("bin/npm"),
        &format!(
            "#!/bin/sh\n\
             echo \"$*\" >> '{log}'\n\
             case $1:$FAKE_REGISTRY in\n\
             view:has-it) echo {VERSION} ;;\n\
             view:has-others) ;;\n\
             view:no-package) echo 'npm error code E404' >&2; exit 1 ;;\n\
             view:offline) echo 'npm error code ECONNREFUSED' >&2; exit 1 ;;\n\
             publish:*) ;;\n\
             *) exit 99 ;;\n\
             esac\n",
            log = log.display()
        ),
    );
    let tools = tool_dir(
        &scratch.join("tools"),
        &["bash", "sh", "cat", "grep", "sha256sum"],
    );
    // The step run for `version` against `registry`, expecting `expect`;
    // returns the npm calls it made.
    let publish_as = |registry: &str, version: &str, expect: fn(Run) -> Run| {
        let _ = fs::remove_file(&log);
        let mut bash = cmd(
            "bash",
            &["--noprofile", "--norc", "-eo", "pipefail", "-c", &script],
        );
        bash.env_clear()
            .env(
                "PATH",
                format!("{}:{}", scratch.join("bin").display(), tools.display()),
            )
            .env("GITHUB_REF_NAME", format!("v{version}"))
            .env("FAKE_REGISTRY", registry)
            .current_dir(scratch.join("work"));
        expect(Run::command(bash)).run();
        fs::read_to_string(&log).unwrap_or_default()
    };
    let publish = |registry: &str, expect: fn(Run) -> Run| publish_as(registry, VERSION, expect);
    let view = format!("view loopx@{VERSION} version\n");
    let publish_call = format!(
        "publish dist/release/download/v{VERSION}/{} --provenance --access public --tag latest\n",
        npm_tgz()
    );

    for registry in ["has-others", "no-package"] {
        let calls = publish(registry, |r| r.stdout(&format!("{}: OK\n", npm_tgz())));
        assert_eq!(calls, format!("{view}{publish_call}"), "{registry}");
    }

    // A re-run after a successful publish: a clear line, no publish.
    let calls = publish("has-it", |r| {
        r.stdout_contains(&format!(
            "loopx@{VERSION} is already on npm: skipping the publish"
        ))
    });
    assert_eq!(calls, view);

    // The registry cannot be asked: no guess, no publish; npm's own error
    // is passed on.
    let calls = publish("offline", |r| {
        r.status(1)
            .stdout_contains("cannot tell whether")
            .stderr("npm error code ECONNREFUSED\n")
    });
    assert_eq!(calls, view);

    // A prerelease goes to the `next` tag (npm refuses it without one).
    let rc = "9.9.9-rc.1";
    let rc_dir = scratch.join(&format!("work/dist/release/download/v{rc}"));
    let rc_tgz = format!("loopx-{rc}.tgz");
    write(&rc_dir.join(&rc_tgz), read(&build.npm_tgz()));
    write(
        &rc_dir.join("SHA256SUMS"),
        format!("{}  {rc_tgz}\n", sha256_hex(&build.npm_tgz())),
    );
    let calls = publish_as("has-others", rc, |r| r.stdout("loopx-9.9.9-rc.1.tgz: OK\n"));
    assert_eq!(
        calls,
        format!(
            "view loopx@{rc} version\n\
             publish dist/release/download/v{rc}/{rc_tgz} --provenance --access public --tag next\n"
        )
    );

    // A tarball that is not the one SHA256SUMS lists is never published.
    let mut tgz = read(&build.npm_tgz());
    let last = tgz.len() - 1;
    tgz[last] ^= 1;
    write(&dir.join(npm_tgz()), tgz);
    let calls = publish("has-others", |r| {
        r.status(1)
            .stdout_contains(&format!("{}: FAILED", npm_tgz()))
            .stderr_contains("checksum did NOT match") // sha256sum -c's own words
    });
    assert_eq!(calls, "", "npm was called");
}
