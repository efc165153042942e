//! Stream-mode DRS on the control channel end to end on loopback (seed 000 §4.4, docs/drs.md §4.4): a drsftp server
//! and client with `BufferPolicy::Drs` move 8 MiB down and 16 MiB up in stream mode, paced to 16 MB/s by the served storage
//! so the transfers last about half a second. Download: the client's DRS probes go out as `SBUF <id> <size>`, the
//! server answers `200 SBUF <id> <size>` and resizes its sending socket's SO_SNDBUF. Upload: the server's DRS
//! announces its receive buffer with `126 SBUF <id> <size>` and the client resizes its send buffer
//! (16 MiB, the server's DRS ceiling at 1 MiB, so the client is still sending when the notices come). A client that
//! did not opt in (plain one-argument SBUF semantics) sees no `126` line and sends no two-argument SBUF.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drsftp_io::client::{Client, ClientOptions, TransferMode};
use drsftp_io::data::{DataOpts, Progress, SbufCounts, SbufObserver};
use drsftp_io::server::ServerParams;
use drsftp_proto::server::ServerConfig;
use drsftp_storage::{
    FileHandle, FsStorage, Metadata, PartFile, Result as SResult, Storage, WriteMode,
};
use drsftp_tune::BufferPolicy;

mod common;
use common::proxy;
use drsftp_testkit::data::random_bytes;
use drsftp_testkit::server::TestServer;

const RATE: f64 = 16e6;
const SIZE: usize = 8 << 20;
/// Uploads are larger: the client's engine is done once the last byte is in its socket buffer (about 4 MiB on
/// loopback) or the server's receive window (capped at `DRS_MAX`), and a `126` arriving later has no socket left
/// to resize.
const UP_SIZE: usize = 16 << 20;
const DRS_MAX: u64 = 1 << 20;

/// File I/O paced to `RATE` bytes/s per open file (reads and writes).
#[derive(Debug)]
struct Paced {
    inner: Arc<dyn FileHandle>,
    start: Instant,
    issued: Mutex<u64>,
}

impl Paced {
    fn wrap(inner: Arc<dyn FileHandle>) -> Arc<dyn FileHandle> {
        Arc::new(Paced {
            inner,
            start: Instant::now(),
            issued: Mutex::new(0),
        })
    }
    fn pace(&self, n: usize) {
        let due = {
            let mut i = self.issued.lock().unwrap();
            *i += n as u64;
            self.start + Duration::from_secs_f64(*i as f64 / RATE)
        };
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
}

impl FileHandle for Paced {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> SResult<usize> {
        let n = self.inner.read_at(buf, offset)?;
        self.pace(n);
        Ok(n)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> SResult<()> {
        self.inner.write_at(buf, offset)?;
        self.pace(buf.len());
        Ok(())
    }
    fn len(&self) -> SResult<u64> {
        self.inner.len()
    }
    fn sync(&self) -> SResult<()> {
        self.inner.sync()
    }
}

#[derive(Debug)]
struct PacedPart {
    inner: Box<dyn PartFile>,
    handle: Arc<dyn FileHandle>,
}

impl PartFile for PacedPart {
    fn handle(&self) -> Arc<dyn FileHandle> {
        self.handle.clone()
    }
    fn commit(self: Box<Self>) -> SResult<()> {
        self.inner.commit()
    }
    fn abort(self: Box<Self>) {
        self.inner.abort()
    }
}

/// `FsStorage` whose files are read and written at `RATE`.
#[derive(Debug)]
struct PacedStorage(FsStorage);

impl Storage for PacedStorage {
    fn stat(&self, path: &str) -> SResult<Metadata> {
        self.0.stat(path)
    }
    fn list(&self, path: &str) -> SResult<Vec<Metadata>> {
        self.0.list(path)
    }
    fn open_read(&self, path: &str) -> SResult<Arc<dyn FileHandle>> {
        Ok(Paced::wrap(self.0.open_read(path)?))
    }
    fn open_write(&self, path: &str, mode: WriteMode) -> SResult<Box<dyn PartFile>> {
        let inner = self.0.open_write(path, mode)?;
        let handle = Paced::wrap(inner.handle());
        Ok(Box::new(PacedPart { inner, handle }))
    }
    fn mkdir(&self, path: &str) -> SResult<()> {
        self.0.mkdir(path)
    }
    fn rmdir(&self, path: &str) -> SResult<()> {
        self.0.rmdir(path)
    }
    fn remove(&self, path: &str) -> SResult<()> {
        self.0.remove(path)
    }
    fn rename(&self, from: &str, to: &str) -> SResult<()> {
        self.0.rename(from, to)
    }
    fn set_modified(&self, path: &str, time: std::time::SystemTime) -> SResult<()> {
        self.0.set_modified(path, time)
    }
}

fn opts(buffer: BufferPolicy) -> ClientOptions {
    ClientOptions {
        streams: 1,
        buffer,
        timeout: Duration::from_secs(60),
        ..ClientOptions::default()
    }
}

/// The kernel reports a set SO_SNDBUF doubled; above wmem_max only if SO_SNDBUFFORCE was allowed.
fn assert_sndbuf_follows(c: &SbufCounts) {
    let wmax = drsftp_sys::sockopt::buf_limits().unwrap().wmem_max as u64;
    assert!(c.sndbuf_sets >= 1, "SO_SNDBUF changed: {c:?}");
    assert_ne!(c.sndbuf_now, c.sndbuf_initial, "{c:?}");
    assert!(
        c.sndbuf_now == 2 * c.last_applied || c.sndbuf_now == 2 * c.last_applied.min(wmax),
        "the kernel holds what was applied: {c:?}"
    );
    // DrsSendStream: the told size, floored at the sender's cwnd (and 64 KiB), capped at drs_max.
    assert!(c.last_applied >= c.last_told.min(64 << 20), "{c:?}");
}

async fn start_server(root: &std::path::Path) -> (TestServer, Arc<SbufObserver>) {
    let observer = Arc::new(SbufObserver::default());
    // The test uploads anonymously.
    let session = ServerConfig {
        anonymous_write: true,
        ..ServerConfig::default()
    };
    let data = DataOpts {
        buffer: BufferPolicy::Drs,
        sbuf_observer: Some(observer.clone()),
        drs_max: DRS_MAX,
        ..DataOpts::default()
    };
    let storage = Arc::new(PacedStorage(FsStorage::new(root).unwrap()));
    let params = ServerParams::new(session, data, storage);
    (TestServer::start(params).await, observer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_mode_sbuf_on_the_control_channel_both_ways() {
    let root = tempfile::tempdir().unwrap();
    let data = random_bytes(SIZE, 11);
    std::fs::write(root.path().join("down.bin"), &data).unwrap();
    let (srv, observer) = start_server(root.path()).await;
    let addr = srv.addr;
    let (via, wire) = proxy(addr).await;
    let mut c = Client::connect(&via.to_string(), "anonymous", "x", Duration::from_secs(30))
        .await
        .expect("login");

    // Download: client receives with DRS, server sends.
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("down.copy");
    let progress = Arc::new(Progress::new());
    let s = c
        .download(
            "/down.bin",
            &dst,
            &opts(BufferPolicy::Drs),
            progress.clone(),
        )
        .await
        .expect("stream-mode download with DRS");
    assert_eq!(s.mode, TransferMode::Stream);
    assert!(c.drs_negotiated());
    assert_eq!(s.bytes, SIZE as u64);
    assert!(std::fs::read(&dst).unwrap() == data, "download intact");
    let client = progress.sbuf().counts();
    eprintln!("download, client: {client:?}");
    assert!(client.probes_sent >= 1, "{client:?}");
    assert!(client.echoes >= 1, "{client:?}");
    let cmds = wire.commands();
    let replies = wire.replies();
    let (id, size) = cmds
        .lines()
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 3 && w[0] == "SBUF").then(|| (w[1].to_string(), w[2].to_string()))
        })
        .unwrap_or_else(|| panic!("an SBUF <id> <size> command: {cmds}"));
    assert!(
        replies.contains(&format!("200 SBUF {id} {size}\r\n")),
        "echoed: {replies}"
    );
    assert!(!replies.contains("126 SBUF"), "the server was sending");
    let server = observer.total();
    eprintln!("download, server: {server:?}");
    assert!(server.requests >= 1, "{server:?}");
    assert_eq!(server.probes_sent, 0, "{server:?}");
    assert_sndbuf_follows(&server);

