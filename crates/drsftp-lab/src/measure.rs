//! Measurements through a running lab: UDP echo RTT probes (no `ping` binary needed) and iperf3 TCP/UDP runs
//! parsed from iperf3's JSON output.

use std::net::UdpSocket;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::lab::Lab;

/// Result of [`udp_ping`].
#[derive(Debug, Clone)]
pub struct PingResult {
    pub samples: Vec<Duration>,
    pub lost: usize,
}

impl PingResult {
    pub fn mean(&self) -> Duration {
        if self.samples.is_empty() {
            return Duration::ZERO;
        }
        self.samples.iter().sum::<Duration>() / self.samples.len() as u32
    }
    /// Median sample (robust to a rare scheduler hiccup on a busy machine).
    pub fn median(&self) -> Duration {
        let mut v = self.samples.clone();
        v.sort();
        v.get(v.len() / 2).copied().unwrap_or_default()
    }
    pub fn min(&self) -> Duration {
        self.samples.iter().min().copied().unwrap_or_default()
    }
    pub fn max(&self) -> Duration {
        self.samples.iter().max().copied().unwrap_or_default()
    }
}

/// Send `count` small UDP probes from host `from` to an echo socket on host `to`, one every `interval`, and time
/// the round trips (timeout 3 s each).
pub fn udp_ping(
    lab: &Lab,
    from: usize,
    to: usize,
    count: usize,
    interval: Duration,
) -> std::io::Result<PingResult> {
    let (fa, ta) = (lab.addr(from), lab.addr(to));
    let echo = lab.run_in(to, move || UdpSocket::bind((ta, 0)))??;
    let echo_addr = echo.local_addr()?;
    echo.set_read_timeout(Some(Duration::from_millis(200)))?;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d2 = done.clone();
    let server = std::thread::spawn(move || {
        let mut b = [0u8; 64];
        while !d2.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok((n, peer)) = echo.recv_from(&mut b) {
                let _ = echo.send_to(&b[..n], peer);
            }
        }
    });
    let sock = lab.run_in(from, move || UdpSocket::bind((fa, 0)))??;
    sock.set_read_timeout(Some(Duration::from_secs(3)))?;
    let mut res = PingResult {
        samples: Vec::new(),
        lost: 0,
    };
    let mut buf = [0u8; 64];
    for seq in 0..count as u64 {
        let t = Instant::now();
        sock.send_to(&seq.to_be_bytes(), echo_addr)?;
        let mut got = false;
        while t.elapsed() < Duration::from_secs(3) {
            match sock.recv_from(&mut buf) {
                Ok((8, _)) if buf[..8] == seq.to_be_bytes() => {
                    res.samples.push(t.elapsed());
                    got = true;
                    break;
                }
                Ok(_) => continue,
                Err(_) => break,
            }
        }
        if !got {
            res.lost += 1;
        }
        std::thread::sleep(interval);
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = server.join();
    Ok(res)
}

/// Parsed iperf3 result.
#[derive(Debug, Clone, Default)]
pub struct IperfResult {
    /// Receiver-side goodput (TCP) or received rate (UDP), bit/s.
    pub bits_per_second: f64,
    /// TCP retransmissions (sender).
    pub retransmits: u64,
    /// UDP: packets sent and lost as counted by iperf3.
    pub udp_packets: u64,
    pub udp_lost: u64,
    /// Seconds measured.
    pub seconds: f64,
    /// Congestion control actually used by the sender and receiver sockets (from iperf3).
    pub sender_cc: String,
    pub receiver_cc: String,
}

/// Error from an iperf3 run.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error("iperf3: {0}")]
    Iperf(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Run `iperf3 -s -1` on host `server` and `iperf3 -c <server addr> -J <client_args>` on host `client`.
pub fn iperf3(
    lab: &Lab,
    client: usize,
    server: usize,
    port: u16,
    client_args: &[&str],
) -> Result<IperfResult, MeasureError> {
    let addr = lab.addr(server).to_string();
    let port_s = port.to_string();
    let mut srv = lab
        .exec(server, "iperf3")
        .args(["-s", "-1", "-B", &addr, "-p", &port_s])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    std::thread::sleep(Duration::from_millis(400));
    let out = lab
        .exec(client, "iperf3")
        .args(["-c", &addr, "-p", &port_s, "-J"])
        .args(client_args)
        .output();
    let _ = srv.kill();
    let _ = srv.wait();
    let out = out?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        MeasureError::Iperf(format!(
            "bad JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    })?;
    if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        return Err(MeasureError::Iperf(e.to_string()));
    }
    let end = &v["end"];
    let f = |x: &serde_json::Value| x.as_f64().unwrap_or(0.0);
    let mut r = IperfResult {
        sender_cc: end["sender_tcp_congestion"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        receiver_cc: end["receiver_tcp_congestion"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        ..Default::default()
    };
    let udp = v["start"]["test_start"]["protocol"].as_str() == Some("UDP");
    if !udp {
        r.bits_per_second = f(&end["sum_received"]["bits_per_second"]);
        r.seconds = f(&end["sum_received"]["seconds"]);
        r.retransmits = f(&end["sum_sent"]["retransmits"]) as u64;
    } else {
        // UDP: end.sum carries the server-reported loss; sum_received (newer iperf3) the receiver's rate.
        let rx = if end["sum_received"].is_object() {
            &end["sum_received"]
        } else {
            &end["sum"]
        };
        r.bits_per_second = f(&rx["bits_per_second"]);
        r.seconds = f(&rx["seconds"]);
        r.udp_packets = f(&end["sum"]["packets"]) as u64;
        r.udp_lost = f(&end["sum"]["lost_packets"]) as u64;
    }
    Ok(r)
}
