//! What a run tells about itself (DESIGN.md "Beyond the spec"; README "Run
//! log", "Seeing what runs"): the JSONL run record (`--log`), the status
//! file (`loopx status`), the per-script lines of `--verbose`, and notes on
//! probable mistakes (`--verbose`, or by default when stderr is a terminal
//! the CLI shares with its scripts). The engine reports each event here
//! once; each outlet takes what it needs. Without `--log`, `--verbose` and a
//! terminal only the status file is written.

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use crate::clock;
use crate::duration;
use crate::error::{signal_name, Error};
use crate::hooks::Hook;
use crate::json::{self, Object};
use crate::messages;
use crate::otel::{ScriptEnd, Tracer};
use crate::output::{self, Output};
use crate::proc::process::Status;
use crate::proc::supervisor::{Ending, Finished};
use crate::run_log::RunLog;
use crate::status::{Phase, StatusFile};

/// Why a run ended well.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    /// A script's `stop: true` (§2.3).
    Stop,
    /// The `-n` limit, `-n 0` included (§7.1).
    MaxIterations,
    /// `--max-time`.
    MaxTime,
    /// `--max-cost`.
    MaxCost,
    /// The API's consumer asked for no more (§9.1).
    Consumer,
}

impl Done {
    fn reason(self) -> &'static str {
        match self {
            Done::Stop => "stop",
            Done::MaxIterations => "max_iterations",
            Done::MaxTime => "max_time",
            Done::MaxCost => "max_cost",
            Done::Consumer => "consumer",
        }
    }
}

/// One script run as the loop saw it.
pub struct ScriptRun<'a> {
    pub iteration: u64,
    pub attempt: u64,
    pub label: &'a str,
}

pub struct Reporter {
    log: Option<RunLog>,
    status: Option<StatusFile>,
    verbose: bool,
    /// Whether `note:` lines on probable mistakes are printed.
    notes: bool,
    /// Whether the restart note goes to stderr even without `notes` (CLI
    /// runs: a loop that only restarts is worth a word whatever stderr is).
    restart_note: bool,
    /// The notes printed so far, by script and text: each once per run, not
    /// once per iteration (a stray `echo` would repeat it every time). A
    /// few at most, so a list (a hash set costs the binary kilobytes).
    noted: Vec<(String, String)>,
    restarts: RestartWatch,
    started: Instant,
    /// When the current script started.
    script_started: Instant,
    iterations: u64,
    /// The class the last failed script named (output::failure_mark), shown
    /// by `loopx status` until the next script starts.
    last_class: Option<String>,
    /// `--on-event` (hooks.rs) and OpenTelemetry traces (otel.rs).
    hook: Option<Hook>,
    trace: Option<Tracer>,
}

/// How a script ended, in a few words, for every message that says so:
/// `exit 0`, `killed by SIGSEGV`, `interrupted by SIGINT`, `timed out`, or
/// `timed out after 5s` when the limit is given.
pub fn ending(f: &Finished, timeout: Option<Duration>) -> String {
    match (f.ending, f.status) {
        (Ending::TimedOut, _) => match timeout {
            Some(after) => format!("timed out after {}", duration::format(after)),
            None => "timed out".to_string(),
        },
        (Ending::Interrupted(sig), _) => format!("interrupted by {}", signal_name(sig)),
        (_, Status::Code(code)) => format!("exit {code}"),
        (_, Status::Signal(sig)) => format!("killed by {}", signal_name(sig)),
    }
}

/// Restarts on plain-text output in a row, within [`RESTART_WINDOW`], that
/// make the restart note.
const RESTARTS: usize = 20;
const RESTART_WINDOW: Duration = Duration::from_secs(5);

/// Watches for a loop that restarts quickly, again and again, on plain-text
/// output: no goto and no stop ever, so it runs until interrupted.
#[derive(Default)]
struct RestartWatch {
    /// When the latest plain-text outputs in a row came, at most RESTARTS.
    times: VecDeque<Instant>,
    said: bool,
}

impl RestartWatch {
    /// One output, at `now`. Once per run, when the last [`RESTARTS`]
    /// outputs were all plain text and came within [`RESTART_WINDOW`]:
    /// how long they took.
    fn record(&mut self, now: Instant, structured: bool) -> Option<Duration> {
        if structured {
            self.times.clear();
            return None;
        }
        if self.said {
            return None;
        }
        if self.times.len() == RESTARTS {
            self.times.pop_front();
        }
        self.times.push_back(now);
        let first = *self.times.front()?;
        let took = now.saturating_duration_since(first);
        if self.times.len() < RESTARTS || took > RESTART_WINDOW {
            return None;
        }
        self.said = true;
        Some(took)
    }
}

