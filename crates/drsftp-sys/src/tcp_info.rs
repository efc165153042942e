//! `getsockopt(TCP_INFO)` into a safe struct: RTT, cwnd, MSS, receive space, delivery/pacing rate, byte counters,
//! retransmits and the busy / rwnd-limited / sndbuf-limited times that say which limit bound a sender.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

/// Mirror of Linux `struct tcp_info` (include/uapi/linux/tcp.h) up to `tcpi_rehash`. The kernel copies
/// `min(our size, its size)` bytes and reports the length, so older kernels leave the tail zeroed.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8, // snd_wscale:4 (low nibble), rcv_wscale:4 (high nibble)
    flags: u8,  // delivery_rate_app_limited:1, fastopen_client_fail:2
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
    rcv_wnd: u32,
    rehash: u32,
}

const _: () = assert!(std::mem::size_of::<RawTcpInfo>() == 240);

/// Safe view of `TCP_INFO`. Times are [`Duration`]s, rates bytes/s, windows bytes unless noted.
/// Fields the running kernel did not fill (short reply) are zero; `reported_len` says how much was filled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Bytes of `struct tcp_info` the kernel filled in.
    pub reported_len: usize,
    /// TCP state (1 = ESTABLISHED).
    pub state: u8,
    /// Congestion-avoidance state (0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss).
    pub ca_state: u8,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    /// Last delivery_rate sample was application-limited.
    pub delivery_rate_app_limited: bool,
    pub rto: Duration,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    /// Packets in flight not yet acknowledged.
    pub unacked: u32,
    pub lost: u32,
    /// Packets currently retransmitted and not yet acknowledged.
    pub retrans: u32,
    pub total_retrans: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    /// Smoothed RTT of this socket's own sent data (sender side).
    pub rtt: Duration,
    pub rttvar: Duration,
    pub min_rtt: Duration,
    /// Congestion window in packets (multiply by `snd_mss` for bytes: see [`TcpInfo::cwnd_bytes`]).
    pub snd_cwnd: u32,
    pub snd_ssthresh: u32,
    /// Receiver-side RTT estimate (the kernel's own DRS, tcp_rcv_rtt_measure); zero until measured.
    pub rcv_rtt: Duration,
    /// Receiver's autotuning estimate of the sender's per-RTT data (the kernel's DRS space), bytes.
    pub rcv_space: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub notsent_bytes: u32,
    /// Most recent delivery rate sample, bytes/s.
    pub delivery_rate: u64,
    /// Time the sender had data in flight or queued.
    pub busy_time: Duration,
    /// Part of `busy_time` limited by the peer's receive window.
    pub rwnd_limited: Duration,
    /// Part of `busy_time` limited by our send buffer.
    pub sndbuf_limited: Duration,
    /// Peer's advertised window after scaling (bytes), kernel >= 6.x.
    pub snd_wnd: u32,
    /// Our advertised window after scaling (bytes), kernel >= 6.x.
    pub rcv_wnd: u32,
    /// Segments that arrived out of order (behind a hole a loss left), kernel >= 5.4.
    pub rcv_ooopack: u32,
}

impl TcpInfo {
    /// Congestion window in bytes (`snd_cwnd * snd_mss`).
    pub fn cwnd_bytes(&self) -> u64 {
        self.snd_cwnd as u64 * self.snd_mss as u64
    }
}

fn us(v: u32) -> Duration {
    Duration::from_micros(v as u64)
}

