//! issue-runner with the real GitHub CLI (`gh`, Debian's 2.23 or newer)
//! against a fake GitHub: tests/it/fake_github.py, started by each test on
//! 127.0.0.1 (a port of its own), is the HTTP proxy of gh and of git. With
//! `GH_HOST=github.localhost` gh speaks plain HTTP to
//! `http://api.github.localhost/graphql`, and `gh repo clone` runs git on
//! `http://github.localhost/o/r.git`; both go through the proxy, so the fake
//! sees (and records) every request and nothing leaves the machine. The
//! agent is the fake agent of tests/it/workflows.rs.
#![cfg(target_os = "linux")]

use crate::util::Run;
use crate::workflows::{events, git, path_taken, Lab, PUSH_FIX};
use serde_json::{json, Value};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The fake GitHub, running; dropped, it is killed and reaped.
struct FakeGitHub {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl FakeGitHub {
    /// Serves `state` (see fake_github.py) and the repository o/r (a README
    /// on main) from `dir`.
    fn start(dir: &Path, state: Value) -> FakeGitHub {
        let bare = dir.join("git/o/r.git");
        fs::create_dir_all(&bare).expect("mkdir git");
        git(dir, &["init", "-q", "--bare", bare.to_str().unwrap()]);
        let seed = dir.join("seed");
        git(
            dir,
            &[
                "clone",
                "-q",
                bare.to_str().unwrap(),
                seed.to_str().unwrap(),
            ],
        );
        fs::write(seed.join("README"), "the forge's repository\n").unwrap();
        git(&seed, &["add", "-A"]);
        git(&seed, &["commit", "-qm", "init"]);
        git(&seed, &["push", "-q", "origin", "HEAD:main"]);
        fs::write(
            dir.join("state.json"),
            serde_json::to_string_pretty(&state).unwrap(),
        )
        .unwrap();
        let mut child = Command::new("python3")
            .arg(Path::new(ROOT).join("tests/it/fake_github.py"))
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start python3 tests/it/fake_github.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("read the fake's port");
        let port = match line.trim().parse() {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("fake_github.py printed no port: {line:?}");
            }
        };
        FakeGitHub {
            child,
            dir: dir.to_path_buf(),
            port,
        }
    }

    fn state(&self) -> Value {
        serde_json::from_str(&fs::read_to_string(self.dir.join("state.json")).unwrap()).unwrap()
    }

    fn labels(&self, n: u32) -> Value {
        self.state()["issues"][n.to_string()]["labels"].clone()
    }

    fn comments(&self, n: u32) -> Value {
        self.state()["issues"][n.to_string()]["comments"].clone()
    }

