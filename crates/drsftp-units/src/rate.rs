//! Rates in bits per second: `100mbit`, `622Mbps`, `1gbit`, `10G`, `1000000`, and byte rates `100MBps`, `100MB/s`
//! (= 800 Mbit/s). The case of the `b` decides bits or bytes, so the lab, `copy --max-rate`, `serve` and `tune`
//! read a rate alike.

use crate::number::{one_decimal, split, to_u64};
use crate::UnitError;

const PREFIXES: [(char, f64); 4] = [('k', 1e3), ('m', 1e6), ('g', 1e9), ('t', 1e12)];

/// Bits (1) or bytes (8) per unit, for the unit after the prefix; `None` if it is not a rate unit.
fn unit_bits(unit: &str) -> Option<f64> {
    let lower = unit.to_ascii_lowercase();
    if matches!(lower.as_str(), "" | "bit" | "bits" | "bit/s" | "bits/s") {
        return Some(1.0);
    }
    if !matches!(lower.as_str(), "b" | "bps" | "b/s") {
        return None;
    }
    // "b", "bps", "b/s": a lower-case b is bits, an upper-case B bytes.
    Some(if unit.starts_with('B') { 8.0 } else { 1.0 })
}

/// Parse a rate into bits per second (rounded). Decimal prefixes `k`, `m`, `g`, `t` in any case; `bit`, `bits`,
/// `bit/s` in any case and `b`, `bps`, `b/s` with a lower-case `b` are bits; `B`, `Bps`, `B/s` with an
/// upper-case `B` are bytes (× 8); a plain number is bit/s. `0` parses (callers give it a meaning, e.g. the lab's
/// "unlimited").
pub fn parse_rate(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError::Rate(s.to_string());
    let (v, unit) = split(s).ok_or_else(err)?;
    let mut chars = unit.chars();
    let prefix = chars.next().and_then(|c| {
        PREFIXES
            .iter()
            .find(|(p, _)| c.eq_ignore_ascii_case(p))
            .map(|&(_, m)| m)
    });
    let (mult, rest) = match prefix {
        Some(m) => (m, chars.as_str()),
        None => (1.0, unit),
    };
    let per_unit = unit_bits(rest).ok_or_else(err)?;
    to_u64(v * mult * per_unit).ok_or_else(err)
}

/// Format bits per second with the largest decimal prefix it reaches and at most one decimal ("622 Mbit/s",
/// "1.5 Gbit/s", "800 bit/s"); [`parse_rate`] reads it back to within 0.05 of that prefix.
pub fn format_rate(bps: u64) -> String {
    for (unit, m) in [("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)] {
        if bps as f64 >= m {
            return format!("{} {unit}bit/s", one_decimal(bps as f64 / m));
        }
    }
    format!("{bps} bit/s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("1gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("100mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate("100Mbit/s").unwrap(), 100_000_000);
        assert_eq!(parse_rate("622Mbps").unwrap(), 622_000_000);
        assert_eq!(parse_rate("622mbps").unwrap(), 622_000_000);
        assert_eq!(parse_rate("100mb").unwrap(), 100_000_000);
        assert_eq!(parse_rate("10G").unwrap(), 10_000_000_000);
        assert_eq!(parse_rate("28.5mbit").unwrap(), 28_500_000);
        assert_eq!(parse_rate("26kbit").unwrap(), 26_000);
        assert_eq!(parse_rate("26 Kbps").unwrap(), 26_000);
        assert_eq!(parse_rate("1000").unwrap(), 1000);
        assert_eq!(parse_rate("1000bps").unwrap(), 1000);
        assert_eq!(parse_rate("0").unwrap(), 0);
        // Upper-case B: bytes.
        assert_eq!(parse_rate("100MBps").unwrap(), 800_000_000);
        assert_eq!(parse_rate("100MB/s").unwrap(), 800_000_000);
        assert_eq!(parse_rate("100mB").unwrap(), 800_000_000);
        assert_eq!(parse_rate("1GBps").unwrap(), 8_000_000_000);
        assert_eq!(parse_rate("10KBps").unwrap(), 80_000);
        assert_eq!(parse_rate("125B/s").unwrap(), 1000);
        for bad in [
            "",
            "fast",
            "1x",
            "mbit",
            "-1mbit",
            "1e3",
            "NaN",
            "1mbitt",
            "1kk",
            "99999999999tbit",
        ] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert_eq!(format_rate(622_000_000), "622 Mbit/s");
        assert_eq!(format_rate(1_500_000_000), "1.5 Gbit/s");
        assert_eq!(format_rate(500_000), "500 kbit/s");
        assert_eq!(format_rate(800), "800 bit/s");
    }
}
