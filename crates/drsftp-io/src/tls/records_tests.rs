//! [`Records`] against rustls' own buffered implementation (tokio-rustls) as the peer: data both ways, session
//! tickets carried and used, a peer's KeyUpdate mid-transfer (and ours in answer), and a TCP close without
//! close_notify, which must be an error rather than a short read.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// A self-signed certificate for 127.0.0.1: the server configuration and a client pinned to it.
pub(crate) fn test_pki() -> (Arc<rustls::ServerConfig>, TlsClient) {
    let (server, client, _) = pki_with_digest();
    (server, client)
}

/// [`test_pki`] and the certificate's SHA-256.
fn pki_with_digest() -> (Arc<rustls::ServerConfig>, TlsClient, [u8; 32]) {
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    let server = server_config(&cert, &key).unwrap();
    let digest = fingerprint(ck.cert.der());
    let client = TlsClient::new(
        client_config(&Trust::Fingerprint(digest)).unwrap(),
        "127.0.0.1",
    );
    (server, client.unwrap(), digest)
}

async fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (c, a) = tokio::join!(TcpStream::connect(l.local_addr().unwrap()), l.accept());
    (c.unwrap(), a.unwrap().0)
}

fn data(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| {
            (i as u8)
                .wrapping_mul(31)
                .wrapping_add(seed ^ (i >> 12) as u8)
        })
        .collect()
}

/// The buffered rustls server connection under a `MaybeTls::Tls`.
fn rustls_server(s: &mut MaybeTls) -> &mut rustls::ServerConnection {
    match s {
        MaybeTls::Tls(t) => match t.as_mut() {
            tokio_rustls::TlsStream::Server(s) => s.get_mut().1,
            tokio_rustls::TlsStream::Client(_) => panic!("client"),
        },
        _ => panic!("not a buffered TLS stream"),
    }
}

/// A rustls server that sends, asking for a key update every 1 MiB; our client reads all of it, then answers
/// (after its own KeyUpdate, which the request obliges it to send), and the peer reads the answer under the new key.
#[tokio::test(flavor = "multi_thread")]
async fn key_updates_mid_transfer_both_ways() {
    let (server, client) = test_pki();
    let (c, s) = tcp_pair().await;
    let (srv, cli) = tokio::join!(accept(&server, s), client.connect_data(c));
    let (mut srv, mut cli) = (srv.unwrap(), cli.unwrap());
    assert!(matches!(cli, MaybeTls::Records(_)));
    let payload = data(8 << 20, 3);
    let sender = tokio::spawn(async move {
        for piece in payload.chunks(1 << 20) {
            srv.write_all(piece).await.unwrap();
            rustls_server(&mut srv).refresh_traffic_keys().unwrap();
        }
        srv.flush().await.unwrap();
        let mut answer = [0u8; 2];
        srv.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"ok");
        srv.shutdown().await.unwrap();
        (payload, srv)
    });
    let mut got = vec![0u8; 8 << 20];
    cli.read_exact(&mut got).await.unwrap();
    cli.write_all(b"ok").await.unwrap();
    cli.flush().await.unwrap();
    let mut rest = vec![];
    cli.read_to_end(&mut rest).await.unwrap();
    let (payload, _srv) = sender.await.unwrap();
    assert!(got == payload, "data differs after key updates");
    assert!(rest.is_empty());
    let MaybeTls::Records(r) = &cli else {
        unreachable!()
    };
    assert!(
        r.rx_seq() < 100,
        "the receive key changed with each update (sequence {} under the last)",
        r.rx_seq()
    );
}

