//! Waits a script asks for, and the money it says it spent: the `retry_after`
//! and `cost_usd` extension fields of a script's output (DESIGN.md "Beyond
//! the spec"). Pure: values in, decisions and wording out; the engine waits.

use std::time::Duration;

use crate::clock;
use crate::duration;

/// A `retry_after` value as a script gave it.
#[derive(Debug, Clone, PartialEq)]
pub enum RetryAfter {
    /// Seconds from the end of the script run.
    Seconds(f64),
    /// An RFC 3339 time, in milliseconds since the epoch.
    At(i64),
}

/// A JSON number as `retry_after`: seconds, at least 0.
pub fn retry_after_seconds(n: f64) -> Result<RetryAfter, String> {
    if n.is_finite() && n >= 0.0 {
        Ok(RetryAfter::Seconds(n))
    } else {
        Err("expected seconds (a number of at least 0) or an RFC 3339 time".to_string())
    }
}

/// A JSON string as `retry_after`: an RFC 3339 time.
pub fn retry_after_time(text: &str) -> Result<RetryAfter, String> {
    clock::parse_rfc3339(text).map(RetryAfter::At)
}

/// The most dollars loopx counts: the bound of `--max-cost` and of one
/// script run's `cost_usd`. Why one bound for both: a run ends once its
/// total reaches `--max-cost`, so before each check the total is below
/// twice this; and without `--max-cost`, adding at most this to a finite
/// total never gives Infinity (past 2^1023 it is below half a unit of the
/// last place). So the total, written to the run log and the checkpoint,
/// is always a finite number.
pub const MAX_DOLLARS: f64 = 1e9;

/// `MAX_DOLLARS` as messages write it.
pub const MAX_DOLLARS_TEXT: &str = "1000000000";

/// A JSON number as `cost_usd`: dollars, at least 0. `Ok(None)` for a
/// number past [`MAX_DOLLARS`] or not finite (`1e999` reads as Infinity):
/// not counted, and the engine says so.
pub fn cost_usd(n: f64) -> Result<Option<f64>, String> {
    if n.is_nan() || n < 0.0 {
        Err("expected US dollars (a number of at least 0)".to_string())
    } else if n > MAX_DOLLARS {
        Ok(None)
    } else {
        Ok(Some(n))
    }
}

impl RetryAfter {
    /// When the script asked to run again, in milliseconds since the epoch.
    pub fn deadline_ms(&self, now_ms: i64) -> i64 {
        match self {
            // Saturating: a value of 1e300 seconds waits "forever", which the
            // bounds below then refuse.
            RetryAfter::Seconds(s) => now_ms.saturating_add((s * 1000.0).min(9.0e15) as i64),
            RetryAfter::At(t) => *t,
        }
    }
}

/// Why a wait is not granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TooLong {
    /// Longer than `--max-wait`.
    MaxWait(Duration),
    /// It would end after `--max-time`'s budget.
    MaxTime(Duration),
}

/// Whether a wait until `deadline_ms` is granted: not longer than
/// `max_wait`, and not ending past the budget's end (`budget_left`, time
/// still left of `--max-time`).
pub fn check(
    deadline_ms: i64,
    now_ms: i64,
    max_wait: Duration,
    max_time: Option<(Duration, Duration)>,
) -> Result<Duration, TooLong> {
    let wait = Duration::from_millis(u64::try_from(deadline_ms - now_ms).unwrap_or(0));
    if wait > max_wait {
        return Err(TooLong::MaxWait(max_wait));
    }
    match max_time {
        Some((limit, left)) if wait >= left => Err(TooLong::MaxTime(limit)),
        _ => Ok(wait),
    }
}

/// A deadline for people: the time of day (UTC) when it is within a day,
/// else the whole RFC 3339 time; seconds, no milliseconds.
pub fn shown_time(deadline_ms: i64, now_ms: i64) -> String {
    let full = clock::format_ms(u64::try_from(deadline_ms).unwrap_or(0));
    // `YYYY-MM-DDTHH:MM:SS.mmmZ` → `YYYY-MM-DDTHH:MM:SSZ`
    let full = format!("{}Z", &full[..19]);
    if (0..24 * 3600 * 1000).contains(&(deadline_ms - now_ms)) {
        full[11..].to_string()
    } else {
        full
    }
}

