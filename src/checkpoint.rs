//! Resume checkpoints (DESIGN.md "Beyond the spec"; README "Resuming a run").
//!
//! Every CLI run keeps `<run-id>.ckpt` in `$XDG_STATE_HOME/loopx/runs/`
//! (default `~/.local/state/loopx/runs/`; directories 0700, files 0600): what
//! `loopx resume` needs to run again the script that was about to run or
//! running, with its input, and to carry on. The run holds an `flock` on it
//! for as long as it lives: liveness is that lock, never a pid.
//!
//! The file is rewritten before each script starts, so its cost sits on
//! every iteration's path. A create-and-rename costs a disk-backed state
//! directory about half a millisecond of journal work; an in-place `pwrite`
//! of a few hundred bytes costs microseconds. So the record is written in
//! place, behind a header carrying its length and checksum: a write cut
//! short (a power cut: surviving one is best effort, there is no fsync)
//! reads as damaged rather than as a wrong state. A process dying cannot cut
//! a write to a regular file short.
//!
//! The script's input can be large (a result piped along a goto) and is
//! written only when it changed, into one of two files, `<id>.input.0` and
//! `<id>.input.1`, alternately: the record names the one that holds the
//! input of its script, so the other can be replaced while the record still
//! points at the old one.
//!
//! Reading one back trusts nothing (DESIGN.md "Beyond the spec": state
//! files; state_file.rs): its saved options decide what runs, so only a
//! regular file of the user's, in directories of the user's own, named by
//! a run id loopx could have made, is read, and never more than a bound.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::json::{self, Object, Value};
use crate::proc::sys;
use crate::state_file::{self, DirProblem, RECORD_LIMIT};

/// The record's format version.
const VERSION: u64 = 1;

/// Checkpoints older than this are pruned (README).
pub const MAX_AGE_MS: i64 = 30 * 24 * 3600 * 1000;

/// The directory of checkpoints: `$XDG_STATE_HOME/loopx/runs` when that is
/// absolute, else `~/.local/state/loopx/runs`. None without a home.
pub fn dir() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".local/state"))
        })?;
    Some(state.join("loopx").join("runs"))
}

/// Whether a run id is one loopx makes (engine.rs: 16 lowercase hex
/// digits). Only such ids name checkpoints that are read, so a resume
/// command shown to people is built from nothing but these characters.
pub fn valid_id(id: &str) -> bool {
    id.len() == 16 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Checks the checkpoint directory and the `loopx` directory above it
/// (whoever owns that one could swap `runs`), making either private again
/// when it is the user's but lost its privacy (state_file::private_dir).
/// `Ok(false)` when `dir` does not exist; the problem and the directory
/// that has it otherwise.
pub fn check_dir(dir: &Path) -> Result<bool, (PathBuf, DirProblem)> {
    let mut exists = true;
    for d in [dir.parent(), Some(dir)].into_iter().flatten() {
        exists = state_file::private_dir(d).map_err(|p| (d.to_path_buf(), p))?;
    }
    Ok(exists)
}

/// Creates `dir` (and its parents) private to the user; refuses a directory
/// that is not the user's own.
pub fn ensure_private(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    match check_dir(dir) {
        Ok(_) => Ok(()),
        Err((d, problem)) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{}: {problem}", d.display()),
        )),
    }
}

/// FNV-1a, 64 bits: enough to tell a torn record from a whole one.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Where a saved input is: which of the two input files, its length and
/// checksum (so a resume can tell the file still holds it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InputRef {
    pub slot: u8,
    pub len: u64,
    pub sum: u64,
}

/// How a run that can be resumed ended, when loopx lived to say so (a
/// SIGKILL or a crash leaves none).
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    /// The run log's `run_end` reason: `signal`, `script_failed`, `wait`, ...
    pub reason: String,
    pub exit_code: i32,
    pub at_ms: i64,
}

