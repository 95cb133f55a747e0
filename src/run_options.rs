//! What a run is asked to do: `loopx run`'s options and the JS API's
//! (api.rs), the same for both, in a type of their own so the engine never
//! reaches up into the command line's.
//!
//! One table, `OPTIONS`, drives everything an option is: its spelling and
//! help (cli/run_flags.rs adapts the rows to the option grammar, for `run`
//! and `resume`), how its value is checked, its member in the run log's
//! `run_start` and in the checkpoint that `loopx resume` restores. Adding an
//! option is one row here plus its field in `RunOptions`; the tests below
//! fail when a row does not survive a checkpoint.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::duration;
use crate::json::{self, Object, Value};

/// What a run is asked to do: `loopx run`'s options and the JS API's
/// (api.rs), the same for both. Every field but `target` has a row in
/// `OPTIONS`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    /// Unvalidated: target validation happens after discovery (§4.1).
    pub target: String,
    /// `-n` (§4.2).
    pub max_iterations: Option<u64>,
    /// `-e` (§8.2), relative to the project root.
    pub env_file: Option<PathBuf>,
    /// `--timeout`: the longest one script run may take.
    pub timeout: Option<Duration>,
    /// `--max-time`: no script run starts once this much time has passed.
    pub max_time: Option<Duration>,
    /// `--retry`: how many more times a failed script run is tried.
    pub retry: u64,
    /// `--retry-delay`: the wait before the first retry, doubled after.
    pub retry_delay: Duration,
    /// `--max-wait`: the longest single wait a script may ask for.
    pub max_wait: Duration,
    /// `--max-cost`: no script starts once the run has spent this much
    /// (US dollars, from the scripts' `cost_usd`).
    pub max_cost: Option<f64>,
    /// `run --resume`: resume this project's most recent resumable run of
    /// the target, if there is one.
    pub resume: bool,
    /// `--log`: the JSONL run record (report.rs); `LOOPX_LOG` otherwise.
    pub log: Option<PathBuf>,
    /// `--verbose`: one line per script run on stderr.
    pub verbose: bool,
    /// `--on-event`: a shell command run on each event worth telling
    /// (hooks.rs); `LOOPX_ON_EVENT` otherwise.
    pub on_event: Option<OsString>,
}

/// `--retry-delay`'s default.
pub const RETRY_DELAY: Duration = Duration::from_secs(10);

/// `--max-wait`'s default: a day.
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            target: String::new(),
            max_iterations: None,
            env_file: None,
            timeout: None,
            max_time: None,
            retry: 0,
            retry_delay: RETRY_DELAY,
            max_wait: MAX_WAIT,
            max_cost: None,
            resume: false,
            log: None,
            verbose: false,
            on_event: None,
        }
    }
}

/// One option of a run.
#[derive(Clone, Copy)]
pub struct RunOpt {
    pub short: Option<char>,
    pub long: Option<&'static str>,
    /// The value's placeholder in help (`<count>`); empty for a switch.
    pub value: &'static str,
    /// Help text, one line per element.
    pub help: &'static [&'static str],
    /// The field it sets, whose kind checks a value and writes it in JSON.
    pub field: Field,
    /// Its member in the JSON forms: the checkpoint's options, and the run
    /// log's `run_start` when `logged`. `None`: in neither.
    pub key: Option<&'static str>,
    /// Whether the run log's `run_start` records it too (run-log.md); its
    /// members are a fixed subset, in table order, that readers rely on.
    pub logged: bool,
    /// A value other than the default, as typed on the command line: what
    /// the round-trip test sets (tests below). Read by tests only, but a
    /// field of every row so that no new row can skip it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub sample: &'static str,
}

/// A field of `RunOptions`, read and written through two accessors.
pub struct Slot<T> {
    pub get: fn(&RunOptions) -> &T,
    pub get_mut: fn(&mut RunOptions) -> &mut T,
}

impl<T> Clone for Slot<T> {
    fn clone(&self) -> Self {
        *self
    }
}

/// Two fn pointers, whatever the field's type.
impl<T> Copy for Slot<T> {}

/// `slot!(retry)`: the accessors of `RunOptions::retry`.
macro_rules! slot {
    ($field:ident) => {
        Slot {
            get: |o| &o.$field,
            get_mut: |o| &mut o.$field,
        }
    };
}

