//! `TcpSample`: the portable subset of Linux TCP_INFO the tuners consume (the tokio layer converts
//! `drsftp_sys::tcp_info::TcpInfo` into it; tests build it directly).

use std::time::Duration;

/// What a tuner needs from TCP_INFO. Zero means "not known".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpSample {
    /// Sender-side smoothed RTT (tcpi_rtt).
    pub rtt: Duration,
    /// Receiver-side RTT estimate (tcpi_rcv_rtt) — what a pure receiver can see.
    pub rcv_rtt: Duration,
    /// Minimum RTT seen (tcpi_min_rtt).
    pub min_rtt: Duration,
    /// Congestion window in bytes (snd_cwnd * snd_mss).
    pub cwnd_bytes: u64,
    /// Latest delivery-rate sample, bytes/s.
    pub delivery_rate: u64,
    /// Cumulative payload bytes received (tcpi_bytes_received).
    pub bytes_received: u64,
    /// Cumulative payload bytes acknowledged (tcpi_bytes_acked).
    pub bytes_acked: u64,
    /// Kernel receive-autotuning space (tcpi_rcv_space), bytes.
    pub rcv_space: u64,
    /// Cumulative time the sender was busy (tcpi_busy_time).
    pub busy_time: Duration,
    /// Cumulative part of busy time limited by the peer's receive window (tcpi_rwnd_limited).
    pub rwnd_limited: Duration,
    /// Cumulative part of busy time limited by the send buffer (tcpi_sndbuf_limited).
    pub sndbuf_limited: Duration,
}
