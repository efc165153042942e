//! Opening received records in place and handing the receive buffer out with them: a TLS receiver writes the
//! opened plaintext to its file straight from where each record was decrypted (one `pwritev` of the records'
//! plaintext slots), the mirror of a sender sealing in record slots ([`super::RecordShape`]). Without it every
//! opened record was copied into the caller's chunk before the file write (~0.05 CPU-s/GiB on a receiver that is
//! the saturated core of a loopback transfer, docs/bench/tls.md).

use std::ops::Range;

use super::{KeySchedule, RecordError, RecordLayer, HEADER, MAX_CIPHER_TLS12};

/// Receive room that always holds one more whole record.
pub const RECORD_ROOM: usize = HEADER + MAX_CIPHER_TLS12;

impl<K: KeySchedule> RecordLayer<K> {
    /// Opens every complete record received so far; application data stays where it was opened, held for
    /// [`RecordLayer::take_opened`]. Alerts and post-handshake messages (KeyUpdate, tickets) are handled on the
    /// way, so records after a KeyUpdate in the same buffer open under the new key. Stops at the peer's
    /// close_notify ([`RecordLayer::peer_closed`]). A record that fails is fatal, as for
    /// [`RecordLayer::plaintext`]: nothing of it is held, and every later call repeats the error.
    pub fn open_all(&mut self) -> Result<(), RecordError> {
        loop {
            if self.ppos < self.pend {
                // An opened record (or the handshake's early data) not yet handed out: keep it where it is.
                self.held.push(self.ppos..self.pend);
                self.ppos = self.pend;
            }
            if let Some(e) = &self.failed {
                return Err(e.clone());
            }
            if self.peer_closed {
                return Ok(());
            }
            match self.open_one() {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(e) => {
                    self.failed = Some(e.clone());
                    return Err(e);
                }
            }
        }
    }

    /// Plaintext bytes opened and held (see [`RecordLayer::open_all`]).
    pub fn held_len(&self) -> usize {
        self.held.iter().map(|r| r.len()).sum()
    }

    /// Whether the peer's close_notify arrived (no record after it is opened).
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// Bytes [`RecordLayer::recv_buf`] can take now. While plaintext is held the buffer cannot be compacted, so
    /// below [`RECORD_ROOM`] the caller should [`RecordLayer::take_opened`] before receiving more.
    pub fn recv_room(&self) -> usize {
        self.inb.len() - self.rend
    }