/// What kind of value an option holds: how it is checked on the command
/// line and how it reads and writes as JSON.
#[derive(Clone, Copy)]
pub enum Field {
    /// A non-negative integer, or no limit (`-n`, §4.2).
    Limit(Slot<Option<u64>>),
    /// A non-negative integer (`--retry`).
    Count(Slot<u64>),
    /// A path, whose bytes reach the file system unchanged (§8.2).
    Path(Slot<Option<PathBuf>>),
    /// A duration longer than zero, or none; JSON in milliseconds.
    Bound(Slot<Option<Duration>>),
    /// A duration with a default, zero allowed; JSON in milliseconds.
    Wait(Slot<Duration>),
    /// US dollars, or none.
    Dollars(Slot<Option<f64>>),
    /// On when given.
    Switch(Slot<bool>),
    /// A shell command, or none; its bytes reach `/bin/sh` unchanged.
    Command(Slot<Option<OsString>>),
}

/// The options of `loopx run`, in help order (§4.2 for `-n` and `-e`; the
/// others are beyond the spec, DESIGN.md).
pub static OPTIONS: &[RunOpt] = &[
    RunOpt {
        short: Some('n'),
        long: None,
        value: "<count>",
        help: &[
            "Stop after <count> iterations (every script run",
            "counts; 0 checks the target and env files, then",
            "exits)",
        ],
        field: Field::Limit(slot!(max_iterations)),
        key: Some("max_iterations"),
        logged: true,
        sample: "7",
    },
    RunOpt {
        short: Some('e'),
        long: None,
        value: "<path>",
        help: &[
            "Also load variables from this env file",
            "(overrides global ones)",
        ],
        field: Field::Path(slot!(env_file)),
        // The path, never the values: the file is read again on resume.
        key: Some("env_file"),
        logged: true,
        sample: "conf/local.env",
    },
    RunOpt {
        short: None,
        long: Some("timeout"),
        value: "<duration>",
        help: &[
            "Longest one script run may take; then its process",
            "group gets SIGTERM, SIGKILL 5s later, and the run",
            "fails (exit 124)",
        ],
        field: Field::Bound(slot!(timeout)),
        key: Some("timeout_ms"),
        logged: true,
        sample: "1500ms",
    },
    RunOpt {
        short: None,
        long: Some("max-time"),
        value: "<duration>",
        help: &[
            "Budget for the whole run: no script starts after",
            "it (a running one may finish), then exit 0",
        ],
        field: Field::Bound(slot!(max_time)),
        key: Some("max_time_ms"),
        logged: true,
        sample: "1h",
    },
    RunOpt {
        short: None,
        long: Some("max-cost"),
        value: "<usd>",
        help: &[
            "Money budget: no script starts once the scripts'",
            "reported cost_usd adds up to <usd>, then exit 0",
        ],
        field: Field::Dollars(slot!(max_cost)),
        key: Some("max_cost"),
        logged: false,
        sample: "5.25",
    },
    RunOpt {
        short: None,
        long: Some("max-wait"),
        value: "<duration>",
        help: &[
            "Longest wait a script may ask for with retry_after",
            "(default 24h); a longer one ends the run (exit 75)",
        ],
        field: Field::Wait(slot!(max_wait)),
        key: Some("max_wait_ms"),
        logged: false,
        sample: "10m",
    },
    RunOpt {
        short: None,
        long: Some("retry"),
        value: "<count>",
        help: &[
            "Run a failed or timed-out script again, up to",
            "<count> more times, with the same input (retries",
            "are not iterations)",
        ],
        field: Field::Count(slot!(retry)),
        key: Some("retry"),
        logged: true,
        sample: "2",
    },
    RunOpt {
        short: None,
        long: Some("retry-delay"),
        value: "<duration>",
        help: &[
            "Wait before the first retry (default 10s),",
            "doubled for each further one, at most 30m",
        ],
        field: Field::Wait(slot!(retry_delay)),
        key: Some("retry_delay_ms"),
        logged: true,
        sample: "3s",
    },
    RunOpt {
        short: None,
        long: Some("log"),
        value: "<path>",
        help: &[
            "Append a JSON line per event of the run to this",
            "file of yours, or to stdout if it is '-' (also",
            "LOOPX_LOG; this option wins)",
        ],
        field: Field::Path(slot!(log)),
        key: Some("log"),
        logged: false,
        sample: "/var/log/loop.jsonl",
    },
    RunOpt {
        short: None,
        long: Some("resume"),
        value: "",
        help: &[
            "Resume this project's latest resumable run of the",
            "target if there is one, else start a new run",
        ],
        field: Field::Switch(slot!(resume)),
        // A resumed run is resumed already: `loopx resume` never takes it.
        key: None,
        logged: false,
        sample: "",
    },
    RunOpt {
        short: Some('v'),
        long: Some("verbose"),
        value: "",
        help: &[
            "One line per script run on stderr, and notes on",
            "outputs that are probably mistakes",
        ],
        field: Field::Switch(slot!(verbose)),
        key: Some("verbose"),
        logged: false,
        sample: "",
    },
    RunOpt {
        short: None,
        long: Some("on-event"),
        value: "<command>",
        help: &[
            "Run this shell command, an event as JSON on its",
            "stdin, when a script fails, a wait begins, a",
            "budget is reached or the run ends (also",
            "LOOPX_ON_EVENT; this option wins)",
        ],
        field: Field::Command(slot!(on_event)),
        // Saved for resume, never logged: a webhook URL may hold a token.
        key: Some("on_event"),
        logged: false,
        sample: "notify-send loopx",
    },
];

