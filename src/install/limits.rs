//! How far an install may go before loopx gives up (DESIGN "Beyond the
//! spec": installs are bounded). An unattended install must neither hang on
//! a server that barely sends nor fill the disk from a small gzip bomb:
//! - `LOOPX_INSTALL_STALL_TIMEOUT` (seconds, default 60): a download or a
//!   clone over HTTP(S) that receives less than `MIN_SPEED` bytes a second
//!   for that long is abandoned (a connection that takes that long to open,
//!   too);
//! - `LOOPX_INSTALL_MAX_SIZE` (bytes, or with a K, M or G suffix, powers of
//!   1024; default 512M): the most a tarball download, the files extracted
//!   from it, or a repository's checkout may hold.

use crate::error::Error;

/// The speed under which a transfer counts as stalled, in bytes a second:
/// a trickle (a server dripping a few bytes a second) is as good as
/// silence for an install.
pub const MIN_SPEED: u64 = 1024;

const DEFAULT_STALL_SECS: u64 = 60;
const DEFAULT_MAX_SIZE: u64 = 512 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub stall_secs: u64,
    pub max_size: u64,
}

impl Limits {
    /// The limits from the environment; an invalid value is an error (an
    /// unset or empty variable means the default).
    pub fn from_env() -> Result<Limits, Error> {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(|v| v.to_string_lossy().into_owned())
        };
        let stall_secs = match var("LOOPX_INSTALL_STALL_TIMEOUT") {
            None => DEFAULT_STALL_SECS,
            Some(v) => parse_secs(&v).ok_or(Error::BadStallTimeout { value: v })?,
        };
        let max_size = match var("LOOPX_INSTALL_MAX_SIZE") {
            None => DEFAULT_MAX_SIZE,
            Some(v) => parse_size(&v).ok_or(Error::BadMaxSize { value: v })?,
        };
        Ok(Limits {
            stall_secs,
            max_size,
        })
    }
}

/// A whole number of seconds, at least 1.
fn parse_secs(s: &str) -> Option<u64> {
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u64>().ok().filter(|&n| n > 0)
}

/// A size in bytes (`1000`), or with a K, M or G suffix in either case
/// (`64K`, `512m`, `2G`: powers of 1024); at least 1 byte. Nothing else:
/// no spaces, fractions, `KB`/`KiB` or signs, so a typo is an error rather
/// than a surprise.
pub fn parse_size(s: &str) -> Option<u64> {
    let (digits, shift) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 10),
        b'm' | b'M' => (&s[..s.len() - 1], 20),
        b'g' | b'G' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = digits.parse::<u64>().ok()?;
    n.checked_mul(1 << shift).filter(|&bytes| bytes > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_bytes_or_with_a_binary_suffix() {
        let cases = [
            ("1", 1),
            ("1000", 1000),
            ("64K", 64 << 10),
            ("64k", 64 << 10),
            ("512M", 512 << 20),
            ("2g", 2 << 30),
            ("0010", 10),
        ];
        for (input, bytes) in cases {
            assert_eq!(parse_size(input), Some(bytes), "{input}");
        }
    }

    #[test]
    fn anything_else_is_not_a_size() {
        for input in [
            "",
            "0",
            "0K",
            "K",
            "-1",
            "+1",
            "1.5M",
            "1 M",
            "1KB",
            "1KiB",
            "1T",
            " 1",
            "1e6",
            "１",
            "99999999999999999999",
            "17179869184G",
        ] {
            assert_eq!(parse_size(input), None, "{input:?}");
        }
    }

    #[test]
    fn shown_sizes_parse_back() {
        // Whatever parses, shows (text::format_size) as something that
        // parses back to it.
        for n in [1, 1023, 1024, 3 << 20, (5 << 30) + 1024] {
            let shown = crate::text::format_size(n);
            let shown = shown.trim_end_matches(" bytes").trim_end_matches(" byte");
            assert_eq!(parse_size(shown), Some(n), "{n}");
        }
    }

    #[test]
    fn stall_seconds_are_whole_and_positive() {
        assert_eq!(parse_secs("2"), Some(2));
        assert_eq!(parse_secs("60"), Some(60));
        for bad in ["", "0", "-1", "+1", "1.5", "2s", " 2"] {
            assert_eq!(parse_secs(bad), None, "{bad:?}");
        }
    }
}
