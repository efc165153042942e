//! Explicit FTPS (RFC 4217) with rustls (ring provider): loading the server's PEM certificate and key, the
//! client's trust (system roots from webpki-roots, a `--cacert` PEM, or a pinned SHA-256 fingerprint), and
//! [`MaybeTls`], the one stream type the control pumps and the data engine (stream mode, MODE E) use, so TLS
//! stays in this crate while the sans-IO cores only say *when* to switch (`Action::StartTls`, `TransferPlan::protect`).
//!
//! On every data connection the server is the TLS server and the client the TLS client, whichever side opened
//! the TCP connection (RFC 4217 §7): that way the certificate the client checked on the control channel is the
//! one it checks again, and the server's session cache lets the client resume the control channel's session
//! (clients such as curl and lftp rely on that, and vsftpd's `require_ssl_reuse` demands it).

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

mod records;
#[cfg(test)]
pub(crate) mod records_tests;
pub use records::Records;

/// TLS set-up errors (bad PEM files, an unusable fingerprint, a server name rustls cannot check).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("{path}: {msg}")]
    Pem {
        /// The file.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    /// `--tls-fingerprint` is not 32 hex bytes.
    #[error("TLS fingerprint must be 64 hex digits (SHA-256, colons allowed): {0}")]
    Fingerprint(String),
}

/// ring's suites with AES-128-GCM first (ring lists AES-256-GCM first): with AES-NI both run in hardware, but
/// AES-128 does 10 rounds per block instead of 14, and bulk transfers spend most of their TLS time in the cipher.
/// Order within each rank is ring's (TLS 1.3 before 1.2, ECDSA before RSA).
fn provider() -> Arc<CryptoProvider> {
    use rustls::CipherSuite as S;
    let mut p = ring::default_provider();
    p.cipher_suites.sort_by_key(|s| match s.suite() {
        S::TLS13_AES_128_GCM_SHA256
        | S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 0,
        S::TLS13_AES_256_GCM_SHA384
        | S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        | S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => 1,
        _ => 2,
    });
    Arc::new(p)
}

/// Read-ahead under rustls. rustls reads at most one record's worth per `read_tls`, so without it a TLS receiver
/// makes one `recv` per record, many times the syscalls of a cleartext receiver reading whole chunks
/// (docs/bench/tls.md has the counts). One `recv` of up to this many bytes feeds several records.
const READ_AHEAD: usize = 128 << 10;

/// Most encrypted bytes rustls holds before the socket takes them (rustls' default is 64 KiB): one default
/// MODE E block (256 KiB) plus its record overhead, so a block is sealed and passed to the kernel in one
/// `writev` instead of four.
const SEND_LIMIT: usize = crate::data::DEFAULT_BLOCK + (32 << 10);

/// The TCP connection under a TLS session: the socket with [`READ_AHEAD`] (writes go straight through).
pub type Wire = tokio::io::BufReader<TcpStream>;

fn wire(sock: TcpStream) -> Wire {
    tokio::io::BufReader::with_capacity(READ_AHEAD, sock)
}

fn read_pem(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::Pem {
        path: path.display().to_string(),
        msg: e.to_string(),
    })
}

fn certs_of(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read_pem(path)?;
    let certs: Result<Vec<_>, _> = rustls_pemfile::certs(&mut pem.as_slice()).collect();
    let certs = certs.map_err(|e| TlsError::Pem {
        path: path.display().to_string(),
        msg: e.to_string(),
    })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            path: path.display().to_string(),
            msg: "no CERTIFICATE block".into(),
        });
    }
    Ok(certs)
}

