//! Where a blast transfer's time went, seen from the receiver: first datagram, the rate ramp, the first pass
//! and the retransmission tail. Fed with each valid data packet's arrival time and sequence number; reads no
//! clock (the receiver loop passes kernel arrival times), so it is tested on a virtual clock.
//!
//! * The *first pass* ends when a packet of the transfer's last 1/1000 (at least the last one) first arrives: the
//!   sender sends every packet once in order before it resends anything (FOBS), so this is when the first pass
//!   reached the end of the file, whichever of the last few packets were lost.
//! * The *rate ramp* is the time from the first datagram until the arrival rate over a window first reaches
//!   90 % of the first pass's *final rate* (the mean over its second half).
//! * The *tail* runs from the end of the first pass to the last missing packet filled.

use std::time::{Duration, Instant};

/// Width of the arrival-count buckets.
const BUCKET: Duration = Duration::from_millis(50);
/// Window over which the ramp compares the arrival rate (a few buckets, so a pacing burst does not count).
const RAMP_WINDOW: usize = 4;
/// Buckets kept (about 55 minutes at 50 ms): bounded memory for a transfer of any length; past it the ramp is
/// judged from what was kept.
const MAX_BUCKETS: usize = 1 << 16;
/// Share of the final rate the ramp must reach.
const RAMP_SHARE: f64 = 0.9;

/// Durations of the receiver-side phases, in seconds from the first datagram unless said otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseReport {
    /// From the start the tracker was given (the receiver's start) to the first data datagram.
    pub first_datagram: Option<f64>,
    /// From the first datagram until the arrival rate first reached 90 % of the first pass's final rate.
    pub ramp: Option<f64>,
    /// The first pass: first datagram to the end of the file's first transmission.
    pub first_pass: Option<f64>,
    /// The first pass's final rate, packets per second (mean over its second half).
    pub final_rate_pps: Option<f64>,
    /// From the end of the first pass to the last missing packet filled (0 without loss at the end).
    pub tail: Option<f64>,
}

/// Tracks arrivals of one transfer (see the module docs).
#[derive(Debug, Clone)]
pub struct Phases {
    start: Instant,
    total: u64,
    first: Option<Instant>,
    first_pass: Option<Instant>,
    complete: Option<Instant>,
    /// New (not duplicate) packets per [`BUCKET`] since the first datagram.
    buckets: Vec<u32>,
}

impl Phases {
    /// A tracker for a transfer of `total_packets`, started at `start`.
    pub fn new(start: Instant, total_packets: u64) -> Self {
        Phases {
            start,
            total: total_packets,
            first: None,
            first_pass: None,
            complete: None,
            buckets: Vec::new(),
        }
    }

    /// A valid data packet `seq` arrived at `at`; `new` if it was not held before.
    pub fn arrival(&mut self, at: Instant, seq: u64, new: bool) {
        let first = *self.first.get_or_insert(at);
        let tail_from = self.total.saturating_sub((self.total / 1000).max(1));
        if self.first_pass.is_none() && seq >= tail_from {
            self.first_pass = Some(at);
        }
        if new {
            let i = (at.saturating_duration_since(first).as_nanos() / BUCKET.as_nanos()) as usize;
            if i < MAX_BUCKETS {
                if self.buckets.len() <= i {
                    self.buckets.resize(i + 1, 0);
                }
                self.buckets[i] += 1;
            }
        }
    }

    /// Every packet is held, as of `at`.
    pub fn complete(&mut self, at: Instant) {
        self.complete.get_or_insert(at);
    }

    /// The phases as far as they are known.
    pub fn report(&self) -> PhaseReport {
        let Some(first) = self.first else {
            return PhaseReport::default();
        };
        let secs = |a: Instant, b: Instant| a.saturating_duration_since(b).as_secs_f64();
        let pass_end = self.first_pass;
        let (ramp, final_rate_pps) = pass_end
            .map(|e| self.ramp(secs(e, first)))
            .unwrap_or((None, None));
        PhaseReport {
            first_datagram: Some(secs(first, self.start)),
            ramp,
            first_pass: pass_end.map(|e| secs(e, first)),
            final_rate_pps,
            tail: match (pass_end, self.complete) {
                (Some(p), Some(c)) => Some(secs(c, p)),
                _ => None,
            },
        }
    }