/// Everything a checkpoint records.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub run_id: String,
    pub root: String,
    pub target: String,
    /// The run's options as `RunOptions::saved` writes them: an env file
    /// as its path, never its values.
    pub options: String,
    /// `workflow:script` about to run or running.
    pub script: String,
    pub input: Option<InputRef>,
    pub iteration: u64,
    pub attempt: u64,
    pub waits: u64,
    /// A wait's deadline, milliseconds since the epoch, while one lasts.
    pub wait_until_ms: Option<i64>,
    /// Time the run has spent running, not counting any downtime between a
    /// crash and a resume (`--max-time` counts this).
    pub active_ms: u64,
    pub cost_usd: f64,
    pub started_ms: i64,
    pub updated_ms: i64,
    pub ended: Option<Ended>,
    /// The agent settings in force (agent/settings.rs; never secrets),
    /// given back by a resume whose shell does not set them again.
    pub agent: BTreeMap<String, String>,
}

impl Record {
    /// The record's JSON body.
    pub fn to_json(&self) -> String {
        let input = self.input.map(|i| {
            Object::default()
                .num("slot", u64::from(i.slot))
                .num("len", i.len)
                .str("sum", &format!("{:016x}", i.sum))
                .finish()
        });
        let ended = self.ended.as_ref().map(|e| {
            Object::default()
                .str("reason", &e.reason)
                .int("exit_code", i64::from(e.exit_code))
                .int("at_ms", e.at_ms)
                .finish()
        });
        let wait = self.wait_until_ms.map(|t| t.to_string());
        Object::default()
            .num("v", VERSION)
            .str("run_id", &self.run_id)
            .str("root", &self.root)
            .str("target", &self.target)
            .raw("options", &self.options)
            .str("script", &self.script)
            .raw("input", input.as_deref().unwrap_or("null"))
            .num("iteration", self.iteration)
            .num("attempt", self.attempt)
            .num("waits", self.waits)
            .raw("wait_until_ms", wait.as_deref().unwrap_or("null"))
            .num("active_ms", self.active_ms)
            .raw("cost_usd", &json::number_json(self.cost_usd))
            .int("started_ms", self.started_ms)
            .int("updated_ms", self.updated_ms)
            .raw("ended", ended.as_deref().unwrap_or("null"))
            .raw("agent", &strings_json(&self.agent))
            .finish()
    }

    /// Reads a body `to_json` wrote; None for anything else.
    pub fn from_json(text: &str) -> Option<Record> {
        let v = json::parse(text)?;
        if num(&v, "v")? != VERSION as f64 {
            return None;
        }
        let input = match v.get("input")? {
            Value::Null => None,
            i => Some(InputRef {
                slot: u8::try_from(uint(i, "slot")?).ok().filter(|s| *s < 2)?,
                len: uint(i, "len")?,
                sum: u64::from_str_radix(string(i, "sum")?, 16).ok()?,
            }),
        };
        let ended = match v.get("ended")? {
            Value::Null => None,
            e => Some(Ended {
                reason: string(e, "reason")?.to_string(),
                exit_code: i32::try_from(int(e, "exit_code")?).ok()?,
                at_ms: int(e, "at_ms")?,
            }),
        };
        let options = v.get("options")?;
        Some(Record {
            run_id: string(&v, "run_id")?.to_string(),
            root: string(&v, "root")?.to_string(),
            target: string(&v, "target")?.to_string(),
            options: object_json(options)?,
            script: string(&v, "script")?.to_string(),
            input,
            iteration: uint(&v, "iteration")?,
            attempt: uint(&v, "attempt")?,
            waits: uint(&v, "waits")?,
            wait_until_ms: match v.get("wait_until_ms")? {
                Value::Null => None,
                _ => Some(int(&v, "wait_until_ms")?),
            },
            active_ms: uint(&v, "active_ms")?,
            cost_usd: num(&v, "cost_usd").filter(|c| *c >= 0.0)?,
            started_ms: int(&v, "started_ms")?,
            updated_ms: int(&v, "updated_ms")?,
            ended,
            // Absent from checkpoints written before it was recorded.
            agent: match v.get("agent") {
                None => BTreeMap::new(),
                Some(a) => strings(a)?,
            },
        })
    }
}

/// A flat object of strings, as JSON.
fn strings_json(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .fold(Object::default(), |o, (k, v)| o.str(k, v))
        .finish()
}

