//! Wall-clock times as the run log and `loopx status` write them: RFC 3339,
//! UTC, milliseconds (`2026-11-24T17:30:05.123Z`).

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

pub fn format_ms(ms: u64) -> String {
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
        let t = UNIX_EPOCH + Duration::from_millis(1_795_541_405_123);
        assert_eq!(rfc3339(t), "2026-11-24T17:30:05.123Z");
    }
}
