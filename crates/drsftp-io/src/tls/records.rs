//! TLS data connections on our own record layer ([`Records`]): rustls' unbuffered API runs the handshake
//! (resumption included), then its kernel API (`KernelConnection`, made for kTLS) keeps the key schedule and
//! session tickets while the sans-IO record layer (`drsftp_proto::tls_records`) opens and seals records in place
//! with ring's AEAD; this file moves its bytes to and from the socket.
//!
//! Why: rustls' buffered API copies every received record three times (read-ahead into its 4 KiB-at-a-time
//! deframer, each record's plaintext into a fresh `Vec`, that into the caller's buffer) and makes ~5 passes per
//! record; its unbuffered API (0.23) still copies plaintext into a `Vec` per record. Here one `recv` fills a
//! large buffer and every record in it is opened in place; a stream-mode receiver then writes the plaintext to
//! its file straight from the record slots ([`Records::recv_opened`], [`Records::take_opened`]), other readers
//! get it copied once into their buffer (`AsyncRead`); on send each record is sealed in place in one buffer that
//! goes to the kernel in one write.
//! docs/bench/tls.md has the profile and the numbers. What the record layer enforces is in its own docs; here:
//! a TCP close before the peer's close_notify is an error (`UnexpectedEof`), never a silent end of data.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use drsftp_proto::tls_records::{self as rec, KeySchedule, Keys, Plain, RecordError, RecordLayer};
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::kernel::KernelConnection;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, UnbufferedStatus};
use rustls::{ConnectionTrafficSecrets, HandshakeKind, ProtocolVersion};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// Most plaintext sealed per write: a default MODE E block *with* its 17-byte header, so a block leaves in one
/// write and one batch of records (at exactly one block, every block's last 17 bytes went as a record and a
/// `send` of their own: +3,500 `sendto` per GiB at -p 4, docs/bench/tls.md).
const SEND_LIMIT: usize = crate::data::DEFAULT_BLOCK + rec::MAX_PLAIN;
/// Largest handshake flight we buffer (certificate chains included).
const HANDSHAKE_BUF: usize = 256 << 10;

fn proto_err(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {}", msg.into()))
}

fn tls_err(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

fn rec_err(e: RecordError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// rustls' traffic secrets as the record layer's keys.
fn keys((seq, secrets): (u64, ConnectionTrafficSecrets)) -> Result<Keys, RecordError> {
    let (suite, key, iv) = match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (rec::Suite::Aes128Gcm, key, iv),
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (rec::Suite::Aes256Gcm, key, iv),
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
            (rec::Suite::Chacha20Poly1305, key, iv)
        }
        _ => {
            return Err(RecordError::Malformed(
                "cipher suite without a record layer here",
            ))
        }
    };
    Keys::new(suite, key.as_ref(), iv.as_ref(), seq)
}

fn schedule_err(e: rustls::Error) -> RecordError {
    RecordError::KeySchedule(e.to_string())
}

/// rustls' kernel connection of either role: it derives the next keys on KeyUpdate and stores tickets.
enum Kernel {
    Client(KernelConnection<ClientConnectionData>),
    Server(KernelConnection<ServerConnectionData>),
}

impl KeySchedule for Kernel {
    fn next_rx(&mut self) -> Result<Keys, RecordError> {
        keys(
            match self {
                Kernel::Client(k) => k.update_rx_secret(),
                Kernel::Server(k) => k.update_rx_secret(),
            }
            .map_err(schedule_err)?,
        )
    }

    fn next_tx(&mut self) -> Result<Keys, RecordError> {
        keys(
            match self {
                Kernel::Client(k) => k.update_tx_secret(),
                Kernel::Server(k) => k.update_tx_secret(),
            }
            .map_err(schedule_err)?,
        )
    }

    fn session_ticket(&mut self, msg: &[u8]) -> Result<(), RecordError> {
        let Kernel::Client(k) = self else {
            return Err(RecordError::Malformed("session ticket sent to a server"));
        };
        // A store failure only costs a later resumption.
        if let Err(e) = k.handle_new_session_ticket(msg) {
            tracing::debug!("TLS session ticket not kept: {e}");
        }
        Ok(())
    }
}

/// A TLS connection whose records [`RecordLayer`] opens and seals (see the module docs).
pub struct Records {
    sock: TcpStream,
    layer: RecordLayer<Kernel>,
    /// SHA-256 of the peer's end-entity certificate, taken before rustls gave the connection away.
    peer_fp: Option<[u8; 32]>,
    /// Full or resumed handshake.
    kind: Option<HandshakeKind>,
}

impl std::fmt::Debug for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Records")
            .field("sock", &self.sock)
            .field("rx_seq", &self.layer.rx_seq())
            .finish_non_exhaustive()
    }
}