    /// Hands out the receive buffer with the plaintext held in it: returns that buffer, with `ranges` set to
    /// where the plaintext lies (in stream order), and continues in `spare` (resized to the buffer's length if
    /// shorter), into which the received bytes of a record not yet complete are moved (at most one record). The
    /// caller gives the returned buffer back as the next `spare` once it has written it out, so a receiver runs on
    /// two buffers and copies nothing but partial records.
    pub fn take_opened(&mut self, mut spare: Vec<u8>, ranges: &mut Vec<Range<usize>>) -> Vec<u8> {
        if self.ppos < self.pend {
            self.held.push(self.ppos..self.pend);
        }
        ranges.clear();
        ranges.append(&mut self.held);
        if spare.len() < self.inb.len() {
            spare.resize(self.inb.len(), 0);
        }
        let tail = self.rend - self.rpos;
        spare[..tail].copy_from_slice(&self.inb[self.rpos..self.rend]);
        self.rpos = 0;
        self.rend = tail;
        self.ppos = 0;
        self.pend = 0;
        std::mem::replace(&mut self.inb, spare)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::pair;
    use super::super::*;

    /// Sealed bytes `a` has pending, taken off it.
    fn wire(a: &mut RecordLayer<tests::Gen>) -> Vec<u8> {
        let w = a.pending().to_vec();
        a.sent(w.len());
        w
    }

    /// Feeds `wire` to `b` in `piece`-byte receives, taking the opened plaintext whenever the buffer cannot take
    /// another record and at the end, as the data engine does; returns the plaintext and how many takes it took.
    fn receive_in_place(
        b: &mut RecordLayer<tests::Gen>,
        wire: &[u8],
        piece: usize,
    ) -> Result<(Vec<u8>, usize), RecordError> {
        let (mut got, mut takes, mut at) = (Vec::new(), 0, 0);
        let mut spare = Vec::new();
        let mut ranges = Vec::new();
        let mut take = |b: &mut RecordLayer<tests::Gen>, spare: &mut Vec<u8>| {
            let buf = b.take_opened(std::mem::take(spare), &mut ranges);
            for r in &ranges {
                got.extend_from_slice(&buf[r.clone()]);
            }
            *spare = buf;
        };
        while at < wire.len() {
            if b.held_len() > 0 && b.recv_room() < RECORD_ROOM {
                take(b, &mut spare);
                takes += 1;
            }
            let room = b.recv_buf();
            let n = piece.min(room.len()).min(wire.len() - at);
            room[..n].copy_from_slice(&wire[at..at + n]);
            b.received(n);
            at += n;
            b.open_all()?;
        }
        take(b, &mut spare);
        Ok((got, takes + 1))
    }

    #[test]
    fn plaintext_opened_in_place_is_what_plaintext_returns() {
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 31 + i / 7) as u8).collect();
        for piece in [1_000, 16_389, 65_536, RECV_BUF] {
            let (mut a, mut b) = pair();
            let (mut a2, mut b2) = pair();
            let (mut w, mut sent) = (Vec::new(), 0);
            while sent < data.len() {
                // Uneven seals: full records and short ones, as blocks with headers make.
                let n = a
                    .seal_data(&data[sent..(sent + 70_001).min(data.len())])
                    .unwrap();
                w.extend(wire(&mut a));
                sent += n;
            }
            a.close().unwrap();
            w.extend(wire(&mut a));
            let (got, takes) = receive_in_place(&mut b, &w, piece).unwrap();
            assert_eq!(got, data, "piece {piece}");
            assert!(b.peer_closed());
            assert!(takes >= data.len() / RECV_BUF, "{takes} takes");
            // The same records through `plaintext`/`consume`.
            let mut sent = 0;
            let mut copied = Vec::new();
            while sent < data.len() {
                sent += a2
                    .seal_data(&data[sent..(sent + 70_001).min(data.len())])
                    .unwrap();
                copied.extend(tests::pass(&mut a2, &mut b2, piece).unwrap());
            }
            assert_eq!(copied, got);
        }
    }

    #[test]
    fn a_tampered_record_is_refused_and_none_of_it_is_held() {
        let (mut a, mut b) = pair();
        a.seal_data(&[5u8; 3 * MAX_PLAIN]).unwrap();
        let mut w = wire(&mut a);
        let second = HEADER + MAX_PLAIN + 17; // the second record starts here
        w[second + HEADER + 100] ^= 0x40;
        let room = b.recv_buf();
        room[..w.len()].copy_from_slice(&w);
        b.received(w.len());
        assert_eq!(b.open_all(), Err(RecordError::Authentication));
        assert_eq!(b.held_len(), MAX_PLAIN, "only the first record was opened");
        assert_eq!(
            b.open_all(),
            Err(RecordError::Authentication),
            "it stays fatal"
        );
        let mut ranges = Vec::new();
        let buf = b.take_opened(Vec::new(), &mut ranges);
        let got: Vec<u8> = ranges
            .iter()
            .flat_map(|r| buf[r.clone()].to_vec())
            .collect();
        assert_eq!(got, vec![5u8; MAX_PLAIN]);
        assert_eq!(b.open_all(), Err(RecordError::Authentication));
    }

    #[test]
    fn a_key_update_mid_buffer_opens_the_rest_under_the_new_key() {
        let (mut a, mut b) = pair();
        let first: Vec<u8> = (0..50_000u32).map(|i| i as u8).collect();
        let second: Vec<u8> = (0..30_000u32).map(|i| (i * 3) as u8).collect();
        a.seal_data(&first).unwrap();
        // `a` updates its key and asks `b` to update its own; the new key seals the rest of the same buffer.
        a.seal(CT_HANDSHAKE, &[HS_KEY_UPDATE, 0, 0, 1, 1]).unwrap();
        a.tx = a.ks.next_tx().unwrap();
        let mut w = wire(&mut a);
        assert_eq!(a.seal_data(&second).unwrap(), second.len());
        a.close().unwrap();
        w.extend(wire(&mut a));
        assert!(w.len() < RECV_BUF, "all in one receive");
        let (got, takes) = receive_in_place(&mut b, &w, w.len()).unwrap();
        assert_eq!(takes, 1);
        assert_eq!(got, [first, second].concat());
        assert_eq!(b.ks.rx, 1, "the peer's next key was taken mid-buffer");
        assert!(b.peer_closed());
        // Asked to, `b` updates its own key before its next data, which `a` opens.
        b.seal_data(b"reply").unwrap();
        assert_eq!(b.ks.tx, 1);
        assert_eq!(tests::pass(&mut b, &mut a, 7).unwrap(), b"reply");
    }

    #[test]
    fn a_partial_record_moves_to_the_spare_buffer() {
        let (mut a, mut b) = pair();
        a.seal_data(&[1u8; 2 * MAX_PLAIN]).unwrap();
        let w = wire(&mut a);
        let cut = w.len() - 1000; // the second record is 1000 bytes short
        let room = b.recv_buf();
        room[..cut].copy_from_slice(&w[..cut]);
        b.received(cut);
        b.open_all().unwrap();
        assert_eq!(b.held_len(), MAX_PLAIN);
        let mut ranges = Vec::new();
        let spare = vec![0xEE; 10];
        let buf = b.take_opened(spare, &mut ranges);
        assert_eq!(ranges, vec![HEADER..HEADER + MAX_PLAIN]);
        assert!(buf[ranges[0].clone()].iter().all(|x| *x == 1));
        assert_eq!(b.held_len(), 0);
        let room = b.recv_buf();
        assert!(room.len() >= RECORD_ROOM);
        room[..1000].copy_from_slice(&w[cut..]);
        b.received(1000);
        b.open_all().unwrap();
        assert_eq!(b.held_len(), MAX_PLAIN);
        let buf2 = b.take_opened(buf, &mut ranges);
        assert!(buf2[ranges[0].clone()].iter().all(|x| *x == 1));
    }
}
