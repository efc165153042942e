//! The server's data channels against hostile peers (issue 19): a passive port accepts only the expected peer
//! (a hijacker on 127.0.0.2 neither reads a download nor injects into an upload, nor breaks the victim's
//! transfer), passive listeners and their tasks do not outlive their transfer or session, a MODE E receive
//! takes at most its negotiated connections, and stalled or never-connected transfers end with 426 after the
//! data timeout (part files removed).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_io::client::{Client, ClientOptions};
use drsftp_io::data::Progress;
use drsftp_io::server::{self, ServerParams, Shutdown};
use drsftp_proto::mode_e::Header;
use drsftp_testkit::ctl::{connect_from, Ctl};
use drsftp_testkit::data::random_bytes;
use drsftp_testkit::server::fs_params;
use drsftp_testkit::sockets::listening_on;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::timeout;

/// A server on its own loopback address `ip` (so its listeners can be counted apart from other tests').
struct Srv {
    addr: SocketAddr,
    _shutdown: Shutdown,
}

async fn start(ip: &str, params: ServerParams) -> Srv {
    let (addr, shutdown, _task) = server::spawn(format!("{ip}:0").parse().unwrap(), params)
        .await
        .expect("server");
    Srv {
        addr,
        _shutdown: shutdown,
    }
}

