//! Pipelined small-file uploads ([`Client::upload_batch`](super::Client::upload_batch)), the mirror of
//! `batch.rs`: drives the session's [`Op::UploadBatch`] (ALLO, STOR, MFMT and CKSM per file sent ahead of the
//! replies) and sends the files one after another on one MODE E data connection to the server's PASV address,
//! kept between files and between batches on the same control connection (each file ends with EOF/EOD, no
//! close; `drsftp serve` and globus-gridftp-server keep such connections for the next STOR).
//!
//! The one rule that keeps a file's bytes out of another file: file k's data goes out only after the session
//! reported the server's 1xx to file k's STOR ([`Event::BatchStarted`]), and only after file k-1's data is all
//! out. A STOR refused before its 1xx gets no data and fails alone. A STOR that fails *after* its 1xx leaves the
//! connection in a state we cannot know (did the server read our bytes, or will it read them as the next
//! file's?), so the batch stops there: that file fails with its reply, every file not finished fails with a
//! transient error for the caller's one-file path, and the session is left busy so it is dropped.
//!
//! A file is done only when its data went out, its STOR got 2xx and the server's CKSM equals ours (CRC32C from the
//! engine as blocks were sent; other algorithms read the local file again on the blocking pool).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use drsftp_proto::client::{Event, Op, Outcome, Reply, UploadBatchSpec, UploadItem};
use drsftp_storage::{ChecksumAlg, FileHandle};

use super::control::Control;
use super::local::LocalFile;
use super::{transfer, verify, ClientError, ClientOptions, TransferSummary};
use crate::data::{self, DataError, DataReport, Progress};
use crate::tls::MaybeTls;

/// One file of an upload batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadFile {
    /// The local file.
    pub local: PathBuf,
    /// Server path (the file itself).
    pub remote: String,
    /// Modification time to keep with `MFMT` (Unix seconds) where the server lists MFMT.
    pub mtime: Option<i64>,
}

/// Files with STOR unanswered at once: as for downloads (`BATCH_WINDOW`), enough for 64 KiB files at 100 ms.
pub const UPLOAD_WINDOW: usize = 16;

/// The data connection an upload batch leaves for the next one on the same control connection. Dropped when any
/// other transfer sets up its own channel.
#[derive(Debug)]
pub(crate) struct UploadChannel {
    socks: Vec<MaybeTls>,
    /// Data connections opened to the server for upload batches on this channel so far.
    pub(crate) connections: u64,
}

/// What is known of one file so far.
#[derive(Default)]
struct FileState {
    /// Its 1xx came: its data may go (after the previous file's).
    started: bool,
    stor: Option<Reply>,
    mfmt: Option<Reply>,
    cksm: Option<Result<String, Reply>>,
    /// What the data side reported once every byte of the file was out.
    sent: Option<(DataReport, f64)>,
    settling: bool,
    result: Option<Result<TransferSummary, ClientError>>,
}

/// A file opened for the batch.
struct Source {
    file: Arc<dyn FileHandle>,
    len: u64,
    /// Its MFMT was asked for.
    mtime: bool,
}

type Send = Pin<Box<dyn Future<Output = Result<DataReport, DataError>> + std::marker::Send>>;

/// Uploads `files` in order, pipelined (see the module docs). One result per file, in order.
pub(crate) async fn run(
    control: &mut Control,
    files: &[UploadFile],
    opts: &ClientOptions,
    progress: Arc<Progress>,
) -> Vec<Result<TransferSummary, ClientError>> {
    let mut st: Vec<FileState> = files.iter().map(|_| FileState::default()).collect();
    let mfmt = control.session().features().has("MFMT");
    // Files that cannot be opened fail here and are left out of the batch.
    let mut srcs: Vec<Option<Source>> = Vec::with_capacity(files.len());
    for (f, s) in files.iter().zip(st.iter_mut()) {
        match LocalFile::open_read(&f.local).and_then(|lf| Ok((lf.len()?, lf))) {
            Ok((len, lf)) => srcs.push(Some(Source {
                file: Arc::new(lf),
                len,
                mtime: mfmt && f.mtime.is_some(),
            })),
            Err(e) => {
                s.result = Some(Err(e));
                srcs.push(None);
            }
        }
    }
    let ended = drive(control, files, &srcs, opts, progress, &mut st).await;
    if let Err(e) = &ended {
        tracing::debug!("upload batch ended early: {e}");
    }
    super::batch::results_after(st.into_iter().map(|s| s.result), ended)
}

