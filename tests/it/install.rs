//! `loopx install` (§10, §4.3) against sources the tests create themselves:
//! local git repositories cloned through `file://.../name.git` URLs, and
//! tarballs served by a local HTTP server (tests/util/http.rs). Every run
//! gets its own TMPDIR, which must be empty again afterwards (§10.9: the
//! fetch area is always removed), and `.loopx/` is compared before and after
//! failed installs (§10.7: nothing written).

use crate::util;
use crate::util::http;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use flate2::write::GzEncoder;
use flate2::Compression;
use tar::{Builder, EntryType, Header};

use crate::util::{names, Outcome, Project, Run, TempDir};
use http::{Response, Server};

const VERSION: &str = env!("CARGO_PKG_VERSION");

// ---------------------------------------------------------------- helpers

/// A project plus a place for source repositories and loopx's TMPDIR.
struct Env {
    p: Project,
    tmp: TempDir,
}

impl Env {
    fn new() -> Env {
        Env::with(Project::new())
    }

    fn bare() -> Env {
        Env::with(Project::bare())
    }

    fn with(p: Project) -> Env {
        let tmp = TempDir::new("install-src");
        fs::create_dir_all(tmp.path().join("tmp")).unwrap();
        fs::create_dir_all(tmp.path().join("repos")).unwrap();
        Env { p, tmp }
    }

    fn tmpdir(&self) -> PathBuf {
        self.tmp.path().join("tmp")
    }

    /// `loopx install <args>` with a private TMPDIR, as a builder: its
    /// `run()` checks the declared expectations, then that the TMPDIR is
    /// empty and `.loopx/` holds no staging leftovers, whatever happened.
    fn install(&self, args: &[&str]) -> Install<'_> {
        let mut all = vec!["install"];
        all.extend_from_slice(args);
        Install {
            env: self,
            run: self.p.loopx(&all).env("TMPDIR", self.tmpdir()),
        }
    }

    /// A git repository `repos/<dir>` (e.g. `ralph.git`) with one commit
    /// holding `files`; returns its `file://` URL.
    fn repo(&self, dir: &str, files: &[(&str, &str)]) -> String {
        self.repo_with(dir, files, |_| {})
    }

    /// Same as `repo`, then `edit` runs on the work tree before the commit.
    fn repo_with(&self, dir: &str, files: &[(&str, &str)], edit: impl FnOnce(&Path)) -> String {
        let path = self.tmp.path().join("repos").join(dir);
        fs::create_dir_all(&path).unwrap();
        git(&path, &["init", "-q"]);
        for (rel, body) in files {
            write_file(&path.join(rel), body);
        }
        edit(&path);
        commit_all(&path);
        format!("file://{}", path.display())
    }
}

/// `Env::install`'s run: a `Run` whose `run()` also checks the cleanup.
struct Install<'a> {
    env: &'a Env,
    run: Run,
}

impl Install<'_> {
    fn with(self, f: impl FnOnce(Run) -> Run) -> Self {
        Install {
            env: self.env,
            run: f(self.run),
        }
    }

    fn status(self, code: i32) -> Self {
        self.with(|r| r.status(code))
    }

    fn stdout(self, text: &str) -> Self {
        self.with(|r| r.stdout(text))
    }

    fn stdout_contains(self, needle: &str) -> Self {
        self.with(|r| r.stdout_contains(needle))
    }

    fn stderr(self, text: &str) -> Self {
        self.with(|r| r.stderr(text))
    }

    fn stderr_contains(self, needle: &str) -> Self {
        self.with(|r| r.stderr_contains(needle))
    }

    fn env(self, k: &str, v: impl Into<std::ffi::OsString>) -> Self {
        self.with(|r| r.env(k, v))
    }

    #[track_caller]
    fn run(self) -> Outcome {
        let tmpdir = self.env.tmpdir();
        let loopx_dir = self.env.p.path(".loopx");
        let o = self.run.run();
        let left = names(&tmpdir);
        assert!(left.is_empty(), "TMPDIR not cleaned: {left:?}\n{o}");
        if let Ok(entries) = fs::read_dir(loopx_dir) {
            for e in entries {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                assert!(
                    !name.starts_with('.'),
                    "staging left in .loopx/: {name}\n{o}"
                );
            }
        }
        o
    }
}

fn write_file(path: &Path, body: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, body).unwrap();
    if path.extension().is_some_and(|e| e == "sh") {
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// A stand-in `git` in `bin`, executed by loopx.
fn fake_git(bin: &Path, body: &str) {
    util::write_executable(&bin.join("git"), body);
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=loopx tests",
            "-c",
            "user.email=tests@loopx.invalid",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git (the tests need it; .ci/run installs it with apt)");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn commit_all(path: &Path) {
    git(path, &["add", "-A"]);
    git(path, &["commit", "-q", "-m", "init"]);
}

/// Every path under `dir` with its kind and content, to compare trees.
fn snapshot(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let path = e.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                out.push(format!(
                    "{rel} -> {}",
                    fs::read_link(&path).unwrap().display()
                ));
            } else if meta.is_dir() {
                out.push(format!("{rel}/"));
                pending.push(path);
            } else {
                out.push(format!(
                    "{rel}: {}",
                    fs::read_to_string(&path).unwrap_or_default()
                ));
            }
        }
    }
    out.sort();
    out
}

/// A .tar.gz of regular files (`.sh` files executable) and directories
/// (paths ending in `/`).
fn tarball(entries: &[(&str, &str)]) -> Vec<u8> {
    tarball_raw(|b| {
        for (path, body) in entries {
            if path.ends_with('/') {
                raw(b, EntryType::Directory, path.as_bytes(), b"", b"");
            } else {
                let mode = if path.ends_with(".sh") { 0o755 } else { 0o644 };
                let mut h = Header::new_gnu();
                h.set_entry_type(EntryType::Regular);
                h.set_size(body.len() as u64);
                h.set_mode(mode);
                b.append_data(&mut h, path, body.as_bytes()).unwrap();
            }
        }
    })
}

fn tarball_raw(build: impl FnOnce(&mut Builder<GzEncoder<Vec<u8>>>)) -> Vec<u8> {
    let mut b = Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    build(&mut b);
    b.into_inner().unwrap().finish().unwrap()
}

