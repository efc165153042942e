//! `RangeSet`: a sorted set of disjoint, non-adjacent half-open byte ranges. It tracks which bytes of a MODE E
//! transfer arrived (for `111 Range Marker` replies and for verifying completeness), parses and formats the
//! `a-b,c-d` lists of `111` markers and `REST`, and computes what remains to send after a restart.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

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

/// Sorted, merged half-open ranges, kept as `start → end` in a B-tree so a peer's blocks in any order cost
/// O(log n) each: a sorted `Vec` paid an O(n) shift per out-of-order insert, O(n²) for a fragmented transfer.
#[derive(Clone, Default)]
pub struct RangeSet {
    /// Disjoint, non-adjacent: every range ends before the next one starts.
    map: BTreeMap<u64, u64>,
    /// [`RangeSet::ranges`]' slice, built on first use after a change (O(n) then, free after).
    flat: OnceLock<Box<[Range<u64>]>>,
}

impl PartialEq for RangeSet {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map
    }
}

impl Eq for RangeSet {}

impl fmt::Debug for RangeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RangeSet")
            .field("ranges", &self.ranges())
            .finish()
    }
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

    /// Add a range, merging with overlapping or adjacent ones: O(log n) plus the ranges it swallows (each was
    /// inserted once, so amortized O(log n)).
    pub fn insert(&mut self, r: Range<u64>) {
        if r.start >= r.end {
            return;
        }
        let (mut start, mut end) = (r.start, r.end);
        // The range starting at or before `start` merges if it reaches `start`.
        if let Some((&s, &e)) = self.map.range(..=start).next_back() {
            if e >= end {
                return;
            }
            if e >= start {
                start = s;
                self.remove(s, e);
            }
        }
        // Every range starting within [start, end] merges.
        while let Some((&s, &e)) = self.map.range(start..=end).next() {
            end = end.max(e);
            self.remove(s, e);
        }
        self.map.insert(start, end);
        self.flat = OnceLock::new();
    }

    fn remove(&mut self, s: u64, e: u64) {
        debug_assert!(s < e);
        self.map.remove(&s);
        self.flat = OnceLock::new();
    }

    /// Add every range of `other`.
    pub fn extend(&mut self, other: &RangeSet) {
        for (&s, &e) in &other.map {
            self.insert(s..e);
        }
    }

    /// True if every byte of `r` is in the set.
    pub fn contains_range(&self, r: &Range<u64>) -> bool {
        if r.start >= r.end {
            return true;
        }
        self.map
            .range(..=r.start)
            .next_back()
            .is_some_and(|(_, &e)| e >= r.end)
    }

    /// Parts of `within` not in the set, in order: O(log n + ranges inside `within`).
    pub fn gaps(&self, within: Range<u64>) -> Vec<Range<u64>> {
        let mut out = vec![];
        let mut pos = within.start;
        let from = self
            .map
            .range(..=within.start)
            .next_back()
            .map_or(within.start, |(&s, _)| s);
        for (&start, &end) in self.map.range(from..) {
            if end <= pos {
                continue;
            }
            if start >= within.end {
                break;
            }
            if start > pos {
                out.push(pos..start.min(within.end));
            }
            pos = pos.max(end);
            if pos >= within.end {
                break;
            }
        }
        if pos < within.end {
            out.push(pos..within.end);
        }
        out
    }

    /// The parts of `self` not in `other` (what is new since `other` was taken): one merge walk over both,
    /// O(n + m), so a `111` marker costs O(ranges) however fragmented the transfer.
    pub fn difference(&self, other: &RangeSet) -> RangeSet {
        let mut out = Vec::new();
        let mut theirs = other.map.iter().map(|(&s, &e)| (s, e)).peekable();
        for (&s, &e) in &self.map {
            let mut pos = s;
            while let Some(&(os, oe)) = theirs.peek() {
                if oe <= pos {
                    theirs.next();
                    continue;
                }
                if os >= e {
                    break;
                }
                if os > pos {
                    out.push((pos, os));
                }
                pos = oe;
                if pos >= e {
                    // `other`'s range may reach into our next ranges too: keep it.
                    break;
                }
                theirs.next();
            }
            if pos < e {
                out.push((pos, e));
            }
        }
        // Pieces come sorted, disjoint and non-adjacent (separated by `other`'s ranges or our own gaps).
        RangeSet {
            map: out.into_iter().collect(),
            flat: OnceLock::new(),
        }
    }

    /// The parts of the set inside `within`.
    pub fn intersect(&self, within: Range<u64>) -> RangeSet {
        self.iter()
            .map(|r| r.start.max(within.start)..r.end.min(within.end))
            .filter(|r| r.start < r.end)
            .collect()
    }

    /// Total bytes covered: O(n), for the end of a transfer (kept out of the struct so a `RangeSet` stays small:
    /// it travels inside every `TransferPlan`).
    pub fn covered(&self) -> u64 {
        self.map.iter().map(|(s, e)| e - s).sum()
    }

    /// The ranges, sorted and merged. O(n) on the first call after a change, then free.
    pub fn ranges(&self) -> &[Range<u64>] {
        self.flat
            .get_or_init(|| self.map.iter().map(|(&s, &e)| s..e).collect())
    }

    /// The ranges in order, without building the slice.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Range<u64>> + '_ {
        self.map.iter().map(|(&s, &e)| s..e)
    }

    /// True if nothing is covered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of disjoint ranges.
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

