//! The audit log: logins, namespace changes and transfers as `tracing` events with target `audit` and key=value
//! fields, at info level (`drsftp serve --log info` shows them; `RUST_LOG=audit=info` shows only them). The
//! driver logs what the sans-IO session reports, so the session itself reads no clock and writes no log.

use std::net::SocketAddr;

use drsftp_proto::server::{FsRequest, FsResult, Payload, TransferResult};

/// A login attempt answered.
pub(crate) fn login(peer: SocketAddr, user: &str, anonymous: bool, ok: bool, read_only: bool) {
    let result = if ok { "ok" } else { "denied" };
    tracing::info!(target: "audit", event = "login", %peer, user, anonymous, read_only, result);
}

/// True for the requests that change the tree (they are logged, and drop cached checksums).
pub(crate) fn changes(req: &FsRequest) -> bool {
    !matches!(
        req,
        FsRequest::Stat(_)
            | FsRequest::List(_)
            | FsRequest::Checksum { .. }
            | FsRequest::KeptHeld(_)
            | FsRequest::OpenWrite { .. }
    )
}

/// A namespace change (mkdir, rmdir, delete, rename, MFMT) and its outcome.
pub(crate) fn fs(peer: SocketAddr, user: &str, req: &FsRequest, r: &FsResult) {
    let result = match r {
        FsResult::Err(e) => e.to_string(),
        _ => "ok".to_string(),
    };
    match req {
        FsRequest::Mkdir(path) => {
            tracing::info!(target: "audit", event = "mkdir", %peer, user, path, result)
        }
        FsRequest::Rmdir(path) => {
            tracing::info!(target: "audit", event = "rmdir", %peer, user, path, result)
        }
        FsRequest::Remove(path) => {
            tracing::info!(target: "audit", event = "delete", %peer, user, path, result)
        }
        FsRequest::Rename { from, to } => {
            tracing::info!(target: "audit", event = "rename", %peer, user, from, to, result)
        }
        FsRequest::SetModified { path, time } => {
            let modify = drsftp_proto::civil::unix_secs(*time);
            tracing::info!(target: "audit", event = "mfmt", %peer, user, path, modify, result)
        }
        _ => {}
    }
}

/// What a transfer is, for the log: `retr`/`stor` and the path (listings are not logged).
pub(crate) fn transfer_of(p: &Payload) -> Option<(&'static str, String)> {
    match p {
        Payload::SendFile { path, .. } => Some(("retr", path.clone())),
        Payload::RecvFile { path, .. } => Some(("stor", path.clone())),
        Payload::SendBytes(_) | Payload::SendListing { .. } => None,
    }
}

/// A finished (or aborted) transfer.
pub(crate) fn transfer(
    peer: SocketAddr,
    user: &str,
    command: &str,
    path: &str,
    progress_bytes: u64,
    r: &TransferResult,
) {
    let (bytes, result) = match r {
        TransferResult::Ok { bytes, .. } => (*bytes, "ok".to_string()),
        TransferResult::Failed { code, message } => (progress_bytes, format!("{code} {message}")),
        TransferResult::Aborted => (progress_bytes, "aborted".to_string()),
    };
    tracing::info!(target: "audit", event = "transfer", %peer, user, command, path, bytes, result);
}
