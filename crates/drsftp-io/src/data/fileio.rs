//! Positioned file I/O for the data engine, placed per stream by [`Placement`]: inline on the async worker while
//! the page cache serves each operation quickly, on tokio's blocking pool (pipelined with the socket) once an
//! operation shows the disk (a cold read, dirty-page throttling on a large upload). Every call moves one reusable
//! buffer in and hands it back with the result, so streams never allocate per block.
//!
//! Why not always the blocking pool: on a 2-core loopback a hand-off per 256 KiB block costs ~30 context switches
//! per MiB and a quarter of the transfer's CPU (measured with `perf stat` on `bench_loopback_throughput`: 4-stream
//! MODE E of 1 GiB, 16-17k context switches and +0.5-0.7 s CPU against 0.3-0.9k inline).

use std::io::{IoSlice, IoSliceMut};
use std::ops::Range;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_proto::tls_records::RecordShape;
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

/// Read at `off` into `buf`'s `ranges` (ascending, disjoint: a TLS block's record slots) until they are full or
/// the file ends; one `preadv` per call to the file. Returns the bytes read (short only at EOF).
pub(crate) fn read_full_vectored(
    file: &dyn FileHandle,
    buf: &mut [u8],
    ranges: impl Iterator<Item = Range<usize>>,
    off: u64,
) -> Result<usize, StorageError> {
    let mut slices = Vec::new();
    let (mut rest, mut base) = (buf, 0);
    for r in ranges {
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(r.start - base);
        let (piece, tail) = tail.split_at_mut(r.len());
        slices.push(IoSliceMut::new(piece));
        (rest, base) = (tail, r.end);
    }
    let mut left = &mut slices[..];
    let mut got = 0;
    while !left.is_empty() {
        let n = file.read_vectored_at(left, off + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
        IoSliceMut::advance_slices(&mut left, n);
    }
    Ok(got)
}

type Done<T> = (Vec<u8>, Result<T, StorageError>);

/// Test/benchmark override of [`Placement`]: 0 adaptive, 1 always the blocking pool, 2 always inline.
pub(crate) static FORCE: AtomicU8 = AtomicU8::new(0);

/// An operation slower than this (plus [`SLOW_PER_MIB`] per MiB) means the disk is involved. Page-cache hits take
/// tens of microseconds per 256 KiB; the margin keeps a preempted thread on a busy host (3-5 ms) from counting.
const SLOW_BASE: Duration = Duration::from_millis(8);
const SLOW_PER_MIB: Duration = Duration::from_millis(1);
/// How long a stream stays on the blocking pool after a slow operation before trying inline again.
const OFFLOAD_FOR: Duration = Duration::from_secs(2);
/// Operations larger than this always go to the blocking pool (they would hold a worker too long anyway).
const INLINE_MAX: usize = 4 << 20;

/// True if a file operation on `len` bytes that took `took` waited for the disk (see [`SLOW_BASE`]).
pub(crate) fn is_slow(took: Duration, len: usize) -> bool {
    took > SLOW_BASE + SLOW_PER_MIB * (len >> 20) as u32
}

/// Where one stream runs its file operations (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Placement {
    offload_until: Option<Instant>,
}

impl Placement {
    fn run<T: Send + 'static>(
        &mut self,
        len: usize,
        f: impl FnOnce() -> Done<T> + Send + 'static,
    ) -> Pending<T> {
        let now = Instant::now();
        let offload = match FORCE.load(Ordering::Relaxed) {
            1 => true,
            2 => false,
            _ => len > INLINE_MAX || self.offload_until.is_some_and(|t| now < t),
        };
        if offload {
            return Pending::Task(tokio::task::spawn_blocking(f));
        }
        let done = f();
        let took = now.elapsed();
        if is_slow(took, len) {
            tracing::debug!(
                ?took,
                len,
                "slow file operation: moving this stream's file I/O off the workers"
            );
            self.offload_until = Some(Instant::now() + OFFLOAD_FOR);
        }
        Pending::Ready(done)
    }

    /// True while operations go to the blocking pool.
    #[cfg(test)]
    pub(crate) fn offloading(&self) -> bool {
        self.offload_until.is_some_and(|t| Instant::now() < t)
    }

    /// Start reading `buf[within]` from `off` (see [`read_full`]).
    pub(crate) fn read(
        &mut self,
        file: &Arc<dyn FileHandle>,
        mut buf: Vec<u8>,
        within: Range<usize>,
        off: u64,
    ) -> Pending<usize> {
        let file = Arc::clone(file);
        self.run(within.len(), move || {
            let r = read_full(&*file, &mut buf[within], off);
            (buf, r)
        })
    }

    /// Start reading plaintext bytes `plain` of a block laid out as TLS records by `shape` (see
    /// [`read_full_vectored`]) from `off`.
    pub(crate) fn read_shaped(
        &mut self,
        file: &Arc<dyn FileHandle>,
        mut buf: Vec<u8>,
        shape: RecordShape,
        plain: Range<usize>,
        off: u64,
    ) -> Pending<usize> {
        let file = Arc::clone(file);
        self.run(plain.len(), move || {
            let r = read_full_vectored(&*file, &mut buf, shape.plain_ranges(plain), off);
            (buf, r)
        })
    }

    /// Start writing `buf[..len]` at `off`.
    pub(crate) fn write(
        &mut self,
        file: &Arc<dyn FileHandle>,
        buf: Vec<u8>,
        len: usize,
        off: u64,
    ) -> Pending<()> {
        let file = Arc::clone(file);
        self.run(len, move || {
            let r = file.write_at(&buf[..len], off);
            (buf, r)
        })
    }

    /// Start writing `buf`'s `ranges` (in order: a TLS receive buffer's opened records) as contiguous file bytes
    /// from `off`, in one `pwritev`; the ranges come back with the buffer for reuse.
    pub(crate) fn write_ranges(
        &mut self,
        file: &Arc<dyn FileHandle>,
        buf: Vec<u8>,
        ranges: Vec<Range<usize>>,
        off: u64,
    ) -> Pending<Vec<Range<usize>>> {
        let file = Arc::clone(file);
        let len = ranges.iter().map(|r| r.len()).sum();
        self.run(len, move || {
            let mut slices: Vec<IoSlice<'_>> = ranges
                .iter()
                .map(|r| IoSlice::new(&buf[r.clone()]))
                .collect();
            let r = file.write_vectored_at(&mut slices, off);
            drop(slices);
            (buf, r.map(|()| ranges))
        })
    }
}

/// A file operation in flight on the blocking pool, or already done inline; it owns its buffer.
#[derive(Debug)]
pub(crate) enum Pending<T> {
    Task(JoinHandle<Done<T>>),
    Ready(Done<T>),
}

impl<T: Send + 'static> Pending<T> {
    /// Wait for the operation; the buffer comes back with its result.
    pub(crate) async fn wait(self) -> Result<(Vec<u8>, T), DataError> {
        let done = match self {
            Pending::Ready(d) => d,
            Pending::Task(t) => t.await.map_err(|e| super::join_error("file I/O", e))?,
        };
        match done {
            (buf, Ok(v)) => Ok((buf, v)),
            (_, Err(e)) => Err(DataError::Storage(e)),
        }
    }
}
