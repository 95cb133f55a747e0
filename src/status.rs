//! Live-run state for `loopx status` (DESIGN.md "Beyond the spec"; README
//! "Seeing what runs").
//!
//! Every run keeps one small JSON file, `<pid>.json`, in a directory of the
//! user's own: `$XDG_RUNTIME_DIR/loopx/`, else `loopx-<uid>` (mode 0700) in
//! the system's temporary directory. It is replaced by rename at each event
//! (never seen half-written) and removed when the run ends. Status is a
//! convenience: when the file cannot be written the run goes on silently.
//!
//! `loopx status` lists the files whose process is alive and is the same
//! process (its start time matches: a pid can be reused), and deletes the
//! rest, left by runs that were killed.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::checkpoint::{self, Record};
use crate::clock;
use crate::duration;
use crate::error::Error;
use crate::json::{self, Object, Value};
use crate::messages;
use crate::proc::sys;
use crate::state_file::{self, RECORD_LIMIT};
use crate::text::shown;

/// What a run is doing, for its status file.
pub enum Phase {
    /// A script runs.
    Running,
    /// Waiting before a retry.
    RetryWait,
    /// Waiting until a time a script asked for (milliseconds since the
    /// epoch).
    Waiting(i64),
}

/// Where the state directory is: `$XDG_RUNTIME_DIR/loopx`, else
/// `loopx-<uid>` in the system's temporary directory.
fn dir_path(uid: u32) -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(runtime) if runtime.is_absolute() => runtime.join("loopx"),
        _ => std::env::temp_dir().join(format!("loopx-{uid}")),
    }
}

/// The state directory, created private to the user if missing; None when
/// it cannot be made or is not safely ours (someone else's, a symlink, open
/// to others: in a shared temporary directory anyone may have made
/// `loopx-<uid>` first, or planted links in one left open; unlike the
/// checkpoint directory it is not repaired, and `loopx status` names it).
pub fn dir() -> Option<PathBuf> {
    let uid = sys::uid();
    let dir = dir_path(uid);
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    let meta = fs::symlink_metadata(&dir).ok()?;
    state_file::dir_problem(&meta, uid).is_none().then_some(dir)
}

/// The state directory as `loopx status` reads it: None when there is none
/// (no run has made it), an error naming it when it is there but not used
/// (runs then keep no state, so an empty list would be a lie).
fn dir_to_list() -> Result<Option<PathBuf>, Error> {
    let uid = sys::uid();
    let dir = dir_path(uid);
    let why = match fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => format!("it cannot be examined ({e})"),
        Ok(meta) => match state_file::dir_problem(&meta, uid) {
            None => return Ok(Some(dir)),
            Some(problem) => problem.to_string(),
        },
    };
    Err(Error::StateDirNotUsed { dir, why })
}

/// A process's start time (clock ticks since boot, /proc/<pid>/stat field
/// 22): with the pid, it names one process for good. None without /proc.
fn start_time(pid: &str) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain anything.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19).map(str::to_string)
}

/// The latest state to write, handed from the loop to the writer thread.
/// What the loop is doing, as handed to the writer thread.
struct State {
    script: String,
    iteration: u64,
    attempt: u64,
    phase: Phase,
    since_ms: u64,
    /// The class the last failed script named, if any.
    class: Option<String>,
    /// A note on the run as a whole (report::RESTART_STATUS), once made.
    note: Option<&'static str>,
}

impl State {
    /// The file's body: the run's fixed fields, then this state.
    fn render(&self, fixed: &Object) -> String {
        let until = match self.phase {
            Phase::Waiting(ms) => Some(clock::format_ms(u64::try_from(ms).unwrap_or(0))),
            _ => None,
        };
        let o = fixed
            .clone()
            .str("script", &self.script)
            .num("iteration", self.iteration)
            .num("attempt", self.attempt)
            .str(
                "state",
                match self.phase {
                    Phase::Running => "running",
                    Phase::RetryWait => "waiting_to_retry",
                    Phase::Waiting(_) => "waiting",
                },
            )
            .str("since", &clock::format_ms(self.since_ms))
            .opt_str("note", self.note);
        let o = match &self.class {
            Some(c) => o.str("class", c),
            None => o,
        };
        match until {
            Some(until) => o.str("until", &until).finish(),
            None => o.finish(),
        }
    }
}

#[derive(Default)]
struct Slot {
    latest: Option<State>,
    closed: bool,
    /// The writer waits for a state, not for its next turn: only then does
    /// a new state need to wake it (one wake-up per write, not per event).
    idle: bool,
}