/// `in 4h12m`: the time until `deadline_ms`, rounded up to the second.
pub fn shown_in(deadline_ms: i64, now_ms: i64) -> String {
    let ms = u64::try_from(deadline_ms - now_ms).unwrap_or(0);
    duration::format(Duration::from_secs(ms.div_ceil(1000)))
}

/// The line a wait prints on stderr.
pub fn announce(label: &str, deadline_ms: i64, now_ms: i64) -> String {
    format!(
        "{label} asked to wait until {} (in {}); Ctrl-C to stop",
        shown_time(deadline_ms, now_ms),
        shown_in(deadline_ms, now_ms)
    )
}

/// What `loopx output --retry-after <value>` writes: seconds, a duration
/// (`90s`, `1h30m`: as seconds) or an RFC 3339 time (as given). The JSON
/// value text.
pub fn output_retry_after(arg: &str) -> Result<String, String> {
    if clock::parse_rfc3339(arg).is_ok() {
        let mut s = String::new();
        crate::json::write_json_string(&mut s, arg);
        return Ok(s);
    }
    let d = duration::parse(arg).map_err(|_| {
        "expected seconds, a duration (90s, 1h30m) or an RFC 3339 time (2026-11-25T14:00:00Z)"
            .to_string()
    })?;
    let ms = d.as_millis();
    Ok(if ms % 1000 == 0 {
        (ms / 1000).to_string()
    } else {
        crate::json::number_to_js_string(ms as f64 / 1000.0)
    })
}

/// US dollars as a command line gives them: a plain decimal number (`5`,
/// `0.25`), from 0 to [`MAX_DOLLARS`] (`--max-cost`, `loopx output
/// --cost-usd`).
pub fn parse_dollars(arg: &str) -> Result<f64, String> {
    let plain = !arg.is_empty()
        && arg != "."
        && arg.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && arg.bytes().filter(|&b| b == b'.').count() <= 1;
    match arg.parse::<f64>() {
        Ok(n) if plain && n <= MAX_DOLLARS => Ok(n),
        _ => Err(format!(
            "expected US dollars (a number from 0 to {MAX_DOLLARS_TEXT}, like 0.25)"
        )),
    }
}

/// What `loopx output --cost-usd <n>` writes.
pub fn output_cost_usd(arg: &str) -> Result<String, String> {
    parse_dollars(arg).map(crate::json::number_to_js_string)
}