/// The unbuffered connections of both roles, for one handshake driver and one handoff to the record layer.
trait Unbuffered: Sized {
    type Data;
    /// "client" or "server", for the log line (tests count the client's resumed handshakes in it).
    const ROLE: &'static str;
    fn process<'c, 'i>(&'c mut self, buf: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data>;
    fn handshaking(&self) -> bool;
    fn peer_certificates(&self) -> Option<&[rustls::pki_types::CertificateDer<'static>]>;
    fn handshake_kind(&self) -> Option<HandshakeKind>;
    fn into_kernel(
        self,
    ) -> Result<(rustls::ExtractedSecrets, Kernel, ProtocolVersion), rustls::Error>;
}

impl Unbuffered for UnbufferedClientConnection {
    type Data = ClientConnectionData;
    const ROLE: &'static str = "client";
    fn process<'c, 'i>(&'c mut self, buf: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(buf)
    }
    fn handshaking(&self) -> bool {
        self.is_handshaking()
    }
    fn peer_certificates(&self) -> Option<&[rustls::pki_types::CertificateDer<'static>]> {
        (**self).peer_certificates()
    }
    fn handshake_kind(&self) -> Option<HandshakeKind> {
        (**self).handshake_kind()
    }
    fn into_kernel(
        self,
    ) -> Result<(rustls::ExtractedSecrets, Kernel, ProtocolVersion), rustls::Error> {
        let (s, k) = self.dangerous_into_kernel_connection()?;
        let v = k.protocol_version();
        Ok((s, Kernel::Client(k), v))
    }
}

impl Unbuffered for UnbufferedServerConnection {
    type Data = ServerConnectionData;
    const ROLE: &'static str = "server";
    fn process<'c, 'i>(&'c mut self, buf: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(buf)
    }
    fn handshaking(&self) -> bool {
        self.is_handshaking()
    }
    fn peer_certificates(&self) -> Option<&[rustls::pki_types::CertificateDer<'static>]> {
        (**self).peer_certificates()
    }
    fn handshake_kind(&self) -> Option<HandshakeKind> {
        (**self).handshake_kind()
    }
    fn into_kernel(
        self,
    ) -> Result<(rustls::ExtractedSecrets, Kernel, ProtocolVersion), rustls::Error> {
        let (s, k) = self.dangerous_into_kernel_connection()?;
        let v = k.protocol_version();
        Ok((s, Kernel::Server(k), v))
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
        sock: TcpStream,
    ) -> io::Result<Records> {
        let conn = UnbufferedClientConnection::new(cfg, name).map_err(tls_err)?;
        Records::after_handshake(conn, sock).await
    }

    /// Server handshake, then our record layer.
    pub async fn accept(
        cfg: std::sync::Arc<rustls::ServerConfig>,
        sock: TcpStream,
    ) -> io::Result<Records> {
        let conn = UnbufferedServerConnection::new(cfg).map_err(tls_err)?;
        Records::after_handshake(conn, sock).await
    }

    /// Runs the handshake, then hands the keys to the record layer (the peer's fingerprint and the handshake
    /// kind are taken first: rustls gives the connection away).
    async fn after_handshake<C: Unbuffered>(
        mut conn: C,
        mut sock: TcpStream,
    ) -> io::Result<Records> {
        let mut inb = vec![0u8; 16 << 10];
        let mut filled = 0;
        let early = handshake(&mut conn, &mut sock, &mut inb, &mut filled).await?;
        let peer_fp = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| super::fingerprint(c));
        let kind = conn.handshake_kind();
        let (secrets, kernel, version) = conn.into_kernel().map_err(tls_err)?;
        tracing::debug!(
            "TLS {} handshake: {:?} {kind:?} (data, own record layer)",
            C::ROLE,
            Some(version)
        );
        let tls13 = match version {
            ProtocolVersion::TLSv1_3 => true,
            ProtocolVersion::TLSv1_2 => false,
            v => return Err(proto_err(format!("unsupported version {v:?}"))),
        };
        let rx = keys(secrets.rx).map_err(rec_err)?;
        let tx = keys(secrets.tx).map_err(rec_err)?;
        let layer = RecordLayer::new(kernel, tls13, rx, tx, &early, &inb[..filled], SEND_LIMIT);
        Ok(Records {
            sock,
            layer,
            peer_fp,
            kind,
        })
    }

    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        &self.sock
    }

    /// Records opened under the current receive key (it restarts at 0 with each KeyUpdate).
    #[cfg(test)]
    pub(crate) fn rx_seq(&self) -> u64 {
        self.layer.rx_seq()
    }

    /// Whether the handshake was full or resumed a session.
    pub fn handshake_kind(&self) -> Option<HandshakeKind> {
        self.kind
    }

    /// SHA-256 of the peer's end-entity certificate, if it sent one.
    pub fn peer_fingerprint(&self) -> Option<[u8; 32]> {
        self.peer_fp
    }

    /// Where a block's plaintext goes for [`Records::poll_seal_shaped`].
    pub fn shape(&self) -> rec::RecordShape {
        self.layer.shape()
    }

