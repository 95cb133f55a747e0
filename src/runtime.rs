//! Which program runs a script, and how (§6.2, §6.3, §3.3; DESIGN.md "JS/TS
//! runtime").
//!
//! Bash scripts run as `/bin/bash <script>` (where there is no `/bin/bash`,
//! with the first `bash` on PATH). For JS/TS scripts the runtime is
//! chosen once per run, lazily, when the loop first reaches such a script:
//!
//! 1. Bun when `LOOPX_JS_RUNTIME=bun` (the npm shim sets it when it runs
//!    under Bun; users may set it too): `bun --no-install --preload
//!    <bun-preload.js> --jsx-runtime=classic ... <script>`. The preload
//!    plugin makes `import "loopx"` resolve (NODE_PATH does not reach ESM
//!    bare imports in Bun).
//! 2. Otherwise Node (`LOOPX_JS_RUNTIME` unset, empty or `node`). `.js` runs
//!    on plain node with only the loopx hooks preloaded; `.ts`, `.jsx` and
//!    `.tsx` load tsx in the same process (`node --import <loopx
//!    register>?tsx=<tsx loader> <script>`: register.mjs loads tsx after
//!    the loopx hooks; never the two-process tsx CLI). tsx is the
//!    npm package's own (`LOOPX_TSX`), else the workflow's or the project's
//!    `node_modules/tsx`, else one on PATH. Without tsx, `.ts` runs on Node's
//!    built-in type stripping where the Node version has it; anything else
//!    is an error that says how to get a TypeScript runtime.
//!    With no `node` on PATH but a `bun`, Bun runs the scripts (unless
//!    `LOOPX_JS_RUNTIME=node` insists on Node).
//!
//! The helper files (`import "loopx"`, the hooks) come from the npm package
//! (`LOOPX_PACKAGE_DIR`, set by its shim; else the package this binary
//! itself is in, where npm's install script put it behind the package's
//! bin entry) or, for a standalone binary, from the copies embedded in it
//! (js_assets.rs).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::rc::Rc;

use crate::discovery::{Kind, Script, Workflow};
use crate::error::Error;
use crate::js_assets;
use crate::json::{self, Value};
use crate::path_search::{is_executable, which};

/// A program, its arguments and the variables it needs beyond the loop's.
pub struct Program {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
}

/// What the process environment says about JS/TS runtimes; read once.
#[derive(Default, Clone)]
pub struct Settings {
    /// `LOOPX_JS_RUNTIME`.
    pub runtime: Option<OsString>,
    /// `LOOPX_PACKAGE_DIR`: the npm package's root.
    pub package_dir: Option<PathBuf>,
    /// `LOOPX_TSX`: the npm package's tsx directory.
    pub tsx: Option<PathBuf>,
    /// `LOOPX_BUN`: the Bun executable the npm shim runs under.
    pub bun: Option<PathBuf>,
    /// The PATH scripts see (env files may set it, §8.3).
    pub path: Option<OsString>,
    pub xdg_cache_home: Option<PathBuf>,
    pub home: Option<PathBuf>,
}

impl Settings {
    /// Without a shim to say where the npm package is (`LOOPX_PACKAGE_DIR`
    /// unset): the package this binary is in, if it is in one, with the
    /// tsx Node would resolve from there (own_package(), tsx_near()).
    fn adopt_own_package(&mut self) {
        if self.package_dir.is_some() {
            return;
        }
        if let Some(pkg) = crate::self_exe::locate()
            .ok()
            .as_deref()
            .and_then(own_package)
        {
            self.tsx = tsx_near(&pkg).or(self.tsx.take());
            self.package_dir = Some(pkg);
        }
    }

    /// From this process's environment, with `vars` (the env files, §8.3)
    /// deciding PATH as they do for the scripts.
    pub fn from_env(vars: &[(OsString, OsString)]) -> Settings {
        let get = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let path = vars
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var_os("PATH"));
        Settings {
            runtime: std::env::var_os("LOOPX_JS_RUNTIME"),
            package_dir: get("LOOPX_PACKAGE_DIR").map(PathBuf::from),
            tsx: get("LOOPX_TSX").map(PathBuf::from),
            bun: get("LOOPX_BUN").map(PathBuf::from),
            path,
            xdg_cache_home: get("XDG_CACHE_HOME").map(PathBuf::from),
            home: crate::env::home_dir(),
        }
    }
}

