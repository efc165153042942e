//! Rate control for the blast sender: the `RateController` (how fast to send, from the receiver's delivery-rate
//! samples and RTT echoes) and the `Pacer` token bucket that releases datagrams at that rate.
//!
//! # Algorithm
//!
//! FOBS itself is greedy: it transmits as fast as the host can and lets the acknowledgement bitmap repair
//! whatever the network drops. That is ideal on an empty research path and antisocial on a shared one. This
//! controller keeps the greedy property where it matters — random loss does not slow it down — and adds pacing
//! at the measured path rate plus a delay- and dispersion-driven AIMD so that it shares.
//!
//! * **Measurements.** The receiver timestamps arrivals on its own clock; each ack carries a delivery sample
//!   since the previous ack (transmissions passed, datagrams received, their receive span and their send span)
//!   and echoes the send timestamp of the newest transmission seen with how long it was held, so RTT samples
//!   exclude ack delay. `min_rtt` is a 10 s windowed minimum. A *round* is one RTT: it ends when an ack covers
//!   a transmission sent after the round began.
//! * **Random loss is not congestion.** Delivery rates are divided by `1 − p`, `p` the median per-round loss of
//!   the last 10 non-probing rounds (capped at 25 %), and never exceed the rate at which transmissions (lost
//!   ones included) passed. At 5 % random loss the flow still paces at the full link rate; the selective ack
//!   repairs the losses. Nothing below reacts to loss unless it spikes 10 points above that baseline.
//! * **Start-up.** The first 32 packets leave back to back; their spacing at the receiver measures the
//!   bottleneck capacity one RTT later (`capacity`). Until then the flow paces at `initial_rate` (10 Mbit/s);
//!   after that at 2 × the best delivery rate, leaving start-up as soon as a sample shows the path spreading
//!   packets out (receive span > 1.25 × send span), or when the rate stops growing, and draining what it queued.
//!   On real hosts one 32-packet train is a noisy yardstick (a late receiver or forwarder thread delivers a
//!   clump), so `capacity` then becomes the best *round* rate of spread-out packets, counted only over rounds
//!   with at least 1 ms of them; the first such measurement also lifts a `bw` that start-up left below it.
//! * **Steady state: BBR-style pacing, AIMD decisions.** The pacing rate is `bw × gain`. While the flow has the
//!   bottleneck to itself (`bw ≥ 0.9 × capacity`) the gain cycles per round through probe 1.25, drain 0.75 and
//!   six cruise rounds at 1.0, as in BBR. Each round, from the samples of packets sent at each gain:
//!   - *no queue* (the round's minimum RTT within `min_rtt/16` of `min_rtt`) and packets not spread out:
//!     additive increase by `capacity/32` per cruise round, up to `capacity` (beyond it the increase would only
//!     build a queue until it overflows); a probe that went through unspread raises `bw` to what it delivered
//!     (spare capacity is taken at once).
//!   - *packets spread out* (receive span > 1.02 × send span + twice the RTT variation, at most 5 % of the span,
//!     for timing jitter at the ends of the span): the flow sends faster than it gets through. Alone
//!     on the bottleneck it just paces at what was delivered (the link stays full). If what it gets is well
//!     below the train-measured capacity the bottleneck is shared, and it backs off to 0.85 × what it got. Equal
//!     additive steps and proportional decreases is Chiu–Jain AIMD: the shares converge. (Multiplicative
//!     probing is off while shared: a probe would only push the others back.)
//!   - *standing queue, not growing*: pace at what was delivered.
//! * **Delay back-off (the TCP-friendly part).** If the *minimum* RTT over a whole round exceeds
//!   1.25 × `min_rtt` + 2 ms, a queue has stood for a full RTT although the flow itself is not overrunning the
//!   path: another flow keeps the buffer full (typically loss-based TCP). The flow then backs off by 0.85 at
//!   most every other round, handing the capacity to it. A loss spike is treated the same way (a shallow
//!   buffer overflowing shows no delay). An in-flight cap of 1.5 × `bw` × `min_rtt` bounds the queue the flow
//!   can build if its signals come late.
//! * **`max_rate`** caps the pacing rate (and `min_rate` floors it) whatever the estimates say.
//!
//! Why not plain BBR or LEDBAT: BBR's probe gain and any common back-off are both proportional, so two BBR flows
//! keep whatever ratio they start with for a long time, and BBR ignores the queue a TCP flow builds. LEDBAT
//! yields, but its one-packet-per-RTT growth would take minutes to fill a 100 Mbit/s × 100 ms path. Here the
//! packet train gives every flow on a bottleneck the same yardstick for the additive step, delay makes it yield
//! to TCP, and random loss never enters the loop. Measured in virtual time (tests/netem_*.rs, 100 Mbit/s, 1×BDP
//! drop-tail queue): one flow fills the link at 0–5 % random loss; two flows started 1 s apart split it within
//! a few percent of half; against a SACK Reno flow the blast flow keeps under 20 %.
//!
//! Rates are bits per second of IP datagrams (blast header, UDP and IP headers included), the unit link rates
//! are quoted in.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::wire::IntervalSample;

