//! `drsftp doctor URL`'s path probe: one plain-FTP session (blocking sockets, one TCP data connection, kernel
//! buffers) that moves data for a few seconds and reads the data socket's TCP_INFO at the end. A directory URL
//! uploads zeros to a scratch file (deleted afterwards): we are the sender, so TCP_INFO gives the retransmitted
//! bytes (the loss), the delivery rate and how long the sender was held by the peer's window or its own buffer.
//! A file URL downloads it: we are the receiver, which sees the rate and its own window but not the sender's
//! retransmissions, so no loss is reported. Bounded by time and bytes, both given by the caller.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::url::FtpUrl;

/// What the probe measured.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// `upload` (we sent) or `download` (we received).
    pub direction: &'static str,
    /// Payload bytes that arrived (upload: acknowledged by the server).
    pub bytes: u64,
    pub seconds: f64,
    /// bytes × 8 / seconds.
    pub rate_bps: f64,
    /// Upload: retransmitted / sent bytes. Download: not observable (None).
    pub loss: Option<f64>,
    /// Upload: the kernel's smoothed RTT on the data connection; download: the receiver's RTT estimate.
    pub rtt_s: Option<f64>,
    /// Upload: share of the sending time the server's receive window held the sender back.
    pub rwnd_limited: Option<f64>,
    /// Upload: share of the sending time our send buffer held the sender back.
    pub sndbuf_limited: Option<f64>,
    /// Download: our advertised window at the end, bytes.
    pub window_bytes: Option<u64>,
    /// The rate was held by a window or buffer rather than the path: it is a lower bound on the path's rate.
    pub window_limited: bool,
}

struct Ctrl {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Ctrl {
    fn reply(&mut self) -> Result<(u16, String)> {
        let mut all = String::new();
        let mut line = String::new();
        loop {
            line.clear();
            if self.r.read_line(&mut line)? == 0 {
                bail!("the server closed the control connection");
            }
            all.push_str(&line);
            let b = line.as_bytes();
            // The last line of a reply is `ddd ` (multi-line replies start `ddd-`).
            if b.len() >= 4 && b[..3].iter().all(u8::is_ascii_digit) && b[3] == b' ' {
                let code = line[..3].parse()?;
                return Ok((code, all.trim_end().to_string()));
            }
        }
    }

    /// Sends `cmd` and returns the first reply that is not a 1xx marker unless `prelim`.
    fn cmd(&mut self, cmd: &str, prelim: bool) -> Result<(u16, String)> {
        self.w.write_all(format!("{cmd}\r\n").as_bytes())?;
        loop {
            let r = self.reply()?;
            if prelim || r.0 >= 200 {
                return Ok(r);
            }
        }
    }

