//! One transfer over the UDP blast channel: binds the UDP socket the session asks for (`BPAS`), starts the blast
//! sender (upload) or receiver (download) from `crate::blast` once the server's `150` describes the channel, and
//! ends when both the final reply and the data side are done.
//!
//! * Download: the receiver reports when every packet is written; it keeps lingering (answering a server that
//!   missed our "complete") until the `226` arrives, which proves the server's sender finished. A resumable
//!   download (`resume.rs`) announces what it holds with `REST <ranges>`, starts its receiver from that and
//!   has it checkpointed as it goes.
//! * Upload: the sender ends when the server's receiver says it holds everything. A `226` can overtake that
//!   message (it is sent once the upload is committed): after a short grace period the sender is stopped and
//!   the server's word counts, CKSM then checks the bytes.
//! * A data failure sends ABOR; no progress for `stall` fails the transfer; a failed control channel stops the
//!   data thread (dropping its future).
//! * Under `PROT P` the datagrams are AEAD-sealed with keys from the control connection's TLS exporter and the
//!   parameters of the `150` reply (`Control::blast_protection`); the server derives the same.

use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_blast::{DataDirection, Protection, TransferParams};
use drsftp_proto::client::{BlastChannel, Event, Op, Outcome, TransferReport, TransferSpec};
use drsftp_proto::ranges::RangeSet;
use drsftp_storage::FileHandle;
use tokio::task::JoinHandle;

use super::control::Control;
use super::resume::Resumable;
use super::task::{AbortOnDrop, Stall};
use super::transfer::{abort, abort_unless_replied, Moved};
use super::ClientError;
use crate::blast::{self, BlastOpts, BlastReport, Linger};
use crate::data::{DataError, DataReport, Progress};

/// After the `226` of an upload, how long the sender may still take to hear the receiver's "complete".
const UPLOAD_GRACE: Duration = Duration::from_secs(2);

/// Which end of the channel we are.
#[derive(Debug)]
pub(crate) enum Side {
    /// Download: write the section at `base + offset`.
    Recv {
        file: Arc<dyn FileHandle>,
        base: u64,
        /// A resumable whole-file download: the checkpoint writer.
        resume: Option<Arc<Resumable>>,
        /// File ranges already in the file (a checkpoint's, or what TCP moved before `--transport auto`
        /// switched): asked for with `REST <ranges>` and not sent again.
        held: RangeSet,
    },
    /// Upload: send from `base`.
    Send {
        file: Arc<dyn FileHandle>,
        base: u64,
    },
}

type Task = JoinHandle<Result<(BlastReport, Option<Linger>), DataError>>;

fn spawn(
    control: &Control,
    side: Side,
    sock: std::net::UdpSocket,
    ch: &BlastChannel,
    opts: &BlastOpts,
    progress: Arc<Progress>,
) -> Result<Task, ClientError> {
    let params = TransferParams::new(ch.transfer_id, ch.size, ch.payload_size)
        .map_err(|e| ClientError::Invalid(format!("the server's blast channel: {e}")))?;
    let dir = match side {
        Side::Recv { .. } => DataDirection::ServerSends,
        Side::Send { .. } => DataDirection::ClientSends,
    };
    let mut opts = opts.clone();
    opts.protection = control
        .blast_protection(&params, dir)?
        .unwrap_or(Protection::None);
    opts.max_rate = match (opts.max_rate, ch.max_rate) {
        (0, r) | (r, 0) => r,
        (a, b) => a.min(b),
    };
    let peer = ch.peer;
    Ok(match side {
        Side::Recv {
            file,
            base,
            resume,
            held,
        } => {
            let rr = match &resume {
                Some(r) => r.start(&params, file.clone(), &held),
                None if !held.is_empty() => blast::RecvResume {
                    from: Some(drsftp_blast::resume::packets_within(
                        &params,
                        held.ranges().iter().cloned(),
                    )),
                    ..blast::RecvResume::default()
                },
                None => blast::RecvResume::default(),
            };
            tokio::spawn(async move {
                let (r, l) =
                    blast::recv_with(sock, peer, params, file, base, &opts, progress, rr).await?;
                Ok((r, Some(l)))
            })
        }
        Side::Send { file, base } => tokio::spawn(async move {
            let r = blast::send(sock, peer, params, file, base, &opts, progress).await?;
            Ok((r, None))
        }),
    })
}

