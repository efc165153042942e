//! The running transfer: starting it (the `150`/`125` reply and [`Action::Transfer`]), live progress, the
//! `112` perf and `111` range markers of a MODE E receive on the marker timer, the data timeout (no byte moved
//! for `ServerConfig::data_timeout`: [`Action::Abort`], then `426`; a stalled peer must not hold a session and
//! its part file forever), and the final replies (`226`, the driver's `4xx`/`5xx`, or `426` + `226` after ABOR).
//!
//! Range markers are only ever truthful: during a `Replace` upload (STOR into a part file that is discarded if
//! the transfer fails) none are sent until the file is committed; `InPlace` uploads (APPE/ESTO/restarted STOR)
//! report ranges as they land, and once more after a failure so the client can restart from them. Ranges are
//! reported relative to the upload's `offset` (the ESTO view, notes §3.6: `ESTO A 1000` → `111 Range Marker
//! 0-5000000`).

use std::time::{Duration, Instant};

use drsftp_storage::WriteMode;

use super::ctx::{Ctx, Rest};
use super::error::{CmdResult, CommandError};
use super::reply;
use super::types::{
    Action, DataEndpoint, Mode, Payload, TlsPolicy, TransferPlan, TransferProgress, TransferResult,
};
use crate::ranges::RangeSet;

/// Marker timers never fire more often than this, whatever `marker_interval` says.
const MIN_MARKER_INTERVAL: Duration = Duration::from_millis(100);
/// Range-list text per `111` line; longer lists are split over several markers.
const MAX_MARKER_TEXT: usize = 1024;

/// The transfer the driver is running.
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) id: u64,
    /// The command, for STAT (`RETR /a/b`).
    pub(crate) what: String,
    pub(crate) started: Instant,
    /// MODE E receive: `112` perf markers.
    perf: bool,
    /// `111` markers while running (InPlace receives in MODE E).
    periodic_ranges: bool,
    /// `111` markers at all (any MODE E receive; Replace only once committed).
    final_ranges: bool,
    /// Subtracted from file offsets in `111` markers (the RecvFile offset).
    marker_base: u64,
    pub(crate) progress: TransferProgress,
    /// Ranges already sent in `111` markers (file offsets).
    reported: RangeSet,
    pub(crate) next_marker: Option<Instant>,
    /// ABOR commands received for this transfer (each gets its own `226`).
    pub(crate) aborts: u32,
    /// A stream-mode receive (STOR/APPE/restarted STOR in MODE S): the one case for `126 SBUF` notices.
    pub(crate) stream_recv: bool,
    /// When the byte count last moved (the start, at first): the data timeout counts from here.
    last_move: Instant,
    /// The data timeout fired and [`Action::Abort`] went out: the end is reported as a timeout.
    timed_out: bool,
    /// The file whose whole-file CRC32C the driver's engine computes as it sends it (a whole TCP send to EOF):
    /// a CKSM of it behind the transfer needs no [`Action::Prefetch`].
    pub(crate) engine_digest_of: Option<String>,
    /// [`Action::Prefetch`] was considered for the command queued behind this transfer.
    pub(crate) prefetch_seen: bool,
}

/// The command that starts a transfer, as the client sent it.
#[derive(Debug)]
pub(crate) struct Command {
    pub(crate) verb: &'static str,
    /// The resolved path.
    pub(crate) path: String,
    /// The `REST` taken for it.
    pub(crate) restart: Option<Rest>,
}

impl Command {
    pub(crate) fn new(verb: &'static str, path: &str, restart: Option<Rest>) -> Self {
        Command {
            verb,
            path: path.to_string(),
            restart,
        }
    }
}

impl Ctx {
    /// Starts a transfer on the current data endpoint: queues the preliminary reply and [`Action::Transfer`],
    /// consumes ALLO. Listings (`SendBytes`, `SendListing`) always go in stream mode.
    pub(crate) fn start_transfer(
        &mut self,
        now: Instant,
        payload: Payload,
        mode: Mode,
        cmd: Command,
    ) -> CmdResult {
        self.start_transfer_with(now, payload, mode, cmd, RangeSet::new())
    }

