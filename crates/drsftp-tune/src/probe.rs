//! `--transport auto`'s blast probe: the pure verdict on a first download to an unknown long path, which starts on
//! UDP blast and either keeps it (random loss seen) or moves the rest to TCP (a clean or a shared path), from the
//! blast receiver's readings (transmissions that reached it, datagrams, one-way delay) fed with `now`.
//!
//! Why start on blast at all: judged from TCP, random loss needs a run of lossy RTTs, and at 0.1 % loss a TCP slow
//! start has sent its first ~1000 segments (the first expected loss) only ~0.7 s into a 100 ms path, so a switch
//! cannot come before ~1 s, which costs a first copy 5-9 % of a 20 s transfer against blast (docs/auto-transport.md).
//! Blast at its rate sends that many datagrams in a few tens of milliseconds, so the same evidence comes within
//! half a second, while blast moves data at the link rate instead of TCP ramping. On a clean path the probe ends on
//! TCP after ~0.5 s, having moved the bytes TCP's own slow start would have.
//!
//! The rule: loss counts only in sample intervals whose one-way delay stayed within [`ProbeConfig::queue_slack`]
//! of the lowest seen, i.e. with no standing queue: blast's own start-up overshoot, and a queue-building flow
//! sharing the link, lose datagrams only with a queue. Datagrams the receiving socket dropped are the host's, not
//! the path's, and are not counted. Random loss at or above [`crate::PROFILE_LOSSY`] keeps blast; a path that
//! carried enough quiet datagrams ([`ProbeConfig::clean_datagrams`]) with less goes to TCP; so does one whose
//! datagrams mostly saw a queue (a shared link: TCP is the fair choice there, and blast would only yield).

use std::time::{Duration, Instant};

use crate::transport::{Judged, PROFILE_LOSSY};

/// One reading of the blast receiver, cumulative since the transfer began (one-way delays since the last reading).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BlastReading {
    /// Transmissions the sender made from the oldest to the newest one that reached us.
    pub transmissions: u64,
    /// Data datagrams that arrived (duplicates included).
    pub datagrams: u64,
    /// Datagrams the receiving socket dropped for want of room (the host's loss, not the path's).
    pub socket_drops: u64,
    /// Payload bytes written so far.
    pub delivered: u64,
    /// Lowest and highest one-way delay of the datagrams since the last reading, µs on an arbitrary base (the two
    /// hosts' clocks differ by a constant: only differences count). `None`: nothing arrived.
    pub owd_us: Option<(i64, i64)>,
}

/// Tuning of the probe; the defaults are what `drsftp copy` uses.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeConfig {
    /// No "clean" verdict before blast has run this long (at least [`Self::min_rtts`] path RTTs): its start-up
    /// must have reached the path's rate.
    pub min_time: Duration,
    /// See [`Self::min_time`].
    pub min_rtts: u32,
    /// An interval is quiet (no standing queue) when its highest one-way delay is within this fraction of the
    /// path RTT of the lowest seen ...
    pub queue_slack: f64,
    /// ... or within this much, whichever is larger (timer and scheduling noise on short paths).
    pub queue_slack_min: Duration,
    /// Quiet-interval loss at or above this fraction is random loss.
    pub lossy: f64,
    /// A random-loss verdict needs at least this many datagrams lost in quiet intervals.
    pub min_losses: u64,
    /// A clean verdict needs this many quiet transmissions per loss among them plus one (and a loss share below
    /// [`Self::lossy`]): with none lost, 6000 at the defaults, which random loss at the threshold would pass
    /// unmarked 5 % of the time (e^-3); every loss seen asks for as many more.
    pub clean_datagrams: u64,
    /// After this long the probe decides on what it has (a slow path, or one mostly queued).
    pub max_time: Duration,
    /// No move to TCP once blast's projected time for the rest is below this: the switch would cost more.
    pub min_rest: Duration,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            min_time: Duration::from_millis(250),
            min_rtts: 4,
            queue_slack: 0.15,
            queue_slack_min: Duration::from_millis(3),
            lossy: PROFILE_LOSSY,
            min_losses: 8,
            clean_datagrams: 6000,
            max_time: Duration::from_secs(3),
            min_rest: Duration::from_secs(1),
        }
    }
}

