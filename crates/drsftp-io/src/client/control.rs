//! The control connection: one TCP socket pumping the sans-IO [`ClientSession`]. It writes what the session
//! transmits, feeds it reply bytes and deadlines, and hands its events to the caller one at a time. It never touches
//! data channels; `transfer` acts on Listen/Connect/TransferStarted.
//!
//! [`Control::next_event`] is cancel-safe (writes advance a cursor only after the socket took the bytes, reads are
//! single `read` calls), so `transfer` can `select!` on it next to a running data task.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_proto::client::{ClientConfig, ClientSession, Event, Op, Outcome};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::ClientError;
use crate::tls::{MaybeTls, TlsClient};

/// A `SIZE` answer kept for the next ask of the same path (`mod.rs::size`), with the MDTM asked beside it.
#[derive(Debug, Clone)]
pub(crate) struct LastSize {
    pub(crate) path: String,
    pub(crate) size: u64,
    /// `Some` when MDTM went out with the SIZE (`Some(None)`: the server gave no time).
    pub(crate) mtime: Option<Option<String>>,
}

/// A logged-in (or logging-in) control connection.
#[derive(Debug)]
pub(crate) struct Control {
    /// `None` only while the TLS handshake holds the socket.
    sock: Option<MaybeTls>,
    /// TLS for `AUTH TLS` on this connection and for `PROT P` data connections (same config, so data
    /// connections resume the control session).
    tls: Option<TlsClient>,
    /// `PROT P` was accepted: data connections are TLS.
    data_tls: bool,
    session: ClientSession,
    out: Vec<u8>,
    out_pos: usize,
    buf: Box<[u8]>,
    local: SocketAddr,
    peer: SocketAddr,
    /// When the oldest command still unanswered went out (for [`Control::rtt_samples`]).
    sent_at: Option<Instant>,
    /// Command-to-first-reply times, at most [`RTT_SAMPLES`]: the login exchange gives the control RTT for free.
    rtt: Vec<Duration>,
    /// The last `SIZE` answer, valid until the next operation starts (`mod.rs::size`).
    pub(crate) last_size: Option<LastSize>,
    /// The data channel the last batch download left open (`batch.rs`); dropped by any other data transfer.
    pub(crate) batch_channel: Option<super::batch::BatchChannel>,
    /// The data channel the last upload batch left open (`upbatch.rs`); dropped by any other data transfer.
    pub(crate) upload_channel: Option<super::upbatch::UploadChannel>,
    /// The control address of the other server of the last third-party batch (`relay.rs`), whose data connection
    /// the server keeps; dropped by any other data transfer.
    pub(crate) relay_link: Option<SocketAddr>,
    /// A CKSM algorithm to pipeline behind the transfer now running, set from outside its loop (a
    /// `--transport auto` download's stay verdict, download.rs) and sent at the loop's next tick
    /// ([`Control::send_asked_checksum`]).
    pub(crate) ask_cksm: AskCksm,
}

/// See [`Control::ask_cksm`].
pub(crate) type AskCksm = Arc<std::sync::Mutex<Option<String>>>;

/// How many command round trips [`Control`] keeps (the first ones: login, before any transfer loads the path).
const RTT_SAMPLES: usize = 8;