/// A flat object of strings; None for anything else.
fn strings(v: &Value) -> Option<BTreeMap<String, String>> {
    let Value::Object(members) = v else {
        return None;
    };
    members
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => Some((k.clone(), s.clone())),
            _ => None,
        })
        .collect()
}

fn num(v: &Value, key: &str) -> Option<f64> {
    match v.get(key)? {
        Value::Number(n) if n.is_finite() => Some(*n),
        _ => None,
    }
}

fn int(v: &Value, key: &str) -> Option<i64> {
    let n = num(v, key)?;
    (n.fract() == 0.0 && n.abs() < 9.0e15).then_some(n as i64)
}

fn uint(v: &Value, key: &str) -> Option<u64> {
    u64::try_from(int(v, key)?).ok()
}

fn string<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    match v.get(key)? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// A flat object of numbers, strings, booleans and nulls (the saved options)
/// written back as JSON.
fn object_json(v: &Value) -> Option<String> {
    let Value::Object(members) = v else {
        return None;
    };
    let mut o = Object::default();
    for (k, value) in members {
        o = match value {
            Value::Null => o.raw(k, "null"),
            Value::Bool(b) => o.bool(k, *b),
            Value::Number(n) => o.raw(k, &json::number_json(*n)),
            Value::String(s) => o.str(k, s),
            _ => return None,
        };
    }
    Some(o.finish())
}

/// The file's bytes: a header line with the body's length and checksum,
/// then the body.
fn frame(body: &str) -> Vec<u8> {
    let mut out = format!(
        "loopx-checkpoint {VERSION} {} {:016x}\n",
        body.len(),
        checksum(body.as_bytes())
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// The body of a framed record, if it is whole; bytes after it (left by a
/// longer earlier record) are ignored.
fn unframe(bytes: &[u8]) -> Option<&str> {
    let nl = bytes.iter().position(|&b| b == b'\n')?;
    let header = std::str::from_utf8(&bytes[..nl]).ok()?;
    let mut parts = header.split(' ');
    let (Some("loopx-checkpoint"), Some(v), Some(len), Some(sum), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    if v.parse::<u64>().ok()? != VERSION {
        return None;
    }
    let len: usize = len.parse().ok()?;
    let sum = u64::from_str_radix(sum, 16).ok()?;
    let body = bytes.get(nl + 1..nl + 1 + len)?;
    (checksum(body) == sum).then_some(())?;
    std::str::from_utf8(body).ok()
}

/// Opens a checkpoint file for writing as state_file::open does for
/// reading: no link followed, a fifo neither blocks nor is accepted, only
/// a regular file of the user's of at most `limit` bytes.
fn open_rw(path: &Path, create: bool, limit: u64) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(state_file::said_plainly)?;
    state_file::check(&file, limit)?;
    Ok(file)
}

/// The checkpoint a live run keeps, locked for as long as it is open.
pub struct Checkpoint {
    dir: PathBuf,
    id: String,
    file: File,
    /// The length last written, to cut off what a shorter record leaves.
    written: u64,
}

impl Checkpoint {
    /// Where run `id`'s checkpoint is.
    pub fn path(dir: &Path, id: &str) -> PathBuf {
        dir.join(format!("{id}.ckpt"))
    }

    fn input_path(&self, slot: u8) -> PathBuf {
        self.dir.join(format!("{}.input.{slot}", self.id))
    }

    /// A new checkpoint for run `id` in `dir`.
    #[cfg(test)]
    pub fn create(dir: &Path, id: &str) -> io::Result<Checkpoint> {
        ready_dir(dir).map_err(|(d, problem)| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{}: {problem}", d.display()),
            )
        })?;
        Checkpoint::create_in(dir, id)
    }

    /// A new checkpoint for run `id` in `dir`, which [`ready_dir`] made
    /// ready.
    pub fn create_in(dir: &Path, id: &str) -> io::Result<Checkpoint> {
        let file = open_rw(&Checkpoint::path(dir, id), true, RECORD_LIMIT)?;
        sys::try_lock(&file)?;
        Ok(Checkpoint {
            dir: dir.to_path_buf(),
            id: id.to_string(),
            file,
            written: 0,
        })
    }

    /// Takes over the checkpoint of run `id` for a resume: fails with
    /// `WouldBlock` while its run lives.
    pub fn take_over(dir: &Path, id: &str) -> io::Result<(Checkpoint, Record)> {
        if !valid_id(id) {
            return Err(damaged());
        }
        let file = open_rw(&Checkpoint::path(dir, id), false, RECORD_LIMIT)?;
        sys::try_lock(&file)?;
        let record = read_record(&file, id).ok_or_else(damaged)?;
        // Ours (checked): back to 0600 if an fsGroup opened it to a group.
        let _ = file.set_permissions(fs::Permissions::from_mode(0o600));
        let written = file.metadata()?.len();
        let ckpt = Checkpoint {
            dir: dir.to_path_buf(),
            id: id.to_string(),
            file,
            written,
        };
        Ok((ckpt, record))
    }

    /// Writes `record` in place.
    pub fn save(&mut self, record: &Record) -> io::Result<()> {
        let bytes = frame(&record.to_json());
        self.file.write_all_at(&bytes, 0)?;
        let len = bytes.len() as u64;
        if len < self.written {
            self.file.set_len(len)?;
        }
        self.written = len;
        Ok(())
    }

    /// Stores a new input in the slot `current` does not use, and says
    /// where it is.
    pub fn save_input(&mut self, input: &[u8], current: Option<InputRef>) -> io::Result<InputRef> {
        let slot = match current {
            Some(InputRef { slot: 0, .. }) => 1,
            _ => 0,
        };
        let file = open_rw(&self.input_path(slot), true, u64::MAX)?;
        file.set_len(0)?;
        file.write_all_at(input, 0)?;
        Ok(InputRef {
            slot,
            len: input.len() as u64,
            sum: checksum(input),
        })
    }

    /// Reads the input `at` names, checking it is still the one saved:
    /// never more than its saved length, and only from a regular file of
    /// the user's (a link to /dev/zero or a fifo is refused, not read).
    pub fn load_input(&self, at: InputRef) -> io::Result<Vec<u8>> {
        let bytes = state_file::read(&self.input_path(at.slot), at.len)?;
        if bytes.len() as u64 != at.len || checksum(&bytes) != at.sum {
            return Err(damaged());
        }
        Ok(bytes)
    }

    /// The run finished: nothing to resume.
    pub fn remove(self) {
        for slot in 0..2 {
            let _ = fs::remove_file(self.input_path(slot));
        }
        let _ = fs::remove_file(Checkpoint::path(&self.dir, &self.id));
    }
}

