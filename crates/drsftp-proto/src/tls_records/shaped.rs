//! Sealing records in place in a buffer laid out as records ([`RecordShape`]): a TLS sender reads its file block
//! straight into the records' plaintext slots and the AEAD seals each slot where it lies, so sending under TLS
//! copies nothing a cleartext send does not (the file read and the socket write). Without it every block was read
//! into one buffer and copied into the sealing buffer (6-13 % of a TLS server's CPU, docs/bench/tls.md).

use std::ops::Range;

use super::{seal_slot, KeySchedule, RecordError, RecordLayer, CT_APPDATA, EXPLICIT, HEADER};
use super::{MAX_PLAIN, TAG};

/// Where records' plaintext lies in a shaped buffer: record `r` starts at `r × (prefix + MAX_PLAIN + suffix)`, its
/// plaintext after `prefix` bytes (header, TLS 1.2 GCM's explicit nonce), room for the inner type and tag after
/// it; every record but the last is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordShape {
    pub(super) tls13: bool,
    pub(super) prefix: usize,
    pub(super) suffix: usize,
}

impl RecordShape {
    pub(super) fn new(tls13: bool, gcm: bool) -> Self {
        let explicit = if !tls13 && gcm { EXPLICIT } else { 0 };
        RecordShape {
            tls13,
            prefix: HEADER + explicit,
            suffix: usize::from(tls13) + TAG,
        }
    }

    fn stride(&self) -> usize {
        self.prefix + MAX_PLAIN + self.suffix
    }

    /// Length of a shaped buffer for `plain` bytes of plaintext.
    pub fn buffer_len(&self, plain: usize) -> usize {
        plain + plain.div_ceil(MAX_PLAIN) * (self.prefix + self.suffix)
    }

    /// Where plaintext bytes `range` lie in a shaped buffer: one buffer range per record they touch, in order.
    pub fn plain_ranges(self, range: Range<usize>) -> impl Iterator<Item = Range<usize>> {
        let mut at = range.start;
        std::iter::from_fn(move || {
            if at >= range.end {
                return None;
            }
            let (r, within) = (at / MAX_PLAIN, at % MAX_PLAIN);
            let n = (MAX_PLAIN - within).min(range.end - at);
            let start = r * self.stride() + self.prefix + within;
            at += n;
            Some(start..start + n)
        })
    }
}

impl<K: KeySchedule> RecordLayer<K> {
    /// The layout [`RecordLayer::seal_shaped`] expects (fixed for the connection: the suite never changes).
    pub fn shape(&self) -> RecordShape {
        RecordShape::new(self.tls13, self.tx.is_gcm())
    }

