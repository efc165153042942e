//! Positioned file I/O for the data engine, run on tokio's blocking pool so a slow disk (or dirty-page throttling
//! on a large upload) never stalls the async workers. Each call moves one reusable buffer into the blocking task
//! and hands it back with the result, so streams pipeline one file operation against one socket operation
//! without allocating per block.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use drsftp_storage::{FileHandle, StorageError};
use tokio::task::JoinHandle;

use super::DataError;

/// Read into `buf` at `off` until it is full or the file ends; returns the bytes read (short only at EOF).
pub(crate) fn read_full(
    file: &dyn FileHandle,
    buf: &mut [u8],
    off: u64,
) -> Result<usize, StorageError> {
    let mut got = 0;
    while got < buf.len() {
        let n = file.read_at(&mut buf[got..], off + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

type Done<T> = (Vec<u8>, Result<T, StorageError>);

/// Run file operations inline on the async worker instead of the blocking pool (benchmark switch).
pub(crate) static INLINE: AtomicBool = AtomicBool::new(false);

/// A file operation in flight (or already done) that owns its buffer.
#[derive(Debug)]
pub(crate) enum Pending<T> {
    Task(JoinHandle<Done<T>>),
    Ready(Done<T>),
}

impl<T: Send + 'static> Pending<T> {
    fn spawn(f: impl FnOnce() -> Done<T> + Send + 'static) -> Self {
        if INLINE.load(Ordering::Relaxed) {
            Pending::Ready(f())
        } else {
            Pending::Task(tokio::task::spawn_blocking(f))
        }
    }

    /// Wait for the operation; the buffer comes back with its result.
    pub(crate) async fn wait(self) -> Result<(Vec<u8>, T), DataError> {
        let done = match self {
            Pending::Ready(d) => d,
            Pending::Task(t) => t.await.map_err(|e| {
                DataError::Io(std::io::Error::other(format!("file I/O task failed: {e}")))
            })?,
        };
        match done {
            (buf, Ok(v)) => Ok((buf, v)),
            (_, Err(e)) => Err(DataError::Storage(e)),
        }
    }
}

/// Start reading `buf[within]` from `off` (see [`read_full`]).
pub(crate) fn read(
    file: &Arc<dyn FileHandle>,
    mut buf: Vec<u8>,
    within: Range<usize>,
    off: u64,
) -> Pending<usize> {
    let file = Arc::clone(file);
    Pending::spawn(move || {
        let r = read_full(&*file, &mut buf[within], off);
        (buf, r)
    })
}

/// Start writing `buf[..len]` at `off`.
pub(crate) fn write(
    file: &Arc<dyn FileHandle>,
    buf: Vec<u8>,
    len: usize,
    off: u64,
) -> Pending<()> {
    let file = Arc::clone(file);
    Pending::spawn(move || {
        let r = file.write_at(&buf[..len], off);
        (buf, r)
    })
}
