//! `RangeSet`: a sorted set of disjoint, non-adjacent half-open byte ranges. It tracks which bytes of a MODE E
//! transfer arrived (for `111 Range Marker` replies and for verifying completeness), parses and formats the
//! `a-b,c-d` lists of `111` markers and `REST`, and computes what remains to send after a restart.

use std::fmt;
use std::ops::Range;

/// Parses a restart range list `a-b[,c-d...]` (end exclusive; `111` markers and `REST` arguments) into its items
/// as written: in order, not merged, empty items kept. Whitespace around items is allowed; inverted ranges and
/// garbage are refused (`None`). The one grammar for [`RangeSet::parse`] and the client's marker parser.
pub fn parse_ranges(text: &str) -> Option<Vec<Range<u64>>> {
    text.split(',')
        .map(|part| {
            let (a, b) = part.trim().split_once('-')?;
            let a: u64 = a.trim().parse().ok()?;
            let b: u64 = b.trim().parse().ok()?;
            (a <= b).then_some(a..b)
        })
        .collect()
}

/// Sorted, merged half-open ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: Vec<Range<u64>>,
}

impl RangeSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `a-b[,c-d...]` (end exclusive) with [`parse_ranges`]'s grammar, then merges. Empty ranges (`a-a`)
    /// are accepted and ignored.
    pub fn parse(text: &str) -> Option<Self> {
        parse_ranges(text).map(|items| items.into_iter().collect())
    }

    /// Add a range, merging with overlapping or adjacent ones.
    pub fn insert(&mut self, r: Range<u64>) {
        if r.start >= r.end {
            return;
        }
        // First range whose end >= r.start (could merge), and first whose start > r.end (cannot).
        let lo = self.ranges.partition_point(|x| x.end < r.start);
        let hi = self.ranges.partition_point(|x| x.start <= r.end);
        if lo == hi {
            self.ranges.insert(lo, r);
            return;
        }
        let start = self.ranges[lo].start.min(r.start);
        let end = self.ranges[hi - 1].end.max(r.end);
        self.ranges.splice(lo..hi, std::iter::once(start..end));
    }

    /// Add every range of `other`.
    pub fn extend(&mut self, other: &RangeSet) {
        for r in &other.ranges {
            self.insert(r.clone());
        }
    }

    /// True if every byte of `r` is in the set.
    pub fn contains_range(&self, r: &Range<u64>) -> bool {
        if r.start >= r.end {
            return true;
        }
        let i = self.ranges.partition_point(|x| x.end <= r.start);
        self.ranges
            .get(i)
            .is_some_and(|x| x.start <= r.start && x.end >= r.end)
    }

    /// Parts of `within` not in the set, in order.
    pub fn gaps(&self, within: Range<u64>) -> Vec<Range<u64>> {
        let mut out = vec![];
        let mut pos = within.start;
        for r in &self.ranges {
            if r.end <= pos {
                continue;
            }
            if r.start >= within.end {
                break;
            }
            if r.start > pos {
                out.push(pos..r.start.min(within.end));
            }
            pos = pos.max(r.end);
            if pos >= within.end {
                break;
            }
        }
        if pos < within.end {
            out.push(pos..within.end);
        }
        out
    }

    /// Total bytes covered.
    pub fn covered(&self) -> u64 {
        self.ranges.iter().map(|r| r.end - r.start).sum()
    }

    /// The ranges, sorted and merged.
    pub fn ranges(&self) -> &[Range<u64>] {
        &self.ranges
    }

    /// True if nothing is covered.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of disjoint ranges.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }
}

impl fmt::Display for RangeSet {
    /// `a-b,c-d` as in `111 Range Marker` and `REST`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}-{}", r.start, r.end)?;
        }
        Ok(())
    }
}

impl FromIterator<Range<u64>> for RangeSet {
    fn from_iter<I: IntoIterator<Item = Range<u64>>>(iter: I) -> Self {
        let mut s = RangeSet::new();
        for r in iter {
            s.insert(r);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn merges_overlapping_and_adjacent() {
        let mut s = RangeSet::new();
        s.insert(10..20);
        s.insert(30..40);
        s.insert(20..25);
        assert_eq!(s.ranges(), &[10..25, 30..40]);
        let all = 0..100;
        s.insert(all.clone());
        assert_eq!(s.ranges(), &[all]);
        s.insert(5..5);
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn parse_and_format_globus_marker() {
        let s = RangeSet::parse("0-2000,5000-6000,9000-11000").unwrap();
        assert_eq!(s.to_string(), "0-2000,5000-6000,9000-11000");
        assert_eq!(s.covered(), 2000 + 1000 + 2000);
        assert!(RangeSet::parse("5-1").is_none());
        assert!(RangeSet::parse("abc").is_none());
        assert!(RangeSet::parse("1-2,").is_none());
    }

    #[test]
    fn one_grammar_for_items_and_sets() {
        // The client's marker items come unmerged and in order; the set is their union.
        assert_eq!(
            parse_ranges(" 10-20 ,0-5,15-30,7-7"),
            Some(vec![10..20, 0..5, 15..30, 7..7])
        );
        for text in [
            "0-5,10-20",
            "7-7",
            " 1 - 2 ",
            "5-1",
            "abc",
            "1-2,",
            "",
            "-1-2",
            "1-2-3",
        ] {
            assert_eq!(
                RangeSet::parse(text),
                parse_ranges(text).map(|v| v.into_iter().collect()),
                "{text}"
            );
        }
        assert_eq!(
            RangeSet::parse("10-20,0-5,15-30").unwrap().to_string(),
            "0-5,10-30"
        );
    }

    #[test]
    fn gaps_are_what_remains_after_rest() {
        // REST 0-1048576,2097152-20000000 on a 20971520-byte file leaves exactly these (globus-peer.md §11).
        let s = RangeSet::parse("0-1048576,2097152-20000000").unwrap();
        assert_eq!(
            s.gaps(0..20971520),
            vec![1048576..2097152, 20000000..20971520]
        );
        assert!(s.contains_range(&(100..1048576)));
        assert!(!s.contains_range(&(100..1048577)));
        assert_eq!(RangeSet::new().gaps(3..9), vec![3..9]);
    }

    proptest! {
        #[test]
        fn set_matches_a_bitmap(rs in proptest::collection::vec((0u64..200, 0u64..40), 0..30)) {
            let mut s = RangeSet::new();
            let mut bits = [false; 240];
            for (a, l) in rs {
                s.insert(a..a + l);
                for b in &mut bits[a as usize..(a + l) as usize] { *b = true; }
            }
            // Sorted, disjoint and non-adjacent.
            for w in s.ranges().windows(2) { prop_assert!(w[0].end < w[1].start); }
            prop_assert_eq!(s.covered(), bits.iter().filter(|b| **b).count() as u64);
            let gaps: u64 = s.gaps(0..240).iter().map(|r| r.end - r.start).sum();
            prop_assert_eq!(gaps + s.covered(), 240);
            prop_assert_eq!(RangeSet::parse(&s.to_string()).unwrap_or_default(), s.clone());
        }
    }
}
