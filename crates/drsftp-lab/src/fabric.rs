//! How the lab's hosts are joined ([`Topology`]) and the links a packet crosses on its way ([`Fabric`]): the
//! default mesh gives every ordered host pair its own link; the shared-core topology gives every host its own
//! access link each way (the per-host cap, no delay) and sends all traffic between the two sites through one
//! core link per direction (the path's delay, rate, queue and loss), so that N hosts on each side really share
//! one WAN bottleneck. Sans-IO like the links themselves: the forwarder feeds packets and `now` in and writes
//! out what [`Fabric::poll`] hands it.

use std::time::{Duration, Instant};

use drsftp_netem::{Link, LinkConfig, LinkStats, LossModel, Profile, QueueLimit};

/// How the hosts are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Topology {
    /// Every ordered host pair has its own link (`LabConfig::link`). The default.
    #[default]
    Mesh,
    /// Hosts `1..=site_a` are site A, the rest site B. Each host has an access link up and one down of
    /// `access_bps` (no delay, no loss; a drop-tail queue of the lab's queue setting taken at the path's RTT);
    /// traffic between the sites also crosses the one core link of its direction (`LabConfig::link`: delay, rate,
    /// queue, loss and any profile). Traffic within a site crosses only the two access links.
    SharedCore {
        /// Access link rate per host and direction, bit/s (0: unlimited).
        access_bps: u64,
        /// Hosts on site A (the first ones); at least 1 and fewer than the lab's hosts.
        site_a: usize,
    },
}

/// One packet in flight through the fabric.
#[derive(Debug, Clone)]
struct Hop<P> {
    /// Destination host (0-based).
    dst: usize,
    /// Link indices to cross, and which one it is in now.
    path: [usize; 3],
    len: u8,
    at: u8,
    /// Wire length for the links' accounting.
    wire: usize,
    pkt: P,
}

/// The links of a lab and the path between any two hosts.
pub struct Fabric<P> {
    topology: Topology,
    n: usize,
    links: Vec<Option<Link<Hop<P>>>>,
}

impl<P: Clone> Fabric<P> {
    /// The links of `n` hosts joined as `topology`; `link` is a mesh pair's or the core's, `profile` (if any)
    /// drives those. Seeds are mixed per link.
    pub fn new(
        topology: Topology,
        n: usize,
        link: &LinkConfig,
        profile: Option<&Profile>,
        t0: Instant,
    ) -> Self {
        let make = |cfg: LinkConfig, id: u64, profiled: bool| {
            let mut c = cfg;
            c.seed = link.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ id;
            match profile.filter(|_| profiled) {
                Some(p) => Link::with_profile(c, p.clone(), t0),
                None => Link::new(c, t0),
            }
        };
        let links = match topology {
            Topology::Mesh => (0..n * n)
                .map(|i| {
                    let (s, d) = (i / n, i % n);
                    (s != d).then(|| make(link.clone(), (s as u64) << 32 | d as u64, true))
                })
                .collect(),
            Topology::SharedCore { access_bps, .. } => {
                let access = access_link(link, access_bps);
                // 0..n: up (host → fabric), n..2n: down (fabric → host), 2n: core A→B, 2n+1: core B→A.
                (0..2 * n + 2)
                    .map(|i| {
                        Some(if i < 2 * n {
                            make(access.clone(), 1 << 40 | i as u64, false)
                        } else {
                            make(link.clone(), 2 << 40 | i as u64, true)
                        })
                    })
                    .collect()
            }
        };
        Fabric { topology, n, links }
    }

    /// The links a packet from `src` to `dst` (0-based, different) crosses, in order.
    fn path(&self, src: usize, dst: usize) -> ([usize; 3], u8) {
        let n = self.n;
        match self.topology {
            Topology::Mesh => ([src * n + dst, 0, 0], 1),
            Topology::SharedCore { site_a, .. } => {
                let (a_src, a_dst) = (src < site_a, dst < site_a);
                match (a_src, a_dst) {
                    (true, false) => ([src, 2 * n, n + dst], 3),
                    (false, true) => ([src, 2 * n + 1, n + dst], 3),
                    _ => ([src, n + dst, 0], 2),
                }
            }
        }
    }

