//! The ready-made workflows of dist/workflows (ralph, build-audit-fix,
//! issue-runner), as users get them: scripts/build-release.sh builds the
//! release tree once, a server on 127.0.0.1 serves it, and each test installs
//! workflows from its `workflows.tar.gz` into a temp project, then runs them
//! with fake agent and forge CLIs on PATH. The path a run took is read from
//! its run log (`--log`): the `target` of each `script_start`.
//!
//! Also here: shellcheck over every script of dist/workflows and the
//! README's list of workflows (the examples of dist/examples are
//! tests/it/fleet.rs's).
#![cfg(target_os = "linux")]

use crate::util;
use crate::util::{http, release};
use crate::util::{Project, Run};
use http::Server;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use release::VERSION;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

const WORKFLOWS: [&str; 3] = ["build-audit-fix", "issue-runner", "ralph"];

// ------------------------------------------------------------ the release

/// The release tree, built once for all the tests of this file.
fn release() -> &'static Path {
    &release::host_release().out
}

/// The URL of the release's workflows.tar.gz on `server`.
fn workflows_url(server: &Server) -> String {
    server.url_for(&format!("/download/v{VERSION}/workflows.tar.gz"))
}

// ------------------------------------------------------------ the fakes

/// A fake agent CLI. Call <n> records its arguments (argv[0]'s name first),
/// working directory and prompt (its stdin) under $FAKE_AGENT, then runs
/// the canned reply replies/<n> (or replies/default) as bash with the
/// prompt in $PROMPT: a reply prints what the agent says, writes files,
/// exits non-zero or hangs. Called as the claude preset calls Claude Code
/// (`--output-format stream-json`), it wraps what the reply printed in
/// Claude Code's init and result events.
const FAKE_AGENT: &str = r#"#!/bin/bash
set -u
dir=${FAKE_AGENT:?}
n=$(( $(cat "$dir/calls" 2>/dev/null || echo 0) + 1 ))
echo "$n" >"$dir/calls"
PROMPT=$(cat)
printf '%s' "$PROMPT" >"$dir/prompt-$n"
printf '%s\n' "$(basename "$0")" "$@" >"$dir/args-$n"
pwd -P >"$dir/cwd-$n"
reply=$dir/replies/$n
[ -f "$reply" ] || reply=$dir/replies/default
if [ ! -f "$reply" ]; then
  echo "fake agent: no reply for call $n" >&2
  exit 97
fi
case " $* " in
  *" stream-json "*)
    echo '{"type":"system","subtype":"init","session_id":"fake"}'
    # shellcheck disable=SC1090
    said=$(. "$reply")
    status=$?
    json=$(loopx output --result "$said")
    printf '{"type":"assistant","message":{"content":[{"type":"text","text":%s]}}\n' "${json#\{\"result\":}"
    printf '{"type":"result","subtype":"success","is_error":false,"session_id":"fake","total_cost_usd":0.25,%s\n' "${json#\{}"
    exit "$status"
    ;;
esac
# shellcheck disable=SC1090
. "$reply"
"#;

/// A fake GitHub CLI, for the commands issue-runner runs. It keeps issues
/// under $FAKE_GH/issues/<n>/ (title, body, author, created, labels: one per
/// line, comments), clones $FAKE_GH/origin.git, and records every call in
/// $FAKE_GH/calls (arguments quoted with printf %q). A line "<cmd> <sub>" in
/// $FAKE_GH/fail makes those calls fail; "<cmd> <sub> <k>" only the k-th.
/// `issue list` insists on the --json fields and --jq program the real gh
/// must get, and prints what that program prints. `pr checks`' k-th call
/// prints $FAKE_GH/checks/<k> (else checks/default): rows as gh prints
/// them when piped (name, state, elapsed, link; tab-separated), and exits
/// as gh does: 1 when one failed, 8 while one is pending; an empty file is
/// gh's "no checks reported".
const FAKE_GH: &str = r#"#!/bin/bash
set -u
dir=${FAKE_GH:?}
line=$(printf '%q ' "$@")
printf '%s\n' "${line% }" >>"$dir/calls"
cmd="$1 $2"
count=$dir/count-$1-$2
k=$(( $(cat "$count" 2>/dev/null || echo 0) + 1 ))
echo "$k" >"$count"
if [ -f "$dir/fail" ] && grep -qxF -e "$cmd" -e "$cmd $k" "$dir/fail"; then
  echo "fake gh: $cmd failed: HTTP 502" >&2
  exit 1
