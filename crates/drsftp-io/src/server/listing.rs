//! Streams a directory listing (`Payload::SendListing`) to its data connection: a blocking thread reads the
//! directory through `Storage::list_each` and formats entries into chunks, the connection takes them as fast as
//! the client reads. At most two chunks wait, so a directory of any size costs about 200 KiB, never the whole
//! listing (which for a million entries was ~200 MB held per LIST).

use std::sync::Arc;

use drsftp_proto::server::ListFormat;
use drsftp_storage::Storage;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::data::{DataError, Progress};
use crate::tls::MaybeTls;

/// Bytes of formatted lines per chunk handed to the connection.
const CHUNK: usize = 64 << 10;

/// Sends the listing of `path` in `format` over `sock`, then ends the connection; returns the bytes sent. A
/// directory that cannot be read fails with its storage error (the session replies with its code).
pub(crate) async fn send(
    mut sock: MaybeTls,
    storage: Arc<dyn Storage>,
    path: String,
    format: ListFormat,
    progress: Arc<Progress>,
) -> Result<u64, DataError> {
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(2);
    let reader = tokio::task::spawn_blocking(move || {
        let mut buf = Vec::with_capacity(CHUNK + 1024);
        let mut open = true;
        let r = storage.list_each(&path, &mut |m| {
            format.push_line(&m, &mut buf);
            if buf.len() >= CHUNK {
                let full = std::mem::replace(&mut buf, Vec::with_capacity(CHUNK + 1024));
                // The connection is gone when the receiver is: stop reading the directory.
                open = tx.blocking_send(full).is_ok();
            }
            open
        });
        if r.is_ok() && open && !buf.is_empty() {
            let _ = tx.blocking_send(buf);
        }
        r
    });
    progress.set_streams(1);
    let mut sent = 0u64;
    while let Some(chunk) = rx.recv().await {
        sock.write_all(&chunk).await?;
        let n = chunk.len() as u64;
        progress.add(sent..sent + n);
        sent += n;
    }
    reader
        .await
        .map_err(|e| DataError::Io(std::io::Error::other(e.to_string())))?
        .map_err(DataError::Storage)?;
    crate::data::finish_send(&mut sock).await?;
    Ok(sent)
}
