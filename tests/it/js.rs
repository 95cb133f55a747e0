//! JS/TS scripts (§6.3–6.5), `import "loopx"` (§3.3) and the runtime choice
//! of DESIGN.md "JS/TS runtime", with real node, tsx and Bun.
//!
//! tsx comes from dist/npm/node_modules (CI runs `npm ci` there). Runs "as
//! the npm shim" get LOOPX_PACKAGE_DIR and LOOPX_TSX as bin/loopx.js sets
//! them; "standalone" runs get neither, and PATH holds only what the test
//! puts there, so nothing else can leak in.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::util::*;

fn npm_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/npm")
}

fn tsx_dir() -> PathBuf {
    let dir = npm_dir().join("node_modules/tsx");
    assert!(
        dir.join("package.json").is_file(),
        "tsx is missing: run `npm ci --ignore-scripts` in dist/npm"
    );
    dir
}

fn node() -> PathBuf {
    which("node").expect("node must be on PATH for the JS/TS tests")
}

/// A tsx in the project's node_modules that fails any script it loads.
fn broken_project_tsx(p: &Project) {
    p.file(
        "node_modules/tsx/package.json",
        r#"{ "name": "tsx", "exports": { ".": "./broken.mjs" } }"#,
    );
    p.file(
        "node_modules/tsx/broken.mjs",
        "throw new Error(\"the project's tsx was used\");\n",
    );
}

/// A Node with built-in type stripping (>= 22.18): LOOPX_TEST_NODE22, else
/// where scripts/test.sh installs it.
fn node22() -> PathBuf {
    std::env::var_os("LOOPX_TEST_NODE22")
        .map(PathBuf::from)
        .or_else(|| Some(ci_cache().join("node22/node_modules/.bin/node")))
        .filter(|p| p.is_file())
        .expect("Node 22 not found: set LOOPX_TEST_NODE22 (scripts/test.sh installs it)")
}

/// A directory of symlinks to the given programs: a PATH with exactly them.
fn bin_dir(p: &Project, name: &str, programs: &[(&str, &Path)]) -> PathBuf {
    let dir = p.home().join(name);
    fs::create_dir_all(&dir).expect("mkdir");
    for (n, target) in programs {
        let link = dir.join(n);
        let _ = fs::remove_file(&link);
        symlink(target, link).expect("symlink");
    }
    dir
}

fn executable(p: &Project, rel: &str, body: &str) {
    write_executable(&p.path(rel), body);
}

/// `loopx run <target>` as the npm shim under Node starts it.
fn run_packaged(p: &Project, target: &str) -> Run {
    p.loopx(&["run", target])
        .env("LOOPX_PACKAGE_DIR", npm_dir())
        .env("LOOPX_TSX", tsx_dir())
}

/// `loopx run <target>` as a standalone binary, with only node on PATH.
fn run_standalone(p: &Project, target: &str) -> Run {
    let path = bin_dir(p, "node-only", &[("node", &node())]);
    p.loopx(&["run", target]).env("PATH", path)
}

/// `loopx run <target>` under Bun, as the shim run by Bun starts it.
fn run_bun(p: &Project, target: &str) -> Run {
    run_packaged(p, target)
        .env("LOOPX_JS_RUNTIME", "bun")
        .env("LOOPX_BUN", bun())
}

/// A bash script that stores its stdin in `$LOOPX_PROJECT_ROOT/<file>` and
/// stops the loop: the end of every chain below. Builtins only, as some
/// tests give scripts a PATH with nothing but node.
fn sink(p: &Project, workflow: &str, file: &str) {
    p.script(
        workflow,
        "sink.sh",
        &format!(
            "IFS= read -r -d '' data\nprintf '%s' \"$data\" > \"$LOOPX_PROJECT_ROOT/{file}\"\n\
             $LOOPX_BIN output --stop\n"
        ),
    );
}

/// A script that passes `expr` on to the sink.
fn to_sink(expr: &str) -> String {
    format!("import {{ output, input }} from \"loopx\";\noutput({{ result: {expr}, goto: \"sink\" }});\n")
}

const TSX_CLASSIC: &str = r#"import { output } from "loopx";
const React = {
  createElement: (type: string, props: object | null, ...children: unknown[]) => ({ type, props, children }),
  Fragment: "frag",
};
const n: number = 2;
output({ result: JSON.stringify(<><b id="x">hi {n}</b></>), goto: "sink" });
"#;
const TSX_CLASSIC_RESULT: &str = r#"{"type":"frag","props":null,"children":[{"type":"b","props":{"id":"x"},"children":["hi ",2]}]}"#;

const JSX_CLASSIC: &str = r#"import { output } from "loopx";
const React = { createElement: (type, props, ...children) => [type, props, children] };
output({ result: JSON.stringify(<i>{1 + 1}</i>), goto: "sink" });
"#;

// ---- node + tsx, as installed through npm ---------------------------------

#[test]
fn ts_script_imports_output_and_input_from_loopx() {
    let p = Project::new();
    p.script(
        "wf",
        "index.ts",
        "import { output, input, type Output } from \"loopx\";\n\
         const data: string = await input();\n\
         const o: Output = { result: `ts saw [${data}]`, goto: \"sink\" };\n\
         output(o);\n",
    );
    sink(&p, "wf", "got");
    run_packaged(&p, "wf").stdout("").run();
    assert_eq!(p.read("got"), "ts saw []");
}

