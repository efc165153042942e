//! Shared harness for the drsftp-io integration tests, what only they use: a `-p auto` controller that adds
//! streams eagerly, a recording control-channel proxy and a scripted fake FTP server. Test data, the in-process
//! drsftp server and Globus come from `drsftp_testkit`. Only loopback addresses are used.

// Every test binary compiles this module but uses only part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drsftp_io::data::AutoSender;
use drsftp_tune::AutoConfig;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

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
        gate: None,
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
