//! `loopx tail [<run-id>] [--json]` (DESIGN.md "Beyond the spec": watching;
//! docs/watching.md): a run's kept event lines (events_kept.rs), one
//! readable line each, followed until the run ends; then loopx exits with
//! the run's exit code and says how to resume it where it can.
//!
//! Following polls (a few times a second, sleeping in between): the file is
//! read to its end, and when nothing new came, its lock says whether the run
//! still lives; a file moved to `.1` at its bound is read to its end before
//! the new one is opened. Everything read is checked like every state file
//! (no link followed, only the user's own regular files).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::checkpoint::{self, Checkpoint};
use crate::clock;
use crate::duration;
use crate::error::Error;
use crate::events_kept::{self, held};
use crate::json::{self, Value};
use crate::messages;
use crate::proc::sys;
use crate::state_file;
use crate::status;
use crate::text::shown;

/// How long to sleep between polls of a live run.
const POLL: Duration = Duration::from_millis(200);

/// The most of a line kept while waiting for its end; a longer one is
/// dropped (the run writes none so long).
const LINE_LIMIT: usize = 4 * 1024 * 1024;

/// How much of a file's start is read to learn whose run it is.
const HEAD_LIMIT: u64 = 64 * 1024;

pub fn run(id: Option<&str>, as_json: bool) -> Result<(), Error> {
    let dir = checkpoint::dir().ok_or_else(|| Error::NoRunToTail {
        what: "is kept: neither XDG_STATE_HOME nor HOME is set".to_string(),
    })?;
    if let Err((dir, problem)) = checkpoint::check_dir(&dir) {
        return Err(Error::CheckpointDirRefused {
            dir,
            why: problem.to_string(),
        });
    }
    let id = match id {
        Some(given) => by_id(&dir, given)?,
        None => latest_of_project(&dir)?,
    };
    let code = follow(&dir, &id, as_json)?;
    if code == 0 {
        Ok(())
    } else {
        Err(Error::Reported { code })
    }
}

/// The runs whose lines are kept in `dir`, most recently written first:
/// one `fstatat` each, relative to the open directory (full-path `lstat`s
/// spent most of their time in path lookup), nothing opened; only the
/// user's regular files.
fn kept_runs(dir: &Path) -> Vec<String> {
    let wanted = |name: &str| {
        name.strip_suffix(".events.jsonl")
            .is_some_and(checkpoint::valid_id)
    };
    let Ok(entries) = sys::stat_entries(dir, wanted) else {
        return Vec::new();
    };
    let uid = sys::uid();
    let mut runs: Vec<(i64, String)> = entries
        .into_iter()
        .filter(|(_, st)| st.regular && st.uid == uid)
        .map(|(mut name, st)| {
            name.truncate(name.len() - ".events.jsonl".len());
            (st.mtime_ms, name)
        })
        .collect();
    runs.sort_by(|a, b| b.cmp(a));
    runs.into_iter().map(|(_, id)| id).collect()
}

/// The run `given` names: its whole id, or a prefix of only one kept run's.
fn by_id(dir: &Path, given: &str) -> Result<String, Error> {
    if checkpoint::valid_id(given) && events_kept::path(dir, given).symlink_metadata().is_ok() {
        return Ok(given.to_string());
    }
    let matching: Vec<String> = if given.is_empty() {
        Vec::new()
    } else {
        kept_runs(dir)
            .into_iter()
            .filter(|id| id.starts_with(given))
            .collect()
    };
    match matching.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(Error::NoRunToTail {
            what: format!(
                "'{}' is kept in {}",
                shown(given),
                shown(&dir.to_string_lossy())
            ),
        }),
        several => Err(Error::NoRunToTail {
            what: format!(
                "is '{}' alone: it begins {}",
                shown(given),
                several.join(", ")
            ),
        }),
    }
}

