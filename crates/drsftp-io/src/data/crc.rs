//! CRC32C of what the engine moved, without re-reading the file: each block is CRC'd while it is hot in cache
//! (after the socket read on the receiving side, after the file read on the sending side) and recorded as an
//! (offset, length, crc) piece; at the end the pieces are combined in offset order with `crc32c_combine` into the
//! CRC32C of `0..end`, but only if they tile exactly that range (a gap or an overlap gives `None`, and whoever
//! needs a checksum re-reads the file instead).
//!
//! Combining uses zlib's (1.2.12+) operator method: the shift by `len` bytes is multiplication by x^(8·len)
//! mod P, computed once per piece length (all blocks but the last share one). `crc32c::crc32c_combine` builds
//! that operator from scratch with 32x32 bit matrices for every piece, which cost as much CPU as the CRC itself
//! (docs/bench/tls.md has the profile).

/// The per-block CRCs one stream (or a whole transfer, after [`CrcPieces::extend`]) recorded.
#[derive(Debug, Default, Clone)]
pub(crate) struct CrcPieces {
    pieces: Vec<(u64, u64, u32)>,
}

impl CrcPieces {
    /// Record `data`, which sits at file offset `off`. Data that continues the last piece extends it (stream
    /// mode, one MODE E stream), so a long transfer keeps one piece instead of one per block.
    pub(crate) fn add(&mut self, off: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        match self.pieces.last_mut() {
            Some((o, len, crc)) if o.checked_add(*len) == Some(off) => {
                *crc = crc32c::crc32c_append(*crc, data);
                *len += data.len() as u64;
            }
            _ => self
                .pieces
                .push((off, data.len() as u64, crc32c::crc32c(data))),
        }
    }

    /// Pieces recorded elsewhere (bytes already in the file, their CRC computed from it).
    pub(crate) fn seeded(pieces: &[(u64, u64, u32)]) -> Self {
        CrcPieces {
            pieces: pieces.to_vec(),
        }
    }

    /// How many pieces are recorded.
    pub(crate) fn len(&self) -> usize {
        self.pieces.len()
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
    // Operators by piece length: MODE E blocks share one length, a blast receiver's resent packets another.
    let mut shifts: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
    for &(off, len, c) in pieces.iter() {
        if off != end {
            return None;
        }
        let op = *shifts.entry(len).or_insert_with(|| x8n_mod_p(len));
        crc = mul_mod_p(op, crc) ^ c;
        end = end.checked_add(len)?;
    }
    Some((end, crc))
}

/// CRC-32C's polynomial (Castagnoli), bit-reflected: bit 31 is x^0.
const POLY: u32 = 0x82f6_3b78;

/// `a · b mod P` in GF(2)[x], both bit-reflected (zlib's `multmodp`).
fn mul_mod_p(a: u32, mut b: u32) -> u32 {
    let mut p = 0u32;
    let mut m = 1u32 << 31;
    while m != 0 {
        if a & m != 0 {
            p ^= b;
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    p
}

/// x^(8·n) mod P: the operator that appends `n` zero bytes to a CRC (square-and-multiply on x^8).
fn x8n_mod_p(mut n: u64) -> u32 {
    let mut p = 1u32 << 31; // x^0
    let mut sq = 1u32 << 23; // x^8
    while n != 0 {
        if n & 1 != 0 {
            p = mul_mod_p(sq, p);
        }
        sq = mul_mod_p(sq, sq);
        n >>= 1;
    }
    p
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

    /// The operator method agrees with the crc32c crate's matrix method at every length scale.
    #[test]
    fn combine_matches_the_crate() {
        let d = data(70_001);
        for cut in [0usize, 1, 7, 8, 255, 4096, 65_536, 70_000, 70_001] {
            let (a, b) = d.split_at(cut);
            let (ca, cb) = (crc32c::crc32c(a), crc32c::crc32c(b));
            let mut pieces = vec![(cut as u64, b.len() as u64, cb), (0, a.len() as u64, ca)];
            pieces.retain(|p| p.1 > 0);
            let (end, crc) = combine(&mut pieces).unwrap();
            assert_eq!(end, d.len() as u64);
            assert_eq!(crc, crc32c::crc32c(&d), "cut at {cut}");
            assert_eq!(crc, crc32c::crc32c_combine(ca, cb, b.len()), "cut at {cut}");
        }
        // Lengths past 4 GiB: only the operator differs, so compare against the crate for the shift alone.
        for len in [1u64 << 32, (1u64 << 40) + 12_345] {
            let expect = crc32c::crc32c_combine(0x1234_5678, 0, len as usize);
            assert_eq!(mul_mod_p(x8n_mod_p(len), 0x1234_5678), expect, "len {len}");
        }
    }

    /// Held ranges' CRCs seeded before the moved blocks: the whole file's CRC, or `None` if they overlap.
    #[test]
    fn seeded_pieces_complete_the_moved_ones() {
        let d = data(50_000);
        let held = [
            (0u64, 12_000u64, crc32c::crc32c(&d[..12_000])),
            (30_000, 5_000, crc32c::crc32c(&d[30_000..35_000])),
        ];
        let mut p = CrcPieces::seeded(&held);
        p.add(35_000, &d[35_000..]);
        p.add(12_000, &d[12_000..30_000]);
        assert_eq!(p.whole(), Some(crc32c::crc32c(&d)));
        let mut p = CrcPieces::seeded(&held);
        p.add(11_000, &d[11_000..]);
        assert_eq!(p.whole(), None, "a moved block over a held range");
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