fi
shift 2
args=("$@")
opt() {
  local prev="" a
  for a in "${args[@]}"; do
    if [ "$prev" = "$1" ]; then
      printf '%s' "$a"
      return 0
    fi
    prev=$a
  done
  return 1
}
bad() {
  echo "fake gh: $*" >&2
  exit 2
}
[ "$cmd" = "repo clone" ] || [ "$(opt -R)" = o/r ] || bad "expected -R o/r"
case $cmd in
  "issue list")
    [ "$(opt --json)" = number,author,createdAt ] || bad "unexpected --json"
    [ "$(opt --jq)" = '.[] | "\(.createdAt) \(.number) \(.author.login)"' ] || bad "unexpected --jq"
    [ "$(opt --state)" = open ] || bad "expected --state open"
    label=$(opt --label) || bad "expected --label"
    for d in "$dir"/issues/*/; do
      [ -d "$d" ] || continue
      grep -qxF -- "$label" "$d/labels" || continue
      printf '%s %s %s\n' "$(cat "$d/created")" "$(basename "$d")" "$(cat "$d/author")"
    done
    ;;
  "issue view")
    [ -d "$dir/issues/$1" ] || bad "no issue $1"
    case "$(opt --json) $(opt --jq)" in
      "title .title") cat "$dir/issues/$1/title" ;;
      "body .body") cat "$dir/issues/$1/body" ;;
      *) bad "unexpected issue view arguments" ;;
    esac
    ;;
  "issue edit")
    f=$dir/issues/$1/labels
    [ -f "$f" ] || bad "no issue $1"
    if old=$(opt --remove-label); then
      grep -vxF -- "$old" "$f" >"$f.new"
      mv "$f.new" "$f"
    fi
    if new=$(opt --add-label); then
      grep -qxF -- "$new" "$f" || echo "$new" >>"$f"
    fi
    echo "https://github.com/o/r/issues/$1"
    ;;
  "issue comment")
    [ -d "$dir/issues/$1" ] || bad "no issue $1"
    { opt --body; printf '\n--\n'; } >>"$dir/issues/$1/comments"
    echo "https://github.com/o/r/issues/$1#issuecomment-1"
    ;;
  "pr checks")
    rows=$dir/checks/$k
    [ -f "$rows" ] || rows=$dir/checks/default
    [ -f "$rows" ] || bad "no checks/$k nor checks/default"
    if [ ! -s "$rows" ]; then
      echo "no checks reported on the '$1' branch" >&2
      exit 1
    fi
    cat "$rows"
    if cut -f2 "$rows" | grep -qx fail; then exit 1; fi
    if cut -f2 "$rows" | grep -qx pending; then exit 8; fi
    ;;
  "repo clone")
    [ "$1" = o/r ] && [ "$3 $4 $5" = "-- --depth 1" ] || bad "unexpected repo clone arguments"
    git clone -q --depth 1 "file://$dir/origin.git" "$2"
    ;;
  *) bad "unexpected command: $cmd" ;;
esac
"#;

fn write_exe(path: &Path, text: &str) {
    util::write_executable(path, text);
}

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c"])
        .arg("init.defaultBranch=main")
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run git");
    assert!(
        o.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

// ------------------------------------------------------------ a user's lab

/// A project with workflows installed from the served release, fake CLIs
/// on PATH (`claude`, `codex` and `gh`), and their state directories.
pub(crate) struct Lab {
    pub(crate) p: Project,
    server: Server,
    /// Where the fakes live (first on PATH).
    pub(crate) tools: PathBuf,
    /// $FAKE_AGENT: replies/<n>, calls, args-<n>, cwd-<n>, prompt-<n>.
    pub(crate) agent: PathBuf,
    /// $FAKE_GH: issues/, origin.git, calls, fail.
    gh: PathBuf,
}

impl Lab {
    /// A lab with `workflows` installed (`-w` each), or all of them (none).
    pub(crate) fn new(workflows: &[&str]) -> Lab {
        let p = Project::bare();
        let server = Server::serve_dir(release()).expect("serve the release");
        let scratch = p.root().parent().expect("temp dir").to_path_buf();
        let lab = Lab {
            tools: scratch.join("tools"),
            agent: scratch.join("agent"),
            gh: scratch.join("gh"),
            p,
            server,
        };
        write_exe(&lab.tools.join("claude"), FAKE_AGENT);
        write_exe(&lab.tools.join("codex"), FAKE_AGENT);
        write_exe(&lab.tools.join("gh"), FAKE_GH);
        std::os::unix::fs::symlink(util::loopx_bin(), lab.tools.join("loopx")).expect("symlink");
        fs::create_dir_all(lab.agent.join("replies")).expect("mkdir replies");
        fs::create_dir_all(lab.gh.join("issues")).expect("mkdir issues");
        let url = workflows_url(&lab.server);
        if workflows.is_empty() {
            lab.loopx(&["install", &url]).run();
        }
        for w in workflows {
            lab.loopx(&["install", "-w", w, &url])
                .stdout_contains(w)
                .run();
        }
        lab
    }

    /// `run` with the fakes (and the loopx under test) first on PATH.
    fn with_fakes(&self, run: Run) -> Run {
        let path = format!(
            "{}:{}",
            self.tools.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        run.env("PATH", path)
            .env("FAKE_AGENT", &self.agent)
            .env("FAKE_GH", &self.gh)
            .env("TMPDIR", self.p.root().parent().expect("temp dir"))
    }

    /// `loopx <args>` in the project.
    pub(crate) fn loopx(&self, args: &[&str]) -> Run {
        self.with_fakes(self.p.loopx(args))
    }

    /// The agent's answer to its `n`-th call (`0`: every call without one).
    pub(crate) fn reply(&self, n: usize, script: &str) -> &Lab {
        let name = if n == 0 {
            "default".to_string()
        } else {
            n.to_string()
        };
        fs::write(self.agent.join("replies").join(name), script).expect("write reply");
        self
    }

    pub(crate) fn agent_calls(&self) -> usize {
        fs::read_to_string(self.agent.join("calls"))
            .map(|s| s.trim().parse().expect("a count"))
            .unwrap_or(0)
    }

    pub(crate) fn agent_file(&self, kind: &str, n: usize) -> String {
        let f = self.agent.join(format!("{kind}-{n}"));
        fs::read_to_string(&f).unwrap_or_else(|e| panic!("read {}: {e}", f.display()))
    }

    pub(crate) fn prompt(&self, n: usize) -> String {
        self.agent_file("prompt", n)
    }
}

// ------------------------------------------------------------ the run log

/// The run log's lines, each parsed.
pub(crate) fn events(path: &Path) -> Vec<Value> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The path a run took: the target of every script_start, with `#<n>` for
/// attempt n > 1. Several runs in one log are separated by "|".
pub(crate) fn path_taken(log: &Path) -> Vec<String> {
    let mut path = Vec::new();
    for e in events(log) {
        match e["event"].as_str() {
            Some("run_start") if !path.is_empty() => path.push("|".to_string()),
            Some("script_start") => {
                let target = e["target"].as_str().expect("target").to_string();
                match e["attempt"].as_u64() {
                    Some(1) => path.push(target),
                    Some(n) => path.push(format!("{target}#{n}")),
                    None => panic!("no attempt in {e}"),
                }
            }
            _ => {}
        }
    }
    path
}

/// The last run_end of the log.
fn run_end(log: &Path) -> Value {
    events(log)
        .into_iter()
        .rev()
        .find(|e| e["event"] == "run_end")
        .expect("a run_end event")
}

/// The one directory in `dir` (a workflow's runs/: one per run).
fn only_dir(dir: &Path) -> PathBuf {
    let entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("ls {}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries[0].clone()
}

/// Every file under `dir`, as sorted relative paths.
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for name in names_in(dir) {
            let path = dir.join(name);
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(
                    path.strip_prefix(root)
                        .expect("under root")
                        .display()
                        .to_string(),
                );
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The files `loopx agent` keeps per agent run in `dir` (its session and
/// last-class bookkeeping aside).
fn agent_files(dir: &Path) -> Vec<String> {
    names_in(dir)
        .into_iter()
        .filter(|n| {
            ["events.jsonl", "final.txt", "stderr.log", "summary.json"]
                .iter()
                .any(|k| n.ends_with(k))
        })
        .collect()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("ls {}: {e}", dir.display()))
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// ======================================================= shipping

#[test]
fn the_release_tarball_installs_the_three_workflows_and_nothing_else() {
    let p = Project::bare();
    let server = Server::serve_dir(release()).expect("serve");
    // From latest/ too, as the README's command has it.
    let url = server.url_for("/latest/download/workflows.tar.gz");
    p.loopx(&["install", &url])
        .stdout(
            "installed workflow 'build-audit-fix' into .loopx/build-audit-fix\n\
             installed workflow 'issue-runner' into .loopx/issue-runner\n\
             installed workflow 'ralph' into .loopx/ralph\n",
        )
        .run();
    assert_eq!(names_in(&p.path(".loopx")), WORKFLOWS);
    for w in WORKFLOWS {
        let dir = p.path(&format!(".loopx/{w}"));
        for file in ["README.md", "package.json", "index.sh", ".gitignore"] {
            assert!(dir.join(file).is_file(), "{w}/{file} is missing");
        }
        // Byte for byte what dist/workflows holds, lib/ included, and the
        // authoring guide beside each (the tarball's top level is not
        // installed, §10.1).
        let source = Path::new(ROOT).join("dist/workflows").join(w);
        let mut files = files_under(&dir);
        files.sort();
        let mut expected = files_under(&source);
        expected.push("AUTHORING.md".to_string());
        expected.sort();
        assert_eq!(files, expected, "{w}");
        for file in files {
            let from = match file.as_str() {
                "AUTHORING.md" => source.join("../AUTHORING.md"),
                _ => source.join(&file),
            };
            assert!(
                fs::read(dir.join(&file)).ok() == fs::read(from).ok(),
                "{w}/{file}"
            );
        }
    }
    assert!(!p.exists(".loopx/AUTHORING.md"));
    // Valid in every respect run -h checks: no warnings.
    let mut help = p.loopx(&["run", "-h"]);
    for w in WORKFLOWS {
        help = help.stdout_contains(w);
    }
    help.run();
}

#[test]
fn install_w_takes_one_workflow_and_its_loopx_range_accepts_this_version() {
    let p = Project::bare();
    let server = Server::serve_dir(release()).expect("serve");
    for w in WORKFLOWS {
        // No -y: a range that excluded this version would refuse.
        p.loopx(&["install", "-w", w, &workflows_url(&server)])
            .stdout(&format!("installed workflow '{w}' into .loopx/{w}\n"))
            .run();
        let pkg: Value = serde_json::from_str(&p.read(&format!(".loopx/{w}/package.json")))
            .expect("package.json is JSON");
        let range = pkg["dependencies"]["loopx"]
            .as_str()
            .expect("a loopx range");
        assert_eq!(range, format!("^{VERSION}"), "{w}");
    }
    assert_eq!(names_in(&p.path(".loopx")), WORKFLOWS);
}

#[test]
fn every_workflow_script_starts_with_bash_and_the_fakes_pass_shellcheck() {
    // ShellCheck over every script of dist/workflows, helpers in lib/
    // included: shellcheck.rs, every shell file of the repository.
    let dir = Path::new(ROOT).join("dist/workflows");
    let mut scripts = 0;
    for w in WORKFLOWS {
        for name in names_in(&dir.join(w)).iter().filter(|n| n.ends_with(".sh")) {
            let text = fs::read_to_string(dir.join(w).join(name)).expect("read");
            assert!(text.starts_with("#!/bin/bash\n"), "{w}/{name}: shebang");
            scripts += 1;
        }
    }
    assert!(scripts >= 8, "{scripts} scripts");
    // The fakes these tests use.
    let scratch = util::TempDir::new("fakes");
    for (name, text) in [("agent", FAKE_AGENT), ("gh", FAKE_GH)] {
        let f = scratch.path().join(name);
        write_exe(&f, text);
        let mut cmd = Command::new(util::shellcheck());
        cmd.arg(&f);
        Run::command(cmd).run();
    }
}

#[test]
fn each_workflow_readme_documents_every_variable_its_scripts_read() {
    let dir = Path::new(ROOT).join("dist/workflows");
    // Not configuration: the system's and loopx's own.
    let not_config = [
        "HOME",
        "PATH",
        "PWD",
        "TMPDIR",
        "PIPESTATUS",
        "PPID",
        "BASH_SOURCE",
    ];
    for w in WORKFLOWS {
        let readme = fs::read_to_string(dir.join(w).join("README.md")).expect("README");
        let mut text = String::new();
        for sub in ["", "lib"] {
            let d = dir.join(w).join(sub);
            if d.is_dir() {
                for name in names_in(&d).into_iter().filter(|n| n.ends_with(".sh")) {
                    text.push_str(&fs::read_to_string(d.join(name)).expect("read"));
                }
            }
        }
        let mut read = Vec::new();
        for (i, _) in text.match_indices("${") {
            let name: String = text[i + 2..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if !name.is_empty()
                && !name.starts_with("LOOPX_")
                && !not_config.contains(&name.as_str())
                && !read.contains(&name)
            {
                read.push(name);
            }
        }
        assert!(!read.is_empty(), "{w}");
        for name in read {
            assert!(
                readme.contains(&format!("| `{name}` |")),
                "{w}/README.md does not document {name} in its table"
            );
        }
    }
}

// ======================================================= ralph

const PROMPT: &str = "Do the next item of TODO.md. When all are done, print LOOP_DONE.\n";

fn ralph() -> Lab {
    let lab = Lab::new(&["ralph"]);
    lab.p.file("PROMPT.md", PROMPT);
    lab
}

#[test]
fn ralph_runs_a_fresh_agent_per_iteration_until_it_prints_the_done_line() {
    let lab = ralph();
    lab.reply(1, "echo 'did item 1'; echo one >> work.txt")
        .reply(2, "echo 'did item 2'; echo two >> work.txt")
        // Quoting the done line inside a sentence does not count...
        .reply(3, "echo 'I will print LOOP_DONE when all are done'")
        // ...alone on its line (blanks and a CR around it) it does.
        .reply(4, "echo 'all items done'; printf '  LOOP_DONE \\r\\n'");
    lab.loopx(&[
        "run",
        "--log",
        "run.jsonl",
        "--max-time",
        "1m",
        "--timeout",
        "30s",
        "ralph",
    ])
    .stdout("")
    .stderr_contains("did item 2")
    .stderr_contains("ralph: the agent marked the task done after 4 iteration(s)")
    .run();
    let log = lab.p.path("run.jsonl");
    assert_eq!(path_taken(&log), ["ralph:index"; 4]);
    assert_eq!(run_end(&log)["reason"], "stop");
    assert_eq!(lab.agent_calls(), 4);
    for n in 1..=4 {
        // The default preset: Claude Code's print mode with its event
        // stream, edits and git allowed, in the project root, with the
        // prompt file on its stdin.
        assert_eq!(
            lab.agent_file("args", n),
            "claude\n-p\n--output-format\nstream-json\n--verbose\n\
             --permission-mode\nacceptEdits\n--allowedTools\nBash(git:*)\n"
        );
        assert_eq!(
            lab.agent_file("cwd", n).trim(),
            lab.p.root().to_str().unwrap()
        );
        assert_eq!(lab.prompt(n), PROMPT.trim_end());
    }
    assert_eq!(lab.p.read("work.txt"), "one\ntwo\n");
    // The agent's output of each iteration is kept in the run's directory:
    // its events, its final message, its stderr.
    let run = only_dir(&lab.p.path(".loopx/ralph/runs"));
    let mut want = Vec::new();
    for n in 1..=4 {
        for kind in ["events.jsonl", "final.txt", "stderr.log", "summary.json"] {
            want.push(format!("iteration-{n}.{kind}"));
        }
    }
    assert_eq!(agent_files(&run), want);
    assert_eq!(
        fs::read_to_string(run.join("iteration-2.final.txt")).unwrap(),
        "did item 2\n"
    );
    let events = fs::read_to_string(run.join("iteration-2.events.jsonl")).unwrap();
    assert!(events.contains(r#""type":"result""#), "{events}");
}

#[test]
fn ralph_stops_on_the_done_file_and_a_later_run_spends_nothing() {
    let lab = ralph();
    lab.p.file("tasks/night.md", "The night's task.\n");
    lab.reply(1, "echo working")
        .reply(2, "echo finished; touch finished.flag");
    let run = |log: &str| {
        lab.loopx(&["run", "--log", log, "ralph"])
            .env("AGENT_CMD", "codex exec --sandbox workspace-write")
            .env("RALPH_PROMPT", "tasks/night.md")
            .env("RALPH_DONE_FILE", "finished.flag")
    };
    run("first.jsonl")
        .stderr_contains("ralph: the agent marked the task done after 2 iteration(s)")
        .run();
    assert_eq!(path_taken(&lab.p.path("first.jsonl")), ["ralph:index"; 2]);
    // AGENT_CMD runs as given, with the prompt on its stdin.
    assert_eq!(
        lab.agent_file("args", 1),
        "codex\nexec\n--sandbox\nworkspace-write\n"
    );
    assert_eq!(lab.prompt(2), "The night's task.");

    // The task is done: the next run (cron's next night) stops at once.
    run("second.jsonl")
        .stderr_contains("finished.flag exists: the task is done (remove it to run again)")
        .run();
    assert_eq!(path_taken(&lab.p.path("second.jsonl")), ["ralph:index"]);
    assert_eq!(lab.agent_calls(), 2, "no agent was started");
}

#[test]
fn ralph_retries_an_agent_that_hangs_past_the_timeout() {
    let lab = ralph();
    lab.reply(1, "echo 'thinking...'; sleep 30")
        .reply(2, "echo LOOP_DONE");
    lab.loopx(&[
        "run",
        "--log",
        "run.jsonl",
        "--timeout",
        "1s",
        "--retry",
        "1",
        "--retry-delay",
        "0",
        "ralph",
    ])
    .stderr_contains("loopx: ralph:index timed out after 1s; retry 1 of 1")
    .run();
    let log = lab.p.path("run.jsonl");
    assert_eq!(path_taken(&log), ["ralph:index", "ralph:index#2"]);
    assert!(events(&log).iter().any(|e| e["event"] == "timeout"));
    let run = only_dir(&lab.p.path(".loopx/ralph/runs"));
    // Each attempt has its own files; the hung one's end depends on when
    // the signal caught loopx agent, so only its events are sure.
    let files = agent_files(&run);
    for f in [
        "iteration-1.attempt-2.events.jsonl",
        "iteration-1.attempt-2.final.txt",
        "iteration-1.attempt-2.stderr.log",
        "iteration-1.attempt-2.summary.json",
        "iteration-1.events.jsonl",
    ] {
        assert!(files.iter().any(|x| x == f), "{f} in {files:?}");
    }
}

#[test]
fn ralph_exits_124_when_the_agent_hangs_and_no_retry_is_left() {
    let lab = ralph();
    lab.reply(0, "sleep 30");
    lab.loopx(&["run", "--log", "run.jsonl", "--timeout", "1s", "ralph"])
        .timeout(Duration::from_secs(30))
        .status(124)
        .stderr_contains(
            "loopx: error: ralph:index timed out after 1s; its process group was terminated",
        )
        .run();
    let end = run_end(&lab.p.path("run.jsonl"));
    assert_eq!(end["reason"], "timed_out");
    assert_eq!(end["exit_code"], 124);
}

#[test]
fn ralph_fails_clearly_without_a_prompt_file_or_when_the_agent_fails() {
    let lab = Lab::new(&["ralph"]);
    lab.loopx(&["run", "ralph"])
        .status(1)
        .stderr_contains("ralph: no prompt file at ")
        .stderr_contains("PROMPT.md: write one, or set RALPH_PROMPT")
        .run();
    assert_eq!(lab.agent_calls(), 0);

    lab.p.file("PROMPT.md", PROMPT);
    lab.reply(0, "echo 'segmentation fault' >&2; exit 3");
    lab.loopx(&["run", "ralph"])
        .status(1)
        .stderr_contains("ralph: claude ended: crashed (")
        .stderr_contains("segmentation fault")
        .stderr_contains("loopx: error: script ralph:index exited with code 32")
        .run();
}

/// A ralph project in a git repository with one commit.
fn ralph_in_git() -> Lab {
    let lab = ralph();
    let root = lab.p.root();
    lab.p.file(".gitignore", "run.jsonl\n");
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "start"]);
    lab
}

#[test]
fn ralph_stops_for_good_after_no_progress_limit_iterations_that_change_nothing() {
    let lab = ralph_in_git();
    // Progress first (a new file), then nothing, again and again.
    lab.reply(1, "echo 'did something'; echo one > one.txt")
        .reply(0, "echo 'nothing left that I can do'");
    lab.loopx(&[
        "run",
        "--log",
        "run.jsonl",
        "-n",
        "20",
        "--retry",
        "2",
        "--retry-delay",
        "0",
        "ralph",
    ])
    .status(1)
    .stderr_contains(
        "ralph: no progress in 3 iterations in a row (NO_PROGRESS_LIMIT=3): the same commit (",
    )
    .stderr_contains("the agent finished without changing anything; stopping for good")
    .stderr_contains("loopx: error: script ralph:index exited with code 1")
    .run();
    let log = lab.p.path("run.jsonl");
    // Not retried: the failure is permanent.
    assert_eq!(path_taken(&log), ["ralph:index"; 4]);
    let end = events(&log)
        .into_iter()
        .rev()
        .find(|e| e["event"] == "script_end")
        .expect("a script_end");
    assert_eq!(end["class"], "no_progress", "{end}");
    assert_eq!(lab.agent_calls(), 4);
}

#[test]
fn ralph_no_progress_counts_repeated_failures_but_not_waits() {
    let lab = ralph_in_git();
    lab.reply(1, "echo 'segmentation fault' >&2; exit 3")
        // A rate limit: a wait, not an iteration.
        .reply(2, "echo '429 Too Many Requests' >&2; exit 1")
        .reply(0, "echo 'segmentation fault' >&2; exit 3");
    lab.loopx(&[
        "run",
        "--log",
        "run.jsonl",
        "--retry",
        "5",
        "--retry-delay",
        "0",
        "ralph",
    ])
    .env("NO_PROGRESS_LIMIT", "2")
    .env("AGENT_LIMIT_WAIT", "1s")
    .status(1)
    .stderr_contains("ralph: claude ended: rate_limited")
    .stderr_contains("ralph: no progress in 2 iterations in a row (NO_PROGRESS_LIMIT=2)")
    .stderr_contains("the agent failed the same way each time: crashed (")
    .run();
    // Call 1 fails (the start), the wait, calls 3 and 4 fail the same way.
    assert_eq!(lab.agent_calls(), 4);
    // Off with 0: the retries run out instead.
    let lab = ralph_in_git();
    lab.reply(0, "echo 'nothing to do'");
    lab.loopx(&["run", "-n", "6", "ralph"])
        .env("NO_PROGRESS_LIMIT", "0")
        .stderr_contains("ralph: iteration 6 (attempt 1)")
        .stderr_lacks("no progress")
        .run();
    assert_eq!(lab.agent_calls(), 6);
}

// ======================================================= build-audit-fix

const TASK: &str = "Write app.txt saying hello.\n";
const APPROVE: &str = "echo 'All good.'; echo '**VERDICT: APPROVED**'";
const REJECT: &str = "echo 'app.txt must also say fixed.'; echo 'VERDICT: CHANGES REQUESTED'";

/// Where build-audit-fix writes its report: in its own directory, which
/// its .gitignore keeps out of `git status`.
const BAF_REPORT: &str = ".loopx/build-audit-fix/report.md";

fn build_audit_fix() -> Lab {
    let lab = Lab::new(&["build-audit-fix"]);
    lab.p.file("TASK.md", TASK);
    lab
}

/// The lines of a markdown table in `report` whose first cell is `first`.
fn report_row(report: &str, first: &str) -> String {
    report
        .lines()
        .find(|l| l.starts_with(&format!("| {first} |")))
        .unwrap_or_else(|| panic!("no row {first:?} in:\n{report}"))
        .to_string()
}

#[test]
fn build_audit_fix_runs_checks_in_parallel_and_fixes_until_the_audit_approves() {
    let lab = build_audit_fix();
    lab.reply(1, "echo building; echo hello > app.txt")
        .reply(2, REJECT)
        .reply(3, "echo fixing; echo fixed >> app.txt")
        .reply(4, APPROVE);
    // Each check waits (at most 10 s) for the other to have started: run
    // one after the other, the first would fail.
    let wait_for = |other: &str| {
        format!(
            "i=0; while [ ! -e {other}.started ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; \
             test -e {other}.started"
        )
    };
    let lint = format!(
        "touch lint.started; {} && echo lint clean",
        wait_for("test")
    );
    let test = format!(
        "touch test.started; {} && echo running tests && grep -q fixed app.txt",
        wait_for("lint")
    );
    lab.loopx(&[
        "run",
        "--log",
        "run.jsonl",
        "--timeout",
        "30s",
        "build-audit-fix",
    ])
    .env("LINT_CMD", &lint)
    .env("TEST_CMD", &test)
    .stdout("")
    .stderr_contains("build-audit-fix: approved in round 2")
    .run();
    assert_eq!(
        path_taken(&lab.p.path("run.jsonl")),
        [
            "build-audit-fix:index",
            "build-audit-fix:checks",
            "build-audit-fix:audit",
            "build-audit-fix:fix",
            "build-audit-fix:checks",
            "build-audit-fix:audit",
            "build-audit-fix:report"
        ]
    );
    assert_eq!(lab.p.read("app.txt"), "hello\nfixed\n");
    assert_eq!(lab.agent_calls(), 4);
    for n in 1..=4 {
        assert_eq!(
            lab.agent_file("cwd", n).trim(),
            lab.p.root().to_str().unwrap()
        );
        assert!(lab.prompt(n).contains(TASK.trim()), "prompt {n}");
    }
    assert!(lab.prompt(1).contains("You are the builder"));
    // The auditor sees the checks' results, the failing one with its output.
    let audit = lab.prompt(2);
    assert!(audit.contains("## Lint: passed"), "{audit}");
    assert!(
        audit.contains("## Tests: FAILED with exit code 1"),
        "{audit}"
    );
    assert!(audit.contains("running tests"), "{audit}");
    // The fixer gets the audit and the check results (its stdin).
    let fix = lab.prompt(3);
    assert!(fix.contains("app.txt must also say fixed."), "{fix}");
    assert!(fix.contains("## Tests: FAILED with exit code 1"), "{fix}");
    assert!(lab.prompt(4).contains("## Tests: passed"));

    let report = lab.p.read(BAF_REPORT);
    assert!(report.starts_with("# build-audit-fix report\n"), "{report}");
    assert!(
        report.contains("- Result: **approved** in round 2 (MAX_ROUNDS=3)\n"),
        "{report}"
    );
    assert!(
        report.contains(&format!("- Worked in {}\n", lab.p.root().display())),
        "{report}"
    );
    let steps: Vec<String> = (1..=6)
        .map(|n| report_row(&report, &n.to_string()))
        .collect();
    for (row, (step, round, outcome)) in steps.iter().zip([
        ("build", 1, "ok"),
        ("checks", 1, "lint passed, tests failed (exit 1)"),
        ("audit", 1, "changes requested"),
        ("fix", 1, "ok"),
        ("checks", 2, "lint passed, tests passed"),
        ("audit", 2, "approved"),
    ]) {
        assert!(row.contains(&format!(" | {step} | {round} | ")), "{row}");
        assert!(row.ends_with(&format!(" | {outcome} |")), "{row}");
    }
    assert!(
        report.contains("| 1 | passed | failed (exit 1) | changes requested | no |"),
        "{report}"
    );
    assert!(
        report.contains("| 2 | passed | passed | approved | yes |"),
        "{report}"
    );
    assert!(report.contains("## Last audit\n\nAll good.\n"), "{report}");
    // The run's directory keeps the check output and a copy of the report.
    let run = only_dir(&lab.p.path(".loopx/build-audit-fix/runs"));
    assert_eq!(
        fs::read_to_string(run.join("round-1/lint.log")).unwrap(),
        "lint clean\n"
    );
    assert_eq!(
        fs::read_to_string(run.join("round-1/test.status")).unwrap(),
        "1\n"
    );
    assert_eq!(fs::read_to_string(run.join("report.md")).unwrap(), report);
}

#[test]
fn build_audit_fix_stops_with_exit_1_after_max_rounds_without_approval() {
    let lab = build_audit_fix();
    lab.reply(1, "echo hello > app.txt").reply(0, REJECT);
    lab.loopx(&["run", "--log", "run.jsonl", "build-audit-fix"])
        .env("MAX_ROUNDS", "2")
        .env("TEST_CMD", "true")
        .status(1)
        .stderr_contains(
            "build-audit-fix: not approved after 2 rounds (MAX_ROUNDS=2): \
             the checks pass, but the auditor still requests changes
\
             build-audit-fix: this is the workflow's verdict, not a crash: it ends with exit 1 \
             so that cron and CI see it; what is left is in the report, ",
        )
        .stderr_contains(
            "loopx: error: script build-audit-fix:report exited with code 1; stopping the loop",
        )
        .run();
    let log = lab.p.path("run.jsonl");
    assert_eq!(
        path_taken(&log),
        [
            "build-audit-fix:index",
            "build-audit-fix:checks",
            "build-audit-fix:audit",
            "build-audit-fix:fix",
            "build-audit-fix:checks",
            "build-audit-fix:audit",
            "build-audit-fix:report"
        ]
    );
    assert_eq!(run_end(&log)["reason"], "script_failed");
    assert_eq!(
        lab.agent_calls(),
        4,
        "build, audit, fix, audit: no third round"
    );
    let report = lab.p.read(BAF_REPORT);
    assert!(
        report.contains(
            "- Result: **not approved** after 2 rounds (MAX_ROUNDS=2): \
             the checks pass, but the auditor still requests changes\n"
        ),
        "{report}"
    );
    assert!(
        report.contains("| 1 | skipped | passed | changes requested | no |"),
        "{report}"
    );
    assert!(
        report.contains("| 2 | skipped | passed | changes requested | no |"),
        "{report}"
    );
    // The round count lives in the run directory's state file.
    let run = only_dir(&lab.p.path(".loopx/build-audit-fix/runs"));
    let state = fs::read_to_string(run.join("state")).unwrap();
    assert!(state.lines().any(|l| l == "round=2"), "{state}");
}

#[test]
fn build_audit_fix_an_approval_over_failing_checks_is_another_round_and_ends_unapproved() {
    let lab = build_audit_fix();
    // The auditor approves every time; the tests never pass.
    lab.reply(1, "echo hello > app.txt")
        .reply(2, APPROVE)
        .reply(3, "echo 'tried again' >> app.txt")
        .reply(4, APPROVE);
    lab.loopx(&[
        "run",
        "--log",
        "run.jsonl",
        "--retry",
        "2",
        "--retry-delay",
        "0",
        "build-audit-fix",
    ])
    .env("MAX_ROUNDS", "2")
    .env("TEST_CMD", "echo 'expected fixed'; false")
    .status(1)
    .stderr_contains(
        "build-audit-fix: not approved after 2 rounds (MAX_ROUNDS=2): \
         the auditor approved, but the checks still fail\n",
    )
    .stderr_contains("loopx: error: script build-audit-fix:report exited with code 1")
    // A verdict marked permanent is not kept: no resume could change it.
    .stderr_lacks("loopx resume")
    .run();
    let log = lab.p.path("run.jsonl");
    // Not retried: the outcome is final.
    assert_eq!(
        path_taken(&log),
        [
            "build-audit-fix:index",
            "build-audit-fix:checks",
            "build-audit-fix:audit",
            "build-audit-fix:fix",
            "build-audit-fix:checks",
            "build-audit-fix:audit",
            "build-audit-fix:report"
        ]
    );
    // The fixer is told the checks must pass.
    let fix = lab.prompt(3);
    assert!(
        fix.contains("A round passes only when the checks pass and the auditor approves"),
        "{fix}"
    );
    assert!(fix.contains("## Tests: FAILED with exit code 1"), "{fix}");
    let report = lab.p.read(BAF_REPORT);
    assert!(
        report.contains(
            "- Result: **not approved** after 2 rounds (MAX_ROUNDS=2): \
             the auditor approved, but the checks still fail\n"
        ),
        "{report}"
    );
    for r in 1..=2 {
        assert!(
            report.contains(&format!(
                "| {r} | skipped | failed (exit 1) | approved | no |"
            )),
            "{report}"
        );
    }
    assert!(
        report_row(&report, "3").ends_with(" | approved, but the checks fail |"),
        "{report}"
    );
}

#[test]
fn build_audit_fix_stops_for_good_when_fix_rounds_change_nothing() {
    let lab = build_audit_fix();
    let root = lab.p.root();
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "start"]);
    lab.reply(1, "echo hello > app.txt").reply(0, REJECT);
    // The fixer gets REJECT's text too: it changes nothing.
    lab.loopx(&[
        "run",
        "--log",
        "run.jsonl",
        "--retry",
        "2",
        "--retry-delay",
        "0",
        "build-audit-fix",
    ])
    .env("MAX_ROUNDS", "10")
    .env("NO_PROGRESS_LIMIT", "2")
    .status(1)
    .stderr_contains(
        "build-audit-fix: the fix step failed: no progress in 2 fix attempts in a row \
         (NO_PROGRESS_LIMIT=2): the same commit (",
    )
    .stderr_contains("the fixer finished without changing anything; stopping for good")
    .run();
    let log = lab.p.path("run.jsonl");
    let path = path_taken(&log);
    assert_eq!(path.last().map(String::as_str), Some("build-audit-fix:fix"));
    // Two fixes that changed nothing, the second not retried.
    assert_eq!(
        path.iter()
            .filter(|t| t.starts_with("build-audit-fix:fix"))
            .count(),
        2,
        "{path:?}"
    );
    let end = events(&log)
        .into_iter()
        .rev()
        .find(|e| e["event"] == "script_end")
        .expect("a script_end");
    assert_eq!(end["class"], "no_progress", "{end}");
    let report = lab.p.read(BAF_REPORT);
    assert!(report.contains("no progress in 2 fix attempts"), "{report}");
    // The user's checkout shows nothing of the run: the report and the
    // run directory are ignored.
    assert_eq!(
        git(root, &["status", "--porcelain"]),
        "?? app.txt\n?? run.jsonl\n"
    );
}

#[test]
fn build_audit_fix_worktree_commits_each_step_on_a_new_branch_and_leaves_the_checkout_alone() {
    let lab = build_audit_fix();
    let root = lab.p.root();
    lab.p.file("notes.txt", "mine\n");
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "the user's work"]);
    // Uncommitted work of the user, which must stay as it is.
    lab.p.file("notes.txt", "mine, still editing\n");
    let head = git(root, &["rev-parse", "HEAD"]);
    let status = git(root, &["status", "--porcelain"]);

    lab.reply(1, "echo hello > app.txt")
        .reply(2, REJECT)
        .reply(3, "echo fixed >> app.txt")
        .reply(4, APPROVE);
    lab.loopx(&["run", "--log", "run.jsonl", "build-audit-fix"])
        .env("WORKTREE", "1")
        .env("TEST_CMD", "grep -q fixed app.txt")
        .stderr_contains("build-audit-fix: removed the worktree")
        .run();

    // The checkout: same commit, same branch, same files; the one new
    // file is the run log this test asked for (the report is in the
    // workflow's directory, which its .gitignore keeps out).
    assert_eq!(git(root, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(root, &["branch", "--show-current"]), "main\n");
    assert_eq!(lab.p.read("notes.txt"), "mine, still editing\n");
    assert!(!lab.p.exists("app.txt"));
    assert_eq!(
        git(root, &["status", "--porcelain"]),
        format!("{status}?? run.jsonl\n")
    );

    // The agents worked in a worktree outside the project.
    let run_id = events(&lab.p.path("run.jsonl"))[0]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let wt = root
        .parent()
        .unwrap()
        .join(format!("loopx-build-audit-fix-{run_id}"));
    for n in 1..=4 {
        assert_eq!(lab.agent_file("cwd", n).trim(), wt.to_str().unwrap());
    }
    assert!(!wt.exists(), "the worktree is removed at the end");
    assert_eq!(
        git(root, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );

    // Its branch has a commit per step that changed something.
    let branch = format!("loopx/build-audit-fix-{run_id}");
    assert_eq!(
        git(
            root,
            &["log", "--format=%s", &format!("{}..{branch}", head.trim())]
        ),
        "build-audit-fix: fix (round 1)\nbuild-audit-fix: build\n"
    );
    assert_eq!(
        git(root, &["show", &format!("{branch}:app.txt")]),
        "hello\nfixed\n"
    );
    assert_eq!(
        git(root, &["show", &format!("{branch}:notes.txt")]),
        "mine\n"
    );
    let report = lab.p.read(BAF_REPORT);
    assert!(
        report.contains(&format!(
            "- Branch: `{branch}`, from commit {}",
            head.trim()
        )),
        "{report}"
    );
}

#[test]
fn build_audit_fix_agent_that_hangs_times_out_and_the_report_says_where() {
    // --timeout holds for every step: 2s leaves the steps before the hang
    // ample time on a loaded machine.
    let lab = build_audit_fix();
    lab.reply(1, "echo hello > app.txt")
        .reply(2, "echo reviewing; sleep 30");
    lab.loopx(&[
        "run",
        "--log",
        "run.jsonl",
        "--timeout",
        "2s",
        "build-audit-fix",
    ])
    .status(124)
    .stderr_contains("build-audit-fix:audit timed out after 2s")
    .run();
    let log = lab.p.path("run.jsonl");
    assert_eq!(
        path_taken(&log),
        [
            "build-audit-fix:index",
            "build-audit-fix:checks",
            "build-audit-fix:audit"
        ]
    );
    let report = lab.p.read(BAF_REPORT);
    assert!(
        report
            .contains("- Result: stopped: the audit step was stopped (timed out or interrupted)\n"),
        "{report}"
    );
    assert!(
        report_row(&report, "3").ends_with(" | stopped (timed out or interrupted) |"),
        "{report}"
    );
}

#[test]
fn build_audit_fix_needs_a_task_and_a_sane_max_rounds() {
    let lab = Lab::new(&["build-audit-fix"]);
    lab.loopx(&["run", "build-audit-fix"])
        .status(1)
        .stderr_contains("TASK.md: write the task there, or set TASK_FILE")
        .run();
    lab.p.file("TASK.md", TASK);
    lab.loopx(&["run", "build-audit-fix"])
        .env("MAX_ROUNDS", "0")
        .status(1)
        .stderr_contains("MAX_ROUNDS must be a positive integer, not '0'")
        .run();
    lab.loopx(&["run", "build-audit-fix"])
        .env("WORKTREE", "1")
        .status(1)
        .stderr_contains("WORKTREE=1 needs the project to be in a git repository")
        .run();
    assert_eq!(lab.agent_calls(), 0);
}

// ======================================================= issue-runner

/// A lab with issue-runner, a forge repository (origin.git with a README)
/// and these issues: (number, author, created, labels).
pub(crate) fn issue_runner(issues: &[(u32, &str, &str, &str)]) -> Lab {
    let lab = Lab::new(&["issue-runner"]);
    let origin = lab.gh.join("origin.git");
    git(&lab.gh, &["init", "-q", "--bare", origin.to_str().unwrap()]);
    let seed = lab.gh.join("seed");
    git(
        &lab.gh,
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            seed.to_str().unwrap(),
        ],
    );
    fs::write(seed.join("README"), "the forge's repository\n").unwrap();
    git(&seed, &["add", "-A"]);
    git(&seed, &["commit", "-qm", "init"]);
    git(&seed, &["push", "-q", "origin", "HEAD"]);
    for (n, author, created, labels) in issues {
        let d = lab.gh.join(format!("issues/{n}"));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("title"), format!("Issue {n}\n")).unwrap();
        fs::write(
            d.join("body"),
            format!("The body of issue {n}.\nSecond line.\n"),
        )
        .unwrap();
        fs::write(d.join("author"), format!("{author}\n")).unwrap();
        fs::write(d.join("created"), format!("{created}\n")).unwrap();
        fs::write(d.join("labels"), labels.replace(',', "\n") + "\n").unwrap();
    }
    lab
}

impl Lab {
    pub(crate) fn runner(&self, args: &[&str]) -> Run {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.push("issue-runner");
        self.loopx(&all)
            .env("REPO", "o/r")
            .env("ALLOWED_AUTHORS", "alice, bob")
    }

    pub(crate) fn labels(&self, n: u32) -> Vec<String> {
        fs::read_to_string(self.gh.join(format!("issues/{n}/labels")))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    pub(crate) fn comments(&self, n: u32) -> String {
        fs::read_to_string(self.gh.join(format!("issues/{n}/comments"))).unwrap_or_default()
    }

    /// The fake gh's calls, emptied.
    fn take_gh_calls(&self) -> Vec<String> {
        let f = self.gh.join("calls");
        let calls = fs::read_to_string(&f).unwrap_or_default();
        let _ = fs::remove_file(&f);
        calls.lines().map(str::to_string).collect()
    }

    fn state(&self, rel: &str) -> PathBuf {
        self.p.path(&format!(".loopx/issue-runner/state/{rel}"))
    }
}

const LIST: &str = r#"issue list -R o/r --state open --label agent:todo --limit 1000 --json number\,author\,createdAt --jq .\[\]\ \|\ \"\\\(.createdAt\)\ \\\(.number\)\ \\\(.author.login\)\""#;

fn three_issues() -> Lab {
    issue_runner(&[
        (3, "alice", "2024-01-02T00:00:00Z", "agent:todo"),
        (5, "mallory", "2024-01-01T00:00:00Z", "agent:todo,bug"),
        (8, "bob", "2024-01-03T00:00:00Z", "agent:todo"),
        (9, "alice", "2023-12-01T00:00:00Z", "bug"),
    ])
}

#[test]
fn issue_runner_takes_the_oldest_issue_of_an_allowed_author_and_labels_it_done() {
    let lab = three_issues();
    lab.reply(
        1,
        "echo 'opened pull request #10'; ls > files.txt; echo 'ROUTE: done'",
    );
    lab.runner(&["--log", "run.jsonl", "--timeout", "30s"])
        .stdout("")
        .stderr_contains("issue-runner: #5: its author mallory is not in ALLOWED_AUTHORS; skipped")
        .stderr_contains("issue-runner: #3 moved to agent:done")
        .run();
    assert_eq!(
        path_taken(&lab.p.path("run.jsonl")),
        [
            "issue-runner:index",
            "issue-runner:work",
            "issue-runner:finish"
        ]
    );
    let run_id = events(&lab.p.path("run.jsonl"))[0]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let clone = lab
        .p
        .path(&format!(".loopx/issue-runner/runs/{run_id}/clone"));
    assert_eq!(
        lab.take_gh_calls(),
        [
            LIST.to_string(),
            "issue edit 3 -R o/r --add-label agent:working --remove-label agent:todo".into(),
            format!("repo clone o/r {} -- --depth 1", clone.display()),
            "issue view 3 -R o/r --json title --jq .title".into(),
            "issue view 3 -R o/r --json body --jq .body".into(),
            "issue edit 3 -R o/r --add-label agent:done --remove-label agent:working".into(),
        ]
    );
    assert_eq!(lab.labels(3), ["agent:done"]);
    assert_eq!(lab.labels(5), ["agent:todo", "bug"]);
    assert_eq!(lab.labels(8), ["agent:todo"]);
    assert_eq!(lab.comments(3), "", "no comment when done");

    // The agent ran once, in a clean clone, on the issue's title and body.
    assert_eq!(lab.agent_calls(), 1);
    assert_eq!(lab.agent_file("cwd", 1).trim(), clone.to_str().unwrap());
    let prompt = lab.prompt(1);
    assert!(prompt.contains("issue #3 of o/r"), "{prompt}");
    assert!(
        prompt.contains("<issue-title>\nIssue 3\n</issue-title>"),
        "{prompt}"
    );
    assert!(
        prompt.contains("<issue-body>\nThe body of issue 3.\nSecond line.\n</issue-body>"),
        "{prompt}"
    );
    assert!(prompt.contains("ROUTE: done"), "{prompt}");
    assert!(
        !clone.exists(),
        "the clone is removed once the issue is finished"
    );
    let agent_log = clone.parent().unwrap().join("agent.log");
    assert!(fs::read_to_string(agent_log)
        .unwrap()
        .contains("opened pull request #10"));
    assert!(!lab.state("claims/3").exists());
    assert_eq!(
        fs::read_to_string(lab.state("starts/3"))
            .unwrap()
            .lines()
            .count(),
        1
    );

    // The next run (cron's next tick) takes the next one: #8 by bob.
    lab.reply(0, "echo done; echo ROUTE: done");
    lab.runner(&[])
        .stderr_contains("issue-runner: #8 moved to agent:done")
        .run();
    assert_eq!(lab.labels(8), ["agent:done"]);
    // And then there is nothing left to take.
    lab.runner(&["--log", "last.jsonl"])
        .stderr_contains("issue-runner: no open issue labeled agent:todo to take")
        .run();
    assert_eq!(
        path_taken(&lab.p.path("last.jsonl")),
        ["issue-runner:index"]
    );
    assert_eq!(lab.agent_calls(), 2);
}

#[test]
fn issue_runner_maps_route_tokens_to_labels_and_unknown_ones_to_a_human() {
    let lab = issue_runner(&[
        (1, "alice", "2024-01-01T00:00:00Z", "agent:todo"),
        (2, "bob", "2024-01-02T00:00:00Z", "agent:todo"),
        (4, "bob", "2024-01-04T00:00:00Z", "agent:todo"),
    ]);
    lab.reply(1, "echo 'needs a design review'; echo '**ROUTE: review**'")
        .reply(2, "echo 'this is a different thing'; echo 'ROUTE: banana'")
        .reply(
            3,
            "echo 'the spec says nothing about it'; echo 'ROUTE: needs-human'",
        );
    let routes = "review = agent:review, wontfix=agent:wontfix";
    for moved in [
        "#1 moved to agent:review",
        "#2 moved to agent:needs-human",
        "#4 moved to agent:needs-human",
    ] {
        lab.runner(&[])
            .env("ROUTES", routes)
            .stderr_contains(&format!("issue-runner: {moved}"))
            .run();
    }
    assert_eq!(lab.labels(1), ["agent:review"]);
    assert_eq!(lab.labels(2), ["agent:needs-human"]);
    assert_eq!(lab.labels(4), ["agent:needs-human"]);
    // The agent is told about the extra routes.
    assert!(lab
        .prompt(1)
        .contains("Other routes you may use: review, wontfix"));
    assert_eq!(lab.comments(1), "");
    let unknown = lab.comments(2);
    assert!(
        unknown.starts_with(
            "issue-runner: the agent asked for the route 'banana', which is not one of: \
             done, needs-human, review, wontfix. The end of its output:"
        ),
        "{unknown}"
    );
    assert!(unknown.contains("this is a different thing"), "{unknown}");
    let human = lab.comments(4);
    assert!(
        human.starts_with("issue-runner: the agent asked for a person to take over."),
        "{human}"
    );
    assert!(human.contains("the spec says nothing about it"), "{human}");
}

#[test]
fn issue_runner_agent_that_hangs_times_out_and_the_next_run_hands_the_issue_to_a_human() {
    let lab = three_issues();
    lab.reply(1, "echo 'looking at it'; sleep 30");
    lab.runner(&["--log", "run.jsonl", "--timeout", "2s"])
        .status(124)
        .stderr_contains("issue-runner:work timed out after 2s")
        .run();
    assert_eq!(
        path_taken(&lab.p.path("run.jsonl")),
        ["issue-runner:index", "issue-runner:work"]
    );
    // Still claimed, and in progress.
    assert_eq!(lab.labels(3), ["agent:working"]);
    assert!(lab.state("claims/3").is_file());
    lab.take_gh_calls();

    // The next run finishes it first (no restart left), then takes the
    // next issue.
    lab.reply(2, "echo ROUTE: done");
    lab.runner(&["--timeout", "30s"])
        .env("MAX_RESTARTS", "0")
        .stderr_contains("issue-runner: #3 moved to agent:needs-human")
        .stderr_contains("issue-runner: #8 moved to agent:done")
        .run();
    assert_eq!(lab.labels(3), ["agent:needs-human"]);
    let comment = lab.comments(3);
    assert!(
        comment.starts_with("issue-runner: the run that took this issue (loopx run "),
        "{comment}"
    );
    assert!(
        comment.contains("ended before the agent finished: it failed, timed out or was stopped.")
    );
    let calls = lab.take_gh_calls();
    assert_eq!(
        calls[1],
        "issue edit 3 -R o/r --add-label agent:needs-human --remove-label agent:working"
    );
    assert!(
        calls[0].starts_with("issue comment 3 -R o/r --body "),
        "{calls:?}"
    );
}

#[test]
fn issue_runner_restarts_a_run_that_died_and_the_agent_carries_its_session_on() {
    let lab = three_issues();
    lab.reply(1, "echo 'looking at it'; sleep 30");
    lab.runner(&["--timeout", "2s"])
        .status(124)
        .stderr_contains("issue-runner:work timed out after 2s")
        .run();
    // The status listing: #3 is in flight, its run gone.
    lab.loopx(&["run", "issue-runner:status"])
        .env("REPO", "o/r")
        .env("ALLOWED_AUTHORS", "alice")
        .stderr_contains("#3  gone      run ")
        .stderr_contains(", restarts 0: the next run restarts it\n")
        .stderr_contains("issue-runner: 1 issue(s) in flight (MAX_CONCURRENT=1)\n")
        .run();
    // The next run restarts it: the same session (Claude Code's --resume).
    lab.reply(2, "echo 'picked it up again'; echo ROUTE: done");
    lab.runner(&["--log", "run.jsonl", "--timeout", "30s"])
        .stderr_contains("issue-runner: restarting #3, left by run ")
        .stderr_contains("(restart 1 of MAX_RESTARTS=1): its agent's session carries on")
        .stderr_contains("issue-runner: #3 moved to agent:done")
        .stderr_contains("issue-runner: carrying on claude's session")
        .run();
    assert_eq!(
        path_taken(&lab.p.path("run.jsonl")),
        [
            "issue-runner:index",
            "issue-runner:work",
            "issue-runner:finish"
        ]
    );
    let args = lab.agent_file("args", 2);
    assert!(args.contains("--resume\nfake\n"), "{args}");
    assert_eq!(lab.labels(3), ["agent:done"]);
    assert!(!lab.state("claims/3").exists());
    assert!(
        !lab.state("sessions/3").exists(),
        "the session goes with the issue"
    );
    // Restarts are not starts.
    assert_eq!(
        fs::read_to_string(lab.state("starts/3"))
            .unwrap()
            .lines()
            .count(),
        1
    );

    // A run that dies past MAX_RESTARTS hands its issue to a human.
    lab.reply(3, "echo 'again'; sleep 30").reply(4, "sleep 30");
    for _ in 0..2 {
        lab.runner(&["--timeout", "2s"])
            .status(124)
            .stderr_contains("issue-runner:work timed out after 2s")
            .run();
    }
    lab.reply(0, "echo ROUTE: done");
    lab.runner(&[])
        .stderr_contains("issue-runner: #8 moved to agent:needs-human")
        .stderr_contains("issue-runner: no open issue labeled agent:todo to take")
        .run();
    assert!(
        lab.comments(8)
            .contains("and it was restarted 1 time(s) (MAX_RESTARTS=1)."),
        "{}",
        lab.comments(8)
    );
}

#[test]
fn issue_runner_works_on_up_to_max_concurrent_issues_each_under_its_own_lock() {
    let lab = three_issues();
    // Two issues at once: each agent says it started, then waits for the
    // test to let it finish.
    let both = "touch \"$FAKE_AGENT/started-$$\"; \
                i=0; while [ ! -e \"$FAKE_AGENT/release\" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; \
                echo ROUTE: done";
    lab.reply(0, both);
    let a = lab
        .runner(&["--timeout", "60s"])
        .env("MAX_CONCURRENT", "2")
        .stderr_contains("issue-runner: #3 moved to agent:done")
        .start();
    // The first holds #3 before the second starts picking.
    let claim = lab.state("claims/3");
    crate::util::procs::wait_until("the first run claims #3", || claim.exists());
    let b = lab
        .runner(&["--timeout", "60s"])
        .env("MAX_CONCURRENT", "2")
        .stderr_contains("issue-runner: #8 moved to agent:done")
        .start();
    // A third run while both work: busy.
    crate::util::procs::wait_until("both agents run", || {
        names_in(&lab.agent)
            .iter()
            .filter(|n| n.starts_with("started-"))
            .count()
            == 2
    });
    assert!(lab.state("claims/8").exists());
    lab.runner(&[])
        .env("MAX_CONCURRENT", "2")
        .stderr_contains("issue-runner: 2 issue(s) in flight (MAX_CONCURRENT=2): nothing taken")
        .run();
    fs::write(lab.agent.join("release"), "").expect("release the agents");
    a.finish();
    b.finish();
    assert_eq!(lab.labels(3), ["agent:done"]);
    assert_eq!(lab.labels(8), ["agent:done"]);
}

// ------------------------------------------------- issue-runner:serve

/// An agent's answer for serve's tests: it notes its issue's number
/// (`started-<n>`, and its pid in `pid-<n>`), then waits until the test
/// releases it (`release-<n>` or `release-all`; at most 60 s, so a
/// failing test cannot hang), and routes `done`.
const HELD: &str = "n=$(printf '%s\\n' \"$PROMPT\" | sed -n 's/^You are working on issue #\\([0-9]*\\) of .*/\\1/p'); \
                    echo $$ >\"$FAKE_AGENT/pid-$n\"; touch \"$FAKE_AGENT/started-$n\"; \
                    i=0; while [ ! -e \"$FAKE_AGENT/release-$n\" ] && [ ! -e \"$FAKE_AGENT/release-all\" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; \
                    echo \"worked on #$n\"; echo ROUTE: done";

