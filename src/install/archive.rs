//! In-process extraction of `.tar.gz` sources (§10.2, DESIGN "Install").
//!
//! The archive comes from an arbitrary URL, so every entry is checked before
//! anything is written, and files are written by this module rather than by
//! the tar crate's `unpack`. The rules:
//! - Paths must be relative and free of `..`; `.` components are dropped.
//! - Nothing is ever written through a symlink: every parent directory of an
//!   entry must be a real directory, and an existing file or symlink at the
//!   entry's own path is removed (never opened) before the entry is created.
//!   So `a -> somewhere` followed by `a/x` is refused.
//! - Symlink targets must be relative and have the form `../../dir/file`:
//!   leading `..` components that stay inside the destination, then plain
//!   names. A `..` after a name is refused even when it looks harmless
//!   lexically, because the name may itself be a symlink (`s -> .` then
//!   `t -> s/../x` escapes).
//! - Hard links must name a regular file extracted earlier; the file is
//!   copied, so the installed tree never shares inodes with anything.
//! - Devices, fifos and other special entries are skipped, as are pax global
//!   headers (which some tools store as a `pax_global_header` entry).
//! - Permissions are normalised as npm does for packages: 0755 for files with
//!   any execute bit and for directories, 0644 for other files (both subject to
//!   the umask); setuid, setgid and sticky bits are never set. Owners and
//!   times are not restored.
//! - The files' contents may add up to `max_size` bytes at most (a gzip bomb
//!   of a few megabytes must not become gigabytes on disk): bytes are counted
//!   as they are written, so extraction stops at the limit whatever the tar
//!   headers claim. Hard-link copies count too: they are real copies.
//!
//! Any refused entry fails the whole extraction; the caller discards the
//! (staging) destination, so a partial tree is never used.
//!
//! A local directory (`loopx install ./dir`, beyond §10.1) is copied under
//! the same rules by [`copy_dir`], so what it may hold is what an archive
//! may: the same link checks, permissions and size limit.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use flate2::read::MultiGzDecoder;
use tar::EntryType;

use crate::error::ExtractError;

fn corrupt(e: impl fmt::Display) -> ExtractError {
    ExtractError::Corrupt(e.to_string())
}

fn io_at(path: &Path) -> impl Fn(io::Error) -> ExtractError + '_ {
    move |error| ExtractError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Extracts the `.tar.gz` file `archive` into `dest`, an existing empty
/// directory, under the rules in the module documentation, writing at most
/// `max_size` bytes of file contents.
pub fn extract_tar_gz(archive: &Path, dest: &Path, max_size: u64) -> Result<(), ExtractError> {
    let mut file = File::open(archive).map_err(io_at(archive))?;
    let mut magic = [0u8; 2];
    match file.read_exact(&mut magic) {
        Ok(()) if magic == [0x1f, 0x8b] => {}
        Ok(()) => return Err(ExtractError::NotGzip),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(ExtractError::NotGzip),
        Err(e) => return Err(io_at(archive)(e)),
    }
    file.seek(SeekFrom::Start(0)).map_err(io_at(archive))?;

    let mut gz = MultiGzDecoder::new(BufReader::new(file));
    let mut budget = Budget {
        left: max_size,
        limit: max_size,
    };
    {
        let mut tar = tar::Archive::new(&mut gz);
        for entry in tar.entries().map_err(corrupt)? {
            let mut entry = entry.map_err(corrupt)?;
            extract_entry(&mut entry, dest, &mut budget)?;
        }
    }
    // tar stops at its end-of-archive marker; reading on to the end of the
    // gzip stream is what checks its CRC and length trailer.
    io::copy(&mut gz, &mut io::sink()).map_err(corrupt)?;
    Ok(())
}

/// Copies the directory `src` into `dest`, an existing empty directory, as
/// [`extract_tar_gz`] would extract an archive of it: symlinks are kept
/// only when they stay inside (`check_symlink_target`), hard links become
/// copies, special files are skipped, permissions are normalised, at most
/// `max_size` bytes of file contents. `.git` (a repository, or a worktree's
/// link to one) is skipped at every level: the directory installs like a
/// clone of it, whose `.git` goes too (fetch.rs). `dest` is never copied
/// into itself, should it lie inside `src`.
pub fn copy_dir(src: &Path, dest: &Path, max_size: u64) -> Result<(), ExtractError> {
    let mut budget = Budget {
        left: max_size,
        limit: max_size,
    };
    let skip = fs::canonicalize(dest).map_err(io_at(dest))?;
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let dir = src.join(&rel);
        let mut entries = fs::read_dir(&dir)
            .and_then(|e| e.collect::<io::Result<Vec<_>>>())
            .map_err(io_at(&dir))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name();
            let from = entry.path();
            if name == ".git" || from == skip {
                continue;
            }
            let rel = rel.join(&name);
            let to = dest.join(&rel);
            let kind = entry.file_type().map_err(io_at(&from))?;
            if kind.is_dir() {
                fs::DirBuilder::new()
                    .mode(0o755)
                    .create(&to)
                    .map_err(io_at(&to))?;
                pending.push(rel);
            } else if kind.is_symlink() {
                let link = fs::read_link(&from).map_err(io_at(&from))?;
                check_symlink_target(&rel, &link).map_err(|reason| ExtractError::Unsafe {
                    entry: rel.to_string_lossy().into_owned(),
                    reason: reason.to_string(),
                })?;
                std::os::unix::fs::symlink(&link, &to).map_err(io_at(&to))?;
            } else if kind.is_file() {
                let mut reader = File::open(&from).map_err(io_at(&from))?;
                let mode = reader
                    .metadata()
                    .map_err(io_at(&from))?
                    .permissions()
                    .mode();
                write_file(
                    &to,
                    &mut reader,
                    mode & 0o111 != 0,
                    &mut budget,
                    io_at(&from),
                )?;
            }
            // Fifos, sockets and devices are skipped, as in an archive.
        }
    }
    Ok(())
}