/// `$5.13`: dollars for messages, to the cent; below a cent with two
/// significant digits (`$0.0042`), so sub-cent agent runs do not read
/// `$0.00` (at most six decimals: a millionth of a dollar is noise).
pub fn dollars(usd: f64) -> String {
    if !usd.is_finite() || usd <= 0.0 || usd >= 0.01 {
        return format!("${usd:.2}");
    }
    // Decimals for two significant digits: 0.0042 has its first at the 3rd.
    let first = (-usd.log10()).ceil() as usize;
    let decimals = (first + 1).clamp(3, 6);
    let text = format!("${usd:.decimals$}");
    if text
        .trim_start_matches("$0.")
        .trim_start_matches('0')
        .is_empty()
    {
        "<$0.000001".to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_795_541_405_000; // 2026-11-24T17:30:05Z

    #[test]
    fn retry_after_is_seconds_or_a_time() {
        assert_eq!(retry_after_seconds(0.0), Ok(RetryAfter::Seconds(0.0)));
        assert_eq!(
            retry_after_seconds(1.5).map(|r| r.deadline_ms(NOW)),
            Ok(NOW + 1500)
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            assert!(retry_after_seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(
            retry_after_time("2026-11-24T18:30:05+01:00").map(|r| r.deadline_ms(0)),
            Ok(NOW)
        );
        assert!(retry_after_time("in an hour").is_err());
        assert!(retry_after_seconds(1e300).is_ok_and(|r| r.deadline_ms(NOW) > NOW));
    }

    #[test]
    fn waits_past_max_wait_or_the_budget_are_refused() {
        let s = Duration::from_secs;
        assert_eq!(check(NOW + 60_000, NOW, s(3600), None), Ok(s(60)));
        // A time already past: no wait at all.
        assert_eq!(check(NOW - 5_000, NOW, s(3600), None), Ok(s(0)));
        assert_eq!(
            check(NOW + 7_200_000, NOW, s(3600), None),
            Err(TooLong::MaxWait(s(3600)))
        );
        assert_eq!(
            check(NOW + 60_000, NOW, s(3600), Some((s(600), s(30)))),
            Err(TooLong::MaxTime(s(600)))
        );
        assert_eq!(
            check(NOW + 60_000, NOW, s(3600), Some((s(600), s(90)))),
            Ok(s(60))
        );
    }

    #[test]
    fn a_wait_is_announced_with_its_time_and_how_long() {
        assert_eq!(
            announce("ralph:index", NOW + (4 * 60 + 12) * 60_000, NOW),
            "ralph:index asked to wait until 21:42:05Z (in 4h12m); Ctrl-C to stop"
        );
        assert_eq!(
            announce("w:a", NOW + 2 * 86_400_000, NOW),
            "w:a asked to wait until 2026-11-26T17:30:05Z (in 48h); Ctrl-C to stop"
        );
        assert_eq!(shown_in(NOW + 1, NOW), "1s");
    }

    #[test]
    fn a_cost_past_the_bound_or_infinite_is_not_counted() {
        assert_eq!(cost_usd(0.5), Ok(Some(0.5)));
        assert_eq!(cost_usd(MAX_DOLLARS), Ok(Some(MAX_DOLLARS)));
        assert_eq!(cost_usd(1e308), Ok(None));
        assert_eq!(cost_usd(f64::INFINITY), Ok(None));
        assert!(cost_usd(-1.0).is_err());
        assert!(cost_usd(f64::NEG_INFINITY).is_err());
        // The total stays finite, however many script runs add the most.
        let total = (0..1000).fold(f64::MAX, |t, _| t + MAX_DOLLARS);
        assert!(total.is_finite());
    }

    #[test]
    fn loopx_output_values() {
        assert_eq!(output_retry_after("90").as_deref(), Ok("90"));
        assert_eq!(output_retry_after("90s").as_deref(), Ok("90"));
        assert_eq!(output_retry_after("1h30m").as_deref(), Ok("5400"));
        assert_eq!(output_retry_after("1500ms").as_deref(), Ok("1.5"));
        assert_eq!(
            output_retry_after("2026-11-25T14:00:00Z").as_deref(),
            Ok("\"2026-11-25T14:00:00Z\"")
        );
        for bad in ["", "-5", "soon", "2026-11-25"] {
            assert!(output_retry_after(bad).is_err(), "{bad:?}");
        }
        assert_eq!(output_cost_usd("0.25").as_deref(), Ok("0.25"));
        assert_eq!(output_cost_usd("3").as_deref(), Ok("3"));
        for bad in [
            "",
            "-1",
            "1e3",
            "$1",
            "1.2.3",
            ".",
            "NaN",
            "inf",
            "1000000000.01",
        ] {
            assert!(output_cost_usd(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_dollars("1000000000"), Ok(MAX_DOLLARS));
        let huge = format!("1{}", "0".repeat(300));
        assert!(parse_dollars(&huge).is_err());
        assert_eq!(dollars(5.129), "$5.13");
        assert_eq!(dollars(0.0), "$0.00");
        assert_eq!(dollars(0.5), "$0.50");
        assert_eq!(dollars(0.01), "$0.01");
        assert_eq!(dollars(0.0042), "$0.0042");
        assert_eq!(dollars(0.003), "$0.0030");
        assert_eq!(dollars(0.00123), "$0.0012");
        assert_eq!(dollars(0.009_99), "$0.0100");
        assert_eq!(dollars(0.000_000_1), "<$0.000001");
    }
}
