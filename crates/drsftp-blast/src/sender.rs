//! `Sender`: the sans-IO blast sender. Owns the acked map, the in-flight transmissions and their loss detection,
//! batches datagrams for `poll_transmit` under the pacer and in-flight cap, asks the `NextPacket` policy which
//! packet goes next, hedges the last resends of a transfer, and feeds ack samples to the rate controller.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

pub use crate::batch::{Batch, DataSource, DatagramInfo};
use crate::bitmap::Bitmap;
use crate::crypt::{KeyUse, Opener, Protection, Sealer};
use crate::error::{BitmapError, ConfigError, Reject, RejectCounts, SendError};
use crate::policy::{Circular, NextPacket, Pick, SendView};
use crate::rate::{AckInput, Pacer, RateConfig, RateController};
use crate::wire::{self, AckPacket, DataPacket, Message, TransferParams};

/// Acks that stop for four loss timeouts, and never less than this, shrink the sender to one datagram in flight.
const ACK_SILENCE_FLOOR: Duration = Duration::from_secs(1);

/// Sender tuning.
#[derive(Debug, Clone, PartialEq)]
pub struct SenderConfig {
    /// Only packets in `[cumulative ack, cumulative ack + window_packets)` are sent; the window advances with
    /// the receiver's cumulative ack. `u64::MAX` (default) is FOBS's window spanning the whole transfer; a
    /// smaller window bounds how much of the file must be readable at once (the driver may drop file data below
    /// the window). With a window the policy resends known-lost packets before new ones so the window keeps
    /// sliding; keep it at several BDPs (8 × BDP reached 88 % of the link at 1 % loss in the netem tests).
    pub window_packets: u64,
    pub rate: RateConfig,
    /// A transmission is lost once the receiver has seen one sent this many transmissions later.
    pub reorder_threshold: u32,
    /// Added to `srtt + 4 rttvar` for the loss timer of a transmission no ack has covered (the receiver's
    /// maximum ack delay plus slack).
    pub ack_delay_allowance: Duration,
    /// Give up (`SenderEvent::Failed`) after this long without a valid ack.
    pub idle_timeout: Duration,
    /// Give up this long after the start if no valid ack has come at all: nothing proves a receiver is there
    /// (a client can name any address for the data channel), so a blast must not reflect off a silent port.
    /// It spans three initial loss timeouts (1 s each), so a lossy path gets two resend rounds to get one ack
    /// through before the sender gives up (at 45% loss each way a one-round limit failed small transfers).
    /// The bytes sent meanwhile stay within `unacked_budget` however long this is.
    pub first_ack_timeout: Duration,
    /// Most datagram bytes (headers included, resends counted) sent before the first valid ack: the first
    /// RTT's budget. Before an ack the pacer runs at `rate.initial_rate_bps` (10 Mbit/s), which reaches the
    /// default 512 KiB after ~0.4 s, so this gates only paths whose first RTT is longer than that.
    pub unacked_budget: u64,
    /// Tail hedging: once every packet has been sent, a resend round may send each of its packets several times
    /// (enough copies that all are lost with probability ≤ 10⁻³ at the measured loss rate), so the round's own
    /// losses do not cost one more round trip. The extra copies go out only when nothing else is eligible, in
    /// the idle time while the sender waits for acks, so they never delay a first resend. Decided once per round, at its start: only if the copies for
    /// everything then known missing fit in what is left of the budget. A resend round that is small next to
    /// the transfer (the last ones always are) is thereby made final; a large one is not hedged.
    pub tail_hedge: bool,
    /// Hedge copies allowed over the whole transfer, as a fraction of its packets.
    pub hedge_budget: f64,
    pub max_copies: u8,
    /// CRC32C (version 1) or AEAD under TLS (version 2, `crate::crypt`); the receiver must use the same.
    pub protection: Protection,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            window_packets: u64::MAX,
            rate: RateConfig::default(),
            reorder_threshold: 3,
            ack_delay_allowance: Duration::from_millis(25),
            idle_timeout: Duration::from_secs(30),
            first_ack_timeout: Duration::from_secs(3),
            unacked_budget: 512 * 1024,
            tail_hedge: true,
            hedge_budget: 0.02,
            max_copies: 3,
            protection: Protection::None,
        }
    }
}

