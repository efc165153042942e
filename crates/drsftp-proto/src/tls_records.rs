//! The sans-IO TLS record layer of data connections: opens received records in place in one buffer and seals
//! outgoing ones into another, with ring's AEAD, after a handshake done elsewhere (drsftp-io runs it with rustls
//! and hands the traffic keys over). Bytes in, plaintext and bytes to send out; the key schedule (KeyUpdate,
//! session tickets) stays behind [`KeySchedule`].
//!
//! What it enforces, since it faces the peer: record lengths (RFC 8446 §5.2), authentication of every record (a
//! record that fails to open is fatal and none of it is returned), only application data, alerts and
//! post-handshake handshake messages (KeyUpdate, NewSessionTicket) after the handshake, a fixed receive buffer
//! (a record never needs more), and close_notify as the only end of data (the I/O driver turns a TCP end before
//! it into an error). TLS 1.3 and TLS 1.2 AEAD suites (AES-GCM, ChaCha20-Poly1305).

use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};

mod held;
mod shaped;
pub use held::RECORD_ROOM;
pub use shaped::RecordShape;

/// Largest plaintext per record (RFC 8446 §5.1).
pub const MAX_PLAIN: usize = 1 << 14;
/// Record header: type, version, length.
pub const HEADER: usize = 5;
/// AEAD tag of every suite we support.
const TAG: usize = 16;
/// TLS 1.2 GCM records carry an 8-byte explicit nonce.
const EXPLICIT: usize = 8;
/// Largest ciphertext a TLS 1.3 peer may send in one record: plaintext, the content type, and up to 255 bytes of
/// padding and tag (RFC 8446 §5.2: 2^14 + 256).
pub const MAX_CIPHER: usize = MAX_PLAIN + 256;
/// TLS 1.2 allows 2^14 + 2048 of ciphertext (RFC 5246 §6.2.3).
const MAX_CIPHER_TLS12: usize = MAX_PLAIN + 2048;
/// Receive buffer: one `recv` of up to this much feeds many records (a cleartext reader takes 256 KiB chunks).
pub const RECV_BUF: usize = 256 << 10;
/// Records sent under one TLS 1.3 key before we update it ourselves: far below AES-GCM's confidentiality limit
/// (2^24.5 records, RFC 8446 §5.5), ~128 GiB at full records.
const TX_KEY_RECORDS: u64 = 1 << 23;
/// Records a TLS 1.2 connection may seal under its one key (AES-GCM's limit, as rustls applies it).
const TLS12_RECORDS: u64 = 1 << 24;

pub const CT_ALERT: u8 = 21;
pub const CT_HANDSHAKE: u8 = 22;
pub const CT_APPDATA: u8 = 23;
pub const HS_NEW_SESSION_TICKET: u8 = 4;
pub const HS_KEY_UPDATE: u8 = 24;

/// Why the record layer refused the peer's bytes or could not go on; every one ends the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error("TLS: {0}")]
    Malformed(&'static str),
    #[error("TLS: record of {0} bytes is too long")]
    TooLong(usize),
    #[error("TLS: record failed authentication")]
    Authentication,
    #[error("TLS: unexpected record type {0}")]
    UnexpectedType(u8),
    #[error("TLS: unexpected handshake message {0}")]
    UnexpectedHandshake(u8),
    #[error("TLS: peer sent alert {0}")]
    Alert(u8),
    #[error("TLS: connection already closed")]
    Closed,
    #[error("TLS: earlier records are not sent yet")]
    Busy,
    #[error("TLS: key schedule: {0}")]
    KeySchedule(String),
}

/// An AEAD suite with a record layer here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

/// One direction's AEAD key, nonce base and record sequence number.
pub struct Keys {
    key: LessSafeKey,
    iv: [u8; 12],
    seq: u64,
}

impl Keys {
    /// Traffic key and IV of `suite`, first record number `seq` (records already sealed during the handshake).
    pub fn new(suite: Suite, key: &[u8], iv: &[u8], seq: u64) -> Result<Keys, RecordError> {
        let alg = match suite {
            Suite::Aes128Gcm => &aead::AES_128_GCM,
            Suite::Aes256Gcm => &aead::AES_256_GCM,
            Suite::Chacha20Poly1305 => &aead::CHACHA20_POLY1305,
        };
        let key =
            UnboundKey::new(alg, key).map_err(|_| RecordError::Malformed("bad traffic key"))?;
        let iv: [u8; 12] = iv
            .try_into()
            .map_err(|_| RecordError::Malformed("bad traffic IV"))?;
        Ok(Keys {
            key: LessSafeKey::new(key),
            iv,
            seq,
        })
    }

