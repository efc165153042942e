//! One transfer on an open control connection: acts on the session's data-channel events (Listen → bind and PORT,
//! Connect → open the streams, TransferStarted → start the data engine), runs the engine next to the control
//! channel, and ends only when both the final reply (226) and the data side are done. A data failure sends ABOR; a
//! control failure cancels the data task; no progress for `stall` seconds fails the transfer.
//!
//! Striped (GFD.20, docs/striping.md "Client"): for a download the session asks for one listener per stripe
//! ([`Event::ListenStriped`]) and the receiver counts each listener's EODs against the EOF that came in on it;
//! data connections are accepted only from the control peer and the stripes the server named in its SPAS reply.
//! For an upload it asks for connections to every stripe ([`Event::ConnectStriped`]): the file is cut into one
//! contiguous part per stripe, each sent over that stripe's connections with its own EOF.
//!
//! Stream mode with DRS negotiated (docs/drs.md §4.4) also carries SBUF on the control channel while the transfer
//! runs: a download's receiving engine hands its DRS probes over (`Progress::sbuf`) and they go out as
//! `SBUF <id> <size>`; the `200 SBUF <id> <size>` echoes go back as RTT samples; during an upload the server's
//! informational `126 SBUF <id> <size>` resizes our sending socket's SO_SNDBUF. Never with a peer that did not
//! opt in (the session only reports these replies, and only sends SBUF, after `OPTS DRS Inband=1;` was accepted).

use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_proto::client::{
    ClientError as SessionError, Event, Op, Outcome, TransferReport, TransferSpec,
};
use drsftp_storage::FileHandle;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::control::Control;
use super::task::{AbortOnDrop, Stall};
use super::ClientError;
use crate::data::{self, AutoEvent, AutoSender, DataError, DataOpts, DataReport, Progress};

/// What the data side does once the server has accepted the transfer command.
#[derive(Debug)]
pub(crate) enum DataJob {
    /// MODE E download: accept the server's connections, blocks land at `wire offset + wire_add`.
    RecvModeE {
        file: Arc<dyn FileHandle>,
        wire_add: u64,
    },
    /// Stream-mode download into `file` from `offset`, until the server closes.
    RecvStream {
        file: Arc<dyn FileHandle>,
        offset: u64,
    },
    /// MODE E upload of `ranges` (the whole section, or its gaps when resuming) over the opened connections,
    /// wire offsets `file offset - wire_sub`; with `auto`, `AutoStreams` opens more connections to the same
    /// address and retires some while it runs.
    SendModeE {
        file: Arc<dyn FileHandle>,
        ranges: Vec<Range<u64>>,
        wire_sub: u64,
        auto: Option<Box<AutoSender>>,
    },
    /// Stream-mode upload of `range`, then close.
    SendStream {
        file: Arc<dyn FileHandle>,
        range: Range<u64>,
    },
}

/// What a finished transfer gives back.
#[derive(Debug)]
pub(crate) struct Moved {
    /// The session's view: buffer command accepted, markers, final reply.
    pub(crate) report: TransferReport,
    /// The engine's view: bytes, streams, ranges, peak buffer.
    pub(crate) data: DataReport,
    /// A striped transfer: payload bytes per stripe, in the server's SPAS order (empty otherwise).
    pub(crate) stripes: Vec<u64>,
    /// `-p auto` online refinement (uploads): the controller's decisions.
    pub(crate) actions: Vec<AutoEvent>,
    /// Seconds from the first command to the end of both sides.
    pub(crate) seconds: f64,
    /// The blast data path's report, for a transfer over the UDP blast channel.
    pub(crate) blast: Option<crate::blast::BlastReport>,
    /// Blast: seconds from the first command to the `150` that opened the channel.
    pub(crate) setup: Option<f64>,
    /// Blast download: seconds from the receiver holding every packet to the final reply (EOD/226).
    pub(crate) eod: Option<f64>,
}

