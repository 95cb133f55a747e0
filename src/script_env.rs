//! The environment scripts run with (§8.3): the inherited one, under the env
//! files, under loopx's own variables (§3.4), plus what a runtime needs
//! (runtime.rs).
//!
//! Prepared once per run as ready-made `NAME=value` C strings and handed to
//! each spawn as an `envp` array (proc/process.rs). loopx's own environment is
//! never rewritten. Per spawn only the few variables that change
//! (`LOOPX_WORKFLOW`, `LOOPX_ITERATION`, `LOOPX_ATTEMPT`, a runtime's) are
//! formatted, and the pointer array is rebuilt: a few dozen pointer copies.
//! Handing `std::process::Command` the variables instead would copy, sort
//! and re-encode the whole environment on every spawn: with 35 inherited
//! variables that was ~80% of the instructions loopx itself spent per
//! iteration (callgrind, `run -n 200` of an empty script).

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::os::raw::c_char;
use std::os::unix::ffi::OsStrExt;

/// Variables set per spawn: never taken from the layers below (§8.3: loopx's
/// own variables win over everything).
const PER_SPAWN: [&str; 3] = ["LOOPX_WORKFLOW", "LOOPX_ITERATION", "LOOPX_ATTEMPT"];

pub struct ScriptEnv {
    /// Everything fixed for the run, one `NAME=value` each, names unique.
    base: Vec<CString>,
    /// Per-spawn entries, rebuilt by `envp`.
    extra: Vec<CString>,
    /// `envp` as execve wants it: pointers into `base` and `extra`, then null.
    pointers: Vec<*const c_char>,
}

/// One `NAME=value`; None when either holds a NUL byte (not representable in
/// an environment; env-file values cannot hold one, inherited ones cannot).
fn entry(name: &OsStr, value: &OsStr) -> Option<CString> {
    let mut bytes = Vec::with_capacity(name.len() + value.len() + 1);
    bytes.extend_from_slice(name.as_bytes());
    bytes.push(b'=');
    bytes.extend_from_slice(value.as_bytes());
    CString::new(bytes).ok()
}

fn name_of(entry: &CString) -> &[u8] {
    let bytes = entry.as_bytes();
    let end = bytes.iter().position(|&b| b == b'=').unwrap_or(bytes.len());
    &bytes[..end]
}

/// One layer of variables, lowest precedence first.
pub type Vars = [(OsString, OsString)];

impl ScriptEnv {
    /// `inherited`, then each of `layers` over it (§8.3 order: env files,
    /// then loopx's own variables). A later value of a name replaces the
    /// earlier one where it stood: the first occurrence fixes the order.
    /// The index of names keeps this linear: a linear search per variable
    /// made 40k variables from `-e` take 10 s.
    pub fn new(
        inherited: impl Iterator<Item = (OsString, OsString)>,
        layers: &[&Vars],
    ) -> ScriptEnv {
        let mut base: Vec<CString> = Vec::new();
        let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut set = |name: &OsStr, value: &OsStr| {
            if PER_SPAWN.iter().any(|p| name.as_bytes() == p.as_bytes()) {
                return;
            }
            let Some(e) = entry(name, value) else { return };
            match index.get(name.as_bytes()) {
                Some(&i) => base[i] = e,
                None => {
                    index.insert(name.as_bytes().to_vec(), base.len());
                    base.push(e);
                }
            }
        };
        for (name, value) in inherited {
            set(&name, &value);
        }
        for layer in layers {
            for (name, value) in layer.iter() {
                set(name, value);
            }
        }
        ScriptEnv {
            base,
            extra: Vec::new(),
            pointers: Vec::new(),
        }
    }