/// The user's choice through `LOOPX_JS_RUNTIME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Auto,
    Node,
    Bun,
}

pub fn parse_choice(value: Option<&OsStr>) -> Result<Choice, Error> {
    match value.map(|v| v.to_str()) {
        None | Some(Some("")) => Ok(Choice::Auto),
        Some(Some("node")) => Ok(Choice::Node),
        Some(Some("bun")) => Ok(Choice::Bun),
        Some(_) => Err(Error::BadJsRuntime {
            value: value.unwrap_or_default().to_string_lossy().into_owned(),
        }),
    }
}

/// The four script extensions of §2.1 that are not bash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Js,
    Jsx,
    Ts,
    Tsx,
}

impl Lang {
    pub fn of(path: &Path) -> Lang {
        match path.extension().and_then(OsStr::to_str) {
            Some("jsx") => Lang::Jsx,
            Some("ts") => Lang::Ts,
            Some("tsx") => Lang::Tsx,
            _ => Lang::Js,
        }
    }
}

/// Node's built-in TypeScript support, as probed once per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strip {
    /// On by default (Node >= 22.18 / 23.6).
    Builtin,
    /// Needs `--experimental-strip-types` (Node 22.6–22.17).
    Flag,
    None,
}

/// How a Node-run script is started, decided from its language and what is
/// available. Pure: the facts are looked up (lazily) by the caller.
#[derive(Debug, PartialEq, Eq)]
pub enum NodePlan {
    Plain,
    Tsx,
    Strip(Strip),
    NoTypeScript,
}

/// §6.3 and DESIGN.md: `.js` always on plain node (a third of the cost of
/// tsx); the rest through tsx in-process when there is one; `.ts` on Node's
/// type stripping otherwise. JSX needs a transform that only tsx has here.
pub fn node_plan(lang: Lang, have_tsx: bool, strip: impl FnOnce() -> Strip) -> NodePlan {
    match (lang, have_tsx) {
        (Lang::Js, _) => NodePlan::Plain,
        (_, true) => NodePlan::Tsx,
        (Lang::Ts, false) => match strip() {
            Strip::None => NodePlan::NoTypeScript,
            s => NodePlan::Strip(s),
        },
        (Lang::Jsx | Lang::Tsx, false) => NodePlan::NoTypeScript,
    }
}

/// A `file://` URL for an absolute path, for `--import`: a bare path would
/// be read as a URL, where `%`, `#` and `?` mean something else.
pub fn file_url(path: &Path) -> OsString {
    use std::os::unix::ffi::OsStrExt;
    let mut url = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            url.push(b as char);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url.into()
}

/// `register.mjs?tsx=<tsx loader URL>`: register.mjs loads that tsx after
/// the loopx hooks, in place of a second `--import <tsx>`, which on Node's
/// hooks thread would cost ~25 ms per script (loader/register.mjs says why).
/// file_url() leaves only unreserved characters, `/`, `:` and `%XX` escapes,
/// so escaping `%` once more makes the URL a query value read back intact.
fn register_with_tsx(register: &OsStr, tsx_loader: &OsStr) -> OsString {
    let mut arg = register.to_os_string();
    arg.push("?tsx=");
    arg.push(tsx_loader.to_string_lossy().replace('%', "%25"));
    arg
}

/// The bash that runs `.sh` scripts: `/bin/bash` as §6.2 says, else the
/// first `bash` on `path`, for hosts that have no `/bin/bash` (NixOS, Guix,
/// Alpine without the bash package).
pub fn find_bash(path: Option<&OsStr>) -> Option<PathBuf> {
    let standard = Path::new("/bin/bash");
    if is_executable(standard) {
        return Some(standard.to_path_buf());
    }
    which("bash", path)
}

/// The ESM loader of a tsx package directory: what `import "tsx"` resolves
/// to (`exports["."]`), which registers both its ESM and CommonJS hooks, so
/// a CommonJS `.ts` helper in a workflow still loads. None when `dir` holds
/// no usable tsx.
pub fn tsx_loader(dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dir.join("package.json")).ok()?;
    let pkg = json::parse(&text)?;
    let entry = match pkg.get("exports").and_then(|e| e.get(".")) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(obj @ Value::Object(_)) => {
            ["import", "default"].iter().find_map(|k| match obj.get(k) {
                Some(Value::String(s)) => Some(s.clone()),
                _ => None,
            })
        }
        _ => None,
    }
    .unwrap_or_else(|| "./dist/loader.mjs".to_string());
    let loader = dir.join(entry.trim_start_matches("./"));
    loader.is_file().then_some(loader)
}

