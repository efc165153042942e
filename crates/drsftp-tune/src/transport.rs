//! `--transport auto`: the pure decision between staying on TCP and moving the rest of a transfer to UDP blast,
//! from the TCP path's readings (RTT, loss marks, bytes delivered) fed with `now`, plus the start choice from a
//! path profile. No clock or socket: the driver samples TCP_INFO and asks [`TransportDecider::poll_decision`].
//!
//! The rule (docs/auto-transport.md): switch only when the path shows *random* loss — loss marks in many sample
//! intervals while the RTT stays near its minimum, i.e. no standing queue — and blast's projected time for the
//! remaining bytes, set-up included, beats TCP's by [`TransportConfig::margin`]. Loss that comes with a queue is
//! congestion (another flow sharing the link, our own overshoot): TCP is doing its job there and blast, which
//! yields to queue-building flows, would gain nothing, so two drsftp transfers on a clean shared link stay on TCP.
//! That rule waits for a warm-up and a full evidence window (~3 s at 100 ms); when the evidence is overwhelming
//! (loss marks in a run of intervals lasting 6 RTTs or more, with no queue at any point of it) the switch comes
//! after 1 s or 10 RTTs instead ([`TransportConfig::early`]).

use std::time::{Duration, Instant};

/// One reading of the TCP data path, cumulative over its streams since the transfer began.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PathReading {
    /// Payload bytes delivered so far.
    pub delivered: u64,
    /// Segments delivered so far (the loss marks' denominator).
    pub segments: u64,
    /// Loss marks so far: retransmitted segments at a sender, segments that arrived out of order at a receiver
    /// (each hole a loss leaves makes the segments behind it arrive out of order until it is filled).
    pub loss_marks: u64,
    /// The current RTT estimate; zero when the socket has none yet.
    pub rtt: Duration,
}

/// Tuning of the rule; the defaults are what `drsftp copy` uses.
#[derive(Debug, Clone, PartialEq)]
pub struct TransportConfig {
    /// No decision before TCP has run this long (slow start is no evidence either way).
    pub warmup: Duration,
    /// Evidence is judged over the readings of this trailing window.
    pub window: Duration,
    /// "No standing queue": the window's mean RTT is at most this multiple of the minimum RTT seen.
    pub queue_ratio: f64,
    /// A path RTT measured before the data flowed (the control connection's) counts as a minimum at this multiple:
    /// the receiver's RTT estimate runs a little high, but a transfer that starts into another flow's standing
    /// queue never sees the empty path at all.
    pub path_rtt_slack: f64,
    /// Loss marks per segment delivered in the window at least this for the path to count as lossy.
    pub min_loss_fraction: f64,
    /// Random loss is spread out: at least this many sample intervals of the window carry loss marks.
    pub min_lossy_intervals: usize,
    /// Blast must beat TCP's projected remaining time by this fraction (0.2 = 20 % shorter).
    pub margin: f64,
    /// What a switch costs before blast moves data at its rate: ABOR, BPAS/RETR round trips, rate ramp.
    pub switch_cost: Duration,
    /// Of the best rate the path has shown (or the profile's), the share blast is assumed to keep.
    pub blast_efficiency: f64,
    /// What the loss marks are, for the reasons: "arrived out of order" (a receiver), "were retransmitted".
    pub marks_are: &'static str,
    /// TCP's rate for the rest is at least its rate over this trailing part of the window (at least 10 RTTs):
    /// the window's mean still holds the ramp (BBR's start-up, a slow start), which would make a TCP that
    /// already fills the link look slow and pay a switch for nothing.
    pub recent: Duration,
    /// The early rule (strong evidence): from this long into the transfer (at least 10 RTTs) a switch may come
    /// before [`Self::warmup`] and a full [`Self::window`], when the loss marks are overwhelming (see
    /// [`Self::early_run`]). Only a switch is early; staying is judged by the conservative rule.
    pub early: Duration,
    /// Strong evidence: a trailing run of intervals with loss marks, at most one unmarked interval inside it
    /// and the last one marked, lasting this long (at least 6 RTTs) with at least 3 marked intervals: a
    /// slow-start overshoot's recovery is over within a few RTTs, random loss keeps marking.
    pub early_run: Duration,
    /// Strong evidence: the run's mean RTT at most this multiple of the minimum, and none of its readings above
    /// [`Self::queue_ratio`] times it. Stricter than the conservative queue test: an overshoot (slow start,
    /// BBR's start-up, a second flow joining) fills the queue and shows here.
    pub early_queue_ratio: f64,
    /// Strong evidence switches only when TCP at its rate would still need this multiple of
    /// [`Self::switch_cost`] for the rest: this early, TCP's peak says nothing of blast's rate, so the switch is
    /// taken on the evidence that TCP is loss-limited (loss in every interval, no queue: the link is not full),
    /// and only where its cost is small against what is left.
    pub early_min_rest: f64,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            warmup: Duration::from_secs(2),
            window: Duration::from_secs(3),
            queue_ratio: 1.25,
            path_rtt_slack: 1.1,
            min_loss_fraction: 0.002,
            min_lossy_intervals: 3,
            margin: 0.2,
            switch_cost: Duration::from_millis(1500),
            blast_efficiency: 0.9,
            marks_are: "arrived out of order",
            recent: Duration::from_secs(1),
            early: Duration::from_secs(1),
            early_run: Duration::from_millis(750),
            early_queue_ratio: 1.15,
            early_min_rest: 3.0,
        }
    }
}

