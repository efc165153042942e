//! Stripe layouts (GFD.20 "Options to RETR"): which byte ranges of a send go to which receiving stripe when SPOR
//! names several addresses. `Blocked` deals blocks of `block_size` round-robin over the stripes in SPOR order;
//! `Partitioned` gives each stripe one contiguous share. Which stripe gets a block never changes what the file
//! holds (every block carries its offset, and a striped receiver's data nodes write to shared storage); it only
//! spreads the load, so a block size a hostile client picks is raised until no stripe gets more than
//! [`MAX_PIECES`] ranges, bounding the memory a layout may cost.

use std::ops::Range;

/// How a striped send divides the file over the receiving stripes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StripeLayout {
    /// Round-robin blocks of this many bytes, in SPOR address order.
    Blocked {
        /// Bytes per block (at least 1).
        block_size: u64,
    },
    /// One contiguous share per stripe (equal shares, the last one takes the remainder).
    Partitioned,
}

/// Globus's default (`stripe_layout` blocked, `stripe_blocksize` 1 MiB).
pub const DEFAULT_STRIPE_BLOCK: u64 = 1 << 20;

/// Most ranges one stripe's share may hold; a finer `Blocked` layout is coarsened to this.
pub const MAX_PIECES: u64 = 1 << 16;

impl Default for StripeLayout {
    fn default() -> Self {
        StripeLayout::Blocked {
            block_size: DEFAULT_STRIPE_BLOCK,
        }
    }
}

impl StripeLayout {
    /// The ranges of `ranges` (sorted, disjoint, clipped to the file) that stripe `index` of `stripes` sends.
    /// Every byte of `ranges` lands in exactly one stripe's share. `stripes == 0` or `index >= stripes`: nothing.
    pub fn share(&self, ranges: &[Range<u64>], stripes: usize, index: usize) -> Vec<Range<u64>> {
        let (n, i) = (stripes as u64, index as u64);
        if i >= n {
            return vec![];
        }
        let (lo, hi) = match (ranges.first(), ranges.last()) {
            (Some(f), Some(l)) => (f.start, l.end),
            _ => return vec![],
        };
        let span = hi.saturating_sub(lo);
        let mut parts: Vec<Range<u64>> = match *self {
            StripeLayout::Partitioned => {
                // The share is taken over the requested bytes, not the span, so a restart with holes still
                // spreads what remains evenly.
                let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
                let each = total.div_ceil(n);
                let (from, to) = (each * i, (each * (i + 1)).min(total));
                nth_bytes(ranges, from..to)
            }
            StripeLayout::Blocked { block_size } => {
                let min_block = span.div_ceil(n.saturating_mul(MAX_PIECES)).max(1);
                let b = block_size.max(min_block);
                let mut v = vec![];
                // Blocks are numbered from offset 0 of the file, so stripe k always holds the same blocks.
                let mut k = lo / b;
                while k.saturating_mul(b) < hi {
                    if k % n == i {
                        let blk = k * b..(k + 1).saturating_mul(b).min(hi);
                        v.extend(intersect(ranges, blk));
                    }
                    k += 1;
                }
                v
            }
        };
        parts.retain(|r| r.start < r.end);
        parts
    }
}

/// The parts of `ranges` (sorted, disjoint) inside `blk`.
fn intersect(ranges: &[Range<u64>], blk: Range<u64>) -> impl Iterator<Item = Range<u64>> + '_ {
    let first = ranges.partition_point(|r| r.end <= blk.start);
    ranges[first..]
        .iter()
        .take_while(move |r| r.start < blk.end)
        .map(move |r| r.start.max(blk.start)..r.end.min(blk.end))
}

/// The file ranges holding bytes `want` of the concatenation of `ranges`.
fn nth_bytes(ranges: &[Range<u64>], want: Range<u64>) -> Vec<Range<u64>> {
    let mut out = vec![];
    let mut seen = 0u64;
    for r in ranges {
        let len = r.end - r.start;
        let (a, b) = (want.start.max(seen), want.end.min(seen + len));
        if a < b {
            out.push(r.start + (a - seen)..r.start + (b - seen));
        }
        seen += len;
    }
    out
}

#[cfg(test)]
mod tests {
    // One-range plans are lists of ranges, not ranges.
    #![allow(clippy::single_range_in_vec_init)]
    use super::*;

    fn all(l: StripeLayout, ranges: &[Range<u64>], n: usize) -> Vec<Vec<Range<u64>>> {
        (0..n).map(|i| l.share(ranges, n, i)).collect()
    }

    /// Every byte of `ranges` in exactly one share.
    fn covers_once(ranges: &[Range<u64>], shares: &[Vec<Range<u64>>]) {
        let mut got: Vec<Range<u64>> = shares.iter().flatten().cloned().collect();
        got.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<u64>> = vec![];
        for r in got {
            match merged.last_mut() {
                Some(m) if m.end == r.start => m.end = r.end,
                Some(m) if m.end > r.start => panic!("overlap at {}", r.start),
                _ => merged.push(r),
            }
        }
        assert_eq!(merged, ranges);
    }

    #[test]
    fn blocked_deals_round_robin_from_offset_zero() {
        let l = StripeLayout::Blocked { block_size: 10 };
        let s = all(l, &[0..35], 2);
        assert_eq!(s[0], vec![0..10, 20..30]);
        assert_eq!(s[1], vec![10..20, 30..35]);
        // A restart: only what is asked, still on the same stripes.
        let s = all(l, &[5..12, 25..41], 3);
        assert_eq!(s[0], vec![5..10, 30..40]);
        assert_eq!(s[1], vec![10..12, 40..41]);
        assert_eq!(s[2], vec![25..30]);
        covers_once(&[5..12, 25..41], &s);
        assert_eq!(l.share(&[0..35], 2, 2), Vec::<Range<u64>>::new());
        assert_eq!(l.share(&[], 2, 0), Vec::<Range<u64>>::new());
    }

    #[test]
    fn partitioned_gives_contiguous_shares() {
        let s = all(StripeLayout::Partitioned, &[0..100], 3);
        assert_eq!(s, vec![vec![0..34], vec![34..68], vec![68..100]]);
        let r = [0..10, 50..60];
        let s = all(StripeLayout::Partitioned, &r, 2);
        assert_eq!(s, vec![vec![0..10], vec![50..60]]);
        covers_once(&r, &all(StripeLayout::Partitioned, &r, 3));
        // More stripes than bytes: the extra ones get nothing.
        let s = all(StripeLayout::Partitioned, &[0..2], 4);
        assert_eq!(s[2], Vec::<Range<u64>>::new());
        covers_once(&[0..2], &s);
    }

    #[test]
    fn a_tiny_block_size_is_coarsened_not_obeyed() {
        let l = StripeLayout::Blocked { block_size: 1 };
        let len = 1u64 << 40;
        let s = l.share(&[0..len], 2, 0);
        assert!(s.len() as u64 <= MAX_PIECES, "{}", s.len());
        let huge = StripeLayout::Blocked {
            block_size: u64::MAX,
        };
        assert_eq!(huge.share(&[0..len], 2, 0), vec![0..len]);
        covers_once(&[0..1 << 24], &all(l, &[0..1 << 24], 3));
    }
}
