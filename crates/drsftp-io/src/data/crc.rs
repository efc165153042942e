//! CRC32C of what the engine moved, without re-reading the file: each block is CRC'd while it is hot in cache
//! (after the socket read on the receiving side, after the file read on the sending side) and recorded as an
//! (offset, length, crc) piece; at the end the pieces are combined in offset order with `crc32c_combine` into the
//! CRC32C of `0..end`, but only if they tile exactly that range (a gap or an overlap gives `None`, and whoever
//! needs a checksum re-reads the file instead).

/// The per-block CRCs one stream (or a whole transfer, after [`CrcPieces::extend`]) recorded.
#[derive(Debug, Default, Clone)]
pub(crate) struct CrcPieces {
    pieces: Vec<(u64, u64, u32)>,
}

impl CrcPieces {
    /// Record `data`, which sits at file offset `off`.
    pub(crate) fn add(&mut self, off: u64, data: &[u8]) {
        if !data.is_empty() {
            self.pieces
                .push((off, data.len() as u64, crc32c::crc32c(data)));
        }
    }

    /// Take over another stream's pieces.
    pub(crate) fn extend(&mut self, other: CrcPieces) {
        self.pieces.extend(other.pieces);
    }

    /// The CRC32C of the bytes `0..end`, where `end` is where the last piece ends, if the pieces cover exactly
    /// that range with no gap and no overlap. No pieces at all is the CRC32C of nothing (0).
    pub(crate) fn whole(mut self) -> Option<u32> {
        combine(&mut self.pieces).map(|(_, crc)| crc)
    }
}

/// Combine `(offset, len, crc)` pieces (any order) into `(end, crc of 0..end)`; `None` unless they tile `0..end`.
pub(crate) fn combine(pieces: &mut [(u64, u64, u32)]) -> Option<(u64, u32)> {
    pieces.sort_unstable_by_key(|p| p.0);
    let mut end = 0u64;
    let mut crc = 0u32;
    for &(off, len, c) in pieces.iter() {
        if off != end {
            return None;
        }
        crc = crc32c::crc32c_combine(crc, c, usize::try_from(len).ok()?);
        end = end.checked_add(len)?;
    }
    Some((end, crc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use drsftp_storage::{checksum_bytes, ChecksumAlg};

    fn data(n: usize) -> Vec<u8> {
        drsftp_testkit::data::random_bytes(n, 1)
    }

    /// Random cuts, shuffled: the combination is the whole-file CRC32C, formatted like the CKSM one.
    #[test]
    fn out_of_order_pieces_combine_to_the_whole() {
        let whole = data(1_000_003);
        let mut seed = 12345u64;
        let mut rnd = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for _ in 0..5 {
            let mut cuts = vec![];
            let mut at = 0usize;
            while at < whole.len() {
                let n = (1 + rnd(300_000) as usize).min(whole.len() - at);
                cuts.push((at, n));
                at += n;
            }
            for i in (1..cuts.len()).rev() {
                let j = rnd(i as u64 + 1) as usize;
                cuts.swap(i, j);
            }
            let mut p = CrcPieces::default();
            for (off, n) in cuts {
                p.add(off as u64, &whole[off..off + n]);
            }
            let got = format!("{:08x}", p.whole().unwrap());
            assert_eq!(got, checksum_bytes(ChecksumAlg::Crc32c, &whole));
        }
        assert_eq!(CrcPieces::default().whole(), Some(0));
    }

    #[test]
    fn gaps_and_overlaps_give_none() {
        let d = data(100);
        let mut p = CrcPieces::default();
        p.add(0, &d[..40]);
        p.add(50, &d[50..]);
        assert_eq!(p.whole(), None);
        let mut p = CrcPieces::default();
        p.add(0, &d[..60]);
        p.add(50, &d[50..]);
        assert_eq!(p.whole(), None);
        let mut p = CrcPieces::default();
        p.add(10, &d[10..]);
        assert_eq!(p.whole(), None, "must start at 0");
        let mut p = CrcPieces::default();
        p.add(0, &d[..50]);
        p.add(0, &d[..50]);
        p.add(50, &d[50..]);
        assert_eq!(p.whole(), None, "a block sent twice");
    }
}
