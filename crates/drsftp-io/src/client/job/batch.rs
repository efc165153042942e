//! Small downloads in pipelined batches: a worker takes a run of files that fit ([`eligible`]: server to local,
//! size and time known from the listing, at most [`plan::BATCH_MAX_FILE`]), tests `--sync` against the local
//! files (no round trip), and moves the rest with [`Client::download_batch`](crate::client::Client) on its
//! session: RETR and CKSM pipelined, one MODE E connection kept across files and batches. A file the server
//! refuses fails alone; files caught in a broken batch go through the one-file path with its retries.

use std::sync::atomic::Ordering;

use super::plan::{self, Meta, SyncMode, SyncVerdict};
use super::run::{
    local_meta, one_file, remove_stale_parts, session, set_local_mtime, store, transient, Shared,
    Worker,
};
use super::{FileRecord, FileStatus, FileTask, Loc};
use crate::client::BatchFile;

/// Whether `task` may go in a batch on this worker.
pub(super) fn eligible(shared: &Shared, w: &Worker, task: &FileTask) -> bool {
    let o = &shared.opts;
    matches!((&task.src, &task.dst), (Loc::Remote(_), Loc::Local(_)))
        && task.size.is_some_and(|s| s <= plan::BATCH_MAX_FILE)
        && task.mtime.is_some()
        && o.sync != SyncMode::Checksum
        // Under `--transport auto` small files stay on TCP (`run::auto_for_file`), so they batch.
        && (o.transfer.blast.is_none() || o.transfer.auto_transport.is_some())
        && o.transfer.partial.is_none()
        && !w.protected
        && !w.no_batch
}

pub(super) fn record(task: &FileTask, status: FileStatus, attempts: u32) -> FileRecord {
    FileRecord {
        src: task.src.clone(),
        dst: task.dst.clone(),
        status,
        attempts,
        summary: None,
        error: None,
        notes: vec![],
    }
}

/// Moves the files `idx` of the job (all [`eligible`]) and stores their records.
pub(super) async fn run(w: &mut Worker, shared: &Shared, idx: &[usize]) {
    let (opts, job) = (&shared.opts, &shared.job);
    let mut files = Vec::new();
    let mut which = Vec::new();
    let mut notes: Vec<Vec<String>> = Vec::new();
    for &i in idx {
        let task = &job.files[i];
        let (Loc::Remote(remote), Loc::Local(local)) = (&task.src, &task.dst) else {
            continue;
        };
        if opts.sync != SyncMode::None {
            let src = Meta {
                size: task.size,
                mtime: task.mtime,
            };
            if plan::sync_verdict(opts.sync, src, local_meta(local)) == SyncVerdict::Skip {
                let total = &shared.progress.bytes_total;
                let s = task.size.unwrap_or(0);
                total.fetch_sub(s.min(total.load(Ordering::Relaxed)), Ordering::Relaxed);
                let why = FileStatus::Skipped(format!("--sync {}", opts.sync));
                store(shared, i, record(task, why, 0));
                continue;
            }
        }
        if let Some(parent) = local.parent() {
            if let Err(e) = std::fs::create_dir_all(parent) {
                let mut r = record(task, FileStatus::Failed, 1);
                r.error = Some(format!("{}: {e}", parent.display()));
                store(shared, i, r);
                continue;
            }
        }
        let mut n = Vec::new();
        remove_stale_parts(local, &mut n);
        notes.push(n);
        files.push(BatchFile {
            remote: remote.clone(),
            local: local.clone(),
            size: task.size,
            mtime: task.mtime,
        });
        which.push(i);
    }
    if files.is_empty() {
        return;
    }
    let usable = match session(&mut w.src, job.src_server.as_ref(), opts).await {
        Ok(c) => {
            // TLS data channels go in stream mode, and a server without MODE E cannot keep a connection.
            w.protected |= c.data_protected();
            w.no_batch |= !c.features().has("PARALLEL");
            !w.protected && !w.no_batch
        }
        Err(e) => {
            tracing::debug!("batch session: {e}");
            w.src = None;
            false
        }
    };
    let results = match w.src.as_mut().filter(|_| usable) {
        Some(c) => {
            let o = small_file_options(opts);
            let shown = shared.progress.shown();
            let r = c.download_batch(&files, &o, shown.progress()).await;
            drop(shown);
            if !c.is_idle() {
                w.src = None;
            }
            r.into_iter().map(Some).collect()
        }
        None => files.iter().map(|_| None).collect(),
    };
    let results: Vec<Option<Result<crate::client::TransferSummary, crate::client::ClientError>>> =
        results;
    for ((i, r), mut notes) in which.into_iter().zip(results).zip(notes) {
        let task = &job.files[i];
        let rec = match r {
            Some(Ok(s)) => {
                shared
                    .progress
                    .bytes_done
                    .fetch_add(s.bytes, Ordering::Relaxed);
                if let (Some(t), Loc::Local(p)) = (task.mtime, &task.dst) {
                    if let Err(e) = set_local_mtime(p, t) {
                        notes.push(format!("modification time not kept: {e}"));
                    }
                }
                let mut r = record(task, FileStatus::Copied, 1);
                r.summary = Some(s);
                r.notes = notes;
                r
            }
            other => not_batched(w, shared, task, other.map(|r| r.map(|_| ()))).await,
        };
        store(shared, i, rec);
    }
}

/// The record of a file a batch (download or upload) did not finish: `outcome` is the batch's error for it, or
/// `None` if it had no batch. A lasting refusal fails it; otherwise it goes through the one-file path with its
/// retries, the batch counting as its first attempt.
pub(super) async fn not_batched(
    w: &mut Worker,
    shared: &Shared,
    task: &FileTask,
    outcome: Option<Result<(), crate::client::ClientError>>,
) -> FileRecord {
    match outcome {
        Some(Err(e)) if !transient(&e) => {
            let mut r = record(task, FileStatus::Failed, 1);
            r.error = Some(e.to_string());
            r
        }
        other => {
            let mut r = one_file(w, shared, task).await;
            if let Some(Err(e)) = other {
                tracing::warn!("{}: {e}; retried on its own", task.src);
                r.attempts += 1;
                if r.error.is_none() {
                    r.error = Some(e.to_string());
                }
            }
            r
        }
    }
}

/// Transfer options for a batch of small files: no `-p auto` probing and, as in `run::per_file`, no DRS (it has
/// no round trip to measure in a file this small).
pub(super) fn small_file_options(opts: &super::JobOptions) -> crate::client::ClientOptions {
    let mut o = opts.transfer.clone();
    o.auto_streams = None;
    if o.buffer == drsftp_tune::BufferPolicy::Drs {
        o.buffer = drsftp_tune::BufferPolicy::Kernel;
    }
    o
}
