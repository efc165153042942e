//! Upload orchestration: open the local file, STOR (or `ESTO A offset` for `--off/--len`) in stream mode or MODE E
//! with ALLO, then check the server's SIZE (whole files) and compare CKSM. A mismatch is reported as an error; the
//! remote file is left for the user to inspect (we do not delete on the server), except after a resumed upload.
//!
//! Resume (docs/resume.md "Upload resume"): a whole-file MODE E upload of at least [`TCP_RESUME_MIN`] to a server
//! with a CKSM we know first asks `SITE PARTIAL <size> <tag> <path>` (the tag names this version of the local
//! file: its modification time and inode), which arms the server to keep the partial if the upload fails and
//! answers the ranges it already keeps from an earlier one. Those go out with `REST` and only the gaps are
//! sent. Kept bytes are checked by the whole file's CKSM at the end; if that fails the remote file is deleted,
//! so a bad splice is never left looking complete.

use std::path::Path;
use std::sync::Arc;

use drsftp_proto::client::{Direction, Op, Outcome, TransferMode, TransferSpec};
use drsftp_proto::ranges::RangeSet;
use drsftp_storage::FileHandle;
use drsftp_tune::BufferPolicy;

use super::blast;
use super::control::Control;
use super::download::TCP_RESUME_MIN;
use super::local::LocalFile;
use super::stat::size_if_supported;
use super::transfer::{self, DataJob};
use super::upload_auto;
use super::upload_resume::{self, MarkerCheckpoint};
use super::{verify, ClientError, ClientOptions, TransferSummary};
use crate::data::Progress;

