//! Download orchestration: SIZE (with MDTM in the same round trip from a drsftp server), a part file (or the
//! destination in place for `--off/--len`), RETR/ERET in stream mode or MODE E (`-p auto` from a drsftp server:
//! a `Parallelism` range the server refines in, its changes observed by `observe::StreamWatch`), byte-count and
//! range checks, CKSM verification, then the rename into place. Any error drops the [`Destination`], which
//! removes what the download created, except the stable part file and checkpoint of a resumable download
//! (`resume.rs`: blast downloads, and whole-file TCP downloads of at least [`TCP_RESUME_MIN`] from a server with
//! a CKSM we know), which a rerun or retry resumes from with `REST`; the bytes it held are trusted only after the
//! whole file's checksum matched.
//!
//! A `--transport auto` switch sends ABOR without waiting (the blast set-up leaves in the same write), starts
//! blast near the rate TCP showed, and goes back to TCP for the missing ranges if the server refuses blast. The
//! final CKSM of a watched download goes out only with the rule's first stay verdict (mid-transfer, behind the
//! RETR); after a switch it rides behind the blast RETR, which a drsftp server hashes while blast sends, so no
//! whole-file hash stands between the ABOR and the blast set-up. If a stay verdict came before the switch, the
//! CKSM left behind the aborted RETR is taken as the server's checksum.

use std::path::Path;
use std::sync::Arc;

use drsftp_proto::client::{Direction, TransferSpec};
use drsftp_proto::ranges::RangeSet;
use drsftp_storage::{ChecksumAlg, FileHandle};
use drsftp_tune::{BufferPolicy, Decision, StartChoice, TransportConfig, TransportDecider};

use super::blast;
use super::control::Control;
use super::local::Destination;
use super::observe::StreamWatch;
use super::resume;
use super::transfer::{self, DataJob};
use super::{verify, ClientError, ClientOptions, TransferSummary, TransportChoice};
use crate::blast::BlastOpts;
use crate::data::{DataOpts, Progress};

/// Why a first download to an unknown path starts on blast (`drsftp_tune::probe`).
const PROBE_START: &str = "a first copy to this path: blast probes it for random loss";

/// `--transport auto` on blast: no byte this long after the server's `150` means UDP is blocked: fall back to TCP.
const BLAST_BLOCKED_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// How often `--transport auto` feeds the decider a reading of the TCP streams.
const AUTO_SAMPLE: std::time::Duration = std::time::Duration::from_millis(250);

/// How fast a drsftp server hashes a file for CKSM (CRC32C from the page cache: ~0.2 s per GiB measured), for
/// the cost of a CKSM queued behind a RETR that a switch aborts.
const SERVER_HASH_BPS: f64 = 5.0 * (1u64 << 30) as f64;

/// Smaller TCP downloads start afresh: the MDTM round trip and checkpoint thread cost more than sending again.
pub(crate) const TCP_RESUME_MIN: u64 = 4 << 20;

