//! The loop (§7.1, §7.2): discovery, env, target resolution, then one
//! script per iteration with goto transitions, stop and the -n limit; and,
//! beyond the spec, per-script timeouts, a run budget and retries
//! (DESIGN.md "Beyond the spec"). The supervisor runs each script and says
//! how it ended; this module decides what that means for the loop.

use std::ffi::{OsStr, OsString};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::discovery::{self, Discovery, Script, Workflow};
use crate::duration;
use crate::env;
use crate::error::Error;
use crate::json::Object;
use crate::messages;
use crate::output::{self, Output};
use crate::process::{self, Launch, Status};
use crate::report::{Done, Reporter, ScriptRun};
use crate::runtime;
use crate::script_env::ScriptEnv;
use crate::shim_parent;
use crate::signals::Signals;
use crate::supervisor::{self, Ending, Finished, Supervisor};
use crate::target;
use crate::terminal::Terminal;
use crate::version_check;

/// What a run is asked to do: `loopx run`'s options (run_flags.rs) and the
/// JS API's (api.rs), the same for both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    /// Unvalidated: target validation happens after discovery (§4.1).
    pub target: String,
    /// `-n` (§4.2).
    pub max_iterations: Option<u64>,
    /// `-e` (§8.2), relative to the project root.
    pub env_file: Option<PathBuf>,
    /// `--timeout`: the longest one script run may take.
    pub timeout: Option<Duration>,
    /// `--max-time`: no script run starts once this much time has passed.
    pub max_time: Option<Duration>,
    /// `--retry`: how many more times a failed script run is tried.
    pub retry: u64,
    /// `--retry-delay`: the wait before the first retry, doubled after.
    pub retry_delay: Duration,
    /// `--log`: the JSONL run record (report.rs); `LOOPX_LOG` otherwise.
    pub log: Option<PathBuf>,
    /// `--verbose`: one line per script run on stderr.
    pub verbose: bool,
}

/// `--retry-delay`'s default.
pub const RETRY_DELAY: Duration = Duration::from_secs(10);

/// Retry delays double up to this.
const RETRY_DELAY_CAP: Duration = Duration::from_secs(30 * 60);

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            target: String::new(),
            max_iterations: None,
            env_file: None,
            timeout: None,
            max_time: None,
            retry: 0,
            retry_delay: RETRY_DELAY,
            log: None,
            verbose: false,
        }
    }
}

impl RunOptions {
    /// The options as the run log's `run_start` records them.
    pub fn to_json(&self) -> String {
        let ms = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
        let env_file = self.env_file.as_ref().map(|p| p.to_string_lossy());
        Object::default()
            .opt_num("max_iterations", self.max_iterations)
            .opt_str("env_file", env_file.as_deref())
            .opt_num("timeout_ms", ms(self.timeout))
            .opt_num("max_time_ms", ms(self.max_time))
            .num("retry", self.retry)
            .num("retry_delay_ms", self.retry_delay.as_millis() as u64)
            .finish()
    }

    #[cfg(test)]
    pub fn new(target: &str) -> RunOptions {
        RunOptions {
            target: target.to_string(),
            ..RunOptions::default()
        }
    }
}

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
    args: &RunOptions,
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
    fn output(&mut self, out: &Output, last: bool, sup: &mut Supervisor) -> Result<bool, Error>;

    /// Whether scripts may take over loopx's terminal while they run
    /// (terminal.rs). Only the CLI: under the API the terminal belongs to
    /// the consumer's program.
    fn shares_terminal(&self) -> bool {
        false
    }

    /// The consumer's request channel (supervisor.rs). Only the API has one.
    fn channel(&self) -> Option<RawFd> {
        None
    }
}

/// The CLI's observer: nothing to report, never pauses.
pub struct Cli;

impl Observer for Cli {
    fn output(&mut self, _: &Output, _: bool, _: &mut Supervisor) -> Result<bool, Error> {
        Ok(true)
    }

    fn shares_terminal(&self) -> bool {
        true
    }
}