type Shared = Arc<(Mutex<Slot>, Condvar)>;

/// The status file of the running loopx. A thread of its own writes it:
/// creating and renaming a file costs a disk-backed /tmp a tenth of a
/// millisecond of journal work, which would otherwise sit on every
/// iteration's path (B2: +22% per iteration on ext4). The loop only hands
/// over the new state; the writer writes the latest one, at most ten times
/// a second.
pub struct StatusFile {
    path: PathBuf,
    tmp: PathBuf,
    /// The run's note, kept for every later state (State::note).
    note: Option<&'static str>,
    shared: Shared,
    writer: Option<std::thread::JoinHandle<()>>,
}

/// Replaces `path` with `body`: written to `tmp`, then renamed over it.
fn replace(tmp: &Path, path: &Path, body: &str) {
    let written = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(tmp)
        .and_then(|mut f| f.write_all(body.as_bytes()))
        .and_then(|()| fs::rename(tmp, path));
    if written.is_err() {
        let _ = fs::remove_file(tmp);
    }
}

/// At most this many writes a second: a fast loop's states are skipped,
/// and the latest one lands within a tenth of a second.
const WRITE_EVERY: Duration = Duration::from_millis(100);

/// The writer thread: waits for a state, writes the latest one, until
/// closed.
fn write_states(shared: Shared, fixed: Object, tmp: PathBuf, path: PathBuf) {
    // Signals are the loop's business (proc/signals.rs), not this thread's.
    sys::block_signals_in_this_thread();
    let (lock, ready) = &*shared;
    let mut next_write = Instant::now();
    loop {
        let state = {
            let Ok(mut slot) = lock.lock() else { return };
            loop {
                if slot.closed {
                    return;
                }
                let now = Instant::now();
                slot.idle = slot.latest.is_none();
                let wait = match slot.latest {
                    Some(_) if now >= next_write => break,
                    Some(_) => next_write - now,
                    None => Duration::from_secs(3600),
                };
                slot = match ready.wait_timeout(slot, wait) {
                    Ok((slot, _)) => slot,
                    Err(_) => return,
                };
            }
            match slot.latest.take() {
                Some(state) => state,
                None => continue,
            }
        };
        // Rendered here, not on the loop's path: most states are skipped.
        replace(&tmp, &path, &state.render(&fixed));
        next_write = Instant::now() + WRITE_EVERY;
    }
}

impl StatusFile {
    /// Starts the file for this run; None (silently) when there is no
    /// usable directory.
    pub fn create(root: &Path, target: &str, run_id: &str) -> Option<StatusFile> {
        let dir = dir()?;
        let pid = std::process::id();
        let now = clock::unix_ms(SystemTime::now());
        let (root, target, run_id) = (
            root.to_string_lossy().into_owned(),
            target.to_string(),
            run_id.to_string(),
        );
        // Built by the writer, off the way to the first script: it reads
        // /proc/self/stat.
        let fixed = move || {
            Object::default()
                .num("v", 1)
                .num("pid", u64::from(pid))
                .opt_str("start_time", start_time("self").as_deref())
                .str("run_id", &run_id)
                .str("root", &root)
                .str("target", &target)
                .str("run_started", &clock::format_ms(now))
                .num("run_started_ms", now)
        };
        let path = dir.join(format!("{pid}.json"));
        let tmp = dir.join(format!("{pid}.json.tmp"));
        let shared: Shared = Arc::default();
        let writer = {
            let (shared, tmp, path) = (shared.clone(), tmp.clone(), path.clone());
            std::thread::Builder::new()
                .name("status".into())
                .stack_size(64 * 1024)
                .spawn(move || write_states(shared, fixed(), tmp, path))
                .ok()?
        };
        Some(StatusFile {
            path,
            tmp,
            note: None,
            shared,
            writer: Some(writer),
        })
    }

    /// Replaces the file with the run's current state.
    pub fn update(
        &mut self,
        script: &str,
        iteration: u64,
        attempt: u64,
        phase: Phase,
        since_ms: u64,
        class: Option<&str>,
    ) {
        let state = State {
            class: class.map(str::to_string),
            script: script.to_string(),
            iteration,
            attempt,
            phase,
            since_ms,
            note: self.note,
        };
        let (lock, ready) = &*self.shared;
        if let Ok(mut slot) = lock.lock() {
            slot.latest = Some(state);
            if slot.idle {
                slot.idle = false;
                ready.notify_one();
            }
        }
    }
}