/// Read `TCP_INFO` from a TCP socket.
pub fn tcp_info(fd: impl AsFd) -> io::Result<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: fd is live; raw is a repr(C) POD of `len` bytes, any bit pattern valid.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut raw as *mut RawTcpInfo as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let r = raw;
    Ok(TcpInfo {
        reported_len: len as usize,
        state: r.state,
        ca_state: r.ca_state,
        snd_wscale: r.wscale & 0x0f,
        rcv_wscale: r.wscale >> 4,
        delivery_rate_app_limited: r.flags & 1 != 0,
        rto: us(r.rto),
        snd_mss: r.snd_mss,
        rcv_mss: r.rcv_mss,
        unacked: r.unacked,
        lost: r.lost,
        retrans: r.retrans,
        total_retrans: r.total_retrans,
        pmtu: r.pmtu,
        rcv_ssthresh: r.rcv_ssthresh,
        rtt: us(r.rtt),
        rttvar: us(r.rttvar),
        min_rtt: us(r.min_rtt),
        snd_cwnd: r.snd_cwnd,
        snd_ssthresh: r.snd_ssthresh,
        rcv_rtt: us(r.rcv_rtt),
        rcv_space: r.rcv_space,
        pacing_rate: r.pacing_rate,
        max_pacing_rate: r.max_pacing_rate,
        bytes_acked: r.bytes_acked,
        bytes_received: r.bytes_received,
        bytes_sent: r.bytes_sent,
        bytes_retrans: r.bytes_retrans,
        notsent_bytes: r.notsent_bytes,
        delivery_rate: r.delivery_rate,
        busy_time: Duration::from_micros(r.busy_time),
        rwnd_limited: Duration::from_micros(r.rwnd_limited),
        sndbuf_limited: Duration::from_micros(r.sndbuf_limited),
        snd_wnd: r.snd_wnd,
        rcv_wnd: r.rcv_wnd,
        rcv_ooopack: r.rcv_ooopack,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn loopback_transfer_is_visible_in_tcp_info() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        const N: usize = 8 << 20;
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            let mut got = 0;
            while got < N {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0);
                got += n;
            }
            tcp_info(&s).unwrap()
        });
        let chunk = vec![7u8; 1 << 16];
        let t0 = std::time::Instant::now();
        for _ in 0..N / chunk.len() {
            c.write_all(&chunk).unwrap();
        }
        let rx = reader.join().unwrap();
        let elapsed = t0.elapsed();
        let tx = tcp_info(&c).unwrap();
        assert!(
            tx.reported_len >= 200,
            "kernel filled {} bytes",
            tx.reported_len
        );
        assert!(
            matches!(tx.state, 1 | 8),
            "ESTABLISHED or CLOSE_WAIT (peer closed): {}",
            tx.state
        );
        assert_eq!(
            rx.bytes_received, N as u64,
            "receiver counts every payload byte"
        );
        assert!(
            tx.bytes_acked >= N as u64 - (4 << 20),
            "acked {}",
            tx.bytes_acked
        );
        assert!(tx.bytes_sent >= N as u64, "sent {}", tx.bytes_sent);
        assert!(tx.snd_mss > 0 && tx.snd_cwnd > 0);
        assert!(tx.cwnd_bytes() >= tx.snd_mss as u64);
        assert!(
            tx.rtt > Duration::ZERO && tx.rtt < Duration::from_millis(200),
            "rtt {:?}",
            tx.rtt
        );
        assert!(tx.min_rtt <= tx.rtt + tx.rttvar * 4 + Duration::from_millis(1));
        // The kernel keeps busy time in jiffies (4 ms at HZ=250): a fast loopback transfer can read as 0.
        if elapsed > Duration::from_millis(50) {
            assert!(
                tx.busy_time > Duration::ZERO,
                "sender was busy for {elapsed:?}"
            );
        }
        assert!(tx.busy_time <= elapsed + Duration::from_millis(20));
        assert!(tx.rwnd_limited <= tx.busy_time && tx.sndbuf_limited <= tx.busy_time);
        assert!(tx.delivery_rate > 0);
        assert!(rx.rcv_space > 0, "receiver autotuning space");
        assert!(rx.rcv_mss > 0);
    }

    #[test]
    fn small_receive_buffer_shows_up_as_rwnd_limited() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        // Tiny receive buffer set before listen/accept, so the window is small and the sender is rwnd-bound
        // while the reader sleeps.
        crate::sockopt::set_recv_buf(&l, 4096).unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        const N: usize = 2 << 20;
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 4096];
            let mut got = 0;
            while got < N {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0);
                got += n;
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        let chunk = vec![1u8; 1 << 16];
        for _ in 0..N / chunk.len() {
            c.write_all(&chunk).unwrap();
        }
        reader.join().unwrap();
        let tx = tcp_info(&c).unwrap();
        // Only the presence of window-limited time is asserted, not its share of the busy time: on a loaded
        // machine (CI) the share varied from over half to 8 ms of 140 ms, because how long the window stays
        // shut depends on when the scheduler runs the reader, not on the kernel's accounting.
        assert!(
            tx.rwnd_limited > Duration::ZERO,
            "expected receive-window limiting: {tx:?}"
        );
        assert!(tx.rwnd_limited <= tx.busy_time, "{tx:?}");
    }

    #[test]
    fn tcp_info_on_non_tcp_fd_errors() {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(tcp_info(&u).is_err());
    }
}
