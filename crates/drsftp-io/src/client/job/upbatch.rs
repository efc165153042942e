//! Small uploads in pipelined batches, the mirror of `batch.rs`: a worker takes a run of files that fit
//! ([`eligible`]: local to server, at most [`plan::BATCH_MAX_FILE`]), tests `--sync` against one MLSD listing per
//! destination directory instead of SIZE/MDTM per file, and moves the rest with
//! [`Client::upload_batch`](crate::client::Client::upload_batch) on its destination session: ALLO, STOR, MFMT and
//! CKSM pipelined, one MODE E connection kept across files and batches. A file the server refuses fails alone;
//! files caught in a broken batch go through the one-file path with its retries.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use super::batch::{not_batched, record, small_file_options};
use super::plan::{self, Meta, SyncMode, SyncVerdict};
use super::run::{session, store, Shared, Worker};
use super::{FileStatus, FileTask, Loc};
use crate::client::{Client, ClientError, ListKind, UploadFile};

/// Whether `task` may go in an upload batch on this worker.
pub(super) fn eligible(shared: &Shared, w: &Worker, task: &FileTask) -> bool {
    let o = &shared.opts;
    matches!((&task.src, &task.dst), (Loc::Local(_), Loc::Remote(_)))
        && task.size.is_some_and(|s| s <= plan::BATCH_MAX_FILE)
        && o.sync != SyncMode::Checksum
        // Under `--transport auto` small files stay on TCP (`run::auto_for_file`), so they batch.
        && (o.transfer.blast.is_none() || o.transfer.auto_transport.is_some())
        && o.transfer.partial.is_none()
        && !w.protected
        && !w.no_upbatch
}

/// The parent directory and name of a server path.
pub(super) fn split(path: &str) -> (&str, &str) {
    match path.rsplit_once('/') {
        Some(("", name)) => ("/", name),
        Some((dir, name)) => (dir, name),
        None => ("", path),
    }
}

/// What the destination directories of `tasks` hold: one MLSD each. A directory the server will not list (it
/// does not exist yet: 5xx) holds nothing; any other failure is the session's.
pub(super) async fn listed(
    c: &mut Client,
    tasks: &[&FileTask],
) -> Result<HashMap<String, HashMap<String, Meta>>, ClientError> {
    let mut out: HashMap<String, HashMap<String, Meta>> = HashMap::new();
    for t in tasks {
        let Loc::Remote(p) = &t.dst else { continue };
        let dir = split(p).0.to_string();
        if out.contains_key(&dir) {
            continue;
        }
        let mut held = HashMap::new();
        match c.list(&dir, ListKind::Mlsd).await {
            Ok(text) => {
                for e in plan::parse_mlsd(&text).0 {
                    if e.kind == plan::EntryKind::File {
                        let m = Meta {
                            size: e.size,
                            mtime: e.mtime,
                        };
                        held.insert(e.name, m);
                    }
                }
            }
            Err(e) if e.reply_code().is_some_and(|c| c >= 500) => {}
            Err(e) => return Err(e),
        }
        out.insert(dir, held);
    }
    Ok(out)
}

/// Moves the files `idx` of the job (all [`eligible`]) and stores their records.
pub(super) async fn run(w: &mut Worker, shared: &Shared, idx: &[usize]) {
    let (opts, job) = (&shared.opts, &shared.job);
    let usable = match session(&mut w.dst, job.dst_server.as_ref(), opts).await {
        Ok(c) => {
            // TLS data channels go in stream mode, and a server without MODE E cannot keep a connection.
            w.protected |= c.data_protected();
            w.no_upbatch |= !c.features().has("PARALLEL");
            !w.protected && !w.no_upbatch
        }
        Err(e) => {
            tracing::debug!("upload batch session: {e}");
            w.dst = None;
            false
        }
    };
    // The destination's listing for `--sync`; without one every file takes the one-file path, which asks.
    let mut dest = None;
    if usable && opts.sync != SyncMode::None {
        let tasks: Vec<&FileTask> = idx.iter().map(|&i| &job.files[i]).collect();
        if let Some(c) = w.dst.as_mut() {
            match listed(c, &tasks).await {
                Ok(d) => dest = Some(d),
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
        let (Loc::Local(local), Loc::Remote(remote)) = (&task.src, &task.dst) else {
            continue;
        };
        if let Some(d) = &dest {
            let (dir, name) = split(remote);
            let src = Meta {
                size: task.size,
                mtime: task.mtime,
            };
            let have = d.get(dir).and_then(|m| m.get(name)).copied();
            if plan::sync_verdict(opts.sync, src, have) == SyncVerdict::Skip {
                let total = &shared.progress.bytes_total;
                let s = task.size.unwrap_or(0);
                total.fetch_sub(s.min(total.load(Ordering::Relaxed)), Ordering::Relaxed);
                let why = FileStatus::Skipped(format!("--sync {}", opts.sync));
                store(shared, i, record(task, why, 0));
                continue;
            }
        }
        files.push(UploadFile {
            local: local.clone(),
            remote: remote.clone(),
            mtime: task.mtime,
        });
        which.push(i);
    }
    if files.is_empty() {
        return;
    }
    let batch_ok = usable && (opts.sync == SyncMode::None || dest.is_some());
    let results = match w.dst.as_mut().filter(|_| batch_ok) {
        Some(c) => {
            let o = small_file_options(opts);
            let shown = shared.progress.shown();
            let r = c.upload_batch(&files, &o, shown.progress()).await;
            drop(shown);
            tracing::debug!(
                files = files.len(),
                connections = c.upload_connections(),
                "upload batch"
            );
            if !c.is_idle() {
                w.dst = None;
            }
            r.into_iter().map(Some).collect()
        }
        None => files.iter().map(|_| None).collect(),
    };
    settle(w, shared, which, results).await;
}

/// Records each batched file's outcome: a verified copy is done (a refused MFMT a note on it, as on the one-file
/// path); one caught in a broken batch, or never batched, goes the one-file way with its retries.
pub(super) async fn settle(
    w: &mut Worker,
    shared: &Shared,
    which: Vec<usize>,
    results: Vec<Option<Result<crate::client::TransferSummary, ClientError>>>,
) {
    let job = &shared.job;
    for (i, r) in which.into_iter().zip(results) {
        let task = &job.files[i];
        let rec = match r {
            Some(Ok(mut s)) => {
                shared
                    .progress
                    .bytes_done
                    .fetch_add(s.bytes, Ordering::Relaxed);
                let mut r = record(task, FileStatus::Copied, 1);
                // As the one-file path does: a refused MFMT is a note on the file, not a failure.
                let (notes, rest) = s
                    .notices
                    .drain(..)
                    .partition(|n| n.starts_with("modification time not kept"));
                s.notices = rest;
                r.notes = notes;
                r.summary = Some(s);
                r
            }
            // Caught in a broken batch, or no batch here.
            other => not_batched(w, shared, task, other.map(|r| r.map(|_| ()))).await,
        };
        store(shared, i, rec);
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn server_paths_split_into_directory_and_name() {
        assert_eq!(split("/in/a b/ü.dat"), ("/in/a b", "ü.dat"));
        assert_eq!(split("/top.dat"), ("/", "top.dat"));
    }
}