impl StatusFile {
    /// Notes something about the run as a whole, shown from its next state
    /// on (the loop's next script start comes within milliseconds).
    pub fn note(&mut self, note: &'static str) {
        self.note = Some(note);
    }
}

impl Drop for StatusFile {
    fn drop(&mut self) {
        let (lock, ready) = &*self.shared;
        if let Ok(mut slot) = lock.lock() {
            slot.closed = true;
            slot.latest = None;
            ready.notify_one();
        }
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
        let _ = fs::remove_file(&self.path);
        let _ = fs::remove_file(&self.tmp);
    }
}

/// One live run, as read back from its file.
struct Live {
    value: Value,
}

fn text_of<'a>(v: &'a Value, key: &str) -> &'a str {
    match v.get(key) {
        Some(Value::String(s)) => s,
        _ => "",
    }
}

fn number_of(v: &Value, key: &str) -> u64 {
    match v.get(key) {
        Some(Value::Number(n)) if *n >= 0.0 => *n as u64,
        _ => 0,
    }
}

/// Whether the run that wrote `v` is still that process.
fn alive(v: &Value) -> bool {
    let pid = number_of(v, "pid");
    let Ok(pid_t) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid_t <= 0 {
        return false;
    }
    if !sys::process_exists(pid_t) {
        return false;
    }
    match (v.get("start_time"), start_time(&pid.to_string())) {
        (Some(Value::String(recorded)), Some(now)) => *recorded == now,
        // Without /proc there is nothing to compare: trust the pid.
        _ => true,
    }
}

/// Reads every status file; deletes those of runs that are gone.
fn live_runs(dir: &Path) -> Vec<Live> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_suffix(".json")
            .or_else(|| name.strip_suffix(".json.tmp"))
        else {
            continue;
        };
        if name.ends_with(".tmp") {
            // A rename that never happened: only its writer may still use it.
            // Any failure counts as gone (unlike `alive`, EPERM too): a
            // status file of this user's is only written by this user's runs.
            let gone = pid
                .parse::<libc::pid_t>()
                .map_or(true, |p| sys::signal_zero(p).is_err());
            if gone {
                let _ = fs::remove_file(&path);
            }
            continue;
        }
        // Bounded, and never a fifo or a link (state_file.rs): status must
        // neither hang nor fill memory on a file it did not write.
        let Ok(raw) = state_file::read(&path, RECORD_LIMIT) else {
            continue;
        };
        match json::parse(&String::from_utf8_lossy(&raw)) {
            Some(value) if alive(&value) => found.push(Live { value }),
            _ => {
                let _ = fs::remove_file(&path);
            }
        }
    }
    found.sort_by_key(|l| number_of(&l.value, "run_started_ms"));
    found
}

/// The ids of the live runs of the project at `root`, the most recently
/// started first: from the status files, one per live run, so finding them
/// costs the same however many runs are kept (`loopx tail`).
pub fn live_in(root: &str) -> Vec<String> {
    let Ok(Some(dir)) = dir_to_list() else {
        return Vec::new();
    };
    live_runs(&dir)
        .iter()
        .rev()
        .filter(|l| text_of(&l.value, "root") == root)
        .map(|l| text_of(&l.value, "run_id").to_string())
        .collect()
}

/// `loopx status [--json]`: the live runs, then the resumable ones.
pub fn list(as_json: bool) -> Result<(), Error> {
    let runs = dir_to_list()?.map(|d| live_runs(&d)).unwrap_or_default();
    let resumable = resumable_runs(if as_json { usize::MAX } else { SHOWN });
    let now = clock::unix_ms(SystemTime::now());
    if as_json {
        let mut items: Vec<String> = runs.iter().map(|r| as_json_item(&r.value, now)).collect();
        items.extend(resumable.runs.iter().map(resumable_json));
        return messages::print_stdout(&format!("[{}]\n", items.join(",")));
    }
    let mut text = table(&runs, now);
    if !resumable.runs.is_empty() {
        text.push_str(&resumable_table(&resumable.runs, now));
    }
    if resumable.more > 0 {
        text.push_str(&format!(
            "... and {} older checkpoints (`loopx status --json` lists every resumable run)\n",
            resumable.more
        ));
    }
    messages::print_stdout(&text)
}

/// How many resumable runs the table of `loopx status` shows, most recent
/// first; `--json` lists them all.
const SHOWN: usize = 20;