/// What the data task gives back: the engine's report, `-p auto`'s decisions, bytes per stripe.
type DataTask = JoinHandle<Result<(DataReport, Vec<AutoEvent>, Vec<u64>), DataError>>;

/// The data channel the session has set up for one transfer.
#[derive(Debug, Default)]
struct Channel {
    /// MODE E download: our listener(s), one per stripe when striped.
    listeners: Vec<TcpListener>,
    /// Upload (and stream-mode download): the connections opened, one group per stripe when striped.
    socks: Vec<Vec<TcpStream>>,
    /// Where a single (unstriped) group of connections went: an auto upload opens more there.
    data_addr: Option<SocketAddr>,
    /// Who may open data connections to our listeners: the control peer, and a striped server's movers.
    peers: Vec<IpAddr>,
}

/// Runs `spec` with `job` on `control`. `stall` bounds the time without data progress once the transfer runs.
pub(crate) async fn run(
    control: &mut Control,
    spec: TransferSpec,
    job: DataJob,
    opts: DataOpts,
    progress: Arc<Progress>,
    stall: Duration,
) -> Result<Moved, ClientError> {
    control.start(Op::Transfer(spec))?;
    run_started(control, job, opts, progress, stall).await
}

/// Like [`run`] for an operation already started on `control` (a transfer or a listing).
pub(crate) async fn run_started(
    control: &mut Control,
    job: DataJob,
    mut opts: DataOpts,
    progress: Arc<Progress>,
    stall: Duration,
) -> Result<Moved, ClientError> {
    let begin = Instant::now();
    if opts.tls_client.is_none() {
        // PROT P: every data connection of this session is TLS, resuming the control session.
        opts.tls_client = control.data_tls();
    }
    let peer_ip = control.peer().ip();
    let mut job = Some(job);
    let mut chan = Channel {
        peers: vec![peer_ip],
        ..Channel::default()
    };
    let mut task = AbortOnDrop(None);
    let mut report: Option<TransferReport> = None;
    let mut data: Option<(DataReport, Vec<AutoEvent>, Vec<u64>)> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut watch = Stall::new(progress.bytes());

    while report.is_none() || data.is_none() {
        tokio::select! {
            ev = control.next_event(), if report.is_none() => match ev? {
                Event::Listen => {
                    let bind = SocketAddr::new(control.local_ip(), 0);
                    let l = data::listen(bind, &opts).await.map_err(ClientError::DataSetup)?;
                    let addr = l.local_addr().map_err(ClientError::DataSetup)?;
                    tracing::debug!("data listener on {addr}");
                    chan.listeners = vec![l];
                    control.session_mut().handle_listening(Instant::now(), addr);
                }
                Event::ListenStriped { peers } => {
                    let bind = SocketAddr::new(control.local_ip(), 0);
                    let mut addrs = Vec::with_capacity(peers.len());
                    for _ in &peers {
                        let l = data::listen(bind, &opts).await.map_err(ClientError::DataSetup)?;
                        addrs.push(l.local_addr().map_err(ClientError::DataSetup)?);
                        chan.listeners.push(l);
                    }
                    tracing::debug!("striped: listening on {addrs:?} for {peers:?}");
                    chan.peers.extend(peers.iter().map(|p| p.ip()));
                    control.session_mut().handle_listening_striped(Instant::now(), &addrs);
                }
                Event::Connect { addr, streams } => {
                    let addr = or_peer(addr, peer_ip);
                    // With a drsftp server the transfer command is already queued behind the PASV reply: it
                    // leaves before the connection is made, so both take the same round trip.
                    control.flush().await?;
                    chan.socks = vec![connect_all(addr, streams, &opts, stall).await?];
                    chan.data_addr = Some(addr);
                    control.session_mut().handle_data_ready(Instant::now());
                }
                Event::ConnectStriped { addrs, streams } => {
                    for a in addrs {
                        chan.socks.push(connect_all(or_peer(a, peer_ip), streams, &opts, stall).await?);
                    }
                    control.session_mut().handle_data_ready(Instant::now());
                }
                Event::TransferStarted(reply) => {
                    tracing::debug!("transfer started: {reply}");
                    // In-band SBUF headers only with a server that accepted OPTS DRS Inband=1; (docs/drs.md §4.3).
                    opts.inband_sbuf = control.session().drs_negotiated();
                    enable_ctrl_sbuf(&progress, job.as_ref(), opts.inband_sbuf);
                    if let Some(j) = job.take() {
                        task.0 = Some(spawn(j, std::mem::take(&mut chan), opts.clone(), progress.clone())?);
                    }
                    watch.alive();
                }
                Event::Done(Outcome::Transferred(r)) => {
                    opts.inband_sbuf = r.drs_negotiated;
                    enable_ctrl_sbuf(&progress, job.as_ref(), opts.inband_sbuf);
                    if let Some(j) = job.take() {
                        // 2xx without a 1xx first: the data may still be there to collect.
                        task.0 = Some(spawn(j, std::mem::take(&mut chan), opts.clone(), progress.clone())?);
                    }
                    for n in &r.notices {
                        tracing::info!("server: {n}");
                    }
                    report = Some(r);
                    watch.alive();
                }
                Event::Done(Outcome::Listed(reply)) => {
                    if let Some(j) = job.take() {
                        task.0 = Some(spawn(j, std::mem::take(&mut chan), opts.clone(), progress.clone())?);
                    }
                    report = Some(TransferReport { final_reply: Some(reply), ..Default::default() });
                    watch.alive();
                }
                Event::Done(other) => {
                    return Err(ClientError::Invalid(format!("unexpected outcome of a transfer: {other:?}")));
                }
                Event::Failed(e) => return Err(e.into()),
                Event::RangeMarker(r) => {
                    tracing::debug!("range marker {r:?}");
                    progress.mark(&r);
                }
                Event::PerfMarker(p) => tracing::debug!("perf marker {p:?}"),
                Event::Notice(n) => tracing::info!("server: {n}"),
                // Control-channel DRS (stream mode): the echo is the probe's RTT sample for the receiving engine (TCP_INFO
                // stays the primary RTT source on Linux; the echo keeps the portable path working); a 126 notice
                // resizes our send buffer.
                Event::SbufEcho { id, size } => {
                    tracing::debug!("SBUF {id} echoed: server send buffer {size}");
                    progress.sbuf().echo(id, Instant::now());
                }
                Event::SbufNotice { id, size } => {
                    let applied = progress.sbuf().notice(id, size);
                    tracing::debug!("126 SBUF {id}: server receive buffer {size}, our send buffer {applied:?}");
                }
                ev => tracing::debug!("{ev:?}"),
            },
            _ = progress.sbuf().probe_ready(), if report.is_none() && progress.sbuf().is_enabled() => {
                let link = progress.sbuf();
                for (id, size) in link.take_probes() {
                    match control.session_mut().send_sbuf(Instant::now(), id, size) {
                        Ok(()) => link.probe_sent(size),
                        Err(e) => tracing::debug!("SBUF {id} {size} not sent: {e}"),
                    }
                }
            }
            r = task.join("data"), if data.is_none() => {
                task.0 = None;
                match r {
                    Ok(d) => {
                        data = Some(d);
                        watch.alive();
                    }
                    Err(e) => return Err(abort_unless_replied(control, &report, e.into()).await),
                }
            }
            _ = tick.tick() => {
                if report.is_none() {
                    control.send_asked_checksum();
                }
                if watch.stalled(progress.bytes(), stall) {
                    if let Some(t) = task.0.take() {
                        t.abort();
                        let e = ClientError::Stalled(stall);
                        return Err(abort_unless_replied(control, &report, e).await);
                    }
                    if data.is_some() && report.is_none() {
                        // All data moved but no final reply (the session sets no deadline while a transfer runs).
                        let e = ClientError::Session(SessionError::Timeout(
                            "the transfer's final reply (data complete)".into(),
                        ));
                        return Err(abort_unless_replied(control, &report, e).await);
                    }
                }
            }
        }
    }
    let (mut data, actions, stripes) = data.expect("loop ends with data");
    // Nobody reuses the client's MODE E connections: TLS ones end with close_notify, in the background.
    for s in data.reusable.drain(..).filter(|s| s.is_tls()) {
        tokio::spawn(s.close(Duration::from_millis(500)));
    }
    Ok(Moved {
        report: report.unwrap_or_default(),
        data,
        stripes,
        actions,
        seconds: begin.elapsed().as_secs_f64(),
        blast: None,
        setup: None,
        eod: None,
    })
}

