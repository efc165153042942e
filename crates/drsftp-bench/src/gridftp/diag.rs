//! sock_diag (NETLINK_SOCK_DIAG) dump of the calling namespace's IPv4 TCP sockets: what `ss -tmi` shows, without
//! a process per sample. The socket is bound to the namespace it was created in.

use std::io::{self, Read};
use std::net::Ipv4Addr;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

const AF_NETLINK: i32 = 16;
const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const INET_DIAG_INFO: u16 = 2;
const INET_DIAG_CONG: u16 = 4;
const INET_DIAG_SKMEMINFO: u16 = 7;
const TCP_ESTABLISHED: u32 = 1;
const TCP_CLOSE_WAIT: u32 = 8;

/// One socket: addresses, skmem and the TCP_INFO fields the benchmark uses.
#[derive(Debug, Clone)]
pub struct Sock {
    pub sport: u16,
    pub dst: Ipv4Addr,
    pub dport: u16,
    pub cookie: u64,
    pub rmem_alloc: u32,
    pub rcvbuf: u32,
    pub sndbuf: u32,
    pub cong: String,
    pub rcv_ssthresh: u32,
    pub rcv_space: u32,
    pub rcv_wnd: u32,
    pub bytes_received: u64,
    pub total_retrans: u32,
    pub busy_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
}

impl Default for Sock {
    fn default() -> Self {
        Sock {
            sport: 0,
            dst: Ipv4Addr::UNSPECIFIED,
            dport: 0,
            cookie: 0,
            rmem_alloc: 0,
            rcvbuf: 0,
            sndbuf: 0,
            cong: String::new(),
            rcv_ssthresh: 0,
            rcv_space: 0,
            rcv_wnd: 0,
            bytes_received: 0,
            total_retrans: 0,
            busy_us: 0,
            rwnd_limited_us: 0,
            sndbuf_limited_us: 0,
        }
    }
}

pub struct Diag {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

fn u16_ne(b: &[u8], o: usize) -> u16 {
    b.get(o..o + 2)
        .map(|x| u16::from_ne_bytes([x[0], x[1]]))
        .unwrap_or(0)
}
fn u32_ne(b: &[u8], o: usize) -> u32 {
    b.get(o..o + 4)
        .map(|x| u32::from_ne_bytes([x[0], x[1], x[2], x[3]]))
        .unwrap_or(0)
}
fn u64_ne(b: &[u8], o: usize) -> u64 {
    b.get(o..o + 8)
        .map(|x| u64::from_ne_bytes(x.try_into().expect("8 bytes")))
        .unwrap_or(0)
}

impl Diag {
    pub fn open() -> io::Result<Diag> {
        let sock = Socket::new(
            Domain::from(AF_NETLINK),
            Type::DGRAM,
            Some(Protocol::from(NETLINK_SOCK_DIAG)),
        )?;
        sock.set_read_timeout(Some(Duration::from_secs(2)))?;
        Ok(Diag {
            sock,
            seq: 0,
            buf: vec![0; 1 << 17],
        })
    }

