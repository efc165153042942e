//! DRS negotiation end to end on loopback (docs/drs.md §4.3): the drsftp client with `BufferPolicy::Drs` against
//! a drsftp server negotiates (`OPTS DRS Inband=1;` after FEAT lists `DRS`) and moves 64 MiB in MODE E over two
//! streams with in-band SBUF allowed, then turns DRS off again for a transfer that does not ask; against Debian's
//! globus-gridftp-server (skipped with a printed reason when it is not installed) the same client never sends
//! `OPTS DRS` and the transfer still works. A recording proxy on the control connection shows what went over it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drsftp_io::client::{Client, ClientOptions, TransferMode};
use drsftp_io::data::{DataOpts, Progress};
use drsftp_io::server::{self, ServerParams};
use drsftp_proto::server::ServerConfig;
use drsftp_storage::{ChecksumAlg, FileHandle, FsStorage};
use drsftp_tune::BufferPolicy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Control-channel bytes seen by [`proxy`], per direction.
#[derive(Default)]
struct Wire {
    to_server: Mutex<Vec<u8>>,
    to_client: Mutex<Vec<u8>>,
}

impl Wire {
    fn commands(&self) -> String {
        String::from_utf8_lossy(&self.to_server.lock().unwrap()).into_owned()
    }
    fn replies(&self) -> String {
        String::from_utf8_lossy(&self.to_client.lock().unwrap()).into_owned()
    }
}

/// A loopback TCP proxy for one control connection to `upstream`, recording both directions. Data connections
/// go directly (PASV/PORT carry the real addresses).
async fn proxy(upstream: SocketAddr) -> (SocketAddr, Arc<Wire>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let wire = Arc::new(Wire::default());
    let w = wire.clone();
    tokio::spawn(async move {
        let (client, _) = l.accept().await.unwrap();
        let server = TcpStream::connect(upstream).await.unwrap();
        let (cr, cw) = client.into_split();
        let (sr, sw) = server.into_split();
        let w2 = w.clone();
        let up = tokio::spawn(pipe(cr, sw, w, true));
        let down = tokio::spawn(pipe(sr, cw, w2, false));
        let _ = tokio::join!(up, down);
    });
    (addr, wire)
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    wire: Arc<Wire>,
    to_server: bool,
) {
    let mut buf = vec![0u8; 8192];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let log = if to_server {
            &wire.to_server
        } else {
            &wire.to_client
        };
        log.lock().unwrap().extend_from_slice(&buf[..n]);
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Deterministic pseudo-random bytes (xorshift64*).
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

#[derive(Debug)]
struct Plain(std::fs::File);

impl FileHandle for Plain {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> drsftp_storage::Result<usize> {
        std::os::unix::fs::FileExt::read_at(&self.0, buf, offset)
            .map_err(|e| drsftp_storage::StorageError::from_io("test", e))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> drsftp_storage::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.0, buf, offset)
            .map_err(|e| drsftp_storage::StorageError::from_io("test", e))
    }
    fn len(&self) -> drsftp_storage::Result<u64> {
        Ok(self.0.metadata().unwrap().len())
    }
    fn sync(&self) -> drsftp_storage::Result<()> {
        Ok(())
    }
}

fn sha256(path: &Path) -> String {
    let f = Plain(std::fs::File::open(path).unwrap());
    drsftp_storage::checksum(&f, ChecksumAlg::Sha256, 0, None).unwrap()
}

fn opts(streams: u32, buffer: BufferPolicy) -> ClientOptions {
    ClientOptions {
        streams,
        buffer,
        timeout: Duration::from_secs(60),
        ..ClientOptions::default()
    }
}

