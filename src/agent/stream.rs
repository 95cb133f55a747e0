//! What a run of an agent CLI told us, gathered event by event: the state
//! every per-CLI reader (claude, codex, gemini) fills in, and the small
//! helpers they share to look into a parsed event.

use crate::json::Value;

/// Which reader understands a CLI's stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Claude,
    Codex,
    Gemini,
    /// Any other command: its stdout is the answer, as it is.
    Plain,
}

impl Kind {
    pub fn from_name(name: &str) -> Option<Kind> {
        match name {
            "claude" => Some(Kind::Claude),
            "codex" => Some(Kind::Codex),
            "gemini" => Some(Kind::Gemini),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Claude => "claude",
            Kind::Codex => "codex",
            Kind::Gemini => "gemini",
            Kind::Plain => "command",
        }
    }
}

/// Everything the readers learn from a stream. Each field is filled only
/// from the event that carries it, so a forged field elsewhere changes
/// nothing.
#[derive(Debug, Default)]
pub struct Facts {
    pub session: Option<String>,
    /// The final message so far (the last assistant text, or the result's).
    pub text: String,
    /// The CLI reported the end of its turn (a result, `turn.completed`).
    pub finished: bool,
    /// The CLI reported a failure, in its words.
    pub error: Option<String>,
    /// The HTTP status behind the failure, where the CLI tells it.
    pub status: Option<u16>,
    /// A machine-readable kind of failure (codex `usage_limit_reached`,
    /// claude's result subtype `error_max_turns`, gemini's error type).
    pub code: Option<String>,
    /// A tool call the agent was refused.
    pub denied: Option<String>,
    pub cost_usd: Option<f64>,
    /// Why a reported cost was ignored (never quoting it).
    pub cost_note: Option<&'static str>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub tokens_seen: bool,
    /// Seconds from the read's `now` until the reported limit resets.
    pub reset_in: Option<u64>,
    /// Seconds until the quota window resets, whatever its status.
    pub quota_reset_in: Option<u64>,
    /// The highest quota utilization reported, in percent.
    pub utilization: Option<f64>,
    /// The CLI said its quota rejected the request (claude rate_limit_event).
    pub quota_rejected: bool,
    /// Events read: any of them counts as activity for the hang detector.
    pub events: u64,
    /// The final message is arriving in pieces (gemini's deltas).
    pub in_text: bool,
    /// Recent tool calls by id, to name one the agent was refused.
    pub tools: Vec<(String, String)>,
}

/// Records a quota utilization: a fraction (claude) or a percentage.
pub fn note_utilization(f: &mut Facts, u: f64) {
    let pct = if u <= 1.0 { u * 100.0 } else { u };
    if pct.is_finite() && (0.0..=1000.0).contains(&pct) {
        f.utilization = Some(f.utilization.map_or(pct, |p| p.max(pct)));
    }
}

/// The steps still pending when the stream ends (gemini's last text).
pub fn finish(facts: &mut Facts) -> Option<String> {
    std::mem::take(&mut facts.in_text).then(|| facts.text.clone())
}

/// The member at `path` ("a.b.0.c": object keys and array indexes).
pub fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, key| match v {
        Value::Array(items) => items.get(key.parse::<usize>().ok()?),
        _ => v.get(key),
    })
}

pub fn str_at<'a>(v: &'a Value, path: &str) -> Option<&'a str> {
    match at(v, path)? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

pub fn num_at(v: &Value, path: &str) -> Option<f64> {
    match at(v, path)? {
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// A whole, non-negative count (tokens): anything else is no count.
pub fn count_at(v: &Value, path: &str) -> Option<u64> {
    let n = num_at(v, path)?;
    (0.0..1e15).contains(&n).then_some(n as u64)
}

/// Sets the session id once it is a plausible one (the CLIs use UUIDs):
/// it goes into argv on resume, so nothing else is accepted.
pub fn set_session(facts: &mut Facts, id: Option<&str>) {
    if let Some(id) = id {
        let ok = !id.is_empty()
            && id.len() <= 128
            && !id.starts_with('-')
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if ok {
            facts.session = Some(id.to_string());
        }
    }
}

/// A status code written in a message ("API Error: 401", "status 429",
/// `"code":403`): the first three-digit 4xx/5xx number.
pub fn status_in(text: &str) -> Option<u16> {
    let b = text.as_bytes();
    (0..b.len().saturating_sub(2)).find_map(|i| {
        let digits = &b[i..i + 3];
        let alone =
            (i == 0 || !b[i - 1].is_ascii_digit()) && !b.get(i + 3).is_some_and(u8::is_ascii_digit);
        let n = digits.iter().try_fold(0u16, |n, d| {
            d.is_ascii_digit().then(|| n * 10 + u16::from(d - b'0'))
        })?;
        (alone && (400..600).contains(&n)).then_some(n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::read::read_line;
    use crate::json;

    #[test]
    fn paths_reach_into_objects_and_arrays() {
        let v = json::parse(r#"{"a":{"b":[{"c":"x"}]},"n":3}"#).unwrap();
        assert_eq!(str_at(&v, "a.b.0.c"), Some("x"));
        assert_eq!(num_at(&v, "n"), Some(3.0));
        assert_eq!(str_at(&v, "a.b.1.c"), None);
        assert_eq!(str_at(&v, "n"), None);
    }

    #[test]
    fn status_codes_are_found_in_messages() {
        assert_eq!(status_in("API Error: 401 mock error"), Some(401));
        assert_eq!(status_in(r#"{"code":403,"x":1}"#), Some(403));
        assert_eq!(status_in("last status: 429 Too Many"), Some(429));
        assert_eq!(status_in("port 14290 and 200 ok"), None);
        assert_eq!(status_in(""), None);
    }

    #[test]
    fn only_plausible_session_ids_are_kept() {
        let mut f = Facts::default();
        set_session(&mut f, Some("--dangerously-skip-permissions"));
        assert_eq!(f.session, None);
        set_session(&mut f, Some("a b"));
        assert_eq!(f.session, None);
        set_session(&mut f, Some("beac8d73-48c8-4ab1-9c6e-c96eaaf6221c"));
        assert!(f.session.is_some());
    }

    #[test]
    fn plain_lines_are_the_answer() {
        let mut f = Facts::default();
        assert_eq!(read_line(Kind::Plain, "hi", &mut f, 0), ["hi"]);
        read_line(Kind::Plain, "  ", &mut f, 0);
        assert_eq!(f.text, "hi\n  \n");
    }
}