/// The resumable runs `loopx status` lists.
#[derive(Default)]
struct Resumable {
    runs: Vec<Record>,
    /// Checkpoints not opened, past the `limit`: resumable runs most of
    /// them, unless their runs are live or their records damaged.
    more: usize,
}

/// The checkpoints of runs that can be resumed, most recent first, at most
/// `limit` of them (old ones pruned first, once a day). The directory is
/// scanned with one `lstat` a file; only checkpoints that may be shown are
/// opened, so 10,000 kept runs cost 10,000 `lstat`s and `limit` reads.
fn resumable_runs(limit: usize) -> Resumable {
    let Some(dir) = checkpoint::dir() else {
        return Resumable::default();
    };
    let scanned =
        checkpoint::prune_if_due(&dir, clock::now_ms()).and_then(|_| checkpoint::scan(&dir));
    match scanned {
        Ok(entries) => {
            let mut found = Resumable::default();
            let mut rest = entries.iter();
            for entry in rest.by_ref() {
                if found.runs.len() == limit {
                    found.more = 1;
                    break;
                }
                let f = checkpoint::examine(&dir, entry);
                found
                    .runs
                    .extend(f.filter(|f| !f.live).and_then(|f| f.record));
            }
            found.more += rest.count();
            found
        }
        Err((dir, problem)) => {
            // The live runs are still worth listing; the resumable ones
            // are unknown, and saying nothing would claim there are none.
            messages::warn(&format!(
                "resumable runs are not listed: {} is not used for checkpoints, as {problem}",
                shown(&dir.to_string_lossy())
            ));
            Resumable::default()
        }
    }
}

/// How and when a resumable run ended: `script_failed (exit 1)`; a run
/// killed outright left no word.
fn how_it_ended(r: &Record) -> (String, i64) {
    match &r.ended {
        Some(e) => (format!("{} (exit {})", e.reason, e.exit_code), e.at_ms),
        None => ("killed (no word from loopx)".to_string(), r.updated_ms),
    }
}

fn resumable_json(r: &Record) -> String {
    let (reason, code, at) = match &r.ended {
        Some(e) => (e.reason.as_str(), Some(e.exit_code), e.at_ms),
        None => ("killed", None, r.updated_ms),
    };
    let code = code.map_or("null".to_string(), |c| c.to_string());
    Object::default()
        .str("state", "resumable")
        .str("run_id", &r.run_id)
        .str("project", &r.root)
        .str("target", &r.target)
        .str("script", &r.script)
        .num("iteration", r.iteration)
        .str("reason", reason)
        .raw("exit_code", &code)
        .str("ended", &clock::format_ms(u64::try_from(at).unwrap_or(0)))
        .raw("cost_usd", &json::number_json(r.cost_usd))
        .str("resume", &format!("loopx resume {}", r.run_id))
        .finish()
}

fn resumable_table(runs: &[Record], now_ms: u64) -> String {
    let mut rows: Vec<[String; 5]> = vec![[
        "RESUMABLE".into(),
        "PROJECT".into(),
        "TARGET".into(),
        "ENDED".into(),
        "TO RESUME".into(),
    ]];
    for r in runs {
        let (how, at) = how_it_ended(r);
        let ago = now_ms.saturating_sub(u64::try_from(at).unwrap_or(0)) / 1000;
        rows.push([
            r.run_id.clone(),
            shown(&r.root).into_owned(),
            shown(&r.target).into_owned(),
            format!(
                "{how}, {} ago",
                duration::format(std::time::Duration::from_secs(ago))
            ),
            format!("loopx resume {}", r.run_id),
        ]);
    }
    format!("\n{}", align(&rows))
}