#[test]
fn js_jsx_ts_and_tsx_scripts_all_run_under_node_with_tsx() {
    let p = Project::new();
    p.script("js", "index.js", &to_sink("\"from js\""));
    p.script("ts", "index.ts", &to_sink("(\"from ts\" as string)"));
    p.script("jsx", "index.jsx", JSX_CLASSIC);
    p.script("tsx", "index.tsx", TSX_CLASSIC);
    for w in ["js", "ts", "jsx", "tsx"] {
        sink(&p, w, w);
    }
    for w in ["js", "ts", "jsx", "tsx"] {
        run_packaged(&p, w).stdout("").run();
    }
    assert_eq!(p.read("js"), "from js");
    assert_eq!(p.read("ts"), "from ts");
    assert_eq!(p.read("jsx"), r#"["i",null,[2]]"#);
    assert_eq!(p.read("tsx"), TSX_CLASSIC_RESULT);
}

#[test]
fn jsx_classic_transform_ignores_a_project_tsconfig_asking_for_react_jsx() {
    let p = Project::new();
    p.file(
        "tsconfig.json",
        r#"{ "compilerOptions": { "jsx": "react-jsx", "jsxFactory": "h" } }"#,
    );
    p.script("wf", "index.tsx", TSX_CLASSIC);
    sink(&p, "wf", "got");
    run_packaged(&p, "wf").run();
    assert_eq!(p.read("got"), TSX_CLASSIC_RESULT);
}

#[test]
fn input_is_the_piped_result_and_is_cached() {
    let p = Project::new();
    p.script(
        "wf",
        "index.sh",
        "$LOOPX_BIN output --result 'hello there' --goto check\n",
    );
    p.script(
        "wf",
        "check.ts",
        &to_sink("[await input(), await input(), String(input() === input())].join(\"|\")"),
    );
    sink(&p, "wf", "got");
    run_packaged(&p, "wf").run();
    assert_eq!(p.read("got"), "hello there|hello there|true");
}

#[test]
fn first_iteration_input_is_empty() {
    let p = Project::new();
    p.script("wf", "index.ts", &to_sink("`[${await input()}]`"));
    sink(&p, "wf", "got");
    run_packaged(&p, "wf").stdin(b"not for the script").run();
    assert_eq!(p.read("got"), "[]");
}

#[test]
fn goto_between_bash_and_ts_pipes_results_across_workflows() {
    let p = Project::new();
    p.script(
        "a",
        "index.sh",
        "$LOOPX_BIN output --result 'one' --goto 'b:step'\n",
    );
    p.script(
        "b",
        "step.ts",
        "import { output, input } from \"loopx\";\n\
         output({ result: (await input()) + \" two\", goto: \"next\" });\n",
    );
    p.script(
        "b",
        "next.js",
        "import { output, input } from \"loopx\";\n\
         output({ result: (await input()) + \" three\", goto: \"a:finish\" });\n",
    );
    p.script(
        "a",
        "finish.sh",
        "printf '%s four' \"$(cat)\" > \"$LOOPX_PROJECT_ROOT/got\"\n$LOOPX_BIN output --stop\n",
    );
    run_packaged(&p, "a").run();
    assert_eq!(p.read("got"), "one two three four");
}

#[test]
fn output_rules_of_section_6_4_hold_through_the_loop() {
    let p = Project::new();
    // A plain string becomes { result }; with no goto the loop returns to
    // the start, so -n 2 runs index twice and the second run stops.
    p.script(
        "wf",
        "index.ts",
        "import { output } from \"loopx\";\n\
         import { appendFileSync, existsSync } from \"node:fs\";\n\
         const log = process.env.LOOPX_PROJECT_ROOT + \"/log\";\n\
         const again = existsSync(log);\n\
         appendFileSync(log, \"run\\n\");\n\
         if (again) output({ stop: true, goto: \"never\" });\n\
         output(\"plain\");\n\
         appendFileSync(log, \"after output\\n\");\n",
    );
    p.loopx(&["run", "-n", "5", "wf"])
        .env("LOOPX_PACKAGE_DIR", npm_dir())
        .env("LOOPX_TSX", tsx_dir())
        .run();
    assert_eq!(p.read("log"), "run\nrun\n");
}

#[test]
fn output_with_no_known_field_throws_and_fails_the_loop() {
    let p = Project::new();
    p.script(
        "wf",
        "index.ts",
        "import { output } from \"loopx\";\noutput({});\n",
    );
    run_packaged(&p, "wf")
        .status(1)
        .stderr_contains("output() needs an object")
        .stderr_contains("script wf:index exited with code 1")
        .run();
}

#[test]
fn scripts_run_in_the_workflow_dir_with_loopx_variables_and_env_files() {
    let p = Project::new();
    p.file("local.env", "FROM_FILE=yes\n");
    p.script(
        "wf",
        "index.ts",
        &to_sink(
            "[process.cwd(), process.env.LOOPX_PROJECT_ROOT, process.env.LOOPX_WORKFLOW, \
             process.env.LOOPX_BIN, process.env.FROM_FILE].join(\"\\n\")",
        ),
    );
    sink(&p, "wf", "got");
    p.loopx(&["run", "-e", "local.env", "wf"])
        .env("LOOPX_PACKAGE_DIR", npm_dir())
        .env("LOOPX_TSX", tsx_dir())
        .run();
    let bin = fs::canonicalize(loopx_bin()).expect("realpath");
    assert_eq!(
        p.read("got"),
        format!(
            "{}\n{}\nwf\n{}\nyes",
            p.path(".loopx/wf").display(),
            p.root().display(),
            bin.display()
        )
    );
}

#[test]
fn the_variable_tsx_is_given_reaches_ts_scripts_only() {
    // loopx points tsx at its own tsconfig (classic JSX); the bash scripts
    // around a TS script see the user's own value, or none.
    let p = Project::new();
    let ts = "import { output } from \"loopx\";\n\
              output({ result: process.env.TSX_TSCONFIG_PATH ?? \"unset\", goto: \"NEXT\" });\n";
    let record = |file: &str, then: &str| {
        format!(
            "IFS= read -r -d '' ts\n\
             printf 'ts:%s bash:%s\\n' \"$ts\" \"${{TSX_TSCONFIG_PATH-unset}}\" >> \"$LOOPX_PROJECT_ROOT/{file}\"\n\
             $LOOPX_BIN output {then}\n"
        )
    };
    p.script("wf", "index.ts", &ts.replace("NEXT", "b"));
    p.script("wf", "b.sh", &record("got", "--goto c"));
    p.script("wf", "c.ts", &ts.replace("NEXT", "d"));
    p.script("wf", "d.sh", &record("got", "--stop"));
    let tsconfig = npm_dir().join("loader/tsconfig.json");
    let expect = |bash: &str| {
        format!(
            "ts:{0} bash:{bash}\nts:{0} bash:{bash}\n",
            tsconfig.display()
        )
    };

    run_packaged(&p, "wf").env_remove("TSX_TSCONFIG_PATH").run();
    assert_eq!(p.read("got"), expect("unset"));

    fs::remove_file(p.path("got")).expect("rm");
    run_packaged(&p, "wf")
        .env("TSX_TSCONFIG_PATH", "/user/tsconfig.json")
        .run();
    assert_eq!(p.read("got"), expect("/user/tsconfig.json"));
}

#[test]
fn script_stderr_passes_through_and_stdout_is_captured() {
    let p = Project::new();
    p.script(
        "wf",
        "index.ts",
        "import { output } from \"loopx\";\n\
         console.error(\"to the terminal\");\n\
         output({ stop: true });\n",
    );
    run_packaged(&p, "wf")
        .stdout("")
        .stderr("to the terminal\n")
        .run();
}

#[test]
fn commonjs_in_a_script_fails_at_execution() {
    let p = Project::new();
    p.script(
        "req",
        "index.js",
        "const fs = require(\"fs\");\nprocess.stdout.write('{\"stop\":true}');\n",
    );
    p.script(
        "exp",
        "index.ts",
        "module.exports = { a: 1 };\nprocess.stdout.write('{\"stop\":true}');\n",
    );
    run_packaged(&p, "req")
        .status(1)
        .stderr_contains("require is not defined")
        .stderr_contains("script req:index exited with code 1")
        .run();
    run_packaged(&p, "exp")
        .status(1)
        .stderr_contains("module is not defined")
        .stderr_contains("script exp:index exited with code 1")
        .run();
}

/// A workflow with a CommonJS dependency and a CommonJS helper in lib/,
/// under `"type": "commonjs"` and a `main` that loopx must ignore (§2.1).
fn commonjs_neighbours(p: &Project, entry: &str) {
    p.file(
        ".loopx/wf/package.json",
        r#"{ "type": "commonjs", "main": "elsewhere.js" }"#,
    );
    p.file(
        ".loopx/wf/node_modules/cjs-dep/package.json",
        r#"{ "name": "cjs-dep", "main": "main.js" }"#,
    );
    p.file(
        ".loopx/wf/node_modules/cjs-dep/main.js",
        "const path = require(\"path\");\nmodule.exports = { join: (...a) => path.posix.join(...a) };\n",
    );
    p.file(
        ".loopx/wf/lib/helper.js",
        "module.exports = { twice: (s) => s + s };\n",
    );
    p.script(
        "wf",
        "elsewhere.js",
        "import { output } from \"loopx\";\noutput({ result: \"main was used\", goto: \"sink\" });\n",
    );
    p.script(
        "wf",
        entry,
        "import { output } from \"loopx\";\n\
         import dep from \"cjs-dep\";\n\
         import helper from \"./lib/helper.js\";\n\
         output({ result: helper.twice(dep.join(\"a\", \"b\")), goto: \"sink\" });\n",
    );
    sink(p, "wf", "got");
}

#[test]
fn commonjs_dependencies_and_helpers_keep_working_and_main_is_ignored() {
    for entry in ["index.js", "index.ts"] {
        let p = Project::new();
        commonjs_neighbours(&p, entry);
        run_packaged(&p, "wf").run();
        assert_eq!(p.read("got"), "a/ba/b", "{entry}");
    }
}

const LOCAL_LOOPX: &str = "export function output(v) { \
    process.stdout.write(JSON.stringify({ result: \"local \" + v.result, goto: v.goto })); \
    process.exit(0); }\n";

fn workflow_with_own_loopx(p: &Project, entry: &str) {
    p.file(
        ".loopx/wf/node_modules/loopx/package.json",
        r#"{ "name": "loopx", "type": "module", "exports": "./main.js" }"#,
    );
    p.file(".loopx/wf/node_modules/loopx/main.js", LOCAL_LOOPX);
    p.script(
        "wf",
        entry,
        "import { output } from \"loopx\";\noutput({ result: \"x\", goto: \"sink\" });\n",
    );
    sink(p, "wf", "got");
}

#[test]
fn a_workflow_node_modules_loopx_takes_precedence() {
    for entry in ["index.js", "index.ts"] {
        let p = Project::new();
        workflow_with_own_loopx(&p, entry);
        run_packaged(&p, "wf").run();
        assert_eq!(p.read("got"), "local x", "{entry}");
    }
}

/// The command line a script was started with, as the script sees it.
const EXEC_ARGV: &str = "process.execArgv.join(\" \")";

#[test]
fn js_runs_on_plain_node_without_tsx_even_when_tsx_is_there() {
    let p = Project::new();
    p.script("wf", "index.js", &to_sink(EXEC_ARGV));
    p.script("wf", "t.ts", &to_sink(EXEC_ARGV));
    sink(&p, "wf", "got");
    run_packaged(&p, "wf").run();
    let argv = p.read("got");
    assert!(argv.contains("loader/register.mjs"), "{argv}");
    assert!(!argv.contains("tsx"), "{argv}");
    run_packaged(&p, "wf:t").run();
    let argv = p.read("got");
    // In-process tsx (never the tsx CLI): one preload, the loopx hooks,
    // told which tsx to load after them.
    let loader = format!(
        "file://{}/node_modules/tsx/dist/loader.mjs",
        npm_dir().display()
    );
    assert!(
        argv.starts_with("--import file://")
            && argv.ends_with(&format!("loader/register.mjs?tsx={loader}")),
        "{argv}"
    );
    assert_eq!(argv.matches("--import").count(), 1, "{argv}");
}

// ---- standalone binary: embedded helpers, tsx found elsewhere or not at all

#[test]
fn standalone_binary_with_only_node_runs_js_importing_loopx() {
    let p = Project::new();
    // A copy outside the build tree: nothing but the binary itself.
    let bin = p.home().join("opt/loopx");
    copy_loopx_to(&bin);
    p.script(
        "wf",
        "index.js",
        &to_sink("`js on ${process.release.name}`"),
    );
    sink(&p, "wf", "got");
    let path = bin_dir(&p, "node-only", &[("node", &node())]);
    p.loopx_at(&bin, &["run", "wf"]).env("PATH", path).run();
    assert_eq!(p.read("got"), "js on node");
    // The helpers were written to the per-version cache directory.
    let cache = p
        .home()
        .join(".cache/loopx")
        .join(env!("CARGO_PKG_VERSION"))
        .join("js");
    for f in ["index.js", "loader/register.mjs", "loader/hooks.mjs"] {
        assert!(cache.join(f).is_file(), "{f} in {}", cache.display());
    }
    assert_eq!(
        fs::read(cache.join("index.js")).expect("read"),
        fs::read(npm_dir().join("index.js")).expect("read")
    );
}

#[test]
fn standalone_helpers_go_to_xdg_cache_home_and_a_damaged_copy_is_rewritten() {
    let p = Project::new();
    let cache = p.home().join("xdg-cache");
    p.script("wf", "index.js", &to_sink("\"ok\""));
    sink(&p, "wf", "got");
    run_standalone(&p, "wf").env("XDG_CACHE_HOME", &cache).run();
    let helpers = cache
        .join("loopx")
        .join(env!("CARGO_PKG_VERSION"))
        .join("js/index.js");
    fs::write(
        &helpers,
        "export const output = () => { throw new Error(\"damaged\"); };\n",
    )
    .expect("damage");
    fs::remove_file(p.path("got")).expect("rm");
    run_standalone(&p, "wf").env("XDG_CACHE_HOME", &cache).run();
    assert_eq!(p.read("got"), "ok");
    assert_eq!(
        fs::read(&helpers).expect("read"),
        fs::read(npm_dir().join("index.js")).expect("read")
    );
}

#[test]
fn standalone_js_scripts_fail_clearly_when_the_cache_is_not_writable() {
    let p = Project::new();
    let cache = p.home().join("ro-cache");
    fs::create_dir_all(&cache).expect("mkdir");
    // A file where the directory must go: even root cannot write there.
    fs::write(cache.join("loopx"), "").expect("write");
    p.script("wf", "index.js", &to_sink("\"ok\""));
    run_standalone(&p, "wf")
        .env("XDG_CACHE_HOME", &cache)
        .status(1)
        .stderr_contains("cannot write loopx's script helpers to")
        .stderr_contains("XDG_CACHE_HOME")
        .run();
}

#[test]
fn standalone_ts_without_tsx_or_type_stripping_says_how_to_get_a_typescript_runtime() {
    let p = Project::new();
    p.script("wf", "index.ts", &to_sink("\"never\""));
    // A node that says it cannot strip types, whatever the real one can.
    let fake = p.home().join("fake/node");
    executable(
        &p,
        "../home/fake/node",
        &format!(
            "#!/bin/bash\nfor a in \"$@\"; do [ \"$a\" = -p ] && {{ echo undefined; exit 0; }}; done\nexec {} \"$@\"\n",
            node().display()
        ),
    );
    let path = fake.parent().expect("dir").to_path_buf();
    p.loopx(&["run", "wf"])
        .env("PATH", path)
        .status(1)
        .stdout("")
        .stderr_contains("cannot run wf:index: no TypeScript runtime found")
        .stderr_contains("npm install -g loopx")
        .stderr_contains("tsx")
        .stderr_contains("LOOPX_JS_RUNTIME=bun")
        .run();
    assert!(!p.exists("got"));
}

#[test]
fn ts_without_tsx_on_this_node_fails_with_the_same_message() {
    // The real node of this machine (Node 20 in CI: no type stripping).
    let p = Project::new();
    p.script("wf", "index.ts", &to_sink("(\"stripped\" as string)"));
    sink(&p, "wf", "got");
    if node_strips_types() {
        // A Node with built-in type stripping runs it instead (Node may
        // warn on stderr that the feature is experimental).
        run_standalone(&p, "wf")
            .stderr_any("Node may warn that type stripping is experimental")
            .run();
        assert_eq!(p.read("got"), "stripped");
    } else {
        run_standalone(&p, "wf")
            .status(1)
            .stderr_contains("no TypeScript runtime found")
            .stderr_contains("npm install -g loopx")
            .run();
    }
}

/// Whether the machine's node can strip types by itself (with or without
/// `--experimental-strip-types`), asked the way loopx asks it.
fn node_strips_types() -> bool {
    [&[][..], &["--experimental-strip-types"][..]]
        .iter()
        .any(|flag| {
            Command::new(node())
                .args(*flag)
                .args(["-p", "process.features.typescript"])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()
                .is_ok_and(|o| {
                    o.status.success()
                        && matches!(
                            String::from_utf8_lossy(&o.stdout).trim(),
                            "strip" | "transform"
                        )
                })
        })
}

#[test]
fn jsx_and_tsx_without_tsx_fail_clearly() {
    for entry in ["index.jsx", "index.tsx"] {
        let p = Project::new();
        p.script("wf", entry, JSX_CLASSIC);
        run_standalone(&p, "wf")
            .status(1)
            .stderr_contains("cannot run wf:index: JSX needs tsx or Bun")
            .stderr_contains("npm install -g loopx")
            .run();
    }
}

#[test]
fn ts_without_tsx_runs_on_node_built_in_type_stripping() {
    let p = Project::new();
    p.script(
        "wf",
        "index.sh",
        "$LOOPX_BIN output --result piped --goto t\n",
    );
    p.script(
        "wf",
        "t.ts",
        "import { output, input, type Output } from \"loopx\";\n\
         interface Seen { text: string }\n\
         const seen: Seen = { text: await input() };\n\
         const o: Output = { result: `${seen.text} ${process.execArgv.join(\" \")}`, goto: \"sink\" };\n\
         output(o);\n",
    );
    sink(&p, "wf", "got");
    let path = bin_dir(&p, "node22", &[("node", &node22())]);
    p.loopx(&["run", "wf"]).env("PATH", path).run();
    let got = p.read("got");
    assert!(got.starts_with("piped --import file://"), "{got}");
    assert!(got.ends_with("/loader/register.mjs"), "{got}");
}

#[test]
fn tsx_on_a_node_with_in_thread_hooks_keeps_every_rule() {
    // Node >= 22.15: register.mjs registers the loopx hooks in-thread, then
    // imports tsx itself (the other branch from Node 20's).
    let p = Project::new();
    p.file(
        ".loopx/wf/lib/helper.cts",
        "const twice = (s: string): string => s + s;\nmodule.exports = { twice };\n",
    );
    p.script(
        "wf",
        "index.ts",
        "import { createRequire } from \"node:module\";\n\
         import { output } from \"loopx\";\n\
         const load = createRequire(import.meta.url);\n\
         const r: string = `${load(\"./lib/helper.cts\").twice(\"ab\")} ${typeof module} ${process.version}`;\n\
         output({ result: r, goto: \"sink\" });\n",
    );
    p.script("wf", "cjs.ts", "module.exports = { a: 1 };\n");
    p.script("wf", "jsx.tsx", TSX_CLASSIC);
    sink(&p, "wf", "got");
    let path = bin_dir(&p, "node22", &[("node", &node22())]);
    run_packaged(&p, "wf").env("PATH", &path).run();
    let got = p.read("got");
    assert!(got.starts_with("abab undefined v22."), "{got}");
    run_packaged(&p, "wf:jsx").env("PATH", &path).run();
    assert_eq!(p.read("got"), TSX_CLASSIC_RESULT);
    run_packaged(&p, "wf:cjs")
        .env("PATH", &path)
        .status(1)
        .stderr_contains("module is not defined")
        .run();
}

#[test]
fn commonjs_in_a_ts_script_fails_under_type_stripping() {
    let p = Project::new();
    p.script(
        "wf",
        "index.ts",
        "const fs: unknown = require(\"fs\");\nprocess.stdout.write('{\"stop\":true}');\n",
    );
    let path = bin_dir(&p, "node22", &[("node", &node22())]);
    p.loopx(&["run", "wf"])
        .env("PATH", path)
        .status(1)
        .stderr_contains("require is not defined")
        .stderr_contains("script wf:index exited with code 1")
        .run();
}

/// A fake node that answers the type-stripping probe as a Node with it
/// would, logs every other start, and prints an output for the script.
fn stripping_node(p: &Project, needs_flag: bool) -> PathBuf {
    let probe = if needs_flag {
        "[ \"$1\" = --experimental-strip-types ] && [ \"$2\" = -p ] && { echo strip; exit 0; }\n\
         [ \"$1\" = -p ] && { echo undefined; exit 0; }\n"
    } else {
        "[ \"$1\" = -p ] && { echo strip; exit 0; }\n"
    };
    executable(
        p,
        "../home/strip/node",
        &format!(
            "#!/bin/bash\necho probe >> \"$HOME/probes\"\n{probe}\
             echo \"$*\" >> \"$LOOPX_PROJECT_ROOT/starts\"\n\
             printf '{{\"result\":\"stripped\",\"goto\":\"sink\"}}'\n"
        ),
    );
    p.home().join("strip")
}

#[test]
fn ts_without_tsx_runs_on_node_type_stripping_probed_once_per_run() {
    for needs_flag in [false, true] {
        let p = Project::new();
        p.script("wf", "index.ts", "// types here\n");
        p.script(
            "wf",
            "sink.sh",
            "IFS= read -r -d '' data\necho \"$data\" >> \"$LOOPX_PROJECT_ROOT/got\"\n",
        );
        let path = stripping_node(&p, needs_flag);
        p.loopx(&["run", "-n", "4", "wf"]).env("PATH", path).run();
        assert_eq!(p.read("got"), "stripped\nstripped\n");
        let starts = p.read("starts");
        let lines: Vec<&str> = starts.lines().collect();
        assert_eq!(lines.len(), 2, "{starts}");
        let script = p.path(".loopx/wf/index.ts");
        let flag = if needs_flag {
            "--experimental-strip-types "
        } else {
            ""
        };
        for line in lines {
            assert!(
                line.starts_with(&format!("{flag}--import file://")),
                "{line}"
            );
            assert!(line.contains("/loader/register.mjs "), "{line}");
            assert!(line.ends_with(&format!(" {}", script.display())), "{line}");
            assert!(!line.contains("tsx"), "{line}");
        }
        // Probed at most twice (without, then with the flag), once per run,
        // not once per iteration.
        let probes = fs::read_to_string(p.home().join("probes")).expect("probes");
        let expected_probes = if needs_flag { 2 } else { 1 };
        assert_eq!(probes.lines().count(), 2 + expected_probes, "{probes}");
    }
}

#[test]
fn tsx_is_found_in_the_project_node_modules() {
    let p = Project::new();
    p.symlink(&tsx_dir().display().to_string(), "node_modules/tsx");
    p.script("wf", "index.ts", &to_sink(EXEC_ARGV));
    sink(&p, "wf", "got");
    run_standalone(&p, "wf").run();
    let argv = p.read("got");
    let expected = format!("{}/node_modules/tsx/dist/loader.mjs", p.root().display());
    assert!(argv.contains(&expected), "{argv}");
}

#[test]
fn tsx_is_found_in_the_workflow_node_modules_before_the_project() {
    let p = Project::new();
    p.symlink(&tsx_dir().display().to_string(), "node_modules/tsx");
    p.symlink(
        &tsx_dir().display().to_string(),
        ".loopx/wf/node_modules/tsx",
    );
    p.script("wf", "index.tsx", &to_sink(EXEC_ARGV));
    sink(&p, "wf", "got");
    run_standalone(&p, "wf").run();
    let argv = p.read("got");
    let expected = format!(
        "{}/.loopx/wf/node_modules/tsx/dist/loader.mjs",
        p.root().display()
    );
    assert!(argv.contains(&expected), "{argv}");
}

#[test]
fn tsx_is_found_on_path() {
    let p = Project::new();
    let cli = tsx_dir().join("dist/cli.mjs");
    let path = bin_dir(&p, "with-tsx", &[("node", &node()), ("tsx", &cli)]);
    p.script("wf", "index.ts", &to_sink(EXEC_ARGV));
    sink(&p, "wf", "got");
    p.loopx(&["run", "wf"]).env("PATH", path).run();
    let argv = p.read("got");
    let real = fs::canonicalize(tsx_dir()).expect("realpath");
    assert!(
        argv.contains(&format!("{}/dist/loader.mjs", real.display())),
        "{argv}"
    );
}

#[test]
fn the_package_tsx_wins_over_the_project_one() {
    let p = Project::new();
    // A broken tsx in the project: using it would fail the script.
    broken_project_tsx(&p);
    p.script("wf", "index.ts", &to_sink("(\"ok\" as string)"));
    sink(&p, "wf", "got");
    run_packaged(&p, "wf").run();
    assert_eq!(p.read("got"), "ok");
}

#[test]
fn no_node_on_path_is_a_clear_error() {
    let p = Project::new();
    p.script("wf", "index.js", &to_sink("\"never\""));
    let empty = bin_dir(&p, "empty", &[]);
    run_packaged(&p, "wf")
        .env("PATH", empty)
        .status(1)
        .stderr_contains("cannot run wf:index: no `node` found on PATH")
        .stderr_contains("LOOPX_JS_RUNTIME=bun")
        .run();
}

#[test]
fn bash_scripts_need_no_js_runtime() {
    let p = Project::new();
    p.script("wf", "index.sh", "$LOOPX_BIN output --stop\n");
    let empty = bin_dir(&p, "empty", &[]);
    p.loopx(&["run", "wf"])
        .env("PATH", empty)
        .env("LOOPX_JS_RUNTIME", "nonsense")
        .run();
}

#[test]
fn n_zero_resolves_a_js_target_without_looking_for_a_runtime() {
    let p = Project::new();
    p.script("wf", "index.tsx", "");
    let empty = bin_dir(&p, "empty", &[]);
    p.loopx(&["run", "-n", "0", "wf"])
        .env("PATH", empty)
        .env("LOOPX_JS_RUNTIME", "nonsense")
        .run();
    assert!(!p.home().join(".cache").exists(), "no helpers written");
}

#[test]
fn a_js_script_reached_by_goto_runs_after_bash() {
    let p = Project::new();
    p.script("w", "index.sh", "$LOOPX_BIN output --goto tool\n");
    p.script("w", "tool.js", &to_sink("`tool [${await input()}]`"));
    sink(&p, "w", "got");
    run_standalone(&p, "w").run();
    assert_eq!(p.read("got"), "tool []");
}

#[test]
fn an_unknown_loopx_js_runtime_is_an_error() {
    let p = Project::new();
    p.script("wf", "index.js", &to_sink("\"never\""));
    run_packaged(&p, "wf")
        .env("LOOPX_JS_RUNTIME", "deno")
        .status(1)
        .stderr_contains("LOOPX_JS_RUNTIME is 'deno'; it must be 'node', 'bun' or empty")
        .run();
}

#[test]
fn loopx_js_runtime_node_keeps_node() {
    let p = Project::new();
    p.script(
        "wf",
        "index.ts",
        &to_sink("process.versions.bun ?? \"node\""),
    );
    sink(&p, "wf", "got");
    run_packaged(&p, "wf").env("LOOPX_JS_RUNTIME", "node").run();
    assert_eq!(p.read("got"), "node");
}

// ---- Bun -------------------------------------------------------------------

#[test]
fn bun_runs_every_extension_and_imports_loopx() {
    let p = Project::new();
    p.script("js", "index.js", &to_sink("`js ${typeof Bun}`"));
    p.script("ts", "index.ts", &to_sink("`ts ${typeof Bun as string}`"));
    p.script("jsx", "index.jsx", JSX_CLASSIC);
    p.script("tsx", "index.tsx", TSX_CLASSIC);
    for w in ["js", "ts", "jsx", "tsx"] {
        sink(&p, w, w);
        run_bun(&p, w).run();
    }
    assert_eq!(p.read("js"), "js object");
    assert_eq!(p.read("ts"), "ts object");
    assert_eq!(p.read("jsx"), r#"["i",null,[2]]"#);
    assert_eq!(p.read("tsx"), TSX_CLASSIC_RESULT);
}

#[test]
fn bun_pipes_input_and_goes_to_bash() {
    let p = Project::new();
    p.script(
        "wf",
        "index.sh",
        "$LOOPX_BIN output --result piped --goto t\n",
    );
    p.script(
        "wf",
        "t.ts",
        &to_sink("`${await input()}|${await input()}|${process.cwd()}`"),
    );
    sink(&p, "wf", "got");
    run_bun(&p, "wf").run();
    assert_eq!(
        p.read("got"),
        format!("piped|piped|{}", p.path(".loopx/wf").display())
    );
}

#[test]
fn bun_found_on_path_when_asked_for_by_name() {
    let p = Project::new();
    p.script("wf", "index.ts", &to_sink("typeof Bun"));
    sink(&p, "wf", "got");
    let path = bin_dir(&p, "bun-only", &[("bun", &bun())]);
    // Standalone: the embedded helpers, Bun from PATH.
    p.loopx(&["run", "wf"])
        .env("PATH", path)
        .env("LOOPX_JS_RUNTIME", "bun")
        .run();
    assert_eq!(p.read("got"), "object");
}

#[test]
fn bun_runs_scripts_when_there_is_no_node() {
    let p = Project::new();
    p.script("wf", "index.ts", &to_sink("typeof Bun"));
    sink(&p, "wf", "got");
    let path = bin_dir(&p, "bun-only", &[("bun", &bun())]);
    p.loopx(&["run", "wf"]).env("PATH", path).run();
    assert_eq!(p.read("got"), "object");
}

#[test]
fn bun_asked_for_but_missing_is_a_clear_error() {
    let p = Project::new();
    p.script("wf", "index.ts", &to_sink("\"never\""));
    let path = bin_dir(&p, "node-only", &[("node", &node())]);
    p.loopx(&["run", "wf"])
        .env("PATH", path)
        .env("LOOPX_JS_RUNTIME", "bun")
        .status(1)
        .stderr_contains("LOOPX_JS_RUNTIME is 'bun' but no `bun` found on PATH")
        .run();
}

#[test]
fn bun_commonjs_in_a_script_fails_but_dependencies_work() {
    let p = Project::new();
    p.script(
        "exp",
        "index.ts",
        "module.exports = { a: 1 };\nprocess.stdout.write('{\"stop\":true}');\n",
    );
    run_bun(&p, "exp")
        .status(1)
        .stderr_contains("module is not defined")
        .run();
    // Bun allows require() in ES modules; a loopx script still may not.
    p.script(
        "req",
        "index.js",
        "const fs = require(\"fs\");\nprocess.stdout.write('{\"stop\":true}');\n",
    );
    run_bun(&p, "req")
        .status(1)
        .stderr_contains("require is not defined in ES module scope")
        .stderr_contains("script req:index exited with code 1")
        .run();
    // A require of the script's own making is ESM and keeps working.
    p.script(
        "own",
        "index.ts",
        "import { createRequire } from \"node:module\";\n\
         const require = createRequire(import.meta.url);\n\
         const fs = require(\"fs\");\n\
         process.stdout.write(JSON.stringify({ result: typeof fs.readFileSync, stop: true }));\n",
    );
    run_bun(&p, "own").run();
    let q = Project::new();
    commonjs_neighbours(&q, "index.js");
    run_bun(&q, "wf").run();
    assert_eq!(q.read("got"), "a/ba/b");
}

#[test]
fn bun_workflow_node_modules_loopx_takes_precedence() {
    let p = Project::new();
    workflow_with_own_loopx(&p, "index.ts");
    run_bun(&p, "wf").run();
    assert_eq!(p.read("got"), "local x");
}

#[test]
fn after_delegation_import_loopx_resolves_to_the_local_versions_helpers() {
    let p = Project::new();
    p.file(
        "package.json",
        r#"{"devDependencies": {"loopx": "^0.1.0"}}"#,
    );
    // The local "package" is a bare binary here: it carries its helpers.
    let native = p.path("node_modules/loopx/native/loopx");
    copy_loopx_to(&native);
    p.symlink("../loopx/native/loopx", "node_modules/.bin/loopx");
    p.script("wf", "index.js", &to_sink(EXEC_ARGV));
    sink(&p, "wf", "got");
    // The global loopx was started by its npm shim.
    run_packaged(&p, "wf").run();
    let argv = p.read("got");
    let cache = p
        .home()
        .join(".cache/loopx")
        .join(env!("CARGO_PKG_VERSION"))
        .join("js/loader/register.mjs");
    assert!(
        argv.contains(&format!("file://{}", cache.display())),
        "{argv}"
    );
}

#[test]
fn an_unusable_loopx_tsx_falls_back_to_the_workflow_tsx_before_the_project_one() {
    let p = Project::new();
    broken_project_tsx(&p);
    p.symlink(
        &tsx_dir().display().to_string(),
        ".loopx/wf/node_modules/tsx",
    );
    p.script("wf", "index.ts", &to_sink(EXEC_ARGV));
    sink(&p, "wf", "got");
    run_standalone(&p, "wf")
        .env("LOOPX_TSX", p.home().join("no-such-tsx"))
        .run();
    let argv = p.read("got");
    assert!(
        argv.contains(".loopx/wf/node_modules/tsx/dist/loader.mjs"),
        "{argv}"
    );
}

// ---- TypeScript through the transpile cache (issue 26) --------------------
//
// On Node >= 22.15 (LOOPX_TEST_NODE22), with the package's tsx: TypeScript
// is served transpiled from ${XDG_CACHE_HOME:-~/.cache}/loopx/ts (loader/register.mjs).

/// `loopx run <args>` as the npm package starts it, on Node 22.
fn run_packaged_node22(p: &Project, args: &[&str]) -> Run {
    run_packaged_on(p, &node22(), args)
}

/// Node 22 and, where there is one (LOOPX_TEST_NODE24, else where
/// scripts/test.sh installs it), Node 24.
fn current_nodes() -> Vec<PathBuf> {
    let node24 = std::env::var_os("LOOPX_TEST_NODE24")
        .map(PathBuf::from)
        .unwrap_or_else(|| ci_cache().join("node24/node_modules/.bin/node"));
    let mut nodes = vec![node22()];
    if node24.is_file() {
        nodes.push(node24);
    }
    nodes
}

fn run_packaged_on(p: &Project, node: &Path, args: &[&str]) -> Run {
    let path = bin_dir(p, "current-node", &[("node", node)]);
    p.loopx(args)
        .env("LOOPX_PACKAGE_DIR", npm_dir())
        .env("LOOPX_TSX", tsx_dir())
        .env("PATH", path)
}

fn ts_cache(p: &Project) -> PathBuf {
    p.home().join(".cache/loopx/ts")
}

/// The cache's entries (not its temp files or stamp), sorted.
fn cache_entries(p: &Project) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = fs::read_dir(ts_cache(p))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.retain(|e| e.extension().is_some_and(|x| x == "js"));
    entries.sort();
    entries
}

fn cache_leftovers(p: &Project) -> Vec<String> {
    fs::read_dir(ts_cache(p))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}

fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).expect("stat").ino()
}