/// A unique id for this run (`LOOPX_RUN_ID`): 16 hex digits from the
/// system's random source, else from the clock and the pid.
fn run_id() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok();
    let n = if random {
        u64::from_le_bytes(bytes)
    } else {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        nanos ^ (u64::from(std::process::id()) << 40)
    };
    format!("{n:016x}")
}

/// Everything fixed for one run, and the state the loop carries.
struct Loop<'o> {
    opts: &'o RunOptions,
    report: &'o mut Reporter,
    sup: Supervisor,
    runtimes: runtime::Runtimes,
    env: ScriptEnv,
    /// When no further script run may start (`--max-time`).
    budget_end: Option<Instant>,
    iterations: u64,
}

/// A script run that did not succeed, and whether a retry may follow.
struct Failure {
    error: Error,
    retryable: bool,
    /// How it failed, for the retry line: `exit 2`, `killed by SIGSEGV`.
    how: String,
}

/// What a script run comes to.
enum Verdict {
    /// Exit code 0.
    Success,
    Failed(Failure),
}

fn failed(error: Error, retryable: bool, how: String) -> Verdict {
    Verdict::Failed(Failure {
        error,
        retryable,
        how,
    })
}

/// §7.2 and the retry rule: what a script's ending means. A failure may be
/// retried when the script failed by itself or timed out, never when loopx
/// ended it for another reason.
fn judge(finished: &Finished, label: &str, script: &Path, timeout: Option<Duration>) -> Verdict {
    let label = label.to_string();
    match (finished.ending, finished.status) {
        (Ending::Interrupted(signal), _) => {
            failed(Error::Interrupted { signal }, false, String::new())
        }
        (Ending::ConsumerGone, _) => failed(Error::ConsumerGone, false, String::new()),
        (Ending::NeedsTerminal(signal), _) => {
            let error = Error::ScriptNeedsTerminal {
                script: label,
                signal,
            };
            failed(error, false, String::new())
        }
        (Ending::TimedOut, _) => {
            let after = timeout.unwrap_or_default();
            let how = format!("timed out after {}", duration::format(after));
            failed(
                Error::TimedOut {
                    script: label,
                    after,
                },
                true,
                how,
            )
        }
        (Ending::Natural, Status::Code(0)) => Verdict::Success,
        // §5.1: a script file removed mid-loop fails as a launch error.
        (Ending::Natural, Status::Code(_)) if !script.exists() => {
            let err = std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the script file no longer exists",
            );
            let program = script.display().to_string();
            failed(
                Error::Spawn {
                    script: label,
                    program,
                    err,
                },
                false,
                String::new(),
            )
        }
        (Ending::Natural, Status::Code(code)) => {
            let how = format!("failed (exit {code})");
            failed(
                Error::ScriptFailed {
                    script: label,
                    code,
                },
                true,
                how,
            )
        }
        (Ending::Natural, Status::Signal(signal)) => {
            let how = format!("failed (killed by {})", crate::error::signal_name(signal));
            failed(
                Error::ScriptKilled {
                    script: label,
                    signal,
                },
                true,
                how,
            )
        }
    }
}

/// The wait before retry `n` (1-based): the delay, doubled per retry after
/// the first, at most 30 minutes.
fn retry_delay(first: Duration, n: u64) -> Duration {
    let factor = 1u32
        .checked_shl((n.saturating_sub(1)).min(31) as u32)
        .unwrap_or(u32::MAX);
    first
        .checked_mul(factor)
        .unwrap_or(RETRY_DELAY_CAP)
        .min(RETRY_DELAY_CAP)
}

