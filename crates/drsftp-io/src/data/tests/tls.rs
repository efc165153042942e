//! MODE E under `PROT P`: the engine on TLS connections (server role on the sending side, as when a server sends a
//! RETR and connected out itself; client role resuming one shared session store), with in-band SBUF under DRS, and
//! a cleartext peer on a protected data connection, which must get nothing of the file.

use std::sync::Arc;
use std::time::Duration;

use drsftp_tune::BufferPolicy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::data::send_mode_e;
use crate::tls::records_tests::test_pki as pki;
use crate::tls::{self};

/// `n` connection pairs, the sender's end TLS server, the receiver's TLS client (handshakes concurrent).
async fn tls_pairs(n: usize, opts: &DataOpts) -> (Vec<MaybeTls>, Vec<MaybeTls>) {
    let (tx, rx) = pairs(n, opts).await;
    // The server's side never holds a client config (only `SSCN ON` puts one there).
    let server = DataOpts {
        tls_client: None,
        ..opts.clone()
    };
    let (a, b) = tokio::join!(
        tls::protect_data_all(tx, true, &server),
        tls::protect_client_all(rx, opts)
    );
    (a.unwrap(), b.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn mode_e_runs_on_tls_connections_with_inband_drs() {
    let (server, client) = pki();
    let opts = DataOpts {
        buffer: BufferPolicy::Drs,
        inband_sbuf: true,
        drs_max: 8 << 20,
        tls_server: Some(server),
        tls_client: Some(client),
        ..DataOpts::default()
    };
    // A control connection first: full server config (it sends tickets) and a client that reads past them.
    let (a, b) = pairs(1, &opts).await;
    let server = opts.tls_server.clone().unwrap();
    let (mut ctl_s, ctl_c) = tokio::join!(
        tls::accept(&server, a.into_iter().next().unwrap()),
        opts.tls_client
            .as_ref()
            .unwrap()
            .connect(b.into_iter().next().unwrap())
    );
    let mut ctl_c = ctl_c.unwrap();
    ctl_s
        .as_mut()
        .unwrap()
        .write_all(b"220 ready\r\n")
        .await
        .unwrap();
    ctl_s.as_mut().unwrap().flush().await.unwrap();
    let mut line = [0u8; 11];
    ctl_c.read_exact(&mut line).await.unwrap();
    let (tx, rx) = tls_pairs(8, &opts).await;
    assert!(tx.iter().chain(&rx).all(MaybeTls::is_tls));
    let resumed = rx
        .iter()
        .filter(|s| match s {
            MaybeTls::Records(r) => r.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
            _ => false,
        })
        .count();
    assert_eq!(
        resumed, 8,
        "every data connection resumes the first session"
    );
    let data = random(24 << 20, 71);
    let (s, r) = mode_e_copy(tx, rx, &data, &opts).await;
    assert_eq!((s.streams, r.streams), (8, 8));
    assert!(
        r.peak_buffer > 0,
        "DRS gauges read the TCP socket beneath TLS"
    );
    // EOD, not close, ended every connection: all come back, still TLS, and carry a second transfer.
    assert_eq!((s.reusable.len(), r.reusable.len()), (8, 8));
    assert!(s.reusable.iter().chain(&r.reusable).all(MaybeTls::is_tls));
    let data2 = random(3 << 20, 72);
    mode_e_copy(s.reusable, r.reusable, &data2, &opts).await;
}

/// A TLS sender reads each block from disk straight into its records' slots (one `preadv` per block) and seals
/// it there: stream mode and MODE E with and without in-band SBUF, sizes that end mid-record and mid-block, the
/// bytes and the CRC32C both ends compute equal to the file's.
#[tokio::test(flavor = "multi_thread")]
async fn blocks_read_into_record_slots_arrive_whole() {
    use std::io::Write;
    let (server, client) = pki();
    let base = DataOpts {
        tls_server: Some(server),
        tls_client: Some(client),
        crc32c: true,
        ..DataOpts::default()
    };
    for (size, streams, inband) in [
        ((3 << 20) + 12_345, 1, false),
        (17, 1, false),
        ((5 << 20) + 16_367, 3, true),
        ((2 << 20) + 1, 2, false),
    ] {
        let data = random(size, size as u64);
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&data).unwrap();
        let src: Arc<dyn drsftp_storage::FileHandle> = Arc::new(DiskFile(f));
        let want = crc32c::crc32c(&data);
        let opts = DataOpts {
            inband_sbuf: inband,
            ..base.clone()
        };
        let (tx, rx) = tls_pairs(streams, &opts).await;
        assert!(tx.iter().all(|s| matches!(s, MaybeTls::Records(_))));
        let dst = MemFile::empty();
        let (s, r) = if streams == 1 && !inband {
            let (ptx, prx) = (Arc::new(Progress::new()), Arc::new(Progress::new()));
            let (mut tx, mut rx) = (tx, rx);
            tokio::try_join!(
                crate::data::send_stream(tx.pop().unwrap(), src, 0..u64::MAX, &opts, ptx),
                crate::data::recv_stream(rx.pop().unwrap(), dst.clone(), 0, &opts, prx),
            )
            .expect("stream-mode transfer")
        } else {
            mode_e(
                tx,
                queued(rx),
                src,
                dst.clone(),
                vec![0..u64::MAX],
                0,
                0,
                &opts,
            )
            .await
        };
        assert!(dst.bytes() == data, "{size} bytes over {streams} stream(s)");
        assert_eq!(s.bytes, size as u64);
        assert_eq!(s.crc32c, Some(want), "sender's CRC32C of {size} bytes");
        assert_eq!(r.crc32c, Some(want), "receiver's CRC32C of {size} bytes");
    }
}

/// A cleartext peer on a data connection the server protects: the handshake fails, the engine never runs, and
/// what the peer reads holds none of the file (a TLS alert at most).
#[tokio::test(flavor = "multi_thread")]
async fn cleartext_peer_on_a_protected_connection_gets_nothing() {
    let (server, _) = pki();
    let opts = DataOpts {
        tls_server: Some(server),
        ..DataOpts::default()
    };
    let marker = b"MARKER-mode-e-tls-0123456789".repeat(40_000);
    let (tx, mut rx) = pairs(1, &opts).await;
    let sender = tokio::spawn({
        let (opts, marker) = (opts.clone(), marker.clone());
        async move {
            let socks = tls::protect_data_all(tx, true, &opts).await?;
            send_mode_e(
                socks,
                MemFile::new(marker),
                vec![0..u64::MAX],
                0,
                &opts,
                Arc::new(Progress::new()),
            )
            .await
        }
    });
    let mut peer = rx.pop().unwrap();
    // What a cleartext MODE E client would say, then read whatever comes.
    peer.write_all(b"USER anonymous\r\n").await.unwrap();
    let mut got = vec![];
    let _ = tokio::time::timeout(Duration::from_secs(10), peer.read_to_end(&mut got)).await;
    let r = tokio::time::timeout(Duration::from_secs(10), sender)
        .await
        .unwrap()
        .unwrap();
    assert!(r.is_err(), "the transfer ran over a cleartext peer");
    assert!(got.len() < 64, "the peer read {} bytes", got.len());
    assert!(!got.windows(6).any(|w| w == b"MARKER"));
}

/// `SSCN ON <pin>`: a server acting as TLS client accepts only the pinned certificate; another one (someone else
/// answering the peer's address) fails the handshake, so no data connection comes up.
#[tokio::test(flavor = "multi_thread")]
async fn a_pinned_tls_client_refuses_another_certificate() {
    let (server, _) = pki();
    let (_, other) = pki();
    let opts = DataOpts {
        tls_server: Some(server),
        ..DataOpts::default()
    };
    let (tx, rx) = pairs(2, &opts).await;
    let wrong = DataOpts {
        tls_client: Some(other),
        ..DataOpts::default()
    };
    let (a, b) = tokio::join!(
        tls::protect_data_all(tx, true, &opts),
        tls::protect_data_all(rx, true, &wrong)
    );
    assert!(
        b.is_err(),
        "a handshake with an unpinned certificate succeeded"
    );
    assert!(a.is_err());
}