    /// Seals plaintext bytes `0..plain` that the caller placed in `buf` (laid out by [`RecordLayer::shape`]) as
    /// application data, in place, and queues them in [`RecordLayer::pending`]; returns a buffer for the caller's
    /// next block (the layer's drained send buffer, or `buf` itself on the rare path that copies). Like
    /// [`RecordLayer::seal_data`] it seals only when nothing is pending ([`RecordError::Busy`] otherwise: drain
    /// first), after our KeyUpdate if one is due.
    pub fn seal_shaped(&mut self, mut buf: Vec<u8>, plain: usize) -> Result<Vec<u8>, RecordError> {
        if self.closing {
            return Err(RecordError::Closed);
        }
        if !self.pending().is_empty() {
            return Err(RecordError::Busy);
        }
        let shape = self.shape();
        if buf.len() < shape.buffer_len(plain) {
            return Err(RecordError::Malformed(
                "shaped buffer shorter than its plaintext",
            ));
        }
        self.maybe_update_tx()?;
        let records = plain.div_ceil(MAX_PLAIN) as u64;
        if !self.tls13 && self.tx.seq + records > super::TLS12_RECORDS {
            return Err(RecordError::Malformed(
                "TLS 1.2 connection reached its key's record limit",
            ));
        }
        let (mut at, mut left) = (0, plain);
        while left > 0 {
            let n = left.min(MAX_PLAIN);
            at += seal_slot(&mut buf[at..], shape, &mut self.tx, CT_APPDATA, n, 0)?;
            left -= n;
        }
        if self.oend > 0 {
            // A KeyUpdate went first (once per 2^23 records, or when the peer asks): queue behind it.
            self.out.truncate(self.oend);
            self.out.extend_from_slice(&buf[..at]);
            self.oend = self.out.len();
            return Ok(buf);
        }
        std::mem::swap(&mut self.out, &mut buf);
        self.opos = 0;
        self.oend = at;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{pair, pass};
    use super::super::*;

    /// Lays `data` out in a shaped buffer of `extra` spare plaintext bytes, as the data engine does.
    fn shaped(shape: RecordShape, data: &[u8], extra: usize) -> Vec<u8> {
        let mut buf = vec![0xAA; shape.buffer_len(data.len() + extra)];
        let mut at = 0;
        for r in shape.plain_ranges(0..data.len()) {
            let n = r.len();
            buf[r].copy_from_slice(&data[at..at + n]);
            at += n;
        }
        assert_eq!(at, data.len());
        buf
    }

    #[test]
    fn plaintext_ranges_skip_every_records_overhead() {
        let s = RecordShape::new(true, true);
        assert_eq!((s.prefix, s.suffix), (5, 17));
        let r: Vec<_> = s.plain_ranges(17..MAX_PLAIN + 100).collect();
        assert_eq!(r, vec![22..5 + MAX_PLAIN, MAX_PLAIN + 27..MAX_PLAIN + 127]);
        assert_eq!(s.buffer_len(2 * MAX_PLAIN + 1), 2 * MAX_PLAIN + 1 + 3 * 22);
        let t12 = RecordShape::new(false, true);
        assert_eq!((t12.prefix, t12.suffix), (13, 16));
        assert_eq!(RecordShape::new(false, false).prefix, 5);
    }

    #[test]
    fn shaped_records_are_the_records_seal_data_makes() {
        let (mut a, mut b) = pair();
        let (mut a2, _) = pair();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 13) as u8).collect();
        let buf = shaped(a.shape(), &data, 5_000);
        let spare = a.seal_shaped(buf, data.len()).unwrap();
        let mut sent = 0;
        let mut wire = Vec::new();
        while sent < data.len() {
            sent += a2.seal_data(&data[sent..]).unwrap();
            wire.extend_from_slice(a2.pending());
            let n = a2.pending().len();
            a2.sent(n);
        }
        assert_eq!(a.pending(), &wire[..], "same keys, same records");
        assert_eq!(pass(&mut a, &mut b, 9_999).unwrap(), data);
        // The layer's old send buffer comes back for the next block; a second block follows on the same keys.
        let mut spare = spare;
        let more = vec![7u8; 300];
        let len = a.shape().buffer_len(more.len());
        if spare.len() < len {
            spare.resize(len, 0);
        }
        for (i, r) in a.shape().plain_ranges(0..more.len()).enumerate() {
            assert_eq!(i, 0);
            spare[r].copy_from_slice(&more);
        }
        a.seal_shaped(spare, more.len()).unwrap();
        assert_eq!(pass(&mut a, &mut b, 50).unwrap(), more);
    }

    #[test]
    fn nothing_is_sealed_over_pending_records_and_a_short_buffer_is_refused() {
        let (mut a, _) = pair();
        let shape = a.shape();
        a.seal_data(b"first").unwrap();
        let buf = shaped(shape, b"second", 0);
        assert_eq!(a.seal_shaped(buf.clone(), 6), Err(RecordError::Busy));
        let n = a.pending().len();
        a.sent(n);
        assert!(matches!(
            a.seal_shaped(vec![0; 20], 6),
            Err(RecordError::Malformed(_))
        ));
        a.close().unwrap();
        let n = a.pending().len();
        a.sent(n);
        assert_eq!(a.seal_shaped(buf, 6), Err(RecordError::Closed));
    }

    #[test]
    fn a_due_key_update_goes_first_and_the_block_follows_under_the_new_key() {
        let (mut a, mut b) = pair();
        a.update_tx = true; // as after the peer's KeyUpdate request
        let data = vec![3u8; 40_000];
        let buf = shaped(a.shape(), &data, 0);
        let back = a.seal_shaped(buf, data.len()).unwrap();
        assert!(back.len() >= a.shape().buffer_len(data.len()));
        assert_eq!(a.ks.tx, 1, "our send key was updated");
        assert_eq!(pass(&mut a, &mut b, 4_096).unwrap(), data);
        assert_eq!(b.ks.rx, 1, "the peer took our KeyUpdate before the data");
    }

    #[test]
    fn tls12_shapes_interoperate_with_the_opener() {
        for suite in [Suite::Aes128Gcm, Suite::Chacha20Poly1305] {
            let k = |d: u8| {
                Keys::new(
                    suite,
                    &vec![
                        d;
                        if suite == Suite::Chacha20Poly1305 {
                            32
                        } else {
                            16
                        }
                    ],
                    &[d; 12],
                    0,
                )
                .unwrap()
            };
            let ks = |me: u8, peer: u8| tests::Gen {
                rx_dir: peer,
                tx_dir: me,
                rx: 0,
                tx: 0,
            };
            let mut a = RecordLayer::new(ks(1, 2), false, k(2), k(1), &[], &[], 64 << 10);
            let mut b = RecordLayer::new(ks(2, 1), false, k(1), k(2), &[], &[], 64 << 10);
            let data: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
            let buf = shaped(a.shape(), &data, 17);
            a.seal_shaped(buf, data.len()).unwrap();
            assert_eq!(pass(&mut a, &mut b, 1_000).unwrap(), data, "{suite:?}");
        }
    }
}