/// A TCP FIN without close_notify after part of the data: the reader gets the data, then `UnexpectedEof`, never
/// a clean end that would pass for a complete (short) file.
#[tokio::test(flavor = "multi_thread")]
async fn truncation_without_close_notify_is_an_error() {
    let (server, client) = test_pki();
    let (c, s) = tcp_pair().await;
    let (srv, cli) = tokio::join!(accept(&server, s), client.connect_data(c));
    let (mut srv, mut cli) = (srv.unwrap(), cli.unwrap());
    let payload = data(1 << 20, 5);
    srv.write_all(&payload).await.unwrap();
    srv.flush().await.unwrap();
    // An attacker (or a crash) ends the TCP connection without TLS' close_notify.
    match &mut srv {
        MaybeTls::Tls(t) => t.get_mut().0.get_mut().shutdown().await.unwrap(),
        _ => unreachable!(),
    }
    let mut got = vec![];
    let e = cli.read_to_end(&mut got).await.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
    assert!(got == payload, "the data before the truncation arrived");
    // And the same through our own sender: a clean shutdown is a clean end.
    let (c, s) = tcp_pair().await;
    let opts = crate::data::DataOpts {
        tls_server: Some(server.clone()),
        ..Default::default()
    };
    let (srv, cli) = tokio::join!(protect_server(s, true, &opts), client.connect_data(c));
    let (mut srv, mut cli) = (srv.unwrap(), cli.unwrap());
    assert!(matches!(srv, MaybeTls::Records(_)));
    srv.write_all(&payload).await.unwrap();
    srv.shutdown().await.unwrap();
    let mut got = vec![];
    cli.read_to_end(&mut got).await.unwrap();
    assert!(got == payload);
}

/// A record altered on the wire fails authentication: the reader gets an error and none of its bytes.
#[tokio::test(flavor = "multi_thread")]
async fn a_tampered_record_is_fatal() {
    let (server, client) = test_pki();
    // client <-> proxy <-> server; the proxy flips one bit once the handshake is done.
    let (c, p1) = tcp_pair().await;
    let (p2, s) = tcp_pair().await;
    let (cfg, sock_s) = (server.clone(), s);
    let srv = tokio::spawn(async move {
        let mut srv = accept(&cfg, sock_s).await.unwrap();
        srv.write_all(&[b'A'; 4000]).await.unwrap();
        srv.flush().await.unwrap();
        // Holds the connection open until the client has seen the bad record.
        let mut sink = [0u8; 16];
        let _ = srv.read(&mut sink).await;
    });
    let proxy = tokio::spawn(async move {
        let (mut p1, mut p2) = (p1, p2);
        let (mut r1, mut w1) = p1.split();
        let (mut r2, mut w2) = p2.split();
        let up = tokio::io::copy(&mut r1, &mut w2);
        let down = async {
            let mut buf = vec![0u8; 65536];
            loop {
                let n = r2.read(&mut buf).await?;
                if n == 0 {
                    return io::Result::Ok(());
                }
                // The application record is the last thing the server sends: flip its last byte (the tag).
                if n > 4000 {
                    buf[n - 1] ^= 1;
                }
                w1.write_all(&buf[..n]).await?;
            }
        };
        let _ = tokio::join!(up, down);
    });
    let mut cli = client.connect_data(c).await.unwrap();
    let mut got = vec![];
    let r = cli.read_to_end(&mut got).await;
    assert!(r.is_err(), "a tampered record was accepted");
    assert!(
        got.is_empty(),
        "{} bytes of a bad record were returned",
        got.len()
    );
    srv.abort();
    proxy.abort();
}