/// Something the driver should know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenderEvent {
    /// The receiver holds every packet.
    Complete,
    /// No valid ack for `idle_timeout`, or none at all within `first_ack_timeout`
    /// ([`Sender::heard_from_receiver`] tells which).
    Failed,
}

/// Sender counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    pub datagrams: u64,
    pub new_packets: u64,
    pub resent: u64,
    pub hedge_copies: u64,
    /// Packets acknowledged.
    pub acked: u64,
    /// Duplicates the receiver reported (packets it already held).
    pub receiver_duplicates: u64,
    pub receiver_datagrams: u64,
    pub ack_datagrams: u64,
    pub ack_generations: u64,
    /// Transmissions found lost by ack coverage / by the loss timer.
    pub losses_detected: u64,
    pub loss_timeouts: u64,
    /// Highest resend round reached.
    pub max_round: u64,
    /// Datagram bytes sent before the first valid ack (at most `SenderConfig::unacked_budget`).
    pub unacked_bytes: u64,
    pub rejects: RejectCounts,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct InflightEntry {
    tx: u64,
    sent_at: Instant,
}

/// The blast sender. See the crate docs for the I/O contract.
pub struct Sender<P: NextPacket = Circular> {
    params: TransferParams,
    cfg: SenderConfig,
    total: u64,
    wire_len: usize,
    epoch: Instant,
    acked: Bitmap,
    cum: u64,
    inflight: HashMap<u64, InflightEntry>,
    records: VecDeque<(u64, u64)>,
    sent_end: u64,
    /// Packets sent, not acknowledged and not in flight.
    missing: u64,
    next_tx: u64,
    largest_acked_tx: Option<u64>,
    policy: P,
    rate: RateController,
    pacer: Pacer,
    highest_gen: u64,
    last_heard: Instant,
    /// A valid ack (or completion) has come: the receiver is there and wants the data.
    heard: bool,
    /// Hedge copies waiting for idle link time: (seq, round).
    hedge_queue: VecDeque<(u64, u64)>,
    hedge_round: Option<(u64, u8)>,
    train_left: u32,
    idle: bool,
    idle_mark: Option<u64>,
    wake: Option<Instant>,
    events: VecDeque<SenderEvent>,
    done: bool,
    stats: SenderStats,
    /// AEAD: seals data datagrams (counter = 64-bit `tx`) and opens acks; `None` for CRC32C.
    sealer: Option<Sealer>,
    opener: Option<Opener>,
}

impl<P: NextPacket> std::fmt::Debug for Sender<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("params", &self.params)
            .field("acked", &self.acked)
            .field("inflight", &self.inflight.len())
            .field("missing", &self.missing)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Sender<Circular> {
    /// A sender with the default FOBS circular policy, starting at `now`.
    pub fn new(
        params: TransferParams,
        cfg: SenderConfig,
        now: Instant,
    ) -> Result<Self, ConfigError> {
        Self::with_policy(params, cfg, Circular::new(), now)
    }
}

impl<P: NextPacket> Sender<P> {
    /// A sender with a custom next-packet policy.
    pub fn with_policy(
        params: TransferParams,
        cfg: SenderConfig,
        policy: P,
        now: Instant,
    ) -> Result<Self, ConfigError> {
        let acked = Bitmap::new(params.total_packets());
        Self::resume(params, cfg, policy, acked, now)
    }

