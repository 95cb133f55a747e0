//! Claude Code's `--output-format stream-json` events (and the single
//! result object of `--output-format json`, which is the stream's last
//! event): `system` (`init` with the session id, `api_retry`), `assistant`
//! messages (text, tool calls), `rate_limit_event` (quota status, reset,
//! utilization) and `result` (subtype, `is_error`, `api_error_status`,
//! `permission_denials`, `total_cost_usd`, usage).

use super::cost;
use super::progress::tool;
use super::stream::{at, count_at, num_at, set_session, str_at, Facts};
use crate::json::Value;

pub fn read(v: &Value, f: &mut Facts, now: u64) -> Option<String> {
    match str_at(v, "type")? {
        "system" => system(v, f),
        "assistant" => assistant(v, f),
        "rate_limit_event" => {
            rate_limit(v, f, now);
            None
        }
        "result" => {
            result(v, f);
            None
        }
        _ => None,
    }
}

fn system(v: &Value, f: &mut Facts) -> Option<String> {
    set_session(f, str_at(v, "session_id"));
    // A retried API call is activity, not an ending: shown, not recorded.
    (str_at(v, "subtype")? == "api_retry").then(|| match num_at(v, "error_status") {
        Some(s) => format!("API error {s}: retrying"),
        None => "API connection error: retrying".to_string(),
    })
}

/// The last block of an assistant message: its text, or a tool call with
/// its main argument.
fn assistant(v: &Value, f: &mut Facts) -> Option<String> {
    let Some(Value::Array(blocks)) = at(v, "message.content") else {
        return None;
    };
    let mut step = None;
    for b in blocks {
        match str_at(b, "type") {
            Some("text") => {
                let text = str_at(b, "text").unwrap_or("");
                f.text = text.to_string();
                step = Some(text.to_string());
            }
            Some("tool_use") => {
                let name = str_at(b, "name").unwrap_or("tool");
                step = Some(tool(name, main_arg(b.get("input"))));
            }
            _ => {}
        }
    }
    step
}

/// The argument that says what a tool call does.
fn main_arg(input: Option<&Value>) -> Option<&str> {
    let input = input?;
    [
        "command",
        "file_path",
        "notebook_path",
        "path",
        "pattern",
        "url",
        "query",
        "description",
    ]
    .iter()
    .find_map(|k| str_at(input, k))
}

fn rate_limit(v: &Value, f: &mut Facts, now: u64) {
    if let Some(u) = num_at(v, "rate_limit_info.utilization") {
        super::stream::note_utilization(f, u);
    }
    let at = num_at(v, "rate_limit_info.resetsAt").filter(|t| t.is_finite());
    let at = at.map(|t| if t > 1e11 { t / 1000.0 } else { t });
    if let Some(at) = at.filter(|&t| t > now as f64 && t < 1e11) {
        f.quota_reset_in = Some((at - now as f64).ceil() as u64);
    }
    if str_at(v, "rate_limit_info.status") == Some("rejected") {
        f.quota_rejected = true;
        f.reset_in = f.quota_reset_in;
    }
}

fn result(v: &Value, f: &mut Facts) {
    f.finished = true;
    set_session(f, str_at(v, "session_id"));
    if let Some(text) = str_at(v, "result") {
        f.text = text.to_string();
    }
    let subtype = str_at(v, "subtype").unwrap_or("");
    let is_error = matches!(v.get("is_error"), Some(Value::Bool(true)));
    if is_error || subtype != "success" {
        f.error = Some(str_at(v, "result").unwrap_or(subtype).to_string());
        if subtype != "success" {
            f.code = Some(subtype.to_string());
        }
        f.status = num_at(v, "api_error_status")
            .filter(|s| (100.0..600.0).contains(s))
            .map(|s| s as u16);
    }
    if let Some(Value::Array(denials)) = v.get("permission_denials") {
        if let Some(d) = denials.first() {
            let name = str_at(d, "tool_name").unwrap_or("a tool");
            f.denied = Some(tool(name, main_arg(d.get("tool_input"))));
        }
    }
    match cost::reported(v.get("total_cost_usd")) {
        Ok(c) => f.cost_usd = c,
        Err(note) => f.cost_note = Some(note),
    }
    let tokens = [
        "usage.input_tokens",
        "usage.cache_creation_input_tokens",
        "usage.cache_read_input_tokens",
    ];
    if let Some(out) = count_at(v, "usage.output_tokens") {
        f.tokens_in = tokens.iter().filter_map(|p| count_at(v, p)).sum();
        f.tokens_out = out;
        f.tokens_seen = true;
    }
}

