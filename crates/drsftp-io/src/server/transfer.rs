//! Runs one `TransferPlan` from the server session: opens the file (a part file for uploads, committed only when
//! every byte arrived), gets data connections (passive accepts, active connects, or MODE E connections kept from
//! the previous transfer), hands them to the data engine (RETR/ERET with a `Parallelism` range: a dynamic MODE E
//! send steered by `AutoSender`, see [`send_auto`]), and turns the outcome into a `TransferResult`.
//! A whole file sent (RETR to EOF) also yields its CRC32C from the engine, for a following CKSM (`fs::SentCrc`).
//! A MODE E send to several SPOR addresses ([`send_striped`]) treats each address as one receiving stripe: the
//! plan's layout gives each its share, and each gets its own connections, EODs and EOF (GFD.20: exactly one EOF
//! per stripe, counting the connections made to that stripe).
//!
//! Passive accepts trust nobody: a connection from an address other than the plan's `data_peer` (the control
//! peer, or the sender named with `PEER`) is closed unread and logged (target `audit`), and the accept goes on
//! until the data timeout, so a port scanner can neither read, inject nor end the victim's transfer. A transfer
//! takes at most `max_connections` data connections; extra ones are closed at once. Every task spawned here is
//! held in an `AbortOnDrop`, so nothing outlives the transfer (and the transfer task dies with its session).

use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use drsftp_proto::server::{DataEndpoint, Mode, Payload, Rest, TransferPlan, TransferResult};
use drsftp_storage::{BytesFile, FileHandle, PartFile, Storage, StorageError};
use drsftp_tune::{AutoConfig, BufferPolicy};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::fs::{self, SentCrc};
use crate::data::{self, AutoSender, DataError, DataOpts, DataReport, Progress};
use crate::task::AbortOnDrop;
use crate::tls::{protect_data, protect_data_all, MaybeTls};

/// MODE E connections left open after EOD, keyed by where they came from: the PORT/SPOR addresses we connected
/// to, or the passive listener addresses the client connected to.
#[derive(Debug)]
pub(crate) struct DataCache {
    pub(crate) key: Vec<SocketAddr>,
    /// TLS ones if they were opened under `PROT P`: a cache is used only by a transfer with the same protection.
    pub(crate) socks: Vec<MaybeTls>,
}

/// Everything a transfer task needs.
pub(crate) struct Job {
    pub(crate) plan: TransferPlan,
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) opts: DataOpts,
    pub(crate) passive: Vec<Arc<TcpListener>>,
    pub(crate) cache: Option<DataCache>,
    pub(crate) progress: Arc<Progress>,
    /// The UDP socket `BPAS` bound, for a plan on a blast channel.
    pub(crate) blast: Option<std::net::UdpSocket>,
    /// `PROT P` blast: AEAD keys from the control connection's TLS exporter (`None`: none could be derived, and
    /// a protected blast plan then fails rather than send cleartext).
    pub(crate) blast_keys: Option<drsftp_blast::Protection>,
    /// An upload's part file opened before the `150` (`fs::OpenSlot`); `None`: opened here.
    pub(crate) opened: Option<Box<dyn PartFile>>,
    /// How long to wait for a data connection (`ServerConfig::data_timeout`; zero: no limit of its own, the
    /// session's data timer still ends the transfer).
    pub(crate) accept_timeout: Duration,
    /// Where blast transfers count their loss and duplicates.
    pub(crate) metrics: Option<Arc<super::metrics::Metrics>>,
    /// Set once a blast send has found its file whole and settled: its sender's CRC will answer a CKSM of it
    /// (`fs::SentCrc`), so the session need not prefetch that digest (a second read of the file).
    pub(crate) engine_crc: Arc<std::sync::atomic::AtomicBool>,
}

/// Who may connect to the transfer's passive listeners, and for how long we wait.
#[derive(Debug, Clone, Copy)]
struct Accept {
    peer: Option<IpAddr>,
    timeout: Duration,
}