/// How many more bytes of file contents extraction may write.
struct Budget {
    left: u64,
    limit: u64,
}

impl Budget {
    fn spend(&mut self, n: usize) -> Result<(), ExtractError> {
        match self.left.checked_sub(n as u64) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => Err(ExtractError::TooLarge { limit: self.limit }),
        }
    }
}

fn extract_entry<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    dest: &Path,
    budget: &mut Budget,
) -> Result<(), ExtractError> {
    let kind = entry.header().entry_type();
    if !matches!(
        kind,
        EntryType::Regular
            | EntryType::Continuous
            | EntryType::GNUSparse
            | EntryType::Directory
            | EntryType::Symlink
            | EntryType::Link
    ) {
        return Ok(());
    }
    let path = entry.path().map_err(corrupt)?.into_owned();
    let refuse = |reason: &str| ExtractError::Unsafe {
        entry: path.to_string_lossy().into_owned(),
        reason: reason.to_string(),
    };
    let rel = relative_path(&path).map_err(refuse)?;
    if rel.as_os_str().is_empty() {
        // `./` is the destination itself.
        return if kind == EntryType::Directory {
            Ok(())
        } else {
            Err(refuse("it names the extraction directory itself"))
        };
    }
    let target = create_parents(dest, &rel).map_err(|e| e.or_refuse(&refuse))?;

    match kind {
        EntryType::Directory => match fs::symlink_metadata(&target) {
            Ok(meta) if meta.is_dir() => Ok(()),
            Ok(_) => Err(refuse("an earlier entry at this path is not a directory")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => fs::DirBuilder::new()
                .mode(0o755)
                .create(&target)
                .map_err(io_at(&target)),
            Err(e) => Err(io_at(&target)(e)),
        },
        EntryType::Symlink => {
            let link = entry
                .link_name()
                .map_err(corrupt)?
                .ok_or_else(|| refuse("the symlink has an empty target"))?
                .into_owned();
            check_symlink_target(&rel, &link).map_err(refuse)?;
            clear_path(&target).map_err(|e| e.or_refuse(&refuse))?;
            std::os::unix::fs::symlink(&link, &target).map_err(io_at(&target))
        }
        EntryType::Link => {
            let link = entry
                .link_name()
                .map_err(corrupt)?
                .ok_or_else(|| refuse("the hard link has an empty target"))?
                .into_owned();
            let source = hard_link_source(dest, &link).map_err(refuse)?;
            let mut reader = File::open(&source).map_err(io_at(&source))?;
            let executable = reader
                .metadata()
                .map_err(io_at(&source))?
                .permissions()
                .mode()
                & 0o111
                != 0;
            clear_path(&target).map_err(|e| e.or_refuse(&refuse))?;
            write_file(&target, &mut reader, executable, budget, |e| {
                io_at(&source)(e)
            })
        }
        _ => {
            let executable = entry.header().mode().is_ok_and(|m| m & 0o111 != 0);
            clear_path(&target).map_err(|e| e.or_refuse(&refuse))?;
            write_file(&target, entry, executable, budget, corrupt)
        }
    }
}

/// An error from a filesystem check: either a plain I/O failure or a reason to
/// refuse the entry.
enum Check {
    Refuse(&'static str),
    Failed(ExtractError),
}

impl Check {
    fn or_refuse(self, refuse: &impl Fn(&str) -> ExtractError) -> ExtractError {
        match self {
            Check::Refuse(reason) => refuse(reason),
            Check::Failed(e) => e,
        }
    }
}

/// The entry path without `.` components; absolute paths and `..` are refused.
fn relative_path(path: &Path) -> Result<PathBuf, &'static str> {
    let mut rel = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => rel.push(name),
            Component::CurDir => {}
            Component::ParentDir => return Err("the path contains \"..\""),
            Component::RootDir | Component::Prefix(_) => return Err("the path is absolute"),
        }
    }
    Ok(rel)
}

/// Creates the missing parent directories of `dest/rel`, refusing to pass
/// through anything that is not a real directory, and returns `dest/rel`.
fn create_parents(dest: &Path, rel: &Path) -> Result<PathBuf, Check> {
    let mut dir = dest.to_path_buf();
    let mut components = rel.components().peekable();
    while let Some(component) = components.next() {
        if components.peek().is_none() {
            dir.push(component);
            break;
        }
        dir.push(component);
        match fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(Check::Refuse("its path goes through a symlink"))
            }
            Ok(_) => return Err(Check::Refuse("a parent of its path is not a directory")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => fs::DirBuilder::new()
                .mode(0o755)
                .create(&dir)
                .map_err(|e| Check::Failed(io_at(&dir)(e)))?,
            Err(e) => return Err(Check::Failed(io_at(&dir)(e))),
        }
    }
    Ok(dir)
}

/// Removes an earlier file or symlink at `path` (a later entry replaces an
/// earlier one, as with tar); the symlink itself goes, never its target.
fn clear_path(path: &Path) -> Result<(), Check> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Err(Check::Refuse(
            "an earlier entry at this path is a directory",
        )),
        Ok(_) => fs::remove_file(path).map_err(|e| Check::Failed(io_at(path)(e))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Check::Failed(io_at(path)(e))),
    }
}