/// Spread-out packets a round must carry (in receive time, µs) before its rate counts as a capacity measurement.
pub const MIN_CAPACITY_SPAN_US: u64 = 1_000;

/// Rate-control tuning. Defaults follow the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct RateConfig {
    /// Hard cap on the pacing rate (bit/s on the wire).
    pub max_rate_bps: u64,
    /// Floor of the pacing rate.
    pub min_rate_bps: u64,
    /// Pacing rate before the first delivery-rate sample.
    pub initial_rate_bps: u64,
    /// Packets sent back to back at the start (capacity-probing train).
    pub initial_burst: u32,
    /// Packets the pacer may release back to back after an idle moment (lets the I/O layer batch with
    /// sendmmsg/GSO).
    pub max_burst: u32,
    /// Start-up pacing gain (and 1/gain to drain after it).
    pub startup_gain: f64,
    /// Gains of the probe and drain rounds of the cycle (used while the flow has the bottleneck to itself).
    pub probe_gain: f64,
    pub drain_gain: f64,
    /// Length of the gain cycle in rounds (probe, drain, then cruise).
    pub cycle_rounds: u32,
    /// Back off when the minimum RTT over a round exceeds `delay_threshold × min_rtt + delay_margin`.
    pub delay_threshold: f64,
    pub delay_margin: Duration,
    /// Multiplicative back-off factor.
    pub backoff: f64,
    /// Additive increase per cruising round, as a fraction of the largest rate the path has carried for this
    /// flow (the start-up packet train measures the bottleneck capacity, so flows sharing it use equal steps).
    pub additive_increase: f64,
    /// Cruise packets arriving spread out by more than this fraction (receive span / send span − 1) mean the
    /// flow sends faster than the path delivers it.
    pub growth_threshold: f64,
    /// A round whose loss exceeds the random-loss baseline by this much counts as congestion.
    pub loss_spike: f64,
    /// Largest random-loss rate compensated for.
    pub max_loss_compensation: f64,
    pub min_rtt_window: Duration,
    /// Start-up: `bw` is the best delivery rate of the last this many rounds.
    pub bw_window_rounds: u32,
    /// In-flight cap = `inflight_gain × bw × min_rtt` (bounds the queue the flow can build if its delay signal
    /// is late or missing).
    pub inflight_gain: f64,
}

impl Default for RateConfig {
    fn default() -> Self {
        RateConfig {
            max_rate_bps: 10_000_000_000,
            min_rate_bps: 1_000_000,
            initial_rate_bps: 10_000_000,
            initial_burst: 32,
            max_burst: 8,
            startup_gain: 2.0,
            probe_gain: 1.25,
            drain_gain: 0.75,
            cycle_rounds: 8,
            delay_threshold: 1.25,
            delay_margin: Duration::from_millis(2),
            backoff: 0.85,
            additive_increase: 1.0 / 32.0,
            growth_threshold: 0.02,
            loss_spike: 0.10,
            max_loss_compensation: 0.25,
            min_rtt_window: Duration::from_secs(10),
            bw_window_rounds: 10,
            inflight_gain: 1.5,
        }
    }
}

/// Controller phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Startup,
    Drain,
    ProbeBw,
}