impl Lab {
    /// `loopx run <args> issue-runner:serve`.
    fn serve(&self, args: &[&str]) -> Run {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.push("issue-runner:serve");
        self.loopx(&all)
            .env("REPO", "o/r")
            .env("ALLOWED_AUTHORS", "alice, bob")
    }

    /// The issues whose agent has started (`started-<n>`), sorted.
    fn started(&self) -> Vec<u32> {
        let mut n: Vec<u32> = names_in(&self.agent)
            .iter()
            .filter_map(|f| f.strip_prefix("started-")?.parse().ok())
            .collect();
        n.sort_unstable();
        n
    }

    /// Every live process of this lab: those whose environment holds its
    /// $FAKE_AGENT (loopx runs, their scripts, agents and what they run).
    fn processes(&self) -> Vec<i32> {
        let mark = format!("FAKE_AGENT={}", self.agent.display()).into_bytes();
        let mut found = Vec::new();
        for entry in fs::read_dir("/proc").expect("read /proc").flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(env) = fs::read(entry.path().join("environ")) else {
                continue;
            };
            if env.split(|&b| b == 0).any(|v| v == mark) && crate::util::procs::alive(pid) {
                found.push(pid);
            }
        }
        found
    }
}

fn four_issues() -> Lab {
    issue_runner(&[
        (1, "alice", "2024-01-01T00:00:00Z", "agent:todo"),
        (2, "bob", "2024-01-02T00:00:00Z", "agent:todo"),
        (3, "alice", "2024-01-03T00:00:00Z", "agent:todo"),
        (4, "bob", "2024-01-04T00:00:00Z", "agent:todo"),
    ])
}