    /// [`start_transfer`](Self::start_transfer) for a blast send that resumes: `resume` goes into
    /// [`TransferPlan::resume`].
    pub(crate) fn start_transfer_with(
        &mut self,
        now: Instant,
        payload: Payload,
        mode: Mode,
        cmd: Command,
        resume: RangeSet,
    ) -> CmdResult {
        let what = format!("{} {}", cmd.verb, cmd.path);
        if self.xfer.running.is_some() {
            return Err(CommandError::NoData(
                "A transfer is already running.".into(),
            ));
        }
        let mut endpoint = self.endpoint()?;
        let protect = self.sec.protect_data;
        if let (true, DataEndpoint::Blast(ep)) = (protect, &mut endpoint) {
            // PROT P blast: AEAD datagrams (keys from the TLS exporter, docs/blast.md), smaller payloads.
            if ep.adopted_id {
                return Err(CommandError::Reply(
                    536,
                    "Third-party blast with PROT P is not supported.".into(),
                ));
            }
            ep.payload_size = ep
                .payload_size
                .saturating_sub(super::verbs::BLAST_AEAD_OVERHEAD)
                .max(1);
        }
        if !protect && self.cfg.tls == TlsPolicy::Required {
            return Err(CommandError::Reply(
                521,
                "Data connection cannot be opened with this PROT setting.".into(),
            ));
        }
        if matches!(&endpoint, DataEndpoint::Blast(ep) if ep.peer.port() == 0) {
            // `BPAS` without an address (third-party set-up) and no `BPRT` yet (verbs/bprt.rs).
            return Err(CommandError::NoData(
                "Use BPRT to name the blast peer first.".into(),
            ));
        }
        let blast = match &endpoint {
            DataEndpoint::Blast(ep) => {
                Some(blast_size(&payload, self.data.ascii, ep.payload_size)?)
            }
            _ => None,
        };
        let listing = payload.is_listing();
        let mode = if listing { Mode::Stream } else { mode };
        let recv = match &payload {
            Payload::RecvFile {
                write_mode, offset, ..
            } => Some((*write_mode, *offset)),
            _ => None,
        };
        // The driver opens `parallelism` connections to every SPOR address: keep the total within
        // max_parallelism, so one RETR cannot aim 16 × 64 connections at a named host.
        let targets = match &endpoint {
            DataEndpoint::Active(addrs) => addrs.len().max(1) as u32,
            _ => 1,
        };
        let parallelism = match mode {
            Mode::Extended => self
                .data
                .parallelism
                .unwrap_or(self.cfg.default_parallelism)
                .clamp(1, (self.cfg.max_parallelism / targets).max(1)),
            Mode::Stream => 1,
        };
        let parallelism_range = match (mode, &payload) {
            (Mode::Extended, Payload::SendFile { .. }) => self.data.parallelism_range,
            _ => None,
        };
        let ascii = self.data.ascii && mode == Mode::Stream && !listing;
        let id = self.next_transfer_id();
        let plan = TransferPlan {
            id,
            verb: cmd.verb,
            restart: cmd.restart,
            payload,
            mode,
            endpoint,
            parallelism,
            parallelism_range,
            layout: self.data.layout,
            tcp_buffer: self.data.tcp_buffer,
            ascii,
            inband_drs: self.data.drs_inband && mode == Mode::Extended,
            resume: if blast.is_some() {
                resume
            } else {
                RangeSet::new()
            },
            data_peer: self.passive_peer(),
            max_connections: max_connections(self, mode, recv.is_some(), parallelism),
            protect,
            tls_client: protect && self.sec.sscn,
            tls_peer_pin: self.sec.sscn_pin.filter(|_| protect && self.sec.sscn),
        };
        match (mode, blast, &plan.endpoint) {
            (_, Some(size), DataEndpoint::Blast(ep)) => {
                let p = ep.payload_size;
                self.reply(
                    150,
                    &format!("Opening BLAST data channel for {what} (Size={size};Packet={p};)."),
                );
                // One channel, one transfer: the UDP socket and transfer id go with it.
                self.data.endpoint = None;
            }
            (Mode::Extended, ..) => {
                self.reply(125, &format!("Beginning MODE E transfer of {what}."))
            }
            (Mode::Stream, ..) => {
                let kind = if ascii || listing { "ASCII" } else { "BINARY" };
                self.reply(
                    150,
                    &format!("Opening {kind} mode data connection for {what}."),
                )
            }
        }
        // A blast send is offered the prefetch: whether its sender's CRC can answer (a whole file, settled when
        // the send began) only the driver learns, once the send has looked at the file.
        let engine_digest_of = match (&plan.payload, &plan.endpoint) {
            (_, DataEndpoint::Blast(_)) => None,
            (
                Payload::SendFile {
                    path,
                    ranges,
                    to_eof: true,
                    ..
                },
                _,
            ) if ranges.len() <= 1 && ranges.first().is_none_or(|r| r.start == 0) => {
                Some(path.clone())
            }
            _ => None,
        };
        self.action(Action::Transfer(plan));
        self.data.allo = None;
        let ext_recv = if mode == Mode::Extended && blast.is_none() {
            recv
        } else {
            None
        };
        let interval = self.cfg.marker_interval.max(MIN_MARKER_INTERVAL);
        let mut run = Running {
            id,
            what,
            started: now,
            perf: ext_recv.is_some(),
            periodic_ranges: matches!(ext_recv, Some((WriteMode::InPlace, _))),
            final_ranges: ext_recv.is_some(),
            marker_base: ext_recv.map_or(0, |(_, o)| o),
            progress: TransferProgress::default(),
            reported: RangeSet::new(),
            next_marker: None,
            aborts: 0,
            stream_recv: recv.is_some() && mode == Mode::Stream && blast.is_none(),
            last_move: now,
            timed_out: false,
            engine_digest_of,
            prefetch_seen: false,
        };
        if run.perf {
            // GFD.20: a start marker (0 bytes) per stripe, then one every interval.
            let ts = self.epoch_at(now);
            let bytes = markers(&mut run, ts, None, false);
            run.next_marker = now.checked_add(interval);
            self.reply_raw(&bytes);
        }
        self.xfer.running = Some(run);
        Ok(())
    }

