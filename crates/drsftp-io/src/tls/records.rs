//! TLS data connections with our own record layer ([`Records`]): rustls' unbuffered API runs the handshake
//! (resumption included), then its kernel API (`KernelConnection`, made for kTLS) keeps the key schedule and
//! session tickets while records are opened and sealed in place in this module's buffers with ring's AEAD.
//!
//! Why: rustls' buffered API copies every received record three times (read-ahead into its 4 KiB-at-a-time
//! deframer, each record's plaintext into a fresh `Vec`, that into the caller's buffer) and makes ~5 passes per
//! record; its unbuffered API (0.23) still copies plaintext into a `Vec` per record. Here one `recv` fills a
//! large buffer, every record in it is opened in place, and the plaintext is copied once into the caller's
//! buffer; on send each record is sealed in place in one buffer that goes to the kernel in one write.
//! docs/bench/tls.md has the profile and the numbers.
//!
//! What the record layer enforces, since it faces the peer: record lengths (RFC 8446 §5.2), authentication of
//! every record (a record that fails to open is fatal), only application data, alerts and post-handshake
//! handshake messages (KeyUpdate, NewSessionTicket) after the handshake, and close_notify: a TCP close without it
//! is an error (`UnexpectedEof`), never a silent end of data. TLS 1.3 and 1.2 AEAD suites (AES-GCM,
//! ChaCha20-Poly1305: everything ring's provider offers).

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::kernel::KernelConnection;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, UnbufferedStatus};
use rustls::{ConnectionTrafficSecrets, ProtocolVersion};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// Largest plaintext per record (RFC 8446 §5.1).
const MAX_PLAIN: usize = 1 << 14;
/// Record header: type, version, length.
const HEADER: usize = 5;
/// AEAD tag of every suite we support.
const TAG: usize = 16;
/// TLS 1.2 GCM records carry an 8-byte explicit nonce.
const EXPLICIT: usize = 8;
/// Largest ciphertext a peer may send in one record: plaintext, the TLS 1.3 content type, and up to 255 bytes
/// of padding and tag (RFC 8446 §5.2: 2^14 + 256), which also covers TLS 1.2's 2^14 + 2048 for AEAD suites in
/// practice (tag and explicit nonce).
const MAX_CIPHER: usize = MAX_PLAIN + 256;
/// Receive buffer: one `recv` of up to this much feeds many records (a cleartext reader takes 256 KiB chunks).
const RECV_BUF: usize = 256 << 10;
/// Most sealed bytes accepted before the socket takes them: one default MODE E block plus record overhead, so a
/// block leaves in one write.
const SEND_LIMIT: usize = crate::data::DEFAULT_BLOCK;
/// Largest handshake flight we buffer (certificate chains included).
const HANDSHAKE_BUF: usize = 256 << 10;
/// Records sent under one TLS 1.3 key before we update it ourselves: far below AES-GCM's confidentiality limit
/// (2^24.5 records, RFC 8446 §5.5), ~128 GiB at full records.
const TX_KEY_RECORDS: u64 = 1 << 23;
/// Records a TLS 1.2 connection may seal under its one key (AES-GCM's limit, as rustls applies it).
const TLS12_RECORDS: u64 = 1 << 24;

const CT_ALERT: u8 = 21;
const CT_HANDSHAKE: u8 = 22;
const CT_APPDATA: u8 = 23;
const HS_NEW_SESSION_TICKET: u8 = 4;
const HS_KEY_UPDATE: u8 = 24;

fn proto_err(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {}", msg.into()))
}

