//! The option grammar every subcommand shares (§4.2, DESIGN.md "Beyond the
//! spec"): an option is one `Flag` row, and one parser applies the rows, so
//! duplicates, missing values, bad values, unknown options and `-h` read the
//! same for every command. The rows also give help lines and completions
//! (commands.rs, help.rs, completions.rs) through their `Doc`.

use std::ffi::OsString;

use lexopt::prelude::*;

/// One option: its names, its value and help (the `Doc`), and how a value is
/// stored into the command's arguments `T`.
pub struct Flag<T> {
    pub short: Option<char>,
    pub long: Option<&'static str>,
    /// The value's placeholder in help (`<count>`); empty for a switch.
    /// `<path>` also makes completions offer file names.
    pub value: &'static str,
    /// Help text, one line per element.
    pub help: &'static [&'static str],
    /// Stores a value; the error says why the value is bad. Raw, since a
    /// path (`-e`) need not be UTF-8. A switch gets an empty value.
    pub apply: fn(&mut T, OsString) -> Result<(), String>,
}

/// What `parse` needs of an option row: its `Doc` and how a value is
/// stored. `Flag` is one; run's rows (run_flags.rs) are run_options.rs's
/// table, which cannot name this module, so they implement it there.
pub trait Row {
    /// What the value is stored into: the command's arguments.
    type Into;
    fn doc(&self) -> Doc;
    /// Stores a value; the error says why the value is bad. Raw, since a
    /// path (`-e`) need not be UTF-8. A switch gets an empty value.
    fn apply(&self, into: &mut Self::Into, value: OsString) -> Result<(), String>;
}

impl<T> Row for Flag<T> {
    type Into = T;

    fn doc(&self) -> Doc {
        Doc {
            short: self.short,
            long: self.long,
            value: self.value,
            help: self.help,
        }
    }

    fn apply(&self, into: &mut T, value: OsString) -> Result<(), String> {
        (self.apply)(into, value)
    }
}

impl<T> std::fmt::Debug for Flag<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.doc().name())
    }
}

/// Rows are `'static` table entries: the same row is the same option.
impl<T> PartialEq for Flag<T> {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

/// What help and completions know of an option, whatever it stores into.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Doc {
    pub short: Option<char>,
    pub long: Option<&'static str>,
    pub value: &'static str,
    pub help: &'static [&'static str],
}

/// `-h, --help`, which every command has (commands.rs says what it means).
pub const HELP: Doc = Doc {
    short: Some('h'),
    long: Some("help"),
    value: "",
    help: &["Show this help"],
};

impl Doc {
    fn matches(&self, arg: &lexopt::Arg) -> bool {
        match arg {
            Short(c) => self.short == Some(*c),
            Long(l) => self.long == Some(*l),
            Value(_) => false,
        }
    }

    /// `-n`, `--timeout`, `-w/--workflow`: how messages name the option.
    pub fn name(&self) -> String {
        match (self.short, self.long) {
            (Some(c), Some(l)) => format!("-{c}/--{l}"),
            (Some(c), None) => format!("-{c}"),
            (None, Some(l)) => format!("--{l}"),
            (None, None) => String::new(),
        }
    }

    /// `-w/--workflow <name>`: how a message lists the option.
    pub fn spec(&self) -> String {
        if self.value.is_empty() {
            self.name()
        } else {
            format!("{} {}", self.name(), self.value)
        }
    }

    /// `-v, --verbose`, `--timeout <duration>`: how help shows the option.
    pub fn usage(&self) -> String {
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

    pub fn takes_value(&self) -> bool {
        !self.value.is_empty()
    }

    /// Whether completions offer file names for the value.
    pub fn value_is_path(&self) -> bool {
        self.value == "<path>"
    }

    /// The help as one short phrase, for completion menus: the text up to
    /// its first aside ("; ", " (").
    pub fn summary(&self) -> String {
        let text = self.help.join(" ");
        let end = [text.find("; "), text.find(" (")]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(text.len());
        text[..end].trim_end_matches(['.', ',', ':']).to_string()
    }

    /// Every spelling a shell may complete: `-n`, `--timeout`.
    pub fn spellings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(c) = self.short {
            out.push(format!("-{c}"));
        }
        if let Some(l) = self.long {
            out.push(format!("--{l}"));
        }
        out
    }
}

