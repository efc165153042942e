//! Buffer sizes a peer asks for (SBUF, `SITE *BUFSIZE`, BPAS sockets) stay within net.core.rmem_max/wmem_max even
//! as root: only the operator's own sizes may be forced past them (SO_RCVBUFFORCE/SO_SNDBUFFORCE).

use std::net::SocketAddr;
use std::os::fd::AsFd;

use drsftp_sys::sockopt;

use crate::data::{self, BufferPolicy, DataOpts};

fn root() -> bool {
    // The effective uid, from /proc/self/status ("Uid: real effective ..."): no unsafe outside drsftp-sys.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// The attack: a client's `SBUF 1073741824` reached the server's data socket as a FORCE'd 1 GiB SO_RCVBUF (2 GiB
/// of kernel-accounted memory per socket, pinned by a client that never reads). Now the effective size stays
/// within 2 × rmem_max; the operator's own fixed size is still forced.
#[tokio::test]
async fn peer_requested_buffers_are_never_forced_past_the_caps() {
    if !root() {
        eprintln!("SKIPPED peer_requested_buffers_are_never_forced_past_the_caps (needs root: FORCE needs CAP_NET_ADMIN)");
        return;
    }
    let limits = sockopt::buf_limits().unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = l.local_addr().unwrap();
    let accept = tokio::spawn(async move {
        let mut v = vec![];
        for _ in 0..2 {
            v.push(l.accept().await.unwrap().0);
        }
        v
    });
    let gib = 1u64 << 30;
    let peer = DataOpts {
        buffer: BufferPolicy::Fixed(gib),
        peer_buffers: true,
        ..DataOpts::default()
    };
    let s = data::connect(addr, &peer).await.unwrap();
    let (rcv, snd) = (
        sockopt::recv_buf(s.as_fd()).unwrap(),
        sockopt::send_buf(s.as_fd()).unwrap(),
    );
    eprintln!(
        "peer-requested 1 GiB: SO_RCVBUF {rcv}, SO_SNDBUF {snd} (rmem_max {}, wmem_max {})",
        limits.rmem_max, limits.wmem_max
    );
    assert!(rcv <= 2 * limits.rmem_max, "SO_RCVBUF {rcv}");
    assert!(snd <= 2 * limits.wmem_max, "SO_SNDBUF {snd}");
    // The operator's own fixed size (peer_buffers false) may still be forced as root.
    let own = DataOpts {
        buffer: BufferPolicy::Fixed(64 << 20),
        ..DataOpts::default()
    };
    let s2 = data::connect(addr, &own).await.unwrap();
    let rcv2 = sockopt::recv_buf(s2.as_fd()).unwrap();
    if (64 << 20) > limits.rmem_max {
        assert!(
            rcv2 > 2 * limits.rmem_max,
            "operator size not forced: {rcv2}"
        );
    }
    drop(accept.await.unwrap());
}

/// Blast sockets bound for a client's `BPAS` (the server's options) are not forced either.
#[test]
fn server_blast_sockets_stay_within_the_caps() {
    if !root() {
        eprintln!("SKIPPED server_blast_sockets_stay_within_the_caps (needs root)");
        return;
    }
    let limits = sockopt::buf_limits().unwrap();
    let (sock, _id) = crate::server::blast_bind_for_tests("127.0.0.1".parse().unwrap()).unwrap();
    let rcv = sockopt::recv_buf(sock.as_fd()).unwrap();
    let snd = sockopt::send_buf(sock.as_fd()).unwrap();
    eprintln!("server blast socket: SO_RCVBUF {rcv}, SO_SNDBUF {snd}");
    assert!(rcv <= 2 * limits.rmem_max, "SO_RCVBUF {rcv}");
    assert!(snd <= 2 * limits.wmem_max, "SO_SNDBUF {snd}");
}