/// Run the job; returns the result for the session, the connections worth keeping, and the CRC32C of a whole file
/// sent (see `fs::SentCrc`).
pub(crate) async fn run(job: Job) -> (TransferResult, Option<DataCache>, Option<SentCrc>) {
    let mut sent = None;
    match run_inner(job, &mut sent).await {
        Ok((bytes, streams, cache)) => (TransferResult::Ok { bytes, streams }, cache, sent),
        Err(e) => {
            tracing::info!("transfer failed: {e}");
            (
                TransferResult::Failed {
                    code: e.reply_code(),
                    message: e.to_string(),
                },
                None,
                None,
            )
        }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StorageError> + Send + 'static,
) -> Result<T, DataError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| DataError::Io(std::io::Error::other(e.to_string())))?
        .map_err(DataError::Storage)
}

/// `path`'s stat (`None` if it fails), the moment it was taken and the file opened after it: a stat taken
/// before the read is what makes an engine CRC safe to reuse (`fs::SentCrc`).
pub(super) async fn stat_then_open(
    storage: &Arc<dyn Storage>,
    path: &str,
) -> Result<
    (
        Option<drsftp_storage::Metadata>,
        SystemTime,
        Arc<dyn FileHandle>,
    ),
    DataError,
> {
    let looked = SystemTime::now();
    let (st, p) = (storage.clone(), path.to_string());
    let before = blocking(move || st.stat(&p)).await.ok();
    let (st, p) = (storage.clone(), path.to_string());
    let file = blocking(move || st.open_read(&p)).await?;
    Ok((before, looked, file))
}

