//! The UDP blast channel end to end on loopback: the drsftp client against the drsftp server downloads and uploads
//! over `--transport udp` (SHA-256 equal, CKSM verified, the summary says `udp`), a partial (ERET) download, hostile
//! datagrams injected at the client's UDP port during a download (counted as rejected, file still exact), and the
//! fallback to TCP against a server without BLAST: ours with blast disabled, and Debian's globus-gridftp-server
//! (skipped with a printed reason when it is not installed; killed by PID).

use std::net::UdpSocket;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use drsftp_io::blast::BlastOpts;
use drsftp_io::client::{ClientOptions, Partial};
use drsftp_io::data::Progress;
use drsftp_testkit::data::{random_bytes, sha256_file};
use drsftp_testkit::globus;
use drsftp_testkit::server::{fs_params, login, TestServer};

fn udp(opts: BlastOpts) -> ClientOptions {
    ClientOptions {
        timeout: Duration::from_secs(60),
        blast: Some(opts),
        ..ClientOptions::default()
    }
}

async fn serve(root: &Path, blast: bool) -> TestServer {
    let mut params = fs_params(root);
    params.session.blast = blast;
    TestServer::start(params).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_download_upload_and_partial_against_drsftp_serve() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("big.bin");
    std::fs::write(&src, random_bytes((24 << 20) + 4321, 1)).unwrap();
    let srv = serve(root.path(), true).await;
    let mut c = srv.login().await;
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
    assert_eq!(sha256_file(&dst), sha256_file(&src));
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
    assert_eq!(sha256_file(&root.path().join("up.bin")), sha256_file(&up));
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
    drop(srv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_datagrams_at_the_clients_udp_port_are_counted() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("f.bin");
    std::fs::write(&src, random_bytes(24 << 20, 3)).unwrap();
    let srv = serve(root.path(), true).await;
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
    let mut c = srv.login().await;
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
    assert_eq!(sha256_file(&dst), sha256_file(&src));
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
    drop(srv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_falls_back_to_tcp_when_our_server_has_blast_off() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("f.bin");
    std::fs::write(&src, random_bytes(3 << 20, 4)).unwrap();
    let srv = serve(root.path(), false).await;
    let mut c = srv.login().await;
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
    assert_eq!(sha256_file(&dst), sha256_file(&src));
    drop(srv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_falls_back_to_tcp_against_globus() {
    let Some((dir, g)) = globus::start_in_tempdir(
        "udp_falls_back_to_tcp_against_globus",
        "drsftp-blast-globus-",
        &[],
    ) else {
        return;
    };
    let src = dir.path().join("src.bin");
    std::fs::write(&src, random_bytes((5 << 20) + 77, 5)).unwrap();
    drsftp_testkit::data::chmod(&src, 0o666);
    let mut c = login(g.authority()).await;
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
    assert_eq!(sha256_file(&dst), sha256_file(&src));
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
    assert_eq!(sha256_file(&up), sha256_file(&src));
    let _ = c.quit().await;
    // Let the per-connection child finish before the parent is killed.
    tokio::time::sleep(Duration::from_millis(300)).await;
}