/// Uploads `local` to `remote`. See the module docs.
pub(crate) async fn run(
    control: &mut Control,
    local: &Path,
    remote: &str,
    opts: &ClientOptions,
    progress: Arc<Progress>,
) -> Result<TransferSummary, ClientError> {
    let lf = LocalFile::open_read(local)?;
    let len = lf.len()?;
    let file: Arc<dyn FileHandle> = Arc::new(lf);
    let range = match opts.partial {
        Some(p) => {
            let end = p
                .offset
                .checked_add(p.length)
                .filter(|e| *e <= len)
                .ok_or_else(|| {
                    ClientError::Invalid(format!(
                        "--off {} --len {} is past the end of {} ({len} bytes)",
                        p.offset,
                        p.length,
                        local.display()
                    ))
                })?;
            p.offset..end
        }
        None => 0..len,
    };
    // Online `-p auto` needs MODE E (connections join and retire), even when it starts on one stream.
    let mode = match opts.auto_streams {
        Some(_) => TransferMode::Extended,
        None => opts.mode(),
    };
    let (udp, udp_notice) = blast::wanted(control, opts);
    // `--transport auto`: blast from a lossy path profile; else a whole MODE E upload (whose streams' TCP_INFO
    // the sender reads) starts on TCP, watched, and may move to blast (upload_auto.rs).
    let blast_opts = udp;
    let watchable = mode == TransferMode::Extended && opts.partial.is_none();
    let (udp, mut choice, udp_notice) = match &opts.auto_transport {
        Some(a) => match a.start(udp.is_some(), watchable) {
            drsftp_tune::StartChoice::Blast(why) => (udp, Some(("udp", why)), None),
            drsftp_tune::StartChoice::Tcp(why) => (None, Some(("tcp", why)), None),
            drsftp_tune::StartChoice::TcpWatched => (None, None, None),
        },
        None => (udp, None, udp_notice),
    };
    let watched = opts.auto_transport.is_some() && udp.is_none() && choice.is_none();
    let alg = if opts.verify {
        verify::pick_alg(control.session().features())
    } else {
        None
    };
    let resumable = udp.is_none()
        && mode == TransferMode::Extended
        && opts.partial.is_none()
        && alg.is_some()
        && len >= TCP_RESUME_MIN;
    let tag = source_tag(local).filter(|_| resumable);
    let kept = match &tag {
        Some(tag) => ask_kept(control, len, tag, remote).await?,
        None => None,
    };
    // A server that keeps no partials (globus-gridftp-server) still confirms what it wrote with range markers:
    // those are kept here, and a rerun sends `REST` with them (upload_resume.rs).
    let mut markers = match (&tag, &kept) {
        (Some(tag), None) => {
            MarkerCheckpoint::open(&control.peer().to_string(), remote, len, tag, opts.resume)
        }
        _ => None,
    };
    if let (Some(m), Some(alg)) = (markers.as_mut(), alg) {
        if m.found() {
            let tail =
                upload_resume::verify_tail(control, alg, remote, file.clone(), m.held(), len);
            m.add(&tail.await?);
        }
    }
    let mut notices: Vec<String> = markers
        .as_ref()
        .and_then(|m| m.note())
        .map(String::from)
        .into_iter()
        .collect();
    let held = match kept {
        Some(h) if opts.resume => h.intersect(0..len),
        Some(h) => {
            if !h.is_empty() {
                notices.push(
                    "--no-resume: the server's partial upload is replaced; starting afresh".into(),
                );
            }
            RangeSet::new()
        }
        None => markers
            .as_ref()
            .map(|m| m.held().clone())
            .unwrap_or_default(),
    };
    let send = if held.is_empty() {
        vec![range.clone()]
    } else {
        notices.push(format!(
            "resuming an interrupted upload: {} of {len} bytes already on the server",
            held.covered()
        ));
        control.session_mut().set_resume(held.clone());
        held.gaps(range.clone())
    };
    // Watched by the transport rule (a whole fresh upload that could switch): `-p auto` keeps its starting streams
    // until the rule's first verdict, so the rule judges the path, not a queue our own new streams build
    // (upload_auto.rs).
    let watch = blast_opts.filter(|_| watched && markers.is_none() && held.is_empty());
    let gate = watch.map(|_| crate::data::GrowthGate::closed());
    let job = match mode {
        TransferMode::Extended => DataJob::SendModeE {
            file: file.clone(),
            ranges: send,
            wire_sub: range.start,
            auto: opts
                .auto_streams
                .clone()
                .map(|a| Box::new(a.with_gate(gate.clone()))),
        },
        TransferMode::Stream => DataJob::SendStream {
            file: file.clone(),
            range: range.clone(),
        },
    };
    let spec = TransferSpec {
        direction: Direction::Upload,
        path: remote.to_string(),
        mode,
        streams: opts.streams.max(1),
        streams_range: None,
        tcp_buffer: opts.tcp_buffer,
        partial: opts.partial,
        alloc: Some(len),
        drs: opts.buffer == BufferPolicy::Drs,
        transport: blast::transport(udp),
        stripes: opts.stripes,
    };
    let blast_side = || blast::Side::Send {
        file: file.clone(),
        base: range.start,
    };
    let switch_spec = spec.clone();
    let mut tcp_bytes = 0;
    let mut judged = None;
    let moved = match udp {
        Some(b) => {
            let len = Some(range.end - range.start);
            // Under auto, blast that stays silent for a second (no acknowledgement: UDP blocked) gives way to TCP.
            let blocked = opts
                .auto_transport
                .as_ref()
                .map(|_| upload_auto::BLAST_BLOCKED_AFTER);
            let r = blast::run(
                control,
                spec.clone(),
                blast_side(),
                len,
                b,
                progress.clone(),
                opts.timeout,
                blocked,
            )
            .await;
            match r {
                Ok(m) => m,
                Err(e) if upload_auto::fall_back(blocked.is_some(), &e, &progress) => {
                    let why = choice.as_ref().map_or(String::new(), |c| c.1.clone());
                    choice = Some((
                        "tcp",
                        format!("blast was chosen ({why}), but {e}; {}", super::FELL_BACK),
                    ));
                    let spec = TransferSpec {
                        transport: blast::transport(None),
                        ..spec
                    };
                    let dopts = opts.data_opts();
                    transfer::run(control, spec, job, dopts, progress.clone(), opts.timeout).await?
                }
                Err(e) => return Err(e),
            }
        }
        None => {
            let mut dopts = opts.data_opts();
            // The CRC32C of what we send, block by block as it is read: no re-read to verify.
            dopts.crc32c = verify::want_engine_crc(alg, opts.partial.is_none());
            if let Some(m) = &markers {
                m.start(progress.clone());
            }
            if let Some(a) = alg.filter(|_| opts.verify && opts.partial.is_none()) {
                // Verified with no round trip of its own: the server answers it once the STOR is done.
                control.session_mut().set_trailing_checksum(a.name());
            }
            if opts.partial.is_none() {
                // The size check below, answered the same way (a drsftp server; others ignore the request).
                control.session_mut().set_trailing_size();
            }
            let decider = watch.map(|b| (b, upload_auto::decider(opts, control)));
            let t0 = std::time::Instant::now();
            let fut = transfer::run(control, spec, job, dopts, progress.clone(), opts.timeout);
            let r = match decider {
                None => fut.await,
                Some((b, d)) => match upload_auto::watch(fut, d, &progress, len, gate).await {
                    upload_auto::Watched::Done(r, why, j) => {
                        judged = j;
                        choice = Some(("tcp", why));
                        *r
                    }
                    upload_auto::Watched::Switch(why, j) => {
                        judged = j;
                        // ABOR the TCP upload without waiting for its answer (a drsftp server reads the blast
                        // set-up behind it); blast sends the whole file again (STOR replaces it).
                        transfer::abort_and_go_on(control).await;
                        tcp_bytes = progress.acked();
                        tracing::info!("--transport auto: {why}; the upload goes over UDP blast");
                        // Blast starts near the rate TCP already showed, not at its default 10 Mbit/s.
                        let started;
                        let b = match &judged {
                            Some(j) => {
                                started = super::download::starting_at(
                                    b,
                                    j.rate_bps,
                                    drsftp_tune::SWITCH_START_SHARE,
                                );
                                &started
                            }
                            None => b,
                        };
                        let spec = TransferSpec {
                            transport: blast::transport(Some(b)),
                            ..switch_spec
                        };
                        let fresh = Arc::new(Progress::new());
                        let len = Some(range.end - range.start);
                        let mut m = blast::run(
                            control,
                            spec,
                            blast_side(),
                            len,
                            b,
                            fresh,
                            opts.timeout,
                            None,
                        )
                        .await?;
                        m.seconds = t0.elapsed().as_secs_f64();
                        choice = Some(("tcp+udp", why));
                        Ok(m)
                    }
                },
            };
            match r {
                Ok(m) => m,
                Err(e) => {
                    if let (Some(m), ClientError::Session(s)) = (&markers, &e) {
                        // Refused (a `REST` the server will not take, a `STOR` it fails): the next try starts
                        // afresh rather than failing the same way again.
                        if !held.is_empty() && !s.is_fatal() {
                            m.complete();
                        }
                    }
                    return Err(e);
                }
            }
        }
    };
    let what = local.display().to_string();
    if held.is_empty() {
        verify::check_moved(&what, &moved.data, range.clone())?;
    } else {
        verify::check_resumed(&what, &moved.data, range.clone(), &held)?;
    }
    if let Some(m) = &markers {
        // Every byte is on the server: whatever the checks below say, these markers are not resumed from again.
        m.complete();
    }
    if opts.partial.is_none() {
        // The SIZE that rode behind the STOR, else (another server, a refusal, a switch to blast) asked now.
        let there = match moved.report.size.as_deref() {
            Some(Ok(n)) => Some(*n),
            _ => size_if_supported(control, remote).await?,
        };
        if let Some(got) = there {
            if got != len {
                return Err(ClientError::SizeMismatch {
                    what: remote.to_string(),
                    expected: len,
                    got,
                });
            }
        }
    }
    let mut summary = TransferSummary::new(mode, &moved);
    summary.resumed = held.covered();
    summary.notices.extend(udp_notice);
    summary.transport_choice = choice.map(|(chosen, reason)| super::TransportChoice {
        chosen,
        reason,
        tcp_bytes,
        judged,
        learned_age: opts.auto_transport.as_ref().and_then(|a| a.memory_age()),
    });
    summary.notices.extend(notices);
    if opts.verify {
        let whole = opts.partial.is_none();
        let t = std::time::Instant::now();
        let theirs = moved.report.checksum.clone().map(|b| *b);
        match verify::check(
            control,
            alg,
            remote,
            file,
            range,
            &moved.data,
            whole,
            theirs,
        )
        .await
        {
            Ok(v) => {
                v.record(&mut summary);
                summary.verify_seconds = Some(t.elapsed().as_secs_f64());
            }
            Err(ClientError::ChecksumMismatch { .. }) if !held.is_empty() && markers.is_some() => {
                // Ranges from restart markers that do not check out: send the whole file again (the STOR
                // without REST replaces it), and verify that.
                drop(markers);
                tracing::warn!("resumed upload failed its checksum; sending all of {remote} again");
                let fresh = ClientOptions {
                    resume: false,
                    ..opts.clone()
                };
                let mut again = Box::pin(run(control, local, remote, &fresh, progress)).await?;
                again.notices.push(format!(
                    "the resumed upload of {what} failed its checksum; sent the whole file again"
                ));
                return Ok(again);
            }
            Err(e @ ClientError::ChecksumMismatch { .. }) if !held.is_empty() => {
                // Kept bytes that do not check out: remove the file, so nothing looks complete; a rerun
                // starts afresh (the partial was consumed by the commit).
                let gone = control.run(Op::Command(format!("DELE {remote}"))).await;
                tracing::warn!("resumed upload failed its checksum; deleted {remote}: {gone:?}");
                return Err(e);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(summary)
}

/// The tag `SITE PARTIAL` names the local file's version with: its modification time and inode, so a changed
/// source never resumes into another version's partial.
fn source_tag(local: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(local).ok()?;
    Some(format!(
        "m{}-{}-i{}-d{}",
        md.mtime(),
        md.mtime_nsec(),
        md.ino(),
        md.dev()
    ))
}

/// Arms the server to keep this upload if it fails and asks what it keeps from an earlier one (`SITE PARTIAL`):
/// `None` if the server keeps no partials (globus-gridftp-server answers `500`), else the ranges (maybe none).
pub(super) async fn ask_kept(
    control: &mut Control,
    len: u64,
    tag: &str,
    remote: &str,
) -> Result<Option<RangeSet>, ClientError> {
    match control
        .run(Op::Command(format!("SITE PARTIAL {len} {tag} {remote}")))
        .await
    {
        Ok(Outcome::Reply(r)) if r.code == 213 => Ok(Some(
            r.text()
                .trim()
                .strip_prefix("Range Marker")
                .and_then(|t| RangeSet::parse(t.trim()))
                .unwrap_or_default(),
        )),
        Ok(Outcome::Reply(r)) if r.code == 200 => Ok(Some(RangeSet::new())),
        Ok(_) => Ok(None),
        Err(ClientError::Session(e)) if !e.is_fatal() => Ok(None),
        Err(e) => Err(e),
    }
}
