//! The npm package as users get it (issue 4, "Done when"; §3.1, §3.3):
//! the built binary copied into the package's `native/loopx`, `npm pack`,
//! then a global install with npm (`npm install -g --prefix`) and with Bun
//! (`bun add -g`), whose `loopx` runs TypeScript scripts that import loopx.
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

/// A project whose TypeScript script imports loopx and reports which
/// runtime and which preloads ran it; a bash script stores that report.
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
        "wf",
        "sink.sh",
        "cat > \"$LOOPX_PROJECT_ROOT/got\"\n$LOOPX_BIN output --stop\n",
    );
    p
}

#[test]
fn npm_install_g_gives_a_loopx_whose_ts_scripts_import_loopx_under_node_and_bun() {
    let tmp = TempDir::new("npm-g");
    let prefix = tmp.path().join("prefix");
    check(
        Command::new("npm")
            .args([
                "install",
                "-g",
                "--no-audit",
                "--no-fund",
                "--prefer-offline",
            ])
            .arg("--prefix")
            .arg(&prefix)
            .arg(tarball())
            .env("npm_config_cache", ci_cache().join("npm-cache")),
    );
    let installed = prefix.join("lib/node_modules/loopx");

    // `<prefix>/bin/loopx`: the shim under Node, tsx from the package.
    let p = ts_project();
    p.loopx_at(&prefix.join("bin/loopx"), &["run", "wf"])
        .stdout("")
        .run();
    let got = p.read("got");
    assert!(got.starts_with("node [] --import file://"), "{got}");
    assert!(
        got.contains(&format!("{}/loader/register.mjs", installed.display())),
        "{got}"
    );
    assert!(
        got.contains(&format!(
            "{}/node_modules/tsx/dist/loader.mjs",
            installed.display()
        )),
        "{got}"
    );

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