impl TransportConfig {
    /// The rule at a sender (uploads), whose loss marks are its own retransmitted segments: about one per lost
    /// segment rather than the window's worth of out-of-order arrivals one loss leaves at a receiver (34 % of
    /// segments at 1 % loss), so the loss threshold is the path profile's, [`PROFILE_LOSSY`]. The sender's RTT
    /// (smoothed, per ack) is also a better queue gauge than a receiver's estimate.
    pub fn sender() -> Self {
        TransportConfig {
            min_loss_fraction: PROFILE_LOSSY,
            marks_are: "were retransmitted",
            ..TransportConfig::default()
        }
    }
}

/// What the decider concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Keep TCP for the rest of the transfer, and why.
    StayTcp(String),
    /// Move the remaining bytes to blast, and why.
    SwitchToBlast(String),
}

impl Decision {
    /// The reason, for `--json` and the summary.
    pub fn reason(&self) -> &str {
        match self {
            Decision::StayTcp(r) | Decision::SwitchToBlast(r) => r,
        }
    }
}

/// What the rule concluded about the path itself (for path memory: `drsftp copy` records it, so the next copy to
/// the same server starts right). Only set by a verdict on random loss: a "clean path", or random loss seen
/// (switch, or stay because TCP was already near its best); a standing queue says nothing of the path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judged {
    /// Random loss without a queue was seen (`false`: the loss marks were below the threshold, a clean path).
    pub random_loss: bool,
    /// Loss marks per segment in the judged window (out-of-order arrivals at a receiver, overstating the loss
    /// rate by about a window; retransmissions at a sender).
    pub marks_share: f64,
    /// The minimum RTT the rule compared with.
    pub min_rtt: Duration,
    /// The best delivery rate TCP showed over one sample interval (or over the window), bit/s.
    pub rate_bps: f64,
}

/// How a transfer starts under `--transport auto`.
#[derive(Debug, Clone, PartialEq)]
pub enum StartChoice {
    /// TCP for good (no blast at the peer, or nothing to gain): the reason.
    Tcp(String),
    /// TCP, watched by a [`TransportDecider`] that may move the rest to blast.
    TcpWatched,
    /// Blast from the start: the reason.
    Blast(String),
}

/// What the path profile (`drsftp tune calibrate`, paths.json) says about loss.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ProfileLoss {
    /// Random loss measured on the path, a fraction (0.01 = 1 %).
    pub loss: f64,
}

/// Loss at or above this in a path profile starts a transfer on blast directly.
pub const PROFILE_LOSSY: f64 = 0.0005;