/// Downloads `remote` to `local`. See the module docs.
pub(crate) async fn run(
    control: &mut Control,
    remote: &str,
    local: &Path,
    opts: &ClientOptions,
    progress: Arc<Progress>,
) -> Result<TransferSummary, ClientError> {
    let (size, mtime) =
        super::stat::size_and_mtime(control, remote, opts.partial.is_none()).await?;
    let identity = |control: &Control, sz: u64| {
        mtime
            .clone()
            .map(|m| resume::identity_of(control.peer(), remote, sz, m))
    };
    // The file range we expect to receive.
    let want = match (opts.partial, size) {
        (Some(p), Some(sz)) => {
            if p.offset > sz {
                return Err(ClientError::Invalid(format!(
                    "offset {} is past the end of {remote} ({sz} bytes)",
                    p.offset
                )));
            }
            p.offset..p.offset + p.length.min(sz - p.offset)
        }
        (Some(p), None) => p.offset..p.offset + p.length,
        (None, Some(sz)) => 0..sz,
        (None, None) => 0..u64::MAX,
    };
    // `-p auto`: a drsftp server (FEAT lists DRS) refines the stream count itself when OPTS RETR gives it a
    // range; that needs MODE E even from one stream. Other servers (Globus) get the fixed start as before.
    let auto_range = opts
        .auto_streams
        .as_ref()
        .filter(|_| control.session().features().drs())
        .map(|a| {
            let lo = a.config.min_streams.max(1);
            (lo, a.config.max_streams.max(lo))
        });
    let mode = match auto_range {
        Some(_) => drsftp_proto::client::TransferMode::Extended,
        None => opts.mode(),
    };
    let (udp, udp_notice) = blast::wanted(control, opts);
    // `--transport auto`: the start choice (the switch itself comes from the decider while TCP runs).
    let watchable = opts.partial.is_none() && size.is_some();
    let start = opts
        .auto_transport
        .as_ref()
        .map(|a| a.start(udp.is_some(), watchable));
    let blast_opts = udp;
    // A blast start from path memory begins near the rate the earlier copy measured, not at 10 Mbit/s.
    let remembered = match (&start, udp, opts.auto_transport.as_ref()) {
        (Some(StartChoice::Blast(_)), Some(b), Some(a)) => a
            .learned
            .as_ref()
            .filter(|_| a.carried.is_none())
            .map(|l| starting_at(b, l.rate_bps, drsftp_tune::MEMORY_START_SHARE)),
        _ => None,
    };
    let udp = remembered.as_ref().or(udp);
    // A first copy to an unknown long path starts with the blast probe (`drsftp_tune::probe`): its verdict comes
    // within ~0.5 s where TCP's takes ~1 s, and blast moves data at the link rate meanwhile. The rest can go over
    // TCP by ranges only in MODE E.
    let probe = match (&start, opts.auto_transport.as_ref(), size) {
        (Some(StartChoice::TcpWatched), Some(a), Some(sz)) => {
            udp.is_some()
                && !a.knows_path()
                && mode == drsftp_proto::client::TransferMode::Extended
                && drsftp_tune::probe_first(control.path_rtt(), sz)
        }
        _ => false,
    };
    let (udp, mut choice) = match &start {
        Some(StartChoice::Tcp(why)) => (None, Some(choose("tcp", why))),
        Some(StartChoice::TcpWatched) if probe => (udp, Some(choose("udp", PROBE_START))),
        Some(StartChoice::TcpWatched) => (None, None),
        Some(StartChoice::Blast(why)) => (udp, Some(choose("udp", why))),
        None => (udp, None),
    };
    // Under auto the choice says it all; the "no BLAST: used TCP" notice is for an explicit `--transport udp`.
    let udp_notice = udp_notice.filter(|_| start.is_none());
    let alg = if opts.verify {
        verify::pick_alg(control.session().features())
    } else {
        None
    };
    // A whole-file download of known size is resumable (resume.rs): stable part file + checkpoint. Over TCP only
    // when worth it and when the resumed bytes can be checked (the whole file's CKSM at the end).
    let resumable = match (udp, opts.partial, size) {
        (Some(b), None, Some(sz)) => {
            let id = match identity(control, sz) {
                Some(id) => id,
                None => resume::identity(control, remote, sz).await,
            };
            resume::Resumable::open(local, id, b.resume && opts.resume)?.map(Arc::new)
        }
        // A smaller file resumes too when a checkpoint waits for it (a pipelined batch left it).
        (None, None, Some(sz))
            if alg.is_some() && (sz >= TCP_RESUME_MIN || resume::has_checkpoint(local)) =>
        {
            let id = match identity(control, sz) {
                Some(id) => id,
                None => resume::identity(control, remote, sz).await,
            };
            resume::Resumable::open(local, id, opts.resume)?.map(Arc::new)
        }
        _ => None,
    };
    let dest = match (&resumable, opts.partial) {
        (Some(r), _) => r.destination()?,
        (None, Some(_)) => Destination::in_place(local)?,
        (None, None) => Destination::part_file(local)?,
    };
    let handle = dest.handle();
    let file: Arc<dyn FileHandle> = handle.clone();
    let mut dopts = opts.data_opts();
    dopts.crc32c = verify::want_engine_crc(alg, opts.partial.is_none());
    if want.end != u64::MAX {
        dopts.max_end = want.end;
    }
    let offset = opts.partial.map_or(0, |p| p.offset);
    // What a TCP download already holds: MODE E asks for the gaps, stream mode continues after the held prefix.
    // (A blast download asks for the checkpoint's packets, `Side::Recv::held`.)
    let tcp_held = match &resumable {
        Some(r) => match mode {
            drsftp_proto::client::TransferMode::Extended => r.held().clone(),
            drsftp_proto::client::TransferMode::Stream => {
                let prefix = r.held().ranges().first().filter(|p| p.start == 0).cloned();
                prefix.into_iter().collect()
            }
        },
        None => Default::default(),
    };
    let stream_from = tcp_held.ranges().first().map_or(0, |p| p.end);
    let job = match mode {
        drsftp_proto::client::TransferMode::Extended => DataJob::RecvModeE {
            file: file.clone(),
            wire_add: offset,
        },
        drsftp_proto::client::TransferMode::Stream => DataJob::RecvStream {
            file: file.clone(),
            offset: offset + stream_from,
        },
    };
    let spec = TransferSpec {
        direction: Direction::Download,
        path: remote.to_string(),
        mode,
        streams: match auto_range {
            Some((lo, hi)) => opts.streams.clamp(lo, hi),
            None => opts.streams.max(1),
        },
        streams_range: auto_range,
        tcp_buffer: opts.tcp_buffer,
        partial: opts.partial,
        alloc: None,
        drs: opts.buffer == BufferPolicy::Drs,
        transport: blast::transport(udp),
        stripes: opts.stripes,
    };
    let len = (want.end != u64::MAX).then(|| want.end - want.start);
    let blast_leg = |held: RangeSet| blast::Side::Recv {
        file: file.clone(),
        base: offset,
        resume: resumable.clone(),
        held,
    };
    let switch_spec = spec.clone();
    let tcp_held_covered = tcp_held.covered();
    // For a TCP leg that resumes after a refused switch (MODE E: the ranges still missing).
    let (again_spec, again_dopts) = (
        TransferSpec {
            transport: blast::transport(None),
            ..spec.clone()
        },
        dopts.clone(),
    );
    let final_cksm = alg.filter(|_| opts.verify && opts.partial.is_none());
    // After a change of transport (the probe found the path clean, or a switch was refused): a MODE E TCP leg
    // for what `held` lacks.
    let rest_over_tcp = |spec: TransferSpec, dopts: DataOpts, held: RangeSet| TcpLeg {
        spec,
        job: DataJob::RecvModeE {
            file: file.clone(),
            wire_add: offset,
        },
        dopts,
        file: file.clone(),
        resumable: None,
        held,
        len,
        final_cksm,
    };
    let tcp_leg = TcpLeg {
        spec: TransferSpec {
            transport: blast::transport(None),
            ..spec.clone()
        },
        job,
        dopts,
        file: file.clone(),
        resumable: resumable.clone(),
        held: tcp_held.clone(),
        len,
        final_cksm,
    };
    // A switch's ABOR left the trailing CKSM's digest in the session (see the final check).
    let mut tcp_switched = false;
    // `held`: what this run did not ask for again (checkpoint, or what TCP moved before a switch).
    let (moved, held) = match udp {
        Some(b) => {
            let from = resumable
                .as_ref()
                .map(|r| r.held().clone())
                .unwrap_or_default();
            let blocked = start.as_ref().map(|_| BLAST_BLOCKED_AFTER);
            let side = blast_leg(from.clone());
            let mut probing = probe.then(|| blast::Probing {
                probe: drsftp_tune::BlastProbe::new(
                    drsftp_tune::ProbeConfig::default(),
                    control.path_rtt().unwrap_or_default(),
                ),
                verdict: None,
                cksm: final_cksm.map(|a| a.name().to_string()),
            });
            // The final CKSM rides behind the blast RETR: the server hashes the file while blast sends it (under
            // the probe, only once it keeps blast).
            if let Some(a) = final_cksm.filter(|_| !probe) {
                control.session_mut().set_trailing_checksum(a.name());
            }
            let r = blast::run_probed(
                control,
                spec,
                side,
                len,
                b,
                progress.clone(),
                opts.timeout,
                blocked,
                probing.as_mut(),
            )
            .await;
            if let Some(v) = probing.as_ref().and_then(|p| p.verdict.clone()) {
                let judged = probing.as_ref().and_then(|p| p.probe.judged());
                choice = Some(TransportChoice {
                    judged,
                    ..choose(
                        match v {
                            drsftp_tune::ProbeVerdict::StayBlast(_) => "udp",
                            drsftp_tune::ProbeVerdict::ToTcp(_) => "udp+tcp",
                        },
                        v.reason(),
                    )
                });
            } else if probe && r.is_ok() {
                choice = Some(choose(
                    "udp",
                    &format!("{PROBE_START}; it ended before a verdict"),
                ));
            }
            match r {
                Ok(blast::Ended::Moved(m)) => {
                    resumable.iter().for_each(|r| r.complete());
                    (*m, RangeSet::new())
                }
                // The probe found the path clean or shared: the ranges blast wrote are kept, the rest over TCP.
                Ok(blast::Ended::ToTcp) => {
                    let mut prior = from;
                    prior.extend(&progress.ranges());
                    let blast_bytes = progress.bytes();
                    let mut again_dopts = again_dopts;
                    if again_dopts.crc32c {
                        // The engine's CRC then covers the whole file: the final check reads nothing again.
                        again_dopts.crc_held = held_crcs(file.clone(), &prior).await?;
                    }
                    let leg = rest_over_tcp(again_spec, again_dopts, prior.clone());
                    let mut m = leg.run(control, opts, progress, None).await?.done()?;
                    resumable.iter().for_each(|r| r.complete());
                    m.data.bytes += blast_bytes;
                    // What the engine's CRC covers (with the held pieces) and the final check looks for.
                    m.data.ranges.extend(&prior);
                    if let Some(c) = choice.as_mut() {
                        c.tcp_bytes = m.data.bytes - blast_bytes;
                    }
                    (m, prior)
                }
                // Blocked, or refused by the server's side of the path before a byte moved (e.g. a host
                // firewall answering its sends with an error): under auto, TCP instead.
                Err(e)
                    if start.is_some()
                        && progress.bytes() == 0
                        && (matches!(e, ClientError::BlastBlocked(_))
                            || matches!(e.reply_code(), Some(425 | 426))) =>
                {
                    let why = choice.as_ref().map_or("", |c| c.reason.as_str());
                    choice = Some(choose(
                        "tcp",
                        &format!("blast was chosen ({why}), but {e}; {}", super::FELL_BACK),
                    ));
                    let m = tcp_leg.run(control, opts, progress, None).await?.done()?;
                    (m, tcp_held)
                }
                Err(e) => return Err(e),
            }
        }
        None => {
            let decider = match (&start, blast_opts) {
                (Some(StartChoice::TcpWatched), Some(b)) => Some((b, auto_decider(opts, control))),
                _ => None,
            };
            let t0 = std::time::Instant::now();
            let run = tcp_leg.run(
                control,
                opts,
                progress.clone(),
                decider.as_ref().map(|d| d.1.clone()),
            );
            match run.await? {
                Leg::Done(m, why, judged) => {
                    if let Some(w) = why {
                        choice = Some(TransportChoice {
                            judged,
                            ..choose("tcp", &w)
                        });
                    } else if decider.is_some() {
                        let w =
                            "the transfer ended on TCP before the rule had seen enough of the path";
                        choice = Some(choose("tcp", w));
                    }
                    (*m, tcp_held)
                }
                Leg::Switch(why, judged) => {
                    let Some((b, _)) = decider else {
                        unreachable!("a switch needs a decider")
                    };
                    // ABOR the TCP transfer without waiting for its answer (a drsftp server reads the blast
                    // set-up behind it); the ranges it wrote are kept and not asked for again.
                    transfer::abort_and_go_on(control).await;
                    let mut prior = tcp_held.clone();
                    prior.extend(&progress.ranges());
                    let tcp_bytes = progress.bytes();
                    tracing::info!(
                        "--transport auto: {why}; the remaining bytes go over UDP blast"
                    );
                    // Blast starts near the rate TCP already showed, not at its default 10 Mbit/s.
                    let b = match &judged {
                        Some(j) => starting_at(b, j.rate_bps, drsftp_tune::SWITCH_START_SHARE),
                        None => b.clone(),
                    };
                    let spec = TransferSpec {
                        transport: blast::transport(Some(&b)),
                        ..switch_spec
                    };
                    let side = blast_leg(prior.clone());
                    let blocked = Some(BLAST_BLOCKED_AFTER);
                    // No CKSM was left behind the TCP RETR (none is sent before a stay verdict): it rides behind
                    // the blast RETR instead, hashed on the server while blast sends, off the set-up's path.
                    if let Some(a) =
                        final_cksm.filter(|_| !control.session().late_checksum_pending())
                    {
                        control.session_mut().set_trailing_checksum(a.name());
                    }
                    let r = blast::run(
                        control,
                        spec,
                        side,
                        len,
                        &b,
                        progress.clone(),
                        opts.timeout,
                        blocked,
                    )
                    .await;
                    let (mut m, chosen, reason) = match r {
                        Ok(m) => (m, "tcp+udp", why),
                        // Refused (BPAS, the blast RETR) or blocked before a datagram arrived: the rest over
                        // TCP again, asking for the ranges still missing (MODE E only; a stream-mode TCP leg
                        // could only continue after a prefix).
                        Err(e)
                            if progress.bytes() == tcp_bytes
                                && mode == drsftp_proto::client::TransferMode::Extended
                                && (matches!(e, ClientError::BlastBlocked(_))
                                    || e.reply_code().is_some_and(|c| c >= 400)) =>
                        {
                            tracing::info!(
                                "--transport auto: the switch failed ({e}); the rest over TCP"
                            );
                            let leg = rest_over_tcp(again_spec, again_dopts, prior.clone());
                            let m = leg.run(control, opts, progress, None).await?.done()?;
                            let reason = format!(
                                "{why}; but blast {e}: the rest went over TCP, {}",
                                super::FELL_BACK
                            );
                            (m, "tcp", reason)
                        }
                        Err(e) => return Err(e),
                    };
                    resumable.iter().for_each(|r| r.complete());
                    m.data.bytes += tcp_bytes;
                    m.seconds = t0.elapsed().as_secs_f64();
                    tcp_switched = true;
                    choice = Some(TransportChoice {
                        chosen,
                        reason,
                        tcp_bytes,
                        judged,
                        learned_age: None,
                    });
                    (m, prior)
                }
            }
        }
    };
    let want = if want.end == u64::MAX {
        // Size unknown: whatever arrived, from the start.
        want.start..want.start + moved.data.bytes
    } else {
        want
    };
    if held.is_empty() {
        verify::check_moved(remote, &moved.data, want.clone())?;
    } else {
        verify::check_resumed(remote, &moved.data, want.clone(), &held)?;
    }
    if udp.is_none() {
        // All bytes are here: whatever happens next (a checksum mismatch), the part file is not resumed from.
        resumable.iter().for_each(|r| r.complete());
    }
    if opts.partial.is_none() {
        let got = handle.len()?;
        if got != want.end {
            return Err(ClientError::SizeMismatch {
                what: local.display().to_string(),
                expected: want.end,
                got,
            });
        }
    }
    // Flush to disk while the checksums run; the rename waits for it.
    let syncing = {
        let h = handle.clone();
        tokio::task::spawn_blocking(move || h.sync())
    };
    let mut summary = TransferSummary::new(mode, &moved);
    summary.resumed = if moved.blast.is_some() {
        0
    } else {
        held.covered()
    };
    if choice
        .as_ref()
        .is_some_and(|c| c.chosen == "tcp+udp" || c.chosen == "udp+tcp")
    {
        summary.resumed = tcp_held_covered;
    }
    if let Some(c) = choice.as_mut() {
        c.learned_age = opts.auto_transport.as_ref().and_then(|a| a.memory_age());
    }
    summary.transport_choice = choice;
    summary.notices.extend(udp_notice);
    summary
        .notices
        .extend(resumable.iter().flat_map(|r| r.notes().iter().cloned()));
    if opts.verify {
        let whole = opts.partial.is_none();
        let t = std::time::Instant::now();
        // After a switch: the CKSM pipelined behind the aborted TCP RETR still ran on the server, on the whole
        // file, exactly what this check asks; its digest saves asking (and the server hashing the file) again.
        let switched = moved.blast.is_some() && tcp_switched;
        let late = switched
            .then(|| control.session_mut().take_late_checksum())
            .flatten()
            .filter(|(cmd, _)| {
                alg.is_some_and(|a| *cmd == format!("CKSM {} 0 -1 {remote}", a.name()))
            })
            .map(|(_, hex)| Ok(hex));
        let theirs = moved.report.checksum.clone().map(|b| *b).or(late);
        verify::check(control, alg, remote, file, want, &moved.data, whole, theirs)
            .await?
            .record(&mut summary);
        summary.verify_seconds = Some(t.elapsed().as_secs_f64());
    }
    syncing
        .await
        .map_err(|e| ClientError::Invalid(format!("fsync task: {e}")))??;
    dest.commit()?;
    Ok(summary)
}

