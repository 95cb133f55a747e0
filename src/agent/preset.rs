//! Each agent CLI's command line: headless, streaming events, the prompt
//! on stdin (never in argv: it may be large, and argv is visible to every
//! user). The agent may edit files and run git and the allowed commands
//! (AGENT_ALLOW, plus the workflow's own); AGENT_UNSAFE=1 turns every
//! check off, for sandboxes only.

use super::stream::Kind;

/// What a command line is built from.
#[derive(Debug, Default)]
pub struct Setup {
    pub unsafe_mode: bool,
    /// Commands the agent may run besides git.
    pub allow: Vec<String>,
    /// AGENT_ARGS, split on blanks.
    pub extra: Vec<String>,
    /// codex: the repository's common git directory, writable in its
    /// sandbox so the agent can commit.
    pub git_dir: Option<String>,
    pub in_git: bool,
    /// The session to carry on.
    pub resume: Option<String>,
}

/// The program and its arguments.
pub fn argv(kind: Kind, s: &Setup) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |items: &[&str]| a.extend(items.iter().map(|i| i.to_string()));
    match kind {
        Kind::Claude => {
            push(&[
                "claude",
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
            ]);
            if s.unsafe_mode {
                push(&["--dangerously-skip-permissions"]);
            } else {
                push(&[
                    "--permission-mode",
                    "acceptEdits",
                    "--allowedTools",
                    "Bash(git:*)",
                ]);
                for c in &s.allow {
                    push(&[
                        "--allowedTools",
                        &format!("Bash({c})"),
                        "--allowedTools",
                        &format!("Bash({c}:*)"),
                    ]);
                }
            }
            if let Some(id) = &s.resume {
                push(&["--resume", id]);
            }
        }
        Kind::Codex => {
            push(&["codex", "exec", "--json"]);
            if s.unsafe_mode {
                push(&["--dangerously-bypass-approvals-and-sandbox"]);
            } else {
                push(&["--sandbox", "workspace-write"]);
                if let Some(dir) = &s.git_dir {
                    push(&[
                        "-c",
                        &format!(
                            "sandbox_workspace_write.writable_roots=[{}]",
                            toml_string(dir)
                        ),
                    ]);
                }
            }
            if !s.in_git {
                push(&["--skip-git-repo-check"]);
            }
        }
        Kind::Gemini => {
            // --skip-trust: headless, an untrusted folder would end the run.
            push(&["gemini", "--output-format", "stream-json", "--skip-trust"]);
            if s.unsafe_mode {
                push(&["--approval-mode", "yolo"]);
            } else {
                push(&[
                    "--approval-mode",
                    "auto_edit",
                    "--allowed-tools",
                    "run_shell_command(git)",
                ]);
                for c in &s.allow {
                    push(&["--allowed-tools", &format!("run_shell_command({c})")]);
                }
            }
            if let Some(id) = &s.resume {
                push(&["--resume", id]);
            }
        }
        Kind::Plain => {}
    }
    a.extend(s.extra.iter().cloned());
    // codex resumes through a subcommand, after exec's own options; `-`
    // reads the prompt from stdin.
    if let (Kind::Codex, Some(id)) = (kind, &s.resume) {
        a.extend(["resume".to_string(), id.clone(), "-".to_string()]);
    }
    a
}

/// Extra environment: as root, claude refuses to skip permissions unless
/// told it runs in a sandbox.
pub fn env(kind: Kind, s: &Setup, root: bool) -> Option<(&'static str, &'static str)> {
    (kind == Kind::Claude && s.unsafe_mode && root).then_some(("IS_SANDBOX", "1"))
}

/// A comma-separated list (AGENT_ALLOW), trimmed, blanks dropped.
pub fn split_list(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
}

fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> Setup {
        Setup {
            allow: split_list(" npm test, ,make lint").collect(),
            in_git: true,
            ..Setup::default()
        }
    }

    #[test]
    fn claude_allows_edits_git_and_the_listed_commands() {
        let a = argv(Kind::Claude, &setup()).join(" ");
        assert_eq!(
            a,
            "claude -p --output-format stream-json --verbose --permission-mode acceptEdits \
             --allowedTools Bash(git:*) --allowedTools Bash(npm test) --allowedTools Bash(npm test:*) \
             --allowedTools Bash(make lint) --allowedTools Bash(make lint:*)"
        );
    }

    #[test]
    fn unsafe_mode_bypasses_checks_with_is_sandbox_as_root() {
        let s = Setup {
            unsafe_mode: true,
            ..setup()
        };
        assert!(argv(Kind::Claude, &s).contains(&"--dangerously-skip-permissions".to_string()));
        assert_eq!(env(Kind::Claude, &s, true), Some(("IS_SANDBOX", "1")));
        assert_eq!(env(Kind::Claude, &s, false), None);
        assert_eq!(env(Kind::Claude, &setup(), true), None);
        assert!(argv(Kind::Codex, &s)
            .contains(&"--dangerously-bypass-approvals-and-sandbox".to_string()));
        assert!(argv(Kind::Gemini, &s)
            .join(" ")
            .contains("--approval-mode yolo"));
    }

    #[test]
    fn codex_sandbox_and_resume() {
        let s = Setup {
            git_dir: Some("/r/.git".into()),
            resume: Some("abc".into()),
            in_git: false,
            extra: vec!["-m".into(), "o3".into()],
            ..setup()
        };
        assert_eq!(
            argv(Kind::Codex, &s).join(" "),
            "codex exec --json --sandbox workspace-write -c sandbox_workspace_write.writable_roots=[\"/r/.git\"] \
             --skip-git-repo-check -m o3 resume abc -"
        );
    }

    #[test]
    fn gemini_skips_trust_and_resumes() {
        let s = Setup {
            resume: Some("s1".into()),
            ..setup()
        };
        let a = argv(Kind::Gemini, &s).join(" ");
        assert!(
            a.starts_with(
                "gemini --output-format stream-json --skip-trust --approval-mode auto_edit"
            ),
            "{a}"
        );
        assert!(a.contains("--allowed-tools run_shell_command(npm test)"));
        assert!(a.ends_with("--resume s1"));
    }
}
