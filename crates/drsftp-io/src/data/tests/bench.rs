//! Loopback throughput, printed with `--nocapture` (meaningful in `--release`):
//! `cargo test --release -p drsftp-io -- --nocapture bench_loopback`. Size from `DRSFTP_BENCH_MIB` (default 256;
//! the Globus comparison uses 2048). Files are real files in the temp dir (page cache), as a server would see.

use crate::tls::MaybeTls;
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

async fn mode_e_run(
    n: usize,
    src: Arc<DiskFile>,
    dst: Arc<dyn drsftp_storage::FileHandle>,
    len: u64,
) -> f64 {
    let opts = DataOpts::default();
    let (tx, rx) = pairs(n, &opts).await;
    let t = Instant::now();
    let (s, r) = mode_e(tx, queued(rx), src, dst, vec![0..u64::MAX], 0, 0, &opts).await;
    assert_eq!((s.bytes, r.bytes), (len, len));
    rate(len, t)
}

fn cases() -> String {
    std::env::var("DRSFTP_BENCH_CASES").unwrap_or_else(|_| "null,e4,e1,stream".into())
}

async fn stream_run(src: Arc<DiskFile>, dst: Arc<dyn drsftp_storage::FileHandle>, len: u64) -> f64 {
    let opts = DataOpts::default();
    let (mut tx, mut rx) = pairs(1, &opts).await;
    let t = Instant::now();
    let p = Arc::new(Progress::new());
    // Separate tasks, as separate processes would be (a join! would run both ends on one worker).
    let (stx, srx) = (tx.pop().unwrap(), rx.pop().unwrap());
    let (o1, o2, p1) = (opts.clone(), opts.clone(), p.clone());
    let send = tokio::spawn(async move { send_stream(stx, src, 0..u64::MAX, &o1, p1).await });
    let recv = tokio::spawn(async move { recv_stream(srx, dst, 0, &o2, p).await });
    let (s, r) = (send.await.unwrap().unwrap(), recv.await.unwrap().unwrap());
    assert_eq!((s.bytes, r.bytes), (len, len));
    rate(len, t)
}

#[tokio::test(flavor = "multi_thread")]
async fn bench_loopback_throughput() {
    let len = mib() << 20;
    // 0 adaptive (default), 1 always the blocking pool, 2 always inline.
    if let Some(f) = std::env::var("DRSFTP_BENCH_FILEIO")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        super::super::fileio::FORCE.store(f, std::sync::atomic::Ordering::Relaxed);
    }
    let dir = tempfile::tempdir().unwrap();
    let src = make_source(dir.path(), len);
    let mut out = vec![];
    for case in cases().split(',') {
        let r = match case {
            "null" => mode_e_run(4, src.clone(), Arc::new(NullFile::default()), len).await,
            "snull" => stream_run(src.clone(), Arc::new(NullFile::default()), len).await,
            "e4" | "e1" | "stream" => {
                let d = dest(dir.path(), case);
                let r = match case {
                    "e4" => mode_e_run(4, src.clone(), d.clone(), len).await,
                    "e1" => mode_e_run(1, src.clone(), d.clone(), len).await,
                    _ => stream_run(src.clone(), d.clone(), len).await,
                };
                assert!(same(&src, &d, len), "{case}: copy differs");
                drop(d);
                let _ = std::fs::remove_file(dir.path().join(case));
                r
            }
            other => panic!("unknown bench case {other}"),
        };
        out.push(format!("{case} {r:.0}"));
    }
    // null/snull = MODE E x4/stream mode into a discarding sink, e4/e1 = MODE E x4/x1 into a file, stream = stream mode into a file.
    eprintln!("loopback {} MiB, MiB/s: {}", mib(), out.join(", "));
}

#[tokio::test(flavor = "multi_thread")]
async fn bench_small_files_on_cached_sockets() {
    // Many small MODE E transfers on the same 4 connections (globus-url-copy -fast): per-file latency must not
    // include Nagle / delayed-ACK stalls on the final EOD headers.
    let opts = DataOpts::default();
    let (tx, rx) = pairs(4, &opts).await;
    let (mut tx, mut rx): (Vec<MaybeTls>, Vec<MaybeTls>) = (
        tx.into_iter().map(Into::into).collect(),
        rx.into_iter().map(Into::into).collect(),
    );
    let files = 30;
    let t = Instant::now();
    let mut worst = std::time::Duration::ZERO;
    for i in 0..files {
        let data = random(300_000 + i * 1000, i as u64);
        let dst = MemFile::empty();
        let t1 = Instant::now();
        let (s, r) = mode_e(
            tx,
            queued(rx),
            MemFile::new(data.clone()),
            dst.clone(),
            vec![0..u64::MAX],
            0,
            0,
            &opts,
        )
        .await;
        worst = worst.max(t1.elapsed());
        assert!(dst.bytes() == data);
        (tx, rx) = (s.reusable, r.reusable);
    }
    let per = t.elapsed() / files as u32;
    eprintln!("small files on cached sockets: {per:?} per file, worst {worst:?}");
}