/// The start choice: `peer_blast` whether the peer offers blast, `profile` the path profile's loss if any,
/// `watchable` whether the transfer can switch mid-way (a whole download of known size).
pub fn start_choice(
    peer_blast: bool,
    profile: Option<ProfileLoss>,
    watchable: bool,
) -> StartChoice {
    if !peer_blast {
        return StartChoice::Tcp("the server does not offer UDP blast".into());
    }
    if let Some(p) = profile.filter(|p| p.loss >= PROFILE_LOSSY) {
        return StartChoice::Blast(format!(
            "the path profile shows {:.2} % random loss",
            p.loss * 100.0
        ));
    }
    if watchable {
        StartChoice::TcpWatched
    } else {
        StartChoice::Tcp("no lossy path profile, and this transfer cannot switch mid-way".into())
    }
}

/// Share of the delivery rate TCP showed (its best sample interval, [`Judged::rate_bps`]) that blast starts at
/// after a switch: the path carried that rate moments ago, so blast need not ramp from its default 10 Mbit/s;
/// the margin covers a slow-start burst read as a rate and blast's header overhead.
pub const SWITCH_START_SHARE: f64 = 0.8;

/// Share of the rate an earlier copy measured (path memory) that blast starts at, as for a calibrated path
/// profile's rate.
pub const MEMORY_START_SHARE: f64 = 0.9;

/// Blast's start rate in bit/s (on the wire): `share` of a rate the path showed, `shown_bps`, capped by
/// `max_rate` (`--max-rate`; 0: no cap). 0 (the sender's own default start) when nothing usable was shown. The
/// sender still backs off from it if the path carries less, and keeps yielding to a queue-building flow.
pub fn blast_start_rate(shown_bps: f64, share: f64, max_rate: u64) -> u64 {
    let r = shown_bps * share;
    if !r.is_finite() || r < 1.0 {
        return 0;
    }
    let r = r as u64;
    match max_rate {
        0 => r,
        m => r.min(m),
    }
}

#[derive(Debug, Clone, Copy)]
struct Point {
    at: Instant,
    r: PathReading,
}

/// The online rule (module docs). Feed [`handle_reading`](Self::handle_reading) every sample interval; ask
/// [`poll_decision`](Self::poll_decision) with the bytes still to move. "Stay on TCP" is the verdict so far and
/// is judged again on later readings (loss may show only once TCP leaves slow start); a switch is final: after
/// it the decider answers `None`.
#[derive(Debug, Clone)]
pub struct TransportDecider {
    cfg: TransportConfig,
    start: Instant,
    min_rtt: Option<Duration>,
    /// The path's RTT from before the transfer (see [`TransportConfig::path_rtt_slack`]).
    path_rtt: Option<Duration>,
    /// Readings of the trailing window (plus the one just before it, the window's base).
    points: Vec<Point>,
    /// Best delivery rate over one sample interval, bytes/s.
    peak_rate: f64,
    /// A link rate known from elsewhere (profile), bytes/s.
    link_hint: Option<f64>,
    decided: bool,
    /// The conservative rule has given a verdict: the early rule has had its chance.
    judged: bool,
    /// The last verdict's reading of the path ([`Judged`]).
    last: Option<Judged>,
}

impl TransportDecider {
    /// A decider for a TCP transfer that began at `now`; `link_hint_bps` a known link rate in bit/s.
    pub fn new(now: Instant, cfg: TransportConfig, link_hint_bps: Option<f64>) -> Self {
        TransportDecider {
            cfg,
            start: now,
            min_rtt: None,
            path_rtt: None,
            points: Vec::new(),
            peak_rate: 0.0,
            link_hint: link_hint_bps
                .filter(|r| r.is_finite() && *r > 0.0)
                .map(|r| r / 8.0),
            decided: false,
            judged: false,
            last: None,
        }
    }

    /// The path's round trip measured before the data flowed (the control connection's, at login): the queue
    /// test then also holds against it, so a transfer that joins a link with a standing queue still sees it.
    pub fn with_path_rtt(mut self, rtt: Duration) -> Self {
        self.path_rtt = Some(rtt).filter(|r| !r.is_zero());
        self
    }

