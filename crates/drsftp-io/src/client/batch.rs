//! Pipelined small-file downloads ([`Client::download_batch`](super::Client::download_batch)): drives the
//! session's [`Op::Batch`] (RETR and CKSM per file sent ahead of the replies) and receives the files one after
//! another on one MODE E data connection that stays open between files and between batches on the same control
//! connection (the server connected to our listener once; the listener stays bound in case it connects again).
//! Each file lands in its part file; once its data, its `226` and its CKSM are in and agree, the part file is
//! flushed and renamed on the blocking pool while the next files keep moving: a file is complete and verified
//! or not there at all. A refused RETR fails that file only; a broken data or control connection fails every file
//! not finished yet, and the session is then left busy so the caller drops it.
//!
//! Files larger than one MODE E block (with a CKSM to check them by) resume like one-file downloads
//! (`resume.rs`): the stable part file and a checkpoint of its byte ranges, identified by the listing's size and
//! time, so a killed job's rerun (or a retry) sends `REST <ranges>` before that file's RETR and gets only the
//! gaps. Smaller files cost at most one block again, and keep the cheaper per-process part file.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use drsftp_proto::client::{BatchSpec, Event, Op, Outcome, TransferMode};
use drsftp_storage::{ChecksumAlg, FileHandle};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::control::Control;
use super::local::Destination;
use super::resume::{self, Identity};
use super::{transfer, verify, ClientError, ClientOptions, TransferSummary};
use crate::data::{self, DataError, DataReport, Progress};
use crate::tls::MaybeTls;
use drsftp_proto::ranges::RangeSet;

/// One file of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchFile {
    /// Server path.
    pub remote: String,
    /// Local destination (the file itself).
    pub local: PathBuf,
    /// The size the listing gave, checked against what arrives (`None`: whatever arrives).
    pub size: Option<u64>,
    /// The modification time the listing gave (Unix seconds): with the size, what a resume checkpoint of this
    /// file must match (`None`: the checkpoint says the server gave none).
    pub mtime: Option<i64>,
}

/// The data channel a batch leaves for the next one on the same control connection: our listener (the server's
/// PORT address) and the connections it keeps. Dropped when any other transfer sets up its own channel.
#[derive(Debug)]
pub(crate) struct BatchChannel {
    listener: TcpListener,
    socks: Vec<MaybeTls>,
    /// Data connections the server opened to the listener so far.
    pub(crate) accepted: u64,
}

/// Files with RETR unanswered at once: enough to keep a 100 ms path busy with 64 KiB files, few enough that a
/// session's share of the queue on the server stays small.
pub const BATCH_WINDOW: usize = 16;

/// Files larger than this keep a resume checkpoint: sending a smaller one again costs at most one block, within
/// the resume bound of 1 % plus one block per stream (docs/resume.md).
const RESUME_ABOVE: u64 = data::DEFAULT_BLOCK as u64;

/// What is known of one file so far.
#[derive(Default)]
struct FileState {
    started: bool,
    retr: Option<drsftp_proto::client::Reply>,
    cksm: Option<Result<String, drsftp_proto::client::Reply>>,
    /// The part file, from the start of its receive until it is handed to the finishing task.
    dest: Option<Destination>,
    /// A resumable file's stable part file and checkpoint: opened at the batch's start if a checkpoint waits
    /// (its ranges went out with `REST`), else when its data starts.
    resume: Option<resume::Resumable>,
    data: Option<(DataReport, f64)>,
    /// Handed to the finishing task (check, flush, rename).
    settling: bool,
    result: Option<Result<TransferSummary, ClientError>>,
}

type Recv = Pin<Box<dyn std::future::Future<Output = Result<DataReport, DataError>> + Send>>;

/// Downloads `files` in order, pipelined (see the module docs). One result per file, in order.
pub(crate) async fn run(
    control: &mut Control,
    files: &[BatchFile],
    opts: &ClientOptions,
    progress: Arc<Progress>,
) -> Vec<Result<TransferSummary, ClientError>> {
    let mut st: Vec<FileState> = files.iter().map(|_| FileState::default()).collect();
    let ended = drive(control, files, opts, progress, &mut st).await;
    if let Err(e) = &ended {
        tracing::debug!("batch ended early: {e}");
    }
    results_after(st.into_iter().map(|s| s.result), ended)
}