/// Smallest control-path RTT for which a first download probes with blast: below it TCP's slow start is over in
/// a few milliseconds and its own evidence comes soon enough.
pub const PROBE_MIN_RTT: Duration = Duration::from_millis(20);
/// Smallest file a first download probes with blast: a smaller one is mostly TCP slow start either way, and the
/// probe and the move to TCP would be a large share of it.
pub const PROBE_MIN_SIZE: u64 = 64 << 20;

/// Whether a first download of `size` bytes over a path of control RTT `rtt` starts with the blast probe (the
/// caller has already checked that the peer offers blast, that nothing is known of the path, and that the rest
/// can go over TCP by ranges).
pub fn probe_first(rtt: Option<Duration>, size: u64) -> bool {
    rtt.is_some_and(|r| r >= PROBE_MIN_RTT) && size >= PROBE_MIN_SIZE
}

/// What the probe concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeVerdict {
    /// Keep blast for the rest, and why.
    StayBlast(String),
    /// Move the rest to TCP, and why.
    ToTcp(String),
}

impl ProbeVerdict {
    /// The reason, for `--json` and the summary.
    pub fn reason(&self) -> &str {
        match self {
            ProbeVerdict::StayBlast(r) | ProbeVerdict::ToTcp(r) => r,
        }
    }
}

/// Counts of one kind of interval.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    sent: u64,
    lost: u64,
}

impl Tally {
    fn share(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.lost as f64 / self.sent as f64
        }
    }
}

/// The probe (module docs). Feed [`handle_reading`](Self::handle_reading) every sample interval; ask
/// [`poll_verdict`](Self::poll_verdict) with the bytes still to move. The verdict is final: after it the probe
/// answers `None`.
#[derive(Debug, Clone)]
pub struct BlastProbe {
    cfg: ProbeConfig,
    path_rtt: Duration,
    /// When the first datagram was seen (the probe's clock starts there, not at the RETR).
    first: Option<Instant>,
    last: BlastReading,
    last_at: Option<Instant>,
    base_owd: Option<i64>,
    quiet: Tally,
    queued: Tally,
    /// Best delivery rate over one interval, bytes/s.
    peak_rate: f64,
    decided: bool,
    judged: Option<Judged>,
}

impl BlastProbe {
    /// A probe on a path whose control connection measured `path_rtt`.
    pub fn new(cfg: ProbeConfig, path_rtt: Duration) -> Self {
        BlastProbe {
            cfg,
            path_rtt,
            first: None,
            last: BlastReading::default(),
            last_at: None,
            base_owd: None,
            quiet: Tally::default(),
            queued: Tally::default(),
            peak_rate: 0.0,
            decided: false,
            judged: None,
        }
    }

    fn slack_us(&self) -> i64 {
        let s = self
            .path_rtt
            .mul_f64(self.cfg.queue_slack)
            .max(self.cfg.queue_slack_min);
        s.as_micros() as i64
    }

    /// A reading taken at `now`. Counters that go backwards are ignored.
    pub fn handle_reading(&mut self, now: Instant, r: BlastReading) {
        if r.transmissions < self.last.transmissions || r.datagrams < self.last.datagrams {
            return;
        }
        let Some((lo, hi)) = r.owd_us else {
            return;
        };
        if self.first.is_none() {
            self.first = Some(now);
        }
        let base = self.base_owd.map_or(lo, |b| b.min(lo));
        self.base_owd = Some(base);
        let sent = r.transmissions - self.last.transmissions;
        let got = r.datagrams - self.last.datagrams;
        let host = r.socket_drops.saturating_sub(self.last.socket_drops);
        // Duplicates and the host's drops make `got` and the span disagree a little; never count negative loss.
        let lost = sent.saturating_sub(got + host);
        let t = if hi - base <= self.slack_us() {
            &mut self.quiet
        } else {
            &mut self.queued
        };
        t.sent += sent.saturating_sub(host);
        t.lost += lost;
        if let Some(at) = self.last_at {
            let dt = now.saturating_duration_since(at).as_secs_f64();
            if dt > 0.0 {
                let rate = r.delivered.saturating_sub(self.last.delivered) as f64 / dt;
                self.peak_rate = self.peak_rate.max(rate);
            }
        }
        self.last = r;
        self.last_at = Some(now);
    }

