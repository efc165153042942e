//! Parsing of rates ("1gbit", "100mbit", "622Mbps", "10G") and durations ("50ms", "0.1s", "250us") for the CLI.

use std::time::Duration;

use crate::policy::ParseError;

fn split(s: &str) -> (&str, String) {
    let t = s.trim();
    let i = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    (&t[..i], t[i..].trim().to_ascii_lowercase())
}

/// Parse a link rate into bits per second. Decimal units (k = 1e3 ...); "bit"/"bps"/"b/s" suffixes optional;
/// a trailing upper-case "B" ("MB/s", "MBps") means bytes.
pub fn parse_rate(s: &str) -> Result<f64, ParseError> {
    let err = || ParseError::Rate(s.to_string());
    let (num, unit) = split(s);
    let v: f64 = num.parse().map_err(|_| err())?;
    let bytes = {
        let raw = s.trim();
        let u = &raw[num.len()..].trim();
        u.len() >= 2 && u.as_bytes()[1] == b'B'
            || *u == "B"
            || u.ends_with("B/s")
            || u.ends_with("Bps")
    };
    let mut u = unit.as_str();
    for suf in ["bit/s", "bits", "bit", "bps", "b/s", "b"] {
        if let Some(rest) = u.strip_suffix(suf) {
            u = rest;
            break;
        }
    }
    let m = match u {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        _ => return Err(err()),
    };
    let bps = v * m * if bytes { 8.0 } else { 1.0 };
    if !(bps.is_finite() && bps > 0.0) {
        return Err(err());
    }
    Ok(bps)
}

/// Parse a duration: "50ms", "0.1s", "250us", "1m"; a bare number is milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, ParseError> {
    let err = || ParseError::Duration(s.to_string());
    let (num, unit) = split(s);
    let v: f64 = num.parse().map_err(|_| err())?;
    let secs = match unit.as_str() {
        "" | "ms" => v / 1e3,
        "s" | "sec" => v,
        "us" | "µs" => v / 1e6,
        "ns" => v / 1e9,
        "m" | "min" => v * 60.0,
        _ => return Err(err()),
    };
    if !(secs.is_finite() && secs > 0.0 && secs < 1e6) {
        return Err(err());
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("1gbit").unwrap(), 1e9);
        assert_eq!(parse_rate("100mbit").unwrap(), 1e8);
        assert_eq!(parse_rate("622Mbps").unwrap(), 622e6);
        assert_eq!(parse_rate("10G").unwrap(), 10e9);
        assert_eq!(parse_rate("28.5mbit").unwrap(), 28.5e6);
        assert_eq!(parse_rate("100MB/s").unwrap(), 800e6);
        assert_eq!(parse_rate("1000").unwrap(), 1000.0);
        for bad in ["", "fast", "1x", "0gbit"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("50ms").unwrap(), Duration::from_millis(50));
        assert_eq!(parse_duration("0.1s").unwrap(), Duration::from_millis(100));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("20").unwrap(), Duration::from_millis(20));
        for bad in ["", "ms", "5h", "0ms"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