/// Every file's result once a batch's driver returned (downloads and uploads alike): a file it left without one
/// gets the error that ended the batch (the first such file) or a note that the batch broke off.
pub(super) fn results_after(
    results: impl Iterator<Item = Option<Result<TransferSummary, ClientError>>>,
    ended: Result<(), ClientError>,
) -> Vec<Result<TransferSummary, ClientError>> {
    let msg = ended.as_ref().err().map(ToString::to_string);
    let mut first = ended.err();
    results
        .map(|r| match (r, &msg) {
            (Some(r), _) => r,
            (None, Some(msg)) => Err(first.take().unwrap_or_else(|| {
                ClientError::Control(std::io::Error::other(format!("the batch broke off: {msg}")))
            })),
            (None, None) => Err(ClientError::Invalid("not attempted".into())),
        })
        .collect()
}

async fn drive(
    control: &mut Control,
    files: &[BatchFile],
    opts: &ClientOptions,
    progress: Arc<Progress>,
    st: &mut [FileState],
) -> Result<(), ClientError> {
    let alg = if opts.verify {
        verify::pick_alg(control.session().features())
    } else {
        None
    };
    let mut dopts = opts.data_opts();
    dopts.crc32c = alg == Some(ChecksumAlg::Crc32c);
    // Which files resume (their checkpoint's identity), and what those with a checkpoint already hold.
    let peer = control.peer();
    let ids: Vec<Option<Identity>> = files
        .iter()
        .map(|f| match (f.size, alg) {
            (Some(sz), Some(_)) if sz > RESUME_ABOVE || resume::has_checkpoint(&f.local) => {
                let mtime = f.mtime.map(crate::client::job::plan::format_modify);
                Some(resume::identity_of(peer, &f.remote, sz, mtime))
            }
            _ => None,
        })
        .collect();
    let mut held = vec![RangeSet::new(); files.len()];
    for (i, id) in ids.iter().enumerate() {
        let Some(id) = id
            .clone()
            .filter(|_| resume::has_checkpoint(&files[i].local))
        else {
            continue;
        };
        if let Some(r) = resume::Resumable::open(&files[i].local, id, opts.resume)? {
            held[i] = r.held().clone();
            st[i].resume = Some(r);
        }
    }
    let (channel, port) = match control.batch_channel.take() {
        Some(c) => (c, None),
        None => {
            let addr = std::net::SocketAddr::new(control.local_ip(), 0);
            let listener = data::listen(addr, &dopts)
                .await
                .map_err(ClientError::DataSetup)?;
            let port = listener.local_addr().map_err(ClientError::DataSetup)?;
            let c = BatchChannel {
                listener,
                socks: vec![],
                accepted: 0,
            };
            (c, Some(port))
        }
    };
    let BatchChannel {
        listener,
        socks: mut idle,
        mut accepted,
    } = channel;
    control.start(Op::Batch(BatchSpec {
        paths: files.iter().map(|f| f.remote.clone()).collect(),
        held,
        checksum: alg.map(|a| a.name().to_string()),
        port,
        window: BATCH_WINDOW,
        gated: false,
    }))?;
    let mut finishing = tokio::task::JoinSet::new();
    let outcome: Result<(), ClientError> = async {
        let peer_ip = [control.peer().ip()];
        let (conn_tx, mut conn_rx) = mpsc::channel::<MaybeTls>(8);
        let accept = transfer::accept_loop(&listener, conn_tx, &peer_ip, &dopts, |s| s);
        tokio::pin!(accept);
        // The file whose data comes next on the data connection, and its receive while it runs.
        let mut next = 0usize;
        let mut recv: Option<(Recv, mpsc::Sender<MaybeTls>, Instant)> = None;
        let mut control_done = false;
        let idle_limit = opts.timeout;
        loop {
            // Start receiving the next file once the server accepted its RETR; skip files it refused.
            while recv.is_none() && next < files.len() {
                let s = &mut st[next];
                if s.started {
                    if let (None, Some(id)) = (&s.resume, &ids[next]) {
                        s.resume = resume::Resumable::open(&files[next].local, id.clone(), opts.resume)?;
                    }
                    // Its own counter (the checkpoint saves this file's ranges), counted in the batch's too.
                    let p = Arc::new(Progress::child(progress.clone()));
                    let dest = match &s.resume {
                        Some(r) => r.destination()?,
                        None => Destination::part_file(&files[next].local)?,
                    };
                    let file: Arc<dyn FileHandle> = dest.handle();
                    if let Some(r) = &s.resume {
                        r.start_ranges(file.clone(), p.clone());
                    }
                    let mut o = dopts.clone();
                    if let Some(sz) = files[next].size {
                        o.max_end = sz;
                    }
                    let (tx, rx) = mpsc::channel(8);
                    for sock in idle.drain(..) {
                        let _ = tx.try_send(sock);
                    }
                    let fut: Recv =
                        Box::pin(async move { data::recv_mode_e(rx, file, 0, &o, p).await });
                    s.dest = Some(dest);
                    recv = Some((fut, tx, Instant::now()));
                } else if s.retr.is_some() {
                    next += 1;
                } else {
                    break;
                }
            }
            if control_done && recv.is_none() && next >= files.len() {
                break;
            }
            tokio::select! {
                ev = control.next_event(), if !control_done => {
                    match ev? {
                        Event::BatchStarted(i) => st[i].started = true,
                        Event::BatchRetr { index, reply } => st[index].retr = Some(reply),
                        Event::BatchChecksum { index, result } => st[index].cksm = Some(result),
                        Event::Done(Outcome::Batch) => control_done = true,
                        Event::Failed(e) => return Err(e.into()),
                        Event::Done(o) => {
                            return Err(ClientError::Invalid(format!("unexpected outcome {o:?}")))
                        }
                        Event::Notice(n) => tracing::info!("server: {n}"),
                        ev => tracing::debug!("{ev:?}"),
                    }
                }
                r = async { (&mut recv.as_mut().expect("guarded").0).await }, if recv.is_some() => {
                    let (_, _, t0) = recv.take().expect("guarded");
                    let mut report = r.map_err(ClientError::Data)?;
                    idle.append(&mut report.reusable);
                    st[next].data = Some((report, t0.elapsed().as_secs_f64()));
                    next += 1;
                }
                Some(s) = conn_rx.recv() => {
                    accepted += 1;
                    match recv.as_ref() {
                        Some((_, tx, _)) => {
                            let _ = tx.try_send(s);
                        }
                        None => idle.push(s),
                    }
                }
                _ = &mut accept => {
                    return Err(ClientError::DataSetup(std::io::Error::other("the data listener failed")))
                }
                _ = tokio::time::sleep(idle_limit) => return Err(ClientError::Stalled(idle_limit)),
            }
            for (i, s) in st.iter_mut().enumerate() {
                settle(i, &files[i], s, alg, &mut finishing);
            }
        }
        Ok(())
    }
    .await;
    // Checks, flushes and renames still running, also after a failure: a file already checked and renamed is
    // reported as copied, not retried (a retry would find it complete and skip it).
    while let Some(j) = finishing.join_next().await {
        match j {
            Ok((i, r)) => st[i].result = Some(r),
            Err(e) => tracing::warn!("batch finishing task: {e}"),
        }
    }
    outcome?;
    control.batch_channel = Some(BatchChannel {
        listener,
        socks: idle,
        accepted,
    });
    Ok(())
}

