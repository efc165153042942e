//! Resume helpers: converting between a packet [`Bitmap`] (the receiver's checkpoint) and the byte ranges a
//! control channel carries (`REST a-b,c-d`). Both ends derive the packet map from the same byte ranges with
//! [`packets_within`], so they agree on it even if the packet size changed since the checkpoint was taken (a
//! packet counts as held only when every one of its bytes is inside the ranges).

use std::ops::Range;

use crate::bitmap::Bitmap;
use crate::wire::TransferParams;

/// The byte ranges (transfer offsets, half-open, sorted, merged) covered by the set packets of `held`.
/// Bits past `params.total_packets()` are ignored.
pub fn byte_ranges(params: &TransferParams, held: &Bitmap) -> Vec<Range<u64>> {
    let total = params.total_packets().min(held.len());
    let mut out: Vec<Range<u64>> = Vec::new();
    let mut i = 0;
    while let Some(a) = held.next_one(i).filter(|&a| a < total) {
        let b = held.run_end(a, total);
        let start = params.offset(a);
        let end = (params.offset(b)).min(params.total_bytes);
        out.push(start..end);
        i = b;
    }
    out
}

/// The packet map of `params` in which exactly the packets lying wholly inside `ranges` (transfer offsets; any
/// order, may overlap or extend past the end) are set.
pub fn packets_within<I>(params: &TransferParams, ranges: I) -> Bitmap
where
    I: IntoIterator<Item = Range<u64>>,
{
    let total = params.total_packets();
    let p = params.payload_size as u64;
    let mut bm = Bitmap::new(total);
    for r in ranges {
        let end = r.end.min(params.total_bytes);
        if r.start >= end {
            continue;
        }
        // First packet starting at or after r.start; packets up to the last one ending at or before `end`.
        let first = r.start.div_ceil(p);
        let last = if end == params.total_bytes {
            total
        } else {
            end / p
        };
        if first < last {
            bm.set_range(first, last);
        }
    }
    bm
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_partial_packets() {
        let p = TransferParams::new(1, 10_050, 1000).unwrap();
        assert_eq!(p.total_packets(), 11);
        let mut bm = Bitmap::new(11);
        for i in [0, 1, 2, 5, 10] {
            bm.set(i);
        }
        let r = byte_ranges(&p, &bm);
        assert_eq!(r, vec![0..3000, 5000..6000, 10_000..10_050]);
        assert_eq!(packets_within(&p, r.clone()), bm);
        // Partial coverage does not count; overlapping and out-of-order ranges are fine.
        let bm2 = packets_within(&p, [5500..7000, 0..999, 9000..20_000, 6000..6500]);
        let set: Vec<u64> = (0..11).filter(|&i| bm2.get(i)).collect();
        assert_eq!(set, vec![6, 9, 10]);
        // A different packet size: whole packets of the new grid inside the old ranges.
        let q = TransferParams::new(1, 10_050, 1500).unwrap();
        let bm3 = packets_within(&q, r);
        let set: Vec<u64> = (0..q.total_packets()).filter(|&i| bm3.get(i)).collect();
        assert_eq!(set, vec![0, 1]);
        assert!(byte_ranges(&p, &Bitmap::new(11)).is_empty());
        let empty = TransferParams::new(1, 0, 1000).unwrap();
        assert_eq!(packets_within(&empty, std::iter::once(0..10)).len(), 0);
    }
}