/// The "Options:" lines of a command's help, `-h, --help` last, the help
/// texts in one column.
pub fn help_lines(docs: &[Doc]) -> String {
    let rows: Vec<(String, &[&str])> = docs
        .iter()
        .chain([&HELP])
        .map(|d| (d.usage(), d.help))
        .collect();
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

/// Where `-h`/`--help` means help.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HelpAt {
    /// §4.2's short-circuit for `run` and `install` (and `resume`, which
    /// takes run's options): anywhere, even as an option's value, and
    /// whatever else is wrong (`run -n -h` is help).
    Anywhere,
    /// Only where an option may stand: an option's value is a value
    /// (`output --result -h` prints `-h`).
    OptionPosition,
}

/// §4.2: a `-h`/`--help` token anywhere means help, "ignoring all other
/// arguments unconditionally", even where it stands as an option's value
/// (`run -n -h`). After `--` every token is a positional (the API passes its
/// target that way).
pub fn help_anywhere(args: &[OsString]) -> bool {
    args.iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "-h" || a == "--help")
}

/// The arguments of a command, parsed by its rows `R`.
#[derive(Debug, PartialEq)]
pub enum Parsed<'a, R> {
    Help,
    Args(Matches<'a, R>),
}

/// The options given, in order, each with its raw value (already applied),
/// and the positionals.
#[derive(Debug, PartialEq)]
pub struct Matches<'a, R> {
    pub given: Vec<(&'a R, OsString)>,
    pub positionals: Vec<String>,
}

fn lossy(s: OsString) -> String {
    s.into_string()
        .unwrap_or_else(|s| s.to_string_lossy().into_owned())
}

/// Parses `args` of `loopx <command>` by `flags`, storing values into
/// `into`. Options and positionals may come in any order (§4.2). A problem
/// is a usage message; the first one in argument order is reported, unless
/// help is asked for (`help`), which wins over every problem. A command
/// with only a few options lists them when an unknown one is given.
pub fn parse<'a, R: Row>(
    command: &str,
    flags: &[&'a R],
    help: HelpAt,
    args: Vec<OsString>,
    into: &mut R::Into,
) -> Result<Parsed<'a, R>, String> {
    if help == HelpAt::Anywhere && help_anywhere(&args) {
        return Ok(Parsed::Help);
    }
    let mut p = lexopt::Parser::from_args(args);
    let mut first_error: Option<String> = None;
    let mut asked_help = false;
    let mut matches = Matches {
        given: Vec::new(),
        positionals: Vec::new(),
    };
    loop {
        let arg = match p.next() {
            Ok(Some(arg)) => arg,
            Ok(None) => break,
            Err(err) => {
                first_error.get_or_insert(err.to_string());
                continue;
            }
        };
        if let Value(v) = arg {
            matches.positionals.push(lossy(v));
            continue;
        }
        if matches!(arg, Short('h') | Long("help")) {
            asked_help = true;
            continue;
        }
        let Some(flag) = flags.iter().copied().find(|f| f.doc().matches(&arg)) else {
            let shown = match arg {
                Short(c) => format!("-{c}"),
                Long(l) => format!("--{l}"),
                Value(_) => unreachable!("values are handled above"),
            };
            // `--bogus=x`: the value goes with the unknown option.
            let _ = p.optional_value();
            first_error.get_or_insert_with(|| unknown_option(command, &shown, flags));
            continue;
        };
        let name = flag.doc().name();
        let value = if !flag.doc().takes_value() {
            OsString::new()
        } else {
            match p.value() {
                Ok(v) => v,
                Err(_) => {
                    first_error.get_or_insert(format!("option '{name}' needs a value"));
                    continue;
                }
            }
        };
        // Rows are `'static` table entries: the same row is the same option.
        if matches.given.iter().any(|(g, _)| std::ptr::eq(*g, flag)) {
            first_error.get_or_insert(format!("option '{name}' given more than once"));
            continue;
        }
        let shown = value.to_string_lossy().into_owned();
        match flag.apply(into, value.clone()) {
            Ok(()) => matches.given.push((flag, value)),
            Err(why) => {
                first_error.get_or_insert(format!("invalid value '{shown}' for {name}: {why}"));
            }
        }
    }
    if asked_help {
        return Ok(Parsed::Help);
    }
    match first_error {
        Some(message) => Err(message),
        None => Ok(Parsed::Args(matches)),
    }
}