/// The tsx package behind a `tsx` command on PATH (usually a symlink to
/// `<tsx>/dist/cli.mjs`).
fn tsx_from_command(cmd: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(cmd).ok()?;
    real.ancestors().skip(1).take(4).find_map(|dir| {
        let text = std::fs::read_to_string(dir.join("package.json")).ok()?;
        matches!(json::parse(&text)?.get("name"), Some(Value::String(n)) if n == "tsx")
            .then(|| dir.to_path_buf())
    })
}

/// Asks `node` (once per run, only when a `.ts` script has no tsx) whether
/// it can strip types by itself. `process.features.typescript` is "strip"
/// or "transform" where it can (Node >= 22.10; older Node lacks the field).
fn probe_strip(node: &Path) -> Strip {
    let ask = |flag: Option<&str>| {
        let mut cmd = Command::new(node);
        cmd.args(flag)
            .args(["-p", "process.features.typescript"])
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        cmd.output().ok().is_some_and(|o| {
            o.status.success()
                && matches!(
                    String::from_utf8_lossy(&o.stdout).trim(),
                    "strip" | "transform"
                )
        })
    };
    if ask(None) {
        Strip::Builtin
    } else if ask(Some("--experimental-strip-types")) {
        Strip::Flag
    } else {
        Strip::None
    }
}

/// The npm package `exe` belongs to: `<pkg>/bin/loopx.js` (npm's install
/// script puts the binary there, behind the package's bin entry) or
/// `<pkg>/native/loopx`, where `<pkg>/package.json` names loopx and
/// `<pkg>/loader/register.mjs` is there. `exe` is a realpath, so the
/// package is found through npm's bin symlink.
pub fn own_package(exe: &Path) -> Option<PathBuf> {
    let pkg = exe.parent()?.parent()?;
    if !pkg.join("loader/register.mjs").is_file() {
        return None;
    }
    let text = std::fs::read_to_string(pkg.join("package.json")).ok()?;
    matches!(json::parse(&text)?.get("name"), Some(Value::String(n)) if n == "loopx")
        .then(|| pkg.to_path_buf())
}

/// The tsx package Node resolves from inside `pkg`: `node_modules/tsx` in
/// `pkg` or in the nearest directory above it that has one (npm hoists
/// dependencies: `<prefix>/lib/node_modules/tsx` beside a global loopx),
/// directories named `node_modules` themselves skipped as Node skips them.
pub fn tsx_near(pkg: &Path) -> Option<PathBuf> {
    pkg.ancestors()
        .filter(|dir| dir.file_name() != Some(OsStr::new("node_modules")))
        .map(|dir| dir.join("node_modules/tsx"))
        .find(|tsx| tsx.join("package.json").is_file())
}

/// Where the helper files are.
fn package_dir(s: &Settings) -> Result<PathBuf, Error> {
    if let Some(dir) = &s.package_dir {
        // The shim's package; an incomplete one (unlikely) falls back to the
        // embedded copies rather than failing every script.
        if dir.join("loader/register.mjs").is_file() {
            return Ok(dir.clone());
        }
    }
    let dir = js_assets::cache_dir(s.xdg_cache_home.as_deref(), s.home.as_deref())
        .ok_or(Error::NoCacheDir)?;
    js_assets::ensure(&dir)?;
    Ok(dir)
}

enum Engine {
    Node {
        node: PathBuf,
        /// The project's or PATH's tsx: `None` until first needed.
        outside_tsx: Option<Option<Rc<PathBuf>>>,
        /// Per workflow directory: the tsx its scripts load.
        tsx_by_workflow: HashMap<PathBuf, Option<Rc<PathBuf>>>,
    },
    Bun {
        bun: PathBuf,
    },
}

/// Everything decided about JS/TS runtimes during one run.
struct Js {
    engine: Engine,
    register: OsString,
    bun_preload: OsString,
    tsconfig: OsString,
}

