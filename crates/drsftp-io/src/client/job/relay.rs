//! Small third-party copies in pipelined batches: a worker takes a run of files that fit ([`eligible`]: server to
//! server, size known from the listing, at most [`plan::BATCH_MAX_FILE`]), tests `--sync` against one MLSD listing
//! per destination directory, and moves the rest with [`relay_batch`] on its pair of sessions: the destination's
//! STORs and the source's RETRs pipelined, one MODE E connection from source to destination kept across files and
//! batches. A file the destination refuses fails alone; files caught in a broken batch go through the one-file
//! path with its retries.

use std::sync::atomic::Ordering;

use super::batch::record;
use super::plan::{self, Meta, SyncMode, SyncVerdict};
use super::run::{session, store, Shared, Worker};
use super::upbatch::{listed, settle, split};
use super::{FileStatus, FileTask, Loc};
use crate::client::{relay_batch, ClientError, RelayFile, TransferSummary};

/// Whether `task` may go in a third-party batch on this worker.
pub(super) fn eligible(shared: &Shared, w: &Worker, task: &FileTask) -> bool {
    let o = &shared.opts;
    matches!((&task.src, &task.dst), (Loc::Remote(_), Loc::Remote(_)))
        && task.size.is_some_and(|s| s <= plan::BATCH_MAX_FILE)
        && o.sync != SyncMode::Checksum
        && o.transfer.blast.is_none()
        && o.transfer.partial.is_none()
        && !w.protected
        && !w.no_relay
}

/// Moves the files `idx` of the job (all [`eligible`]) and stores their records.
pub(super) async fn run(w: &mut Worker, shared: &Shared, idx: &[usize]) {
    let (opts, job) = (&shared.opts, &shared.job);
    let mut usable = true;
    for (slot, server) in [
        (&mut w.src, job.src_server.as_ref()),
        (&mut w.dst, job.dst_server.as_ref()),
    ] {
        if let Err(e) = session(slot, server, opts).await {
            tracing::debug!("third-party batch session: {e}");
            *slot = None;
            usable = false;
        }
    }
    // TLS data channels go in stream mode, and a server without MODE E cannot keep a connection.
    for c in [w.src.as_ref(), w.dst.as_ref()].into_iter().flatten() {
        w.protected |= c.data_protected();
        w.no_relay |= !c.features().has("PARALLEL");
    }
    usable &= !w.protected && !w.no_relay;
    // The destination's listing for `--sync`; without one every file takes the one-file path, which asks.
    // Each directory once per worker: a listing between two batches would cost the kept data channel.
    let mut dest = None;
    if usable && opts.sync != SyncMode::None {
        let tasks: Vec<&FileTask> = idx
            .iter()
            .map(|&i| &job.files[i])
            .filter(|t| match &t.dst {
                Loc::Remote(p) => !w.listed.contains_key(split(p).0),
                Loc::Local(_) => false,
            })
            .collect();
        if let Some(c) = w.dst.as_mut() {
            match listed(c, &tasks).await {
                Ok(d) => {
                    w.listed.extend(d);
                    dest = Some(&w.listed);
                }
                Err(e) => {
                    tracing::debug!("listing for --sync: {e}");
                    w.dst = None;
                }
            }
        }
    }
    let mut files = Vec::new();
    let mut which = Vec::new();
    for &i in idx {
        let task = &job.files[i];
        let (Loc::Remote(sp), Loc::Remote(dp), Some(size)) = (&task.src, &task.dst, task.size)
        else {
            continue;
        };
        if let Some(d) = &dest {
            let (dir, name) = split(dp);
            let src = Meta {
                size: task.size,
                mtime: task.mtime,
            };
            let have = d.get(dir).and_then(|m| m.get(name)).copied();
            if plan::sync_verdict(opts.sync, src, have) == SyncVerdict::Skip {
                let total = &shared.progress.bytes_total;
                total.fetch_sub(size.min(total.load(Ordering::Relaxed)), Ordering::Relaxed);
                let why = FileStatus::Skipped(format!("--sync {}", opts.sync));
                store(shared, i, record(task, why, 0));
                continue;
            }
        }
        files.push(RelayFile {
            src: sp.clone(),
            dst: dp.clone(),
            size,
            mtime: task.mtime,
        });
        which.push(i);
    }
    if files.is_empty() {
        return;
    }
    let batch_ok = usable && (opts.sync == SyncMode::None || dest.is_some());
    let results: Vec<Option<Result<TransferSummary, ClientError>>> =
        match (w.src.as_mut(), w.dst.as_mut()) {
            (Some(s), Some(d)) if batch_ok => {
                let shown = shared.progress.shown();
                let r = relay_batch(s, d, &files, &opts.transfer, shown.progress()).await;
                drop(shown);
                tracing::debug!(files = files.len(), "third-party batch");
                if !(s.is_idle() && d.is_idle()) {
                    // Broken off mid-transfer: neither session is in a known state.
                    w.src = None;
                    w.dst = None;
                }
                r.into_iter().map(Some).collect()
            }
            _ => files.iter().map(|_| None).collect(),
        };
    settle(w, shared, which, results).await;
}
