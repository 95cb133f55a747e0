//! The one error type of loopx. Each variant carries what the user needs to
//! see; `Display` renders the message and `exit_code` is the only place that
//! maps errors onto exit codes (§12).

use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;

use crate::target::Invalid;
use crate::text::{format_size, shown, terminal_safe};

#[derive(Debug)]
pub enum Error {
    /// Bad command line (§4.2, §12). `help` names the help to consult.
    Usage {
        message: String,
        help: &'static str,
    },
    /// `loopx run <target>` without `.loopx/` (§7.2). `above`: the nearest
    /// parent directory that has one, where loopx was probably meant to run.
    NoLoopxDir {
        root: PathBuf,
        above: Option<PathBuf>,
    },
    /// Name-restriction violations and collisions anywhere in `.loopx/`
    /// (§5.2–5.4): fatal for `run <target>`.
    Validation {
        problems: Vec<String>,
    },
    /// A CLI target string that fails §4.1 validation. `meant`: the
    /// target that exists for one written as a path or a file name
    /// (resolve::suggest).
    InvalidTarget {
        target: String,
        why: Invalid,
        meant: Option<String>,
    },
    /// A goto value that fails §4.1 validation, at transition time (§7.1 11a).
    InvalidGoto {
        goto: String,
        from: String,
        why: Invalid,
    },
    /// A workflow that is not in the discovery results. `goto_from` is set
    /// when a goto named it: the quoted goto value and the issuing script.
    /// Here and below, `hint` says why what is there is not what was asked
    /// for (discovery::why_no_workflow, why_no_script).
    UnknownWorkflow {
        workflow: String,
        available: Vec<String>,
        goto_from: Option<String>,
        hint: Option<String>,
    },
    UnknownScript {
        workflow: String,
        script: String,
        available: Vec<String>,
        goto_from: Option<String>,
        hint: Option<String>,
    },
    /// `run <workflow>` where the workflow has no `index` script (§2.1).
    MissingIndex {
        workflow: String,
        available: Vec<String>,
        hint: Option<String>,
    },
    /// `-e <path>` that does not exist (§8.2).
    EnvFileMissing {
        path: PathBuf,
    },
    /// An env file that exists but cannot be read (§8.1).
    EnvFileUnreadable {
        path: PathBuf,
        err: io::Error,
    },
    /// An env file over bounded_read's limit (a device, a runaway pipe).
    EnvFileTooLarge {
        path: PathBuf,
        /// That limit as it reads in a message (bounded_read's `LIMIT_TEXT`).
        limit: &'static str,
    },
    /// `loopx env set` with a name or value the env file cannot hold (§4.3).
    InvalidEnvName {
        name: String,
    },
    InvalidEnvValue {
        name: String,
    },
    /// Another `env set`/`env remove` held the env file's lock for too long.
    EnvLockTimeout {
        lock: PathBuf,
        waited: std::time::Duration,
    },
    /// A script ended with a non-zero exit code (§7.2). `crlf`: the
    /// script's file, when it is a bash script with CRLF line endings
    /// (probably why it failed).
    /// `bare_loopx`: the script's file, when it exited 127 (command not
    /// found) and calls `loopx` by name instead of `"$LOOPX_BIN"` (§3.4).
    ScriptFailed {
        script: String,
        code: i32,
        crlf: Option<PathBuf>,
        bare_loopx: Option<PathBuf>,
    },
    /// A script was killed by a signal: a non-zero exit for §7.2.
    ScriptKilled {
        script: String,
        signal: i32,
    },
    /// `--timeout` passed and no retry was left: the script's group was
    /// terminated. Exit 124, as `timeout(1)`.
    TimedOut {
        script: String,
        after: std::time::Duration,
    },
    /// A script's `retry_after` or `cost_usd` with a value loopx cannot use.
    InvalidExtension {
        script: String,
        field: &'static str,
        value: String,
        why: String,
    },
    /// A wait longer than `--max-wait`, or past `--max-time`'s budget: the
    /// run stops, resumable (exit 75, "try again later").
    WaitTooLong {
        script: String,
        /// The wait as a message shows it: `2026-11-25T14:00:00Z (in 4h12m)`.
        until: String,
        /// When the script asked to run again, milliseconds since the epoch.
        until_ms: i64,
        bound: crate::wait::TooLong,
        /// The run id to resume, when the run keeps a checkpoint (the
        /// CLI's do, the API's do not).
        resume_id: Option<String>,
    },
    /// `loopx resume` with nothing to resume: `what` says where it looked,
    /// `available` lists the resumable run ids there are.
    NothingToResume {
        what: String,
        available: Vec<String>,
    },
    /// `loopx init` where `.loopx/<workflow>` exists: nothing is written.
    InitExists {
        workflow: String,
        ready_made: bool,
    },
    /// `loopx forget <id>` of a run whose loopx still runs.
    ForgetLive {
        run_id: String,
    },
    /// `loopx resume` of a run whose scripts still run.
    ResumeBusy {
        run_id: String,
        pgids: Vec<i32>,
    },
    /// The script was stopped (SIGTTIN/SIGTTOU) for using the terminal while
    /// loopx did not hold it, and was ended rather than left stopped.
    ScriptNeedsTerminal {
        script: String,
        signal: i32,
    },
    /// The script could not be started, e.g. its file vanished mid-loop (§5.1).
    Spawn {
        script: String,
        program: String,
        err: io::Error,
    },
    /// A `.sh` script with neither `/bin/bash` nor a `bash` on PATH (§6.2).
    NoBash {
        script: String,
    },
    /// Neither the kernel nor argv[0] tells where the loopx binary is, so
    /// there is no LOOPX_BIN (§3.4); `tried` says what was tried and why
    /// it failed.
    NoOwnBinary {
        tried: Vec<String>,
    },
    /// `LOOPX_JS_RUNTIME` is neither empty, `node` nor `bun`.
    BadJsRuntime {
        value: String,
    },
    /// A JS/TS script with no `node` (nor `bun`) on PATH (§6.3).
    NoNode {
        script: String,
    },
    /// An install source §10.1 does not accept; the message says why and
    /// what is supported.
    InstallSource {
        message: String,
    },
    /// `git` or `curl` is not installed (or not on PATH).
    ToolMissing {
        tool: &'static str,
        purpose: &'static str,
    },
    /// `git clone` failed; `detail` is the gist of git's stderr. Here and
    /// below, `url` and `detail` come redacted (install::redact): they may
    /// hold credentials or signed query strings.
    GitClone {
        url: String,
        detail: String,
    },
    /// The cloned repository has no files at all.
    EmptyRepository {
        url: String,
    },
    /// The tarball download failed: an HTTP status (`status`) or a transfer
    /// error (`detail`, curl's own words).
    Download {
        url: String,
        status: Option<u16>,
        detail: String,
    },
    /// A download or clone received less than `min_speed` bytes a second
    /// for `secs` seconds (or could not even connect in that time) and was
    /// abandoned. `what` is "download of <url>" or "git clone of <url>".
    InstallStalled {
        what: String,
        secs: u64,
        /// The speed that counted as stalled (install/limits.rs `MIN_SPEED`).
        min_speed: u64,
    },
    /// `LOOPX_INSTALL_STALL_TIMEOUT` is not a positive whole number.
    BadStallTimeout {
        value: String,
    },
    /// A download, an extraction or a checkout went over
    /// `LOOPX_INSTALL_MAX_SIZE` (`limit` bytes); `what` says which.
    InstallTooLarge {
        what: String,
        limit: u64,
    },
    /// `LOOPX_INSTALL_MAX_SIZE` is not a size.
    BadMaxSize {
        value: String,
    },
    /// The downloaded tarball cannot be extracted (not gzip, corrupt, or an
    /// entry refused as unsafe).
    Archive {
        url: String,
        err: ExtractError,
    },
    /// A local directory (`loopx install ./dir`) could not be copied: an
    /// entry refused under the archive rules, or a read that failed.
    LocalCopy {
        dir: String,
        err: ExtractError,
    },
    /// §10.7 preflight: every failure across every selected workflow.
    InstallPreflight {
        failures: Vec<String>,
    },
    /// §10.7 step 3: writing a workflow into the staging directory failed.
    InstallStaging {
        workflow: String,
        err: io::Error,
    },
    /// §10.7 step 4: a failure during commit, after `committed` were moved
    /// into `.loopx/` and before `not_committed` were.
    InstallCommit {
        workflow: String,
        err: io::Error,
        committed: Vec<String>,
        not_committed: Vec<String>,
    },
    /// `LOOPX_JS_RUNTIME=bun` with no `bun` to be found.
    NoBun {
        script: String,
    },
    /// A `.ts` script without tsx and without Node type stripping, or a
    /// `.jsx`/`.tsx` script without tsx, on Node (§6.3).
    NoTypeScriptRuntime {
        script: String,
        jsx: bool,
    },
    /// Neither XDG_CACHE_HOME nor HOME tells where the embedded helper
    /// files go (standalone binary, §3.3).
    NoCacheDir,
    /// The embedded helper files could not be written.
    HelperCache {
        dir: PathBuf,
        err: io::Error,
    },
    /// The API's consumer went away while a script ran; the script's group
    /// was terminated (proc/process.rs) and the loop ends quietly (§9.1).
    ConsumerGone,
    /// Already reported through the API channel (api.rs); only the exit
    /// code remains.
    Reported {
        code: i32,
    },
    /// `loopx status` found a state directory it does not use (status.rs):
    /// `why` says what is wrong with it.
    StateDirNotUsed {
        dir: PathBuf,
        why: String,
    },
    /// The checkpoint directory (or the `loopx` one above it) is not the
    /// user's own (checkpoint.rs): nothing in it is read or written.
    CheckpointDirRefused {
        dir: PathBuf,
        why: String,
    },
    /// stdout was closed under us (e.g. `loopx env list | head -0`).
    StdoutClosed,
    /// loopx was interrupted by a signal: exit 128 + N (§7.3).
    Interrupted {
        signal: i32,
    },
    /// Any other operating-system failure, with what loopx was doing.
    Io {
        context: String,
        err: io::Error,
    },
}