async fn drive(
    control: &mut Control,
    files: &[UploadFile],
    srcs: &[Option<Source>],
    opts: &ClientOptions,
    progress: Arc<Progress>,
    st: &mut [FileState],
) -> Result<(), ClientError> {
    // Batch position -> file index (files that could not be opened are not in the batch).
    let order: Vec<usize> = (0..files.len()).filter(|&i| srcs[i].is_some()).collect();
    if order.is_empty() {
        return Ok(());
    }
    let alg = if opts.verify {
        verify::pick_alg(control.session().features())
    } else {
        None
    };
    let mut dopts = opts.data_opts();
    dopts.crc32c = alg == Some(ChecksumAlg::Crc32c);
    let channel = control.upload_channel.take();
    let pasv = channel.is_none();
    let UploadChannel {
        socks: mut idle,
        mut connections,
    } = channel.unwrap_or(UploadChannel {
        socks: vec![],
        connections: 0,
    });
    let items = order
        .iter()
        .map(|&i| {
            let src = srcs[i].as_ref().expect("in order");
            UploadItem {
                path: files[i].remote.clone(),
                size: src.len,
                mtime: files[i]
                    .mtime
                    .filter(|_| src.mtime)
                    .map(crate::client::job::plan::format_modify),
            }
        })
        .collect();
    control.start(Op::UploadBatch(UploadBatchSpec {
        files: items,
        checksum: alg.map(|a| a.name().to_string()),
        pasv,
        window: UPLOAD_WINDOW,
        peer: None,
        first_alone: false,
    }))?;
    let mut finishing = tokio::task::JoinSet::new();
    let outcome: Result<(), ClientError> = async {
        let peer_ip = control.peer().ip();
        // The batch position whose data goes next, and its send while it runs.
        let mut next = 0usize;
        let mut sending: Option<(Send, Instant)> = None;
        let mut control_done = false;
        let idle_limit = opts.timeout;
        let mut last_bytes = progress.bytes();
        // The data connection failed while file `order[next]` was going out: the batch ends once that file's
        // STOR is answered (a refusal then says why, better than the broken pipe it caused).
        let mut broken: Option<ClientError> = None;
        loop {
            if let Some(e) = broken.take() {
                if st[order[next]].stor.is_some() || control_done {
                    return Err(e);
                }
                broken = Some(e);
            }
            // Start the next file's data once its STOR was accepted; skip files refused before that.
            while broken.is_none() && sending.is_none() && next < order.len() {
                let i = order[next];
                let s = &mut st[i];
                if s.started {
                    if s.stor.as_ref().is_some_and(|r| !r.is_ok()) {
                        // Accepted, then failed before we sent a byte: the server may still read our next
                        // bytes as this file's. Stop (the module docs).
                        s.result = Some(Err(refused(&files[i], s.stor.clone())));
                        return Err(after_start(&files[i], s.stor.as_ref()));
                    }
                    if idle.is_empty() {
                        return Err(ClientError::DataSetup(std::io::Error::other(
                            "no data connection for the upload batch",
                        )));
                    }
                    let src = srcs[i].as_ref().expect("in order");
                    let socks = std::mem::take(&mut idle);
                    let (file, len, o, p) =
                        (src.file.clone(), src.len, dopts.clone(), progress.clone());
                    let whole = std::iter::once(0..len).collect();
                    let fut: Send = Box::pin(async move {
                        data::send_mode_e(socks, file, whole, 0, &o, p).await
                    });
                    sending = Some((fut, Instant::now()));
                } else if s.stor.is_some() {
                    next += 1;
                } else {
                    break;
                }
            }
            if control_done && sending.is_none() && next >= order.len() && broken.is_none() {
                break;
            }
            tokio::select! {
                ev = control.next_event(), if !control_done => {
                    match ev? {
                        Event::BatchStarted(k) => st[order[k]].started = true,
                        Event::BatchStored { index, reply } => {
                            let i = order[index];
                            let failed_after_start = st[i].started && !reply.is_ok();
                            st[i].stor = Some(reply);
                            // A refusal after the 1xx: that file fails with its reply, and the connection is not
                            // to be trusted with another file's bytes.
                            if failed_after_start {
                                st[i].result = Some(Err(refused(&files[i], st[i].stor.clone())));
                                return Err(after_start(&files[i], st[i].stor.as_ref()));
                            }
                        }
                        Event::BatchMtime { index, reply } => st[order[index]].mfmt = Some(reply),
                        Event::BatchChecksum { index, result } => st[order[index]].cksm = Some(result),
                        Event::Connect { addr, streams: _ } => {
                            // One connection carries the whole batch: these files are too small for more.
                            let addr = transfer::or_peer(addr, peer_ip);
                            let socks = transfer::connect_all(addr, 1, &dopts, opts.timeout).await?;
                            for s in &socks {
                                // Each file ends with a 17-byte EOF|EOD header written after its last block:
                                // with Nagle it waits for the ACK of that block, one more round trip per file.
                                let _ = s.set_nodelay(true);
                            }
                            connections += socks.len() as u64;
                            idle.extend(socks.into_iter().map(MaybeTls::Plain));
                            control.session_mut().handle_data_ready(Instant::now());
                        }
                        Event::Done(Outcome::Batch) => control_done = true,
                        Event::Failed(e) => return Err(e.into()),
                        Event::Done(o) => {
                            return Err(ClientError::Invalid(format!("unexpected outcome {o:?}")))
                        }
                        Event::Notice(n) => tracing::debug!("server: {n}"),
                        ev => tracing::debug!("{ev:?}"),
                    }
                }
                r = async { (&mut sending.as_mut().expect("guarded").0).await }, if sending.is_some() => {
                    let (_, t0) = sending.take().expect("guarded");
                    let mut report = match r {
                        Ok(r) => r,
                        Err(e) => {
                            broken = Some(ClientError::Data(e));
                            continue;
                        }
                    };
                    idle.append(&mut report.reusable);
                    let i = order[next];
                    st[i].sent = Some((report, t0.elapsed().as_secs_f64()));
                    next += 1;
                }
                _ = tokio::time::sleep(idle_limit) => {
                    // Bytes still leaving are progress; only a batch where nothing moves at all has stalled.
                    let now = progress.bytes();
                    if now == last_bytes {
                        return Err(ClientError::Stalled(idle_limit));
                    }
                    last_bytes = now;
                }
            }
            for (pos, &i) in order.iter().enumerate() {
                let src = srcs[i].as_ref().expect("in order");
                settle(i, &files[i], src, &mut st[i], pos < next, alg, &mut finishing);
            }
        }
        Ok(())
    }
    .await;
    while let Some(j) = finishing.join_next().await {
        match j {
            Ok((i, r)) => st[i].result = Some(r),
            Err(e) => tracing::warn!("upload batch finishing task: {e}"),
        }
    }
    outcome?;
    control.upload_channel = Some(UploadChannel {
        socks: idle,
        connections,
    });
    Ok(())
}

