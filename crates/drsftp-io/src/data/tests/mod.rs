//! Loopback tests of the data engine over real sockets, with tiny in-test `FileHandle`s (memory, disk, null) so
//! they do not depend on the storage backends.
#![allow(clippy::single_range_in_vec_init)] // `vec![0..u64::MAX]` is a list of one range, on purpose

mod bench;
mod crc;
mod dynamic;
mod fuzz;
mod hostile;
mod inband;
mod mode_e;
mod peer_buffers;
mod slow;
mod stream;
mod tls;
mod writeback;
mod zerocopy;

use crate::tls::MaybeTls;
use std::fs::File;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drsftp_storage::{FileHandle, Result as SResult, StorageError};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::{DataOpts, DataReport, Progress};

/// A file in memory that also records the offset of every write, in the order the writes happened.
#[derive(Debug, Default)]
pub(super) struct MemFile {
    data: Mutex<Vec<u8>>,
    writes: Mutex<Vec<u64>>,
}

impl MemFile {
    pub(super) fn new(data: Vec<u8>) -> Arc<Self> {
        Arc::new(MemFile {
            data: Mutex::new(data),
            writes: Mutex::default(),
        })
    }
    pub(super) fn empty() -> Arc<Self> {
        Self::new(vec![])
    }
    pub(super) fn bytes(&self) -> Vec<u8> {
        self.data.lock().unwrap().clone()
    }
    pub(super) fn write_offsets(&self) -> Vec<u64> {
        self.writes.lock().unwrap().clone()
    }
}

impl FileHandle for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> SResult<usize> {
        let d = self.data.lock().unwrap();
        let Ok(off) = usize::try_from(offset) else {
            return Ok(0);
        };
        if off >= d.len() {
            return Ok(0);
        }
        let n = buf.len().min(d.len() - off);
        buf[..n].copy_from_slice(&d[off..off + n]);
        Ok(n)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> SResult<()> {
        let end = usize::try_from(offset)
            .ok()
            .and_then(|o| o.checked_add(buf.len()))
            .filter(|&e| e <= 1 << 32)
            .ok_or_else(|| {
                StorageError::Invalid(format!("test file: write at {offset} too far"))
            })?;
        self.writes.lock().unwrap().push(offset);
        let mut d = self.data.lock().unwrap();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[offset as usize..end].copy_from_slice(buf);
        Ok(())
    }
    fn len(&self) -> SResult<u64> {
        Ok(self.data.lock().unwrap().len() as u64)
    }
    fn sync(&self) -> SResult<()> {
        Ok(())
    }
}

/// A real file (page cache) with positioned I/O, for throughput, and its descriptor offered to the engine (as
/// `FsFile` and the client's `LocalFile` do) for the kernel path.
#[derive(Debug)]
pub(super) struct DiskFile(pub(super) File);

impl FileHandle for DiskFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> SResult<usize> {
        self.0
            .read_at(buf, offset)
            .map_err(|e| StorageError::from_io("test", e))
    }
    fn read_vectored_at(
        &self,
        bufs: &mut [std::io::IoSliceMut<'_>],
        offset: u64,
    ) -> SResult<usize> {
        use std::os::fd::AsFd;
        drsftp_sys::fileio::preadv(self.0.as_fd(), bufs, offset)
            .map_err(|e| StorageError::from_io("test", e))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> SResult<()> {
        self.0
            .write_all_at(buf, offset)
            .map_err(|e| StorageError::from_io("test", e))
    }
    fn len(&self) -> SResult<u64> {
        Ok(self
            .0
            .metadata()
            .map_err(|e| StorageError::from_io("test", e))?
            .len())
    }
    fn sync(&self) -> SResult<()> {
        Ok(())
    }
    fn host_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        Some(self.0.as_fd())
    }
}

/// Discards writes (counts them), for throughput without a destination file.
#[derive(Debug, Default)]
pub(super) struct NullFile(pub(super) AtomicU64);