/// Writes a new file (`create_new`: never opens an existing path, so never
/// follows a symlink) out of `budget`, mapping read errors with `read_error`.
fn write_file(
    path: &Path,
    reader: &mut impl Read,
    executable: bool,
    budget: &mut Budget,
    read_error: impl Fn(io::Error) -> ExtractError,
) -> Result<(), ExtractError> {
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if executable { 0o755 } else { 0o644 })
        .open(path)
        .map_err(io_at(path))?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(read_error(e)),
        };
        budget.spend(n)?;
        out.write_all(&buf[..n]).map_err(io_at(path))?;
    }
    Ok(())
}

/// A symlink at `rel` (relative to the destination) may point to `target`
/// only if it is relative, its leading `..`s stay inside the destination, and
/// no `..` follows a name.
pub fn check_symlink_target(rel: &Path, target: &Path) -> Result<(), &'static str> {
    if target.as_os_str().is_empty() {
        return Err("the symlink has an empty target");
    }
    // Depth of the directory holding the link: its parents are real
    // directories (see `create_parents`), so leading `..`s resolve lexically.
    let mut depth = rel.components().count().saturating_sub(1);
    let mut after_name = false;
    for component in target.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => {
                return Err("the symlink target is an absolute path")
            }
            Component::CurDir => {}
            Component::ParentDir if after_name => {
                return Err("the symlink target has \"..\" after a directory name")
            }
            Component::ParentDir if depth == 0 => {
                return Err("the symlink target points outside the archive")
            }
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => after_name = true,
        }
    }
    Ok(())
}

/// The regular file an earlier entry created at `link`, reached through real
/// directories only.
fn hard_link_source(dest: &Path, link: &Path) -> Result<PathBuf, &'static str> {
    let rel = relative_path(link).map_err(|_| "the hard link points outside the archive")?;
    if rel.as_os_str().is_empty() {
        return Err("the hard link has an empty target");
    }
    let mut path = dest.to_path_buf();
    let count = rel.components().count();
    for (i, component) in rel.components().enumerate() {
        path.push(component);
        let meta = fs::symlink_metadata(&path)
            .map_err(|_| "the hard link target is not an earlier entry of the archive")?;
        let last = i + 1 == count;
        if meta.file_type().is_symlink() {
            return Err("the hard link goes through or to a symlink");
        }
        if !last && !meta.is_dir() {
            return Err("the hard link target is not an earlier entry of the archive");
        }
        if last && !meta.is_file() {
            return Err("the hard link target is not a regular file");
        }
    }
    Ok(path)
}