const CACHED_TS: &str = "import { output, input } from \"loopx\";\n\
    import { twice } from \"./lib/util.js\";\n\
    import { three } from \"./lib/three\";\n\
    const seen: string = await input();\n\
    output({ result: `${twice(\"ab\")} ${three} [${seen}] ${import.meta.url.endsWith(\"/index.ts\")}`, goto: \"sink\" });\n";

fn cached_ts_project() -> Project {
    let p = Project::new();
    p.script("wf", "index.ts", CACHED_TS);
    // tsx's rules: `./lib/util.js` is util.ts, `./lib/three` is three.ts.
    p.file(
        ".loopx/wf/lib/util.ts",
        "export const twice = (s: string): string => s + s;\n",
    );
    p.file(
        ".loopx/wf/lib/three.ts",
        "export const three: number = 3;\n",
    );
    sink(&p, "wf", "got");
    p
}

#[test]
fn ts_is_transpiled_once_and_reused_while_unchanged_then_redone() {
    for node in current_nodes() {
        transpiled_once_and_reused(&node);
    }
}

fn transpiled_once_and_reused(node: &Path) {
    let run_packaged_node22 = |p: &Project, args: &[&str]| run_packaged_on(p, node, args);
    let p = cached_ts_project();
    run_packaged_node22(&p, &["run", "wf"]).stdout("").run();
    assert_eq!(p.read("got"), "abab 3 [] true");
    // The entry and both local imports.
    let first = cache_entries(&p);
    assert_eq!(first.len(), 3, "{first:?}");
    let inodes: Vec<u64> = first.iter().map(|e| inode(e)).collect();

    run_packaged_node22(&p, &["run", "wf"]).stdout("").run();
    assert_eq!(p.read("got"), "abab 3 [] true");
    assert_eq!(cache_entries(&p), first, "reused, nothing added");
    let again: Vec<u64> = first.iter().map(|e| inode(e)).collect();
    assert_eq!(again, inodes, "not rewritten");

    // A changed script gets an entry of its own; the old ones stay (until
    // pruned by age).
    p.script(
        "wf",
        "index.ts",
        &CACHED_TS
            .replace("abab", "x")
            .replace("twice(\"ab\")", "twice(\"cd\")"),
    );
    run_packaged_node22(&p, &["run", "wf"]).stdout("").run();
    assert_eq!(p.read("got"), "cdcd 3 [] true");
    assert_eq!(cache_entries(&p).len(), 4);
    assert!(cache_leftovers(&p).is_empty());
}