/// The command lines (verbs and arguments) the client sent, in order.
fn lines(s: &str) -> Vec<&str> {
    s.lines().map(str::trim_end).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drsftp_client_and_server_negotiate_drs_and_move_64_mib() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("big.bin");
    std::fs::write(&src, random_bytes(64 << 20, 4)).unwrap();
    let params = ServerParams {
        session: ServerConfig::default(),
        data: DataOpts {
            buffer: BufferPolicy::Drs,
            ..DataOpts::default()
        },
        storage: Arc::new(FsStorage::new(root.path()).unwrap()),
    };
    let (addr, shutdown, task) = server::spawn("127.0.0.1:0".parse().unwrap(), params)
        .await
        .unwrap();
    let (via, wire) = proxy(addr).await;
    let mut c = Client::connect(&via.to_string(), "anonymous", "x", Duration::from_secs(30))
        .await
        .expect("login");
    assert!(c.features().drs(), "our server lists DRS in FEAT");
    assert!(!c.drs_negotiated(), "nothing before a transfer asks");

    // MODE E, 2 streams, DRS on both sides.
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("big.copy");
    let progress = Arc::new(Progress::new());
    let s = c
        .download("/big.bin", &dst, &opts(2, BufferPolicy::Drs), progress)
        .await
        .expect("MODE E download with DRS");
    assert!(c.drs_negotiated(), "the server accepted OPTS DRS Inband=1;");
    assert_eq!(s.mode, TransferMode::Extended);
    assert_eq!(s.bytes, 64 << 20);
    assert_eq!(s.streams, 2);
    assert!(s.verified, "{s:?}");
    assert_eq!(sha256(&dst), sha256(&src));
    let cmds = wire.commands();
    let sent = lines(&cmds);
    let at = |c: &str| sent.iter().position(|l| l.starts_with(c));
    let opts_at = at("OPTS DRS Inband=1;").expect("OPTS DRS sent");
    assert!(opts_at < at("PORT").unwrap(), "before PORT: {sent:?}");
    assert!(at("FEAT").unwrap() < opts_at);
    assert!(
        wire.replies().contains("\r\n DRS\r\n"),
        "{}",
        wire.replies()
    );
    assert!(wire.replies().contains("200 DRS Inband=1;\r\n"));
    eprintln!("control dialogue (client side):\n{cmds}");

    // Same connection, MODE E upload with DRS: the server receives with in-band SBUF allowed; OPTS not repeated.
    let up = out.path().join("up.bin");
    std::fs::write(&up, random_bytes(8 << 20, 5)).unwrap();
    let s = c
        .upload(
            &up,
            "/up.bin",
            &opts(2, BufferPolicy::Drs),
            Arc::new(Progress::new()),
        )
        .await
        .expect("MODE E upload with DRS");
    assert!(s.verified, "{s:?}");
    assert_eq!(sha256(&root.path().join("up.bin")), sha256(&up));
    assert_eq!(wire.commands().matches("OPTS DRS").count(), 1);

    // A transfer that does not ask for DRS turns it off again (in-band headers stop), and still works.
    let dst2 = out.path().join("big.kernel");
    c.download(
        "/big.bin",
        &dst2,
        &opts(2, BufferPolicy::Kernel),
        Arc::new(Progress::new()),
    )
    .await
    .expect("MODE E download without DRS");
    assert!(!c.drs_negotiated());
    assert!(wire.commands().contains("OPTS DRS Inband=0;\r\n"));
    assert_eq!(sha256(&dst2), sha256(&src));
    c.quit().await.unwrap();
    shutdown.trigger();
    let _ = task.await;
}

const GLOBUS: &str = "/usr/sbin/globus-gridftp-server";

/// A globus-gridftp-server on a free loopback port serving `/`; killed (by PID) and reaped on drop.
struct Globus {
    child: Child,
    port: u16,
}

impl Globus {
    fn start(dir: &Path) -> Globus {
        let log: PathBuf = dir.join("server.log");
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = Command::new(GLOBUS)
                .args(["-aa", "-anonymous-user", "nobody", "-p", &port.to_string()])
                .args([
                    "-control-interface",
                    "127.0.0.1",
                    "-data-interface",
                    "127.0.0.1",
                ])
                .args(["-home-dir", "/", "-l"])
                .arg(&log)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn globus-gridftp-server");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Globus { child, port };
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "globus-gridftp-server would not start (log {})",
            log.display()
        );
    }

    /// True while the server still has a per-connection child.
    fn has_children(&self) -> bool {
        let pid = self.child.id().to_string();
        std::fs::read_dir("/proc")
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
                    .any(|st| {
                        st.lines()
                            .any(|l| l.strip_prefix("PPid:").map(str::trim) == Some(pid.as_str()))
                    })
            })
            .unwrap_or(false)
    }
}

impl Drop for Globus {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(3);
        while self.has_children() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn globus_server_never_sees_opts_drs() {
    if !Path::new(GLOBUS).exists() {
        eprintln!(
            "SKIPPED globus_server_never_sees_opts_drs: {GLOBUS} is not installed \
             (apt install globus-gridftp-server-progs)"
        );
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("drsftp-drs-test-")
        .tempdir_in("/tmp")
        .unwrap();
    // Globus switches to `nobody` when run as root: the tree must be readable and writable by it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let src = dir.path().join("src.bin");
    std::fs::write(&src, random_bytes(8 << 20, 6)).unwrap();
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o644)).unwrap();
    let g = Globus::start(dir.path());
    let (via, wire) = proxy(format!("127.0.0.1:{}", g.port).parse().unwrap()).await;
    let mut c = Client::connect(&via.to_string(), "anonymous", "x", Duration::from_secs(30))
        .await
        .expect("login to globus-gridftp-server");
    assert!(!c.features().drs(), "Globus lists no DRS");
    let remote = src.to_string_lossy().into_owned();
    let out = tempfile::tempdir().unwrap();
    for (streams, name) in [(2, "mode_e.bin"), (1, "stream.bin")] {
        let dst = out.path().join(name);
        let s = c
            .download(
                &remote,
                &dst,
                &opts(streams, BufferPolicy::Drs),
                Arc::new(Progress::new()),
            )
            .await
            .expect("download from Globus with --buffer drs");
        assert!(s.verified, "{s:?}");
        assert_eq!(sha256(&dst), sha256(&src));
        assert!(!c.drs_negotiated());
    }
    c.quit().await.unwrap();
    let cmds = wire.commands();
    assert!(!cmds.contains("DRS"), "sent to Globus:\n{cmds}");
    assert!(
        !cmds
            .lines()
            .any(|l| l.starts_with("SBUF") && l.split(' ').count() == 3),
        "no two-argument SBUF to Globus:\n{cmds}"
    );
    eprintln!("control dialogue with Globus (client side):\n{cmds}");
}
