//! Global and local env files (§8) and the `loopx env` subcommands (§4.3).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::envfile;
use crate::error::Error;
use crate::proc::bounded_read::{self, Accept, Failure, Interrupt};
use crate::proc::sys;
use crate::text::shown;

/// `$XDG_CONFIG_HOME/loopx/env`, defaulting to `~/.config/loopx/env` (§8.1).
/// An empty XDG_CONFIG_HOME counts as unset, as the XDG spec says.
pub fn global_env_path() -> Result<PathBuf, Error> {
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("loopx").join("env"));
    }
    match home_dir() {
        Some(home) => Ok(home.join(".config").join("loopx").join("env")),
        None => Err(Error::io(
            "cannot locate the global env file",
            io::Error::new(
                io::ErrorKind::NotFound,
                "neither XDG_CONFIG_HOME nor HOME is set, and the user has no home directory",
            ),
        )),
    }
}

/// `~`: `$HOME`, else the user's entry in the password database, as Node's
/// `os.homedir()` does (services and `env -i` often run without HOME).
/// Shared by the global env file and the JS helper cache (runtime.rs).
pub fn home_dir() -> Option<PathBuf> {
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Some(PathBuf::from(home)),
        None => sys::passwd_home(),
    }
}

/// Reads an env file's bytes, bounded and interruptible (proc/bounded_read.rs).
/// `Ok(None)` when it does not exist. `interrupt` ends a wait on a pipe or
/// device (a run's signal handlers); without it only the default action of
/// a signal does.
fn read_bytes(
    path: &Path,
    interrupt: Option<&mut dyn Interrupt>,
) -> Result<Option<Vec<u8>>, Error> {
    match bounded_read::read(path, Accept::Any(interrupt)) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(Failure::NotFound) => Ok(None),
        Err(Failure::Interrupted(signal)) => Err(Error::Interrupted { signal }),
        Err(Failure::TooLarge) => Err(Error::EnvFileTooLarge {
            path: path.to_path_buf(),
            limit: bounded_read::LIMIT_TEXT,
        }),
        Err(Failure::Io(err)) => Err(Error::EnvFileUnreadable {
            path: path.to_path_buf(),
            err,
        }),
        // Accept::Any takes every kind of file.
        Err(other @ Failure::NotRegular(_)) => Err(Error::EnvFileUnreadable {
            path: path.to_path_buf(),
            err: io::Error::other(other.to_string()),
        }),
    }
}

