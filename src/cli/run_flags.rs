//! The options of `loopx run` (§4.2 and DESIGN.md "Beyond the spec"): one
//! row each, which the shared option grammar (flags.rs) applies, and which
//! give run help and completions their option lists (commands.rs). `resume`
//! takes the same rows but `--resume`.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::cli::flags::{self, Flag, HelpAt};
use crate::duration;
use crate::run_options::RunOptions;

pub const FLAGS: &[Flag<RunOptions>] = &[
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

fn lossy(s: OsString) -> String {
    s.into_string()
        .unwrap_or_else(|s| s.to_string_lossy().into_owned())
}

/// `run`'s rows.
pub fn run_flags() -> Vec<&'static Flag<RunOptions>> {
    FLAGS.iter().collect()
}

/// `resume`'s rows: run's, but `--resume`, which it always does.
pub fn resume_flags() -> Vec<&'static Flag<RunOptions>> {
    FLAGS.iter().filter(|f| f.long != Some("resume")).collect()
}

/// Parses `loopx run`'s arguments. Errors are usage messages; the first
/// problem in argument order is the one reported.
pub fn parse(args: Vec<OsString>) -> Result<Parsed, String> {
    let mut options = RunOptions::default();
    let matches = match flags::parse("run", &run_flags(), HelpAt::Anywhere, args, &mut options)? {
        flags::Parsed::Help => return Ok(Parsed::Help),
        flags::Parsed::Args(m) => m,
    };
    let mut targets = matches.positionals;
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
/// ones (the same rows as `run`'s, so a value means the same to both).
#[derive(Debug, PartialEq)]
pub struct Given(Vec<(&'static Flag<RunOptions>, OsString)>);

impl Given {
    pub fn apply(&self, mut options: RunOptions) -> RunOptions {
        for (flag, value) in &self.0 {
            // Checked when parsed: the same value applies again.
            let _ = (flag.apply)(&mut options, value.clone());
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
    let mut scratch = RunOptions::default();
    let matches = match flags::parse(
        "resume",
        &resume_flags(),
        HelpAt::Anywhere,
        args,
        &mut scratch,
    )? {
        flags::Parsed::Help => return Ok(ParsedResume::Help),
        flags::Parsed::Args(m) => m,
    };
    let mut ids = matches.positionals;
    if ids.len() > 1 {
        return Err(format!(
            "expected at most one run id, got {}",
            ids.join(" ")
        ));
    }
    Ok(ParsedResume::Resume {
        id: ids.pop(),
        given: Given(matches.given),
    })
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
        let docs: Vec<_> = FLAGS.iter().map(Flag::doc).collect();
        let help = flags::help_lines(&docs);
        for doc in docs {
            assert!(help.contains(&doc.usage()), "{}", doc.usage());
        }
        assert!(help.contains("-h, --help"));
        assert!(help.lines().all(|l| l.len() <= 80), "{help}");
    }

    #[test]
    fn resume_takes_run_options_but_resume() {
        let parse = |args: &[&str]| parse_resume(args.iter().map(OsString::from).collect());
        let Ok(ParsedResume::Resume { id, given }) = parse(&["-n", "3", "abc"]) else {
            panic!("not a resume");
        };
        assert_eq!(id.as_deref(), Some("abc"));
        assert_eq!(given.apply(RunOptions::default()).max_iterations, Some(3));
        assert!(parse(&["--resume"]).unwrap_err().contains("'--resume'"));
        assert!(parse(&["a", "b"])
            .unwrap_err()
            .contains("at most one run id"));
        assert_eq!(parse(&["-n", "-h"]), Ok(ParsedResume::Help));
    }
}