/// The server's TLS configuration from a certificate chain and a private key (PEM). Resumption is on both ways
/// (a stateful session cache and stateless tickets) so data connections can resume the control session.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs = certs_of(cert)?;
    let pem = read_pem(key)?;
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| TlsError::Pem {
            path: key.display().to_string(),
            msg: e.to_string(),
        })?
        .ok_or_else(|| TlsError::Pem {
            path: key.display().to_string(),
            msg: "no PRIVATE KEY block".into(),
        })?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    // Our suite order (AES-128-GCM first), not the client's: OpenSSL-based clients (curl, lftp, Globus) list
    // AES-256-GCM first.
    cfg.ignore_client_order = true;
    cfg.session_storage = rustls::server::ServerSessionMemoryCache::new(1024);
    cfg.ticketer = ring::Ticketer::new()?;
    // A TLS 1.3 ticket resumes one connection (rustls clients take each once), and a client keeps at most 8 per
    // server: 8 on the control connection let a `-p 8` MODE E transfer resume on every stream. Streams beyond
    // that make full handshakes, concurrently, so they cost CPU (~0.2 ms each) rather than round trips.
    cfg.send_tls13_tickets = 8;
    // Data connections hand their keys to our own record layer ([`Records`]) after the handshake.
    cfg.enable_secret_extraction = true;
    Ok(Arc::new(cfg))
}

/// When the client uses TLS (`--tls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// Never (cleartext, as plain FTP).
    Off,
    /// Whenever the server's FEAT lists `AUTH TLS`; cleartext with servers that do not offer it.
    #[default]
    Auto,
    /// Always: a server without `AUTH TLS` is an error.
    Require,
}

/// The client's TLS settings for one connection.
#[derive(Debug, Clone, Default)]
pub struct TlsSettings {
    /// When to use TLS.
    pub mode: TlsMode,
    /// What certificate to accept.
    pub trust: Trust,
}

/// What the client trusts.
#[derive(Debug, Clone, Default)]
pub enum Trust {
    /// The Mozilla roots shipped in webpki-roots.
    #[default]
    SystemRoots,
    /// Only the CA certificates in this PEM file.
    CaFile(std::path::PathBuf),
    /// Exactly the end-entity certificate with this SHA-256 digest (self-signed servers); the name is not checked.
    Fingerprint([u8; 32]),
}

/// Parses `--tls-fingerprint`: 64 hex digits, colons (as `openssl x509 -fingerprint` prints) allowed.
pub fn parse_fingerprint(s: &str) -> Result<[u8; 32], TlsError> {
    let hex: String = s.chars().filter(|c| *c != ':').collect();
    let bad = || TlsError::Fingerprint(s.to_string());
    if hex.len() != 64 {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
            .map_err(|_| bad())?;
    }
    Ok(out)
}

/// SHA-256 of a certificate (DER), as `--tls-fingerprint` takes it.
pub fn fingerprint(cert: &[u8]) -> [u8; 32] {
    Sha256::digest(cert).into()
}