    /// A packet of `wire` bytes on the wire from host `src` to host `dst` (0-based) enters the fabric at `now`.
    pub fn send(&mut self, now: Instant, src: usize, dst: usize, wire: usize, pkt: P) {
        let (path, len) = self.path(src, dst);
        let hop = Hop {
            dst,
            path,
            len,
            at: 0,
            wire,
            pkt,
        };
        if let Some(l) = &mut self.links[path[0]] {
            l.handle_send(now, wire, hop);
        }
    }

    /// Moves every packet due by `now` on to its next link, hands those that arrived to `deliver(dst, pkt)`,
    /// and returns when the next one is due.
    pub fn poll(&mut self, now: Instant, mut deliver: impl FnMut(usize, P)) -> Option<Instant> {
        // Passing a packet on may make an earlier link index due now: repeat until nothing moves.
        loop {
            let mut moved = false;
            for i in 0..self.links.len() {
                while let Some(mut h) = self.links[i].as_mut().and_then(|l| l.poll_deliver(now)) {
                    h.at += 1;
                    if h.at < h.len {
                        let next = h.path[h.at as usize];
                        if let Some(l) = &mut self.links[next] {
                            let wire = h.wire;
                            l.handle_send(now, wire, h);
                            moved = true;
                        }
                    } else {
                        deliver(h.dst, h.pkt);
                    }
                }
            }
            if !moved {
                break;
            }
        }
        self.links
            .iter()
            .flatten()
            .filter_map(Link::poll_timeout)
            .min()
    }

    /// Mesh: `m[src][dst]` of every pair's link (the diagonal zero); empty for a shared core.
    pub fn pair_stats(&self) -> Vec<Vec<LinkStats>> {
        let n = self.n;
        match self.topology {
            Topology::Mesh => (0..n)
                .map(|s| {
                    (0..n)
                        .map(|d| {
                            self.links[s * n + d]
                                .as_ref()
                                .map(|l| *l.stats())
                                .unwrap_or_default()
                        })
                        .collect()
                })
                .collect(),
            Topology::SharedCore { .. } => Vec::new(),
        }
    }

    /// Shared core: each link by name (`h1 up`, `h3 down`, `core A->B`, `core B->A`); empty for a mesh.
    pub fn named_stats(&self) -> Vec<(String, LinkStats)> {
        let n = self.n;
        match self.topology {
            Topology::Mesh => Vec::new(),
            Topology::SharedCore { .. } => self
                .links
                .iter()
                .enumerate()
                .filter_map(|(i, l)| {
                    let name = match i {
                        i if i < n => format!("h{} up", i + 1),
                        i if i < 2 * n => format!("h{} down", i - n + 1),
                        i if i == 2 * n => "core A->B".to_string(),
                        _ => "core B->A".to_string(),
                    };
                    Some((name, *l.as_ref()?.stats()))
                })
                .collect(),
        }
    }
}