fn tls_err(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// One direction's AEAD key, nonce base and record sequence number.
struct Keys {
    key: LessSafeKey,
    iv: [u8; 12],
    seq: u64,
}

impl Keys {
    fn new((seq, secrets): (u64, ConnectionTrafficSecrets)) -> io::Result<Keys> {
        let (alg, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (&aead::CHACHA20_POLY1305, key, iv)
            }
            _ => return Err(proto_err("cipher suite without a record layer here")),
        };
        let key = UnboundKey::new(alg, key.as_ref()).map_err(|_| proto_err("bad traffic key"))?;
        let iv: [u8; 12] = iv
            .as_ref()
            .try_into()
            .map_err(|_| proto_err("bad traffic IV"))?;
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

/// rustls' kernel connection of either role: it derives the next keys on KeyUpdate and stores tickets.
enum Kernel {
    Client(KernelConnection<ClientConnectionData>),
    Server(KernelConnection<ServerConnectionData>),
}

impl Kernel {
    fn update_rx(&mut self) -> Result<(u64, ConnectionTrafficSecrets), rustls::Error> {
        match self {
            Kernel::Client(k) => k.update_rx_secret(),
            Kernel::Server(k) => k.update_rx_secret(),
        }
    }

    fn update_tx(&mut self) -> Result<(u64, ConnectionTrafficSecrets), rustls::Error> {
        match self {
            Kernel::Client(k) => k.update_tx_secret(),
            Kernel::Server(k) => k.update_tx_secret(),
        }
    }
}

/// A TLS connection whose records this module opens and seals (see the module docs).
pub struct Records {
    sock: TcpStream,
    kernel: Kernel,
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
    /// Sealed records not yet written: `out[opos..]`.
    out: Vec<u8>,
    opos: usize,
    /// The peer's close_notify arrived: reads end (0).
    peer_closed: bool,
    /// Our close_notify is sealed into `out`.
    closing: bool,
    /// The peer asked for a KeyUpdate (RFC 8446 §4.6.3): ours goes out before our next record.
    update_tx: bool,
    /// SHA-256 of the peer's end-entity certificate, taken before rustls gave the connection away.
    peer_fp: Option<[u8; 32]>,
    /// Full or resumed handshake.
    kind: Option<rustls::HandshakeKind>,
    /// A fatal error, repeated to every later read (the stream is never resumed after a bad record).
    failed: Option<(io::ErrorKind, String)>,
}

impl std::fmt::Debug for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Records")
            .field("sock", &self.sock)
            .field("tls13", &self.tls13)
            .field("rx_seq", &self.rx.seq)
            .field("tx_seq", &self.tx.seq)
            .finish_non_exhaustive()
    }
}

