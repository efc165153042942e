//! Data-channel address text both sides write: RFC 959 host-port (`h1,h2,h3,h4,p1,p2`: the client's PORT and
//! BPAS/BPRT arguments, the server's `227` PASV and SPAS replies) and its IPv6 stand-in, RFC 2428's
//! `|2|addr|port|` (BPAS/BPRT arguments and the blast `229` reply). One formatter, so the client and the server
//! cannot drift apart.

use std::net::{Ipv4Addr, SocketAddr};

/// `h1,h2,h3,h4,p1,p2` (RFC 959 host-port).
pub(crate) fn host_port(ip: Ipv4Addr, port: u16) -> String {
    let o = ip.octets();
    format!(
        "{},{},{},{},{},{}",
        o[0],
        o[1],
        o[2],
        o[3],
        port >> 8,
        port & 0xff
    )
}

/// [`host_port`] for IPv4, `|2|addr|port|` for IPv6: an address argument that takes either family.
pub(crate) fn host_port_any(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => host_port(*a.ip(), a.port()),
        SocketAddr::V6(a) => format!("|2|{}|{}|", a.ip(), a.port()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_families() {
        assert_eq!(
            host_port(Ipv4Addr::new(192, 168, 1, 2), 0x9c41),
            "192,168,1,2,156,65"
        );
        assert_eq!(
            host_port_any("10.0.0.1:21".parse().unwrap()),
            "10,0,0,1,0,21"
        );
        assert_eq!(
            host_port_any("[2001:db8::1]:40000".parse().unwrap()),
            "|2|2001:db8::1|40000|"
        );
    }
}
