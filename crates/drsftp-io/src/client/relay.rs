//! Pipelined third-party copies of small files ([`relay_batch`]): drives the destination's
//! [`Op::UploadBatch`] and the source's gated [`Op::Batch`] side by side, refereed by the sans-IO
//! [`Relay`] (drsftp-proto `client/relay.rs`, which states the rules). No data passes through the client: the
//! destination's passive address (`PEER <source>` first where it lists PEER, as the one-file path does) goes to the
//! source as PORT, the source connects once, and both servers keep that MODE E connection for the next file and for
//! the next batch on the same two sessions ([`Control::relay_link`]).
//!
//! A file is copied only when both servers answered 2xx and their CKSMs agree. A STOR the destination refuses
//! outright fails alone (its RETR never goes out); anything that leaves the channel in doubt breaks the batch, and
//! the files without a result go through the caller's one-file path (the sessions are then left busy, so the caller
//! drops them).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_proto::client::{
    BatchSpec, Event, Op, Relay, RelayResult, TransferMode, UploadBatchSpec, UploadItem,
};

use super::control::Control;
use super::third_party_verify::common_alg;
use super::{transfer, Client, ClientError, ClientOptions, TransferSummary};
use crate::data::{DataError, Progress};

/// One file of a third-party batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayFile {
    /// Path on the source server.
    pub src: String,
    /// Path on the destination server (the file itself).
    pub dst: String,
    /// The source's size (from its listing).
    pub size: u64,
    /// Modification time to keep with `MFMT` (Unix seconds) where the destination lists MFMT.
    pub mtime: Option<i64>,
}

/// Files with STOR unanswered at once on the destination, as for uploads.
pub const RELAY_WINDOW: usize = 16;

/// How long a first STOR may go unanswered before its RETR goes anyway: globus-gridftp-server answers STOR on a
/// fresh passive listener only once the data connection is in (the one-file path waits as long).
const BLIND_AFTER: Duration = Duration::from_millis(300);

/// Copies `files` from `src`'s server to `dst`'s, pipelined over one data connection (see the module docs).
/// For small files between GridFTP servers (MODE E), without TLS data channels. One result per file, in order;
/// after a broken batch either session may be busy ([`Client::is_idle`]) and should be dropped.
pub async fn relay_batch(
    src: &mut Client,
    dst: &mut Client,
    files: &[RelayFile],
    opts: &ClientOptions,
    progress: Arc<Progress>,
) -> Vec<Result<TransferSummary, ClientError>> {
    let mut results: Vec<Option<Result<TransferSummary, ClientError>>> =
        files.iter().map(|_| None).collect();
    let ended = drive(
        &mut src.control,
        &mut dst.control,
        files,
        opts,
        &progress,
        &mut results,
    )
    .await;
    if let Err(e) = &ended {
        tracing::debug!("third-party batch ended early: {e}");
    }
    super::batch::results_after(results.into_iter(), ended)
}

/// Data connections the two sessions' batches share: true when `src` and `dst` are linked by the channel the last
/// third-party batch between them left open.
fn linked(s: &Control, d: &Control) -> bool {
    s.relay_link == Some(d.peer()) && d.relay_link == Some(s.peer())
}