/// Reads an env file's text (UTF-8, invalid bytes replaced, as Node reads
/// it). `Ok(None)` when it does not exist.
fn read_text(path: &Path, interrupt: Option<&mut dyn Interrupt>) -> Result<Option<String>, Error> {
    Ok(read_bytes(path, interrupt)?.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
}

/// At most this many warnings about one env file, then one line with the
/// count of the rest: a file of the wrong kind must not flood the log.
const MAX_WARNINGS: usize = 20;

/// The warnings for `bad`, the ignored lines of the file shown as `file`:
/// file, line number and what is wrong, never the line itself (§8.1 asks
/// for a warning; the line may hold a secret).
fn warnings(file: &str, bad: &[envfile::BadLine]) -> Vec<String> {
    let mut out: Vec<String> = bad
        .iter()
        .take(MAX_WARNINGS)
        .map(|b| format!("{file}:{}: ignoring line: {}", b.line, b.problem.describe()))
        .collect();
    if bad.len() > MAX_WARNINGS {
        let more = bad.len() - MAX_WARNINGS;
        let lines = if more == 1 { "line" } else { "lines" };
        out.push(format!(
            "{file}: {more} more {lines} ignored without a valid KEY=VALUE"
        ));
    }
    out
}

/// Parses an env file, warning on stderr about the ignored lines (§8.1).
fn parse_warning(path: &Path, text: &str) -> Vec<(String, String)> {
    let parsed = envfile::parse(text);
    for w in warnings(&shown(&path.to_string_lossy()), &parsed.bad_lines) {
        crate::messages::warn(&w);
    }
    parsed.vars
}

/// The variables a run injects from env files: global first, then the local
/// `-e` file on top (§8.2, §8.3), duplicates resolved last-wins. Loaded once
/// per run (§8.1). `interrupt` (the run's signals) ends a wait on a pipe.
pub fn load_for_run(
    local: Option<&Path>,
    interrupt: &mut dyn Interrupt,
) -> Result<Vec<(OsString, OsString)>, Error> {
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let global = global_env_path()?;
    if let Some(text) = read_text(&global, Some(&mut *interrupt))? {
        vars.extend(parse_warning(&global, &text));
    }
    if let Some(path) = local {
        let text = read_text(path, Some(interrupt))?.ok_or_else(|| Error::EnvFileMissing {
            path: path.to_path_buf(),
        })?;
        vars.extend(parse_warning(path, &text));
    }
    Ok(vars
        .into_iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect())
}

/// How long `env set`/`env remove` wait for another writer's lock before
/// giving up with an error.
const LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// The file `env set`/`env remove` actually rewrite: the global env file, or
/// the target of a symlink there (dotfile managers link it), which is written
/// through rather than replaced.
fn write_target(path: &Path) -> PathBuf {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

/// An exclusive `flock` on `<file>.lock` beside the env file, held until
/// dropped (closing the descriptor releases it, also when loopx is killed).
///
/// §8.1 leaves concurrent writes undefined; loopx serialises them, because
/// loops running side by side keep state through `loopx env set` and a lost
/// update is lost data. Only writers lock: readers never see a partial file
/// since every write replaces the file by rename. The lock file stays: one
/// removed while a writer waits on it would let two writers in at once.
struct EnvLock {
    _file: fs::File,
}

impl EnvLock {
    fn acquire(file: &Path) -> Result<EnvLock, Error> {
        use std::os::unix::fs::OpenOptionsExt;

        let lock_path = lock_path(file);
        let lock = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| {
                Error::io(
                    format!("cannot open the lock file {}", lock_path.display()),
                    e,
                )
            })?;
        // flock has no timeout: poll without blocking, backing off up to
        // 20 ms, until the deadline. Writers hold the lock for a few
        // milliseconds, so waiting is rare and short.
        let deadline = Instant::now() + LOCK_TIMEOUT;
        let mut pause = Duration::from_millis(1);
        loop {
            let err = match sys::try_lock(&lock) {
                Ok(()) => return Ok(EnvLock { _file: lock }),
                Err(err) => err,
            };
            match err.raw_os_error() {
                Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => {}
                _ => {
                    return Err(Error::io(
                        format!("cannot lock {}", lock_path.display()),
                        err,
                    ))
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::EnvLockTimeout {
                    lock: lock_path,
                    waited: LOCK_TIMEOUT,
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

/// `<dir>/<name>.lock` for the file `<dir>/<name>`.
fn lock_path(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    file.with_file_name(name)
}

/// Runs one read-modify-write of the global env file under its lock:
/// `change` gets the current bytes (`None` when the file does not exist) and
/// returns the new bytes, or `None` to leave the file alone.
fn update_global(change: impl FnOnce(Option<Vec<u8>>) -> Option<Vec<u8>>) -> Result<(), Error> {
    let path = write_target(&global_env_path()?);
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    let _lock = EnvLock::acquire(&path)?;
    remove_stale_temporaries(&path);
    if let Some(bytes) = change(read_bytes(&path, None)?) {
        replace_file(&path, &bytes)?;
    }
    Ok(())
}

/// `.<name>.tmp.` for the file `<dir>/<name>`: the prefix of the temporary
/// copies `replace_file` writes beside it (`.env.tmp.<pid>` for `env`).
fn temporary_prefix(path: &Path) -> String {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    format!(".{name}.tmp.")
}

/// Removes temporary copies a killed writer left beside `path`. Called with
/// the lock held: every writer of this file writes its copy only while it
/// holds the lock, so any copy seen now is stale. Each is a full copy of a
/// secrets file, and would otherwise stay forever. Best effort: a copy
/// that cannot be removed does not stop the write.
fn remove_stale_temporaries(path: &Path) {
    let dir = path.parent().unwrap_or(Path::new("."));
    let prefix = temporary_prefix(path);
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Replaces `path` with `bytes` atomically: a temporary file in the same
/// directory, fsync, rename over the old file, fsync of the directory. A
/// crash leaves the old file or the new one, never a mix, and the rename is
/// on disk when loopx reports success.
///
/// The file typically holds API keys, so the rewrite keeps its permissions,
/// and a new file is private to the user (0600).
fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

    let mode = fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let dir = path.parent().unwrap_or(Path::new("."));
    // Named after the file: files symlinked from one directory (dotfiles)
    // have locks of their own, so each writer may clean up only its own.
    let tmp = dir.join(format!("{}{}", temporary_prefix(path), std::process::id()));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        Error::io(format!("cannot write {}", path.display()), e)
    })?;
    // The rename is durable only once the directory is synced. Some
    // filesystems refuse fsync on a directory; the file is in place anyway.
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The file with every assignment to `name` removed and, when `replacement`
/// is given, that line in place of the first one (appended when there was
/// none). Works on bytes so every other line stays exactly as the user wrote
/// it: its line ending, a leading BOM, even bytes that are not UTF-8.
/// Returns whether an assignment was found.
fn rewrite(bytes: &[u8], name: &str, replacement: Option<&str>) -> (Vec<u8>, bool) {
    const BOM: &[u8] = "\u{feff}".as_bytes();
    let mut out = Vec::with_capacity(bytes.len() + replacement.map_or(0, str::len));
    let mut rest = bytes;
    if let Some(body) = bytes.strip_prefix(BOM) {
        out.extend_from_slice(BOM);
        rest = body;
    }
    let mut found = false;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |i| i + 1);
        let (line, next) = rest.split_at(end);
        rest = next;
        let content = line.strip_suffix(b"\n").unwrap_or(line);
        if envfile::line_key(&String::from_utf8_lossy(content)) == Some(name) {
            if !found {
                out.extend_from_slice(replacement.unwrap_or("").as_bytes());
            }
            found = true;
            continue;
        }
        out.extend_from_slice(line);
    }
    if !found {
        if let Some(r) = replacement {
            // A last line without a newline must not swallow the new one.
            if !out.is_empty() && !out.ends_with(b"\n") && out != BOM {
                out.push(b'\n');
            }
            out.extend_from_slice(r.as_bytes());
        }
    }
    if out.starts_with(BOM) && !bytes.starts_with(BOM) {
        // Removing the first line moved a line that starts with U+FEFF to
        // the top, where readers take it for a byte order mark: a line that
        // was ignored (its key is not valid) would start to count. A blank
        // first line keeps it where it was in meaning.
        out.insert(0, b'\n');
    }
    (out, found)
}

/// `loopx env set <name> <value>` (§4.3).
pub fn set(name: &str, value: &str) -> Result<(), Error> {
    if !envfile::is_valid_key(name) {
        return Err(Error::InvalidEnvName {
            name: name.to_string(),
        });
    }
    if value.contains(['\n', '\r']) {
        return Err(Error::InvalidEnvValue {
            name: name.to_string(),
        });
    }
    let line = envfile::assignment(name, value);
    update_global(|existing| Some(rewrite(&existing.unwrap_or_default(), name, Some(&line)).0))
}

/// `loopx env remove <name>`: a missing variable is a silent no-op (§4.3).
pub fn remove(name: &str) -> Result<(), Error> {
    // Nothing to remove from a file that does not exist: don't create its
    // directory (or a lock file) just to find that out.
    if read_bytes(&global_env_path()?, None)?.is_none() {
        return Ok(());
    }
    update_global(|existing| {
        let (bytes, removed) = rewrite(&existing?, name, None);
        removed.then_some(bytes)
    })
}

/// `loopx env list`: `KEY=VALUE` lines sorted by key, last occurrence wins.
pub fn list() -> Result<(), Error> {
    let path = global_env_path()?;
    let Some(text) = read_text(&path, None)? else {
        return Ok(());
    };
    let vars: BTreeMap<String, String> = parse_warning(&path, &text).into_iter().collect();
    let mut out = String::new();
    for (k, v) in vars {
        out.push_str(&k);
        out.push('=');
        out.push_str(&v);
        out.push('\n');
    }
    crate::messages::print_stdout(&out)
}

#[cfg(test)]
mod tests {
    use super::{rewrite, warnings, MAX_WARNINGS};
    use crate::envfile;

    #[test]
    fn warnings_name_file_line_and_problem_and_stop_after_twenty() {
        let text = "export API_KEY=sk-secret\nA=1\nsk-secret\n";
        let bad = envfile::parse(text).bad_lines;
        assert_eq!(
            warnings("/c/env", &bad),
            [
                "/c/env:1: ignoring line: 'export' before API_KEY; env files are plain \
                 KEY=VALUE lines, drop 'export'",
                "/c/env:3: ignoring line: it has no '=' (expected KEY=VALUE)",
            ]
        );
        for (n, more) in [
            (MAX_WARNINGS, None),
            (MAX_WARNINGS + 1, Some("1 more line")),
        ] {
            let bad = envfile::parse(&"bad\n".repeat(n)).bad_lines;
            let w = warnings("f", &bad);
            assert_eq!(w.len(), MAX_WARNINGS + usize::from(more.is_some()));
            assert_eq!(
                w[MAX_WARNINGS - 1],
                "f:20: ignoring line: it has no '=' (expected KEY=VALUE)"
            );
            if let Some(more) = more {
                assert_eq!(
                    w[MAX_WARNINGS],
                    format!("f: {more} ignored without a valid KEY=VALUE")
                );
            }
        }
        let bad = envfile::parse(&"bad\n".repeat(100)).bad_lines;
        assert_eq!(
            warnings("f", &bad).last().map(String::as_str),
            Some("f: 80 more lines ignored without a valid KEY=VALUE")
        );
    }

    fn rw(text: &[u8], name: &str, replacement: Option<&str>) -> (Vec<u8>, bool) {
        rewrite(text, name, replacement)
    }

    #[test]
    fn set_replaces_in_place_and_drops_duplicates() {
        let text = b"# top\nA=1\nB=2\nA=3\n";
        assert_eq!(
            rw(text, "A", Some("A=\"x\"\n")),
            (b"# top\nA=\"x\"\nB=2\n".to_vec(), true)
        );
        assert_eq!(
            rw(text, "C", Some("C=\"y\"\n")),
            ([&text[..], b"C=\"y\"\n"].concat(), false)
        );
    }

    #[test]
    fn remove_keeps_every_other_line() {
        assert_eq!(
            rw(b"A=1\n#c\nB=2\n", "A", None),
            (b"#c\nB=2\n".to_vec(), true)
        );
        assert_eq!(rw(b"B=2\n", "A", None), (b"B=2\n".to_vec(), false));
    }

    #[test]
    fn removing_the_first_line_does_not_turn_a_later_u_feff_into_a_bom() {
        let text = "A=1\n\u{feff}B=2\n".as_bytes();
        let (out, found) = rw(text, "A", None);
        assert!(found);
        assert_eq!(out, "\n\u{feff}B=2\n".as_bytes());
        assert!(crate::envfile::parse(&String::from_utf8_lossy(&out))
            .vars
            .is_empty());
    }

    #[test]
    fn other_lines_keep_their_bytes_endings_and_bom() {
        let text = b"\xef\xbb\xbfA=1\r\n# caf\xe9\r\nB=2";
        assert_eq!(
            rw(text, "A", Some("A=\"n\"\n")),
            (b"\xef\xbb\xbfA=\"n\"\n# caf\xe9\r\nB=2".to_vec(), true)
        );
        // Appending after a last line without a newline starts a new line.
        assert_eq!(
            rw(text, "C", Some("C=\"c\"\n")),
            ([&text[..], b"\nC=\"c\"\n"].concat(), false)
        );
        assert_eq!(
            rw(b"\xef\xbb\xbf", "C", Some("C=\"c\"\n")),
            (b"\xef\xbb\xbfC=\"c\"\n".to_vec(), false)
        );
        assert_eq!(
            rw(b"", "C", Some("C=\"c\"\n")),
            (b"C=\"c\"\n".to_vec(), false)
        );
        assert_eq!(
            rw(text, "B", None),
            (b"\xef\xbb\xbfA=1\r\n# caf\xe9\r\n".to_vec(), true)
        );
    }
}

/// Property tests of the rewrite behind `env set`/`env remove`: on any file,
/// the variable ends up with the new value (or gone), every other variable
/// keeps its value, and every other line keeps its bytes.
#[cfg(test)]
mod props {
    use super::rewrite;
    use crate::envfile::{self, assignment};
    use crate::testing::config;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn vars(bytes: &[u8]) -> BTreeMap<String, String> {
        envfile::parse(&String::from_utf8_lossy(bytes))
            .vars
            .into_iter()
            .collect()
    }

    /// The lines that do not assign `name`, without their line endings.
    fn other_lines(bytes: &[u8], name: &str) -> Vec<Vec<u8>> {
        let body = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
        body.split(|&b| b == b'\n')
            .filter(|l| envfile::line_key(&String::from_utf8_lossy(l)) != Some(name))
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    }

    proptest! {
        #![proptest_config(config(1024))]

        #[test]
        fn set_and_remove_change_one_variable_and_no_other_line(
            file in prop_oneof![
                crate::envfile::props::env_text(),
                prop::collection::vec(any::<u8>(), 0..128),
            ],
            name in prop::sample::select(vec!["NAME", "A", "_x"]),
            value in crate::envfile::props::value(),
        ) {
            let mut others = vars(&file);
            others.remove(name);

            let (set, _) = rewrite(&file, name, Some(&assignment(name, &value)));
            let mut after = vars(&set);
            prop_assert_eq!(after.remove(name), Some(value));
            prop_assert_eq!(&after, &others);
            let mut lines = other_lines(&set, name);
            prop_assert_eq!(&lines, &other_lines(&file, name));

            let (removed, found) = rewrite(&set, name, None);
            prop_assert!(found);
            prop_assert_eq!(vars(&removed), others);
            lines = other_lines(&removed, name);
            prop_assert_eq!(lines, other_lines(&file, name));
        }
    }
}
