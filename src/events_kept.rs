//! The run's kept event lines (DESIGN.md "Beyond the spec"; docs/watching.md,
//! docs/reliability.md): every run appends its run-log lines, `--log` or
//! not, to `<run-id>.events.jsonl` beside its checkpoint in
//! `$XDG_STATE_HOME/loopx/runs/`, so `loopx tail` can follow it from any
//! shell. `loopx agent` inside a run adds its progress lines there too.
//!
//! Written safely: the directory is private (checkpoint.rs makes it so),
//! the file is opened without following a link, `O_APPEND`, and checked to
//! be a regular file of the user's before a byte is written; each line goes
//! out in one write. Bounded: a line that would take the file over the
//! bound first moves it to `<id>.events.jsonl.1` (replacing an older one),
//! so a run keeps at most about twice the bound, its newest lines. The run
//! holds an `flock` on its file for as long as it lives: that is how `tail`
//! tells a live run from a dead one. Pruned like checkpoints: a file not
//! written for 30 days whose run has no checkpoint left goes, looked for at
//! most once a day, after a run's first script.
//!
//! Best effort, like the status file: a file that cannot be written leaves
//! the run going on without it; one that is a link or not ours is warned
//! about once.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::checkpoint::{self, Checkpoint};
use crate::json::{self, Object};
use crate::messages;
use crate::proc::sys;
use crate::state_file;
use crate::text::shown;

/// The format version in every line of the run log (run_log.rs), whose
/// lines these are; defined here, below run_log, which keeps them through
/// this module.
pub const FORMAT: u64 = 1;

/// The default bound on one kept file (the `.1` file holds as much again).
pub const DEFAULT_LIMIT: u64 = 8 * 1024 * 1024;

/// The smallest bound `LOOPX_EVENTS_MAX_BYTES` may set.
const MIN_LIMIT: u64 = 4096;

/// How often, at most, the directory is swept for old files.
const PRUNE_EVERY: Duration = Duration::from_secs(24 * 3600);

/// The stamp whose modification time says when the last sweep was.
const PRUNE_STAMP: &str = ".events-pruned";

/// The bound: `LOOPX_EVENTS_MAX_BYTES` (bytes, at least 4096), else 8 MiB.
pub fn limit() -> u64 {
    std::env::var("LOOPX_EVENTS_MAX_BYTES")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_LIMIT, |n| n.max(MIN_LIMIT))
}

/// Where run `id`'s kept lines are, in the checkpoint directory `dir`.
pub fn path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.events.jsonl"))
}

/// The older lines of run `id`, moved aside when the file reached its bound.
pub fn older_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.events.jsonl.1"))
}

/// Opens a kept file for appending: created 0600, no link followed, a fifo
/// neither blocks nor is accepted, only a regular file of the user's.
fn open_append(path: &Path, create: bool) -> io::Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(create)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(state_file::said_plainly)?;
    state_file::check(&file, u64::MAX)?;
    Ok(file)
}