fn refused(f: &UploadFile, reply: Option<Reply>) -> ClientError {
    match reply {
        Some(reply) => ClientError::Session(drsftp_proto::client::ClientError::Refused {
            command: format!("STOR {}", f.remote),
            reply,
        }),
        None => ClientError::Invalid(format!("STOR {}: no reply", f.remote)),
    }
}

/// The error that ends a batch whose file `f` failed after its 1xx (transient: the files caught in it are
/// tried again on their own).
fn after_start(f: &UploadFile, reply: Option<&Reply>) -> ClientError {
    ClientError::Data(DataError::Incomplete(format!(
        "the server failed STOR {} after accepting it ({}); not sending more on this connection",
        f.remote,
        reply.map_or("no reply".to_string(), |r| r.to_string())
    )))
}

/// Decides file `i` once enough is known: a refusal fails it; data out, 2xx, and the checksum go to a blocking
/// task that compares (its result is collected at the end of the batch). `passed`: the data cursor is past it.
fn settle(
    i: usize,
    f: &UploadFile,
    src: &Source,
    s: &mut FileState,
    passed: bool,
    alg: Option<ChecksumAlg>,
    finishing: &mut tokio::task::JoinSet<(usize, Result<TransferSummary, ClientError>)>,
) {
    if s.result.is_some() || s.settling {
        return;
    }
    let Some(reply) = s.stor.clone() else {
        return;
    };
    if !reply.is_ok() {
        if !s.started {
            s.result = Some(Err(refused(f, Some(reply))));
        }
        return;
    }
    if !s.started || (passed && s.sent.is_none()) {
        // 2xx to a STOR that never said 1xx: no byte of ours went out as this file.
        s.result = Some(Err(ClientError::Invalid(format!(
            "STOR {}: the server answered {reply} without accepting the data",
            f.remote
        ))));
        return;
    }
    if s.sent.is_none() || (alg.is_some() && s.cksm.is_none()) || (src.mtime && s.mfmt.is_none()) {
        return;
    }
    let Some((report, seconds)) = s.sent.take() else {
        return;
    };
    s.settling = true;
    let theirs = s.cksm.take();
    let mfmt = s.mfmt.take();
    let (f, file, len) = (f.clone(), src.file.clone(), src.len);
    finishing
        .spawn_blocking(move || (i, finish(&f, file, len, report, seconds, alg, theirs, mfmt)));
}

/// What went out is the whole file, and the server's checksum is ours (blocking: may read the file again).
#[allow(clippy::too_many_arguments)]
fn finish(
    f: &UploadFile,
    file: Arc<dyn FileHandle>,
    len: u64,
    report: DataReport,
    seconds: f64,
    alg: Option<ChecksumAlg>,
    theirs: Option<Result<String, Reply>>,
    mfmt: Option<Reply>,
) -> Result<TransferSummary, ClientError> {
    let want = 0..len;
    verify::check_moved(&f.local.display().to_string(), &report, want.clone())?;
    let mut summary = super::batch::summary_of(&report, seconds);
    super::batch::compare_checksum(
        &mut summary,
        &f.remote,
        alg,
        theirs,
        &report,
        &want,
        file.as_ref(),
    )?;
    if let Some(r) = mfmt.filter(|r| !r.is_ok()) {
        summary
            .notices
            .push(format!("modification time not kept: {r}"));
    }
    Ok(summary)
}
