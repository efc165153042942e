//! The server answers `CKSM CRC32C 0 -1` of a whole file it has just sent from the data engine's CRC, and only
//! while the file is provably the one it sent: same size and mtime as before it was read, and that mtime settled
//! (older than the timestamp granularity) at the time. A rewritten file must get a freshly computed checksum.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use drsftp_io::client::{Client, ClientOptions, TransferMode};
use drsftp_io::data::Progress;
use drsftp_storage::{checksum_bytes, ChecksumAlg};

use drsftp_testkit::data::random_bytes;
use drsftp_testkit::server::TestServer;

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

async fn download(c: &mut Client, dst: &Path, mode: TransferMode) -> Option<(String, String)> {
    let opts = ClientOptions {
        streams: if mode == TransferMode::Extended { 3 } else { 1 },
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
    let srv = TestServer::serve(root.path()).await;
    let mut c = srv.login().await;
    let src = root.path().join("f.bin");
    let dst = out.path().join("f.bin");
    let old = SystemTime::now() - Duration::from_secs(3600);
    let (a, b, d) = (
        random_bytes(3 << 20, 1),
        random_bytes(3 << 20, 2),
        random_bytes(3 << 20, 3),
    );
    for mode in [TransferMode::Stream, TransferMode::Extended] {
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
