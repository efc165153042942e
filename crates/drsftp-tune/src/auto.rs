//! `-p auto`: online stream-count controller. Starts from the model's P, probes upward while the measured
//! aggregate throughput gain exceeds `min_gain`, reverts a probe that buys nothing, and in steady state backs off
//! (retires streams) when per-stream throughput drops — the sign that competing flows appeared and extra streams
//! would only take bandwidth from them. Periodically re-probes upward. Pure state machine.
//!
//! Probes start geometric (the "slow start" of the stream count): the first probe doubles P, and doubling goes
//! on while each doubling's added streams carry at least `linear_marginal` (default ¾) of what the existing
//! streams carried on average — the regime where every stream is limited by something private to it (random
//! loss under a loss-based congestion control, a per-stream window), so throughput is linear in P and the
//! optimum is far away (seed 001's model has no loss term; at 0.1 % loss and 100 ms a cubic stream carries
//! ~8 Mbit/s whatever its buffer). The first doubling that falls short is not thrown away: it shrinks to a
//! ~25 % probe on the same base (retiring the rest) and from then on probes are ~25 % steps, as before.
//!
//! Path signal (TCP_INFO of the sending sockets, [`AutoStreams::handle_path`]). Aggregate throughput alone
//! cannot tell a loss-limited path from a full one early on: after slow start a cubic stream under random loss
//! decays from its overshoot over seconds, so a doubling can measure *less* than its base. The sender's TCP
//! knows better: retransmissions with no standing queue (smoothed RTT within `queue_headroom` of the minimum in
//! the median sampling period of the measurement, so new streams' brief slow-start queue does not count)
//! mean packets are lost on a bottleneck that is *not* full — random loss, not congestion — so every stream is
//! loss-limited, more streams add throughput and take nothing from anyone (a full bottleneck has a queue). With
//! that "headroom" signal a doubling is kept unless throughput collapsed (below half its base), and the
//! steady-state back-off, whose purpose is yielding to competitors, does not fire (competitors that matter
//! build a queue). With headroom the geometric phase also grows faster, x`headroom_growth` (4) per step instead
//! of x2: 4 -> 16 -> 64 streams in two steps, not four (~6.5 s instead of ~13 s at 100 ms), and a step taken with
//! headroom settles for `headroom_settle` (10 RTT) instead of `settle` (20 RTT) before it is measured: it is kept
//! unless throughput collapses, so the measurement only has to see the path signal again (~5.3 s to 64 streams at
//! 100 ms). Where the base's random loss gives the rate one settled stream carries (Mathis, from TCP_INFO's MSS),
//! a headroom step goes at least to the streams that rate needs to carry the transfer's peak so far (at most
//! x16): at 100 ms and 0.1 % loss, 4 -> 64 in one step at ~2 s (the first measurement may start after 10 RTT
//! there, and counts if it shows random loss). When such a step
//! lands past the saturation point (a queue appears, the gain is no longer linear) it is cut back to the
//! estimated saturation point, the stream count at which the base streams' per-stream rate adds up to the step's
//! throughput, rather than to a ~25 % probe, and held there (the periodic re-probe refines it). Because the new
//! streams' slow-start overshoot alone can fill the path for seconds, such a step gets up to `MAX_RECHECKS` (3)
//! extra measurement windows for the queue to drain before it is judged. Without the signal (no TCP_INFO) the rules above apply unchanged.
//!
//! The converse: a standing queue (the median period's smoothed RTT above `queue_headroom` x the minimum, and at
//! least 1 ms above it: on loopback the ratio is socket buffers and scheduling, not a bottleneck) means
//! the streams already fill the bottleneck, so no upward probe starts from it (the base, or a probe that was kept):
//! the controller holds. At 200 Mbit/s and 100 ms 4 streams kept the RTT at 1.4-1.7x its minimum; a doubling
//! gained nothing, was retired 3.3 s later, and the retirement cost ~0.2 s of the link.
//!
//! Held growth ([`AutoStreams::hold_growth`]): a driver may hold every upward probe for a while; a measurement
//! that would start one is kept and acted on when the hold ends. An upload watched by `--transport auto` holds
//! its starting streams until the transport rule's first verdict (docs/auto-transport.md): on 100 Mbit/s, 50 ms,
//! 1 % loss the x4 steps took a default upload 5 -> 21 -> 64 streams in 4.3 s, whose own standing queue (RTT
//! 70 ms against 50) the rule then read as congestion, so it stayed on TCP at 49 Mbit/s.
//!
//! Fairness (docs/drs.md §4.5): on a shared, full bottleneck extra streams still "gain" by taking the
//! competitors' share, so a gain alone would let a late transfer grow without bound while the first one backs
//! off. A probe is therefore kept only if the added streams each carry at least `min_marginal` (default ½) of
//! what the existing streams carried on average. Against `m` competing flows of similar windows the added
//! streams' marginal rate is about `m / (n + k + m)` of the average, so with ½ a transfer stops growing near the
//! competitors' stream count; with spare capacity (window-limited streams) the marginal rate is the full
//! average and probing goes on as before. Tested on the fluid model in `tests/auto_fairness.rs`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

