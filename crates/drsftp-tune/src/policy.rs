//! Buffer policy (`--buffer drs | kernel | SIZE`, sizes in the drsftp-units grammar), and the limit
//! classifier that says, from TCP_INFO samples, which limit bound a transfer.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use drsftp_units::{format_size, parse_size};

use crate::sample::TcpSample;

/// A `--buffer` value that is neither a policy name nor a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("invalid buffer policy {0:?} (drs, kernel, or a size such as 4M)")]
    Policy(String),
}

/// How a data socket's buffers are managed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferPolicy {
    /// User-space DRS: SO_RCVBUF set from the estimator (disables kernel autotuning for the socket).
    Drs,
    /// Leave Linux autotuning on (kernel DRS, capped by tcp_rmem[2]); only observe through TCP_INFO.
    Kernel,
    /// Fixed SO_RCVBUF/SO_SNDBUF of this many bytes.
    Fixed(u64),
}

impl BufferPolicy {
    /// The policy to use when the user says nothing: kernel autotuning if it can reach twice the path's BDP
    /// (`tcp_rmem_max` = tcp_rmem[2]), else user-space DRS, which may go up to rmem_max (or beyond, with FORCE).
    pub fn choose_default(tcp_rmem_max: u64, bdp: u64) -> BufferPolicy {
        if tcp_rmem_max >= bdp.saturating_mul(2) {
            BufferPolicy::Kernel
        } else {
            BufferPolicy::Drs
        }
    }
}

impl FromStr for BufferPolicy {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "drs" | "auto" => Ok(BufferPolicy::Drs),
            "kernel" | "autotune" => Ok(BufferPolicy::Kernel),
            _ => match parse_size(s) {
                Ok(b) if b > 0 => Ok(BufferPolicy::Fixed(b)),
                _ => Err(ParseError::Policy(s.to_string())),
            },
        }
    }
}

impl fmt::Display for BufferPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufferPolicy::Drs => f.write_str("drs"),
            BufferPolicy::Kernel => f.write_str("kernel"),
            BufferPolicy::Fixed(b) => f.write_str(&format_size(*b)),
        }
    }
}

/// What bound a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The peer's advertised receive window (a receive buffer too small).
    ReceiveWindow,
    /// The congestion window: the network (the desired state).
    Cwnd,
    /// Our send buffer.
    SendBuffer,
    /// The sender had nothing to send: application / CPU.
    Application,
    /// The sender had nothing to send because storage was slow.
    Disk,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::ReceiveWindow => "receive-window",
            Limit::Cwnd => "cwnd (network)",
            Limit::SendBuffer => "send-buffer",
            Limit::Application => "application",
            Limit::Disk => "disk",
        })
    }
}

/// Fractions of wall time, summing to ~1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitReport {
    pub wall: Duration,
    pub receive_window: f64,
    pub send_buffer: f64,
    pub cwnd: f64,
    /// Sender idle (not busy) and not attributed to disk.
    pub application: f64,
    pub disk: f64,
    pub dominant: Limit,
}

/// Accumulates sender-side TCP_INFO samples (tcpi_busy_time / rwnd_limited / sndbuf_limited are sender-side
/// counters) plus the time the application waited on storage, and names the dominant limit.
#[derive(Debug, Default)]
pub struct LimitClassifier {
    first: Option<(std::time::Instant, TcpSample)>,
    last: Option<(std::time::Instant, TcpSample)>,
    io_wait: Duration,
}

impl LimitClassifier {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn handle_tcp_info(&mut self, now: std::time::Instant, s: &TcpSample) {
        if self.first.is_none() {
            self.first = Some((now, *s));
        }
        self.last = Some((now, *s));
    }
    /// The sender spent `d` waiting for storage reads (or the receiver for writes).
    pub fn handle_io_wait(&mut self, d: Duration) {
        self.io_wait += d;
    }
    /// Classification over everything seen so far; `None` before two samples.
    pub fn report(&self) -> Option<LimitReport> {
        let ((t0, a), (t1, b)) = (self.first?, self.last?);
        classify(&a, &b, t1.saturating_duration_since(t0), self.io_wait)
    }
}