    /// The per-record nonce: the IV with the sequence number XORed into its last 8 bytes (TLS 1.3, and TLS 1.2
    /// ChaCha20; TLS 1.2 GCM sends these last 8 bytes as its explicit nonce).
    fn nonce(&self) -> [u8; 12] {
        let mut n = self.iv;
        for (b, s) in n[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *b ^= s;
        }
        n
    }

    fn is_gcm(&self) -> bool {
        self.key.algorithm() != &aead::CHACHA20_POLY1305
    }
}

/// The key schedule behind the record layer (rustls' kernel connection in drsftp-io).
pub trait KeySchedule {
    /// The peer's next send key, after its KeyUpdate.
    fn next_rx(&mut self) -> Result<Keys, RecordError>;
    /// Our next send key, after our KeyUpdate.
    fn next_tx(&mut self) -> Result<Keys, RecordError>;
    /// A NewSessionTicket message (its body, without the 4-byte header); an error if a client sent it to us.
    fn session_ticket(&mut self, msg: &[u8]) -> Result<(), RecordError>;
}

/// What [`RecordLayer::plaintext`] has.
#[derive(Debug, PartialEq, Eq)]
pub enum Plain<'a> {
    /// Opened application data; [`RecordLayer::consume`] what was used.
    Data(&'a [u8]),
    /// No complete record: receive more into [`RecordLayer::recv_buf`].
    NeedMore,
    /// The peer's close_notify arrived: the end of the data.
    Closed,
}

/// Seals one record of inner type `typ` holding `data` (and, under TLS 1.3, `pad` zero bytes) at the end of
/// `out`. Public so tests and fuzzing can play the peer, hostile records included.
pub fn seal_record(
    out: &mut Vec<u8>,
    keys: &mut Keys,
    tls13: bool,
    typ: u8,
    data: &[u8],
    pad: usize,
) -> Result<(), RecordError> {
    let len = data.len() + pad + 1 + EXPLICIT + TAG;
    if len > MAX_CIPHER_TLS12 {
        return Err(RecordError::TooLong(len));
    }
    let shape = RecordShape::new(tls13, keys.is_gcm());
    let at = out.len();
    out.resize(at + shape.prefix + data.len() + pad + shape.suffix, 0);
    out[at + shape.prefix..][..data.len()].copy_from_slice(data);
    let n = seal_slot(&mut out[at..], shape, keys, typ, data.len(), pad)?;
    debug_assert_eq!(at + n, out.len());
    Ok(())
}

/// Seals the record at the start of `rec` whose `len` bytes of data already lie after [`RecordShape`]'s prefix:
/// writes the header (and TLS 1.2's explicit nonce), the TLS 1.3 inner type and `pad` zeros after the data,
/// encrypts in place and appends the tag. Returns the record's length on the wire.
fn seal_slot(
    rec: &mut [u8],
    shape: RecordShape,
    keys: &mut Keys,
    typ: u8,
    len: usize,
    pad: usize,
) -> Result<usize, RecordError> {
    let nonce = keys.nonce();
    let body = shape.prefix + len;
    let tag = if shape.tls13 {
        let wire = len + 1 + pad + TAG;
        rec[..HEADER].copy_from_slice(&[CT_APPDATA, 3, 3, (wire >> 8) as u8, wire as u8]);
        rec[body] = typ;
        rec[body + 1..body + 1 + pad].fill(0);
        let header: [u8; HEADER] = rec[..HEADER].try_into().expect("5");
        keys.key.seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(header),
            &mut rec[HEADER..body + 1 + pad],
        )
    } else {
        let explicit = shape.prefix - HEADER;
        let wire = explicit + len + TAG;
        rec[..HEADER].copy_from_slice(&[typ, 3, 3, (wire >> 8) as u8, wire as u8]);
        rec[HEADER..shape.prefix].copy_from_slice(&nonce[12 - explicit..]);
        let mut aad = [0u8; 13];
        aad[..8].copy_from_slice(&keys.seq.to_be_bytes());
        aad[8..11].copy_from_slice(&[typ, 3, 3]);
        aad[11..].copy_from_slice(&(len as u16).to_be_bytes());
        keys.key.seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad),
            &mut rec[shape.prefix..body],
        )
    }
    .map_err(|_| RecordError::Malformed("seal failed"))?;
    let tag_at = body + usize::from(shape.tls13) + pad;
    rec[tag_at..tag_at + TAG].copy_from_slice(tag.as_ref());
    keys.seq += 1;
    Ok(tag_at + TAG)
}

