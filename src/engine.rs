//! The loop (§7.1, §7.2): discovery, env, target resolution, then one
//! script per iteration with goto transitions, stop and the -n limit; and,
//! beyond the spec, per-script timeouts, a run budget and retries
//! (DESIGN.md "Beyond the spec"). The supervisor runs each script and says
//! how it ended; this module decides what that means for the loop.

use std::ffi::{OsStr, OsString};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::agent::class::Class;
use crate::agent::settings;
use crate::checkpoint::{self, Checkpoint, Keeper};
use crate::clock;
use crate::discovery::{self, Discovery, Kind, Script, Workflow};
use crate::duration;
use crate::env;
use crate::error::Error;
use crate::json;
use crate::messages;
use crate::output::{self, Output};
use crate::proc::bounded_read::Interrupt;
use crate::proc::process::{self, Launch, Status};
use crate::proc::shim_parent;
use crate::proc::signals::Signals;
use crate::proc::supervisor::{self, Ending, Finished, Supervisor};
use crate::proc::terminal::Terminal;
use crate::proc::{descendants, watcher};
use crate::report::{self, Done, Reporter, ScriptRun};
use crate::resolve::{self, Resolved};
use crate::resume;
use crate::run_options::RunOptions;
use crate::runtime;
use crate::script_env::ScriptEnv;
use crate::text;
use crate::version_check;
use crate::wait;

