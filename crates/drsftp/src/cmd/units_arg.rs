//! clap value parsers for sizes, rates and durations: the drsftp-units grammar, plus the "must be positive" rule
//! the transfer and tuning flags have always had (a zero buffer, rate cap or timeout is a typo, not a request;
//! the lab's own flags, where 0 means "unlimited" or "none", parse with drsftp-units directly).

use std::time::Duration;

use drsftp_units::{parse_duration, parse_rate, parse_size};

fn positive<T: PartialEq + Default>(what: &str, s: &str, v: T) -> Result<T, String> {
    if v == T::default() {
        Err(format!("{what} {s:?} must be greater than zero"))
    } else {
        Ok(v)
    }
}

/// A positive byte size (`64K`, `16M`; binary suffixes).
pub(crate) fn size(s: &str) -> Result<u64, String> {
    positive("size", s, parse_size(s).map_err(|e| e.to_string())?)
}

/// A positive rate in bit/s (`500mbit`, `622Mbps`; `100MBps` is bytes = 800 Mbit/s).
pub(crate) fn rate(s: &str) -> Result<u64, String> {
    positive("rate", s, parse_rate(s).map_err(|e| e.to_string())?)
}

/// A positive duration (`50ms`, `1.5s`, `2m`; a plain number is milliseconds).
pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    positive("duration", s, parse_duration(s).map_err(|e| e.to_string())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `drsftp copy --max-rate` and `drsftp lab up --rate` (drsftp-units directly) read a rate alike.
    #[test]
    fn copy_and_lab_read_rates_alike() {
        for s in [
            "100MBps", "100Mbps", "100mbit", "1gbit", "10KBps", "622Mbps",
        ] {
            assert_eq!(rate(s).unwrap(), parse_rate(s).unwrap(), "{s}");
        }
        assert_eq!(rate("100MBps").unwrap(), 800_000_000);
        assert_eq!(rate("100Mbps").unwrap(), 100_000_000);
    }

    #[test]
    fn zero_refused() {
        assert!(size("0").is_err() && rate("0mbit").is_err() && duration("0s").is_err());
        assert_eq!(size("64K").unwrap(), 65536);
        assert_eq!(duration("20").unwrap(), Duration::from_millis(20));
    }
}