impl Control {
    /// Resolves `host_port`, connects (each resolved address in turn, each bounded by `timeout`) and waits for
    /// nothing yet: the session holds the greeting until the first operation.
    pub(crate) async fn connect(
        host_port: &str,
        timeout: Duration,
    ) -> Result<Control, ClientError> {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(host_port)
            .await
            .map_err(|e| ClientError::Resolve {
                host: host_port.to_string(),
                error: e,
            })?
            .collect();
        if addrs.is_empty() {
            return Err(ClientError::Resolve {
                host: host_port.to_string(),
                error: std::io::Error::new(std::io::ErrorKind::NotFound, "no addresses"),
            });
        }
        let mut last = None;
        for addr in addrs {
            match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
                Ok(Ok(sock)) => {
                    let _ = sock.set_nodelay(true);
                    let local = sock.local_addr().map_err(ClientError::Control)?;
                    let peer = sock.peer_addr().map_err(ClientError::Control)?;
                    let mut session = ClientSession::new(
                        ClientConfig {
                            reply_timeout: timeout,
                        },
                        Instant::now(),
                    );
                    session.set_peer_ip(peer.ip());
                    return Ok(Control {
                        sock: Some(MaybeTls::Plain(sock)),
                        tls: None,
                        data_tls: false,
                        session,
                        out: Vec::new(),
                        out_pos: 0,
                        buf: vec![0u8; 16 * 1024].into_boxed_slice(),
                        local,
                        peer,
                        sent_at: None,
                        rtt: Vec::new(),
                        last_size: None,
                        batch_channel: None,
                        upload_channel: None,
                        relay_link: None,
                        ask_cksm: AskCksm::default(),
                    });
                }
                Ok(Err(e)) => last = Some(e),
                Err(_) => {
                    last = Some(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no answer within {timeout:?}"),
                    ))
                }
            }
        }
        Err(ClientError::Connect {
            addr: host_port.to_string(),
            error: last.unwrap_or_else(|| std::io::Error::other("no address worked")),
        })
    }

    /// Uses `tls` for the `AUTH TLS` handshake ([`drsftp_proto::client::Op::Secure`]) and PROT P data.
    pub(crate) fn set_tls(&mut self, tls: TlsClient) {
        self.tls = Some(tls);
    }

    /// Records the outcome of `Op::Secure` with `PROT P`: data connections are TLS from now on.
    pub(crate) fn set_data_tls(&mut self, on: bool) {
        self.data_tls = on;
    }

    /// The TLS client for data connections, when `PROT P` is in force.
    pub(crate) fn data_tls(&self) -> Option<TlsClient> {
        self.tls.clone().filter(|_| self.data_tls)
    }

    /// AEAD keys for a blast transfer when `PROT P` is in force (`Ok(None)`: cleartext blast). Under PROT P the
    /// keys come from this connection's TLS exporter, and failing to derive them is an error, never cleartext.
    pub(crate) fn blast_protection(
        &self,
        params: &drsftp_blast::TransferParams,
        dir: drsftp_blast::DataDirection,
    ) -> Result<Option<drsftp_blast::Protection>, ClientError> {
        if !self.data_tls {
            return Ok(None);
        }
        let keys = self
            .sock
            .as_ref()
            .and_then(|s| crate::blast::blast_keys(s, params, dir));
        keys.map(Some)
            .ok_or_else(|| ClientError::Invalid("PROT P: no TLS keys for the blast channel".into()))
    }

    /// Whether the control connection is TLS.
    pub(crate) fn peer_fingerprint(&self) -> Option<[u8; 32]> {
        self.sock.as_ref().and_then(MaybeTls::peer_fingerprint)
    }

    /// Whether the control connection is TLS.
    pub(crate) fn is_tls(&self) -> bool {
        self.sock.as_ref().is_some_and(MaybeTls::is_tls)
    }

    /// `234` to AUTH TLS: the handshake on the control socket. Any failure is final (no cleartext fallback).
    async fn start_tls(&mut self) -> Result<(), ClientError> {
        let tls = self
            .tls
            .clone()
            .ok_or_else(|| ClientError::Tls("AUTH TLS without a TLS configuration".into()))?;
        let plain = self
            .sock
            .take()
            .and_then(MaybeTls::into_plain)
            .ok_or_else(|| ClientError::Tls("control connection is not cleartext".into()))?;
        let s = tls
            .connect(plain)
            .await
            .map_err(|e| ClientError::Tls(format!("handshake with the server failed: {e}")))?;
        self.sock = Some(s);
        self.session.handle_tls_started(Instant::now());
        Ok(())
    }

    /// Our end of the control connection: data listeners bind to this IP.
    pub(crate) fn local_ip(&self) -> IpAddr {
        self.local.ip()
    }

    /// The server's end of the control connection.
    pub(crate) fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The sans-IO session (features, banner, `handle_listening`, `handle_data_ready`, `abort`).
    pub(crate) fn session(&self) -> &ClientSession {
        &self.session
    }

    /// Mutable access for the `handle_*` calls the data side makes.
    pub(crate) fn session_mut(&mut self) -> &mut ClientSession {
        &mut self.session
    }

    /// Round trips of the first commands on this connection (command written to first reply byte read), in
    /// order: USER, PASS and FEAT of the login, then whatever followed. Only exchanges with one command
    /// outstanding and no data moving are representative; the caller takes the login ones.
    pub(crate) fn rtt_samples(&self) -> &[Duration] {
        &self.rtt
    }

    /// The kernel's minimum RTT of this connection (`TCP_INFO`: the SYN exchange and every acknowledged
    /// command), `None` when it has none (no socket during a TLS handshake, an old kernel). Unlike a timed
    /// command it is not inflated by a lost segment's retransmission (on a lossy path every command of a
    /// pipelined batch shares one loss: a login at 200 ms · 5 % timed 0.8-2.7 s) nor by the server's time to
    /// answer; it cannot see delay a TCP-terminating proxy adds beyond itself.
    pub(crate) fn kernel_min_rtt(&self) -> Option<Duration> {
        let sock = self.sock.as_ref()?;
        drsftp_sys::tcp_info::tcp_info(sock.tcp())
            .ok()
            .map(|i| i.min_rtt)
            .filter(|r| !r.is_zero())
    }

    /// The control path's round trip for the rules that want one before data flows: the kernel's minimum RTT,
    /// else the quickest timed command (a sample is only ever inflated, by loss or by the server's work).
    pub(crate) fn path_rtt(&self) -> Option<Duration> {
        self.kernel_min_rtt()
            .or_else(|| self.rtt.iter().min().copied())
    }

    /// Starts an operation (its first command goes out with the next [`Control::next_event`]).
    pub(crate) fn start(&mut self, op: Op) -> Result<(), ClientError> {
        self.last_size = None;
        // Another data channel (PORT/PASV) replaces the one the server kept for batches.
        // Download batches (PORT) and upload batches (PASV) replace each other's channel too.
        // A third-party batch (gated RETRs, or STORs whose data comes from another server) sets up or reuses the
        // channel between the two servers: the link is restored by `relay.rs` when it ends well.
        let relay = match &op {
            Op::Batch(b) => b.gated,
            Op::UploadBatch(u) => u.first_alone,
            _ => false,
        };
        match op {
            Op::Transfer(_) | Op::List { .. } | Op::Command(_) | Op::Secure { .. } => {
                self.batch_channel = None;
                self.upload_channel = None;
                self.relay_link = None;
            }
            _ if relay => {
                self.batch_channel = None;
                self.upload_channel = None;
                self.relay_link = None;
            }
            Op::Batch(_) => {
                self.upload_channel = None;
                self.relay_link = None;
            }
            Op::UploadBatch(_) => {
                self.batch_channel = None;
                self.relay_link = None;
            }
            _ => {}
        }
        self.session.start(Instant::now(), op)?;
        Ok(())
    }

    fn collect_output(&mut self) {
        while let Some(bytes) = self.session.poll_transmit() {
            if self.out_pos == self.out.len() {
                self.out.clear();
                self.out_pos = 0;
            }
            if let Ok(s) = std::str::from_utf8(&bytes) {
                let line = s.trim_end();
                if line.len() >= 5 && line[..5].eq_ignore_ascii_case("PASS ") {
                    tracing::debug!("-> PASS ****");
                } else {
                    tracing::debug!("-> {line}");
                }
            }
            self.out.extend_from_slice(&bytes);
        }
    }

    /// Sends `op`'s commands and closes the connection (TLS: after close_notify) without reading the replies.
    pub(crate) async fn send_and_close(&mut self, op: Op) -> Result<(), ClientError> {
        self.start(op)?;
        self.flush().await?;
        if let Some(mut sock) = self.sock.take() {
            sock.shutdown().await.map_err(ClientError::Control)?;
        }
        Ok(())
    }

    /// Writes pending command bytes. Cancel-safe: the cursor moves only after a completed `write`.
    pub(crate) async fn flush(&mut self) -> Result<(), ClientError> {
        self.collect_output();
        while self.out_pos < self.out.len() {
            let pos = self.out_pos;
            let n = self
                .sock
                .as_mut()
                .ok_or_else(|| ClientError::Tls("control connection lost".into()))?
                .write(&self.out[pos..])
                .await
                .map_err(ClientError::Control)?;
            if n == 0 {
                return Err(ClientError::Control(std::io::ErrorKind::WriteZero.into()));
            }
            self.out_pos += n;
            if self.sent_at.is_none() && self.rtt.len() < RTT_SAMPLES {
                self.sent_at = Some(Instant::now());
            }
        }
        Ok(())
    }

    /// The next session event: sends queued commands, reads replies, and honours the session's deadline.
    /// Pipelines the CKSM asked for through [`Control::ask_cksm`] behind the running transfer, if one was asked
    /// (once: the request is taken either way).
    pub(crate) fn send_asked_checksum(&mut self) {
        let alg = self.ask_cksm.lock().ok().and_then(|mut a| a.take());
        if let Some(alg) = alg {
            let sent = self
                .session
                .pipeline_trailing_checksum(Instant::now(), &alg);
            tracing::debug!("CKSM {alg} asked behind the running transfer: sent {sent}");
        }
    }

    pub(crate) async fn next_event(&mut self) -> Result<Event, ClientError> {
        loop {
            self.flush().await?;
            if let Some(ev) = self.session.poll_event() {
                if ev == Event::StartTls {
                    self.start_tls().await?;
                    continue;
                }
                return Ok(ev);
            }
            if self.session.is_dead() {
                return Err(ClientError::Session(
                    drsftp_proto::client::ClientError::Closed,
                ));
            }
            let sock = self
                .sock
                .as_mut()
                .ok_or_else(|| ClientError::Tls("control connection lost".into()))?;
            let read = sock.read(&mut self.buf);
            let n = match self.session.poll_timeout() {
                Some(deadline) => tokio::time::timeout_at(deadline.into(), read).await.ok(),
                None => Some(read.await),
            };
            match n {
                None => self.session.handle_timeout(Instant::now()),
                Some(Ok(0)) => self.session.handle_eof(),
                Some(Ok(n)) => {
                    if let Some(t) = self.sent_at.take() {
                        self.rtt.push(t.elapsed());
                    }
                    if tracing::enabled!(tracing::Level::DEBUG) {
                        for line in String::from_utf8_lossy(&self.buf[..n]).lines() {
                            tracing::debug!("<- {line}");
                        }
                    }
                    self.session.handle_input(Instant::now(), &self.buf[..n]);
                }
                Some(Err(e)) => return Err(ClientError::Control(e)),
            }
        }
    }

    /// Runs an operation that needs no data channel to its outcome. Markers and notices are logged.
    pub(crate) async fn run(&mut self, op: Op) -> Result<Outcome, ClientError> {
        self.start(op)?;
        self.finish().await
    }

    /// Waits for the running operation's outcome (after an abort, for instance).
    pub(crate) async fn finish(&mut self) -> Result<Outcome, ClientError> {
        loop {
            match self.next_event().await? {
                Event::Done(o) => return Ok(o),
                Event::Failed(e) => return Err(e.into()),
                Event::Notice(n) => tracing::info!("server: {n}"),
                Event::Unsolicited(r) => tracing::info!("unsolicited reply: {r}"),
                ev @ (Event::Listen | Event::Connect { .. }) => {
                    tracing::warn!("unexpected {ev:?} for a command without data");
                }
                ev => tracing::debug!("{ev:?}"),
            }
        }
    }
}