mod path;
#[cfg(test)]
mod tests;

pub use path::PathSample;
use path::PathSums;

/// How many extra measurement windows a x4 step that shows a queue gets before it is cut back (`handle_sample`).
const MAX_RECHECKS: u8 = 3;

/// A cut-back after a x4 step that loses more than this fraction of the step's throughput is undone.
const CUT_BACK_LOSS: f64 = 0.15;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamAction {
    /// Open this many more data streams (MODE E).
    Add(u32),
    /// Close this many streams cleanly (EOD on each).
    Retire(u32),
}

#[derive(Debug, Clone, PartialEq)]
pub struct AutoConfig {
    pub min_streams: u32,
    pub max_streams: u32,
    /// Accept a probe that raised aggregate throughput by at least this fraction.
    pub min_gain: f64,
    /// Keep a probe only if each added stream carried at least this fraction of the average per-stream rate
    /// before it (the fairness rule in the module docs; negative: any gain of `min_gain` is kept).
    pub min_marginal: f64,
    /// Go on doubling while each added stream carried at least this fraction of the average before it
    /// (module docs); above 1: never double (~25 % steps from the start).
    pub linear_marginal: f64,
    /// Geometric phase with the path signal showing headroom (random loss, no queue): multiply P by this
    /// instead of doubling (module docs). 2 = plain doubling.
    pub headroom_growth: u32,
    /// Path signal: the retransmitted fraction of bytes sent at or above which loss counts as present.
    pub loss_floor: f64,
    /// Path signal: smoothed RTT / minimum RTT at or below which the bottleneck has no standing queue.
    pub queue_headroom: f64,
    /// Back off when per-stream throughput falls this fraction below the steady baseline.
    pub backoff_drop: f64,
    /// Wait this long after a change before measuring (a few RTTs for new streams to ramp).
    pub settle: Duration,
    /// The settle time after a step taken with the path signal's headroom (random loss, no queue): the step is
    /// kept unless throughput collapses, so its measurement only has to see the path signal again, not compare
    /// transients (module docs). [`Self::scaled_to_rtt`] makes it 10 RTT; the 100 ms floor is below one sampling
    /// period, so that at 20 ms (200 ms) the first sample after the step counts: with a 250 ms floor a sample
    /// that came a little early was dropped, and a step took 1 s instead of 0.75 s.
    pub headroom_settle: Duration,
    /// The settle time before the first measurement ([`Self::scaled_to_rtt`]).
    pub first_settle: Duration,
    /// If shorter than `first_settle`: the first measurement starts after this instead, and counts only if it
    /// shows random loss with no queue (the path signal's headroom, with loss in the median period:
    /// `PathSums::spread_loss`); otherwise it is dropped and taken again.
    /// The first streams' slow start meets its first random loss in ~10 RTTs at 0.1 % (the reading the first
    /// step is sized by, `AutoStreams::start_probe`), so at 100 ms the first step comes at ~2.2 s, not ~3.2 s;
    /// on a loss-free path the slow start is still filling the pipe then, and a base measured in it made the
    /// first doubling look like a gain (4 -> 8 -> 5 -> 6 streams, 1.00x where waiting gave 1.03x). At 20 and
    /// 40 ms a first measurement that had seen no retransmission yet took a plain doubling (1 -> 2 streams) in
    /// about one run in six, and that run was 10-15 % slower; retaken, it sees the loss.
    /// [`Self::scaled_to_rtt`] makes it 10 RTT on a wide-area path.
    pub loss_settle: Duration,
    /// Average this many samples for one measurement.
    pub samples: usize,
    /// Re-probe upward after this long in steady state.
    pub reprobe: Duration,
    /// The path's RTT, for the loss-limited rate of a stream ([`Self::scaled_to_rtt`] sets it; `None`: unknown).
    pub path_rtt: Option<Duration>,
}