    fn expect(&mut self, cmd: &str, ok: impl Fn(u16) -> bool) -> Result<String> {
        let (code, text) = self.cmd(cmd, false)?;
        if !ok(code) {
            let shown = if cmd.starts_with("PASS ") {
                "PASS"
            } else {
                cmd
            };
            bail!("{shown}: {text}");
        }
        Ok(text)
    }
}

/// `229 Entering Extended Passive Mode (|||port|)` → the port.
fn epsv_port(text: &str) -> Option<u16> {
    let inner = text.split('(').nth(1)?.split(')').next()?;
    inner.trim_matches('|').parse().ok()
}

/// Runs the probe against `url` (credentials already filled) for at most `secs` and `max_bytes`.
pub fn run(url: &FtpUrl, secs: f64, max_bytes: u64) -> Result<Probe> {
    let addr = super::resolve(url)?;
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .with_context(|| format!("connect {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut c = Ctrl {
        r: BufReader::new(s.try_clone()?),
        w: s,
    };
    let (code, text) = c.reply()?;
    if code != 220 {
        bail!("greeting: {text}");
    }
    let (code, text) = c.cmd(&format!("USER {}", url.user), false)?;
    match code {
        230 => {}
        331 => {
            c.expect(&format!("PASS {}", url.pass), |c| c == 230)?;
        }
        _ => bail!("USER: {text}"),
    }
    c.expect("TYPE I", |c| c == 200)?;
    let upload = url.is_dir_like();
    let scratch = format!(
        "{}.drsftp-doctor-{}.bin",
        if url.path.ends_with('/') {
            url.path.clone()
        } else {
            format!("{}/", url.path)
        },
        std::process::id()
    );
    let path = if upload { scratch } else { url.path.clone() };
    let text = c.expect("EPSV", |c| c == 229)?;
    let port = epsv_port(&text).with_context(|| format!("EPSV reply {text:?}"))?;
    let data_addr = SocketAddr::new(addr.ip(), port);
    let mut data = TcpStream::connect_timeout(&data_addr, Duration::from_secs(10))
        .with_context(|| format!("data connection to {data_addr}"))?;
    let verb = if upload { "STOR" } else { "RETR" };
    let (code, text) = c.cmd(&format!("{verb} {path}"), true)?;
    if code != 150 && code != 125 {
        bail!("{verb} {path}: {text} (the probe needs a file to read, or a directory the user may write)");
    }
    let budget = Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let result = if upload {
        let zeros = vec![0u8; 256 << 10];
        let mut sent = 0u64;
        while t0.elapsed() < budget && sent < max_bytes {
            data.write_all(&zeros)?;
            sent += zeros.len() as u64;
        }
        let seconds = t0.elapsed().as_secs_f64();
        let i = drsftp_sys::tcp_info::tcp_info(&data)?;
        drop(data);
        let _ = c.reply();
        let _ = c.cmd(&format!("DELE {path}"), false);
        let busy = i.busy_time.as_secs_f64();
        let share = |d: Duration| (busy > 0.0).then(|| d.as_secs_f64() / busy);
        let (rwnd, sndbuf) = (share(i.rwnd_limited), share(i.sndbuf_limited));
        Probe {
            direction: "upload",
            bytes: i.bytes_acked,
            seconds,
            rate_bps: i.bytes_acked as f64 * 8.0 / seconds.max(1e-6),
            loss: (i.bytes_sent > 0).then(|| i.bytes_retrans as f64 / i.bytes_sent as f64),
            rtt_s: Some(i.rtt.as_secs_f64()),
            rwnd_limited: rwnd,
            sndbuf_limited: sndbuf,
            window_bytes: None,
            window_limited: rwnd.unwrap_or(0.0) + sndbuf.unwrap_or(0.0) > 0.3,
        }
    } else {
        let mut buf = vec![0u8; 256 << 10];
        let mut got = 0u64;
        let mut eof = false;
        while t0.elapsed() < budget && got < max_bytes {
            let n = data.read(&mut buf)?;
            if n == 0 {
                eof = true;
                break;
            }
            got += n as u64;
        }
        let seconds = t0.elapsed().as_secs_f64();
        let i = drsftp_sys::tcp_info::tcp_info(&data)?;
        drop(data);
        if !eof {
            let _ = c.cmd("ABOR", false);
        }
        let _ = c.reply();
        let rate = got as f64 * 8.0 / seconds.max(1e-6);
        let rtt = i.rcv_rtt.as_secs_f64();
        let window = u64::from(i.rcv_wnd.max(i.rcv_space));
        Probe {
            direction: "download",
            bytes: got,
            seconds,
            rate_bps: rate,
            loss: None,
            rtt_s: (rtt > 0.0).then_some(rtt),
            rwnd_limited: None,
            sndbuf_limited: None,
            window_bytes: Some(window),
            // Bytes in flight (rate × RTT) close to our whole window: the window, not the path, set the rate.
            window_limited: rtt > 0.0 && rate / 8.0 * rtt >= 0.7 * window as f64,
        }
    };
    let _ = c.cmd("QUIT", false);
    Ok(result)
}

/// The address of the local interface that routes to `peer`, learnt by connecting a UDP socket (no packet).
pub fn local_addr_towards(peer: IpAddr) -> Option<IpAddr> {
    let any: SocketAddr = if peer.is_ipv4() {
        "0.0.0.0:0".parse().ok()?
    } else {
        "[::]:0".parse().ok()?
    };
    let s = std::net::UdpSocket::bind(any).ok()?;
    s.connect(SocketAddr::new(peer, 9)).ok()?;
    s.local_addr().ok().map(|a| a.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epsv_ports() {
        assert_eq!(
            epsv_port("229 Entering Extended Passive Mode (|||50123|)"),
            Some(50123)
        );
        assert_eq!(epsv_port("229 nonsense"), None);
    }
}
