//! The loop (§7.1, §7.2): discovery, env, target resolution, then one
//! script per iteration with goto transitions, stop and the -n limit.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use crate::cli::RunArgs;
use crate::discovery::{self, Discovery, Script, Workflow};
use crate::env;
use crate::error::Error;
use crate::output::{self, Output};
use crate::process::{self, Launch};
use crate::runtime;
use crate::script_env::ScriptEnv;
use crate::signals::Signals;
use crate::target;
use crate::version_check;

/// A resolved script: the workflow it belongs to and the script itself.
#[derive(Clone, Copy)]
pub struct Resolved<'d> {
    pub workflow: &'d Workflow,
    pub script: &'d Script,
}

impl Resolved<'_> {
    pub fn label(&self) -> String {
        format!("{}:{}", self.workflow.name, self.script.name)
    }
}

/// §7.1 step 3: the starting target of `loopx run`.
pub fn resolve_start<'d>(d: &'d Discovery, raw: &str) -> Result<Resolved<'d>, Error> {
    let parsed = target::parse(raw).map_err(|why| Error::InvalidTarget {
        target: raw.to_string(),
        why,
    })?;
    let (w, s, script_given) = parsed.for_run();
    let workflow = d.workflows.get(w).ok_or_else(|| Error::UnknownWorkflow {
        workflow: w.to_string(),
        available: d.workflow_names(),
        goto_from: None,
    })?;
    let script = workflow.scripts.get(s).ok_or_else(|| {
        if script_given {
            Error::UnknownScript {
                workflow: w.to_string(),
                script: s.to_string(),
                available: workflow.script_names(),
                goto_from: None,
            }
        } else {
            Error::MissingIndex {
                workflow: w.to_string(),
                available: workflow.script_names(),
            }
        }
    })?;
    Ok(Resolved { workflow, script })
}

/// §7.1 step 11a–d: a goto value, resolved from the script that issued it.
pub fn resolve_goto<'d>(
    d: &'d Discovery,
    raw: &str,
    from: &Resolved<'d>,
) -> Result<Resolved<'d>, Error> {
    let parsed = target::parse(raw).map_err(|why| Error::InvalidGoto {
        goto: raw.to_string(),
        from: from.label(),
        why,
    })?;
    let (w, s) = parsed.for_goto(&from.workflow.name);
    // Name the goto value as written, not only its resolved parts (§7.2).
    let goto_from = Some(format!("'{raw}' from {}", from.label()));
    let workflow = d.workflows.get(w).ok_or_else(|| Error::UnknownWorkflow {
        workflow: w.to_string(),
        available: d.workflow_names(),
        goto_from: goto_from.clone(),
    })?;
    let script = workflow
        .scripts
        .get(s)
        .ok_or_else(|| Error::UnknownScript {
            workflow: w.to_string(),
            script: s.to_string(),
            available: workflow.script_names(),
            goto_from,
        })?;
    Ok(Resolved { workflow, script })
}

/// What the next iteration runs and what it reads on stdin (§2.3, §6.6).
fn next<'d>(
    d: &'d Discovery,
    start: Resolved<'d>,
    current: &Resolved<'d>,
    out: Output,
) -> Result<(Resolved<'d>, Option<String>), Error> {
    match out.goto {
        // The result travels only along a goto, and goto without a result
        // gives the target an empty stdin.
        Some(goto) => Ok((resolve_goto(d, &goto, current)?, out.result)),
        // No goto: back to the starting target, with empty stdin.
        None => Ok((start, None)),
    }
}

/// §3.2 "Cross-workflow version checking": each workflow's version
/// declaration is checked once, on first entry during this run. The loop only
/// consults this when an iteration changes workflow, so runs that stay in one
/// workflow never touch it.
#[derive(Default)]
struct EnteredWorkflows<'d> {
    seen: Vec<&'d str>,
}

impl<'d> EnteredWorkflows<'d> {
    fn enter(&mut self, workflow: &'d Workflow) {
        if !self.seen.contains(&workflow.name.as_str()) {
            self.seen.push(&workflow.name);
            version_check::warn_on_entry(&workflow.name, &workflow.dir);
        }
    }
}

/// `LOOPX_BIN`: the realpath of the running binary (§3.4).
fn own_binary() -> Result<PathBuf, Error> {
    crate::self_exe::locate()
}

/// Loads and validates everything `run` needs before the first iteration
/// (§7.1 steps 1–3), in the spec's order.
pub fn prepare(
    project_root: &Path,
    args: &RunArgs,
) -> Result<(Discovery, Vec<(OsString, OsString)>), Error> {
    if !discovery::has_loopx_dir(project_root) {
        return Err(Error::NoLoopxDir {
            root: project_root.to_path_buf(),
        });
    }
    let dir = discovery::loopx_dir(project_root);
    let d = discovery::discover(&dir)
        .map_err(|e| Error::io(format!("cannot read {}", dir.display()), e))?;
    if !d.problems.is_empty() {
        return Err(Error::Validation {
            problems: d.problems,
        });
    }
    let env_file = args.env_file.as_ref().map(|p| project_root.join(p));
    let vars = env::load_for_run(env_file.as_deref())?;
    Ok((d, vars))
}

