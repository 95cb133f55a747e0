//! Codex's `exec --json` events: `thread.started` (the session id),
//! `item.started` / `item.completed` (agent messages, commands, file
//! changes, non-fatal `error` notes), `turn.completed` (usage),
//! `turn.failed` and `error` (why it stopped).

use super::progress::tool;
use super::stream::{count_at, set_session, status_in, str_at, Facts};
use crate::json::Value;

pub fn read(v: &Value, f: &mut Facts) -> Option<String> {
    match str_at(v, "type")? {
        "thread.started" => {
            set_session(f, str_at(v, "thread_id"));
            None
        }
        "item.started" => (str_at(v, "item.type")? == "command_execution")
            .then(|| tool("run", str_at(v, "item.command"))),
        "item.completed" => item(v, f),
        "turn.completed" => {
            turn_completed(v, f);
            None
        }
        "turn.failed" => failed(f, str_at(v, "error.message")),
        "error" => failed(f, str_at(v, "message")),
        _ => None,
    }
}

fn item(v: &Value, f: &mut Facts) -> Option<String> {
    match str_at(v, "item.type")? {
        "agent_message" => {
            let text = str_at(v, "item.text").unwrap_or("");
            f.text = text.to_string();
            Some(text.to_string())
        }
        "command_execution" => command_done(v, f),
        "file_change" => Some("edited files".to_string()),
        "mcp_tool_call" => Some(tool("tool", str_at(v, "item.tool"))),
        // A note (a missing model's metadata, say), not an ending.
        "error" => str_at(v, "item.message").map(|m| format!("note: {m}")),
        _ => None,
    }
}

/// A failed command; one the sandbox kept from writing is a refusal.
fn command_done(v: &Value, f: &mut Facts) -> Option<String> {
    let code = super::stream::num_at(v, "item.exit_code")?;
    if code == 0.0 {
        return None;
    }
    let output = str_at(v, "item.aggregated_output").unwrap_or("");
    if output.contains("Read-only file system") && f.denied.is_none() {
        let cmd = str_at(v, "item.command").unwrap_or("a command");
        f.denied = Some(format!(
            "a write by {cmd} (its sandbox made the target read-only)"
        ));
    }
    Some(format!("command failed (exit {code})"))
}

/// A write the sandbox refused that `exec --json` left out of its events
/// (it does, now and then, for a command that failed at once): the
/// session's own record, its rollout (`<CODEX_HOME>/sessions/.../
/// rollout-*-<thread>.jsonl`), has the call and its output.
pub fn denied_in_rollout(text: &str) -> Option<String> {
    let mut calls: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let Some(v) = crate::json::parse(line.trim()) else {
            continue;
        };
        match str_at(&v, "payload.type") {
            Some("function_call") => {
                let Some(id) = str_at(&v, "payload.call_id") else {
                    continue;
                };
                let cmd = str_at(&v, "payload.arguments")
                    .and_then(crate::json::parse)
                    .and_then(|a| {
                        str_at(&a, "cmd")
                            .or(str_at(&a, "command"))
                            .map(str::to_string)
                    })
                    .unwrap_or_else(|| "a command".to_string());
                calls.push((id.to_string(), cmd));
            }
            Some("function_call_output")
                if str_at(&v, "payload.output")
                    .is_some_and(|o| o.contains("Read-only file system")) =>
            {
                let id = str_at(&v, "payload.call_id");
                let cmd = calls
                    .iter()
                    .rev()
                    .find(|(c, _)| Some(c.as_str()) == id)
                    .map_or("a command", |(_, cmd)| cmd.as_str());
                return Some(format!(
                    "a write by {cmd} (its sandbox made the target read-only)"
                ));
            }
            _ => {}
        }
    }
    None
}

fn turn_completed(v: &Value, f: &mut Facts) {
    f.finished = true;
    // An `error` before the completion was a retry note: the turn ended well.
    f.error = None;
    f.status = None;
    if let Some(out) = count_at(v, "usage.output_tokens") {
        f.tokens_in += count_at(v, "usage.input_tokens").unwrap_or(0);
        f.tokens_out += out;
        f.tokens_seen = true;
    }
}

