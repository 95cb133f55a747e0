//! How an agent step ended, as one class the loop acts on: done; a wait
//! (usage_limit, rate_limited, overloaded); a permanent failure that a
//! retry cannot fix (auth, billing, disabled, permission_denied,
//! invalid_request, missing); or a failure worth retrying (turn_limit,
//! hung, crashed). Pure: facts in, verdict out.

use super::reset::{self, Offset};
use super::stream::{Facts, Kind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Done,
    UsageLimit,
    RateLimited,
    Overloaded,
    Auth,
    Billing,
    Disabled,
    PermissionDenied,
    InvalidRequest,
    /// The agent CLI or the prompt file is not there.
    Missing,
    TurnLimit,
    Hung,
    Crashed,
}

/// Every class with its name and its exit code, in one table.
const TABLE: [(Class, &str, i32); 13] = [
    (Class::Done, "done", 0),
    (Class::UsageLimit, "usage_limit", 10),
    (Class::RateLimited, "rate_limited", 11),
    (Class::Overloaded, "overloaded", 12),
    (Class::Auth, "auth", 20),
    (Class::Billing, "billing", 21),
    (Class::Disabled, "disabled", 22),
    (Class::PermissionDenied, "permission_denied", 23),
    (Class::InvalidRequest, "invalid_request", 24),
    (Class::Missing, "missing", 25),
    (Class::TurnLimit, "turn_limit", 30),
    (Class::Hung, "hung", 31),
    (Class::Crashed, "crashed", 32),
];

impl Class {
    fn row(self) -> (Class, &'static str, i32) {
        TABLE.into_iter().find(|r| r.0 == self).unwrap_or(TABLE[12])
    }

    pub fn from_name(name: &str) -> Option<Class> {
        TABLE.iter().find(|r| r.1 == name).map(|r| r.0)
    }

    pub fn name(self) -> &'static str {
        self.row().1
    }

    /// `loopx agent`'s exit code for this ending.
    pub fn exit_code(self) -> i32 {
        self.row().2
    }

    /// The loop waits and runs the step again (`retry_after`).
    pub fn waits(self) -> bool {
        matches!(
            self,
            Class::UsageLimit | Class::RateLimited | Class::Overloaded
        )
    }

    /// Running the step again cannot help: `--retry` does not.
    pub fn permanent(self) -> bool {
        (20..30).contains(&self.exit_code())
    }

    /// Permanent, but the user can fix it outside the run (a key, credits,
    /// an admin, the allow-list, an install): the run is kept, and a
    /// resume runs the step again.
    pub fn fixed_outside_the_run(self) -> bool {
        matches!(
            self,
            Class::Auth
                | Class::Billing
                | Class::Disabled
                | Class::PermissionDenied
                | Class::Missing
        )
    }

    /// The next attempt carries on the agent's session.
    pub fn resumable(self) -> bool {
        self.waits() || matches!(self, Class::TurnLimit | Class::Hung | Class::Crashed)
    }
}

/// How the agent's process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Exit(i32),
    Signal(i32),
    /// Ended by loopx: no event for the idle timeout.
    Hung,
}

/// A class, with the reset (seconds from now) a wait names, and the
/// reason in the agent's words.
#[derive(Debug, PartialEq)]
pub struct Verdict {
    pub class: Class,
    pub reset_in: Option<u64>,
    pub reason: String,
}

