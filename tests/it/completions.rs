//! `loopx completions bash|zsh|fish` (beyond the spec, DESIGN.md): scripts
//! each shell parses, naming every subcommand and run option, that complete
//! the current project's targets through `loopx completions --targets`.
//! Subcommands and options are read from the help, so a new one must be
//! completed too.

use std::path::PathBuf;
use std::process::Command;

use crate::cli::listed_commands;
use crate::util::*;

const SHELLS: [&str; 3] = ["bash", "zsh", "fish"];

/// `.loopx/` with `ralph` (index, check-ready) and `tools` (lint only).
fn project() -> Project {
    let p = Project::new();
    p.script("ralph", "index.sh", "")
        .script("ralph", "check-ready.sh", "")
        .script("tools", "lint.ts", "");
    p
}

fn script(shell: &str) -> String {
    Project::bare().loopx(&["completions", shell]).run().stdout
}

/// Every spelling in the "Options:" section of `loopx <command> -h`.
fn help_options(command: &str) -> Vec<String> {
    let help = Project::new().loopx(&[command, "-h"]).run().stdout;
    let section = help.split("\nOptions:\n").nth(1).expect("Options:");
    section
        .lines()
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  -"))
        .flat_map(|l| {
            l.split("  ")
                .nth(1)
                .unwrap_or_default()
                .split([',', ' '])
                .filter(|w| w.starts_with('-'))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn top_commands() -> Vec<String> {
    listed_commands(&Project::bare().loopx(&["-h"]).run().stdout)
}

/// The script of `shell`, saved in `p` for a shell to read.
fn saved(p: &Project, shell: &str) -> PathBuf {
    let path = p.path(&format!("loopx.{shell}"));
    std::fs::write(&path, script(shell)).expect("write script");
    path
}

#[test]
fn each_shell_script_names_every_subcommand_and_run_option() {
    let commands = top_commands();
    let options = help_options("run");
    assert!(options.contains(&"--timeout".to_string()), "{options:?}");
    for shell in SHELLS {
        let text = script(shell);
        for word in commands.iter().chain(&options) {
            // fish spells options `-l timeout`, `-s n`.
            let spelled = match (shell, word.strip_prefix("--"), word.strip_prefix('-')) {
                ("fish", Some(long), _) => format!(" -l {long} "),
                ("fish", None, Some(short)) => format!(" -s {short} "),
                _ => word.clone(),
            };
            assert!(text.contains(&spelled), "{shell} lacks {word}");
        }
        assert!(text.contains("completions --targets"), "{shell}");
    }
}

#[test]
fn each_shell_parses_its_script() {
    let p = Project::bare();
    for shell in SHELLS {
        if which(shell).is_none() {
            skip(
                "completions::each_shell_parses_its_script",
                &format!("no {shell}"),
            );
            continue;
        }
        let mut cmd = Command::new(shell);
        cmd.arg("-n").arg(saved(&p, shell));
        Run::command(cmd).stdout("").run();
    }
    // zsh also loads it under compinit, registering _loopx for loopx.
    if which("zsh").is_some() {
        let mut cmd = Command::new("zsh");
        cmd.arg("-fc")
            .arg(format!(
                "autoload -U compinit && compinit -u -d {}/zcompdump && source {} && print -r -- $_comps[loopx]",
                p.root().display(),
                saved(&p, "zsh").display()
            ))
            .env("HOME", p.home());
        Run::command(cmd).stdout("_loopx\n").run();
    }
}

/// What bash's completion function offers for `line` (the cursor at its
/// end), typed in `p` with the loopx under test as the command.
fn bash_offers(p: &Project, line: &str) -> Vec<String> {
    let line = format!("{} {line}", loopx_bin().display());
    let program = format!(
        "source {}\nCOMP_LINE={line:?}; COMP_POINT=${{#COMP_LINE}}\n\
         read -ra COMP_WORDS <<< \"$COMP_LINE\"\n_loopx\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"",
        saved(p, "bash").display(),
    );
    let mut cmd = Command::new("bash");
    cmd.arg("-c").arg(program).current_dir(p.root());
    let out = Run::command(cmd).run().stdout;
    let mut offers: Vec<String> = out
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    offers.sort();
    offers
}

#[test]
fn bash_completes_commands_options_targets_and_shells() {
    let p = project();
    p.file("vars.env", "");
    let commands = top_commands();
    let mut sorted = commands.clone();
    sorted.sort();
    for (line, want) in [
        ("", sorted.iter().map(String::as_str).collect::<Vec<_>>()),
        ("r", vec!["resume", "run"]),
        ("-", vec!["--help", "-h"]),
        ("run --ti", vec!["--timeout"]),
        ("run --re", vec!["--resume", "--retry", "--retry-delay"]),
        ("resume --re", vec!["--retry", "--retry-delay"]),
        (
            "run ",
            vec![
                "ralph",
                "ralph:check-ready",
                "ralph:index",
                "tools",
                "tools:lint",
            ],
        ),
        (
            "run -n 5 ra",
            vec!["ralph", "ralph:check-ready", "ralph:index"],
        ),
        // bash replaces the text after the colon.
        ("run ralph:c", vec!["check-ready"]),
        ("run -n ", vec![]),
        ("run -e va", vec!["vars.env"]),
        ("run ralph ", vec![]),
        ("env ", vec!["list", "remove", "set"]),
        ("env set ", vec![]),
        ("completions ", vec!["bash", "fish", "zsh"]),
        ("install -", vec!["--help", "--workflow", "-h", "-w", "-y"]),
    ] {
        assert_eq!(bash_offers(&p, line), want, "for `loopx {line}`");
    }
    // Without .loopx/ there is nothing to offer, and nothing said.
    assert_eq!(bash_offers(&Project::bare(), "run "), Vec::<String>::new());
}

#[test]
fn fish_completes_commands_options_and_targets() {
    if which("fish").is_none() {
        skip(
            "completions::fish_completes_commands_options_and_targets",
            "no fish",
        );
        return;
    }
    let p = project();
    let bin_dir = loopx_bin().parent().expect("bin dir").to_path_buf();
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    let offers = |line: &str| -> Vec<String> {
        let mut cmd = Command::new("fish");
        cmd.arg("--no-config")
            .arg("-c")
            .arg(format!(
                "source {}; complete -C {}",
                saved(&p, "fish").display(),
                sh_quote(line)
            ))
            .current_dir(p.root())
            .env("PATH", &path)
            .env("HOME", p.home());
        let out = Run::command(cmd).run().stdout;
        let mut words: Vec<String> = out
            .lines()
            .map(|l| l.split('\t').next().unwrap_or_default().to_string())
            .collect();
        words.sort();
        words
    };
    let mut commands = top_commands();
    commands.sort();
    assert_eq!(offers("loopx "), commands);
    assert_eq!(offers("loopx run --ti"), ["--timeout"]);
    assert_eq!(
        offers("loopx run "),
        [
            "ralph",
            "ralph:check-ready",
            "ralph:index",
            "tools",
            "tools:lint"
        ]
    );
    assert_eq!(offers("loopx run ralph:c"), ["ralph:check-ready"]);
    assert_eq!(offers("loopx run ralph "), Vec::<String>::new());
    assert_eq!(offers("loopx completions "), ["bash", "fish", "zsh"]);
}

#[test]
fn targets_are_the_workflows_and_scripts_of_the_project() {
    project()
        .loopx(&["completions", "--targets"])
        .stdout("ralph\nralph:check-ready\nralph:index\ntools\ntools:lint\n")
        .run();
    // Silently nothing without .loopx/, and no warning about a broken one
    // (a shell is completing): its valid names only.
    Project::bare()
        .loopx(&["completions", "--targets"])
        .stdout("")
        .run();
    let p = project();
    p.script("broken", "check.sh", "")
        .script("broken", "check.ts", "")
        .script("bad name", "index.sh", "");
    let out = p.loopx(&["completions", "--targets"]).run().stdout;
    assert!(out.starts_with("broken\nbroken:check\nralph\n"), "{out}");
    assert!(!out.contains("bad name"), "{out}");
}

#[test]
fn run_completions_runs_the_workflow_named_completions() {
    // New subcommands never shadow a workflow (§4.1, DESIGN.md).
    let p = Project::new();
    p.script(
        "completions",
        "index.sh",
        &logging_script("completions", r#"{"stop":true}"#),
    );
    p.loopx(&["run", "completions"]).stdout("").run();
    assert_eq!(p.read("log"), "completions\n");
}