/// Control-channel SBUF for a stream-mode file transfer with DRS negotiated (the data engine then probes and
/// registers its sending socket). A download's probes are answered by `200 SBUF`, so they are not one-way.
fn enable_ctrl_sbuf(progress: &Progress, job: Option<&DataJob>, negotiated: bool) {
    if negotiated
        && matches!(
            job,
            Some(DataJob::RecvStream { .. } | DataJob::SendStream { .. })
        )
    {
        progress.sbuf().enable(false);
    }
}

/// Sends ABOR and waits (bounded by the session's reply deadline) for the server to acknowledge it. Returns the
/// server's own refusal of the transfer if it had one (`452` for a full disk, `451` naming a failed mover): the
/// reason the data connections broke, which the caller reports instead of its socket error.
pub(crate) async fn abort(control: &mut Control) -> Option<ClientError> {
    control.session_mut().abort(Instant::now());
    match tokio::time::timeout(Duration::from_secs(120), control.finish()).await {
        Ok(Err(e @ ClientError::Session(SessionError::Refused { .. }))) => {
            tracing::debug!("after ABOR: {e}");
            Some(e)
        }
        Ok(Err(e)) => {
            tracing::debug!("after ABOR: {e}");
            None
        }
        Ok(Ok(o)) => {
            tracing::debug!("after ABOR: {o:?}");
            None
        }
        Err(_) => {
            tracing::debug!("no answer to ABOR");
            None
        }
    }
}