impl Default for AutoConfig {
    fn default() -> Self {
        AutoConfig {
            min_streams: 1,
            max_streams: 64,
            min_gain: 0.05,
            min_marginal: 0.5,
            linear_marginal: 0.75,
            headroom_growth: 4,
            loss_floor: 1e-4,
            queue_headroom: 1.25,
            backoff_drop: 0.25,
            settle: Duration::from_secs(1),
            headroom_settle: Duration::from_millis(100),
            first_settle: Duration::from_secs(1),
            loss_settle: Duration::from_secs(1),
            samples: 3,
            reprobe: Duration::from_secs(30),
            path_rtt: None,
        }
    }
}

impl AutoConfig {
    /// A controller that keeps every probe (gain thresholds below zero), never backs off and settles after 20 ms:
    /// it only ever adds streams, up to `max_streams`. For tests and demonstrations of streams joining
    /// mid-transfer whatever the throughput does; not for real transfers.
    pub fn eager(max_streams: u32) -> AutoConfig {
        let fast = Duration::from_millis(20);
        AutoConfig {
            min_streams: 1,
            max_streams,
            min_gain: -1.0,
            min_marginal: -1.0,
            linear_marginal: 2.0,
            headroom_growth: 2,
            backoff_drop: 1.0,
            settle: fast,
            headroom_settle: fast,
            first_settle: fast,
            loss_settle: fast,
            samples: 1,
            reprobe: Duration::from_secs(600),
            ..AutoConfig::default()
        }
    }

