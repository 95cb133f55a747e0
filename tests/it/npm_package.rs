//! The npm package as users get it (issue 4, "Done when"; §3.1, §3.3;
//! issue 26): the built binary copied into the package's `native/loopx`,
//! `npm pack`, then installs with npm (global and a project's, install
//! scripts run: the binary itself behind `loopx`; `--ignore-scripts`: the
//! shim) and with Bun (`bun add -g`: the shim), whose `loopx` runs JS and
//! TypeScript scripts that import loopx.
//!
//! The installs fetch tsx like any user's would, through an npm cache shared
//! between test runs (tests/util's ci_cache()).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::util::*;

#[track_caller]
fn check(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n--- stdout:\n{}\n--- stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The tarball `npm pack` makes of dist/npm with this build's binary in
/// `native/loopx`; made once per test run.
fn tarball() -> &'static Path {
    static TARBALL: OnceLock<PathBuf> = OnceLock::new();
    TARBALL.get_or_init(|| {
        let tmpdir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        // Earlier runs' tarballs (a few MB each) go.
        for old in fs::read_dir(tmpdir).into_iter().flatten().flatten() {
            if old.file_name().to_string_lossy().starts_with("npm-pack-") {
                let _ = fs::remove_dir_all(old.path());
            }
        }
        let work = tmpdir.join(format!("npm-pack-{}", std::process::id()));
        let pkg = work.join("loopx");
        fs::create_dir_all(pkg.join("native")).expect("mkdir");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/npm");
        // What a release build packs: the sources, not node_modules or tests
        // (package.json's "files" decides what goes in the tarball anyway).
        for entry in fs::read_dir(&src).expect("ls dist/npm") {
            let entry = entry.expect("entry");
            let name = entry.file_name();
            if name == "node_modules" || name == "test" || name == "native" {
                continue;
            }
            check(Command::new("cp").arg("-R").arg(entry.path()).arg(&pkg));
        }
        copy_loopx_to(&pkg.join("native/loopx"));
        let out = check(
            Command::new("npm")
                .args(["pack", "--silent", "--pack-destination"])
                .arg(&work)
                .env("npm_config_cache", ci_cache().join("npm-cache"))
                .current_dir(&pkg),
        );
        let name = out
            .lines()
            .last()
            .expect("npm pack names the tarball")
            .trim();
        work.join(name)
    })
}

/// A project whose TypeScript (`wf`) and JavaScript (`js`) scripts import
/// loopx and report which runtime and which preloads ran them; a bash
/// script stores that report.
fn ts_project() -> Project {
    let p = Project::new();
    p.script(
        "wf",
        "index.ts",
        "import { output, input } from \"loopx\";\n\
         const runtime: string = process.versions.bun ? \"bun\" : \"node\";\n\
         output({ result: `${runtime} [${await input()}] ${process.execArgv.join(\" \")}`, goto: \"sink\" });\n",
    );
    p.script(
        "js",
        "index.js",
        "import { output, input } from \"loopx\";\n\
         output({ result: `js [${await input()}] ${process.execArgv.join(\" \")}`, goto: \"wf:sink\" });\n",
    );
    p.script(
        "wf",
        "sink.sh",
        "cat > \"$LOOPX_PROJECT_ROOT/got\"\n$LOOPX_BIN output --stop\n",
    );
    p
}

/// `npm install -g --prefix <prefix> <extra> <tarball>`; the package's
/// directory.
fn npm_install_g(prefix: &Path, extra: &[&str]) -> PathBuf {
    check(
        Command::new("npm")
            .args([
                "install",
                "-g",
                "--no-audit",
                "--no-fund",
                "--prefer-offline",
            ])
            .args(extra)
            .arg("--prefix")
            .arg(prefix)
            .arg(tarball())
            .env_remove("LOOPX_BINARY_PATH")
            .env("npm_config_cache", ci_cache().join("npm-cache")),
    );
    prefix.join("lib/node_modules/loopx")
}

fn starts_with(path: &Path, magic: &[u8]) -> bool {
    fs::read(path).is_ok_and(|b| b.starts_with(magic))
}