/// One connection's record layer (see the module docs).
pub struct RecordLayer<K> {
    ks: K,
    tls13: bool,
    rx: Keys,
    tx: Keys,
    /// Received bytes: `inb[rpos..rend]` are not yet opened records; `inb[ppos..pend]` opened plaintext not yet
    /// read (when non-empty it lies before `rpos`).
    inb: Vec<u8>,
    rpos: usize,
    rend: usize,
    ppos: usize,
    pend: usize,
    /// Opened application data kept where it was opened, for [`RecordLayer::take_opened`] (ranges of `inb`, in
    /// order, all before `rpos`).
    held: Vec<std::ops::Range<usize>>,
    /// Sealed records not yet sent: `out[opos..oend]` (`out` may be longer: a shaped buffer keeps its length so
    /// it can go back to the data engine for the next block without being zeroed again).
    out: Vec<u8>,
    opos: usize,
    oend: usize,
    /// Most plaintext one [`RecordLayer::seal`] takes.
    send_limit: usize,
    /// The peer's close_notify arrived: reads end.
    peer_closed: bool,
    /// Our close_notify is sealed.
    closing: bool,
    /// The peer asked for a KeyUpdate (RFC 8446 §4.6.3): ours goes out before our next record.
    update_tx: bool,
    /// A fatal error, repeated to every later read (the stream is never resumed after a bad record).
    failed: Option<RecordError>,
}

impl<K: KeySchedule> RecordLayer<K> {
    /// After the handshake: `early` is application data the handshake already opened (it is read first),
    /// `unopened` the bytes received after the handshake's last record; one seal takes at most `send_limit`.
    pub fn new(
        ks: K,
        tls13: bool,
        rx: Keys,
        tx: Keys,
        early: &[u8],
        unopened: &[u8],
        send_limit: usize,
    ) -> Self {
        let held = early.len() + unopened.len();
        let mut inb = Vec::with_capacity(held.max(RECV_BUF) + HEADER + MAX_CIPHER_TLS12);
        inb.extend_from_slice(early);
        inb.extend_from_slice(unopened);
        let rend = inb.len();
        inb.resize(inb.capacity(), 0);
        let overhead = send_limit.div_ceil(MAX_PLAIN) * (HEADER + EXPLICIT + 1 + TAG);
        RecordLayer {
            ks,
            tls13,
            rx,
            tx,
            inb,
            rpos: early.len(),
            rend,
            ppos: 0,
            pend: early.len(),
            held: Vec::new(),
            out: Vec::with_capacity(send_limit + overhead + 2 * (HEADER + 64)),
            opos: 0,
            oend: 0,
            send_limit,
            peer_closed: false,
            closing: false,
            update_tx: false,
            failed: None,
        }
    }

    /// Records opened under the current receive key (it restarts with each KeyUpdate).
    pub fn rx_seq(&self) -> u64 {
        self.rx.seq
    }

    /// Where the next received bytes go (never empty while no plaintext is waiting: a record always fits).
    pub fn recv_buf(&mut self) -> &mut [u8] {
        if self.ppos == self.pend
            && self.held.is_empty()
            && self.inb.len() - self.rend < HEADER + MAX_CIPHER_TLS12
        {
            // Move the partial record to the front when the rest of the buffer cannot take a record.
            self.inb.copy_within(self.rpos..self.rend, 0);
            self.rend -= self.rpos;
            self.rpos = 0;
            self.ppos = 0;
            self.pend = 0;
        }
        &mut self.inb[self.rend..]
    }

    /// `n` bytes were received into [`RecordLayer::recv_buf`].
    pub fn received(&mut self, n: usize) {
        self.rend = (self.rend + n).min(self.inb.len());
    }

