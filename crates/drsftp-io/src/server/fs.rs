//! Carries out the session's filesystem requests on the served `Storage`, on a blocking thread; a `CKSM CRC32C` of
//! a whole file the session has just sent is answered from the data engine's CRC (`SentCrc`) while the file still
//! has the size and mtime it had before it was read.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use drsftp_proto::server::{FsRequest, FsResult, STAT_LIST_LIMIT};
use drsftp_storage::{checksum, ChecksumAlg, Storage, StorageError};

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

/// Run `req` against `storage` (blocking; call from `spawn_blocking`).
pub(crate) fn execute(storage: &Arc<dyn Storage>, req: FsRequest) -> FsResult {
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
            .and_then(|f| checksum(f.as_ref(), alg, offset, length))
            .map(FsResult::Checksum),
        FsRequest::KeptHeld(k) => storage.kept_held(&k.id, &k.limits).map(FsResult::Kept),
    };
    r.unwrap_or_else(FsResult::Err)
}

/// Run `req` on a blocking thread, answering it from `sent` when that applies.
pub(crate) async fn execute_async(
    storage: Arc<dyn Storage>,
    req: FsRequest,
    sent: Option<SentCrc>,
) -> FsResult {
    let run = move || match sent.and_then(|s| s.answer(&storage, &req)) {
        Some(c) => FsResult::Checksum(c),
        None => execute(&storage, req),
    };
    match tokio::task::spawn_blocking(run).await {
        Ok(r) => r,
        Err(e) => FsResult::Err(StorageError::Io {
            context: "filesystem task".into(),
            source: std::io::Error::other(e.to_string()),
        }),
    }
}