/// An access link of `rate_bps`: no delay, no loss or other randomness, and a drop-tail queue as the core's
/// setting reads at the path's RTT (a `Bdp` queue on a zero-delay link would be one packet).
fn access_link(core: &LinkConfig, rate_bps: u64) -> LinkConfig {
    let queue = match core.queue {
        QueueLimit::Bdp(_) => core
            .queue
            .bytes(rate_bps, core.delay)
            .map_or(QueueLimit::Unlimited, QueueLimit::Bytes),
        q => q,
    };
    let mut c = LinkConfig::new(Duration::ZERO, rate_bps);
    c.queue = queue;
    c.loss = LossModel::None;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `count` packets of `size` bytes from `src` to `dst` at `t0` and runs the fabric until all are
    /// delivered; returns when the last one arrived (relative to `t0`) and how many arrived.
    fn drain(
        f: &mut Fabric<u32>,
        t0: Instant,
        flows: &[(usize, usize)],
        count: u32,
        size: usize,
    ) -> (Duration, Vec<u32>) {
        for i in 0..count {
            for &(s, d) in flows {
                f.send(t0, s, d, size, i);
            }
        }
        let mut got = vec![0u32; 8];
        let mut now = t0;
        let mut last = t0;
        while let Some(next) = f.poll(now, |d, _| got[d] += 1) {
            now = next.max(now);
            last = now;
        }
        f.poll(now, |d, _| got[d] += 1);
        (last - t0, got)
    }

    #[test]
    fn shared_core_paths_and_rates() {
        let t0 = Instant::now();
        let mut core = LinkConfig::new(Duration::from_millis(10), 100_000_000);
        core.queue = QueueLimit::Unlimited;
        let topo = Topology::SharedCore {
            access_bps: 80_000_000,
            site_a: 2,
        };
        // One flow A→B: the access link (80 Mbit/s) is the cap; 1000 × 1000 B = 8 Mbit ≈ 100 ms + 10 ms delay.
        let mut f: Fabric<u32> = Fabric::new(topo, 4, &core, None, t0);
        let (t, got) = drain(&mut f, t0, &[(0, 2)], 1000, 1000);
        assert_eq!(got[2], 1000);
        let ms = t.as_secs_f64() * 1e3;
        assert!((109.0..=112.0).contains(&ms), "{ms} ms");
        // Two flows from two site-A hosts to two site-B hosts share the 100 Mbit/s core: 16 Mbit ≈ 160 ms.
        let mut f: Fabric<u32> = Fabric::new(topo, 4, &core, None, t0);
        let (t, got) = drain(&mut f, t0, &[(0, 2), (1, 3)], 1000, 1000);
        assert_eq!((got[2], got[3]), (1000, 1000));
        let ms = t.as_secs_f64() * 1e3;
        assert!((169.0..=172.0).contains(&ms), "{ms} ms");
        let named = f.named_stats();
        let core_ab = named.iter().find(|(n, _)| n == "core A->B").unwrap().1;
        assert_eq!(core_ab.delivered_pkts, 2000);
        assert!(f.pair_stats().is_empty());
        // Within a site: only the access links, no core delay.
        let mut f: Fabric<u32> = Fabric::new(topo, 4, &core, None, t0);
        let (t, got) = drain(&mut f, t0, &[(0, 1)], 10, 1000);
        assert_eq!(got[1], 10);
        assert!(t < Duration::from_millis(5), "{t:?}");
        let core_ab = f
            .named_stats()
            .iter()
            .find(|(n, _)| n == "core A->B")
            .unwrap()
            .1;
        assert_eq!(core_ab.sent_pkts, 0);
    }

    #[test]
    fn mesh_gives_each_pair_its_own_link() {
        let t0 = Instant::now();
        let mut link = LinkConfig::new(Duration::from_millis(10), 100_000_000);
        link.queue = QueueLimit::Unlimited;
        let mut f: Fabric<u32> = Fabric::new(Topology::Mesh, 4, &link, None, t0);
        // Two pairs do not share: both finish as one alone would (8 Mbit at 100 Mbit/s + 10 ms).
        let (t, got) = drain(&mut f, t0, &[(0, 2), (1, 3)], 1000, 1000);
        assert_eq!((got[2], got[3]), (1000, 1000));
        let ms = t.as_secs_f64() * 1e3;
        assert!((89.0..=92.0).contains(&ms), "{ms} ms");
        assert_eq!(f.pair_stats()[0][2].delivered_pkts, 1000);
        assert!(f.named_stats().is_empty());
    }
}
