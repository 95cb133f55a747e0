//! Reading a `package.json`: the project root's for delegation (§3.2) and a
//! workflow's for its loopx version range (§3.2, §10.6).

use std::io;
use std::path::Path;

use crate::json::{self, Value};
use crate::proc::bounded_read::{self, Accept, Failure};

/// The outcome of reading a package.json; each failure mode of §3.2 is
/// distinct because each gets its own warning (or none).
pub enum PackageJson {
    Missing,
    Unreadable(io::Error),
    InvalidJson,
    Parsed(Value),
}

/// Reads and parses `path`. Only a regular file of at most
/// `bounded_read::LIMIT` bytes is read: a fifo or device here is no
/// package.json, and would keep loopx waiting (delegation reads the project
/// root's before anything else), so it is "unreadable", with a warning, as
/// §3.2 says for a package.json that cannot be read.
pub fn read(path: &Path) -> PackageJson {
    let bytes = match bounded_read::read(path, Accept::Regular) {
        Ok(b) => b,
        Err(Failure::NotFound) => return PackageJson::Missing,
        Err(Failure::Io(e)) => return PackageJson::Unreadable(e),
        Err(other) => return PackageJson::Unreadable(io::Error::other(other.to_string())),
    };
    let text = String::from_utf8_lossy(&bytes);
    // npm tolerates a UTF-8 byte order mark in package.json; so do we.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    match json::parse(text) {
        Some(v) => PackageJson::Parsed(v),
        None => PackageJson::InvalidJson,
    }
}

/// The value declared for dependency `name` in `field` (e.g.
/// "devDependencies"), when that field is an object that has it.
pub fn dependency<'a>(pkg: &'a Value, field: &str, name: &str) -> Option<&'a Value> {
    match pkg.get(field)? {
        deps @ Value::Object(_) => deps.get(name),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Value {
        json::parse(text).expect("valid JSON")
    }

    #[test]
    fn dependency_lookup_needs_an_object_field() {
        let pkg = parsed(r#"{"dependencies":{"loopx":"^1"},"devDependencies":["loopx"]}"#);
        assert!(matches!(
            dependency(&pkg, "dependencies", "loopx"),
            Some(Value::String(s)) if s == "^1"
        ));
        assert!(dependency(&pkg, "devDependencies", "loopx").is_none());
        assert!(dependency(&pkg, "optionalDependencies", "loopx").is_none());
    }
}
