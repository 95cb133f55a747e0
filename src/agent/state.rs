//! The files `loopx agent` keeps between runs: when an agent may run again
//! (quota and fallback), a step's session id and its last class. Each is
//! read only when it is a regular file owned by the user, not through a
//! link, and small; each is written whole, by rename.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Far above any state file loopx writes.
const LIMIT: u64 = 4096;

/// The contents of `path`, or `None` when it is absent, not a regular file
/// of ours, reached through a link, or too large (state_file.rs).
pub fn read(path: &Path) -> Option<String> {
    String::from_utf8(crate::state_file::read(path, LIMIT).ok()?).ok()
}

/// Writes `text` to `path` whole: a temporary file beside it, renamed over.
pub fn write(path: &Path, text: &str) -> io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    drop(f);
    fs::rename(&tmp, path).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

/// `${XDG_STATE_HOME:-~/.local/state}/loopx/agent`, created 0700.
pub fn dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    let dir = base.join("loopx/agent");
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .ok()?;
    Some(dir)
}

/// When `agent` may run again (seconds since the epoch), if it rests.
pub fn resting_until(agent: &str, now: u64) -> Option<u64> {
    let path = dir()?.join(format!("{agent}.until"));
    let until: u64 = read(&path)?.trim().parse().ok()?;
    (until > now).then_some(until)
}

/// Records that `agent` rests until `until`.
pub fn rest(agent: &str, until: u64) {
    if let Some(d) = dir() {
        let _ = write(&d.join(format!("{agent}.until")), &until.to_string());
    }
}

/// A step's saved session: the agent that ran it and its id.
pub fn session(path: &Path) -> Option<(String, String)> {
    let text = read(path)?;
    let (agent, id) = text.trim().split_once(' ')?;
    Some((agent.to_string(), id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_our_regular_files_not_links() {
        let dir = std::env::temp_dir().join(format!("loopx-agent-state-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("claude.until");
        write(&f, "123").unwrap();
        assert_eq!(read(&f).as_deref(), Some("123"));
        std::os::unix::fs::symlink(&f, dir.join("link")).unwrap();
        assert_eq!(read(&dir.join("link")), None);
        fs::write(dir.join("big"), vec![b'1'; 5000]).unwrap();
        assert_eq!(read(&dir.join("big")), None);
        write(&dir.join("s"), "claude abc-1\n").unwrap();
        assert_eq!(
            session(&dir.join("s")),
            Some(("claude".into(), "abc-1".into()))
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
