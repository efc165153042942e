//! The client side of the UDP blast channel's set-up (docs/blast.md): the `OPTS BLAST` line for a
//! [`BlastRequest`], the `BPAS` argument for the driver's UDP socket, and reading the server's answers — the rate
//! in force from `200 OPTS BLAST MTU=..;Rate=..;`, the server's UDP address and transfer id from
//! `229 Entering Blast Passive Mode (h1,h2,h3,h4,p1,p2) Id=<hex>`, and `Size=`/`Packet=` from the transfer
//! command's `150`. The session collects them in a [`BlastNeg`] until they make a [`BlastChannel`].
//!
//! Third-party (server-to-server) set-up, driven by `drsftp_io::client::third_party`: `BPAS` with no argument on
//! the receiving server, `BPAS <receiver's address>` on the sending one, then [`bprt_line`] on the receiver with
//! the sender's address and transfer id; [`offers_bprt`] tells whether a server knows BPRT.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::feat::Features;
use super::reply::Reply;
use super::types::{BlastChannel, BlastRequest};
use crate::hostport::host_port_any;

/// `OPTS BLAST MTU=<n>;Rate=<bps>;[AckEvery=<n>;][Start=<bps>;]`.
pub fn opts_line(r: &BlastRequest) -> String {
    let ack = r
        .ack_every
        .map_or(String::new(), |a| format!("AckEvery={a};"));
    let start = match r.start_rate {
        0 => String::new(),
        s => format!("Start={s};"),
    };
    format!("OPTS BLAST MTU={};Rate={};{ack}{start}", r.mtu, r.max_rate)
}

/// `BPAS h1,h2,h3,h4,p1,p2` (IPv4) or `BPAS |2|addr|port|` (IPv6).
pub fn bpas_line(addr: SocketAddr) -> String {
    format!("BPAS {}", host_port_any(addr))
}

/// `BPRT <peer address> Id=<16 hex digits>`: names the sending server's UDP address and transfer id to the
/// receiving server of a third-party blast transfer.
pub fn bprt_line(peer: SocketAddr, transfer_id: u64) -> String {
    format!("BPRT {} Id={transfer_id:016x}", host_port_any(peer))
}

/// True if the server lists BPRT in its FEAT BLAST line (` BLAST BPRT`): it can receive a third-party blast
/// transfer. Every server that lists BLAST can send one (`BPAS <address>`).
pub fn offers_bprt(features: &Features) -> bool {
    features
        .params("BLAST")
        .is_some_and(|p| p.split_whitespace().any(|t| t.eq_ignore_ascii_case("BPRT")))
}

/// The MTU in force from a `200 OPTS BLAST MTU=<n>;...` reply.
pub fn parse_opts_mtu(reply: &Reply) -> Option<u32> {
    value(reply.text(), "MTU")?.parse().ok()
}

/// `Key=value` (up to the next `;`, space, `)` or `.`) anywhere in `text`, key case-insensitive.
fn value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let lower = text.to_ascii_lowercase();
    let pat = format!("{}=", key.to_ascii_lowercase());
    let mut from = 0;
    while let Some(i) = lower[from..].find(&pat) {
        let at = from + i;
        let boundary = at == 0 || !lower.as_bytes()[at - 1].is_ascii_alphanumeric();
        if boundary {
            let rest = &text[at + pat.len()..];
            let end = rest.find([';', ' ', ')', '(']).unwrap_or(rest.len());
            let v = rest[..end].trim_end_matches('.');
            return (!v.is_empty()).then_some(v);
        }
        from = at + pat.len();
    }
    None
}

/// The rate in force from a `200 OPTS BLAST ...;Rate=<bps>;` reply.
pub fn parse_opts_reply(reply: &Reply) -> Option<u64> {
    value(reply.text(), "Rate")?.parse().ok()
}

/// The server's UDP address and the transfer id from `229 Entering Blast Passive Mode (<address>) Id=<hex>`;
/// `<address>` is `h1,h2,h3,h4,p1,p2` or `|2|v6|port|`. A wildcard host means the control connection's peer.
pub fn parse_bpas_reply(reply: &Reply, control_peer: Option<IpAddr>) -> Option<(SocketAddr, u64)> {
    if reply.code != 229 {
        return None;
    }
    let text = reply.text();
    let inner = &text[text.find('(')? + 1..];
    let inner = &inner[..inner.find(')')?];
    let addr = if inner.starts_with(|c: char| c.is_ascii_digit()) {
        let n: Vec<u8> = inner
            .split(',')
            .map(|x| x.trim().parse::<u8>().ok())
            .collect::<Option<_>>()?;
        let [a, b, c, d, p1, p2] = n.as_slice() else {
            return None;
        };
        SocketAddr::new(
            IpAddr::V4(Ipv4Addr::new(*a, *b, *c, *d)),
            u16::from(*p1) << 8 | u16::from(*p2),
        )
    } else {
        let d = inner.chars().next()?;
        let f: Vec<&str> = inner.split(d).collect();
        let [_, _, host, port, _] = f.as_slice() else {
            return None;
        };
        SocketAddr::new(host.parse().ok()?, port.parse().ok()?)
    };
    if addr.port() == 0 {
        return None;
    }
    let addr = match control_peer {
        Some(p) if addr.ip().is_unspecified() => SocketAddr::new(p, addr.port()),
        _ => addr,
    };
    let id = u64::from_str_radix(value(text, "Id")?, 16).ok()?;
    Some((addr, id))
}