/// Aborts the running transfer without waiting for the server's answer when the server allows it (a drsftp
/// server: `ClientSession::abort_and_go_on`), so the next operation's commands leave in the same write as ABOR;
/// otherwise [`abort`] and wait. What the aborted operation still had queued for its driver (markers, its end)
/// is dropped: that driver is gone.
pub(crate) async fn abort_and_go_on(control: &mut Control) {
    if control.session_mut().abort_and_go_on(Instant::now()) {
        while let Some(ev) = control.session_mut().poll_event() {
            tracing::debug!("after a pipelined ABOR: {ev:?}");
        }
    } else {
        abort(control).await;
    }
}

/// The error a transfer ends with when its data side failed with `e`: if the server's final reply (`report`) has
/// not come, it gets ABOR ([`abort`]), and its own refusal, if it had one, is the error instead of `e`.
pub(crate) async fn abort_unless_replied(
    control: &mut Control,
    report: &Option<TransferReport>,
    e: ClientError,
) -> ClientError {
    if report.is_none() {
        if let Some(refused) = abort(control).await {
            return refused;
        }
    }
    e
}

/// `addr`, or the control peer's address with its port if the server gave a wildcard.
pub(super) fn or_peer(addr: SocketAddr, peer_ip: IpAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        SocketAddr::new(peer_ip, addr.port())
    } else {
        addr
    }
}

/// Opens `n` data connections to `addr` concurrently.
pub(super) async fn connect_all(
    addr: SocketAddr,
    n: u32,
    opts: &DataOpts,
    timeout: Duration,
) -> Result<Vec<TcpStream>, ClientError> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n.max(1) {
        let opts = opts.clone();
        set.spawn(async move { tokio::time::timeout(timeout, data::connect(addr, &opts)).await });
    }
    let mut socks = Vec::with_capacity(n as usize);
    while let Some(r) = set.join_next().await {
        let r = r.map_err(|e| ClientError::DataSetup(std::io::Error::other(e.to_string())))?;
        let s = match r {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(ClientError::DataSetup(e)),
            Err(_) => {
                return Err(ClientError::DataSetup(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("connecting to {addr} took longer than {timeout:?}"),
                )))
            }
        };
        socks.push(s);
    }
    tracing::debug!("{} data connection(s) to {addr}", socks.len());
    Ok(socks)
}

