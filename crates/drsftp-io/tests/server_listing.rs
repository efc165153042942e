//! Directory listings are streamed (issue 19): the server formats a directory's entries as the client reads
//! them, so a huge directory listed by a client that reads slowly (or not at all) costs the server a few
//! chunks, not the whole listing. The directory here is synthetic (a million entries made on demand), and the
//! storage counts how many entries the server has taken from it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use drsftp_io::data::DataOpts;
use drsftp_io::server::ServerParams;
use drsftp_proto::server::ServerConfig;
use drsftp_storage::{
    EntryKind, FileHandle, Metadata, PartFile, Result as SResult, Storage, StorageError, WriteMode,
};
use drsftp_testkit::server::TestServer;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::time::timeout;

const ENTRIES: u64 = 1_000_000;

/// `/` holds the directory `/big` of `ENTRIES` files, made up as they are asked for; `taken` counts them.
#[derive(Debug, Default)]
struct Big {
    taken: AtomicU64,
}

fn meta(name: String, kind: EntryKind) -> Metadata {
    Metadata {
        name,
        kind,
        size: 1234,
        modified: SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000),
        mode: 0o644,
    }
}

fn entry(i: u64) -> Metadata {
    meta(format!("file-{i:07}.dat"), EntryKind::File)
}

impl Storage for Big {
    fn stat(&self, path: &str) -> SResult<Metadata> {
        match path {
            "/" => Ok(meta("/".into(), EntryKind::Dir)),
            "/big" => Ok(meta("big".into(), EntryKind::Dir)),
            _ => Err(StorageError::NotFound(path.into())),
        }
    }
    fn list(&self, path: &str) -> SResult<Vec<Metadata>> {
        let mut v = vec![];
        self.list_each(path, &mut |m| {
            v.push(m);
            true
        })?;
        Ok(v)
    }
    fn list_each(&self, path: &str, f: &mut dyn FnMut(Metadata) -> bool) -> SResult<()> {
        if path != "/big" {
            return Err(StorageError::NotFound(path.into()));
        }
        for i in 0..ENTRIES {
            self.taken.fetch_add(1, Ordering::Relaxed);
            if !f(entry(i)) {
                break;
            }
        }
        Ok(())
    }
    fn open_read(&self, path: &str) -> SResult<Arc<dyn FileHandle>> {
        Err(StorageError::NotFound(path.into()))
    }
    fn open_write(&self, path: &str, _mode: WriteMode) -> SResult<Box<dyn PartFile>> {
        Err(StorageError::PermissionDenied(path.into()))
    }
    fn mkdir(&self, path: &str) -> SResult<()> {
        Err(StorageError::PermissionDenied(path.into()))
    }
    fn rmdir(&self, path: &str) -> SResult<()> {
        Err(StorageError::PermissionDenied(path.into()))
    }
    fn remove(&self, path: &str) -> SResult<()> {
        Err(StorageError::PermissionDenied(path.into()))
    }
    fn rename(&self, from: &str, _to: &str) -> SResult<()> {
        Err(StorageError::PermissionDenied(from.into()))
    }
    fn set_modified(&self, path: &str, _time: std::time::SystemTime) -> SResult<()> {
        Err(StorageError::PermissionDenied(path.into()))
    }
}

async fn reply(rd: &mut BufReader<OwnedReadHalf>) -> String {
    loop {
        let mut line = String::new();
        timeout(Duration::from_secs(30), rd.read_line(&mut line))
            .await
            .expect("reply within 30 s")
            .unwrap();
        assert!(!line.is_empty(), "control connection closed");
        let b = line.as_bytes();
        if b.len() >= 4 && b[..3].iter().all(u8::is_ascii_digit) && b[3] == b' ' {
            return line;
        }
    }
}

/// Logs in anonymously, opens an EPSV data connection and sends `cmd`, which must get `150`.
async fn listing(
    srv: &TestServer,
    cmd: &str,
) -> (OwnedWriteHalf, BufReader<OwnedReadHalf>, TcpStream) {
    let (rd, mut wr) = TcpStream::connect(srv.addr).await.unwrap().into_split();
    let mut rd = BufReader::new(rd);
    assert!(reply(&mut rd).await.starts_with("220"));
    for (c, want) in [
        ("USER anonymous", "331"),
        ("PASS x", "230"),
        ("EPSV", "229"),
    ] {
        wr.write_all(format!("{c}\r\n").as_bytes()).await.unwrap();
        let r = reply(&mut rd).await;
        assert!(r.starts_with(want), "{c}: {r}");
        if c == "EPSV" {
            let port: u16 = r
                .split("|||")
                .nth(1)
                .and_then(|p| p.split('|').next())
                .and_then(|p| p.parse().ok())
                .unwrap_or_else(|| panic!("EPSV reply {r}"));
            let data = TcpStream::connect((srv.addr.ip(), port)).await.unwrap();
            wr.write_all(format!("{cmd}\r\n").as_bytes()).await.unwrap();
            let r = reply(&mut rd).await;
            assert!(r.starts_with("150"), "{cmd}: {r}");
            return (wr, rd, data);
        }
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_listing_is_streamed_to_a_slow_reader() {
    let big = Arc::new(Big::default());
    let params = ServerParams::new(ServerConfig::default(), DataOpts::default(), big.clone());
    let srv = TestServer::start(params).await;
    let (_ctl, mut rd, mut data) = listing(&srv, "MLSD /big").await;
    // The client reads nothing for a second: the server may fill the socket buffers and its chunks, no more.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stalled = big.taken.load(Ordering::Relaxed);
    eprintln!("entries taken while the client read nothing: {stalled} of {ENTRIES}");
    assert!(
        stalled < ENTRIES / 4,
        "the server read {stalled} of {ENTRIES} entries ahead of a client that read nothing"
    );
    // Then everything arrives, in order, complete.
    let mut all = Vec::new();
    timeout(Duration::from_secs(120), data.read_to_end(&mut all))
        .await
        .expect("listing within 120 s")
        .unwrap();
    let done = reply(&mut rd).await;
    assert!(done.starts_with("226"), "{done}");
    let text = String::from_utf8(all).unwrap();
    let lines: Vec<&str> = text.split_terminator("\r\n").collect();
    assert_eq!(lines.len() as u64, ENTRIES);
    assert!(lines[0].ends_with(" file-0000000.dat"), "{}", lines[0]);
    assert!(lines[0].starts_with("type=file;size=1234;"), "{}", lines[0]);
    assert!(lines[ENTRIES as usize - 1].ends_with(" file-0999999.dat"));
    assert_eq!(big.taken.load(Ordering::Relaxed), ENTRIES);
}

#[tokio::test]
async fn an_unreadable_directory_fails_the_listing_after_150() {
    let big = Arc::new(Big::default());
    let params = ServerParams::new(ServerConfig::default(), DataOpts::default(), big);
    let srv = TestServer::start(params).await;
    // `/` stats as a directory but its entries cannot be read (list_each refuses it).
    let (_ctl, mut rd, mut data) = listing(&srv, "LIST /").await;
    let mut got = Vec::new();
    let _ = timeout(Duration::from_secs(10), data.read_to_end(&mut got)).await;
    assert!(got.is_empty(), "{} bytes", got.len());
    let r = reply(&mut rd).await;
    assert!(
        r.starts_with("450") || r.starts_with("451") || r.starts_with("550"),
        "{r}"
    );
}