/// `(Size, Packet)` from the transfer command's `150 Opening BLAST data channel ... (Size=<n>;Packet=<n>;).`
pub fn parse_start(reply: &Reply) -> Option<(u64, usize)> {
    let t = reply.text();
    let size = value(t, "Size")?.parse().ok()?;
    let packet = value(t, "Packet")?.parse().ok().filter(|p| *p > 0)?;
    Some((size, packet))
}

/// What the session has learned about the blast channel of the running transfer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct BlastNeg {
    pub(super) rate: u64,
    pub(super) server: Option<(SocketAddr, u64)>,
    pub(super) start: Option<(u64, usize)>,
}

impl BlastNeg {
    /// The channel, once every part is known.
    pub(super) fn channel(&self) -> Option<BlastChannel> {
        let (peer, transfer_id) = self.server?;
        let (size, payload_size) = self.start?;
        Some(BlastChannel {
            peer,
            transfer_id,
            size,
            payload_size,
            max_rate: self.rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_replies() {
        let r = BlastRequest {
            mtu: 1500,
            max_rate: 500_000_000,
            ack_every: None,
            start_rate: 0,
        };
        assert_eq!(opts_line(&r), "OPTS BLAST MTU=1500;Rate=500000000;");
        assert_eq!(
            opts_line(&BlastRequest {
                ack_every: Some(50),
                ..r
            }),
            "OPTS BLAST MTU=1500;Rate=500000000;AckEvery=50;"
        );
        assert_eq!(
            opts_line(&BlastRequest {
                start_rate: 180_000_000,
                ..r
            }),
            "OPTS BLAST MTU=1500;Rate=500000000;Start=180000000;"
        );
        assert_eq!(
            bpas_line("127.0.0.1:40000".parse().unwrap()),
            "BPAS 127,0,0,1,156,64"
        );
        assert_eq!(
            bpas_line("[::1]:40000".parse().unwrap()),
            "BPAS |2|::1|40000|"
        );
        assert_eq!(
            parse_opts_reply(&Reply::new(200, "OPTS BLAST MTU=1500;Rate=800000000;")),
            Some(800_000_000)
        );
        let peer = Some("10.1.2.3".parse().unwrap());
        let r = Reply::new(
            229,
            "Entering Blast Passive Mode (127,0,0,1,156,65) Id=5f1d3c0a9b2e4d71",
        );
        assert_eq!(
            parse_bpas_reply(&r, peer),
            Some(("127.0.0.1:40001".parse().unwrap(), 0x5f1d_3c0a_9b2e_4d71))
        );
        let r = Reply::new(229, "Entering Blast Passive Mode (0,0,0,0,156,65) Id=ff");
        assert_eq!(
            parse_bpas_reply(&r, peer),
            Some(("10.1.2.3:40001".parse().unwrap(), 0xff))
        );
        let r = Reply::new(229, "Entering Blast Passive Mode (|2|::1|5000|) Id=1");
        assert_eq!(
            parse_bpas_reply(&r, None),
            Some(("[::1]:5000".parse().unwrap(), 1))
        );
        for bad in [
            "Entering Blast Passive Mode (127,0,0,1,156) Id=1",
            "Entering Blast Passive Mode (127,0,0,1,0,0) Id=1",
            "Entering Blast Passive Mode (127,0,0,1,156,65)",
            "Entering Blast Passive Mode (127,0,0,1,156,65) Id=xyz",
            "Entering Blast Passive Mode 127,0,0,1,156,65 Id=1",
        ] {
            assert_eq!(parse_bpas_reply(&Reply::new(229, bad), None), None, "{bad}");
        }
        assert_eq!(
            parse_bpas_reply(&Reply::new(227, "(127,0,0,1,1,1) Id=1"), None),
            None
        );
        let s = Reply::new(
            150,
            "Opening BLAST data channel for RETR /f (Size=104857600;Packet=1436;).",
        );
        assert_eq!(parse_start(&s), Some((104_857_600, 1436)));
        assert_eq!(
            parse_start(&Reply::new(150, "Opening BINARY mode data connection.")),
            None
        );
        assert_eq!(parse_start(&Reply::new(150, "(Size=5;Packet=0;)")), None);
        assert_eq!(value("xSize=3 Size=4", "Size"), Some("4"));
        assert_eq!(
            bprt_line("127.0.0.1:40000".parse().unwrap(), 0xab),
            "BPRT 127,0,0,1,156,64 Id=00000000000000ab"
        );
        assert_eq!(
            bprt_line("[::1]:40000".parse().unwrap(), 1),
            "BPRT |2|::1|40000| Id=0000000000000001"
        );
        assert_eq!(
            parse_opts_mtu(&Reply::new(200, "OPTS BLAST MTU=1500;Rate=800000000;")),
            Some(1500)
        );
        assert!(offers_bprt(&Features::from_pairs([("BLAST", "BPRT")])));
        assert!(!offers_bprt(&Features::from_pairs([("BLAST", "")])));
        assert!(!offers_bprt(&Features::from_pairs([("EPSV", "BPRT")])));
    }
}