    /// Stretches the settle time and the measurement window to the path's RTT: after a change, new streams spend
    /// ~10-20 RTTs in slow start and recovering from its first loss (their rate then is far above or below their
    /// steady one), and under random loss a loss-based stream's rate swings over its sawtooth, so a base measured
    /// during the initial slow-start peak, or a 0.75 s window at 100 ms, compares transients, not stream counts.
    /// Settle becomes at least `20 x rtt` and the window (`samples x interval`) at least `10 x rtt`, each capped
    /// (5 s, 40 samples) so a very long or bogus RTT cannot freeze the controller; the headroom settle at least
    /// `10 x rtt` (capped at 2.5 s). Never shortens. Records `rtt` as the path's.
    ///
    /// On a wide-area path (20 RTTs at least the headroom settle) the first measurement waits `20 x rtt` without
    /// `settle`'s floor: the transfer's first streams have only their own slow start to wait out, and on short
    /// paths the floor delayed every later step (20 ms: the first of three x4 steps came at 1.6 s instead of
    /// ~1.1 s). There the first measurement may also start early, after `loss_settle` (10 RTT),
    /// and counts if it shows random loss.
    pub fn scaled_to_rtt(mut self, rtt: Duration, interval: Duration) -> Self {
        self.path_rtt = (!rtt.is_zero()).then_some(rtt);
        let settle = rtt.saturating_mul(20).min(Duration::from_secs(5));
        self.settle = self.settle.max(settle);
        let quick = rtt.saturating_mul(10).min(Duration::from_millis(2500));
        self.headroom_settle = self.headroom_settle.max(quick);
        // On a LAN or loopback, 20 RTTs are a blink: keep the floor there (two auto transfers started together
        // on a paced loopback bottleneck then measure each other's ramps, not their own share).
        (self.first_settle, self.loss_settle) = if settle >= self.headroom_settle {
            (settle, quick.min(settle))
        } else {
            (self.settle, self.settle)
        };
        if !interval.is_zero() {
            let want = (rtt.as_secs_f64() * 10.0 / interval.as_secs_f64()).ceil() as usize;
            self.samples = self.samples.max(want.min(40));
        }
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Measuring the current P as the base of an upward probe.
    Base,
    /// Measuring after adding `added` streams on top of a base throughput.
    Probe {
        added: u32,
        base: f64,
        doubling: bool,
        /// Times this step was measured once more (see the x4 step's recheck in `handle_sample`).
        rechecks: u8,
        /// What one stream would carry at the base's random loss (`PathSums::loss_limited_rate`), if known.
        loss_rate: Option<f64>,
    },
    /// Measuring after a x4 step was cut back to its estimated saturation point: `removed` streams retired from
    /// a step that moved `step` (and not yet reopened).
    CutBack { removed: u32, step: f64 },
    /// Measuring after a revert/back-off, to set the steady baseline.
    Rebase,
    /// Steady: baseline aggregate and per-stream throughput.
    Hold {
        total: f64,
        per_stream: f64,
        since: Instant,
    },
}

/// The controller.
#[derive(Debug)]
pub struct AutoStreams {
    cfg: AutoConfig,
    streams: u32,
    state: State,
    settle_until: Instant,
    acc: Vec<f64>,
    /// Path signal summed over the current measurement (reset with `acc`).
    path: PathSums,
    low_run: usize,
    /// Still in the geometric phase (module docs).
    doubling: bool,
    /// The first measurement started early and counts only with headroom (`AutoConfig::loss_settle`).
    provisional: bool,
    /// The highest throughput the transfer has shown, over two consecutive samples (settling ones included),
    /// and the last sample: a lower bound on what the path carries (`start_probe`'s loss-limited step).
    peak: f64,
    last: f64,
    actions: VecDeque<StreamAction>,
    /// Upward probes held by the driver ([`Self::hold_growth`]), and the measurement (throughput, headroom, loss
    /// rate) that would have started one meanwhile.
    growth_held: bool,
    pending: Option<(f64, bool, Option<f64>)>,
}

impl AutoStreams {
    /// `initial` is the model's starting P (clamped to the configured range).
    pub fn new(now: Instant, initial: u32, cfg: AutoConfig) -> Self {
        let streams = initial.clamp(cfg.min_streams.max(1), cfg.max_streams.max(1));
        let first = cfg.first_settle.min(cfg.settle);
        AutoStreams {
            doubling: cfg.linear_marginal <= 1.0,
            provisional: cfg.loss_settle < first,
            settle_until: now + first.min(cfg.loss_settle),
            cfg,
            streams,
            state: State::Base,
            acc: vec![],
            path: PathSums::default(),
            low_run: 0,
            peak: 0.0,
            last: 0.0,
            actions: VecDeque::new(),
            growth_held: false,
            pending: None,
        }
    }

    /// Holds (`true`) or releases upward probes; call before each period's [`Self::handle_sample`]. While held,
    /// a measurement that would start a probe leaves the streams as they are and is kept (the latest one); the
    /// release starts that probe at once, so the hold costs no fresh measurement. Back-offs and retirements are
    /// never held.
    pub fn hold_growth(&mut self, now: Instant, held: bool) {
        let released = self.growth_held && !held;
        self.growth_held = held;
        if !released {
            return;
        }
        if let (State::Base, Some((t, headroom, loss_rate))) = (self.state, self.pending.take()) {
            self.start_probe(now, t, headroom, loss_rate);
        }
    }

    /// Streams the controller wants open now.
    pub fn streams(&self) -> u32 {
        self.streams
    }

    /// True once probing has stopped (steady state).
    pub fn is_steady(&self) -> bool {
        matches!(self.state, State::Hold { .. })
    }