impl fmt::Display for RangeSet {
    /// `a-b,c-d` as in `111 Range Marker` and `REST`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.iter().enumerate() {
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

    /// `n` single-byte blocks with a one-byte gap after each (offsets 0, 2, 4, ...), in a scrambled order
    /// (a multiplicative permutation of 0..n), then the gaps in reverse: n ranges at the peak, one at the end.
    fn fragmented(n: u64) -> RangeSet {
        let mut s = RangeSet::new();
        // 7919 is prime and does not divide n (a power of ten), so i ↦ i·7919 mod n is a permutation.
        for i in 0..n {
            let k = (i * 7919) % n;
            s.insert(2 * k..2 * k + 1);
        }
        assert_eq!((s.len() as u64, s.covered()), (n, n));
        for k in (0..n).rev() {
            s.insert(2 * k + 1..2 * k + 2);
        }
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0..2 * n]);
        s
    }

    /// This thread's CPU time: unlike wall time it does not count the time other processes on a busy machine
    /// take the core away.
    fn thread_cpu() -> std::time::Duration {
        use nix::time::{clock_gettime, ClockId};
        let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).expect("thread CPU clock");
        std::time::Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32)
    }

    /// The quadratic-work attack: 10× the fragmented blocks must cost about 10× (n log n ≈ 12.5×), not 100× as
    /// with the sorted Vec (whose 100k case alone took seconds in debug builds). CPU time of this thread, best
    /// of three runs each, and a bound between the two (30×), so load on the machine does not fail it.
    #[test]
    fn fragmented_inserts_scale_n_log_n() {
        let best = |n: u64| {
            (0..3)
                .map(|_| {
                    let t = thread_cpu();
                    std::hint::black_box(fragmented(n));
                    thread_cpu().saturating_sub(t)
                })
                .min()
                .unwrap()
        };
        let small = best(10_000);
        let large = best(100_000);
        let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-6);
        eprintln!("fragmented inserts (CPU): 10k {small:?}, 100k {large:?}, ratio {ratio:.1}");
        assert!(
            ratio < 30.0,
            "10k {small:?}, 100k {large:?}: ratio {ratio:.1}"
        );
    }

    #[test]
    fn difference_is_what_is_new() {
        let all = RangeSet::parse("0-10,20-30,40-50").unwrap();
        let seen = RangeSet::parse("0-5,25-45").unwrap();
        assert_eq!(all.difference(&seen).to_string(), "5-10,20-25,45-50");
        assert!(all.difference(&all).is_empty());
        assert_eq!(all.difference(&RangeSet::new()), all);
    }

    proptest! {
        /// Every operation against a `Vec<bool>` model, inserts in any order, then `difference` against a
        /// second set.
        #[test]
        fn operations_match_a_bitmap_model(
            rs in proptest::collection::vec((0u64..200, 0u64..40), 0..40),
            other in proptest::collection::vec((0u64..200, 0u64..40), 0..10),
            probes in proptest::collection::vec((0u64..240, 0u64..40), 0..10),
        ) {
            let model = |items: &[(u64, u64)]| {
                let mut bits = vec![false; 240];
                for &(a, l) in items {
                    for b in &mut bits[a as usize..(a + l) as usize] { *b = true; }
                }
                bits
            };
            let s: RangeSet = rs.iter().map(|&(a, l)| a..a + l).collect();
            let o: RangeSet = other.iter().map(|&(a, l)| a..a + l).collect();
            let (bits, obits) = (model(&rs), model(&other));
            // The set's ranges are exactly the model's runs.
            let mut runs = vec![];
            let mut i = 0;
            while i < 240 {
                if bits[i] {
                    let j = (i..240).find(|&j| !bits[j]).unwrap_or(240);
                    runs.push(i as u64..j as u64);
                    i = j;
                } else {
                    i += 1;
                }
            }
            prop_assert_eq!(s.ranges(), &runs[..]);
            prop_assert_eq!(s.iter().collect::<Vec<_>>(), runs.clone());
            prop_assert_eq!(s.len(), runs.len());
            prop_assert_eq!(s.covered(), bits.iter().filter(|b| **b).count() as u64);
            for &(a, l) in &probes {
                let r = a..(a + l).min(240);
                let want = r.clone().all(|k| bits[k as usize]);
                prop_assert_eq!(s.contains_range(&r), want, "{:?}", r);
                let gaps: Vec<u64> = s.gaps(r.clone()).into_iter().flatten().collect();
                let want: Vec<u64> = r.clone().filter(|&k| !bits[k as usize]).collect();
                prop_assert_eq!(gaps, want, "{:?}", r);
            }
            let d = s.difference(&o);
            for k in 0..240u64 {
                let in_d = d.contains_range(&(k..k + 1));
                prop_assert_eq!(in_d, bits[k as usize] && !obits[k as usize], "{}", k);
            }
            let mut u = s.clone();
            u.extend(&o);
            for k in 0..240u64 {
                prop_assert_eq!(u.contains_range(&(k..k + 1)), bits[k as usize] || obits[k as usize]);
            }
        }

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
