//! Interface offload state (TSO, GSO, GRO) through the legacy ethtool ioctls, and the interface that holds a
//! local address, for `drsftp doctor`. Any socket serves as the ioctl handle.

use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_GGRO: u32 = 0x2b;

/// `struct ethtool_value`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `struct ifreq` with the `ifr_data` member of its union (40 bytes on 64-bit Linux).
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: *mut EthtoolValue,
    _pad: [u8; 16],
}

/// Offloads on one interface; `None` where the driver does not answer (loopback and veth answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offloads {
    pub tso: Option<bool>,
    pub gso: Option<bool>,
    pub gro: Option<bool>,
}

fn get(sock: &std::net::UdpSocket, name: &str, cmd: u32) -> io::Result<bool> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name",
        ));
    }
    let mut value = EthtoolValue { cmd, data: 0 };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: &mut value,
        _pad: [0; 16],
    };
    req.name[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: the fd is a live socket; `req` is a valid ifreq whose data pointer names `value`, an
    // ethtool_value that outlives the call; the kernel writes only `value.data`.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req as *mut IfReq) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value.data != 0)
}

/// TSO, GSO and GRO state of interface `name`.
pub fn offloads(name: &str) -> io::Result<Offloads> {
    let sock = std::net::UdpSocket::bind("0.0.0.0:0")?;
    Ok(Offloads {
        tso: get(&sock, name, ETHTOOL_GTSO).ok(),
        gso: get(&sock, name, ETHTOOL_GGSO).ok(),
        gro: get(&sock, name, ETHTOOL_GGRO).ok(),
    })
}

/// The name of the interface that holds local address `ip`.
pub fn interface_of(ip: IpAddr) -> Option<String> {
    nix::ifaddrs::getifaddrs().ok()?.find_map(|a| {
        let sa = a.address?;
        let got = if let Some(v4) = sa.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else {
            IpAddr::V6(sa.as_sockaddr_in6()?.ip())
        };
        (got == ip).then_some(a.interface_name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_found_and_answers() {
        assert_eq!(
            interface_of(IpAddr::from([127, 0, 0, 1])).as_deref(),
            Some("lo")
        );
        // lo always does GSO/GRO in software; the ioctl answers for it.
        let o = offloads("lo").unwrap();
        assert!(o.gso.is_some() && o.gro.is_some(), "{o:?}");
        assert!(offloads("no-such-if0").unwrap().gso.is_none());
        assert!(offloads("").is_ok_and(|o| o.gso.is_none()));
    }
}
