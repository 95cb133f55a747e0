//! The three help forms (§11). Only run help looks at `.loopx/`.

use std::path::Path;

use crate::discovery;
use crate::run_flags;
use crate::text::shown;

pub const TOP: &str = "\
loopx - loop scripts that drive agent CLIs

Usage:
  loopx <command> [options]
  loopx -h | --help

Commands:
  run [options] <workflow>[:<script>]   Run a workflow script in a loop
  version                               Print the loopx version
  output [--result <v>] [--goto <target>] [--stop]
                                        Print structured output (for bash scripts)
  env set <name> <value>                Set a global environment variable
  env remove <name>                     Remove a global environment variable
  env list                              List global environment variables
  install [options] <source>            Install workflows into .loopx/
  status [--json]                       List the loopx runs alive and resumable
  resume [<run-id>] [options]           Carry on a run that stopped early

Workflows live in .loopx/<workflow>/ as .sh, .js, .jsx, .ts or .tsx scripts;
`loopx run <workflow>` starts its index script. A script's stdout is its
output {\"result\", \"goto\", \"stop\"}: from bash, `$LOOPX_BIN output --goto next`.
Exit codes: 0 stopped or a limit reached, 1 error or a script failed,
75 a wait outlasted the budget (resumable), 124 a script timed out,
128+N signal N.

Run `loopx run --help` to list the workflows of this project,
and `loopx install --help` for install sources and options.
";

const RUN_USAGE: &str = "\
Usage: loopx run [options] <workflow>[:<script>]

Runs <workflow>:<script> (default script: index) and loops: a script's stdout
is its structured output {\"result\", \"goto\", \"stop\"}; goto moves to another
script, stop ends the loop, otherwise the loop restarts at the target.
Durations read 500ms, 90s, 15m, 2h or 1h30m; a bare number is seconds.

Options:
";

pub const RESUME: &str = "\
Usage: loopx resume [<run-id>] [options]

Carries on a run that ended early: by a signal, a failed or timed-out
script, a wait that outlasted its budget (exit 75), a crash or a reboot.
Without <run-id> (or a unique prefix of it), the current project's most
recent resumable run. The script that was about to run or running runs
again with its saved input (at least once), under the same run id and
iteration; spent time and money carry over. Options are `loopx run`'s and
replace the saved ones. `loopx status` lists resumable runs.
";

pub const INSTALL: &str = "\
Usage: loopx install [options] <source>

Installs the workflows of <source> into .loopx/ (created when missing).

Sources:
  <org>/<repo>                   GitHub shorthand, cloned from
                                 https://github.com/<org>/<repo>.git
                                 (write the full URL for a .git name)
  https://github.com/<o>/<r>     a repository on github.com, gitlab.com or
                                 bitbucket.org (optionally .git or a
                                 trailing /); other paths there are not git
  <any URL ending in .git>       any other git repository (https, ssh, git,
                                 file, or user@host:path.git)
  <URL of a .tar.gz or .tgz>     a tarball over http(s) or file; the query
                                 and fragment are ignored for the name
Git sources are cloned with the system git (shallow, no prompts); tarballs
are downloaded with the system curl (redirects followed) and extracted by
loopx, refusing entries that would land outside the archive.

A source with script files at its root is one workflow, named after the
repository or archive (all its files are installed). Otherwise each
top-level directory with script files is a workflow of its own and only
those directories are installed.

Options:
  -w, --workflow <name>   Install only this workflow of a multi-workflow source
  -y                      Replace existing workflows of the same name and
                          install despite a loopx version requirement
                          the running loopx does not meet
  -h, --help              Show this help

Nothing is installed unless every selected workflow passes: valid names,
no two scripts sharing a name, no existing entry at .loopx/<name> (-y
replaces only existing workflows, never other files or directories), and
the workflow's package.json loopx range. All problems are listed at once.
Each installed workflow is printed on stdout. Dependencies are not installed:
run `npm install` in the workflow directory if it needs any.
";

/// Run help (§11.2): usage, then the workflows found, with non-fatal
/// validation warnings on stderr.
pub fn run_help(project_root: &Path) -> String {
    let mut out = String::from(RUN_USAGE);
    out.push_str(&run_flags::help_lines());
    let dir = discovery::loopx_dir(project_root);
    if !discovery::has_loopx_dir(project_root) {
        crate::messages::warn(&format!(
            "no .loopx/ directory in {}; create one with `mkdir -p .loopx/<workflow>`",
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