/// §10.2 wrapper-directory stripping: when extraction produced exactly one
/// top-level entry and it is a directory, that directory is the source root;
/// otherwise the extraction directory itself is. A lone top-level *symlink* is
/// not stripped even if it points to a directory: it is not "a single
/// top-level directory" of the archive, and following it could move the
/// source root somewhere the archive does not contain.
pub fn source_root(extracted: &Path) -> PathBuf {
    let Ok(entries) = fs::read_dir(extracted) else {
        return extracted.to_path_buf();
    };
    let first_two: Vec<_> = entries.take(2).collect();
    if let [Ok(only)] = first_two.as_slice() {
        if only.file_type().is_ok_and(|t| t.is_dir()) {
            return only.path();
        }
    }
    extracted.to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::testutil::TempDir;
    use flate2::write::GzEncoder;
    use flate2::Compression;
    use tar::{Builder, Header};

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    fn tar_bytes(build: impl FnOnce(&mut Builder<Vec<u8>>)) -> Vec<u8> {
        let mut b = Builder::new(Vec::new());
        build(&mut b);
        b.into_inner().unwrap()
    }

    fn file(b: &mut Builder<Vec<u8>>, path: &str, data: &[u8], mode: u32) {
        let mut h = Header::new_gnu();
        h.set_entry_type(EntryType::Regular);
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        b.append_data(&mut h, path, data).unwrap();
    }

    fn dir(b: &mut Builder<Vec<u8>>, path: &str) {
        let mut h = Header::new_gnu();
        h.set_entry_type(EntryType::Directory);
        h.set_size(0);
        h.set_mode(0o755);
        b.append_data(&mut h, path, io::empty()).unwrap();
    }

    /// An entry written byte for byte, for names the builder refuses.
    fn raw(b: &mut Builder<Vec<u8>>, kind: EntryType, name: &[u8], link: &[u8], data: &[u8]) {
        let mut h = Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        let gnu = h.as_gnu_mut().unwrap();
        gnu.name = [0; 100];
        gnu.name[..name.len()].copy_from_slice(name);
        gnu.linkname = [0; 100];
        gnu.linkname[..link.len()].copy_from_slice(link);
        h.set_cksum();
        b.append(&h, data).unwrap();
    }

    /// A pax extended header (`x`) setting `key` for the next entry.
    fn pax(b: &mut Builder<Vec<u8>>, key: &str, value: &str) {
        let body = format!(" {key}={value}\n");
        let mut len = body.len() + 1;
        while format!("{len}{body}").len() != len {
            len += 1;
        }
        let record = format!("{len}{body}");
        raw(
            b,
            EntryType::XHeader,
            b"PaxHeaders/x",
            b"",
            record.as_bytes(),
        );
    }

    struct Fixture {
        tmp: TempDir,
    }

    impl Fixture {
        fn new() -> Fixture {
            let tmp = TempDir::new("archive");
            fs::create_dir(tmp.path().join("out")).unwrap();
            Fixture { tmp }
        }
        fn out(&self) -> PathBuf {
            self.tmp.path().join("out")
        }
        fn extract_bytes(&self, bytes: &[u8]) -> Result<(), ExtractError> {
            let archive = self.tmp.path().join("a.tar.gz");
            fs::write(&archive, bytes).unwrap();
            extract_tar_gz(&archive, &self.out(), u64::MAX)
        }
        fn extract(&self, build: impl FnOnce(&mut Builder<Vec<u8>>)) -> Result<(), ExtractError> {
            self.extract_bytes(&gzip(&tar_bytes(build)))
        }
        fn refused(&self, build: impl FnOnce(&mut Builder<Vec<u8>>), reason: &str) {
            match self.extract(build) {
                Err(e @ ExtractError::Unsafe { .. }) => {
                    assert!(e.to_string().contains(reason), "{e}")
                }
                other => panic!("expected a refusal ({reason}), got {other:?}"),
            }
        }
    }

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn extracts_files_directories_and_links() {
        let fx = Fixture::new();
        let long = format!("wrap/{}/deep.txt", "d".repeat(120));
        fx.extract(|b| {
            dir(b, "wrap/");
            file(b, "wrap/index.sh", b"#!/bin/bash\necho hi\n", 0o755);
            file(b, "wrap/README.md", b"readme", 0o644);
            file(b, "wrap/lib/nested/helper.ts", b"export {}", 0o644);
            file(b, &long, b"long", 0o644);
            raw(
                b,
                EntryType::Symlink,
                b"wrap/lib/readme",
                b"../README.md",
                b"",
            );
            raw(b, EntryType::Symlink, b"wrap/lib/here", b"./nested", b"");
            raw(b, EntryType::Link, b"wrap/copy.md", b"wrap/README.md", b"");
            pax(b, "path", "wrap/from-pax.sh");
            file(b, "wrap/short-name", b"pax", 0o755);
            let mut h = Header::new_gnu();
            h.set_entry_type(EntryType::Symlink);
            h.set_size(0);
            b.append_link(&mut h, "wrap/longlink", &long["wrap/".len()..])
                .unwrap();
        })
        .unwrap();
        let w = fx.out().join("wrap");
        assert_eq!(
            fs::read(w.join("index.sh")).unwrap(),
            b"#!/bin/bash\necho hi\n"
        );
        assert_eq!(
            fs::read(w.join("lib/nested/helper.ts")).unwrap(),
            b"export {}"
        );
        assert_eq!(fs::read(fx.out().join(&long)).unwrap(), b"long");
        assert_eq!(
            fs::read_link(w.join("lib/readme")).unwrap(),
            Path::new("../README.md")
        );
        assert_eq!(fs::read(w.join("lib/readme")).unwrap(), b"readme");
        assert_eq!(
            fs::read(w.join("lib/here/helper.ts")).unwrap(),
            b"export {}"
        );
        assert_eq!(fs::read(w.join("copy.md")).unwrap(), b"readme");
        assert!(!fs::symlink_metadata(w.join("copy.md"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(w.join("from-pax.sh")).unwrap(), b"pax");
        assert!(!w.join("short-name").exists());
        assert_eq!(fs::read(w.join("longlink")).unwrap(), b"long");
        assert_eq!(source_root(&fx.out()), w);
    }

    #[test]
    fn keeps_the_executable_bit_and_drops_special_bits() {
        let fx = Fixture::new();
        fx.extract(|b| {
            file(b, "run.sh", b"x", 0o4755);
            file(b, "sticky.sh", b"x", 0o3711);
            file(b, "plain.txt", b"x", 0o666);
            file(b, "private.txt", b"x", 0o600);
        })
        .unwrap();
        for exec in ["run.sh", "sticky.sh"] {
            let m = mode(&fx.out().join(exec));
            assert_eq!(m & 0o7000, 0, "{exec}: {m:o}");
            assert_eq!(m & 0o100, 0o100, "{exec}: {m:o}");
        }
        for plain in ["plain.txt", "private.txt"] {
            let m = mode(&fx.out().join(plain));
            assert_eq!(m & 0o111, 0, "{plain}: {m:o}");
            assert_eq!(m & 0o600, 0o600, "{plain}: {m:o}");
        }
    }

    #[test]
    fn refuses_absolute_paths() {
        let fx = Fixture::new();
        let victim = fx.tmp.path().join("victim");
        let name = victim.to_str().unwrap().as_bytes().to_vec();
        fx.refused(
            |b| raw(b, EntryType::Regular, &name, b"", b"pwned"),
            "absolute",
        );
        assert!(!victim.exists());
        let fx = Fixture::new();
        let victim = fx.tmp.path().join("pax-victim");
        let value = victim.to_str().unwrap().to_string();
        fx.refused(
            |b| {
                pax(b, "path", &value);
                file(b, "innocent", b"pwned", 0o644);
            },
            "absolute",
        );
        assert!(!victim.exists());
    }

    #[test]
    fn refuses_parent_components() {
        for name in [
            &b"../escaped"[..],
            b"a/../../escaped",
            b"./../escaped",
            b"..",
        ] {
            let fx = Fixture::new();
            fx.refused(|b| raw(b, EntryType::Regular, name, b"", b"x"), "\"..\"");
            assert!(!fx.tmp.path().join("escaped").exists());
        }
        let fx = Fixture::new();
        fx.refused(
            |b| raw(b, EntryType::Directory, b"../escaped/", b"", b""),
            "\"..\"",
        );
        assert!(!fx.tmp.path().join("escaped").exists());
    }

    #[test]
    fn refuses_escaping_symlinks() {
        let cases: [(&[u8], &[u8], &str); 5] = [
            (b"abs", b"/etc", "absolute"),
            (b"up", b"..", "outside"),
            (b"dir/up2", b"../../x", "outside"),
            (b"dir/mid", b"sub/../../x", "after a directory name"),
            (b"empty", b"", "empty target"),
        ];
        for (name, target, reason) in cases {
            let fx = Fixture::new();
            fx.refused(|b| raw(b, EntryType::Symlink, name, target, b""), reason);
            let created = fx.out().join(std::str::from_utf8(name).unwrap());
            assert!(fs::symlink_metadata(created).is_err());
        }
    }

    #[test]
    fn refuses_an_absolute_pax_link_target() {
        let fx = Fixture::new();
        fx.refused(
            |b| {
                pax(b, "linkpath", "/etc");
                raw(b, EntryType::Symlink, b"l", b"harmless", b"");
            },
            "absolute",
        );
        assert!(fs::symlink_metadata(fx.out().join("l")).is_err());
    }

    #[test]
    fn refuses_a_symlink_chain_that_escapes() {
        // `s -> .` is harmless alone; `t -> s/../x` would reach out of `out`.
        let fx = Fixture::new();
        fx.refused(
            |b| {
                raw(b, EntryType::Symlink, b"s", b".", b"");
                raw(b, EntryType::Symlink, b"t", b"s/../victim", b"");
            },
            "after a directory name",
        );
    }

    #[test]
    fn never_writes_through_an_earlier_symlink() {
        // The classic attack: `a -> /tmp`, then `a/x`. Here the link is even
        // valid (inside the archive); writing through it is still refused.
        let fx = Fixture::new();
        fx.refused(
            |b| {
                dir(b, "real/");
                raw(b, EntryType::Symlink, b"a", b"real", b"");
                raw(b, EntryType::Regular, b"a/x", b"", b"pwned");
            },
            "through a symlink",
        );
        assert!(!fx.out().join("real/x").exists());

        let fx = Fixture::new();
        fx.refused(
            |b| {
                raw(b, EntryType::Symlink, b"a", b".", b"");
                raw(b, EntryType::Directory, b"a/sub/", b"", b"");
            },
            "through a symlink",
        );
    }

    #[test]
    fn a_later_file_replaces_an_earlier_symlink_instead_of_following_it() {
        let fx = Fixture::new();
        fx.extract(|b| {
            dir(b, "d/");
            raw(b, EntryType::Symlink, b"f", b"d/target", b"");
            raw(b, EntryType::Regular, b"f", b"", b"content");
        })
        .unwrap();
        assert!(!fx.out().join("d/target").exists());
        let f = fx.out().join("f");
        assert!(fs::symlink_metadata(&f).unwrap().is_file());
        assert_eq!(fs::read(f).unwrap(), b"content");
    }

    #[test]
    fn conflicting_entry_kinds_are_refused() {
        let fx = Fixture::new();
        fx.refused(
            |b| {
                dir(b, "x/");
                raw(b, EntryType::Regular, b"x", b"", b"data");
            },
            "is a directory",
        );
        let fx = Fixture::new();
        fx.refused(
            |b| {
                file(b, "x", b"data", 0o644);
                raw(b, EntryType::Regular, b"x/y", b"", b"data");
            },
            "not a directory",
        );
        let fx = Fixture::new();
        fx.refused(
            |b| {
                dir(b, "target/");
                raw(b, EntryType::Symlink, b"l", b"target", b"");
                raw(b, EntryType::Directory, b"l/", b"", b"");
            },
            "not a directory",
        );
        let fx = Fixture::new();
        fx.refused(|b| raw(b, EntryType::Regular, b"./", b"", b"x"), "itself");
    }

    #[test]
    fn hard_links_must_name_an_earlier_regular_file() {
        let cases: [(&[u8], &str); 4] = [
            (b"../outside", "outside the archive"),
            (b"/etc/passwd", "outside the archive"),
            (b"missing", "not an earlier entry"),
            (b"link", "symlink"),
        ];
        for (target, reason) in cases {
            let fx = Fixture::new();
            fs::write(fx.tmp.path().join("outside"), b"secret").unwrap();
            fx.refused(
                |b| {
                    file(b, "real", b"data", 0o644);
                    raw(b, EntryType::Symlink, b"link", b"real", b"");
                    raw(b, EntryType::Link, b"copy", target, b"");
                },
                reason,
            );
            assert!(fs::symlink_metadata(fx.out().join("copy")).is_err());
        }
        let fx = Fixture::new();
        fx.refused(
            |b| {
                dir(b, "d/");
                raw(b, EntryType::Link, b"copy", b"d", b"");
            },
            "not a regular file",
        );
    }

    #[test]
    fn hard_link_copies_keep_the_executable_bit() {
        let fx = Fixture::new();
        fx.extract(|b| {
            file(b, "bin/run.sh", b"#!/bin/sh", 0o755);
            raw(b, EntryType::Link, b"again.sh", b"bin/run.sh", b"");
        })
        .unwrap();
        assert_eq!(mode(&fx.out().join("again.sh")) & 0o100, 0o100);
        fs::write(fx.out().join("again.sh"), b"changed").unwrap();
        assert_eq!(fs::read(fx.out().join("bin/run.sh")).unwrap(), b"#!/bin/sh");
    }

    #[test]
    fn special_files_are_skipped() {
        let fx = Fixture::new();
        fx.extract(|b| {
            raw(b, EntryType::Char, b"tty", b"", b"");
            raw(b, EntryType::Block, b"disk", b"", b"");
            raw(b, EntryType::Fifo, b"pipe", b"", b"");
            raw(
                b,
                EntryType::XGlobalHeader,
                b"pax_global_header",
                b"",
                b"21 comment=abcdefghi\n",
            );
            file(b, "flow/index.sh", b"echo", 0o755);
        })
        .unwrap();
        let names: Vec<_> = fs::read_dir(fx.out())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["flow"]);
        assert_eq!(source_root(&fx.out()), fx.out().join("flow"));
    }

    #[test]
    fn rejects_input_that_is_not_gzip() {
        let fx = Fixture::new();
        let plain_tar = tar_bytes(|b| file(b, "a.sh", b"x", 0o644));
        for bytes in [&plain_tar[..], b"", b"\x1f"] {
            let err = fx.extract_bytes(bytes).unwrap_err();
            assert!(matches!(err, ExtractError::NotGzip), "{err:?}");
            assert_eq!(err.to_string(), "not a gzip archive");
        }
    }

    #[test]
    fn rejects_corrupt_archives() {
        let good = gzip(&tar_bytes(|b| file(b, "a.sh", &[7u8; 5000], 0o644)));
        let mut bad_crc = good.clone();
        let n = bad_crc.len();
        bad_crc[n - 8] ^= 0xff;
        let truncated = &good[..good.len() / 2];
        let garbage_tar = gzip(&[0x55u8; 2048]);
        let mut bad_deflate = good.clone();
        for b in &mut bad_deflate[10..40] {
            *b = 0xff;
        }
        for (what, bytes) in [
            ("bad crc", &bad_crc[..]),
            ("truncated", truncated),
            ("garbage tar", &garbage_tar[..]),
            ("bad deflate", &bad_deflate[..]),
        ] {
            let fx = Fixture::new();
            let err = fx.extract_bytes(bytes).unwrap_err();
            assert!(matches!(err, ExtractError::Corrupt(_)), "{what}: {err:?}");
            assert!(
                err.to_string().starts_with("corrupt archive: "),
                "{what}: {err}"
            );
        }
        let fx = Fixture::new();
        fx.extract_bytes(&good).unwrap();
    }

    /// Every regular file under `dir`, with its size summed.
    fn bytes_on_disk(dir: &Path) -> u64 {
        let mut total = 0;
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                total += bytes_on_disk(&path);
            } else if meta.is_file() {
                total += meta.len();
            }
        }
        total
    }

    #[test]
    fn extraction_stops_at_the_size_limit() {
        // A gzip bomb: 1 MiB of zeros compresses to about 1 KiB.
        let bomb = gzip(&tar_bytes(|b| {
            file(b, "flow/index.sh", b"#!/bin/sh\n", 0o755);
            file(b, "flow/zeros", &vec![0u8; 1 << 20], 0o644);
        }));
        assert!(bomb.len() < 8 << 10, "{}", bomb.len());
        let fx = Fixture::new();
        let archive = fx.tmp.path().join("bomb.tar.gz");
        fs::write(&archive, &bomb).unwrap();
        let err = extract_tar_gz(&archive, &fx.out(), 64 << 10).unwrap_err();
        assert!(
            matches!(err, ExtractError::TooLarge { limit } if limit == 64 << 10),
            "{err:?}"
        );
        assert!(bytes_on_disk(&fx.out()) <= 64 << 10);

        // Many files add up; hard-link copies count like the files they copy.
        let many = gzip(&tar_bytes(|b| {
            file(b, "a", &[1u8; 600], 0o644);
            file(b, "b", &[2u8; 600], 0o644);
            raw(b, EntryType::Link, b"c", b"a", b"");
        }));
        for (limit, ok) in [(1200, false), (1799, false), (1800, true)] {
            let fx = Fixture::new();
            let archive = fx.tmp.path().join("many.tar.gz");
            fs::write(&archive, &many).unwrap();
            let result = extract_tar_gz(&archive, &fx.out(), limit);
            assert_eq!(result.is_ok(), ok, "limit {limit}: {result:?}");
            assert!(bytes_on_disk(&fx.out()) <= limit, "limit {limit}");
        }
    }

    #[test]
    fn a_directory_is_copied_under_the_archive_rules() {
        use std::os::unix::fs::MetadataExt;
        let src = TempDir::new("copy-src");
        let s = src.path();
        crate::install::testutil::tree(s, &["index.sh", "lib/util.sh", ".git/HEAD", "sub/.git"]);
        fs::set_permissions(s.join("index.sh"), fs::Permissions::from_mode(0o4775)).unwrap();
        std::os::unix::fs::symlink("lib/util.sh", s.join("link.sh")).unwrap();
        std::os::unix::fs::symlink("../index.sh", s.join("lib/up.sh")).unwrap();
        fs::hard_link(s.join("index.sh"), s.join("hard.sh")).unwrap();
        let out = TempDir::new("copy-out");
        copy_dir(s, out.path(), u64::MAX).unwrap();
        let o = out.path();
        let mut listed: Vec<String> = walk(o);
        listed.sort();
        assert_eq!(
            listed,
            [
                "hard.sh",
                "index.sh",
                "lib",
                "lib/up.sh",
                "lib/util.sh",
                "link.sh",
                "sub"
            ]
        );
        assert_eq!(mode(&o.join("index.sh")) & 0o7000, 0);
        assert_ne!(mode(&o.join("index.sh")) & 0o100, 0);
        assert_eq!(
            fs::read_link(o.join("link.sh")).unwrap(),
            Path::new("lib/util.sh")
        );
        assert_eq!(fs::read(o.join("lib/up.sh")).unwrap(), b"x");
        assert!(fs::symlink_metadata(o.join("hard.sh")).unwrap().nlink() == 1);

        // Links that lead outside, and the size limit, refuse the copy.
        for (target, reason) in [("../../etc", "outside"), ("/etc/passwd", "absolute")] {
            let src = TempDir::new("copy-escape");
            crate::install::testutil::tree(src.path(), &["index.sh"]);
            std::os::unix::fs::symlink(target, src.path().join("l")).unwrap();
            let out = TempDir::new("copy-out");
            match copy_dir(src.path(), out.path(), u64::MAX) {
                Err(ExtractError::Unsafe { entry, reason: why }) => {
                    assert_eq!(entry, "l");
                    assert!(why.contains(reason), "{why}");
                }
                other => panic!("{target}: {other:?}"),
            }
        }
        let out = TempDir::new("copy-out");
        assert!(matches!(
            copy_dir(s, out.path(), 2),
            Err(ExtractError::TooLarge { limit: 2 })
        ));
    }

    #[test]
    fn a_directory_is_never_copied_into_itself() {
        let src = TempDir::new("copy-self");
        crate::install::testutil::tree(src.path(), &["index.sh"]);
        let dest = src.path().join("tmp/work");
        fs::create_dir_all(&dest).unwrap();
        copy_dir(src.path(), &dest, u64::MAX).unwrap();
        let mut listed = walk(&dest);
        listed.sort();
        assert_eq!(listed, ["index.sh", "tmp"]);
    }

    /// Every path under `root`, relative, not following symlinks.
    fn walk(root: &Path) -> Vec<String> {
        let mut found = Vec::new();
        let mut pending = vec![root.to_path_buf()];
        while let Some(d) = pending.pop() {
            for e in fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                if e.file_type().unwrap().is_dir() {
                    pending.push(e.path());
                }
                let rel = e
                    .path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                found.push(rel);
            }
        }
        found
    }

    #[test]
    fn source_root_strips_only_a_single_directory() {
        let tmp = TempDir::new("source-root");
        let root = tmp.path();
        assert_eq!(source_root(root), root);

        fs::create_dir(root.join("only")).unwrap();
        assert_eq!(source_root(root), root.join("only"));

        fs::write(root.join("README"), b"x").unwrap();
        assert_eq!(source_root(root), root);

        let single_file = TempDir::new("source-root-file");
        fs::write(single_file.path().join("index.sh"), b"x").unwrap();
        assert_eq!(source_root(single_file.path()), single_file.path());

        let single_link = TempDir::new("source-root-link");
        std::os::unix::fs::symlink(root.join("only"), single_link.path().join("l")).unwrap();
        assert_eq!(source_root(single_link.path()), single_link.path());
    }
}