/// (offset, length, CRC32C) of each of `held`'s ranges as they are in `file`, read on a blocking thread.
async fn held_crcs(
    file: Arc<dyn FileHandle>,
    held: &RangeSet,
) -> Result<Vec<(u64, u64, u32)>, ClientError> {
    let ranges = held.ranges().to_vec();
    tokio::task::spawn_blocking(move || {
        ranges
            .into_iter()
            .map(|r| {
                let len = r.end - r.start;
                let hex = drsftp_storage::checksum(
                    file.as_ref(),
                    ChecksumAlg::Crc32c,
                    r.start,
                    Some(len),
                )
                .map_err(|e| ClientError::Invalid(format!("CRC32C of what blast wrote: {e}")))?;
                let crc = u32::from_str_radix(&hex, 16)
                    .map_err(|e| ClientError::Invalid(format!("CRC32C {hex:?}: {e}")))?;
                Ok((r.start, len, crc))
            })
            .collect()
    })
    .await
    .map_err(|e| ClientError::Invalid(format!("CRC task: {e}")))?
}

/// `b` with blast's start rate raised to `share` of `shown_bps` (capped by `--max-rate`; never lowered).
pub(super) fn starting_at(b: &BlastOpts, shown_bps: f64, share: f64) -> BlastOpts {
    let mut b = b.clone();
    b.start_rate = b
        .start_rate
        .max(drsftp_tune::blast_start_rate(shown_bps, share, b.max_rate));
    b
}