async fn run_inner(
    job: Job,
    sent_crc: &mut Option<SentCrc>,
) -> Result<(u64, usize, Option<DataCache>), DataError> {
    let Job {
        plan,
        storage,
        mut opts,
        passive,
        cache,
        progress,
        blast,
        blast_keys,
        opened,
        accept_timeout,
        metrics,
        engine_crc,
    } = job;
    let accept = Accept {
        peer: plan.data_peer,
        timeout: accept_timeout,
    };
    if let DataEndpoint::Blast(ep) = &plan.endpoint {
        let sock = blast
            .ok_or_else(|| DataError::Incomplete("the UDP socket bound for BPAS is gone".into()))?;
        let protection = if plan.protect {
            // Never cleartext once PROT P is in force.
            blast_keys.ok_or_else(|| {
                DataError::Incomplete("PROT P: no TLS keys for the blast channel".into())
            })?
        } else {
            drsftp_blast::Protection::None
        };
        return super::blast::run(
            ep,
            sock,
            plan.payload.clone(),
            &plan.resume,
            (storage, opened),
            progress,
            &protection,
            metrics.as_deref(),
            (sent_crc, &engine_crc),
        )
        .await;
    }
    if plan.protect && plan.tls_client {
        // SSCN ON: we are the TLS client of a server-to-server data channel, checking the other server by the
        // fingerprint the user's client pinned (else by the system roots and its address).
        let peer = match &plan.endpoint {
            DataEndpoint::Active(a) => a.first().map(|a| a.ip()),
            _ => plan.data_peer,
        };
        let trust = match plan.tls_peer_pin {
            Some(p) => crate::tls::Trust::Fingerprint(p),
            None => crate::tls::Trust::SystemRoots,
        };
        let name = peer.map_or_else(|| "0.0.0.0".to_string(), |ip| ip.to_string());
        let tls = crate::tls::client_config(&trust)
            .and_then(|c| crate::tls::TlsClient::new(c, &name))
            .map_err(|e| DataError::Io(std::io::Error::other(e.to_string())))?;
        opts.tls_client = Some(tls);
    }
    if let Some(b) = plan.tcp_buffer {
        // The client's size (already capped at max_buffer by the session): never forced past rmem_max/wmem_max.
        opts.buffer = BufferPolicy::Fixed(b);
        opts.peer_buffers = true;
    }
    // MODE E SBUF headers (0x02/0x01) only for a client that sent OPTS DRS Inband=1; (never for Globus).
    opts.inband_sbuf = plan.inband_drs;
    match plan.payload.clone() {
        Payload::SendFile {
            path,
            mut ranges,
            to_eof,
            wire_sub,
        } => {
            let (before, looked, file) = stat_then_open(&storage, &path).await?;
            let mut whole = None;
            if to_eof {
                let len = file.len().map_err(DataError::Storage)?;
                if let Some(last) = ranges.last_mut() {
                    last.end = len;
                }
                ranges.retain(|r| r.start < r.end);
                let all = ranges.is_empty() || (ranges.len() == 1 && ranges[0] == (0..len));
                whole = before.filter(|m| all && m.size == len && fs::settled(m.modified, looked));
            }
            opts.crc32c = whole.is_some();
            let (bytes, streams, cache, crc) = send(
                &plan, file, ranges, wire_sub, &opts, passive, accept, cache, progress,
            )
            .await?;
            if let Some(c) = SentCrc::of_send(path, whole, bytes, crc) {
                *sent_crc = Some(c);
            }
            Ok((bytes, streams, cache))
        }
        Payload::SendListing { path, format } => {
            let sock = stream_socket(&plan.endpoint, &passive, accept, &opts).await?;
            let sock = crate::tls::protect_server(sock, plan.protect, &opts).await?;
            let bytes = super::listing::send(sock, storage, path, format, progress).await?;
            Ok((bytes, 1, cache))
        }
        Payload::SendBytes(bytes) => {
            let len = bytes.len() as u64;
            let file: Arc<dyn FileHandle> = Arc::new(BytesFile::new(bytes));
            let plan = TransferPlan {
                mode: Mode::Stream,
                ..plan
            };
            let whole = 0..len;
            send(
                &plan,
                file,
                vec![whole],
                0,
                &opts,
                passive,
                accept,
                None,
                progress,
            )
            .await
            .map(|(b, s, _, _)| (b, s, cache))
        }
        Payload::RecvFile {
            path,
            write_mode,
            offset,
            expected,
            keep: kept,
        } => {
            let key = listener_key(&passive);
            // Connections the client kept from the previous MODE E upload to these listeners carry this one too.
            let cache = cache.filter(|c| c.key == key && plan.mode == Mode::Extended);
            let claimed = plan.restart.as_ref().map(Rest::held);
            if let Some(k) = kept.filter(|_| plan.mode == Mode::Extended) {
                let st = storage.clone();
                let resume = claimed.is_some();
                let size = k.id.size;
                match blocking(move || st.kept_open(&k.id, resume, &k.limits)).await? {
                    Some((part, held)) => {
                        let up = super::kept::KeptUpload::start(
                            part,
                            &held,
                            claimed,
                            size,
                            progress.clone(),
                        );
                        tracing::debug!("resumable upload of {path}: {} bytes held", up.resumed());
                        let r = recv(
                            &plan,
                            up.handle(),
                            0,
                            &opts,
                            passive,
                            accept,
                            cache,
                            progress,
                        )
                        .await;
                        let report = up.finish(r).await?;
                        let cache = keep(key, report.reusable);
                        return Ok((report.bytes, report.streams, cache));
                    }
                    // The ranges claimed are in a partial we cannot open: sending only the gaps would be wrong.
                    None if resume => {
                        return Err(DataError::Incomplete(
                            "the partial upload is no longer kept or in use by another transfer"
                                .into(),
                        ))
                    }
                    None => {}
                }
            }
            let part = fs::part_for(opened, storage, path, write_mode).await?;
            let r = recv(
                &plan,
                part.handle(),
                offset,
                &opts,
                passive,
                accept,
                cache,
                progress,
            )
            .await;
            finish_upload(part, r, write_mode, offset, expected, key).await
        }
    }
}

