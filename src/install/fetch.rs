//! Getting a source onto disk (§10.2): a shallow `git clone` or a `curl`
//! download extracted in-process. Both external tools are run with an
//! argument vector, never through a shell, and `--` keeps a URL from ever
//! being read as an option (DESIGN "Install").

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::error::Error;
use crate::install::archive;
use crate::install::source::Source;

/// How long a download or clone may go without receiving any data before
/// loopx gives up, unless `LOOPX_INSTALL_STALL_TIMEOUT` says otherwise: a
/// server that stops sending must not hang an unattended install forever.
const DEFAULT_STALL_SECS: u64 = 60;

/// The stall timeout in seconds, from `LOOPX_INSTALL_STALL_TIMEOUT` (a
/// whole number of seconds, at least 1) or the default.
pub fn stall_timeout() -> Result<u64, Error> {
    match std::env::var_os("LOOPX_INSTALL_STALL_TIMEOUT") {
        None => Ok(DEFAULT_STALL_SECS),
        Some(v) if v.is_empty() => Ok(DEFAULT_STALL_SECS),
        Some(v) => v
            .to_str()
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| Error::BadStallTimeout {
                value: v.to_string_lossy().into_owned(),
            }),
    }
}

/// Fetches `source` into `work` (an empty private directory) and returns the
/// source root to classify (§10.3).
pub fn fetch(source: &Source, work: &Path) -> Result<PathBuf, Error> {
    let stall = stall_timeout()?;
    match source {
        Source::Git { url, .. } => clone(url, &work.join("repo"), stall),
        Source::Tarball { url, .. } => {
            let file = work.join("download.tar.gz");
            download(url, &file, stall)?;
            let extracted = work.join("extracted");
            fs::create_dir(&extracted)
                .map_err(|e| Error::io(format!("cannot create {}", extracted.display()), e))?;
            archive::extract_tar_gz(&file, &extracted).map_err(|err| Error::Archive {
                url: url.clone(),
                err,
            })?;
            Ok(archive::source_root(&extracted))
        }
    }
}

/// Runs a tool, mapping "not installed" to an error that names it.
fn run(cmd: &mut Command, tool: &'static str, purpose: &'static str) -> Result<Output, Error> {
    cmd.stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::ToolMissing { tool, purpose },
            _ => Error::io(format!("cannot run {tool}"), e),
        })
}

/// `git clone --depth 1` into `dest`, then drops `.git`: the installed
/// workflow is the repository's files, not a checkout (the clone is an
/// implementation detail of fetching).
fn clone(url: &str, dest: &Path, stall: u64) -> Result<PathBuf, Error> {
    let out = run(
        Command::new("git")
            .args(["clone", "--depth", "1", "--quiet", "--"])
            .arg(url)
            .arg(dest)
            // Never wait for credentials on a terminal: fail instead.
            .env("GIT_TERMINAL_PROMPT", "0")
            // Over HTTP(S), give up when less than a byte a second arrives
            // for `stall` seconds.
            .env("GIT_HTTP_LOW_SPEED_LIMIT", "1")
            .env("GIT_HTTP_LOW_SPEED_TIME", stall.to_string())
            .stdout(Stdio::null()),
        "git",
        "to clone git sources",
    )?;
    if !out.status.success() {
        return Err(Error::GitClone {
            url: url.to_string(),
            detail: git_error_summary(&String::from_utf8_lossy(&out.stderr), out.status.code()),
        });
    }
    let mut has_files = false;
    for entry in fs::read_dir(dest).map_err(|e| Error::io("cannot read the clone", e))? {
        let entry = entry.map_err(|e| Error::io("cannot read the clone", e))?;
        if entry.file_name() != ".git" {
            has_files = true;
            break;
        }
    }
    if !has_files {
        return Err(Error::EmptyRepository {
            url: url.to_string(),
        });
    }
    let git_dir = dest.join(".git");
    fs::remove_dir_all(&git_dir)
        .map_err(|e| Error::io(format!("cannot remove {}", git_dir.display()), e))?;
    Ok(dest.to_path_buf())
}

/// The lines of git's stderr that say what went wrong (`fatal:`, `error:`,
/// `remote:`), or its last line, or the exit status when it said nothing.
fn git_error_summary(stderr: &str, code: Option<i32>) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let important: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("fatal:") || l.starts_with("error:") || l.starts_with("remote:"))
        .collect();
    if !important.is_empty() {
        important.join("; ")
    } else if let Some(last) = lines.last() {
        last.to_string()
    } else {
        match code {
            Some(code) => format!("git exited with code {code}"),
            None => "git was killed by a signal".to_string(),
        }
    }
}

/// `curl -fsSL` (fail on HTTP errors, follow redirects) into `file`. The
/// final HTTP status is written on stdout so an error can name it. A
/// connection that takes `stall` seconds to open, or a transfer that
/// receives less than a byte a second for `stall` seconds, is abandoned.
fn download(url: &str, file: &Path, stall: u64) -> Result<(), Error> {
    let stall_arg = stall.to_string();
    let out = run(
        Command::new("curl")
            .args([
                "-fsSL",
                "--connect-timeout",
                &stall_arg,
                "--speed-limit",
                "1",
                "--speed-time",
                &stall_arg,
                // Only the schemes §10.1 accepts for tarballs; a redirect may
                // not switch to file:// or anything else.
                "--proto",
                "=http,https,file",
                "--proto-redir",
                "=http,https",
                "-w",
                "%{http_code}",
                "-o",
            ])
            .arg(file)
            .arg("--")
            .arg(url),
        "curl",
        "to download tarball sources",
    )?;
    if out.status.success() {
        return Ok(());
    }
    // 28: curl's "operation timed out", here always the stall limits.
    if out.status.code() == Some(28) {
        return Err(Error::DownloadStalled {
            url: url.to_string(),
            secs: stall,
        });
    }
    let status = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse::<u16>()
        .ok()
        .filter(|s| *s >= 400);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let detail = stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(|l| l.strip_prefix("curl: ").unwrap_or(l).to_string())
        .unwrap_or_else(|| match out.status.code() {
            Some(code) => format!("curl exited with code {code}"),
            None => "curl was killed by a signal".to_string(),
        });
    Err(Error::Download {
        url: url.to_string(),
        status,
        detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_errors_are_summarised_from_stderr() {
        let stderr = "Cloning into '/tmp/x'...\nfatal: repository '/nope' does not exist\n";
        assert_eq!(
            git_error_summary(stderr, Some(128)),
            "fatal: repository '/nope' does not exist"
        );
        assert_eq!(
            git_error_summary("remote: denied\nfatal: unable to access\n", Some(128)),
            "remote: denied; fatal: unable to access"
        );
        assert_eq!(
            git_error_summary("odd\nlast words\n", Some(1)),
            "last words"
        );
        assert_eq!(git_error_summary("", Some(5)), "git exited with code 5");
    }
}
