//! Which program runs a script (§6.2, §6.3).

use std::ffi::OsString;
use std::path::PathBuf;

use crate::discovery::{Kind, Script};
use crate::error::Error;

/// A program and its arguments for one script.
pub struct Program {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

/// §6.2: bash scripts run as `/bin/bash <script>`, never through a shell
/// string and regardless of the file's executable bit or shebang.
pub fn program_for(script: &Script, label: &str) -> Result<Program, Error> {
    match script.kind {
        Kind::Bash => Ok(Program {
            program: PathBuf::from("/bin/bash"),
            args: vec![script.path.clone().into_os_string()],
        }),
        Kind::Js => Err(Error::JsNotSupported {
            script: label.to_string(),
        }),
    }
}