/// What the sender learned from one ack generation.
#[derive(Debug, Clone, Copy)]
pub struct AckInput {
    /// RTT of the newest transmission the receiver had seen (ack hold time removed).
    pub rtt: Option<Duration>,
    /// The receiver's delivery-rate sample since its previous ack.
    pub sample: Option<IntervalSample>,
    /// Newest transmission number the receiver had seen (sender's 64-bit numbering).
    pub largest_tx: u64,
    /// The sender's next transmission number.
    pub next_tx: u64,
    /// Packets currently in flight.
    pub inflight: u64,
    /// The sender ran out of packets to send during the sampled interval, so the sample may understate the path.
    pub app_limited: bool,
}

/// Counters for reporting.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RateStats {
    pub rounds: u64,
    pub delay_backoffs: u64,
    pub loss_backoffs: u64,
    /// Multiplicative decreases on overshooting a shared bottleneck.
    pub share_backoffs: u64,
    pub samples: u64,
}

/// Delivery samples of packets sent at one pacing gain, summed over a round.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    rx: u64,
    rx_us: u64,
    send_us: u64,
}

impl Span {
    fn add(&mut self, delivered: u64, s: &IntervalSample) {
        self.rx += delivered;
        self.rx_us += s.rx_us as u64;
        self.send_us += s.send_us as u64;
    }
    /// Delivery rate in bit/s (enough packets only).
    fn got(&self, wire_bits: f64) -> Option<f64> {
        (self.rx >= 16 && self.rx_us > 0)
            .then(|| self.rx as f64 * wire_bits / (self.rx_us as f64 * 1e-6))
    }
    /// The packets arrived spread out by more than `threshold` relative to how they were sent, beyond an
    /// absolute `allowance_us` for timing jitter at the ends of the span.
    fn stretched(&self, threshold: f64, allowance_us: f64) -> bool {
        self.rx >= 16 && self.rx_us as f64 > self.send_us as f64 * (1.0 + threshold) + allowance_us
    }
}

/// The rate controller. Feed it [`on_ack`](Self::on_ack); read [`pacing_rate_bps`](Self::pacing_rate_bps) and
/// [`inflight_cap`](Self::inflight_cap).
#[derive(Debug, Clone)]
pub struct RateController {
    cfg: RateConfig,
    wire_bits: f64,
    phase: Phase,
    bw: f64,
    bw_rounds: VecDeque<(u64, f64)>,
    min_rtt: Option<(Duration, Instant)>,
    srtt: Option<Duration>,
    rttvar: Duration,
    round: u64,
    round_end_tx: u64,
    round_min_rtt: Option<Duration>,
    round_tx: u64,
    round_rx: u64,
    round_rx_us: u64,
    cycle_idx: usize,
    last_backoff_round: Option<u64>,
    ignore_until_tx: u64,
    loss_hist: VecDeque<f64>,
    loss_base: f64,
    full_bw: f64,
    full_bw_rounds: u32,
    drain_rounds: u32,
    /// Bottleneck capacity: the largest per-round rate of spread-out ("saturated") packets, counted only over
    /// rounds with at least [`MIN_CAPACITY_SPAN_US`] of them, so one clump of packets (a late forwarder or
    /// receiver delivering a backlog at once) cannot inflate it. Until such a round, the start-up train's rate.
    capacity: f64,
    train_capacity: f64,
    /// Saturated samples of the current round: Σ rate × span and Σ span (µs).
    round_sat_bits_us: f64,
    round_sat_us: u64,
    probe_tx: (u64, u64),
    cruise_from_tx: u64,
    cruise: Span,
    probe: Span,
    round_app_limited: bool,
    stats: RateStats,
}

impl RateController {
    /// A controller for packets of `wire_bytes` (IP datagram size).
    pub fn new(cfg: RateConfig, wire_bytes: usize) -> Self {
        RateController {
            wire_bits: wire_bytes as f64 * 8.0,
            phase: Phase::Startup,
            bw: 0.0,
            bw_rounds: VecDeque::new(),
            min_rtt: None,
            srtt: None,
            rttvar: Duration::ZERO,
            round: 0,
            round_end_tx: 0,
            round_min_rtt: None,
            round_tx: 0,
            round_rx: 0,
            round_rx_us: 0,
            cycle_idx: 0,
            last_backoff_round: None,
            ignore_until_tx: 0,
            loss_hist: VecDeque::new(),
            loss_base: 0.0,
            full_bw: 0.0,
            full_bw_rounds: 0,
            drain_rounds: 0,
            capacity: 0.0,
            train_capacity: 0.0,
            round_sat_bits_us: 0.0,
            round_sat_us: 0,
            probe_tx: (0, 0),
            cruise_from_tx: u64::MAX,
            cruise: Span::default(),
            probe: Span::default(),
            round_app_limited: false,
            stats: RateStats::default(),
            cfg,
        }
    }

