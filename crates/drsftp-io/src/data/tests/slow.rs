//! File I/O placement: a stream whose file turns slow (disk, throttling) moves its operations to the blocking
//! pool, and transfers stay correct on both paths.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use drsftp_storage::{FileHandle, Result as SResult};

use super::*;
use crate::data::fileio::{Pending, Placement};

/// Wraps a [`MemFile`]; every `every`-th operation sleeps `delay`.
#[derive(Debug)]
pub(super) struct SlowFile {
    inner: Arc<MemFile>,
    ops: AtomicU64,
    every: u64,
    delay: Duration,
}

impl SlowFile {
    pub(super) fn new(inner: Arc<MemFile>, every: u64, delay: Duration) -> Arc<Self> {
        Arc::new(SlowFile {
            inner,
            ops: AtomicU64::new(0),
            every,
            delay,
        })
    }
    fn tick(&self) {
        if self
            .ops
            .fetch_add(1, Ordering::Relaxed)
            .checked_rem(self.every)
            == Some(0)
        {
            std::thread::sleep(self.delay);
        }
    }
}

impl FileHandle for SlowFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> SResult<usize> {
        self.tick();
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> SResult<()> {
        self.tick();
        self.inner.write_at(buf, offset)
    }
    fn len(&self) -> SResult<u64> {
        self.inner.len()
    }
    fn sync(&self) -> SResult<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_operation_moves_the_stream_to_the_blocking_pool() {
    let slow: Arc<dyn FileHandle> =
        SlowFile::new(MemFile::new(vec![7; 1 << 16]), 1, Duration::from_millis(20));
    let mut p = Placement::default();
    assert!(!p.offloading());
    let r = p.read(&slow, vec![0; 1 << 16], 0..1 << 16, 0);
    assert!(
        matches!(r, Pending::Ready(_)),
        "first operation runs inline"
    );
    let (buf, n) = r.wait().await.unwrap();
    assert_eq!(n, 1 << 16);
    assert!(p.offloading(), "20 ms for 64 KiB is the disk");
    let w = p.write(&slow, buf, 100, 0);
    assert!(matches!(w, Pending::Task(_)));
    w.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn transfers_stay_correct_with_intermittently_slow_files() {
    let opts = DataOpts {
        block_size: 64 * 1024,
        ..DataOpts::default()
    };
    let data = random(6 << 20, 40);
    let src = SlowFile::new(MemFile::new(data.clone()), 7, Duration::from_millis(12));
    let inner = MemFile::empty();
    let dst = SlowFile::new(inner.clone(), 5, Duration::from_millis(12));
    let (tx, rx) = pairs(3, &opts).await;
    mode_e(
        tx,
        queued(rx),
        src.clone(),
        dst,
        vec![0..u64::MAX],
        0,
        0,
        &opts,
    )
    .await;
    assert!(inner.bytes() == data);

    let inner = MemFile::empty();
    let dst = SlowFile::new(inner.clone(), 3, Duration::from_millis(12));
    let (mut tx, mut rx) = pairs(1, &opts).await;
    let p = Arc::new(Progress::new());
    tokio::try_join!(
        crate::data::send_stream(tx.pop().unwrap(), src, 0..u64::MAX, &opts, p.clone()),
        crate::data::recv_stream(rx.pop().unwrap(), dst, 0, &opts, p.clone()),
    )
    .unwrap();
    assert!(inner.bytes() == data);
}
