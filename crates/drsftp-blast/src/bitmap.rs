//! `Bitmap`: the compact one-bit-per-packet set used for the receiver's received map (and resume checkpoint) and
//! the sender's acked map, with word-at-a-time scans, range inserts and run iteration for ack encoding.

use crate::error::BitmapError;

/// A fixed-length bitset of `len` bits (1 bit per packet: 1 TB at 8 KB packets is a 16 MB bitmap).
#[derive(Clone, PartialEq, Eq)]
pub struct Bitmap {
    words: Vec<u64>,
    len: u64,
    ones: u64,
}

impl std::fmt::Debug for Bitmap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bitmap({}/{} set)", self.ones, self.len)
    }
}

fn words_for(len: u64) -> usize {
    len.div_ceil(64) as usize
}

impl Bitmap {
    /// All `len` bits clear.
    pub fn new(len: u64) -> Self {
        Bitmap {
            words: vec![0; words_for(len)],
            len,
            ones: 0,
        }
    }

    /// Number of bits.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if the bitmap has no bits at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of set bits.
    pub fn count_ones(&self) -> u64 {
        self.ones
    }

    /// True when every bit is set.
    pub fn is_full(&self) -> bool {
        self.ones == self.len
    }

    /// Bit `i` (false beyond the end).
    pub fn get(&self, i: u64) -> bool {
        i < self.len && self.words[(i / 64) as usize] >> (i % 64) & 1 == 1
    }

    /// Set bit `i`; returns true if it was clear. Out-of-range indices are ignored (false).
    pub fn set(&mut self, i: u64) -> bool {
        if i >= self.len {
            return false;
        }
        let w = &mut self.words[(i / 64) as usize];
        let m = 1u64 << (i % 64);
        if *w & m != 0 {
            return false;
        }
        *w |= m;
        self.ones += 1;
        true
    }

    /// Set bits `[a, b)` (clamped to the length), calling `f(i)` for every bit that was clear. Returns how many
    /// bits were newly set.
    pub fn set_range_with(&mut self, a: u64, b: u64, mut f: impl FnMut(u64)) -> u64 {
        let b = b.min(self.len);
        if a >= b {
            return 0;
        }
        let mut newly = 0;
        let mut i = a;
        while i < b {
            let wi = (i / 64) as usize;
            let lo = i % 64;
            let hi = ((b - (i - lo)).min(64)) as u32; // exclusive bit index within this word
            let mask = if hi == 64 { u64::MAX } else { (1u64 << hi) - 1 } & (u64::MAX << lo);
            let fresh = mask & !self.words[wi];
            if fresh != 0 {
                self.words[wi] |= fresh;
                let n = fresh.count_ones() as u64;
                newly += n;
                let mut bits = fresh;
                let base = wi as u64 * 64;
                while bits != 0 {
                    f(base + bits.trailing_zeros() as u64);
                    bits &= bits - 1;
                }
            }
            i = (wi as u64 + 1) * 64;
        }
        self.ones += newly;
        newly
    }

    /// Set bits `[a, b)`; returns how many were newly set.
    pub fn set_range(&mut self, a: u64, b: u64) -> u64 {
        self.set_range_with(a, b, |_| {})
    }

    /// First clear bit at or after `from`, if any.
    pub fn next_zero(&self, from: u64) -> Option<u64> {
        self.scan(from, true)
    }

    /// First set bit at or after `from`, if any.
    pub fn next_one(&self, from: u64) -> Option<u64> {
        self.scan(from, false)
    }

    fn scan(&self, from: u64, zeros: bool) -> Option<u64> {
        if from >= self.len {
            return None;
        }
        let mut wi = (from / 64) as usize;
        let flip = if zeros { u64::MAX } else { 0 };
        let mut w = (self.words[wi] ^ flip) & (u64::MAX << (from % 64));
        loop {
            if w != 0 {
                let i = wi as u64 * 64 + w.trailing_zeros() as u64;
                return (i < self.len).then_some(i);
            }
            wi += 1;
            if wi >= self.words.len() {
                return None;
            }
            w = self.words[wi] ^ flip;
        }
    }

    /// End of the run of equal bits starting at `from` (exclusive), never beyond `end` (or the length).
    pub fn run_end(&self, from: u64, end: u64) -> u64 {
        let end = end.min(self.len);
        if from >= end {
            return from;
        }
        let next = if self.get(from) {
            self.next_zero(from)
        } else {
            self.next_one(from)
        };
        next.unwrap_or(self.len).min(end)
    }

