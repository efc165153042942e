//! The MODE E sender's block cursor: which file bytes go out next, in blocks that shrink near the end so that
//! no connection is left holding a large block when the others have finished.

use std::ops::Range;
use std::sync::Mutex;

use drsftp_proto::ranges::RangeSet;

/// Near the end a block is at most the bytes left / (`TAIL_SPLIT` x connections), at least `TAIL_MIN_BLOCK`:
/// each connection holds a block in hand and one read ahead, and at 100 ms and 0.1 % loss 64 streams carried
/// ~3-5 Mbit/s each, so the last 256 KiB blocks ended over ~1 s while most connections had finished.
const TAIL_SPLIT: u64 = 4;
const TAIL_MIN_BLOCK: u64 = 64 << 10;

/// The blocks still to send: `ranges` (sorted, merged, clipped to the file) cut into `block`-sized pieces,
/// smaller near the end ([`TAIL_SPLIT`]).
#[derive(Debug)]
pub(crate) struct Cursor {
    state: Mutex<CursorState>,
}

#[derive(Debug)]
struct CursorState {
    ranges: Vec<Range<u64>>,
    idx: usize,
    pos: u64,
    block: u64,
    /// Bytes of `ranges` not handed out yet.
    left: u64,
    /// The file turned out to end here (it shrank while being sent): nothing at or past it is handed out.
    eof_at: u64,
}

impl Cursor {
    pub(crate) fn new(ranges: &RangeSet, block: usize) -> Self {
        Cursor {
            state: Mutex::new(CursorState {
                ranges: ranges.ranges().to_vec(),
                idx: 0,
                pos: 0,
                block: block.max(1) as u64,
                left: ranges.ranges().iter().map(|r| r.end - r.start).sum(),
                eof_at: u64::MAX,
            }),
        }
    }

    /// The next block as (file offset, length) for one of `streams` connections, or `None` when everything was
    /// handed out.
    pub(crate) fn next(&self, streams: usize) -> Option<(u64, usize)> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let r = s.ranges.get(s.idx)?.clone();
            let start = s.pos.max(r.start);
            let end = r.end.min(s.eof_at);
            if start >= end {
                s.idx += 1;
                continue;
            }
            // In whole 4 KiB pages, like the full blocks.
            let tail =
                ((s.left / (TAIL_SPLIT * streams.max(1) as u64)) & !4095).max(TAIL_MIN_BLOCK);
            let n = (end - start).min(s.block).min(tail);
            s.pos = start + n;
            s.left = s.left.saturating_sub(n);
            return Some((start, n as usize));
        }
    }

    /// A read came back short: the file ends at `at`.
    pub(crate) fn hit_eof(&self, at: u64) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.eof_at = s.eof_at.min(at);
    }
}

#[cfg(test)]
mod tests {
    use super::Cursor;
    use drsftp_proto::ranges::RangeSet;

    #[test]
    fn blocks_shrink_near_the_end_and_cover_everything_once() {
        // 16 MiB in two ranges, 256 KiB blocks, 4 connections: full blocks while at least 4 x 4 x 256 KiB are
        // left, then a quarter of what is left per connection (whole pages), then 64 KiB to the end.
        let mut want = RangeSet::new();
        want.insert(0..(8 << 20));
        want.insert((9 << 20)..(17 << 20));
        let c = Cursor::new(&want, 256 << 10);
        let mut got = RangeSet::new();
        let mut sizes = vec![];
        while let Some((off, n)) = c.next(4) {
            let r = off..off + n as u64;
            assert_eq!(got.gaps(r.clone()), vec![r.clone()], "{r:?} twice");
            got.insert(r);
            sizes.push(n);
        }
        assert_eq!(got, want);
        let full = sizes.iter().take_while(|&&n| n == 256 << 10).count();
        assert_eq!(full, 49, "{sizes:?}");
        assert!(sizes[full..].windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
        assert!(sizes.iter().all(|&n| n % 4096 == 0), "{sizes:?}");
        // The last one is what the range's end leaves.
        let (last, rest) = sizes.split_last().unwrap();
        assert!(*last <= 64 << 10, "{sizes:?}");
        assert!(rest.iter().all(|&n| n >= 64 << 10), "{sizes:?}");
    }
}