/// Decides file `i` once enough is known: a refusal fails it; data, `226` and the checksum go to a blocking task
/// that compares, flushes and renames (its result is collected at the end of the batch).
fn settle(
    i: usize,
    f: &BatchFile,
    s: &mut FileState,
    alg: Option<ChecksumAlg>,
    finishing: &mut tokio::task::JoinSet<(usize, Result<TransferSummary, ClientError>)>,
) {
    if s.result.is_some() || s.settling {
        return;
    }
    let Some(reply) = s.retr.clone() else {
        return;
    };
    if !reply.is_ok() {
        // A refusal after the start still waits for its receive to end (it owns the part file).
        if !s.started || s.data.is_some() {
            s.dest = None;
            s.resume = None;
            s.result = Some(Err(ClientError::Session(
                drsftp_proto::client::ClientError::Refused {
                    command: format!("RETR {}", f.remote),
                    reply,
                },
            )));
        }
        return;
    }
    if s.data.is_none() || (alg.is_some() && s.cksm.is_none()) {
        return;
    }
    let (Some((report, seconds)), Some(dest)) = (s.data.take(), s.dest.take()) else {
        return;
    };
    s.settling = true;
    let theirs = s.cksm.take();
    let f = f.clone();
    let resume = s.resume.take();
    finishing.spawn_blocking(move || {
        let r = finish(&f, report, seconds, dest, resume.as_ref(), alg, theirs);
        // After the rename: a complete file's checkpoint goes, an incomplete one's stays for the next run.
        drop(resume);
        (i, r)
    });
}

