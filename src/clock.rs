//! Wall-clock times as the run log and `loopx status` write them: RFC 3339,
//! UTC, milliseconds (`2026-11-24T17:30:05.123Z`); and RFC 3339 times as a
//! script's `retry_after` gives them, with any offset.

use std::time::{SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 to a (year, month, day) of the proleptic Gregorian
/// calendar (the civil-from-days algorithm, by 400-year eras).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Milliseconds since the Unix epoch (0 for a clock set before it).
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `t` as RFC 3339 UTC with milliseconds.
pub fn rfc3339(t: SystemTime) -> String {
    format_ms(unix_ms(t))
}

/// The last millisecond RFC 3339 can write (`9999-12-31T23:59:59.999Z`):
/// it has four-digit years.
pub const MAX_MS: u64 = 253_402_300_799_999;

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds; a time
/// past year 9999 (a wait of 1e300 seconds) is written as [`MAX_MS`], so
/// the text is always valid and always 24 characters.
pub fn format_ms(ms: u64) -> String {
    let ms = ms.min(MAX_MS);
    let secs = (ms / 1000) as i64;
    let (y, mo, d) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        s / 3600,
        s % 3600 / 60,
        s % 60,
        ms % 1000
    )
}

/// Days since 1970-01-01 of a (year, month, day) of the proleptic Gregorian
/// calendar (days-from-civil, the inverse of `civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// An RFC 3339 date-time (`2026-11-25T14:00:00Z`, `...T14:00:00.5+01:00`)
/// as milliseconds since the Unix epoch (negative before it). Fractions
/// beyond milliseconds are truncated; a leap second reads as the next
/// second's start.
pub fn parse_rfc3339(text: &str) -> Result<i64, String> {
    // The text is not quoted: it may be a script's, and messages quote the
    // value as written, escaped (error.rs, InvalidExtension).
    let bad = || "not an RFC 3339 time (like 2026-11-25T14:00:00Z)".to_string();
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = b.get(range)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0')))
    };
    let sep = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(sep(4, b'-') && sep(7, b'-') && sep(13, b':') && sep(16, b':')) {
        return Err(bad());
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' ')) {
        return Err(bad());
    }
    let fields = (
        num(0..4),
        num(5..7),
        num(8..10),
        num(11..13),
        num(14..16),
        num(17..19),
    );
    let (Some(y), Some(mo), Some(d), Some(h), Some(mi), Some(s)) = fields else {
        return Err(bad());
    };
    let y = i64::from(y);
    if !(1..=12).contains(&mo) || d == 0 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 60
    {
        return Err(bad());
    }
    // Fraction: one or more digits after a dot.
    let mut i = 19;
    let mut ms = 0u32;
    if sep(i, b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return Err(bad());
        }
        for (k, digit) in b[start..i.min(start + 3)].iter().enumerate() {
            ms += u32::from(digit - b'0') * [100, 10, 1][k];
        }
    }
    let offset_min: i64 = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if i + 6 == b.len() && sep(i + 3, b':') => {
            let (Some(oh), Some(om)) = (num(i + 1..i + 3), num(i + 4..i + 6)) else {
                return Err(bad());
            };
            if oh > 23 || om > 59 {
                return Err(bad());
            }
            let m = i64::from(oh * 60 + om);
            if sign == b'-' {
                -m
            } else {
                m
            }
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + i64::from(h * 3600 + mi * 60 + s) - offset_min * 60;
    Ok(secs * 1000 + i64::from(ms))
}

/// Milliseconds since the Unix epoch, now (negative never: a clock before
/// 1970 reads as 0).
pub fn now_ms() -> i64 {
    i64::try_from(unix_ms(SystemTime::now())).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn known_instants() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(format_ms(1_795_541_405_123), "2026-11-24T17:30:05.123Z");
        assert_eq!(format_ms(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
        assert_eq!(format_ms(MAX_MS), "9999-12-31T23:59:59.999Z");
        assert_eq!(format_ms(9_000_000_000_000_000), "9999-12-31T23:59:59.999Z");
        assert_eq!(format_ms(u64::MAX), "9999-12-31T23:59:59.999Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_541_405_123);
        assert_eq!(rfc3339(t), "2026-11-24T17:30:05.123Z");
    }

    #[test]
    fn rfc3339_times_parse_with_offsets_and_fractions() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_rfc3339("2026-11-24T17:30:05.123Z"),
            Ok(1_795_541_405_123)
        );
        assert_eq!(
            parse_rfc3339("2026-11-24T18:30:05.123456+01:00"),
            Ok(1_795_541_405_123)
        );
        assert_eq!(
            parse_rfc3339("2026-11-24t16:00:05.1-01:30"),
            Ok(1_795_541_405_100)
        );
        assert_eq!(parse_rfc3339("2000-02-29 00:00:00z"), Ok(951_782_400_000));
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59Z"), Ok(-1000));
        // A leap second is the next second's start.
        assert_eq!(parse_rfc3339("1970-01-01T00:00:60Z"), Ok(60_000));
        for ms in [0, 951_782_400_000, 1_795_541_405_123, 4_102_444_799_999] {
            assert_eq!(parse_rfc3339(&format_ms(ms)), Ok(ms as i64));
        }
    }

    #[test]
    fn malformed_rfc3339_times_are_refused() {
        for bad in [
            "",
            "tomorrow",
            "2026-11-24",
            "2026-11-24T17:30:05",
            "2026-11-24T17:30Z",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-11-31T00:00:00Z",
            "2026-11-24T24:00:00Z",
            "2026-11-24T17:60:00Z",
            "2026-11-24T17:30:05.Z",
            "2026-11-24T17:30:05+0100",
            "2026-11-24T17:30:05+24:00",
            "2026-11-24T17:30:05Z ",
            "+2026-11-24T17:30:05Z",
            "2026-1-24T17:30:05Z",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad:?}");
        }
    }
}