#[test]
fn a_corrupt_cache_entry_is_replaced() {
    let p = cached_ts_project();
    run_packaged_node22(&p, &["run", "wf"]).stdout("").run();
    let entries = cache_entries(&p);
    let good: Vec<Vec<u8>> = entries.iter().map(|e| fs::read(e).expect("read")).collect();
    // Truncated, garbage, and a valid-looking text with a wrong check line.
    fs::write(&entries[0], &good[0][..good[0].len() / 2]).expect("truncate");
    fs::write(&entries[1], "process.exit(3);\n").expect("garbage");
    let mut tampered = good[2].clone();
    tampered.splice(0..0, b"process.exit(4);".iter().copied());
    fs::write(&entries[2], tampered).expect("tamper");
    run_packaged_node22(&p, &["run", "wf"]).stdout("").run();
    assert_eq!(p.read("got"), "abab 3 [] true");
    let now: Vec<Vec<u8>> = entries.iter().map(|e| fs::read(e).expect("read")).collect();
    assert_eq!(now, good, "every entry written again");
}

#[test]
fn cache_entries_of_another_user_are_ignored_and_transpiled_again() {
    // With XDG_CACHE_HOME on shared storage, an entry planted by another
    // user must not replace a script's code: here every entry holds
    // another entry's valid text (its check line matches), owned by nobody.
    if !is_root() {
        return skip(
            "cache_entries_of_another_user_are_ignored_and_transpiled_again",
            "needs root to give files to another user",
        );
    }
    let p = cached_ts_project();
    run_packaged_node22(&p, &["run", "wf"]).stdout("").run();
    let entries = cache_entries(&p);
    let good: Vec<Vec<u8>> = entries.iter().map(|e| fs::read(e).expect("read")).collect();
    for (i, e) in entries.iter().enumerate() {
        fs::write(e, &good[(i + 1) % good.len()]).expect("plant");
        std::os::unix::fs::chown(e, Some(65534), Some(65534)).expect("chown");
    }
    fs::remove_file(p.path("got")).expect("rm");
    run_packaged_node22(&p, &["run", "wf"]).stdout("").run();
    assert_eq!(p.read("got"), "abab 3 [] true");
    // A cache directory of another user's: not used at all.
    let ts = ts_cache(&p);
    fs::remove_dir_all(&ts).expect("rm cache");
    fs::create_dir_all(&ts).expect("mkdir");
    std::os::unix::fs::chown(&ts, Some(65534), Some(65534)).expect("chown");
    run_packaged_node22(&p, &["run", "wf"]).stdout("").run();
    assert_eq!(p.read("got"), "abab 3 [] true");
    assert_eq!(
        cache_entries(&p),
        Vec::<PathBuf>::new(),
        "nothing written there"
    );
}