/// Everything `s` yields until EOF, an error or `limit` of silence.
async fn drain(s: &mut TcpStream, limit: Duration) -> Vec<u8> {
    let mut out = vec![];
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(Ok(n)) = timeout(limit, s.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

fn with_marker(len: usize) -> Vec<u8> {
    let mut d = random_bytes(len, 19);
    d[..16].copy_from_slice(b"VICTIM-MARKER-19");
    d
}

#[tokio::test]
async fn a_hijacker_on_another_address_cannot_read_a_download() {
    let dir = tempfile::tempdir().unwrap();
    let data = with_marker(1 << 20);
    std::fs::write(dir.path().join("secret"), &data).unwrap();
    let srv = start("127.0.0.1", fs_params(dir.path())).await;
    let mut c = Ctl::login(srv.addr).await;
    let port = c.pasv().await;
    // The attacker is first in the accept queue.
    let mut attacker = connect_from("127.0.0.2", port).await;
    c.send("RETR /secret").await;
    assert!(c.reply().await.starts_with("150"));
    let mut victim = connect_from("127.0.0.1", port).await;
    let (stolen, got) = tokio::join!(
        drain(&mut attacker, Duration::from_secs(3)),
        drain(&mut victim, Duration::from_secs(10))
    );
    let done = c.final_reply().await;
    assert_eq!(stolen.len(), 0, "the attacker read {} bytes", stolen.len());
    assert_eq!(got.len(), data.len(), "the victim's download");
    assert!(got == data);
    assert!(done.starts_with("226"), "{done}");
}

#[tokio::test]
async fn a_hijacker_on_another_address_cannot_inject_into_an_upload() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start("127.0.0.1", fs_params(dir.path())).await;
    let mut c = Ctl::login(srv.addr).await;
    let port = c.pasv().await;
    let mut attacker = connect_from("127.0.0.2", port).await;
    let _ = attacker.write_all(b"INJECTED BY THE ATTACKER").await;
    let _ = attacker.shutdown().await;
    c.send("STOR /up").await;
    assert!(c.reply().await.starts_with("150"));
    let data = with_marker(256 * 1024);
    let mut victim = connect_from("127.0.0.1", port).await;
    victim.write_all(&data).await.unwrap();
    victim.shutdown().await.unwrap();
    let done = c.final_reply().await;
    assert!(done.starts_with("226"), "{done}");
    let stored = std::fs::read(dir.path().join("up")).unwrap();
    assert!(
        stored == data,
        "stored {} bytes, starting {:?}",
        stored.len(),
        String::from_utf8_lossy(&stored[..stored.len().min(24)])
    );
}

async fn mode_e_upload(c: &mut Client, local: &Path, remote: &str) -> Result<(), String> {
    mode_e_upload_with(c, local, remote, 2).await
}

async fn mode_e_upload_with(
    c: &mut Client,
    local: &Path,
    remote: &str,
    streams: u32,
) -> Result<(), String> {
    let opts = ClientOptions {
        streams,
        mode_e: true,
        timeout: Duration::from_secs(15),
        ..ClientOptions::default()
    };
    match timeout(
        Duration::from_secs(20),
        c.upload(local, remote, &opts, Arc::new(Progress::new())),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("hung for 20 s".into()),
    }
}

#[tokio::test]
async fn passive_listeners_do_not_outlive_their_transfer_or_session() {
    let ip: IpAddr = "127.0.0.77".parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    std::fs::write(&src, random_bytes(64 * 1024, 7)).unwrap();
    std::fs::create_dir(dir.path().join("root")).unwrap();
    let srv = start("127.0.0.77", fs_params(&dir.path().join("root"))).await;
    assert_eq!(listening_on(ip), 1, "the control listener");
    let mut c = drsftp_testkit::server::login(srv.addr).await;
    for i in 0..100 {
        mode_e_upload(&mut c, &src, &format!("/u{i}"))
            .await
            .unwrap_or_else(|e| panic!("upload {i}: {e}"));
    }
    let during = listening_on(ip);
    c.quit().await.unwrap();
    // Sessions end asynchronously; give the server a moment.
    let t = Instant::now();
    while listening_on(ip) > 1 && t.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = listening_on(ip) - 1;
    eprintln!("100 MODE E uploads: {during} listeners during the session, {after} data listeners after QUIT");
    assert!(during <= 2, "{during} listeners during the session");
    assert_eq!(after, 0, "data listeners left after QUIT");
    // No leftover task steals a later upload's connection: 6 uploads, each in a session of its own (as
    // separate `drsftp copy` runs would be).
    let mut failed = vec![];
    for i in 0..6 {
        let mut c = drsftp_testkit::server::login(srv.addr).await;
        if let Err(e) = mode_e_upload(&mut c, &src, &format!("/v{i}")).await {
            failed.push(format!("upload {i}: {e}"));
        }
        let _ = c.quit().await;
    }
    // And in one session, growing stream counts: each upload reuses the kept connections and opens more to the
    // same passive port, where an earlier transfer's leftover accept loop would take them.
    let mut c = drsftp_testkit::server::login(srv.addr).await;
    for (i, streams) in (1..=6).enumerate() {
        if let Err(e) = mode_e_upload_with(&mut c, &src, &format!("/w{i}"), streams).await {
            failed.push(format!("upload {i} ({streams} streams, one session): {e}"));
        }
    }
    eprintln!("12 later uploads: {} failed", failed.len());
    assert!(failed.is_empty(), "{failed:?}");
}

#[tokio::test]
async fn a_mode_e_upload_takes_at_most_its_negotiated_connections() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start("127.0.0.1", fs_params(dir.path())).await;
    let mut c = Ctl::login(srv.addr).await;
    assert!(c.cmd("MODE E").await.starts_with("200"));
    assert!(c
        .cmd("OPTS RETR Parallelism=4,4,4;")
        .await
        .starts_with("200"));
    let port = c.pasv().await;
    c.send("STOR /capped").await;
    assert!(c.reply().await.starts_with("125"));
    let mut socks = vec![];
    for _ in 0..50 {
        socks.push(connect_from("127.0.0.1", port).await);
    }
    // Closed at once: EOF (or a reset) within a moment; the kept ones stay silent.
    let mut open = vec![];
    let mut closed = 0;
    for mut s in socks {
        let mut b = [0u8; 1];
        match timeout(Duration::from_millis(300), s.read(&mut b)).await {
            Ok(_) => closed += 1,
            Err(_) => open.push(s),
        }
    }
    eprintln!(
        "50 connections to a 4-stream MODE E upload: {} kept, {closed} closed",
        open.len()
    );
    assert_eq!(open.len(), 4, "kept connections");
    // The upload still completes on the kept ones.
    let data = random_bytes(100_000, 3);
    let mut w = open.remove(0);
    w.write_all(&Header::data(0, data.len() as u64).encode())
        .await
        .unwrap();
    w.write_all(&data).await.unwrap();
    w.write_all(&Header::eof(4).encode()).await.unwrap();
    w.write_all(&Header::eod().encode()).await.unwrap();
    for s in open.iter_mut() {
        s.write_all(&Header::eod().encode()).await.unwrap();
    }
    let done = c.final_reply().await;
    assert!(done.starts_with("226"), "{done}");
    assert!(std::fs::read(dir.path().join("capped")).unwrap() == data);
    assert!(c.cmd("NOOP").await.starts_with("200"));
}

