//! Durations: `250us`, `50ms`, `1.5s`, `2m`, `1h`; a plain number is milliseconds, as `--rtt 20` always was for
//! `tune` and `copy` (the lab's profiles only ever wrote a plain `0`, which is 0 ms either way).

use std::time::Duration;

use crate::number::split;
use crate::UnitError;

/// Parse a duration: a number and `ns`, `us`/`µs`, `ms`, `s`/`sec`, `m`/`min` or `h` (any case); a plain number
/// is milliseconds. Rounded to the nanosecond; `0` parses.
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let err = || UnitError::Duration(s.to_string());
    let (v, unit) = split(s).ok_or_else(err)?;
    let secs_per_unit = match unit.to_lowercase().as_str() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "" | "ms" => 1e-3,
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(err()),
    };
    let nanos = (v * secs_per_unit * 1e9).round();
    if !(nanos.is_finite() && nanos < u64::MAX as f64) {
        return Err(err());
    }
    Ok(Duration::from_nanos(nanos as u64))
}

/// Format a duration in the largest unit (h, m, s, ms, us, ns) it reaches, with at most three decimals ("1.5s",
/// "250us", "2m", "0s"); [`parse_duration`] reads it back to within 0.0005 of that unit.
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos() as f64;
    for (unit, n) in [
        ("h", 3.6e12),
        ("m", 6e10),
        ("s", 1e9),
        ("ms", 1e6),
        ("us", 1e3),
    ] {
        if nanos >= n {
            let s = format!("{:.3}", nanos / n);
            let s = s.trim_end_matches('0').trim_end_matches('.');
            return format!("{s}{unit}");
        }
    }
    if nanos == 0.0 {
        "0s".to_string()
    } else {
        format!("{nanos}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("50ms").unwrap(), Duration::from_millis(50));
        assert_eq!(parse_duration("0.1s").unwrap(), Duration::from_millis(100));
        assert_eq!(
            parse_duration("1.5 S").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("250µs").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("10ns").unwrap(), Duration::from_nanos(10));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("20").unwrap(), Duration::from_millis(20));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        for bad in [
            "",
            "ms",
            "5d",
            "-1s",
            "1e3ms",
            "NaN",
            "inf",
            "1..2s",
            "9999999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_micros(250)), "250us");
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
        assert_eq!(format_duration(Duration::from_secs(5400)), "1.5h");
        assert_eq!(format_duration(Duration::from_nanos(7)), "7ns");
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }
}