impl Loop<'_> {
    /// One iteration's script, with its retries (`--retry`): a retry runs it
    /// again with the same input and is not an iteration (-n).
    fn run_with_retries(
        &mut self,
        current: &Resolved,
        stdin: Option<&str>,
    ) -> Result<Output, Error> {
        let label = current.label();
        let iteration = self.iterations.to_string();
        let mut attempt: u64 = 1;
        loop {
            let run = ScriptRun {
                iteration: self.iterations,
                attempt,
                label: &label,
            };
            self.report.script_start(&run);
            let mut finished = self.run_once(current, &label, stdin, &iteration, attempt)?;
            let verdict = judge(&finished, &label, &current.script.path, self.opts.timeout);
            if let (Ending::TimedOut, Some(after)) = (finished.ending, self.opts.timeout) {
                self.report.timeout(&run, after);
            }
            let failure = match verdict {
                Verdict::Success => {
                    let stdout = std::mem::take(&mut finished.stdout);
                    self.report.inspect_stdout(&run, &stdout);
                    let stdout_bytes = stdout.len();
                    let (out, structured) = output::parse_structured(stdout);
                    self.report
                        .script_end(&run, &finished, stdout_bytes, Some((&out, structured)));
                    return Ok(out);
                }
                Verdict::Failed(failure) => failure,
            };
            self.report
                .script_end(&run, &finished, finished.stdout.len(), None);
            if !failure.retryable || attempt > self.opts.retry {
                return Err(failure.error);
            }
            let delay = retry_delay(self.opts.retry_delay, attempt);
            // A retry that could only start after the budget is not made.
            if self
                .budget_end
                .is_some_and(|end| supervisor::deadline(delay).map_or(true, |at| at >= end))
            {
                return Err(failure.error);
            }
            messages::notice(&format!(
                "{label} {}; retry {attempt} of {} in {}",
                failure.how,
                self.opts.retry,
                duration::format(delay)
            ));
            self.report.retry(&run, &failure.how, delay);
            self.sup.sleep(delay)?;
            attempt += 1;
        }
    }

    fn run_once(
        &mut self,
        current: &Resolved,
        label: &str,
        stdin: Option<&str>,
        iteration: &str,
        attempt: u64,
    ) -> Result<Finished, Error> {
        let program = self
            .runtimes
            .program_for(current.workflow, current.script, label)?;
        let attempt = attempt.to_string();
        let mut extra: Vec<(&OsStr, &OsStr)> = vec![
            (
                OsStr::new("LOOPX_WORKFLOW"),
                OsStr::new(&current.workflow.name),
            ),
            (OsStr::new("LOOPX_ITERATION"), OsStr::new(iteration)),
            (OsStr::new("LOOPX_ATTEMPT"), OsStr::new(&attempt)),
        ];
        extra.extend(
            program
                .env
                .iter()
                .map(|(n, v)| (n.as_os_str(), v.as_os_str())),
        );
        let envp = self.env.envp(&extra);
        let script = supervisor::Script {
            launch: Launch {
                program: &program.program,
                args: &program.args,
                cwd: &current.workflow.dir,
                envp,
                piped_stdin: stdin.is_some(),
                group: None,
            },
            stdin: stdin.map(str::as_bytes),
            timeout: self.opts.timeout,
            label,
        };
        self.sup.run_script(&script)
    }

    /// `--max-time`: whether the budget is spent, saying so once it is.
    fn budget_spent(&self) -> bool {
        let spent = self.budget_end.is_some_and(|end| Instant::now() >= end);
        if spent {
            let n = self.iterations;
            messages::notice(&format!(
                "stopped: --max-time {} reached after {n} iteration{}",
                duration::format(self.opts.max_time.unwrap_or_default()),
                if n == 1 { "" } else { "s" }
            ));
        }
        spent
    }
}