/// Check an upload is complete, then commit it; otherwise the part file is discarded.
pub(super) async fn finish_upload(
    part: Box<dyn PartFile>,
    r: Result<DataReport, DataError>,
    write_mode: drsftp_storage::WriteMode,
    offset: u64,
    expected: Option<u64>,
    key: Vec<SocketAddr>,
) -> Result<(u64, usize, Option<DataCache>), DataError> {
    let report = match r {
        Ok(r) => r,
        Err(e) => {
            part.abort();
            return Err(e);
        }
    };
    // A replaced file must be one contiguous run from its start; an announced size must be reached.
    let holes = match write_mode {
        drsftp_storage::WriteMode::Replace => {
            let end = report.ranges.ranges().last().map_or(0, |r| r.end);
            !report.ranges.gaps(offset..end).is_empty()
        }
        drsftp_storage::WriteMode::InPlace => false,
    };
    let short = expected.is_some_and(|e| report.bytes < e);
    if holes || short {
        part.abort();
        return Err(DataError::Incomplete(format!(
            "received {} bytes in ranges {} (expected {})",
            report.bytes,
            report.ranges,
            expected.map_or("no size".into(), |e| e.to_string())
        )));
    }
    blocking(move || part.commit()).await?;
    let cache = keep(key, report.reusable);
    Ok((report.bytes, report.streams, cache))
}

fn keep(key: Vec<SocketAddr>, socks: Vec<MaybeTls>) -> Option<DataCache> {
    (!socks.is_empty()).then_some(DataCache { key, socks })
}

/// The next connection on `l` from the expected peer; connections from elsewhere are closed unread and
/// logged, and the wait goes on (a hijacker must not end the victim's transfer either).
async fn accept_peer(l: &TcpListener, peer: Option<IpAddr>) -> std::io::Result<TcpStream> {
    loop {
        let (s, from) = l.accept().await?;
        match peer {
            Some(ip) if from.ip().to_canonical() != ip.to_canonical() => {
                let local = l.local_addr().ok();
                tracing::warn!(
                    target: "audit",
                    "data connection from {from} to passive port {local:?} refused: expected {ip}"
                );
                drop(s);
            }
            _ => {
                // Counted by tests that check a batch keeps one connection for many files.
                tracing::debug!("data connection from {from} accepted");
                return Ok(s);
            }
        }
    }
}

/// [`accept_peer`] within the accept timeout.
async fn accept_one(l: &TcpListener, a: Accept) -> Result<TcpStream, DataError> {
    let fut = accept_peer(l, a.peer);
    let r = if a.timeout.is_zero() {
        Ok(fut.await)
    } else {
        tokio::time::timeout(a.timeout, fut).await
    };
    match r {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(DataError::Io(e)),
        Err(_) => Err(DataError::Timeout),
    }
}

