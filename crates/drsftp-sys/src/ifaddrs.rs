//! The host's own interface addresses (getifaddrs), for the server's bounce check: a third-party data address
//! naming the server itself is refused.

use std::net::IpAddr;

/// Every address configured on this host's interfaces, IPv4 and IPv6, loopback included; empty if the kernel
/// will not say (the caller's other checks still hold).
pub fn local_addrs() -> Vec<IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let mut out: Vec<IpAddr> = addrs
        .filter_map(|a| {
            let sa = a.address?;
            if let Some(v4) = sa.as_sockaddr_in() {
                Some(IpAddr::V4(v4.ip()))
            } else {
                sa.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_among_them() {
        let a = local_addrs();
        assert!(a.contains(&IpAddr::from([127, 0, 0, 1])), "{a:?}");
    }
}
