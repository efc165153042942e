//! `Path<T>`: a duplex pair of links (A→B and B→A) for driving two sans-IO endpoints against each other in tests.

use std::time::Instant;

use crate::config::LinkConfig;
use crate::link::{Link, Verdict};
use crate::profile::Profile;

/// Which endpoint of a [`Path`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    A,
    B,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// Two independent links: `ab` carries packets sent by A to B, `ba` the reverse.
pub struct Path<T> {
    pub ab: Link<T>,
    pub ba: Link<T>,
}

impl<T: Clone> Path<T> {
    /// Separate configurations per direction.
    pub fn new(ab: LinkConfig, ba: LinkConfig, now: Instant) -> Self {
        Path {
            ab: Link::new(ab, now),
            ba: Link::new(ba, now),
        }
    }

    /// Both directions configured alike (one-way `delay` each, so RTT = 2 × delay). The reverse direction's seed is
    /// derived from `cfg.seed` so the two loss processes are independent but still reproducible.
    pub fn symmetric(cfg: LinkConfig, now: Instant) -> Self {
        let mut rev = cfg.clone();
        rev.seed = cfg.seed ^ 0x9E37_79B9_7F4A_7C15;
        Self::new(cfg, rev, now)
    }

    /// Both directions following `profile` (see [`Link::with_profile`]).
    pub fn with_profile(cfg: LinkConfig, profile: Profile, now: Instant) -> Self {
        let mut rev = cfg.clone();
        rev.seed = cfg.seed ^ 0x9E37_79B9_7F4A_7C15;
        Path {
            ab: Link::with_profile(cfg, profile.clone(), now),
            ba: Link::with_profile(rev, profile, now),
        }
    }

    /// The link carrying packets sent by `from`.
    pub fn link_from(&mut self, from: Side) -> &mut Link<T> {
        match from {
            Side::A => &mut self.ab,
            Side::B => &mut self.ba,
        }
    }

    /// Send a packet from `from` towards the other side.
    pub fn send(&mut self, now: Instant, from: Side, len: usize, pkt: T) -> Verdict {
        self.link_from(from).handle_send(now, len, pkt)
    }

    /// Next packet due at or before `now` arriving at `to`.
    pub fn poll_deliver(&mut self, now: Instant, to: Side) -> Option<T> {
        self.link_from(to.other()).poll_deliver(now)
    }

    /// Earliest pending delivery in either direction.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.ab.poll_timeout(), self.ba.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