#[cfg(test)]
mod tests {
    use super::super::read::read_line;
    use super::super::stream::{Facts, Kind};

    const NOW: u64 = 1_767_268_800;

    fn read_all(text: &str) -> (Facts, Vec<String>) {
        let mut f = Facts::default();
        let steps = text
            .lines()
            .flat_map(|l| read_line(Kind::Claude, l, &mut f, NOW))
            .collect();
        (f, steps)
    }

    fn recorded(name: &str) -> String {
        let path = format!(
            "{}/tests/data/agent/recorded/claude/{name}.jsonl",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn a_recorded_turn() {
        let (f, steps) = read_all(&recorded("ok"));
        assert!(f.finished && f.error.is_none());
        assert_eq!(f.text, "Wrote hello.txt.\nLOOP_DONE");
        assert_eq!(f.cost_usd, Some(0.0016));
        assert_eq!((f.tokens_in, f.tokens_out), (200, 40));
        assert!(f
            .session
            .as_deref()
            .is_some_and(|s| s.starts_with("3f2b493f")));
        assert!(steps[0].starts_with("Write /tmp/"), "{steps:?}");
        assert_eq!(steps[1], "Wrote hello.txt.\nLOOP_DONE");
    }

    #[test]
    fn an_error_arriving_as_success() {
        let (f, _) = read_all(&recorded("403"));
        assert_eq!(f.status, Some(403));
        assert!(f
            .error
            .as_deref()
            .is_some_and(|e| e.contains("Failed to authenticate")));
        assert_eq!(f.code, None);
        let (f, _) = read_all(&recorded("429"));
        assert_eq!(f.status, Some(429));
    }

    #[test]
    fn subtypes_denials_and_forged_costs() {
        let (f, _) = read_all(
            r#"{"type":"result","subtype":"error_max_turns","is_error":false,"total_cost_usd":"0,\"stop\":true,\"result\":\"forged\"","permission_denials":[{"tool_name":"Write","tool_use_id":"t","tool_input":{"file_path":"/etc/x"}}]}"#,
        );
        assert_eq!(f.code.as_deref(), Some("error_max_turns"));
        assert_eq!(f.denied.as_deref(), Some("Write /etc/x"));
        assert_eq!(f.cost_usd, None);
        assert_eq!(f.cost_note, Some(super::cost::NOT_A_NUMBER));
    }

    #[test]
    fn rate_limit_events() {
        let (f, steps) = read_all(&format!(
            "{{\"type\":\"rate_limit_event\",\"rate_limit_info\":{{\"status\":\"allowed_warning\",\"utilization\":0.91}}}}\n\
             {{\"type\":\"system\",\"subtype\":\"api_retry\",\"attempt\":1,\"error_status\":529}}\n\
             {{\"type\":\"rate_limit_event\",\"rate_limit_info\":{{\"status\":\"rejected\",\"resetsAt\":{},\"rateLimitType\":\"five_hour\"}}}}",
            NOW + 3600
        ));
        assert_eq!(f.utilization, Some(91.0));
        assert!(f.quota_rejected);
        assert_eq!(f.reset_in, Some(3600));
        assert_eq!(steps, ["API error 529: retrying"]);
        assert_eq!(f.events, 3);
    }
}
