//! Download orchestration: SIZE, a part file (or the destination in place for `--off/--len`), RETR/ERET in stream
//! mode or MODE E (`-p auto` from a drsftp server: a `Parallelism` range the server refines in, its changes
//! observed by `observe::StreamWatch`), byte-count and range checks, CKSM verification, then the rename into
//! place. Any error drops the [`Destination`], which removes what the download created, except the stable part
//! file and checkpoint of a resumable download (`resume.rs`: blast downloads, and whole-file TCP downloads of
//! at least [`TCP_RESUME_MIN`] from a server with a CKSM we know), which a rerun or retry resumes from with
//! `REST`; the bytes it held are trusted only after the whole file's checksum matched.

use std::path::Path;
use std::sync::Arc;

use drsftp_proto::client::{Direction, TransferSpec};
use drsftp_storage::FileHandle;
use drsftp_tune::BufferPolicy;

use super::blast;
use super::control::Control;
use super::local::Destination;
use super::observe::StreamWatch;
use super::resume;
use super::transfer::{self, DataJob};
use super::{verify, ClientError, ClientOptions, TransferSummary};
use crate::data::Progress;

/// Smaller TCP downloads start afresh: the MDTM round trip and checkpoint thread cost more than sending again.
pub(crate) const TCP_RESUME_MIN: u64 = 4 << 20;

/// `SIZE path`, where "the server does not do SIZE" (500/502/504) is `None` and everything else (550 no such
/// file, a dead connection) is an error.
pub(crate) async fn size_if_supported(
    control: &mut Control,
    path: &str,
) -> Result<Option<u64>, ClientError> {
    match super::size(control, path).await {
        Ok(n) => Ok(Some(n)),
        Err(e) if matches!(e.reply_code(), Some(500 | 502 | 504)) => {
            tracing::info!("server does not answer SIZE: {e}");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Downloads `remote` to `local`. See the module docs.
pub(crate) async fn run(
    control: &mut Control,
    remote: &str,
    local: &Path,
    opts: &ClientOptions,
    progress: Arc<Progress>,
) -> Result<TransferSummary, ClientError> {
    let size = size_if_supported(control, remote).await?;
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
    let (udp, udp_notice) = blast::wanted(control, opts);
    let alg = if opts.verify {
        verify::pick_alg(control.session().features())
    } else {
        None
    };
    // A whole-file download of known size is resumable (resume.rs): stable part file + checkpoint. Over TCP only
    // when worth it and when the resumed bytes can be checked (the whole file's CKSM at the end).
    let resumable = match (udp, opts.partial, size) {
        (Some(b), None, Some(sz)) => {
            let id = resume::identity(control, remote, sz).await;
            resume::Resumable::open(local, id, b.resume && opts.resume)?.map(Arc::new)
        }
        (None, None, Some(sz)) if sz >= TCP_RESUME_MIN && alg.is_some() => {
            let id = resume::identity(control, remote, sz).await;
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
    let mut dopts = opts.data_opts();
    dopts.crc32c = verify::want_engine_crc(alg, opts.partial.is_none());
    if want.end != u64::MAX {
        dopts.max_end = want.end;
    }
    let offset = opts.partial.map_or(0, |p| p.offset);
    // What a TCP download already holds: MODE E asks for the gaps, stream mode continues after the held prefix.
    let held = match (&resumable, udp) {
        (Some(r), None) => match mode {
            drsftp_proto::client::TransferMode::Extended => r.held().clone(),
            drsftp_proto::client::TransferMode::Stream => {
                let prefix = r.held().ranges().first().filter(|p| p.start == 0).cloned();
                prefix.into_iter().collect()
            }
        },
        _ => Default::default(),
    };
    let stream_from = held.ranges().first().map_or(0, |p| p.end);
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
    let moved = match udp {
        Some(b) => {
            let side = blast::Side::Recv {
                file: file.clone(),
                base: offset,
                resume: resumable.clone(),
            };
            let len = (want.end != u64::MAX).then(|| want.end - want.start);
            let moved = blast::run(control, spec, side, len, b, progress, opts.timeout).await?;
            resumable.iter().for_each(|r| r.complete());
            moved
        }
        None => {
            let watch = auto_range.map(|_| StreamWatch::start(progress.clone()));
            if let Some(r) = &resumable {
                r.start_ranges(file.clone(), progress.clone());
                if !held.is_empty() {
                    control.session_mut().set_resume(held.clone());
                }
            }
            let mut moved =
                transfer::run(control, spec, job, dopts, progress, opts.timeout).await?;
            if let Some(w) = watch {
                moved.actions = w.finish();
            }
            moved
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
    summary.resumed = held.covered();
    summary.notices.extend(udp_notice);
    summary
        .notices
        .extend(resumable.iter().flat_map(|r| r.notes().iter().cloned()));
    if opts.verify {
        let whole = opts.partial.is_none();
        verify::check(control, alg, remote, file, want, &moved.data, whole)
            .await?
            .record(&mut summary);
    }
    syncing
        .await
        .map_err(|e| ClientError::Invalid(format!("fsync task: {e}")))??;
    dest.commit()?;
    Ok(summary)
}
