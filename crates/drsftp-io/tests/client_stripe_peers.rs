//! Security of striped downloads: the client's stripe listeners take data connections only from the stripes the
//! server named in its SPAS reply (and the control peer). A scripted striped server on 127.0.0.1 names movers
//! 127.0.0.2 and 127.0.0.3; an intruder on 127.0.0.9 connects to a stripe listener first and offers forged data
//! with its own EOF. It must be closed unread, and the download must complete with exactly the movers' bytes,
//! each stripe counted against its own EOF.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use drsftp_io::client::{Client, ClientOptions};
use drsftp_io::data::Progress;
use drsftp_testkit::data::random_bytes;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

const LEN: usize = 300_000;

/// A MODE E block header: descriptor, count, offset (the EOD count with EOF).
fn header(desc: u8, count: u64, offset: u64) -> Vec<u8> {
    let mut h = vec![desc];
    h.extend_from_slice(&count.to_be_bytes());
    h.extend_from_slice(&offset.to_be_bytes());
    h
}

/// Connects to `to` from `from` and sends `data` at `offset` as one block, then EOF|EOD announcing one EOD.
async fn send_stripe(from: Ipv4Addr, to: SocketAddr, offset: u64, data: &[u8]) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(SocketAddr::new(IpAddr::V4(from), 0)).unwrap();
    let mut c = s.connect(to).await.unwrap();
    let mut b = header(0, data.len() as u64, offset);
    b.extend_from_slice(data);
    b.extend(header(0x48, 0, 1));
    // The client may have closed an intruder's connection already: a failed write is what the test wants then.
    let _ = c.write_all(&b).await;
    c
}

fn parse_host_port(s: &str) -> SocketAddr {
    let v: Vec<u8> = s.split(',').map(|n| n.parse().unwrap()).collect();
    SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(v[0], v[1], v[2], v[3])),
        (v[4] as u16) << 8 | v[5] as u16,
    )
}

/// The scripted frontend: answers login, FEAT and set-up, SPAS with two movers, then on RETR runs the intruder
/// and both movers. Returns whether the intruder's connection was closed without its data being taken.
async fn frontend(l: TcpListener, data: Arc<Vec<u8>>) -> bool {
    let (c, _) = l.accept().await.unwrap();
    let (r, mut w) = c.into_split();
    let mut r = BufReader::new(r);
    w.write_all(b"220 scripted striped frontend\r\n")
        .await
        .unwrap();
    let mut spor: Vec<SocketAddr> = vec![];
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await.unwrap() == 0 {
            return false;
        }
        let cmd = line.trim_end().to_string();
        let verb = cmd.split(' ').next().unwrap().to_ascii_uppercase();
        let reply: String = match verb.as_str() {
            "USER" => "230 in\r\n".into(),
            "FEAT" => "211-x\r\n PARALLEL\r\n SPAS\r\n SPOR\r\n211 End\r\n".into(),
            "TYPE" | "MODE" | "OPTS" => "200 ok\r\n".into(),
            "SPAS" => {
                "229-Entering Striped Passive Mode\r\n 127,0,0,2,4,1\r\n 127,0,0,3,4,1\r\n229 End\r\n"
                    .into()
            }
            "SPOR" => {
                spor = cmd.split(' ').skip(1).map(parse_host_port).collect();
                "200 PORT Command successful.\r\n".into()
            }
            "RETR" => {
                assert_eq!(spor.len(), 2, "SPOR names one listener per stripe");
                w.write_all(b"150 Beginning transfer.\r\n").await.unwrap();
                // The intruder first, with forged bytes and an EOF of its own, on stripe 0's listener.
                let forged = vec![0xEEu8; LEN / 2];
                let mut intruder =
                    send_stripe(Ipv4Addr::new(127, 0, 0, 9), spor[0], 0, &forged).await;
                let mut buf = [0u8; 16];
                let closed = matches!(
                    tokio::time::timeout(Duration::from_secs(5), intruder.read(&mut buf)).await,
                    Ok(Ok(0) | Err(_))
                );
                let half = LEN / 2;
                let a = send_stripe(Ipv4Addr::new(127, 0, 0, 2), spor[0], 0, &data[..half]);
                let b = send_stripe(Ipv4Addr::new(127, 0, 0, 3), spor[1], half as u64, &data[half..]);
                let (_a, _b) = tokio::join!(a, b);
                tokio::time::sleep(Duration::from_millis(200)).await;
                w.write_all(b"226 Transfer Complete.\r\n").await.unwrap();
                // QUIT next.
                line.clear();
                let _ = r.read_line(&mut line).await;
                let _ = w.write_all(b"221 bye\r\n").await;
                return closed;
            }
            _ => "500 not here\r\n".into(),
        };
        w.write_all(reply.as_bytes()).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_listeners_refuse_hosts_the_server_did_not_name() {
    let data = Arc::new(random_bytes(LEN, 7));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let server = tokio::spawn(frontend(l, data.clone()));
    let mut c = Client::connect(
        &addr.to_string(),
        "anonymous",
        "x@",
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("f");
    let o = ClientOptions {
        streams: 1,
        mode_e: true,
        verify: false,
        resume: false,
        timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    };
    let s = c
        .download("/f", &dst, &o, Arc::new(Progress::new()))
        .await
        .expect("striped download from the named movers");
    c.quit().await.unwrap();
    assert!(
        server.await.unwrap(),
        "the intruder's connection was closed unread"
    );
    assert_eq!(s.stripes, vec![(LEN / 2) as u64, (LEN - LEN / 2) as u64]);
    assert_eq!(
        std::fs::read(&dst).unwrap(),
        *data,
        "only the movers' bytes landed"
    );
}