    /// Latest counters from the driver; a changed byte count restarts the data timeout.
    pub(crate) fn on_progress(&mut self, now: Instant, p: TransferProgress) {
        if let Some(run) = self.xfer.running.as_mut() {
            if p.bytes != run.progress.bytes {
                run.last_move = now;
            }
            run.progress = p;
        }
    }

    /// When the running transfer times out if no byte moves before then (`None`: no transfer, the rule is off,
    /// or it fired already).
    pub(crate) fn data_deadline(&self) -> Option<Instant> {
        let run = self.xfer.running.as_ref()?;
        let limit = self.cfg.data_timeout;
        if run.timed_out || limit.is_zero() {
            return None;
        }
        run.last_move.checked_add(limit)
    }

    /// The data timer: a transfer with no progress for `data_timeout` is aborted; its `426` follows when the
    /// driver reports the end ([`Ctx::finish_transfer`]).
    pub(crate) fn on_data_timer(&mut self, now: Instant) {
        if self.data_deadline().is_some_and(|d| now >= d) {
            if let Some(run) = self.xfer.running.as_mut() {
                run.timed_out = true;
                self.action(Action::Abort);
            }
        }
    }

    /// The marker timer: emits due `112`/`111` markers.
    pub(crate) fn on_marker_timer(&mut self, now: Instant) {
        let ts = self.epoch_at(now);
        let interval = self.cfg.marker_interval.max(MIN_MARKER_INTERVAL);
        let Some(run) = self.xfer.running.as_mut() else {
            return;
        };
        let Some(due) = run.next_marker else {
            return;
        };
        if now < due {
            return;
        }
        let periodic = run.periodic_ranges;
        let bytes = markers(run, ts, None, periodic);
        run.next_marker = now.checked_add(interval);
        self.reply_raw(&bytes);
    }

    /// The driver reports the end of transfer `id`; other ids are ignored.
    pub(crate) fn finish_transfer(&mut self, now: Instant, id: u64, r: TransferResult) {
        if !matches!(&self.xfer.running, Some(r) if r.id == id) {
            return;
        }
        let Some(mut run) = self.xfer.running.take() else {
            return;
        };
        let ts = self.epoch_at(now);
        let r = match r {
            // The driver's own report of a transfer the data timer stopped (its accept timeout may win the race).
            TransferResult::Aborted | TransferResult::Failed { .. } if run.timed_out => {
                let secs = self.cfg.data_timeout.as_secs_f64();
                TransferResult::Failed {
                    code: 426,
                    message: format!(
                        "Data connection timed out: no data moved for {secs} seconds; transfer aborted."
                    ),
                }
            }
            r => r,
        };
        match r {
            TransferResult::Ok { bytes, .. } => {
                if run.perf {
                    let final_ranges = run.final_ranges;
                    let out = markers(&mut run, ts, Some(bytes), final_ranges);
                    self.reply_raw(&out);
                }
                self.reply(226, "Transfer complete.");
            }
            TransferResult::Failed { code, message } => {
                if run.periodic_ranges {
                    let out = range_markers(&mut run);
                    self.reply_raw(&out);
                }
                let code = if (400..600).contains(&code) {
                    code
                } else {
                    451
                };
                let message = if message.trim().is_empty() {
                    "Transfer failed.".to_string()
                } else {
                    message
                };
                self.reply(code, &message);
            }
            TransferResult::Aborted => self.reply(426, "Transfer aborted."),
        }
        for _ in 0..run.aborts {
            self.reply(226, "Abort successful.");
        }
        self.xfer.done += 1;
        self.touch(now);
    }
}

