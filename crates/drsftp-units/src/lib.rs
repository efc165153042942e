//! drsftp-units: the one grammar for sizes, rates, durations and probabilities, used by every CLI flag, the lab's
//! profile files and the libraries, so that `100MBps` means the same thing to `drsftp lab` as to `drsftp copy`.
//!
//! # Grammar
//! A value is a non-negative decimal number (`12`, `0.5`, `212.5`; no sign, no exponent), optional spaces, then
//! a unit. Zero is accepted; callers that need a positive value check that themselves.
//!
//! | kind | units | plain number |
//! | --- | --- | --- |
//! | size ([`parse_size`]) | `B`; `K` `KB` `KiB`; `M` `MB` `MiB`; `G` `GB` `GiB`; `T` `TB` `TiB` (any case) — all **binary**: `64K` = `64KB` = `64KiB` = 65536 bytes | bytes |
//! | rate ([`parse_rate`]) | prefix `k` `m` `g` `t` (any case, decimal: `k` = 1000) then bits: `bit` `bits` `bit/s` (any case), `b` `bps` `b/s` (lower-case `b`); or bytes: `B` `Bps` `B/s` (upper-case `B`) = 8 × bits | bit/s |
//! | duration ([`parse_duration`]) | `ns`, `us` (`µs`), `ms`, `s` (`sec`), `m` (`min`), `h` (any case) | milliseconds |
//! | probability ([`parse_probability`]) | `%` (percent) | a fraction in [0, 1] |
//!
//! Rates: the case of the `b` alone decides bits or bytes, so `100mbit` = `100Mbps` = `100mb` = 100 Mbit/s and
//! `100MBps` = `100MB/s` = `100mB` = 800 Mbit/s. Sizes are binary because socket buffers and the seeds' "64 KB"
//! are; rates are decimal because link rates are.
//!
//! Formatting ([`format_size`] and [`format_bytes`], [`format_rate`], [`format_duration`]) writes values this grammar reads back
//! (within the one decimal of rounding it prints).

#![forbid(unsafe_code)]

mod duration;
mod number;
mod rate;
mod size;

pub use duration::{format_duration, parse_duration};
pub use rate::{format_rate, parse_rate};
pub use size::{format_bytes, format_size, parse_size};

/// What went wrong parsing a value: which kind of value, and the text that was given. The message names the
/// accepted units.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("invalid size {0:?} (a byte count with an optional binary suffix B, K, M, G, T, e.g. 65536, 64K, 212.5K, 16MB, 1GiB)")]
    Size(String),
    #[error("invalid rate {0:?} (bit/s with an optional decimal prefix k, m, g, t: 100mbit, 622Mbps, 1gbit, 1000000; an upper-case B means bytes: 100MBps = 800mbit)")]
    Rate(String),
    #[error("invalid duration {0:?} (ns, us, ms, s, m or h, e.g. 250us, 50ms, 1.5s, 2m; a plain number is milliseconds)")]
    Duration(String),
    #[error(
        "invalid probability {0:?} (a fraction in [0, 1] or a percentage, e.g. 0.001 or 0.1%)"
    )]
    Probability(String),
}

/// Parse a probability: a fraction in [0, 1] (`0.001`) or a percentage in [0, 100] (`0.1%`).
pub fn parse_probability(s: &str) -> Result<f64, UnitError> {
    let err = || UnitError::Probability(s.to_string());
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(pct) => (pct.trim_end(), 100.0),
        None => (t, 1.0),
    };
    let p = number::parse_plain(num).ok_or_else(err)? / scale;
    if !(0.0..=1.0).contains(&p) {
        return Err(err());
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities() {
        assert_eq!(parse_probability("0.1%").unwrap(), 0.001);
        assert_eq!(parse_probability("0.25").unwrap(), 0.25);
        assert_eq!(parse_probability(" 100 % ").unwrap(), 1.0);
        assert_eq!(parse_probability("0").unwrap(), 0.0);
        for bad in [
            "", "%", "120%", "1.5", "-0.1", "NaN", "inf", "0.1%%", "1e-3",
        ] {
            assert!(parse_probability(bad).is_err(), "{bad}");
        }
    }
}