/// An entry written byte for byte, for names and links the builder refuses.
fn raw(
    b: &mut Builder<GzEncoder<Vec<u8>>>,
    kind: EntryType,
    name: &[u8],
    link: &[u8],
    data: &[u8],
) {
    let mut h = Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(data.len() as u64);
    h.set_mode(0o755);
    let gnu = h.as_gnu_mut().unwrap();
    gnu.name = [0; 100];
    gnu.name[..name.len()].copy_from_slice(name);
    gnu.linkname = [0; 100];
    gnu.linkname[..link.len()].copy_from_slice(link);
    h.set_cksum();
    b.append(&h, data).unwrap();
}

/// A server answering `path` with `bytes`.
fn file_with_mode(b: &mut Builder<GzEncoder<Vec<u8>>>, path: &str, data: &[u8], mode: u32) {
    let mut h = Header::new_gnu();
    h.set_path(path).unwrap();
    h.set_size(data.len() as u64);
    h.set_mode(mode);
    h.set_cksum();
    b.append(&h, data).unwrap();
}

fn serve(path: &str, bytes: Vec<u8>) -> Server {
    let server = Server::new().unwrap();
    server.route(path, Response::ok(bytes));
    server
}

const INDEX: &str = "#!/bin/bash\necho ran >&2\n";

// ---------------------------------------------------------------- §10.1 source detection

#[test]
fn shorthand_org_repo_expands_to_a_github_clone_with_prompts_disabled() {
    // A stand-in git records its argument vector: no network needed.
    let e = Env::bare();
    let bin = e.tmp.path().join("bin");
    let log = e.tmp.path().join("git-args");
    fake_git(
        &bin,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$ARGS_LOG\"\n\
         echo \"GIT_TERMINAL_PROMPT=$GIT_TERMINAL_PROMPT\" >> \"$ARGS_LOG\"\n\
         echo 'fatal: no network in tests' >&2\nexit 128\n",
    );
    e.install(&["myorg/agent-flows"])
        .env("PATH", &bin)
        .env("ARGS_LOG", &log)
        .status(1)
        .stdout("")
        .stderr_contains(
            "git clone of https://github.com/myorg/agent-flows.git failed: fatal: no network in tests",
        )
        .run();
    let args = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = args.lines().collect();
    // The stall rule rides along as git config (README "Reliability
    // notes"); the files are checked out only once their size is known.
    assert_eq!(
        lines[..11],
        [
            "-c",
            "http.lowSpeedLimit=1024",
            "-c",
            "http.lowSpeedTime=60",
            "clone",
            "--depth",
            "1",
            "--no-checkout",
            "--quiet",
            "--",
            "https://github.com/myorg/agent-flows.git"
        ]
    );
    assert!(
        lines[11].starts_with(e.tmpdir().to_str().unwrap()),
        "{args}"
    );
    assert_eq!(lines[12], "GIT_TERMINAL_PROMPT=0");
    assert!(!e.p.exists(".loopx"));

    // Known git hosts by exact path shape go to git as well.
    e.install(&["https://gitlab.com/team/flow/"])
        .env("PATH", &bin)
        .env("ARGS_LOG", &log)
        .status(1)
        .stderr_contains("git clone of https://gitlab.com/team/flow/ failed")
        .run();
    let args = fs::read_to_string(&log).unwrap();
    assert_eq!(args.lines().nth(10), Some("https://gitlab.com/team/flow/"));
}

/// §10.1 rule 2 accepts a known-host URL with a trailing slash; git gets it
/// as written, so an `insteadOf` rewrite keyed on that exact string applies.
#[test]
fn git_sources_are_cloned_from_the_url_exactly_as_given() {
    let e = Env::bare();
    let repo = e.repo("flows.git", &[("index.sh", INDEX)]);
    for given in [
        "https://github.com/org/repo/",
        "https://github.com/org/repo?tab=readme",
        "https://git.example.com/team/repo.git#main",
    ] {
        fs::write(
            e.p.home().join(".gitconfig"),
            format!("[url \"{repo}\"]\n\tinsteadOf = \"{given}\"\n"),
        )
        .unwrap();
        e.install(&["-y", given]).stdout_contains("repo").run();
        // The workflow is named after the URL's path, not the rewrite.
        assert!(e.p.exists(".loopx/repo/index.sh"), "{given}");
    }
}

#[test]
fn shorthand_ending_in_dot_git_is_rejected() {
    let e = Env::bare();
    e.install(&["org/repo.git"])
        .status(1)
        .stdout("")
        .stderr_contains("the org/repo shorthand must not end in \".git\"")
        .stderr_contains("https://github.com/org/repo.git")
        .run();
    assert!(!e.p.exists(".loopx"));
}

// ------------------------------------------------- local directories
// Beyond §10.1 (DESIGN.md "Beyond the spec"): a path starting with `/`,
// `./` or `../` that is a directory installs like a git clone of it.

/// A directory `dir` under the test's source area holding `files`.
fn local_dir(e: &Env, dir: &str, files: &[(&str, &str)]) -> PathBuf {
    let path = e.tmp.path().join(dir);
    fs::create_dir_all(&path).unwrap();
    for (rel, body) in files {
        write_file(&path.join(rel), body);
    }
    path
}

#[test]
fn a_local_directory_by_absolute_path_is_one_workflow_named_after_its_realpath() {
    let e = Env::bare();
    let dir = local_dir(
        &e,
        "flows/ralph",
        &[
            ("index.sh", "echo hi"),
            ("lib/util.sh", "u"),
            ("README.md", "r"),
        ],
    );
    // A symlink to the directory: the name is the realpath's, not the link's.
    let link = e.tmp.path().join("alias");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    e.install(&[link.to_str().unwrap()])
        .stdout("installed workflow 'ralph' into .loopx/ralph\n")
        .run();
    assert_eq!(
        snapshot(&e.p.path(".loopx/ralph")),
        [
            "README.md: r",
            "index.sh: echo hi",
            "lib/",
            "lib/util.sh: u"
        ]
    );
    // The source is copied, not moved or linked.
    assert!(dir.join("index.sh").is_file());
    assert!(!fs::symlink_metadata(e.p.path(".loopx/ralph"))
        .unwrap()
        .is_symlink());
}