#[test]
fn standalone_helpers_in_a_directory_of_another_user_are_refused() {
    if !is_root() {
        return skip(
            "standalone_helpers_in_a_directory_of_another_user_are_refused",
            "needs root to give a directory to another user",
        );
    }
    let p = Project::new();
    let cache = p.home().join("xdg-cache");
    p.script("wf", "index.js", &to_sink("\"ok\""));
    sink(&p, "wf", "got");
    run_standalone(&p, "wf").env("XDG_CACHE_HOME", &cache).run();
    let version = cache.join("loopx").join(env!("CARGO_PKG_VERSION"));
    std::os::unix::fs::chown(&version, Some(65534), Some(65534)).expect("chown");
    run_standalone(&p, "wf")
        .env("XDG_CACHE_HOME", &cache)
        .status(1)
        .stderr_contains("cannot write loopx's script helpers to")
        .stderr_contains("belongs to uid 65534")
        .run();
}

#[test]
fn an_unwritable_or_missing_cache_works_from_memory_silently() {
    let p = cached_ts_project();
    // A cache directory that cannot be made by anyone (root included): its
    // parent is a file.
    p.file("not-a-dir", "");
    run_packaged_node22(&p, &["run", "wf"])
        .env("XDG_CACHE_HOME", p.path("not-a-dir/cache"))
        .stdout("")
        .run();
    assert_eq!(p.read("got"), "abab 3 [] true");
    // A read-only one (without root: root writes anyway).
    if !is_root() {
        let ro = p.path("ro-cache");
        fs::create_dir_all(ro.join("loopx/ts")).expect("mkdir");
        tool_chmod("a-w", &ro.join("loopx/ts"));
        run_packaged_node22(&p, &["run", "wf"])
            .env("XDG_CACHE_HOME", &ro)
            .stdout("")
            .run();
        assert_eq!(p.read("got"), "abab 3 [] true");
        tool_chmod("u+w", &ro.join("loopx/ts"));
    }
    // No HOME and no XDG_CACHE_HOME: no cache at all.
    run_packaged_node22(&p, &["run", "wf"])
        .env("HOME", "")
        .stdout("")
        .run();
    assert_eq!(p.read("got"), "abab 3 [] true");
}

