//! A raw FTP control connection for tests that must do what real clients would not (hostile commands, SPOR to
//! hand-made receivers, markers read one by one): send a line, read a whole reply. Also a data connection made
//! from a chosen loopback address, which plays another host.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::timeout;

/// One control connection.
pub struct Ctl {
    rd: BufReader<OwnedReadHalf>,
    wr: OwnedWriteHalf,
}

impl Ctl {
    /// Connected to `addr`, greeting read, nothing sent.
    pub async fn connect(addr: SocketAddr) -> Ctl {
        Ctl::over(TcpStream::connect(addr).await.expect("control connect")).await
    }

    /// Over an open connection, greeting (`220`) read.
    pub async fn over(s: TcpStream) -> Ctl {
        let (rd, wr) = s.into_split();
        let mut c = Ctl {
            rd: BufReader::new(rd),
            wr,
        };
        let hello = c.reply().await;
        assert!(hello.starts_with("220"), "greeting: {hello}");
        c
    }

    /// Anonymous login at `addr`, then `TYPE I`.
    pub async fn login(addr: SocketAddr) -> Ctl {
        Ctl::login_as(addr, "anonymous", "x").await
    }

    /// Login as `user`/`pass` at `addr`, then `TYPE I`.
    pub async fn login_as(addr: SocketAddr, user: &str, pass: &str) -> Ctl {
        let mut c = Ctl::connect(addr).await;
        c.cmd(&format!("USER {user}")).await;
        let r = c.cmd(&format!("PASS {pass}")).await;
        assert!(r.starts_with("230"), "login: {r}");
        assert!(c.cmd("TYPE I").await.starts_with("200"));
        c
    }

    /// The next complete reply (all lines of a multi-line one). Panics after 30 s or on a closed connection.
    pub async fn reply(&mut self) -> String {
        self.try_reply().await.expect("a reply")
    }

    /// The next complete reply, or what was read before the connection closed.
    pub async fn try_reply(&mut self) -> Result<String, String> {
        let mut all = String::new();
        loop {
            let mut line = String::new();
            let n = timeout(Duration::from_secs(30), self.rd.read_line(&mut line))
                .await
                .expect("reply within 30 s")
                .unwrap_or(0);
            if n == 0 {
                return Err(format!("control connection closed after {all:?}"));
            }
            all.push_str(&line);
            let b = line.as_bytes();
            if b.len() >= 4 && b[..3].iter().all(u8::is_ascii_digit) && b[3] == b' ' {
                return Ok(all);
            }
        }
    }

    /// The next reply that is not a `111`/`112` marker.
    pub async fn final_reply(&mut self) -> String {
        loop {
            let r = self.reply().await;
            if !r.starts_with("111") && !r.starts_with("112") {
                return r;
            }
        }
    }

    /// Sends one command line.
    pub async fn send(&mut self, line: &str) {
        self.wr
            .write_all(format!("{line}\r\n").as_bytes())
            .await
            .unwrap();
    }

    /// Sends a command and reads its reply.
    pub async fn cmd(&mut self, line: &str) -> String {
        self.send(line).await;
        self.reply().await
    }

    /// `PASV`: the address it names.
    pub async fn pasv(&mut self) -> SocketAddr {
        let r = self.cmd("PASV").await;
        let inner = r
            .split('(')
            .nth(1)
            .and_then(|s| s.split(')').next())
            .unwrap_or_else(|| panic!("PASV: {r}"));
        host_port(inner).unwrap_or_else(|| panic!("PASV: {r}"))
    }

    /// `SPAS`: the addresses it names, in order.
    pub async fn spas(&mut self) -> Vec<SocketAddr> {
        let r = self.cmd("SPAS").await;
        assert!(r.starts_with("229-"), "SPAS: {r}");
        r.lines()
            .filter(|l| l.starts_with(' '))
            .map(|l| host_port(l.trim()).unwrap_or_else(|| panic!("SPAS line {l:?}")))
            .collect()
    }
}

/// `h1,h2,h3,h4,p1,p2` as an address.
pub fn host_port(s: &str) -> Option<SocketAddr> {
    let n: Vec<u16> = s
        .split(',')
        .map(|x| x.trim().parse().ok())
        .collect::<Option<_>>()?;
    let [a, b, c, d, p1, p2] = n[..] else {
        return None;
    };
    let ip = format!("{a}.{b}.{c}.{d}").parse().ok()?;
    Some(SocketAddr::new(ip, p1 * 256 + p2))
}

/// `addr` in PORT/SPOR syntax.
pub fn port_arg(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(v4) => v4.octets(),
        std::net::IpAddr::V6(_) => panic!("PORT needs IPv4"),
    };
    let p = addr.port();
    format!(
        "{},{},{},{},{},{}",
        ip[0],
        ip[1],
        ip[2],
        ip[3],
        p >> 8,
        p & 0xff
    )
}

/// A data connection to `to` from the address `from` (a second loopback address plays the other host).
pub async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(format!("{from}:0").parse().unwrap()).unwrap();
    s.connect(to).await.unwrap()
}