/// A short option list is worth naming; a long one is in the help.
fn unknown_option<R: Row>(command: &str, shown: &str, flags: &[&R]) -> String {
    let mut message = format!("unknown option '{shown}' for 'loopx {command}'");
    if (1..=5).contains(&flags.len()) {
        let list: Vec<String> = flags.iter().map(|f| f.doc().spec()).collect();
        message.push_str(&format!(" (it takes only {})", list.join(", ")));
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq)]
    struct Args {
        count: Option<String>,
        yes: bool,
    }

    const FLAGS: &[Flag<Args>] = &[
        Flag {
            short: Some('c'),
            long: Some("count"),
            value: "<n>",
            help: &["How many"],
            apply: |a, v| {
                let v = lossy(v);
                if v == "bad" {
                    return Err("not a count".into());
                }
                a.count = Some(v);
                Ok(())
            },
        },
        Flag {
            short: Some('y'),
            long: None,
            value: "",
            help: &["Yes"],
            apply: |a, _| {
                a.yes = true;
                Ok(())
            },
        },
    ];

    fn run(help: HelpAt, args: &[&str]) -> (Result<Vec<String>, String>, Args) {
        let flags: Vec<&Flag<Args>> = FLAGS.iter().collect();
        let mut into = Args::default();
        let args = args.iter().map(OsString::from).collect();
        let out = match parse("demo", &flags, help, args, &mut into) {
            Ok(Parsed::Help) => Ok(vec!["HELP".to_string()]),
            Ok(Parsed::Args(m)) => Ok(m.positionals),
            Err(e) => Err(e),
        };
        (out, into)
    }

    fn error(help: HelpAt, args: &[&str]) -> String {
        run(help, args).0.expect_err("an error")
    }

    #[test]
    fn options_and_positionals_in_any_order() {
        let (out, args) = run(HelpAt::OptionPosition, &["a", "--count=3", "-y", "b"]);
        assert_eq!(out, Ok(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(
            args,
            Args {
                count: Some("3".into()),
                yes: true
            }
        );
        assert_eq!(
            run(HelpAt::OptionPosition, &["-c5"]).1.count.as_deref(),
            Some("5")
        );
    }

    #[test]
    fn every_problem_names_the_option() {
        let at = HelpAt::OptionPosition;
        assert_eq!(
            error(at, &["-c", "1", "--count", "2"]),
            "option '-c/--count' given more than once"
        );
        assert_eq!(error(at, &["-y", "-y"]), "option '-y' given more than once");
        assert_eq!(error(at, &["x", "-c"]), "option '-c/--count' needs a value");
        assert_eq!(
            error(at, &["-c", "bad"]),
            "invalid value 'bad' for -c/--count: not a count"
        );
        assert_eq!(
            error(at, &["--bogus=1", "x"]),
            "unknown option '--bogus' for 'loopx demo' (it takes only -c/--count <n>, -y)"
        );
        assert!(error(at, &["-y=1"]).contains("-y"));
        // The first problem in argument order is the one reported.
        assert!(error(at, &["-x", "-y", "-y"]).contains("'-x'"));
    }

    #[test]
    fn help_in_option_position_wins_but_a_value_is_a_value() {
        let at = HelpAt::OptionPosition;
        for args in [
            &["-h"][..],
            &["--help"],
            &["x", "-h"],
            &["--bogus", "-h"],
            &["-y", "-y", "--help"],
        ] {
            assert_eq!(run(at, args).0, Ok(vec!["HELP".to_string()]), "{args:?}");
        }
        assert_eq!(run(at, &["-c", "-h"]).1.count.as_deref(), Some("-h"));
        assert_eq!(
            run(at, &["--count=--help"]).1.count.as_deref(),
            Some("--help")
        );
        assert_eq!(run(at, &["--", "-h"]).0, Ok(vec!["-h".to_string()]));
    }

    #[test]
    fn help_anywhere_is_section_4_2() {
        let at = HelpAt::Anywhere;
        for args in [
            &["-c", "-h"][..],
            &["-c", "bad", "--help"],
            &["--count", "--help"],
        ] {
            assert_eq!(run(at, args).0, Ok(vec!["HELP".to_string()]), "{args:?}");
        }
        assert_eq!(run(at, &["--", "-h"]).0, Ok(vec!["-h".to_string()]));
    }

    #[test]
    fn docs_read_well_in_help_and_menus() {
        let c = FLAGS[0].doc();
        assert_eq!(c.usage(), "-c, --count <n>");
        assert_eq!(c.spellings(), ["-c", "--count"]);
        assert_eq!(FLAGS[1].doc().usage(), "-y");
        let help = help_lines(&[c]);
        assert_eq!(
            help,
            "  -c, --count <n>  How many\n  -h, --help       Show this help\n"
        );
        let d = Doc {
            help: &["Stop after <count> iterations (every script run", "counts)"],
            ..c
        };
        assert_eq!(d.summary(), "Stop after <count> iterations");
        let d = Doc {
            help: &["Longest wait; then stop"],
            ..c
        };
        assert_eq!(d.summary(), "Longest wait");
    }
}