    /// Packed little-endian bytes: bit `i` is bit `i % 8` of byte `i / 8` (`len.div_ceil(8)` bytes). This is the
    /// resume checkpoint format (store `len` alongside).
    pub fn to_bytes(&self) -> Vec<u8> {
        let n = self.len.div_ceil(8) as usize;
        let mut out = Vec::with_capacity(n);
        for w in &self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.truncate(n);
        out
    }

    /// Inverse of [`to_bytes`](Self::to_bytes). Rejects a wrong byte count or set padding bits.
    pub fn from_bytes(len: u64, bytes: &[u8]) -> Result<Self, BitmapError> {
        if bytes.len() as u64 != len.div_ceil(8) {
            return Err(BitmapError::Length {
                expected: len.div_ceil(8),
                got: bytes.len() as u64,
            });
        }
        if !len.is_multiple_of(8) {
            let last = bytes[bytes.len() - 1];
            if last >> (len % 8) != 0 {
                return Err(BitmapError::Padding);
            }
        }
        let mut words = vec![0u64; words_for(len)];
        for (i, chunk) in bytes.chunks(8).enumerate() {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            words[i] = u64::from_le_bytes(b);
        }
        let ones = words.iter().map(|w| w.count_ones() as u64).sum();
        Ok(Bitmap { words, len, ones })
    }

    /// Copy bits `[start, start + n)` into `out` as packed LE bytes (bit j of the result = bit start + j).
    pub(crate) fn extract_bytes(&self, start: u64, n: u64, out: &mut Vec<u8>) {
        let nbytes = n.div_ceil(8) as usize;
        let base = out.len();
        out.resize(base + nbytes, 0);
        let mut j = 0u64;
        while j < n {
            let i = start + j;
            let wi = (i / 64) as usize;
            let off = i % 64;
            // Up to 8 bits from this position (may straddle two words).
            let mut v = self.words.get(wi).copied().unwrap_or(0) >> off;
            if off > 56 {
                v |= self.words.get(wi + 1).copied().unwrap_or(0) << (64 - off);
            }
            let take = (n - j).min(8);
            let mut byte = (v & 0xff) as u8;
            if take < 8 {
                byte &= (1u8 << take) - 1;
            }
            out[base + (j / 8) as usize] = byte;
            j += 8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_scan() {
        let mut b = Bitmap::new(130);
        assert_eq!(b.next_zero(0), Some(0));
        assert_eq!(b.next_one(0), None);
        assert!(b.set(0));
        assert!(!b.set(0));
        assert!(!b.set(130));
        assert_eq!(b.set_range(5, 129), 124);
        assert_eq!(b.count_ones(), 125);
        assert_eq!(b.next_zero(0), Some(1));
        assert_eq!(b.next_zero(5), Some(129));
        assert_eq!(b.next_one(1), Some(5));
        assert_eq!(b.run_end(5, 1000), 129);
        assert_eq!(b.run_end(1, 1000), 5);
        assert!(b.set(129));
        assert_eq!(b.next_zero(5), None);
        let mut seen = vec![];
        assert_eq!(b.set_range_with(0, 200, |i| seen.push(i)), 4);
        assert_eq!(seen, vec![1, 2, 3, 4]);
        assert!(b.is_full());
    }

    #[test]
    fn bytes_round_trip_and_extract() {
        let mut b = Bitmap::new(77);
        for i in [0u64, 3, 8, 63, 64, 70, 76] {
            b.set(i);
        }
        let bytes = b.to_bytes();
        assert_eq!(bytes.len(), 10);
        assert_eq!(Bitmap::from_bytes(77, &bytes).unwrap(), b);
        assert!(Bitmap::from_bytes(78, &bytes[..9]).is_err());
        let mut bad = bytes.clone();
        bad[9] |= 0x80;
        assert_eq!(Bitmap::from_bytes(77, &bad), Err(BitmapError::Padding));
        for start in 0..77u64 {
            let n = 77 - start;
            let mut out = vec![];
            b.extract_bytes(start, n, &mut out);
            for j in 0..n {
                assert_eq!(out[(j / 8) as usize] >> (j % 8) & 1 == 1, b.get(start + j));
            }
        }
    }
}