/// Rows of cells as left-aligned columns, two spaces apart.
fn align<const N: usize>(rows: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        // Padded by hand: `format!("{cell:<w$}")` panics on a width past
        // 65535, and a project path can be longer than that.
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| {
                let pad = w.saturating_sub(cell.chars().count());
                format!("{cell}{}", " ".repeat(pad))
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// One run for `loopx status --json`: the table's columns and a bit more.
fn as_json_item(v: &Value, now_ms: u64) -> String {
    let started = number_of(v, "run_started_ms");
    let o = Object::default()
        .num("pid", number_of(v, "pid"))
        .str("run_id", text_of(v, "run_id"))
        .str("project", text_of(v, "root"))
        .str("target", text_of(v, "target"))
        .str("script", text_of(v, "script"))
        .str("state", text_of(v, "state"))
        .num("iteration", number_of(v, "iteration"))
        .num("attempt", number_of(v, "attempt"))
        .str("run_started", text_of(v, "run_started"))
        .str("script_started", text_of(v, "since"))
        .num("elapsed_ms", now_ms.saturating_sub(started))
        .opt_str("note", Some(text_of(v, "note")).filter(|n| !n.is_empty()));
    // The class the last failed script named, while it waits to retry.
    match text_of(v, "class") {
        "" => o.finish(),
        class => o.str("class", class).finish(),
    }
}

/// The aligned table of `loopx status`.
fn table(runs: &[Live], now_ms: u64) -> String {
    if runs.is_empty() {
        return "no loopx runs\n".to_string();
    }
    let mut rows: Vec<[String; 6]> = vec![[
        "PID".into(),
        "PROJECT".into(),
        "TARGET".into(),
        "SCRIPT".into(),
        "ITERATION".into(),
        "ELAPSED".into(),
    ]];
    for run in runs {
        let v = &run.value;
        let mut script = shown(text_of(v, "script")).into_owned();
        match text_of(v, "state") {
            "waiting_to_retry" => match text_of(v, "class") {
                "" => script.push_str(" (waiting to retry)"),
                class => script.push_str(&format!(" (waiting to retry after {})", shown(class))),
            },
            "waiting" => {
                let until = text_of(v, "until");
                // `2026-11-25T14:00:00.000Z` → `2026-11-25T14:00:00Z`
                let until = until
                    .get(..19)
                    .map_or(until.to_string(), |t| format!("{t}Z"));
                script.push_str(&format!(" (waiting until {until})"));
            }
            _ => {}
        }
        let note = text_of(v, "note");
        if !note.is_empty() {
            script.push_str(&format!(" ({})", shown(note)));
        }
        let mut iteration = number_of(v, "iteration").to_string();
        let attempt = number_of(v, "attempt");
        if attempt > 1 {
            iteration.push_str(&format!(" (attempt {attempt})"));
        }
        let elapsed = now_ms.saturating_sub(number_of(v, "run_started_ms"));
        rows.push([
            number_of(v, "pid").to_string(),
            shown(text_of(v, "root")).into_owned(),
            shown(text_of(v, "target")).into_owned(),
            script,
            iteration,
            duration::format(std::time::Duration::from_secs(elapsed / 1000)),
        ]);
    }
    align(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(json: &str) -> Live {
        Live {
            value: json::parse(json).unwrap(),
        }
    }

    #[test]
    fn the_table_aligns_columns_and_says_what_each_run_does() {
        let runs = [
            live(
                r#"{"pid":42,"root":"/p","target":"ralph","script":"ralph:check","iteration":3,"attempt":1,"state":"running","run_started_ms":1000}"#,
            ),
            live(
                r#"{"pid":7,"root":"/home/me/long","target":"b","script":"b:index","iteration":12,"attempt":2,"state":"waiting_to_retry","run_started_ms":0}"#,
            ),
        ];
        assert_eq!(
            table(&runs, 3_661_000),
            "PID  PROJECT        TARGET  SCRIPT                      ITERATION       ELAPSED\n\
             42   /p             ralph   ralph:check                 3               1h1m\n\
             7    /home/me/long  b       b:index (waiting to retry)  12 (attempt 2)  1h1m1s\n"
        );
        assert_eq!(table(&[], 0), "no loopx runs\n");
    }

    #[test]
    fn a_cell_wider_than_a_format_width_is_aligned_without_a_panic() {
        let long = "p".repeat(70_000);
        let rows = [[long.clone(), "a".into()], ["b".into(), "c".into()]];
        let text = align(&rows);
        assert_eq!(text, format!("{long}  a\nb{}  c\n", " ".repeat(69_999)));
    }

    #[test]
    fn a_status_file_of_a_gone_or_reused_pid_is_not_alive() {
        let me = std::process::id();
        let st = start_time("self").unwrap();
        assert!(alive(
            &json::parse(&format!(r#"{{"pid":{me},"start_time":"{st}"}}"#)).unwrap()
        ));
        assert!(!alive(
            &json::parse(&format!(r#"{{"pid":{me},"start_time":"1"}}"#)).unwrap()
        ));
        assert!(!alive(&json::parse(r#"{"pid":0}"#).unwrap()));
        assert!(!alive(&json::parse(r#"{"pid":99999999}"#).unwrap()));
    }
}
