//! One control connection: reads command bytes into the sans-IO `ServerSession`, writes its replies, and carries
//! out its actions — filesystem requests on blocking threads, passive listeners, one transfer task at a time —
//! feeding results, progress and timeouts back in. Ends on QUIT, idle timeout, peer close or server shutdown.
//! Every task it spawns is held in an `AbortOnDrop`, and passive listeners live only here and in the transfer
//! that uses them: a listener serves one transfer (kept only while the MODE E connections it brought are kept
//! for the next one), a new PASV replaces it, and nothing outlives the session however it ends.
//! Stream-mode DRS on the control channel (docs/drs.md §4.4, only after `OPTS DRS Inband=1;`): `SBUF <id> <size>`
//! during a download resizes the running data socket's SO_SNDBUF; during an upload the receiving engine's DRS
//! announcements go out as `126 SBUF <id> <size>`.
//! Logins are checked on the blocking pool (argon2), against the server-wide per-address failure count; a user
//! with a root of their own is served from it for the rest of the session. Logins, namespace changes and
//! transfers are logged as `tracing` events with target `audit` ([`super::audit`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use drsftp_proto::server::{
    Action, AuditEvent, DataEndpoint, FsRequest, FsResult, LoginVerdict, Mode, Payload,
    ServerSession, TransferProgress, TransferResult,
};
use drsftp_storage::Storage;
use tokio::io::{AsyncReadExt, AsyncWriteExt, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use super::limits::Shared;
use super::ops::{Done, TransferInfo};
use super::transfer::{self, DataCache, Job};
use super::users::Grant;
use super::{audit, fs, ServerParams};
use crate::data::Progress;
use crate::task::AbortOnDrop;
use crate::tls::MaybeTls;

/// How long ABOR waits for a running transfer to end by itself before stopping it: one failing on its own (disk
/// full) reports its reason instead of `426`.
const ABOR_GRACE: Duration = Duration::from_millis(1000);

/// How often a running transfer's counters are handed to the session (for 111/112 markers).
const PROGRESS_TICK: Duration = Duration::from_millis(500);

struct Running {
    id: u64,
    /// What the audit log says about it: command kind and path (none for listings).
    audit: Option<(&'static str, String)>,
    task: AbortOnDrop<(TransferResult, Option<DataCache>, Option<fs::SentCrc>)>,
    progress: Arc<Progress>,
    /// What the transfer log and metrics say about it (none for listings).
    info: Option<TransferInfo>,
    /// How long ABOR lets it end by itself ([`ABOR_GRACE`], or none for a blast send).
    grace: Duration,
    /// The transfer's engine will answer a CKSM of its file (`transfer::Job::engine_crc`).
    engine_crc: Arc<std::sync::atomic::AtomicBool>,
}

async fn flush(s: &mut ServerSession, wr: &mut WriteHalf<MaybeTls>) -> std::io::Result<()> {
    while let Some(bytes) = s.poll_transmit() {
        wr.write_all(&bytes).await?;
    }
    Ok(())
}

/// Serve one control connection until it ends.
pub(crate) async fn run(
    sock: TcpStream,
    peer: SocketAddr,
    params: Arc<ServerParams>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let local = sock.local_addr()?;
    let _ = sock.set_nodelay(true);
    // Cleartext until `AUTH TLS` (Action::StartTls), then the same halves over TLS.
    let (mut rd, mut wr) = tokio::io::split(MaybeTls::Plain(sock));
    let t0 = Instant::now();
    let mut s = ServerSession::new(t0, params.session.clone(), local, peer);
    // Every address of this host, not only the one the client reached: a third-party data address naming any
    // of them would make the server connect to itself (bounce). Read per session, as interfaces come and go.
    s.add_own_addrs(drsftp_sys::ifaddrs::local_addrs());
    let epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    s.set_epoch(t0, epoch);
    let (fs_tx, mut fs_rx) = mpsc::channel::<FsResult>(1);
    let (login_tx, mut login_rx) = mpsc::channel::<Option<Grant>>(1);
    // The tree this session serves: the server's until a user with a root of their own logs in.
    let mut storage: Arc<dyn Storage> = params.storage.clone();
    // The logged-in user, for the audit log.
    let mut user = String::from("-");
    let mut running: Option<Running> = None;
    // Filesystem requests in flight (the session waits for each answer, so rarely more than one).
    let mut fs_tasks: Vec<AbortOnDrop<()>> = vec![];
    let mut passive: Vec<Arc<TcpListener>> = vec![];
    let mut cache: Option<DataCache> = None;
    // The CRC32C of the last whole file sent, for a following CKSM; dropped by anything that may change files.
    let mut sent_crc: Option<fs::SentCrc> = None;
    // A CKSM's digest being computed while the transfer ahead of it runs (`Action::Prefetch`), with its request.
    // Dropping it (the session ends, a command changes files) stops that work.
    let mut prefetch: Option<(
        FsRequest,
        tokio::task::JoinHandle<Option<fs::Prefetched>>,
        fs::StopOnDrop,
    )> = None;
    // A STOR's part file opened before its 150 (`FsRequest::OpenWrite`), for the transfer that follows.
    let opened = fs::OpenSlot::default();
    let mut blast_sock: Option<std::net::UdpSocket> = None;
    // A striped frontend: data goes through the movers' control sessions (`frontend.rs`).
    let mut frontend = params.movers.clone().map(super::frontend::Frontend::new);
    let mut buf = vec![0u8; 16 * 1024];
    let mut tick = tokio::time::interval(PROGRESS_TICK);
    let mut close = false;
    loop {
        flush(&mut s, &mut wr).await?;
        while let Some(ev) = s.poll_event() {
            let AuditEvent::Login {
                user: name,
                anonymous,
                ok,
                read_only,
            } = &ev;
            audit::login(peer, name, *anonymous, *ok, *read_only);
            if *ok {
                if let Some(f) = &frontend {
                    f.warm();
                }
                user.clone_from(name);
                if *anonymous {
                    storage = params.storage.clone();
                    if let Some(f) = frontend.as_mut() {
                        f.set_root(None);
                    }
                }
            }
        }
        while let Some(action) = s.poll_action() {
            let now = Instant::now();
            match action {
                Action::Fs(req) => {
                    let st = storage.clone();
                    let tx = fs_tx.clone();
                    let sent = sent_crc.clone();
                    let changes = audit::changes(&req);
                    if changes {
                        sent_crc = None;
                        prefetch = None;
                    }
                    // The CKSM whose digest was started early: its answer waits for that work, not a new read.
                    let pre = match prefetch.take() {
                        Some((r, h, stop)) if r == req => Some((h, stop)),
                        other => {
                            prefetch = other;
                            None
                        }
                    };
                    let who = user.clone();
                    let movers = frontend.as_ref().and_then(|f| f.checksum_by_movers(&req));
                    let slot = opened.clone();
                    fs_tasks.retain(|t| t.0.as_ref().is_some_and(|h| !h.is_finished()));
                    fs_tasks.push(AbortOnDrop::spawn(async move {
                        let shown = changes.then(|| req.clone());
                        let r = match movers {
                            Some(m) => m.run(st, req).await,
                            None if matches!(req, FsRequest::OpenWrite { .. }) => {
                                fs::open_upload(st, req, slot).await
                            }
                            None => {
                                let pre = match pre {
                                    Some((h, _stop)) => h.await.ok().flatten(),
                                    None => None,
                                };
                                fs::execute_prefetched(st, req, sent, pre).await
                            }
                        };
                        if let Some(req) = shown {
                            audit::fs(peer, &who, &req, &r);
                        }
                        let _ = tx.send(r).await;
                    }));
                }
                // A whole blast send of a settled file: its sender's CRC will answer, no second read. (Decided when
                // the send has looked at the file; a CKSM offered before that is prefetched anyway.)
                Action::Prefetch(_)
                    if running.as_ref().is_some_and(|r| {
                        r.engine_crc.load(std::sync::atomic::Ordering::Relaxed)
                    }) => {}
                Action::Prefetch(req) if frontend.is_none() => {
                    // The CKSM behind a blast (or partial) send: hash while the data moves, so its answer (the
                    // final check, or the blast set-up after an auto switch) does not wait for a whole read.
                    let st = storage.clone();
                    let r = req.clone();
                    let (stop, flag) = fs::StopOnDrop::new();
                    let h =
                        tokio::task::spawn_blocking(move || fs::Prefetched::compute(&st, r, &flag));
                    prefetch = Some((req, h, stop));
                }
                // A striped frontend's movers compute CKSM on their shares when asked.
                Action::Prefetch(_) => {}
                Action::CheckLogin {
                    user: name,
                    password,
                } => {
                    if shared.login_blocked(peer.ip(), now) {
                        if let Some(m) = &params.ops.metrics {
                            m.login_failed();
                        }
                        s.handle_login(now, LoginVerdict::Blocked);
                    } else {
                        // The users of the last reload (SIGHUP), else those the server started with.
                        let users = params
                            .ops
                            .live
                            .users()
                            .unwrap_or_else(|| params.users.clone());
                        let tx = login_tx.clone();
                        let slots = shared.login_slots();
                        // argon2 takes tens of milliseconds of CPU by design: never on the runtime's threads, and
                        // with a permit, so logins together hold at most cores × its memory.
                        tokio::spawn(async move {
                            let Ok(_permit) = slots.acquire_owned().await else {
                                let _ = tx.send(None).await; // never closed; a refusal if it were
                                return;
                            };
                            let grant = tokio::task::spawn_blocking(move || {
                                users.verify(&name, &password.0)
                            })
                            .await
                            .ok()
                            .flatten();
                            let _ = tx.send(grant).await;
                        });
                    }
                }
                Action::Listen { count, .. } if frontend.is_some() => {
                    let f = frontend.as_mut().expect("guarded");
                    let r = f.listen(count).await;
                    s.handle_listening(now, r);
                }
                Action::Listen { ip, count } => {
                    passive.clear();
                    let mut addrs = vec![];
                    let mut err = None;
                    for _ in 0..count.max(1) {
                        // In --data-ports if set; a range with no free port fails the bind, which is 425.
                        match params.ops.listen(ip, &params.data).await {
                            Ok(l) => {
                                if let Ok(a) = l.local_addr() {
                                    addrs.push(a);
                                }
                                passive.push(Arc::new(l));
                            }
                            Err(e) => err = Some(e.to_string()),
                        }
                    }
                    let r = match err {
                        Some(e) => Err(e),
                        None => Ok(addrs),
                    };
                    s.handle_listening(now, r);
                }
                Action::Transfer(plan) => {
                    sent_crc = None;
                    // A striped frontend's movers write the upload: what it opened here is dropped (removed).
                    let part =
                        fs::take_opened(&opened, &plan.payload).filter(|_| frontend.is_none());
                    let progress = Arc::new(Progress::new());
                    // Control-channel DRS only for a client that opted in (never Globus), in stream mode.
                    if s.drs_inband()
                        && plan.mode == Mode::Stream
                        && !matches!(plan.endpoint, DataEndpoint::Blast(_))
                    {
                        let receiving = matches!(plan.payload, Payload::RecvFile { .. });
                        progress.sbuf().enable(receiving);
                    }
                    let id = plan.id;
                    let what = audit::transfer_of(&plan.payload);
                    let info = TransferInfo::of(&plan, &params.data.buffer);
                    if let (Some(m), Some(_)) = (&params.ops.metrics, &info) {
                        m.track(&progress);
                    }
                    if let Some(f) = &frontend {
                        let job = f.transfer(plan, storage.clone(), progress.clone());
                        running = Some(Running {
                            id,
                            audit: what,
                            task: AbortOnDrop::spawn(async move { (job.await, None, None) }),
                            progress,
                            info,
                            grace: ABOR_GRACE,
                            engine_crc: Arc::default(),
                        });
                        continue;
                    }
                    // A blast sender cannot see the client leave (no connection breaks), so it never ends on its own
                    // after ABOR: waiting would only keep it sending into a path the client has left (for
                    // `--transport auto`'s probe, the path its TCP leg is about to use) and delay the reply.
                    let grace = if matches!(plan.endpoint, DataEndpoint::Blast(_))
                        && !matches!(plan.payload, Payload::RecvFile { .. })
                    {
                        Duration::ZERO
                    } else {
                        ABOR_GRACE
                    };
                    let blast = super::blast::take_socket(&plan, &mut blast_sock);
                    // PROT P blast: AEAD keys from this control connection's TLS session and the transfer's
                    // parameters. The exporter needs the whole stream, so the halves are joined for a moment.
                    let blast_keys = match super::blast::plan_params(&plan) {
                        Some((p, dir)) if plan.protect => {
                            let tls = rd.unsplit(wr);
                            let k = crate::blast::blast_keys(&tls, &p, dir);
                            (rd, wr) = tokio::io::split(tls);
                            k
                        }
                        _ => None,
                    };
                    let engine_crc = Arc::new(std::sync::atomic::AtomicBool::new(false));
                    let job = Job {
                        plan,
                        storage: storage.clone(),
                        opts: params.data.clone(),
                        passive: passive.clone(),
                        cache: cache.take(),
                        progress: progress.clone(),
                        blast,
                        blast_keys,
                        opened: part,
                        accept_timeout: params.session.data_timeout,
                        metrics: params.ops.metrics.clone(),
                        engine_crc: engine_crc.clone(),
                    };
                    running = Some(Running {
                        id,
                        audit: what,
                        task: AbortOnDrop::spawn(transfer::run(job)),
                        progress,
                        info,
                        grace,
                        engine_crc,
                    });
                }
                Action::Abort => {
                    // ABOR, or the session's data timeout: wait for the task to be gone (its part file removed)
                    // before the reply.
                    if let Some(mut r) = running.take() {
                        // A transfer failing for its own reason (a full disk's 452) keeps that reply: the client
                        // aborts because the failure broke its data connections, often before the task has
                        // cleaned up. It gets ABOR_GRACE to end by itself; a healthy transfer is stopped then.
                        let mut result = TransferResult::Aborted;
                        if let Some(mut t) = r.task.0.take() {
                            match tokio::time::timeout(r.grace, &mut t).await {
                                Ok(Ok((res @ TransferResult::Failed { .. }, _, _))) => result = res,
                                Ok(_) => {}
                                Err(_) => {
                                    t.abort();
                                    let _ = t.await;
                                }
                            }
                        }
                        passive.clear();
                        if let Some((cmd, path)) = &r.audit {
                            audit::transfer(peer, &user, cmd, path, r.progress.bytes(), &result);
                        }
                        transfer_done(&params, &r, peer, &user, &result, None);
                        s.handle_transfer_done(Instant::now(), r.id, result);
                        record_sbuf(&params, &r.progress);
                    }
                }
                Action::SetBuffer { id, size } => {
                    // Control-channel `SBUF <id> <size>` from a DRS client (only after OPTS DRS Inband=1;; the
                    // session already queued `200 SBUF <id> <size>`). A stream-mode send follows the receiver's
                    // buffer: SO_SNDBUF on the running data socket (held until it is open). MODE E resizes in-band.
                    let applied = running
                        .as_ref()
                        .and_then(|r| r.progress.sbuf().apply_sndbuf(id, size));
                    tracing::debug!("SBUF {id} {size}: send buffer {applied:?}");
                }
                Action::BlastBind { ip } => {
                    blast_sock = None;
                    let r = match super::blast::bind(ip, &params.ops) {
                        Ok((sock, id)) => sock.local_addr().map(|a| {
                            blast_sock = Some(sock);
                            (a, id)
                        }),
                        Err(e) => Err(e),
                    };
                    s.handle_blast_bound(now, r.map_err(|e| e.to_string()));
                }
                Action::StartTls => {
                    // The `234` goes out in cleartext; every later byte either way is TLS. The session checked
                    // that nothing followed the AUTH line, and nothing has been read since.
                    flush(&mut s, &mut wr).await?;
                    let plain = rd.unsplit(wr).into_plain();
                    let (Some(tcp), Some(cfg)) = (plain, params.data.tls_server.as_ref()) else {
                        return Ok(());
                    };
                    let tls = crate::tls::accept(cfg, tcp).await?;
                    (rd, wr) = tokio::io::split(tls);
                }
                Action::Close => close = true,
            }
            flush(&mut s, &mut wr).await?;
        }
        if close || s.is_closed() {
            flush(&mut s, &mut wr).await?;
            let _ = wr.shutdown().await;
            return Ok(());
        }
        let deadline = s.poll_timeout().map(tokio::time::Instant::from_std);
        // The running stream-mode receive's DRS announcements (`126 SBUF`), when control-channel DRS is on.
        let sbuf = running
            .as_ref()
            .map(|r| r.progress.clone())
            .filter(|p| p.sbuf().is_enabled());
        tokio::select! {
            n = rd.read(&mut buf) => {
                if !matches!(n, Ok(n) if n > 0) {
                    // The client is gone mid-transfer (killed, connection lost): the transfer ends here, and is
                    // logged with what it moved (a resumed upload's second run is measured against it).
                    if let Some(mut r) = running.take() {
                        if let Some(t) = r.task.0.take() {
                            t.abort();
                            let _ = t.await;
                        }
                        if let Some((cmd, path)) = &r.audit {
                            audit::transfer(peer, &user, cmd, path, r.progress.bytes(), &TransferResult::Aborted);
                        }
                        transfer_done(&params, &r, peer, &user, &TransferResult::Aborted, None);
                    }
                }
                let n = n?;
                if n == 0 {
                    return Ok(());
                }
                s.handle_input(Instant::now(), &buf[..n]);
            }
            Some(r) = fs_rx.recv() => s.handle_fs(Instant::now(), r),
            Some(grant) = login_rx.recv() => {
                let now = Instant::now();
                match grant {
                    Some(g) => {
                        shared.login_succeeded(peer.ip());
                        storage = g.storage.unwrap_or_else(|| params.storage.clone());
                        if let Some(f) = frontend.as_mut() {
                            f.set_root(g.root);
                        }
                        s.handle_login(now, LoginVerdict::Granted { read_only: g.read_only });
                    }
                    None => {
                        shared.login_failed(peer.ip(), now);
                        if let Some(m) = &params.ops.metrics {
                            m.login_failed();
                        }
                        s.handle_login(now, LoginVerdict::Denied);
                    }
                }
            }
            done = async { running.as_mut().and_then(|r| r.task.0.as_mut()).expect("guarded").await }, if running.as_ref().is_some_and(|r| r.task.0.is_some()) => {
                let r = running.take().expect("guarded");
                let result = match done {
                    Ok((res, kept, crc)) => { cache = kept; sent_crc = crc; res }
                    Err(e) => TransferResult::Failed { code: 451, message: format!("transfer task: {e}") },
                };
                // One transfer per passive listener, unless its MODE E connections stay for the next transfer
                // (their cache is keyed by the listeners' addresses).
                if cache.is_none() {
                    passive.clear();
                }
                s.handle_progress(Instant::now(), progress_of(&r.progress));
                if let Some((cmd, path)) = &r.audit {
                    audit::transfer(peer, &user, cmd, path, r.progress.bytes(), &result);
                }
                transfer_done(&params, &r, peer, &user, &result, sent_crc.as_ref().map(|c| c.crc));
                s.handle_transfer_done(Instant::now(), r.id, result);
                record_sbuf(&params, &r.progress);
            }
            _ = async { sbuf.as_ref().expect("guarded").sbuf().probe_ready().await }, if sbuf.is_some() => {
                let link = sbuf.as_ref().expect("guarded").sbuf();
                for (id, size) in link.take_probes() {
                    // The session sends it only while a stream-mode receive runs for a client that opted in.
                    if s.send_sbuf_notice(Instant::now(), id, size) {
                        link.probe_sent(size);
                    }
                }
            }
            _ = tick.tick(), if running.is_some() => {
                if let Some(r) = running.as_ref() {
                    s.handle_progress(Instant::now(), progress_of(&r.progress));
                }
            }
            _ = sleep_until(deadline), if deadline.is_some() => s.handle_timeout(Instant::now()),
            _ = stop.changed() => {
                let _ = wr.write_all(b"421 Server shutting down.\r\n").await;
                let _ = wr.shutdown().await;
                return Ok(());
            }
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Adds a finished transfer's control-channel SBUF counts to the server's observer, if any.
fn record_sbuf(params: &ServerParams, p: &Progress) {
    let c = p.sbuf().counts();
    if c != Default::default() {
        tracing::debug!("control-channel SBUF: {c:?}");
        if let Some(o) = &params.data.sbuf_observer {
            o.record(&c);
        }
    }
}

/// Reports a file transfer's end to the transfer log and metrics.
fn transfer_done(
    params: &ServerParams,
    r: &Running,
    peer: SocketAddr,
    user: &str,
    result: &TransferResult,
    crc32c: Option<u32>,
) {
    if let Some(info) = &r.info {
        params.ops.transfer_done(&Done {
            info,
            peer,
            user,
            result,
            progress_bytes: r.progress.bytes(),
            streams_seen: r.progress.streams(),
            crc32c,
            kernel_copied: r.progress.kernel_copied(),
        });
    }
}

fn progress_of(p: &Progress) -> TransferProgress {
    TransferProgress {
        bytes: p.bytes(),
        ranges: p.ranges(),
        stripes: p.stripes(),
    }
}
