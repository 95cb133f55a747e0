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

/// Fetches `source` into `work` (an empty private directory) and returns the
/// source root to classify (§10.3).
pub fn fetch(source: &Source, work: &Path) -> Result<PathBuf, Error> {
    match source {
        Source::Git { url, .. } => clone(url, &work.join("repo")),
        Source::Tarball { url, .. } => {
            let file = work.join("download.tar.gz");
            download(url, &file)?;
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
fn clone(url: &str, dest: &Path) -> Result<PathBuf, Error> {
    let out = run(
        Command::new("git")
            .args(["clone", "--depth", "1", "--quiet", "--"])
            .arg(url)
            .arg(dest)
            // Never wait for credentials on a terminal: fail instead.
            .env("GIT_TERMINAL_PROMPT", "0")
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
/// final HTTP status is written on stdout so an error can name it.
fn download(url: &str, file: &Path) -> Result<(), Error> {
    let out = run(
        Command::new("curl")
            .args([
                "-fsSL",
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