impl Field {
    /// Stores a command-line value; the error says why the value is bad.
    /// Raw, since a path need not be UTF-8; a switch gets an empty value.
    pub fn apply(&self, o: &mut RunOptions, v: OsString) -> Result<(), String> {
        match self {
            Field::Limit(s) => *(s.get_mut)(o) = Some(count(&lossy(v))?),
            Field::Count(s) => *(s.get_mut)(o) = count(&lossy(v))?,
            Field::Path(s) => *(s.get_mut)(o) = Some(PathBuf::from(v)),
            Field::Bound(s) => *(s.get_mut)(o) = Some(positive_duration(&lossy(v))?),
            Field::Wait(s) => *(s.get_mut)(o) = duration::parse(&lossy(v))?,
            Field::Dollars(s) => *(s.get_mut)(o) = Some(crate::wait::parse_dollars(&lossy(v))?),
            Field::Switch(s) => *(s.get_mut)(o) = true,
            Field::Command(s) => *(s.get_mut)(o) = Some(v),
        }
        Ok(())
    }

    /// Adds the field to `out` as member `key`; an unset one is `null`.
    fn write(&self, o: &RunOptions, key: &str, out: Object) -> Object {
        let ms = |d: &Duration| d.as_millis() as u64;
        match self {
            Field::Limit(s) => out.opt_num(key, *(s.get)(o)),
            Field::Count(s) => out.num(key, *(s.get)(o)),
            Field::Path(s) => {
                let path = (s.get)(o).as_ref().map(|p| p.to_string_lossy());
                out.opt_str(key, path.as_deref())
            }
            Field::Bound(s) => out.opt_num(key, (s.get)(o).as_ref().map(ms)),
            Field::Wait(s) => out.num(key, ms((s.get)(o))),
            Field::Dollars(s) => {
                let usd = (s.get)(o).map(json::number_json);
                out.raw(key, usd.as_deref().unwrap_or("null"))
            }
            Field::Switch(s) => out.bool(key, *(s.get)(o)),
            Field::Command(s) => {
                let command = (s.get)(o).as_ref().map(|c| c.to_string_lossy());
                out.opt_str(key, command.as_deref())
            }
        }
    }

    /// Sets the field from what `write` wrote; a value of the wrong type
    /// leaves it as it was (its default, on restore).
    fn read(&self, o: &mut RunOptions, v: &Value) {
        match (self, v) {
            (Field::Path(s), Value::String(p)) => *(s.get_mut)(o) = Some(PathBuf::from(p)),
            (Field::Switch(s), Value::Bool(b)) => *(s.get_mut)(o) = *b,
            (Field::Command(s), Value::String(c)) => *(s.get_mut)(o) = Some(c.into()),
            (_, Value::Number(n)) if n.is_finite() && *n >= 0.0 => self.read_number(o, *n),
            _ => {}
        }
    }