fn choose(chosen: &'static str, reason: &str) -> TransportChoice {
    TransportChoice {
        chosen,
        reason: reason.to_string(),
        tcp_bytes: 0,
        judged: None,
        learned_age: None,
    }
}

/// The decider for a download that starts on TCP, with the path profile's rate as its link estimate and the
/// control connection's fastest round trip (timed before any data flowed) as the path's RTT.
fn auto_decider(opts: &ClientOptions, control: &Control) -> TransportDecider {
    let link = opts.auto_transport.as_ref().and_then(|a| a.link_bps);
    let d = TransportDecider::new(std::time::Instant::now(), TransportConfig::default(), link);
    match control.path_rtt() {
        Some(rtt) => d.with_path_rtt(rtt),
        None => d,
    }
}

/// How a TCP part of a download ended.
enum Leg {
    /// The transfer finished on TCP; with a decider, its last verdict for staying there (if it had one) and
    /// what it read of the path.
    Done(
        Box<super::transfer::Moved>,
        Option<String>,
        Option<drsftp_tune::Judged>,
    ),
    /// The decider moved the rest to blast: why, and what it read of the path. The TCP transfer was dropped
    /// (not yet aborted).
    Switch(String, Option<drsftp_tune::Judged>),
}

/// The TCP part of a download: everything `transfer::run` needs, and the checkpoint writer to start.
struct TcpLeg {
    spec: TransferSpec,
    job: DataJob,
    dopts: DataOpts,
    file: Arc<dyn FileHandle>,
    resumable: Option<Arc<resume::Resumable>>,
    held: RangeSet,
    /// Bytes the whole transfer moves (the decider's "remaining" is this less what arrived).
    len: Option<u64>,
    /// The final check's algorithm: its CKSM is pipelined behind RETR (a drsftp server answers it after the
    /// transfer), so verifying costs no round trip of its own; under a decider only from its first stay verdict.
    final_cksm: Option<ChecksumAlg>,
}

