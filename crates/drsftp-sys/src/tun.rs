//! TUN devices: open, configure (IFF_TUN, IFF_NO_PI, IFF_VNET_HDR, offloads), batch read and write.
//!
//! With `vnet_hdr`, every packet read or written is preceded by a 10-byte `virtio_net_hdr`; after
//! [`Tun::set_offload`] with TSO flags the kernel may hand out TCP super-packets of up to 64 KiB (GSO), which can be
//! written whole to another vnet-hdr TUN (the header tells the receiving kernel how to segment/checksum them).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

const IFF_TUN: i16 = 0x0001;
const IFF_NO_PI: i16 = 0x1000;
const IFF_VNET_HDR: i16 = 0x4000;
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;

/// Offload flags for [`Tun::set_offload`] (`TUN_F_*`).
pub const TUN_F_CSUM: u32 = 0x01;
pub const TUN_F_TSO4: u32 = 0x02;
pub const TUN_F_TSO6: u32 = 0x04;
pub const TUN_F_TSO_ECN: u32 = 0x08;

/// Length of the virtio-net header used with `IFF_VNET_HDR` (no mergeable buffers).
pub const VNET_HDR_LEN: usize = 10;

/// `virtio_net_hdr` flag: the checksum is partial (csum_start/csum_offset valid).
pub const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
/// `virtio_net_hdr` gso types.
pub const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
pub const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
pub const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
pub const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

/// Decoded `virtio_net_hdr` (little-endian fields as used by TUN on little-endian hosts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VirtioNetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VirtioNetHdr {
    /// Parse the first [`VNET_HDR_LEN`] bytes of `b`.
    pub fn parse(b: &[u8]) -> Option<VirtioNetHdr> {
        if b.len() < VNET_HDR_LEN {
            return None;
        }
        let u = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(VirtioNetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    /// Encode into 10 bytes.
    pub fn encode(&self) -> [u8; VNET_HDR_LEN] {
        let mut o = [0u8; VNET_HDR_LEN];
        o[0] = self.flags;
        o[1] = self.gso_type;
        o[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        o[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        o[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        o[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        o
    }

    /// True if this describes a GSO super-packet.
    pub fn is_gso(&self) -> bool {
        self.gso_type & !VIRTIO_NET_HDR_GSO_ECN != VIRTIO_NET_HDR_GSO_NONE && self.gso_size > 0
    }
}

#[repr(C)]
struct IfReqFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// An open TUN device (layer 3, no packet-information prefix).
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
    vnet_hdr: bool,
}

/// Check that /dev/net/tun exists and can be opened; the error says what is missing.
pub fn check_tun_available() -> Result<(), String> {
    match std::fs::OpenOptions::new().read(true).write(true).open("/dev/net/tun") {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err("/dev/net/tun does not exist (no TUN support: load the `tun` module or run with --device /dev/net/tun)".into())
        }
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            Err("cannot open /dev/net/tun: permission denied (needs root / CAP_NET_ADMIN)".into())
        }
        Err(e) => Err(format!("cannot open /dev/net/tun: {e}")),
    }
}

impl Tun {
    /// Create (or attach to) TUN device `name` in the *calling thread's* network namespace. With `vnet_hdr`, packets
    /// carry a 10-byte virtio-net header. The fd is opened close-on-exec.
    pub fn open(name: &str, vnet_hdr: bool) -> io::Result<Tun> {
        if name.len() >= libc::IFNAMSIZ || name.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "TUN name must be 1..15 bytes",
            ));
        }
        // SAFETY: plain open(2) of a NUL-terminated path; the fd is owned immediately.
        let raw = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a fresh valid fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = IfReqFlags {
            name: [0; libc::IFNAMSIZ],
            flags: IFF_TUN | IFF_NO_PI,
            _pad: [0; 22],
        };
        if vnet_hdr {
            req.flags |= IFF_VNET_HDR;
        }
        for (d, s) in req.name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        // SAFETY: TUNSETIFF reads/writes an ifreq, which IfReqFlags lays out (name[16] + short + padding to 40).
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel NUL-terminates the name within IFNAMSIZ.
        let got = unsafe { CStr::from_ptr(req.name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let tun = Tun {
            fd,
            name: got,
            vnet_hdr,
        };
        if vnet_hdr {
            let sz: libc::c_int = VNET_HDR_LEN as libc::c_int;
            // SAFETY: TUNSETVNETHDRSZ reads one int.
            if unsafe { libc::ioctl(tun.fd.as_raw_fd(), TUNSETVNETHDRSZ as _, &sz) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(tun)
    }

    /// Tell the kernel which offloads we accept on read (`TUN_F_*`); needs a vnet-hdr device for TSO.
    pub fn set_offload(&self, flags: u32) -> io::Result<()> {
        // SAFETY: TUNSETOFFLOAD takes the flags as the ioctl argument value.
        if unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                TUNSETOFFLOAD as _,
                flags as libc::c_ulong,
            )
        } < 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Switch O_NONBLOCK on or off.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: fcntl F_GETFL/F_SETFL on an fd we own.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl < 0 {
                return Err(io::Error::last_os_error());
            }
            let fl = if on {
                fl | libc::O_NONBLOCK
            } else {
                fl & !libc::O_NONBLOCK
            };
            if libc::fcntl(fd, libc::F_SETFL, fl) < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Interface name the kernel assigned.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether packets carry a virtio-net header.
    pub fn vnet_hdr(&self) -> bool {
        self.vnet_hdr
    }

    /// Read one packet (with its vnet header if enabled). `WouldBlock` when empty in non-blocking mode.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for writes of buf.len() bytes.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Write one packet (with its vnet header if enabled).
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for reads of buf.len() bytes.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Write a packet given as vnet header + payload without copying them together (writev).
    pub fn write2(&self, hdr: &[u8], pkt: &[u8]) -> io::Result<usize> {
        let iov = [
            libc::iovec {
                iov_base: hdr.as_ptr() as *mut _,
                iov_len: hdr.len(),
            },
            libc::iovec {
                iov_base: pkt.as_ptr() as *mut _,
                iov_len: pkt.len(),
            },
        ];
        // SAFETY: both iovecs point at live slices for their stated lengths.
        let n = unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

impl AsFd for Tun {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vnet_header_roundtrip() {
        let h = VirtioNetHdr {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            gso_type: VIRTIO_NET_HDR_GSO_TCPV4,
            hdr_len: 52,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        assert_eq!(VirtioNetHdr::parse(&h.encode()), Some(h));
        assert!(h.is_gso());
        assert!(!VirtioNetHdr::default().is_gso());
    }

    #[test]
    fn open_tun_or_skip() {
        if let Err(why) = check_tun_available() {
            eprintln!("SKIP open_tun_or_skip: {why}");
            return;
        }
        // Opening without a name lets the kernel pick one only with "%d" patterns; use a unique name and let the
        // device vanish when the fd closes (non-persistent).
        let name = format!("drst{}", std::process::id() % 100_000);
        match Tun::open(&name, true) {
            Ok(t) => {
                assert_eq!(t.name(), name);
                assert!(t.vnet_hdr());
                t.set_offload(TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6).unwrap();
                t.set_nonblocking(true).unwrap();
                let mut buf = [0u8; 2048];
                // Interface is down: nothing to read.
                assert_eq!(
                    t.read(&mut buf).unwrap_err().kind(),
                    io::ErrorKind::WouldBlock
                );
            }
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                eprintln!("SKIP open_tun_or_skip: TUNSETIFF: {e}")
            }
            Err(e) => panic!("TUN open failed: {e}"),
        }
    }
}
