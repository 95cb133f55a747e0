//! The options of `loopx run` (§4.2 and DESIGN.md "Beyond the spec"): one
//! table drives parsing, duplicate detection, the `-h` short-circuit and the
//! help text, so an option is one row.

use std::ffi::OsString;
use std::path::PathBuf;

use lexopt::prelude::*;

use crate::duration;
use crate::run_options::RunOptions;

/// One option of `loopx run`.
pub struct Flag {
    pub short: Option<char>,
    pub long: Option<&'static str>,
    /// The value's placeholder in help; empty for a switch (`-v`).
    pub value: &'static str,
    /// Help text, one line per element.
    pub help: &'static [&'static str],
    /// Stores a value; the error says why the value is bad. Raw, since a
    /// path (`-e`) need not be UTF-8.
    apply: fn(&mut RunOptions, OsString) -> Result<(), String>,
}

impl Flag {
    /// `-n`, `--timeout`: how messages name the option.
    pub fn name(&self) -> String {
        match (self.short, self.long) {
            (Some(c), _) => format!("-{c}"),
            (None, Some(l)) => format!("--{l}"),
            (None, None) => String::new(),
        }
    }

    /// `-v, --verbose`, `--timeout <duration>`: how help shows the option.
    fn usage(&self) -> String {
        let names = match (self.short, self.long) {
            (Some(c), Some(l)) => format!("-{c}, --{l}"),
            _ => self.name(),
        };
        if self.value.is_empty() {
            names
        } else {
            format!("{names} {}", self.value)
        }
    }

    fn matches(&self, arg: &lexopt::Arg) -> bool {
        match arg {
            Short(c) => self.short == Some(*c),
            Long(l) => self.long == Some(*l),
            Value(_) => false,
        }
    }
}