fn timeout_params(root: &Path) -> ServerParams {
    let mut p = fs_params(root);
    p.session.data_timeout = Duration::from_secs(2);
    p
}

/// The transfer's final reply must come within the 2 s data timeout plus this margin.
const MARGIN: Duration = Duration::from_secs(4);

async fn ends_with_426(c: &mut Ctl, t0: Instant, what: &str) {
    let r = timeout(Duration::from_secs(15), c.final_reply())
        .await
        .unwrap_or_else(|_| panic!("{what}: no final reply in 15 s"));
    let took = t0.elapsed();
    eprintln!("{what}: {} after {took:?}", r.trim_end());
    assert!(r.starts_with("426") || r.starts_with("425"), "{what}: {r}");
    assert!(took < Duration::from_secs(2) + MARGIN, "{what}: {took:?}");
    assert!(c.cmd("NOOP").await.starts_with("200"), "{what}");
}

#[tokio::test]
async fn a_stalled_retr_ends_with_426() {
    let dir = tempfile::tempdir().unwrap();
    let f = std::fs::File::create(dir.path().join("big")).unwrap();
    f.set_len(256 << 20).unwrap();
    let srv = start("127.0.0.1", timeout_params(dir.path())).await;
    let mut c = Ctl::login(srv.addr).await;
    let port = c.pasv().await;
    c.send("RETR /big").await;
    let t0 = Instant::now();
    assert!(c.reply().await.starts_with("150"));
    let s = TcpSocket::new_v4().unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    let _never_read = s.connect(port).await.unwrap();
    ends_with_426(&mut c, t0, "stalled RETR").await;
}

#[tokio::test]
async fn a_stalled_stor_ends_with_426_and_leaves_no_part_file() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start("127.0.0.1", timeout_params(dir.path())).await;
    let mut c = Ctl::login(srv.addr).await;
    let port = c.pasv().await;
    c.send("STOR /stalled").await;
    let t0 = Instant::now();
    assert!(c.reply().await.starts_with("150"));
    let mut s = connect_from("127.0.0.1", port).await;
    s.write_all(&[7u8; 5000]).await.unwrap();
    ends_with_426(&mut c, t0, "stalled STOR").await;
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn a_never_connected_mode_e_upload_ends() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start("127.0.0.1", timeout_params(dir.path())).await;
    let mut c = Ctl::login(srv.addr).await;
    assert!(c.cmd("MODE E").await.starts_with("200"));
    let _port = c.pasv().await;
    c.send("STOR /never").await;
    let t0 = Instant::now();
    assert!(c.reply().await.starts_with("125"));
    ends_with_426(&mut c, t0, "never-connected MODE E STOR").await;
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty());
}

/// Bounce toward the server itself: a logged-in user (third-party allowed) names one of the host's own
/// non-loopback addresses as the data address. The session knew only the address the client reached
/// (127.0.0.1), so before the driver told it every interface address, `PORT <eth0 address>` was accepted and the
/// server connected to itself.
#[tokio::test]
async fn port_toward_another_of_the_servers_own_addresses_is_refused() {
    let own: Vec<IpAddr> = drsftp_sys::ifaddrs::local_addrs()
        .into_iter()
        .filter(|ip| match ip {
            IpAddr::V4(v4) => !v4.is_loopback() && !v4.is_link_local() && !v4.is_unspecified(),
            IpAddr::V6(_) => false,
        })
        .collect();
    if own.is_empty() {
        println!("SKIPPED port_toward_another_of_the_servers_own_addresses_is_refused (no IPv4 address besides loopback)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut p = fs_params(dir.path());
    let mut users = drsftp_io::server::Users::new();
    users.add_password("alice", "right").unwrap();
    p.users = Arc::new(users);
    let srv = start("127.0.0.1", p).await;
    let mut c = Ctl::connect(srv.addr).await;
    assert!(c.cmd("USER alice").await.starts_with("331"));
    assert!(c.cmd("PASS right").await.starts_with("230"));
    for ip in own {
        let o = match ip {
            IpAddr::V4(v4) => v4.octets(),
            IpAddr::V6(_) => unreachable!(),
        };
        let r = c
            .cmd(&format!("PORT {},{},{},{},195,80", o[0], o[1], o[2], o[3]))
            .await;
        assert!(
            r.starts_with("5") && r.contains("own address"),
            "PORT toward {ip}: {r}"
        );
    }
}