/// Size and checksum checks, then flush and rename (blocking). A resumed file's held ranges count with what
/// arrived, and its checksum is of the whole file read back (the engine's CRC covers this run's bytes only).
fn finish(
    f: &BatchFile,
    report: DataReport,
    seconds: f64,
    dest: Destination,
    resume: Option<&resume::Resumable>,
    alg: Option<ChecksumAlg>,
    theirs: Option<Result<String, drsftp_proto::client::Reply>>,
) -> Result<TransferSummary, ClientError> {
    let want = 0..f.size.unwrap_or(report.bytes);
    let held = resume.map(|r| r.held().clone()).unwrap_or_default();
    if held.is_empty() {
        verify::check_moved(&f.remote, &report, want.clone())?;
    } else {
        verify::check_resumed(&f.remote, &report, want.clone(), &held)?;
    }
    // Every byte is here: whatever happens next (a checksum mismatch), the part file is not resumed from.
    if let Some(r) = resume {
        r.complete();
    }
    let got = dest.handle().len()?;
    if got != want.end {
        return Err(ClientError::SizeMismatch {
            what: f.local.display().to_string(),
            expected: want.end,
            got,
        });
    }
    let mut summary = summary_of(&report, seconds);
    summary.resumed = held.covered();
    if let Some(r) = resume {
        summary.notices.extend(r.notes().iter().cloned());
    }
    let h: Arc<dyn FileHandle> = dest.handle();
    compare_checksum(
        &mut summary,
        &f.remote,
        alg,
        theirs,
        &report,
        &want,
        h.as_ref(),
    )?;
    dest.commit()?;
    Ok(summary)
}

/// The batch file's CKSM reply against our checksum of bytes `want` (the engine's CRC32C, else a read of `file`):
/// a mismatch fails the file; a match marks `summary` verified; a refusal or no common algorithm is a notice.
pub(super) fn compare_checksum(
    summary: &mut TransferSummary,
    what: &str,
    alg: Option<ChecksumAlg>,
    theirs: Option<Result<String, drsftp_proto::client::Reply>>,
    report: &DataReport,
    want: &std::ops::Range<u64>,
    file: &dyn FileHandle,
) -> Result<(), ClientError> {
    match (alg, theirs) {
        (Some(alg), Some(Ok(theirs))) => {
            let ours = match verify::engine_crc(alg, report, want) {
                Some(c) => format!("{c:08x}"),
                None => {
                    drsftp_storage::checksum(file, alg, 0, Some(want.end))?.to_ascii_lowercase()
                }
            };
            if ours != theirs {
                return Err(ClientError::ChecksumMismatch {
                    what: what.to_string(),
                    alg: alg.name().to_string(),
                    local: ours,
                    remote: theirs,
                });
            }
            summary.verified = true;
            summary.checksum = Some((alg.name().to_string(), ours));
        }
        (Some(_), Some(Err(r))) => summary.notices.push(format!(
            "checksum not verified: the server refused CKSM: {r}"
        )),
        _ => summary
            .notices
            .push("checksum not verified: the server lists no CKSM algorithm we know".into()),
    }
    Ok(())
}

/// The summary of one file of a batch (either direction): one MODE E connection, nothing negotiated per file.
pub(super) fn summary_of(report: &DataReport, seconds: f64) -> TransferSummary {
    TransferSummary {
        peak_buffer: report.peak_buffer,
        peak_window: report.peak_window,
        ..TransferSummary::tcp(
            TransferMode::Extended,
            report.bytes,
            seconds,
            report.streams,
        )
    }
}
