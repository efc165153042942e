//! Early writeback: each receiver (stream, MODE E) tells its file to start writeback while data still arrives,
//! and stops once it returns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drsftp_storage::{FileHandle, Result as SResult};

use super::slow::SlowFile;
use super::*;
use crate::data::writeback::EVERY;
use crate::data::{recv_stream, send_stream};

/// Wraps a [`MemFile`] and records, at every `start_writeback`, how many bytes had been written by then.
#[derive(Debug, Default)]
struct Watched {
    inner: Arc<MemFile>,
    written: AtomicU64,
    kicks: Mutex<Vec<u64>>,
}

impl FileHandle for Watched {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> SResult<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> SResult<()> {
        self.inner.write_at(buf, offset)?;
        self.written.fetch_add(buf.len() as u64, Ordering::SeqCst);
        Ok(())
    }
    fn len(&self) -> SResult<u64> {
        self.inner.len()
    }
    fn sync(&self) -> SResult<()> {
        Ok(())
    }
    fn start_writeback(&self) -> SResult<()> {
        let w = self.written.load(Ordering::SeqCst);
        self.kicks.lock().unwrap().push(w);
        Ok(())
    }
}

/// 4 MiB read in 64 KiB pieces, each 20 ms late: about 1.3 s of sending over one stream, five writeback periods.
fn slow_source(data: &[u8]) -> Arc<dyn FileHandle> {
    SlowFile::new(MemFile::new(data.to_vec()), 1, Duration::from_millis(20))
}

/// The kicks seen while the transfer ran; checks that none come after it.
async fn kicks_after(dst: &Watched) -> Vec<u64> {
    let during = dst.kicks.lock().unwrap().clone();
    tokio::time::sleep(EVERY * 3).await;
    assert_eq!(
        *dst.kicks.lock().unwrap(),
        during,
        "writeback went on after the receiver returned"
    );
    during
}

fn check_during(kicks: &[u64], total: u64) {
    assert!(kicks.len() >= 2, "writeback started {kicks:?} times");
    // Started while data was arriving: after some bytes landed and before all of them did.
    assert!(
        kicks.iter().any(|&w| w > 0 && w < total),
        "no writeback mid-transfer: {kicks:?} of {total}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_receiver_starts_writeback_while_data_lands() {
    let data = random(4 << 20, 11);
    let opts = DataOpts {
        block_size: 64 << 10,
        ..DataOpts::default()
    };
    let (mut tx, mut rx) = pairs(1, &opts).await;
    let dst = Arc::new(Watched::default());
    let (p1, p2) = (Arc::new(Progress::new()), Arc::new(Progress::new()));
    let (_, r) = tokio::try_join!(
        send_stream(
            tx.pop().unwrap(),
            slow_source(&data),
            0..u64::MAX,
            &opts,
            p1
        ),
        recv_stream(rx.pop().unwrap(), dst.clone(), 0, &opts, p2),
    )
    .unwrap();
    assert_eq!(r.bytes, data.len() as u64);
    assert!(dst.inner.bytes() == data);
    check_during(&kicks_after(&dst).await, data.len() as u64);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mode_e_receiver_starts_writeback_while_data_lands() {
    let data = random(4 << 20, 12);
    let opts = DataOpts {
        block_size: 64 << 10,
        ..DataOpts::default()
    };
    let (tx, rx) = pairs(1, &opts).await;
    let dst = Arc::new(Watched::default());
    let (_, r) = mode_e(
        tx,
        queued(rx),
        slow_source(&data),
        dst.clone(),
        vec![0..u64::MAX],
        0,
        0,
        &opts,
    )
    .await;
    assert_eq!(r.bytes, data.len() as u64);
    assert!(dst.inner.bytes() == data);
    check_during(&kicks_after(&dst).await, data.len() as u64);
}
