//! Counting listening TCP sockets from `/proc/net/tcp{,6}` (Linux), so tests can prove a server leaves no data
//! listener behind. Counted by local address rather than by process: give the server under test a loopback
//! address of its own (e.g. 127.0.0.77) and parallel tests in the same process do not disturb the count.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// TCP sockets in LISTEN state bound to `ip` (any port), in this network namespace.
pub fn listening_on(ip: IpAddr) -> usize {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[3] == "0A" && local_ip(f[1]) == Some(ip)
        })
        .count()
}

/// The address of a `/proc/net/tcp` `local_address` field (`0100007F:0B03`: the IP's 32-bit words in host
/// byte order, little-endian here).
fn local_ip(field: &str) -> Option<IpAddr> {
    let hex = field.split(':').next()?;
    let words: Vec<u32> = (0..hex.len() / 8)
        .map(|i| u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16).ok())
        .collect::<Option<_>>()?;
    match words.as_slice() {
        [a] => Some(IpAddr::V4(Ipv4Addr::from(a.swap_bytes()))),
        [a, b, c, d] => {
            let mut o = [0u8; 16];
            for (i, w) in [a, b, c, d].iter().enumerate() {
                o[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
            }
            Some(IpAddr::V6(Ipv6Addr::from(o)).to_canonical())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_a_listener_on_its_own_address() {
        let ip = "127.0.0.78".parse().unwrap();
        let before = super::listening_on(ip);
        let l = std::net::TcpListener::bind("127.0.0.78:0").unwrap();
        assert_eq!(super::listening_on(ip), before + 1);
        drop(l);
        assert_eq!(super::listening_on(ip), before);
    }
}
