//! When a usage or rate limit lifts, from what the agent CLIs print:
//! `Retry after 09s` (decimal: 9 s, never octal), `resets_in_seconds`,
//! `resets_at` and `|<epoch>` stamps, durations ("try again in 2 days 3
//! hours", "reset after 2h52m39s") and wall-clock times ("resets 3pm
//! (Europe/Paris)", "try again at Jan 25th, 2030 7:33 PM"). All pure: the
//! clock (`now`, seconds since the epoch) and the zone's UTC offset come in
//! as arguments.

/// A zone's UTC offset in seconds at `now`; `None` names the local zone.
pub type Offset<'a> = &'a dyn Fn(Option<&str>, u64) -> i64;

/// Seconds until the reset a limit message names, if it names one.
pub fn reset_in(text: &str, now: u64, offset: Offset) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    retry_after(&lower)
        .or_else(|| number_after(&lower, "resets_in_seconds").filter(|&n| n > 0))
        .or_else(|| epoch_after(&lower, "resets_at", now))
        .or_else(|| epoch_after(&lower, "|", now))
        .or_else(|| duration_after(&lower))
        .or_else(|| clock_after(text, &lower, now, offset))
}

/// `retry after 9s`, `Suggested retry after 7s.`, `retry after 1.5s`.
fn retry_after(lower: &str) -> Option<u64> {
    let at = lower.find("retry after ")? + "retry after ".len();
    let (secs, _) = duration(&lower[at..])?;
    Some(secs.max(1))
}

/// The number after `key` and any `":` or blanks (`"resets_in_seconds":
/// 120`), read in decimal.
fn number_after(lower: &str, key: &str) -> Option<u64> {
    let at = lower.find(key)? + key.len();
    let rest = lower[at..].trim_start_matches(['"', ':', ' ', '=']);
    let digits: &str = &rest[..rest.bytes().take_while(u8::is_ascii_digit).count()];
    (!digits.is_empty() && digits.len() <= 15)
        .then(|| digits.parse().ok())
        .flatten()
}

/// An epoch stamp after `key`, in seconds or milliseconds; only a future
/// one counts.
fn epoch_after(lower: &str, key: &str, now: u64) -> Option<u64> {
    let n = number_after(lower, key)?;
    let secs = if n >= 100_000_000_000 { n / 1000 } else { n };
    (secs > now && secs >= 1_000_000_000).then(|| secs - now)
}

/// "try again in 2 days 3 hours", "reset after 2h52m39s", "resets in 5
/// hours".
fn duration_after(lower: &str) -> Option<u64> {
    [
        "try again in ",
        "reset after ",
        "resets after ",
        "resets in ",
        "reset in ",
    ]
    .iter()
    .find_map(|key| {
        let at = lower.find(key)? + key.len();
        duration(&lower[at..]).map(|(s, _)| s.max(1))
    })
}

/// A duration at the start of `text`: `9s`, `09s` (decimal), `1.5s`, `2h52m39s`,
/// `2 days 3 hours`; a bare number is seconds. Returns whole seconds
/// (rounded up) and the bytes read.
pub fn duration(text: &str) -> Option<(u64, usize)> {
    let b = text.as_bytes();
    let (mut i, mut total, mut parts) = (0, 0f64, 0);
    loop {
        let start = i;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
            i += 1;
        }
        let Ok(n) = text[start..i].parse::<f64>() else {
            break;
        };
        let mut j = i;
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        let word_end = j + b[j..]
            .iter()
            .take_while(|c| c.is_ascii_alphabetic())
            .count();
        let unit = match &text[j..word_end] {
            "d" | "day" | "days" => 86400.0,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "s" | "sec" | "secs" | "second" | "seconds" | "" => 1.0,
            "ms" => 0.001,
            _ => break,
        };
        total += n * unit;
        parts += 1;
        i = word_end;
        // "2 days, 3 hours", "2 days and 3 hours".
        let rest = &text[i..];
        let skip = rest.len() - rest.trim_start_matches([' ', ',']).len();
        let rest = &rest[skip..];
        let and = if rest.starts_with("and ") { 4 } else { 0 };
        if rest[and..].starts_with(|c: char| c.is_ascii_digit()) {
            i += skip + and;
        } else {
            break;
        }
    }
    (parts > 0 && total.is_finite() && total < 1e9).then(|| (total.ceil() as u64, i))
}