/// Chooses programs for scripts; created once per run.
pub struct Runtimes {
    settings: Settings,
    project_root: PathBuf,
    /// Found when the first bash script needs it, then kept.
    bash: Option<PathBuf>,
    js: Option<Js>,
    /// Node's type stripping, probed at most once (node is the same one
    /// for the whole run).
    strip: Option<Strip>,
}

impl Runtimes {
    pub fn new(settings: Settings, project_root: PathBuf) -> Runtimes {
        Runtimes {
            settings,
            project_root,
            bash: None,
            js: None,
            strip: None,
        }
    }

    /// Warns before the first iteration when the starting workflow has
    /// `.ts`, `.tsx` or `.jsx` scripts that no runtime here can run, so the
    /// run does not find out after its expensive first steps; the error
    /// when the loop reaches one stays. `start` itself is left out: its
    /// error comes at once. Looks only where `program_for` will (Bun, tsx,
    /// Node's type stripping), and stays quiet when the choice of runtime
    /// itself will fail (no node, a bad LOOPX_JS_RUNTIME): that error
    /// concerns every JS script.
    pub fn warn_unrunnable(&mut self, workflow: &Workflow, start: &Script) {
        let typed: Vec<&Script> = workflow
            .scripts
            .values()
            .filter(|s| s.kind == Kind::Js && s.name != start.name)
            .filter(|s| Lang::of(&s.path) != Lang::Js)
            .collect();
        if typed.is_empty() {
            return;
        }
        let s = &self.settings;
        let Ok(choice) = parse_choice(s.runtime.as_deref()) else {
            return;
        };
        if choice == Choice::Bun {
            return;
        }
        let Some(node) = which("node", s.path.as_deref()) else {
            return;
        };
        // Where program_for looks, including the npm package this binary is
        // part of (npm's bin entry is the binary itself after its install
        // script, so no shim tells it LOOPX_TSX): missing it warned about
        // scripts that then ran fine.
        self.settings.adopt_own_package();
        let s = &self.settings;
        let mut outside = None;
        if workflow_tsx(&workflow.dir, s, &self.project_root, &mut outside).is_some() {
            return;
        }
        let strip = &mut self.strip;
        let files: Vec<String> = typed
            .iter()
            .filter(|script| {
                let plan = node_plan(Lang::of(&script.path), false, || {
                    *strip.get_or_insert_with(|| probe_strip(&node))
                });
                plan == NodePlan::NoTypeScript
            })
            .filter_map(|script| script.path.file_name())
            .map(|f| f.to_string_lossy().into_owned())
            .collect();
        if !files.is_empty() {
            crate::messages::warn(&unrunnable_warning(&workflow.name, &files));
        }
    }

    /// The bash for `.sh` scripts (`label` names the script for the error).
    fn bash(&mut self, label: &str) -> Result<PathBuf, Error> {
        if let Some(bash) = &self.bash {
            return Ok(bash.clone());
        }
        let bash = find_bash(self.settings.path.as_deref()).ok_or_else(|| Error::NoBash {
            script: label.to_string(),
        })?;
        Ok(self.bash.insert(bash).clone())
    }

    /// Fails before the first iteration when the starting workflow has
    /// `.sh` scripts and there is no bash to run them, rather than in the
    /// middle of the loop. The error names `start` when it is one of them.
    pub fn require_bash(&mut self, workflow: &Workflow, start: &Script) -> Result<(), Error> {
        let first_bash = std::iter::once(start)
            .chain(workflow.scripts.values())
            .find(|s| s.kind == Kind::Bash);
        match first_bash {
            Some(script) => self
                .bash(&format!("{}:{}", workflow.name, script.name))
                .map(drop),
            None => Ok(()),
        }
    }

