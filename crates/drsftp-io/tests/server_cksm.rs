//! The server answers `CKSM CRC32C 0 -1` of a whole file it has just sent from the data engine's CRC, and only
//! while the file is provably the one it sent: same size and mtime as before it was read, and that mtime settled
//! (older than the timestamp granularity) at the time. A rewritten file must get a freshly computed checksum. The
//! same holds after a blast (UDP) download, whose sender CRCs what it reads.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use drsftp_io::blast::BlastOpts;
use drsftp_io::client::{Client, ClientOptions, TransferMode};
use drsftp_io::data::Progress;
use drsftp_storage::{checksum_bytes, ChecksumAlg};

use drsftp_testkit::data::random_bytes;
use drsftp_testkit::server::{fs_params, TestServer};

fn crc(b: &[u8]) -> String {
    checksum_bytes(ChecksumAlg::Crc32c, b)
}

/// Overwrite `p` in place with `data` (same size), then set its mtime to `mtime` if given.
fn rewrite(p: &Path, data: &[u8], mtime: Option<SystemTime>) {
    let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
    f.write_all_at(data, 0).unwrap();
    if let Some(t) = mtime {
        f.set_modified(t).unwrap();
    }
}

/// Write `data` to `p` and set its mtime to `mtime` (in the past: a settled file).
fn write_settled(p: &Path, data: &[u8], mtime: SystemTime) {
    std::fs::write(p, data).unwrap();
    std::fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

/// How the file is fetched: over TCP in a mode, or over blast.
#[derive(Debug, Clone, Copy)]
enum Via {
    Tcp(TransferMode),
    Blast,
}

async fn download(c: &mut Client, dst: &Path, via: Via) -> Option<(String, String)> {
    let opts = ClientOptions {
        streams: if matches!(via, Via::Tcp(TransferMode::Extended)) {
            3
        } else {
            1
        },
        blast: matches!(via, Via::Blast).then(BlastOpts::default),
        timeout: Duration::from_secs(60),
        ..ClientOptions::default()
    };
    let s = c
        .download("/f.bin", dst, &opts, Arc::new(Progress::new()))
        .await
        .expect("download");
    assert!(s.verified);
    s.checksum
}

#[tokio::test(flavor = "multi_thread")]
async fn cksm_after_retr_is_from_the_engine_only_while_the_file_is_unchanged() {
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut params = fs_params(root.path());
    params.session.blast = true;
    let srv = TestServer::start(params).await;
    let mut c = srv.login().await;
    let src = root.path().join("f.bin");
    let dst = out.path().join("f.bin");
    let old = SystemTime::now() - Duration::from_secs(3600);
    let (a, b, d) = (
        random_bytes(3 << 20, 1),
        random_bytes(3 << 20, 2),
        random_bytes(3 << 20, 3),
    );
    for mode in [
        Via::Tcp(TransferMode::Stream),
        Via::Tcp(TransferMode::Extended),
        Via::Blast,
    ] {
        write_settled(&src, &a, old);
        let sum = download(&mut c, &dst, mode).await;
        assert_eq!(sum, Some(("CRC32C".into(), crc(&a))));

        // Proof that the answer comes from the engine, not a re-read: a writer that restores size *and* mtime is
        // invisible to the check (the documented limit of any mtime key), and gets the CRC of what was sent.
        rewrite(&src, &b, Some(old));
        let got = c.checksum("CRC32C", "/f.bin", 0, None).await.unwrap();
        assert_eq!(got, crc(&a), "{mode:?}: the cached path answers");

        // A plain rewrite (same size, new mtime) between RETR and CKSM is never answered from the cache.
        assert_eq!(
            download(&mut c, &dst, mode).await,
            Some(("CRC32C".into(), crc(&b)))
        );
        rewrite(&src, &d, None);
        let got = c.checksum("CRC32C", "/f.bin", 0, None).await.unwrap();
        assert_eq!(got, crc(&d), "{mode:?}: changed file, fresh checksum");

        // A file written moments ago is not settled: its mtime could survive another write in the same tick, so
        // even a rewrite that keeps size and mtime gets a fresh checksum.
        std::fs::write(&src, &a).unwrap();
        let fresh = std::fs::metadata(&src).unwrap().modified().unwrap();
        assert_eq!(
            download(&mut c, &dst, mode).await,
            Some(("CRC32C".into(), crc(&a)))
        );
        rewrite(&src, &b, Some(fresh));
        let got = c.checksum("CRC32C", "/f.bin", 0, None).await.unwrap();
        assert_eq!(got, crc(&b), "{mode:?}: unsettled file, fresh checksum");

        // A namespace change (like any other transfer) drops the cache.
        write_settled(&src, &a, old);
        download(&mut c, &dst, mode).await;
        c.command("MKD /sub").await.unwrap();
        c.command("RMD /sub").await.unwrap();
        rewrite(&src, &b, Some(old));
        let got = c.checksum("CRC32C", "/f.bin", 0, None).await.unwrap();
        assert_eq!(got, crc(&b), "{mode:?}: cache dropped by MKD");
    }
    let _ = c.quit().await;
    drop(srv);
}

/// Reads replies from `rd` until one with a final code (2xx-5xx, not a `-` continuation) whose code is in
/// `want`; returns it. Panics on any other final reply.
async fn reply_in(
    rd: &mut tokio::io::BufReader<tokio::net::tcp::OwnedReadHalf>,
    want: &[&str],
) -> String {
    use tokio::io::AsyncBufReadExt;
    loop {
        let mut line = String::new();
        let n = tokio::time::timeout(Duration::from_secs(20), rd.read_line(&mut line))
            .await
            .expect("reply in time")
            .unwrap();
        assert!(n > 0, "control connection closed");
        if line.len() < 4 || line.as_bytes()[3] == b'-' {
            continue;
        }
        let code = &line[..3];
        if code.starts_with('1') && !want.contains(&code) {
            continue;
        }
        assert!(want.contains(&code), "wanted {want:?}, got {line:?}");
        return line.trim_end().to_string();
    }
}

/// One raw session: `REST 100`, `RETR /f.bin` and `CKSM CRC32C 0 -1 /f.bin` in one write (a restarted RETR
/// yields no whole-file CRC, like a blast RETR). `between` runs once the transfer has started and before its
/// data is read; returns the CKSM's digest.
async fn restarted_retr_then_cksm(addr: std::net::SocketAddr, between: impl FnOnce()) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
    let (r, mut w) = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap()
        .into_split();
    let mut rd = BufReader::new(r);
    reply_in(&mut rd, &["220"]).await;
    w.write_all(b"USER anonymous\r\n").await.unwrap();
    reply_in(&mut rd, &["331", "230"]).await;
    w.write_all(b"PASS x\r\nTYPE I\r\nPASV\r\n").await.unwrap();
    reply_in(&mut rd, &["230"]).await;
    reply_in(&mut rd, &["200"]).await;
    let pasv = reply_in(&mut rd, &["227"]).await;
    let nums: Vec<u16> = pasv
        .rsplit_once('(')
        .unwrap()
        .1
        .trim_end_matches(')')
        .split(',')
        .map(|n| n.trim().parse().unwrap())
        .collect();
    let port = nums[4] * 256 + nums[5];
    w.write_all(b"REST 100\r\nRETR /f.bin\r\nCKSM CRC32C 0 -1 /f.bin\r\n")
        .await
        .unwrap();
    reply_in(&mut rd, &["350"]).await;
    reply_in(&mut rd, &["150"]).await;
    // The server hashes the queued CKSM's file now, while its transfer waits for us.
    tokio::time::sleep(Duration::from_millis(500)).await;
    between();
    let mut data = tokio::net::TcpStream::connect((addr.ip(), port))
        .await
        .unwrap();
    let mut got = vec![];
    data.read_to_end(&mut got).await.unwrap();
    reply_in(&mut rd, &["226"]).await;
    let sum = reply_in(&mut rd, &["213"]).await;
    sum[4..].to_string()
}