/// The current project's latest live run, else its latest run. The live
/// ones are found by their status files, not by opening every kept run's
/// lines (10,000 kept runs took 210 ms that way); the latest one is the
/// first of the project's in the kept runs, newest first.
fn latest_of_project(dir: &Path) -> Result<String, Error> {
    let root = std::env::current_dir()
        .map_err(|e| Error::io("cannot determine the current directory", e))?;
    let root = root.to_string_lossy();
    let ours = |id: &str, live: bool| {
        let Ok(file) = state_file::open(&events_kept::path(dir, id), u64::MAX) else {
            return false;
        };
        project_of(&file).as_deref() == Some(&*root) && (!live || held(&file))
    };
    let live = status::live_in(&root);
    if let Some(id) = live.into_iter().find(|id| ours(id, true)) {
        return Ok(id);
    }
    kept_runs(dir)
        .into_iter()
        .find(|id| ours(id, false))
        .ok_or_else(|| Error::NoRunToTail {
            what: format!(
                "of {} is kept (runs keep their events for 30 days)",
                shown(&root)
            ),
        })
}

/// The project root a kept file's first line names.
fn project_of(file: &File) -> Option<String> {
    let mut head = Vec::new();
    file.take(HEAD_LIMIT).read_to_end(&mut head).ok()?;
    let end = head.iter().position(|&b| b == b'\n')?;
    let first = json::parse(std::str::from_utf8(&head[..end]).ok()?)?;
    match first.get("root")? {
        Value::String(root) => Some(root.clone()),
        _ => None,
    }
}

/// Prints run `id`'s lines, then follows it; the run's exit code.
fn follow(dir: &Path, id: &str, as_json: bool) -> Result<i32, Error> {
    let cannot = |e| Error::io(format!("cannot read the events of run {id}"), e);
    let path = events_kept::path(dir, id);
    let mut file = state_file::open(&path, u64::MAX).map_err(cannot)?;
    let mut printer = Printer::new(as_json);
    // The older lines first, when the run outgrew its bound.
    if let Ok(older) = state_file::open(&events_kept::older_path(dir, id), u64::MAX) {
        Lines::default().pump(&older, |line| printer.line(line), cannot)?;
    }
    let mut lines = Lines::default();
    loop {
        if lines.pump(&file, |line| printer.line(line), cannot)? > 0 {
            continue;
        }
        if let Some(code) = printer.ended {
            resume_hint(dir, id, &printer);
            return Ok(code);
        }
        if let Some(newer) = moved(&path, &file) {
            file = newer;
            lines = Lines::default();
            continue;
        }
        if !held(&file) {
            // Gone: what it wrote before letting go is read once more.
            if lines.pump(&file, |line| printer.line(line), cannot)? > 0
                || moved(&path, &file).is_some()
            {
                continue;
            }
            messages::notice(&format!(
                "run {id} ended without saying how (killed, or its machine went down)"
            ));
            resume_hint(dir, id, &printer);
            return Ok(1);
        }
        std::thread::sleep(POLL);
    }
}

/// The file now at `path`, when it is another than `file` (the run moved
/// the full one to `.1`).
fn moved(path: &Path, file: &File) -> Option<File> {
    let now = path.symlink_metadata().ok()?;
    let ours = file.metadata().ok()?;
    if now.ino() == ours.ino() && now.dev() == ours.dev() {
        return None;
    }
    state_file::open(path, u64::MAX).ok()
}

/// `loopx resume <id>`, when the run left a checkpoint it can go on from.
fn resume_hint(dir: &Path, id: &str, printer: &Printer) {
    let Ok(ckpt) = state_file::open(&Checkpoint::path(dir, id), state_file::RECORD_LIMIT) else {
        return;
    };
    if held(&ckpt) {
        return;
    }
    match printer.resume_at {
        Some(at) => messages::notice(&format!(
            "the run asked to run again at {}; resume it then with: loopx resume {id}",
            local_time(at)
        )),
        None => messages::notice(&format!("resume it with: loopx resume {id}")),
    }
}