/// Classifies an ending from what the stream said, how the process ended
/// and the end of its stderr.
pub fn classify(
    kind: Kind,
    f: &Facts,
    end: End,
    stderr_tail: &str,
    now: u64,
    offset: Offset,
) -> Verdict {
    let ok_exit = end == End::Exit(0);
    let failed = !ok_exit || f.error.is_some() || (kind != Kind::Plain && !f.finished);
    // Exit 0 with neither a result nor an error: the CLI thinks it
    // succeeded but its stream stopped early (Gemini CLI drops what it has
    // not yet written when it exits). Its stderr is chatter then, not the
    // reason, and its words must not pick the class.
    let cut_short = ok_exit && failed && f.error.is_none();
    let reason = match &f.error {
        Some(e) => e.clone(),
        None if cut_short => {
            "it exited 0 without its result event (its output stopped early)".into()
        }
        None => last_line(stderr_tail).to_string(),
    };
    let evidence = format!("{reason}\n{stderr_tail}");
    let class = if end == End::Hung {
        Class::Hung
    } else if f.denied.is_some() {
        Class::PermissionDenied
    } else if f.quota_rejected && failed {
        Class::UsageLimit
    } else if !failed {
        Class::Done
    } else if cut_short {
        Class::Crashed
    } else {
        failure(kind, f, end, &evidence.to_ascii_lowercase())
    };
    let reset_in = if class.waits() {
        f.reset_in
            .or_else(|| reset::reset_in(&evidence, now, offset))
    } else {
        None
    };
    let reason = match (class, &f.denied) {
        (Class::PermissionDenied, Some(d)) => format!("it was denied {d}"),
        // A done step's stderr is chatter, not a reason.
        (Class::Done, _) => String::new(),
        // Nothing said: how the process ended is the reason.
        _ if reason.is_empty() => how_it_ended(end),
        _ => reason,
    };
    Verdict {
        class,
        reset_in,
        reason,
    }
}

/// Which failure: from the CLI's own codes, the HTTP status, then words.
fn failure(kind: Kind, f: &Facts, end: End, text: &str) -> Class {
    let exit = match end {
        End::Exit(c) => c,
        _ => 0,
    };
    let status = f.status.or_else(|| match kind {
        Kind::Gemini => super::gemini::status_of_exit(exit),
        _ => None,
    });
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    let code = f.code.as_deref().unwrap_or("");
    if code == "error_max_turns"
        || code == "error_max_budget_usd"
        || (kind == Kind::Gemini && exit == 53)
    {
        return Class::TurnLimit;
    }
    if has(&[
        "credit balance",
        "out of credits",
        "insufficient_quota",
        "extra usage",
        "check your plan and billing",
        "billing",
    ]) {
        Class::Billing
    } else if has(&["disabled"]) && has(&["organization", "account", "admin", "workspace"]) {
        Class::Disabled
    } else if code == "usage_limit_reached"
        || has(&[
            "usage limit",
            "hit your limit",
            "limit reached",
            "exhausted your capacity",
            "quota will reset",
        ])
    {
        Class::UsageLimit
    } else if status == Some(401)
        || status == Some(403)
        || (kind == Kind::Gemini && exit == 41)
        || has(&[
            "failed to authenticate",
            "invalid api key",
            "invalid x-api-key",
            "unauthorized",
            "please run /login",
            "oauth token",
        ])
    {
        Class::Auth
    } else if status == Some(429)
        || has(&[
            "rate limit",
            "rate_limit",
            "too many requests",
            "resource_exhausted",
            "quota exceeded",
        ])
    {
        Class::RateLimited
    } else if matches!(status, Some(500 | 502 | 503 | 504 | 529))
        || has(&["overloaded", "high demand", "capacity"])
    {
        Class::Overloaded
    } else if kind == Kind::Gemini && exit == 55 {
        Class::PermissionDenied
    } else if matches!(status, Some(400 | 404 | 413 | 422))
        || (kind == Kind::Gemini && matches!(exit, 42 | 52))
        || has(&["invalid_request", "prompt is too long"])
    {
        Class::InvalidRequest
    } else {
        Class::Crashed
    }
}

/// A failure's reason when neither the stream nor stderr gave one.
fn how_it_ended(end: End) -> String {
    match end {
        End::Exit(c) => format!("it exited with code {c}, saying nothing on stderr"),
        End::Signal(n) => format!("it was ended by signal {n}"),
        End::Hung => "it printed nothing for the idle timeout".into(),
    }
}

fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// The wait for a limit that names no reset: `base` seconds, doubled per
/// wait already made for this step, at most an hour (a base above an hour
/// is kept as is).
pub fn default_wait(base: u64, waits: u32) -> u64 {
    if base >= 3600 {
        return base;
    }
    base.max(1).saturating_mul(1u64 << waits.min(12)).min(3600)
}

#[cfg(test)]
mod tests {
    use super::super::read::{read_document, read_line};
    use super::*;

    const NOW: u64 = 1_767_268_800;

    fn utc(_: Option<&str>, _: u64) -> i64 {
        0
    }

    fn verdict(kind: Kind, events: &str, end: End, stderr: &str) -> Verdict {
        let mut f = Facts::default();
        for l in events.lines() {
            read_line(kind, l, &mut f, NOW);
        }
        classify(kind, &f, end, stderr, NOW, &utc)
    }