/// What changes from one script run to the next, for [`Keeper::save`].
pub struct Progress<'a> {
    pub script: &'a str,
    /// The script's input when it is new since the last save; `Unchanged`
    /// keeps the saved one.
    pub input: Input<'a>,
    pub iteration: u64,
    pub attempt: u64,
    pub waits: u64,
    pub wait_until_ms: Option<i64>,
    pub active_ms: u64,
    pub cost_usd: f64,
}

/// A script's input as a save sees it.
pub enum Input<'a> {
    Unchanged,
    None,
    New(&'a [u8]),
}

/// The checkpoint of a live run and the record it last wrote. Saving is
/// best effort: a run whose checkpoint cannot be written goes on (it is
/// then not resumable), as with the status file.
pub struct Keeper {
    ckpt: Checkpoint,
    record: Record,
    broken: bool,
}

impl Keeper {
    pub fn new(ckpt: Checkpoint, record: Record) -> Keeper {
        Keeper {
            ckpt,
            record,
            broken: false,
        }
    }

    pub fn record(&self) -> &Record {
        &self.record
    }

    /// The agent settings the run goes on with (saved with the next record).
    pub fn set_agent(&mut self, agent: BTreeMap<String, String>) {
        self.record.agent = agent;
    }

    /// The locked descriptor. The engine hands a copy to the run's scripts,
    /// so the lock lives as long as any process of the run does (resume.rs).
    pub fn lock_fd(&self) -> std::os::fd::RawFd {
        self.ckpt.file.as_raw_fd()
    }