    /// (ramp seconds, final rate in packets/s) for a first pass of `pass` seconds.
    fn ramp(&self, pass: f64) -> (Option<f64>, Option<f64>) {
        let b = BUCKET.as_secs_f64();
        let n = ((pass / b) as usize).min(self.buckets.len());
        if n < 2 * RAMP_WINDOW {
            return (None, None);
        }
        let half = &self.buckets[n / 2..n];
        let rate = half.iter().map(|&c| c as f64).sum::<f64>() / (half.len() as f64 * b);
        if rate <= 0.0 {
            return (None, None);
        }
        let want = RAMP_SHARE * rate * RAMP_WINDOW as f64 * b;
        let end = self.buckets[..n]
            .windows(RAMP_WINDOW)
            .position(|w| w.iter().map(|&c| c as f64).sum::<f64>() >= want)
            .map(|i| (i + RAMP_WINDOW) as f64 * b);
        (end, Some(rate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// 1000 packets/s from `t0 + 100 ms`, ramping linearly over the first second, every 20th packet lost and
    /// resent after the first pass, the last resend 300 ms after the pass.
    #[test]
    fn ramp_first_pass_and_tail_on_a_virtual_clock() {
        let t0 = Instant::now();
        let total = 4000u64;
        let mut p = Phases::new(t0, total);
        let start = t0 + ms(100);
        let mut t = start;
        let mut lost = vec![];
        for seq in 0..total {
            let elapsed = t.duration_since(start).as_secs_f64();
            let rate = (1000.0 * elapsed.max(0.05)).min(1000.0);
            if seq % 20 == 7 {
                lost.push(seq);
            } else {
                p.arrival(t, seq, true);
            }
            t += Duration::from_secs_f64(1.0 / rate);
        }
        let pass_end = t;
        for (i, seq) in lost.iter().enumerate() {
            p.arrival(
                pass_end + ms(i as u64 * 300 / lost.len() as u64),
                *seq,
                true,
            );
        }
        p.arrival(pass_end + ms(310), 3, false);
        p.complete(pass_end + ms(300));
        let r = p.report();
        assert!((r.first_datagram.unwrap() - 0.1).abs() < 1e-9);
        let pass = r.first_pass.unwrap();
        assert!(
            (pass - pass_end.duration_since(start).as_secs_f64()).abs() < 0.01,
            "{r:?}"
        );
        let rate = r.final_rate_pps.unwrap();
        assert!((900.0..=1000.0).contains(&rate), "{r:?}");
        // 90 % of 950/s is reached near 0.9 s into the linear ramp (plus the window).
        let ramp = r.ramp.unwrap();
        assert!((0.7..=1.2).contains(&ramp), "{r:?}");
        assert!((r.tail.unwrap() - 0.3).abs() < 0.01, "{r:?}");
    }

    #[test]
    fn nothing_arrived_reports_nothing_and_short_transfers_no_ramp() {
        let t0 = Instant::now();
        assert_eq!(Phases::new(t0, 10).report(), PhaseReport::default());
        let mut p = Phases::new(t0, 10);
        for s in 0..10 {
            p.arrival(t0 + ms(s), s, true);
        }
        p.complete(t0 + ms(9));
        let r = p.report();
        assert_eq!(r.ramp, None);
        assert_eq!(r.first_pass, Some(0.009));
        assert_eq!(r.tail, Some(0.0));
    }

    #[test]
    fn buckets_stay_bounded_for_a_very_long_transfer() {
        let t0 = Instant::now();
        let mut p = Phases::new(t0, 1 << 20);
        p.arrival(t0, 0, true);
        p.arrival(t0 + Duration::from_secs(100_000), 1, true);
        assert_eq!(p.buckets.len(), 1);
    }
}