/// Property tests: entry paths are accepted exactly when they are relative
/// and free of `..`; symlink targets never lead out of the destination; and
/// extracting any archive built from hostile entries — or any bytes at all —
/// writes nothing outside the destination, through no symlink, and nothing
/// but plain files, directories and symlinks that stay inside.
#[cfg(test)]
mod props {
    use super::*;
    use crate::install::testutil::TempDir;
    use crate::testing::config;
    use flate2::write::GzEncoder;
    use flate2::Compression;
    use proptest::prelude::*;
    use std::os::unix::fs::MetadataExt;

    /// Paths built from a few names, `..`, `.` and empty components,
    /// sometimes absolute. `up` weighs `..` against the names: entry names
    /// need few (one refused entry ends the extraction), link targets many.
    fn path_text(max: usize, up: u32) -> impl Strategy<Value = String> {
        let part = prop_oneof![
            6 => prop::sample::select(vec!["a", "s", "t"]),
            up => Just(".."),
            1 => Just("."),
            1 => Just(""),
        ];
        (
            prop::bool::weighted(0.05),
            prop::collection::vec(part, 1..=max),
        )
            .prop_map(|(abs, parts)| format!("{}{}", if abs { "/" } else { "" }, parts.join("/")))
    }

    #[derive(Debug, Clone)]
    struct Entry {
        kind: EntryType,
        name: String,
        link: String,
        data: Vec<u8>,
        mode: u32,
    }