/// The unbuffered connections of both roles, for one handshake driver.
trait Unbuffered {
    type Data;
    fn process<'c, 'i>(&'c mut self, buf: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data>;
    fn handshaking(&self) -> bool;
}

impl Unbuffered for UnbufferedClientConnection {
    type Data = ClientConnectionData;
    fn process<'c, 'i>(&'c mut self, buf: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(buf)
    }
    fn handshaking(&self) -> bool {
        self.is_handshaking()
    }
}

impl Unbuffered for UnbufferedServerConnection {
    type Data = ServerConnectionData;
    fn process<'c, 'i>(&'c mut self, buf: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(buf)
    }
    fn handshaking(&self) -> bool {
        self.is_handshaking()
    }
}

/// Runs a handshake to its end. Returns what is left in `inb[..filled]` (records under the traffic keys, not yet
/// opened) via `filled`, and any application data rustls already opened.
async fn handshake<C: Unbuffered>(
    conn: &mut C,
    sock: &mut TcpStream,
    inb: &mut Vec<u8>,
    filled: &mut usize,
) -> io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut out: Vec<u8> = Vec::new();
    let mut early = Vec::new();
    loop {
        let st = conn.process(&mut inb[..*filled]);
        let discard = st.discard;
        let mut need_read = false;
        let mut done = false;
        match st.state.map_err(tls_err)? {
            ConnectionState::EncodeTlsData(mut e) => {
                let at = out.len();
                out.resize(at + 4096, 0);
                let n = match e.encode(&mut out[at..]) {
                    Ok(n) => n,
                    Err(EncodeError::InsufficientSize(s)) if s.required_size <= HANDSHAKE_BUF => {
                        out.resize(at + s.required_size, 0);
                        e.encode(&mut out[at..])
                            .map_err(|e| proto_err(e.to_string()))?
                    }
                    Err(other) => return Err(proto_err(other.to_string())),
                };
                out.truncate(at + n);
            }
            ConnectionState::TransmitTlsData(t) => {
                sock.write_all(&out).await?;
                out.clear();
                t.done();
            }
            ConnectionState::BlockedHandshake => need_read = true,
            ConnectionState::WriteTraffic(_) => {
                if conn.handshaking() {
                    // A TLS 1.3 server may send before the client's Finished; we wait for it.
                    need_read = true;
                } else {
                    done = true;
                }
            }
            ConnectionState::ReadTraffic(mut r) => {
                while let Some(rec) = r.next_record() {
                    early.extend_from_slice(rec.map_err(tls_err)?.payload);
                }
            }
            ConnectionState::PeerClosed | ConnectionState::Closed => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "TLS peer closed during the handshake",
                ))
            }
            other => return Err(proto_err(format!("unexpected state {other:?}"))),
        }
        inb.copy_within(discard..*filled, 0);
        *filled -= discard;
        if done {
            return Ok(early);
        }
        if need_read {
            if *filled == inb.len() {
                if inb.len() >= HANDSHAKE_BUF {
                    return Err(proto_err("handshake flight too large"));
                }
                inb.resize((inb.len() * 2).min(HANDSHAKE_BUF), 0);
            }
            let n = sock.read(&mut inb[*filled..]).await?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "TLS peer closed during the handshake",
                ));
            }
            *filled += n;
        }
    }
}

