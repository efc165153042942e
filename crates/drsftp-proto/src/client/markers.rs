//! Client-side parsing of the GridFTP intermediate replies a server sends while a transfer runs (GFD.20):
//! `111 Range Marker a-b,c-d` (restart ranges, end exclusive), `112-Perf Marker` blocks and `126 n...`
//! (per-stripe data-connection counts). Pure functions over [`Reply`]; merging ranges is the caller's job.

use super::reply::Reply;
use crate::ranges::parse_ranges;
use std::ops::Range;

/// One `112-Perf Marker` block.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfMarker {
    /// Server timestamp, seconds since the epoch (as sent, e.g. `1795359163.8`).
    pub timestamp: f64,
    /// Stripe index the counter is for.
    pub stripe_index: u32,
    /// Bytes the stripe has transferred so far.
    pub stripe_bytes: u64,
    /// Total number of stripes.
    pub stripe_count: u32,
}

/// Parses `111 Range Marker 0-2000,5000-6000`. Returns `None` if the reply is not a well-formed range marker.
/// Empty or inverted ranges are rejected.
pub fn parse_range_marker(reply: &Reply) -> Option<Vec<Range<u64>>> {
    if reply.code != 111 {
        return None;
    }
    let text = reply.lines.last()?.trim();
    let rest = text.strip_prefix("Range Marker")?.trim();
    parse_ranges(rest)
}

/// Parses a `112-Perf Marker` multi-line reply. Missing numeric fields make it `None`.
pub fn parse_perf_marker(reply: &Reply) -> Option<PerfMarker> {
    if reply.code != 112 || !reply.text().trim_start().starts_with("Perf Marker") {
        return None;
    }
    let mut ts = None;
    let mut idx = None;
    let mut bytes = None;
    let mut count = None;
    for line in &reply.lines[1..] {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.trim().to_ascii_lowercase().as_str() {
            "timestamp" => ts = v.parse().ok(),
            "stripe index" => idx = v.parse().ok(),
            "stripe bytes transferred" => bytes = v.parse().ok(),
            "total stripe count" => count = v.parse().ok(),
            _ => {}
        }
    }
    Some(PerfMarker {
        timestamp: ts?,
        stripe_index: idx?,
        stripe_bytes: bytes?,
        stripe_count: count?,
    })
}

/// Parses `126 <count> [<count>...]`: the number of data connections per stripe for EOF aggregation.
pub fn parse_stripe_counts(reply: &Reply) -> Option<Vec<u64>> {
    if reply.code != 126 {
        return None;
    }
    let counts: Option<Vec<u64>> = reply
        .text()
        .split_whitespace()
        .map(|w| w.parse().ok())
        .collect();
    counts.filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_markers() {
        let one = 0..209715200;
        assert_eq!(
            parse_range_marker(&Reply::new(111, "Range Marker 0-209715200")),
            Some(vec![one])
        );
        assert_eq!(
            parse_range_marker(&Reply::new(111, "Range Marker 0-2000,5000-6000,9000-11000")),
            Some(vec![0..2000, 5000..6000, 9000..11000])
        );
        assert_eq!(
            parse_range_marker(&Reply::new(111, "Range Marker 10-5")),
            None
        );
        assert_eq!(parse_range_marker(&Reply::new(111, "Range Marker")), None);
        assert_eq!(
            parse_range_marker(&Reply::new(110, "Range Marker 0-1")),
            None
        );
    }

    #[test]
    fn perf_marker_from_globus() {
        let r = Reply {
            code: 112,
            lines: vec![
                "Perf Marker".into(),
                " Timestamp:  1795359164.3".into(),
                " Stripe Index: 0".into(),
                " Stripe Bytes Transferred: 209715200".into(),
                " Total Stripe Count: 1".into(),
                "End.".into(),
            ],
        };
        let p = parse_perf_marker(&r).unwrap();
        assert_eq!(p.stripe_bytes, 209715200);
        assert_eq!(p.stripe_count, 1);
        assert_eq!(p.stripe_index, 0);
        assert!((p.timestamp - 1795359164.3).abs() < 1e-6);
        let mut bad = r.clone();
        bad.lines.remove(3);
        assert_eq!(parse_perf_marker(&bad), None);
    }

    #[test]
    fn stripe_counts() {
        assert_eq!(
            parse_stripe_counts(&Reply::new(126, "2 3")),
            Some(vec![2, 3])
        );
        assert_eq!(parse_stripe_counts(&Reply::new(126, "x")), None);
        assert_eq!(parse_stripe_counts(&Reply::new(126, "")), None);
    }
}
