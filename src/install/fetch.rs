//! Getting a source onto disk (§10.2): a shallow `git clone` or a `curl`
//! download extracted in-process. Both external tools are run with an
//! argument vector, never through a shell, and `--` keeps a URL from ever
//! being read as an option (DESIGN "Install").
//!
//! Both are bounded (limits.rs): a transfer slower than `MIN_SPEED` for the
//! stall timeout is abandoned (curl's and git's own low-speed limits), and
//! nothing bigger than the size limit is written: loopx counts the download
//! itself (curl's `--max-filesize` cannot stop a body sent without a
//! length), the extracted files (archive.rs), and a repository's files
//! before checking them out. Every URL and every line of git's or curl's
//! that an error shows goes through redact.rs first.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;

use crate::error::{Error, ExtractError};
use crate::install::archive;
use crate::install::limits::{Limits, MIN_SPEED};
use crate::install::redact;
use crate::install::source::Source;

/// Fetches `source` into `work` (an empty private directory) within
/// `limits` and returns the source root to classify (§10.3). A local
/// source's path is its realpath (source::resolve_local).
pub fn fetch(source: &Source, work: &Path, limits: &Limits) -> Result<PathBuf, Error> {
    match source {
        Source::Git { url, .. } => clone(url, &work.join("repo"), limits),
        // Like a clone of it (a clone's files without `.git`), so no
        // wrapper stripping: the directory is the source root (§10.2).
        Source::Local { path } => {
            let copy = work.join("local");
            fs::create_dir(&copy)
                .map_err(|e| Error::io(format!("cannot create {}", copy.display()), e))?;
            let shown = path.to_string_lossy().into_owned();
            archive::copy_dir(path, &copy, limits.max_size).map_err(|err| match err {
                ExtractError::TooLarge { limit } => Error::InstallTooLarge {
                    what: format!("the content of {}", crate::text::shown(&shown)),
                    limit,
                },
                err => Error::LocalCopy { dir: shown, err },
            })?;
            Ok(copy)
        }
        Source::Tarball { url, .. } => {
            let file = work.join("download.tar.gz");
            download(url, &file, &work.join("headers"), limits)?;
            let extracted = work.join("extracted");
            fs::create_dir(&extracted)
                .map_err(|e| Error::io(format!("cannot create {}", extracted.display()), e))?;
            archive::extract_tar_gz(&file, &extracted, limits.max_size).map_err(
                |err| match err {
                    ExtractError::TooLarge { limit } => Error::InstallTooLarge {
                        what: format!("the content of the tarball {}", redact::url(url)),
                        limit,
                    },
                    err => Error::Archive {
                        url: redact::url(url),
                        err,
                    },
                },
            )?;
            // Staging copies the files once more: free what is done with.
            let _ = fs::remove_file(&file);
            Ok(archive::source_root(&extracted))
        }
    }
}

/// Spawns a tool, mapping "not installed" to an error that names it.
fn spawn(cmd: &mut Command, tool: &'static str, purpose: &'static str) -> Result<Child, Error> {
    cmd.stdin(Stdio::null())
        .spawn()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::ToolMissing { tool, purpose },
            _ => Error::io(format!("cannot run {tool}"), e),
        })
}

/// Runs a tool to the end, collecting its output.
fn run(cmd: &mut Command, tool: &'static str, purpose: &'static str) -> Result<Output, Error> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    spawn(cmd, tool, purpose)?
        .wait_with_output()
        .map_err(|e| Error::io(format!("cannot run {tool}"), e))
}