/// Tickets a server sends on a data connection reach the client's store through [`Records`] (rustls' kernel
/// API), and the next connection resumes with one; a parallel batch of 12 all complete, resumed or not.
#[tokio::test(flavor = "multi_thread")]
async fn tickets_on_data_connections_resume_later_ones() {
    let (server, client) = test_pki();
    let (c, s) = tcp_pair().await;
    let (srv, cli) = tokio::join!(Records::accept(server.clone(), s), client.connect_data(c));
    let (mut srv, mut cli) = (srv.unwrap(), cli.unwrap());
    let MaybeTls::Records(r) = &cli else {
        unreachable!()
    };
    assert_eq!(r.handshake_kind(), Some(rustls::HandshakeKind::Full));
    // The tickets come after the handshake: the client takes them in while reading.
    srv.write_all(b"hello").await.unwrap();
    srv.shutdown().await.unwrap();
    let mut got = vec![];
    cli.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"hello");
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..12 {
        let (c, s) = tcp_pair().await;
        let (server, client) = (server.clone(), client.clone());
        set.spawn(async move {
            let (srv, cli) = tokio::join!(Records::accept(server, s), client.connect_data(c));
            let (mut srv, cli) = (srv.unwrap(), cli.unwrap());
            srv.write_all(b"x").await.unwrap();
            srv.shutdown().await.unwrap();
            let MaybeTls::Records(mut r) = cli else {
                unreachable!()
            };
            let mut got = vec![];
            r.read_to_end(&mut got).await.unwrap();
            assert_eq!(got, b"x");
            r.handshake_kind()
        });
    }
    let mut resumed = 0;
    while let Some(k) = set.join_next().await {
        resumed += usize::from(k.unwrap() == Some(rustls::HandshakeKind::Resumed));
    }
    // The first connection left 8 tickets (`send_tls13_tickets`), each good for one resumption.
    assert!(resumed >= 8, "{resumed} of 12 resumed");
}

/// Every suite and version ring's provider offers, against rustls' buffered server: the client is limited to
/// one suite at a time so the server must pick it. 1 MiB down (with close_notify), an answer up.
#[tokio::test(flavor = "multi_thread")]
async fn every_suite_and_version_interoperates_with_rustls() {
    use rustls::CipherSuite as S;
    let (server, _, digest) = pki_with_digest();
    let cases = [
        (S::TLS13_AES_128_GCM_SHA256, &rustls::version::TLS13),
        (S::TLS13_AES_256_GCM_SHA384, &rustls::version::TLS13),
        (S::TLS13_CHACHA20_POLY1305_SHA256, &rustls::version::TLS13),
        (
            S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            &rustls::version::TLS12,
        ),
        (
            S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            &rustls::version::TLS12,
        ),
        (
            S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            &rustls::version::TLS12,
        ),
    ];
    for (suite, version) in cases {
        let mut p = provider().as_ref().clone();
        p.cipher_suites.retain(|s| s.suite() == suite);
        let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(p))
            .with_protocol_versions(&[version])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned {
                digest,
                provider: provider(),
            }))
            .with_no_client_auth();
        cfg.enable_secret_extraction = true;
        let client = TlsClient::new(Arc::new(cfg), "127.0.0.1").unwrap();
        let (c, s) = tcp_pair().await;
        let (srv, cli) = tokio::join!(accept(&server, s), client.connect_data(c));
        let (mut srv, mut cli) = (srv.unwrap(), cli.unwrap());
        assert_eq!(
            rustls_server(&mut srv)
                .negotiated_cipher_suite()
                .map(|s| s.suite()),
            Some(suite)
        );
        let payload = data(1 << 20, 9);
        let sender = tokio::spawn(async move {
            srv.write_all(&payload).await.unwrap();
            srv.flush().await.unwrap();
            let mut answer = [0u8; 2];
            srv.read_exact(&mut answer).await.unwrap();
            srv.shutdown().await.unwrap();
            (payload, answer)
        });
        let mut got = vec![0u8; 1 << 20];
        cli.read_exact(&mut got).await.unwrap();
        cli.write_all(b"ok").await.unwrap();
        cli.flush().await.unwrap();
        let mut rest = vec![];
        cli.read_to_end(&mut rest).await.unwrap();
        let (payload, answer) = sender.await.unwrap();
        assert!(got == payload, "{suite:?}: data differs");
        assert_eq!(&answer, b"ok", "{suite:?}");
    }
}