    pub fn config(&self) -> &RateConfig {
        &self.cfg
    }
    pub fn phase(&self) -> Phase {
        self.phase
    }
    /// Bottleneck-share estimate in bit/s (0 before the first sample).
    pub fn bw_bps(&self) -> f64 {
        self.bw
    }
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.map(|m| m.0)
    }
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }
    /// Estimated random-loss rate being compensated.
    pub fn loss_rate(&self) -> f64 {
        self.loss_base
    }
    pub fn stats(&self) -> &RateStats {
        &self.stats
    }

    fn gain(&self) -> f64 {
        match self.phase {
            Phase::Startup => self.cfg.startup_gain,
            Phase::Drain => 1.0 / self.cfg.startup_gain,
            // On a shared bottleneck the additive increase does the probing; a multiplicative probe would only
            // push the other flows back.
            Phase::ProbeBw if self.shared() => 1.0,
            Phase::ProbeBw => match self.cycle_idx {
                0 => self.cfg.probe_gain,
                1 => self.cfg.drain_gain,
                _ => 1.0,
            },
        }
    }

    /// The flow gets well below the capacity its packet train measured: others share the bottleneck.
    pub fn shared(&self) -> bool {
        self.bw < 0.9 * self.capacity_bps()
    }

    /// True if rate `c` is well below our train's view of the bottleneck (another flow holds the rest).
    fn shared_by(&self, c: f64) -> bool {
        self.train_capacity > 0.0 && c < 0.9 * self.train_capacity
    }

    /// The bottleneck capacity estimate in bit/s (see the field docs; 0 before any spread-out packets).
    pub fn capacity_bps(&self) -> f64 {
        if self.capacity > 0.0 {
            self.capacity
        } else {
            self.train_capacity
        }
    }

    /// Current pacing rate in bit/s.
    pub fn pacing_rate_bps(&self) -> f64 {
        let r = if self.bw <= 0.0 {
            self.cfg.initial_rate_bps as f64
        } else if self.phase == Phase::Startup {
            (self.bw * self.gain()).max(self.cfg.initial_rate_bps as f64)
        } else {
            self.bw * self.gain()
        };
        r.clamp(self.cfg.min_rate_bps as f64, self.cfg.max_rate_bps as f64)
    }

    /// Bandwidth-delay product estimate in packets (`None` before the first samples).
    pub fn bdp_packets(&self) -> Option<f64> {
        let m = self.min_rtt?.0;
        (self.bw > 0.0).then(|| self.bw * m.as_secs_f64() / self.wire_bits)
    }

    /// Most packets that may be in flight.
    pub fn inflight_cap(&self) -> u64 {
        match self.bdp_packets() {
            Some(bdp) => {
                let gain = if self.phase == Phase::Startup {
                    self.cfg.inflight_gain.max(self.cfg.startup_gain) * 1.5
                } else {
                    self.cfg.inflight_gain
                };
                ((bdp * gain) as u64)
                    .max(4 * self.cfg.max_burst as u64 + self.cfg.initial_burst as u64)
            }
            None => u64::MAX,
        }
    }

    /// Process one ack generation at `now`.
    pub fn on_ack(&mut self, now: Instant, a: &AckInput) {
        if let Some(rtt) = a.rtt {
            self.on_rtt(now, rtt);
        }
        if let Some(s) = a.sample {
            self.on_sample(&s, a);
        }
        if a.largest_tx >= self.round_end_tx {
            self.end_round(now, a);
            self.round_end_tx = a.next_tx;
        }
    }

    fn on_rtt(&mut self, now: Instant, rtt: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + diff) / 4;
                self.srtt = Some((s * 7 + rtt) / 8);
            }
        }
        let expired = self
            .min_rtt
            .is_some_and(|(_, at)| now.saturating_duration_since(at) > self.cfg.min_rtt_window);
        if expired || self.min_rtt.is_none_or(|(m, _)| rtt <= m) {
            self.min_rtt = Some((rtt, now));
        }
        self.round_min_rtt = Some(self.round_min_rtt.map_or(rtt, |m| m.min(rtt)));
    }

    fn on_sample(&mut self, s: &IntervalSample, a: &AckInput) {
        if s.tx == 0 || s.rx_us == 0 {
            return;
        }
        self.stats.samples += 1;
        let delivered = s.pkts.min(s.tx) as u64;
        self.round_tx += s.tx as u64;
        self.round_rx += delivered;
        self.round_rx_us += s.rx_us as u64;
        let secs = s.rx_us as f64 * 1e-6;
        let comp = 1.0 / (1.0 - self.loss_base);
        // Loss-compensated delivery rate, but never above the rate at which transmissions (lost ones included)
        // passed: over a short interval the loss count is noisy, and a max filter would pick the lucky ones.
        let tx_rate = s.tx as f64 * self.wire_bits / secs;
        let delivered_rate = delivered as f64 * self.wire_bits / secs;
        // The path spread the packets out: they queued behind a slower link, which then set their spacing.
        let saturated = s.tx >= 8 && s.rx_us as f64 > 1.25 * s.send_us as f64 + 200.0;
        let sample_bw = if saturated && self.phase != Phase::ProbeBw {
            // The bottleneck was busy for the whole interval, so transmissions (lost ones included) passed it at
            // its rate: compensate with this interval's own loss (bounded, in case the queue itself dropped).
            let lf = (1.0 - delivered as f64 / s.tx as f64).clamp(0.0, 0.1);
            (delivered_rate / (1.0 - lf)).min(tx_rate)
        } else {
            // Loss-compensated delivery rate, but never above the rate at which transmissions passed: over a short
            // interval the loss count is noisy, and a max filter would pick the lucky ones.
            (delivered_rate * comp).min(tx_rate)
        };
        if saturated {
            self.round_sat_bits_us += sample_bw * s.rx_us as f64;
            self.round_sat_us += s.rx_us as u64;
            if self.capacity == 0.0 {
                self.train_capacity = self.train_capacity.max(sample_bw);
            }
        }
        self.round_app_limited |= a.app_limited;
        let fresh = a.largest_tx >= self.ignore_until_tx;
        match self.phase {
            Phase::Startup | Phase::Drain => {
                if fresh && (!a.app_limited || sample_bw > self.bw) {
                    match self.bw_rounds.back_mut() {
                        Some((r, v)) if *r == self.round => *v = v.max(sample_bw),
                        _ => self.bw_rounds.push_back((self.round, sample_bw)),
                    }
                    self.bw = self.bw_rounds.iter().map(|x| x.1).fold(0.0, f64::max);
                }
            }
            Phase::ProbeBw => {
                // Account the sample to the gain it was sent at: probe packets or cruise packets.
                let first = a.largest_tx.saturating_sub(s.tx as u64);
                let (p0, p1) = self.probe_tx;
                let cruise_end = if p0 > self.cruise_from_tx {
                    p0
                } else {
                    u64::MAX
                };
                if fresh && !a.app_limited {
                    if first >= p0 && a.largest_tx < p1 {
                        self.probe.add(delivered, s);
                    } else if first >= self.cruise_from_tx && a.largest_tx < cruise_end {
                        self.cruise.add(delivered, s);
                    }
                }
            }
        }
        if self.phase == Phase::Startup && saturated && self.bw > 0.0 {
            self.phase = Phase::Drain;
        }
    }

    fn end_round(&mut self, now: Instant, a: &AckInput) {
        self.round += 1;
        self.stats.rounds += 1;
        if self.round_sat_us >= MIN_CAPACITY_SPAN_US {
            let c = self.round_sat_bits_us / self.round_sat_us as f64;
            if self.capacity == 0.0 && self.phase == Phase::ProbeBw && !self.shared_by(c) {
                // The first robust measurement: a start-up that ended on one short, jittered train sample
                // (real hosts and forwarders deliver in clumps) may have left `bw` well below what the path
                // carries; alone on the path, start from what it delivered.
                self.bw = self.bw.max(c);
            }
            self.capacity = self.capacity.max(c);
        }
        self.round_sat_bits_us = 0.0;
        self.round_sat_us = 0;
        let probing = self.phase == Phase::ProbeBw && self.cycle_idx == 0;
        let mut spike = false;
        if self.round_tx >= 20 {
            let lf = (1.0 - self.round_rx as f64 / self.round_tx as f64).max(0.0);
            spike = self.round_tx >= 50 && lf > self.loss_base + self.cfg.loss_spike;
            if !probing && !spike {
                self.loss_hist.push_back(lf);
                while self.loss_hist.len() > 10 {
                    self.loss_hist.pop_front();
                }
                let mut v: Vec<f64> = self.loss_hist.iter().copied().collect();
                v.sort_by(f64::total_cmp);
                self.loss_base = v[v.len() / 2].min(self.cfg.max_loss_compensation);
            }
        }
        let delay = match (self.round_min_rtt, self.min_rtt) {
            (Some(r), Some((m, _))) => {
                r.as_secs_f64()
                    > m.as_secs_f64() * self.cfg.delay_threshold
                        + self.cfg.delay_margin.as_secs_f64()
            }
            _ => false,
        };
        let queue_free = match (self.round_min_rtt, self.min_rtt) {
            (Some(r), Some((m, _))) => r <= m + (m / 16).max(self.cfg.delay_margin / 2),
            _ => true,
        };
        let may_back_off = self.last_backoff_round.is_none_or(|r| self.round >= r + 2);
        if (delay || spike) && may_back_off && self.bw > 0.0 {
            if delay {
                self.stats.delay_backoffs += 1;
            } else {
                self.stats.loss_backoffs += 1;
            }
            // Back off from what the flow actually got through in the congested round (its current share),
            // not from the max filter, which may still hold an old or optimistic sample.
            let got = if self.round_rx_us > 0 {
                self.round_rx as f64 * self.wire_bits
                    / (self.round_rx_us as f64 * 1e-6)
                    / (1.0 - self.loss_base)
            } else {
                self.bw
            };
            let nb = self.bw.min(got) * self.cfg.backoff;
            self.bw = nb;
            self.bw_rounds.clear();
            self.bw_rounds.push_back((self.round, nb));
            self.ignore_until_tx = a.next_tx;
            self.last_backoff_round = Some(self.round);
            self.phase = Phase::ProbeBw;
            self.cycle_idx = 2;
            self.cruise_from_tx = a.next_tx;
        } else {
            match self.phase {
                Phase::Startup => {
                    if self.bw >= self.full_bw * 1.25 {
                        self.full_bw = self.bw;
                        self.full_bw_rounds = 0;
                    } else {
                        self.full_bw_rounds += 1;
                        if self.full_bw_rounds >= 3 {
                            self.phase = Phase::Drain;
                        }
                    }
                }
                Phase::Drain => {
                    let bdp = self.bdp_packets().unwrap_or(0.0);
                    self.drain_rounds += 1;
                    if a.inflight as f64 <= bdp || self.drain_rounds >= 3 {
                        // Probe first: start-up may have stopped short (one noisy sample).
                        self.phase = Phase::ProbeBw;
                        self.cycle_idx = 0;
                        self.probe_tx = (a.next_tx, u64::MAX);
                    }
                }
                Phase::ProbeBw => {
                    let comp = 1.0 / (1.0 - self.loss_base);
                    let g = self.cfg.growth_threshold;
                    let cruise_got = self.cruise.got(self.wire_bits).map(|r| r * comp);
                    let probe_got = self.probe.got(self.wire_bits).map(|r| r * comp);
                    // The path stretched our packets out: we sent faster than we got through (a probe that
                    // finds the link full counts too, so the prober backs off along with everyone else).
                    // Real hosts add timing jitter at both ends of a span (a late receiver or forwarder thread
                    // delivers a clump): allow twice the RTT variation, at most 5 % of the span.
                    let jitter = 2.0 * self.rttvar.as_secs_f64() * 1e6;
                    let allow = |sp: &Span| jitter.min(0.05 * sp.send_us as f64);
                    let growing = self.cruise.stretched(g, allow(&self.cruise))
                        || self.probe.stretched(g, allow(&self.probe));
                    if queue_free && !growing {
                        if let Some(got) = probe_got {
                            // The probe found spare capacity: take it.
                            self.bw = self.bw.max(got);
                        }
                        if self.cycle_idx >= 2 && !self.round_app_limited {
                            // Additive increase, the same step for every flow on the bottleneck, only while
                            // the path shows no queue.
                            let cap = self.capacity_bps();
                            let step = self.cfg.additive_increase * cap.max(self.bw);
                            // Up to the measured capacity (probes and saturated rounds raise that if the path
                            // got faster); beyond it the increase would only build a queue until it overflows.
                            let limit = if cap > 0.0 {
                                cap.max(self.bw)
                            } else {
                                f64::MAX
                            };
                            self.bw = (self.bw + step).min(limit);
                        }
                    } else if let Some(got) = cruise_got.or(probe_got) {
                        // Pace at what actually got through, so the queue stops growing (the cycle's drain
                        // round then empties it). If that is well below the capacity our packet train
                        // measured, the bottleneck is shared: overshooting it is answered multiplicatively,
                        // which is what makes the flows' shares converge (AIMD).
                        let got = got.min(self.bw);
                        let shared = got < 0.9 * self.capacity_bps();
                        let target = if growing && shared && may_back_off {
                            self.last_backoff_round = Some(self.round);
                            self.stats.share_backoffs += 1;
                            got * self.cfg.backoff
                        } else {
                            got
                        };
                        if target < self.bw * 0.98 {
                            self.bw = target;
                        }
                    }
                    if self.cycle_idx == 0 {
                        self.probe_tx.1 = a.next_tx;
                    }
                    self.cycle_idx = (self.cycle_idx + 1) % self.cfg.cycle_rounds.max(3) as usize;
                    if self.cycle_idx == 0 {
                        self.probe_tx = (a.next_tx, u64::MAX);
                    }
                    if self.cycle_idx == 2 {
                        self.cruise_from_tx = a.next_tx;
                    }
                }
            }
        }
        if self.phase != Phase::ProbeBw {
            while self
                .bw_rounds
                .front()
                .is_some_and(|&(r, _)| r + (self.cfg.bw_window_rounds as u64) < self.round)
            {
                self.bw_rounds.pop_front();
            }
            if !self.bw_rounds.is_empty() {
                self.bw = self.bw_rounds.iter().map(|x| x.1).fold(0.0, f64::max);
            }
        }
        if let (Some((_, at)), Some(r)) = (self.min_rtt, self.round_min_rtt) {
            if now.saturating_duration_since(at) > self.cfg.min_rtt_window {
                self.min_rtt = Some((r, now));
            }
        }
        self.round_min_rtt = None;
        self.round_tx = 0;
        self.round_rx = 0;
        self.round_rx_us = 0;
        self.round_app_limited = false;
        self.cruise = Span::default();
        self.probe = Span::default();
    }
}

/// Token-bucket pacer: releases a packet when its send time has come, letting up to `max_burst` packets of
/// credit build up while the sender is idle.
#[derive(Debug, Clone)]
pub struct Pacer {
    next_at: Instant,
}

impl Pacer {
    pub fn new(now: Instant) -> Self {
        Pacer { next_at: now }
    }
    /// May a packet leave at `now`?
    pub fn ready(&self, now: Instant) -> bool {
        self.next_at <= now
    }
    /// When the next packet may leave.
    pub fn next_at(&self) -> Instant {
        self.next_at
    }
    /// Charge a packet of `bytes` sent at `now` at `rate_bps`, with `burst_bytes` of credit allowed.
    pub fn on_send(&mut self, now: Instant, bytes: usize, rate_bps: f64, burst_bytes: usize) {
        let rate = rate_bps.max(1.0);
        let credit = Duration::from_secs_f64(burst_bytes as f64 * 8.0 / rate);
        let floor = now.checked_sub(credit).unwrap_or(now);
        let base = self.next_at.max(floor);
        self.next_at = base + Duration::from_secs_f64(bytes as f64 * 8.0 / rate);
    }
}

#[cfg(test)]
mod tests;