/// A verifier that accepts exactly one certificate by digest; handshake signatures are still checked.
#[derive(Debug)]
struct Pinned {
    digest: [u8; 32],
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if fingerprint(end_entity) == self.digest {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "server certificate does not match --tls-fingerprint".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The client's TLS configuration. One `ClientConfig` (and so one resumption store) serves the control
/// connection and every data connection of a session, which is what lets data connections resume.
pub fn client_config(trust: &Trust) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?;
    let mut cfg = match trust {
        Trust::SystemRoots => {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Trust::CaFile(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs_of(path)? {
                roots.add(c)?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Trust::Fingerprint(digest) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned {
                digest: *digest,
                provider: provider(),
            }))
            .with_no_client_auth(),
    };
    // Data connections hand their keys to our own record layer ([`Records`]) after the handshake.
    cfg.enable_secret_extraction = true;
    Ok(Arc::new(cfg))
}

/// A client configuration accepting exactly the first certificate of the chain in `cert` (PEM): a striped
/// frontend checks that each mover holds its own certificate, the one its clients already verify.
pub fn pinned_to(cert: &Path) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let leaf = certs_of(cert)?
        .into_iter()
        .next()
        .ok_or_else(|| TlsError::Pem {
            path: cert.display().to_string(),
            msg: "no CERTIFICATE block".into(),
        })?;
    client_config(&Trust::Fingerprint(fingerprint(&leaf)))
}

/// The client's side of TLS for one session: its configuration and the name the server's certificate must
/// carry (the host of the URL).
#[derive(Debug, Clone)]
pub struct TlsClient {
    /// Shared by the control and data connections (one resumption store).
    pub config: Arc<rustls::ClientConfig>,
    /// The server's name (DNS name or IP address).
    pub name: ServerName<'static>,
}

impl TlsClient {
    /// `host` is the URL's host; an invalid name is a configuration error.
    pub fn new(config: Arc<rustls::ClientConfig>, host: &str) -> Result<Self, TlsError> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string()).map_err(|e| {
            TlsError::Config(rustls::Error::General(format!("server name {host}: {e}")))
        })?;
        Ok(TlsClient { config, name })
    }

    /// Runs the client handshake on `sock`. A failure is final: callers never retry in cleartext.
    pub async fn connect(&self, sock: TcpStream) -> io::Result<MaybeTls> {
        let c = tokio_rustls::TlsConnector::from(self.config.clone());
        let mut s = bounded(c.connect(self.name.clone(), wire(sock))).await?;
        // `Resumed` on data connections shows the control session was reused (what vsftpd-style servers demand).
        let (_, conn) = s.get_mut();
        tracing::debug!(
            "TLS client handshake: {:?} {:?} {:?}",
            conn.protocol_version(),
            conn.handshake_kind(),
            conn.negotiated_cipher_suite().map(|c| c.suite())
        );
        conn.set_buffer_limit(Some(SEND_LIMIT));
        Ok(MaybeTls::Tls(Box::new(tokio_rustls::TlsStream::Client(s))))
    }

    /// The client handshake of a data connection, which then runs on [`Records`].
    pub async fn connect_data(&self, sock: TcpStream) -> io::Result<MaybeTls> {
        let r = bounded(Records::connect(
            self.config.clone(),
            self.name.clone(),
            sock,
        ))
        .await?;
        Ok(MaybeTls::Records(Box::new(r)))
    }
}

/// Runs the server handshake on `sock`.
pub async fn accept(cfg: &Arc<rustls::ServerConfig>, sock: TcpStream) -> io::Result<MaybeTls> {
    let mut s = bounded(tokio_rustls::TlsAcceptor::from(cfg.clone()).accept(wire(sock))).await?;
    s.get_mut().1.set_buffer_limit(Some(SEND_LIMIT));
    Ok(MaybeTls::Tls(Box::new(tokio_rustls::TlsStream::Server(s))))
}

/// Longest a data-connection handshake may take before the transfer fails (`425`-class timeout).
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

async fn bounded<T>(f: impl std::future::Future<Output = io::Result<T>>) -> io::Result<T> {
    tokio::time::timeout(HANDSHAKE_TIMEOUT, f)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))?
}

/// Server side of a data connection: TLS (server role) when the plan says `PROT P`, else as it is.
pub(crate) async fn protect_server(
    sock: TcpStream,
    protect: bool,
    opts: &crate::data::DataOpts,
) -> Result<MaybeTls, crate::data::DataError> {
    if !protect {
        return Ok(MaybeTls::Plain(sock));
    }
    let cfg = opts.tls_server.as_ref().ok_or_else(|| {
        crate::data::DataError::Incomplete("PROT P without a server certificate".into())
    })?;
    // No new session tickets on a data connection: it resumes the control session's, and tickets an uploading
    // client never reads make its close an RST that can overtake the last data (curl, ftplib).
    let mut data_cfg = (**cfg).clone();
    data_cfg.send_tls13_tickets = 0;
    let r = bounded(Records::accept(Arc::new(data_cfg), sock)).await?;
    Ok(MaybeTls::Records(Box::new(r)))
}

/// A server's side of a data connection: the TLS client when `SSCN ON` put a client configuration in `opts`
/// (a server-to-server copy's connecting end), else [`protect_server`].
pub(crate) async fn protect_data(
    sock: TcpStream,
    protect: bool,
    opts: &crate::data::DataOpts,
) -> Result<MaybeTls, crate::data::DataError> {
    match (&opts.tls_client, protect) {
        (Some(c), true) => Ok(c.connect_data(sock).await?),
        _ => protect_server(sock, protect, opts).await,
    }
}