impl Records {
    /// Client handshake (resuming from `cfg`'s ticket store when it can), then our record layer.
    pub async fn connect(
        cfg: std::sync::Arc<rustls::ClientConfig>,
        name: rustls::pki_types::ServerName<'static>,
        mut sock: TcpStream,
    ) -> io::Result<Records> {
        let mut conn = UnbufferedClientConnection::new(cfg, name).map_err(tls_err)?;
        let mut inb = vec![0u8; 16 << 10];
        let mut filled = 0;
        let early = handshake(&mut conn, &mut sock, &mut inb, &mut filled).await?;
        tracing::debug!(
            "TLS client handshake: {:?} {:?} {:?} (data, own record layer)",
            conn.protocol_version(),
            conn.handshake_kind(),
            conn.negotiated_cipher_suite().map(|c| c.suite())
        );
        let fp = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| super::fingerprint(c));
        let kind = conn.handshake_kind();
        let (secrets, kernel) = conn.dangerous_into_kernel_connection().map_err(tls_err)?;
        let v = kernel.protocol_version();
        let r = Records::new(sock, Kernel::Client(kernel), v, secrets, inb, filled, early)?;
        Ok(Records {
            peer_fp: fp,
            kind,
            ..r
        })
    }

    /// Server handshake, then our record layer.
    pub async fn accept(
        cfg: std::sync::Arc<rustls::ServerConfig>,
        mut sock: TcpStream,
    ) -> io::Result<Records> {
        let mut conn = UnbufferedServerConnection::new(cfg).map_err(tls_err)?;
        let mut inb = vec![0u8; 16 << 10];
        let mut filled = 0;
        let early = handshake(&mut conn, &mut sock, &mut inb, &mut filled).await?;
        let fp = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| super::fingerprint(c));
        let kind = conn.handshake_kind();
        let (secrets, kernel) = conn.dangerous_into_kernel_connection().map_err(tls_err)?;
        let v = kernel.protocol_version();
        let r = Records::new(sock, Kernel::Server(kernel), v, secrets, inb, filled, early)?;
        Ok(Records {
            peer_fp: fp,
            kind,
            ..r
        })
    }

    fn new(
        sock: TcpStream,
        kernel: Kernel,
        version: ProtocolVersion,
        secrets: rustls::ExtractedSecrets,
        mut rest: Vec<u8>,
        filled: usize,
        early: Vec<u8>,
    ) -> io::Result<Records> {
        let tls13 = match version {
            ProtocolVersion::TLSv1_3 => true,
            ProtocolVersion::TLSv1_2 => false,
            v => return Err(proto_err(format!("unsupported version {v:?}"))),
        };
        // Plaintext rustls opened during the handshake goes first, then the unopened records.
        let mut inb = early;
        let pend = inb.len();
        rest.truncate(filled);
        inb.extend_from_slice(&rest);
        let rend = inb.len();
        inb.resize(rend.max(RECV_BUF + HEADER + MAX_CIPHER), 0);
        Ok(Records {
            sock,
            kernel,
            tls13,
            rx: Keys::new(secrets.rx)?,
            tx: Keys::new(secrets.tx)?,
            inb,
            rpos: pend,
            rend,
            ppos: 0,
            pend,
            out: Vec::with_capacity(SEND_LIMIT + SEND_LIMIT / MAX_PLAIN * 64 + 1024),
            opos: 0,
            peer_closed: false,
            closing: false,
            update_tx: false,
            peer_fp: None,
            kind: None,
            failed: None,
        })
    }

    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        &self.sock
    }

    /// Records opened under the current receive key (it restarts at 0 with each KeyUpdate).
    #[cfg(test)]
    pub(crate) fn rx_seq(&self) -> u64 {
        self.rx.seq
    }

    /// Whether the handshake was full or resumed a session.
    pub fn handshake_kind(&self) -> Option<rustls::HandshakeKind> {
        self.kind
    }

    /// SHA-256 of the peer's end-entity certificate, if it sent one.
    pub fn peer_fingerprint(&self) -> Option<[u8; 32]> {
        self.peer_fp
    }

    /// Opens the record at `inb[rpos..]` if it is all there: `Ok(false)` if more bytes are needed.
    fn open_one(&mut self) -> io::Result<bool> {
        let avail = self.rend - self.rpos;
        if avail < HEADER {
            return Ok(false);
        }
        let h = &self.inb[self.rpos..self.rpos + HEADER];
        let (typ, len) = (h[0], u16::from_be_bytes([h[3], h[4]]) as usize);
        if h[1] != 3 {
            return Err(proto_err("bad record version"));
        }
        if len > MAX_CIPHER + 2048 || (self.tls13 && len > MAX_CIPHER) {
            return Err(proto_err(format!("record of {len} bytes is too long")));
        }
        if avail < HEADER + len {
            return Ok(false);
        }
        let start = self.rpos;
        self.rpos += HEADER + len;
        let (typ, body) = if self.tls13 {
            if typ != CT_APPDATA {
                return Err(proto_err(format!("unexpected record type {typ}")));
            }
            let header: [u8; HEADER] = self.inb[start..start + HEADER].try_into().expect("5");
            let nonce = Nonce::assume_unique_for_key(self.rx.nonce());
            let rec = &mut self.inb[start + HEADER..start + HEADER + len];
            let plain = self
                .rx
                .key
                .open_in_place(nonce, Aad::from(header), rec)
                .map_err(|_| proto_err("record failed authentication"))?;
            // Inner plaintext: content, content type, zero padding (RFC 8446 §5.2).
            let Some(end) = plain.iter().rposition(|b| *b != 0) else {
                return Err(proto_err("record without a content type"));
            };
            if end > MAX_PLAIN {
                return Err(proto_err("record plaintext too long"));
            }
            (plain[end], start + HEADER..start + HEADER + end)
        } else {
            let explicit = if self.rx.is_gcm() { EXPLICIT } else { 0 };
            if len < explicit + TAG {
                return Err(proto_err("record too short"));
            }
            let plen = len - explicit - TAG;
            if plen > MAX_PLAIN {
                return Err(proto_err("record plaintext too long"));
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
                .map_err(|_| proto_err("record failed authentication"))?;
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
                    return Err(proto_err("malformed alert"));
                }
                if a[1] == 0 {
                    self.peer_closed = true;
                } else if !(a[0] == 1 && a[1] == 90 && !self.tls13) {
                    // Anything but close_notify (and TLS 1.2's user_canceled warning) ends the connection.
                    return Err(proto_err(format!("peer sent alert {}", a[1])));
                }
            }
            CT_HANDSHAKE => self.post_handshake(body)?,
            t => return Err(proto_err(format!("unexpected record type {t}"))),
        }
        Ok(true)
    }

    /// KeyUpdate and NewSessionTicket (TLS 1.3); messages split over records are refused (no peer we know of
    /// splits these small messages, and refusing bounds what we buffer).
    fn post_handshake(&mut self, body: std::ops::Range<usize>) -> io::Result<()> {
        if !self.tls13 {
            return Err(proto_err("renegotiation is not supported"));
        }
        let mut at = body.start;
        while at < body.end {
            if body.end - at < 4 {
                return Err(proto_err("truncated handshake message"));
            }
            let h = &self.inb[at..at + 4];
            let (typ, len) = (h[0], u32::from_be_bytes([0, h[1], h[2], h[3]]) as usize);
            let (m0, m1) = (at + 4, at + 4 + len);
            if m1 > body.end {
                return Err(proto_err("handshake message split over records"));
            }
            match typ {
                HS_KEY_UPDATE => {
                    let req = match self.inb[m0..m1] {
                        [0] => false,
                        [1] => true,
                        _ => return Err(proto_err("malformed KeyUpdate")),
                    };
                    // A KeyUpdate must end its record (RFC 8446 §5.1: key changes align with records).
                    if m1 != body.end {
                        return Err(proto_err("data after KeyUpdate in one record"));
                    }
                    self.rx = Keys::new(self.kernel.update_rx().map_err(tls_err)?)?;
                    self.update_tx |= req;
                }
                HS_NEW_SESSION_TICKET => {
                    let Kernel::Client(k) = &mut self.kernel else {
                        return Err(proto_err("session ticket sent to a server"));
                    };
                    // A store failure only costs a later resumption.
                    if let Err(e) = k.handle_new_session_ticket(&self.inb[m0..m1]) {
                        tracing::debug!("TLS session ticket not kept: {e}");
                    }
                }
                t => return Err(proto_err(format!("unexpected handshake message {t}"))),
            }
            at = m1;
        }
        Ok(())
    }

    /// Seals one record of `typ` with `data` at the end of `out`.
    fn seal(&mut self, typ: u8, data: &[u8]) -> io::Result<()> {
        if !self.tls13 && self.tx.seq >= TLS12_RECORDS {
            // TLS 1.2 has no KeyUpdate: the connection ends before its key is used past the safe limit.
            return Err(proto_err(
                "TLS 1.2 connection reached its key's record limit",
            ));
        }
        let at = self.out.len();
        let nonce = self.tx.nonce();
        if self.tls13 {
            let len = data.len() + 1 + TAG;
            self.out
                .extend_from_slice(&[CT_APPDATA, 3, 3, (len >> 8) as u8, len as u8]);
            self.out.extend_from_slice(data);
            self.out.push(typ);
            let header: [u8; HEADER] = self.out[at..at + HEADER].try_into().expect("5");
            let tag = self
                .tx
                .key
                .seal_in_place_separate_tag(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from(header),
                    &mut self.out[at + HEADER..],
                )
                .map_err(|_| proto_err("seal failed"))?;
            self.out.extend_from_slice(tag.as_ref());
        } else {
            let explicit = if self.tx.is_gcm() { EXPLICIT } else { 0 };
            let len = explicit + data.len() + TAG;
            self.out
                .extend_from_slice(&[typ, 3, 3, (len >> 8) as u8, len as u8]);
            self.out.extend_from_slice(&nonce[12 - explicit..]);
            self.out.extend_from_slice(data);
            let mut aad = [0u8; 13];
            aad[..8].copy_from_slice(&self.tx.seq.to_be_bytes());
            aad[8..11].copy_from_slice(&[typ, 3, 3]);
            aad[11..].copy_from_slice(&(data.len() as u16).to_be_bytes());
            let tag = self
                .tx
                .key
                .seal_in_place_separate_tag(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from(aad),
                    &mut self.out[at + HEADER + explicit..],
                )
                .map_err(|_| proto_err("seal failed"))?;
            self.out.extend_from_slice(tag.as_ref());
        }
        self.tx.seq += 1;
        Ok(())
    }

    /// Our KeyUpdate (when the peer asked, or our key has sealed [`TX_KEY_RECORDS`]), then the new send key.
    fn maybe_update_tx(&mut self) -> io::Result<()> {
        if !self.tls13 || !(self.update_tx || self.tx.seq >= TX_KEY_RECORDS) {
            return Ok(());
        }
        self.seal(CT_HANDSHAKE, &[HS_KEY_UPDATE, 0, 0, 1, 0])?;
        self.tx = Keys::new(self.kernel.update_tx().map_err(tls_err)?)?;
        self.update_tx = false;
        Ok(())
    }

    /// Writes `out` to the socket until it is empty or the socket is full.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.opos < self.out.len() {
            let n = ready!(Pin::new(&mut self.sock).poll_write(cx, &self.out[self.opos..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.opos += n;
        }
        self.out.clear();
        self.opos = 0;
        Poll::Ready(Ok(()))
    }

    fn fail(&mut self, e: io::Error) -> io::Error {
        self.failed = Some((e.kind(), e.to_string()));
        e
    }
}

