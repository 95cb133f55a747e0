//! The options of `loopx run` (§4.2 and DESIGN.md "Beyond the spec") as rows
//! of the shared option grammar (flags.rs): the rows are run_options.rs's
//! table, which also writes and reads them in the run log and checkpoints,
//! so this module only adapts them. They give run help and completions their
//! option lists (commands.rs). `resume` takes the same rows but `--resume`.

use std::ffi::OsString;

use crate::cli::flags::{self, Doc, HelpAt, Row};
use crate::run_options::{RunOpt, RunOptions, OPTIONS};

impl Row for RunOpt {
    type Into = RunOptions;

    fn doc(&self) -> Doc {
        Doc {
            short: self.short,
            long: self.long,
            value: self.value,
            help: self.help,
        }
    }

    fn apply(&self, into: &mut RunOptions, value: OsString) -> Result<(), String> {
        self.field.apply(into, value)
    }
}

impl std::fmt::Debug for RunOpt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.doc().name())
    }
}

/// Rows are `'static` table entries: the same row is the same option.
impl PartialEq for RunOpt {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

/// What `loopx run`'s arguments ask for (made once per process: its size
/// does not matter).
#[derive(Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Parsed {
    Help,
    Run(RunOptions),
}

/// `run`'s rows.
pub fn run_flags() -> Vec<&'static RunOpt> {
    OPTIONS.iter().collect()
}

/// `resume`'s rows: run's, but `--resume`, which it always does.
pub fn resume_flags() -> Vec<&'static RunOpt> {
    OPTIONS
        .iter()
        .filter(|f| f.long != Some("resume"))
        .collect()
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
pub struct Given(Vec<(&'static RunOpt, OsString)>);

impl Given {
    pub fn apply(&self, mut options: RunOptions) -> RunOptions {
        for (flag, value) in &self.0 {
            // Checked when parsed: the same value applies again.
            let _ = flag.apply(&mut options, value.clone());
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
    use std::path::PathBuf;
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
        let docs: Vec<_> = OPTIONS.iter().map(Row::doc).collect();
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