impl Error {
    pub fn usage(message: impl Into<String>, help: &'static str) -> Error {
        Error::Usage {
            message: message.into(),
            help,
        }
    }

    pub fn io(context: impl Into<String>, err: io::Error) -> Error {
        Error::Io {
            context: context.into(),
            err,
        }
    }

    /// §12: 128+N for signals, 1 for everything else; beyond the spec, 124
    /// for a timeout with no retry left (DESIGN.md "Beyond the spec").
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::TimedOut { .. } => 124,
            Error::WaitTooLong { .. } => 75,
            Error::Interrupted { signal } => 128 + signal,
            Error::StdoutClosed => 128 + libc::SIGPIPE,
            Error::Reported { code } => *code,
            _ => 1,
        }
    }

    /// When a run that stopped for a wait asked to run again (milliseconds
    /// since the epoch): the run log's `resume_at`.
    pub fn resume_at_ms(&self) -> Option<i64> {
        match self {
            Error::WaitTooLong { until_ms, .. } => Some(*until_ms),
            _ => None,
        }
    }

    /// Whether the run ended at a script, so that running it again may go
    /// differently: the script failed, was killed or timed out, gave an
    /// output extension loopx could not use, the user interrupted it, or
    /// it asked for a wait past the budget. Every other error is loopx
    /// refusing what is on disk or in the environment (a missing workflow,
    /// script, env file or runtime, an invalid goto, a script file gone):
    /// a resume would meet the same refusal, so such runs are not kept
    /// (engine.rs, execute).
    pub fn ends_at_a_script(&self) -> bool {
        matches!(
            self,
            Error::ScriptFailed { .. }
                | Error::ScriptKilled { .. }
                | Error::TimedOut { .. }
                | Error::ScriptNeedsTerminal { .. }
                | Error::InvalidExtension { .. }
                | Error::Interrupted { .. }
                | Error::WaitTooLong { .. }
        )
    }

    /// Whether the message itself gives the `loopx resume` command.
    fn names_resume(&self) -> bool {
        matches!(
            self,
            Error::WaitTooLong {
                resume_id: Some(_),
                ..
            }
        )
    }

    /// The error's own line, then the `loopx resume` line of the run it
    /// ended (a kept checkpoint), on stderr; `Reported` for main, which has
    /// nothing left to print.
    pub fn with_resume_line(self, run_id: &str) -> Error {
        // Written here, as main would write them (messages.rs sits above
        // this module); the run id is validated, but escaped all the same.
        let mut err = io::stderr();
        if !self.is_silent() {
            let _ = writeln!(err, "loopx: error: {}", terminal_safe(&self.to_string()));
        }
        if !self.names_resume() {
            let line = format!("the run can be resumed: loopx resume {run_id}");
            let _ = writeln!(err, "loopx: {}", terminal_safe(&line));
        }
        Error::Reported {
            code: self.exit_code(),
        }
    }

    /// Why the run ended, as the JS API's `reason` (and the run log) say.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::TimedOut { .. } => "timed_out",
            Error::WaitTooLong { .. } => "wait",
            Error::InvalidExtension { .. } => "invalid_output",
            Error::ScriptFailed { .. }
            | Error::ScriptKilled { .. }
            | Error::ScriptNeedsTerminal { .. }
            | Error::Spawn { .. } => "script_failed",
            Error::InvalidGoto { .. } => "invalid_goto",
            Error::UnknownWorkflow { goto_from, .. } | Error::UnknownScript { goto_from, .. }
                if goto_from.is_some() =>
            {
                "invalid_goto"
            }
            Error::Interrupted { .. } => "signal",
            Error::ConsumerGone => "consumer",
            _ => "error",
        }
    }

    /// Whether to print anything: an interrupted loop exits quietly with its
    /// signal code, as shells do.
    pub fn is_silent(&self) -> bool {
        matches!(
            self,
            Error::Interrupted { .. }
                | Error::StdoutClosed
                | Error::Reported { .. }
                | Error::ConsumerGone
        )
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// How to get a runtime for TypeScript and JSX (Error::NoTypeScriptRuntime,
/// and the warning before a run that would meet it, runtime.rs).
pub const TYPESCRIPT_HINT: &str = "install loopx with `npm install -g loopx` (it brings tsx), \
     or `npm install -D tsx` in the project, or install Bun and set LOOPX_JS_RUNTIME=bun";

/// `s` as one shell word, for a command a hint suggests: quoted unless
/// every character is plainly safe.
fn sh_word(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A `hint:` line after a message, when there is one.
fn with_hint(f: &mut fmt::Formatter<'_>, hint: &Option<String>) -> fmt::Result {
    match hint {
        Some(hint) => write!(f, "\nhint: {hint}"),
        None => Ok(()),
    }
}

fn via(goto_from: &Option<String>) -> String {
    match goto_from {
        Some(from) => format!(" (goto {})", shown(from)),
        None => String::new(),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage { message, help } => {
                write!(f, "{}\nhint: see '{help}'", shown(message))
            }
            Error::NoLoopxDir { root, above } => {
                // One statement, then a hint that adds something: how to
                // get a workflow, or (§5.1: loopx looks only in the current
                // directory, never above it) where the one meant probably is.
                write!(f, "no .loopx/ directory in {}\nhint: ", root.display())?;
                match above {
                    Some(dir) => write!(
                        f,
                        "run loopx from {}, which has one (or `loopx init` to start one here)",
                        shown(&dir.to_string_lossy())
                    ),
                    None => f.write_str(
                        "`loopx init` writes a workflow to start from (.loopx/main/index.sh); \
                         `loopx init -h` lists the ready-made ones",
                    ),
                }
            }
            Error::Validation { problems } => {
                f.write_str("invalid .loopx/ contents, refusing to start:")?;
                for p in problems {
                    write!(f, "\n  - {p}")?;
                }
                f.write_str("\nhint: fix or rename the entries above; `loopx run -h` lists what was found")
            }
            Error::InvalidTarget { target, why, meant } => {
                write!(f, "invalid target '{}': {why}", shown(target))?;
                if let Some(meant) = meant {
                    write!(
                        f,
                        "\nhint: did you mean '{meant}'? A target is workflow:script, \
                         without a path or a file extension"
                    )?;
                } else if matches!(why, Invalid::TrailingColon) {
                    f.write_str("\nhint: to run a workflow's index, write just the workflow name")?;
                }
                Ok(())
            }
            Error::InvalidExtension {
                script,
                field,
                value,
                why,
            } => write!(f, "invalid {field} {} from {script}: {why}", shown(value)),
            Error::WaitTooLong {
                script,
                until,
                bound,
                resume_id,
                ..
            } => {
                let past = match bound {
                    crate::wait::TooLong::MaxWait(d) => {
                        format!("longer than --max-wait {}", crate::duration::format(*d))
                    }
                    crate::wait::TooLong::MaxTime(d) => format!(
                        "past the --max-time {} budget",
                        crate::duration::format(*d)
                    ),
                };
                write!(f, "{script} asked to run again at {until}, {past}")?;
                match resume_id {
                    Some(id) => write!(
                        f,
                        "; the run stops here and can be resumed: loopx resume {id}"
                    ),
                    None => f.write_str("; the run stops here"),
                }
            }
            Error::NothingToResume { what, available } => {
                write!(f, "no resumable run {what}")?;
                if available.is_empty() {
                    f.write_str(" (there is none: a run is resumable when it ended by a signal, a failure or a wait; a run that finished is not)")
                } else {
                    write!(f, " (resumable runs: {})", available.join(", "))
                }
            }
            Error::InitExists {
                workflow,
                ready_made,
            } => {
                write!(
                    f,
                    ".loopx/{workflow} already exists; nothing was written\n\
                     hint: run it with `loopx run {workflow}`"
                )?;
                if *ready_made {
                    f.write_str(
                        ", or replace it with the release's copy: `loopx install -y -w \
                         <name> <workflows.tar.gz URL>` (README, \"Ready-made workflows\")",
                    )
                } else {
                    f.write_str(", or start another: `loopx init <name>`")
                }
            }
            Error::ForgetLive { run_id } => write!(
                f,
                "run {run_id} is still running (its loopx holds the checkpoint); \
                 nothing was forgotten\nhint: stop it first (see loopx status)"
            ),
            Error::ResumeBusy { run_id, pgids } if pgids.is_empty() => write!(
                f,
                "run {run_id} is still running: another loopx holds its checkpoint (see loopx status)"
            ),
            Error::ResumeBusy { run_id, pgids } => {
                let groups: Vec<String> = pgids.iter().map(|g| g.to_string()).collect();
                write!(
                    f,
                    "run {run_id} cannot be resumed yet: its scripts still run (process group {}); \
                     wait for them to end, or end them with: kill -TERM -{}",
                    groups.join(", "),
                    groups.join(" -")
                )
            }
            Error::InvalidGoto { goto, from, why } => {
                write!(f, "invalid goto target '{}' from {from}: {why}", shown(goto))?;
                if matches!(why, Invalid::TrailingColon) {
                    f.write_str("\nhint: to go to another workflow's index, write 'workflow:index'")?;
                }
                Ok(())
            }
            Error::UnknownWorkflow {
                workflow,
                available,
                goto_from,
                hint,
            } => {
                write!(
                    f,
                    "workflow '{workflow}' not found in .loopx/{} (workflows: {})",
                    via(goto_from),
                    list(available)
                )?;
                with_hint(f, hint)
            }
            Error::UnknownScript {
                workflow,
                script,
                available,
                goto_from,
                hint,
            } => {
                write!(
                    f,
                    "workflow '{workflow}' has no script '{script}'{} (scripts: {})",
                    via(goto_from),
                    list(available)
                )?;
                with_hint(f, hint)
            }
            Error::MissingIndex {
                workflow,
                available,
                hint: Some(hint),
            } => write!(
                f,
                "workflow '{workflow}' has no index script (scripts: {})\nhint: {hint}",
                list(available),
            ),
            Error::MissingIndex {
                workflow,
                available,
                hint: None,
            } => write!(
                f,
                "workflow '{workflow}' has no index script, so it needs an explicit script \
                 (scripts: {})\nhint: run e.g. `loopx run {workflow}:{}`",
                list(available),
                available.first().map(String::as_str).unwrap_or("<script>")
            ),
            Error::EnvFileMissing { path } => {
                write!(f, "env file not found: {}", shown(&path.to_string_lossy()))
            }
            Error::EnvFileUnreadable { path, err } => {
                write!(
                    f,
                    "cannot read env file {}: {err}",
                    shown(&path.to_string_lossy())
                )
            }
            Error::EnvFileTooLarge { path, limit } => write!(
                f,
                "cannot read env file {}: it is larger than {limit}, the limit for an env file",
                shown(&path.to_string_lossy()),
            ),
            Error::InvalidEnvName { name } => write!(
                f,
                "invalid variable name '{name}': names match [A-Za-z_][A-Za-z0-9_]*"
            ),
            Error::InvalidEnvValue { name } => write!(
                f,
                "the value for '{name}' contains a line break; env files hold single-line values only"
            ),
            Error::NoBash { script } => write!(
                f,
                "cannot run {script}: loopx runs .sh scripts with bash, and there is \
                 no /bin/bash and no bash on PATH; install bash (e.g. `apk add bash` \
                 on Alpine, `apt-get install bash` on Debian) or put it on PATH"
            ),
            Error::NoOwnBinary { tried } => write!(
                f,
                "cannot determine the path of the loopx binary, which scripts get as \
                 LOOPX_BIN: {}\nhint: mount /proc, or start loopx by its full path",
                tried.join("; ")
            ),
            Error::EnvLockTimeout { lock, waited } => write!(
                f,
                "another loopx env command has held the lock {} for over {}s; \
                 nothing was changed\nhint: if no loopx env command is running, \
                 check which process holds it (e.g. `fuser {}`)",
                shown(&lock.to_string_lossy()),
                waited.as_secs(),
                shown(&lock.to_string_lossy())
            ),
            Error::ScriptFailed {
                script,
                code,
                crlf,
                bare_loopx,
            } => {
                write!(f, "script {script} exited with code {code}; stopping the loop")?;
                if let Some(path) = bare_loopx {
                    write!(
                        f,
                        "\nhint: {} calls `loopx` by name, and exit code 127 is bash's \
                         \"command not found\"; scripts call the loopx that runs them as \
                         \"$LOOPX_BIN\" (e.g. `\"$LOOPX_BIN\" output --stop`), which needs \
                         no loopx on PATH",
                        shown(&path.to_string_lossy())
                    )?;
                }
                if let Some(path) = crlf {
                    let path = path.to_string_lossy();
                    write!(
                        f,
                        "\nhint: {} has Windows (CRLF) line endings, and bash reads each \\r \
                         as part of the line (`$'\\r': command not found`); convert the file, \
                         e.g. `sed -i 's/\\r$//' {}`",
                        shown(&path),
                        sh_word(&shown(&path))
                    )?;
                }
                Ok(())
            }
            Error::ScriptKilled { script, signal } => write!(
                f,
                "script {script} was killed by signal {} ({signal}); stopping the loop",
                signal_name(*signal)
            ),
            Error::TimedOut { script, after } => write!(
                f,
                "{script} timed out after {}; its process group was terminated",
                crate::duration::format(*after)
            ),
            Error::ScriptNeedsTerminal { script, signal } => write!(
                f,
                "script {script} tried to {} the terminal, but loopx is not in the \
                 terminal's foreground (it was started in the background, or runs under \
                 the JS API), so it was stopped; stopping the loop\n\
                 hint: run loopx in the foreground to give scripts the terminal, or give \
                 the script its input another way",
                if *signal == libc::SIGTTIN { "read from" } else { "write to or configure" }
            ),
            Error::Spawn {
                script,
                program,
                err,
            } => write!(f, "cannot start script {script} ({program}): {err}"),
            Error::BadJsRuntime { value } => write!(
                f,
                "LOOPX_JS_RUNTIME is '{value}'; it must be 'node', 'bun' or empty \
                 (empty: Node, with tsx for TypeScript)"
            ),
            Error::NoNode { script } => write!(
                f,
                "cannot run {script}: no `node` found on PATH\n\
                 hint: install Node.js >= 20.6, or install Bun and set LOOPX_JS_RUNTIME=bun"
            ),
            Error::NoBun { script } => write!(
                f,
                "cannot run {script}: LOOPX_JS_RUNTIME is 'bun' but no `bun` found on PATH\n\
                 hint: install Bun (https://bun.sh) or unset LOOPX_JS_RUNTIME to use Node"
            ),
            Error::NoTypeScriptRuntime { script, jsx } => {
                if *jsx {
                    write!(
                        f,
                        "cannot run {script}: JSX needs tsx or Bun, and neither was found \
                         (looked for the loopx package's tsx, node_modules/tsx in the workflow \
                         and the project, and `tsx` on PATH)"
                    )?;
                } else {
                    write!(
                        f,
                        "cannot run {script}: no TypeScript runtime found: no tsx (looked for \
                         the loopx package's tsx, node_modules/tsx in the workflow and the \
                         project, and `tsx` on PATH), and this Node cannot strip types itself \
                         (Node 22.10 and later can)"
                    )?;
                }
                write!(f, "\nhint: {TYPESCRIPT_HINT}")
            }
            Error::NoCacheDir => f.write_str(
                "cannot find a cache directory for loopx's script helpers: \
                 neither XDG_CACHE_HOME nor HOME is set\n\
                 hint: set XDG_CACHE_HOME to a writable directory",
            ),
            Error::HelperCache { dir, err } => write!(
                f,
                "cannot write loopx's script helpers to {}: {err}\n\
                 hint: set XDG_CACHE_HOME to a writable directory",
                dir.display()
            ),
            Error::InstallSource { message } => {
                write!(f, "{message}\nhint: see 'loopx install --help'")
            }
            Error::ToolMissing { tool, purpose } => write!(
                f,
                "`{tool}` was not found on PATH; loopx install needs it {purpose}\n\
                 hint: install {tool} and try again"
            ),
            Error::GitClone { url, detail } => {
                write!(f, "git clone of {url} failed: {detail}")
            }
            Error::EmptyRepository { url } => write!(
                f,
                "the repository {url} is empty: it has no commits or no files, \
                 so there is no workflow to install"
            ),
            Error::Download {
                url,
                status: Some(status),
                ..
            } => write!(f, "download of {url} failed: HTTP status {status}"),
            Error::Download { url, detail, .. } => {
                write!(f, "download of {url} failed: {detail}")
            }
            Error::InstallStalled {
                what,
                secs,
                min_speed,
            } => write!(
                f,
                "{what} stalled: less than {min_speed} bytes/s arrived for {secs}s \
                 (LOOPX_INSTALL_STALL_TIMEOUT), so loopx gave up; nothing was installed\n\
                 hint: LOOPX_INSTALL_STALL_TIMEOUT=<seconds> waits longer"
            ),
            Error::InstallTooLarge { what, limit } => write!(
                f,
                "{what} is larger than the install size limit of {} (LOOPX_INSTALL_MAX_SIZE), \
                 so loopx gave up; nothing was installed\n\
                 hint: LOOPX_INSTALL_MAX_SIZE=<bytes, or with a K, M or G suffix> raises it",
                format_size(*limit)
            ),
            Error::BadMaxSize { value } => write!(
                f,
                "LOOPX_INSTALL_MAX_SIZE must be a size in bytes, or with a K, M or G suffix \
                 (e.g. 512M), got '{}'",
                shown(value)
            ),
            Error::BadStallTimeout { value } => write!(
                f,
                "LOOPX_INSTALL_STALL_TIMEOUT must be a whole number of seconds (at least 1), \
                 got '{}'",
                shown(value)
            ),
            Error::Archive { url, err } => {
                write!(f, "cannot extract the tarball from {url}: {err}")
            }
            Error::LocalCopy { dir, err } => {
                write!(f, "cannot install from {}: ", shown(dir))?;
                match err {
                    // The archive rules, worded for a directory.
                    ExtractError::Unsafe { entry, reason } => write!(
                        f,
                        "refusing {}: {}",
                        shown(entry),
                        reason.replace("the archive", "the directory")
                    )?,
                    err => write!(f, "{err}")?,
                }
                f.write_str("; nothing was installed")
            }
            Error::InstallPreflight { failures } => {
                f.write_str("install refused, nothing was installed:")?;
                for failure in failures {
                    write!(f, "\n  - {failure}")?;
                }
                Ok(())
            }
            Error::InstallStaging { workflow, err } => write!(
                f,
                "cannot stage workflow '{workflow}': {err}; nothing was installed"
            ),
            Error::InstallCommit {
                workflow,
                err,
                committed,
                not_committed,
            } => write!(
                f,
                "cannot move workflow '{workflow}' into .loopx/: {err}\n\
                 committed: {}\nnot committed: {}",
                list(committed),
                list(not_committed)
            ),
            Error::StateDirNotUsed { dir, why } => write!(
                f,
                "cannot list runs: {} is not used for run state, as {why}; remove it, \
                 or set XDG_RUNTIME_DIR to a private directory of yours",
                shown(&dir.to_string_lossy())
            ),
            Error::CheckpointDirRefused { dir, why } => write!(
                f,
                "cannot use {} for resume checkpoints, as {why}; remove it, \
                 or set XDG_STATE_HOME to a directory of yours",
                shown(&dir.to_string_lossy())
            ),
            Error::StdoutClosed => f.write_str("stdout is closed"),
            Error::Reported { code } => write!(f, "failed with exit code {code}"),
            Error::ConsumerGone => f.write_str("the API consumer went away"),
            Error::Interrupted { signal } => {
                write!(f, "interrupted by {}", signal_name(*signal))
            }
            Error::Io { context, err } => write!(f, "{context}: {err}"),
        }
    }
}

/// Why an archive (install/archive.rs) could not be extracted, or a local
/// directory copied. Here, beside `Error`, so its wording sits with the
/// rest of loopx's messages and this module imports nothing above it.
#[derive(Debug)]
pub enum ExtractError {
    /// The file does not start with the gzip magic bytes.
    NotGzip,
    /// The gzip stream or the tar data inside it is damaged.
    Corrupt(String),
    /// An entry would write outside the destination, or through a symlink.
    Unsafe { entry: String, reason: String },
    /// Reading the archive file or writing the destination failed.
    Io { path: PathBuf, error: io::Error },
    /// The files' contents add up to more than this many bytes.
    TooLarge { limit: u64 },
}

impl fmt::Display for ExtractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExtractError::NotGzip => write!(f, "not a gzip archive"),
            ExtractError::Corrupt(detail) => write!(f, "corrupt archive: {detail}"),
            ExtractError::Unsafe { entry, reason } => {
                write!(f, "refusing archive entry {entry:?}: {reason}")
            }
            ExtractError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            ExtractError::TooLarge { limit } => {
                write!(f, "its files add up to more than {limit} bytes")
            }
        }
    }
}

