//! Shared harness for the drsftp-io integration tests: an in-process drsftp server on loopback, Debian's
//! `globus-gridftp-server` as a child process (killed by PID on drop), a recording control-channel proxy, a
//! scripted fake FTP server, deterministic test data and SHA-256 of local files. Only loopback addresses are used.

// Every test binary compiles this module but uses only part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drsftp_io::client::Client;
use drsftp_io::data::{AutoSender, DataOpts};
use drsftp_io::server::{self, ServerParams, Shutdown};
use drsftp_proto::server::ServerConfig;
use drsftp_storage::{ChecksumAlg, FileHandle, FsStorage};
use drsftp_tune::AutoConfig;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

// ---- test data and checksums ----

/// Deterministic pseudo-random bytes (xorshift64*).
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
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

/// Deterministic pseudo-random bytes, one xorshift step per byte (the low byte of each state).
pub fn xorshift_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A plain local file as a storage `FileHandle`, for `drsftp_storage::checksum`.
#[derive(Debug)]
pub struct Plain(pub std::fs::File);

impl FileHandle for Plain {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> drsftp_storage::Result<usize> {
        self.0
            .read_at(buf, offset)
            .map_err(|e| drsftp_storage::StorageError::from_io("test", e))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> drsftp_storage::Result<()> {
        self.0
            .write_all_at(buf, offset)
            .map_err(|e| drsftp_storage::StorageError::from_io("test", e))
    }
    fn len(&self) -> drsftp_storage::Result<u64> {
        Ok(self.0.metadata().unwrap().len())
    }
    fn sync(&self) -> drsftp_storage::Result<()> {
        Ok(())
    }
}

/// SHA-256 (hex) of `len` bytes from `offset` (`None` = to the end) of a local file.
pub fn sha256_range(path: &Path, offset: u64, len: Option<u64>) -> String {
    let f = Plain(std::fs::File::open(path).unwrap());
    drsftp_storage::checksum(&f, ChecksumAlg::Sha256, offset, len).unwrap()
}

/// SHA-256 (hex) of a whole local file.
pub fn sha256(path: &Path) -> String {
    sha256_range(path, 0, None)
}

/// Set Unix permission bits.
pub fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A free loopback TCP port (racy but fine for tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `-p auto` controller that accepts every probe (gain threshold below zero), never doubles and never backs off: it adds one
/// stream every 20 ms up to `max`, so connections join mid-transfer whatever the loopback throughput does.
pub fn eager(max: u32) -> AutoSender {
    AutoSender {
        config: AutoConfig {
            min_streams: 1,
            max_streams: max,
            min_gain: -1.0,
            min_marginal: -1.0,
            linear_marginal: 2.0,
            headroom_growth: 2,
            loss_floor: 1e-4,
            queue_headroom: 1.25,
            backoff_drop: 1.0,
            settle: Duration::from_millis(20),
            headroom_settle: Duration::from_millis(20),
            first_settle: Duration::from_millis(20),
            loss_settle: Duration::from_millis(20),
            samples: 1,
            reprobe: Duration::from_secs(600),
            path_rtt: None,
        },
        interval: Duration::from_millis(20),
    }
}

// ---- the in-process drsftp server ----

/// Server parameters with defaults, serving the local tree `root`.
pub fn fs_params(root: &Path) -> ServerParams {
    ServerParams {
        session: ServerConfig::default(),
        data: DataOpts::default(),
        storage: Arc::new(FsStorage::new(root).unwrap()),
    }
}

/// A drsftp server on a free loopback port: its address, its shutdown switch and its task.
pub async fn spawn_server(
    params: ServerParams,
) -> (
    SocketAddr,
    Shutdown,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    server::spawn("127.0.0.1:0".parse().unwrap(), params)
        .await
        .unwrap()
}

/// An anonymous login at `addr`.
pub async fn login(addr: impl std::fmt::Display) -> Client {
    Client::connect(&addr.to_string(), "anonymous", "x", Duration::from_secs(30))
        .await
        .expect("login")
}

// ---- Debian's globus-gridftp-server ----

pub const GLOBUS: &str = "/usr/sbin/globus-gridftp-server";

/// True if the Globus server is installed; otherwise prints why `test` is skipped.
pub fn globus_installed(test: &str) -> bool {
    let there = Path::new(GLOBUS).exists();
    if !there {
        eprintln!(
            "SKIPPED {test}: {GLOBUS} is not installed (apt install globus-gridftp-server-progs)"
        );
    }
    there
}

/// A temporary directory under /tmp that the Globus server can read and write: it switches to `nobody` when run
/// as root.
pub fn globus_tempdir(prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/tmp")
        .expect("temp dir");
    chmod(dir.path(), 0o777);
    dir
}

/// A running globus-gridftp-server on a free loopback port, anonymous, home `/`, logging to `server.log` in the
/// directory it was started with. On drop its per-connection children get up to 3 s to finish (so none is left as
/// an orphan), then the process we started is killed by its PID and reaped; when the test panicked, the log's
/// tail is printed.
pub struct Globus {
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl Globus {
    /// Starts a server (trying up to five ports) with `extra` arguments; panics if it will not start.
    pub fn start(dir: &Path, extra: &[&str]) -> Globus {
        let log = dir.join("server.log");
        for _attempt in 0..5 {
            let port = free_port();
            let mut child = Command::new(GLOBUS)
                .args(["-aa", "-anonymous-user", "nobody", "-p"])
                .arg(port.to_string())
                .args([
                    "-control-interface",
                    "127.0.0.1",
                    "-data-interface",
                    "127.0.0.1",
                    "-home-dir",
                    "/",
                ])
                .args(extra)
                .arg("-l")
                .arg(&log)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn globus-gridftp-server");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // exited (port taken?): retry with another port
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Globus { child, port, log };
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            eprintln!("globus-gridftp-server did not come up on port {port}; retrying");
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "globus-gridftp-server would not start (log in {})",
            log.display()
        );
    }

    /// `127.0.0.1:<port>`.
    pub fn authority(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The last 4000 bytes or so of the server's log.
    pub fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = s.len().saturating_sub(4000);
        s[s.char_indices()
            .find(|(i, _)| *i >= start)
            .map_or(0, |(i, _)| i)..]
            .to_string()
    }
}

/// True while some process has `pid` as its parent (the server forks one child per control connection).
fn has_children(pid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    let pid = pid.to_string();
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .any(|st| {
            st.lines()
                .any(|l| l.strip_prefix("PPid:").map(str::trim) == Some(pid.as_str()))
        })
}

impl Drop for Globus {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(3);
        while has_children(self.child.id()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- globus-gridftp-server log tail ---\n{}",
                self.log_tail()
            );
        }
    }
}

// ---- a recording control-channel proxy ----

/// Control-channel bytes seen by [`proxy`], per direction.
#[derive(Default)]
pub struct Wire {
    to_server: Mutex<Vec<u8>>,
    to_client: Mutex<Vec<u8>>,
}

impl Wire {
    pub fn commands(&self) -> String {
        String::from_utf8_lossy(&self.to_server.lock().unwrap()).into_owned()
    }
    pub fn replies(&self) -> String {
        String::from_utf8_lossy(&self.to_client.lock().unwrap()).into_owned()
    }
}

/// A loopback TCP proxy for one control connection to `upstream`, recording both directions. Data connections
/// go directly (PASV/PORT carry the real addresses).
pub async fn proxy(upstream: SocketAddr) -> (SocketAddr, Arc<Wire>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let wire = Arc::new(Wire::default());
    let w = wire.clone();
    tokio::spawn(async move {
        let (client, _) = l.accept().await.unwrap();
        let server = TcpStream::connect(upstream).await.unwrap();
        let (cr, cw) = client.into_split();
        let (sr, sw) = server.into_split();
        let up = tokio::spawn(pipe(cr, sw, w.clone(), true));
        let down = tokio::spawn(pipe(sr, cw, w, false));
        let _ = tokio::join!(up, down);
    });
    (addr, wire)
}

async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, wire: Arc<Wire>, to_server: bool) {
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

// ---- a scripted fake FTP server ----

/// One control session of a scripted fake FTP server (stream mode, PASV only). The script reads commands with
/// [`FakeFtp::next`], answers the ones it cares about and leaves the rest to [`FakeFtp::standard`].
pub struct FakeFtp {
    lines: Lines<BufReader<OwnedReadHalf>>,
    w: OwnedWriteHalf,
    /// Every command line received, in order.
    pub seen: Vec<String>,
    data_l: Option<TcpListener>,
}

impl FakeFtp {
    /// A listener on a free loopback port and its address.
    pub async fn listen() -> (TcpListener, String) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        (l, addr)
    }

    /// Accepts one control connection and greets it with 220.
    pub async fn accept(l: TcpListener) -> FakeFtp {
        let (sock, _) = l.accept().await.unwrap();
        let (r, w) = sock.into_split();
        let mut f = FakeFtp {
            lines: BufReader::new(r).lines(),
            w,
            seen: Vec::new(),
            data_l: None,
        };
        f.send("220 fake ready\r\n").await;
        f
    }

    /// The next command line (recorded in `seen`) and its verb in upper case; `None` once the client is gone.
    pub async fn next(&mut self) -> Option<(String, String)> {
        let line = self.lines.next_line().await.ok()??;
        self.seen.push(line.clone());
        let verb = line.split(' ').next().unwrap_or("").to_ascii_uppercase();
        Some((line, verb))
    }

    /// The reply to USER, PASS, TYPE and PASV (which opens a data listener), `502 no` to anything else.
    pub async fn standard(&mut self, verb: &str) -> String {
        match verb {
            "USER" => "331 pass\r\n".into(),
            "PASS" => "230 in\r\n".into(),
            "TYPE" => "200 ok\r\n".into(),
            "PASV" => {
                let dl = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let p = dl.local_addr().unwrap().port();
                self.data_l = Some(dl);
                format!(
                    "227 Entering Passive Mode (127,0,0,1,{},{})\r\n",
                    p >> 8,
                    p & 255
                )
            }
            _ => "502 no\r\n".into(),
        }
    }

    /// Accepts the data connection the last PASV announced.
    pub async fn accept_data(&mut self) -> TcpStream {
        self.data_l.take().unwrap().accept().await.unwrap().0
    }

    /// Writes a reply (with its CRLF) to the control connection.
    pub async fn send(&mut self, reply: &str) {
        self.w.write_all(reply.as_bytes()).await.unwrap();
    }
}