/// Runs `spec` (a blast transfer of `expected` bytes, if known) on `control`. With `blocked_after`, a transfer
/// that moves no byte for that long after the server's `150` is aborted with [`ClientError::BlastBlocked`].
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run(
    control: &mut Control,
    spec: TransferSpec,
    side: Side,
    expected: Option<u64>,
    opts: &BlastOpts,
    progress: Arc<Progress>,
    stall: Duration,
    blocked_after: Option<Duration>,
) -> Result<Moved, ClientError> {
    let r = run_probed(
        control,
        spec,
        side,
        expected,
        opts,
        progress,
        stall,
        blocked_after,
        None,
    );
    match r.await? {
        Ended::Moved(m) => Ok(*m),
        Ended::ToTcp => Err(ClientError::Invalid(
            "blast stopped for TCP without a probe".into(),
        )),
    }
}

/// `--transport auto`'s blast probe on a download (`drsftp_tune::BlastProbe`): sampled every [`PROBE_SAMPLE`]
/// while blast runs; its verdict is kept here for the caller.
pub(crate) struct Probing {
    pub(crate) probe: drsftp_tune::BlastProbe,
    pub(crate) verdict: Option<drsftp_tune::ProbeVerdict>,
    /// The final check's CKSM, pipelined behind the blast RETR once the verdict keeps blast (before it, a move
    /// to TCP would leave the server hashing the file ahead of the TCP set-up).
    pub(crate) cksm: Option<String>,
}

/// How often the probe reads the receiver: a few readings per RTT on the paths it runs on (20 ms and up).
const PROBE_SAMPLE: Duration = Duration::from_millis(50);

/// How a probed blast transfer ended.
pub(crate) enum Ended {
    /// Every byte moved.
    Moved(Box<Moved>),
    /// The probe moved the rest to TCP: the blast transfer was aborted (not waited for); what it wrote is in
    /// the progress ranges.
    ToTcp,
}