    /// The namespace's connected IPv4 TCP sockets (ESTABLISHED, FIN_WAIT1/2, CLOSE_WAIT, LAST_ACK, CLOSING).
    pub fn dump(&mut self) -> io::Result<Vec<Sock>> {
        self.seq = self.seq.wrapping_add(1);
        let mut req = Vec::with_capacity(72);
        req.extend_from_slice(&72u32.to_ne_bytes());
        req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        req.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        req.extend_from_slice(&self.seq.to_ne_bytes());
        req.extend_from_slice(&0u32.to_ne_bytes());
        // inet_diag_req_v2: family, protocol, ext (bit n-1 asks for attribute n), pad, states, sockid.
        req.push(2);
        req.push(6);
        req.push(
            ((1u16 << (INET_DIAG_INFO - 1))
                | (1 << (INET_DIAG_CONG - 1))
                | (1 << (INET_DIAG_SKMEMINFO - 1))) as u8,
        );
        req.push(0);
        // Connected states, including a sender that closed with data still in flight (FIN_WAIT1 etc.).
        let states = [TCP_ESTABLISHED, 4, 5, TCP_CLOSE_WAIT, 9, 11]
            .iter()
            .fold(0u32, |m, s| m | 1 << s);
        req.extend_from_slice(&states.to_ne_bytes());
        req.extend_from_slice(&[0u8; 48]);
        debug_assert_eq!(req.len(), 72);
        self.sock.send(&req)?;
        let mut out = vec![];
        loop {
            let n = (&self.sock).read(&mut self.buf)?;
            if n == 0 {
                return Err(io::Error::other("sock_diag: empty read"));
            }
            let b = &self.buf[..n];
            let mut off = 0;
            while off + 16 <= n {
                let len = u32_ne(b, off) as usize;
                let typ = u16_ne(b, off + 4);
                let seq = u32_ne(b, off + 8);
                if len < 16 || off + len > n {
                    return Err(io::Error::other("sock_diag: malformed message"));
                }
                if seq == self.seq {
                    match typ {
                        NLMSG_DONE => return Ok(out),
                        NLMSG_ERROR => {
                            let e = u32_ne(b, off + 16) as i32;
                            if e != 0 {
                                return Err(io::Error::from_raw_os_error(-e));
                            }
                        }
                        _ => {
                            if let Some(s) = parse(&b[off + 16..off + len]) {
                                out.push(s);
                            }
                        }
                    }
                }
                off += (len + 3) & !3;
            }
        }
    }
}

/// inet_diag_msg (72 bytes) followed by attributes.
fn parse(m: &[u8]) -> Option<Sock> {
    if m.len() < 72 || m[0] != 2 {
        return None;
    }
    let mut s = Sock {
        sport: u16::from_be_bytes([m[4], m[5]]),
        dport: u16::from_be_bytes([m[6], m[7]]),
        dst: Ipv4Addr::new(m[24], m[25], m[26], m[27]),
        cookie: u32_ne(m, 44) as u64 | (u32_ne(m, 48) as u64) << 32,
        ..Sock::default()
    };
    let mut off = 72;
    while off + 4 <= m.len() {
        let len = u16_ne(m, off) as usize;
        let typ = u16_ne(m, off + 2) & 0x3fff;
        if len < 4 || off + len > m.len() {
            break;
        }
        let p = &m[off + 4..off + len];
        match typ {
            INET_DIAG_SKMEMINFO => {
                s.rmem_alloc = u32_ne(p, 0);
                s.rcvbuf = u32_ne(p, 4);
                s.sndbuf = u32_ne(p, 12);
            }
            INET_DIAG_CONG => {
                let end = p.iter().position(|&c| c == 0).unwrap_or(p.len());
                s.cong = String::from_utf8_lossy(&p[..end]).into_owned();
            }
            INET_DIAG_INFO => {
                // Offsets in struct tcp_info (include/uapi/linux/tcp.h); short replies read as zero.
                s.rcv_ssthresh = u32_ne(p, 64);
                s.rcv_space = u32_ne(p, 96);
                s.total_retrans = u32_ne(p, 100);
                s.bytes_received = u64_ne(p, 128);
                s.busy_us = u64_ne(p, 168);
                s.rwnd_limited_us = u64_ne(p, 176);
                s.sndbuf_limited_us = u64_ne(p, 184);
                s.rcv_wnd = u32_ne(p, 232);
            }
            _ => {}
        }
        off += (len + 3) & !3;
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn dump_sees_a_loopback_connection_with_tcp_info() {
        let mut d = match Diag::open() {
            Ok(d) => d,
            Err(e) => {
                println!(
                    "SKIPPED dump_sees_a_loopback_connection_with_tcp_info: no sock_diag ({e})"
                );
                return;
            }
        };
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        c.write_all(&vec![1u8; 100_000]).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let all = match d.dump() {
            Ok(v) => v,
            Err(e) => {
                println!("SKIPPED dump_sees_a_loopback_connection_with_tcp_info: sock_diag dump failed ({e})");
                return;
            }
        };
        let rx = all
            .iter()
            .find(|x| x.sport == port && x.dport == c.local_addr().unwrap().port())
            .expect("receiving socket listed");
        assert_eq!(rx.dst, Ipv4Addr::LOCALHOST);
        assert_eq!(rx.bytes_received, 100_000);
        assert!(rx.rmem_alloc > 0, "data not read yet is queued");
        assert!(rx.rcv_ssthresh > 0 && rx.rcv_space > 0 && rx.rcvbuf > 0);
        assert_eq!(rx.cong, drsftp_sys::sockopt::congestion(&s).unwrap());
        let tx = all
            .iter()
            .find(|x| x.dport == port)
            .expect("sending socket listed");
        assert!(tx.busy_us > 0);
        drop(s);
    }
}