    /// Sends earlier records first (back-pressure), then seals plaintext bytes `0..plain` of `buf` (laid out by
    /// [`Records::shape`]) in place and starts sending them; returns a buffer for the next block.
    pub fn poll_seal_shaped(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Option<Vec<u8>>,
        plain: usize,
    ) -> Poll<io::Result<Vec<u8>>> {
        ready!(self.poll_drain(cx))?;
        let block = buf
            .take()
            .ok_or_else(|| io::Error::other("shaped block already sealed"))?;
        let spare = self.layer.seal_shaped(block, plain).map_err(|e| match e {
            RecordError::Closed => io::ErrorKind::BrokenPipe.into(),
            e => rec_err(e),
        })?;
        // One attempt now; what the socket does not take goes with the next write or flush.
        if let Poll::Ready(Err(e)) = self.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(spare))
    }

    /// One receive from the socket into the record buffer, then every complete record opened in place and held
    /// there for [`Records::take_opened`]. Returns the bytes received (for DRS and the gauges), 0 once the peer's
    /// close_notify is in; a TCP end before it is `UnexpectedEof` (truncated). Call it only while
    /// [`Records::recv_room`] is at least [`rec::RECORD_ROOM`] or nothing is held.
    pub async fn recv_opened(&mut self) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_recv_opened(cx)).await
    }

    fn poll_recv_opened(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        // Records already received (the handshake's leftovers, or after a take) open before any receive.
        self.layer.open_all().map_err(rec_err)?;
        if self.layer.peer_closed() {
            return Poll::Ready(Ok(0));
        }
        let room = self.layer.recv_buf();
        if room.is_empty() {
            return Poll::Ready(Err(io::Error::other(
                "TLS receive buffer full: take the opened records first",
            )));
        }
        let mut rb = ReadBuf::new(room);
        ready!(Pin::new(&mut self.sock).poll_read(cx, &mut rb))?;
        let n = rb.filled().len();
        if n == 0 {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "TLS peer closed the connection without close_notify (truncated)",
            )));
        }
        self.layer.received(n);
        self.layer.open_all().map_err(rec_err)?;
        Poll::Ready(Ok(n))
    }

    /// Plaintext opened in place and not yet taken.
    pub fn held_len(&self) -> usize {
        self.layer.held_len()
    }

    /// Bytes the record buffer can still receive before the held plaintext must be taken.
    pub fn recv_room(&self) -> usize {
        self.layer.recv_room()
    }

    /// Whether the peer's close_notify arrived.
    pub fn peer_closed(&self) -> bool {
        self.layer.peer_closed()
    }

    /// The record buffer with the plaintext opened in it (where: `ranges`); receiving goes on in `spare`
    /// (`drsftp_proto::tls_records::RecordLayer::take_opened`).
    pub fn take_opened(
        &mut self,
        spare: Vec<u8>,
        ranges: &mut Vec<std::ops::Range<usize>>,
    ) -> Vec<u8> {
        self.layer.take_opened(spare, ranges)
    }

    /// Writes sealed records to the socket until none is left or the socket is full.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.layer.pending().is_empty() {
            let n = ready!(Pin::new(&mut self.sock).poll_write(cx, self.layer.pending()))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.layer.sent(n);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Records {
    /// Fills `buf` with as much plaintext as is at hand, as a cleartext read takes all the socket holds: every
    /// opened record that fits, then one more receive if it does not block. Returning one record (16 KiB) per
    /// read made a TLS receiver loop, sample its gauges and poll the socket 16 times per 256 KiB block.
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let start = buf.filled().len();
        loop {
            loop {
                match me.layer.plaintext().map_err(rec_err)? {
                    Plain::Data(p) => {
                        let n = p.len().min(buf.remaining());
                        buf.put_slice(&p[..n]);
                        me.layer.consume(n);
                        if buf.remaining() == 0 {
                            return Poll::Ready(Ok(()));
                        }
                    }
                    Plain::Closed => return Poll::Ready(Ok(())),
                    Plain::NeedMore => break,
                }
            }
            let copied = buf.filled().len() > start;
            let mut rb = ReadBuf::new(me.layer.recv_buf());
            match Pin::new(&mut me.sock).poll_read(cx, &mut rb) {
                // What is copied is the read's result; an error or the end shows on the next read.
                Poll::Pending | Poll::Ready(Err(_)) if copied => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
            let n = rb.filled().len();
            if n == 0 {
                if copied {
                    return Poll::Ready(Ok(()));
                }
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "TLS peer closed the connection without close_notify (truncated)",
                )));
            }
            me.layer.received(n);
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
        // Earlier records first: this is the back-pressure.
        ready!(me.poll_drain(cx))?;
        let take = me.layer.seal_data(buf).map_err(|e| match e {
            RecordError::Closed => io::ErrorKind::BrokenPipe.into(),
            e => rec_err(e),
        })?;
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
        ready!(me.poll_drain(cx))?;
        me.layer.close().map_err(rec_err)?;
        ready!(me.poll_drain(cx))?;
        Pin::new(&mut me.sock).poll_shutdown(cx)
    }
}