#[test]
fn issue_runner_serve_once_works_on_max_concurrent_issues_at_once_each_in_its_own_run() {
    let lab = four_issues();
    lab.reply(0, HELD);
    let mut serve = lab
        .serve(&["--log", "serve.jsonl"])
        .env("SERVE_ONCE", "1")
        .env("MAX_CONCURRENT", "3")
        .env("WORKER_ARGS", "--timeout 60s --retry 1")
        .stderr_contains("issue-runner: serve: 4 issue(s) taken by ");
    for n in 1..=4 {
        serve = serve
            .stderr_contains(&format!("ended: #{n}, run "))
            .stderr_contains(&format!(", exit 0 (#{n}: agent:done)\n"));
    }
    let serve = serve.start();
    // Three agents at once, on the three oldest issues; the fourth waits.
    procs_wait("three agents run", || lab.started() == [1, 2, 3]);
    assert_eq!(lab.labels(4), ["agent:todo"]);
    for n in 1..=3 {
        assert_eq!(lab.labels(n), ["agent:working"]);
    }
    // The status lists them, each with its own run and loopx, and its
    // worker's output.
    let log = lab.p.path("serve.jsonl");
    let serve_id = run_id(&log);
    let dir = lab
        .p
        .path(&format!(".loopx/issue-runner/runs/serve-{serve_id}"));
    let status = lab
        .loopx(&["run", "issue-runner:status"])
        .env("REPO", "o/r")
        .env("ALLOWED_AUTHORS", "alice")
        .env("MAX_CONCURRENT", "3")
        .stderr_contains("issue-runner: 3 issue(s) in flight (MAX_CONCURRENT=3)\n")
        .run();
    let mut runs = Vec::new();
    for n in 1..=3 {
        let line = status
            .stderr
            .lines()
            .find(|l| l.starts_with(&format!("#{n}  running   run ")))
            .unwrap_or_else(|| panic!("#{n} not running: {}", status.stderr));
        assert!(
            line.contains(&format!("; its output: {}/worker-", dir.display())),
            "{line}"
        );
        runs.push(line.split_whitespace().nth(3).unwrap().to_string());
    }
    runs.sort();
    runs.dedup();
    assert_eq!(runs.len(), 3, "three runs: {runs:?}");
    // One ends: the fourth issue is taken, and three run at once again.
    fs::write(lab.agent.join("release-1"), "").unwrap();
    procs_wait("the fourth agent runs", || lab.started() == [1, 2, 3, 4]);
    assert_eq!(lab.labels(1), ["agent:done"]);
    for n in 2..=4 {
        assert_eq!(lab.labels(n), ["agent:working"]);
        assert!(lab.state(&format!("claims/{n}")).is_file());
    }
    fs::write(lab.agent.join("release-all"), "").unwrap();
    let out = serve.finish();
    for n in 1..=4 {
        assert_eq!(lab.labels(n), ["agent:done"], "#{n}");
    }
    assert!(names_in(&lab.state("claims")).is_empty());
    // serve's run: one script, stopped with its summary.
    assert_eq!(path_taken(&log), ["issue-runner:serve"]);
    assert_eq!(run_end(&log)["exit_code"], 0);
    // Each worker: a line when it starts, its output in its own log, its
    // own run log; four different runs took the four issues.
    let workers = out
        .stderr
        .lines()
        .filter(|l| l.contains(": serve: worker ") && l.contains(" started (loopx pid "))
        .count();
    assert!(
        workers >= 5,
        "four took an issue, one found none: {}",
        out.stderr
    );
    assert!(out
        .stderr
        .contains(&format!("its output: {}/worker-1.log\n", dir.display())));
    assert!(
        out.stderr.contains(": no issue to take, run "),
        "{}",
        out.stderr
    );
    let mut took = Vec::new();
    for k in 1..=workers {
        let text = fs::read_to_string(dir.join(format!("worker-{k}.log"))).unwrap();
        let id = run_id(&dir.join(format!("worker-{k}.jsonl")));
        assert_ne!(id, serve_id);
        if let Some(n) =
            (1..=4).find(|n| text.contains(&format!("issue-runner: #{n} moved to agent:done")))
        {
            took.push((n, id));
        }
    }
    took.sort();
    assert_eq!(took.iter().map(|t| t.0).collect::<Vec<_>>(), [1, 2, 3, 4]);
    let mut ids: Vec<&String> = took.iter().map(|t| &t.1).collect();
    ids.dedup();
    assert_eq!(ids.len(), 4, "{took:?}");
}