/// A git command that neither prompts nor obeys a `GIT_DIR` (or the like)
/// loopx happened to inherit (a hook running `loopx install`, say).
fn git() -> Command {
    let mut cmd = Command::new("git");
    cmd.env("GIT_TERMINAL_PROMPT", "0");
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        // They would override the `-c http.lowSpeed*` below.
        "GIT_HTTP_LOW_SPEED_LIMIT",
        "GIT_HTTP_LOW_SPEED_TIME",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

const GIT_PURPOSE: &str = "to clone git sources";

/// `git clone --depth 1 --no-checkout` into `dest`; then, when the files of
/// the commit fit the size limit, checks them out and drops `.git`: the
/// installed workflow is the repository's files, not a checkout (the clone
/// is an implementation detail of fetching).
fn clone(url: &str, dest: &Path, limits: &Limits) -> Result<PathBuf, Error> {
    let shown = redact::url(url);
    let out = run(
        git()
            // Over HTTP(S), give up when less than MIN_SPEED bytes a second
            // arrive for the stall timeout.
            .arg("-c")
            .arg(format!("http.lowSpeedLimit={MIN_SPEED}"))
            .arg("-c")
            .arg(format!("http.lowSpeedTime={}", limits.stall_secs))
            .args(["clone", "--depth", "1", "--no-checkout", "--quiet", "--"])
            .arg(url)
            .arg(dest),
        "git",
        GIT_PURPOSE,
    )?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        // curl's words for its low-speed limit, which git relays.
        if stderr.contains("Operation too slow") {
            return Err(Error::InstallStalled {
                what: format!("git clone of {shown}"),
                secs: limits.stall_secs,
                min_speed: MIN_SPEED,
            });
        }
        return Err(Error::GitClone {
            url: shown,
            detail: redact::text(&git_error_summary(&stderr, out.status.code())),
        });
    }

    // The size of the files to check out, from the commit itself: a
    // repository of a few megabytes may hold gigabytes of zeros, and they
    // must not reach the disk. A clone with no commit has no tree.
    let tree = run(
        git()
            .arg("-C")
            .arg(dest)
            .args(["ls-tree", "-r", "-l", "-z", "HEAD"]),
        "git",
        GIT_PURPOSE,
    )?;
    if !tree.status.success() {
        return Err(Error::EmptyRepository { url: shown });
    }
    let too_large = || Error::InstallTooLarge {
        what: format!("the checkout of {shown}"),
        limit: limits.max_size,
    };
    if tree_size(&tree.stdout) > limits.max_size {
        return Err(too_large());
    }
    let checkout = run(
        git().arg("-C").arg(dest).args(["checkout", "--quiet"]),
        "git",
        GIT_PURPOSE,
    )?;
    if !checkout.status.success() {
        let stderr = String::from_utf8_lossy(&checkout.stderr);
        return Err(Error::GitClone {
            url: shown,
            detail: redact::text(&git_error_summary(&stderr, checkout.status.code())),
        });
    }

    let git_dir = dest.join(".git");
    fs::remove_dir_all(&git_dir)
        .map_err(|e| Error::io(format!("cannot remove {}", git_dir.display()), e))?;
    // Counted again on disk: a checkout filter (git-lfs, say) may have
    // written more than the commit holds.
    let (files, bytes) = tree_on_disk(dest).map_err(|e| Error::io("cannot read the clone", e))?;
    if bytes > limits.max_size {
        return Err(too_large());
    }
    if files == 0 {
        return Err(Error::EmptyRepository { url: shown });
    }
    Ok(dest.to_path_buf())
}

/// The total size of the blobs in `git ls-tree -r -l -z` output: records
/// `<mode> <type> <object> <size>\t<path>\0`; a submodule's size is `-`.
fn tree_size(ls_tree: &[u8]) -> u64 {
    ls_tree
        .split(|&b| b == 0)
        .filter_map(|record| {
            let meta = record.split(|&b| b == b'\t').next()?;
            let size = std::str::from_utf8(meta).ok()?.split_whitespace().nth(3)?;
            size.parse::<u64>().ok()
        })
        .fold(0, u64::saturating_add)
}

/// How many entries `dir` holds, and the total size of the regular files
/// in its tree (symlinks are not followed).
fn tree_on_disk(dir: &Path) -> io::Result<(usize, u64)> {
    let mut entries = 0;
    let mut bytes = 0u64;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in fs::read_dir(&d)? {
            let entry = entry?;
            entries += 1;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                bytes = bytes.saturating_add(entry.metadata()?.len());
            }
        }
    }
    Ok((entries, bytes))
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