impl AsyncRead for Records {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        loop {
            if me.ppos < me.pend {
                let n = (me.pend - me.ppos).min(buf.remaining());
                buf.put_slice(&me.inb[me.ppos..me.ppos + n]);
                me.ppos += n;
                return Poll::Ready(Ok(()));
            }
            if let Some((k, m)) = &me.failed {
                return Poll::Ready(Err(io::Error::new(*k, m.clone())));
            }
            if me.peer_closed {
                return Poll::Ready(Ok(()));
            }
            match me.open_one() {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => return Poll::Ready(Err(me.fail(e))),
            }
            // Need more: move the partial record to the front when the rest of the buffer cannot take a record.
            if me.inb.len() - me.rend < HEADER + MAX_CIPHER {
                me.inb.copy_within(me.rpos..me.rend, 0);
                me.rend -= me.rpos;
                me.rpos = 0;
            }
            let mut rb = ReadBuf::new(&mut me.inb[me.rend..]);
            ready!(Pin::new(&mut me.sock).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            if n == 0 {
                let e = io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "TLS peer closed the connection without close_notify (truncated)",
                );
                return Poll::Ready(Err(me.fail(e)));
            }
            me.rend += n;
        }
    }
}

impl AsyncWrite for Records {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if me.closing {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        // Earlier records first: this is the back-pressure.
        ready!(me.poll_drain(cx))?;
        me.maybe_update_tx()?;
        let take = buf.len().min(SEND_LIMIT);
        for piece in buf[..take].chunks(MAX_PLAIN) {
            me.seal(CT_APPDATA, piece)?;
        }
        // One attempt now; what the socket does not take goes with the next write or flush.
        if let Poll::Ready(Err(e)) = me.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(take))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_drain(cx))?;
        Pin::new(&mut me.sock).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if !me.closing {
            ready!(me.poll_drain(cx))?;
            me.maybe_update_tx()?;
            me.seal(CT_ALERT, &[1, 0])?;
            me.closing = true;
        }
        ready!(me.poll_drain(cx))?;
        Pin::new(&mut me.sock).poll_shutdown(cx)
    }
}