    /// A reading taken at `now`. Readings that go backwards (a stream ended) are clamped to the last one.
    pub fn handle_reading(&mut self, now: Instant, r: PathReading) {
        let mut r = r;
        if let Some(last) = self.points.last() {
            if now <= last.at {
                return;
            }
            r.delivered = r.delivered.max(last.r.delivered);
            r.segments = r.segments.max(last.r.segments);
            r.loss_marks = r.loss_marks.max(last.r.loss_marks);
            let dt = (now - last.at).as_secs_f64();
            let rate = (r.delivered - last.r.delivered) as f64 / dt;
            // Past slow start only: a peak while the window still doubles says nothing of the path.
            if now >= self.start + self.cfg.warmup / 2 {
                self.peak_rate = self.peak_rate.max(rate);
            }
        }
        if !r.rtt.is_zero() {
            self.min_rtt = Some(self.min_rtt.map_or(r.rtt, |m| m.min(r.rtt)));
        }
        self.points.push(Point { at: now, r });
        // Keep the window plus one base point before it.
        let horizon = now.checked_sub(self.window()).unwrap_or(self.start);
        let first_in = self
            .points
            .iter()
            .position(|p| p.at >= horizon)
            .unwrap_or(0);
        if first_in > 1 {
            self.points.drain(..first_in - 1);
        }
    }

    /// The verdict, once the evidence allows one, for `remaining` bytes still to move; `None` while undecided
    /// (and for ever after a switch was returned).
    pub fn poll_decision(&mut self, now: Instant, remaining: u64) -> Option<Decision> {
        self.poll_decision_resending(now, remaining, 0)
    }

    /// [`poll_decision`](Self::poll_decision) where a switch would also send `resend` bytes again over blast
    /// (an upload: the server keeps no partial of an aborted TCP upload for a blast STOR to resume), which
    /// blast's projected time includes.
    pub fn poll_decision_resending(
        &mut self,
        now: Instant,
        remaining: u64,
        resend: u64,
    ) -> Option<Decision> {
        // Long paths leave slow start later: the warm-up and the window grow with the RTT.
        let rtt = self.min_rtt.unwrap_or_default();
        if self.decided {
            return None;
        }
        // Until the conservative rule has judged once, overwhelming evidence may switch early.
        if !self.judged && now >= self.start + self.cfg.early.max(rtt * 10) {
            if let Some((d, j)) = self.judge_early(remaining, resend) {
                self.decided = true;
                self.last = Some(j);
                return Some(d);
            }
        }
        if now < self.start + self.cfg.warmup.max(rtt * 20) {
            return None;
        }
        let (d, j) = self.judge(now, remaining, resend)?;
        self.judged = true;
        self.last = j.or(self.last);
        self.decided = matches!(d, Decision::SwitchToBlast(_));
        Some(d)
    }

    /// What the last verdict read of the path, if it said anything of random loss ([`Judged`]).
    pub fn judged(&self) -> Option<Judged> {
        self.last
    }

