//! `Link<T>`: one direction of an emulated WAN link in virtual time (drop-tail queue → serialiser → loss →
//! propagation delay with jitter/reorder/duplication), plus its `LinkStats`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::{LinkConfig, LossModel};
use crate::profile::Profile;

/// What happened to a packet handed to [`Link::handle_send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted; it will be returned by `poll_deliver` at `deliver_at` (its earliest delivery time).
    Queued { deliver_at: Instant },
    /// Dropped because the drop-tail queue was full (uses no link capacity).
    DroppedQueue,
    /// Admitted and serialised (it used link capacity) but lost on the wire by the loss model.
    DroppedLoss,
}

impl Verdict {
    /// True if the packet will be delivered.
    pub fn is_queued(&self) -> bool {
        matches!(self, Verdict::Queued { .. })
    }
}

/// Counters of one link. Bytes are the `len` values given to `handle_send` (wire bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub sent_pkts: u64,
    pub sent_bytes: u64,
    pub delivered_pkts: u64,
    pub delivered_bytes: u64,
    pub dropped_queue_pkts: u64,
    pub dropped_queue_bytes: u64,
    pub dropped_loss_pkts: u64,
    pub dropped_loss_bytes: u64,
    /// Extra copies created by duplication (also counted in `delivered_*` when delivered).
    pub duplicated_pkts: u64,
    /// Packets held back for reordering.
    pub reordered_pkts: u64,
    /// Highest queue occupancy seen, in bytes (including the packet being serialised).
    pub max_backlog_bytes: u64,
}

struct InFlight<T> {
    at: Instant,
    seq: u64,
    len: u32,
    pkt: T,
}
impl<T> PartialEq for InFlight<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<T> Eq for InFlight<T> {}
impl<T> PartialOrd for InFlight<T> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for InFlight<T> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// One direction of a WAN link, sans-IO: the caller passes `now` to every call and owns the clock.
///
/// Model, per packet of wire size `len` handed to [`handle_send`](Link::handle_send) at `now`:
/// 1. **Queue**: if the bytes not yet fully serialised plus `len` exceed the queue limit, the packet is dropped
///    (`DroppedQueue`). An empty queue always admits one packet, however large.
/// 2. **Serialisation** at `rate_bps`: it starts when the previous packet finishes (or at `now` if idle) and takes
///    exactly `len × 8 / rate_bps` seconds (fractions of a nanosecond are carried over between back-to-back packets,
///    so the long-run rate is exact).
/// 3. **Loss**: the loss model decides; a lost packet has still used its serialisation time (`DroppedLoss`).
/// 4. **Propagation**: delivery at `tx_done + delay (± jitter)`, never before the previous packet's delivery unless
///    this packet was picked for reordering (then `+ reorder_delay` and exempt from FIFO order). A duplicated packet
///    is delivered twice at the same instant.
///
/// With no jitter/reorder, delivery time is exactly `max(now, previous tx_done) + serialisation + delay`.
/// Profiles ([`Profile`]) change delay/rate/loss at their step times; packets already admitted keep their timing.
pub struct Link<T> {
    cfg: LinkConfig,
    queue_limit: Option<u64>,
    rng: ChaCha8Rng,
    ge_bad: bool,
    busy_until: Instant,
    carry: u64,
    in_tx: VecDeque<(Instant, u32)>,
    backlog: u64,
    last_deliver: Instant,
    heap: BinaryHeap<Reverse<InFlight<T>>>,
    seq: u64,
    stats: LinkStats,
    profile: Option<(Profile, Instant, Option<usize>)>,
}

impl<T: Clone> Link<T> {
    /// A link with `cfg`, idle at `now`.
    pub fn new(cfg: LinkConfig, now: Instant) -> Self {
        let queue_limit = cfg.queue.bytes(cfg.rate_bps, cfg.delay);
        Link {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            cfg,
            queue_limit,
            ge_bad: false,
            busy_until: now,
            carry: 0,
            in_tx: VecDeque::new(),
            backlog: 0,
            last_deliver: now,
            heap: BinaryHeap::new(),
            seq: 0,
            stats: LinkStats::default(),
            profile: None,
        }
    }

    /// A link whose delay (RTT/2), rate and loss follow `profile`, with profile time 0 = `now`.
    /// Fields a profile step leaves out keep their values from `cfg` / the previous step.
    pub fn with_profile(cfg: LinkConfig, profile: Profile, now: Instant) -> Self {
        let mut l = Self::new(cfg, now);
        l.profile = Some((profile, now, None));
        l.apply_profile(now);
        l
    }

    /// The current configuration (reflects the profile step in force after the last call).
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Current queue limit in bytes (`None` = unlimited).
    pub fn queue_limit(&self) -> Option<u64> {
        self.queue_limit
    }

    /// Replace the configuration from now on (packets already admitted keep their timing). The RNG is kept.
    pub fn set_config(&mut self, cfg: LinkConfig) {
        self.queue_limit = cfg.queue.bytes(cfg.rate_bps, cfg.delay);
        self.cfg = cfg;
    }

    /// Counters so far.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Bytes admitted but not yet fully serialised at the time of the last call.
    pub fn backlog_bytes(&self) -> u64 {
        self.backlog
    }

    /// Packets admitted and not yet delivered (including ones still being serialised).
    pub fn in_flight(&self) -> usize {
        self.heap.len()
    }