impl TcpLeg {
    /// Runs the TCP transfer; with `decider`, samples the receiving streams every [`AUTO_SAMPLE`] and stops as
    /// soon as it says to switch.
    async fn run(
        self,
        control: &mut Control,
        opts: &ClientOptions,
        progress: Arc<Progress>,
        decider: Option<TransportDecider>,
    ) -> Result<Leg, ClientError> {
        let watch = self
            .spec
            .streams_range
            .map(|_| StreamWatch::start(progress.clone()));
        if let Some(r) = &self.resumable {
            r.start_ranges(self.file.clone(), progress.clone());
        }
        // What is already in the file (a checkpoint's, or what blast or TCP moved before a change of transport)
        // is not asked for again.
        if !self.held.is_empty() {
            control.session_mut().set_resume(self.held.clone());
        }
        let total = self.len;
        // Watched by the rule, the final CKSM goes out only with its first stay verdict: queued behind a TCP RETR
        // that a switch then aborts, it would be hashed on the server ahead of the blast set-up (~0.2 s per GiB,
        // first22c). A transfer that ends before any verdict asks for it afterwards (one round trip, answered
        // from the server's sent-file CRC).
        // A file the server hashes in under a quarter of a round trip is the exception: a switch would wait that
        // little for its hash, and a copy that ends on TCP (any file this small on a clean path) saves the round
        // trip of asking afterwards.
        let rtt = control.path_rtt().unwrap_or_default().as_secs_f64();
        let cheap = total.is_some_and(|n| n as f64 / SERVER_HASH_BPS < rtt / 4.0);
        let ask = control.ask_cksm.clone();
        let mut ask_alg = self.final_cksm.filter(|_| decider.is_some() && !cheap);
        if let Some(a) = self.final_cksm.filter(|_| decider.is_none() || cheap) {
            control.session_mut().set_trailing_checksum(a.name());
        }
        let fut = transfer::run(
            control,
            self.spec,
            self.job,
            self.dopts,
            progress.clone(),
            opts.timeout,
        );
        let mut fut = Box::pin(fut);
        let mut stayed: Option<String> = None;
        let switch = match decider {
            None => None,
            Some(mut d) => {
                let size = total.unwrap_or(0);
                let mut tick = tokio::time::interval(AUTO_SAMPLE);
                loop {
                    tokio::select! {
                        r = &mut fut => {
                            ask.lock().map(|mut a| a.take()).ok();
                            let mut m = r?;
                            if let Some(w) = watch {
                                m.actions = w.finish();
                            }
                            return Ok(Leg::Done(Box::new(m), stayed, d.judged()));
                        }
                        _ = tick.tick() => {
                            let now = std::time::Instant::now();
                            d.handle_reading(now, progress.rx_reading());
                            let left = size.saturating_sub(progress.bytes());
                            match d.poll_decision(now, left) {
                                Some(Decision::SwitchToBlast(why)) => break Some((why, d.judged())),
                                Some(Decision::StayTcp(why)) => {
                                    if let Some(a) = ask_alg.take() {
                                        if let Ok(mut slot) = ask.lock() {
                                            *slot = Some(a.name().to_string());
                                        }
                                    }
                                    stayed = Some(why);
                                }
                                None => {}
                            }
                        }
                    }
                }
            }
        };
        if let Some((why, judged)) = switch {
            drop(fut);
            ask.lock().map(|mut a| a.take()).ok();
            return Ok(Leg::Switch(why, judged));
        }
        let mut m = fut.await?;
        if let Some(w) = watch {
            m.actions = w.finish();
        }
        Ok(Leg::Done(Box::new(m), None, None))
    }
}

impl Leg {
    /// The finished transfer, when no switch could happen (no decider).
    fn done(self) -> Result<super::transfer::Moved, ClientError> {
        match self {
            Leg::Done(m, _, _) => Ok(*m),
            Leg::Switch(why, _) => Err(ClientError::Invalid(format!("unexpected switch: {why}"))),
        }
    }
}
