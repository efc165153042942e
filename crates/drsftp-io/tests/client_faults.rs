//! Client driver failure paths against a scripted fake FTP server on loopback (things a real Globus server will not
//! do on request): a data connection that stalls (→ ABOR, `Stalled`), a short stream-mode download acknowledged
//! with 226 (→ size mismatch), all data but no 226 (→ timeout, ABOR), and a server that hangs up mid-transfer.
//! In every case no destination or part file may be left behind.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use drsftp_io::client::{Client, ClientError, ClientOptions};
use drsftp_io::data::Progress;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

mod common;
use common::FakeFtp;

/// What the fake server does once RETR arrives.
#[derive(Debug, Clone, Copy)]
enum Misbehave {
    /// Send 10 bytes, keep the data connection open, never reply 226; answer ABOR with 426 + 226.
    Stall,
    /// Announce SIZE 1000 but send 10 bytes, close, reply 226.
    Short,
    /// Send 10 bytes, then close the control connection.
    HangUp,
    /// Send all 1000 bytes and close the data connection, but never reply 226.
    NoFinal,
}

/// A one-session fake server; returns its control address and the commands it saw.
async fn fake(m: Misbehave) -> (String, tokio::task::JoinHandle<Vec<String>>) {
    let (l, addr) = FakeFtp::listen().await;
    let task = tokio::spawn(async move {
        let mut f = FakeFtp::accept(l).await;
        let mut data: Option<TcpStream> = None;
        while let Some((_, verb)) = f.next().await {
            let reply: String = match verb.as_str() {
                "FEAT" => "211-Features\r\n SIZE\r\n CKSM SHA256\r\n211 End\r\n".into(),
                "SIZE" => "213 1000\r\n".into(),
                "RETR" => {
                    f.send("150 go\r\n").await;
                    let mut s = f.accept_data().await;
                    let n = if matches!(m, Misbehave::NoFinal) {
                        1000
                    } else {
                        10
                    };
                    s.write_all(&vec![7u8; n]).await.unwrap();
                    match m {
                        Misbehave::Stall => {
                            data = Some(s);
                            continue;
                        }
                        Misbehave::Short => {
                            drop(s);
                            "226 done\r\n".into()
                        }
                        Misbehave::HangUp => return f.seen,
                        Misbehave::NoFinal => {
                            drop(s);
                            continue;
                        }
                    }
                }
                "ABOR" => {
                    data = None;
                    "426 aborted\r\n226 ABOR ok\r\n".into()
                }
                "QUIT" => {
                    f.send("221 bye\r\n").await;
                    return f.seen;
                }
                _ => f.standard(&verb).await,
            };
            f.send(&reply).await;
        }
        drop(data);
        f.seen
    });
    (addr, task)
}

fn assert_empty(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "files left behind: {left:?}");
}

async fn download(m: Misbehave) -> (Result<(), ClientError>, Vec<String>) {
    let (addr, server) = fake(m).await;
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("f.bin");
    let mut c = Client::connect(&addr, "u", "p", Duration::from_secs(5))
        .await
        .unwrap();
    let opts = ClientOptions {
        timeout: Duration::from_millis(800),
        ..ClientOptions::default()
    };
    let r = c
        .download("/f.bin", &dst, &opts, Arc::new(Progress::new()))
        .await
        .map(|_| ());
    assert!(!dst.exists());
    assert_empty(out.path());
    let _ = tokio::time::timeout(Duration::from_secs(2), c.quit()).await;
    let seen = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("fake server ends")
        .unwrap();
    (r, seen)
}

#[tokio::test]
async fn stalled_transfer_is_aborted() {
    let (r, seen) = download(Misbehave::Stall).await;
    assert!(matches!(r, Err(ClientError::Stalled(_))), "{r:?}");
    assert!(seen.iter().any(|l| l == "ABOR"), "ABOR sent: {seen:?}");
    assert_eq!(
        seen.last().map(String::as_str),
        Some("QUIT"),
        "session still usable: {seen:?}"
    );
}

#[tokio::test]
async fn short_stream_download_is_a_size_mismatch() {
    let (r, _) = download(Misbehave::Short).await;
    match r {
        Err(ClientError::SizeMismatch { expected, got, .. }) => {
            assert_eq!((expected, got), (1000, 10))
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn missing_final_reply_times_out() {
    let (r, seen) = download(Misbehave::NoFinal).await;
    match r {
        Err(ClientError::Session(e)) => assert!(e.to_string().contains("final reply"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(seen.iter().any(|l| l == "ABOR"), "ABOR sent: {seen:?}");
}

#[tokio::test]
async fn control_hang_up_fails_cleanly() {
    let (r, _) = download(Misbehave::HangUp).await;
    assert!(r.is_err(), "{r:?}");
}