    fn apply_profile(&mut self, now: Instant) {
        let Some((profile, start, idx)) = &mut self.profile else {
            return;
        };
        let t = profile.fold(now.saturating_duration_since(*start));
        let want = profile.index_at(t);
        if *idx == Some(want) {
            return;
        }
        *idx = Some(want);
        let step = profile.resolved_at(t);
        let mut cfg = self.cfg.clone();
        if let Some(rtt) = step.rtt {
            cfg.delay = rtt / 2;
        }
        if let Some(r) = step.rate_bps {
            cfg.rate_bps = r;
        }
        if let Some(p) = step.loss {
            cfg.loss = if p == 0.0 {
                LossModel::None
            } else {
                LossModel::Bernoulli { p }
            };
        }
        if cfg != self.cfg {
            self.set_config(cfg);
        }
    }

    fn drain_tx(&mut self, now: Instant) {
        while let Some(&(done, len)) = self.in_tx.front() {
            if done > now {
                break;
            }
            self.in_tx.pop_front();
            self.backlog -= len as u64;
        }
    }

    fn lost(&mut self) -> bool {
        match self.cfg.loss {
            LossModel::None => false,
            LossModel::Bernoulli { p } => p > 0.0 && self.rng.gen::<f64>() < p,
            LossModel::GilbertElliott {
                p_gb,
                p_bg,
                loss_good,
                loss_bad,
            } => {
                let u: f64 = self.rng.gen();
                self.ge_bad = if self.ge_bad { u >= p_bg } else { u < p_gb };
                let p = if self.ge_bad { loss_bad } else { loss_good };
                p > 0.0 && self.rng.gen::<f64>() < p
            }
        }
    }

    /// Offer a packet of `len` wire bytes at `now`. See the type docs for the model.
    pub fn handle_send(&mut self, now: Instant, len: usize, pkt: T) -> Verdict {
        self.apply_profile(now);
        self.drain_tx(now);
        let len32 = len.min(u32::MAX as usize) as u32;
        self.stats.sent_pkts += 1;
        self.stats.sent_bytes += len as u64;
        if let Some(limit) = self.queue_limit {
            if self.backlog > 0 && self.backlog + len as u64 > limit {
                self.stats.dropped_queue_pkts += 1;
                self.stats.dropped_queue_bytes += len as u64;
                return Verdict::DroppedQueue;
            }
        }
        let tx_done = if self.cfg.rate_bps == 0 {
            now
        } else {
            let start = if self.busy_until > now {
                self.busy_until
            } else {
                self.carry = 0;
                now
            };
            let num = len as u128 * 8 * 1_000_000_000 + self.carry as u128;
            let rate = self.cfg.rate_bps as u128;
            self.carry = (num % rate) as u64;
            let done = start + Duration::from_nanos((num / rate) as u64);
            self.busy_until = done;
            if done > now {
                self.in_tx.push_back((done, len32));
                self.backlog += len as u64;
                self.stats.max_backlog_bytes = self.stats.max_backlog_bytes.max(self.backlog);
            }
            done
        };
        if self.lost() {
            self.stats.dropped_loss_pkts += 1;
            self.stats.dropped_loss_bytes += len as u64;
            return Verdict::DroppedLoss;
        }
        let mut at = tx_done + self.cfg.delay;
        if !self.cfg.jitter.is_zero() {
            let j = self.cfg.jitter.as_nanos() as i64;
            let off = self.rng.gen_range(-j..=j);
            at = if off >= 0 {
                at + Duration::from_nanos(off as u64)
            } else {
                at.checked_sub(Duration::from_nanos((-off) as u64))
                    .unwrap_or(tx_done)
                    .max(tx_done)
            };
        }
        let reorder = self.cfg.reorder > 0.0 && self.rng.gen::<f64>() < self.cfg.reorder;
        if reorder {
            at += self.cfg.reorder_delay;
            self.stats.reordered_pkts += 1;
        } else {
            at = at.max(self.last_deliver);
            self.last_deliver = at;
        }
        let dup = self.cfg.duplicate > 0.0 && self.rng.gen::<f64>() < self.cfg.duplicate;
        if dup {
            self.stats.duplicated_pkts += 1;
            self.push(at, len32, pkt.clone());
        }
        self.push(at, len32, pkt);
        Verdict::Queued { deliver_at: at }
    }

    fn push(&mut self, at: Instant, len: u32, pkt: T) {
        self.seq += 1;
        self.heap.push(Reverse(InFlight {
            at,
            seq: self.seq,
            len,
            pkt,
        }));
    }

    /// The next packet due at or before `now`, in delivery order (ties in send order).
    pub fn poll_deliver(&mut self, now: Instant) -> Option<T> {
        self.poll_deliver_len(now).map(|(p, _)| p)
    }

    /// Like [`poll_deliver`](Link::poll_deliver) but also returns the packet's wire length.
    pub fn poll_deliver_len(&mut self, now: Instant) -> Option<(T, usize)> {
        if self.heap.peek()?.0.at > now {
            return None;
        }
        let Reverse(f) = self.heap.pop()?;
        self.stats.delivered_pkts += 1;
        self.stats.delivered_bytes += f.len as u64;
        Some((f.pkt, f.len as usize))
    }

    /// When the next packet becomes deliverable (`None` if nothing is in flight).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.heap.peek().map(|r| r.0.at)
    }

    /// Advance internal state (profile step, queue drain) to `now` without sending; optional.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.apply_profile(now);
        self.drain_tx(now);
    }
}