    /// What the probe read of the path, once it has a verdict on loss (for path memory).
    pub fn judged(&self) -> Option<Judged> {
        self.judged
    }

    fn verdict(&mut self, random_loss: bool, share: f64, v: ProbeVerdict) -> Option<ProbeVerdict> {
        self.decided = true;
        self.judged = Some(Judged {
            random_loss,
            marks_share: share,
            min_rtt: self.path_rtt,
            rate_bps: self.peak_rate * 8.0,
        });
        Some(v)
    }

    /// The verdict on random loss in the quiet intervals: keep blast.
    fn random_loss(&mut self) -> Option<ProbeVerdict> {
        let q = self.quiet;
        let why = format!(
            "the blast probe saw random loss: {:.2} % of {} datagrams lost with no queue",
            q.share() * 100.0,
            q.sent
        );
        self.verdict(true, q.share(), ProbeVerdict::StayBlast(why))
    }

    /// The verdict, if there is one yet; `remaining` the bytes still to move.
    pub fn poll_verdict(&mut self, now: Instant, remaining: u64) -> Option<ProbeVerdict> {
        if self.decided {
            return None;
        }
        let first = self.first?;
        let ran = now.saturating_duration_since(first);
        let q = self.quiet;
        let pct = q.share() * 100.0;
        if q.lost >= self.cfg.min_losses && q.share() >= self.cfg.lossy {
            return self.random_loss();
        }
        let settled = self.cfg.min_time.max(self.path_rtt * self.cfg.min_rtts);
        if ran < settled {
            return None;
        }
        // Near the end blast finishes sooner than a move to TCP would.
        if self.peak_rate > 0.0 {
            let rest = Duration::from_secs_f64(remaining as f64 / self.peak_rate);
            if rest < self.cfg.min_rest {
                self.decided = true;
                return Some(ProbeVerdict::StayBlast(format!(
                    "the blast probe had {:.1} s left at its rate: no move to TCP",
                    rest.as_secs_f64()
                )));
            }
        }
        if q.sent >= self.cfg.clean_datagrams * (1 + q.lost) && q.share() < self.cfg.lossy {
            let why = format!(
                "clean path: the blast probe lost {pct:.3} % of {} datagrams with no queue",
                q.sent
            );
            return self.verdict(false, q.share(), ProbeVerdict::ToTcp(why));
        }
        if ran < self.cfg.max_time {
            return None;
        }
        if self.queued.sent > q.sent {
            self.decided = true;
            return Some(ProbeVerdict::ToTcp(format!(
                "{:.0} % of the blast probe's datagrams met a standing queue: the link is shared",
                100.0 * self.queued.sent as f64 / (self.queued.sent + q.sent).max(1) as f64
            )));
        }
        let few = self.cfg.min_losses.div_ceil(2);
        if q.lost >= few && q.share() >= self.cfg.lossy {
            return self.random_loss();
        }
        let why = format!(
            "no sign of random loss: the blast probe lost {pct:.3} % of {} datagrams with no queue",
            q.sent
        );
        self.verdict(false, q.share(), ProbeVerdict::ToTcp(why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTT: Duration = Duration::from_millis(100);
    const TICK: Duration = Duration::from_millis(50);

    /// Feeds `n` intervals of `sent` transmissions each, `lost` of them lost, the interval's one-way delay rising
    /// `queue_us` above the base, until a verdict; returns it and when it came (intervals fed).
    fn feed(
        p: &mut BlastProbe,
        t0: Instant,
        n: u32,
        sent: u64,
        lost: impl Fn(u32) -> u64,
        queue_us: impl Fn(u32) -> i64,
    ) -> Option<(ProbeVerdict, u32)> {
        let mut r = BlastReading::default();
        for i in 1..=n {
            r.transmissions += sent;
            r.datagrams += sent - lost(i);
            r.delivered += (sent - lost(i)) * 1400;
            r.owd_us = Some((50_000, 50_000 + queue_us(i)));
            let now = t0 + TICK * i;
            p.handle_reading(now, r);
            if let Some(v) = p.poll_verdict(now, 1 << 30) {
                return Some((v, i));
            }
        }
        None
    }

    #[test]
    fn random_loss_without_a_queue_keeps_blast_within_a_few_intervals() {
        let t0 = Instant::now();
        let mut p = BlastProbe::new(ProbeConfig::default(), RTT);
        // 40 000 datagrams/s (~450 Mbit/s): 2000 per 50 ms, 0.1 % lost = 2 per interval.
        let (v, at) = feed(&mut p, t0, 100, 2000, |_| 2, |_| 500).expect("a verdict");
        assert!(matches!(v, ProbeVerdict::StayBlast(_)), "{v:?}");
        assert!(at <= 4, "verdict after {at} intervals");
        let j = p.judged().expect("judged");
        assert!(j.random_loss);
        assert!((j.marks_share - 0.001).abs() < 1e-4, "{}", j.marks_share);
        assert!(p.poll_verdict(t0 + TICK * 200, 1 << 30).is_none(), "final");
    }

    #[test]
    fn a_clean_path_goes_to_tcp_once_blast_ran_long_enough() {
        let t0 = Instant::now();
        let mut p = BlastProbe::new(ProbeConfig::default(), RTT);
        let (v, at) = feed(&mut p, t0, 100, 2000, |_| 0, |_| 500).expect("a verdict");
        assert!(matches!(v, ProbeVerdict::ToTcp(_)), "{v:?}");
        // 6000 quiet datagrams take 3 intervals; 4 RTTs of blast take 8 more after the first reading.
        assert_eq!(at, 9, "counted from the first reading");
        assert!(!p.judged().expect("judged").random_loss);
    }

    #[test]
    fn loss_at_the_threshold_is_never_called_clean() {
        // 0.05 %: one datagram in 2000 lost. The clean count is reached long before 8 losses are, but the share
        // is not below the threshold: the probe waits, and keeps blast.
        let t0 = Instant::now();
        let mut p = BlastProbe::new(ProbeConfig::default(), RTT);
        let (v, _) = feed(&mut p, t0, 100, 2000, |_| 1, |_| 500).expect("a verdict");
        assert!(matches!(v, ProbeVerdict::StayBlast(_)), "{v:?}");
        // Half that (0.025 %) never reaches 8 losses at a share above it: TCP at the deadline.
        let mut p = BlastProbe::new(ProbeConfig::default(), RTT);
        let (v, at) =
            feed(&mut p, t0, 100, 2000, |i| u64::from(i % 2 == 0), |_| 500).expect("a verdict");
        assert!(
            matches!(v, ProbeVerdict::ToTcp(ref w) if w.contains("no sign")),
            "{v:?}"
        );
        assert_eq!(at, 61, "3 s after the first reading");
    }

    #[test]
    fn loss_behind_a_queue_is_not_random_loss() {
        // Blast's start-up overshoot or a queue-building flow: datagrams lost only while the delay is up 30 ms.
        let t0 = Instant::now();
        let mut p = BlastProbe::new(ProbeConfig::default(), RTT);
        let v = feed(
            &mut p,
            t0,
            100,
            2000,
            |i| if i % 4 == 0 { 60 } else { 0 },
            |i| if i % 4 == 0 { 30_000 } else { 1000 },
        );
        let (v, _) = v.expect("a verdict");
        assert!(matches!(v, ProbeVerdict::ToTcp(_)), "{v:?}");
    }

    #[test]
    fn a_mostly_queued_probe_goes_to_tcp_at_the_deadline() {
        let t0 = Instant::now();
        let mut p = BlastProbe::new(ProbeConfig::default(), RTT);
        // A competitor keeps a 40 ms queue; blast yields and sends little: 200 datagrams per interval, a few lost.
        let (v, at) = feed(
            &mut p,
            t0,
            200,
            200,
            |i| u64::from(i % 3 == 0),
            |i| {
                if i == 1 {
                    0
                } else {
                    40_000
                }
            },
        )
        .expect("a verdict");
        assert!(
            matches!(v, ProbeVerdict::ToTcp(ref w) if w.contains("shared")),
            "{v:?}"
        );
        assert!(
            at >= 60,
            "only at the 3 s deadline, came after {at} intervals"
        );
        assert!(p.judged().is_none(), "a queue says nothing of the path");
    }

    #[test]
    fn the_hosts_own_socket_drops_are_not_path_loss() {
        let t0 = Instant::now();
        let mut p = BlastProbe::new(ProbeConfig::default(), RTT);
        let mut r = BlastReading::default();
        let mut verdict = None;
        for i in 1..=40u32 {
            r.transmissions += 2000;
            r.datagrams += 1990;
            r.socket_drops += 10;
            r.delivered += 1990 * 1400;
            r.owd_us = Some((50_000, 50_500));
            let now = t0 + TICK * i;
            p.handle_reading(now, r);
            if let Some(v) = p.poll_verdict(now, 1 << 30) {
                verdict = Some(v);
                break;
            }
        }
        assert!(
            matches!(verdict, Some(ProbeVerdict::ToTcp(_))),
            "{verdict:?}"
        );
    }

    #[test]
    fn near_the_end_blast_finishes() {
        let t0 = Instant::now();
        let mut p = BlastProbe::new(ProbeConfig::default(), RTT);
        let mut r = BlastReading::default();
        let mut v = None;
        for i in 1..=20u32 {
            r.transmissions += 2000;
            r.datagrams += 2000;
            r.delivered += 2000 * 1400;
            r.owd_us = Some((50_000, 50_100));
            let now = t0 + TICK * i;
            p.handle_reading(now, r);
            // 20 MB left at 56 MB/s: 0.36 s.
            v = p.poll_verdict(now, 20 << 20);
            if v.is_some() {
                break;
            }
        }
        assert!(
            matches!(v, Some(ProbeVerdict::StayBlast(ref w)) if w.contains("left")),
            "{v:?}"
        );
    }

    #[test]
    fn the_gate_needs_a_long_path_and_a_large_file() {
        assert!(probe_first(Some(RTT), 1 << 30));
        assert!(!probe_first(Some(Duration::from_millis(2)), 1 << 30));
        assert!(!probe_first(None, 1 << 30));
        assert!(!probe_first(Some(RTT), 1 << 20));
    }

    use proptest::prelude::*;

    proptest! {
        /// Whatever the readings (counters that jump or go backwards, any delays, readings with nothing new), the
        /// probe never panics, gives exactly one verdict, and gives it by the deadline once datagrams flow.
        #[test]
        fn one_verdict_by_the_deadline_on_any_readings(
            steps in proptest::collection::vec(
                (0u64..5000, 0u64..5000, 0u64..50, -100_000i64..100_000, 0i64..200_000, any::<bool>()),
                1..120,
            ),
            rtt_ms in 1u64..400,
            remaining in 0u64..1 << 34,
        ) {
            let t0 = Instant::now();
            let cfg = ProbeConfig::default();
            let rtt = Duration::from_millis(rtt_ms);
            let deadline = cfg.max_time.max(cfg.min_time).max(rtt * cfg.min_rtts);
            let mut p = BlastProbe::new(cfg, rtt);
            let mut r = BlastReading::default();
            let (mut verdicts, mut first) = (0, None);
            for (i, (sent, got, drops, lo, spread, back)) in steps.into_iter().enumerate() {
                if back {
                    r.transmissions = r.transmissions.saturating_sub(sent);
                } else {
                    r.transmissions += sent;
                    r.datagrams += got.min(sent);
                }
                r.socket_drops += drops;
                r.delivered += got * 1400;
                r.owd_us = Some((lo, lo + spread));
                let now = t0 + TICK * (i as u32 + 1);
                p.handle_reading(now, r);
                if p.first.is_some() {
                    first = first.or(Some(now));
                }
                if p.poll_verdict(now, remaining).is_some() {
                    verdicts += 1;
                }
                if let Some(f) = first {
                    if now >= f + deadline {
                        prop_assert_eq!(verdicts, 1, "no verdict {:?} after the first reading", now - f);
                    }
                }
            }
            prop_assert!(verdicts <= 1);
        }
    }
}
