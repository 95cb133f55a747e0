//! Gemini CLI's `--output-format stream-json` events: `init` (the session
//! id), `message` (the assistant's text in pieces), `tool_use`,
//! `tool_result` (a `policy_violation` is a refusal), `error` and `result`
//! (`status`, `error`, `stats`); and the single object of `--output-format
//! json` (`response`, `error`, `stats`). Its exit codes: 41 auth, 42 bad
//! input, 52 config, 53 turn limit, 55 untrusted folder; an API error
//! exits with its HTTP status modulo 256 (429 exits 173).

use super::progress::tool;
use super::stream::{at, count_at, set_session, status_in, str_at, Facts};
use crate::json::Value;

/// How many recent tool calls are remembered to name a refused one.
const TOOLS_KEPT: usize = 32;

pub fn read(v: &Value, f: &mut Facts, steps: &mut Vec<String>) {
    let kind = str_at(v, "type").unwrap_or("");
    if kind == "message" {
        if str_at(v, "role") == Some("assistant") {
            let piece = str_at(v, "content").unwrap_or("");
            if !f.in_text {
                f.text.clear();
            }
            f.text.push_str(piece);
            f.in_text = true;
        }
        return;
    }
    // Any other event completes the text that was arriving.
    steps.extend(super::stream::finish(f));
    match kind {
        "init" => set_session(f, str_at(v, "session_id")),
        "tool_use" => steps.push(tool_use(v, f)),
        "tool_result" => steps.extend(tool_result(v, f)),
        "error" => {
            let m = str_at(v, "message").unwrap_or("error");
            steps.push(format!("{}: {m}", str_at(v, "severity").unwrap_or("error")));
        }
        "result" => result(v, f),
        _ => {}
    }
}

fn tool_use(v: &Value, f: &mut Facts) -> String {
    let name = str_at(v, "tool_name").unwrap_or("tool");
    let arg = [
        "command",
        "file_path",
        "dir_path",
        "path",
        "pattern",
        "url",
        "query",
    ]
    .iter()
    .find_map(|k| at(v, "parameters").and_then(|p| str_at(p, k)));
    let step = tool(name, arg);
    if f.tools.len() == TOOLS_KEPT {
        f.tools.remove(0);
    }
    f.tools
        .push((str_at(v, "tool_id").unwrap_or("").to_string(), step.clone()));
    step
}

fn tool_result(v: &Value, f: &mut Facts) -> Option<String> {
    if str_at(v, "status")? != "error" {
        return None;
    }
    if str_at(v, "error.type") == Some("policy_violation") && f.denied.is_none() {
        let id = str_at(v, "tool_id").unwrap_or("");
        let call = f.tools.iter().rev().find(|(i, _)| i == id);
        f.denied = Some(call.map_or("a tool call", |(_, s)| s.as_str()).to_string());
    }
    Some(format!(
        "tool failed: {}",
        str_at(v, "error.message").unwrap_or("")
    ))
}

fn result(v: &Value, f: &mut Facts) {
    if str_at(v, "status") == Some("error") {
        error(v, f);
    } else {
        f.finished = true;
    }
    if let Some(out) = count_at(v, "stats.output_tokens") {
        f.tokens_in = count_at(v, "stats.input_tokens").unwrap_or(0);
        f.tokens_out = out;
        f.tokens_seen = true;
    }
}

fn error(v: &Value, f: &mut Facts) {
    let m = str_at(v, "error.message").unwrap_or("error");
    f.status = super::stream::num_at(v, "error.code")
        .filter(|c| (400.0..600.0).contains(c))
        .map(|c| c as u16)
        .or_else(|| status_in(m));
    f.code = str_at(v, "error.type")
        .filter(|t| *t != "unknown")
        .map(str::to_string);
    f.error = Some(m.to_string());
}