    fn recorded(kind: Kind, name: &str, end: End) -> Verdict {
        let dir = format!(
            "{}/tests/data/agent/recorded/{}",
            env!("CARGO_MANIFEST_DIR"),
            kind.name()
        );
        let read =
            |ext: &str| std::fs::read_to_string(format!("{dir}/{name}.{ext}")).unwrap_or_default();
        verdict(kind, &read("jsonl"), end, &read("stderr"))
    }

    #[test]
    fn every_recorded_ending() {
        use Class::*;
        use Kind::*;
        let cases = [
            (Claude, "ok", End::Exit(0), Done),
            (Claude, "429", End::Exit(1), RateLimited),
            (Claude, "401", End::Exit(1), Auth),
            (Claude, "403", End::Exit(1), Auth),
            (Claude, "400", End::Exit(1), InvalidRequest),
            (Claude, "500", End::Exit(1), Overloaded),
            (Claude, "529", End::Exit(1), Overloaded),
            (Codex, "ok", End::Exit(0), Done),
            (Codex, "429", End::Exit(1), RateLimited),
            (Codex, "401", End::Exit(1), Auth),
            (Codex, "403", End::Exit(1), Auth),
            (Codex, "500", End::Exit(1), Overloaded),
            (Gemini, "ok", End::Exit(0), Done),
            (Gemini, "429", End::Exit(173), RateLimited),
            (Gemini, "401", End::Exit(145), Auth),
            (Gemini, "403", End::Exit(147), Auth),
            (Gemini, "400", End::Exit(144), InvalidRequest),
            (Gemini, "500", End::Exit(244), Overloaded),
        ];
        for (kind, name, end, class) in cases {
            let v = recorded(kind, name, end);
            assert_eq!(v.class, class, "{kind:?} {name}: {v:?}");
        }
        assert_eq!(recorded(Gemini, "429", End::Exit(173)).reset_in, Some(7));
    }