    /// A sender that already knows the receiver holds the packets set in `acked` (the receiver's checkpoint).
    pub fn resume(
        params: TransferParams,
        cfg: SenderConfig,
        policy: P,
        acked: Bitmap,
        now: Instant,
    ) -> Result<Self, ConfigError> {
        let total = params.total_packets();
        if acked.len() != total {
            return Err(BitmapError::Packets {
                expected: total,
                got: acked.len(),
            }
            .into());
        }
        if cfg.window_packets == 0
            || cfg.max_copies == 0
            || cfg.idle_timeout.is_zero()
            || cfg.first_ack_timeout.is_zero()
            || !(0.0..=1.0).contains(&cfg.hedge_budget)
        {
            return Err(ConfigError::Invalid(
                "window_packets, max_copies, idle_timeout, first_ack_timeout must be positive, hedge_budget in [0, 1]",
            ));
        }
        let r = &cfg.rate;
        if r.max_rate_bps == 0 || r.min_rate_bps > r.max_rate_bps || r.initial_rate_bps == 0 {
            return Err(ConfigError::Invalid(
                "rates must satisfy 0 < min_rate <= max_rate, initial_rate > 0",
            ));
        }
        if !(r.backoff > 0.0 && r.backoff < 1.0) || r.startup_gain <= 1.0 || r.delay_threshold < 1.0
        {
            return Err(ConfigError::Invalid(
                "backoff in (0,1), startup_gain > 1, delay_threshold >= 1",
            ));
        }
        let overhead = cfg.protection.overhead();
        if params.payload_size + overhead > wire::MAX_PAYLOAD {
            return Err(ConfigError::PayloadSize(params.payload_size));
        }
        let wire_len = params.wire_len() + overhead;
        let sealer = Sealer::new(&cfg.protection, KeyUse::Data);
        let opener = Opener::new(&cfg.protection, KeyUse::Ack);
        let cum = acked.next_zero(0).unwrap_or(total);
        let done = acked.is_full();
        Ok(Sender {
            rate: RateController::new(cfg.rate.clone(), wire_len),
            train_left: cfg.rate.initial_burst,
            stats: SenderStats {
                acked: acked.count_ones(),
                ..Default::default()
            },
            events: if done {
                VecDeque::from([SenderEvent::Complete])
            } else {
                VecDeque::new()
            },
            params,
            cfg,
            total,
            wire_len,
            epoch: now,
            acked,
            cum,
            inflight: HashMap::new(),
            records: VecDeque::new(),
            sent_end: 0,
            missing: 0,
            next_tx: 0,
            largest_acked_tx: None,
            policy,
            pacer: Pacer::new(now),
            highest_gen: 0,
            last_heard: now,
            heard: false,
            hedge_queue: VecDeque::new(),
            hedge_round: None,
            idle: false,
            idle_mark: None,
            wake: None,
            done,
            sealer,
            opener,
        })
    }

