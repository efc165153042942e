//! Carries out the session's filesystem requests on the served `Storage`, on a blocking thread.

use std::sync::Arc;

use drsftp_proto::server::{FsRequest, FsResult};
use drsftp_storage::{checksum, Storage, StorageError};

/// Run `req` against `storage` (blocking; call from `spawn_blocking`).
pub(crate) fn execute(storage: &Arc<dyn Storage>, req: FsRequest) -> FsResult {
    let r: Result<FsResult, StorageError> = match req {
        FsRequest::Stat(p) => storage.stat(&p).map(FsResult::Stat),
        FsRequest::List(p) => storage.list(&p).map(FsResult::List),
        FsRequest::Mkdir(p) => storage.mkdir(&p).map(|_| FsResult::Done),
        FsRequest::Rmdir(p) => storage.rmdir(&p).map(|_| FsResult::Done),
        FsRequest::Remove(p) => storage.remove(&p).map(|_| FsResult::Done),
        FsRequest::Rename { from, to } => storage.rename(&from, &to).map(|_| FsResult::Done),
        FsRequest::Checksum {
            alg,
            path,
            offset,
            length,
        } => storage
            .open_read(&path)
            .and_then(|f| checksum(f.as_ref(), alg, offset, length))
            .map(FsResult::Checksum),
    };
    r.unwrap_or_else(FsResult::Err)
}

/// Run `req` on a blocking thread.
pub(crate) async fn execute_async(storage: Arc<dyn Storage>, req: FsRequest) -> FsResult {
    match tokio::task::spawn_blocking(move || execute(&storage, req)).await {
        Ok(r) => r,
        Err(e) => FsResult::Err(StorageError::Io {
            context: "filesystem task".into(),
            source: std::io::Error::other(e.to_string()),
        }),
    }
}