/// Classify the interval between two cumulative samples `a` then `b` taken `wall` apart.
pub fn classify(
    a: &TcpSample,
    b: &TcpSample,
    wall: Duration,
    io_wait: Duration,
) -> Option<LimitReport> {
    let w = wall.as_secs_f64();
    if w <= 0.0 {
        return None;
    }
    let frac = |x: Duration, y: Duration| (x.saturating_sub(y).as_secs_f64() / w).clamp(0.0, 1.0);
    let busy = frac(b.busy_time, a.busy_time);
    let rwnd = frac(b.rwnd_limited, a.rwnd_limited).min(busy);
    let sndbuf = frac(b.sndbuf_limited, a.sndbuf_limited).min(busy - rwnd);
    let cwnd = (busy - rwnd - sndbuf).max(0.0);
    let idle = (1.0 - busy).max(0.0);
    let disk = (io_wait.as_secs_f64() / w).min(idle);
    let application = idle - disk;
    let cands = [
        (Limit::ReceiveWindow, rwnd),
        (Limit::SendBuffer, sndbuf),
        (Limit::Cwnd, cwnd),
        (Limit::Disk, disk),
        (Limit::Application, application),
    ];
    let dominant = cands
        .iter()
        .copied()
        .fold((Limit::Cwnd, -1.0), |m, c| if c.1 > m.1 { c } else { m })
        .0;
    Some(LimitReport {
        wall,
        receive_window: rwnd,
        send_buffer: sndbuf,
        cwnd,
        application,
        disk,
        dominant,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_roundtrip() {
        assert_eq!("drs".parse::<BufferPolicy>().unwrap(), BufferPolicy::Drs);
        assert_eq!(
            "Kernel".parse::<BufferPolicy>().unwrap(),
            BufferPolicy::Kernel
        );
        assert_eq!(
            "4M".parse::<BufferPolicy>().unwrap(),
            BufferPolicy::Fixed(4 << 20)
        );
        assert!("bogus".parse::<BufferPolicy>().is_err());
        assert!("0".parse::<BufferPolicy>().is_err());
        for p in [
            BufferPolicy::Drs,
            BufferPolicy::Kernel,
            BufferPolicy::Fixed(64 << 10),
        ] {
            assert_eq!(p.to_string().parse::<BufferPolicy>().unwrap(), p);
        }
        assert_eq!(
            BufferPolicy::choose_default(32 << 20, 1_250_000),
            BufferPolicy::Kernel
        );
        assert_eq!(
            BufferPolicy::choose_default(4 << 20, 12_500_000),
            BufferPolicy::Drs
        );
    }

    fn s(busy: u64, rwnd: u64, sndbuf: u64) -> TcpSample {
        TcpSample {
            busy_time: Duration::from_millis(busy),
            rwnd_limited: Duration::from_millis(rwnd),
            sndbuf_limited: Duration::from_millis(sndbuf),
            ..TcpSample::default()
        }
    }

    #[test]
    fn classifier_names_the_binding_limit() {
        let sec = Duration::from_secs(1);
        let r = classify(&s(0, 0, 0), &s(1000, 800, 0), sec, Duration::ZERO).unwrap();
        assert_eq!(r.dominant, Limit::ReceiveWindow);
        assert!((r.receive_window - 0.8).abs() < 1e-9 && (r.cwnd - 0.2).abs() < 1e-9);
        let r = classify(&s(0, 0, 0), &s(1000, 0, 700), sec, Duration::ZERO).unwrap();
        assert_eq!(r.dominant, Limit::SendBuffer);
        let r = classify(&s(0, 0, 0), &s(990, 10, 10), sec, Duration::ZERO).unwrap();
        assert_eq!(r.dominant, Limit::Cwnd);
        let r = classify(&s(0, 0, 0), &s(300, 0, 0), sec, Duration::from_millis(600)).unwrap();
        assert_eq!(r.dominant, Limit::Disk);
        let r = classify(&s(0, 0, 0), &s(300, 0, 0), sec, Duration::ZERO).unwrap();
        assert_eq!(r.dominant, Limit::Application);
        let sum = r.receive_window + r.send_buffer + r.cwnd + r.application + r.disk;
        assert!((sum - 1.0).abs() < 1e-9);
        let mut c = LimitClassifier::new();
        let t0 = std::time::Instant::now();
        c.handle_tcp_info(t0, &s(0, 0, 0));
        assert!(c.report().is_none());
        c.handle_tcp_info(t0 + sec, &s(1000, 900, 0));
        assert_eq!(c.report().unwrap().dominant, Limit::ReceiveWindow);
    }
}