/// The data side's task for `job` on the channel the session set up.
fn spawn(
    job: DataJob,
    mut chan: Channel,
    opts: DataOpts,
    progress: Arc<Progress>,
) -> Result<DataTask, ClientError> {
    let missing =
        |what: &str| ClientError::Invalid(format!("server started the transfer before {what}"));
    if chan.listeners.len() > 1 {
        let DataJob::RecvModeE { file, wire_add } = job else {
            return Err(ClientError::Invalid(
                "striped listeners for an upload".into(),
            ));
        };
        return Ok(tokio::spawn(async move {
            let (r, stripes) =
                recv_striped(chan.listeners, chan.peers, file, wire_add, opts, progress).await?;
            Ok((r, vec![], stripes))
        }));
    }
    if chan.socks.len() > 1 {
        let DataJob::SendModeE {
            file,
            ranges,
            wire_sub,
            auto,
        } = job
        else {
            return Err(ClientError::Invalid(
                "striped connections for a download".into(),
            ));
        };
        // Stripes split one contiguous range; the gaps of a resumed upload would need a share per gap and stripe.
        // A striped frontend keeps no partial uploads, so a resume never meets striping there.
        let [range] = <[Range<u64>; 1]>::try_from(ranges).map_err(|r| {
            ClientError::Invalid(format!(
                "a resumed upload of {} ranges cannot be striped (use --no-stripes)",
                r.len()
            ))
        })?;
        if auto.is_some() {
            tracing::info!("striped upload: -p auto keeps the starting stream count per stripe");
        }
        return Ok(tokio::spawn(async move {
            let (r, stripes) =
                send_striped(chan.socks, file, range, wire_sub, opts, progress).await?;
            Ok((r, vec![], stripes))
        }));
    }
    let socks = chan.socks.pop().unwrap_or_default();
    if let DataJob::SendModeE {
        file,
        ranges,
        wire_sub,
        auto: Some(auto),
    } = job
    {
        let addr = chan
            .data_addr
            .filter(|_| !socks.is_empty())
            .ok_or_else(|| missing("data connections were open"))?;
        return Ok(tokio::spawn(async move {
            // PROT P: every stream, first or added by the controller, is TLS (client side) before it carries data.
            let socks = crate::tls::protect_client_all(socks, &opts).await?;
            let connect_opts = opts.clone();
            let connect = move || {
                let o = connect_opts.clone();
                async move {
                    let s = data::connect(addr, &o).await?;
                    crate::tls::protect_client(s, &o)
                        .await
                        .map_err(|e| std::io::Error::other(e.to_string()))
                }
            };
            let r = auto
                .send(socks, connect, file, ranges, wire_sub, &opts, progress)
                .await?;
            Ok((r.data, r.actions, vec![]))
        }));
    }
    let fut = plain(job, chan.listeners.pop(), socks, chan.peers, opts, progress)?;
    Ok(tokio::spawn(async move {
        fut.await.map(|d| (d, vec![], vec![]))
    }))
}

type DataFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<DataReport, DataError>> + Send>>;