/// A child that is killed (if still running) and reaped when dropped, so
/// no early return leaves a download running.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// `curl -fsSL` (fail on HTTP errors, follow redirects), its output
/// streamed through loopx into `file` so loopx can count it and stop at the
/// size limit. The response headers go to `headers`, for the final HTTP
/// status an error names. A connection that takes the stall timeout to
/// open, or a transfer slower than `MIN_SPEED` for that long, is abandoned.
fn download(url: &str, file: &Path, headers: &Path, limits: &Limits) -> Result<(), Error> {
    let shown = redact::url(url);
    let stall = limits.stall_secs.to_string();
    let mut child = Reaped(spawn(
        Command::new("curl")
            .args(["-fsSL", "--connect-timeout", &stall, "--speed-time", &stall])
            .arg("--speed-limit")
            .arg(MIN_SPEED.to_string())
            // Fails early when the server announces a larger body; one sent
            // without a length is counted below.
            .arg("--max-filesize")
            .arg(limits.max_size.to_string())
            // Only the schemes §10.1 accepts for tarballs; a redirect may
            // not switch to file:// or anything else.
            .args([
                "--proto",
                "=http,https,file",
                "--proto-redir",
                "=http,https",
            ])
            .arg("-D")
            .arg(headers)
            .arg("--")
            .arg(url)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        "curl",
        "to download tarball sources",
    )?);
    let stderr = child.0.stderr.take().map(|mut err| {
        thread::spawn(move || {
            // curl says one line; never hold more than a screenful.
            let mut text = Vec::new();
            let _ = err.by_ref().take(64 << 10).read_to_end(&mut text);
            let _ = io::copy(&mut err, &mut io::sink());
            String::from_utf8_lossy(&text).into_owned()
        })
    });
    let saving = |e| Error::io(format!("cannot save the download to {}", file.display()), e);
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(file)
        .map_err(saving)?;
    let within = match child.0.stdout.take() {
        Some(mut body) => copy_at_most(&mut body, &mut out, limits.max_size).map_err(saving)?,
        None => true,
    };
    let too_large = || Error::InstallTooLarge {
        what: format!("the download of {shown}"),
        limit: limits.max_size,
    };
    if !within {
        // Dropping `child` kills curl.
        return Err(too_large());
    }
    let status = child
        .0
        .wait()
        .map_err(|e| Error::io("cannot run curl", e))?;
    let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    if status.success() {
        return Ok(());
    }
    match status.code() {
        // 28: curl's "operation timed out", here always the stall limits.
        Some(28) => {
            return Err(Error::InstallStalled {
                what: format!("download of {shown}"),
                secs: limits.stall_secs,
                min_speed: MIN_SPEED,
            })
        }
        // 63: the announced size is over --max-filesize.
        Some(63) => return Err(too_large()),
        _ => {}
    }
    let http_status = fs::read(headers)
        .ok()
        .and_then(|h| final_status(&String::from_utf8_lossy(&h)))
        .filter(|s| *s >= 400);
    let detail = stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(|l| l.strip_prefix("curl: ").unwrap_or(l).to_string())
        .unwrap_or_else(|| match status.code() {
            Some(code) => format!("curl exited with code {code}"),
            None => "curl was killed by a signal".to_string(),
        });
    Err(Error::Download {
        url: shown,
        status: http_status,
        detail: redact::text(&detail),
    })
}

/// Copies `from` to `to` while it stays within `max` bytes; false (with at
/// most `max` bytes copied) as soon as it would not.
fn copy_at_most(from: &mut impl Read, to: &mut impl Write, max: u64) -> io::Result<bool> {
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(true),
            Ok(n) => n,
            // A signal loopx records (Ctrl-C) interrupts the read; curl got
            // it too and ends the stream itself.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        if total > max {
            return Ok(false);
        }
        to.write_all(&buf[..n])?;
    }
}

/// The status of the last response in curl's `-D` output (one header block
/// per response when redirects are followed).
fn final_status(headers: &str) -> Option<u16> {
    let line = headers.lines().rfind(|l| l.starts_with("HTTP/"))?;
    line.split_whitespace().nth(1)?.parse().ok()
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

    #[test]
    fn tree_size_sums_the_blobs_of_ls_tree() {
        let out = b"100644 blob 45b983be36b73c0788dc9cbcb76cbb80fc7bb057       3\ta.sh\0\
                    100755 blob d70983f70aee5893e7a5924ad02e774c7057c0ff 5000\td/a b\tc\0\
                    120000 blob 3231b018c0d33a258fd77a6b4fbc3b16e480eaa7       4\tl\0\
                    160000 commit 3231b018c0d33a258fd77a6b4fbc3b16e480eaa7       -\tsub\0";
        assert_eq!(tree_size(out), 5007);
        assert_eq!(tree_size(b""), 0);
        let huge = format!("100644 blob x {}\ta\0100644 blob y 1\tb\0", u64::MAX);
        assert_eq!(tree_size(huge.as_bytes()), u64::MAX);
    }

    #[test]
    fn the_final_status_is_that_of_the_last_response() {
        let headers = "HTTP/1.1 302 Found\r\nLocation: /b\r\n\r\n\
                       HTTP/2 404 \r\ncontent-type: text/plain\r\n\r\n";
        assert_eq!(final_status(headers), Some(404));
        assert_eq!(final_status("HTTP/1.0 200 OK\r\n\r\n"), Some(200));
        assert_eq!(final_status(""), None);
        assert_eq!(final_status("HTTP/1.1 abc\r\n"), None);
    }

    #[test]
    fn copies_stop_at_the_limit() {
        let data = vec![7u8; 200 << 10];
        for (max, within, copied) in [
            (u64::MAX, true, data.len()),
            (200 << 10, true, data.len()),
            ((200 << 10) - 1, false, 192 << 10),
            (10, false, 0),
        ] {
            let mut out = Vec::new();
            let ok = copy_at_most(&mut &data[..], &mut out, max).unwrap();
            assert_eq!((ok, out.len()), (within, copied), "max {max}");
            assert!(out.len() as u64 <= max);
        }
    }
}