    /// The program for one iteration. Bash costs nothing; the first JS/TS
    /// script pays for the runtime decision, later ones reuse it.
    pub fn program_for(
        &mut self,
        workflow: &Workflow,
        script: &Script,
        label: &str,
    ) -> Result<Program, Error> {
        let script_arg = script.path.clone().into_os_string();
        if script.kind == Kind::Bash {
            // §6.2: `/bin/bash <script>`, never a shell string, regardless of
            // the file's executable bit or shebang.
            return Ok(Program {
                program: self.bash(label)?,
                args: vec![script_arg],
                env: Vec::new(),
            });
        }
        let js = match self.js {
            Some(ref mut js) => js,
            None => {
                self.settings.adopt_own_package();
                self.js.insert(decide(&self.settings, label)?)
            }
        };
        let lang = Lang::of(&script.path);
        match &mut js.engine {
            Engine::Bun { bun } => Ok(Program {
                program: bun.clone(),
                args: vec![
                    // loopx never installs packages (§2.1); without this Bun
                    // would fetch a missing import from the registry.
                    "--no-install".into(),
                    "--preload".into(),
                    js.bun_preload.clone(),
                    "--jsx-runtime=classic".into(),
                    "--jsx-factory=React.createElement".into(),
                    "--jsx-fragment=React.Fragment".into(),
                    script_arg,
                ],
                env: Vec::new(),
            }),
            Engine::Node {
                node,
                outside_tsx,
                tsx_by_workflow,
            } => {
                let settings = &self.settings;
                let strip = &mut self.strip;
                let project_root = &self.project_root;
                let mut tsx = None;
                if lang != Lang::Js {
                    tsx = tsx_by_workflow
                        .entry(workflow.dir.clone())
                        .or_insert_with(|| {
                            workflow_tsx(&workflow.dir, settings, project_root, outside_tsx)
                        })
                        .clone();
                }
                let plan = node_plan(lang, tsx.is_some(), || {
                    *strip.get_or_insert_with(|| probe_strip(node))
                });
                let mut args: Vec<OsString> = Vec::with_capacity(6);
                let mut env = Vec::new();
                match plan {
                    NodePlan::NoTypeScript => {
                        return Err(Error::NoTypeScriptRuntime {
                            script: label.to_string(),
                            jsx: matches!(lang, Lang::Jsx | Lang::Tsx),
                        })
                    }
                    NodePlan::Strip(Strip::Flag) => args.push("--experimental-strip-types".into()),
                    _ => {}
                }
                // register.mjs registers the loopx hooks, then tsx's (the
                // order loader/register.mjs explains).
                args.push("--import".into());
                match (&plan, &tsx) {
                    (NodePlan::Tsx, Some(loader)) => {
                        args.push(register_with_tsx(&js.register, &file_url(loader)));
                        // The classic JSX transform whatever tsconfig is around.
                        env.push(("TSX_TSCONFIG_PATH".into(), js.tsconfig.clone()));
                    }
                    _ => args.push(js.register.clone()),
                }
                args.push(script_arg);
                Ok(Program {
                    program: node.clone(),
                    args,
                    env,
                })
            }
        }
    }
}

/// The up-front warning about `files` of `workflow` that cannot run here.
fn unrunnable_warning(workflow: &str, files: &[String]) -> String {
    let one = if files.len() == 1 { "it" } else { "one" };
    format!(
        "workflow '{workflow}' has {} that cannot run here: {} (TypeScript and JSX need tsx \
         or Bun, or for .ts a Node that strips types, 22.10 and later); the loop stops with an \
         error if it reaches {one}\nhint: {}",
        if files.len() == 1 {
            "a script"
        } else {
            "scripts"
        },
        crate::text::shown(&files.join(", ")),
        crate::error::TYPESCRIPT_HINT,
    )
}

/// The once-per-run part: which runtime, and where the helpers are.
fn decide(s: &Settings, label: &str) -> Result<Js, Error> {
    let choice = parse_choice(s.runtime.as_deref())?;
    let find_bun = || {
        s.bun
            .clone()
            .filter(|b| b.is_file())
            .or_else(|| which("bun", s.path.as_deref()))
    };
    let engine = match choice {
        Choice::Bun => Engine::Bun {
            bun: find_bun().ok_or_else(|| Error::NoBun {
                script: label.to_string(),
            })?,
        },
        Choice::Node | Choice::Auto => match which("node", s.path.as_deref()) {
            Some(node) => Engine::Node {
                node,
                outside_tsx: None,
                tsx_by_workflow: HashMap::new(),
            },
            None => match find_bun().filter(|_| choice == Choice::Auto) {
                Some(bun) => Engine::Bun { bun },
                None => {
                    return Err(Error::NoNode {
                        script: label.to_string(),
                    })
                }
            },
        },
    };
    let dir = package_dir(s)?;
    Ok(Js {
        engine,
        register: file_url(&dir.join("loader/register.mjs")),
        bun_preload: dir.join("loader/bun-preload.js").into_os_string(),
        tsconfig: dir.join("loader/tsconfig.json").into_os_string(),
    })
}

