//! Fuzz target: the TLS record layer of data connections (`drsftp_proto::tls_records`) receiving a hostile peer's
//! bytes after the handshake. The peer's records are built from the input, sealed with the real keys (so they
//! reach the content-type, alert and KeyUpdate/NewSessionTicket handling past authentication) or left as raw,
//! corrupted or forged bytes, and arrive in input-chosen pieces. Checks: no panic; the receive buffer never grows
//! and always has room while the layer needs bytes; the plaintext that comes out is a prefix of the application
//! data the peer really sealed (nothing forged, reordered or replayed gets through); after an error every later
//! call returns the same error; sending afterwards stays bounded. Input-chosen: the reader takes plaintext by
//! copying it out (`plaintext`/`consume`) or where it was opened (`open_all`/`take_opened`, as stream-mode
//! receivers do), with the same checks.
#![no_main]

use arbitrary::Arbitrary;
use drsftp_proto::tls_records::{
    seal_record, KeySchedule, Keys, Plain, RecordError, RecordLayer, Suite, CT_ALERT, CT_APPDATA,
    CT_HANDSHAKE, HS_KEY_UPDATE, HS_NEW_SESSION_TICKET, RECORD_ROOM, RECV_BUF,
};
use libfuzzer_sys::fuzz_target;

const SEND_LIMIT: usize = 256 << 10;

#[derive(Arbitrary, Debug)]
enum Op {
    /// Application data, sealed.
    Data(Vec<u8>),
    /// A sealed record of any inner type, content and padding.
    Record { typ: u8, body: Vec<u8>, pad: u8 },
    /// A sealed KeyUpdate (requesting ours or not); the peer's later records use its next key.
    KeyUpdate(bool),
    /// A sealed NewSessionTicket with this body.
    Ticket(Vec<u8>),
    /// A sealed alert.
    Alert(u8, u8),
    /// A sealed record claiming `len` but cut short or followed by the rest of the stream.
    Header { typ: u8, version: u16, len: u16 },
    /// Raw bytes in the stream.
    Raw(Vec<u8>),
    /// Flip bits of one byte already in the stream.
    Corrupt { at: u32, xor: u8 },
    /// A sealed record replayed (its bytes sent again).
    Replay,
}

#[derive(Arbitrary, Debug)]
struct Input {
    tls12: bool,
    suite: u8,
    ops: Vec<Op>,
    /// Sizes of the pieces the stream arrives in (cycled; 0 counts as 1).
    pieces: Vec<u16>,
    /// Bytes the reader takes per call (0 counts as 1).
    take: u16,
    /// Take plaintext where it was opened (`open_all`/`take_opened`) instead of copying it out.
    in_place: bool,
}

/// Takes the plaintext held in `layer`'s buffer (in place), appending it to `got`.
fn take_held(
    layer: &mut RecordLayer<Schedule>,
    spare: &mut Vec<u8>,
    ranges: &mut Vec<std::ops::Range<usize>>,
    got: &mut Vec<u8>,
) {
    let held = layer.held_len();
    assert!(held <= RECV_BUF + RECORD_ROOM, "{held} bytes held");
    let buf = layer.take_opened(std::mem::take(spare), ranges);
    for r in ranges.iter() {
        assert!(!r.is_empty());
        got.extend_from_slice(&buf[r.clone()]);
    }
    *spare = buf;
    assert_eq!(layer.held_len(), 0);
}

fn suite(s: u8) -> (Suite, usize) {
    match s % 3 {
        0 => (Suite::Aes128Gcm, 16),
        1 => (Suite::Aes256Gcm, 32),
        _ => (Suite::Chacha20Poly1305, 32),
    }
}

/// Key generation `g` of one direction: fixed bytes, so both ends derive the same.
fn key(s: Suite, len: usize, dir: u8, g: u8) -> Keys {
    Keys::new(s, &vec![dir ^ g; len], &[g; 12], 0).unwrap()
}

/// The peer's (rx) and our (tx) key generations, as rustls' kernel connection would hand them out.
struct Schedule {
    suite: Suite,
    len: usize,
    rx: u8,
    tx: u8,
    tickets: usize,
}

impl KeySchedule for Schedule {
    fn next_rx(&mut self) -> Result<Keys, RecordError> {
        self.rx = self.rx.wrapping_add(1);
        Ok(key(self.suite, self.len, 0xa5, self.rx))
    }
    fn next_tx(&mut self) -> Result<Keys, RecordError> {
        self.tx = self.tx.wrapping_add(1);
        Ok(key(self.suite, self.len, 0x5a, self.tx))
    }
    fn session_ticket(&mut self, _msg: &[u8]) -> Result<(), RecordError> {
        self.tickets += 1;
        Ok(())
    }
}

