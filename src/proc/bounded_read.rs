//! Reading files loopx does not control (env files, package.json) with a
//! size limit, and without a wait that a signal cannot end.
//!
//! Why: the signal handlers (signals.rs) are installed with SA_RESTART, so a
//! plain `read` of a fifo with no writer, or of a terminal, is restarted
//! after every SIGINT/SIGTERM and loopx could only be SIGKILLed; and
//! `fs::read` of /dev/zero grows until memory runs out. Here every file is
//! opened non-blocking: a regular file is read as usual (it never blocks),
//! anything else is read only when `poll` says it has data, and that poll
//! also watches the signal self-pipe, so an interrupt ends the wait.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::proc::signals::Signals;

/// The most loopx reads from an env file or a package.json: far above any
/// real one (a big package.json is tens of KiB), far below what hurts.
pub const LIMIT: u64 = 8 * 1024 * 1024;

/// How `LIMIT` reads in messages.
pub const LIMIT_TEXT: &str = "8 MiB";

/// Something that can end a wait for input: a descriptor that turns
/// readable when it may have, and the check of whether it did.
pub trait Interrupt {
    fn fd(&self) -> RawFd;
    /// The signal that ends the read, if one arrived.
    fn pending(&mut self) -> Option<i32>;
}

impl Interrupt for Signals {
    fn fd(&self) -> RawFd {
        Signals::fd(self)
    }

    fn pending(&mut self) -> Option<i32> {
        // Nothing runs yet while loopx reads its inputs, so a SIGCHLD byte
        // drained here has no child to be reaped; the first interrupt stays
        // recorded for whoever asks later.
        self.drain();
        self.interrupted()
    }
}

/// What the file may be.
pub enum Accept<'a> {
    /// A regular file only (package.json): reading never waits, and a fifo
    /// or a device is refused before anything is read.
    Regular,
    /// Also pipes and devices (env files: `-e <(secret-tool …)` is a real
    /// use), waited on until `interrupt` reports a signal; with `None`,
    /// until loopx is killed (no handlers: the default action ends it).
    Any(Option<&'a mut dyn Interrupt>),
}

#[derive(Debug)]
pub enum Failure {
    NotFound,
    /// More than `LIMIT` bytes.
    TooLarge,
    /// `Accept::Regular` and the path is a fifo, device or socket.
    NotRegular(&'static str),
    /// The wait ended with this signal.
    Interrupted(i32),
    Io(io::Error),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::NotFound => write!(f, "no such file"),
            Failure::TooLarge => write!(f, "larger than {LIMIT_TEXT}, the limit"),
            Failure::NotRegular(kind) => write!(f, "not a regular file but {kind}"),
            Failure::Interrupted(sig) => write!(f, "interrupted by signal {sig}"),
            Failure::Io(err) => write!(f, "{err}"),
        }
    }
}

impl From<io::Error> for Failure {
    fn from(err: io::Error) -> Failure {
        match err.kind() {
            io::ErrorKind::NotFound => Failure::NotFound,
            _ => Failure::Io(err),
        }
    }
}

/// Reads at most `LIMIT` bytes of `path` (see the module comment).
pub fn read(path: &Path, accept: Accept<'_>) -> Result<Vec<u8>, Failure> {
    // O_NONBLOCK: opening a fifo would otherwise wait for a writer, and
    // open is restarted after a signal like read is.
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    // A directory fails in `read` below with the system's own words.
    if kind.is_file() || kind.is_dir() {
        return read_capped(file.take(LIMIT + 1));
    }
    match accept {
        Accept::Regular => Err(Failure::NotRegular(if kind.is_fifo() {
            "a fifo"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "a device"
        })),
        Accept::Any(interrupt) => read_waiting(&file, interrupt),
    }
}

fn read_capped(mut r: impl Read) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::new();
    r.read_to_end(&mut out)?;
    if out.len() as u64 > LIMIT {
        return Err(Failure::TooLarge);
    }
    Ok(out)
}