/// A workflow's tsx, looked up once per workflow: the npm package's own
/// (`LOOPX_TSX`, the one this loopx ships with), else the workflow's
/// `node_modules/tsx`, else the project's, else a `tsx` on PATH. The last
/// two are the same for every workflow, so `outside` caches them.
fn workflow_tsx(
    workflow_dir: &Path,
    s: &Settings,
    project_root: &Path,
    outside: &mut Option<Option<Rc<PathBuf>>>,
) -> Option<Rc<PathBuf>> {
    if let Some(loader) = s.tsx.as_deref().and_then(tsx_loader) {
        return Some(Rc::new(loader));
    }
    if let Some(loader) = tsx_loader(&workflow_dir.join("node_modules/tsx")) {
        return Some(Rc::new(loader));
    }
    outside
        .get_or_insert_with(|| {
            tsx_loader(&project_root.join("node_modules/tsx"))
                .or_else(|| {
                    which("tsx", s.path.as_deref())
                        .and_then(|cmd| tsx_from_command(&cmd))
                        .and_then(|dir| tsx_loader(&dir))
                })
                .map(Rc::new)
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_names_the_tsx_loader_as_a_query_value_read_back_intact() {
        let loader = file_url(Path::new("/a b/50%/tsx/dist/loader.mjs"));
        assert_eq!(loader, "file:///a%20b/50%25/tsx/dist/loader.mjs");
        // URLSearchParams.get() decodes one level of escapes: what it reads
        // back is `loader` itself.
        assert_eq!(
            register_with_tsx(OsStr::new("file:///pkg/loader/register.mjs"), &loader),
            "file:///pkg/loader/register.mjs?tsx=file:///a%2520b/50%2525/tsx/dist/loader.mjs"
        );
    }

    #[test]
    fn loopx_js_runtime_values() {
        assert_eq!(parse_choice(None).ok(), Some(Choice::Auto));
        assert_eq!(parse_choice(Some(OsStr::new(""))).ok(), Some(Choice::Auto));
        assert_eq!(
            parse_choice(Some(OsStr::new("node"))).ok(),
            Some(Choice::Node)
        );
        assert_eq!(
            parse_choice(Some(OsStr::new("bun"))).ok(),
            Some(Choice::Bun)
        );
        let err = parse_choice(Some(OsStr::new("deno"))).expect_err("error");
        assert!(err.to_string().contains("'deno'"), "{err}");
    }

    #[test]
    fn js_runs_on_plain_node_even_with_tsx() {
        let never = || panic!("no probe for .js");
        assert_eq!(node_plan(Lang::Js, true, never), NodePlan::Plain);
        assert_eq!(node_plan(Lang::Js, false, never), NodePlan::Plain);
    }

    #[test]
    fn typescript_and_jsx_use_tsx_when_present_without_probing_node() {
        for lang in [Lang::Ts, Lang::Tsx, Lang::Jsx] {
            assert_eq!(node_plan(lang, true, || panic!("no probe")), NodePlan::Tsx);
        }
    }

    #[test]
    fn without_tsx_ts_falls_back_to_type_stripping_and_jsx_fails() {
        assert_eq!(
            node_plan(Lang::Ts, false, || Strip::Builtin),
            NodePlan::Strip(Strip::Builtin)
        );
        assert_eq!(
            node_plan(Lang::Ts, false, || Strip::Flag),
            NodePlan::Strip(Strip::Flag)
        );
        assert_eq!(
            node_plan(Lang::Ts, false, || Strip::None),
            NodePlan::NoTypeScript
        );
        for lang in [Lang::Tsx, Lang::Jsx] {
            assert_eq!(
                node_plan(lang, false, || Strip::Builtin),
                NodePlan::NoTypeScript
            );
        }
    }

    #[test]
    fn the_up_front_warning_names_the_files_and_how_to_run_them() {
        assert_eq!(
            unrunnable_warning("ralph", &["review.ts".into()]),
            "workflow 'ralph' has a script that cannot run here: review.ts (TypeScript and \
             JSX need tsx or Bun, or for .ts a Node that strips types, 22.10 and later); the \
             loop stops with an error if it reaches it\n\
             hint: install loopx with `npm install -g loopx` (it brings tsx), or \
             `npm install -D tsx` in the project, or install Bun and set LOOPX_JS_RUNTIME=bun"
        );
        let two = unrunnable_warning("w", &["a.tsx".into(), "b.jsx".into()]);
        assert!(
            two.contains("has scripts that cannot run here: a.tsx, b.jsx"),
            "{two}"
        );
        assert!(two.contains("if it reaches one\n"), "{two}");
    }

    #[test]
    fn file_urls_escape_what_urls_reserve() {
        assert_eq!(
            file_url(Path::new("/a b/%20#1/x?.mjs")),
            OsString::from("file:///a%20b/%2520%231/x%3F.mjs")
        );
        assert_eq!(file_url(Path::new("/é")), OsString::from("file:///%C3%A9"));
    }

    #[test]
    fn tsx_loader_follows_the_package_exports() {
        let d = std::env::temp_dir().join(format!("loopx-tsx-loader-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("dist")).expect("mkdir");
        let write = |f: &str, t: &str| std::fs::write(d.join(f), t).expect("write");
        write("dist/loader.mjs", "");
        write("dist/other.mjs", "");
        // No package.json: not a tsx.
        assert_eq!(tsx_loader(&d), None);
        write("package.json", r#"{"exports":{".":"./dist/other.mjs"}}"#);
        assert_eq!(tsx_loader(&d), Some(d.join("dist/other.mjs")));
        write(
            "package.json",
            r#"{"exports":{".":{"types":"./x.d.ts","import":"./dist/other.mjs"}}}"#,
        );
        assert_eq!(tsx_loader(&d), Some(d.join("dist/other.mjs")));
        write("package.json", r#"{"name":"tsx"}"#);
        assert_eq!(tsx_loader(&d), Some(d.join("dist/loader.mjs")));
        // An entry that does not exist is no tsx.
        write("package.json", r#"{"exports":{".":"./gone.mjs"}}"#);
        assert_eq!(tsx_loader(&d), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_binary_behind_an_npm_bin_entry_finds_its_package_and_a_hoisted_tsx() {
        let d = std::env::temp_dir().join(format!("loopx-own-pkg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let pkg = d.join("lib/node_modules/loopx");
        let write = |f: &Path, t: &str| {
            std::fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
            std::fs::write(f, t).expect("write");
        };
        write(&pkg.join("bin/loopx.js"), "ELF");
        write(&pkg.join("native/loopx"), "ELF");
        // Not a package yet: no package.json naming loopx.
        assert_eq!(own_package(&pkg.join("bin/loopx.js")), None);
        write(&pkg.join("package.json"), r#"{"name":"not-loopx"}"#);
        write(&pkg.join("loader/register.mjs"), "");
        assert_eq!(own_package(&pkg.join("bin/loopx.js")), None);
        write(&pkg.join("package.json"), r#"{"name":"loopx"}"#);
        assert_eq!(own_package(&pkg.join("bin/loopx.js")), Some(pkg.clone()));
        assert_eq!(own_package(&pkg.join("native/loopx")), Some(pkg.clone()));
        // A standalone install: ~/.local/bin/loopx.
        assert_eq!(own_package(&d.join("bin/loopx")), None);
        assert_eq!(tsx_near(&pkg), None);
        // Hoisted beside the package (npm -g): <prefix>/lib/node_modules/tsx;
        // <prefix>/lib/node_modules/node_modules is never looked at.
        write(
            &d.join("lib/node_modules/node_modules/tsx/package.json"),
            "{}",
        );
        assert_eq!(tsx_near(&pkg), None);
        write(&d.join("lib/node_modules/tsx/package.json"), "{}");
        assert_eq!(tsx_near(&pkg), Some(d.join("lib/node_modules/tsx")));
        // The package's own wins.
        write(&pkg.join("node_modules/tsx/package.json"), "{}");
        assert_eq!(tsx_near(&pkg), Some(pkg.join("node_modules/tsx")));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn lang_by_extension() {
        assert_eq!(Lang::of(Path::new("/w/a.js")), Lang::Js);
        assert_eq!(Lang::of(Path::new("/w/a.jsx")), Lang::Jsx);
        assert_eq!(Lang::of(Path::new("/w/a.ts")), Lang::Ts);
        assert_eq!(Lang::of(Path::new("/w/a.tsx")), Lang::Tsx);
    }
}