async fn drive(
    s: &mut Control,
    d: &mut Control,
    files: &[RelayFile],
    opts: &ClientOptions,
    progress: &Progress,
    results: &mut [Option<Result<TransferSummary, ClientError>>],
) -> Result<(), ClientError> {
    if files.is_empty() {
        return Ok(());
    }
    let alg = common_alg(s, d).filter(|_| opts.verify);
    let mfmt = d.session().features().has("MFMT");
    let kept = linked(s, d);
    let peer = (!kept && d.session().features().has("PEER"))
        .then(|| s.peer().ip().to_canonical().to_string());
    let items: Vec<UploadItem> = files
        .iter()
        .map(|f| UploadItem {
            path: f.dst.clone(),
            size: f.size,
            mtime: f
                .mtime
                .filter(|_| mfmt)
                .map(crate::client::job::plan::format_modify),
        })
        .collect();
    let mtimes: Vec<bool> = items.iter().map(|i| i.mtime.is_some()).collect();
    let source_spec = |port: Option<SocketAddr>| BatchSpec {
        paths: files.iter().map(|f| f.src.clone()).collect(),
        held: vec![],
        checksum: alg.clone(),
        port,
        window: RELAY_WINDOW,
        gated: true,
    };
    d.start(Op::UploadBatch(UploadBatchSpec {
        files: items,
        checksum: alg.clone(),
        pasv: !kept,
        window: RELAY_WINDOW,
        peer,
        first_alone: true,
    }))?;
    let t0 = Instant::now();
    let mut relay = Relay::new(&mtimes, alg.is_some(), BLIND_AFTER);
    let mut src_running = false;
    if kept {
        s.start(Op::Batch(source_spec(None)))?;
        src_running = true;
        relay.channel_ready(Instant::now());
    }
    let idle = opts.timeout;
    let mut last = Instant::now();
    let at = |end: &str, c: &Control, e: ClientError| {
        ClientError::Invalid(format!("{end} server {}: {e}", c.peer()))
    };
    while !relay.is_done() {
        let blind = relay.poll_timeout();
        tokio::select! {
            ev = d.next_event() => {
                let ev = ev.map_err(|e| at("destination", d, e))?;
                last = Instant::now();
                match ev {
                    Event::Connect { addr, .. } => {
                        // The destination's passive address, for the source to connect to (MODE E: the sender
                        // connects).
                        let addr = transfer::or_peer(addr, d.peer().ip());
                        s.start(Op::Batch(source_spec(Some(addr))))?;
                        src_running = true;
                        d.session_mut().handle_data_ready(Instant::now());
                        relay.channel_ready(Instant::now());
                    }
                    Event::Notice(n) => tracing::info!("destination server: {n}"),
                    ev => relay.handle_dst(Instant::now(), &ev),
                }
            }
            ev = s.next_event(), if src_running => {
                let ev = ev.map_err(|e| at("source", s, e))?;
                last = Instant::now();
                match ev {
                    Event::Notice(n) => tracing::info!("source server: {n}"),
                    ev => relay.handle_src(Instant::now(), &ev),
                }
            }
            _ = sleep_until(blind), if blind.is_some() => relay.handle_timeout(Instant::now()),
            _ = tokio::time::sleep_until((last + idle).into()) => {
                return Err(ClientError::Stalled(idle));
            }
        }
        while let Some(go) = relay.poll_decision() {
            s.session_mut().decide_batch_file(Instant::now(), go);
        }
        while let Some((i, r)) = relay.poll_result() {
            results[i] = Some(outcome(&files[i], r, alg.as_deref(), t0, progress));
        }
        if let Some(b) = relay.broken() {
            return Err(ClientError::Data(DataError::Incomplete(format!(
                "third-party batch: {}",
                b.why
            ))));
        }
    }
    s.relay_link = Some(d.peer());
    d.relay_link = Some(s.peer());
    Ok(())
}

async fn sleep_until(t: Option<Instant>) {
    if let Some(t) = t {
        tokio::time::sleep_until(t.into()).await;
    }
}

/// What the relay said of file `f`, as the job sees it.
fn outcome(
    f: &RelayFile,
    r: RelayResult,
    alg: Option<&str>,
    t0: Instant,
    progress: &Progress,
) -> Result<TransferSummary, ClientError> {
    match r {
        RelayResult::Copied {
            checksum,
            unverified,
            mtime,
        } => {
            let cur = progress.bytes();
            progress.add(cur..cur + f.size);
            let mut notices = vec![];
            if let (Some(why), Some(_)) = (&unverified, alg) {
                notices.push(format!("checksum not verified: {why}"));
            }
            if let Some(r) = mtime.filter(|r| !r.is_ok()) {
                notices.push(format!("modification time not kept: {r}"));
            }
            Ok(TransferSummary {
                verified: checksum.is_some(),
                checksum: checksum.and_then(|c| alg.map(|a| (a.to_string(), c))),
                notices,
                ..TransferSummary::tcp(
                    TransferMode::Extended,
                    f.size,
                    t0.elapsed().as_secs_f64(),
                    1,
                )
            })
        }
        RelayResult::Refused(reply) => Err(ClientError::Session(
            drsftp_proto::client::ClientError::Refused {
                command: format!("STOR {}", f.dst),
                reply,
            },
        )),
        RelayResult::Mismatch {
            source,
            destination,
        } => Err(ClientError::ChecksumMismatch {
            what: f.dst.clone(),
            alg: alg.unwrap_or("?").to_string(),
            local: source,
            remote: destination,
        }),
    }
}