/// first22c: a CKSM queued behind a send that yields no whole-file CRC (a blast or restarted RETR) is hashed
/// while that transfer runs (`Action::Prefetch`) and answered from that digest after the `226`, in order, while
/// the file keeps the size and settled mtime it had; a plain rewrite in between gets a fresh checksum.
#[tokio::test(flavor = "multi_thread")]
async fn a_cksm_behind_a_restarted_retr_is_hashed_during_the_transfer() {
    let root = tempfile::tempdir().unwrap();
    let srv = TestServer::serve(root.path()).await;
    let src = root.path().join("f.bin");
    let old = SystemTime::now() - Duration::from_secs(3600);
    let (a, b) = (random_bytes(3 << 20, 4), random_bytes(3 << 20, 5));

    write_settled(&src, &a, old);
    // Proof the digest was computed during the transfer: a rewrite that restores size and mtime (invisible to
    // the check, its documented limit) after the hash still gets the digest of what was there before.
    let s = src.clone();
    let b2 = b.clone();
    let sum = restarted_retr_then_cksm(srv.addr, move || rewrite(&s, &b2, Some(old))).await;
    assert_eq!(sum, crc(&a), "answered from the digest computed early");

    // A plain rewrite (new mtime) after the early hash: the CKSM reads the file again.
    write_settled(&src, &a, old);
    let s = src.clone();
    let b2 = b.clone();
    let sum = restarted_retr_then_cksm(srv.addr, move || rewrite(&s, &b2, None)).await;
    assert_eq!(sum, crc(&b), "changed file, fresh checksum");
    drop(srv);
}