pub const FLAGS: &[Flag] = &[
    Flag {
        short: Some('n'),
        long: None,
        value: "<count>",
        help: &[
            "Stop after <count> iterations (every script run",
            "counts; 0 checks the target and env files, then",
            "exits)",
        ],
        apply: |o, v| {
            o.max_iterations = Some(count(&lossy(v))?);
            Ok(())
        },
    },
    Flag {
        short: Some('e'),
        long: None,
        value: "<path>",
        help: &[
            "Also load variables from this env file",
            "(overrides global ones)",
        ],
        apply: |o, v| {
            // §8.2: a path, whose bytes reach the file system unchanged.
            o.env_file = Some(PathBuf::from(v));
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("timeout"),
        value: "<duration>",
        help: &[
            "Longest one script run may take; then its process",
            "group gets SIGTERM, SIGKILL 5s later, and the run",
            "fails (exit 124)",
        ],
        apply: |o, v| {
            o.timeout = Some(positive_duration(&lossy(v))?);
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("max-time"),
        value: "<duration>",
        help: &[
            "Budget for the whole run: no script starts after",
            "it (a running one may finish), then exit 0",
        ],
        apply: |o, v| {
            o.max_time = Some(positive_duration(&lossy(v))?);
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("max-cost"),
        value: "<usd>",
        help: &[
            "Money budget: no script starts once the scripts'",
            "reported cost_usd adds up to <usd>, then exit 0",
        ],
        apply: |o, v| {
            o.max_cost = Some(crate::wait::parse_dollars(&lossy(v))?);
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("max-wait"),
        value: "<duration>",
        help: &[
            "Longest wait a script may ask for with retry_after",
            "(default 24h); a longer one ends the run (exit 75)",
        ],
        apply: |o, v| {
            o.max_wait = duration::parse(&lossy(v))?;
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("retry"),
        value: "<count>",
        help: &[
            "Run a failed or timed-out script again, up to",
            "<count> more times, with the same input (retries",
            "are not iterations)",
        ],
        apply: |o, v| {
            o.retry = count(&lossy(v))?;
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("retry-delay"),
        value: "<duration>",
        help: &[
            "Wait before the first retry (default 10s),",
            "doubled for each further one, at most 30m",
        ],
        apply: |o, v| {
            o.retry_delay = duration::parse(&lossy(v))?;
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("log"),
        value: "<path>",
        help: &[
            "Append a JSON line per event of the run to this",
            "file of yours, or to stdout if it is '-' (also",
            "LOOPX_LOG; this option wins)",
        ],
        apply: |o, v| {
            o.log = Some(PathBuf::from(v));
            Ok(())
        },
    },
    Flag {
        short: None,
        long: Some("resume"),
        value: "",
        help: &[
            "Resume this project's latest resumable run of the",
            "target if there is one, else start a new run",
        ],
        apply: |o, _| {
            o.resume = true;
            Ok(())
        },
    },
    Flag {
        short: Some('v'),
        long: Some("verbose"),
        value: "",
        help: &[
            "One line per script run on stderr, and notes on",
            "outputs that are probably mistakes",
        ],
        apply: |o, _| {
            o.verbose = true;
            Ok(())
        },
    },
];

/// A non-negative decimal integer (§4.2 for `-n`). Beyond u64 a limit can
/// never be reached: saturate rather than reject a valid integer.
fn count(v: &str) -> Result<u64, String> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a non-negative integer".to_string());
    }
    Ok(v.parse::<u64>().unwrap_or(u64::MAX))
}

fn positive_duration(v: &str) -> Result<std::time::Duration, String> {
    let d = duration::parse(v)?;
    if d.is_zero() {
        return Err("expected a duration longer than zero".to_string());
    }
    Ok(d)
}

/// What `loopx run`'s arguments ask for.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    Help,
    Run(RunOptions),
}

/// §4.2: a `-h`/`--help` token anywhere means help, "ignoring all other
/// arguments unconditionally", even where it stands as an option's value
/// (`run -n -h`). After `--` every token is a positional (the API passes its
/// target that way).
pub fn help_requested(args: &[OsString]) -> bool {
    args.iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "-h" || a == "--help")
}

fn lossy(s: OsString) -> String {
    s.into_string()
        .unwrap_or_else(|s| s.to_string_lossy().into_owned())
}

/// Parses `loopx run`'s arguments. Errors are usage messages; the first
/// problem in argument order is the one reported.
pub fn parse(args: Vec<OsString>) -> Result<Parsed, String> {
    if help_requested(&args) {
        return Ok(Parsed::Help);
    }
    let mut p = lexopt::Parser::from_args(args);
    let mut options = RunOptions::default();
    let mut seen = [false; FLAGS.len()];
    let mut targets: Vec<String> = Vec::new();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Value(v) = arg {
            targets.push(lossy(v));
            continue;
        }
        let Some(index) = FLAGS.iter().position(|f| f.matches(&arg)) else {
            let shown = match arg {
                Short(c) => format!("-{c}"),
                Long(l) => format!("--{l}"),
                Value(_) => unreachable!("values are handled above"),
            };
            return Err(format!("unknown option '{shown}' for 'loopx run'"));
        };
        let flag = &FLAGS[index];
        let name = flag.name();
        let value = if flag.value.is_empty() {
            OsString::new()
        } else {
            p.value()
                .map_err(|_| format!("option '{name}' needs a value"))?
        };
        if std::mem::replace(&mut seen[index], true) {
            return Err(format!("option '{name}' given more than once"));
        }
        let shown = value.to_string_lossy().into_owned();
        (flag.apply)(&mut options, value)
            .map_err(|why| format!("invalid value '{shown}' for {name}: {why}"))?;
    }
    options.target = match targets.len() {
        0 => return Err("missing target: loopx run <workflow>[:<script>]".to_string()),
        1 => targets.remove(0),
        n => {
            return Err(format!(
                "expected one target, got {n}: {}",
                targets.join(" ")
            ))
        }
    };
    Ok(Parsed::Run(options))
}

/// The options given to `loopx resume`, checked, to apply over the saved
/// ones (the same table as `run`'s, so a value means the same to both).
#[derive(Debug, PartialEq)]
pub struct Given(Vec<(usize, OsString)>);

impl Given {
    pub fn apply(&self, mut options: RunOptions) -> RunOptions {
        for (index, value) in &self.0 {
            // Checked when parsed: the same value applies again.
            let _ = (FLAGS[*index].apply)(&mut options, value.clone());
        }
        options
    }
}

/// What `loopx resume`'s arguments ask for.
#[derive(Debug, PartialEq)]
pub enum ParsedResume {
    Help,
    Resume { id: Option<String>, given: Given },
}

/// Parses `loopx resume [<run-id>] [options]`: `run`'s options but
/// `--resume`, and at most one run id.
pub fn parse_resume(args: Vec<OsString>) -> Result<ParsedResume, String> {
    if help_requested(&args) {
        return Ok(ParsedResume::Help);
    }
    let mut p = lexopt::Parser::from_args(args);
    let mut scratch = RunOptions::default();
    let mut seen = [false; FLAGS.len()];
    let mut given = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Value(v) = arg {
            ids.push(lossy(v));
            continue;
        }
        let index = FLAGS
            .iter()
            .position(|f| f.matches(&arg) && f.long != Some("resume"))
            .ok_or_else(|| format!("unknown option '{}' for 'loopx resume'", shown_arg(&arg)))?;
        let flag = &FLAGS[index];
        let name = flag.name();
        let value = if flag.value.is_empty() {
            OsString::new()
        } else {
            p.value()
                .map_err(|_| format!("option '{name}' needs a value"))?
        };
        if std::mem::replace(&mut seen[index], true) {
            return Err(format!("option '{name}' given more than once"));
        }
        let shown = value.to_string_lossy().into_owned();
        (flag.apply)(&mut scratch, value.clone())
            .map_err(|why| format!("invalid value '{shown}' for {name}: {why}"))?;
        given.push((index, value));
    }
    if ids.len() > 1 {
        return Err(format!(
            "expected at most one run id, got {}",
            ids.join(" ")
        ));
    }
    Ok(ParsedResume::Resume {
        id: ids.pop(),
        given: Given(given),
    })
}

fn shown_arg(arg: &lexopt::Arg) -> String {
    match arg {
        Short(c) => format!("-{c}"),
        Long(l) => format!("--{l}"),
        Value(v) => v.to_string_lossy().into_owned(),
    }
}

/// The "Options:" lines of run help, from the table.
pub fn help_lines() -> String {
    let mut rows: Vec<(String, &[&str])> = FLAGS.iter().map(|f| (f.usage(), f.help)).collect();
    rows.push(("-h, --help".to_string(), &["Show this help"]));
    let width = rows.iter().map(|(left, _)| left.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (left, help) in rows {
        for (i, line) in help.iter().enumerate() {
            let left = if i == 0 { left.as_str() } else { "" };
            out.push_str(&format!("  {left:<width$}  {line}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parse_strs(args: &[&str]) -> Result<Parsed, String> {
        parse(args.iter().map(OsString::from).collect())
    }

    fn options(args: &[&str]) -> RunOptions {
        match parse_strs(args) {
            Ok(Parsed::Run(o)) => o,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn error(args: &[&str]) -> String {
        match parse_strs(args) {
            Err(e) => e,
            other => panic!("{args:?}: expected an error, got {other:?}"),
        }
    }

    #[test]
    fn new_options_take_durations_and_counts() {
        let o = options(&[
            "--timeout",
            "15m",
            "--max-time=2h",
            "--retry",
            "3",
            "--retry-delay",
            "500ms",
            "ralph",
        ]);
        assert_eq!(o.timeout, Some(Duration::from_secs(900)));
        assert_eq!(o.max_time, Some(Duration::from_secs(7200)));
        assert_eq!(o.retry, 3);
        assert_eq!(o.retry_delay, Duration::from_millis(500));
        assert_eq!(o.target, "ralph");
        let plain = options(&["ralph"]);
        assert_eq!(plain, RunOptions::new("ralph"));
        assert_eq!(plain.retry_delay, Duration::from_secs(10));
    }

    #[test]
    fn log_takes_a_path_and_verbose_is_a_switch() {
        let o = options(&["-v", "--log", "run.jsonl", "ralph"]);
        assert!(o.verbose);
        assert_eq!(o.log, Some(PathBuf::from("run.jsonl")));
        assert!(options(&["--verbose", "ralph"]).verbose);
        assert!(error(&["-v", "--verbose", "x"]).contains("more than once"));
        assert!(error(&["--verbose=yes", "x"]).contains("--verbose"));
        assert!(error(&["x", "--log"]).contains("needs a value"));
    }

    #[test]
    fn each_option_follows_the_grammar_of_n() {
        for flag in ["--timeout", "--max-time", "--retry", "--retry-delay"] {
            let value = if flag == "--retry" { "2" } else { "5s" };
            assert!(error(&[flag, value, flag, value, "x"]).contains("more than once"));
            assert!(error(&["x", flag]).contains("needs a value"));
            assert!(error(&[flag, "bogus", "x"]).contains(&format!("for {flag}")));
            assert_eq!(parse_strs(&[flag, "bogus", "-h"]), Ok(Parsed::Help));
        }
        assert!(error(&["--timeout", "0", "x"]).contains("longer than zero"));
        assert!(error(&["--max-time", "0s", "x"]).contains("longer than zero"));
        assert_eq!(
            options(&["--retry-delay", "0", "x"]).retry_delay,
            Duration::ZERO
        );
        assert!(error(&["--retry", "-1", "x"]).contains("non-negative integer"));
    }

    #[test]
    fn help_lists_every_option_of_the_table() {
        let help = help_lines();
        for flag in FLAGS {
            assert!(help.contains(&flag.usage()), "{}", flag.usage());
        }
        assert!(help.contains("-h, --help"));
        assert!(help.lines().all(|l| l.len() <= 80), "{help}");
    }
}
