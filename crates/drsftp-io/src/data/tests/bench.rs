//! Loopback throughput, printed with `--nocapture` (meaningful in `--release`):
//! `cargo test --release -p drsftp-io -- --nocapture bench_loopback`. Size from `DRSFTP_BENCH_MIB` (default 256;
//! the Globus comparison uses 2048). Files are real files in the temp dir (page cache), as a server would see.

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use super::*;
use crate::data::{recv_stream, send_stream};

fn mib() -> u64 {
    std::env::var("DRSFTP_BENCH_MIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 64 } else { 256 })
}

fn make_source(dir: &std::path::Path, len: u64) -> Arc<DiskFile> {
    let p = dir.join("src");
    let mut f = std::fs::File::create(&p).unwrap();
    let mut buf = vec![0u8; 4 << 20];
    let mut left = len;
    let mut seed = 1;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        fill_random(&mut buf[..n], seed);
        f.write_all(&buf[..n]).unwrap();
        left -= n as u64;
        seed += 1;
    }
    Arc::new(DiskFile(std::fs::File::open(&p).unwrap()))
}

fn dest(dir: &std::path::Path, name: &str) -> Arc<DiskFile> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.join(name))
        .unwrap();
    Arc::new(DiskFile(f))
}

fn same(a: &DiskFile, b: &DiskFile, len: u64) -> bool {
    let mut x = vec![0u8; 8 << 20];
    let mut y = vec![0u8; 8 << 20];
    let mut off = 0;
    while off < len {
        let n = super::super::fileio::read_full(a, &mut x, off).unwrap();
        let m = super::super::fileio::read_full(b, &mut y, off).unwrap();
        if n != m || x[..n] != y[..m] || n == 0 {
            return false;
        }
        off += n as u64;
    }
    b.0.metadata().unwrap().len() == len
}

fn rate(bytes: u64, t: Instant) -> f64 {
    bytes as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64()
}

async fn mode_e_run(n: usize, src: Arc<DiskFile>, dst: Arc<dyn drsftp_storage::FileHandle>, len: u64) -> f64 {
    let opts = DataOpts::default();
    let (tx, rx) = pairs(n, &opts).await;
    let t = Instant::now();
    let (s, r) = mode_e(tx, queued(rx), src, dst, vec![0..u64::MAX], 0, 0, &opts).await;
    assert_eq!((s.bytes, r.bytes), (len, len));
    rate(len, t)
}

#[tokio::test(flavor = "multi_thread")]
async fn bench_loopback_throughput() {
    let len = mib() << 20;
    let dir = tempfile::tempdir().unwrap();
    let src = make_source(dir.path(), len);
    // Warm the page cache for the source (a second read is what a benchmark of a hot file measures).
    let null: Arc<NullFile> = Arc::default();
    let warm = mode_e_run(4, src.clone(), null.clone(), len).await;

    let d = dest(dir.path(), "e4");
    let e4 = mode_e_run(4, src.clone(), d.clone(), len).await;
    assert!(same(&src, &d, len), "MODE E copy differs");
    drop(d);
    let _ = std::fs::remove_file(dir.path().join("e4"));

    let d = dest(dir.path(), "e1");
    let e1 = mode_e_run(1, src.clone(), d.clone(), len).await;
    assert!(same(&src, &d, len), "MODE E x1 copy differs");
    drop(d);
    let _ = std::fs::remove_file(dir.path().join("e1"));

    let d = dest(dir.path(), "st");
    let opts = DataOpts::default();
    let (mut tx, mut rx) = pairs(1, &opts).await;
    let t = Instant::now();
    let p = Arc::new(Progress::new());
    let (s, r) = tokio::try_join!(
        send_stream(tx.pop().unwrap(), src.clone(), 0..u64::MAX, &opts, p.clone()),
        recv_stream(rx.pop().unwrap(), d.clone(), 0, &opts, p.clone()),
    )
    .unwrap();
    let st = rate(len, t);
    assert_eq!((s.bytes, r.bytes), (len, len));
    assert!(same(&src, &d, len), "stream copy differs");

    eprintln!(
        "loopback {} MiB: MODE E x4 -> file {e4:.0} MiB/s, x4 -> null {warm:.0} MiB/s, x1 -> file {e1:.0} MiB/s, \
         stream -> file {st:.0} MiB/s",
        mib()
    );
}
