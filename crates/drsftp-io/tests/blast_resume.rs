//! Resumable blast downloads on loopback (docs/blast.md "Resume"): a rate-capped download is cut off midway
//! (its future dropped, as Ctrl-C does), leaving the part file and its checkpoint; the rerun resumes (REST ranges:
//! fewer packets than the file has arrive, `resumed` > 0), verifies by CKSM, is byte-identical and leaves neither
//! file behind. A checkpoint for a source of another size is discarded, and `resume: false` starts afresh.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_io::blast::BlastOpts;
use drsftp_io::client::{ClientOptions, TransferSummary};
use drsftp_io::data::Progress;
use drsftp_testkit::data::random_bytes;
use drsftp_testkit::server::{login, TestServer};

fn udp(max_rate: u64, resume: bool) -> ClientOptions {
    ClientOptions {
        timeout: Duration::from_secs(60),
        blast: Some(BlastOpts {
            max_rate,
            resume,
            ..BlastOpts::default()
        }),
        ..ClientOptions::default()
    }
}

fn part_files(dst: &Path) -> (PathBuf, PathBuf) {
    let name = dst.file_name().unwrap().to_string_lossy();
    let part = dst.with_file_name(format!(".{name}.drsftp-part"));
    let ck = dst.with_file_name(format!(".{name}.drsftp-part.ck"));
    (part, ck)
}

/// Starts a download capped at 40 Mbit/s and drops it once a checkpoint covers at least `min` bytes' worth of
/// progress. Returns the bytes that had arrived.
async fn interrupted(addr: SocketAddr, remote: &str, dst: &Path, min: u64) -> u64 {
    let mut c = login(addr).await;
    let progress = Arc::new(Progress::new());
    let (_, ck) = part_files(dst);
    let opts = udp(40_000_000, true);
    let watch = async {
        let t0 = Instant::now();
        while !(ck.exists() && progress.bytes() >= min) {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "no checkpoint appeared"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        r = c.download(remote, dst, &opts, progress.clone()) => panic!("finished before the cut: {r:?}"),
        _ = watch => {}
    }
    progress.bytes()
}

async fn download(addr: SocketAddr, remote: &str, dst: &Path, resume: bool) -> TransferSummary {
    let mut c = login(addr).await;
    let s = c
        .download(remote, dst, &udp(0, resume), Arc::new(Progress::new()))
        .await
        .expect("download");
    c.quit().await.unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_blast_download_resumes_with_rest_ranges() {
    let root = tempfile::tempdir().unwrap();
    let len = (16 << 20) + 777;
    let data = random_bytes(len, 7);
    std::fs::write(root.path().join("big.bin"), &data).unwrap();
    let srv = TestServer::serve(root.path()).await;
    let addr = srv.addr;
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("big.copy");
    let (part, ck) = part_files(&dst);

    let got = interrupted(addr, "/big.bin", &dst, 3 << 20).await;
    assert!(got < len as u64, "{got}");
    assert!(
        part.exists() && ck.exists(),
        "part file and checkpoint kept"
    );
    assert!(!dst.exists());

    let s = download(addr, "/big.bin", &dst, true).await;
    let b = s.blast.as_ref().expect("blast report");
    eprintln!(
        "resumed {} of {len} bytes, {} of {} packets this time",
        b.resumed, b.datagrams, b.packets
    );
    assert!(b.resumed >= 2 << 20, "{b:?}");
    assert!(
        b.datagrams < b.packets,
        "only the missing packets were sent: {b:?}"
    );
    assert!(
        s.notices.iter().any(|n| n.contains("resuming")),
        "{:?}",
        s.notices
    );
    assert!(s.verified, "{s:?}");
    assert_eq!(s.bytes, len as u64);
    assert!(std::fs::read(&dst).unwrap() == data, "byte-identical");
    assert!(!part.exists() && !ck.exists(), "nothing left behind");

    // The source changes size between the cut and the rerun: the checkpoint is discarded.
    let dst2 = out.path().join("changed.copy");
    let (part2, ck2) = part_files(&dst2);
    interrupted(addr, "/big.bin", &dst2, 1 << 20).await;
    assert!(ck2.exists());
    let mut data2 = data.clone();
    data2.extend_from_slice(b"grown");
    std::fs::write(root.path().join("big.bin"), &data2).unwrap();
    let s = download(addr, "/big.bin", &dst2, true).await;
    let b = s.blast.as_ref().unwrap();
    assert_eq!(b.resumed, 0, "{b:?}");
    assert!(
        s.notices.iter().any(|n| n.contains("source changed")),
        "{:?}",
        s.notices
    );
    assert!(std::fs::read(&dst2).unwrap() == data2);
    assert!(!part2.exists() && !ck2.exists());

    // `resume: false` (--no-resume) starts afresh even from a matching checkpoint.
    let dst3 = out.path().join("fresh.copy");
    interrupted(addr, "/big.bin", &dst3, 1 << 20).await;
    let s = download(addr, "/big.bin", &dst3, false).await;
    assert_eq!(s.blast.as_ref().unwrap().resumed, 0);
    assert!(
        s.notices.iter().any(|n| n.contains("--no-resume")),
        "{:?}",
        s.notices
    );
    assert!(std::fs::read(&dst3).unwrap() == data2);
    let (part3, ck3) = part_files(&dst3);
    assert!(!part3.exists() && !ck3.exists());
    drop(srv);
}