    pub fn poll_action(&mut self) -> Option<StreamAction> {
        self.actions.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Hold { since, .. } => Some(since + self.cfg.reprobe),
            _ => Some(self.settle_until),
        }
    }

    /// The sending sockets' path signal over the period ending at `now` (module docs). Call before the
    /// period's [`Self::handle_sample`]; readings taken while settling are ignored like samples.
    pub fn handle_path(&mut self, now: Instant, sample: PathSample) {
        if now >= self.settle_until {
            self.path.add(sample);
        }
    }

    /// Aggregate goodput over all streams (bytes/s) measured over the period ending at `now`.
    pub fn handle_sample(&mut self, now: Instant, throughput: f64) {
        self.peak = self.peak.max((self.last + throughput) / 2.0);
        self.last = throughput;
        if now < self.settle_until {
            return;
        }
        if let State::Hold {
            total,
            per_stream,
            since,
        } = self.state
        {
            let ps = throughput / self.streams as f64;
            let headroom = self.path.headroom(&self.cfg);
            self.path = PathSums::default();
            if !headroom
                && ps < per_stream * (1.0 - self.cfg.backoff_drop)
                && throughput <= total * (1.0 + self.cfg.min_gain)
            {
                self.low_run += 1;
                if self.low_run >= self.cfg.samples && self.streams > self.cfg.min_streams {
                    // Competing traffic (or a slower path): halve the streams above the floor.
                    let extra = self.streams - self.cfg.min_streams;
                    let cut = extra.div_ceil(2).max(1);
                    self.change(now, -(cut as i64));
                    self.state = State::Rebase;
                }
                return;
            }
            self.low_run = 0;
            if now >= since + self.cfg.reprobe {
                self.state = State::Base;
                self.acc.clear();
            } else {
                return;
            }
        }
        self.acc.push(throughput);
        if self.acc.len() < self.cfg.samples {
            return;
        }
        let t = self.acc.iter().sum::<f64>() / self.acc.len() as f64;
        self.acc.clear();
        let headroom = self.path.headroom(&self.cfg);
        let queued = self.path.queued(&self.cfg);
        let loss_rate = self.path.loss_limited_rate(self.cfg.path_rtt);
        // An early first measurement counts only with random loss (`AutoConfig::loss_settle`).
        let counts = !std::mem::take(&mut self.provisional)
            || (headroom && self.path.spread_loss(&self.cfg));
        self.path = PathSums::default();
        if !counts {
            return;
        }
        match self.state {
            // The streams already fill the bottleneck (a standing queue): no upward probe. At 200 Mbit/s and
            // 100 ms 4 streams kept the RTT at 1.4-1.7x its minimum; a doubling to 8 gained nothing, was retired
            // 3.3 s later, and the retirement cost ~0.2 s of the link while the 4 left regrew their windows.
            State::Base if queued => self.hold(now, t),
            State::Base => self.start_probe(now, t, headroom, loss_rate),
            State::Probe {
                added,
                base,
                doubling,
                rechecks,
                loss_rate: base_loss_rate,
            } => {
                let before = self.streams.saturating_sub(added).max(1) as f64;
                let marginal = (t - base) / added.max(1) as f64;
                let per_before = base / before;
                // A negative `min_marginal` switches the fairness rule off entirely (as documented). Merely
                // scaling it into the threshold would still revert a probe whose aggregate fell by more than
                // `base / before` — i.e. an eager controller (min_gain = min_marginal = -1) retiring a stream
                // after one low sample.
                let fair =
                    self.cfg.min_marginal < 0.0 || marginal >= self.cfg.min_marginal * per_before;
                let gained = t >= base * (1.0 + self.cfg.min_gain);
                // Loss-limited with room on the path: keep doubling unless throughput collapsed.
                let linear = (headroom && t >= 0.5 * base)
                    || (gained && marginal >= self.cfg.linear_marginal * per_before);
                if doubling && headroom && linear {
                    self.start_probe(now, t, true, loss_rate);
                    return;
                }
                if doubling
                    && !linear
                    && !headroom
                    && added as f64 > before
                    && rechecks < MAX_RECHECKS
                    && t >= 0.5 * base
                {
                    // A x4 step (taken because the base showed random loss and no queue) now shows a queue: the
                    // many new streams' slow-start overshoot can fill the path for a few seconds (48 streams at
                    // 100 ms: ~900 Mbit/s for 2-4 s, then ~350), longer than the settle time. A standing queue
                    // persists, a transient one does not: measure again (up to MAX_RECHECKS windows) before
                    // cutting back.
                    self.state = State::Probe {
                        added,
                        base,
                        doubling,
                        rechecks: rechecks + 1,
                        loss_rate: base_loss_rate,
                    };
                    return;
                }
                if doubling && !linear {
                    // Not linear any more: end the geometric phase. If the step gained at all, keep part of it
                    // (same base) and measure that: a ~25 % probe, or after a headroom step (x4, taken only
                    // while the path showed random loss and no queue) up to where the streams would saturate
                    // if each carried what the base streams did (t / per_before), or what one stream carries at
                    // the base's random loss if that is less: a base measured just after the previous step
                    // counts its new streams' slow starts (16 streams at 39 Mbit/s each at 20 ms and 0.1 % loss,
                    // where a settled stream carries ~20 and 25 streams moved 600 of the step's 970 Mbit/s).
                    // Not after a plain doubling: against competitors the gain is partly their share, and the
                    // estimate would overshoot.
                    self.doubling = false;
                    let per_stream = base_loss_rate.map_or(per_before, |r| r.min(per_before));
                    let saturation = if added as f64 > before && per_stream > 0.0 {
                        (t / per_stream).ceil().min(u32::MAX as f64) as u32
                    } else {
                        0
                    };
                    let keep = Self::small_step(before as u32)
                        .max(saturation.saturating_sub(before as u32))
                        .min(added);
                    // A x4 step is judged by the estimate even when it did not gain over its base, unless it
                    // collapsed: a base measured right after the previous step can carry that step's slow starts
                    // (16 fresh streams filling the 20 ms path for a second), and reverting to it left 16
                    // loss-limited streams moving 395 Mbit/s where 64 moved ~950 (one lab run of six).
                    let by_estimate = saturation > 0 && t >= 0.5 * base;
                    if (gained || by_estimate) && keep < added {
                        self.change(now, -((added - keep) as i64));
                        self.state = if saturation > 0 {
                            // After a x4 step the estimate is the decision: measuring it against a base taken
                            // seconds earlier, in other streams' transients, reverted it to the base in lab runs
                            // at 40 ms (31 -> 16 streams). Hold there unless the cut itself cost the step's
                            // throughput (see `State::CutBack`); the periodic re-probe refines it.
                            State::CutBack {
                                removed: added - keep,
                                step: t,
                            }
                        } else {
                            State::Probe {
                                added: keep,
                                base,
                                doubling: false,
                                rechecks: MAX_RECHECKS,
                                loss_rate: base_loss_rate,
                            }
                        };
                        return;
                    }
                    if by_estimate {
                        // The estimate keeps the whole step. Not the fairness rule below: its per-stream
                        // comparison is against the same inflated base, and it reverted 64 -> 16 streams in 3 of 9
                        // lab runs at 20 ms (16 loss-limited streams then moved ~400 Mbit/s).
                        self.hold(now, t);
                        return;
                    }
                }
                if gained && fair && queued {
                    // Kept, but the streams now fill the path: no further probe (as from `State::Base`).
                    self.hold(now, t);
                } else if gained && fair {
                    self.start_probe(now, t, headroom, loss_rate);
                } else {
                    self.change(now, -(added as i64));
                    self.doubling = false;
                    self.state = State::Rebase;
                }
            }
            State::CutBack { removed, step } => {
                if t < step * (1.0 - CUT_BACK_LOSS) {
                    // The estimate was too low (a base inflated by slow starts, without the loss reading that
                    // bounds it): the retired streams did carry traffic. Restore them.
                    self.change(now, removed as i64);
                    self.state = State::Rebase;
                } else if headroom && t < step * (1.0 - self.cfg.min_gain) {
                    // Short of the step by a little, with random loss and no queue: the path has room, and the
                    // streams left are loss-limited, so this is their settled per-stream rate, free of the
                    // slow starts the estimate came from (20 ms, 0.1 %: 39 streams carried 840 of the step's
                    // 960 Mbit/s). Reopen what the step's throughput needs at that rate, and measure again.
                    let s = self.streams as f64;
                    let need = ((s * step / t).ceil() - s).max(1.0) as u32;
                    let add = need.min(removed);
                    self.change(now, add as i64);
                    self.state = if add < removed {
                        State::CutBack {
                            removed: removed - add,
                            step,
                        }
                    } else {
                        State::Rebase
                    };
                } else {
                    self.hold(now, t);
                }
            }
            State::Rebase => self.hold(now, t),
            State::Hold { .. } => unreachable!(),
        }
    }