#[test]
fn a_local_directory_by_relative_path_installs_from_the_current_directory() {
    let e = Env::bare();
    local_dir(&e, "flows/review", &[("index.ts", "x"), ("check.sh", "c")]);
    let rel = format!("{}/flows/review", relative_to(e.p.root(), e.tmp.path()));
    assert!(rel.starts_with("../"), "{rel}");
    e.install(&[&rel])
        .stdout("installed workflow 'review' into .loopx/review\n")
        .run();
    assert_eq!(names(&e.p.path(".loopx/review")), ["check.sh", "index.ts"]);
    // `./` and `.`: the current directory's own name.
    let e = Env::bare();
    fs::create_dir_all(e.p.path("src/tool")).unwrap();
    write_file(&e.p.path("src/tool/index.sh"), "t");
    e.install(&["./src/tool"])
        .stdout("installed workflow 'tool' into .loopx/tool\n")
        .run();
    // `.` is the current directory, named after it; installed into that
    // directory's own .loopx/ (§10: the project root is the cwd).
    let tool = e.p.path("src/tool");
    e.install(&["."])
        .with(|r| r.current_dir(&tool))
        .stdout("installed workflow 'tool' into .loopx/tool\n")
        .run();
    assert_eq!(names(&tool.join(".loopx/tool")), ["index.sh"]);
}

/// `../a/b` from `from`, reaching `to` (both absolute).
fn relative_to(from: &Path, to: &Path) -> String {
    let from = fs::canonicalize(from).unwrap();
    let to = fs::canonicalize(to).unwrap();
    let common = from
        .ancestors()
        .find(|a| to.starts_with(a))
        .unwrap()
        .to_path_buf();
    let ups = from.strip_prefix(&common).unwrap().components().count();
    let mut rel = "../".repeat(ups);
    rel.push_str(&to.strip_prefix(&common).unwrap().to_string_lossy());
    rel
}

/// §10.3 applies as to a clone: no root scripts and workflow directories
/// make a multi-workflow source; root files and script-less directories stay
/// behind; `-w` picks one.
#[test]
fn a_local_directory_without_root_scripts_is_a_multi_workflow_source() {
    let e = Env::bare();
    let dir = local_dir(
        &e,
        "collection",
        &[
            ("README.md", "r"),
            ("ralph/index.sh", "a"),
            ("review/index.ts", "b"),
            ("docs/guide.md", "g"),
        ],
    );
    e.install(&[dir.to_str().unwrap()])
        .stdout(
            "installed workflow 'ralph' into .loopx/ralph\n\
             installed workflow 'review' into .loopx/review\n",
        )
        .run();
    assert_eq!(names(&e.p.path(".loopx")), ["ralph", "review"]);
    let e = Env::bare();
    e.install(&["-w", "review", dir.to_str().unwrap()])
        .stdout("installed workflow 'review' into .loopx/review\n")
        .run();
    assert_eq!(names(&e.p.path(".loopx")), ["review"]);
}

/// `.git` is skipped at every level, as a clone's would be; links that stay
/// inside are kept; hard links become copies.
#[test]
fn a_local_directory_skips_git_and_keeps_links_inside() {
    let e = Env::bare();
    let dir = local_dir(&e, "flow", &[("index.sh", "i"), ("lib/a.sh", "true")]);
    git(&dir, &["init", "-q"]);
    commit_all(&dir);
    write_file(&dir.join("vendor/.git"), "gitdir: elsewhere");
    std::os::unix::fs::symlink("lib/a.sh", dir.join("check.sh")).unwrap();
    fs::hard_link(dir.join("index.sh"), dir.join("again.sh")).unwrap();
    e.install(&[dir.to_str().unwrap()])
        .stdout("installed workflow 'flow' into .loopx/flow\n")
        .run();
    assert_eq!(
        snapshot(&e.p.path(".loopx/flow")),
        [
            "again.sh: i",
            "check.sh -> lib/a.sh",
            "index.sh: i",
            "lib/",
            "lib/a.sh: true",
            "vendor/",
        ]
    );
    // The installed workflow runs, through its link too.
    e.p.loopx(&["run", "-n", "1", "flow:check"]).run();
}

/// The archive rules for links: one that leads outside refuses the install,
/// and .loopx/ stays as it was (§10.7).
#[test]
fn a_local_directory_with_a_link_outside_is_refused_and_nothing_changes() {
    let e = Env::new();
    e.p.script("keep", "index.sh", "");
    let before = snapshot(&e.p.path(".loopx"));
    let dir = local_dir(&e, "flow", &[("index.sh", "i")]);
    std::os::unix::fs::symlink("../../secrets", dir.join("leak")).unwrap();
    e.install(&[dir.to_str().unwrap()])
        .status(1)
        .stdout("")
        .stderr(&format!(
            "loopx: error: cannot install from {}: refusing leak: the symlink target points \
             outside the directory; nothing was installed\n",
            fs::canonicalize(&dir).unwrap().display()
        ))
        .run();
    assert_eq!(snapshot(&e.p.path(".loopx")), before);
}

#[test]
fn local_paths_that_are_not_directories_are_refused() {
    let e = Env::bare();
    let tgz = e.tmp.path().join("flows.tgz");
    fs::write(&tgz, tarball(&[("index.sh", "i")])).unwrap();
    // A tarball: its file:// URL is given, and works.
    e.install(&[tgz.to_str().unwrap()])
        .status(1)
        .stdout("")
        .stderr_contains("it is a file, and a local source must be a directory")
        .stderr_contains(&format!("loopx install file://{}", tgz.display()))
        .run();
    e.install(&[&format!("file://{}", tgz.display())])
        .stdout("installed workflow 'flows' into .loopx/flows\n")
        .run();
    let e = Env::bare();
    e.install(&["./nowhere"])
        .status(1)
        .stdout("")
        .stderr_contains("cannot install from ./nowhere: No such file or directory")
        .run();
    assert!(!e.p.exists(".loopx"));
}

#[test]
fn unsupported_sources_are_rejected_with_what_is_supported() {
    let e = Env::bare();
    let server = Server::new().unwrap();
    let sources: [String; 6] = [
        server.url_for("/index.sh"),
        server.url_for("/flow.zip"),
        server.url_for("/dl?file=flow.tar.gz"),
        "https://github.com/org/repo/tree/main".to_string(),
        "just-a-name".to_string(),
        "org/repo/extra".to_string(),
    ];
    for source in sources {
        e.install(&[&source])
            .status(1)
            .stdout("")
            .stderr_contains("unsupported source")
            .stderr_contains("single-file URLs are not supported")
            .stderr_contains(".tar.gz or .tgz")
            .run();
    }
    assert!(server.requests().is_empty(), "{:?}", server.paths());
    assert!(!e.p.exists(".loopx"));
}

// ---------------------------------------------------------------- §10.2/§10.3 git sources