    /// The environment for one spawn: the run's, with `extra` over it (the
    /// per-spawn variables and a runtime's). Valid until the next call.
    pub fn envp(&mut self, extra: &[(&OsStr, &OsStr)]) -> &[*const c_char] {
        self.extra.clear();
        self.extra
            .extend(extra.iter().filter_map(|(n, v)| entry(n, v)));
        self.pointers.clear();
        let overridden = |b: &CString| extra.iter().any(|(n, _)| n.as_bytes() == name_of(b));
        for b in &self.base {
            if !overridden(b) {
                self.pointers.push(b.as_ptr());
            }
        }
        self.pointers.extend(self.extra.iter().map(|e| e.as_ptr()));
        self.pointers.push(std::ptr::null());
        &self.pointers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(n, v)| (n.into(), v.into())).collect()
    }

    /// The entries `envp` points at, read back from the strings it points
    /// into (matched by address, so the test needs no pointer reads).
    fn strings(env: &mut ScriptEnv, extra: &[(&OsStr, &OsStr)]) -> Vec<String> {
        let envp = env.envp(extra).to_vec();
        let (last, entries) = envp.split_last().expect("terminated");
        assert!(last.is_null());
        entries
            .iter()
            .map(|&p| {
                let owned = env.base.iter().chain(&env.extra).find(|c| c.as_ptr() == p);
                owned
                    .expect("points into ScriptEnv")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    }

    #[test]
    fn later_layers_win_and_names_stay_unique() {
        let inherited = os(&[
            ("PATH", "/bin"),
            ("KEY", "inherited"),
            ("LOOPX_BIN", "user"),
        ]);
        let files = os(&[("KEY", "file"), ("NEW", "x")]);
        let own = os(&[("LOOPX_BIN", "/usr/bin/loopx")]);
        let mut env = ScriptEnv::new(inherited.into_iter(), &[&files, &own]);
        assert_eq!(
            strings(&mut env, &[]),
            ["PATH=/bin", "KEY=file", "LOOPX_BIN=/usr/bin/loopx", "NEW=x"]
        );
    }

    #[test]
    fn a_name_keeps_its_first_place_and_its_last_value_across_layers() {
        // Duplicates within a layer (the env files are folded before, but
        // the inherited environment may repeat a name) and across layers.
        let inherited = os(&[("A", "1"), ("B", "1"), ("A", "2"), ("C", "1")]);
        let files = os(&[
            ("C", "files"),
            ("D", "files"),
            ("B", "files"),
            ("D", "last"),
        ]);
        let own = os(&[("A", "own"), ("E", "own")]);
        let mut env = ScriptEnv::new(inherited.into_iter(), &[&files, &own]);
        assert_eq!(
            strings(&mut env, &[]),
            ["A=own", "B=files", "C=files", "D=last", "E=own"]
        );
    }

    #[test]
    fn building_is_linear_in_the_number_of_variables() {
        // The answer for n variables of which half repeat an earlier name,
        // against a reference model: a map for values, first-seen order.
        fn model(vars: &[(OsString, OsString)]) -> Vec<String> {
            let mut order: Vec<&OsString> = Vec::new();
            let mut values: HashMap<&OsString, &OsString> = HashMap::new();
            for (k, v) in vars {
                if values.insert(k, v).is_none() {
                    order.push(k);
                }
            }
            order
                .iter()
                .map(|k| format!("{}={}", k.to_string_lossy(), values[k].to_string_lossy()))
                .collect()
        }
        let n = 40_000;
        let vars: Vec<(OsString, OsString)> = (0..n)
            .map(|i| {
                let name = format!("V{}", if i % 2 == 0 { i } else { i / 3 });
                (name.into(), format!("{i}").into())
            })
            .collect();
        let mut env = ScriptEnv::new(std::iter::empty(), &[&vars]);
        assert_eq!(strings(&mut env, &[]), model(&vars));
    }

    #[test]
    fn per_spawn_variables_override_and_never_leak_from_below() {
        let inherited = os(&[("LOOPX_WORKFLOW", "stale"), ("TSX_TSCONFIG_PATH", "mine")]);
        let mut env = ScriptEnv::new(inherited.into_iter(), &[]);
        let w = OsStr::new("LOOPX_WORKFLOW");
        let t = OsStr::new("TSX_TSCONFIG_PATH");
        assert_eq!(
            strings(&mut env, &[(w, OsStr::new("ralph")), (t, OsStr::new("/x"))]),
            ["LOOPX_WORKFLOW=ralph", "TSX_TSCONFIG_PATH=/x"]
        );
        // A runtime variable of one spawn is gone at the next.
        assert_eq!(
            strings(&mut env, &[(w, OsStr::new("other"))]),
            ["TSX_TSCONFIG_PATH=mine", "LOOPX_WORKFLOW=other"]
        );
    }
}
