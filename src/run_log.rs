//! The run record of `--log <path>` / `LOOPX_LOG` (DESIGN.md "Beyond the
//! spec"; README "Run log"): JSON lines, one event each, carrying the format
//! version and the run id so runs sharing a file can be told apart.
//!
//! Each line goes out in a single write(2) on a file opened with O_APPEND,
//! so lines of concurrent runs never interleave within a line. The file is
//! created 0600 (it may hold results), and synced to disk when the run
//! ends. A log that cannot be opened stops the run before anything runs; a
//! write that fails later is warned about once, and the loop goes on.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::clock;
use crate::error::Error;
use crate::json::Object;
use crate::messages;

/// The log's format version, in every line.
pub const FORMAT: u64 = 1;

pub struct RunLog {
    file: File,
    path: PathBuf,
    run_id: String,
    failed: bool,
}

impl RunLog {
    pub fn open(path: &Path, run_id: &str) -> Result<RunLog, Error> {
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
            .map_err(|err| {
                Error::usage(
                    format!("cannot open the run log {}: {err}", path.display()),
                    "loopx run --help",
                )
            })?;
        Ok(RunLog {
            file,
            path: path.to_path_buf(),
            run_id: run_id.to_string(),
            failed: false,
        })
    }

    /// A new line for `event`, with the fields every line has.
    pub fn line(&self, event: &str) -> Object {
        Object::default()
            .num("v", FORMAT)
            .str("event", event)
            .str("time", &clock::rfc3339(SystemTime::now()))
            .str("run_id", &self.run_id)
    }

    /// Appends one finished line, in one write.
    pub fn write(&mut self, line: Object) {
        let mut text = line.finish();
        text.push('\n');
        // One write(2): O_APPEND places the whole buffer at the end at once.
        // A short write (a full disk) is a failure like any other.
        let result = match self.file.write(text.as_bytes()) {
            Ok(n) if n == text.len() => Ok(()),
            Ok(_) => Err(io::Error::new(io::ErrorKind::WriteZero, "short write")),
            Err(err) => Err(err),
        };
        if let Err(err) = result {
            self.warn_once(err);
        }
    }

    /// Syncs the log to disk: the run's record survives a crash after it.
    pub fn sync(&mut self) {
        if let Err(err) = self.file.sync_all() {
            self.warn_once(err);
        }
    }

    fn warn_once(&mut self, err: io::Error) {
        if !self.failed {
            self.failed = true;
            messages::warn(&format!(
                "cannot write the run log {}: {err}; the run goes on without it",
                self.path.display()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_carries_the_format_run_id_and_time() {
        let dir = std::env::temp_dir().join(format!("loopx-runlog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log.jsonl");
        let mut log = RunLog::open(&path, "abc").unwrap();
        log.write(log.line("script_start").num("iteration", 1));
        log.write(log.line("run_end").str("reason", "stop"));
        log.sync();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with(r#"{"v":1,"event":"script_start","time":""#));
        assert!(lines[0].ends_with(r#","run_id":"abc","iteration":1}"#));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
