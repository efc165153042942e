//! `-p auto`'s path signal: what the sending sockets' TCP_INFO reported (`PathSample`), summed over one
//! measurement (`PathSums`), and what it says: random loss with headroom, a standing queue, the rate one
//! loss-limited stream carries (module docs of `auto`).

use std::time::Duration;

use super::AutoConfig;

/// The least queueing delay that counts as a standing queue for "the path is full" (`PathSums::queued`). On
/// loopback a ratio says nothing: tens of microseconds of minimum RTT and a few hundred of smoothed RTT are socket
/// buffers and scheduling, not a bottleneck's queue, and the CPU-bound transfer may still gain from more streams.
const MIN_STANDING_QUEUE: Duration = Duration::from_millis(1);

/// What the sending sockets' TCP_INFO reported over one sampling period, summed over streams.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PathSample {
    /// Bytes sent (TCP_INFO `bytes_sent`, retransmissions included) and retransmitted (`bytes_retrans`).
    pub sent: u64,
    pub retrans: u64,
    /// Sums of smoothed and minimum RTT over the RTT readings taken (one per stream per block), microseconds.
    pub rtt_us: u64,
    pub min_rtt_us: u64,
    /// The largest send MSS among the readings (not a sum; 0: unknown).
    pub mss: u64,
}

/// The path signal over one measurement: sums for the loss fraction, and each period's queue ratio (smoothed /
/// minimum RTT) for the median.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct PathSums {
    sum: PathSample,
    queue: Vec<f64>,
    /// Each period's retransmitted fraction (periods that sent anything).
    loss: Vec<f64>,
    /// Each period's queue ratio and bytes sent and retransmitted (periods with both an RTT reading and bytes).
    periods: Vec<(f64, u64, u64)>,
}

impl PathSums {
    pub(super) fn add(&mut self, s: PathSample) {
        self.sum.sent += s.sent;
        self.sum.retrans += s.retrans;
        self.sum.rtt_us += s.rtt_us;
        self.sum.min_rtt_us += s.min_rtt_us;
        self.sum.mss = self.sum.mss.max(s.mss);
        if s.min_rtt_us > 0 && s.rtt_us > 0 {
            self.queue.push(s.rtt_us as f64 / s.min_rtt_us as f64);
        }
        if s.sent > 0 {
            self.loss.push(s.retrans as f64 / s.sent as f64);
        }
        if s.min_rtt_us > 0 && s.rtt_us > 0 && s.sent > 0 {
            self.periods
                .push((s.rtt_us as f64 / s.min_rtt_us as f64, s.sent, s.retrans));
        }
    }
    /// Loss in the periods whose RTT was lowest too (those at or below the lower median ratio): random loss falls
    /// on every period alike, while the loss of a full bottleneck comes when the queue peaks. A BBR competitor on
    /// a full link keeps the queue under `queue_headroom` (1.25x) and still drops packets when it probes (its
    /// pacing at 1.25x for a round), so the median ratio alone read its losses as random loss: one copy's `-p
    /// auto` went 4 -> 13 -> 64 streams against another's 4 and took 0.64 of the link (docs/bench/auto-transport.md,
    /// fair22).
    /// True without per-period readings (nothing to tell them apart). The cost is on slow lossy paths: the lower
    /// half of a 4-period measurement must hold one retransmission, which at 50 Mbit/s, 100 ms and 0.1 % (about
    /// one loss a 250 ms period) it misses about one measurement in seven (e^-2); that measurement then judges by
    /// throughput alone, as without TCP_INFO.
    fn loss_when_lowest(&self, cfg: &AutoConfig) -> bool {
        let ratios: Vec<f64> = self.periods.iter().map(|p| p.0).collect();
        let Some(median) = lower_median(&ratios) else {
            return true;
        };
        let (sent, retrans) = self
            .periods
            .iter()
            .filter(|p| p.0 <= median)
            .fold((0u64, 0u64), |(s, r), p| (s + p.1, r + p.2));
        sent > 0 && retrans as f64 >= cfg.loss_floor * sent as f64
    }
    /// Loss in the (lower) median period too, not only summed over the measurement: random loss is spread over
    /// time, the loss of a slow start that overflowed the queue comes in one burst. The early first
    /// measurement ([`AutoConfig::loss_settle`]) needs it: on a loss-free 100 ms path it once caught the first
    /// streams' overflow with the queue drained again in most periods, read random loss, and opened 64 streams
    /// (1 run of 9; 740 Mbit/s against ~775).
    pub(super) fn spread_loss(&self, cfg: &AutoConfig) -> bool {
        lower_median(&self.loss).is_some_and(|l| l >= cfg.loss_floor)
    }
    /// Loss present and no standing queue (module docs); false without readings. "Standing" is the (lower)
    /// median period: new streams' slow start builds a queue for a few RTTs (the periods right after a step), a full
    /// bottleneck keeps one in every period.
    pub(super) fn headroom(&self, cfg: &AutoConfig) -> bool {
        let p = self.sum;
        if p.sent == 0
            || self.queue.is_empty()
            || (p.retrans as f64) < cfg.loss_floor * p.sent as f64
        {
            return false;
        }
        lower_median(&self.queue).is_some_and(|q| q <= cfg.queue_headroom)
            && self.loss_when_lowest(cfg)
    }
    /// A standing queue: the (lower) median period's smoothed RTT above `queue_headroom` x the minimum, and at
    /// least [`MIN_STANDING_QUEUE`] above it on the path's RTT. The bottleneck is full, so more streams can only
    /// take a share from the streams already there (ours or a competitor's); false without readings or without
    /// the path's RTT.
    pub(super) fn queued(&self, cfg: &AutoConfig) -> bool {
        let Some(rtt) = cfg.path_rtt else {
            return false;
        };
        lower_median(&self.queue)
            .is_some_and(|q| q > cfg.queue_headroom && rtt.mul_f64(q - 1.0) >= MIN_STANDING_QUEUE)
    }
    /// What one loss-limited stream carries (bytes/s) at the retransmitted fraction measured here, over a path
    /// of RTT `rtt`: Mathis et al.'s MSS / RTT x sqrt(3 / (2 b p)) with delayed ACKs (b = 2), the form that errs
    /// toward more streams: at 20 ms and 0.1 % it gives 16 Mbit/s where 32 cubic streams carried 20 each. With
    /// b = 1 (22 Mbit/s) cut-backs landed at 38-40 streams in two lab runs of three, short of the ~46 the path
    /// needed, and held there at ~750 Mbit/s. Too few streams cost throughput; too many cost sockets, not memory
    /// (DRS shares the transfer's window among them). `None` without an MSS or any loss.
    pub(super) fn loss_limited_rate(&self, rtt: Option<Duration>) -> Option<f64> {
        let p = self.sum;
        let rtt = rtt.filter(|r| !r.is_zero())?.as_secs_f64();
        (p.mss > 0 && p.retrans > 0 && p.sent > 0).then(|| {
            let loss = p.retrans as f64 / p.sent as f64;
            p.mss as f64 / rtt * (0.75 / loss).sqrt()
        })
    }
}

/// The lower median of `v` (`None` if empty).
fn lower_median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len().checked_sub(1)? / 2).copied()
}