/// MODE E to several receiving stripes: `socks` holds `per` connections to each SPOR address in order; stripe `i`
/// gets the share of `ranges` the plan's layout gives it, over its own connections, ending with its own EOF
/// counting `per` EODs. A stripe whose share is empty still gets its EOF (the receiver waits for one per stripe).
/// Bytes sent and every connection back for reuse, in the order given. No whole-file CRC: the stripes read
/// separate pieces.
#[allow(clippy::too_many_arguments)]
async fn send_striped(
    plan: &TransferPlan,
    socks: &mut Vec<MaybeTls>,
    per: usize,
    file: Arc<dyn FileHandle>,
    ranges: Vec<Range<u64>>,
    wire_sub: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<(u64, Vec<MaybeTls>), DataError> {
    // Shares are cut from the ranges as they will be sent: merged and clipped to the file now.
    let len = file.len().map_err(DataError::Storage)?;
    let mut set = drsftp_proto::ranges::RangeSet::new();
    for r in ranges {
        let r = r.start..r.end.min(len);
        if r.start < r.end {
            set.insert(r);
        }
    }
    let stripes = socks.len() / per;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..stripes {
        let group: Vec<MaybeTls> = socks.drain(..per).collect();
        let share = plan.layout.share(set.ranges(), stripes, i);
        let (file, opts, progress) = (Arc::clone(&file), opts.clone(), Arc::clone(&progress));
        tasks.spawn(async move {
            let r = data::send_mode_e(group, file, share, wire_sub, &opts, progress).await;
            (i, r)
        });
    }
    let mut bytes = 0;
    let mut back: Vec<Option<Vec<MaybeTls>>> = (0..stripes).map(|_| None).collect();
    // The first failure returns at once; dropping `tasks` aborts the other stripes.
    while let Some(j) = tasks.join_next().await {
        let (i, r) = j.map_err(|e| data::join_error("striped send", e))?;
        let r = r?;
        bytes += r.bytes;
        back[i] = Some(r.reusable);
    }
    Ok((bytes, back.into_iter().flatten().flatten().collect()))
}

/// The one stream-mode data connection: accepted on our passive listener, or made to the client's PORT address.
async fn stream_socket(
    ep: &DataEndpoint,
    passive: &[Arc<TcpListener>],
    accept: Accept,
    opts: &DataOpts,
) -> Result<TcpStream, DataError> {
    match ep {
        DataEndpoint::Passive => accept_one(first_listener(passive)?, accept).await,
        DataEndpoint::Active(addrs) => connect_first(addrs, opts).await,
        DataEndpoint::Blast(_) => Err(DataError::Incomplete(
            "internal: a blast plan on the TCP path".into(),
        )),
    }
}

fn first_listener(passive: &[Arc<TcpListener>]) -> Result<&TcpListener, DataError> {
    passive
        .first()
        .map(|l| l.as_ref())
        .ok_or_else(|| DataError::Incomplete("no passive listener (send PASV first)".into()))
}

#[allow(clippy::too_many_arguments)]
async fn send(
    plan: &TransferPlan,
    file: Arc<dyn FileHandle>,
    ranges: Vec<Range<u64>>,
    wire_sub: u64,
    opts: &DataOpts,
    passive: Vec<Arc<TcpListener>>,
    accept: Accept,
    cache: Option<DataCache>,
    progress: Arc<Progress>,
) -> Result<(u64, usize, Option<DataCache>, Option<u32>), DataError> {
    // Kept connections carry the next transfer only under the same PROT (a cleartext one never turns TLS).
    let cache = cache.filter(|c| c.socks.iter().all(|s| s.is_tls() == plan.protect));
    match (plan.mode, &plan.endpoint) {
        (_, DataEndpoint::Blast(_)) => Err(DataError::Incomplete(
            "internal: a blast plan on the TCP path".into(),
        )),
        (Mode::Stream, ep) => {
            let sock = stream_socket(ep, &passive, accept, opts).await?;
            let sock = protect_data(sock, plan.protect, opts).await?;
            let range = ranges.first().cloned().unwrap_or(0..0);
            let r = data::send_stream(sock, file, range, opts, progress).await?;
            Ok((r.bytes, 1, None, r.crc32c))
        }
        (Mode::Extended, DataEndpoint::Active(addrs))
            if plan.parallelism_range.is_some() && addrs.len() == 1 =>
        {
            let (min, max) = plan.parallelism_range.unwrap_or((1, 1));
            send_auto(
                plan, addrs[0], min, max, file, ranges, wire_sub, opts, cache, progress,
            )
            .await
        }
        (Mode::Extended, DataEndpoint::Active(addrs)) => {
            let per = plan.parallelism.max(1) as usize;
            let mut socks = match cache {
                Some(c) if c.key == *addrs && c.socks.len() == per * addrs.len() => c.socks,
                _ => {
                    let each: Vec<SocketAddr> = addrs
                        .iter()
                        .flat_map(|a| std::iter::repeat_n(*a, per))
                        .collect();
                    let v = data::connect_each(&each, opts).await?;
                    // RFC 4217 §7: we connected, yet we are the TLS server (the client checks our certificate).
                    protect_data_all(v, plan.protect, opts).await?
                }
            };
            if addrs.len() > 1 {
                let (bytes, reusable) = send_striped(
                    plan, &mut socks, per, file, ranges, wire_sub, opts, progress,
                )
                .await?;
                return Ok((
                    bytes,
                    per * addrs.len(),
                    keep(addrs.clone(), reusable),
                    None,
                ));
            }
            let r = data::send_mode_e(socks, file, ranges, wire_sub, opts, progress).await?;
            Ok((
                r.bytes,
                r.streams,
                keep(addrs.clone(), r.reusable),
                r.crc32c,
            ))
        }
        (Mode::Extended, DataEndpoint::Passive) => {
            // Not GFD.20 (the sender connects), but harmless: serve whoever connects to our listener.
            let key = listener_key(&passive);
            let socks = match cache {
                Some(c) if c.key == key => c.socks,
                _ => {
                    let s = accept_one(first_listener(&passive)?, accept).await?;
                    vec![protect_data(s, plan.protect, opts).await?]
                }
            };
            let r = data::send_mode_e(socks, file, ranges, wire_sub, opts, progress).await?;
            Ok((r.bytes, r.streams, keep(key, r.reusable), r.crc32c))
        }
    }
}

/// `-p auto` on a download (`OPTS RETR Parallelism=<start>,<min>,<max>;` with min < max): a dynamic MODE E send
/// to the client's one PORT address, starting on `plan.parallelism` connections (or the cached ones if their
/// number is in range) and steered by `AutoSender` between `min` and `max`: streams join and retire while it
/// runs, the EOF count covers every connection used. Connections the controller opens after the end are kept.
#[allow(clippy::too_many_arguments)]
async fn send_auto(
    plan: &TransferPlan,
    addr: SocketAddr,
    min: u32,
    max: u32,
    file: Arc<dyn FileHandle>,
    ranges: Vec<Range<u64>>,
    wire_sub: u64,
    opts: &DataOpts,
    cache: Option<DataCache>,
    progress: Arc<Progress>,
) -> Result<(u64, usize, Option<DataCache>, Option<u32>), DataError> {
    let key = vec![addr];
    let range = min.max(1) as usize..=max.max(1) as usize;
    let cache = cache.filter(|c| c.socks.iter().all(|s| s.is_tls() == plan.protect));
    let socks = match cache {
        Some(c) if c.key == key && range.contains(&c.socks.len()) => c.socks,
        _ => {
            let start = plan.parallelism.clamp(min.max(1), max.max(1));
            let v = data::connect_each(&vec![addr; start as usize], opts).await?;
            protect_data_all(v, plan.protect, opts).await?
        }
    };
    let auto = AutoSender::new(AutoConfig {
        min_streams: min.max(1),
        max_streams: max.max(1),
        ..AutoConfig::default()
    });
    let connect_opts = opts.clone();
    let protect = plan.protect;
    // Streams added mid-transfer run the same handshake (as TLS server) before they join.
    let connect = move || {
        let o = connect_opts.clone();
        async move {
            let s = data::connect(addr, &o).await?;
            protect_data(s, protect, &o)
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))
        }
    };
    let r = auto
        .send(socks, connect, file, ranges, wire_sub, opts, progress)
        .await?;
    tracing::info!(
        streams = r.data.streams,
        final_streams = r.final_streams,
        steady = r.steady,
        actions = ?r.actions,
        "-p auto download (server side)"
    );
    Ok((
        r.data.bytes,
        r.data.streams,
        keep(key, r.data.reusable),
        r.data.crc32c,
    ))
}