    /// Counts and milliseconds are whole: a fraction is dropped, as `as`
    /// does (they were written whole).
    fn read_number(&self, o: &mut RunOptions, n: f64) {
        let ms = Duration::from_millis(n as u64);
        match self {
            Field::Limit(s) => *(s.get_mut)(o) = Some(n as u64),
            Field::Count(s) => *(s.get_mut)(o) = n as u64,
            Field::Bound(s) => *(s.get_mut)(o) = Some(ms),
            Field::Wait(s) => *(s.get_mut)(o) = ms,
            // The same bound as `--max-cost` (wait.rs): a saved budget past
            // it is no budget loopx could have written.
            Field::Dollars(s) if n <= crate::wait::MAX_DOLLARS => *(s.get_mut)(o) = Some(n),
            Field::Dollars(_) | Field::Path(_) | Field::Switch(_) | Field::Command(_) => {}
        }
    }
}

/// A non-negative decimal integer (§4.2 for `-n`). Beyond u64 a limit can
/// never be reached: saturate rather than reject a valid integer.
fn count(v: &str) -> Result<u64, String> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a non-negative integer".to_string());
    }
    Ok(v.parse::<u64>().unwrap_or(u64::MAX))
}

fn positive_duration(v: &str) -> Result<Duration, String> {
    let d = duration::parse(v)?;
    if d.is_zero() {
        return Err("expected a duration longer than zero".to_string());
    }
    Ok(d)
}

fn lossy(s: OsString) -> String {
    s.into_string()
        .unwrap_or_else(|s| s.to_string_lossy().into_owned())
}

impl RunOptions {
    /// The options as the run log's `run_start` records them: the logged
    /// rows, in table order.
    pub fn to_json(&self) -> String {
        write(OPTIONS.iter().filter(|r| r.logged), self)
    }

    /// Everything `loopx resume` needs to run with these options again, for
    /// the checkpoint: every row with a key (an env file as its path, never
    /// its values).
    pub fn saved(&self) -> String {
        write(OPTIONS.iter(), self)
    }

    /// Options `saved` wrote, for `target`; a member that is missing or of
    /// the wrong type keeps its default.
    pub fn from_saved(target: &str, text: &str) -> RunOptions {
        restore(OPTIONS, target, text)
    }

    /// The defaults, for `target`.
    pub fn new(target: &str) -> RunOptions {
        RunOptions {
            target: target.to_string(),
            ..RunOptions::default()
        }
    }
}

/// `rows` with a key, as one JSON object.
fn write<'a>(rows: impl Iterator<Item = &'a RunOpt>, o: &RunOptions) -> String {
    rows.filter_map(|r| Some((r.key?, r)))
        .fold(Object::default(), |out, (key, r)| {
            r.field.write(o, key, out)
        })
        .finish()
}