    /// Timer expiry: nothing to do beyond what `handle_sample` does; present for driver symmetry.
    pub fn handle_timeout(&mut self, _now: Instant) {}

    /// Adds streams on top of `base`: x2 in the geometric phase (x`headroom_growth` with the path signal's
    /// headroom), ~25 % after it.
    ///
    /// With headroom and the base's loss-limited per-stream rate known, the step goes at least to the streams that
    /// rate needs to carry the transfer's peak (`peak / rate`, at most x`headroom_growth`^2): the path carried
    /// the peak, and random loss (no queue) holds each settled stream to that rate. At 100 ms and 0.1 % loss 4
    /// streams' slow starts peaked at ~265 Mbit/s and one settled stream carries ~3 by Mathis, so the first step
    /// goes 4 -> 64 (the cap) at once instead of 4 -> 16 and 16 -> 64 (with the early first measurement,
    /// `AutoConfig::loss_settle`: at ~2 s instead of ~5.5 s).
    fn start_probe(&mut self, now: Instant, base: f64, headroom: bool, loss_rate: Option<f64>) {
        if self.growth_held {
            // Measured again from `State::Base`; the release acts on the latest measurement.
            self.state = State::Base;
            self.pending = Some((base, headroom, loss_rate));
            return;
        }
        self.pending = None;
        let step = if self.doubling && headroom {
            let growth = self.cfg.headroom_growth.max(2);
            let quad = self.streams.saturating_mul(growth - 1);
            let need = loss_rate
                .filter(|r| *r > 0.0)
                .map_or(0.0, |r| (self.peak / r).ceil())
                .min(self.streams.saturating_mul(growth * growth) as f64)
                as u32;
            quad.max(need.saturating_sub(self.streams))
        } else if self.doubling {
            self.streams
        } else {
            Self::small_step(self.streams)
        }
        .min(self.cfg.max_streams.saturating_sub(self.streams));
        if step == 0 {
            self.hold(now, base);
            return;
        }
        self.change(now, step as i64);
        if self.doubling && headroom {
            // Kept unless throughput collapses: only the path signal needs measuring again.
            self.settle_until = now + self.cfg.headroom_settle.min(self.cfg.settle);
        }
        self.state = State::Probe {
            added: step,
            base,
            doubling: self.doubling,
            rechecks: 0,
            loss_rate,
        };
    }

    /// The ~25 % probe step from `streams`.
    fn small_step(streams: u32) -> u32 {
        (streams / 4).max(1)
    }

    fn hold(&mut self, now: Instant, total: f64) {
        self.low_run = 0;
        self.pending = None;
        self.state = State::Hold {
            total,
            per_stream: total / self.streams as f64,
            since: now,
        };
    }

    fn change(&mut self, now: Instant, delta: i64) {
        let next = (self.streams as i64 + delta)
            .clamp(self.cfg.min_streams as i64, self.cfg.max_streams as i64)
            as u32;
        if next > self.streams {
            self.actions
                .push_back(StreamAction::Add(next - self.streams));
        } else if next < self.streams {
            self.actions
                .push_back(StreamAction::Retire(self.streams - next));
        }
        self.streams = next;
        self.settle_until = now + self.cfg.settle;
        self.acc.clear();
        self.path = PathSums::default();
    }
}