/// How long to sleep between reads of a descriptor `poll` cannot watch
/// (macOS does not poll devices): the signal pipe is still watched.
const RETRY: libc::c_int = 50;

/// Reads a pipe or device to its end: poll first (a fifo opened without a
/// writer reads as empty, while poll waits for one), then read what is there.
fn read_waiting(
    file: &File,
    mut interrupt: Option<&mut dyn Interrupt>,
) -> Result<Vec<u8>, Failure> {
    let fd = file.as_raw_fd();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut pollable = true;
    loop {
        let mut fds = [
            libc::pollfd {
                fd: if pollable { fd } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: interrupt.as_ref().map_or(-1, |i| i.fd()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let timeout = if pollable { -1 } else { RETRY };
        // SAFETY: two pollfd structs, as the count says. A negative fd is
        // ignored by poll.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(Failure::Io(err));
            }
        }
        // An EINTR, or the pipe turned readable: did a signal end the read?
        if n < 0 || fds[1].revents != 0 {
            if let Some(sig) = interrupt.as_mut().and_then(|i| i.pending()) {
                return Err(Failure::Interrupted(sig));
            }
        }
        if pollable && fds[0].revents & libc::POLLNVAL != 0 {
            pollable = false;
            continue;
        }
        if pollable && fds[0].revents == 0 {
            continue;
        }
        // Readable, hung up, or not pollable: read what is there.
        loop {
            // SAFETY: reading into a buffer of the given length.
            let got = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if got > 0 {
                out.extend_from_slice(&buf[..got as usize]);
                if out.len() as u64 > LIMIT {
                    return Err(Failure::TooLarge);
                }
                continue;
            }
            if got == 0 {
                return Ok(out);
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::WouldBlock => break,
                io::ErrorKind::Interrupted => break,
                _ => return Err(Failure::Io(err)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::{FromRawFd, OwnedFd};

    fn pipe() -> (File, File) {
        let mut fds = [0; 2];
        // SAFETY: pipe fills both descriptors, owned from here on.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        unsafe {
            (
                File::from(OwnedFd::from_raw_fd(fds[0])),
                File::from(OwnedFd::from_raw_fd(fds[1])),
            )
        }
    }

    struct Fake {
        read: File,
        signal: Option<i32>,
    }

    impl Interrupt for Fake {
        fn fd(&self) -> RawFd {
            self.read.as_raw_fd()
        }
        fn pending(&mut self) -> Option<i32> {
            self.signal
        }
    }

    fn dev_fd(f: &File) -> std::path::PathBuf {
        format!("/dev/fd/{}", f.as_raw_fd()).into()
    }

    #[test]
    fn a_pipe_is_read_to_its_end() {
        let (r, mut w) = pipe();
        let writer = std::thread::spawn(move || {
            w.write_all(&vec![b'x'; 200_000]).expect("write");
        });
        let got = read(&dev_fd(&r), Accept::Any(None)).expect("read");
        writer.join().expect("writer");
        assert_eq!(got.len(), 200_000);
    }

    #[test]
    fn a_device_stops_at_the_limit() {
        let got = read(Path::new("/dev/zero"), Accept::Any(None));
        assert!(matches!(got, Err(Failure::TooLarge)), "{got:?}");
        let got = read(Path::new("/dev/zero"), Accept::Regular);
        assert!(
            matches!(got, Err(Failure::NotRegular("a device"))),
            "{got:?}"
        );
    }

    #[test]
    fn a_wait_ends_when_the_interrupt_reports_a_signal() {
        let (r, _w) = pipe();
        let (sig_r, mut sig_w) = pipe();
        sig_w.write_all(b"x").expect("write");
        let mut fake = Fake {
            read: sig_r,
            signal: Some(libc::SIGTERM),
        };
        let got = read(&dev_fd(&r), Accept::Any(Some(&mut fake)));
        assert!(
            matches!(got, Err(Failure::Interrupted(libc::SIGTERM))),
            "{got:?}"
        );
    }
}