impl std::error::Error for ExtractError {}

pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        #[cfg(any(target_os = "linux", target_os = "android"))]
        libc::SIGPWR => "SIGPWR",
        _ => "a signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_render_on_one_line_plus_the_hint() {
        let e = Error::usage("expected one target, got 2: a\nb c", "loopx run --help");
        assert_eq!(
            e.to_string(),
            "expected one target, got 2: a\\nb c\nhint: see 'loopx run --help'"
        );
    }

    #[test]
    fn hints_point_the_way() {
        let e = Error::NoLoopxDir {
            root: "/p/src/deep".into(),
            above: Some("/p".into()),
        };
        assert_eq!(
            e.to_string(),
            "no .loopx/ directory in /p/src/deep\n\
             hint: run loopx from /p, which has one (or `loopx init` to start one here)"
        );
        let e = Error::InvalidTarget {
            target: "ralph/review".into(),
            why: Invalid::BadName("ralph/review".into()),
            meant: Some("ralph:review".into()),
        };
        assert!(e.to_string().ends_with(
            "\nhint: did you mean 'ralph:review'? A target is workflow:script, \
             without a path or a file extension"
        ));
        let e = Error::ScriptFailed {
            script: "w:index".into(),
            code: 127,
            crlf: Some("/p/.loopx/w/it's.sh".into()),
            bare_loopx: None,
        };
        assert_eq!(
            e.to_string(),
            "script w:index exited with code 127; stopping the loop\n\
             hint: /p/.loopx/w/it's.sh has Windows (CRLF) line endings, and bash reads each \\r \
             as part of the line (`$'\\r': command not found`); convert the file, \
             e.g. `sed -i 's/\\r$//' '/p/.loopx/w/it'\\''s.sh'`"
        );
    }

    #[test]
    fn targets_and_gotos_with_control_characters_stay_on_one_line() {
        let e = Error::InvalidTarget {
            target: "a\nb".into(),
            why: crate::target::Invalid::BadName("a\nb".into()),
            meant: None,
        };
        assert_eq!(e.to_string().lines().count(), 1, "{e}");
        let e = Error::InvalidGoto {
            goto: "x\u{1b}]0;t\u{7}".into(),
            from: "w:index".into(),
            why: crate::target::Invalid::BadName("x\u{1b}]0;t\u{7}".into()),
        };
        assert!(!e.to_string().contains('\u{1b}'), "{e}");
    }
}