/// The engine future for a job without online stream control (spawned by [`spawn`], so aborting that task stops it).
fn plain(
    job: DataJob,
    listener: Option<TcpListener>,
    mut socks: Vec<TcpStream>,
    peers: Vec<IpAddr>,
    opts: DataOpts,
    progress: Arc<Progress>,
) -> Result<DataFuture, ClientError> {
    let missing =
        |what: &str| ClientError::Invalid(format!("server started the transfer before {what}"));
    Ok(match job {
        DataJob::RecvModeE { file, wire_add } => {
            let l = listener.ok_or_else(|| missing("the data listener was set up"))?;
            Box::pin(async move { recv_accepting(l, peers, file, wire_add, opts, progress).await })
        }
        DataJob::RecvStream { file, offset } => {
            let s = socks
                .pop()
                .ok_or_else(|| missing("a data connection was open"))?;
            Box::pin(async move {
                let s = crate::tls::protect_client(s, &opts).await?;
                data::recv_stream(s, file, offset, &opts, progress).await
            })
        }
        DataJob::SendModeE {
            file,
            ranges,
            wire_sub,
            auto: _,
        } => {
            if socks.is_empty() {
                return Err(missing("data connections were open"));
            }
            Box::pin(async move {
                // The handshakes run here, once the server has started the transfer and accepts (RFC 4217 §7:
                // we connected, yet the server is the TLS server).
                let socks = crate::tls::protect_client_all(socks, &opts).await?;
                data::send_mode_e(socks, file, ranges, wire_sub, &opts, progress).await
            })
        }
        DataJob::SendStream { file, range } => {
            let s = socks
                .pop()
                .ok_or_else(|| missing("a data connection was open"))?;
            Box::pin(async move {
                let s = crate::tls::protect_client(s, &opts).await?;
                data::send_stream(s, file, range, &opts, progress).await
            })
        }
    })
}

/// MODE E receive: accepts the server's connections (only from `peers`: the control peer's address) into the
/// engine's channel until the engine has seen EOF and every EOD.
async fn recv_accepting(
    listener: TcpListener,
    peers: Vec<IpAddr>,
    file: Arc<dyn FileHandle>,
    wire_add: u64,
    opts: DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    let (tx, rx) = mpsc::channel(64);
    let recv = data::recv_mode_e(rx, file, wire_add, &opts, progress);
    tokio::pin!(recv);
    let accept = accept_loop(&listener, tx, &peers, &opts, |s| s);
    tokio::pin!(accept);
    let mut accepting = true;
    loop {
        tokio::select! {
            r = &mut recv => return r,
            _ = &mut accept, if accepting => accepting = false,
        }
    }
}

/// Striped MODE E receive: one accept loop per stripe's listener (connections only from `peers`), each
/// connection tagged with its stripe, into one engine that counts EOF/EOD per stripe. Returns the bytes per stripe.
async fn recv_striped(
    listeners: Vec<TcpListener>,
    peers: Vec<IpAddr>,
    file: Arc<dyn FileHandle>,
    wire_add: u64,
    opts: DataOpts,
    progress: Arc<Progress>,
) -> Result<(DataReport, Vec<u64>), DataError> {
    let (tx, rx) = mpsc::channel(64);
    // The accept loops stop (aborted) when this set is dropped, once the engine is done.
    let mut accepts = tokio::task::JoinSet::new();
    for (i, l) in listeners.into_iter().enumerate() {
        let (tx, peers, opts) = (tx.clone(), peers.clone(), opts.clone());
        accepts.spawn(async move { accept_loop(&l, tx, &peers, &opts, move |s| (i, s)).await });
    }
    drop(tx);
    data::recv_mode_e_striped(rx, accepts.len(), file, wire_add, &opts, progress).await
}