/// The options in `text` that `rows` have keys for, over the defaults.
fn restore(rows: &[RunOpt], target: &str, text: &str) -> RunOptions {
    let mut o = RunOptions::new(target);
    let Some(v) = json::parse(text) else {
        return o;
    };
    for r in rows {
        if let Some(value) = r.key.and_then(|k| v.get(k)) {
            r.field.read(&mut o, value);
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How a message names the row.
    fn name(r: &RunOpt) -> String {
        match (r.short, r.long) {
            (_, Some(l)) => format!("--{l}"),
            (Some(c), None) => format!("-{c}"),
            (None, None) => String::new(),
        }
    }

    /// The defaults with `r` set to its sample, as the command line sets it.
    fn sampled(r: &RunOpt) -> RunOptions {
        let mut o = RunOptions::new("ralph");
        let set = r.field.apply(&mut o, OsString::from(r.sample));
        assert_eq!(set, Ok(()), "{}'s sample", name(r));
        o
    }

    /// The rows whose sample does not come back from a checkpoint written
    /// and read with `rows`.
    fn lost(rows: &[RunOpt]) -> Vec<String> {
        let back = |o: &RunOptions| restore(rows, "ralph", &write(rows.iter(), o));
        rows.iter()
            .filter(|r| back(&sampled(r)) != sampled(r))
            .map(name)
            .collect()
    }

    #[test]
    fn every_option_survives_a_checkpoint_but_resume() {
        for r in OPTIONS {
            assert_ne!(sampled(r), RunOptions::new("ralph"), "{}", name(r));
        }
        // --resume is what `loopx resume` does already: not saved.
        assert_eq!(lost(OPTIONS), ["--resume"]);
    }

    #[test]
    fn a_row_left_out_of_the_checkpoint_is_caught() {
        let without = |short| -> Vec<RunOpt> {
            let drop = |r: &RunOpt| r.short == Some(short);
            let rows = OPTIONS.iter().map(|r| RunOpt {
                key: r.key.filter(|_| !drop(r)),
                ..*r
            });
            rows.collect()
        };
        assert_eq!(lost(&without('n')), ["-n", "--resume"]);
        assert_eq!(lost(&without('v')), ["--resume", "--verbose"]);
    }

    /// Destructured whole, so a new field does not compile here until it is
    /// named, and fails until a row sets it.
    #[test]
    fn every_field_has_a_row() {
        let mut all = RunOptions::new("ralph");
        for r in OPTIONS {
            assert_eq!(r.field.apply(&mut all, OsString::from(r.sample)), Ok(()));
        }
        let d = RunOptions::new("ralph");
        let RunOptions {
            target: _,
            max_iterations,
            env_file,
            timeout,
            max_time,
            retry,
            retry_delay,
            max_wait,
            max_cost,
            resume,
            log,
            verbose,
            on_event,
        } = all.clone();
        assert_ne!(max_iterations, d.max_iterations);
        assert_ne!(env_file, d.env_file);
        assert_ne!(timeout, d.timeout);
        assert_ne!(max_time, d.max_time);
        assert_ne!(retry, d.retry);
        assert_ne!(retry_delay, d.retry_delay);
        assert_ne!(max_wait, d.max_wait);
        assert_ne!(max_cost, d.max_cost);
        assert_ne!(resume, d.resume);
        assert_ne!(log, d.log);
        assert_ne!(verbose, d.verbose);
        assert_ne!(on_event, d.on_event);
        let saved = RunOptions {
            resume: false,
            ..all
        };
        assert_eq!(RunOptions::from_saved("ralph", &saved.saved()), saved);
    }

    #[test]
    fn the_json_forms_keep_their_members() {
        let plain = RunOptions::new("w");
        assert_eq!(
            plain.to_json(),
            r#"{"max_iterations":null,"env_file":null,"timeout_ms":null,"max_time_ms":null,"retry":0,"retry_delay_ms":10000}"#
        );
        assert_eq!(
            plain.saved(),
            r#"{"max_iterations":null,"env_file":null,"timeout_ms":null,"max_time_ms":null,"max_cost":null,"max_wait_ms":86400000,"retry":0,"retry_delay_ms":10000,"log":null,"verbose":false,"on_event":null}"#
        );
        assert_eq!(RunOptions::from_saved("w", &plain.saved()), plain);
        assert_eq!(RunOptions::from_saved("w", "not json"), plain);
    }

    /// A checkpoint written before the table, members in their old order.
    #[test]
    fn an_older_checkpoint_reads_back() {
        let old = r#"{"max_iterations":7,"env_file":"conf/local.env","timeout_ms":1500,"max_time_ms":3600000,"retry":2,"retry_delay_ms":3000,"max_wait_ms":600000,"max_cost":5.25,"log":"/var/log/loop.jsonl","verbose":true}"#;
        let o = RunOptions {
            target: "ralph".into(),
            max_iterations: Some(7),
            env_file: Some(PathBuf::from("conf/local.env")),
            timeout: Some(Duration::from_millis(1500)),
            max_time: Some(Duration::from_secs(3600)),
            retry: 2,
            retry_delay: Duration::from_secs(3),
            max_wait: Duration::from_secs(600),
            max_cost: Some(5.25),
            resume: false,
            log: Some(PathBuf::from("/var/log/loop.jsonl")),
            verbose: true,
            on_event: None,
        };
        assert_eq!(RunOptions::from_saved("ralph", old), o);
    }
}