    pub fn save(&mut self, p: &Progress) {
        if self.broken {
            return;
        }
        let r = &mut self.record;
        match p.input {
            Input::Unchanged => {}
            Input::None => r.input = None,
            Input::New(bytes) => match self.ckpt.save_input(bytes, r.input) {
                Ok(at) => r.input = Some(at),
                Err(_) => {
                    self.broken = true;
                    return;
                }
            },
        }
        p.script.clone_into(&mut r.script);
        r.iteration = p.iteration;
        r.attempt = p.attempt;
        r.waits = p.waits;
        r.wait_until_ms = p.wait_until_ms;
        r.active_ms = p.active_ms;
        r.cost_usd = p.cost_usd;
        r.updated_ms = crate::clock::now_ms();
        if self.ckpt.save(&self.record).is_err() {
            self.broken = true;
        }
    }

    /// The run finished: nothing to resume.
    pub fn finish(self) {
        self.ckpt.remove();
    }

    /// The run ended another way: say how, and keep the checkpoint.
    pub fn end(mut self, ended: Ended, active_ms: u64, cost_usd: f64) {
        if self.broken {
            return;
        }
        self.record.ended = Some(ended);
        self.record.active_ms = active_ms;
        self.record.cost_usd = cost_usd;
        self.record.updated_ms = crate::clock::now_ms();
        let _ = self.ckpt.save(&self.record);
    }

    /// The saved input of the script about to run.
    pub fn input(&self) -> io::Result<Option<Vec<u8>>> {
        self.record
            .input
            .map(|at| self.ckpt.load_input(at))
            .transpose()
    }
}

fn damaged() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "the checkpoint is damaged")
}

/// The record of run `id` in `file` (checked by `open_rw` or
/// state_file::open), read within the bound; None when damaged or when it
/// names another run (a record copied or edited under another name).
fn read_record(file: &File, id: &str) -> Option<Record> {
    let bytes = state_file::read_open(file, RECORD_LIMIT).ok()?;
    Record::from_json(unframe(&bytes)?).filter(|r| r.run_id == id)
}

/// A checkpoint found in the directory.
#[derive(Debug)]
pub struct Found {
    pub id: String,
    /// None when the file cannot be read or is damaged.
    pub record: Option<Record>,
    /// Whether its run still holds the lock.
    pub live: bool,
    pub modified_ms: i64,
}

/// A checkpoint file as the directory and one `lstat` show it, unopened.
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: String,
    pub modified_ms: i64,
}

/// Every checkpoint file in `dir`, most recently written first, from one
/// `lstat` each, nothing opened: the names `<run id>.ckpt` that are regular
/// files of the user's within the bound (a link, a fifo or another user's
/// file is passed over, unread). The work grows with the number of files,
/// but at the cost of a `stat`, not of reading them: `loopx status` over
/// 10,000 kept runs opens only those it shows. An error names the directory
/// (or its parent) when it is not the user's own.
pub fn scan(dir: &Path) -> Result<Vec<Entry>, (PathBuf, DirProblem)> {
    if !check_dir(dir)? {
        return Ok(Vec::new());
    }
    let wanted = |name: &str| name.strip_suffix(".ckpt").is_some_and(valid_id);
    let Ok(entries) = sys::stat_entries(dir, wanted) else {
        return Ok(Vec::new());
    };
    let uid = sys::uid();
    let mut found: Vec<Entry> = entries
        .into_iter()
        .filter(|(_, st)| st.regular && st.uid == uid && st.size <= RECORD_LIMIT)
        .map(|(mut name, st)| {
            name.truncate(name.len() - ".ckpt".len());
            Entry {
                id: name,
                modified_ms: st.mtime_ms,
            }
        })
        .collect();
    found.sort_by(|a, b| b.modified_ms.cmp(&a.modified_ms).then(a.id.cmp(&b.id)));
    Ok(found)
}

/// Opens and reads one checkpoint `scan` found: whether its run is live
/// (the lock test works on any descriptor, and is released when it
/// closes; listing never changes a checkpoint) and its record. The file is
/// checked again on the open descriptor (it may have been replaced since
/// the scan); None when it is no longer one loopx would read.
pub fn examine(dir: &Path, entry: &Entry) -> Option<Found> {
    let file = state_file::open(&Checkpoint::path(dir, &entry.id), RECORD_LIMIT).ok()?;
    let live = sys::try_lock(&file).is_err();
    let record = read_record(&file, &entry.id);
    Some(Found {
        id: entry.id.clone(),
        record,
        live,
        // The scan's: a write since then changes no order that matters.
        modified_ms: entry.modified_ms,
    })
}

