//! Help (§11), from the command table (commands.rs): the top help lists
//! every command and the exit codes, and every command has `-h`. Only run
//! help looks at `.loopx/` (§11.2).

use std::path::Path;

use crate::cli::commands::{self, Subcommand, EXIT_CODES};
use crate::cli::flags;
use crate::discovery;
use crate::text::shown;

/// Where the top help's summaries start.
const COLUMN: usize = 38;

/// Top-level help (§11.1): syntax, the commands, what a workflow is, the
/// exit codes (§12). No discovery.
pub fn top() -> String {
    let mut out = String::from(
        "\
loopx - loop scripts that drive agent CLIs

Usage:
  loopx <command> [options]
  loopx -h | --help

Commands:
",
    );
    for c in commands::visible() {
        for (form, summary) in c.forms {
            if form.len() < COLUMN {
                out.push_str(&format!("  {form:<COLUMN$}{summary}\n"));
            } else {
                out.push_str(&format!("  {form}\n  {:COLUMN$}{summary}\n", ""));
            }
        }
    }
    out.push_str(
        "
Workflows live in .loopx/<workflow>/ as .sh, .js, .jsx, .ts or .tsx scripts;
`loopx run <workflow>` starts its index script. A script's stdout is its
output {\"result\", \"goto\", \"stop\"}: from bash, `$LOOPX_BIN output --goto next`.

Exit codes:
",
    );
    let width = EXIT_CODES.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    for (code, meaning) in EXIT_CODES {
        out.push_str(&format!("  {code:<width$}  {meaning}\n"));
    }
    out.push_str(
        "
Run `loopx <command> --help` for a command's options; `loopx run --help`
also lists the workflows of this project.
",
    );
    out
}

/// `loopx <command> --help`: usage, what it does, its options (from the
/// table) and what follows them. Run help adds the workflows (`run_help`).
pub fn command(c: &Subcommand) -> String {
    let mut out = String::new();
    for (i, (form, _)) in c.forms.iter().enumerate() {
        let lead = if i == 0 { "Usage:" } else { "      " };
        out.push_str(&format!("{lead} loopx {form}\n"));
    }
    out.push_str(&format!("\n{}\n\nOptions:\n", c.about));
    out.push_str(&flags::help_lines(&(c.options)()));
    if !c.after.is_empty() {
        out.push_str(&format!("\n{}\n", c.after));
    }
    out
}

/// The help of the table's entry `name`.
pub fn of(name: &str) -> String {
    commands::find(name).map(command).unwrap_or_else(top)
}

/// Run help (§11.2): usage, then the workflows found, with non-fatal
/// validation warnings on stderr.
pub fn run_help(project_root: &Path) -> String {
    let mut out = of("run");
    let dir = discovery::loopx_dir(project_root);
    if !discovery::has_loopx_dir(project_root) {
        crate::messages::warn(&format!(
            "no .loopx/ directory in {}; `loopx init` writes a workflow to start from, \
             or create one with `mkdir -p .loopx/<workflow>`",
            project_root.display()
        ));
        return out;
    }
    let found = match discovery::discover(&dir) {
        Ok(found) => found,
        Err(err) => {
            crate::messages::warn(&format!("cannot read {}: {err}", dir.display()));
            return out;
        }
    };
    for problem in &found.problems {
        crate::messages::warn(problem);
    }
    out.push_str("\nWorkflows in .loopx/:\n");
    if found.workflows.is_empty() {
        out.push_str("  (none yet: add .loopx/<workflow>/index.sh)\n");
    }
    let width = found
        .workflows
        .keys()
        .map(|n| shown(n).chars().count())
        .max()
        .unwrap_or(0);
    for (name, wf) in &found.workflows {
        // Invalid names are listed too (§5.3), with control characters
        // escaped so one entry stays one line.
        let name = shown(name);
        let scripts: Vec<String> = wf
            .scripts
            .keys()
            .map(|s| {
                if s == "index" {
                    "index (default)".to_string()
                } else {
                    shown(s).into_owned()
                }
            })
            .collect();
        out.push_str(&format!("  {name:<width$}  {}\n", scripts.join(", ")));
    }
    out
}