impl FileHandle for NullFile {
    fn read_at(&self, _buf: &mut [u8], _offset: u64) -> SResult<usize> {
        Ok(0)
    }
    fn write_at(&self, buf: &[u8], _offset: u64) -> SResult<()> {
        self.0.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }
    fn len(&self) -> SResult<u64> {
        Ok(0)
    }
    fn sync(&self) -> SResult<()> {
        Ok(())
    }
}

/// Deterministic pseudo-random bytes, fast enough for gigabytes (the shared test kit's generator).
pub(super) use drsftp_testkit::data::{fill_random, random_bytes as random};

/// FNV-1a over 8-byte words: a cheap checksum to compare files in messages.
pub(super) fn checksum(b: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for c in b.chunks(8) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^ b.len() as u64
}

pub(super) fn lo() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// `n` connected pairs (sender side, receiver side) made with the engine's `listen`/`connect`.
pub(super) async fn pairs(n: usize, opts: &DataOpts) -> (Vec<TcpStream>, Vec<TcpStream>) {
    let l = super::listen(lo(), opts).await.unwrap();
    let addr = l.local_addr().unwrap();
    let mut tx = vec![];
    let mut rx = vec![];
    for _ in 0..n {
        let (c, a) = tokio::join!(super::connect(addr, opts), l.accept());
        tx.push(c.unwrap());
        rx.push(a.unwrap().0);
    }
    (tx, rx)
}

/// A listener and a channel fed by its accept loop, as the drivers do it. The accept task ends with the test.
pub(super) async fn accepting(opts: &DataOpts) -> (SocketAddr, mpsc::Receiver<TcpStream>) {
    let l: TcpListener = super::listen(lo(), opts).await.unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            if tx.send(s).await.is_err() {
                return;
            }
        }
    });
    (addr, rx)
}

/// A channel pre-loaded with `socks`, its sender dropped (no more connections will come).
pub(super) fn queued<S: Into<MaybeTls>>(socks: Vec<S>) -> mpsc::Receiver<MaybeTls> {
    let (tx, rx) = mpsc::channel(socks.len().max(1));
    for s in socks {
        tx.try_send(s.into()).unwrap();
    }
    rx
}

/// A whole-file MODE E transfer of `data`, from a fresh in-memory source over `tx` and the connections `rx`
/// (queued) into an empty in-memory file, which must then hold exactly `data`; both sides' reports.
pub(super) async fn mode_e_copy<S: Into<MaybeTls> + Send + 'static>(
    tx: Vec<S>,
    rx: Vec<S>,
    data: &[u8],
    opts: &DataOpts,
) -> (DataReport, DataReport) {
    let dst = MemFile::empty();
    let reports = mode_e(
        tx,
        queued(rx),
        MemFile::new(data.to_vec()),
        dst.clone(),
        vec![0..u64::MAX],
        0,
        0,
        opts,
    )
    .await;
    assert!(dst.bytes() == data);
    reports
}

/// Run a MODE E transfer of `ranges` of `src` over `tx_socks` into `dst` through `conns`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn mode_e<
    S: Into<MaybeTls> + Send + 'static,
    R: Into<MaybeTls> + Send + 'static,
>(
    tx_socks: Vec<S>,
    conns: mpsc::Receiver<R>,
    src: Arc<dyn FileHandle>,
    dst: Arc<dyn FileHandle>,
    ranges: Vec<std::ops::Range<u64>>,
    wire: u64,
    wire_add: u64,
    opts: &DataOpts,
) -> (DataReport, DataReport) {
    let (ptx, prx) = (Arc::new(Progress::new()), Arc::new(Progress::new()));
    let fut = async {
        tokio::try_join!(
            super::send_mode_e(tx_socks, src, ranges, wire, opts, ptx.clone()),
            super::recv_mode_e(conns, dst, wire_add, opts, prx.clone()),
        )
    };
    let (s, r) = tokio::time::timeout(Duration::from_secs(120), fut)
        .await
        .expect("transfer hung")
        .expect("transfer failed");
    assert_eq!(ptx.bytes(), s.bytes);
    assert_eq!(prx.bytes(), r.bytes);
    assert_eq!(prx.ranges(), r.ranges);
    assert_eq!(
        prx.buffer(),
        0,
        "stream gauges are removed when streams end"
    );
    (s, r)
}
