//! The run record of `--log <path>` / `LOOPX_LOG` (DESIGN.md "Beyond the
//! spec"; README "Run log"): JSON lines, one event each, carrying the format
//! version and the run id so runs sharing a file can be told apart.
//!
//! Each line goes out in a single write(2) on a file opened with O_APPEND,
//! under an flock held around the append: runs sharing a log never
//! interleave within a line, and each one repairs what a failed append left
//! (a line without its newline is terminated before the next line; a short
//! write, e.g. on a full disk, is truncated back to where its line started).
//! The file is created 0600 (it may hold results), and synced to disk when
//! the run ends.
//!
//! The log must be a regular file of the current user, reached without a
//! symbolic link: a log in a shared directory could otherwise be a link to
//! the user's ~/.bashrc, or a file another user reads or prepared. Anything
//! else stops the run before anything runs, as does a log that cannot be
//! opened; a write that fails later is warned about once, and the loop goes
//! on.
//!
//! `-` writes the log to loopx's stdout instead (containers, log
//! collectors): scripts' stdout is captured, so nothing else of `loopx run`
//! goes there. Only the JS API's machine mode, whose stdout is its channel,
//! refuses it.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::SystemTime;

use crate::clock;
use crate::error::Error;
use crate::json::Object;
use crate::messages;
use crate::proc::sys;
use crate::text::shown;

pub use crate::events_kept::FORMAT;

/// The `--log` value that means stdout.
pub const STDOUT: &str = "-";

const HELP: &str = "loopx run --help";

enum Sink {
    /// A log file of the user's, shared with concurrent runs. `end`: where
    /// this run's last line ended, when it is known to be whole there.
    File { file: File, end: Option<u64> },
    /// `--log -`: a duplicate of fd 1, which may be a pipe or a terminal.
    Stdout(File),
    /// No `--log`: the lines go only to the run's kept lines.
    Nowhere,
}

pub struct RunLog {
    sink: Sink,
    /// For messages: the path, or "stdout".
    name: String,
    run_id: String,
    failed: bool,
    /// The run's kept event lines (events_kept.rs), `--log` or not.
    kept: Option<crate::events_kept::Kept>,
}