/// Client side of a data connection: TLS (client role, resuming the control session) when `opts` carries a
/// client configuration, which the client sets exactly when it sent `PROT P`.
pub(crate) async fn protect_client(
    sock: TcpStream,
    opts: &crate::data::DataOpts,
) -> Result<MaybeTls, crate::data::DataError> {
    match &opts.tls_client {
        None => Ok(MaybeTls::Plain(sock)),
        Some(c) => Ok(c.connect_data(sock).await?),
    }
}

/// [`protect_data`] for several connections at once: the handshakes run concurrently, so opening 64 MODE E
/// streams costs about one round trip more than cleartext (each resumes the control session).
pub(crate) async fn protect_data_all(
    socks: Vec<TcpStream>,
    protect: bool,
    opts: &crate::data::DataOpts,
) -> Result<Vec<MaybeTls>, crate::data::DataError> {
    if !protect {
        return Ok(socks.into_iter().map(MaybeTls::Plain).collect());
    }
    let mut set = tokio::task::JoinSet::new();
    for (i, s) in socks.into_iter().enumerate() {
        let o = opts.clone();
        set.spawn(async move { (i, protect_data(s, true, &o).await) });
    }
    all_of(set).await
}

/// [`protect_client`] for several connections at once (concurrent handshakes).
pub(crate) async fn protect_client_all(
    socks: Vec<TcpStream>,
    opts: &crate::data::DataOpts,
) -> Result<Vec<MaybeTls>, crate::data::DataError> {
    if opts.tls_client.is_none() {
        return Ok(socks.into_iter().map(MaybeTls::Plain).collect());
    }
    let mut set = tokio::task::JoinSet::new();
    for (i, s) in socks.into_iter().enumerate() {
        let o = opts.clone();
        set.spawn(async move { (i, protect_client(s, &o).await) });
    }
    all_of(set).await
}

/// Every handshake's stream, in the order given; the first failure ends the lot (dropping the set aborts the rest).
async fn all_of(
    mut set: tokio::task::JoinSet<(usize, Result<MaybeTls, crate::data::DataError>)>,
) -> Result<Vec<MaybeTls>, crate::data::DataError> {
    let mut out: Vec<Option<MaybeTls>> = (0..set.len()).map(|_| None).collect();
    while let Some(j) = set.join_next().await {
        let (i, r) = j.map_err(|e| crate::data::DataError::Io(io::Error::other(e.to_string())))?;
        out[i] = Some(r?);
    }
    Ok(out.into_iter().flatten().collect())
}

/// A TCP connection in cleartext or under TLS. The TCP socket stays reachable ([`MaybeTls::tcp`]) for the
/// socket options and TCP_INFO samples DRS and the traces need.
#[derive(Debug)]
pub enum MaybeTls {
    /// Cleartext.
    Plain(TcpStream),
    /// TLS through rustls' buffered API, client or server side (control connections).
    Tls(Box<tokio_rustls::TlsStream<Wire>>),
    /// TLS with our own record layer (data connections).
    Records(Box<Records>),
}

impl From<TcpStream> for MaybeTls {
    fn from(s: TcpStream) -> Self {
        MaybeTls::Plain(s)
    }
}

