//! `loopx agent`'s effects: settings from options and the environment,
//! the fallback chain, one agent process with its files, the hang
//! detector and signals. The decisions are the pure modules' (class,
//! summary, preset, stream); this file only carries them out.

use std::fs::{self, File};
use std::io::{self, IsTerminal, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use super::class::{self, Class, End, Verdict};
use super::preset::{self, Setup};
use super::stream::{self, Facts, Kind};
use super::summary::{self, Ending, Paths};
use super::{codex, cost, progress, read, state};
use crate::proc::process::{self as sys, kill_group};
use crate::proc::signals::Signals;

/// `loopx agent`'s options (docs/agent.md); `None` falls back to the
/// environment.
#[derive(Debug, Default, PartialEq)]
pub struct Args {
    pub agents: Option<String>,
    pub cmd: Option<String>,
    pub prompt: Option<PathBuf>,
    pub output: bool,
    pub done_line: Option<String>,
    pub dir: Option<PathBuf>,
    pub step: Option<String>,
    pub workdir: Option<PathBuf>,
    pub allow: Option<String>,
    pub idle_timeout: Option<Duration>,
    pub pause_at: Option<f64>,
    pub fresh: bool,
}

/// How long to wait for the agent's group to end after SIGTERM.
const GRACE: Duration = Duration::from_secs(3);
/// The least time a CLI has for its first event (see `supervise`).
const START_UP: Duration = Duration::from_secs(60);
/// The longest stdout line parsed as an event (longer ones are kept, unread).
const LINE_MAX: usize = 16 << 20;

/// Everything a run needs, resolved once.
struct Settings {
    chain: Vec<Kind>,
    cmd: Option<String>,
    label: String,
    dir: PathBuf,
    step: String,
    suffix: String,
    workdir: PathBuf,
    idle: Duration,
    pause_at: Option<f64>,
    fresh: bool,
    setup: Setup,
    limit_wait: u64,
    waits: u32,
    prices: (Option<f64>, Option<f64>),
    /// Steps whose files the directory keeps (0: all).
    keep_steps: usize,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Runs `loopx agent`; returns its exit code.
pub fn run(args: &Args) -> i32 {
    let label = env("LOOPX_WORKFLOW").unwrap_or_else(|| "agent".into());
    let s = match settings(args, label) {
        Ok(s) => s,
        Err(why) => return missing(args, "agent", &why),
    };
    // The agent's orphaned tools come back to us, to be ended and reaped.
    sys::become_subreaper();
    let Ok(mut signals) = Signals::install() else {
        say(&s.label, "cannot install signal handlers");
        return 1;
    };
    if let Err(e) = fs::create_dir_all(&s.dir) {
        say(&s.label, &format!("cannot create {}: {e}", s.dir.display()));
        return 1;
    }
    let prompt = match prompt_file(args, &s) {
        Ok(p) => p,
        Err(why) => return missing(args, &s.label, &why),
    };
    let code = chain(args, &s, &prompt, &mut signals);
    // After the step: the files of the oldest steps beyond the bound go.
    super::keep::prune(&s.dir, s.keep_steps);
    code
}

/// A permanent failure before any agent ran.
fn missing(args: &Args, label: &str, why: &str) -> i32 {
    say(label, why);
    if args.output {
        print_out(&summary::output(Class::Missing, "", None, None, None));
    }
    Class::Missing.exit_code()
}

fn say(label: &str, msg: &str) {
    let _ = writeln!(io::stderr(), "{}: {msg}", progress::escape(label));
}

fn print_out(text: &str) {
    let mut out = io::stdout().lock();
    let _ = out
        .write_all(text.as_bytes())
        .and_then(|_| out.write_all(b"\n"));
}

fn settings(args: &Args, label: String) -> Result<Settings, String> {
    let cmd = args.cmd.clone().or_else(|| env("AGENT_CMD"));
    let names = args.agents.clone().or_else(|| env("AGENT"));
    let chain: Vec<Kind> = match (&names, &cmd) {
        (None, Some(_)) => vec![Kind::Plain],
        (names, _) => names
            .as_deref()
            .unwrap_or("claude")
            .split(',')
            .map(|n| {
                Kind::from_name(n.trim()).ok_or_else(|| {
                    format!(
                        "the agent must be claude, codex or gemini (or set AGENT_CMD), not '{}'",
                        progress::escape(n.trim())
                    )
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let run_id = env("LOOPX_RUN_ID").unwrap_or_else(|| "agent".into());
    let step = args.step.clone().unwrap_or_else(|| {
        env("LOOPX_ITERATION").map_or("step".into(), |i| format!("iteration-{i}"))
    });
    if step.is_empty() || step.contains('/') || step.starts_with('.') {
        return Err(format!(
            "--step must be a file name, not '{}'",
            progress::escape(&step)
        ));
    }
    let mut allow: Vec<String> = env("AGENT_ALLOW")
        .map(|a| preset::split_list(&a).collect())
        .unwrap_or_default();
    allow.extend(
        args.allow
            .as_deref()
            .map(|a| preset::split_list(a).collect::<Vec<_>>())
            .unwrap_or_default(),
    );
    let workdir = args
        .workdir
        .clone()
        .or_else(|| env("LOOPX_PROJECT_ROOT").map(PathBuf::from))
        .unwrap_or_else(|| ".".into());
    let count = |name: &str| env(name).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
    let mut suffix = String::new();
    if count("LOOPX_WAITS") > 0 {
        suffix += &format!(".wait-{}", count("LOOPX_WAITS"));
    }
    if count("LOOPX_ATTEMPT") > 1 {
        suffix += &format!(".attempt-{}", count("LOOPX_ATTEMPT"));
    }
    let dur = |name: &str, default: Duration| match env(name) {
        None => default,
        Some(v) => crate::duration::parse(&v).unwrap_or_else(|_| {
            say(
                &label,
                &format!(
                    "{name} must be a duration like 90s, 5m or 1h; using {}",
                    crate::duration::format(default)
                ),
            );
            default
        }),
    };
    Ok(Settings {
        chain,
        cmd,
        dir: args
            .dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("runs").join(run_id)),
        step,
        suffix,
        setup: Setup {
            unsafe_mode: env("AGENT_UNSAFE").as_deref() == Some("1"),
            allow,
            extra: env("AGENT_ARGS")
                .map(|a| a.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            git_dir: git_common_dir(&workdir),
            in_git: git_common_dir(&workdir).is_some(),
            resume: None,
        },
        workdir,
        idle: args
            .idle_timeout
            .unwrap_or_else(|| dur("AGENT_IDLE_TIMEOUT", Duration::from_secs(600))),
        pause_at: args
            .pause_at
            .or_else(|| env("AGENT_PAUSE_AT").and_then(|p| p.parse().ok()))
            .filter(|p: &f64| p.is_finite()),
        fresh: args.fresh || env("AGENT_FRESH").as_deref() == Some("1"),
        limit_wait: dur("AGENT_LIMIT_WAIT", Duration::from_secs(300)).as_secs(),
        waits: count("LOOPX_WAITS"),
        keep_steps: env("AGENT_KEEP_STEPS").map_or(super::keep::DEFAULT, |v| {
            v.parse().unwrap_or_else(|_| {
                say(
                    &label,
                    &format!(
                        "AGENT_KEEP_STEPS must be a number of steps (0: all); using {}",
                        super::keep::DEFAULT
                    ),
                );
                super::keep::DEFAULT
            })
        }),
        prices: (
            cost::price(env("AGENT_PRICE_IN_PER_MTOK").as_deref()),
            cost::price(env("AGENT_PRICE_OUT_PER_MTOK").as_deref()),
        ),
        label,
    })
}

/// The repository's common git directory, for codex's sandbox.
fn git_common_dir(workdir: &Path) -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .current_dir(workdir)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let dir = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !dir.trim().is_empty()).then(|| dir.trim().to_string())
}

/// The prompt as a file every agent of the chain can read from the start:
/// `--prompt`, or stdin saved beside the step's files.
fn prompt_file(args: &Args, s: &Settings) -> Result<PathBuf, String> {
    if let Some(p) = &args.prompt {
        return match fs::metadata(p) {
            Ok(m) if m.is_file() && m.len() > 0 => Ok(p.clone()),
            Ok(m) if m.is_file() => Err(format!(
                "the prompt file {} is empty",
                progress::escape(&p.display().to_string())
            )),
            _ => Err(format!(
                "no prompt file at {}: write one, or pass the prompt on stdin",
                progress::escape(&p.display().to_string())
            )),
        };
    }
    if io::stdin().is_terminal() {
        return Err("no prompt: pipe one on stdin or use --prompt <file>".into());
    }
    let path = s.dir.join(format!("{}.prompt", s.step));
    let mut text = Vec::new();
    io::stdin()
        .lock()
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot read the prompt from stdin: {e}"))?;
    if text.iter().all(u8::is_ascii_whitespace) {
        return Err("the prompt on stdin is empty: pipe one, or use --prompt <file>".into());
    }
    fs::write(&path, text)
        .map_err(|e| format!("cannot save the prompt to {}: {e}", path.display()))?;
    Ok(path)
}

/// One attempt of one agent.
struct Attempt {
    kind: Kind,
    verdict: Verdict,
    facts: Facts,
    retry_after: Option<u64>,
    /// It resumed a session and failed before the CLI named any session.
    resume_failed: bool,
}

/// Runs the chain: each agent in turn while the previous one hit its usage
/// limit; agents resting after a limit are skipped.
fn chain(args: &Args, s: &Settings, prompt: &Path, signals: &mut Signals) -> i32 {
    if let Some(code) = refused_before(args, s) {
        return code;
    }
    let mut last: Option<Attempt> = None;
    for (i, &kind) in s.chain.iter().enumerate() {
        if let Some(until) = state::resting_until(kind.name(), now()) {
            say(
                &s.label,
                &format!(
                    "{} rests until {} (a usage limit or --pause-at)",
                    kind.name(),
                    crate::clock::format_ms(until * 1000)
                ),
            );
            continue;
        }
        let mut a = match attempt(s, kind, prompt, signals) {
            Ok(a) => a,
            Err(code) => return code,
        };
        if a.resume_failed {
            // The CLI could not carry on the session (it never saved it):
            // a fresh one, at once.
            say(
                &s.label,
                &format!(
                    "{} could not resume its session: starting a new one",
                    kind.name()
                ),
            );
            let _ = fs::remove_file(s.dir.join(format!("{}.session", s.step)));
            a = match attempt(s, kind, prompt, signals) {
                Ok(a) => a,
                Err(code) => return code,
            };
        }
        let more = i + 1 < s.chain.len();
        if a.verdict.class == Class::UsageLimit && more {
            say(
                &s.label,
                &format!(
                    "{} hit its usage limit: trying {}",
                    kind.name(),
                    s.chain[i + 1].name()
                ),
            );
            last = Some(a);
            continue;
        }
        return finish(args, s, a);
    }
    // Every agent rests: wait for the first to be back.
    let back = s
        .chain
        .iter()
        .filter_map(|k| state::resting_until(k.name(), now()))
        .min();
    let wait = back.map_or(1, |b| b.saturating_sub(now()).max(1));
    let mut a = last.unwrap_or(Attempt {
        kind: s.chain[0],
        verdict: Verdict {
            class: Class::UsageLimit,
            reset_in: Some(wait),
            reason: "every agent rests".into(),
        },
        facts: Facts::default(),
        retry_after: None,
        resume_failed: false,
    });
    a.retry_after = Some(wait);
    finish(args, s, a)
}

/// Where a step's permission refusal is kept: what it was refused under
/// ([`allow_key`]), then what was refused.
fn refused_path(s: &Settings) -> PathBuf {
    s.dir.join(format!("{}.refused", s.step))
}

/// What decides whether the agent may do what it was refused: the agents,
/// the allow-list, the bypass and the extra arguments in force.
fn allow_key(s: &Settings) -> String {
    let mut allow = s.setup.allow.clone();
    allow.sort();
    let agents: Vec<&str> = s.chain.iter().map(|k| k.name()).collect();
    format!(
        "agents {}\ncmd {}\nunsafe {}\nargs {}\nallow {}\n",
        agents.join(","),
        s.cmd.as_deref().unwrap_or(""),
        s.setup.unsafe_mode,
        s.setup.extra.join(" "),
        allow.join("\u{1f}")
    )
}

/// A step refused a permission is not run again under the allow-list that
/// refused it (a resume, a restart): it fails at once, as permanent, and
/// says what to widen. Once the settings changed, it runs again.
fn refused_before(args: &Args, s: &Settings) -> Option<i32> {
    let path = refused_path(s);
    let kept = state::read(&path)?;
    let key = allow_key(s);
    let Some(what) = kept.strip_prefix(&key) else {
        let _ = fs::remove_file(&path);
        return None;
    };
    say(
        &s.label,
        &format!(
            "this step was refused a permission ({}) under the same settings: not run again. \
             Allow what it needs with AGENT_ALLOW (or --allow), or set AGENT_UNSAFE=1 \
             inside a sandbox (a container, a VM), then run it again (loopx resume)",
            progress::escape(what.trim())
        ),
    );
    if args.output {
        print_out(&summary::output(
            Class::PermissionDenied,
            "",
            None,
            None,
            None,
        ));
    }
    Some(Class::PermissionDenied.exit_code())
}

/// Prints what the caller reads and returns the exit code.
fn finish(args: &Args, s: &Settings, a: Attempt) -> i32 {
    let class = a.verdict.class;
    if class != Class::Done {
        let wait = a
            .retry_after
            .map(|w| format!(", waiting {w}s"))
            .unwrap_or_default();
        say(
            &s.label,
            &format!(
                "{} ended: {}{wait} ({})",
                a.kind.name(),
                class.name(),
                progress::escape(&a.verdict.reason)
            ),
        );
    }
    if args.output {
        print_out(&summary::output(
            class,
            &a.facts.text,
            args.done_line.as_deref(),
            a.retry_after,
            a.facts.cost_usd,
        ));
        return if class.waits() { 0 } else { class.exit_code() };
    }
    if !a.facts.text.is_empty() {
        let mut out = io::stdout().lock();
        let _ = out.write_all(a.facts.text.as_bytes());
        if !a.facts.text.ends_with('\n') {
            let _ = out.write_all(b"\n");
        }
    }
    class.exit_code()
}

fn base(s: &Settings) -> PathBuf {
    s.dir.join(format!("{}{}", s.step, s.suffix))
}

/// The session to carry on, if the previous attempt of this step ended in
/// a way that leaves one worth resuming (or left no summary at all).
fn resume_session(s: &Settings, kind: Kind) -> Option<String> {
    let session = s.dir.join(format!("{}.session", s.step));
    let last = s.dir.join(format!("{}.last-class", s.step));
    let (agent, id) = state::session(&session)?;
    let class = state::read(&last);
    let _ = fs::remove_file(&last);
    if s.fresh || s.cmd.is_some() || agent != kind.name() {
        return None;
    }
    // No class: the attempt left no summary (ended from outside).
    let resumable = class.map_or(true, |c| {
        Class::from_name(c.trim()).is_some_and(Class::resumable)
    });
    resumable.then_some(id)
}

/// Runs one agent once. `Err` is an exit code: loopx was interrupted.
fn attempt(s: &Settings, kind: Kind, prompt: &Path, signals: &mut Signals) -> Result<Attempt, i32> {
    let base = base(s);
    let path = |ext: &str| PathBuf::from(format!("{}.{ext}", base.display()));
    let paths = Paths {
        events: path("events.jsonl").display().to_string(),
        final_text: path("final.txt").display().to_string(),
        stderr: path("stderr.log").display().to_string(),
    };
    let resume = resume_session(s, kind);
    let setup = Setup {
        resume: resume.clone(),
        ..clone_setup(&s.setup)
    };
    let argv = match &s.cmd {
        Some(c) => vec!["/bin/sh".to_string(), "-c".to_string(), c.clone()],
        None => preset::argv(kind, &setup),
    };
    if resume.is_some() {
        say(&s.label, &format!("carrying on {}'s session", kind.name()));
    }
    let mut facts = Facts::default();
    let started = spawn(s, kind, &argv, &setup, prompt, &paths);
    let (end, stderr_tail) = match started {
        Ok((child, events)) => {
            let end = supervise(s, kind, child, events, &mut facts, signals)?;
            (end, tail(Path::new(&paths.stderr)))
        }
        Err(e) => {
            let (class, reason) = match e.kind() {
                io::ErrorKind::NotFound => (Class::Missing, install_hint(kind, &argv[0])),
                _ => (Class::Crashed, format!("cannot start {}: {e}", argv[0])),
            };
            return Ok(Attempt {
                kind,
                verdict: Verdict {
                    class,
                    reset_in: None,
                    reason,
                },
                facts,
                retry_after: None,
                resume_failed: false,
            });
        }
    };
    if !facts.finished && facts.error.is_none() && kind != Kind::Plain {
        // `--output-format json`: one document, perhaps over many lines.
        if let Ok(text) = fs::read_to_string(&paths.events) {
            read::read_document(kind, &text, &mut facts, now());
        }
    }
    if kind == Kind::Codex && facts.denied.is_none() {
        facts.denied = facts
            .session
            .as_deref()
            .and_then(codex_rollout)
            .and_then(|text| codex::denied_in_rollout(&text));
    }
    if facts.cost_usd.is_none() && facts.tokens_seen {
        facts.cost_usd =
            cost::from_tokens(facts.tokens_in, facts.tokens_out, s.prices.0, s.prices.1);
    }
    if let Some(note) = facts.cost_note {
        say(&s.label, note);
    }
    let _ = fs::write(&paths.final_text, with_newline(&facts.text));
    let verdict = class::classify(kind, &facts, end, &stderr_tail, now(), &local_offset);
    let retry_after = verdict.class.waits().then(|| {
        verdict
            .reset_in
            .unwrap_or_else(|| class::default_wait(s.limit_wait, s.waits))
    });
    after(s, kind, &verdict, &facts, retry_after);
    let (exit, signal) = match end {
        End::Exit(c) => (Some(c), None),
        End::Signal(n) => (None, Some(n)),
        End::Hung => (None, None),
    };
    let reset_at = retry_after.map(|w| crate::clock::format_ms((now() + w) * 1000));
    let ending = Ending {
        agent: kind.name(),
        verdict: &verdict,
        facts: &facts,
        exit,
        signal,
        retry_after,
        reset_at,
        resumed: resume.is_some(),
    };
    let _ = fs::write(
        path("summary.json"),
        summary::summary(&ending, &paths) + "\n",
    );
    let _ = state::write(
        &s.dir.join(format!("{}.last-class", s.step)),
        verdict.class.name(),
    );
    if verdict.class == Class::PermissionDenied {
        let what: String = verdict.reason.chars().take(300).collect();
        let _ = state::write(&refused_path(s), &(allow_key(s) + &what));
    }
    let resume_failed = resume.is_some()
        && !verdict.class.waits()
        && verdict.class != Class::Done
        && facts.session.is_none();
    Ok(Attempt {
        kind,
        verdict,
        facts,
        retry_after,
        resume_failed,
    })
}

/// Quota bookkeeping after a step: a usage limit, or utilization at or
/// above `--pause-at`, makes the agent rest until its reset.
fn after(s: &Settings, kind: Kind, v: &Verdict, f: &Facts, retry_after: Option<u64>) {
    if v.class == Class::UsageLimit {
        state::rest(kind.name(), now() + retry_after.unwrap_or(1));
    }
    if let (Some(limit), Some(used)) = (s.pause_at, f.utilization) {
        if used >= limit {
            let wait = f
                .quota_reset_in
                .unwrap_or_else(|| class::default_wait(s.limit_wait, s.waits));
            say(&s.label, &format!("{} is at {used:.0}% of its quota (--pause-at {limit}): the next step waits {wait}s", kind.name()));
            state::rest(kind.name(), now() + wait);
        }
    }
}

/// The largest codex rollout read for a refusal its events left out.
const ROLLOUT_MAX: u64 = 64 << 20;

/// The text of codex's record of `thread`:
/// `$CODEX_HOME/sessions/<y>/<m>/<d>/rollout-<time>-<thread>.jsonl`
/// (`CODEX_HOME` defaults to `~/.codex`), read as a state file (the
/// user's, no links, bounded).
fn codex_rollout(thread: &str) -> Option<String> {
    let home = env("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".codex")))?;
    let suffix = format!("-{thread}.jsonl");
    let mut dirs = vec![(home.join("sessions"), 0)];
    let mut seen = 0;
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > 100_000 {
                return None;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() && depth < 4 {
                dirs.push((entry.path(), depth + 1));
            } else if kind.is_file() && name.starts_with("rollout-") && name.ends_with(&suffix) {
                let bytes = crate::state_file::read(&entry.path(), ROLLOUT_MAX).ok()?;
                return Some(String::from_utf8_lossy(&bytes).into_owned());
            }
        }
    }
    None
}

fn clone_setup(s: &Setup) -> Setup {
    Setup {
        unsafe_mode: s.unsafe_mode,
        allow: s.allow.clone(),
        extra: s.extra.clone(),
        git_dir: s.git_dir.clone(),
        in_git: s.in_git,
        resume: None,
    }
}

fn install_hint(kind: Kind, program: &str) -> String {
    let package = match kind {
        Kind::Claude => "npm install -g @anthropic-ai/claude-code",
        Kind::Codex => "npm install -g @openai/codex",
        Kind::Gemini => "npm install -g @google/gemini-cli",
        Kind::Plain => "install it",
    };
    format!("{} is not installed (not on PATH): {package}, or set AGENT (claude, codex, gemini) or AGENT_CMD", progress::escape(program))
}

/// Starts the agent; returns it with the events file opened for reading.
///
/// Its stdout is the events file itself, not a pipe: Node CLIs (Gemini CLI)
/// write to a pipe asynchronously (libuv makes it non-blocking and queues
/// what the pipe cannot take), then end with `process.exit()`, which drops
/// whatever is still queued. A stream-json event larger than the pipe (the
/// prompt echoed back, 200 KiB) was cut, and every event after it lost,
/// whenever the turn ended before loopx had drained it: exit 0 with no
/// result. Node writes to a regular file synchronously, so nothing is left
/// queued at exit; loopx reads the file as it grows.
fn spawn(
    s: &Settings,
    kind: Kind,
    argv: &[String],
    setup: &Setup,
    prompt: &Path,
    p: &Paths,
) -> io::Result<(Child, File)> {
    let stderr = File::create(&p.stderr)?;
    let stdout = File::create(&p.events)?;
    let events = File::open(&p.events)?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&s.workdir)
        .stdin(File::open(prompt)?)
        .stdout(stdout)
        .stderr(stderr)
        // Its own group: the hang detector ends the agent and its tools,
        // never the workflow script that runs loopx agent.
        .process_group(0);
    let root = crate::proc::sys::euid() == 0;
    if let Some((k, v)) = preset::env(kind, setup, root) {
        cmd.env(k, v);
    }
    Ok((cmd.spawn()?, events))
}

/// Reads the agent's events until it ends, is idle too long, or loopx is
/// interrupted. `Err` is loopx's exit code after an interrupt. One thread:
/// the events file is read as it grows, with short sleeps while it is
/// quiet; the agent has ended when its process has (what its tools left
/// running in its group goes with it).
fn supervise(
    s: &Settings,
    kind: Kind,
    mut child: Child,
    events: File,
    f: &mut Facts,
    signals: &mut Signals,
) -> Result<End, i32> {
    let pgid = child.id() as i32;
    let fd = events.as_raw_fd();
    let mut lines = Lines::default();
    let mut last = Instant::now();
    // Before its first event the CLI is starting (Node, auth, MCP servers;
    // Gemini CLI takes about 8 s here), which is not a hang: a short
    // --idle-timeout counts from the first event, within START_UP.
    let mut limit = s.idle.max(START_UP);
    loop {
        // Its exit first, then the file: everything it wrote before
        // exiting is in the file by the read that follows.
        let status = match child.try_wait() {
            Ok(Some(st)) => Some(Ok(st)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        };
        let before = lines.buf.len();
        // At most 1 MiB a round, so that signals and the idle timeout are
        // still checked while a large stream is read; the end of the file
        // for now is Eof.
        let caught_up = !matches!(
            sys::read_available(fd, &mut lines.buf, Some(1 << 20)),
            Ok(sys::ReadOutcome::WouldBlock)
        );
        let eof = status.is_some() && caught_up;
        if lines.buf.len() > before {
            last = Instant::now();
            limit = s.idle;
        }
        while let Some(line) = lines.next(eof) {
            read_event(s, kind, &line, f);
        }
        if let (true, Some(status)) = (eof, status) {
            drop(events);
            if let Some(text) = stream::finish(f) {
                show(&s.label, &text);
            }
            // Whatever the agent left running in its group goes with it.
            reap_group(pgid);
            return Ok(match status {
                Ok(st) => st
                    .code()
                    .map_or_else(|| End::Signal(st.signal().unwrap_or(0)), End::Exit),
                Err(_) => End::Exit(1),
            });
        }
        if let Some(sig) = signals.drain().first_interrupt {
            end_group(pgid, &mut child);
            return Err(128 + sig);
        }
        if last.elapsed() >= limit {
            say(
                &s.label,
                &format!(
                    "no event from the agent for {}: ending it",
                    crate::duration::format(limit)
                ),
            );
            end_group(pgid, &mut child);
            return Ok(End::Hung);
        }
        if lines.buf.len() == before {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One line of the agent's stdout: read, shown, and its session saved as
/// soon as the agent names it.
fn read_event(s: &Settings, kind: Kind, line: &str, f: &mut Facts) {
    let known = f.session.clone();
    for step in read::read_line(kind, line, f, now()) {
        show(&s.label, &step);
    }
    if let Some(id) = f.session.as_ref().filter(|id| known.as_ref() != Some(*id)) {
        let _ = state::write(
            &s.dir.join(format!("{}.session", s.step)),
            &format!("{} {id}\n", kind.name()),
        );
    }
}

/// Complete lines out of what stdout gave so far; a line longer than
/// `LINE_MAX` is skipped (it is in the events file, unread).
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
    skipping: bool,
}

impl Lines {
    fn next(&mut self, eof: bool) -> Option<String> {
        loop {
            let end = match self.buf.iter().position(|&b| b == b'\n') {
                Some(nl) => nl + 1,
                None if eof && !self.buf.is_empty() => self.buf.len(),
                None => {
                    if self.buf.len() > LINE_MAX {
                        self.buf.clear();
                        self.skipping = true;
                    }
                    return None;
                }
            };
            let line: Vec<u8> = self.buf.drain(..end).collect();
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            return Some(text.trim_end_matches(['\n', '\r']).to_string());
        }
    }
}

fn show(label: &str, step: &str) {
    if let Some(line) = progress::line(label, step) {
        let _ = writeln!(io::stderr(), "{line}");
        // Inside a loopx run, for `loopx tail` too.
        crate::events_kept::agent_progress(&line);
    }
}

/// SIGTERM to the agent's group, SIGKILL after the grace period.
fn end_group(pgid: i32, child: &mut Child) {
    kill_group(pgid, libc::SIGTERM);
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.try_wait();
    reap_group(pgid);
    let _ = child.wait();
}

/// Kills what is left of the agent's group and reaps it (loopx agent is
/// their subreaper), so nothing of it outlives loopx agent, not even a
/// zombie.
fn reap_group(pgid: i32) {
    kill_group(pgid, libc::SIGKILL);
    let deadline = Instant::now() + GRACE;
    while sys::group_alive(pgid) && Instant::now() < deadline {
        sys::reap_all(|_, _| {});
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The last 4 KiB of a file (the agent's stderr).
fn tail(path: &Path) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(4096)));
    let mut buf = Vec::new();
    let _ = f.take(4096).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

fn with_newline(text: &str) -> String {
    if text.is_empty() || text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    }
}

/// The local zone's UTC offset (named zones are read as the local one).
fn local_offset(_zone: Option<&str>, now: u64) -> i64 {
    crate::proc::sys::utc_offset(now as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_come_whole_and_overlong_ones_are_skipped() {
        let mut l = Lines::default();
        l.buf.extend_from_slice(b"a\r\nb");
        assert_eq!(l.next(false).as_deref(), Some("a"));
        assert_eq!(l.next(false), None);
        assert_eq!(l.next(true).as_deref(), Some("b"));
        l.buf.resize(LINE_MAX + 1, b'x');
        assert_eq!(l.next(false), None);
        l.buf.extend_from_slice(b"tail\nnext\n");
        assert_eq!(l.next(false).as_deref(), Some("next"));
    }
}