/// Who sees each iteration's output. The CLI ignores it (§7.1: results are
/// never printed); the programmatic API reports it and paces the loop (§9).
pub trait Observer {
    /// Called after every iteration. `last` tells that the loop ends after
    /// this output (stop or the -n limit). Returns false when the consumer
    /// wants no further iteration: the loop then ends quietly.
    fn output(&mut self, out: &Output, last: bool, signals: &mut Signals) -> Result<bool, Error>;

    /// Whether scripts may take over loopx's terminal while they run
    /// (process::Terminal). Only the CLI: under the API the terminal belongs
    /// to the consumer's program.
    fn shares_terminal(&self) -> bool {
        false
    }

    /// A descriptor whose hang-up while a script runs means the consumer is
    /// gone (process::Launch::consumer). Only the API has one.
    fn consumer(&self) -> Option<RawFd> {
        None
    }
}

/// The CLI's observer: nothing to report, never pauses.
pub struct Cli;

impl Observer for Cli {
    fn output(&mut self, _: &Output, _: bool, _: &mut Signals) -> Result<bool, Error> {
        Ok(true)
    }

    fn shares_terminal(&self) -> bool {
        true
    }
}

/// `loopx run <target>` (and the API's machine mode through `observer`).
pub fn run(args: &RunArgs, observer: &mut dyn Observer) -> Result<(), Error> {
    let mut signals =
        Signals::install().map_err(|e| Error::io("cannot install signal handlers", e))?;
    process::become_subreaper();
    let project_root = std::env::current_dir()
        .map_err(|e| Error::io("cannot determine the current directory", e))?;
    let (d, vars) = prepare(&project_root, args)?;
    let start = resolve_start(&d, &args.target)?;
    if args.max_iterations == Some(0) {
        // §7.1 step 4: validated, nothing runs, no version check.
        return Ok(());
    }
    // §7.1 step 5: the starting workflow, before the first iteration.
    let mut entered = EnteredWorkflows::default();
    entered.enter(start.workflow);

    // §8.3: loopx's own variables override the env files, which override the
    // inherited environment (later entries win in ScriptEnv::install).
    let mut env = vars;
    env.push(("LOOPX_BIN".into(), own_binary()?.into_os_string()));
    env.push((
        "LOOPX_PROJECT_ROOT".into(),
        project_root.clone().into_os_string(),
    ));

    let terminal = if observer.shares_terminal() {
        process::Terminal::detect()
    } else {
        None
    };
    // §6.3: the JS/TS runtime is decided when the first such script runs,
    // then kept for the whole run.
    let mut runtimes =
        runtime::Runtimes::new(runtime::Settings::from_env(&env), project_root.clone());
    runtimes.require_bash(start.workflow, start.script)?;
    // After the settings above: from here on loopx's environment is the
    // scripts' (script_env.rs).
    let mut script_env = ScriptEnv::install(&env);
    let mut current = start;
    let mut stdin: Option<String> = None;
    let mut iterations: u64 = 0;
    loop {
        signals.drain();
        // Descendants of earlier scripts that ended since are our zombies
        // (subreaper); one non-blocking waitpid keeps the table clean.
        process::reap_orphans();
        if let Some(signal) = signals.interrupted() {
            // §7.3: between iterations, exit at once.
            return Err(Error::Interrupted { signal });
        }
        let label = current.label();
        let program = runtimes.program_for(current.workflow, current.script, &label)?;
        script_env.set_workflow(&current.workflow.name);
        script_env.set_runtime(&program.env);
        let stdout = process::run(
            &Launch {
                label: &label,
                script: &current.script.path,
                program: &program.program,
                args: &program.args,
                cwd: &current.workflow.dir,
                stdin: stdin.as_deref().map(str::as_bytes),
                terminal: terminal.as_ref(),
                consumer: observer.consumer(),
            },
            &mut signals,
        )?;
        iterations += 1;
        let out = output::parse(stdout);
        // §2.3: stop beats goto; §7.1 step 10: the -n limit ends the loop
        // after the final output, which is still observed.
        let last = out.stop || args.max_iterations.is_some_and(|max| iterations >= max);
        if !observer.output(&out, last, &mut signals)? || last {
            return Ok(());
        }
        let previous = current.workflow;
        (current, stdin) = next(&d, start, &current, out)?;
        if !std::ptr::eq(previous, current.workflow) {
            // §7.1 step 11e: after the goto target is resolved, before it runs.
            entered.enter(current.workflow);
        }
    }
}
