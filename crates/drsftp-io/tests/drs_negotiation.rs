//! DRS negotiation end to end on loopback (docs/drs.md §4.3): the drsftp client with `BufferPolicy::Drs` against
//! a drsftp server negotiates (`OPTS DRS Inband=1;` after FEAT lists `DRS`) and moves 64 MiB in MODE E over two
//! streams with in-band SBUF allowed, then turns DRS off again for a transfer that does not ask; against Debian's
//! globus-gridftp-server (skipped with a printed reason when it is not installed) the same client never sends
//! `OPTS DRS` and the transfer still works. A recording proxy on the control connection shows what went over it.

use std::sync::Arc;
use std::time::Duration;

use drsftp_io::client::{Client, ClientOptions, TransferMode};
use drsftp_io::data::Progress;
use drsftp_tune::BufferPolicy;

mod common;
use common::proxy;
use drsftp_testkit::data::{chmod, random_bytes, sha256_file};
use drsftp_testkit::globus;
use drsftp_testkit::server::{fs_params, login, TestServer};

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
    let mut params = fs_params(root.path());
    params.data.buffer = BufferPolicy::Drs;
    let srv = TestServer::start(params).await;
    let (via, wire) = proxy(srv.addr).await;
    let mut c = login(via).await;
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
    assert_eq!(sha256_file(&dst), sha256_file(&src));
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
    assert_eq!(sha256_file(&root.path().join("up.bin")), sha256_file(&up));
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
    assert_eq!(sha256_file(&dst2), sha256_file(&src));
    c.quit().await.unwrap();
    let _ = srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn globus_server_never_sees_opts_drs() {
    let Some((dir, g)) =
        globus::start_in_tempdir("globus_server_never_sees_opts_drs", "drsftp-drs-test-", &[])
    else {
        return;
    };
    let src = dir.path().join("src.bin");
    std::fs::write(&src, random_bytes(8 << 20, 6)).unwrap();
    chmod(&src, 0o644);
    let (via, wire) = proxy(g.authority().parse().unwrap()).await;
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
        assert_eq!(sha256_file(&dst), sha256_file(&src));
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