fuzz_target!(|input: Input| {
    let tls13 = !input.tls12;
    let (s, len) = suite(input.suite);
    // The peer: builds the stream and remembers what application data it sealed.
    let mut gen = 0u8;
    let mut peer = key(s, len, 0xa5, gen);
    let mut wire: Vec<u8> = Vec::new();
    let mut sealed = Vec::new();
    let mut last: Option<std::ops::Range<usize>> = None;
    for op in &input.ops {
        if wire.len() > 4 << 20 {
            break;
        }
        let at = wire.len();
        // Records past the size a peer could encode are left out of the stream.
        let mut seal = |wire: &mut Vec<u8>, typ: u8, body: &[u8], pad: usize| {
            seal_record(wire, &mut peer, tls13, typ, body, pad).is_ok()
        };
        match op {
            Op::Data(d) => {
                let d = &d[..d.len().min(1 << 14)];
                if seal(&mut wire, CT_APPDATA, d, 0) {
                    sealed.extend_from_slice(d);
                }
            }
            Op::Record { typ, body, pad } => {
                if seal(&mut wire, *typ, body, *pad as usize) {
                    // Under TLS 1.3 an inner type 0 reads as padding: the content type is then the last
                    // non-zero byte of the body (RFC 8446 §5.4), as a hostile peer may arrange.
                    let data = match (tls13, *typ) {
                        (true, 0) => match body.iter().rposition(|b| *b != 0) {
                            Some(i) if body[i] == CT_APPDATA => &body[..i],
                            _ => &[][..],
                        },
                        (_, CT_APPDATA) => &body[..],
                        _ => &[][..],
                    };
                    sealed.extend_from_slice(data);
                }
            }
            Op::KeyUpdate(req) => {
                let _ = seal(
                    &mut wire,
                    CT_HANDSHAKE,
                    &[HS_KEY_UPDATE, 0, 0, 1, *req as u8],
                    0,
                );
                gen = gen.wrapping_add(1);
                peer = key(s, len, 0xa5, gen);
            }
            Op::Ticket(t) => {
                let t = &t[..t.len().min(4096)];
                let mut m = vec![
                    HS_NEW_SESSION_TICKET,
                    0,
                    (t.len() >> 8) as u8,
                    t.len() as u8,
                ];
                m.extend_from_slice(t);
                let _ = seal(&mut wire, CT_HANDSHAKE, &m, 0);
            }
            Op::Alert(level, desc) => {
                let _ = seal(&mut wire, CT_ALERT, &[*level, *desc], 0);
            }
            Op::Header { typ, version, len } => {
                wire.extend_from_slice(&[*typ]);
                wire.extend_from_slice(&version.to_be_bytes());
                wire.extend_from_slice(&len.to_be_bytes());
            }
            Op::Raw(r) => wire.extend_from_slice(r),
            Op::Corrupt { at, xor } => {
                if !wire.is_empty() {
                    let i = *at as usize % wire.len();
                    wire[i] ^= xor;
                }
            }
            Op::Replay => {
                if let Some(r) = last.clone() {
                    wire.extend_from_within(r);
                }
            }
        }
        last = Some(at..wire.len());
    }

    let ks = Schedule {
        suite: s,
        len,
        rx: 0,
        tx: 0,
        tickets: 0,
    };
    let mut layer = RecordLayer::new(
        ks,
        tls13,
        key(s, len, 0xa5, 0),
        key(s, len, 0x5a, 0),
        &[],
        &[],
        SEND_LIMIT,
    );
    let bound = layer.buffered();
    let take = (input.take as usize).max(1);
    let mut got = Vec::new();
    let mut err: Option<RecordError> = None;
    let mut pos = 0;
    let mut piece = 0;
    let (mut spare, mut ranges) = (Vec::new(), Vec::new());
    'feed: loop {
        if input.in_place {
            let r = layer.open_all();
            if r.is_err() || layer.peer_closed() || layer.recv_room() < RECORD_ROOM {
                take_held(&mut layer, &mut spare, &mut ranges, &mut got);
            }
            if let Err(e) = r {
                err = Some(e);
                break 'feed;
            }
            if layer.peer_closed() {
                break 'feed;
            }
        }
        // Drain what is open (nothing, in place: `open_all` held it).
        while !input.in_place {
            match layer.plaintext() {
                Ok(Plain::Data(p)) => {
                    assert!(!p.is_empty());
                    let n = p.len().min(take);
                    got.extend_from_slice(&p[..n]);
                    layer.consume(n);
                }
                Ok(Plain::Closed) => break 'feed,
                Ok(Plain::NeedMore) => break,
                Err(e) => {
                    err = Some(e);
                    break 'feed;
                }
            }
        }
        if pos == wire.len() {
            break;
        }
        let want = input
            .pieces
            .get(piece % input.pieces.len().max(1))
            .map_or(wire.len(), |&n| (n as usize).max(1));
        piece += 1;
        let room = layer.recv_buf();
        assert!(
            !room.is_empty(),
            "receive buffer full while a record is incomplete"
        );
        let n = want.min(room.len()).min(wire.len() - pos);
        room[..n].copy_from_slice(&wire[pos..pos + n]);
        layer.received(n);
        pos += n;
        if !input.in_place {
            // In place, the buffer is swapped with the reader's spare one of the same length.
            assert_eq!(layer.buffered(), bound, "receive buffer grew");
        }
    }
    if input.in_place {
        take_held(&mut layer, &mut spare, &mut ranges, &mut got);
    }
    assert!(
        sealed.starts_with(&got),
        "plaintext out that the peer did not seal in this order"
    );
    if let Some(e) = err {
        // Fatal: repeated, never resumed.
        assert_eq!(layer.plaintext(), Err(e));
    }
    // Sending stays bounded whatever the peer asked for (a KeyUpdate request seals ours first).
    let block = vec![7u8; SEND_LIMIT + 100];
    match layer.seal_data(&block) {
        Ok(n) => assert!(n <= SEND_LIMIT),
        Err(_) => {}
    }
    assert!(layer.pending().len() <= SEND_LIMIT + 2048 + 64 * (SEND_LIMIT >> 14));
    let n = layer.pending().len();
    layer.sent(n);
    let _ = layer.close();
    assert!(layer.seal_data(b"after close").is_err());
});
