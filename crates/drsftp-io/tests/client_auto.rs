//! The client driver against an in-process drsftp server on loopback: an upload with `-p auto` online refinement
//! (`ClientOptions::auto_streams`) whose controller adds connections mid-transfer, which the server's receiver
//! takes into the running transfer; and per-stream traces (`ClientOptions::trace`) of a 2-stream MODE E DRS
//! download, written as CSV.

use std::path::Path;
use std::sync::Arc;

use drsftp_io::client::{Client, ClientOptions, TransferMode};
use drsftp_io::data::Progress;
use drsftp_tune::{BufferPolicy, StreamAction};

mod common;
use common::eager;
use drsftp_testkit::data::{random_bytes, sha256_file};
use drsftp_testkit::server::{fs_params, TestServer};

async fn serve(root: &Path) -> (TestServer, Client) {
    let mut params = fs_params(root);
    params.data.buffer = BufferPolicy::Drs;
    let srv = TestServer::start(params).await;
    let c = srv.login().await;
    (srv, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_upload_adds_streams_mid_transfer() {
    let root = tempfile::tempdir().unwrap();
    let (srv, mut c) = serve(root.path()).await;
    let out = tempfile::tempdir().unwrap();
    let up = out.path().join("auto.bin");
    std::fs::write(&up, random_bytes(192 << 20, 9)).unwrap();
    let opts = ClientOptions {
        streams: 1,
        auto_streams: Some(eager(4)),
        trace: true,
        ..ClientOptions::default()
    };
    let s = c
        .upload(&up, "/auto.bin", &opts, Arc::new(Progress::new()))
        .await
        .expect("auto upload");
    eprintln!("{} streams, actions {:?}", s.streams, s.stream_actions);
    assert_eq!(
        s.mode,
        TransferMode::Extended,
        "auto runs MODE E even from 1 stream"
    );
    assert!(s.verified, "{s:?}");
    assert_eq!(sha256_file(&root.path().join("auto.bin")), sha256_file(&up));
    let added: u32 = s
        .stream_actions
        .iter()
        .map(|e| match e.action {
            StreamAction::Add(k) => k,
            StreamAction::Retire(_) => panic!("an eager controller never retires"),
        })
        .sum();
    assert!(added >= 1, "no stream joined in 192 MiB: {s:?}");
    // Connections that came up after the cursor ran dry carry nothing and are not counted.
    assert!(
        s.streams >= 2 && s.streams <= 1 + added as usize,
        "{}",
        s.streams
    );
    assert_eq!(s.traces.len(), s.streams);
    // The same connection still works for a plain transfer afterwards.
    let back = out.path().join("back.bin");
    let opts = ClientOptions {
        streams: 2,
        ..ClientOptions::default()
    };
    c.download("/auto.bin", &back, &opts, Arc::new(Progress::new()))
        .await
        .expect("download after the auto upload");
    assert_eq!(sha256_file(&back), sha256_file(&up));
    drop(srv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_e_drs_download_traces_both_streams() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("t.bin"), random_bytes(48 << 20, 3)).unwrap();
    let (srv, mut c) = serve(root.path()).await;
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("t.bin");
    let opts = ClientOptions {
        streams: 2,
        buffer: BufferPolicy::Drs,
        trace: true,
        ..ClientOptions::default()
    };
    let s = c
        .download("/t.bin", &dst, &opts, Arc::new(Progress::new()))
        .await
        .expect("download");
    assert_eq!(sha256_file(&dst), sha256_file(&root.path().join("t.bin")));
    assert_eq!(s.traces.len(), 2, "{:?}", s.traces);
    let mut csv = vec![];
    drsftp_io::drs::write_stream_traces_csv(&mut csv, &s.traces).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("t_s,stream,buffer_bytes,rtt_ms,bdp_bytes,bytes,mbps,rcv_wnd,rcv_ssthresh,cwnd_bytes")
    );
    let streams: Vec<&str> = lines.map(|l| l.split(',').nth(1).unwrap()).collect();
    assert!(streams.contains(&"0") && streams.contains(&"1"), "{csv}");
    drop(srv);
}

/// `-p auto`'s start choice is the library's: any client gets the measured RTT, the calibrated path profile (read
/// from the store under the server's key) and the decision of `drsftp_tune::auto_start`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_choice_reads_the_path_profile() {
    use drsftp_io::client::profile::{path_key, PathProfile, ProfileStore};
    let root = tempfile::tempdir().unwrap();
    let (srv, mut c) = serve(root.path()).await;
    let key = path_key(&srv.addr.ip().to_string(), srv.addr.port());
    let without = c
        .choose_start(&key, None, BufferPolicy::Drs)
        .await
        .expect("start without profiles");
    assert!(without.rtt > std::time::Duration::ZERO);
    assert!((1..=drsftp_io::client::AUTO_START_MAX_STREAMS).contains(&without.start.streams));
    assert!(
        without.start.reason.contains("no path profile"),
        "{without:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let store = ProfileStore::in_dir(dir.path());
    store
        .put(&PathProfile {
            loss: None,
            host_port: key.clone(),
            rtt_ms: 0.1,
            rate_bps: 9e9,
            c1: Some(73.7),
            c2: Some(0.93),
            fit_mean_rel_err: None,
            fit_max_rel_err: None,
            points: 3,
            timestamp: 1_700_000_000,
        })
        .unwrap();
    let with = c
        .choose_start(&key, Some(&store), BufferPolicy::Fixed(256 << 10))
        .await
        .expect("start with a profile");
    assert!(
        with.start
            .reason
            .contains(&format!("path profile for {key}")),
        "{with:?}"
    );
    drop(srv);
}

/// `-p auto`'s control RTT is the path's, not the server's time to answer: against a server that takes 150 ms
/// over every reply on loopback (as a loss's retransmission or a slow password check inflates a timed command),
/// the login's RTT is the kernel's minimum for the connection, far below 150 ms. Timing the login's commands (the
/// old way) gave the 150 ms, and on a 200 ms · 5 % lab path 0.8-2.7 s, which made `-p auto` open 32 streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_rtt_is_the_paths_not_the_servers_answer_time() {
    use std::time::Duration;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let lis = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = lis.local_addr().unwrap();
    let slow = Duration::from_millis(150);
    let server = tokio::spawn(async move {
        let (sock, _) = lis.accept().await.unwrap();
        let (rd, mut wr) = sock.into_split();
        wr.write_all(b"220 slow test server\r\n").await.unwrap();
        let mut lines = BufReader::new(rd).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tokio::time::sleep(slow).await;
            let verb = line.split(' ').next().unwrap_or("").to_ascii_uppercase();
            let reply: &[u8] = match verb.as_str() {
                "USER" => b"331 password please\r\n",
                "PASS" => b"230 logged in\r\n",
                "FEAT" => b"211-Features:\r\n SIZE\r\n211 End\r\n",
                "NOOP" => b"200 ok\r\n",
                "QUIT" => {
                    let _ = wr.write_all(b"221 bye\r\n").await;
                    return;
                }
                _ => b"502 not here\r\n",
            };
            if wr.write_all(reply).await.is_err() {
                return;
            }
        }
    });
    let c = Client::connect(&addr.to_string(), "u", "p", Duration::from_secs(10))
        .await
        .expect("login");
    let rtt = c.login_rtt().expect("a login RTT");
    assert!(
        rtt < Duration::from_millis(50),
        "login RTT {rtt:?} took in the server's {slow:?} answer time"
    );
    drop(c);
    server.abort();
}