/// `wait_until`, shorter.
fn procs_wait(what: &str, cond: impl FnMut() -> bool) {
    crate::util::procs::wait_until(what, cond);
}

#[test]
fn issue_runner_serve_goes_on_after_a_worker_fails_and_the_next_one_restarts_its_issue() {
    let lab = three_issues();
    // Its settings are checked before any worker starts.
    lab.serve(&[])
        .env("WORKER_ARGS", "--timeout 1m --log w.jsonl")
        .env("SERVE_POLL", "soon")
        .status(1)
        .stderr_contains("issue-runner: serve: SERVE_POLL must be a duration")
        .stderr_contains("issue-runner: serve: WORKER_ARGS may not hold --log")
        .run();
    assert!(lab.take_gh_calls().is_empty());
    // The first worker cannot clone: it fails, #3 stays claimed; the next
    // worker restarts it, the one after takes #8, the last finds nothing.
    lab.reply(0, "echo ROUTE: done");
    lab.gh_fails("repo clone 1");
    lab.serve(&[])
        .env("SERVE_ONCE", "1")
        .stderr_contains("issue-runner: serve: worker 1 ended: #3, run ")
        .stderr_contains(", exit 1 (claimed still: the next worker or run picks it up)\n")
        .stderr_contains("issue-runner: serve: worker 2 ended: #3, run ")
        .stderr_contains("issue-runner: serve: worker 3 ended: #8, run ")
        .stderr_contains("issue-runner: serve: worker 4 ended: no issue to take, run ")
        .stderr_contains("issue-runner: serve: 3 issue(s) taken by 4 worker(s), 1 failed\n")
        .run();
    assert_eq!(lab.labels(3), ["agent:done"]);
    assert_eq!(lab.labels(8), ["agent:done"]);
    let runs = lab.p.path(".loopx/issue-runner/runs");
    let serve = names_in(&runs)
        .into_iter()
        .find(|n| n.starts_with("serve-"))
        .expect("serve's directory");
    let log =
        |k: usize| fs::read_to_string(runs.join(&serve).join(format!("worker-{k}.log"))).unwrap();
    assert!(
        log(1).contains("issue-runner: cloning o/r failed"),
        "{}",
        log(1)
    );
    assert!(
        log(2).contains("issue-runner: restarting #3, left by run "),
        "{}",
        log(2)
    );
}

