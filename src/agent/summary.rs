//! What a step leaves behind, rendered: the summary JSON kept beside its
//! files, and the loopx structured output of `--output`. Pure.

use super::class::{Class, Verdict};
use super::cost;
use super::stream::Facts;
use crate::json::Object;

/// The step's files, by role.
pub struct Paths {
    pub events: String,
    pub final_text: String,
    pub stderr: String,
}

/// Everything the summary tells beyond the verdict.
pub struct Ending<'a> {
    pub agent: &'a str,
    pub verdict: &'a Verdict,
    pub facts: &'a Facts,
    pub exit: Option<i32>,
    pub signal: Option<i32>,
    /// Seconds until the step may run again (a wait's `retry_after`).
    pub retry_after: Option<u64>,
    pub reset_at: Option<String>,
    pub resumed: bool,
}

pub fn summary(e: &Ending, p: &Paths) -> String {
    let f = e.facts;
    let num = |n: Option<f64>| n.map(crate::json::number_to_js_string);
    Object::default()
        .num("v", 1)
        .str("agent", e.agent)
        .str("class", e.verdict.class.name())
        .raw("exit", &opt_int(e.exit))
        .raw("signal", &opt_int(e.signal))
        .str("reason", &e.verdict.reason)
        .opt_num("retry_after", e.retry_after)
        .opt_str("reset_at", e.reset_at.as_deref())
        .raw("cost_usd", &f.cost_usd.map_or("null".into(), cost::render))
        .opt_num("tokens_in", f.tokens_seen.then_some(f.tokens_in))
        .opt_num("tokens_out", f.tokens_seen.then_some(f.tokens_out))
        .opt_str("session", f.session.as_deref())
        .raw(
            "utilization",
            num(f.utilization).as_deref().unwrap_or("null"),
        )
        .bool("resumed", e.resumed)
        .str("events", &p.events)
        .str("final", &p.final_text)
        .str("stderr", &p.stderr)
        .finish()
}

fn opt_int(n: Option<i32>) -> String {
    n.map_or("null".into(), |n| n.to_string())
}

/// The structured output for loopx (`--output`): the final message as
/// `result` when done (with `stop` when the done line is there), a
/// `retry_after` for a wait, the class of a failure (`permanent` for one
/// a retry cannot fix). `cost_usd` whenever known.
pub fn output(
    class: Class,
    text: &str,
    done_line: Option<&str>,
    retry_after: Option<u64>,
    cost_usd: Option<f64>,
) -> String {
    let mut o = Object::default();
    if class == Class::Done {
        o = o.str("result", text);
        if done_line.is_some_and(|l| has_line(text, l)) {
            o = o.bool("stop", true);
        }
    } else if class.waits() {
        o = o.num("retry_after", retry_after.unwrap_or(1));
    } else {
        if class.permanent() {
            o = o.bool("permanent", true);
        }
        o = o.str("class", class.name());
    }
    o.raw_if("cost_usd", cost_usd.map(cost::render).as_deref())
        .finish()
}

/// `line` alone on a line of `text` (blanks and a CR around it are fine),
/// so a prompt quoted back inside a sentence does not count.
pub fn has_line(text: &str, line: &str) -> bool {
    let line = line.trim();
    !line.is_empty() && text.lines().any(|l| l.trim() == line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_per_class() {
        assert_eq!(
            output(
                Class::Done,
                "ok\nLOOP_DONE\r\n",
                Some("LOOP_DONE"),
                None,
                Some(0.5)
            ),
            r#"{"result":"ok\nLOOP_DONE\r\n","stop":true,"cost_usd":0.5}"#
        );
        assert_eq!(
            output(
                Class::Done,
                "say LOOP_DONE when done",
                Some("LOOP_DONE"),
                None,
                None
            ),
            r#"{"result":"say LOOP_DONE when done"}"#
        );
        assert_eq!(
            output(Class::UsageLimit, "", None, Some(9), None),
            r#"{"retry_after":9}"#
        );
        assert_eq!(
            output(Class::Auth, "", None, None, None),
            r#"{"permanent":true,"class":"auth"}"#
        );
        assert_eq!(
            output(Class::Hung, "", None, None, Some(0.01)),
            r#"{"class":"hung","cost_usd":0.01}"#
        );
    }

    #[test]
    fn a_summary_is_json() {
        let v = Verdict {
            class: Class::Done,
            reset_in: None,
            reason: "a \"quote\"".into(),
        };
        let f = Facts {
            cost_usd: Some(0.002),
            tokens_seen: true,
            tokens_in: 3,
            ..Facts::default()
        };
        let e = Ending {
            agent: "claude",
            verdict: &v,
            facts: &f,
            exit: Some(0),
            signal: None,
            retry_after: None,
            reset_at: None,
            resumed: false,
        };
        let p = Paths {
            events: "e".into(),
            final_text: "f".into(),
            stderr: "s".into(),
        };
        let s = summary(&e, &p);
        let parsed = crate::json::parse(&s).expect("valid JSON");
        assert_eq!(
            super::super::stream::num_at(&parsed, "cost_usd"),
            Some(0.002)
        );
        assert!(s.contains(r#""tokens_in":3"#), "{s}");
    }
}