/// [`run`], with an optional blast probe that may stop the transfer for TCP ([`Ended::ToTcp`]).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_probed(
    control: &mut Control,
    spec: TransferSpec,
    side: Side,
    expected: Option<u64>,
    opts: &BlastOpts,
    progress: Arc<Progress>,
    stall: Duration,
    blocked_after: Option<Duration>,
    mut probing: Option<&mut Probing>,
) -> Result<Ended, ClientError> {
    let begin = Instant::now();
    let upload = matches!(side, Side::Send { .. });
    let (Side::Recv { base, .. } | Side::Send { base, .. }) = &side;
    let base = *base;
    if let Side::Recv { held, .. } = &side {
        if !held.is_empty() {
            control.session_mut().set_resume(held.clone());
        }
    }
    let bytes_before = progress.bytes();
    let mut opened: Option<Instant> = None;
    // When the data side finished and when the final reply came (the EOD/226 phase).
    let (mut data_at, mut reply_at): (Option<Instant>, Option<Instant>) = (None, None);
    control.start(Op::Transfer(spec))?;
    let mut side = Some(side);
    let mut sock: Option<std::net::UdpSocket> = None;
    let mut task = AbortOnDrop(None);
    let mut report: Option<TransferReport> = None;
    let mut data: Option<BlastReport> = None;
    let mut _linger: Option<Linger> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut watch = Stall::new(progress.bytes());
    let mut grace: Option<Instant> = None;
    let mut probe_tick = tokio::time::interval(PROBE_SAMPLE);

    let start = |control: &Control,
                 ch: Option<BlastChannel>,
                 side: &mut Option<Side>,
                 sock: &mut Option<std::net::UdpSocket>|
     -> Result<Option<Task>, ClientError> {
        let Some(s) = side.take() else {
            return Ok(None);
        };
        let ch = ch.ok_or_else(|| {
            ClientError::Invalid(
                "the server started the transfer without describing the blast channel".into(),
            )
        })?;
        if let Some(n) = expected.filter(|n| *n != ch.size) {
            return Err(ClientError::SizeMismatch {
                what: "the blast channel (150 Size=)".into(),
                expected: n,
                got: ch.size,
            });
        }
        let u = sock
            .take()
            .ok_or_else(|| ClientError::Invalid("blast transfer started before BPAS".into()))?;
        spawn(control, s, u, &ch, opts, progress.clone()).map(Some)
    };

    while report.is_none() || data.is_none() {
        tokio::select! {
            ev = control.next_event(), if report.is_none() => match ev? {
                Event::BlastBind => {
                    let u = blast::bind(control.local_ip(), opts.port.unwrap_or(0), opts)
                        .map_err(ClientError::DataSetup)?;
                    let addr = u.local_addr().map_err(ClientError::DataSetup)?;
                    tracing::debug!("blast socket on {addr}");
                    sock = Some(u);
                    control.session_mut().handle_blast_bound(Instant::now(), addr);
                }
                Event::TransferStarted(reply) => {
                    tracing::debug!("transfer started: {reply}");
                    opened = opened.or(Some(Instant::now()));
                    let ch = control.session().blast_channel();
                    match start(control, ch, &mut side, &mut sock) {
                        Ok(t) => task.0 = t.or(task.0.take()),
                        Err(e) => {
                            abort(control).await;
                            return Err(e);
                        }
                    }
                    watch.alive();
                }
                Event::Done(Outcome::Transferred(r)) => {
                    // 2xx without a 1xx first: the report still describes the channel.
                    if let Some(t) = start(control, r.blast, &mut side, &mut sock)? {
                        task.0 = Some(t);
                    }
                    for n in &r.notices {
                        tracing::info!("server: {n}");
                    }
                    report = Some(r);
                    reply_at = Some(Instant::now());
                    if upload && data.is_none() {
                        grace = Some(Instant::now() + UPLOAD_GRACE);
                    }
                    watch.alive();
                }
                Event::Done(other) => {
                    return Err(ClientError::Invalid(format!("unexpected outcome of a transfer: {other:?}")));
                }
                Event::Failed(e) => return Err(e.into()),
                Event::Notice(n) => tracing::info!("server: {n}"),
                ev => tracing::debug!("{ev:?}"),
            },
            r = task.join("blast"), if data.is_none() => {
                task.0 = None;
                match r {
                    Ok((d, l)) => {
                        data = Some(d);
                        data_at = Some(Instant::now());
                        _linger = l;
                        watch.alive();
                    }
                    Err(e) => return Err(abort_unless_replied(control, &report, e.into()).await),
                }
            }
            _ = probe_tick.tick(), if probing.as_ref().is_some_and(|p| p.verdict.is_none()) && data.is_none() => {
                let Some(p) = probing.as_deref_mut() else { continue };
                let now = Instant::now();
                p.probe.handle_reading(now, progress.blast_reading());
                let left = expected.unwrap_or(0).saturating_sub(progress.bytes());
                match p.probe.poll_verdict(now, left) {
                    Some(v @ drsftp_tune::ProbeVerdict::StayBlast(_)) => {
                        tracing::info!("--transport auto: {}; blast for the rest", v.reason());
                        // Sent here directly: `Control::ask_cksm` is for drivers that cannot reach the session
                        // while a transfer runs, and a request left in it would ride behind the next transfer.
                        if let Some(a) = p.cksm.take().filter(|_| report.is_none()) {
                            let sent = control.session_mut().pipeline_trailing_checksum(now, &a);
                            tracing::debug!("CKSM {a} asked behind the blast RETR: sent {sent}");
                        }
                        p.verdict = Some(v);
                    }
                    Some(v @ drsftp_tune::ProbeVerdict::ToTcp(_)) => {
                        tracing::info!("--transport auto: {}; the rest goes over TCP", v.reason());
                        p.verdict = Some(v);
                        if let Some(t) = task.0.take() {
                            t.abort();
                        }
                        if report.is_none() {
                            super::transfer::abort_and_go_on(control).await;
                        }
                        return Ok(Ended::ToTcp);
                    }
                    None => {}
                }
            }
            _ = tick.tick() => {
                if let (Some(g), Some(r)) = (grace, report.as_ref()) {
                    if Instant::now() >= g && data.is_none() {
                        // The server committed the upload; its "complete" datagram did not reach us in time.
                        if let Some(t) = task.0.take() {
                            t.abort();
                        }
                        let ch = r.blast.as_ref().map_or(0, |c| c.size);
                        tracing::info!("upload confirmed by the final reply; stopping the blast sender");
                        data = Some(BlastReport { bytes: ch, ..BlastReport::default() });
                        continue;
                    }
                }
                let blocked = match (blocked_after, opened) {
                    (Some(d), Some(t)) => {
                        t.elapsed() >= d && progress.bytes() == bytes_before && data.is_none()
                    }
                    _ => false,
                };
                if blocked {
                    if let Some(t) = task.0.take() {
                        t.abort();
                    }
                    if report.is_none() {
                        abort(control).await;
                    }
                    return Err(ClientError::BlastBlocked(blocked_after.unwrap_or_default()));
                }
                if watch.stalled(progress.bytes(), stall) {
                    if let Some(t) = task.0.take() {
                        t.abort();
                    }
                    let e = ClientError::Stalled(stall);
                    return Err(abort_unless_replied(control, &report, e).await);
                }
            }
        }
    }
    let report = report.unwrap_or_default();
    let blast = data.unwrap_or_default();
    let ranges = if blast.ranges.is_empty() && blast.bytes > 0 {
        // Confirmed by the final reply only: the server holds the whole section.
        std::iter::once(base..base + blast.bytes).collect()
    } else {
        blast.ranges.clone()
    };
    Ok(Ended::Moved(Box::new(Moved {
        data: DataReport {
            bytes: blast.bytes,
            streams: 1,
            ranges,
            reusable: vec![],
            peak_buffer: 0,
            peak_window: 0,
            traces: vec![],
            crc32c: blast.crc32c,
        },
        report,
        stripes: vec![],
        actions: vec![],
        seconds: begin.elapsed().as_secs_f64(),
        blast: Some(blast),
        setup: opened.map(|t| (t - begin).as_secs_f64()),
        eod: match (data_at, reply_at) {
            (Some(d), Some(r)) if !upload => Some(r.saturating_duration_since(d).as_secs_f64()),
            _ => None,
        },
    })))
}

/// The blast settings to use with this server (`None`: TCP), and a notice when blast was asked for but the
/// server does not offer it.
pub(crate) fn wanted<'a>(
    control: &Control,
    opts: &'a super::ClientOptions,
) -> (Option<&'a BlastOpts>, Option<String>) {
    match &opts.blast {
        Some(b) if control.session().features().has("BLAST") => (Some(b), None),
        Some(_) => (
            None,
            Some(
                "the server does not offer the UDP blast channel (no BLAST in FEAT): used TCP"
                    .into(),
            ),
        ),
        None => (None, None),
    }
}

/// The session's transport for `blast`.
pub(crate) fn transport(blast: Option<&BlastOpts>) -> drsftp_proto::client::Transport {
    match blast {
        Some(b) => drsftp_proto::client::Transport::Blast(drsftp_proto::client::BlastRequest {
            mtu: b.mtu,
            max_rate: b.max_rate,
            ack_every: b.ack_every,
            start_rate: b.start_rate,
        }),
        None => drsftp_proto::client::Transport::Tcp,
    }
}