fn failed(f: &mut Facts, message: Option<&str>) -> Option<String> {
    let m = message.unwrap_or("the turn failed");
    f.finished = false;
    f.status = status_in(m).or(f.status);
    if m.contains("usage_limit_reached") {
        f.code = Some("usage_limit_reached".to_string());
    }
    // codex repeats an `error` as `turn.failed`: shown once.
    let shown = f.error.as_deref() != Some(m);
    f.error = Some(m.to_string());
    shown.then(|| format!("failed: {m}"))
}

#[cfg(test)]
mod tests {
    use super::super::read::read_line;
    use super::super::stream::{Facts, Kind};

    fn read_all(text: &str) -> (Facts, Vec<String>) {
        let mut f = Facts::default();
        let steps = text
            .lines()
            .flat_map(|l| read_line(Kind::Codex, l, &mut f, 0))
            .collect();
        (f, steps)
    }

    fn recorded(name: &str) -> String {
        let path = format!(
            "{}/tests/data/agent/recorded/codex/{name}.jsonl",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn a_recorded_turn() {
        let (f, steps) = read_all(&recorded("ok"));
        assert!(f.finished && f.error.is_none(), "{f:?}");
        assert_eq!(f.text, "Wrote hello.txt.\nLOOP_DONE");
        assert_eq!((f.tokens_in, f.tokens_out), (2000, 200));
        assert!(f.session.is_some());
        assert!(steps[0].starts_with("note: Model metadata"), "{steps:?}");
        assert!(steps[1].starts_with("run /bin/bash -lc"), "{steps:?}");
    }

    #[test]
    fn recorded_failures() {
        let (f, _) = read_all(&recorded("429"));
        assert!(!f.finished);
        assert_eq!(f.status, Some(429));
        let (f, _) = read_all(&recorded("401"));
        assert_eq!(f.status, Some(401));
    }

    #[test]
    fn usage_limits_and_sandbox_refusals() {
        let (f, _) = read_all(
            r#"{"type":"error","message":"{\"type\":\"usage_limit_reached\",\"resets_in_seconds\":120}"}
{"type":"turn.failed","error":{"message":"You've hit your usage limit. Try again in 2 minutes."}}"#,
        );
        assert_eq!(f.code.as_deref(), Some("usage_limit_reached"));
        assert!(f
            .error
            .as_deref()
            .is_some_and(|e| e.contains("hit your usage limit")));
        let (f, steps) = read_all(
            r#"{"type":"item.completed","item":{"type":"command_execution","command":"touch /x","aggregated_output":"touch: /x: Read-only file system","exit_code":1}}"#,
        );
        assert_eq!(
            f.denied.as_deref(),
            Some("a write by touch /x (its sandbox made the target read-only)")
        );
        assert_eq!(steps, ["command failed (exit 1)"]);
    }

    #[test]
    fn a_refusal_left_out_of_the_events_is_in_the_rollout() {
        // Recorded from codex 0.171.0: `exec --json` showed no command,
        // its rollout had the call and the sandbox's refusal.
        let rollout = r#"{"type":"session_meta","payload":{"id":"t1"}}
{"type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"printf x > /var/tmp/x\"}","call_id":"call_1"}}
{"type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"Process exited with code 1\nOutput:\n/bin/bash: line 1: /var/tmp/x: Read-only file system\n"}}"#;
        assert_eq!(
            super::denied_in_rollout(rollout).as_deref(),
            Some("a write by printf x > /var/tmp/x (its sandbox made the target read-only)")
        );
        assert_eq!(
            super::denied_in_rollout(&rollout.replace("Read-only", "No such")),
            None
        );
        assert_eq!(super::denied_in_rollout("not json\n{}"), None);
    }

    #[test]
    fn a_retry_note_then_completion_is_done() {
        let (f, _) = read_all(
            r#"{"type":"error","message":"Reconnecting... 1/5"}
{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":2}}"#,
        );
        assert!(f.finished && f.error.is_none());
    }
}
