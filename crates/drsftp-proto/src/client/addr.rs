//! Client-side data-channel addressing: parsing `227` (PASV) and `229` (EPSV) replies and formatting the
//! `PORT`/`EPRT` arguments the client sends when it listens (MODE E downloads, where the sender connects).

use super::reply::Reply;
use crate::hostport::host_port;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The command line (without CRLF) that announces a client listener: `PORT h,h,h,h,p,p` for IPv4 and
/// `EPRT |2|addr|port|` for IPv6 (RFC 2428).
pub fn port_command(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => format!("PORT {}", host_port(*a.ip(), a.port())),
        SocketAddr::V6(a) => format!("EPRT |2|{}|{}|", a.ip(), a.port()),
    }
}

/// Extracts the six numbers of a `227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)` reply. Some servers omit
/// the parentheses, so the first run of six comma-separated numbers anywhere in the text is used.
pub fn parse_pasv(reply: &Reply) -> Option<SocketAddr> {
    if reply.code != 227 {
        return None;
    }
    let text = reply.joined();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_digit()) {
            let end = text[i..]
                .find(|c: char| !(c.is_ascii_digit() || c == ',' || c == ' '))
                .map_or(text.len(), |e| i + e);
            let nums: Vec<&str> = text[i..end].split(',').map(str::trim).collect();
            if nums.len() >= 6 {
                let v: Option<Vec<u8>> = nums[..6].iter().map(|n| n.parse::<u8>().ok()).collect();
                if let Some(v) = v {
                    let ip = Ipv4Addr::new(v[0], v[1], v[2], v[3]);
                    let port = (v[4] as u16) << 8 | v[5] as u16;
                    return Some(SocketAddr::new(IpAddr::V4(ip), port));
                }
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    None
}

/// Extracts the port of a `229 Entering Extended Passive Mode (|||port|)` reply; the host is the control
/// connection's peer, which the caller supplies.
pub fn parse_epsv(reply: &Reply, control_peer: IpAddr) -> Option<SocketAddr> {
    if reply.code != 229 {
        return None;
    }
    let text = reply.text();
    let open = text.find('(')?;
    let close = text[open..].find(')')? + open;
    let inner = &text[open + 1..close];
    let delim = inner.chars().next()?;
    let parts: Vec<&str> = inner.split(delim).collect();
    // (|||port|) splits into ["", "", "", "port", ""]
    if parts.len() != 5 {
        return None;
    }
    let port: u16 = parts[3].parse().ok()?;
    if port == 0 {
        return None;
    }
    Some(SocketAddr::new(control_peer, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pasv_globus_and_bare() {
        let r = Reply::new(227, "Entering Passive Mode (127,0,0,1,146,89)");
        assert_eq!(parse_pasv(&r), Some("127.0.0.1:37465".parse().unwrap()));
        let r = Reply::new(227, "=127,0,0,1,4,1");
        assert_eq!(parse_pasv(&r), Some("127.0.0.1:1025".parse().unwrap()));
        assert_eq!(
            parse_pasv(&Reply::new(227, "Entering Passive Mode (127,0,0,1,300,1)")),
            None
        );
        assert_eq!(parse_pasv(&Reply::new(227, "nope")), None);
        assert_eq!(parse_pasv(&Reply::new(200, "(127,0,0,1,1,1)")), None);
    }

    #[test]
    fn epsv() {
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        let r = Reply::new(229, "Entering Extended Passive Mode (|||6446|)");
        assert_eq!(
            parse_epsv(&r, peer),
            Some("127.0.0.1:6446".parse().unwrap())
        );
        assert_eq!(parse_epsv(&Reply::new(229, "Entering (|||0|)"), peer), None);
        assert_eq!(parse_epsv(&Reply::new(229, "Entering (|||x|)"), peer), None);
    }

    #[test]
    fn port_commands() {
        assert_eq!(
            port_command("127.0.0.1:60201".parse().unwrap()),
            "PORT 127,0,0,1,235,41"
        );
        assert_eq!(
            port_command("[::1]:2811".parse().unwrap()),
            "EPRT |2|::1|2811|"
        );
    }
}
