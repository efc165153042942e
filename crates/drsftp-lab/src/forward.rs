//! The real-time packet forwarder: reads IPv4 packets (optionally GSO super-packets with a virtio-net header) from
//! each host's TUN device, passes them through the lab's links (`fabric.rs`: by default one `drsftp_netem::Link`
//! per (source, destination) pair; with a shared core, access links and a core link) driven by the real clock,
//! and writes them to the destination host's TUN when the last link delivers them.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drsftp_netem::{LinkConfig, LinkStats, Profile};
use drsftp_sys::tun::{Tun, VirtioNetHdr, VNET_HDR_LEN};

use crate::fabric::{Fabric, Topology};
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::time::TimeSpec;

/// Counters of the forwarder as a whole plus every link, published a few times per second.
#[derive(Debug, Clone, Default)]
pub struct ForwarderStats {
    /// `links[src][dst]` (0-based host indices; the diagonal stays zero); empty with a shared core.
    pub links: Vec<Vec<LinkStats>>,
    /// With a shared core ([`Topology::SharedCore`]): every access and core link by name; empty for a mesh.
    pub named: Vec<(String, LinkStats)>,
    /// Packets read from TUN devices (GSO super-packets count once).
    pub read_pkts: u64,
    /// GSO super-packets among them.
    pub gso_pkts: u64,
    /// Packets not routable to a lab host (non-IPv4, foreign destination).
    pub unroutable_pkts: u64,
    /// Writes to a TUN that failed.
    pub write_errors: u64,
    /// Main-loop iterations (a measure of wakeups).
    pub loops: u64,
}

impl ForwarderStats {
    /// Sum over all links (with a shared core a packet counts once per link it crosses).
    pub fn total(&self) -> LinkStats {
        let mut t = LinkStats::default();
        for s in self
            .links
            .iter()
            .flatten()
            .chain(self.named.iter().map(|(_, s)| s))
        {
            t.sent_pkts += s.sent_pkts;
            t.sent_bytes += s.sent_bytes;
            t.delivered_pkts += s.delivered_pkts;
            t.delivered_bytes += s.delivered_bytes;
            t.dropped_queue_pkts += s.dropped_queue_pkts;
            t.dropped_queue_bytes += s.dropped_queue_bytes;
            t.dropped_loss_pkts += s.dropped_loss_pkts;
            t.dropped_loss_bytes += s.dropped_loss_bytes;
            t.duplicated_pkts += s.duplicated_pkts;
            t.reordered_pkts += s.reordered_pkts;
            t.max_backlog_bytes = t.max_backlog_bytes.max(s.max_backlog_bytes);
        }
        t
    }
}

/// Wire size of one packet (without vnet header) for link accounting: a GSO super-packet counts as the segments it
/// stands for, i.e. payload plus one copy of the IP+TCP headers per segment.
pub fn wire_len(vnet: Option<&VirtioNetHdr>, ip: &[u8]) -> usize {
    let Some(h) = vnet.filter(|h| h.is_gso()) else {
        return ip.len();
    };
    let hdr = ip_tcp_header_len(ip).unwrap_or(h.hdr_len as usize);
    if hdr == 0 || hdr >= ip.len() {
        return ip.len();
    }
    let payload = ip.len() - hdr;
    let segs = payload.div_ceil(h.gso_size as usize).max(1);
    payload + segs * hdr
}

fn ip_tcp_header_len(ip: &[u8]) -> Option<usize> {
    if ip.first()? >> 4 != 4 {
        return None;
    }
    let ihl = (ip[0] & 0x0f) as usize * 4;
    let doff = (*ip.get(ihl + 12)? >> 4) as usize * 4;
    Some(ihl + doff)
}

/// Destination host index (0-based) of an IPv4 packet in `net` (first three octets) with host part 1..=n.
pub fn route(ip: &[u8], net: [u8; 3], n: usize) -> Option<usize> {
    if ip.len() < 20 || ip[0] >> 4 != 4 || ip[16..19] != net {
        return None;
    }
    let h = ip[19] as usize;
    (1..=n).contains(&h).then(|| h - 1)
}

/// Deliveries closer than this are awaited by polling without sleeping.
const SPIN: Duration = Duration::from_micros(150);

/// Everything the forwarder thread needs.
pub struct ForwarderSpec {
    pub tuns: Vec<Tun>,
    /// Per-direction link configuration (each pair's, or the core's); seeds are mixed per link.
    pub link: LinkConfig,
    /// How the hosts are joined.
    pub topology: Topology,
    pub profile: Option<Profile>,
    pub net: [u8; 3],
}