/// A wall-clock reset: "resets 3pm (Europe/Paris)", "try again at 3:42
/// PM", "reset at Jan 25th, 2030 7:33 PM". A time already past today is
/// tomorrow's.
fn clock_after(text: &str, lower: &str, now: u64, offset: Offset) -> Option<u64> {
    ["resets at ", "reset at ", "try again at ", "resets "]
        .iter()
        .find_map(|key| {
            let at = lower.find(key)? + key.len();
            let (date, rest) = date_prefix(&lower[at..]);
            let (hour, minute, used) = clock(rest)?;
            let after = &text[at + (lower.len() - at - rest.len()) + used..];
            let off = offset(zone_in(after), now);
            local_to_wait(date, hour * 3600 + minute * 60, now, off)
        })
}

/// Seconds to wait for `secs_of_day` on `date` (or the next such time
/// when no date) in a zone `off` seconds east of UTC.
fn local_to_wait(
    date: Option<(i64, u32, u32)>,
    secs_of_day: u64,
    now: u64,
    off: i64,
) -> Option<u64> {
    let local_now = now as i64 + off;
    let target = match date {
        Some((y, m, d)) => days_from_civil(y, m, d) * 86400 + secs_of_day as i64,
        None => {
            let t = local_now - local_now.rem_euclid(86400) + secs_of_day as i64;
            if t <= local_now {
                t + 86400
            } else {
                t
            }
        }
    };
    (target > local_now).then(|| (target - local_now) as u64)
}

/// "Jan 25th, 2030 " at the start of `s`: the date and what follows.
fn date_prefix(s: &str) -> (Option<(i64, u32, u32)>, &str) {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let Some(m) = MONTHS.iter().position(|m| s.starts_with(m)) else {
        return (None, s);
    };
    let words: Vec<&str> = s.splitn(4, ' ').collect();
    let day = words
        .get(1)
        .map(|w| w.trim_end_matches(|c: char| !c.is_ascii_digit()));
    let year = words.get(2).map(|w| w.trim_end_matches(','));
    match (
        day.and_then(|d| d.parse().ok()),
        year.and_then(|y| y.parse().ok()),
        words.get(3),
    ) {
        (Some(d), Some(y), Some(rest)) if (1..=31).contains(&d) && y > 1970 => {
            (Some((y, m as u32 + 1, d)), rest)
        }
        _ => (None, s),
    }
}

/// "3pm", "3:42 PM", "15:00": hour, minute and the bytes read. A bare
/// number without am/pm or minutes is not a time.
fn clock(s: &str) -> Option<(u64, u64, usize)> {
    let b = s.as_bytes();
    let h_len = b.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut hour: u64 = s[..h_len].parse().ok()?;
    let mut i = h_len;
    let mut minute = 0;
    let mut explicit = false;
    if b.get(i) == Some(&b':') {
        let m_len = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        minute = s[i + 1..i + 1 + m_len].parse().ok()?;
        i += 1 + m_len;
        explicit = true;
    }
    let rest = s[i..].trim_start();
    let lower = rest.to_ascii_lowercase();
    if lower.starts_with("am") || lower.starts_with("pm") {
        if !(1..=12).contains(&hour) {
            return None;
        }
        hour = hour % 12 + if lower.starts_with("pm") { 12 } else { 0 };
        i = s.len() - rest.len() + 2;
        explicit = true;
    }
    (explicit && hour < 24 && minute < 60).then_some((hour, minute, i))
}