/// Takes the run's lock on its file; a `tail` testing it at that very
/// moment holds it for microseconds, so a few tries.
fn lock(file: &File) {
    for _ in 0..20 {
        if sys::try_lock(file).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Writes `line` in one write (retried only for what a signal cut short).
fn write_line(mut file: &File, line: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < line.len() {
        match file.write(&line[done..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The kept lines of a live run.
pub struct Kept {
    dir: PathBuf,
    id: String,
    file: File,
    limit: u64,
    /// The project root, from the run's first line: the first line of a
    /// new file after a rotation names it again, so `tail` can tell whose
    /// run it is.
    root: Option<String>,
    swept: bool,
    broken: bool,
}

impl Kept {
    /// The kept lines of run `id`, when there is a private state directory
    /// to keep them in; None (silently) without one.
    pub fn open(id: &str) -> Option<Kept> {
        let dir = checkpoint::dir()?;
        if !checkpoint::valid_id(id) || checkpoint::ensure_private(&dir).is_err() {
            return None;
        }
        let path = path(&dir, id);
        let file = match open_append(&path, true) {
            Ok(file) => file,
            Err(err) => {
                refused(&path, &err);
                return None;
            }
        };
        lock(&file);
        Some(Kept {
            dir,
            id: id.to_string(),
            file,
            limit: limit(),
            root: None,
            swept: false,
            broken: false,
        })
    }

    /// Appends one line of the run log (its text, newline included).
    pub fn write(&mut self, line: &str) {
        if self.broken {
            return;
        }
        if self.root.is_none() {
            self.root = root_of(line);
        }
        let size = self.file.metadata().map_or(0, |m| m.len());
        if size > 0 && size + line.len() as u64 > self.limit && self.rotate().is_err() {
            self.broken = true;
            return;
        }
        if write_line(&self.file, line.as_bytes()).is_err() {
            self.broken = true;
        }
        if !self.swept && line.contains(r#""event":"script_end""#) {
            self.swept = true;
            prune_if_due(&self.dir, SystemTime::now());
        }
    }

    /// Moves the full file to `.1` and starts a new one, locked before the
    /// old one is let go (so `tail` never sees the run unlocked), whose
    /// first line names the run's project.
    fn rotate(&mut self) -> io::Result<()> {
        let path = path(&self.dir, &self.id);
        fs::rename(&path, older_path(&self.dir, &self.id))?;
        let file = open_append(&path, true)?;
        lock(&file);
        self.file = file;
        let mut line = Object::default()
            .num("v", FORMAT)
            .str("event", "rotated")
            .str("time", &crate::clock::rfc3339(SystemTime::now()))
            .str("run_id", &self.id)
            .opt_str("root", self.root.as_deref())
            .finish();
        line.push('\n');
        write_line(&self.file, line.as_bytes())
    }
}

/// The `root` of a `run_start` or `run_resume` line.
fn root_of(line: &str) -> Option<String> {
    if !line.contains(r#""event":"run_start""#) && !line.contains(r#""event":"run_resume""#) {
        return None;
    }
    match json::parse(line.trim_end())?.get("root")? {
        json::Value::String(root) => Some(root.clone()),
        _ => None,
    }
}

/// A kept file that is there but not ours to write: said once, since it
/// was probably planted (a link to a file of the user's).
fn refused(path: &Path, err: &io::Error) {
    if err.kind() == io::ErrorKind::InvalidData {
        messages::warn(&format!(
            "not keeping this run's event lines in {}: {err}",
            shown(&path.to_string_lossy())
        ));
    }
}

/// `loopx agent` inside a run (`LOOPX_RUN_ID` set): its progress line,
/// appended to the run's kept lines as an `agent_progress` event. Only to
/// a file the run made (never created here), and not past the bound (the
/// run rotates it at its next line).
pub fn agent_progress(text: &str) {
    let Some(id) = std::env::var("LOOPX_RUN_ID")
        .ok()
        .filter(|id| checkpoint::valid_id(id))
    else {
        return;
    };
    let Some(dir) = checkpoint::dir() else { return };
    if !matches!(checkpoint::check_dir(&dir), Ok(true)) {
        return;
    }
    let Ok(file) = open_append(&path(&dir, &id), false) else {
        return;
    };
    if file.metadata().map_or(true, |m| m.len() >= limit()) {
        return;
    }
    let mut line = Object::default()
        .num("v", FORMAT)
        .str("event", "agent_progress")
        .str("time", &crate::clock::rfc3339(SystemTime::now()))
        .str("run_id", &id)
        .str("text", text)
        .finish();
    line.push('\n');
    let _ = write_line(&file, line.as_bytes());
}

/// Sweeps `dir` for old kept files when the last sweep is a day old.
fn prune_if_due(dir: &Path, now: SystemTime) {
    let every_ms = PRUNE_EVERY.as_millis() as i64;
    let now_ms = crate::clock::unix_ms(now) as i64;
    if state_file::sweep_due(&dir.join(PRUNE_STAMP), now_ms, every_ms) {
        prune(dir, now);
    }
}

/// Removes kept files not written for 30 days whose run has no checkpoint
/// (a resumable run keeps its lines as long as its checkpoint) and holds
/// no lock. Only names of loopx's own kind are looked at: one `lstat` each.
pub fn prune(dir: &Path, now: SystemTime) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let max_age = Duration::from_millis(checkpoint::MAX_AGE_MS as u64);
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let Some(id) = name
            .strip_suffix(".events.jsonl")
            .or_else(|| name.strip_suffix(".events.jsonl.1"))
            .filter(|id| checkpoint::valid_id(id))
        else {
            continue;
        };
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let age = meta
            .modified()
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default();
        if age <= max_age || Checkpoint::path(dir, id).exists() {
            continue;
        }
        if meta.is_file() && meta.uid() == sys::uid() && is_locked(&entry.path()) {
            continue;
        }
        let _ = fs::remove_file(entry.path());
    }
}

/// Whether a live run holds the lock on the kept file at `path`.
fn is_locked(path: &Path) -> bool {
    match state_file::open(path, u64::MAX) {
        Ok(file) => held(&file),
        Err(_) => false,
    }
}

/// Whether a live run holds the lock on `file` (tested on the caller's
/// own descriptor, then let go).
pub fn held(file: &File) -> bool {
    if sys::try_lock(file).is_ok() {
        let _ = sys::unlock(file);
        false
    } else {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("loopx-kept-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("temp dir");
        fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).expect("chmod");
        d
    }

    fn kept(dir: &Path, id: &str, limit: u64) -> Kept {
        let file = open_append(&path(dir, id), true).expect("open");
        lock(&file);
        Kept {
            dir: dir.to_path_buf(),
            id: id.to_string(),
            file,
            limit,
            root: None,
            swept: true,
            broken: false,
        }
    }

    #[test]
    fn a_full_file_moves_to_dot_1_and_the_new_one_names_the_project() {
        let d = temp("rotate");
        let id = "0123456789abcdef";
        let mut k = kept(&d, id, 200);
        k.write("{\"v\":1,\"event\":\"run_start\",\"root\":\"/p\"}\n");
        for i in 0..20 {
            k.write(&format!("{{\"v\":1,\"event\":\"x\",\"n\":{i}}}\n"));
        }
        let now = fs::read_to_string(path(&d, id)).expect("read");
        let older = fs::read_to_string(older_path(&d, id)).expect("read .1");
        assert!(now.len() <= 200 && older.len() <= 200, "{now}\n{older}");
        assert!(now.starts_with("{\"v\":1,\"event\":\"rotated\""), "{now}");
        assert!(now
            .lines()
            .next()
            .is_some_and(|l| l.contains("\"root\":\"/p\"")));
        assert!(now.ends_with("\"n\":19}\n"), "{now}");
        // The run holds the lock on its current file.
        let reader = state_file::open(&path(&d, id), u64::MAX).expect("open");
        assert!(held(&reader));
        drop(k);
        assert!(!held(&reader));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_link_or_fifo_is_never_written_through() {
        let d = temp("link");
        let target = d.join("target");
        fs::write(&target, "mine\n").expect("write");
        let id = "00000000000000aa";
        std::os::unix::fs::symlink(&target, path(&d, id)).expect("symlink");
        let err = open_append(&path(&d, id), true).expect_err("a link");
        assert_eq!(err.to_string(), "it is a symbolic link");
        assert_eq!(fs::read_to_string(&target).expect("read"), "mine\n");
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn old_files_without_a_checkpoint_are_pruned() {
        let d = temp("prune");
        let old = "00000000000000a1";
        let resumable = "00000000000000a2";
        let fresh = "00000000000000a3";
        for id in [old, resumable, fresh] {
            fs::write(path(&d, id), "{}\n").expect("write");
        }
        fs::write(older_path(&d, old), "{}\n").expect("write");
        fs::write(Checkpoint::path(&d, resumable), "").expect("write");
        fs::write(d.join("notes.txt"), "").expect("write");
        let later = SystemTime::now() + Duration::from_secs(31 * 24 * 3600);
        // Not yet due within a day of the last sweep.
        prune_if_due(&d, SystemTime::now());
        prune(&d, later);
        assert!(!path(&d, old).exists() && !older_path(&d, old).exists());
        assert!(path(&d, resumable).exists());
        assert!(d.join("notes.txt").exists());
        assert!(d.join(PRUNE_STAMP).exists());
        let _ = fs::remove_dir_all(&d);
    }
}
