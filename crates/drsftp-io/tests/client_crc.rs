//! Download verification with the engine's CRC32C (no re-read of the local part file) must be as strong as the
//! re-read: against a scripted server that offers CKSM CRC32C, a correct answer verifies, and a server whose CKSM
//! differs from the bytes it sent (its file changed, or is corrupt) fails the download with `ChecksumMismatch` and
//! leaves nothing behind.

use std::sync::Arc;
use std::time::Duration;

use drsftp_io::client::{Client, ClientError, ClientOptions};
use drsftp_io::data::Progress;
use drsftp_storage::{checksum_bytes, ChecksumAlg};
use tokio::io::AsyncWriteExt;

mod common;
use common::FakeFtp;

fn content() -> Vec<u8> {
    (0..300_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect()
}

/// A one-session stream-mode server for `data` that answers `CKSM CRC32C` with `cksm`; returns its address and the
/// commands it saw.
async fn fake(data: Vec<u8>, cksm: String) -> (String, tokio::task::JoinHandle<Vec<String>>) {
    let (l, addr) = FakeFtp::listen().await;
    let task = tokio::spawn(async move {
        let mut f = FakeFtp::accept(l).await;
        while let Some((line, verb)) = f.next().await {
            let reply: String = match verb.as_str() {
                "FEAT" => "211-Features\r\n SIZE\r\n CKSM CRC32C,SHA256\r\n211 End\r\n".into(),
                "SIZE" => format!("213 {}\r\n", data.len()),
                "RETR" => {
                    f.send("150 go\r\n").await;
                    let mut s = f.accept_data().await;
                    s.write_all(&data).await.unwrap();
                    drop(s);
                    "226 done\r\n".into()
                }
                "CKSM" if line.to_ascii_uppercase().starts_with("CKSM CRC32C 0 -1 ") => {
                    format!("213 {cksm}\r\n")
                }
                "QUIT" => {
                    f.send("221 bye\r\n").await;
                    return f.seen;
                }
                _ => f.standard(&verb).await,
            };
            f.send(&reply).await;
        }
        f.seen
    });
    (addr, task)
}

async fn download(
    cksm: String,
) -> (
    Result<Option<(String, String)>, ClientError>,
    Vec<String>,
    bool,
) {
    let (addr, server) = fake(content(), cksm).await;
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("f.bin");
    let mut c = Client::connect(&addr, "u", "p", Duration::from_secs(5))
        .await
        .unwrap();
    let r = c
        .download(
            "/f.bin",
            &dst,
            &ClientOptions::default(),
            Arc::new(Progress::new()),
        )
        .await
        .map(|s| s.checksum);
    let left = std::fs::read_dir(out.path()).unwrap().count();
    if r.is_ok() {
        assert_eq!(std::fs::read(&dst).unwrap(), content());
    } else {
        assert_eq!(left, 0, "nothing left behind on a mismatch");
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), c.quit()).await;
    let seen = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("fake server ends")
        .unwrap();
    (r, seen, dst.exists())
}

#[tokio::test]
async fn engine_crc_verifies_a_correct_download() {
    let want = checksum_bytes(ChecksumAlg::Crc32c, &content());
    let (r, seen, exists) = download(want.to_ascii_uppercase()).await;
    assert_eq!(r.unwrap(), Some(("CRC32C".to_string(), want)));
    assert!(exists);
    assert!(
        seen.iter().any(|l| l == "CKSM CRC32C 0 -1 /f.bin"),
        "{seen:?}"
    );
}

#[tokio::test]
async fn engine_crc_catches_a_server_checksum_that_differs() {
    // The server's file is not what it sent (a flipped byte at the very end, then one at the start).
    for flip in [content().len() - 1, 0] {
        let mut other = content();
        other[flip] ^= 0x20;
        let theirs = checksum_bytes(ChecksumAlg::Crc32c, &other);
        let (r, _, exists) = download(theirs.clone()).await;
        match r {
            Err(ClientError::ChecksumMismatch {
                alg, local, remote, ..
            }) => {
                assert_eq!(alg, "CRC32C");
                assert_eq!(remote, theirs);
                assert_eq!(local, checksum_bytes(ChecksumAlg::Crc32c, &content()));
            }
            other => panic!("expected a checksum mismatch, got {other:?}"),
        }
        assert!(!exists);
    }
}