/// Striped MODE E upload: `range` is cut into one contiguous part per stripe (in proportion to its connections),
/// each sent over that stripe's connections by its own engine, which ends the stripe with its own EOF (GFD.20:
/// one EOF per stripe). The parts' reports are merged; the engine CRC is kept only if it covers the whole
/// range (verification otherwise re-reads the file). Returns the bytes per stripe.
async fn send_striped(
    groups: Vec<Vec<TcpStream>>,
    file: Arc<dyn FileHandle>,
    range: Range<u64>,
    wire_sub: u64,
    opts: DataOpts,
    progress: Arc<Progress>,
) -> Result<(DataReport, Vec<u64>), DataError> {
    let parts = split_range(range, &groups.iter().map(Vec::len).collect::<Vec<_>>());
    let mut sends = tokio::task::JoinSet::new();
    for (i, (socks, part)) in groups.into_iter().zip(parts).enumerate() {
        let (file, opts, progress) = (file.clone(), opts.clone(), progress.clone());
        sends.spawn(async move {
            let socks = crate::tls::protect_client_all(socks, &opts).await?;
            let r = data::send_mode_e(socks, file, vec![part], wire_sub, &opts, progress).await?;
            Ok::<_, DataError>((i, r))
        });
    }
    let mut reports = Vec::with_capacity(sends.len());
    while let Some(j) = sends.join_next().await {
        // The first failure returns at once; dropping `sends` aborts the other stripes.
        let j = j.map_err(|e| DataError::Io(std::io::Error::other(format!("stripe task: {e}"))))?;
        reports.push(j?);
    }
    reports.sort_by_key(|(i, _)| *i);
    let reports: Vec<DataReport> = reports.into_iter().map(|(_, r)| r).collect();
    let stripes = reports.iter().map(|r| r.bytes).collect();
    let mut all = reports.into_iter();
    let mut merged = all.next().ok_or_else(|| {
        DataError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no stripes",
        ))
    })?;
    for r in all {
        merged.bytes += r.bytes;
        merged.streams += r.streams;
        merged.ranges.extend(&r.ranges);
        merged.reusable.extend(r.reusable);
        merged.peak_buffer += r.peak_buffer;
        merged.peak_window += r.peak_window;
        merged.traces.extend(r.traces);
        // Parts after the first start past 0: no engine CRC of the whole.
        merged.crc32c = None;
    }
    Ok((merged, stripes))
}

/// `range` cut into consecutive parts, one per stripe, sized in proportion to `weights` (connections per
/// stripe); the last part takes the remainder. Empty parts are possible for tiny ranges.
fn split_range(range: Range<u64>, weights: &[usize]) -> Vec<Range<u64>> {
    let total: u128 = weights.iter().map(|w| *w.max(&1) as u128).sum();
    let len = (range.end - range.start) as u128;
    let mut at = range.start;
    let mut acc = 0u128;
    weights
        .iter()
        .enumerate()
        .map(|(i, w)| {
            acc += *w.max(&1) as u128;
            let end = if i + 1 == weights.len() {
                range.end
            } else {
                range.start + (len * acc / total) as u64
            };
            let part = at..end;
            at = end;
            part
        })
        .collect()
}

/// Accepts the server's MODE E connections into `tx` (each wrapped by `wrap`: a striped receive tags it with
/// its stripe), only from `peers`; any other is closed unread. Under PROT P each runs its TLS handshake (we are
/// the TLS client though the server connected, RFC 4217 §7) concurrently with further accepts, so 64 streams
/// cost about one extra round trip, not 64.
pub(crate) async fn accept_loop<T: Send + 'static>(
    listener: &TcpListener,
    tx: mpsc::Sender<T>,
    peers: &[IpAddr],
    opts: &DataOpts,
    wrap: impl Fn(crate::tls::MaybeTls) -> T + Clone + Send + 'static,
) {
    let want: Vec<IpAddr> = peers.iter().map(|p| p.to_canonical()).collect();
    // Handshakes in progress; aborted when this loop is dropped.
    let mut shaking = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            Some(_) = shaking.join_next(), if !shaking.is_empty() => continue,
        };
        match accepted {
            Ok((s, from)) => {
                if !want.contains(&from.ip().to_canonical()) {
                    tracing::warn!(
                        "refusing data connection from {from}: not the server or its stripes ({peers:?})"
                    );
                    continue;
                }
                tracing::debug!("data connection from {from}");
                if opts.tls_client.is_some() {
                    let (o, tx, wrap) = (opts.clone(), tx.clone(), wrap.clone());
                    shaking.spawn(async move {
                        match crate::tls::protect_client(s, &o).await {
                            Ok(s) => {
                                let _ = tx.send(wrap(s)).await;
                            }
                            Err(e) => tracing::warn!("data connection from {from}: TLS: {e}"),
                        }
                    });
                } else if tx.send(wrap(s.into())).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!("data listener: {e}");
                return;
            }
        }
    }
}