/// The zone named in parentheses after a time: "(Europe/Paris)".
fn zone_in(after: &str) -> Option<&str> {
    let open = after.trim_start().strip_prefix('(')?;
    let zone = &open[..open.find(')')?];
    let ok = !zone.is_empty()
        && zone.len() <= 64
        && !zone.contains("..")
        && zone
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/_+-".contains(&b));
    ok.then_some(zone)
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-01-01T12:00:00Z.
    const NOW: u64 = 1_767_268_800;

    fn utc(_: Option<&str>, _: u64) -> i64 {
        0
    }

    fn wait(text: &str) -> Option<u64> {
        reset_in(text, NOW, &utc)
    }

    #[test]
    fn retry_after_is_decimal_seconds() {
        assert_eq!(wait("Rate limited. Retry after 09s"), Some(9));
        assert_eq!(wait("Suggested retry after 7s."), Some(7));
        assert_eq!(wait("retry after 1.2s"), Some(2));
        assert_eq!(wait("retry after 0s"), Some(1));
        assert_eq!(wait("Retry after 2m"), Some(120));
    }

    #[test]
    fn resets_in_seconds_and_epochs() {
        assert_eq!(
            wait(r#"{"type":"usage_limit_reached","resets_in_seconds":120}"#),
            Some(120)
        );
        assert_eq!(wait("resets_in_seconds: 0"), None);
        assert_eq!(
            wait(&format!("Claude AI usage limit reached|{}", NOW + 600)),
            Some(600)
        );
        assert_eq!(
            wait(&format!(r#""resets_at":{}"#, (NOW + 60) * 1000)),
            Some(60)
        );
        assert_eq!(wait(&format!("limit reached|{}", NOW - 5)), None);
    }

    #[test]
    fn durations_in_words() {
        assert_eq!(
            wait("try again in 2 days 3 hours"),
            Some(2 * 86400 + 3 * 3600)
        );
        assert_eq!(
            wait("Your quota will reset after 2h52m39s."),
            Some(2 * 3600 + 52 * 60 + 39)
        );
        assert_eq!(wait("try again in 1 hour and 5 minutes"), Some(3900));
        assert_eq!(duration("09"), Some((9, 2)));
        assert_eq!(duration("abc"), None);
    }

    #[test]
    fn wall_clock_times_wait_until_the_next_one() {
        // 12:00 UTC now: 3pm is in three hours, 9am tomorrow.
        assert_eq!(
            wait("You've hit your limit · resets 3pm (Europe/Paris)"),
            Some(3 * 3600)
        );
        assert_eq!(wait("try again at 9:30 AM."), Some(21 * 3600 + 1800));
        assert_eq!(wait("try again at 12am"), Some(12 * 3600));
        assert_eq!(wait("resets 5"), None);
        assert_eq!(
            wait("try again at Jan 2nd, 2026 7:33 PM"),
            Some(86400 + 7 * 3600 + 33 * 60)
        );
        assert_eq!(wait("try again at Jan 1st, 2025 7:33 PM"), None);
    }

    #[test]
    fn the_named_zone_sets_the_offset() {
        let paris = |z: Option<&str>, _| if z == Some("Europe/Paris") { 3600 } else { 0 };
        // 13:00 in Paris now: 3pm there is in two hours.
        assert_eq!(
            reset_in("resets 3pm (Europe/Paris)", NOW, &paris),
            Some(2 * 3600)
        );
        assert_eq!(zone_in(" (../../etc/passwd)"), None);
    }

    #[test]
    fn no_reset_named() {
        assert_eq!(wait("Too Many Requests"), None);
        assert_eq!(wait(""), None);
    }

    #[test]
    fn civil_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(
            days_from_civil(2026, 1, 1) * 86400,
            (NOW - 12 * 3600) as i64
        );
    }
}