impl MaybeTls {
    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            MaybeTls::Plain(s) => s,
            MaybeTls::Tls(t) => t.get_ref().0.get_ref(),
            MaybeTls::Records(r) => r.tcp(),
        }
    }

    /// SHA-256 of the certificate the peer presented (the end entity), under TLS.
    pub fn peer_fingerprint(&self) -> Option<[u8; 32]> {
        match self {
            MaybeTls::Plain(_) => None,
            MaybeTls::Tls(t) => {
                let certs = t.get_ref().1.peer_certificates()?;
                certs.first().map(|c| fingerprint(c))
            }
            MaybeTls::Records(r) => r.peer_fingerprint(),
        }
    }

    /// Whether the connection is TLS.
    pub fn is_tls(&self) -> bool {
        !matches!(self, MaybeTls::Plain(_))
    }

    /// RFC 5705 / RFC 8446 §7.5 keying material from this TLS session (both ends derive the same bytes);
    /// `None` on a cleartext connection or if the exporter refuses (no handshake completed), and on data
    /// connections ([`MaybeTls::Records`]: rustls gave their session away; only control connections export).
    pub fn export_keying_material<const N: usize>(
        &self,
        label: &[u8],
        context: &[u8],
    ) -> Option<[u8; N]> {
        let MaybeTls::Tls(t) = self else {
            return None;
        };
        let out = [0u8; N];
        let r = match t.as_ref() {
            tokio_rustls::TlsStream::Client(c) => {
                c.get_ref()
                    .1
                    .export_keying_material(out, label, Some(context))
            }
            tokio_rustls::TlsStream::Server(s) => {
                s.get_ref()
                    .1
                    .export_keying_material(out, label, Some(context))
            }
        };
        r.ok()
    }

    /// Writes what fits now without waiting (a MODE E receiver's SBUF probe must never block its data path):
    /// `WouldBlock` if nothing fits. Under TLS, bytes rustls accepted but could not pass to the socket yet go out
    /// with the next write or flush.
    pub async fn try_write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = std::future::poll_fn(|cx| match Pin::new(&mut *self).poll_write(cx, b) {
            Poll::Pending => Poll::Ready(Err(io::ErrorKind::WouldBlock.into())),
            r => r,
        })
        .await?;
        if self.is_tls() {
            // One attempt to pass the record to the kernel; whatever is left waits for the next write.
            std::future::poll_fn(|cx| {
                let _ = Pin::new(&mut *self).poll_flush(cx);
                Poll::Ready(())
            })
            .await;
        }
        Ok(n)
    }

    /// Ends a connection that will not be used again: under TLS, close_notify and then read to the peer's (at
    /// most `wait`), so the close is a FIN, never an RST that could overtake data still in flight; plain TCP
    /// just closes.
    pub async fn close(mut self, wait: std::time::Duration) {
        use tokio::io::AsyncWriteExt;
        if !self.is_tls() {
            return;
        }
        let done = async {
            if self.shutdown().await.is_ok() {
                self.read_to_close().await;
            }
        };
        let _ = tokio::time::timeout(wait, done).await;
    }

    /// Reads and discards until the peer closes (under TLS: its close_notify) or the connection fails. Unread
    /// bytes (TLS 1.3 session tickets) left in the socket at close make the kernel send RST instead of FIN.
    pub(crate) async fn read_to_close(&mut self) {
        use tokio::io::AsyncReadExt;
        let mut sink = [0u8; 4096];
        while let Ok(n) = self.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    }

    /// The cleartext socket, if it is one (for an upgrade with `AUTH TLS`).
    pub fn into_plain(self) -> Option<TcpStream> {
        match self {
            MaybeTls::Plain(s) => Some(s),
            MaybeTls::Tls(_) | MaybeTls::Records(_) => None,
        }
    }
}

impl AsyncRead for MaybeTls {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            MaybeTls::Records(r) => Pin::new(r.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for MaybeTls {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            MaybeTls::Records(r) => Pin::new(r.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_flush(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            MaybeTls::Records(r) => Pin::new(r.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_shutdown(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            MaybeTls::Records(r) => Pin::new(r.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_parse_with_or_without_colons() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
        let a = parse_fingerprint(hex).unwrap();
        let colons: Vec<String> = (0..32).map(|i| hex[2 * i..2 * i + 2].to_string()).collect();
        assert_eq!(parse_fingerprint(&colons.join(":")).unwrap(), a);
        assert_eq!(a[1], 0x11);
        assert!(parse_fingerprint("abcd").is_err());
        assert!(parse_fingerprint(&"zz".repeat(32)).is_err());
    }
}