#[test]
fn single_workflow_git_source_is_named_after_the_repository_and_copied_whole() {
    let e = Env::bare();
    let url = e.repo(
        "ralph.git",
        &[
            ("index.sh", INDEX),
            ("check.ts", "export {};\n"),
            ("package.json", "{\"name\":\"ralph\"}\n"),
            ("README.md", "docs\n"),
            ("lib/helper.ts", "export const x = 1;\n"),
            ("other/index.sh", "echo nested\n"),
        ],
    );
    e.install(&[&url])
        .stdout("installed workflow 'ralph' into .loopx/ralph\n")
        .run();
    assert_eq!(
        names(&e.p.path(".loopx/ralph")),
        [
            "README.md",
            "check.ts",
            "index.sh",
            "lib",
            "other",
            "package.json"
        ]
    );
    assert_eq!(e.p.read(".loopx/ralph/other/index.sh"), "echo nested\n");
    assert_eq!(
        e.p.read(".loopx/ralph/lib/helper.ts"),
        "export const x = 1;\n"
    );
    // Installed and runnable; not a git checkout.
    assert!(!e.p.exists(".loopx/ralph/.git"));
    e.p.loopx(&["run", "-n", "1", "ralph"])
        .stderr_contains("ran")
        .run();
}

#[test]
fn multi_workflow_git_source_installs_each_workflow_directory_and_nothing_else() {
    let e = Env::new();
    let url = e.repo(
        "flows.git",
        &[
            ("README.md", "root docs\n"),
            ("LICENSE", "MIT\n"),
            (".github/workflows/ci.yml", "on: push\n"),
            ("docs/guide.md", "not a workflow\n"),
            ("ralph/index.sh", INDEX),
            ("ralph/lib/util.sh", "x\n"),
            ("review/request.ts", "export {};\n"),
        ],
    );
    e.install(&[&url])
        .stdout(
            "installed workflow 'ralph' into .loopx/ralph\n\
             installed workflow 'review' into .loopx/review\n",
        )
        .run();
    // Root files and non-workflow directories are not copied (§10.3).
    assert_eq!(names(&e.p.path(".loopx")), ["ralph", "review"]);
    assert_eq!(names(&e.p.path(".loopx/ralph")), ["index.sh", "lib"]);
    // A workflow without index is fine (§10.4).
    assert_eq!(names(&e.p.path(".loopx/review")), ["request.ts"]);
}

#[test]
fn zero_workflow_source_is_refused() {
    let e = Env::bare();
    let url = e.repo(
        "docs.git",
        &[("README.md", "x\n"), ("nested/deeper/index.sh", INDEX)],
    );
    e.install(&[&url])
        .status(1)
        .stdout("")
        .stderr_contains("the source contains no workflows")
        .run();
    assert!(!e.p.exists(".loopx"));
}

#[test]
fn empty_repository_is_a_clear_error() {
    let e = Env::bare();
    let path = e.tmp.path().join("repos/empty.git");
    fs::create_dir_all(&path).unwrap();
    git(&path, &["init", "-q"]);
    e.install(&[&format!("file://{}", path.display())])
        .status(1)
        .stderr_contains(&format!(
            "the repository file://{} is empty",
            path.display()
        ))
        .run();
    assert!(!e.p.exists(".loopx"));
}

#[test]
fn git_clone_failure_shows_what_git_said() {
    let e = Env::bare();
    let url = format!("file://{}/repos/missing.git", e.tmp.path().display());
    e.install(&[&url])
        .status(1)
        .stdout("")
        .stderr_contains(&format!("git clone of {url} failed: fatal:"))
        .run();
    assert!(!e.p.exists(".loopx"));
}

#[test]
fn missing_git_or_curl_is_named() {
    let e = Env::bare();
    let empty_path = e.tmp.path().join("empty-bin");
    fs::create_dir_all(&empty_path).unwrap();
    let url = e.repo("ralph.git", &[("index.sh", INDEX)]);
    e.install(&[&url])
        .env("PATH", &empty_path)
        .status(1)
        .stderr_contains("`git` was not found on PATH; loopx install needs it to clone git sources")
        .run();
    e.install(&["http://127.0.0.1:9/flow.tar.gz"])
        .env("PATH", &empty_path)
        .status(1)
        .stderr_contains(
            "`curl` was not found on PATH; loopx install needs it to download tarball sources",
        )
        .run();
    assert!(!e.p.exists(".loopx"));
}

// ---------------------------------------------------------------- §10.2 tarballs