fn tool_chmod(mode: &str, path: &Path) {
    let status = Command::new("chmod")
        .arg(mode)
        .arg(path)
        .status()
        .expect("chmod");
    assert!(status.success());
}

#[test]
fn two_loops_share_the_cache_concurrently() {
    let p = cached_ts_project();
    // Each loop runs the script 10 times: index.ts goes to a script that
    // counts, not to the sink, so the loops end by -n.
    p.script(
        "wf",
        "index.ts",
        &CACHED_TS.replace("goto: \"sink\"", "goto: \"count\""),
    );
    p.script("wf", "count.sh", ":\n");
    let a = run_packaged_node22(&p, &["run", "-n", "20", "wf"]).start();
    let b = run_packaged_node22(&p, &["run", "-n", "20", "wf"]).start();
    a.finish();
    b.finish();
    assert_eq!(cache_entries(&p).len(), 3);
    assert!(cache_leftovers(&p).is_empty(), "{:?}", cache_leftovers(&p));
}

#[test]
fn ts_beyond_stripping_enums_namespaces_type_imports_tsx_and_jsx_still_run() {
    for node in current_nodes() {
        beyond_stripping(&node);
    }
}

fn beyond_stripping(node: &Path) {
    let run_packaged_node22 = |p: &Project, args: &[&str]| run_packaged_on(p, node, args);
    let p = Project::new();
    // An enum, a namespace, a parameter property and a type imported
    // without `type`: more than stripping can do, so tsx's esbuild does it.
    p.script(
        "wf",
        "index.ts",
        "import { output, Output } from \"loopx\";\n\
         import data from \"./data.json\";\n\
         enum Color { Red = \"red\", Blue = \"blue\" }\n\
         namespace Shapes { export const sides = 4; }\n\
         class Box { constructor(public size: number) {} }\n\
         const o: Output = { result: `${Color.Blue} ${Shapes.sides} ${new Box(2).size} ${data.n}`, goto: \"sink\" };\n\
         output(o);\n",
    );
    // tsx's rules: JSON imported without `with { type: "json" }`.
    p.file(".loopx/wf/data.json", "{ \"n\": 7 }\n");
    p.script("wf", "jsx.jsx", JSX_CLASSIC);
    p.script("wf", "tsx.tsx", TSX_CLASSIC);
    sink(&p, "wf", "got");
    for _ in 0..2 {
        run_packaged_node22(&p, &["run", "wf"]).stdout("").run();
        assert_eq!(p.read("got"), "blue 4 2 7");
        run_packaged_node22(&p, &["run", "wf:jsx"]).stdout("").run();
        assert_eq!(p.read("got"), r#"["i",null,[2]]"#);
        run_packaged_node22(&p, &["run", "wf:tsx"]).stdout("").run();
        assert_eq!(p.read("got"), TSX_CLASSIC_RESULT);
    }
    assert_eq!(cache_entries(&p).len(), 3);
    // An error in transpiled code points at the TypeScript source's line.
    p.script(
        "wf",
        "fail.ts",
        "enum E { A }\n\n\nthrow new Error(`boom ${E.A}`);\n",
    );
    run_packaged_node22(&p, &["run", "wf:fail"])
        .status(1)
        .stderr_contains("boom 0")
        .stderr_contains("fail.ts:4")
        .run();
}