async fn connect_first(addrs: &[SocketAddr], opts: &DataOpts) -> Result<TcpStream, DataError> {
    let a = addrs
        .first()
        .ok_or_else(|| DataError::Incomplete("no PORT address".into()))?;
    Ok(data::connect(*a, opts).await?)
}

fn listener_key(passive: &[Arc<TcpListener>]) -> Vec<SocketAddr> {
    passive.iter().filter_map(|l| l.local_addr().ok()).collect()
}

#[allow(clippy::too_many_arguments)]
async fn recv(
    plan: &TransferPlan,
    file: Arc<dyn FileHandle>,
    offset: u64,
    opts: &DataOpts,
    passive: Vec<Arc<TcpListener>>,
    accept: Accept,
    cache: Option<DataCache>,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    let cache = cache.filter(|c| c.socks.iter().all(|s| s.is_tls() == plan.protect));
    match (plan.mode, &plan.endpoint) {
        (_, DataEndpoint::Blast(_)) => Err(DataError::Incomplete(
            "internal: a blast plan on the TCP path".into(),
        )),
        (Mode::Stream, ep) => {
            let sock = stream_socket(ep, &passive, accept, opts).await?;
            let sock = protect_data(sock, plan.protect, opts).await?;
            data::recv_stream(sock, file, offset, opts, progress).await
        }
        (Mode::Extended, ep) => {
            let max = plan.max_connections.max(1) as usize;
            let (tx, rx) = mpsc::channel(max);
            let mut taken = 0;
            if let Some(c) = cache {
                for s in c.socks.into_iter().take(max) {
                    let _ = tx.try_send(s);
                    taken += 1;
                }
            }
            // Held: dropping it (when this transfer ends, however) stops the accept loops and closes nothing
            // else; the listeners themselves belong to the session.
            let _feeder = match ep {
                DataEndpoint::Passive => {
                    if passive.is_empty() {
                        return Err(DataError::Incomplete("no passive listener".into()));
                    }
                    let tls = plan.protect.then(|| opts.clone());
                    AbortOnDrop::spawn(feed(passive, accept.peer, tls, tx, taken, max))
                }
                DataEndpoint::Blast(_) => unreachable!(),
                DataEndpoint::Active(addrs) => {
                    // Also not GFD.20 (the receiver connects): one connection per address.
                    let mut socks = vec![];
                    for a in addrs.iter().take(max.saturating_sub(taken)) {
                        socks.push(data::connect(*a, opts).await?);
                    }
                    let socks = protect_data_all(socks, plan.protect, opts).await?;
                    AbortOnDrop::spawn(async move {
                        for s in socks {
                            let _ = tx.send(s).await;
                        }
                    })
                }
            };
            data::recv_mode_e(rx, file, offset, opts, progress).await
        }
    }
}