    /// The early rule ([`TransportConfig::early`]): a switch on overwhelming evidence of random loss, or nothing.
    fn judge_early(&self, remaining: u64, resend: u64) -> Option<(Decision, Judged)> {
        let pts = &self.points;
        let last = pts.last()?;
        let min_rtt = self.min_rtt?;
        let run_needed = self.cfg.early_run.max(min_rtt * 6);
        // Walk back over the trailing run of marked intervals, tolerating one unmarked interval inside it.
        let marked = |k: usize| pts[k].r.loss_marks > pts[k - 1].r.loss_marks;
        let (mut from, mut n_marked, mut gaps) = (pts.len() - 1, 0usize, 0usize);
        let mut k = pts.len() - 1;
        while k >= 1 {
            if marked(k) {
                n_marked += 1;
                from = k - 1;
            } else if k == pts.len() - 1 || gaps > 0 || k == 1 || !marked(k - 1) {
                break;
            } else {
                gaps += 1;
            }
            k -= 1;
        }
        let base = &pts[from];
        let span = last.at.checked_duration_since(base.at)?;
        if n_marked < 3 || span < run_needed {
            return None;
        }
        let segments = (last.r.segments - base.r.segments).max(1);
        let loss = (last.r.loss_marks - base.r.loss_marks) as f64 / segments as f64;
        if loss < self.cfg.min_loss_fraction {
            return None;
        }
        // No queue at any point of the run: an overshoot's loss comes with one.
        let min = self.min_rtt_bound()?;
        let rtts: Vec<f64> = pts[from + 1..]
            .iter()
            .filter(|p| !p.r.rtt.is_zero())
            .map(|p| p.r.rtt.as_secs_f64())
            .collect();
        let mean = rtts.iter().sum::<f64>() / rtts.len().max(1) as f64;
        let max = rtts.iter().copied().fold(0.0, f64::max);
        if rtts.is_empty()
            || mean > min * self.cfg.early_queue_ratio
            || max > min * self.cfg.queue_ratio
        {
            return None;
        }
        let secs = span.as_secs_f64();
        let run_rate = (last.r.delivered - base.r.delivered) as f64 / secs;
        let tcp_rate = run_rate.max(self.recent_rate(last));
        if tcp_rate <= 0.0 {
            return None;
        }
        let t_tcp = remaining as f64 / tcp_rate;
        let cost = self.cfg.switch_cost.as_secs_f64();
        if t_tcp < cost * self.cfg.early_min_rest {
            return None;
        }
        // With a known link rate the projection still has to favour blast.
        if let Some(link) = self.link_hint {
            let t_blast = cost + (remaining + resend) as f64 / (link * self.cfg.blast_efficiency);
            if t_blast >= t_tcp * (1.0 - self.cfg.margin) {
                return None;
            }
        }
        let peak = pts
            .windows(2)
            .map(|w| {
                (w[1].r.delivered - w[0].r.delivered) as f64
                    / (w[1].at - w[0].at).as_secs_f64().max(1e-9)
            })
            .fold(tcp_rate, f64::max);
        let judged = Judged {
            random_loss: true,
            marks_share: loss,
            min_rtt: Duration::from_secs_f64(min),
            rate_bps: peak * 8.0,
        };
        Some((Decision::SwitchToBlast(format!(
            "random loss, strong evidence early ({:.2} % of segments {} in {n_marked} intervals over the last \
             {secs:.2} s, RTT {:.1} ms at most {:.1} against a minimum of {:.1} ms: no queue); TCP moves {:.1} \
             Mbit/s, {t_tcp:.1} s for the rest at that rate",
            loss * 100.0,
            self.cfg.marks_are,
            mean * 1e3,
            max * 1e3,
            min * 1e3,
            tcp_rate * 8e-6
        )), judged))
    }

    /// The minimum RTT the queue tests compare with, seconds: the data's own, or the path's (the control
    /// connection's, with [`TransportConfig::path_rtt_slack`]) if that is lower.
    fn min_rtt_bound(&self) -> Option<f64> {
        let min = self.min_rtt?.as_secs_f64();
        Some(
            self.path_rtt
                .map_or(min, |p| min.min(p.as_secs_f64() * self.cfg.path_rtt_slack)),
        )
    }

    /// The evidence window: [`TransportConfig::window`], at least 30 RTTs.
    fn window(&self) -> Duration {
        self.cfg.window.max(self.min_rtt.unwrap_or_default() * 30)
    }

    /// The trailing span TCP's current rate is taken over: [`TransportConfig::recent`], at least 10 RTTs.
    fn recent(&self) -> Duration {
        self.cfg.recent.max(self.min_rtt.unwrap_or_default() * 10)
    }