#[test]
fn issue_runner_serve_waits_when_idle_and_looks_again_after_serve_poll() {
    let lab = issue_runner(&[(9, "alice", "2023-12-01T00:00:00Z", "bug")]);
    lab.reply(0, "echo ROUTE: done");
    let waits = |log: &Path| {
        fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(r#""event":"wait""#))
            .count()
    };
    // Nothing to take: a loopx wait, which loopx status shows, and which a
    // SIGTERM ends at once.
    let idle = lab.p.path("idle.jsonl");
    let serve = lab
        .serve(&["--log", "idle.jsonl"])
        .status(143)
        .stderr_contains("issue-runner: serve: 0 issue(s) taken by 1 worker(s), 0 failed\n")
        .stderr_contains("issue-runner: serve: looking again in 5m\n")
        .start();
    procs_wait("serve waits", || waits(&idle) == 1);
    let status = lab
        .loopx(&["status", "--json"])
        .stdout_any("the runs, read below")
        .run();
    let runs: Value = serde_json::from_str(&status.stdout).expect("status JSON");
    let me = runs
        .as_array()
        .expect("an array")
        .iter()
        .find(|r| r["pid"] == serve.pid())
        .unwrap_or_else(|| panic!("serve not in {runs}"));
    assert_eq!(me["script"], "issue-runner:serve", "{me}");
    assert_eq!(me["state"], "waiting", "{me}");
    let pid = serve.pid();
    serve.signal(libc::SIGTERM);
    serve.finish();
    crate::util::procs::assert_group_gone(pid);
    assert_eq!(run_end(&idle)["reason"], "signal");
    assert_eq!(path_taken(&idle), ["issue-runner:serve"]);

    // After SERVE_POLL it looks again, and takes an issue labeled since.
    let log = lab.p.path("serve.jsonl");
    let serve = lab
        .serve(&["--log", "serve.jsonl"])
        .env("SERVE_POLL", "1s")
        .status(143)
        .stderr_contains("issue-runner: serve: looking again in 1s\n")
        .stderr_contains("ended: #7, run ")
        .stderr_contains("issue-runner: serve: 1 issue(s) taken by 2 worker(s), 0 failed\n")
        .start();
    procs_wait("serve waits", || waits(&log) >= 1);
    let d = lab.gh.join("issues/7");
    fs::create_dir_all(&d).unwrap();
    // The labels last: the fake gh lists the issue from then on.
    for (f, text) in [
        ("title", "Issue 7\n"),
        ("body", "Seven.\n"),
        ("author", "bob\n"),
        ("created", "2024-02-01T00:00:00Z\n"),
        ("labels", "agent:todo\n"),
    ] {
        fs::write(d.join(f), text).unwrap();
    }
    procs_wait("#7 is done", || lab.labels(7) == ["agent:done"]);
    let seen = waits(&log);
    procs_wait("serve waits again", || waits(&log) > seen);
    serve.signal(libc::SIGTERM);
    serve.finish();
    let taken = path_taken(&log);
    assert!(
        taken.len() >= 2 && taken.iter().all(|t| t == "issue-runner:serve"),
        "{taken:?}"
    );
}

#[test]
fn issue_runner_serve_stopped_by_sigterm_ends_every_worker_and_leaves_no_process() {
    serve_stopped_by(libc::SIGTERM);
}

#[test]
fn issue_runner_serve_stopped_by_sigint_ends_every_worker_and_leaves_no_process() {
    serve_stopped_by(libc::SIGINT);
}

fn serve_stopped_by(sig: i32) {
    let lab = three_issues();
    lab.reply(0, HELD);
    let serve = lab
        .serve(&[])
        .env("MAX_CONCURRENT", "2")
        .status(128 + sig)
        .stderr_contains("issue-runner: serve: stopping 2 worker(s)\n")
        .stderr_contains("ended: #3, run ")
        .stderr_contains("ended: #8, run ")
        .stderr_contains(&format!(
            ", exit {} (claimed still: the next worker or run picks it up)\n",
            128 + sig
        ))
        .start();
    procs_wait("both agents run", || lab.started() == [3, 8]);
    let before = lab.processes();
    let agents: Vec<i32> = [3, 8]
        .iter()
        .map(|n| crate::util::procs::read_pid(&lab.p, &format!("../agent/pid-{n}")))
        .collect();
    for a in &agents {
        assert!(before.contains(a), "{a} in {before:?}");
    }
    let pid = serve.pid();
    serve.signal(sig);
    let out = serve.finish();
    // Each worker ended its agent's step with the signal, in loopx's grace
    // period (not SIGKILL), and exited as loopx does for it.
    let runs = lab.p.path(".loopx/issue-runner/runs");
    let serve_dir = names_in(&runs)
        .into_iter()
        .find(|n| n.starts_with("serve-"))
        .expect("serve's directory");
    let name = if sig == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    for k in 1..=2 {
        let log = runs.join(&serve_dir).join(format!("worker-{k}.jsonl"));
        let work = events(&log)
            .into_iter()
            .find(|e| e["event"] == "script_end" && e["target"] == "issue-runner:work")
            .expect("the work step ended");
        assert_eq!(work["signal"], name, "{work}");
        assert_eq!(run_end(&log)["exit_code"], 128 + sig);
    }
    assert_eq!(
        out.stderr
            .matches(&format!(", exit {} (claimed still", 128 + sig))
            .count(),
        2,
        "{}",
        out.stderr
    );
    // Nothing of the run is left: not its group, not a worker's loopx, not
    // an agent.
    crate::util::procs::assert_group_gone(pid);
    let left: Vec<i32> = before
        .iter()
        .copied()
        .filter(|&p| crate::util::procs::alive(p))
        .collect();
    assert!(left.is_empty(), "outlived the serve run: {left:?}");
    assert!(lab.processes().is_empty(), "{:?}", lab.processes());
    // Their issues stay claimed, in progress, for the next pick-up.
    for n in [3, 8] {
        assert_eq!(lab.labels(n), ["agent:working"]);
        assert!(lab.state(&format!("claims/{n}")).is_file());
    }
    lab.loopx(&["run", "issue-runner:status"])
        .env("REPO", "o/r")
        .env("ALLOWED_AUTHORS", "alice")
        .stderr_contains("#3  gone      run ")
        .stderr_contains("#8  gone      run ")
        .run();
}

impl Lab {
    fn labels_path(&self, n: u32) -> PathBuf {
        self.gh.join(format!("issues/{n}/labels"))
    }

    /// Makes the fake gh fail `what` ("issue edit", or "issue edit 2" for
    /// the 2nd call only), or nothing.
    fn gh_fails(&self, what: &str) {
        let _ = fs::remove_file(self.gh.join("fail"));
        for f in names_in(&self.gh)
            .iter()
            .filter(|f| f.starts_with("count-"))
        {
            fs::remove_file(self.gh.join(f)).expect("reset a call count");
        }
        if !what.is_empty() {
            fs::write(self.gh.join("fail"), format!("{what}\n")).expect("write fail");
        }
    }
}

#[test]
fn issue_runner_stops_when_the_forge_cannot_list_issues() {
    let lab = three_issues();
    lab.gh_fails("issue list");
    lab.runner(&[])
        .status(1)
        .stderr_contains("fake gh: issue list failed: HTTP 502")
        .stderr_contains(
            "issue-runner: listing the open issues labeled agent:todo failed (gh issue list)",
        )
        .run();
    assert_eq!(lab.take_gh_calls(), [LIST]);
    assert_eq!(lab.agent_calls(), 0);
}

#[test]
fn issue_runner_takes_nothing_when_the_forge_cannot_move_the_label() {
    let lab = three_issues();
    lab.gh_fails("issue edit");
    lab.runner(&[])
        .status(1)
        .stderr_contains("issue-runner: could not move #3 to agent:working; it was not taken")
        .run();
    assert_eq!(lab.labels(3), ["agent:todo"]);
    assert!(!lab.state("claims/3").exists());
    assert!(!lab.state("starts/3").exists());
    assert_eq!(lab.agent_calls(), 0);
}

#[test]
fn issue_runner_that_cannot_clone_leaves_the_issue_to_the_next_run() {
    let lab = three_issues();
    lab.reply(0, "echo ROUTE: done");
    lab.gh_fails("repo clone");
    // The step fails (a --retry would clone again); the issue stays taken.
    lab.runner(&[])
        .status(1)
        .stderr_contains("issue-runner: cloning o/r failed")
        .run();
    assert_eq!(lab.labels(3), ["agent:working"]);
    assert!(lab.state("claims/3").is_file());
    assert_eq!(lab.agent_calls(), 0);

    lab.gh_fails("");
    lab.runner(&[])
        .env("MAX_RESTARTS", "0")
        .stderr_contains("issue-runner: #3 moved to agent:needs-human")
        .stderr_contains("issue-runner: #8 moved to agent:done")
        .run();
    assert_eq!(lab.labels(3), ["agent:needs-human"]);
    assert!(lab.comments(3).contains("ended before the agent finished"));
    assert_eq!(lab.labels(8), ["agent:done"], "then the next issue");
}

#[test]
fn issue_runner_that_cannot_label_the_outcome_leaves_it_to_the_next_run() {
    let lab = three_issues();
    lab.reply(0, "echo ROUTE: done");
    // The 1st edit takes the issue, the 2nd (the outcome) fails.
    lab.gh_fails("issue edit 2");
    lab.runner(&[])
        .status(1)
        .stderr_contains("issue-runner: could not move #3 to agent:done (the next run tries again)")
        .run();
    assert_eq!(lab.labels(3), ["agent:working"]);
    assert_eq!(lab.agent_calls(), 1);

    // The next run applies the outcome the agent reached, not needs-human.
    lab.gh_fails("");
    lab.runner(&[])
        .stderr_contains("issue-runner: #3 moved to agent:done")
        .run();
    assert_eq!(lab.labels(3), ["agent:done"]);
    assert_eq!(lab.comments(3), "");
    assert_eq!(lab.agent_calls(), 2, "and #8 after it");
}

#[test]
fn issue_runner_starts_an_issue_at_most_max_starts_per_hour() {
    let lab = three_issues();
    // The agent fails every time.
    lab.reply(0, "echo 'crashed' >&2; exit 1");
    let run = || {
        lab.runner(&[])
            .env("MAX_STARTS_PER_HOUR", "1")
            .env("MAX_RESTARTS", "0")
    };
    run()
        .status(1)
        .stderr_contains("issue-runner: #3: the agent failed (exit 32)")
        .run();
    // The next run hands #3 to a human, then takes #8 (which fails too).
    run()
        .status(1)
        .stderr_contains("issue-runner: #3 moved to agent:needs-human")
        .stderr_contains("issue-runner: #8: the agent failed (exit 32)")
        .run();
    assert_eq!(lab.labels(3), ["agent:needs-human"]);
    // Someone (or some bot) puts #3 back at once: it is not started again
    // within the hour.
    fs::write(lab.labels_path(3), "agent:todo\n").unwrap();
    run()
        .stderr_contains(
            "issue-runner: #3: started 1 time(s) in the last hour (MAX_STARTS_PER_HOUR=1); \
             skipped for now",
        )
        .stderr_contains("issue-runner: no open issue labeled agent:todo to take")
        .run();
    assert_eq!(lab.agent_calls(), 2, "#3 was not started again");
    assert_eq!(lab.labels(3), ["agent:todo"]);
    assert_eq!(lab.labels(8), ["agent:needs-human"]);
}

/// A PATH with the system's programs but not gh (which a machine that runs
/// tests/it/gh_forge.rs has in /usr/bin): links to /usr/bin's and /bin's.
fn path_without_gh(lab: &Lab) -> PathBuf {
    let dir = lab.p.root().parent().expect("temp dir").join("no-gh-bin");
    fs::create_dir_all(&dir).expect("mkdir no-gh-bin");
    for sys in ["/usr/bin", "/bin"] {
        for name in names_in(Path::new(sys)) {
            let link = dir.join(&name);
            if name != "gh" && link.symlink_metadata().is_err() {
                std::os::unix::fs::symlink(Path::new(sys).join(&name), link).expect("symlink");
            }
        }
    }
    dir
}

#[test]
fn issue_runner_reports_every_missing_setting_and_a_missing_gh_at_once() {
    let lab = three_issues();
    // No REPO, no ALLOWED_AUTHORS, a bad MAX_STARTS_PER_HOUR, and no gh on
    // PATH: one run names all four, and how to get gh.
    lab.loopx(&["run", "issue-runner"])
        .env("PATH", path_without_gh(&lab))
        .env("MAX_STARTS_PER_HOUR", "x")
        .status(1)
        .stdout("")
        .stderr_contains(
            "issue-runner: cannot start; 4 thing(s) to fix (in a project env file: loopx run \
             -e .env issue-runner):\n\
             issue-runner:   - set REPO to the repository to work on (owner/name)\n\
             issue-runner:   - set ALLOWED_AUTHORS (comma-separated logins): only their issues \
             are given to the agent\n\
             issue-runner:   - MAX_STARTS_PER_HOUR must be a positive integer, not 'x'\n\
             issue-runner:   - the GitHub CLI, gh, is not installed (or not on PATH): install \
             it (https://cli.github.com) and log in with 'gh auth login', or set FORGE_CMD to \
             a gh-compatible command\n",
        )
        .stderr_contains("loopx: error: script issue-runner:index exited with code 1")
        .run();
    assert!(lab.take_gh_calls().is_empty());
    assert_eq!(lab.agent_calls(), 0);
}

#[test]
fn issue_runner_needs_a_repo_and_an_allow_list() {
    let lab = three_issues();
    lab.loopx(&["run", "issue-runner"])
        .env("ALLOWED_AUTHORS", "alice")
        .status(1)
        .stderr_contains("issue-runner: set REPO to the repository to work on (owner/name)")
        .run();
    lab.loopx(&["run", "issue-runner"])
        .env("REPO", "o/r")
        .status(1)
        .stderr_contains("issue-runner: set ALLOWED_AUTHORS")
        .run();
    assert!(lab.take_gh_calls().is_empty());
    assert_eq!(lab.agent_calls(), 0);
}

// ------------------------------------------------------------ the CI gate

/// An agent's answer that commits a line to fix.txt on the branch issue-3
/// of its clone and pushes it, then routes `done`.
pub(crate) const PUSH_FIX: &str =
    "git checkout -q -B issue-3 && date +%s%N >>fix.txt && git add fix.txt && \
     git -c user.name=a -c user.email=a@a commit -qm \"fix $(wc -l <fix.txt)\" && \
     git push -q origin issue-3 2>/dev/null && echo pushed && echo 'ROUTE: done'";

impl Lab {
    /// What the fake gh's `pr checks` prints on its k-th call (0: every
    /// call without its own): (name, state) rows; none is "no checks".
    fn checks(&self, k: usize, rows: &[(&str, &str)]) -> &Lab {
        let dir = self.gh.join("checks");
        fs::create_dir_all(&dir).expect("mkdir checks");
        let name = if k == 0 {
            "default".to_string()
        } else {
            k.to_string()
        };
        let text: String = rows
            .iter()
            .map(|(n, s)| format!("{n}\t{s}\t1m2s\thttps://ci.example/{n}\n"))
            .collect();
        fs::write(dir.join(name), text).expect("write checks");
        self
    }

    /// The subjects of the commits on a branch of the forge's repository.
    fn branch_log(&self, branch: &str) -> Vec<String> {
        git(&self.gh.join("origin.git"), &["log", "--format=%s", branch])
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn gate(&self, args: &[&str]) -> Run {
        self.runner(args).env("CI_GATE", "1").env("CI_POLL", "1")
    }
}

fn run_id(log: &Path) -> String {
    events(log)[0]["run_id"]
        .as_str()
        .expect("run_id")
        .to_string()
}

#[test]
fn issue_runner_ci_gate_labels_the_issue_done_once_the_pull_requests_checks_pass() {
    let lab = three_issues();
    lab.reply(1, PUSH_FIX);
    lab.checks(0, &[("build", "pass"), ("docs", "skipping")]);
    lab.gate(&["--log", "run.jsonl", "--timeout", "30s"])
        .stderr_contains(
            "issue-runner: #3: waiting for the checks of its pull request (branch issue-3)",
        )
        .stderr_contains("issue-runner: #3: the checks of issue-3 passed")
        .stderr_contains("issue-runner: #3 moved to agent:done")
        .run();
    let log = lab.p.path("run.jsonl");
    assert_eq!(
        path_taken(&log),
        [
            "issue-runner:index",
            "issue-runner:work",
            "issue-runner:ci",
            "issue-runner:finish"
        ]
    );
    let calls = lab.take_gh_calls();
    assert_eq!(
        calls[calls.len() - 2..],
        [
            "pr checks issue-3 -R o/r".to_string(),
            "issue edit 3 -R o/r --add-label agent:done --remove-label agent:working".into(),
        ]
    );
    assert_eq!(lab.labels(3), ["agent:done"]);
    assert_eq!(lab.comments(3), "");
    assert_eq!(lab.agent_calls(), 1);
    assert_eq!(lab.branch_log("issue-3")[0], "fix 1");
    let run = run_id(&log);
    assert!(!lab
        .p
        .path(&format!(".loopx/issue-runner/runs/{run}/clone"))
        .exists());
    assert!(!lab.state("claims/3").exists());
}

#[test]
fn issue_runner_ci_gate_runs_a_fix_round_in_the_same_clone_and_session_when_checks_fail() {
    let lab = three_issues();
    lab.reply(1, PUSH_FIX).reply(2, PUSH_FIX);
    lab.checks(1, &[("build", "pass"), ("test", "fail"), ("lint", "fail")])
        .checks(2, &[("build", "pass"), ("test", "pass"), ("lint", "pass")]);
    lab.gate(&["--log", "run.jsonl", "--timeout", "30s"])
        .stderr_contains(
            "issue-runner: #3: fix round 1 of MAX_CI_FIXES=2, for the failing checks: test, lint",
        )
        .stderr_contains("issue-runner: carrying on claude's session")
        .stderr_contains("issue-runner: #3: fix round 1 pushed; waiting for the checks of issue-3")
        .stderr_contains("issue-runner: #3 moved to agent:done")
        .run();
    assert_eq!(
        path_taken(&lab.p.path("run.jsonl")),
        [
            "issue-runner:index",
            "issue-runner:work",
            "issue-runner:ci",
            "issue-runner:ci",
            "issue-runner:finish"
        ]
    );
    assert_eq!(lab.agent_calls(), 2);
    // The same clone, the same session, told which checks failed.
    assert_eq!(lab.agent_file("cwd", 2), lab.agent_file("cwd", 1));
    let args = lab.agent_file("args", 2);
    assert!(args.contains("--resume\nfake\n"), "{args}");
    let prompt = lab.prompt(2);
    assert!(
        prompt.contains("The checks of your pull request for issue #3 of o/r (branch issue-3)\nfailed: test, lint."),
        "{prompt}"
    );
    assert!(prompt.contains("gh pr checks issue-3 -R o/r"), "{prompt}");
    assert_eq!(lab.branch_log("issue-3")[..2], ["fix 2", "fix 1"]);
    let calls = lab.take_gh_calls();
    assert_eq!(
        calls
            .iter()
            .filter(|c| *c == "pr checks issue-3 -R o/r")
            .count(),
        2,
        "{calls:?}"
    );
    assert_eq!(lab.labels(3), ["agent:done"]);
    assert_eq!(lab.comments(3), "");
}

#[test]
fn issue_runner_ci_gate_hands_the_issue_to_a_human_when_checks_fail_past_max_ci_fixes() {
    let lab = three_issues();
    lab.reply(0, PUSH_FIX);
    lab.checks(0, &[("build", "pass"), ("test", "fail")]);
    lab.gate(&["--timeout", "30s"])
        .env("MAX_CI_FIXES", "1")
        .stderr_contains("issue-runner: #3: fix round 1 of MAX_CI_FIXES=1")
        .stderr_contains("issue-runner: #3 moved to agent:needs-human")
        .run();
    assert_eq!(lab.agent_calls(), 2, "the work and one fix round");
    assert_eq!(lab.labels(3), ["agent:needs-human"]);
    assert_eq!(
        lab.comments(3),
        "issue-runner: the checks of the pull request (branch issue-3) fail after 1 fix \
         round(s) (MAX_CI_FIXES=1): test.\n--\n"
    );
    assert!(!lab.state("claims/3").exists());
    assert!(!lab.state("sessions/3").exists());
}

#[test]
fn issue_runner_ci_gate_waits_while_checks_are_pending_or_not_yet_reported() {
    let lab = three_issues();
    lab.reply(1, PUSH_FIX);
    lab.checks(1, &[])
        .checks(2, &[("build", "pass"), ("test", "pending")])
        .checks(3, &[("build", "pass"), ("test", "pass")]);
    lab.gate(&["--log", "run.jsonl", "--timeout", "30s"])
        .stderr_contains("issue-runner: #3: checks of issue-3 pending ((none reported yet)); checking again in 1")
        .stderr_contains("issue-runner: #3: checks of issue-3 pending (test); checking again in 1")
        .stderr_contains("issue-runner: #3 moved to agent:done")
        .run();
    assert_eq!(
        path_taken(&lab.p.path("run.jsonl")),
        [
            "issue-runner:index",
            "issue-runner:work",
            "issue-runner:ci",
            "issue-runner:ci",
            "issue-runner:ci",
            "issue-runner:finish"
        ]
    );
    assert_eq!(lab.agent_calls(), 1, "no fix round for pending checks");
    assert_eq!(lab.labels(3), ["agent:done"]);

    // Pending past CI_TIMEOUT: a human looks.
    lab.reply(2, PUSH_FIX.replace("issue-3", "issue-8").as_str());
    lab.checks(0, &[("test", "pending")]);
    lab.gate(&["--timeout", "30s"])
        .env("CI_TIMEOUT", "1s")
        .stderr_contains("issue-runner: #8 moved to agent:needs-human")
        .run();
    assert_eq!(
        lab.comments(8),
        "issue-runner: the checks of the pull request (branch issue-8) were still pending \
         after CI_TIMEOUT=1s: test.\n--\n"
    );
}

#[test]
fn issue_runner_ci_gate_carries_on_after_its_run_died_with_the_fix_count_it_had() {
    let lab = three_issues();
    lab.reply(1, PUSH_FIX).reply(2, PUSH_FIX);
    // A fix round, then a wait for the new checks longer than the run may
    // last: the run ends (75) with the issue still claimed.
    lab.checks(1, &[("test", "fail")]);
    lab.gate(&["--max-time", "3s"])
        .env("CI_POLL", "1h")
        .env("MAX_CI_FIXES", "1")
        .status(75)
        .stderr_any("loopx says the wait outlasts --max-time")
        .run();
    assert_eq!(lab.agent_calls(), 2);
    let claim = fs::read_to_string(lab.state("claims/3")).unwrap();
    assert!(claim.contains("ci_branch=issue-3\n"), "{claim}");
    assert!(claim.contains("ci_fixes=1\n"), "{claim}");
    lab.loopx(&["run", "issue-runner:status"])
        .env("REPO", "o/r")
        .env("ALLOWED_AUTHORS", "alice")
        .env("MAX_CI_FIXES", "1")
        .stderr_contains(
            ", restarts 0, CI gate on issue-3: fix rounds 1 of 1: the next run restarts it\n",
        )
        .run();

    // The next run restarts it in the gate: no new work round, and the
    // fix round already spent counts.
    lab.checks(2, &[("test", "fail")]);
    lab.gate(&["--log", "run.jsonl", "--timeout", "30s"])
        .env("MAX_CI_FIXES", "1")
        .stderr_contains("issue-runner: restarting #3, left by run ")
        .stderr_contains("issue-runner: #3 moved to agent:needs-human")
        .run();
    assert_eq!(
        path_taken(&lab.p.path("run.jsonl")),
        ["issue-runner:index", "issue-runner:ci"]
    );
    assert_eq!(lab.agent_calls(), 2, "no agent after the restart");
    assert!(lab
        .comments(3)
        .contains("fail after 1 fix round(s) (MAX_CI_FIXES=1): test."));
}

#[test]
fn forge_cmd_names_another_forge_cli() {
    let lab = three_issues();
    // A wrapper with its own name and a flag of its own.
    write_exe(
        &lab.tools.join("forge"),
        "#!/bin/bash\n[ \"$1\" = --quiet ] || exit 9\nshift\nexec gh \"$@\"\n",
    );
    lab.reply(0, "echo ROUTE: done");
    lab.runner(&[])
        .env("FORGE_CMD", "forge --quiet")
        .stderr_contains("issue-runner: #3 moved to agent:done")
        .run();
    assert_eq!(lab.labels(3), ["agent:done"]);
}

// ================================================================ README

fn readme() -> String {
    fs::read_to_string(Path::new(ROOT).join("README.md")).expect("README.md")
}

#[test]
fn readme_lists_each_workflow_with_its_install_command_and_links_the_guide() {
    let readme = readme();
    for w in WORKFLOWS {
        let cmd = format!(
            "loopx install -w {w} https://github.com/loopx-dev/loopx/releases/latest/download/workflows.tar.gz"
        );
        assert!(readme.contains(&cmd), "README lacks `{cmd}`");
    }
    assert!(readme.contains("(dist/workflows/AUTHORING.md)"));
    assert!(Path::new(ROOT)
        .join("dist/workflows/AUTHORING.md")
        .is_file());
}

// ======================================================= the authoring guide

/// The example of AUTHORING.md: every code block whose info string names a
/// file (```bash file=<path>), as (path, contents).
fn guide_files() -> Vec<(String, String)> {
    let text = fs::read_to_string(Path::new(ROOT).join("dist/workflows/AUTHORING.md"))
        .expect("AUTHORING.md");
    let mut files = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        match current.as_mut() {
            Some(_) if line == "```" => files.extend(current.take()),
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
            None => {
                if let Some(i) = line.find(" file=").filter(|_| line.starts_with("```")) {
                    current = Some((line[i + 6..].to_string(), String::new()));
                }
            }
        }
    }
    assert!(
        current.is_none(),
        "an unterminated code block in AUTHORING.md"
    );
    files
}

#[test]
fn the_authoring_guides_example_passes_its_own_test_and_shellcheck() {
    let files = guide_files();
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            ".loopx/write-check/index.sh",
            ".loopx/write-check/check.sh",
            ".loopx/write-check/package.json",
            ".loopx/write-check/.gitignore",
            "test-write-check.sh"
        ]
    );
    let tmp = util::TempDir::new("guide");
    let repo = tmp.path().join("repo");
    for (path, body) in &files {
        let f = repo.join(path);
        fs::create_dir_all(f.parent().unwrap()).unwrap();
        fs::write(&f, body).unwrap();
    }
    let scripts: Vec<PathBuf> = paths
        .iter()
        .filter(|p| p.ends_with(".sh"))
        .map(|p| repo.join(p))
        .collect();
    let o = Command::new("shellcheck")
        .args(&scripts)
        .output()
        .expect("shellcheck");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));

    // `bash test-write-check.sh`, with the loopx under test on PATH.
    let bin = tmp.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(util::loopx_bin(), bin.join("loopx")).unwrap();
    let home = tmp.path().join("home");
    fs::create_dir_all(&home).unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg(repo.join("test-write-check.sh"))
        .current_dir(&repo)
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("TMPDIR", tmp.path());
    util::isolate(&mut cmd, &home);
    // The test script tells each try on stderr.
    Run::command(cmd)
        .stdout("write-check: all good\n")
        .stderr(
            "write-check: try 1 of 3\n\
             wrote it\n\
             write-check: the check failed\n\
             write-check: try 2 of 3\n\
             fixed it\n\
             write-check: the check passed\n",
        )
        .run();
    // It cleaned up after itself (its mktemp -d directory is gone; loopx
    // keeps its status directory, loopx-<uid>, in TMPDIR).
    let left: Vec<String> = names_in(tmp.path())
        .into_iter()
        .filter(|n| !["bin", "home", "repo"].contains(&n.as_str()) && !n.starts_with("loopx-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