/// A MODE E receive's accept loops: connections from the expected peer go to the receiver (it takes joiners
/// mid-transfer, as `-p auto` uploads open them), up to `max` in all (`taken` already); any beyond are closed at
/// once. Ends when the receiver is gone; its per-listener loops are held, so they end with it. With `tls` (`PROT P`)
/// every connection first completes a TLS handshake with us as server, concurrently with the accepts (a peer that
/// never finishes its handshake delays nobody else); one that fails it is dropped.
async fn feed(
    listeners: Vec<Arc<TcpListener>>,
    peer: Option<IpAddr>,
    tls: Option<DataOpts>,
    tx: mpsc::Sender<MaybeTls>,
    taken: usize,
    max: usize,
) {
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(taken));
    let loops: Vec<AbortOnDrop<()>> = listeners
        .into_iter()
        .map(|l| {
            let tx = tx.clone();
            let count = count.clone();
            let tls = tls.clone();
            AbortOnDrop::spawn(async move {
                // Handshakes in progress; dropped (aborted) with this loop.
                let mut shaking = tokio::task::JoinSet::new();
                loop {
                    let s = tokio::select! {
                        r = accept_peer(&l, peer) => match r {
                            Ok(s) => s,
                            Err(_) => break,
                        },
                        Some(_) = shaking.join_next(), if !shaking.is_empty() => continue,
                    };
                    use std::sync::atomic::Ordering;
                    if count.fetch_add(1, Ordering::Relaxed) >= max {
                        tracing::warn!(
                            target: "audit",
                            "data connection from {:?} closed: the transfer has its {max} connections",
                            s.peer_addr().ok()
                        );
                        continue;
                    }
                    match &tls {
                        None => {
                            if tx.send(MaybeTls::Plain(s)).await.is_err() {
                                break;
                            }
                        }
                        Some(o) => {
                            let (o, tx) = (o.clone(), tx.clone());
                            shaking.spawn(async move {
                                match protect_data(s, true, &o).await {
                                    Ok(s) => {
                                        let _ = tx.send(s).await;
                                    }
                                    Err(e) => tracing::info!("data connection TLS handshake: {e}"),
                                }
                            });
                        }
                    }
                }
            })
        })
        .collect();
    drop(tx);
    // Awaited in place (never taken out of its guard), so dropping this future aborts every loop.
    for mut l in loops {
        if let Some(h) = l.0.as_mut() {
            let _ = h.await;
        }
    }
}