/// What `loopx status` shows beside the script of a run the restart note
/// was about.
pub const RESTART_STATUS: &str = "restarting on plain-text output: no goto, no stop";

/// The restart note's words.
fn restart_note(took: Duration) -> String {
    format!(
        "the loop restarted {RESTARTS} times in {} on plain-text output (no goto, no stop), \
         and restarts until interrupted; a script ends the loop with \
         `\"$LOOPX_BIN\" output --stop` (`output({{ stop: true }})` in JS/TS)",
        duration::format_elapsed(took)
    )
}

/// The first `n` characters of `s`.
fn head(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// A log line about one script run: the event and which run it is.
fn script_line(log: &RunLog, event: &str, run: &ScriptRun) -> Object {
    log.line(event)
        .num("iteration", run.iteration)
        .num("attempt", run.attempt)
        .str("target", run.label)
}

impl Reporter {
    /// `log`: the run log's path, already chosen (`--log` over `LOOPX_LOG`);
    /// `stdout_taken` when it may not be `-` (RunLog::open).
    /// `notes`: print `note:` lines on probable mistakes (Notes::wanted).
    /// `restart_note`: print the restart note on stderr even without them.
    pub fn new(
        log: Option<&Path>,
        verbose: bool,
        notes: bool,
        restart_note: bool,
        run_id: &str,
        stdout_taken: bool,
    ) -> Result<Reporter, Error> {
        let mut log = log
            .map(|path| RunLog::open(path, run_id, stdout_taken))
            .transpose()?;
        // Every run keeps its lines for `loopx tail` (events_kept.rs).
        if let Some(kept) = crate::events_kept::Kept::open(run_id) {
            log = Some(
                log.unwrap_or_else(|| RunLog::unlogged(run_id))
                    .keeping(kept),
            );
        }
        Ok(Reporter {
            log,
            status: None,
            verbose,
            notes,
            restart_note,
            noted: Vec::new(),
            restarts: RestartWatch::default(),
            started: Instant::now(),
            script_started: Instant::now(),
            iterations: 0,
            last_class: None,
            hook: None,
            trace: None,
        })
    }

    /// Event hooks (`--on-event`, else `LOOPX_ON_EVENT`) and traces (the
    /// `OTEL_*` variables), when asked for.
    pub fn watch(&mut self, on_event: Option<&std::ffi::OsString>, run_id: &str, target: &str) {
        self.hook = Hook::new(on_event, run_id);
        self.trace = Tracer::from_env(run_id, target);
    }

    /// The `TRACEPARENT` of the script about to run, when traces are on.
    pub fn traceparent(&self) -> Option<String> {
        self.trace.as_ref()?.traceparent()
    }

    /// Runs the hook, if any, for `event`; `fields` add to the common ones.
    fn hook(&mut self, event: &str, code: Option<i64>, fields: impl FnOnce(Object) -> Object) {
        if let Some(hook) = &mut self.hook {
            let line = Object::default()
                .num("v", 1)
                .str("event", event)
                .str("run_id", hook.run_id())
                .str("time", &clock::rfc3339(SystemTime::now()));
            hook.fire(event, code, &fields(line).finish());
        }
    }

    /// `options`: the run's options as a JSON object (RunOptions::to_json).
    pub fn run_start(&mut self, target: &str, options: &str, root: &Path) {
        let Some(log) = &mut self.log else { return };
        let line = log
            .line("run_start")
            .str("version", env!("CARGO_PKG_VERSION"))
            .num("pid", u64::from(std::process::id()))
            .str("root", &root.to_string_lossy())
            .str("target", target)
            .raw("options", options);
        log.write(line);
    }

    /// A resumed run carries on (`loopx resume`): the log goes on under the
    /// same run id.
    pub fn run_resume(&mut self, target: &str, options: &str, root: &Path, iteration: u64) {
        self.iterations = iteration.saturating_sub(1);
        if let Some(trace) = &mut self.trace {
            trace.resumed();
        }
        let Some(log) = &mut self.log else { return };
        let line = log
            .line("run_resume")
            .str("version", env!("CARGO_PKG_VERSION"))
            .num("pid", u64::from(std::process::id()))
            .str("root", &root.to_string_lossy())
            .str("target", target)
            .raw("options", options)
            .num("iteration", iteration);
        log.write(line);
    }

    /// The loop is about to run its first script: the status file starts.
    pub fn loop_start(&mut self, root: &Path, target: &str, run_id: &str) {
        self.status = StatusFile::create(root, target, run_id);
    }

    /// The status file's state for `run`.
    fn set_status(&mut self, run: &ScriptRun, phase: Phase) {
        if let Some(status) = &mut self.status {
            let now = clock::unix_ms(SystemTime::now());
            let class = self.last_class.as_deref();
            status.update(run.label, run.iteration, run.attempt, phase, now, class);
        }
    }

    pub fn script_start(&mut self, run: &ScriptRun) {
        self.script_started = Instant::now();
        self.iterations = run.iteration;
        self.last_class = None;
        self.set_status(run, Phase::Running);
        if let Some(log) = &mut self.log {
            log.write(script_line(log, "script_start", run));
        }
        if let Some(trace) = &mut self.trace {
            trace.script_start();
        }
    }

    /// A note on something probably mistaken, when notes are on:
    /// `loopx: note: <label>: <text>`, once per script and text.
    pub fn note(&mut self, label: &str, text: &str) {
        if self.notes {
            self.print_note(label, text);
        }
    }

    fn print_note(&mut self, label: &str, text: &str) {
        if !self.noted.iter().any(|(l, t)| l == label && t == text) {
            self.noted.push((label.to_string(), text.to_string()));
            // One line: the text may quote a script's output (output::notes).
            messages::notice(&format!("note: {label}: {}", crate::text::shown(text)));
        }
    }

    /// Notes on an output that is probably a mistake (§2.3 takes it
    /// silently). Looked at before the output is parsed.
    pub fn inspect_stdout(&mut self, run: &ScriptRun, stdout: &[u8]) {
        if self.notes {
            for note in output::notes(stdout) {
                self.print_note(run.label, &note);
            }
        }
    }

    /// The output the loop goes on with (after any waits): plain text
    /// restarts the loop (§2.3, §7.1 step 12), and many quick restarts in
    /// a row are probably a script that forgot to output JSON. Said once
    /// per run, whatever stderr is (a loop left unattended otherwise spins
    /// without a word): on stderr (CLI runs), as a `note` event in the run
    /// log and in the status file. The loop itself goes on as §7.1 says.
    /// (With `-n` and no terminal or `-v`, restarting is bounded and asked
    /// for: nothing is said, as §7.1 has it.)
    pub fn iteration_output(&mut self, run: &ScriptRun, structured: bool) {
        if !self.notes && !self.restart_note {
            return;
        }
        let Some(took) = self.restarts.record(Instant::now(), structured) else {
            return;
        };
        let note = restart_note(took);
        self.print_note(run.label, &note);
        if let Some(status) = &mut self.status {
            status.note(RESTART_STATUS);
        }
        if let Some(log) = &mut self.log {
            let line = script_line(log, "note", run)
                .str("kind", "restart_loop")
                .str("message", &note);
            log.write(line);
        }
    }

    /// A script's end. `output`: the parsed output of a successful run
    /// (§7.2: a failed one's stdout is not parsed), and whether it was
    /// structured.
    pub fn script_end(
        &mut self,
        run: &ScriptRun,
        f: &Finished,
        stdout_bytes: usize,
        output: Option<(&Output, bool)>,
        cost_usd: Option<f64>,
        class: Option<&str>,
    ) {
        let took = self.script_started.elapsed();
        self.last_class = class.map(str::to_string);
        if let Some(log) = &mut self.log {
            let (code, signal) = match f.status {
                Status::Code(c) => (Some(i64::from(c)), None),
                Status::Signal(s) => (None, Some(signal_name(s))),
            };
            let output_json = match output {
                None => "null".to_string(),
                Some((out, structured)) => Object::default()
                    .bool("structured", structured)
                    .bool("stop", out.stop)
                    .opt_str("goto", out.goto.as_deref())
                    .opt_num("result_bytes", out.result.as_ref().map(|r| r.len() as u64))
                    .opt_str("result_head", out.result.as_deref().map(|r| head(r, 200)))
                    .finish(),
            };
            let mut line = script_line(log, "script_end", run);
            line = match code {
                Some(c) => line.int("exit_code", c),
                None => line.raw("exit_code", "null"),
            };
            let line = line
                .opt_str("signal", signal)
                .num("duration_ms", took.as_millis() as u64)
                .num("stdout_bytes", stdout_bytes as u64)
                .raw("output", &output_json)
                .raw_if("cost_usd", cost_usd.map(json::number_json).as_deref());
            // The class a failing script named (output::failure_mark).
            let line = match class {
                Some(c) => line.str("class", c),
                None => line,
            };
            log.write(line);
        }
        if self.verbose {
            let next = match output {
                Some((out, _)) if out.stop => " → stop".to_string(),
                Some((out, _)) => match &out.goto {
                    Some(goto) => format!(" → goto {}", crate::text::shown(goto)),
                    None => " → restart".to_string(),
                },
                None => String::new(),
            };
            messages::notice(&format!(
                "[{}] {} {} in {}{next}",
                run.iteration,
                run.label,
                ending(f, None),
                duration::format_elapsed(took)
            ));
        }
        self.script_outlets(run, f, output.is_none(), cost_usd, class);
    }

    /// A script's end, for traces and (when it failed) the hook.
    fn script_outlets(
        &mut self,
        run: &ScriptRun,
        f: &Finished,
        failed: bool,
        cost_usd: Option<f64>,
        class: Option<&str>,
    ) {
        let (code, signal) = match f.status {
            Status::Code(c) => (Some(i64::from(c)), None),
            Status::Signal(s) => (None, Some(signal_name(s))),
        };
        if let Some(trace) = &mut self.trace {
            trace.script_end(&ScriptEnd {
                label: run.label,
                iteration: run.iteration,
                attempt: run.attempt,
                exit_code: code,
                signal,
                class,
                cost_usd,
                failed,
            });
        }
        // Not when loopx ended it: the run's end tells.
        let own = matches!(f.ending, Ending::Interrupted(_) | Ending::ConsumerGone);
        if failed && !own {
            self.hook("script_failed", code, |line| {
                script_fields(line, run)
                    .raw("exit_code", &code.map_or("null".into(), |c| c.to_string()))
                    .opt_str("signal", signal)
                    .bool("timed_out", f.ending == Ending::TimedOut)
                    .opt_str("class", class)
            });
        }
    }

    pub fn timeout(&mut self, run: &ScriptRun, after: Duration) {
        if let Some(log) = &mut self.log {
            let line = script_line(log, "timeout", run).num("timeout_ms", after.as_millis() as u64);
            log.write(line);
        }
    }

    /// The script asked to run again at `until_ms` (a wall-clock time),
    /// `wait` from now.
    pub fn wait(&mut self, run: &ScriptRun, until_ms: i64, wait: Duration) {
        self.set_status(run, Phase::Waiting(until_ms));
        if let Some(log) = &mut self.log {
            let until = clock::format_ms(u64::try_from(until_ms).unwrap_or(0));
            let line = script_line(log, "wait", run)
                .str("until", &until)
                .raw("seconds", &json::number_json(wait.as_secs_f64()));
            log.write(line);
        }
        if let Some(trace) = &mut self.trace {
            trace.wait(run.label, until_ms, wait);
        }
        let until = clock::format_ms(u64::try_from(until_ms).unwrap_or(0));
        self.hook("wait", None, |line| {
            script_fields(line, run)
                .str("until", &until)
                .raw("seconds", &json::number_json(wait.as_secs_f64()))
        });
    }

    /// A retry is coming after `delay`; `why` says how the attempt failed.
    pub fn retry(&mut self, run: &ScriptRun, why: &str, delay: Duration) {
        self.set_status(run, Phase::RetryWait);
        if let Some(log) = &mut self.log {
            let line = script_line(log, "retry", run)
                .str("why", why)
                .num("delay_ms", delay.as_millis() as u64);
            log.write(line);
        }
    }

    /// The run's end, whatever it was: the log's last line, synced to disk;
    /// `--verbose`'s last line; the status file goes.
    /// `cost_usd`: the run's total, when a script reported one.
    pub fn run_end(&mut self, result: &Result<Done, Error>, cost_usd: Option<f64>) {
        self.status = None;
        let (reason, code) = match result {
            Ok(done) => (done.reason(), 0),
            Err(err) => (err.reason(), err.exit_code()),
        };
        let took = self.started.elapsed();
        if let Some(log) = &mut self.log {
            let error = match result {
                Err(err) if !err.is_silent() => Some(err.to_string()),
                _ => None,
            };
            let line = log
                .line("run_end")
                .str("reason", reason)
                .int("exit_code", i64::from(code))
                .num("iterations", self.iterations)
                .num("duration_ms", took.as_millis() as u64)
                .opt_str("error", error.as_deref());
            // Exit 75: when the script asked to run again (schedulers read
            // it: dist/action/run.sh, log collectors under `--log -`).
            let resume_at = result
                .as_ref()
                .err()
                .and_then(Error::resume_at_ms)
                .map(|ms| {
                    let mut text = String::new();
                    json::write_json_string(
                        &mut text,
                        &clock::format_ms(u64::try_from(ms).unwrap_or(0)),
                    );
                    text
                });
            let line = line
                .raw_if("cost_usd", cost_usd.map(json::number_json).as_deref())
                .raw_if("resume_at", resume_at.as_deref());
            log.write(line);
            log.sync();
        }
        if self.verbose {
            let n = self.iterations;
            messages::notice(&format!(
                "run ended: {reason} after {n} iteration{} in {} (exit {code})",
                if n == 1 { "" } else { "s" },
                duration::format_elapsed(took)
            ));
        }
        self.run_end_outlets(result, reason, code, cost_usd, took);
    }

    /// The run's end for the hook (a budget reached, a resumable stop, the
    /// end itself) and the trace.
    fn run_end_outlets(
        &mut self,
        result: &Result<Done, Error>,
        reason: &str,
        code: i32,
        cost_usd: Option<f64>,
        took: Duration,
    ) {
        let cost = cost_usd.map(json::number_json);
        if let Ok(Done::MaxTime | Done::MaxCost) = result {
            self.hook("budget", Some(0), |line| {
                line.str("budget", reason)
                    .raw_if("cost_usd", cost.as_deref())
            });
        }
        if let Err(
            err @ Error::WaitTooLong {
                resume_id: Some(id),
                ..
            },
        ) = result
        {
            let at = err
                .resume_at_ms()
                .map(|ms| clock::format_ms(u64::try_from(ms).unwrap_or(0)));
            self.hook("resumable", Some(i64::from(code)), |line| {
                line.str("reason", reason)
                    .str("resume", &format!("loopx resume {id}"))
                    .opt_str("resume_at", at.as_deref())
            });
        }
        let (n, class) = (self.iterations, self.last_class.clone());
        self.hook("run_end", Some(i64::from(code)), |line| {
            line.str("reason", reason)
                .int("exit_code", i64::from(code))
                .opt_str("class", class.as_deref())
                .num("iterations", n)
                .num("duration_ms", took.as_millis() as u64)
                .raw_if("cost_usd", cost.as_deref())
        });
        if let Some(trace) = &mut self.trace {
            trace.run_end(code, reason, cost_usd, n);
        }
    }
}

/// A hook's fields about one script run.
fn script_fields(line: Object, run: &ScriptRun) -> Object {
    line.str("target", run.label)
        .num("iteration", run.iteration)
        .num("attempt", run.attempt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twenty_quick_plain_text_restarts_in_a_row_are_noted_once() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut w = RestartWatch::default();
        for i in 0..19 {
            assert_eq!(w.record(ms(i * 100), false), None, "restart {i}");
        }
        assert_eq!(w.record(ms(1900), false), Some(Duration::from_millis(1900)));
        // Once per run.
        for i in 20..100 {
            assert_eq!(w.record(ms(i * 100), false), None);
        }
    }

    #[test]
    fn slow_or_interrupted_streaks_are_not_noted() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        // 20 restarts over more than 5 s.
        let mut w = RestartWatch::default();
        for i in 0..40 {
            assert_eq!(w.record(ms(i * 300), false), None, "restart {i}");
        }
        // A structured output in between starts the count again.
        let mut w = RestartWatch::default();
        for i in 0..39 {
            assert_eq!(w.record(ms(i), i == 15 || i == 30), None, "output {i}");
        }
        assert!(w.record(ms(39), false).is_none());
        // The window slides: the last 20 within 5 s count.
        let mut w = RestartWatch::default();
        assert_eq!(w.record(ms(0), false), None);
        for i in 0..19 {
            assert_eq!(w.record(ms(10_000 + i), false), None);
        }
        assert!(w.record(ms(10_019), false).is_some());
    }

    #[test]
    fn the_restart_note_says_how_to_stop() {
        let note = restart_note(Duration::from_millis(1200));
        assert!(
            note.starts_with("the loop restarted 20 times in 1.2s on plain-text output"),
            "{note}"
        );
        assert!(note.contains("`\"$LOOPX_BIN\" output --stop`"), "{note}");
        assert!(note.contains("output({ stop: true })"), "{note}");
    }
}