    fn entry() -> impl Strategy<Value = Entry> {
        let kind = prop::sample::select(vec![
            EntryType::Regular,
            EntryType::Regular,
            EntryType::Directory,
            EntryType::Directory,
            EntryType::Symlink,
            EntryType::Symlink,
            EntryType::Symlink,
            EntryType::Link,
            EntryType::Fifo,
        ]);
        // Mostly plausible entries (one refused entry ends the extraction,
        // so hostile ones are the exception), and link targets that climb.
        let clean = prop::collection::vec(prop::sample::select(vec!["a", "s", "t"]), 1..=3)
            .prop_map(|parts| parts.join("/"));
        let name = prop_oneof![6 => clean.clone(), 1 => path_text(3, 1)];
        let climbing = (0usize..3, clean).prop_map(|(up, rest)| "../".repeat(up) + &rest);
        let link = prop_oneof![2 => climbing, 1 => path_text(4, 5)];
        (
            kind,
            name,
            link,
            prop::collection::vec(any::<u8>(), 0..8),
            prop::sample::select(vec![0o644, 0o755, 0o4755, 0o7777, 0o000]),
        )
            .prop_map(|(kind, name, link, data, mode)| Entry {
                kind,
                name,
                link,
                data,
                mode,
            })
    }

    /// A `.tar.gz` with these entries, written header by header so nothing
    /// refuses the hostile names first.
    fn archive(entries: &[Entry]) -> Vec<u8> {
        let mut tar = Vec::new();
        for e in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(e.kind);
            let data: &[u8] = if e.kind == EntryType::Regular {
                &e.data
            } else {
                &[]
            };
            h.set_size(data.len() as u64);
            h.set_mode(e.mode);
            let gnu = h.as_gnu_mut().unwrap();
            gnu.name[..e.name.len()].copy_from_slice(e.name.as_bytes());
            gnu.linkname[..e.link.len()].copy_from_slice(e.link.as_bytes());
            h.set_cksum();
            tar.extend_from_slice(h.as_bytes());
            tar.extend_from_slice(data);
            tar.resize(tar.len().div_ceil(512) * 512, 0);
        }
        tar.extend_from_slice(&[0; 1024]);
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(&tar).unwrap();
        gz.finish().unwrap()
    }

    /// Every path under `root` (not following symlinks), relative, sorted.
    fn listing(root: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                out.push(path.strip_prefix(root).unwrap().to_path_buf());
                if fs::symlink_metadata(&path).unwrap().is_dir() {
                    pending.push(path);
                }
            }
        }
        out.sort();
        out
    }

    /// Whether resolving `rel` inside `dest`, following the symlinks found
    /// there on the way as the kernel would, ever climbs above `dest` or
    /// turns absolute. Like the kernel, gives up after 40 links (a loop).
    fn escapes(dest: &Path, rel: &Path) -> bool {
        // Components still to walk, last first; where the walk is now.
        let mut todo: Vec<std::ffi::OsString> = Vec::new();
        let push_all = |todo: &mut Vec<std::ffi::OsString>, p: &Path| -> bool {
            let mut parts = Vec::new();
            for c in p.components() {
                match c {
                    Component::RootDir | Component::Prefix(_) => return false,
                    other => parts.push(other.as_os_str().to_os_string()),
                }
            }
            todo.extend(parts.into_iter().rev());
            true
        };
        if !push_all(&mut todo, rel) {
            return true;
        }
        let mut at: Vec<std::ffi::OsString> = Vec::new();
        let mut links = 0;
        while let Some(part) = todo.pop() {
            if part == "." {
                continue;
            }
            if part == ".." {
                if at.pop().is_none() {
                    return true;
                }
                continue;
            }
            at.push(part);
            let here: PathBuf = at.iter().collect();
            if let Ok(target) = fs::read_link(dest.join(&here)) {
                links += 1;
                if links > 40 {
                    return false;
                }
                at.pop();
                if !push_all(&mut todo, &target) {
                    return true;
                }
            }
        }
        false
    }

    proptest! {
        #![proptest_config(config(1024))]

        #[test]
        fn entry_paths_are_accepted_exactly_when_relative_without_parent_steps(
            p in path_text(6, 2)
        ) {
            let path = Path::new(&p);
            let has_parent = path.components().any(|c| c == Component::ParentDir);
            match relative_path(path) {
                Ok(rel) => {
                    prop_assert!(!path.is_absolute() && !has_parent, "{p}");
                    prop_assert!(rel.components().all(|c| matches!(c, Component::Normal(_))));
                    let kept: PathBuf = path.components()
                        .filter(|c| *c != Component::CurDir).collect();
                    prop_assert_eq!(rel, kept);
                }
                Err(_) => prop_assert!(path.is_absolute() || has_parent, "{p}"),
            }
        }

        #[test]
        fn accepted_symlink_targets_stay_inside(at in path_text(4, 1), target in path_text(6, 4)) {
            let Ok(rel) = relative_path(Path::new(&at)) else { return Ok(()) };
            if rel.as_os_str().is_empty() {
                return Ok(());
            }
            if check_symlink_target(&rel, Path::new(&target)).is_ok() {
                let base = rel.parent().unwrap_or(Path::new(""));
                let mut depth = base.components().count() as i64;
                let mut after_name = false;
                for c in Path::new(&target).components() {
                    match c {
                        Component::ParentDir => {
                            prop_assert!(!after_name, "{at} -> {target}");
                            depth -= 1;
                            prop_assert!(depth >= 0, "{at} -> {target}");
                        }
                        Component::Normal(_) => after_name = true,
                        Component::CurDir => {}
                        _ => prop_assert!(false, "{at} -> {target}"),
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(config(256))]

        #[test]
        fn no_archive_writes_outside_the_destination(
            entries in prop::collection::vec(entry(), 0..12),
            noise in prop::collection::vec(any::<u8>(), 0..64),
            corrupt in prop::bool::weighted(0.1),
        ) {
            let tmp = TempDir::new("archive-prop");
            // The destination sits five levels down, so no run of `..` in
            // these paths can climb past the temporary directory unseen.
            let dest = tmp.path().join("w/x/y/z/dest");
            fs::create_dir_all(&dest).unwrap();
            fs::write(tmp.path().join("w/x/bait"), b"keep").unwrap();
            let file = tmp.path().join("w/archive.tar.gz");
            let mut bytes = archive(&entries);
            if corrupt {
                let at = noise.first().map_or(0, |&b| usize::from(b)) % bytes.len();
                bytes.truncate(at);
                bytes.extend_from_slice(&noise);
            }
            fs::write(&file, &bytes).unwrap();
            let before = listing(tmp.path());

            let _ = extract_tar_gz(&file, &dest, u64::MAX);

            let after: Vec<PathBuf> = listing(tmp.path())
                .into_iter()
                .filter(|p| !p.starts_with("w/x/y/z/dest") || p == Path::new("w/x/y/z/dest"))
                .collect();
            prop_assert_eq!(after, before, "outside the destination changed");
            prop_assert_eq!(fs::read(tmp.path().join("w/x/bait")).unwrap(), b"keep");
            for rel in listing(&dest) {
                let meta = fs::symlink_metadata(dest.join(&rel)).unwrap();
                let kind = meta.file_type();
                prop_assert!(kind.is_dir() || kind.is_file() || kind.is_symlink(), "{rel:?}");
                prop_assert_eq!(meta.mode() & 0o7000, 0, "{:?}", rel);
                if kind.is_file() {
                    prop_assert_eq!(meta.nlink(), 1, "{:?} shares its inode", rel);
                }
                if kind.is_symlink() {
                    prop_assert!(!escapes(&dest, &rel), "{rel:?} leads outside");
                }
            }
        }
    }
}