/// Retry delays double up to this.
const RETRY_DELAY_CAP: Duration = Duration::from_secs(30 * 60);

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
    interrupt: &mut dyn Interrupt,
) -> Result<(Discovery, Vec<(OsString, OsString)>), Error> {
    if !discovery::has_loopx_dir(project_root) {
        return Err(Error::NoLoopxDir {
            root: project_root.to_path_buf(),
            above: discovery::loopx_dir_above(project_root),
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
    let vars = env::load_for_run(env_file.as_deref(), interrupt)?;
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
    /// (proc/terminal.rs). Only the CLI: under the API the terminal belongs to
    /// the consumer's program.
    fn shares_terminal(&self) -> bool {
        false
    }

    /// Whether loopx's stdout is this observer's (the API's channel), so
    /// the run log cannot go there (`--log -`, run_log.rs).
    fn owns_stdout(&self) -> bool {
        false
    }

    /// The consumer's request channel (proc/supervisor.rs). Only the API has one.
    fn channel(&self) -> Option<RawFd> {
        None
    }

    /// Whether the run keeps a resume checkpoint. Only the CLI: an API run
    /// belongs to the program that started it.
    fn keeps_checkpoint(&self) -> bool {
        false
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

    fn keeps_checkpoint(&self) -> bool {
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
    run_id: String,
    /// When no further script run may start (`--max-time`).
    budget_end: Option<Instant>,
    iterations: u64,
    /// The resume checkpoint (CLI runs only), and whether the input it
    /// holds is the current one.
    keeper: Option<Keeper>,
    input_saved: bool,
    /// What the scripts reported spending (`cost_usd`), and whether any did.
    cost: f64,
    cost_reported: bool,
    /// The failure that ended the run was marked permanent by its script,
    /// and its class is not one the user fixes outside the run: no resume
    /// can help it, so the run is not kept.
    permanent: bool,
    /// Active time before this process took the run over (a resume), and
    /// when it did: downtime in between does not count (`--max-time`).
    active_before: Duration,
    started: Instant,
}

/// Where one iteration's script starts: its first run, or where a
/// checkpoint left it.
#[derive(Clone, Copy, Default)]
struct StepStart {
    attempt: u64,
    waits: u64,
    wait_until_ms: Option<i64>,
}

/// How an iteration's script ended, with its retries and waits.
enum Step {
    Output(Output),
    /// A budget was spent between two runs of the script.
    Done(Done),
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
fn judge(finished: &Finished, label: &str, script: &Script, timeout: Option<Duration>) -> Verdict {
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
        (Ending::TimedOut, _) => failed(
            Error::TimedOut {
                script: label,
                after: timeout.unwrap_or_default(),
            },
            true,
            report::ending(finished, timeout),
        ),
        (Ending::Natural, Status::Code(0)) => Verdict::Success,
        // §5.1: a script file removed mid-loop fails as a launch error.
        (Ending::Natural, Status::Code(_)) if !script.path.exists() => {
            let err = std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the script file no longer exists",
            );
            let program = script.path.display().to_string();
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
            let how = format!("failed ({})", report::ending(finished, None));
            // Read only now that it failed: CRLF line endings are the
            // likeliest cause of a bash script failing at once.
            let crlf = (script.kind == Kind::Bash && discovery::has_crlf(&script.path))
                .then(|| script.path.clone());
            // 127 is bash's "command not found": `loopx` by name instead of
            // "$LOOPX_BIN" (§3.4) is the likeliest command a script expects.
            let bare_loopx = (code == 127
                && script.kind == Kind::Bash
                && discovery::calls_bare_loopx(&script.path))
            .then(|| script.path.clone());
            failed(
                Error::ScriptFailed {
                    script: label,
                    code,
                    crlf,
                    bare_loopx,
                },
                true,
                how,
            )
        }
        (Ending::Natural, Status::Signal(signal)) => {
            let how = format!("failed ({})", report::ending(finished, None));
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
    /// One iteration's script, with its retries (`--retry`) and the waits
    /// it asks for (`retry_after`): each runs it again with the same input
    /// and is not an iteration (-n).
    fn run_step(
        &mut self,
        current: &Resolved,
        stdin: Option<&str>,
        start: StepStart,
    ) -> Result<Step, Error> {
        let label = current.label();
        let iteration = self.iterations.to_string();
        let (mut attempt, mut waits) = (start.attempt.max(1), start.waits);
        if let Some(until) = start.wait_until_ms {
            // A resumed run waits out the wait it was in, to the same time.
            self.wait_until(&label, stdin, waits, until)?;
        }
        loop {
            if let Some(done) = self.cost_spent() {
                return Ok(Step::Done(done));
            }
            self.checkpoint(&label, stdin, attempt, waits, None);
            let run = ScriptRun {
                iteration: self.iterations,
                attempt,
                label: &label,
            };
            self.report.script_start(&run);
            let mut finished = self.run_once(current, &label, stdin, &iteration, attempt, waits)?;
            let verdict = judge(&finished, &label, current.script, self.opts.timeout);
            if let (Ending::TimedOut, Some(after)) = (finished.ending, self.opts.timeout) {
                self.report.timeout(&run, after);
            }
            let failure = match verdict {
                Verdict::Success => {
                    let stdout = std::mem::take(&mut finished.stdout);
                    self.report.inspect_stdout(&run, &stdout);
                    let stdout_bytes = stdout.len();
                    let (out, structured, ext) = output::parse_with_extensions(stdout);
                    let cost = ext.cost_usd.filter(|_| ext.invalid.is_none());
                    self.report.script_end(
                        &run,
                        &finished,
                        stdout_bytes,
                        Some((&out, structured)),
                        cost,
                        None,
                    );
                    if let Some(bad) = ext.invalid {
                        return Err(Error::InvalidExtension {
                            script: label,
                            field: bad.field,
                            value: bad.value,
                            why: bad.why,
                        });
                    }
                    if let Some(c) = cost {
                        self.cost += c;
                        self.cost_reported = true;
                    }
                    if ext.cost_ignored && ext.invalid.is_none() {
                        // The value is not quoted: it is the script's text.
                        messages::warn(&format!(
                            "{label} reported a cost_usd that is not a number from 0 to {}; \
                             it is not counted",
                            wait::MAX_DOLLARS_TEXT
                        ));
                    }
                    // §2.3: stop ends the loop whatever else the output asks.
                    let Some(retry_after) = ext.retry_after.filter(|_| !out.stop) else {
                        self.report.iteration_output(&run, structured);
                        return Ok(Step::Output(out));
                    };
                    if out.goto.is_some() {
                        self.report
                            .note(&label, "the goto beside retry_after is ignored");
                    }
                    waits += 1;
                    attempt = 1;
                    let until = retry_after.deadline_ms(clock::now_ms());
                    self.wait_until(&label, stdin, waits, until)?;
                    continue;
                }
                Verdict::Failed(failure) => failure,
            };
            let mark = output::failure_mark(&finished.stdout);
            self.report.script_end(
                &run,
                &finished,
                finished.stdout.len(),
                None,
                None,
                mark.class.as_deref(),
            );
            // A permanent failure the user fixes outside the run (a key,
            // credits, the allow-list, an install) stays resumable: the
            // resume runs the step again once it is fixed.
            let fixable = mark
                .class
                .as_deref()
                .and_then(Class::from_name)
                .is_some_and(Class::fixed_outside_the_run);
            self.permanent = mark.permanent && !fixable;
            if !failure.retryable || attempt > self.opts.retry {
                return Err(failure.error);
            }
            // A failure the script marked permanent is not retried (read
            // only with --retry: without it, nothing changes).
            if mark.permanent {
                let class = mark
                    .class
                    .as_deref()
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default();
                messages::notice(&format!(
                    "{label} {}{class}: permanent, not retried",
                    failure.how
                ));
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

    /// A wait until `until_ms` (wall clock) before running `label` again, if
    /// `--max-wait` and `--max-time` allow it; else the run ends, resumable
    /// (exit 75). The deadline is re-read from the clock at least once a
    /// minute, so a machine that sleeps or a clock that jumps does not
    /// stretch the wait.
    fn wait_until(
        &mut self,
        label: &str,
        stdin: Option<&str>,
        waits: u64,
        until_ms: i64,
    ) -> Result<(), Error> {
        let now = clock::now_ms();
        // Saved first: a run that stops here, or dies waiting, resumes into
        // the same wait.
        self.checkpoint(label, stdin, 1, waits, Some(until_ms));
        let budget = self.budget_end.map(|end| {
            let limit = self.opts.max_time.unwrap_or_default();
            (limit, end.saturating_duration_since(Instant::now()))
        });
        let shown = format!(
            "{} (in {})",
            wait::shown_time(until_ms, now),
            wait::shown_in(until_ms, now)
        );
        let wait = wait::check(until_ms, now, self.opts.max_wait, budget).map_err(|bound| {
            Error::WaitTooLong {
                script: label.to_string(),
                until: shown,
                until_ms,
                bound,
                resume_id: self.keeper.is_some().then(|| self.run_id.clone()),
            }
        })?;
        messages::notice(&wait::announce(label, until_ms, now));
        let run = ScriptRun {
            iteration: self.iterations,
            attempt: 1,
            label,
        };
        self.report.wait(&run, until_ms, wait);
        loop {
            let left = until_ms - clock::now_ms();
            if left <= 0 {
                return Ok(());
            }
            let nap = Duration::from_millis(u64::try_from(left.min(60_000)).unwrap_or(0));
            self.sup.sleep(nap)?;
        }
    }

    /// Active time so far, resumes included.
    fn active(&self) -> Duration {
        self.active_before + self.started.elapsed()
    }

    /// Saves where the run is, before a script runs or a wait begins.
    fn checkpoint(
        &mut self,
        label: &str,
        stdin: Option<&str>,
        attempt: u64,
        waits: u64,
        wait_until_ms: Option<i64>,
    ) {
        let active_ms = self.active().as_millis() as u64;
        let Some(keeper) = &mut self.keeper else {
            return;
        };
        let input = match (self.input_saved, stdin) {
            (true, _) => checkpoint::Input::Unchanged,
            (false, None) => checkpoint::Input::None,
            (false, Some(text)) => checkpoint::Input::New(text.as_bytes()),
        };
        keeper.save(&checkpoint::Progress {
            script: label,
            input,
            iteration: self.iterations,
            attempt,
            waits,
            wait_until_ms,
            active_ms,
            cost_usd: self.cost,
        });
        self.input_saved = true;
    }

    /// `--max-cost`: whether the money budget is spent, saying so once it is.
    fn cost_spent(&self) -> Option<Done> {
        let max = self.opts.max_cost?;
        if !self.cost_reported || self.cost < max {
            return None;
        }
        let n = self.iterations;
        messages::notice(&format!(
            "stopped: --max-cost {} reached after {n} iteration{} ({})",
            json::number_to_js_string(max),
            if n == 1 { "" } else { "s" },
            wait::dollars(self.cost)
        ));
        Some(Done::MaxCost)
    }

    fn run_once(
        &mut self,
        current: &Resolved,
        label: &str,
        stdin: Option<&str>,
        iteration: &str,
        attempt: u64,
        waits: u64,
    ) -> Result<Finished, Error> {
        let program = self
            .runtimes
            .program_for(current.workflow, current.script, label)?;
        let attempt = attempt.to_string();
        let waits = waits.to_string();
        let mut extra: Vec<(&OsStr, &OsStr)> = vec![
            (
                OsStr::new("LOOPX_WORKFLOW"),
                OsStr::new(&current.workflow.name),
            ),
            (OsStr::new("LOOPX_ITERATION"), OsStr::new(iteration)),
            (OsStr::new("LOOPX_ATTEMPT"), OsStr::new(&attempt)),
            (OsStr::new("LOOPX_WAITS"), OsStr::new(&waits)),
        ];
        // The script span's, when traces are on (otel.rs).
        let traceparent = self.report.traceparent();
        extra.extend(
            traceparent
                .as_deref()
                .map(|t| (OsStr::new("TRACEPARENT"), OsStr::new(t))),
        );
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

/// Where a run begins: anew, or where a checkpoint left it.
enum Origin {
    New,
    Resumed(Box<Keeper>),
}

/// `loopx run <target>` (and the API's machine mode through `observer`);
/// with `--resume`, this project's latest resumable run of the target if
/// there is one.
pub fn run(opts: &RunOptions, observer: &mut dyn Observer) -> Result<(), Error> {
    if opts.resume && observer.keeps_checkpoint() {
        let root = project_root()?;
        if let (Some(dir), Some(root)) = (checkpoint::dir(), root.to_str()) {
            if let Some(id) = resume::find(&dir, root, Some(&opts.target), None)? {
                let (ckpt, record) = resume::take(&dir, &id)?;
                return execute(
                    opts,
                    observer,
                    Origin::Resumed(Box::new(Keeper::new(ckpt, record))),
                );
            }
        }
    }
    execute(opts, observer, Origin::New)
}

/// `loopx resume [<run-id>] [options]`: the run named by a unique prefix of
/// its id, else the current project's most recent resumable run. `given`
/// applies the options given to `resume` over the saved ones.
pub fn resume(
    prefix: Option<&str>,
    given: impl FnOnce(RunOptions) -> RunOptions,
) -> Result<(), Error> {
    let root = project_root()?;
    let dir = checkpoint::dir().ok_or_else(|| Error::NothingToResume {
        what: "(no HOME or XDG_STATE_HOME to keep checkpoints in)".to_string(),
        available: Vec::new(),
    })?;
    let root_text = root.to_string_lossy();
    let id =
        resume::find(&dir, &root_text, None, prefix)?.ok_or_else(|| Error::NothingToResume {
            what: format!("in {root_text}"),
            available: Vec::new(),
        })?;
    let (ckpt, record) = resume::take(&dir, &id)?;
    if Path::new(&record.root) != root {
        std::env::set_current_dir(&record.root)
            .map_err(|e| Error::io(format!("cannot resume in {}", record.root), e))?;
    }
    let opts = given(RunOptions::from_saved(&record.target, &record.options));
    execute(
        &opts,
        &mut Cli,
        Origin::Resumed(Box::new(Keeper::new(ckpt, record))),
    )
}

fn stderr_is_terminal() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
}

fn project_root() -> Result<PathBuf, Error> {
    std::env::current_dir().map_err(|e| Error::io("cannot determine the current directory", e))
}

fn execute(opts: &RunOptions, observer: &mut dyn Observer, origin: Origin) -> Result<(), Error> {
    let project_root = project_root()?;
    let run_id = match &origin {
        Origin::New => run_id(),
        Origin::Resumed(keeper) => keeper.record().run_id.clone(),
    };
    let resumed = matches!(origin, Origin::Resumed(_));
    // `--log` wins over LOOPX_LOG; a relative path is the project root's.
    let log = opts.log.clone().or_else(|| {
        std::env::var_os("LOOPX_LOG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    // Notes on probable mistakes: asked for with -v, or by default at a
    // terminal the CLI shares with its scripts. Not under the API (its
    // terminal is the consumer's), nor without a terminal, where stderr
    // stays exactly the spec's (DESIGN.md "Beyond the spec").
    let notes = opts.verbose || (observer.shares_terminal() && stderr_is_terminal());
    // The restart note is the exception: a loop with no -n that only
    // restarts on plain text runs until interrupted, so it is said once on
    // stderr whatever stderr is (CLI runs; the API's consumer sees every
    // output itself). With -n, restarting is bounded and asked for.
    let mut report = Reporter::new(
        log.as_deref(),
        opts.verbose,
        notes,
        observer.shares_terminal() && opts.max_iterations.is_none(),
        &run_id,
        observer.owns_stdout(),
    )?;
    report.watch(opts.on_event.as_ref(), &run_id, &opts.target);
    match &origin {
        Origin::New => report.run_start(&opts.target, &opts.to_json(), &project_root),
        Origin::Resumed(keeper) => report.run_resume(
            &opts.target,
            &opts.to_json(),
            &project_root,
            keeper.record().iteration,
        ),
    }
    let mut state = Ended::default();
    let result = run_loop(
        opts,
        observer,
        &mut report,
        &project_root,
        &run_id,
        origin,
        &mut state,
    );
    report.run_end(&result, state.cost_reported.then_some(state.cost));
    let Some(keeper) = state.keeper else {
        return result.map(|_| ());
    };
    let ended = |err: &Error| checkpoint::Ended {
        reason: err.reason().to_string(),
        exit_code: err.exit_code(),
        at_ms: clock::now_ms(),
    };
    match result {
        Err(err) if !state.permanent && worth_resuming(&err, keeper.record()) => {
            keeper.end(ended(&err), state.active_ms, state.cost);
            // Every ending that keeps the run says how to carry it on.
            Err(err.with_resume_line(&run_id))
        }
        // A resumed run that loopx refused to carry on (its saved input
        // unreadable, a workflow gone) still holds what it did before:
        // kept, without the line, since resuming again meets the refusal.
        Err(err) if resumed && !state.permanent => {
            keeper.end(ended(&err), state.active_ms, state.cost);
            Err(err)
        }
        result => {
            keeper.finish();
            result.map(|_| ())
        }
    }
}

/// Whether a run that ended with `err` is kept for `loopx resume`: it ended
/// at a script (Error::ends_at_a_script: not loopx refusing what is on
/// disk, which a resume would meet again), and a resume carries something
/// on: the run got past its first iteration, or it waits for a time it
/// saved. A run that fails in its very first script (a missing file, a
/// setting not given) has nothing to carry on: fix it and run it again.
/// Neither has a failure its script marked permanent (the caller checks).
fn worth_resuming(err: &Error, record: &checkpoint::Record) -> bool {
    err.ends_at_a_script()
        && (record.iteration > 1
            || record.wait_until_ms.is_some()
            || matches!(err, Error::WaitTooLong { .. }))
}

/// What the loop hands back for the end of the run: the checkpoint to
/// finish or keep, and the totals it records.
#[derive(Default)]
struct Ended {
    keeper: Option<Keeper>,
    cost: f64,
    cost_reported: bool,
    permanent: bool,
    active_ms: u64,
}

/// The agent settings in force: the inherited environment's, then the env
/// files' over them, as the scripts see them (agent/settings.rs).
fn agent_settings(files: &[(OsString, OsString)]) -> settings::Settings {
    let inherited: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| k.as_encoded_bytes().starts_with(b"AGENT"))
        .collect();
    settings::in_force(
        inherited
            .iter()
            .chain(files)
            .map(|(k, v)| (k.as_os_str(), v.as_os_str())),
    )
}

/// A new checkpoint for this run, when it can be kept (CLI runs with a
/// home to keep it in and a project root that is text).
fn new_keeper(
    run_id: &str,
    root: &Path,
    opts: &RunOptions,
    agent: settings::Settings,
) -> Option<Keeper> {
    let dir = checkpoint::dir()?;
    let now = clock::now_ms();
    // Checked (and made) here; old checkpoints are pruned at most once a
    // day, by a stamp (checkpoint.rs): a start costs the same however
    // many runs are kept.
    let ready =
        checkpoint::ready_dir(&dir).and_then(|()| checkpoint::prune_if_due(&dir, now).map(|_| ()));
    if let Err((dir, problem)) = ready {
        // Said, not silent: `loopx resume` would otherwise find nothing,
        // with no word of why (a directory of another user's is refused,
        // checkpoint.rs; one of ours that lost its privacy was repaired).
        messages::warn(&format!(
            "this run cannot be resumed: {} is not used for checkpoints, as {problem}",
            text::shown(&dir.to_string_lossy())
        ));
        return None;
    }
    let ckpt = Checkpoint::create_in(&dir, run_id).ok()?;
    let record = checkpoint::Record {
        run_id: run_id.to_string(),
        root: root.to_str()?.to_string(),
        target: opts.target.clone(),
        options: opts.saved(),
        script: String::new(),
        input: None,
        iteration: 0,
        attempt: 1,
        waits: 0,
        wait_until_ms: None,
        active_ms: 0,
        cost_usd: 0.0,
        started_ms: now,
        updated_ms: now,
        ended: None,
        agent,
    };
    Some(Keeper::new(ckpt, record))
}

fn run_loop(
    opts: &RunOptions,
    observer: &mut dyn Observer,
    report: &mut Reporter,
    project_root: &Path,
    run_id: &str,
    origin: Origin,
    ended: &mut Ended,
) -> Result<Done, Error> {
    let mut signals =
        Signals::install().map_err(|e| Error::io("cannot install signal handlers", e))?;
    // After the handlers: a shim that is gone already ends the run as SIGTERM.
    shim_parent::watch(&mut signals);
    process::become_subreaper();
    // A resumed run keeps its checkpoint whatever happens next.
    let resumed = match origin {
        Origin::Resumed(keeper) => Some(ended.keeper.insert(*keeper).record().clone()),
        Origin::New => None,
    };
    // The handlers are in place (SA_RESTART): reading an env file that is a
    // pipe must watch them, or an interrupt could not end it.
    let (d, vars) = prepare(project_root, opts, &mut signals)?;
    let agent_now = agent_settings(&vars);
    let start = resolve::start(&d, &opts.target)?;
    if opts.max_iterations == Some(0) {
        // §7.1 step 4: validated, nothing runs, no version check.
        return Ok(Done::MaxIterations);
    }
    // Where the first iteration starts: the target, or the saved script.
    let (mut current, mut stdin, mut step) = match &resumed {
        None => (start, None, StepStart::default()),
        Some(r) => {
            let input = ended
                .keeper
                .as_ref()
                .map(Keeper::input)
                .transpose()
                .map_err(|e| Error::io(format!("cannot read the saved input of run {run_id}"), e))?
                .flatten();
            let step = StepStart {
                attempt: r.attempt,
                waits: r.waits,
                wait_until_ms: r.wait_until_ms,
            };
            let input = input.map(|b| String::from_utf8_lossy(&b).into_owned());
            (resolve::start(&d, &r.script)?, input, step)
        }
    };
    // §7.1 step 5: the starting workflow, before the first iteration.
    let mut entered = EnteredWorkflows::default();
    entered.enter(current.workflow);

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
    // What the run was started with stays with it: a resume gives back
    // the agent settings its shell does not set again.
    let restored: Vec<(OsString, OsString)> = match (&resumed, ended.keeper.as_mut()) {
        (Some(r), Some(keeper)) => {
            let carried = settings::carry(&r.agent, &agent_now);
            for line in settings::describe(&carried) {
                messages::notice(&line);
            }
            let restored = carried
                .restored
                .iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect();
            keeper.set_agent(carried.merged);
            restored
        }
        _ => Vec::new(),
    };
    if resumed.is_none() && observer.keeps_checkpoint() {
        ended.keeper = new_keeper(run_id, project_root, opts, agent_now);
    }
    // What loopx has below it before its first script is not the run's to
    // end; nor is the watcher, which ends the run if loopx dies. Every
    // process of the run inherits a copy of the checkpoint's lock (beside
    // the watcher's mark, its pipe), which a script cannot shed the way it can shed
    // LOOPX_RUN_ID: resume refuses while any of them lives (resume.rs).
    // The watcher itself starts once the first script is spawned
    // (supervisor.rs), off that script's way.
    let spared = descendants::children_now();
    let watcher = watcher::Watcher::prepare(ended.keeper.as_ref().map(Keeper::lock_fd));
    let active_before = Duration::from_millis(resumed.as_ref().map_or(0, |r| r.active_ms));
    let mut lp = Loop {
        opts,
        sup: Supervisor::new(signals, observer.channel(), terminal),
        // §6.3: the JS/TS runtime is decided when the first such script
        // runs, then kept for the whole run.
        runtimes: runtime::Runtimes::new(
            runtime::Settings::from_env(&vars),
            project_root.to_path_buf(),
        ),
        // The shim's pid is for loopx alone (proc/shim_parent.rs).
        env: ScriptEnv::new(
            std::env::vars_os().filter(|(k, _)| k != shim_parent::VAR),
            &[&restored, &vars, &own],
        ),
        run_id: run_id.to_string(),
        budget_end: opts
            .max_time
            .and_then(|max| supervisor::deadline(max.saturating_sub(active_before))),
        iterations: resumed
            .as_ref()
            .map_or(0, |r| r.iteration.saturating_sub(1)),
        keeper: ended.keeper.take(),
        input_saved: resumed.is_some(),
        cost: resumed.as_ref().map_or(0.0, |r| r.cost_usd),
        cost_reported: resumed.as_ref().is_some_and(|r| r.cost_usd > 0.0),
        permanent: false,
        active_before,
        started: Instant::now(),
        report,
    };
    lp.sup.spare(spared);
    lp.sup.watch(watcher);
    let result = lp.iterate(
        &d,
        start,
        &mut current,
        &mut stdin,
        &mut step,
        observer,
        &mut entered,
    );
    ended.keeper = lp.keeper.take();
    ended.cost = lp.cost;
    ended.cost_reported = lp.cost_reported;
    ended.permanent = lp.permanent;
    ended.active_ms = lp.active().as_millis() as u64;
    result
}

impl<'d> Loop<'_> {
    /// The loop itself (§7.1 steps 6–11).
    #[allow(clippy::too_many_arguments)]
    fn iterate(
        &mut self,
        d: &'d Discovery,
        start: Resolved<'d>,
        current: &mut Resolved<'d>,
        stdin: &mut Option<String>,
        step: &mut StepStart,
        observer: &mut dyn Observer,
        entered: &mut EnteredWorkflows<'d>,
    ) -> Result<Done, Error> {
        self.runtimes
            .require_bash(current.workflow, current.script)?;
        self.runtimes
            .warn_unrunnable(current.workflow, current.script);
        loop {
            // §7.3: between iterations, an interrupt exits at once.
            self.sup.between_scripts()?;
            if self.budget_spent() {
                return Ok(Done::MaxTime);
            }
            if let Some(done) = self.cost_spent() {
                return Ok(done);
            }
            self.iterations += 1;
            let out = match self.run_step(current, stdin.as_deref(), std::mem::take(step))? {
                Step::Output(out) => out,
                Step::Done(done) => return Ok(done),
            };
            // §2.3: stop beats goto; §7.1 step 10: the -n limit ends the loop
            // after the final output, which is still observed.
            let limit = self
                .opts
                .max_iterations
                .is_some_and(|max| self.iterations >= max);
            let last = out.stop || limit;
            if !observer.output(&out, last, &mut self.sup)? {
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
            let had_input = stdin.is_some();
            (*current, *stdin) = resolve::next(d, start, current, out)?;
            // Saved again only when it changed (B6: a large result).
            self.input_saved &= !had_input && stdin.is_none();
            if !std::ptr::eq(previous, current.workflow) {
                // §7.1 step 11e: after the goto target is resolved, before it runs.
                entered.enter(current.workflow);
            }
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
