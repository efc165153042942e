//! The UDP blast channel end to end on loopback: the drsftp client against the drsftp server downloads and uploads
//! over `--transport udp` (SHA-256 equal, CKSM verified, the summary says `udp`), a partial (ERET) download, hostile
//! datagrams injected at the client's UDP port during a download (counted as rejected, file still exact), and the
//! fallback to TCP against a server without BLAST: ours with blast disabled, and Debian's globus-gridftp-server
//! (skipped with a printed reason when it is not installed; killed by PID).

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_io::blast::BlastOpts;
use drsftp_io::client::{Client, ClientOptions, Partial};
use drsftp_io::data::{DataOpts, Progress};
use drsftp_io::server::{self, ServerParams, Shutdown};
use drsftp_proto::server::ServerConfig;
use drsftp_storage::{ChecksumAlg, FileHandle, FsStorage};

const GLOBUS: &str = "/usr/sbin/globus-gridftp-server";

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
    fn write_at(&self, _: &[u8], _: u64) -> drsftp_storage::Result<()> {
        unreachable!()
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

fn udp(opts: BlastOpts) -> ClientOptions {
    ClientOptions {
        timeout: Duration::from_secs(60),
        blast: Some(opts),
        ..ClientOptions::default()
    }
}

async fn serve(root: &Path, blast: bool) -> (SocketAddr, Shutdown) {
    let params = ServerParams {
        session: ServerConfig {
            blast,
            ..ServerConfig::default()
        },
        data: DataOpts::default(),
        storage: Arc::new(FsStorage::new(root).unwrap()),
    };
    let (addr, shutdown, _task) = server::spawn("127.0.0.1:0".parse().unwrap(), params)
        .await
        .unwrap();
    (addr, shutdown)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_download_upload_and_partial_against_drsftp_serve() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("big.bin");
    std::fs::write(&src, random_bytes((24 << 20) + 4321, 1)).unwrap();
    let (addr, shutdown) = serve(root.path(), true).await;
    let mut c = Client::connect(&addr.to_string(), "anonymous", "x", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(c.features().has("BLAST"));
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("big.copy");
    let progress = Arc::new(Progress::new());
    let s = c
        .download(
            "/big.bin",
            &dst,
            &udp(BlastOpts::default()),
            progress.clone(),
        )
        .await
        .expect("UDP download");
    assert_eq!(s.transport, "udp");
    assert_eq!(s.bytes, (24 << 20) + 4321);
    assert!(s.verified, "{s:?}");
    assert_eq!(sha256(&dst), sha256(&src));
    assert_eq!(progress.bytes(), s.bytes);
    let b = s.blast.as_ref().unwrap();
    assert_eq!(s.rejected, 0);
    assert!(b.duplicate_ratio() < 0.03, "{b:?}");
    eprintln!("download: {:.0} Mbit/s, {b:?}", s.mbps());

    // Upload on the same control connection, with a rate cap (the server's linger of the last transfer is fine).
    let up = out.path().join("up.bin");
    std::fs::write(&up, random_bytes(6 << 20, 2)).unwrap();
    let o = BlastOpts {
        max_rate: 200_000_000,
        mtu: 9000,
        ..BlastOpts::default()
    };
    let s = c
        .upload(&up, "/up.bin", &udp(o), Arc::new(Progress::new()))
        .await
        .expect("UDP upload");
    assert_eq!(s.transport, "udp");
    assert!(s.verified, "{s:?}");
    assert_eq!(sha256(&root.path().join("up.bin")), sha256(&up));
    assert!(s.mbps() < 220.0, "rate cap: {:.0} Mbit/s", s.mbps());

    // Partial (ERET) download: bytes land at their offset.
    let part = out.path().join("part.bin");
    let mut o = udp(BlastOpts::default());
    o.partial = Some(Partial {
        offset: 1_000_000,
        length: 3_000_123,
    });
    let s = c
        .download("/big.bin", &part, &o, Arc::new(Progress::new()))
        .await
        .expect("UDP partial download");
    assert_eq!((s.transport, s.bytes), ("udp", 3_000_123));
    let got = std::fs::read(&part).unwrap();
    let want = std::fs::read(&src).unwrap();
    assert_eq!(got[1_000_000..], want[1_000_000..4_000_123]);
    c.quit().await.unwrap();
    shutdown.trigger();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_datagrams_at_the_clients_udp_port_are_counted() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("f.bin");
    std::fs::write(&src, random_bytes(24 << 20, 3)).unwrap();
    let (addr, shutdown) = serve(root.path(), true).await;
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    // Garbage, truncated and forged-looking datagrams from this host, a copy from another loopback address.
    let injector = std::thread::spawn(move || {
        let me = UdpSocket::bind("127.0.0.1:0").unwrap();
        let other = UdpSocket::bind("127.0.0.2:0").ok();
        let target = ("127.0.0.1", port);
        let mut fake = vec![0xb1, 0xa5, 1, 1, 0, 0, 0, 0];
        fake.extend_from_slice(&[0x42; 1492]);
        let mut sent = 0u64;
        while !st.load(Ordering::Relaxed) {
            let ok = [
                me.send_to(&[0xde; 300], target).is_ok(),
                me.send_to(&fake[..20], target).is_ok(),
                me.send_to(&fake, target).is_ok(),
                other
                    .as_ref()
                    .is_some_and(|o| o.send_to(&fake, target).is_ok()),
            ];
            sent += ok.iter().filter(|&&x| x).count() as u64;
            std::thread::sleep(Duration::from_micros(500));
        }
        sent
    });
    let mut c = Client::connect(&addr.to_string(), "anonymous", "x", Duration::from_secs(30))
        .await
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("f.copy");
    let o = BlastOpts {
        port: Some(port),
        max_rate: 300_000_000,
        ..BlastOpts::default()
    };
    let s = c
        .download("/f.bin", &dst, &udp(o), Arc::new(Progress::new()))
        .await
        .expect("download under attack");
    stop.store(true, Ordering::Relaxed);
    let sent = injector.join().unwrap();
    let b = s.blast.clone().unwrap();
    eprintln!(
        "injected {sent}; summary rejected {} ({:?}, foreign {})",
        s.rejected, b.rejects, b.foreign
    );
    assert!(s.verified);
    assert_eq!(sha256(&dst), sha256(&src));
    assert!(
        s.rejected > 0 && s.rejected <= sent,
        "{} of {sent}",
        s.rejected
    );
    assert!(
        b.rejects.bad_magic > 0 && b.rejects.truncated > 0 && b.rejects.bad_crc > 0,
        "{b:?}"
    );
    c.quit().await.unwrap();
    shutdown.trigger();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_falls_back_to_tcp_when_our_server_has_blast_off() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("f.bin");
    std::fs::write(&src, random_bytes(3 << 20, 4)).unwrap();
    let (addr, shutdown) = serve(root.path(), false).await;
    let mut c = Client::connect(&addr.to_string(), "anonymous", "x", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(!c.features().has("BLAST"));
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("f.copy");
    let s = c
        .download(
            "/f.bin",
            &dst,
            &udp(BlastOpts::default()),
            Arc::new(Progress::new()),
        )
        .await
        .unwrap();
    assert_eq!(s.transport, "tcp");
    assert!(
        s.notices.iter().any(|n| n.contains("no BLAST in FEAT")),
        "{s:?}"
    );
    assert!(s.verified);
    assert_eq!(sha256(&dst), sha256(&src));
    shutdown.trigger();
}

/// A globus-gridftp-server on a free loopback port serving `dir`; killed (by PID) and reaped on drop.
struct Globus(Child);

impl Drop for Globus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn globus(dir: &Path) -> Option<(Globus, u16)> {
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
            .arg(dir.join("server.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some((Globus(child), port));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_falls_back_to_tcp_against_globus() {
    if !Path::new(GLOBUS).exists() {
        eprintln!("SKIPPED udp_falls_back_to_tcp_against_globus: {GLOBUS} is not installed");
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("drsftp-blast-globus-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let src = dir.path().join("src.bin");
    std::fs::write(&src, random_bytes((5 << 20) + 77, 5)).unwrap();
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o666)).unwrap();
    let Some((_g, port)) = globus(dir.path()) else {
        panic!("globus-gridftp-server did not start");
    };
    let mut c = Client::connect(
        &format!("127.0.0.1:{port}"),
        "anonymous",
        "x",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert!(!c.features().has("BLAST"), "Globus does not list BLAST");
    let dst = dir.path().join("dst.bin");
    let remote = src.display().to_string();
    let s = c
        .download(
            &remote,
            &dst,
            &udp(BlastOpts::default()),
            Arc::new(Progress::new()),
        )
        .await
        .expect("fallback download");
    assert_eq!(s.transport, "tcp");
    assert!(
        s.notices.iter().any(|n| n.contains("no BLAST in FEAT")),
        "{s:?}"
    );
    assert!(s.verified, "{s:?}");
    assert_eq!(sha256(&dst), sha256(&src));
    let up = dir.path().join("up.bin");
    let s = c
        .upload(
            &src,
            &up.display().to_string(),
            &udp(BlastOpts::default()),
            Arc::new(Progress::new()),
        )
        .await
        .expect("fallback upload");
    assert_eq!(s.transport, "tcp");
    assert!(s.verified, "{s:?}");
    assert_eq!(sha256(&up), sha256(&src));
    let _ = c.quit().await;
    // Let the per-connection child finish before the parent is killed.
    tokio::time::sleep(Duration::from_millis(300)).await;
}
