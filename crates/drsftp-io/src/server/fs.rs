//! Carries out the session's filesystem requests on the served `Storage`, on a blocking thread; a `CKSM CRC32C` of
//! a whole file the session has just sent is answered from the data engine's CRC (`SentCrc`) while the file still
//! has the size and mtime it had before it was read, or from a digest computed while the transfer ahead of it ran
//! ([`Prefetched`]). A STOR's part file opened before its `150`
//! (`FsRequest::OpenWrite`) waits in an [`OpenSlot`] for the transfer that follows.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use drsftp_proto::server::{FsRequest, FsResult, Payload, STAT_LIST_LIMIT};
use drsftp_storage::{checksum_until, ChecksumAlg, PartFile, Storage, StorageError, WriteMode};

/// Tells blocking work to stop (a CKSM's read, [`checksum_until`]) when dropped: held by the async task that
/// awaits the work, it goes when the session ends and drops that task, where a `spawn_blocking` would run on.
#[derive(Debug)]
pub(crate) struct StopOnDrop(Arc<AtomicBool>);

impl StopOnDrop {
    /// The guard and the flag it sets, for the blocking closure.
    pub(crate) fn new() -> (StopOnDrop, Arc<AtomicBool>) {
        let flag = Arc::new(AtomicBool::new(false));
        (StopOnDrop(flag.clone()), flag)
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The part file a STOR opened before its preliminary reply, with the path and mode it was opened for: the
/// session's next transfer takes it if it receives that path that way; anything else drops it (which removes it).
pub(crate) type OpenSlot = Arc<Mutex<Option<(String, WriteMode, Box<dyn PartFile>)>>>;

/// Opens an upload's destination for `FsRequest::OpenWrite` and leaves it in `slot`: `Done`, or the reason it
/// cannot be written (the session then refuses the STOR before its `150`).
pub(crate) async fn open_upload(
    storage: Arc<dyn Storage>,
    req: FsRequest,
    slot: OpenSlot,
) -> FsResult {
    let FsRequest::OpenWrite { path, write_mode } = req else {
        return execute_async(storage, req, None).await;
    };
    let run = move || match storage.open_write(&path, write_mode) {
        Ok(part) => {
            if let Ok(mut s) = slot.lock() {
                *s = Some((path, write_mode, part));
            }
            FsResult::Done
        }
        Err(e) => FsResult::Err(e),
    };
    tokio::task::spawn_blocking(run)
        .await
        .unwrap_or_else(|e| FsResult::Err(task_failed(e)))
}

/// What `slot` holds for a transfer of `payload` (taken either way).
pub(crate) fn take_opened(slot: &OpenSlot, payload: &Payload) -> Option<Box<dyn PartFile>> {
    let (path, mode, part) = slot.lock().ok()?.take()?;
    match payload {
        Payload::RecvFile {
            path: p,
            write_mode,
            ..
        } if *p == path && *write_mode == mode => Some(part),
        _ => None,
    }
}

/// An upload's part file: the one opened before the `150`, else opened now.
pub(crate) async fn part_for(
    opened: Option<Box<dyn PartFile>>,
    st: Arc<dyn Storage>,
    path: String,
    mode: WriteMode,
) -> Result<Box<dyn PartFile>, crate::data::DataError> {
    if let Some(p) = opened {
        return Ok(p);
    }
    tokio::task::spawn_blocking(move || st.open_write(&path, mode))
        .await
        .map_err(|e| crate::data::DataError::Storage(task_failed(e)))?
        .map_err(crate::data::DataError::Storage)
}

fn task_failed(e: tokio::task::JoinError) -> StorageError {
    StorageError::Io {
        context: "filesystem task".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// File timestamps are coarse (the kernel's tick, seconds on some filesystems): a write within the same tick as the
/// last one leaves the mtime unchanged. Only a file whose mtime is at least this much older than the moment we
/// looked at it (before reading it) is "settled": any later write gives it a newer mtime.
const SETTLE: Duration = Duration::from_secs(2);

/// True if a file modified at `modified` and looked at (stat'ed, before being read) at `looked` is settled.
pub(crate) fn settled(modified: SystemTime, looked: SystemTime) -> bool {
    modified.checked_add(SETTLE).is_some_and(|t| t <= looked)
}

/// The CRC32C of the whole file at `path`, computed by the data engine from the bytes it sent, with the size and
/// mtime the file had *before* it was opened and read (and that mtime [`settled`] then). A write after that stat
/// gives the file a newer mtime, so "same size and mtime now" means the bytes sent are the file's bytes. (A writer
/// that also resets the mtime to the old value and keeps the size defeats this, as it defeats any mtime check.)
/// The session drops it on any other transfer or namespace change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SentCrc {
    pub(crate) path: String,
    pub(crate) size: u64,
    pub(crate) modified: SystemTime,
    pub(crate) crc: u32,
}

impl SentCrc {
    /// The CRC a send of `path` leaves for a following CKSM: `crc` from the engine, kept only when the file was
    /// whole and settled before it was read (`whole`: its stat then) and all of it was sent.
    pub(crate) fn of_send(
        path: String,
        whole: Option<drsftp_storage::Metadata>,
        bytes: u64,
        crc: Option<u32>,
    ) -> Option<SentCrc> {
        let (m, crc) = (whole?, crc?);
        (bytes == m.size).then_some(SentCrc {
            path,
            size: m.size,
            modified: m.modified,
            crc,
        })
    }

    /// The answer to `req` if it is `CKSM CRC32C 0 -1` (or `0 <size>`) of this file and the file is unchanged.
    fn answer(&self, storage: &Arc<dyn Storage>, req: &FsRequest) -> Option<String> {
        let FsRequest::Checksum {
            alg: ChecksumAlg::Crc32c,
            path,
            offset: 0,
            length,
        } = req
        else {
            return None;
        };
        if *path != self.path || length.is_some_and(|l| l != self.size) {
            return None;
        }
        let now = storage.stat(path).ok()?;
        (now.size == self.size && now.modified == self.modified).then(|| {
            tracing::debug!(
                path,
                "CKSM CRC32C from the data engine: the file is not read again"
            );
            format!("{:08x}", self.crc)
        })
    }
}

/// A CKSM's digest computed while the transfer ahead of it still ran (`Action::Prefetch`: a blast send, a partial
/// one, or another file's; first22c), with the size and mtime the file had before it was read and that mtime
/// [`settled`] then, the same guard as [`SentCrc`]: the answer is used only if the file still has both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prefetched {
    req: FsRequest,
    size: u64,
    modified: SystemTime,
    hex: String,
}

impl Prefetched {
    /// Computes `req` (a `Checksum`) now (blocking; call from `spawn_blocking`); `None` for any other request,
    /// a file not settled, or a failure (the CKSM then runs as usual and reports it).
    pub(crate) fn compute(
        storage: &Arc<dyn Storage>,
        req: FsRequest,
        stop: &AtomicBool,
    ) -> Option<Prefetched> {
        let FsRequest::Checksum {
            alg,
            path,
            offset,
            length,
        } = &req
        else {
            return None;
        };
        let looked = SystemTime::now();
        let before = storage.stat(path).ok()?;
        if !settled(before.modified, looked) {
            return None;
        }
        let f = storage.open_read(path).ok()?;
        let hex = checksum_until(f.as_ref(), *alg, *offset, *length, stop).ok()?;
        Some(Prefetched {
            size: before.size,
            modified: before.modified,
            hex,
            req,
        })
    }

    /// The answer to `req` if it is the request computed and the file is unchanged.
    fn answer(&self, storage: &Arc<dyn Storage>, req: &FsRequest) -> Option<String> {
        let FsRequest::Checksum { path, .. } = req else {
            return None;
        };
        if *req != self.req {
            return None;
        }
        let now = storage.stat(path).ok()?;
        (now.size == self.size && now.modified == self.modified).then(|| {
            tracing::debug!(path, "CKSM from the digest computed during the transfer");
            self.hex.clone()
        })
    }
}

/// Run `req` against `storage` (blocking; call from `spawn_blocking`); a checksum stops once `stop` is set.
pub(crate) fn execute(storage: &Arc<dyn Storage>, req: FsRequest, stop: &AtomicBool) -> FsResult {
    let r: Result<FsResult, StorageError> = match req {
        FsRequest::Stat(p) => storage.stat(&p).map(FsResult::Stat),
        FsRequest::List(p) => {
            let mut v = Vec::new();
            storage
                .list_each(&p, &mut |m| {
                    v.push(m);
                    v.len() <= STAT_LIST_LIMIT
                })
                .map(|_| FsResult::List(v))
        }
        FsRequest::Mkdir(p) => storage.mkdir(&p).map(|_| FsResult::Done),
        FsRequest::Rmdir(p) => storage.rmdir(&p).map(|_| FsResult::Done),
        FsRequest::Remove(p) => storage.remove(&p).map(|_| FsResult::Done),
        FsRequest::Rename { from, to } => storage.rename(&from, &to).map(|_| FsResult::Done),
        FsRequest::SetModified { path, time } => {
            storage.set_modified(&path, time).map(|_| FsResult::Done)
        }
        FsRequest::Checksum {
            alg,
            path,
            offset,
            length,
        } => storage
            .open_read(&path)
            .and_then(|f| checksum_until(f.as_ref(), alg, offset, length, stop))
            .map(FsResult::Checksum),
        FsRequest::KeptHeld(k) => storage.kept_held(&k.id, &k.limits).map(FsResult::Kept),
        // Only whether it can be opened: the driver keeps the part with `open_upload`.
        FsRequest::OpenWrite { path, write_mode } => storage
            .open_write(&path, write_mode)
            .map(|_| FsResult::Done),
    };
    r.unwrap_or_else(FsResult::Err)
}

/// Run `req` on a blocking thread, answering it from `sent` when that applies.
pub(crate) async fn execute_async(
    storage: Arc<dyn Storage>,
    req: FsRequest,
    sent: Option<SentCrc>,
) -> FsResult {
    execute_prefetched(storage, req, sent, None).await
}

/// [`execute_async`], answering a CKSM from `pre` (computed ahead, [`Prefetched`]) when that applies.
pub(crate) async fn execute_prefetched(
    storage: Arc<dyn Storage>,
    req: FsRequest,
    sent: Option<SentCrc>,
    pre: Option<Prefetched>,
) -> FsResult {
    // Dropped with this future (the session ended): a checksum still reading stops at its next chunk.
    let (_stop, flag) = StopOnDrop::new();
    let run = move || {
        let early = sent
            .and_then(|s| s.answer(&storage, &req))
            .or_else(|| pre.and_then(|p| p.answer(&storage, &req)));
        match early {
            Some(c) => FsResult::Checksum(c),
            None => execute(&storage, req, &flag),
        }
    };
    tokio::task::spawn_blocking(run)
        .await
        .unwrap_or_else(|e| FsResult::Err(task_failed(e)))
}