    #[test]
    fn words_and_codes() {
        use Class::*;
        let claude = |json: &str| verdict(Kind::Claude, json, End::Exit(1), "").class;
        assert_eq!(
            claude(
                r#"{"type":"result","subtype":"success","is_error":true,"result":"Credit balance is too low"}"#
            ),
            Billing
        );
        assert_eq!(
            claude(
                r#"{"type":"result","subtype":"success","is_error":true,"result":"This request draws from your extra usage"}"#
            ),
            Billing
        );
        assert_eq!(
            claude(
                r#"{"type":"result","subtype":"success","is_error":true,"result":"Your organization has been disabled."}"#
            ),
            Disabled
        );
        assert_eq!(
            claude(
                r#"{"type":"result","subtype":"success","is_error":true,"result":"You've hit your limit · resets 3pm"}"#
            ),
            UsageLimit
        );
        assert_eq!(
            claude(r#"{"type":"result","subtype":"error_max_turns","is_error":false}"#),
            TurnLimit
        );
        assert_eq!(
            claude(r#"{"type":"result","subtype":"error_during_execution","is_error":true}"#),
            Crashed
        );
        assert_eq!(
            claude(
                r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","permission_denials":[{"tool_name":"Bash","tool_input":{"command":"rm -rf /"}}]}"#
            ),
            PermissionDenied
        );
        assert_eq!(claude(""), Crashed);
        let gemini = |code| verdict(Kind::Gemini, "", End::Exit(code), "").class;
        assert_eq!(gemini(41), Auth);
        assert_eq!(gemini(42), InvalidRequest);
        assert_eq!(gemini(53), TurnLimit);
        assert_eq!(gemini(55), PermissionDenied);
        assert_eq!(verdict(Kind::Plain, "hi", End::Exit(0), "").class, Done);
        assert_eq!(
            verdict(
                Kind::Plain,
                "",
                End::Exit(1),
                "Error: 429 Too Many Requests. Retry after 09s"
            )
            .reset_in,
            Some(9)
        );
        assert_eq!(verdict(Kind::Claude, "", End::Hung, "").class, Hung);
        assert_eq!(verdict(Kind::Claude, "", End::Signal(9), "").class, Crashed);
    }

    /// Gemini CLI's stream as it reached loopx when the CLI exited 0 with
    /// its writes still queued: cut in the middle of the prompt's echo, no
    /// result. A failure to retry, whatever its stderr says.
    #[test]
    fn exit_0_without_a_result_is_a_crash() {
        let ok = std::fs::read_to_string(format!(
            "{}/tests/data/agent/recorded/gemini/ok.jsonl",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap_or_else(|e| panic!("ok.jsonl: {e}"));
        let cut = &ok[..ok.find("\"role\":\"user\"").expect("the prompt's echo") + 40];
        let stderr = "Ripgrep is not available. Falling back to GrepTool.\n\
                      Model at capacity, billing account disabled\n";
        let v = verdict(Kind::Gemini, cut, End::Exit(0), stderr);
        assert_eq!(v.class, Class::Crashed, "{v:?}");
        assert!(v.class.resumable() && !v.class.permanent());
        assert!(v.reason.contains("without its result event"), "{v:?}");
        // The same stream whole is done; every preset's CLI is held to it.
        assert_eq!(
            verdict(Kind::Gemini, &ok, End::Exit(0), stderr).class,
            Class::Done
        );
        for kind in [Kind::Claude, Kind::Codex] {
            let v = verdict(kind, "", End::Exit(0), stderr);
            assert_eq!(v.class, Class::Crashed, "{kind:?}: {v:?}");
        }
        // A plain command has no result event: its exit says it all.
        assert_eq!(
            verdict(Kind::Plain, "", End::Exit(0), stderr).class,
            Class::Done
        );
    }

    #[test]
    fn a_failure_that_said_nothing_is_told_by_how_it_ended() {
        let reason = |end| verdict(Kind::Gemini, "", end, "").reason;
        assert_eq!(reason(End::Signal(9)), "it was ended by signal 9");
        assert_eq!(
            reason(End::Exit(0)),
            "it exited 0 without its result event (its output stopped early)"
        );
        assert_eq!(
            reason(End::Exit(1)),
            "it exited with code 1, saying nothing on stderr"
        );
        assert_eq!(
            verdict(Kind::Gemini, "", End::Exit(0), "").class,
            Class::Crashed
        );
    }

    #[test]
    fn codex_usage_limit_with_its_reset() {
        let v = verdict(
            Kind::Codex,
            r#"{"type":"turn.failed","error":{"message":"You've hit your usage limit."}}"#,
            End::Exit(1),
            r#"error: {"type":"usage_limit_reached","resets_in_seconds":1234}"#,
        );
        assert_eq!((v.class, v.reset_in), (Class::UsageLimit, Some(1234)));
    }

    #[test]
    fn a_rejected_quota_waits_for_its_reset() {
        let events = format!(
            "{{\"type\":\"rate_limit_event\",\"rate_limit_info\":{{\"status\":\"rejected\",\"resetsAt\":{}}}}}\n\
             {{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":true,\"result\":\"Claude AI usage limit reached\"}}",
            NOW + 60
        );
        let v = verdict(Kind::Claude, &events, End::Exit(1), "");
        assert_eq!((v.class, v.reset_in), (Class::UsageLimit, Some(60)));
    }

    #[test]
    fn the_json_result_forms() {
        let mut f = Facts::default();
        read_document(
            Kind::Claude,
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"x"}"#,
            &mut f,
            NOW,
        );
        assert_eq!(
            classify(Kind::Claude, &f, End::Exit(1), "", NOW, &utc).class,
            Class::RateLimited
        );
    }

    #[test]
    fn classes_are_sorted_by_what_the_loop_does() {
        let permanent: Vec<_> = TABLE
            .iter()
            .filter(|r| r.0.permanent())
            .map(|r| r.1)
            .collect();
        assert_eq!(
            permanent,
            [
                "auth",
                "billing",
                "disabled",
                "permission_denied",
                "invalid_request",
                "missing"
            ]
        );
        assert!(Class::UsageLimit.waits() && !Class::Auth.resumable() && Class::Hung.resumable());
    }

    #[test]
    fn default_waits_double_up_to_an_hour() {
        assert_eq!(default_wait(300, 0), 300);
        assert_eq!(default_wait(300, 2), 1200);
        assert_eq!(default_wait(300, 9), 3600);
        assert_eq!(default_wait(7200, 3), 7200);
        assert_eq!(default_wait(0, 0), 1);
    }
}