/// Runs the JS and the TS workflow of ts_project() with `loopx` and checks
/// that both imported loopx, ran on Node, and were preloaded with
/// `package`'s hooks (and, for TS, told of the tsx at `tsx`).
fn runs_js_and_ts(loopx: &Path, package: &Path, tsx: &Path) {
    let p = ts_project();
    p.loopx_at(loopx, &["run", "js"]).stdout("").run();
    let got = p.read("got");
    let register = format!("--import file://{}/loader/register.mjs", package.display());
    assert_eq!(got, format!("js [] {register}"), "{}", loopx.display());
    p.loopx_at(loopx, &["run", "wf"]).stdout("").run();
    let got = p.read("got");
    assert_eq!(
        got,
        format!(
            "node [] {register}?tsx=file://{}/dist/loader.mjs",
            tsx.display()
        ),
        "{}",
        loopx.display()
    );
}

#[test]
fn npm_install_g_puts_the_binary_itself_behind_loopx_and_it_finds_its_package() {
    // npm runs the install script: `<prefix>/bin/loopx` is the ELF, which
    // finds the package's hooks and tsx from its own location.
    let tmp = TempDir::new("npm-g");
    let prefix = tmp.path().join("prefix");
    let installed = npm_install_g(&prefix, &[]);
    let bin = prefix.join("bin/loopx");
    assert!(
        starts_with(&bin, b"\x7fELF"),
        "{} is not the binary",
        bin.display()
    );
    assert_eq!(
        fs::read(installed.join("bin/loopx.js")).expect("bin/loopx.js"),
        fs::read(installed.join("native/loopx")).expect("native/loopx")
    );
    runs_js_and_ts(&bin, &installed, &installed.join("node_modules/tsx"));
}

#[test]
fn npm_install_in_a_project_finds_the_hoisted_tsx() {
    // A project's own install: tsx is hoisted to <project>/node_modules/tsx,
    // beside loopx, and the binary behind node_modules/.bin/loopx walks up
    // node_modules to it as Node would.
    let tmp = TempDir::new("npm-local");
    let project = tmp.path().join("proj");
    fs::create_dir_all(&project).expect("mkdir");
    fs::write(project.join("package.json"), "{ \"private\": true }\n").expect("package.json");
    check(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefer-offline"])
            .arg(tarball())
            .env_remove("LOOPX_BINARY_PATH")
            .env("npm_config_cache", ci_cache().join("npm-cache"))
            .current_dir(&project),
    );
    let installed = project.join("node_modules/loopx");
    let tsx = project.join("node_modules/tsx");
    assert!(tsx.join("package.json").is_file(), "tsx is hoisted");
    let bin = project.join("node_modules/.bin/loopx");
    assert!(
        starts_with(&bin, b"\x7fELF"),
        "{} is not the binary",
        bin.display()
    );
    runs_js_and_ts(&bin, &installed, &tsx);
}

#[test]
fn npm_install_g_ignore_scripts_keeps_the_shim_under_node_and_bun() {
    let tmp = TempDir::new("npm-g-no-scripts");
    let prefix = tmp.path().join("prefix");
    let installed = npm_install_g(&prefix, &["--ignore-scripts"]);
    let bin = prefix.join("bin/loopx");
    assert!(
        starts_with(&bin, b"#!/usr/bin/env node"),
        "{} is not the shim",
        bin.display()
    );
    runs_js_and_ts(&bin, &installed, &installed.join("node_modules/tsx"));

    // The same package run by Bun: the shim tells the binary to use Bun.
    let p = ts_project();
    p.loopx_at(
        &bun(),
        &[
            &installed.join("bin/loopx.js").display().to_string(),
            "run",
            "wf",
        ],
    )
    .stdout("")
    .run();
    let got = p.read("got");
    assert!(got.starts_with("bun [] "), "{got}");
}

#[test]
fn bun_add_g_gives_a_loopx_whose_ts_scripts_import_loopx() {
    let tmp = TempDir::new("bun-g");
    let bun_install = tmp.path().join("bun");
    check(
        Command::new(bun())
            .args(["add", "-g"])
            .arg(tarball())
            .env("BUN_INSTALL", &bun_install),
    );
    let p = ts_project();
    p.loopx_at(
        &bun(),
        &[
            &bun_install.join("bin/loopx").display().to_string(),
            "run",
            "wf",
        ],
    )
    .stdin(b"")
    .stdout("")
    .run();
    let got = p.read("got");
    assert!(got.starts_with("bun [] "), "{got}");
}
