//! The number part shared by every unit: a non-negative decimal without sign or exponent, so that `-1s`, `NaN`,
//! `inf` and `1e3ms` are refused here once instead of in each parser.

/// Split `s` (trimmed) into its leading number and the rest (trimmed); `None` if there is no valid number.
pub(crate) fn split(s: &str) -> Option<(f64, &str)> {
    let t = s.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    Some((parse_plain(num)?, unit.trim()))
}

/// A non-negative finite decimal made only of digits and at most one `.`, with at least one digit.
pub(crate) fn parse_plain(num: &str) -> Option<f64> {
    if !num.bytes().any(|b| b.is_ascii_digit())
        || !num.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    {
        return None;
    }
    let v: f64 = num.parse().ok()?;
    v.is_finite().then_some(v)
}

/// `v` rounded to the nearest integer if it fits a u64 (values at or above 2^64 do not).
pub(crate) fn to_u64(v: f64) -> Option<u64> {
    let r = v.round();
    (r.is_finite() && r >= 0.0 && r < u64::MAX as f64).then_some(r as u64)
}

/// `v` with one decimal, without a trailing `.0` ("4", "212.5").
pub(crate) fn one_decimal(v: f64) -> String {
    let s = format!("{v:.1}");
    match s.strip_suffix(".0") {
        Some(whole) => whole.to_string(),
        None => s,
    }
}
