//! Property tests of the units grammar: format → parse round-trips within the printed rounding, bytes = 8 × bits,
//! monotonicity, and garbage/negative/NaN/overflow refused without a panic.

use std::time::Duration;

use drsftp_units::{
    format_bytes, format_duration, format_rate, format_size, parse_duration, parse_probability,
    parse_rate, parse_size,
};
use proptest::prelude::*;

proptest! {
    #[test]
    fn size_round_trips(b in 0u64..(1 << 50)) {
        let back = parse_size(&format_size(b)).unwrap();
        // One decimal of the largest suffix: off by at most 0.05 of it (5 % of the value), plus rounding.
        prop_assert!(back.abs_diff(b) as f64 <= b as f64 * 0.05 + 1.0, "{b} -> {} -> {back}", format_size(b));
    }

    #[test]
    fn human_size_round_trips(b in 0u64..(1 << 50)) {
        let back = parse_size(&format_bytes(b)).unwrap();
        prop_assert!(back.abs_diff(b) as f64 <= b as f64 * 0.05 + 1.0, "{b} -> {} -> {back}", format_bytes(b));
    }

    #[test]
    fn rate_round_trips(bps in 0u64..(1 << 50)) {
        let back = parse_rate(&format_rate(bps)).unwrap();
        prop_assert!(back.abs_diff(bps) as f64 <= bps as f64 * 0.05 + 1.0, "{bps} -> {} -> {back}", format_rate(bps));
    }

    #[test]
    fn duration_round_trips(ns in 0u64..(1 << 55)) {
        let d = Duration::from_nanos(ns);
        let back = parse_duration(&format_duration(d)).unwrap().as_nanos() as u64;
        prop_assert!(back.abs_diff(ns) as f64 <= ns as f64 * 0.0005 + 1.0, "{ns} -> {} -> {back}", format_duration(d));
    }

    #[test]
    fn byte_rates_are_eight_bit_rates(x in 0u32..1_000_000, frac in 0u32..10, p in prop::sample::select(vec!["", "k", "K", "m", "M", "g", "G"])) {
        let n = format!("{x}.{frac}");
        let bits = parse_rate(&format!("{n}{p}bps")).unwrap();
        for bytes in [format!("{n}{p}Bps"), format!("{n}{p}B/s"), format!("{n}{p}B")] {
            let by = parse_rate(&bytes).unwrap();
            // Each is rounded to whole bit/s once, so 8 × a rounded value differs by at most 4.
            prop_assert!(by.abs_diff(bits * 8) <= 4, "{bytes}: {by} vs 8 x {bits}");
        }
        prop_assert_eq!(bits, parse_rate(&format!("{n}{p}bit")).unwrap());
    }

    #[test]
    fn monotone(a in 0u32..1_000_000, b in 0u32..1_000_000, u in 0usize..4) {
        let (lo, hi) = (a.min(b), a.max(b));
        let su = ["", "K", "M", "G"][u];
        let (s_lo, s_hi) = (parse_size(&format!("{lo}{su}")).unwrap(), parse_size(&format!("{hi}{su}")).unwrap());
        prop_assert!(s_lo <= s_hi);
        let ru = ["bit", "kbit", "Mbps", "GBps"][u];
        let (r_lo, r_hi) = (parse_rate(&format!("{lo}{ru}")).unwrap(), parse_rate(&format!("{hi}{ru}")).unwrap());
        prop_assert!(r_lo <= r_hi);
        let du = ["us", "ms", "s", "m"][u];
        let (d_lo, d_hi) = (parse_duration(&format!("{lo}{du}")).unwrap(), parse_duration(&format!("{hi}{du}")).unwrap());
        prop_assert!(d_lo <= d_hi);
    }

    #[test]
    fn larger_units_are_larger(x in 1u32..1_000_000) {
        let sizes: Vec<u64> = ["", "K", "M", "G", "T"].iter().map(|u| parse_size(&format!("{x}{u}")).unwrap()).collect();
        prop_assert!(sizes.windows(2).all(|w| w[0] < w[1]));
        let rates: Vec<u64> = ["bit", "B", "kbit", "kB", "mbit", "MB", "gbit", "GB"].iter().map(|u| parse_rate(&format!("{x}{u}")).unwrap()).collect();
        prop_assert!(rates.windows(2).all(|w| w[0] < w[1]));
        let durs: Vec<Duration> = ["ns", "us", "ms", "s", "m", "h"].iter().map(|u| parse_duration(&format!("{x}{u}")).unwrap()).collect();
        prop_assert!(durs.windows(2).all(|w| w[0] < w[1]));
    }

    /// Any text at all: an error or a value, never a panic.
    #[test]
    fn any_text_no_panic(s in "\\PC{0,12}") {
        let _ = parse_size(&s);
        let _ = parse_rate(&s);
        let _ = parse_duration(&s);
        let _ = parse_probability(&s);
    }

    #[test]
    fn negative_refused(x in any::<f64>(), u in 0usize..3) {
        let neg = format!("-{}", x.abs());
        let size = parse_size(&format!("{neg}{}", ["", "K", "G"][u]));
        let rate = parse_rate(&format!("{neg}{}", ["", "kbit", "GBps"][u]));
        let dur = parse_duration(&format!("{neg}{}", ["", "ms", "h"][u]));
        prop_assert!(size.is_err() && rate.is_err() && dur.is_err());
        prop_assert!(parse_probability(&neg).is_err());
    }
}

#[test]
fn nan_inf_and_huge_refused() {
    for s in ["NaN", "nan", "inf", "infinity", "NaNK", "infs"] {
        assert!(parse_size(s).is_err(), "{s}");
        assert!(parse_rate(s).is_err(), "{s}");
        assert!(parse_duration(s).is_err(), "{s}");
        assert!(parse_probability(s).is_err(), "{s}");
    }
    let huge = "9".repeat(400);
    for u in ["", "K", "T"] {
        assert!(parse_size(&format!("{huge}{u}")).is_err());
        assert!(parse_size(&format!("18446744073709551616{u}")).is_err());
    }
    assert!(parse_rate(&format!("{huge}tbit")).is_err());
    assert!(parse_rate("20000000TBps").is_err());
    assert!(parse_duration(&format!("{huge}h")).is_err());
    assert!(parse_duration("10000000000h").is_err());
}