/// Run until `stop` is set. Publishes stats into `out` every ~200 ms and on exit.
pub fn run(
    spec: ForwarderSpec,
    stop: Arc<AtomicBool>,
    out: Arc<Mutex<ForwarderStats>>,
) -> io::Result<()> {
    let _ = nix::sys::prctl::set_timerslack(1_000);
    let n = spec.tuns.len();
    let vnet = spec.tuns.first().map(|t| t.vnet_hdr()).unwrap_or(false);
    let hdr_len = if vnet { VNET_HDR_LEN } else { 0 };
    for t in &spec.tuns {
        t.set_nonblocking(true)?;
    }
    let t0 = Instant::now();
    let mut fabric: Fabric<Box<[u8]>> =
        Fabric::new(spec.topology, n, &spec.link, spec.profile.as_ref(), t0);
    let mut st = ForwarderStats::default();
    let mut buf = vec![0u8; 65_536 + VNET_HDR_LEN + 256];
    let mut last_pub = t0;
    while !stop.load(Ordering::Relaxed) {
        st.loops += 1;
        // 1. Deliver everything due.
        let now = Instant::now();
        let mut errors = 0;
        let next = fabric.poll(now, |dst, p| {
            if spec.tuns[dst].write(&p).is_err() {
                errors += 1;
            }
        });
        st.write_errors += errors;
        // 2. Wait for input or the next delivery (at most 100 ms so `stop` is noticed).
        let now = Instant::now();
        let wait = next
            .map_or(Duration::from_millis(100), |t| {
                t.saturating_duration_since(now)
            })
            .min(Duration::from_millis(100));
        // Sleep until shortly before the next delivery, then poll without sleeping (busy-ish) so wakeup latency
        // does not add to the emulated delay.
        let wait = wait.saturating_sub(SPIN);
        {
            let mut fds: Vec<PollFd> = spec
                .tuns
                .iter()
                .map(|t| PollFd::new(t.as_fd_borrow(), PollFlags::POLLIN))
                .collect();
            match ppoll(&mut fds, Some(TimeSpec::from_duration(wait)), None) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // 3. Read a bounded batch from every device.
        for (src, tun) in spec.tuns.iter().enumerate() {
            for _ in 0..64 {
                let len = match tun.read(&mut buf) {
                    Ok(l) => l,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                if len <= hdr_len {
                    continue;
                }
                st.read_pkts += 1;
                let (h, ip) = buf[..len].split_at(hdr_len);
                let vh = if vnet { VirtioNetHdr::parse(h) } else { None };
                let Some(dst) = route(ip, spec.net, n).filter(|&d| d != src) else {
                    st.unroutable_pkts += 1;
                    continue;
                };
                if vh.map(|v| v.is_gso()).unwrap_or(false) {
                    st.gso_pkts += 1;
                }
                let wl = wire_len(vh.as_ref(), ip);
                let pkt: Box<[u8]> = buf[..len].into();
                fabric.send(Instant::now(), src, dst, wl, pkt);
            }
        }
        if now.duration_since(last_pub) > Duration::from_millis(200) {
            last_pub = now;
            publish(&fabric, &mut st, &out);
        }
    }
    publish(&fabric, &mut st, &out);
    Ok(())
}

fn publish(fabric: &Fabric<Box<[u8]>>, st: &mut ForwarderStats, out: &Mutex<ForwarderStats>) {
    st.links = fabric.pair_stats();
    st.named = fabric.named_stats();
    if let Ok(mut o) = out.lock() {
        *o = st.clone();
    }
}

trait AsFdBorrow {
    fn as_fd_borrow(&self) -> std::os::fd::BorrowedFd<'_>;
}
impl AsFdBorrow for Tun {
    fn as_fd_borrow(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_tcp(total: usize, dst_host: u8) -> Vec<u8> {
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[9] = 6;
        p[16..20].copy_from_slice(&[198, 18, 0, dst_host]);
        p[20 + 12] = 8 << 4; // 32-byte TCP header (timestamps)
        p
    }

    #[test]
    fn routes_only_lab_hosts() {
        assert_eq!(route(&ipv4_tcp(60, 2), [198, 18, 0], 4), Some(1));
        assert_eq!(route(&ipv4_tcp(60, 5), [198, 18, 0], 4), None);
        assert_eq!(route(&ipv4_tcp(60, 0), [198, 18, 0], 4), None);
        let mut v6 = ipv4_tcp(60, 2);
        v6[0] = 0x60;
        assert_eq!(route(&v6, [198, 18, 0], 4), None);
    }

    #[test]
    fn gso_wire_length_counts_headers_per_segment() {
        let p = ipv4_tcp(52 + 1448 * 10 + 100, 2);
        let h = VirtioNetHdr {
            gso_type: 1,
            gso_size: 1448,
            hdr_len: 52,
            ..Default::default()
        };
        // 11 segments (10 full + one of 100 B), each with 52 B of headers.
        assert_eq!(wire_len(Some(&h), &p), 1448 * 10 + 100 + 11 * 52);
        assert_eq!(wire_len(None, &p), p.len());
        assert_eq!(wire_len(Some(&VirtioNetHdr::default()), &p), p.len());
    }
}