    pub fn params(&self) -> &TransferParams {
        &self.params
    }
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }
    pub fn rate(&self) -> &RateController {
        &self.rate
    }
    pub fn policy(&self) -> &P {
        &self.policy
    }
    /// Packets the receiver is known to hold.
    pub fn acked(&self) -> &Bitmap {
        &self.acked
    }
    /// Transmissions currently in flight.
    pub fn inflight(&self) -> usize {
        self.inflight.len()
    }
    /// True once the receiver holds everything (or the sender failed).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Whether a valid ack (or completion) has come from the receiver yet.
    pub fn heard_from_receiver(&self) -> bool {
        self.heard
    }

    /// Why nothing more may be sent at `now` whatever the pacer says: before the first ack, the unacked budget
    /// is spent; after it, acks have stopped for longer than a few loss timeouts and one probe is in flight. So
    /// an address that never acks gets at most `unacked_budget` bytes, and one that stops acking a trickle of
    /// one datagram per loss timeout until `idle_timeout`, not the whole rate.
    fn ack_gated(&self, now: Instant) -> bool {
        if !self.heard {
            return self.stats.unacked_bytes + self.wire_len as u64 > self.cfg.unacked_budget;
        }
        let silence = (self.loss_timeout() * 4).max(ACK_SILENCE_FLOOR);
        now.saturating_duration_since(self.last_heard) > silence && !self.inflight.is_empty()
    }

    pub fn poll_event(&mut self) -> Option<SenderEvent> {
        self.events.pop_front()
    }

    fn loss_timeout(&self) -> Duration {
        match self.rate.srtt() {
            Some(s) => s + self.rate.rttvar() * 4 + self.cfg.ack_delay_allowance,
            None => Duration::from_secs(1),
        }
    }

    fn window(&self) -> std::ops::Range<u64> {
        self.cum
            ..self
                .cum
                .saturating_add(self.cfg.window_packets)
                .min(self.total)
    }

    fn pick(&mut self) -> Option<Pick> {
        let view = SendView {
            acked: &self.acked,
            inflight: &self.inflight,
            sent_end: self.sent_end,
            missing: self.missing,
            window: self.cum
                ..self
                    .cum
                    .saturating_add(self.cfg.window_packets)
                    .min(self.total),
            total: self.total,
        };
        self.policy.next_packet(&view)
    }

    /// Copies to send of a resend picked in `round` (1 = no hedging).
    fn copies_for(&mut self, round: u64) -> u8 {
        if round == 0 || !self.cfg.tail_hedge || self.sent_end < self.total {
            return 1;
        }
        let p = self.rate.loss_rate();
        let mut k = 1u8;
        let mut miss = p;
        while miss > 1e-3 && k < self.cfg.max_copies {
            k += 1;
            miss *= p;
        }
        match self.hedge_round {
            Some((r, copies)) if r == round => copies,
            _ => {
                let budget = (self.cfg.hedge_budget * self.total as f64) as u64;
                let left = budget.saturating_sub(self.stats.hedge_copies);
                let need = (k as u64 - 1) * (self.missing + 1);
                let copies = if need <= left { k } else { 1 };
                self.hedge_round = Some((round, copies));
                copies
            }
        }
    }

    /// Fill `batch` (appending) with up to `max_datagrams` datagrams that may leave at `now`, reading payloads
    /// from `src`. Returns how many were added. Call after every `handle_*` and whenever `poll_timeout` expires.
    pub fn poll_transmit<S: DataSource + ?Sized>(
        &mut self,
        now: Instant,
        max_datagrams: usize,
        src: &S,
        batch: &mut Batch,
    ) -> Result<usize, SendError> {
        let first = batch.len();
        let r = self.fill(now, max_datagrams, src, batch);
        // AEAD datagrams are sealed only now, once the last one's ACK_NOW flag is settled (a sealed datagram
        // cannot be changed without a new nonce); also after a read error, so nothing unsealed stays in `batch`.
        if let Some(s) = &self.sealer {
            for i in first..batch.len() {
                let start = if i == 0 { 0 } else { batch.ends[i - 1] };
                s.seal(&mut batch.buf[start..batch.ends[i]]);
            }
        }
        r
    }

    fn fill<S: DataSource + ?Sized>(
        &mut self,
        now: Instant,
        max_datagrams: usize,
        src: &S,
        batch: &mut Batch,
    ) -> Result<usize, SendError> {
        self.wake = None;
        if self.done {
            return Ok(0);
        }
        self.expire(now);
        let first = batch.len();
        let burst = self.cfg.rate.max_burst as usize * self.wire_len;
        while batch.len() - first < max_datagrams {
            let train = self.train_left > 0;
            if !train && !self.pacer.ready(now) {
                self.wake = Some(self.pacer.next_at());
                break;
            }
            if self.inflight.len() as u64 >= self.rate.inflight_cap() || self.ack_gated(now) {
                break;
            }
            let pick = if self.idle {
                None
            } else {
                self.sent_end = self.acked.next_zero(self.sent_end).unwrap_or(self.total);
                self.pick().filter(|p| self.valid_pick(p.seq))
            };
            let (seq, round, hedge) = match pick {
                Some(Pick { seq, round }) => {
                    for _ in 1..self.copies_for(round) {
                        self.hedge_queue.push_back((seq, round));
                    }
                    (seq, round, false)
                }
                None => {
                    if !self.idle {
                        self.idle = true;
                        self.idle_mark = Some(self.next_tx);
                    }
                    // The link would idle: send the hedge copies now.
                    let mut copy = None;
                    while let Some((s, r)) = self.hedge_queue.pop_front() {
                        if !self.acked.get(s) {
                            copy = Some((s, r));
                            break;
                        }
                    }
                    let Some((s, r)) = copy else {
                        if batch.len() > first {
                            let i = batch.len() - 1;
                            let start = if i == 0 { 0 } else { batch.ends[i - 1] };
                            wire::set_ack_now(&mut batch.buf[start..batch.ends[i]]);
                        }
                        break;
                    };
                    (s, r, true)
                }
            };
            let tx = self.next_tx;
            let len = self.params.packet_len(seq);
            let offset = self.params.offset(seq);
            let pkt = DataPacket {
                seq,
                tx: tx as u32,
                send_ts: now.saturating_duration_since(self.epoch).as_micros() as u32,
                ack_now: train && self.train_left == 1,
                payload: &[],
            };
            // The 64-bit transmission number is the AEAD nonce: every send, resends included, takes a new one.
            let counter = self.sealer.is_some().then_some(tx);
            let fill = |b: &mut [u8]| src.read_at(offset, b);
            wire::encode_data_framed(
                &mut batch.buf,
                self.params.transfer_id,
                &pkt,
                len,
                fill,
                counter,
            )
            .map_err(|source| SendError::Source { offset, source })?;
            batch.ends.push(batch.buf.len());
            batch.info.push(DatagramInfo {
                seq,
                tx,
                round,
                hedge,
            });
            self.next_tx += 1;
            if seq >= self.sent_end {
                self.sent_end = seq + 1;
                self.stats.new_packets += 1;
            } else {
                if !self.inflight.contains_key(&seq) {
                    debug_assert!(self.missing > 0);
                    self.missing = self.missing.saturating_sub(1);
                }
                if hedge {
                    self.stats.hedge_copies += 1;
                } else {
                    self.stats.resent += 1;
                }
            }
            self.stats.max_round = self.stats.max_round.max(round);
            self.stats.datagrams += 1;
            if !self.heard {
                self.stats.unacked_bytes += self.wire_len as u64;
            }
            self.inflight
                .insert(seq, InflightEntry { tx, sent_at: now });
            self.records.push_back((tx, seq));
            if train {
                self.train_left -= 1;
            } else {
                self.pacer
                    .on_send(now, self.wire_len, self.rate.pacing_rate_bps(), burst);
            }
        }
        if batch.len() - first == max_datagrams && self.wake.is_none() {
            self.wake = Some(now);
        }
        Ok(batch.len() - first)
    }

    fn valid_pick(&self, seq: u64) -> bool {
        self.window().contains(&seq) && !self.acked.get(seq) && seq <= self.sent_end
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) (or `poll_transmit`) next: the pacer's next
    /// release, the oldest transmission's loss timer, or the idle timeout. `None` when done.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.done {
            return None;
        }
        let mut t = self.last_heard + self.cfg.idle_timeout;
        if !self.heard {
            t = t.min(self.epoch + self.cfg.first_ack_timeout);
        }
        if let Some(&(_, seq)) = self.records.front() {
            if let Some(e) = self.inflight.get(&seq) {
                t = t.min(e.sent_at + self.loss_timeout());
            } else {
                t = t.min(self.epoch); // stale record: let handle_timeout discard it
            }
        }
        if !self.idle || !self.hedge_queue.is_empty() {
            if let Some(w) = self.wake {
                t = t.min(w);
            }
        }
        Some(t)
    }

    /// Timer expiry: loss timers and the idle timeout.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.done {
            return;
        }
        self.expire(now);
        let unheard = !self.heard && now >= self.epoch + self.cfg.first_ack_timeout;
        if unheard || now >= self.last_heard + self.cfg.idle_timeout {
            self.done = true;
            self.events.push_back(SenderEvent::Failed);
        }
    }

    fn expire(&mut self, now: Instant) {
        let rto = self.loss_timeout();
        while let Some(&(tx, seq)) = self.records.front() {
            match self.inflight.get(&seq) {
                Some(e) if e.tx == tx => {
                    if e.sent_at + rto > now {
                        break;
                    }
                    self.inflight.remove(&seq);
                    self.missing += 1;
                    self.stats.loss_timeouts += 1;
                    self.idle = false;
                }
                _ => {}
            }
            self.records.pop_front();
        }
    }

    /// Handle one datagram from the receiver (ack chunk or complete). Rejections are counted in
    /// `stats().rejects` and returned; they are never fatal.
    pub fn handle_input(&mut self, now: Instant, dgram: &[u8]) -> Result<(), Reject> {
        let r = self.handle_inner(now, dgram);
        if let Err(e) = r {
            self.stats.rejects.add(e);
        }
        r
    }

    fn handle_inner(&mut self, now: Instant, dgram: &[u8]) -> Result<(), Reject> {
        // The opened message borrows the opener's buffer: take it out while the message is handled.
        let mut opener = self.opener.take();
        let tid = self.params.transfer_id;
        let r = match opener.as_mut() {
            None => wire::decode(dgram, tid).and_then(|m| self.on_message(now, m)),
            Some(o) => o.open(dgram, tid).and_then(|m| self.on_message(now, m)),
        };
        self.opener = opener;
        r
    }

    fn on_message(&mut self, now: Instant, m: Message<'_>) -> Result<(), Reject> {
        match m {
            Message::Data(_) => Err(Reject::UnexpectedKind),
            Message::Complete(c) => {
                if c.total_packets != self.total {
                    return Err(Reject::SeqOutOfRange);
                }
                self.last_heard = now;
                self.heard = true;
                self.stats.receiver_duplicates = self.stats.receiver_duplicates.max(c.dups);
                self.stats.receiver_datagrams = self.stats.receiver_datagrams.max(c.rx_total);
                self.mark_acked(0, self.total);
                self.finish();
                Ok(())
            }
            Message::Ack(a) => self.on_ack(now, &a),
        }
    }

    fn mark_acked(&mut self, a: u64, b: u64) {
        let (inflight, missing, sent_end) = (&mut self.inflight, &mut self.missing, self.sent_end);
        let n = self.acked.set_range_with(a, b, |seq| {
            if inflight.remove(&seq).is_none() && seq < sent_end {
                debug_assert!(*missing > 0);
                *missing = missing.saturating_sub(1);
            }
        });
        self.stats.acked += n;
    }

    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            self.inflight.clear();
            self.records.clear();
            self.missing = 0;
            self.events.push_back(SenderEvent::Complete);
        }
    }

    fn on_ack(&mut self, now: Instant, a: &AckPacket<'_>) -> Result<(), Reject> {
        let s = &a.summary;
        if s.cum > self.total || s.distinct > self.total || a.start + a.span > self.total {
            return Err(Reject::SeqOutOfRange);
        }
        if s.generation < self.highest_gen {
            return Err(Reject::StaleAck);
        }
        if self.done {
            return Ok(());
        }
        let fresh = s.generation > self.highest_gen;
        self.last_heard = now;
        self.heard = true;
        self.stats.ack_datagrams += 1;
        self.mark_acked(0, s.cum);
        for (x, y) in a.held_runs() {
            self.mark_acked(x, y);
        }
        self.cum = self.acked.next_zero(self.cum).unwrap_or(self.total);
        self.idle = false;
        if self.acked.is_full() {
            self.finish();
            return Ok(());
        }
        // The newest transmission the receiver had seen, widened to 64 bits (ignored if it is not one we sent).
        let largest = s.echo.and_then(|e| {
            let back = (self.next_tx as u32).wrapping_sub(e.tx) as u64;
            (back >= 1 && back <= self.next_tx).then(|| self.next_tx - back)
        });
        if let Some(l) = largest {
            self.largest_acked_tx = Some(self.largest_acked_tx.map_or(l, |x| x.max(l)));
        }
        if let Some(l) = self.largest_acked_tx {
            self.resolve(
                l.saturating_sub(self.cfg.reorder_threshold as u64),
                s.cum,
                a.start..a.start + a.span,
            );
        }
        if !fresh {
            return Ok(());
        }
        self.highest_gen = s.generation;
        self.stats.ack_generations += 1;
        self.stats.receiver_duplicates = s.dups;
        self.stats.receiver_datagrams = s.rx_total;
        let (Some(e), Some(l)) = (s.echo, largest) else {
            return Ok(());
        };
        let now_us = now.saturating_duration_since(self.epoch).as_micros() as u32;
        let age = Duration::from_micros(now_us.wrapping_sub(e.echo_ts) as u64);
        let rtt = age
            .checked_sub(Duration::from_micros(e.hold_us as u64))
            .filter(|r| !r.is_zero());
        let app_limited = match (s.sample, self.idle_mark) {
            (Some(iv), Some(m)) => l.saturating_sub(iv.tx as u64) < m && m <= l,
            _ => false,
        };
        self.rate.on_ack(
            now,
            &AckInput {
                rtt,
                sample: s.sample,
                largest_tx: l,
                next_tx: self.next_tx,
                inflight: self.inflight.len() as u64,
                app_limited,
            },
        );
        Ok(())
    }

    /// Transmissions up to `covered` that the receiver reports absent (below `cum` or inside `chunk`) are lost.
    fn resolve(&mut self, covered: u64, cum: u64, chunk: std::ops::Range<u64>) {
        let mut keep = Vec::new();
        while let Some(&(tx, seq)) = self.records.front() {
            if tx > covered {
                break;
            }
            self.records.pop_front();
            let valid = self.inflight.get(&seq).is_some_and(|e| e.tx == tx);
            if !valid {
                continue;
            }
            if seq < cum || chunk.contains(&seq) {
                self.inflight.remove(&seq);
                self.missing += 1;
                self.stats.losses_detected += 1;
            } else {
                keep.push((tx, seq));
            }
        }
        for r in keep.into_iter().rev() {
            self.records.push_front(r);
        }
    }
}