/// `loopx run <target>` (and the API's machine mode through `observer`).
pub fn run(opts: &RunOptions, observer: &mut dyn Observer) -> Result<(), Error> {
    let run_id = run_id();
    let project_root = std::env::current_dir()
        .map_err(|e| Error::io("cannot determine the current directory", e))?;
    // `--log` wins over LOOPX_LOG; a relative path is the project root's.
    let log = opts.log.clone().or_else(|| {
        std::env::var_os("LOOPX_LOG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let mut report = Reporter::new(log.as_deref(), opts.verbose, &run_id)?;
    report.run_start(&opts.target, &opts.to_json(), &project_root);
    let result = run_loop(opts, observer, &mut report, &project_root, &run_id);
    report.run_end(&result);
    result.map(|_| ())
}

fn run_loop(
    opts: &RunOptions,
    observer: &mut dyn Observer,
    report: &mut Reporter,
    project_root: &Path,
    run_id: &str,
) -> Result<Done, Error> {
    let mut signals =
        Signals::install().map_err(|e| Error::io("cannot install signal handlers", e))?;
    // After the handlers: a shim that is gone already ends the run as SIGTERM.
    shim_parent::watch(&mut signals);
    process::become_subreaper();
    let (d, vars) = prepare(project_root, opts)?;
    let start = resolve_start(&d, &opts.target)?;
    if opts.max_iterations == Some(0) {
        // §7.1 step 4: validated, nothing runs, no version check.
        return Ok(Done::MaxIterations);
    }
    // §7.1 step 5: the starting workflow, before the first iteration.
    let mut entered = EnteredWorkflows::default();
    entered.enter(start.workflow);

    // §8.3: loopx's own variables override the env files, which override the
    // inherited environment.
    let own: Vec<(OsString, OsString)> = vec![
        ("LOOPX_BIN".into(), own_binary()?.into_os_string()),
        (
            "LOOPX_PROJECT_ROOT".into(),
            project_root.as_os_str().to_owned(),
        ),
        ("LOOPX_RUN_ID".into(), run_id.into()),
    ];
    let terminal = observer.shares_terminal().then(Terminal::detect).flatten();
    report.loop_start(project_root, &opts.target, run_id);
    let mut lp = Loop {
        opts,
        sup: Supervisor::new(signals, observer.channel(), terminal),
        // §6.3: the JS/TS runtime is decided when the first such script
        // runs, then kept for the whole run.
        runtimes: runtime::Runtimes::new(
            runtime::Settings::from_env(&vars),
            project_root.to_path_buf(),
        ),
        // The shim's pid is for loopx alone (shim_parent.rs).
        env: ScriptEnv::new(
            std::env::vars_os().filter(|(k, _)| k != shim_parent::VAR),
            &[&vars, &own],
        ),
        budget_end: opts.max_time.and_then(supervisor::deadline),
        iterations: 0,
        report,
    };
    lp.runtimes.require_bash(start.workflow, start.script)?;
    let mut current = start;
    let mut stdin: Option<String> = None;
    loop {
        // §7.3: between iterations, an interrupt exits at once.
        lp.sup.between_scripts()?;
        if lp.budget_spent() {
            return Ok(Done::MaxTime);
        }
        lp.iterations += 1;
        let out = lp.run_with_retries(&current, stdin.as_deref())?;
        // §2.3: stop beats goto; §7.1 step 10: the -n limit ends the loop
        // after the final output, which is still observed.
        let limit = opts.max_iterations.is_some_and(|max| lp.iterations >= max);
        let last = out.stop || limit;
        if !observer.output(&out, last, &mut lp.sup)? {
            return Ok(Done::Consumer);
        }
        if last {
            return Ok(if out.stop {
                Done::Stop
            } else {
                Done::MaxIterations
            });
        }
        let previous = current.workflow;
        (current, stdin) = next(&d, start, &current, out)?;
        if !std::ptr::eq(previous, current.workflow) {
            // §7.1 step 11e: after the goto target is resolved, before it runs.
            entered.enter(current.workflow);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_double_up_to_thirty_minutes() {
        let s = Duration::from_secs;
        assert_eq!(retry_delay(s(10), 1), s(10));
        assert_eq!(retry_delay(s(10), 2), s(20));
        assert_eq!(retry_delay(s(10), 4), s(80));
        assert_eq!(retry_delay(s(10), 9), s(1800));
        assert_eq!(retry_delay(s(10), 1_000), s(1800));
        assert_eq!(retry_delay(s(3600), 1), s(1800));
        assert_eq!(retry_delay(Duration::ZERO, 5), Duration::ZERO);
    }

    #[test]
    fn run_ids_are_hex_and_differ() {
        let (a, b) = (run_id(), run_id());
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
