//! Client-side data-channel addressing: parsing `227` (PASV), `229` (EPSV) and striped `229` (SPAS) replies and
//! formatting the `PORT`/`EPRT`/`SPOR` arguments the client sends when it listens (MODE E downloads, where the
//! sender connects).

use super::reply::Reply;
use crate::hostport::{host_port, host_port_any};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The command line (without CRLF) that announces a client listener: `PORT h,h,h,h,p,p` for IPv4 and
/// `EPRT |2|addr|port|` for IPv6 (RFC 2428).
pub fn port_command(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => format!("PORT {}", host_port(*a.ip(), a.port())),
        SocketAddr::V6(a) => format!("EPRT |2|{}|{}|", a.ip(), a.port()),
    }
}

/// Most stripes a SPAS reply may name: a server with more data movers than this is refused rather than given
/// that many listeners and connections of ours.
pub const MAX_STRIPES: usize = 64;

/// `SPOR a b ...` for striped listeners (GFD.20), host-port for IPv4 (`|2|addr|port|` for IPv6).
pub fn spor_command(addrs: &[SocketAddr]) -> String {
    let mut s = String::from("SPOR");
    for a in addrs {
        s.push(' ');
        s.push_str(&host_port_any(*a));
    }
    s
}

/// The stripe addresses of a `229-Entering Striped Passive Mode` reply: one ` h1,h2,h3,h4,p1,p2` per line
/// between the first and the closing `229 End` (GFD.20). `None` unless every such line is one valid address with a non-zero port and there are
/// 1 to [`MAX_STRIPES`] of them.
pub fn parse_spas(reply: &Reply) -> Option<Vec<SocketAddr>> {
    if reply.code != 229 {
        return None;
    }
    // The first line is the text after `229-`, the last the closing `229 End` line's.
    let inner = reply.lines.get(1..reply.lines.len().saturating_sub(1))?;
    let addrs = inner
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .map(parse_host_port)
        .collect::<Option<Vec<_>>>()?;
    (!addrs.is_empty() && addrs.len() <= MAX_STRIPES).then_some(addrs)
}

/// `h1,h2,h3,h4,p1,p2` exactly (RFC 959 host-port), port not 0.
fn parse_host_port(s: &str) -> Option<SocketAddr> {
    let v = s
        .split(',')
        .map(|n| n.trim().parse::<u8>().ok())
        .collect::<Option<Vec<u8>>>()?;
    if v.len() != 6 {
        return None;
    }
    let port = (v[4] as u16) << 8 | v[5] as u16;
    (port != 0).then(|| SocketAddr::new(IpAddr::V4(Ipv4Addr::new(v[0], v[1], v[2], v[3])), port))
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
    fn spas_globus_reply() {
        let r = Reply {
            code: 229,
            lines: vec![
                "Entering Striped Passive Mode.".into(),
                " 127,0,0,3,206,115".into(),
                " 127,0,0,2,184,251".into(),
                "End".into(),
            ],
        };
        assert_eq!(
            parse_spas(&r),
            Some(vec![
                "127.0.0.3:52851".parse().unwrap(),
                "127.0.0.2:47355".parse().unwrap()
            ])
        );
        let bad = |l: &str| Reply {
            code: 229,
            lines: vec![
                "Entering Striped Passive Mode.".into(),
                l.into(),
                "End".into(),
            ],
        };
        assert_eq!(parse_spas(&bad(" 127,0,0,3,0,0")), None, "port 0");
        assert_eq!(parse_spas(&bad(" 127,0,0,300,1,1")), None);
        assert_eq!(parse_spas(&bad(" 127,0,0,3,1")), None);
        assert_eq!(parse_spas(&bad(" 127,0,0,3,1,1 x")), None);
        assert_eq!(parse_spas(&Reply::new(229, "Entering")), None, "no stripe");
        let many = Reply {
            code: 229,
            lines: std::iter::once("x".to_string())
                .chain((0..=MAX_STRIPES).map(|i| format!(" 10,0,0,{},1,1", i % 250)))
                .chain(std::iter::once("End".to_string()))
                .collect(),
        };
        assert_eq!(parse_spas(&many), None, "more stripes than MAX_STRIPES");
        assert_eq!(
            spor_command(&[
                "127.0.0.1:1025".parse().unwrap(),
                "[::1]:7".parse().unwrap()
            ]),
            "SPOR 127,0,0,1,4,1 |2|::1|7|"
        );
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