    /// Opened plaintext, opening the next record if none is waiting (not mixed with
    /// [`RecordLayer::open_all`]: plaintext held for [`RecordLayer::take_opened`] is not returned here).
    pub fn plaintext(&mut self) -> Result<Plain<'_>, RecordError> {
        while self.ppos == self.pend {
            if let Some(e) = &self.failed {
                return Err(e.clone());
            }
            if self.peer_closed {
                return Ok(Plain::Closed);
            }
            match self.open_one() {
                Ok(true) => {}
                Ok(false) => return Ok(Plain::NeedMore),
                Err(e) => {
                    self.failed = Some(e.clone());
                    return Err(e);
                }
            }
        }
        Ok(Plain::Data(&self.inb[self.ppos..self.pend]))
    }

    /// `n` bytes of the last [`Plain::Data`] were used.
    pub fn consume(&mut self, n: usize) {
        self.ppos = (self.ppos + n).min(self.pend);
    }

    /// Opens the record at `inb[rpos..]` if it is all there: `Ok(false)` if more bytes are needed.
    fn open_one(&mut self) -> Result<bool, RecordError> {
        let avail = self.rend - self.rpos;
        if avail < HEADER {
            return Ok(false);
        }
        let h = &self.inb[self.rpos..self.rpos + HEADER];
        let (typ, len) = (h[0], u16::from_be_bytes([h[3], h[4]]) as usize);
        if h[1] != 3 {
            return Err(RecordError::Malformed("bad record version"));
        }
        if len > MAX_CIPHER_TLS12 || (self.tls13 && len > MAX_CIPHER) {
            return Err(RecordError::TooLong(len));
        }
        if avail < HEADER + len {
            return Ok(false);
        }
        let start = self.rpos;
        self.rpos += HEADER + len;
        let (typ, body) = if self.tls13 {
            if typ != CT_APPDATA {
                return Err(RecordError::UnexpectedType(typ));
            }
            let header: [u8; HEADER] = self.inb[start..start + HEADER].try_into().expect("5");
            let nonce = Nonce::assume_unique_for_key(self.rx.nonce());
            let rec = &mut self.inb[start + HEADER..start + HEADER + len];
            let plain = self
                .rx
                .key
                .open_in_place(nonce, Aad::from(header), rec)
                .map_err(|_| RecordError::Authentication)?;
            // Inner plaintext: content, content type, zero padding (RFC 8446 §5.2).
            let Some(end) = plain.iter().rposition(|b| *b != 0) else {
                return Err(RecordError::Malformed("record without a content type"));
            };
            if end > MAX_PLAIN {
                return Err(RecordError::Malformed("record plaintext too long"));
            }
            (plain[end], start + HEADER..start + HEADER + end)
        } else {
            let explicit = if self.rx.is_gcm() { EXPLICIT } else { 0 };
            if len < explicit + TAG {
                return Err(RecordError::Malformed("record too short"));
            }
            let plen = len - explicit - TAG;
            if plen > MAX_PLAIN {
                return Err(RecordError::Malformed("record plaintext too long"));
            }
            let mut nonce = self.rx.nonce();
            if explicit > 0 {
                nonce[4..].copy_from_slice(&self.inb[start + HEADER..start + HEADER + EXPLICIT]);
            }
            let mut aad = [0u8; 13];
            aad[..8].copy_from_slice(&self.rx.seq.to_be_bytes());
            aad[8..11].copy_from_slice(&self.inb[start..start + 3]);
            aad[11..].copy_from_slice(&(plen as u16).to_be_bytes());
            let b = start + HEADER + explicit;
            self.rx
                .key
                .open_in_place(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from(aad),
                    &mut self.inb[b..start + HEADER + len],
                )
                .map_err(|_| RecordError::Authentication)?;
            (typ, b..b + plen)
        };
        self.rx.seq += 1;
        match typ {
            CT_APPDATA => {
                self.ppos = body.start;
                self.pend = body.end;
            }
            CT_ALERT => {
                let a = &self.inb[body];
                if a.len() != 2 {
                    return Err(RecordError::Malformed("malformed alert"));
                }
                if a[1] == 0 {
                    self.peer_closed = true;
                } else if !(a[0] == 1 && a[1] == 90 && !self.tls13) {
                    // Anything but close_notify (and TLS 1.2's user_canceled warning) ends the connection.
                    return Err(RecordError::Alert(a[1]));
                }
            }
            CT_HANDSHAKE => self.post_handshake(body)?,
            t => return Err(RecordError::UnexpectedType(t)),
        }
        Ok(true)
    }

    /// KeyUpdate and NewSessionTicket (TLS 1.3); messages split over records are refused (no peer we know of
    /// splits these small messages, and refusing bounds what we buffer).
    fn post_handshake(&mut self, body: std::ops::Range<usize>) -> Result<(), RecordError> {
        if !self.tls13 {
            return Err(RecordError::Malformed("renegotiation is not supported"));
        }
        let mut at = body.start;
        while at < body.end {
            if body.end - at < 4 {
                return Err(RecordError::Malformed("truncated handshake message"));
            }
            let h = &self.inb[at..at + 4];
            let (typ, len) = (h[0], u32::from_be_bytes([0, h[1], h[2], h[3]]) as usize);
            let (m0, m1) = (at + 4, at + 4 + len);
            if m1 > body.end {
                return Err(RecordError::Malformed(
                    "handshake message split over records",
                ));
            }
            match typ {
                HS_KEY_UPDATE => {
                    let req = match self.inb[m0..m1] {
                        [0] => false,
                        [1] => true,
                        _ => return Err(RecordError::Malformed("malformed KeyUpdate")),
                    };
                    // A KeyUpdate must end its record (RFC 8446 §5.1: key changes align with records).
                    if m1 != body.end {
                        return Err(RecordError::Malformed("data after KeyUpdate in one record"));
                    }
                    self.rx = self.ks.next_rx()?;
                    self.update_tx |= req;
                }
                HS_NEW_SESSION_TICKET => self.ks.session_ticket(&self.inb[m0..m1])?,
                t => return Err(RecordError::UnexpectedHandshake(t)),
            }
            at = m1;
        }
        Ok(())
    }

    fn seal(&mut self, typ: u8, data: &[u8]) -> Result<(), RecordError> {
        if !self.tls13 && self.tx.seq >= TLS12_RECORDS {
            // TLS 1.2 has no KeyUpdate: the connection ends before its key is used past the safe limit.
            return Err(RecordError::Malformed(
                "TLS 1.2 connection reached its key's record limit",
            ));
        }
        self.out.truncate(self.oend);
        seal_record(&mut self.out, &mut self.tx, self.tls13, typ, data, 0)?;
        self.oend = self.out.len();
        Ok(())
    }

    /// Our KeyUpdate (when the peer asked, or our key has sealed [`TX_KEY_RECORDS`]), then the new send key.
    fn maybe_update_tx(&mut self) -> Result<(), RecordError> {
        if !self.tls13 || !(self.update_tx || self.tx.seq >= TX_KEY_RECORDS) {
            return Ok(());
        }
        self.seal(CT_HANDSHAKE, &[HS_KEY_UPDATE, 0, 0, 1, 0])?;
        self.tx = self.ks.next_tx()?;
        self.update_tx = false;
        Ok(())
    }

    /// Seals up to `send_limit` bytes of `data` into records (after our KeyUpdate if one is due) and returns how
    /// many; 0 while earlier records wait in [`RecordLayer::pending`] (send those first: back-pressure).
    pub fn seal_data(&mut self, data: &[u8]) -> Result<usize, RecordError> {
        if self.closing {
            return Err(RecordError::Closed);
        }
        if !self.pending().is_empty() {
            return Ok(0);
        }
        self.maybe_update_tx()?;
        let take = data.len().min(self.send_limit);
        for piece in data[..take].chunks(MAX_PLAIN) {
            self.seal(CT_APPDATA, piece)?;
        }
        Ok(take)
    }

    /// Seals our close_notify (after a KeyUpdate if one is due); nothing more is sealed after it.
    pub fn close(&mut self) -> Result<(), RecordError> {
        if !self.closing {
            self.maybe_update_tx()?;
            self.seal(CT_ALERT, &[1, 0])?;
            self.closing = true;
        }
        Ok(())
    }

    /// Sealed bytes not yet sent.
    pub fn pending(&self) -> &[u8] {
        &self.out[self.opos..self.oend]
    }

    /// `n` bytes of [`RecordLayer::pending`] were sent.
    pub fn sent(&mut self, n: usize) {
        self.opos = (self.opos + n).min(self.oend);
        if self.opos == self.oend {
            self.opos = 0;
            self.oend = 0;
        }
    }

    /// Bytes this layer holds in its buffers (bounded: a fixed receive buffer and one send batch).
    pub fn buffered(&self) -> usize {
        self.inb.capacity() + self.out.capacity()
    }

    /// The key schedule, for its owner's use (tickets, the peer's identity).
    pub fn key_schedule(&self) -> &K {
        &self.ks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Key generation `g` of one direction, the same at both ends.
    fn key(dir: u8, g: u8) -> Keys {
        Keys::new(Suite::Aes128Gcm, &[dir ^ g; 16], &[g; 12], 0).unwrap()
    }

    /// Hands out the next generation of each direction, like rustls' kernel connection.
    pub(super) struct Gen {
        pub(super) rx_dir: u8,
        pub(super) tx_dir: u8,
        pub(super) rx: u8,
        pub(super) tx: u8,
    }

    impl KeySchedule for Gen {
        fn next_rx(&mut self) -> Result<Keys, RecordError> {
            self.rx += 1;
            Ok(key(self.rx_dir, self.rx))
        }
        fn next_tx(&mut self) -> Result<Keys, RecordError> {
            self.tx += 1;
            Ok(key(self.tx_dir, self.tx))
        }
        fn session_ticket(&mut self, _: &[u8]) -> Result<(), RecordError> {
            Ok(())
        }
    }

    pub(super) fn pair() -> (RecordLayer<Gen>, RecordLayer<Gen>) {
        let end = |me: u8, peer: u8| {
            let ks = Gen {
                rx_dir: peer,
                tx_dir: me,
                rx: 0,
                tx: 0,
            };
            RecordLayer::new(ks, true, key(peer, 0), key(me, 0), &[], &[], 64 << 10)
        };
        (end(1, 2), end(2, 1))
    }

    /// Moves `a`'s sealed bytes into `b` in `piece`-byte steps and reads all plaintext `b` has.
    pub(super) fn pass(
        a: &mut RecordLayer<Gen>,
        b: &mut RecordLayer<Gen>,
        piece: usize,
    ) -> Result<Vec<u8>, RecordError> {
        let wire = a.pending().to_vec();
        a.sent(wire.len());
        let mut got = Vec::new();
        let mut at = 0;
        loop {
            while let Plain::Data(p) = b.plaintext()? {
                got.extend_from_slice(p);
                let n = p.len();
                b.consume(n);
            }
            if at == wire.len() {
                return Ok(got);
            }
            let room = b.recv_buf();
            let n = piece.min(room.len()).min(wire.len() - at);
            room[..n].copy_from_slice(&wire[at..at + n]);
            b.received(n);
            at += n;
        }
    }

    #[test]
    fn data_crosses_in_any_pieces_and_a_key_update_is_answered() {
        let (mut a, mut b) = pair();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7) as u8).collect();
        let mut sent = 0;
        let mut got = Vec::new();
        while sent < data.len() {
            sent += a.seal_data(&data[sent..]).unwrap();
            got.extend(pass(&mut a, &mut b, 1 + sent % 7000).unwrap());
        }
        assert_eq!(got, data);
        // `a` updates its key and asks for `b`'s update: `b` sends its own before its next data.
        let ask = [HS_KEY_UPDATE, 0, 0, 1, 1];
        a.seal(CT_HANDSHAKE, &ask).unwrap();
        a.tx = a.ks.next_tx().unwrap();
        assert_eq!(pass(&mut a, &mut b, 2).unwrap(), b"");
        assert_eq!(a.seal_data(b"x").unwrap(), 1);
        assert_eq!(pass(&mut a, &mut b, 100).unwrap(), b"x");
        assert_eq!(b.ks.rx, 1);
        assert_eq!(b.seal_data(b"y").unwrap(), 1);
        assert_eq!(pass(&mut b, &mut a, 5).unwrap(), b"y");
        assert_eq!((b.ks.tx, a.ks.rx), (1, 1));
        a.close().unwrap();
        assert_eq!(pass(&mut a, &mut b, 3).unwrap(), b"");
        assert_eq!(b.plaintext(), Ok(Plain::Closed));
    }

    #[test]
    fn a_flipped_bit_is_fatal_and_nothing_of_its_record_comes_out() {
        let (mut a, mut b) = pair();
        a.seal_data(&[9u8; 40_000]).unwrap();
        let mut wire = a.pending().to_vec();
        a.sent(wire.len());
        wire[MAX_PLAIN + 40] ^= 1; // inside the second record
        let room = b.recv_buf();
        room[..wire.len()].copy_from_slice(&wire);
        b.received(wire.len());
        let mut got = 0;
        let err = loop {
            match b.plaintext() {
                Ok(Plain::Data(p)) => {
                    let n = p.len();
                    got += n;
                    b.consume(n);
                }
                Ok(other) => panic!("{other:?}"),
                Err(e) => break e,
            }
        };
        assert_eq!(got, MAX_PLAIN);
        assert_eq!(err, RecordError::Authentication);
        assert_eq!(b.plaintext(), Err(RecordError::Authentication));
    }
}