/// Every checkpoint in `dir`, opened and read, most recently written first
/// (`scan`, then `examine` of each).
pub fn list(dir: &Path) -> Result<Vec<Found>, (PathBuf, DirProblem)> {
    let entries = scan(dir)?;
    Ok(entries.iter().filter_map(|e| examine(dir, e)).collect())
}

/// Whether a checkpoint is old enough to prune: its run is not live, and
/// `MAX_AGE_MS` have passed since the later of its last write and the
/// time it waits for (a run that ended waiting, exit 75, for a time more
/// than 30 days out is kept until that time comes, and then 30 days).
fn stale(f: &Found, now_ms: i64) -> bool {
    let wait = f.record.as_ref().and_then(|r| r.wait_until_ms);
    let last = wait.map_or(f.modified_ms, |w| w.max(f.modified_ms));
    !f.live && now_ms.saturating_sub(last) > MAX_AGE_MS
}

/// Removes checkpoints (and their inputs) that are [`stale`]. Only those
/// last written more than `MAX_AGE_MS` ago can be, so only those are
/// opened: the rest cost one `lstat` each (`scan`).
pub fn prune(dir: &Path, now_ms: i64) -> Result<(), (PathBuf, DirProblem)> {
    for entry in scan(dir)? {
        if now_ms.saturating_sub(entry.modified_ms) <= MAX_AGE_MS {
            continue;
        }
        let Some(f) = examine(dir, &entry) else {
            continue;
        };
        if stale(&f, now_ms) {
            for suffix in [".ckpt", ".input.0", ".input.1"] {
                let _ = fs::remove_file(dir.join(format!("{}{suffix}", f.id)));
            }
        }
    }
    Ok(())
}

/// The stamp file of the last prune, beside the checkpoint directory (in
/// `loopx/`, which `check_dir` checks too): the directory itself holds
/// checkpoints only.
const PRUNE_STAMP: &str = ".runs-pruned";

/// How often a run start or `loopx status` prunes.
pub const PRUNE_EVERY_MS: i64 = 24 * 3600 * 1000;

/// [`prune`], when the last one (the stamp's time) is more than
/// `PRUNE_EVERY_MS` ago or unknown: a run start pays one `stat` for it on
/// other days, however many checkpoints are kept. Returns whether it
/// pruned. The directory must have been checked (`check_dir`).
pub fn prune_if_due(dir: &Path, now_ms: i64) -> Result<bool, (PathBuf, DirProblem)> {
    let Some(parent) = dir.parent() else {
        prune(dir, now_ms)?;
        return Ok(true);
    };
    if !state_file::sweep_due(&parent.join(PRUNE_STAMP), now_ms, PRUNE_EVERY_MS) {
        return Ok(false);
    }
    prune(dir, now_ms)?;
    Ok(true)
}

/// Makes the checkpoint directory ready for a new checkpoint: checked
/// (`check_dir`), created private when missing. The problem and the
/// directory that has it otherwise.
pub fn ready_dir(dir: &Path) -> Result<(), (PathBuf, DirProblem)> {
    if check_dir(dir)? {
        return Ok(());
    }
    let _ = fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
    check_dir(dir).map(|_| ())
}