/// Why a file is refused as the run log; None when it may be used.
fn refusal(kind: FileKind, owner: u32, me: u32) -> Option<String> {
    match kind {
        FileKind::Regular if owner == me => None,
        FileKind::Regular => Some(format!(
            "it belongs to uid {owner}, not to you (uid {me}), and loopx only appends \
             to a log of your own; give a path in a directory only you can write to"
        )),
        FileKind::Symlink => Some(
            "it is a symbolic link, which loopx does not follow for its log; give the \
             path of the file itself"
                .to_string(),
        ),
        FileKind::Other(what) => Some(format!(
            "it is {what}, not a regular file; give a file path, or '-' to write the \
             log to stdout"
        )),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    Regular,
    Symlink,
    /// What it is instead, with its article: "a directory".
    Other(&'static str),
}

fn kind_of(meta: &Metadata) -> FileKind {
    let t = meta.file_type();
    if t.is_file() {
        FileKind::Regular
    } else if t.is_symlink() {
        FileKind::Symlink
    } else if t.is_dir() {
        FileKind::Other("a directory")
    } else if t.is_fifo() {
        FileKind::Other("a named pipe (FIFO)")
    } else if t.is_socket() {
        FileKind::Other("a socket")
    } else {
        FileKind::Other("a device")
    }
}

fn refused(path: &Path, why: &str) -> Error {
    Error::usage(
        format!("refusing the run log {}: {why}", path.display()),
        HELP,
    )
}

/// The effective uid: the one files are created with and access is
/// checked against.
fn me() -> u32 {
    sys::euid()
}

/// Holds an exclusive flock on the log until dropped. Every loopx appending
/// to the log takes it, so the end of the file is stable while a line is
/// checked, written and possibly truncated back.
struct Locked<'a>(BorrowedFd<'a>);

impl Locked<'_> {
    /// None when the file system has no flock (the append then goes on
    /// unlocked: O_APPEND still keeps whole writes whole).
    fn take(fd: BorrowedFd<'_>) -> Option<Locked<'_>> {
        loop {
            match sys::lock(fd) {
                Ok(()) => return Some(Locked(fd)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // Nothing to do if it fails: closing the file releases it anyway.
        let _ = sys::unlock(self.0);
    }
}

/// Writes all of `buf`; a write that makes no progress is an error.
fn write_all(file: &File, buf: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match (&*file).write(&buf[done..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Appends `line` (newline included) to a log shared with other runs,
/// under its lock: a torn last line (someone's failed append) is
/// terminated first, and a write that fails part-way is truncated back, so
/// the file only ever holds whole lines plus, at worst, one torn tail.
/// Returns where the line now ends.
fn append(file: &File, known_end: Option<u64>, line: &[u8]) -> io::Result<u64> {
    let _lock = Locked::take(file.as_fd());
    let start = file.metadata()?.len();
    // Where this run's own last line ended, the byte before is its newline:
    // no read needed (the common case of a log with one writer).
    let torn = start > 0 && Some(start) != known_end && {
        let mut last = [0u8];
        matches!(file.read_at(&mut last, start - 1), Ok(1) if last[0] != b'\n')
    };
    let joined;
    let buf = if torn {
        joined = [b"\n", line].concat();
        &joined[..]
    } else {
        line
    };
    // One write(2) unless the disk fills or a signal interrupts it.
    if let Err(err) = write_all(file, buf) {
        // O_APPEND put what was written at `start`, and the lock kept
        // other runs out: cut it off, so no half line is left behind.
        if file.metadata().is_ok_and(|m| m.len() > start) {
            let _ = file.set_len(start);
        }
        return Err(err);
    }
    Ok(start + buf.len() as u64)
}

impl RunLog {
    /// Opens the log named by `--log` / `LOOPX_LOG`; `stdout_taken` when
    /// stdout is not loopx's to give (the JS API's channel).
    pub fn open(path: &Path, run_id: &str, stdout_taken: bool) -> Result<RunLog, Error> {
        let (sink, name) = if path.as_os_str() == STDOUT {
            (
                Sink::Stdout(open_stdout(stdout_taken)?),
                "stdout".to_string(),
            )
        } else {
            let file = open_file(path)?;
            (
                Sink::File { file, end: None },
                path.to_string_lossy().into_owned(),
            )
        };
        Ok(RunLog {
            sink,
            name,
            run_id: run_id.to_string(),
            failed: false,
            kept: None,
        })
    }

    /// The lines of a run without `--log`, kept only (events_kept.rs).
    pub fn unlogged(run_id: &str) -> RunLog {
        RunLog {
            sink: Sink::Nowhere,
            name: String::new(),
            run_id: run_id.to_string(),
            failed: false,
            kept: None,
        }
    }

    /// Also appends every line to the run's kept lines.
    pub fn keeping(mut self, kept: crate::events_kept::Kept) -> RunLog {
        self.kept = Some(kept);
        self
    }

    /// A new line for `event`, with the fields every line has.
    pub fn line(&self, event: &str) -> Object {
        Object::default()
            .num("v", FORMAT)
            .str("event", event)
            .str("time", &clock::rfc3339(SystemTime::now()))
            .str("run_id", &self.run_id)
    }

    /// Appends one finished line.
    pub fn write(&mut self, line: Object) {
        let mut text = line.finish();
        text.push('\n');
        if let Some(kept) = &mut self.kept {
            kept.write(&text);
        }
        let result = match &mut self.sink {
            Sink::File { file, end } => {
                let written = append(file, *end, text.as_bytes());
                *end = written.as_ref().ok().copied();
                written.map(|_| ())
            }
            Sink::Stdout(out) => write_all(out, text.as_bytes()),
            Sink::Nowhere => Ok(()),
        };
        if let Err(err) = result {
            self.warn_once(err);
        }
    }

    /// Syncs a log file to disk: the run's record survives a crash after
    /// it. Stdout is a pipe or terminal, or a file its shell opened.
    pub fn sync(&mut self) {
        if let Sink::File { file, .. } = &self.sink {
            if let Err(err) = file.sync_all() {
                self.warn_once(err);
            }
        }
    }

    fn warn_once(&mut self, err: io::Error) {
        if !self.failed {
            self.failed = true;
            messages::warn(&format!(
                "cannot write the run log {}: {err}; the run goes on without it",
                shown(&self.name)
            ));
        }
    }
}

/// A file for the log: opened (created 0600 if missing) without following
/// a symbolic link, then checked to be a regular file of the user's.
fn open_file(path: &Path) -> Result<File, Error> {
    let opened = OpenOptions::new()
        // Read too: the byte before the end tells whether a line is torn.
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        // O_NONBLOCK: opening a FIFO without a reader would block forever
        // before it could be refused. It means nothing to a regular file.
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(err) => {
            // A symlink (ELOOP), a directory (EISDIR), a FIFO without a
            // reader (ENXIO): say what it is rather than the errno.
            if let Ok(meta) = std::fs::symlink_metadata(path) {
                if let Some(why) = refusal(kind_of(&meta), meta.uid(), me()) {
                    return Err(refused(path, &why));
                }
            }
            return Err(Error::usage(
                format!("cannot open the run log {}: {err}", path.display()),
                HELP,
            ));
        }
    };
    let meta = file
        .metadata()
        .map_err(|e| Error::io(format!("cannot read the run log {}", path.display()), e))?;
    if let Some(why) = refusal(kind_of(&meta), meta.uid(), me()) {
        return Err(refused(path, &why));
    }
    Ok(file)
}

/// A duplicate of fd 1 (close-on-exec, so scripts never get it).
fn open_stdout(stdout_taken: bool) -> Result<File, Error> {
    if stdout_taken {
        return Err(Error::usage(
            "the run log cannot go to stdout ('-') under the JS API, whose channel \
             it is; give a file path",
            HELP,
        ));
    }
    // try_clone_to_owned is fcntl(F_DUPFD_CLOEXEC) with 3 as the lowest
    // number: a new descriptor that is not 0-2; fd 1 stays as it is.
    match io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => Ok(File::from(fd)),
        Err(err) => Err(Error::usage(
            format!("cannot write the run log to stdout ('-'): {err}"),
            HELP,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "loopx-runlog-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn each_line_carries_the_format_run_id_and_time() {
        let dir = temp_dir("lines");
        let path = dir.join("log.jsonl");
        let mut log = RunLog::open(&path, "abc", false).unwrap();
        log.write(log.line("script_start").num("iteration", 1));
        log.write(log.line("run_end").str("reason", "stop"));
        log.sync();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with(r#"{"v":1,"event":"script_start","time":""#));
        assert!(lines[0].ends_with(r#","run_id":"abc","iteration":1}"#));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_a_regular_file_of_ones_own_is_a_log() {
        assert_eq!(refusal(FileKind::Regular, 7, 7), None);
        let foreign = refusal(FileKind::Regular, 65534, 7).unwrap();
        assert!(
            foreign.contains("uid 65534, not to you (uid 7)"),
            "{foreign}"
        );
        assert!(refusal(FileKind::Symlink, 7, 7)
            .unwrap()
            .contains("symbolic link"));
        let dir = refusal(FileKind::Other("a directory"), 7, 7).unwrap();
        assert!(
            dir.starts_with("it is a directory, not a regular file"),
            "{dir}"
        );
    }

    #[test]
    fn an_append_terminates_a_torn_line_and_knows_its_own_end() {
        let dir = temp_dir("torn");
        let path = dir.join("log");
        std::fs::write(&path, "{\"torn\":").unwrap();
        let file = open_file(&path).unwrap();
        let end = append(&file, None, b"{\"a\":1}\n").unwrap();
        let end = append(&file, Some(end), b"{\"b\":2}\n").unwrap();
        assert_eq!(end, std::fs::metadata(&path).unwrap().len());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"torn\":\n{\"a\":1}\n{\"b\":2}\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