/// [`TransferPlan::max_connections`]: a send uses its `parallelism` (or the top of its `-p auto` range); a MODE E
/// receive takes the connections the client opens, up to what it negotiated with `OPTS RETR Parallelism` (the
/// top of its range: `-p auto` uploads add connections mid-transfer) or, if it said nothing (globus-url-copy
/// uploads), the server's `max_parallelism`. Never unbounded: each connection costs a task and buffers.
fn max_connections(ctx: &Ctx, mode: Mode, recv: bool, parallelism: u32) -> u32 {
    let cap = ctx.cfg.max_parallelism.max(1);
    match (mode, recv) {
        (Mode::Stream, _) => 1,
        (Mode::Extended, false) => ctx
            .data
            .parallelism_range
            .map_or(parallelism, |(_, max)| max.max(parallelism))
            .clamp(1, cap),
        (Mode::Extended, true) => match (ctx.data.parallelism_range, ctx.data.parallelism) {
            (Some((_, max)), p) => max.max(p.unwrap_or(1)).clamp(1, cap),
            (None, Some(p)) => p.clamp(1, cap),
            (None, None) => cap,
        },
    }
}

/// The size of a transfer over a blast channel (`packet` payload bytes per datagram), or why it cannot use one.
fn blast_size(payload: &Payload, ascii: bool, packet: usize) -> Result<u64, CommandError> {
    let size =
        match payload {
            Payload::SendBytes(_) | Payload::SendListing { .. } => {
                return Err(CommandError::NoData(
                    "Listings need PASV or EPSV, not a BLAST channel.".into(),
                ))
            }
            Payload::SendFile { ranges, .. } => match ranges.as_slice() {
                [] => 0,
                [r] => r.end - r.start,
                _ => return Err(CommandError::Unsupported(
                    "BLAST sends one contiguous section; REST ranges are not supported with it."
                        .into(),
                )),
            },
            Payload::RecvFile { expected, .. } => expected.ok_or_else(|| {
                CommandError::Sequence("BLAST uploads need ALLO <size> first.".into())
            })?,
        };
    if ascii {
        return Err(CommandError::Unsupported(
            "BLAST carries binary data only; send TYPE I.".into(),
        ));
    }
    if size.div_ceil(packet.max(1) as u64) > super::verbs::MAX_BLAST_PACKETS {
        return Err(CommandError::Unsupported(
            "File too large for BLAST at this MTU.".into(),
        ));
    }
    Ok(size)
}

/// A `112` perf marker (bytes from progress unless `bytes` is given) and, if `ranges`, the `111` markers for
/// ranges not reported yet.
fn markers(run: &mut Running, ts: f64, bytes: Option<u64>, ranges: bool) -> Vec<u8> {
    let one = [bytes.unwrap_or(run.progress.bytes)];
    // A striped frontend reports each stripe (its final numbers come with the progress, not `bytes`).
    let per: &[u64] = match run.progress.stripes.as_slice() {
        [] | [_] => &one,
        s => s,
    };
    let mut out = Vec::new();
    for (i, n) in per.iter().enumerate() {
        out.extend(reply::multi(
            112,
            "Perf Marker",
            &[
                format!(" Timestamp: {ts:.1}"),
                format!(" Stripe Index: {i}"),
                format!(" Stripe Bytes Transferred: {n}"),
                format!(" Total Stripe Count: {}", per.len()),
            ],
            "End.",
        ));
    }
    if ranges {
        out.extend(range_markers(run));
    }
    out
}

/// `111 Range Marker a-b,...` for the ranges received since the last one (relative to `marker_base`), split
/// into lines of at most [`MAX_MARKER_TEXT`] characters of ranges.
fn range_markers(run: &mut Running) -> Vec<u8> {
    // O(n log n) in the ranges, once per marker: never per block.
    let fresh = run.progress.ranges.difference(&run.reported);
    run.reported.extend(&fresh);
    let base = run.marker_base;
    let mut out = Vec::new();
    let mut text = String::new();
    for r in fresh.iter() {
        let item = format!(
            "{}-{}",
            r.start.saturating_sub(base),
            r.end.saturating_sub(base)
        );
        if !text.is_empty() && text.len() + 1 + item.len() > MAX_MARKER_TEXT {
            out.extend(reply::single(111, &format!("Range Marker {text}")));
            text.clear();
        }
        if !text.is_empty() {
            text.push(',');
        }
        text.push_str(&item);
    }
    if !text.is_empty() {
        out.extend(reply::single(111, &format!("Range Marker {text}")));
    }
    out
}