/// Removes the checkpoint of run `id` (and its inputs) unless its run still
/// holds it (`loopx forget`): `WouldBlock` then. The lock is taken first,
/// so a run cannot start resuming it meanwhile.
pub fn forget(dir: &Path, id: &str) -> io::Result<()> {
    let file = OpenOptions::new()
        .read(true)
        // O_NONBLOCK: `list` vouched for a regular file, but one swapped
        // for a FIFO since must not hang the open.
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(Checkpoint::path(dir, id))?;
    sys::try_lock(&file)?;
    for suffix in [".input.0", ".input.1", ".ckpt"] {
        match fs::remove_file(dir.join(format!("{id}{suffix}"))) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            run_id: "00112233aabbccdd".into(),
            root: "/home/me/proj \"x\"".into(),
            target: "ralph".into(),
            options:
                r#"{"max_iterations":null,"env_file":"local.env","retry":2,"retry_delay_ms":10000}"#
                    .into(),
            script: "ralph:check".into(),
            input: Some(InputRef {
                slot: 1,
                len: 12,
                sum: 0xdead_beef,
            }),
            iteration: 7,
            attempt: 2,
            waits: 1,
            wait_until_ms: Some(1_795_541_405_123),
            active_ms: 65_000,
            cost_usd: 1.25,
            started_ms: 1_795_500_000_000,
            updated_ms: 1_795_541_000_000,
            ended: Some(Ended {
                reason: "signal".into(),
                exit_code: 143,
                at_ms: 1_795_541_000_500,
            }),
            agent: [("AGENT", "gemini"), ("AGENT_ALLOW", "npm test,\"make\"")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let r = record();
        assert_eq!(Record::from_json(&r.to_json()), Some(r.clone()));
        let bare = Record {
            input: None,
            wait_until_ms: None,
            ended: None,
            cost_usd: 0.0,
            ..r
        };
        assert_eq!(Record::from_json(&bare.to_json()), Some(bare.clone()));
        // A record written before the agent settings were kept reads
        // with none.
        let old = bare.to_json().replace(
            r#","agent":{"AGENT":"gemini","AGENT_ALLOW":"npm test,\"make\""}"#,
            "",
        );
        assert!(!old.contains("agent"), "{old}");
        let read = Record::from_json(&old).map(|r| r.agent);
        assert_eq!(read, Some(BTreeMap::new()));
    }

    #[test]
    fn a_run_waiting_far_out_is_pruned_only_30_days_after_its_time() {
        let found = |wait: Option<i64>| Found {
            id: "0000000000000001".into(),
            record: Some(Record {
                wait_until_ms: wait,
                ..record()
            }),
            live: false,
            modified_ms: 0,
        };
        let day = 24 * 3600 * 1000;
        assert!(stale(&found(None), MAX_AGE_MS + 1));
        assert!(!stale(&found(Some(60 * day)), MAX_AGE_MS + 1));
        assert!(stale(&found(Some(60 * day)), 60 * day + MAX_AGE_MS + 1));
        // A wait in the past counts from the last write.
        assert!(stale(&found(Some(-day)), MAX_AGE_MS + 1));
    }

    #[test]
    fn only_run_ids_loopx_makes_are_valid() {
        assert!(valid_id("00112233aabbccdd"));
        for bad in [
            "",
            "x; touch pwned",
            "00112233AABBCCDD",
            "00112233aabbccd",
            "../../../etc/pass",
        ] {
            assert!(!valid_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn planted_or_unreadable_files_are_not_listed() {
        let dir = temp_dir("planted").join("runs");
        let id = "00112233aabbccdd";
        let mut c = Checkpoint::create(&dir, id).expect("create");
        c.save(&record()).expect("save");
        drop(c);
        // A fifo named like a checkpoint, a link to one, a record under
        // another run's name, a name no run has, a record too large.
        let made = std::process::Command::new("mkfifo")
            .arg(dir.join("0000000000000001.ckpt"))
            .status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        std::os::unix::fs::symlink(
            dir.join(format!("{id}.ckpt")),
            dir.join("0000000000000002.ckpt"),
        )
        .expect("symlink");
        fs::copy(
            dir.join(format!("{id}.ckpt")),
            dir.join("0000000000000003.ckpt"),
        )
        .expect("copy");
        fs::copy(dir.join(format!("{id}.ckpt")), dir.join("x;y.ckpt")).expect("copy");
        let big = File::create(dir.join("0000000000000004.ckpt")).expect("big");
        big.set_len(3 << 30).expect("sparse");
        let found = list(&dir).expect("list");
        let listed: Vec<(&str, bool)> = found
            .iter()
            .map(|f| (f.id.as_str(), f.record.is_some()))
            .collect();
        assert_eq!(listed.len(), 2, "{listed:?}");
        assert!(listed.contains(&(id, true)), "{listed:?}");
        assert!(listed.contains(&("0000000000000003", false)), "{listed:?}");
        let _ = fs::remove_dir_all(dir.parent().expect("parent"));
    }

    #[test]
    fn a_torn_or_foreign_frame_is_damaged() {
        let bytes = frame(&record().to_json());
        assert!(unframe(&bytes).is_some());
        // Left over from a longer earlier record: ignored.
        let mut longer = bytes.clone();
        longer.extend_from_slice(b"tail of an older record");
        assert_eq!(unframe(&longer), unframe(&bytes));
        // Cut short, or one byte changed: damaged.
        assert_eq!(unframe(&bytes[..bytes.len() - 1]), None);
        let mut flipped = bytes.clone();
        let last = flipped.len() - 2;
        flipped[last] ^= 1;
        assert_eq!(unframe(&flipped), None);
        assert_eq!(unframe(b"{\"v\":1}"), None);
        assert_eq!(Record::from_json("{\"v\":2}"), None);
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "loopx-ckpt-{tag}-{}-{}",
            std::process::id(),
            crate::clock::unix_ms(std::time::SystemTime::now())
        ));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_live_checkpoint_is_locked_and_a_finished_one_removed() {
        let dir = temp_dir("live").join("runs");
        let abc = "00112233aabbccdd";
        let mut c = Checkpoint::create(&dir, abc).expect("create");
        let mut r = record();
        let input = c.save_input(b"hello input!", None).expect("input");
        r.input = Some(input);
        c.save(&r).expect("save");
        // A shorter record after a longer one still reads back.
        r.root = "/p".into();
        c.save(&r).expect("save again");
        let found = list(&dir).expect("list");
        assert_eq!(found.len(), 1);
        assert!(found[0].live);
        assert_eq!(found[0].record.as_ref(), Some(&r));
        assert!(matches!(
            Checkpoint::take_over(&dir, abc).map(|_| ()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock
        ));
        drop(c);
        let (c, back) = Checkpoint::take_over(&dir, abc).expect("take over");
        assert_eq!(back, r);
        assert_eq!(c.load_input(input).expect("load"), b"hello input!");
        // A second input goes to the other slot; the first stays readable.
        let mut c = c;
        let second = c.save_input(b"next", Some(input)).expect("second");
        assert_ne!(second.slot, input.slot);
        assert_eq!(c.load_input(input).expect("first"), b"hello input!");
        c.remove();
        assert!(list(&dir).expect("list").is_empty());
        assert_eq!(fs::read_dir(&dir).expect("dir").count(), 0);
        let _ = fs::remove_dir_all(dir.parent().expect("parent"));
    }

    #[test]
    fn old_checkpoints_are_pruned_and_live_ones_kept() {
        let dir = temp_dir("prune").join("runs");
        let (old_id, live_id) = ("0000000000000001", "0000000000000002");
        let mut old = Checkpoint::create(&dir, old_id).expect("create");
        let bare = Record {
            run_id: old_id.into(),
            wait_until_ms: None,
            ..record()
        };
        old.save(&bare).expect("save");
        drop(old);
        let live = Checkpoint::create(&dir, live_id).expect("create");
        let now = crate::clock::now_ms();
        prune(&dir, now).expect("prune");
        assert_eq!(list(&dir).expect("list").len(), 2, "both are recent");
        prune(&dir, now + MAX_AGE_MS + 60_000).expect("prune");
        let left: Vec<String> = list(&dir)
            .expect("list")
            .into_iter()
            .map(|f| f.id)
            .collect();
        assert_eq!(left, [live_id]);
        drop(live);
        let _ = fs::remove_dir_all(dir.parent().expect("parent"));
    }

    #[test]
    fn pruning_happens_at_most_once_a_day() {
        let dir = temp_dir("daily").join("runs");
        ready_dir(&dir).expect("ready");
        let now = crate::clock::now_ms();
        assert!(prune_if_due(&dir, now).expect("first"), "no stamp yet");
        assert!(!prune_if_due(&dir, now + 60_000).expect("same day"));
        assert!(prune_if_due(&dir, now + PRUNE_EVERY_MS + 60_000).expect("a day on"));
        assert!(
            scan(&dir).expect("scan").is_empty(),
            "the stamp is not listed"
        );
        let _ = fs::remove_dir_all(dir.parent().expect("parent"));
    }
}