/// Whole lines read from a kept file, as they come.
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
}

impl Lines {
    /// Reads what `file` holds past where it was, handing each whole line
    /// on as it comes; how many bytes came.
    fn pump(
        &mut self,
        mut file: &File,
        mut f: impl FnMut(&str) -> Result<(), Error>,
        cannot: impl Fn(io::Error) -> Error,
    ) -> Result<usize, Error> {
        let mut chunk = [0u8; 64 * 1024];
        let mut total = 0;
        loop {
            match file.read(&mut chunk) {
                Ok(0) => return Ok(total),
                Ok(n) => {
                    total += n;
                    self.buf.extend_from_slice(&chunk[..n]);
                    self.each(&mut f)?;
                    if self.buf.len() > LINE_LIMIT {
                        self.buf.clear();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(cannot(e)),
            }
        }
    }

    /// Hands each whole line on, keeping a partial last one.
    fn each(&mut self, mut f: impl FnMut(&str) -> Result<(), Error>) -> Result<(), Error> {
        let Some(end) = self.buf.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let whole: Vec<u8> = self.buf.drain(..=end).collect();
        for line in whole.split(|&b| b == b'\n') {
            if !line.is_empty() {
                f(&String::from_utf8_lossy(line))?;
            }
        }
        Ok(())
    }
}

/// Turns event lines into what `tail` prints.
struct Printer {
    as_json: bool,
    /// The run's spend so far, from its scripts' `cost_usd`.
    cost: f64,
    /// The exit code of the last line, when it was a `run_end`.
    ended: Option<i32>,
    /// A `run_end`'s `resume_at`, in milliseconds.
    resume_at: Option<i64>,
    out: io::Stdout,
}

impl Printer {
    fn new(as_json: bool) -> Printer {
        Printer {
            as_json,
            cost: 0.0,
            ended: None,
            resume_at: None,
            out: io::stdout(),
        }
    }

    fn line(&mut self, line: &str) -> Result<(), Error> {
        let event = json::parse(line);
        self.ended = None;
        if let Some(v) = &event {
            if text(v, "event") == "run_end" {
                self.ended = Some(int(v, "exit_code").unwrap_or(1) as i32);
                self.resume_at = v.get("resume_at").and_then(|t| match t {
                    Value::String(t) => clock::parse_rfc3339(t).ok(),
                    _ => None,
                });
            }
        }
        let shown = if self.as_json {
            Some(json_safe(line))
        } else {
            event
                .as_ref()
                .and_then(|v| describe(v, &mut self.cost, clock::now_ms()))
        };
        let Some(shown) = shown else { return Ok(()) };
        let mut out = self.out.lock();
        match writeln!(out, "{shown}").and_then(|()| out.flush()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(Error::StdoutClosed),
            Err(e) => Err(Error::io("cannot write to stdout", e)),
        }
    }
}

/// A JSON line with every control character (DEL and C1 included, which a
/// JSON writer may leave raw) as a `\u` escape: still the same JSON, and
/// harmless on a terminal.
fn json_safe(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        if c.is_control() {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

fn text<'v>(v: &'v Value, key: &str) -> &'v str {
    match v.get(key) {
        Some(Value::String(s)) => s,
        _ => "",
    }
}

fn num(v: &Value, key: &str) -> Option<f64> {
    match v.get(key) {
        Some(Value::Number(n)) if n.is_finite() => Some(*n),
        _ => None,
    }
}

fn int(v: &Value, key: &str) -> Option<i64> {
    num(v, key).map(|n| n as i64)
}

fn ms(v: &Value, key: &str) -> Option<Duration> {
    num(v, key).map(|n| Duration::from_millis(n.max(0.0) as u64))
}

/// `HH:MM:SS` in the local zone.
fn local_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let local = secs + sys::utc_offset(secs);
    let day = local.rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", day / 3600, day % 3600 / 60, day % 60)
}

/// `$2.50`; `$0.0021` below a cent, where agent steps often are.
fn dollars(n: f64) -> String {
    if n.abs() >= 0.01 || n == 0.0 {
        format!("${n:.2}")
    } else {
        format!("${n:.4}").trim_end_matches('0').to_string()
    }
}

/// One event as a line, its time first, control characters escaped; None
/// for lines that say nothing to people (a rotation).
fn describe(v: &Value, cost: &mut f64, now_ms: i64) -> Option<String> {
    let at = clock::parse_rfc3339(text(v, "time")).unwrap_or(now_ms);
    let event = text(v, "event");
    let step = || {
        format!(
            "[{}] {}",
            int(v, "iteration").unwrap_or(0),
            text(v, "target")
        )
    };
    let body = match event {
        "run_start" | "run_resume" => {
            let mut limits = Vec::new();
            if let Some(o) = v.get("options") {
                if let Some(n) = int(o, "max_iterations") {
                    limits.push(format!("-n {n}"));
                }
                if let Some(d) = ms(o, "max_time_ms") {
                    limits.push(format!("--max-time {}", duration::format(d)));
                }
                if let Some(d) = ms(o, "timeout_ms") {
                    limits.push(format!("--timeout {}", duration::format(d)));
                }
                if let Some(n) = int(o, "retry").filter(|&n| n > 0) {
                    limits.push(format!("--retry {n}"));
                }
            }
            let how = if event == "run_start" {
                "started".to_string()
            } else {
                format!("resumed at iteration {}", int(v, "iteration").unwrap_or(0))
            };
            let mut s = format!(
                "run {} {how}: {} in {} (loopx {}, pid {})",
                text(v, "run_id"),
                text(v, "target"),
                text(v, "root"),
                text(v, "version"),
                int(v, "pid").unwrap_or(0)
            );
            if !limits.is_empty() {
                s.push_str(&format!("; limits: {}", limits.join(", ")));
            }
            s
        }
        "script_start" => match int(v, "attempt") {
            Some(a) if a > 1 => format!("{} started (attempt {a})", step()),
            _ => format!("{} started", step()),
        },
        "script_end" => {
            let ending = match (int(v, "exit_code"), text(v, "signal")) {
                (Some(code), _) => format!("exit {code}"),
                (None, signal) => format!("killed by {signal}"),
            };
            let took = duration::format_elapsed(ms(v, "duration_ms").unwrap_or_default());
            let next = match v.get("output") {
                Some(out @ Value::Object(_)) => {
                    if matches!(out.get("stop"), Some(Value::Bool(true))) {
                        " → stop".to_string()
                    } else if let Some(Value::String(goto)) = out.get("goto") {
                        format!(" → goto {goto}")
                    } else {
                        " → restart".to_string()
                    }
                }
                _ => String::new(),
            };
            let mut s = format!("{} {ending} in {took}{next}", step());
            let class = text(v, "class");
            if !class.is_empty() {
                s.push_str(&format!(" (class {class})"));
            }
            if let Some(c) = num(v, "cost_usd") {
                *cost += c;
                s.push_str(&format!(", cost {} (run {})", dollars(c), dollars(*cost)));
            }
            s
        }
        "timeout" => format!(
            "{} timed out after {}",
            step(),
            duration::format(ms(v, "timeout_ms").unwrap_or_default())
        ),
        "retry" => format!(
            "{} {}; retry in {} (attempt {})",
            step(),
            text(v, "why"),
            duration::format(ms(v, "delay_ms").unwrap_or_default()),
            int(v, "attempt").unwrap_or(0) + 1
        ),
        "wait" => {
            let until = clock::parse_rfc3339(text(v, "until")).unwrap_or(at);
            let left = if until > now_ms {
                let left = Duration::from_millis((until - now_ms) as u64);
                format!(
                    "{} left",
                    duration::format(Duration::from_secs(left.as_secs()))
                )
            } else {
                let asked = num(v, "seconds").unwrap_or(0.0).max(0.0);
                format!(
                    "waited {}",
                    duration::format(Duration::from_secs(asked as u64))
                )
            };
            format!("{} waits until {} ({left})", step(), local_time(until))
        }
        "run_end" => {
            let n = int(v, "iterations").unwrap_or(0);
            let mut s = format!(
                "run ended: {} after {n} iteration{} in {} (exit {})",
                text(v, "reason"),
                if n == 1 { "" } else { "s" },
                duration::format_elapsed(ms(v, "duration_ms").unwrap_or_default()),
                int(v, "exit_code").unwrap_or(1)
            );
            if let Some(c) = num(v, "cost_usd") {
                s.push_str(&format!(", cost {}", dollars(c)));
            }
            let error = text(v, "error");
            if !error.is_empty() {
                s.push_str(&format!(": {error}"));
            }
            s
        }
        "agent_progress" => format!("  agent {}", text(v, "text")),
        "rotated" => return None,
        other => other.to_string(),
    };
    Some(format!("{} {}", local_time(at), shown(&body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(json: &str, now: i64) -> Option<String> {
        let v = json::parse(json).expect("json");
        describe(&v, &mut 0.0, now).map(|s| s[9..].to_string())
    }

    #[test]
    fn each_event_reads_as_one_line() {
        let t = r#""time":"2026-11-24T17:32:06.074Z","run_id":"cb95278771ce3d8d""#;
        let now = clock::parse_rfc3339("2026-11-24T17:32:06.074Z").expect("time");
        let cases = [
            (
                format!(
                    r#"{{"v":1,"event":"script_end",{t},"iteration":1,"attempt":1,"target":"w:index","exit_code":0,"signal":null,"duration_ms":3,"stdout_bytes":40,"output":{{"structured":true,"stop":false,"goto":"check"}}}}"#
                ),
                "[1] w:index exit 0 in 3ms → goto check",
            ),
            (
                format!(
                    r#"{{"v":1,"event":"script_end",{t},"iteration":2,"attempt":1,"target":"w:c","exit_code":null,"signal":"SIGKILL","duration_ms":1500,"output":null,"class":"auth"}}"#
                ),
                "[2] w:c killed by SIGKILL in 1.5s (class auth)",
            ),
            (
                format!(
                    r#"{{"v":1,"event":"retry",{t},"iteration":2,"attempt":1,"target":"w:c","why":"failed (exit 2)","delay_ms":1000}}"#
                ),
                "[2] w:c failed (exit 2); retry in 1s (attempt 2)",
            ),
            (
                format!(
                    r#"{{"v":1,"event":"wait",{t},"iteration":1,"attempt":1,"target":"w:i","until":"2026-11-24T17:33:06.074Z","seconds":60}}"#
                ),
                "1m left)",
            ),
            (
                format!(
                    r#"{{"v":1,"event":"run_end",{t},"reason":"stop","exit_code":0,"iterations":2,"duration_ms":1015,"error":null,"cost_usd":2.5}}"#
                ),
                "run ended: stop after 2 iterations in 1.0s (exit 0), cost $2.50",
            ),
            (
                format!(
                    r#"{{"v":1,"event":"agent_progress",{t},"text":"claude: Read \u001b[2J"}}"#
                ),
                "  agent claude: Read \\u{1b}[2J",
            ),
        ];
        for (json, want) in cases {
            let got = line(&json, now).expect("a line");
            assert!(got.ends_with(want), "{got:?} should end with {want:?}");
        }
        assert_eq!(line(r#"{"event":"rotated","time":"x"}"#, now), None);
    }

    #[test]
    fn json_lines_keep_no_raw_control_character() {
        assert_eq!(
            json_safe("{\"a\":\"\u{7f}\u{9b}\"}"),
            r#"{"a":"\u007f\u009b"}"#
        );
    }
}
