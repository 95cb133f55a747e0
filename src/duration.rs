//! Durations on the command line (DESIGN.md "Beyond the spec"): a number
//! with a unit, `500ms`, `90s`, `15m`, `2h`, or units combined from the
//! largest down, `1h30m`, `2m30s`; a bare number is seconds. Integers only:
//! `1.5h` is written `1h30m`. Printed back in the same form, so a message
//! shows a value the user could have typed.

use std::time::Duration;

const UNITS: [(&str, u64); 4] = [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)];

/// Parses a duration; the error says what is wrong, for a usage message.
pub fn parse(text: &str) -> Result<Duration, String> {
    if text.is_empty() {
        return Err("expected a duration such as 90s, 15m, 2h or 1h30m".to_string());
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        let secs = text.parse::<u64>().map_err(|_| too_long())?;
        return Ok(Duration::from_secs(secs));
    }
    let mut rest = text;
    let mut total: u64 = 0;
    // Units must come from the largest down, each at most once.
    let mut next_unit = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!(
                "expected a number before '{rest}' (a duration such as 90s, 15m, 2h or 1h30m)"
            ));
        }
        let (number, after) = rest.split_at(digits);
        let letters = after.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, after) = after.split_at(letters);
        if unit.is_empty() {
            return Err(if after.is_empty() {
                format!("'{number}' needs a unit inside a duration: h, m, s or ms")
            } else {
                format!("unexpected '{after}' (whole numbers only: 1h30m, not 1.5h)")
            });
        }
        let Some(index) = UNITS.iter().position(|(u, _)| *u == unit) else {
            return Err(format!(
                "unknown unit '{unit}' (units: h, m, s, ms; a bare number is seconds)"
            ));
        };
        if index < next_unit {
            return Err("units go from the largest down, each once (as in 1h30m)".to_string());
        }
        next_unit = index + 1;
        let value: u64 = number.parse().map_err(|_| too_long())?;
        total = value
            .checked_mul(UNITS[index].1)
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(too_long)?;
        rest = after;
    }
    Ok(Duration::from_millis(total))
}

fn too_long() -> String {
    "the duration is too long".to_string()
}

/// `1h30m`, `15m`, `90s` → `1m30s`, `500ms`, `0s`.
pub fn format(d: Duration) -> String {
    let mut ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    for (unit, size) in UNITS {
        if ms >= size {
            out.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    out
}

/// `850ms`, `12.4s`, `3m05s`, `1h02m`: an elapsed time, for `--verbose`.
pub fn format_elapsed(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}.{}s", ms / 1_000, (ms % 1_000) / 100)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1_000)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms % 3_600_000) / 60_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn units_and_bare_seconds() {
        assert_eq!(parse("500ms"), Ok(ms(500)));
        assert_eq!(parse("90s"), Ok(ms(90_000)));
        assert_eq!(parse("15m"), Ok(ms(900_000)));
        assert_eq!(parse("2h"), Ok(ms(7_200_000)));
        assert_eq!(parse("1h30m"), Ok(ms(5_400_000)));
        assert_eq!(parse("1m30s250ms"), Ok(ms(90_250)));
        assert_eq!(parse("45"), Ok(ms(45_000)));
        assert_eq!(parse("0"), Ok(ms(0)));
        assert_eq!(parse("007s"), Ok(ms(7_000)));
    }

    #[test]
    fn malformed_durations_say_why() {
        for (text, why) in [
            ("", "expected a duration"),
            ("m", "expected a number"),
            ("1.5h", "unexpected '.5h'"),
            ("10x", "unknown unit 'x'"),
            ("10 s", "unexpected ' s'"),
            ("-5s", "expected a number"),
            ("30m1h", "largest down"),
            ("1s1s", "largest down"),
            ("1h30", "'30' needs a unit"),
            ("99999999999999999999", "too long"),
            ("9999999999999999h", "too long"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
    }

    #[test]
    fn format_writes_what_parse_reads() {
        for (d, text) in [
            (ms(0), "0s"),
            (ms(500), "500ms"),
            (ms(90_000), "1m30s"),
            (ms(900_000), "15m"),
            (ms(5_400_000), "1h30m"),
            (ms(1_500), "1s500ms"),
            (ms(36_000_000), "10h"),
        ] {
            assert_eq!(format(d), text);
            assert_eq!(parse(text), Ok(d));
        }
    }

    #[test]
    fn elapsed_times_read_at_a_glance() {
        assert_eq!(format_elapsed(ms(850)), "850ms");
        assert_eq!(format_elapsed(ms(12_440)), "12.4s");
        assert_eq!(format_elapsed(ms(185_000)), "3m05s");
        assert_eq!(format_elapsed(ms(3_725_000)), "1h02m");
    }
}