    /// Bytes/s delivered from the last reading at or before `last.at - recent` to `last`; 0 without one.
    fn recent_rate(&self, last: &Point) -> f64 {
        let from = last.at.checked_sub(self.recent());
        let base = from.and_then(|f| self.points.iter().rev().find(|p| p.at <= f));
        match base {
            Some(b) if last.at > b.at => {
                (last.r.delivered - b.r.delivered) as f64 / (last.at - b.at).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    fn judge(
        &self,
        now: Instant,
        remaining: u64,
        resend: u64,
    ) -> Option<(Decision, Option<Judged>)> {
        let (base, last) = (self.points.first()?, self.points.last()?);
        // A full window of evidence, unless the transfer is about to end anyway.
        let span = (last.at - base.at).as_secs_f64();
        if span < self.window().as_secs_f64() * 0.9 && now < self.start + self.window() * 2 {
            return None;
        }
        if span <= 0.0 {
            return None;
        }
        let delivered = last.r.delivered - base.r.delivered;
        let mean_rate = delivered as f64 / span;
        let recent_rate = self.recent_rate(last);
        let tcp_rate = mean_rate.max(recent_rate);
        let segments = (last.r.segments - base.r.segments).max(1);
        let marks = last.r.loss_marks - base.r.loss_marks;
        let loss = marks as f64 / segments as f64;
        let lossy_intervals = self
            .points
            .windows(2)
            .filter(|w| w[1].r.loss_marks > w[0].r.loss_marks)
            .count();
        // Intervals in which nothing arrived: with a window of a few segments (heavy loss) TCP recovers by
        // retransmission timeout, leaving no out-of-order segments to count, only silence.
        let silent = self
            .points
            .windows(2)
            .filter(|w| w[0].r.delivered > 0 && w[1].r.delivered == w[0].r.delivered)
            .count();
        let marked =
            loss >= self.cfg.min_loss_fraction && lossy_intervals >= self.cfg.min_lossy_intervals;
        if !marked && silent < self.cfg.min_lossy_intervals {
            let why = if loss < self.cfg.min_loss_fraction {
                "clean path"
            } else {
                "no sign of random loss"
            };
            // Either way the path shows no random loss (loss in bursts is congestion), which is what path
            // memory keeps: the next copy starts on TCP, watched, as it would with no memory.
            let clean = Some(Judged {
                random_loss: false,
                marks_share: loss,
                min_rtt: self.min_rtt.unwrap_or_default(),
                rate_bps: self.peak_rate.max(tcp_rate) * 8.0,
            });
            return Some((
                Decision::StayTcp(format!(
                    "{why}: {:.2} % of segments {} in {lossy_intervals} of {} intervals of the last {span:.1} s",
                    loss * 100.0,
                    self.cfg.marks_are,
                    self.points.len() - 1
                )),
                clean,
            ));
        }
        let rtts: Vec<f64> = self.points[1..]
            .iter()
            .filter(|p| !p.r.rtt.is_zero())
            .map(|p| p.r.rtt.as_secs_f64())
            .collect();
        let min = self.min_rtt_bound()?;
        let mean = rtts.iter().sum::<f64>() / rtts.len().max(1) as f64;
        if rtts.is_empty() || min <= 0.0 || mean > min * self.cfg.queue_ratio {
            return Some((
                Decision::StayTcp(format!(
                    "loss comes with a standing queue (RTT {:.1} ms against a minimum of {:.1} ms): congestion, \
                     not random loss",
                    mean * 1e3,
                    min * 1e3
                )),
                None,
            ));
        }
        let blast_rate =
            self.link_hint.unwrap_or(0.0).max(self.peak_rate) * self.cfg.blast_efficiency;
        if tcp_rate <= 0.0 || blast_rate <= 0.0 {
            return None;
        }
        let t_tcp = remaining as f64 / tcp_rate;
        let t_blast = self.cfg.switch_cost.as_secs_f64() + (remaining + resend) as f64 / blast_rate;
        let evidence = if marked {
            format!("{:.2} % of segments {}", loss * 100.0, self.cfg.marks_are)
        } else {
            format!(
                "TCP stalled in {silent} of the last {} intervals",
                self.points.len() - 1
            )
        };
        let facts = format!(
            "random loss ({evidence}, RTT {:.1} ms near its minimum {:.1} ms); TCP moves {:.1} Mbit/s ({:.1} over \
             the last {:.1} s)",
            mean * 1e3,
            min * 1e3,
            mean_rate * 8e-6,
            recent_rate * 8e-6,
            self.recent().as_secs_f64()
        );
        let judged = Some(Judged {
            random_loss: true,
            marks_share: loss,
            min_rtt: Duration::from_secs_f64(min),
            rate_bps: self.peak_rate.max(tcp_rate) * 8.0,
        });
        let d = if t_blast < t_tcp * (1.0 - self.cfg.margin) {
            Decision::SwitchToBlast(format!(
                "{facts}, blast projected at {:.1} Mbit/s: {t_blast:.1} s instead of {t_tcp:.1} s for the rest",
                blast_rate * 8e-6
            ))
        } else {
            Decision::StayTcp(format!(
                "{facts}, near the best rate the path has shown: blast would not finish {:.0} % sooner",
                self.cfg.margin * 100.0
            ))
        };
        Some((d, judged))
    }
}

#[cfg(test)]
#[path = "transport_tests.rs"]
mod tests;