/// The single object of `--output-format json`.
pub fn read_document(v: &Value, f: &mut Facts) {
    set_session(f, str_at(v, "session_id"));
    if v.get("error").is_some_and(|e| !matches!(e, Value::Null)) {
        error(v, f);
    } else if let Some(text) = str_at(v, "response") {
        f.text = text.to_string();
        f.finished = true;
    }
    if let Some(Value::Object(models)) = at(v, "stats.models") {
        for (_, m) in models {
            f.tokens_in += count_at(m, "tokens.prompt").unwrap_or(0);
            f.tokens_out += count_at(m, "tokens.candidates").unwrap_or(0);
            f.tokens_seen = true;
        }
    }
}

/// The HTTP status behind an exit code, where it is one (an API error
/// exits with its status modulo 256).
pub fn status_of_exit(code: i32) -> Option<u16> {
    let status = code + 256;
    (144..=255).contains(&code).then_some(status as u16)
}

#[cfg(test)]
mod tests {
    use super::super::read::{read_document, read_line};
    use super::super::stream::{Facts, Kind};

    fn recorded(name: &str) -> String {
        let path = format!(
            "{}/tests/data/agent/recorded/gemini/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn read_all(text: &str) -> (Facts, Vec<String>) {
        let mut f = Facts::default();
        let steps = text
            .lines()
            .flat_map(|l| read_line(Kind::Gemini, l, &mut f, 0))
            .collect();
        (f, steps)
    }

    #[test]
    fn a_recorded_turn() {
        let (f, steps) = read_all(&recorded("ok.jsonl"));
        assert!(f.finished && f.error.is_none());
        assert_eq!(f.text, "Wrote hello.txt.\nLOOP_DONE");
        assert_eq!((f.tokens_in, f.tokens_out), (2000, 200));
        assert!(steps[0].starts_with("write_file /tmp/"), "{steps:?}");
        assert_eq!(steps[1], "Wrote hello.txt.\nLOOP_DONE");
    }

    #[test]
    fn recorded_errors() {
        let (f, _) = read_all(&recorded("429.jsonl"));
        assert!(!f.finished);
        assert!(f
            .error
            .as_deref()
            .is_some_and(|e| e.contains("retry after 7s")));
        let (f, _) = read_all(&recorded("401.jsonl"));
        assert_eq!(f.status, Some(401));
        assert_eq!(super::status_of_exit(173), Some(429));
        assert_eq!(super::status_of_exit(53), None);
    }

    #[test]
    fn pieces_join_and_refusals_name_the_call() {
        let (f, steps) = read_all(
            r#"{"type":"message","role":"assistant","content":"Hel","delta":true}
{"type":"message","role":"assistant","content":"lo","delta":true}
{"type":"tool_use","tool_name":"run_shell_command","tool_id":"t1","parameters":{"command":"touch x"}}
{"type":"tool_result","tool_id":"t1","status":"error","error":{"type":"policy_violation","message":"denied"}}
{"type":"result","status":"error","error":{"type":"FatalTurnLimitedError","message":"turns"}}"#,
        );
        assert_eq!(
            steps,
            ["Hello", "run_shell_command touch x", "tool failed: denied"]
        );
        assert_eq!(f.denied.as_deref(), Some("run_shell_command touch x"));
        assert_eq!(f.code.as_deref(), Some("FatalTurnLimitedError"));
    }

    #[test]
    fn the_json_document() {
        let mut f = Facts::default();
        read_document(Kind::Gemini, &recorded("ok-json.jsonl"), &mut f, 0);
        assert!(f.finished);
        assert_eq!(f.text, "Wrote hello.txt.\nLOOP_DONE");
        assert_eq!((f.tokens_in, f.tokens_out), (2000, 200));
        let mut f = Facts::default();
        read_document(
            Kind::Gemini,
            r#"{"error":{"type":"Error","message":"mock error 429\nSuggested retry after 7s.","code":429}}"#,
            &mut f,
            0,
        );
        assert_eq!(f.status, Some(429));
        assert!(!f.finished);
    }
}
