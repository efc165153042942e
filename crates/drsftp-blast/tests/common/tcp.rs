//! A packet-level TCP Reno sender with SACK loss recovery (RFC 6675-style: a segment is lost once three later
//! segments were SACKed; one window halving per recovery episode; RTO falls back to slow start), plus its
//! receiver. It stands in for a loss-based TCP flow sharing a bottleneck with blast flows.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Delivered payload per segment / wire size of a segment.
pub const MSS: u64 = 1448;
pub const WIRE: usize = 1500;

#[derive(Debug, Clone, Default)]
pub struct TcpResult {
    /// In-order bytes delivered per 100 ms bucket.
    pub timeline: Vec<u64>,
    pub delivered: u64,
    pub rtos: u64,
}

pub struct Tcp {
    pub start: Duration,
    una: u64,
    nxt: u64,
    cwnd: f64,
    ssthresh: f64,
    sacked: BTreeSet<u64>,
    high_sacked: Option<u64>,
    lost: BTreeSet<u64>,
    retx: BTreeSet<u64>,
    scan_from: u64,
    recovery: Option<u64>,
    after_rto: bool,
    last_progress: Instant,
    srtt: Duration,
    sent_at: BTreeMap<u64, Instant>,
    expected: u64,
    ooo: BTreeSet<u64>,
    pub res: TcpResult,
}

impl Tcp {
    pub fn new(start: Duration, t0: Instant) -> Self {
        Tcp {
            start,
            una: 0,
            nxt: 0,
            cwnd: 10.0,
            ssthresh: f64::INFINITY,
            sacked: BTreeSet::new(),
            high_sacked: None,
            lost: BTreeSet::new(),
            retx: BTreeSet::new(),
            scan_from: 0,
            recovery: None,
            after_rto: false,
            last_progress: t0 + start,
            srtt: Duration::from_millis(100),
            sent_at: BTreeMap::new(),
            expected: 0,
            ooo: BTreeSet::new(),
            res: TcpResult::default(),
        }
    }

    fn rto(&self) -> Duration {
        (self.srtt * 2).max(Duration::from_millis(200))
    }

    /// Receiver: a data segment arrived. Returns (cumulative ack, the segment to SACK) and the newly in-order
    /// payload bytes.
    pub fn on_data(&mut self, seq: u64) -> ((u64, u64), u64) {
        let before = self.expected;
        if seq == self.expected {
            self.expected += 1;
            while self.ooo.remove(&self.expected) {
                self.expected += 1;
            }
        } else if seq > self.expected {
            self.ooo.insert(seq);
        }
        let got = (self.expected - before) * MSS;
        self.res.delivered += got;
        ((self.expected, seq), got)
    }

    /// Sender: an ack arrived.
    pub fn on_ack(&mut self, now: Instant, cum: u64, sack: u64) {
        if !self.retx.contains(&sack) {
            if let Some(&s) = self.sent_at.get(&sack) {
                self.srtt = (self.srtt * 7 + (now - s)) / 8;
            }
        }
        let mut delivered = 0u64;
        if cum > self.una {
            let before_sacked = self.sacked.len() as u64;
            self.sacked = self.sacked.split_off(&cum);
            let was_sacked = before_sacked - self.sacked.len() as u64;
            delivered += (cum - self.una) - was_sacked;
            self.una = cum;
            self.lost = self.lost.split_off(&cum);
            self.retx = self.retx.split_off(&cum);
            self.sent_at = self.sent_at.split_off(&cum);
            self.last_progress = now;
            if self.recovery.is_some_and(|r| self.una >= r) {
                self.recovery = None;
                self.after_rto = false;
            }
        }
        if sack >= self.una && sack < self.nxt && self.sacked.insert(sack) {
            delivered += 1;
            self.lost.remove(&sack);
            self.high_sacked = Some(self.high_sacked.map_or(sack, |h| h.max(sack)));
        }
        if (self.recovery.is_none() || self.after_rto) && delivered > 0 {
            if self.cwnd < self.ssthresh {
                self.cwnd += delivered.min(2) as f64;
            } else {
                self.cwnd += delivered as f64 / self.cwnd;
            }
        }
        if let Some(h) = self.high_sacked {
            let mut newly_lost = false;
            let from = self.scan_from.max(self.una);
            let to = h.saturating_sub(2);
            let mut s = from;
            while s < to {
                if !self.sacked.contains(&s) && !self.retx.contains(&s) && self.lost.insert(s) {
                    newly_lost = true;
                }
                s += 1;
            }
            self.scan_from = self.scan_from.max(to);
            if newly_lost && self.recovery.is_none() {
                self.ssthresh = (self.cwnd / 2.0).max(2.0);
                self.cwnd = self.ssthresh;
                self.recovery = Some(self.nxt);
            }
        }
    }

    /// Sender: segments to transmit at `now`.
    pub fn poll_send(&mut self, now: Instant) -> Vec<u64> {
        let mut out = Vec::new();
        if self.nxt > self.una && now >= self.last_progress + self.rto() {
            if std::env::var_os("TCP_TRACE").is_some() {
                eprintln!(
                    "TCP RTO una {} nxt {} cwnd {:.1} srtt {:?} sacked {} lost {}",
                    self.una,
                    self.nxt,
                    self.cwnd,
                    self.srtt,
                    self.sacked.len(),
                    self.lost.len()
                );
            }
            self.res.rtos += 1;
            self.ssthresh = (self.cwnd / 2.0).max(2.0);
            self.cwnd = 1.0;
            self.lost = (self.una..self.nxt)
                .filter(|s| !self.sacked.contains(s))
                .collect();
            self.retx.clear();
            self.scan_from = self.nxt;
            self.recovery = Some(self.nxt);
            self.after_rto = true;
            self.last_progress = now;
        }
        loop {
            let pipe = (self.nxt - self.una) - self.sacked.len() as u64 - self.lost.len() as u64;
            if pipe as f64 >= self.cwnd {
                break;
            }
            if let Some(s) = self.lost.pop_first() {
                self.retx.insert(s);
                out.push(s);
            } else {
                self.sent_at.insert(self.nxt, now);
                out.push(self.nxt);
                self.nxt += 1;
            }
        }
        out
    }

    pub fn debug(&self) -> String {
        format!(
            "cwnd {:.1} ssthresh {:.1} una {} nxt {} sacked {} lost {} rec {:?} srtt {:?}",
            self.cwnd,
            self.ssthresh,
            self.una,
            self.nxt,
            self.sacked.len(),
            self.lost.len(),
            self.recovery,
            self.srtt
        )
    }

    /// When the retransmission timer fires.
    pub fn timeout(&self) -> Option<Instant> {
        (self.nxt > self.una).then(|| self.last_progress + self.rto())
    }
}