    // Upload: server receives with DRS and announces its buffer with 126; the client's send buffer follows.
    let src = out.path().join("up.bin");
    let up = random_bytes(UP_SIZE, 12);
    std::fs::write(&src, &up).unwrap();
    let progress = Arc::new(Progress::new());
    let s = c
        .upload(&src, "/up.bin", &opts(BufferPolicy::Drs), progress.clone())
        .await
        .expect("stream-mode upload with DRS");
    assert_eq!(s.mode, TransferMode::Stream);
    assert!(
        std::fs::read(root.path().join("up.bin")).unwrap() == up,
        "upload intact"
    );
    let client = progress.sbuf().counts();
    let server = observer.total();
    eprintln!("upload, client: {client:?}\nupload, server totals: {server:?}");
    assert!(server.probes_sent >= 1, "{server:?}");
    assert!(wire.replies().contains("126 SBUF "), "{}", wire.replies());
    assert!(client.notices >= 1, "{client:?}");
    assert_eq!(client.probes_sent, 0, "the client was sending");
    assert_sndbuf_follows(&client);
    c.quit().await.unwrap();

    // A client that never opts in (plain GFD.20 SBUF <bytes>, as globus-url-copy): no 126, no SBUF <id> <size>.
    let (via, wire) = proxy(addr).await;
    let mut c = Client::connect(&via.to_string(), "anonymous", "x", Duration::from_secs(30))
        .await
        .expect("login");
    let before = observer.total();
    let plain = ClientOptions {
        tcp_buffer: Some(1 << 20),
        ..opts(BufferPolicy::Kernel)
    };
    let progress = Arc::new(Progress::new());
    c.upload(&src, "/up2.bin", &plain, progress.clone())
        .await
        .expect("plain stream-mode upload");
    let dst2 = out.path().join("down2.copy");
    c.download("/down.bin", &dst2, &plain, Arc::new(Progress::new()))
        .await
        .expect("plain stream-mode download");
    assert!(std::fs::read(&dst2).unwrap() == data);
    assert!(std::fs::read(root.path().join("up2.bin")).unwrap() == up);
    assert!(!c.drs_negotiated());
    let cmds = wire.commands();
    let replies = wire.replies();
    eprintln!("plain client dialogue:\n{cmds}");
    assert!(!cmds.contains("OPTS DRS"), "{cmds}");
    assert!(
        !cmds
            .lines()
            .any(|l| l.starts_with("SBUF ") && l.split_whitespace().count() == 3),
        "{cmds}"
    );
    assert!(!replies.lines().any(|l| l.starts_with("126")), "{replies}");
    assert_eq!(progress.sbuf().counts(), SbufCounts::default());
    assert_eq!(
        observer.total(),
        before,
        "nothing on the server side either"
    );
    c.quit().await.unwrap();
    drop(srv);
}