    /// Every request so far, as fake_github.py recorded it.
    fn calls(&self) -> Vec<Value> {
        fs::read_to_string(self.dir.join("calls.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The GraphQL operations asked, in order.
    fn operations(&self) -> Vec<String> {
        self.calls()
            .iter()
            .filter_map(|c| c["operation"].as_str().map(str::to_string))
            .collect()
    }

    /// The variables of each call of GraphQL `operation`.
    fn variables_of(&self, operation: &str) -> Vec<Value> {
        self.calls()
            .into_iter()
            .filter(|c| c["operation"] == operation)
            .map(|c| c["variables"].clone())
            .collect()
    }

    /// `run` with gh pointed at the fake, and every way out of the machine
    /// (proxies, tokens of the user) replaced or removed.
    fn env(&self, run: Run, config: &Path) -> Run {
        let proxy = format!("http://127.0.0.1:{}", self.port);
        run.env("GH_HOST", "github.localhost")
            .env("GH_ENTERPRISE_TOKEN", "fake-token")
            .env("GH_CONFIG_DIR", config)
            .env("GH_PROMPT_DISABLED", "1")
            .env("GH_NO_UPDATE_NOTIFIER", "1")
            .env("NO_COLOR", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("HTTP_PROXY", &proxy)
            .env("http_proxy", &proxy)
            .env("HTTPS_PROXY", &proxy)
            .env("https_proxy", &proxy)
            .env("ALL_PROXY", &proxy)
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .env_remove("GH_TOKEN")
            .env_remove("GITHUB_TOKEN")
            .env_remove("GH_ENTERPRISE_TOKEN_FILE")
    }
}

impl Drop for FakeGitHub {
    fn drop(&mut self) {
        // Its stdin closing ends it too; the kill makes sure.
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// issue-runner installed, the real gh on PATH (the lab's fake gh gone),
/// and a fake GitHub with these issues and pull requests.
struct GhLab {
    lab: Lab,
    hub: FakeGitHub,
    config: PathBuf,
}

fn gh_lab(issues: Value, pulls: Value) -> Option<GhLab> {
    if crate::util::which("gh").is_none() {
        // scripts/test.sh insists on gh; a bare `cargo test` says why.
        crate::util::skip("gh_forge", "gh (the GitHub CLI) is not installed");
        return None;
    }
    let lab = Lab::new(&["issue-runner"]);
    fs::remove_file(lab.tools.join("gh")).expect("remove the fake gh");
    let scratch = lab.p.root().parent().unwrap().to_path_buf();
    let config = scratch.join("gh-config");
    fs::create_dir_all(&config).unwrap();
    let state = json!({
        "repo": "o/r",
        "labels": ["agent:todo", "agent:working", "agent:done", "agent:needs-human", "bug"],
        "issues": issues,
        "pulls": pulls,
    });
    let hub = FakeGitHub::start(&scratch.join("github"), state);
    Some(GhLab { lab, hub, config })
}

impl GhLab {
    fn runner(&self, args: &[&str]) -> Run {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.push("issue-runner");
        let run = self
            .lab
            .loopx(&all)
            .env("REPO", "o/r")
            .env("ALLOWED_AUTHORS", "alice")
            .env("CI_POLL", "1");
        self.hub.env(run, &self.config)
    }

    /// The subjects of the commits on a branch of the fake's o/r.
    fn branch_log(&self, branch: &str) -> Vec<String> {
        git(
            &self.hub.dir.join("git/o/r.git"),
            &["log", "--format=%s", branch],
        )
        .lines()
        .map(str::to_string)
        .collect()
    }

    /// Every request went to the fake's two hosts, none elsewhere.
    fn assert_only_the_fake_was_asked(&self) {
        for c in self.hub.calls() {
            let host = c["host"].as_str().unwrap_or_default();
            assert!(
                host == "api.github.localhost" || host == "github.localhost",
                "a request for {host}: {c}"
            );
        }
    }
}

fn issue(author: &str, created: &str, labels: &[&str]) -> Value {
    json!({
        "title": "Make it faster",
        "body": "The start takes 2s.\nMake it 1s.",
        "author": author,
        "createdAt": created,
        "labels": labels,
    })
}

fn check(name: &str, conclusion: &str) -> Value {
    json!({"name": name, "status": "COMPLETED", "conclusion": conclusion})
}

fn pending(name: &str) -> Value {
    json!({"name": name, "status": "IN_PROGRESS", "conclusion": ""})
}

#[test]
fn real_gh_takes_the_issue_clones_over_http_and_labels_it_done_once_its_checks_pass() {
    let Some(g) = gh_lab(
        json!({
            "3": issue("alice", "2024-01-02T00:00:00Z", &["agent:todo"]),
            "5": issue("mallory", "2024-01-01T00:00:00Z", &["agent:todo", "bug"]),
        }),
        json!([{"number": 10, "branch": "issue-3", "checks": [
            [check("build", "SUCCESS"), pending("test")],
            [check("build", "SUCCESS"), check("test", "SUCCESS")],
        ]}]),
    ) else {
        return;
    };
    g.lab.reply(1, PUSH_FIX);
    g.runner(&["--log", "run.jsonl", "--timeout", "60s"])
        .env("CI_GATE", "1")
        .stderr_contains("issue-runner: #5: its author mallory is not in ALLOWED_AUTHORS; skipped")
        .stderr_contains("issue-runner: took #3 (agent:todo -> agent:working)")
        .stderr_contains("issue-runner: #3: checks of issue-3 pending (test); checking again in 1")
        .stderr_contains("issue-runner: #3: the checks of issue-3 passed")
        .stderr_contains("issue-runner: #3 moved to agent:done")
        .run();
    let log = g.lab.p.path("run.jsonl");
    assert_eq!(
        path_taken(&log),
        [
            "issue-runner:index",
            "issue-runner:work",
            "issue-runner:ci",
            "issue-runner:ci",
            "issue-runner:finish"
        ]
    );
    assert_eq!(g.hub.labels(3), json!(["agent:done"]));
    assert_eq!(g.hub.labels(5), json!(["agent:todo", "bug"]));
    assert_eq!(g.hub.comments(3), Value::Null, "no comment when done");

    // What gh asked GitHub, in order (gh adds and removes labels at once:
    // those two come in either order).
    let ops: Vec<String> = g
        .hub
        .operations()
        .into_iter()
        .map(|o| {
            o.replace("LabelAdd", "LabelMove")
                .replace("LabelRemove", "LabelMove")
        })
        .collect();
    assert_eq!(
        ops,
        [
            "IssueSearch",
            // issue edit: the issue, the repository's labels, then the moves
            "IssueByNumber",
            "RepositoryLabelList",
            "LabelMove",
            "LabelMove",
            // repo clone
            "RepositoryInfo",
            // issue view, twice
            "IssueByNumber",
            "IssueByNumber",
            // pr checks, twice: pending, then passed
            "PullRequestForBranch",
            "PullRequestStatusChecks",
            "PullRequestForBranch",
            "PullRequestStatusChecks",
            "IssueByNumber",
            "RepositoryLabelList",
            "LabelMove",
            "LabelMove",
        ]
    );
    assert_eq!(
        g.hub.variables_of("IssueSearch")[0]["query"],
        "label:agent:todo repo:o/r state:open type:issue"
    );
    assert_eq!(
        g.hub.variables_of("LabelAdd"),
        [
            json!({"input": {"labelableId": "I_3", "labelIds": ["LA_agent:working"]}}),
            json!({"input": {"labelableId": "I_3", "labelIds": ["LA_agent:done"]}}),
        ]
    );
    assert_eq!(
        g.hub.variables_of("LabelRemove"),
        [
            json!({"input": {"labelableId": "I_3", "labelIds": ["LA_agent:todo"]}}),
            json!({"input": {"labelableId": "I_3", "labelIds": ["LA_agent:working"]}}),
        ]
    );
    for v in g.hub.variables_of("PullRequestForBranch") {
        assert_eq!(v["headRefName"], "issue-3");
    }
    // The clone (and the agent's push) went through git's smart HTTP.
    let git_calls: Vec<String> = g
        .hub
        .calls()
        .iter()
        .filter(|c| c["host"] == "github.localhost")
        .map(|c| {
            format!(
                "{} {}",
                c["method"].as_str().unwrap(),
                c["url"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        git_calls.contains(
            &"GET http://github.localhost/o/r.git/info/refs?service=git-upload-pack".to_string()
        ),
        "{git_calls:?}"
    );
    assert!(
        git_calls.contains(&"POST http://github.localhost/o/r.git/git-receive-pack".to_string()),
        "{git_calls:?}"
    );
    assert_eq!(g.branch_log("issue-3"), ["fix 1", "init"]);

    // The agent worked on the issue's text, read through gh.
    let prompt = g.lab.prompt(1);
    assert!(
        prompt.contains("<issue-title>\nMake it faster\n</issue-title>"),
        "{prompt}"
    );
    assert!(
        prompt.contains("<issue-body>\nThe start takes 2s.\nMake it 1s.\n</issue-body>"),
        "{prompt}"
    );
    let run_id = events(&log)[0]["run_id"].as_str().unwrap().to_string();
    assert!(!g
        .lab
        .p
        .path(&format!(".loopx/issue-runner/runs/{run_id}/clone"))
        .exists());
    g.assert_only_the_fake_was_asked();
}

#[test]
fn real_gh_failing_checks_get_a_fix_round_then_a_human_with_a_comment_naming_them() {
    let Some(g) = gh_lab(
        json!({"7": issue("alice", "2024-01-02T00:00:00Z", &["agent:todo", "bug"])}),
        json!([{"number": 11, "branch": "issue-7", "checks": [
            [check("build", "SUCCESS"), check("test", "FAILURE"), check("lint", "FAILURE")],
            [check("build", "SUCCESS"), check("test", "FAILURE"), check("lint", "SUCCESS")],
        ]}]),
    ) else {
        return;
    };
    let push = PUSH_FIX.replace("issue-3", "issue-7");
    g.lab.reply(0, &push);
    g.runner(&["--timeout", "60s"])
        .env("CI_GATE", "1")
        .env("MAX_CI_FIXES", "1")
        .stderr_contains(
            // gh lists the failing checks first, by name.
            "issue-runner: #7: fix round 1 of MAX_CI_FIXES=1, for the failing checks: lint, test",
        )
        .stderr_contains("issue-runner: carrying on claude's session")
        .stderr_contains("issue-runner: #7 moved to agent:needs-human")
        .run();
    assert_eq!(g.lab.agent_calls(), 2, "the work, then one fix round");
    assert!(g
        .lab
        .prompt(2)
        .contains("(branch issue-7)\nfailed: lint, test."));
    assert_eq!(g.lab.agent_file("cwd", 2), g.lab.agent_file("cwd", 1));
    assert_eq!(g.branch_log("issue-7"), ["fix 2", "fix 1", "init"]);
    assert_eq!(g.hub.labels(7), json!(["bug", "agent:needs-human"]));
    assert_eq!(
        g.hub.comments(7),
        json!([
            "issue-runner: the checks of the pull request (branch issue-7) fail after 1 fix \
             round(s) (MAX_CI_FIXES=1): test."
        ])
    );
    assert_eq!(
        g.hub.variables_of("CommentCreate")[0]["input"]["subjectId"],
        "I_7"
    );
    assert_eq!(g.hub.variables_of("PullRequestStatusChecks").len(), 2);
    g.assert_only_the_fake_was_asked();
}

#[test]
fn real_gh_an_agent_that_asks_for_a_human_gets_its_reasons_posted_as_a_comment() {
    let Some(g) = gh_lab(
        json!({"2": issue("alice", "2024-01-02T00:00:00Z", &["agent:todo"])}),
        json!([]),
    ) else {
        return;
    };
    g.lab.reply(
        1,
        "echo 'the spec says nothing about it'; echo 'ROUTE: needs-human'",
    );
    g.runner(&["--timeout", "60s"])
        .stderr_contains("issue-runner: #2 moved to agent:needs-human")
        .run();
    assert_eq!(g.hub.labels(2), json!(["agent:needs-human"]));
    let comments = g.hub.comments(2);
    let comment = comments[0].as_str().unwrap();
    assert!(
        comment.starts_with("issue-runner: the agent asked for a person to take over."),
        "{comment}"
    );
    assert!(
        comment.contains("the spec says nothing about it"),
        "{comment}"
    );
    assert!(
        !g.hub
            .operations()
            .iter()
            .any(|o| o.starts_with("PullRequest")),
        "no gate without CI_GATE"
    );
    g.assert_only_the_fake_was_asked();
}