#[test]
fn tarball_wrapper_directory_is_stripped_and_the_workflow_named_after_the_archive() {
    let e = Env::bare();
    let server = serve(
        "/releases/my-flow.tar.gz",
        tarball(&[
            ("my-flow-1.2.3/", ""),
            ("my-flow-1.2.3/index.sh", INDEX),
            ("my-flow-1.2.3/schema.json", "{}"),
        ]),
    );
    e.install(&[&server.url_for("/releases/my-flow.tar.gz")])
        .stdout("installed workflow 'my-flow' into .loopx/my-flow\n")
        .run();
    // .loopx/ was created (§4.3).
    assert_eq!(
        names(&e.p.path(".loopx/my-flow")),
        ["index.sh", "schema.json"]
    );
    let mode = fs::metadata(e.p.path(".loopx/my-flow/index.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111);
}

#[test]
fn tarball_with_several_top_level_entries_is_used_as_is() {
    let e = Env::new();
    let server = serve(
        "/flow.tgz",
        tarball(&[("index.sh", INDEX), ("lib/", ""), ("lib/a.sh", "x")]),
    );
    e.install(&[&server.url_for("/flow.tgz")])
        .stdout("installed workflow 'flow' into .loopx/flow\n")
        .run();
    assert_eq!(names(&e.p.path(".loopx/flow")), ["index.sh", "lib"]);

    // Multi-workflow inside a wrapper: names come from the subdirectories.
    let server = serve(
        "/bundle.tar.gz",
        tarball(&[
            ("bundle/README.md", "x"),
            ("bundle/one/index.sh", INDEX),
            ("bundle/two/index.sh", INDEX),
        ]),
    );
    e.install(&[&server.url_for("/bundle.tar.gz")])
        .stdout_contains("'one'")
        .stdout_contains("'two'")
        .run();
    assert_eq!(names(&e.p.path(".loopx")), ["flow", "one", "two"]);
}

#[test]
fn tarball_url_query_and_fragment_are_ignored_for_the_name_but_sent() {
    let e = Env::new();
    let server = serve("/dl/agent.tar.gz", tarball(&[("index.sh", INDEX)]));
    e.install(&[&server.url_for("/dl/agent.tar.gz?token=abc&x=1#frag")])
        .stdout("installed workflow 'agent' into .loopx/agent\n")
        .run();
    let req = &server.requests()[0];
    assert_eq!(req.target, "/dl/agent.tar.gz?token=abc&x=1");
}

#[test]
fn tarball_redirects_are_followed() {
    let e = Env::new();
    let server = serve("/cdn/blob-1234", tarball(&[("index.sh", INDEX)]));
    server.route("/flow.tar.gz", Response::redirect(302, "/cdn/blob-1234"));
    e.install(&[&server.url_for("/flow.tar.gz")])
        .stdout("installed workflow 'flow' into .loopx/flow\n")
        .run();
    assert_eq!(server.paths(), ["/flow.tar.gz", "/cdn/blob-1234"]);
}

#[test]
fn http_error_status_is_reported() {
    let e = Env::bare();
    let server = Server::new().unwrap();
    server.route("/gone.tar.gz", Response::status(404));
    server.route("/broken.tar.gz", Response::status(500));
    for (path, status) in [("/gone.tar.gz", 404), ("/broken.tar.gz", 500)] {
        let url = server.url_for(path);
        e.install(&[&url])
            .status(1)
            .stdout("")
            .stderr_contains(&format!("download of {url} failed: HTTP status {status}"))
            .run();
    }
    assert!(!e.p.exists(".loopx"));
}

#[test]
fn corrupt_or_non_gzip_archive_is_reported() {
    let e = Env::bare();
    let good = tarball(&[("index.sh", INDEX)]);
    let server = Server::new().unwrap();
    server.route("/html.tar.gz", Response::ok("<html>not found</html>"));
    server.route("/cut.tar.gz", Response::ok(good[..good.len() / 2].to_vec()));
    e.install(&[&server.url_for("/html.tar.gz")])
        .status(1)
        .stderr_contains("cannot extract the tarball from")
        .stderr_contains("not a gzip archive")
        .run();
    e.install(&[&server.url_for("/cut.tar.gz")])
        .status(1)
        .stderr_contains("corrupt archive")
        .run();
    assert!(!e.p.exists(".loopx"));
}

// ---------------------------------------------------------------- hostile archives

/// Installs a hostile archive, which must fail with stderr containing every
/// one of `refused_with` (or, where that is empty, succeed quietly) without
/// writing anything outside the staging area.
#[track_caller]
fn hostile(e: &Env, bytes: Vec<u8>, refused_with: &[&str]) {
    let before = snapshot(e.p.root());
    let outside = snapshot(e.tmp.path());
    let server = serve("/evil.tar.gz", bytes);
    let mut install = e.install(&[&server.url_for("/evil.tar.gz")]);
    if refused_with.is_empty() {
        install = install.stdout("installed workflow 'evil' into .loopx/evil\n");
    } else {
        install = install.status(1).stdout("");
    }
    for needle in refused_with {
        install = install.stderr_contains(needle);
    }
    let o = install.run();
    if !refused_with.is_empty() {
        assert_eq!(snapshot(e.p.root()), before, "project changed\n{o}");
    }
    assert_eq!(
        snapshot(e.tmp.path()),
        outside,
        "files appeared outside\n{o}"
    );
}

#[test]
fn hostile_archive_entries_are_refused_and_nothing_escapes() {
    let e = Env::new();
    let victim = e.tmp.path().join("victim");
    let abs = victim.to_str().unwrap().as_bytes().to_vec();
    hostile(
        &e,
        tarball_raw(|b| {
            raw(b, EntryType::Regular, b"flow/index.sh", b"", b"echo");
            raw(b, EntryType::Regular, &abs, b"", b"pwned");
        }),
        &["refusing archive entry", "absolute"],
    );

    for name in [&b"../../../../victim"[..], b"flow/../../victim"] {
        hostile(
            &e,
            tarball_raw(|b| raw(b, EntryType::Regular, name, b"", b"pwned")),
            &["\"..\""],
        );
    }

    // A symlink out of the archive, then a write through it.
    hostile(
        &e,
        tarball_raw(|b| {
            raw(b, EntryType::Regular, b"flow/index.sh", b"", b"echo");
            raw(
                b,
                EntryType::Symlink,
                b"flow/out",
                e.tmp.path().to_str().unwrap().as_bytes(),
                b"",
            );
            raw(b, EntryType::Regular, b"flow/out/victim", b"", b"pwned");
        }),
        &["absolute"],
    );
    hostile(
        &e,
        tarball_raw(|b| {
            raw(b, EntryType::Symlink, b"flow/up", b"../../../..", b"");
            raw(b, EntryType::Regular, b"flow/up/victim", b"", b"pwned");
        }),
        &["outside"],
    );

    // A hard link to a file outside the archive.
    hostile(
        &e,
        tarball_raw(|b| {
            raw(b, EntryType::Regular, b"flow/index.sh", b"", b"echo");
            raw(b, EntryType::Link, b"flow/passwd", b"/etc/passwd", b"");
        }),
        &["hard link"],
    );
    assert!(!victim.exists());
}

#[test]
fn archive_devices_and_fifos_are_not_created() {
    let e = Env::new();
    hostile(
        &e,
        tarball_raw(|b| {
            raw(b, EntryType::Regular, b"flow/index.sh", b"", b"echo");
            raw(b, EntryType::Fifo, b"flow/pipe", b"", b"");
            raw(b, EntryType::Char, b"flow/null", b"", b"");
            raw(b, EntryType::Block, b"flow/disk", b"", b"");
        }),
        &[],
    );
    assert_eq!(names(&e.p.path(".loopx/evil")), ["index.sh"]);
}

#[test]
fn symlinks_leaving_a_workflow_are_refused_even_inside_the_source() {
    // Self-containment (§10.3): a multi-workflow member may not link to
    // shared files at the source root, which are not installed.
    let e = Env::new();
    let url = e.repo_with(
        "flows.git",
        &[
            ("shared/common.txt", "x\n"),
            ("a/index.sh", INDEX),
            ("b/index.sh", INDEX),
        ],
        |root| {
            std::os::unix::fs::symlink("../shared/common.txt", root.join("a/common.txt")).unwrap()
        },
    );
    let before = snapshot(e.p.root());
    e.install(&[&url])
        .status(1)
        .stderr_contains(
            "workflow 'a': symlink 'common.txt' points outside the workflow ('../shared/common.txt')",
        )
        .run();
    assert_eq!(snapshot(e.p.root()), before);
    // Links within the workflow are kept as links.
    let url = e.repo_with(
        "inner.git",
        &[("index.sh", INDEX), ("lib/data.txt", "d\n")],
        |root| std::os::unix::fs::symlink("lib/data.txt", root.join("data.txt")).unwrap(),
    );
    e.install(&[&url])
        .stdout("installed workflow 'inner' into .loopx/inner\n")
        .run();
    assert_eq!(
        fs::read_link(e.p.path(".loopx/inner/data.txt")).unwrap(),
        Path::new("lib/data.txt")
    );
}

// ---------------------------------------------------------------- §10.4 validation

#[test]
fn install_time_validation_failures_are_refused() {
    let e = Env::new();
    let cases = [
        (
            e.repo("bad-names.git", &[("index.sh", INDEX), ("my script.sh", "x")]),
            "workflow 'bad-names': script file 'my script.sh' has an invalid name",
        ),
        (
            e.repo("clash.git", &[("check.sh", "x"), ("check.ts", "x")]),
            "name collision in workflow 'clash': script 'check' is defined by check.sh and check.ts",
        ),
        (
            e.repo("my.flow.git", &[("index.sh", INDEX)]),
            "invalid workflow name 'my.flow'",
        ),
    ];
    for (url, message) in cases {
        e.install(&[&url])
            .status(1)
            .stdout("")
            .stderr_contains("install refused, nothing was installed:")
            .stderr_contains(message)
            .run();
    }
    assert!(names(&e.p.path(".loopx")).is_empty());
}

// ---------------------------------------------------------------- §10.5 collisions

#[test]
fn existing_workflow_is_refused_without_y_and_replaced_with_y() {
    let e = Env::new();
    e.p.script("ralph", "index.sh", "old")
        .script("ralph", "old-only.sh", "old");
    let url = e.repo("ralph.git", &[("index.sh", INDEX)]);
    let before = snapshot(e.p.root());
    e.install(&[&url])
        .status(1)
        .stderr_contains("workflow 'ralph' already exists at .loopx/ralph; use -y to replace it")
        .run();
    assert_eq!(snapshot(e.p.root()), before);
    e.install(&["-y", &url])
        .stdout("installed workflow 'ralph' into .loopx/ralph (replaced)\n")
        .run();
    assert_eq!(names(&e.p.path(".loopx/ralph")), ["index.sh"]);
    assert_eq!(e.p.read(".loopx/ralph/index.sh"), INDEX);
}

#[test]
fn y_replaces_a_symlinked_workflow_by_removing_the_link_not_its_target() {
    let e = Env::new();
    e.p.file("store/ralph/index.sh", "old")
        .symlink("../store/ralph", ".loopx/ralph");
    let url = e.repo("ralph.git", &[("index.sh", INDEX)]);
    // The structural check follows the link: it is a workflow.
    e.install(&[&url])
        .status(1)
        .stderr_contains("use -y to replace it")
        .run();
    e.install(&["-y", &url])
        .stdout("installed workflow 'ralph' into .loopx/ralph (replaced)\n")
        .run();
    let meta = fs::symlink_metadata(e.p.path(".loopx/ralph")).unwrap();
    assert!(meta.is_dir() && !meta.file_type().is_symlink());
    assert_eq!(e.p.read(".loopx/ralph/index.sh"), INDEX);
    assert_eq!(e.p.read("store/ralph/index.sh"), "old");
}

#[test]
fn y_never_replaces_a_non_workflow_path() {
    let e = Env::new();
    e.p.file(".loopx/notes/README.md", "keep")
        .file(".loopx/data", "keep")
        .file("store/readme.md", "keep")
        .symlink("../store", ".loopx/linked");
    let before = snapshot(e.p.root());
    for name in ["notes", "data", "linked"] {
        let url = e.repo(&format!("{name}.git"), &[("index.sh", INDEX)]);
        e.install(&["-y", &url])
            .status(1)
            .stderr_contains(&format!(".loopx/{name} already exists and is"))
            .stderr_contains("-y only replaces workflows")
            .run();
    }
    assert_eq!(snapshot(e.p.root()), before);
}

#[test]
fn collision_check_is_local_to_the_target_path() {
    // A broken sibling workflow does not affect installing or replacing.
    let e = Env::new();
    e.p.script("broken", "a.sh", "x")
        .script("broken", "a.ts", "x");
    e.p.script("ralph", "index.sh", "old");
    let url = e.repo("ralph.git", &[("index.sh", INDEX)]);
    e.install(&["-y", &url])
        .stdout("installed workflow 'ralph' into .loopx/ralph (replaced)\n")
        .run();
    assert_eq!(e.p.read(".loopx/ralph/index.sh"), INDEX);
}

// ---------------------------------------------------------------- §10.6 versions

#[test]
fn version_mismatch_blocks_unless_y() {
    let e = Env::new();
    let url = e.repo(
        "pinned.git",
        &[
            ("index.sh", INDEX),
            (
                "package.json",
                r#"{"devDependencies":{"loopx":">=999.0.0"}}"#,
            ),
        ],
    );
    e.install(&[&url])
        .status(1)
        .stderr_contains(&format!(
            "workflow 'pinned' requires loopx version >=999.0.0 (package.json devDependencies), \
             but the running version is {VERSION}; use -y to install it anyway"
        ))
        .run();
    assert!(!e.p.exists(".loopx/pinned"));
    e.install(&["-y", &url])
        .stderr_contains("requires loopx version >=999.0.0")
        .stderr_contains("installing anyway (-y)")
        .stdout("installed workflow 'pinned' into .loopx/pinned\n")
        .run();
    // The declaration is kept (§10.6).
    assert!(e.p.read(".loopx/pinned/package.json").contains(">=999.0.0"));
}

#[test]
fn satisfied_range_installs_quietly() {
    let e = Env::new();
    let url = e.repo(
        "fine.git",
        &[
            ("index.sh", INDEX),
            ("package.json", &format!(r#"{{"dependencies":{{"loopx":"^{VERSION}"}},"optionalDependencies":{{"loopx":">=999"}}}}"#)),
        ],
    );
    e.install(&[&url])
        .stderr("")
        .stdout("installed workflow 'fine' into .loopx/fine\n")
        .run();
}

#[test]
fn broken_package_json_warns_but_installs() {
    let e = Env::new();
    let cases = [
        ("badjson", "{ not json", "package.json is not valid JSON"),
        (
            "badrange",
            r#"{"dependencies":{"loopx":"not a range"}}"#,
            "package.json dependencies gives loopx a specifier that is not valid semver; \
             it is not checked",
        ),
    ];
    for (name, body, warning) in cases {
        let url = e.repo(
            &format!("{name}.git"),
            &[("index.sh", INDEX), ("package.json", body)],
        );
        let o = e
            .install(&[&url])
            .stderr_contains(&format!("loopx: warning: workflow '{name}': {warning}"))
            .stdout(&format!("installed workflow '{name}' into .loopx/{name}\n"))
            .run();
        assert_eq!(o.stderr.matches("warning").count(), 1, "{o}");
    }
    // Unreadable (a directory where the file should be).
    let url = e.repo(
        "unreadable.git",
        &[("index.sh", INDEX), ("package.json/x", "y")],
    );
    e.install(&[&url])
        .stderr_contains("workflow 'unreadable': package.json cannot be read")
        .stdout("installed workflow 'unreadable' into .loopx/unreadable\n")
        .run();
}

/// §10.6 judges the workflow as it will be installed: the warning an
/// unreadable package.json gets at install time is the one `loopx run`
/// prints for the installed workflow, once per workflow; an archive entry's
/// mode 000 is not carried over (installed files are 0644/0755), so such a
/// package.json is read and its declaration checked.
#[test]
fn install_time_version_checks_judge_the_workflow_as_installed() {
    let e = Env::new();
    let archive = tarball_raw(|b| {
        let stop = b"$LOOPX_BIN output --stop\n";
        file_with_mode(b, "flows/broken/index.sh", stop, 0o755);
        file_with_mode(b, "flows/broken/package.json/x", b"y", 0o644);
        file_with_mode(b, "flows/sealed/index.sh", stop, 0o755);
        file_with_mode(
            b,
            "flows/sealed/package.json",
            br#"{"dependencies":{"loopx":">=999.0.0"}}"#,
            0o000,
        );
    });
    let server = serve("/flows.tgz", archive);
    let url = server.url_for("/flows.tgz");
    e.install(&[&url])
        .status(1)
        .stderr_contains(
            "workflow 'sealed' requires loopx version >=999.0.0 (package.json dependencies)",
        )
        .run();
    let o = e
        .install(&["-y", &url])
        .stderr_contains("loopx: warning: workflow 'broken': package.json cannot be read (")
        .stderr_contains("installing anyway (-y)")
        .stdout("installed workflow 'broken' into .loopx/broken\ninstalled workflow 'sealed' into .loopx/sealed\n")
        .run();
    let warning = |stderr: &str| -> Vec<String> {
        stderr
            .lines()
            .filter(|l| l.contains("cannot be read"))
            .map(str::to_string)
            .collect()
    };
    let at_install = warning(&o.stderr);
    assert_eq!(at_install.len(), 1, "{o}");
    assert!(
        at_install[0]
            .starts_with("loopx: warning: workflow 'broken': package.json cannot be read ("),
        "{o}"
    );
    // `loopx run` prints that same warning, and nothing else.
    e.p.loopx(&["run", "broken"])
        .stderr(&format!("{}\n", at_install[0]))
        .run();
}

// ---------------------------------------------------------------- §10.7 atomicity

#[test]
fn a_failing_workflow_leaves_every_other_one_unwritten_with_one_aggregated_error() {
    let e = Env::new();
    e.p.script("existing", "index.sh", "old");
    let url = e.repo(
        "flows.git",
        &[
            ("alpha/index.sh", INDEX),
            ("beta/check.sh", "x"),
            ("beta/check.ts", "x"),
            ("existing/index.sh", INDEX),
            ("gamma/index.sh", INDEX),
            (
                "gamma/package.json",
                r#"{"dependencies":{"loopx":">=999"}}"#,
            ),
        ],
    );
    let before = snapshot(e.p.root());
    let o = e
        .install(&[&url])
        .status(1)
        .stdout("")
        .stderr_contains("loopx: error: install refused, nothing was installed:\n")
        .run();
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(
        lines[0], "loopx: error: install refused, nothing was installed:",
        "{o}"
    );
    assert_eq!(lines.len(), 4, "{o}");
    assert!(
        lines[1].contains("name collision in workflow 'beta': script 'check'"),
        "{o}"
    );
    assert!(
        lines[2].contains("workflow 'existing' already exists"),
        "{o}"
    );
    assert!(
        lines[3].contains("workflow 'gamma' requires loopx version >=999"),
        "{o}"
    );
    assert_eq!(snapshot(e.p.root()), before);
    // -y settles the collision and the mismatch, not the invalid workflow.
    let o = e
        .install(&["-y", &url])
        .status(1)
        .stderr_contains("  - ")
        .run();
    assert_eq!(
        o.stderr.lines().filter(|l| l.starts_with("  - ")).count(),
        1,
        "{o}"
    );
    assert_eq!(snapshot(e.p.root()), before);
}

#[test]
fn failed_install_does_not_create_loopx_dir() {
    let e = Env::bare();
    let url = e.repo(
        "flows.git",
        &[("a/index.sh", INDEX), ("b/x.sh", "x"), ("b/x.js", "x")],
    );
    e.install(&[&url])
        .status(1)
        .stderr_contains("install refused, nothing was installed:")
        .run();
    assert!(!e.p.exists(".loopx"));
}

// ---------------------------------------------------------------- §10.8 -w

#[test]
fn w_installs_only_the_selected_workflow_and_ignores_invalid_siblings() {
    let e = Env::new();
    let url = e.repo(
        "flows.git",
        &[
            ("good/index.sh", INDEX),
            ("bad/x.sh", "x"),
            ("bad/x.ts", "x"),
            ("other/index.sh", INDEX),
        ],
    );
    e.install(&["-w", "good", &url])
        .stdout("installed workflow 'good' into .loopx/good\n")
        .run();
    assert_eq!(names(&e.p.path(".loopx")), ["good"]);
    e.install(&["--workflow", "other", &url])
        .stdout("installed workflow 'other' into .loopx/other\n")
        .run();
    assert_eq!(names(&e.p.path(".loopx")), ["good", "other"]);
}

#[test]
fn w_naming_no_workflow_of_the_source_is_an_error() {
    let e = Env::new();
    let url = e.repo(
        "flows.git",
        &[
            ("a/index.sh", INDEX),
            ("b/index.sh", INDEX),
            ("docs/x.md", "x"),
        ],
    );
    for name in ["missing", "docs"] {
        e.install(&["-w", name, &url])
            .status(1)
            .stderr_contains(&format!(
                "-w {name}: the source has no workflow named '{name}' (workflows: a, b)"
            ))
            .run();
    }
    assert!(names(&e.p.path(".loopx")).is_empty());
}

#[test]
fn w_with_a_single_workflow_source_is_an_error() {
    let e = Env::new();
    let url = e.repo(
        "ralph.git",
        &[("index.sh", INDEX), ("ralph/index.sh", INDEX)],
    );
    for name in ["ralph", "anything"] {
        e.install(&["-w", name, &url])
            .status(1)
            .stderr_contains(&format!("-w {name}: the source is a single workflow"))
            .run();
    }
    assert!(names(&e.p.path(".loopx")).is_empty());
}

// ---------------------------------------------------------------- §10.9 common rules

#[test]
fn install_does_not_install_dependencies() {
    let e = Env::new();
    let url = e.repo(
        "deps.git",
        &[
            ("index.ts", "export {};\n"),
            ("package.json", r#"{"dependencies":{"left-pad":"1.0.0"}}"#),
        ],
    );
    e.install(&[&url])
        .stdout("installed workflow 'deps' into .loopx/deps\n")
        .run();
    assert_eq!(
        names(&e.p.path(".loopx/deps")),
        ["index.ts", "package.json"]
    );
}

#[test]
fn install_writes_into_the_project_root_only() {
    // The project root is the cwd (§3.2); a .loopx/ in an ancestor is not used.
    let e = Env::new();
    let sub = e.p.path("sub");
    fs::create_dir_all(&sub).unwrap();
    let url = e.repo("ralph.git", &[("index.sh", INDEX)]);
    e.install(&[&url])
        .with(|r| r.current_dir(&sub))
        .stdout("installed workflow 'ralph' into .loopx/ralph\n")
        .run();
    assert!(sub.join(".loopx/ralph/index.sh").is_file());
    assert!(names(&e.p.path(".loopx")).is_empty());
}

#[test]
fn install_help_documents_sources_and_options() {
    let p = Project::bare();
    let mut help = p.loopx(&["install", "--help"]);
    for needle in [
        "<org>/<repo>",
        "github.com",
        "gitlab.com",
        "bitbucket.org",
        ".git",
        ".tar.gz",
        ".tgz",
        "-w, --workflow <name>",
        "-y",
        "one workflow",
        "npm install",
    ] {
        help = help.stdout_contains(needle);
    }
    help.run();
}

#[test]
fn interrupted_install_exits_with_the_signal_code_and_cleans_up() {
    // A stand-in git that waits until the test has interrupted loopx.
    let e = Env::bare();
    let bin = e.tmp.path().join("bin");
    let ready = e.tmp.path().join("ready");
    let go = e.tmp.path().join("go");
    fake_git(
        &bin,
        "#!/bin/sh\nfor a; do dest=$a; done\nmkdir -p \"$dest\"\ntouch \"$READY\"\n\
         while [ ! -e \"$GO\" ]; do sleep 0.05; done\nexit 128\n",
    );
    let running =
        e.p.loopx(&["install", "org/repo"])
            .env("TMPDIR", e.tmpdir())
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("READY", &ready)
            .env("GO", &go)
            .timeout(std::time::Duration::from_secs(30))
            .status(130)
            .stdout("")
            .start();
    util::procs::wait_until("the fake git started", || ready.exists());
    running.signal(libc::SIGINT);
    fs::write(&go, "").unwrap();
    running.finish();
    assert!(names(&e.tmpdir()).is_empty(), "{:?}", names(&e.tmpdir()));
    assert!(!e.p.exists(".loopx"));
}

/// DESIGN "Beyond the spec": no message shows a URL's credentials or query
/// string, whatever fails (an HTTP error, no connection, git, the source
/// itself); git and curl get the URL as given, messages show it redacted.
#[test]
fn credentials_and_query_strings_never_appear_in_messages() {
    let e = Env::new();
    // Nothing but 404s, for the tarball and for git's smart-HTTP probe.
    let server = Server::new().unwrap();
    let host = server.url().trim_start_matches("http://").to_string();
    let cases = [
        (
            format!("http://user:s3cret@{host}/missing.tar.gz?token=abc"),
            format!(
                "loopx: error: download of http://***@{host}/missing.tar.gz?*** failed: \
                 HTTP status 404\n"
            ),
        ),
        (
            format!("http://user:s3cret@{host}/missing.git?token=abc"),
            format!("loopx: error: git clone of http://***@{host}/missing.git?*** failed: "),
        ),
        (
            "http://user:s3cret@127.0.0.1:9/flow.tgz?token=abc#frag".to_string(),
            "loopx: error: download of http://***@127.0.0.1:9/flow.tgz?***#*** failed: "
                .to_string(),
        ),
        (
            "https://user:s3cret@example.com/flow.zip?token=abc".to_string(),
            "loopx: error: unsupported source \"https://***@example.com/flow.zip?***\": "
                .to_string(),
        ),
    ];
    for (source, error) in cases {
        let o = e
            .install(&[&source])
            .status(1)
            .stdout("")
            .stderr_contains(&error)
            .run();
        for secret in ["s3cret", "abc"] {
            assert!(
                !o.stderr.contains(secret) && !o.stdout.contains(secret),
                "{source} shows {secret}\n{o}"
            );
        }
    }
    // The secrets did reach the server, where they belong.
    let sent = server.requests();
    assert!(
        sent.iter().all(|r| r.target.contains("token=abc")),
        "{sent:?}"
    );
    assert!(
        sent.iter().any(|r| r.path.starts_with("/missing.git")),
        "git never asked: {sent:?}"
    );
}

/// The same for a usage error that lists the sources given.
#[test]
fn credentials_are_hidden_in_usage_errors_too() {
    let p = Project::new();
    let o = p
        .loopx(&[
            "install",
            "https://user:s3cret@example.com/a.tar.gz?token=abc",
            "org/repo",
        ])
        .usage_error(
            "expected one source, got 2: https://***@example.com/a.tar.gz?*** org/repo",
            "loopx install --help",
        )
        .run();
    assert!(
        !o.stderr.contains("s3cret") && !o.stderr.contains("abc"),
        "{o}"
    );
}
