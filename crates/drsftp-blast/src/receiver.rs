//! `Receiver`: the sans-IO blast receiver. Keeps the one-bit-per-packet received map over the whole transfer,
//! hands each new packet's payload out with its file offset (exactly once), and decides when to acknowledge
//! (every N new packets, after a run of duplicates, after a short delay, on the sender's request, on a receive
//! timeout) and what the ack datagrams contain.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::bitmap::Bitmap;
use crate::crypt::{KeyUse, Opener, Protection, Sealer};
use crate::error::{BitmapError, ConfigError, Reject, RejectCounts};
use crate::wire::{
    self, AckBody, AckPacket, AckSummary, CompletePacket, EchoInfo, IntervalSample, Message,
    TransferParams, ACK_HEADER_LEN,
};

/// Receiver tuning.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiverConfig {
    /// Acknowledge after this many new packets (the paper's ack frequency 1/N; it measured 1/50 … 1/3000).
    pub ack_every: u32,
    /// Acknowledge after this many duplicates since the last ack (the paper: 50).
    pub dup_ack_threshold: u32,
    /// Acknowledge at most this long after an unacknowledged packet arrived, so the sender's loss detection and
    /// rate estimate never wait for `ack_every` packets that will not come.
    pub max_ack_delay: Duration,
    /// With nothing received for this long, send an ack anyway (the paper's 1.5 s select timeout), and again
    /// every period after that.
    pub idle_ack_timeout: Duration,
    /// Largest ack datagram (UDP payload bytes): path MTU − 28.
    pub max_ack_datagram: usize,
    /// Most ack datagrams (chunks) per ack event; a larger state is covered over several events in rotation.
    pub max_ack_chunks: u16,
    /// CRC32C (version 1) or AEAD under TLS (version 2, `crate::crypt`); the sender must use the same. An AEAD
    /// ack is 24 bytes longer than its body budget suggests: `max_ack_datagram` stays the limit.
    pub protection: Protection,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            ack_every: 64,
            dup_ack_threshold: 50,
            max_ack_delay: Duration::from_millis(10),
            idle_ack_timeout: Duration::from_millis(1500),
            max_ack_datagram: 1472,
            max_ack_chunks: 16,
            protection: Protection::None,
        }
    }
}

impl ReceiverConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.ack_every == 0 || self.dup_ack_threshold == 0 || self.max_ack_chunks == 0 {
            return Err(ConfigError::Invalid(
                "ack_every, dup_ack_threshold and max_ack_chunks must be positive",
            ));
        }
        let min = ACK_HEADER_LEN + 32 + self.protection.overhead();
        if self.max_ack_datagram < min || self.max_ack_datagram > wire::MAX_DATAGRAM {
            return Err(ConfigError::Invalid("max_ack_datagram out of range"));
        }
        if self.idle_ack_timeout.is_zero() {
            return Err(ConfigError::Invalid("idle_ack_timeout must be positive"));
        }
        Ok(())
    }
}

/// What a data datagram meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxEvent<'a> {
    /// A packet not held before: write `data` at byte `offset` of the file. Emitted once per packet.
    Data {
        seq: u64,
        offset: u64,
        data: &'a [u8],
    },
    /// A packet already held (counted; nothing to write).
    Duplicate { seq: u64 },
}

/// Receiver counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Valid data datagrams, duplicates included.
    pub datagrams: u64,
    /// Packets held.
    pub distinct: u64,
    pub duplicates: u64,
    /// Ack events and the datagrams (chunks) they produced.
    pub acks: u64,
    pub ack_datagrams: u64,
    pub completes_sent: u64,
    pub rejects: RejectCounts,
}

#[derive(Debug, Clone, Copy)]
struct Newest {
    tx: u32,
    send_ts: u32,
    at: Instant,
}

fn newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

fn micros(d: Duration) -> u32 {
    d.as_micros().min(u32::MAX as u128) as u32
}

/// The blast receiver. See the crate docs for the I/O contract.
#[derive(Debug)]
pub struct Receiver {
    params: TransferParams,
    cfg: ReceiverConfig,
    total: u64,
    got: Bitmap,
    cum: u64,
    /// One past the highest packet held.
    high: u64,
    generation: u64,
    new_since_ack: u32,
    dups_since_ack: u32,
    pending_since: Option<Instant>,
    idle_at: Instant,
    newest: Option<Newest>,
    /// The oldest transmission number seen: with `newest`, the span of the sender's transmissions that reached
    /// us, so the datagrams lost on the way are that span less what arrived ([`Self::transmissions`]).
    oldest_tx: Option<u32>,
    sample_ref: Option<Newest>,
    pkts_since_ref: u32,
    rotation: u64,
    last_complete: Option<Instant>,
    out: VecDeque<Vec<u8>>,
    stats: ReceiverStats,
    /// AEAD: opens data datagrams; seals acks and completes numbered by `ack_counter` (the nonce).
    opener: Option<Opener>,
    sealer: Option<Sealer>,
    ack_counter: u64,
    /// The packet the last valid data datagram carried.
    last_seq: u64,
    /// Base of the one-way delays ([`Self::last_owd_us`]).
    epoch: Instant,
    last_owd_us: Option<i64>,
}

impl Receiver {
    /// A receiver for a fresh transfer, idle at `now`.
    pub fn new(
        params: TransferParams,
        cfg: ReceiverConfig,
        now: Instant,
    ) -> Result<Self, ConfigError> {
        let got = Bitmap::new(params.total_packets());
        Self::resume(params, cfg, got, now)
    }

    /// A receiver that already holds the packets set in `checkpoint` (a saved [`bitmap`](Self::bitmap)). It
    /// queues an ack at once so the sender learns the state before sending much.
    pub fn resume(
        params: TransferParams,
        cfg: ReceiverConfig,
        checkpoint: Bitmap,
        now: Instant,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        if params.payload_size + cfg.protection.overhead() > wire::MAX_PAYLOAD {
            return Err(ConfigError::PayloadSize(params.payload_size));
        }
        let total = params.total_packets();
        if checkpoint.len() != total {
            return Err(BitmapError::Packets {
                expected: total,
                got: checkpoint.len(),
            }
            .into());
        }
        let cum = checkpoint.next_zero(0).unwrap_or(total);
        let high = (0..total)
            .rev()
            .find(|&i| checkpoint.get(i))
            .map_or(0, |i| i + 1);
        let resumed = checkpoint.count_ones() > 0;
        let mut r = Receiver {
            params,
            total,
            cum,
            high,
            stats: ReceiverStats {
                distinct: checkpoint.count_ones(),
                ..Default::default()
            },
            got: checkpoint,
            generation: 0,
            new_since_ack: 0,
            dups_since_ack: 0,
            pending_since: None,
            idle_at: now + cfg.idle_ack_timeout,
            newest: None,
            oldest_tx: None,
            sample_ref: None,
            pkts_since_ref: 0,
            rotation: 0,
            last_complete: None,
            out: VecDeque::new(),
            opener: Opener::new(&cfg.protection, KeyUse::Data),
            sealer: Sealer::new(&cfg.protection, KeyUse::Ack),
            ack_counter: 0,
            last_seq: 0,
            epoch: now,
            last_owd_us: None,
            cfg,
        };
        if r.is_complete() {
            r.send_complete(now);
        } else if resumed {
            r.send_ack(now);
        }
        Ok(r)
    }

    pub fn params(&self) -> &TransferParams {
        &self.params
    }

    /// The received map: bit i set = packet i held. Save it (`to_bytes`) to resume later with
    /// [`resume`](Self::resume).
    pub fn bitmap(&self) -> &Bitmap {
        &self.got
    }

    /// Every packet below this one is held.
    pub fn cum_ack(&self) -> u64 {
        self.cum
    }

    pub fn is_complete(&self) -> bool {
        self.got.is_full()
    }

    /// The one-way delay of the last valid data datagram, µs on an arbitrary constant base (the two clocks'
    /// offset): its changes are queueing delay. `None` before the first one.
    pub fn last_owd_us(&self) -> Option<i64> {
        self.last_owd_us
    }

    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }

    /// How many transmissions the sender made from the oldest to the newest one that reached us (every data
    /// datagram carries its transmission number): those less [`ReceiverStats::datagrams`] were lost on the way
    /// (or dropped at our socket), which is how `drsftp tune calibrate` measures a path's random loss.
    pub fn transmissions(&self) -> u64 {
        match (self.oldest_tx, self.newest) {
            (Some(o), Some(n)) => u64::from(n.tx.wrapping_sub(o)) + 1,
            _ => 0,
        }
    }

    /// Handle one datagram from the socket. Rejections are counted in `stats().rejects` and returned; they are
    /// never fatal. A new packet's payload borrows `dgram`, or the receiver itself under AEAD (decrypted there).
    pub fn handle_datagram<'a>(
        &'a mut self,
        now: Instant,
        dgram: &'a [u8],
    ) -> Result<RxEvent<'a>, Reject> {
        match self.handle_inner(now, dgram) {
            Ok(Some(seq)) => Ok(RxEvent::Data {
                seq,
                offset: self.params.offset(seq),
                data: match &self.opener {
                    Some(o) => o.payload(),
                    None => &dgram[wire::DATA_HEADER_LEN..],
                },
            }),
            Ok(None) => Ok(RxEvent::Duplicate { seq: self.last_seq }),
            Err(e) => {
                self.stats.rejects.add(e);
                Err(e)
            }
        }
    }

    /// Handles a datagram; `Some(seq)` for a new packet (its payload is at the end of `dgram`, or in the
    /// opener), `None` for a duplicate of packet `last_seq`.
    fn handle_inner(&mut self, now: Instant, dgram: &[u8]) -> Result<Option<u64>, Reject> {
        let tid = self.params.transfer_id;
        let m = match self.opener.as_mut() {
            None => wire::decode(dgram, tid)?,
            Some(o) => o.open(dgram, tid)?,
        };
        // Copy what is needed out of the message: it may borrow the opener, and the state updates below need
        // all of `self`.
        struct Pkt {
            seq: u64,
            tx: u32,
            send_ts: u32,
            ack_now: bool,
        }
        let (pkt, payload_len) = match m {
            Message::Data(d) => (
                Pkt {
                    seq: d.seq,
                    tx: d.tx,
                    send_ts: d.send_ts,
                    ack_now: d.ack_now,
                },
                d.payload.len(),
            ),
            _ => return Err(Reject::UnexpectedKind),
        };
        self.last_seq = pkt.seq;
        if pkt.seq >= self.total {
            return Err(Reject::SeqOutOfRange);
        }
        if payload_len != self.params.packet_len(pkt.seq) {
            return Err(Reject::BadLength);
        }
        self.stats.datagrams += 1;
        self.idle_at = now + self.cfg.idle_ack_timeout;
        // Both timestamps are µs truncated to 32 bits (the sender's since its own start): their difference is
        // the one-way delay on an unknown constant base, good for ±35 min of clock offset.
        let at = now.saturating_duration_since(self.epoch).as_micros() as u32;
        self.last_owd_us = Some(i64::from(at.wrapping_sub(pkt.send_ts) as i32));
        let n = Newest {
            tx: pkt.tx,
            send_ts: pkt.send_ts,
            at: now,
        };
        match self.newest {
            Some(cur) if !newer(pkt.tx, cur.tx) => {}
            _ => self.newest = Some(n),
        }
        match self.oldest_tx {
            Some(o) if !newer(o, pkt.tx) => {}
            _ => self.oldest_tx = Some(pkt.tx),
        }
        if self.sample_ref.is_none() {
            self.sample_ref = Some(n);
        } else {
            self.pkts_since_ref = self.pkts_since_ref.saturating_add(1);
        }
        let was_complete = self.is_complete();
        if self.got.set(pkt.seq) {
            self.stats.distinct += 1;
            self.high = self.high.max(pkt.seq + 1);
            if pkt.seq == self.cum {
                self.cum = self.got.next_zero(self.cum).unwrap_or(self.total);
            }
            if self.is_complete() {
                self.send_complete(now);
            } else {
                self.new_since_ack += 1;
                if self.new_since_ack >= self.cfg.ack_every || pkt.ack_now {
                    self.send_ack(now);
                } else {
                    self.pending_since.get_or_insert(now);
                }
            }
            return Ok(Some(pkt.seq));
        }
        self.stats.duplicates += 1;
        if was_complete {
            // The sender has not heard that we are done: repeat, at most once per max_ack_delay.
            let due = self
                .last_complete
                .is_none_or(|t| now >= t + self.cfg.max_ack_delay);
            if due || pkt.ack_now {
                self.send_complete(now);
            }
        } else {
            self.dups_since_ack += 1;
            if self.dups_since_ack >= self.cfg.dup_ack_threshold || pkt.ack_now {
                self.send_ack(now);
            } else {
                self.pending_since.get_or_insert(now);
            }
        }
        Ok(None)
    }

    /// The AEAD counter for the next ack or complete datagram (`None` without AEAD).
    fn next_counter(&mut self) -> Option<u64> {
        self.sealer.as_ref()?;
        let c = self.ack_counter;
        self.ack_counter += 1;
        Some(c)
    }

    /// Seals (AEAD) and queues an ack or complete datagram.
    fn push_out(&mut self, mut out: Vec<u8>) {
        if let Some(s) = &self.sealer {
            s.seal(&mut out);
        }
        self.out.push_back(out);
    }

    /// Next ack/complete datagram to send to the sender.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.out.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should run next (`None` once complete).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_complete() {
            return None;
        }
        let delayed = self.pending_since.map(|t| t + self.cfg.max_ack_delay);
        Some(delayed.map_or(self.idle_at, |d| d.min(self.idle_at)))
    }

    /// Timer expiry: delayed ack, or receive-timeout ack.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.is_complete() {
            return;
        }
        let delayed = self
            .pending_since
            .is_some_and(|t| now >= t + self.cfg.max_ack_delay);
        if delayed || now >= self.idle_at {
            self.send_ack(now);
        }
        if now >= self.idle_at {
            self.idle_at = now + self.cfg.idle_ack_timeout;
        }
    }

    fn send_complete(&mut self, now: Instant) {
        self.last_complete = Some(now);
        self.pending_since = None;
        let mut out = Vec::with_capacity(wire::COMPLETE_LEN + wire::AEAD_OVERHEAD);
        let counter = self.next_counter();
        wire::encode_complete_framed(
            &mut out,
            self.params.transfer_id,
            &CompletePacket {
                total_packets: self.total,
                rx_total: self.stats.datagrams,
                dups: self.stats.duplicates,
            },
            counter,
        );
        self.stats.completes_sent += 1;
        self.push_out(out);
    }

    fn summary(&mut self, now: Instant) -> AckSummary {
        self.generation += 1;
        let echo = self.newest.map(|n| EchoInfo {
            tx: n.tx,
            echo_ts: n.send_ts,
            hold_us: micros(now.saturating_duration_since(n.at)),
        });
        let mut sample = None;
        if let (Some(r), Some(n)) = (self.sample_ref, self.newest) {
            if newer(n.tx, r.tx) {
                sample = Some(IntervalSample {
                    tx: n.tx.wrapping_sub(r.tx),
                    pkts: self.pkts_since_ref,
                    rx_us: micros(n.at.saturating_duration_since(r.at)),
                    send_us: n.send_ts.wrapping_sub(r.send_ts),
                });
                self.sample_ref = Some(n);
                self.pkts_since_ref = 0;
            }
        }
        AckSummary {
            generation: self.generation,
            cum: self.cum,
            distinct: self.stats.distinct,
            rx_total: self.stats.datagrams,
            dups: self.stats.duplicates,
            echo,
            sample,
        }
    }

    /// Encode the state of packets from `s` (not beyond `lim`) into one chunk body of at most `budget` bytes,
    /// as runs or as a bitmap, whichever covers more. Returns (span, is_bitmap).
    fn encode_chunk(&self, s: u64, lim: u64, budget: usize, body: &mut Vec<u8>) -> (u64, bool) {
        body.clear();
        let mut pos = s;
        let mut held = false;
        while pos < lim {
            let end = if self.got.get(pos) == held {
                self.got.run_end(pos, lim)
            } else {
                pos
            };
            let len = end - pos;
            if body.len() + wire::varint_len(len) > budget {
                break;
            }
            wire::put_varint(body, len);
            pos = end;
            held = !held;
        }
        let runs_span = pos - s;
        let bitmap_span = (lim - s).min(budget as u64 * 8);
        if runs_span >= bitmap_span && runs_span > 0 {
            return (runs_span, false);
        }
        body.clear();
        self.got.extract_bytes(s, bitmap_span, body);
        (bitmap_span, true)
    }

    fn send_ack(&mut self, now: Instant) {
        self.new_since_ack = 0;
        self.dups_since_ack = 0;
        self.pending_since = None;
        let summary = self.summary(now);
        let budget = self.cfg.max_ack_datagram - ACK_HEADER_LEN - self.cfg.protection.overhead();
        let max = self.cfg.max_ack_chunks as usize;
        // (start, span, bitmap?, body)
        let mut chunks: Vec<(u64, u64, bool, Vec<u8>)> = Vec::new();
        let (cum, high) = (self.cum, self.high);
        if cum < high {
            let mut body = Vec::new();
            let (span, bm) = self.encode_chunk(cum, high, budget, &mut body);
            chunks.push((cum, span, bm, body));
            let next = cum + span;
            // The rest of [next, high), in order, if it fits.
            let mut pos = next;
            let mut rest = Vec::new();
            while chunks.len() + rest.len() < max && pos < high {
                let mut body = Vec::new();
                let (span, bm) = self.encode_chunk(pos, high, budget, &mut body);
                rest.push((pos, span, bm, body));
                pos += span;
            }
            if pos < high {
                // Too much state for one ack. Half the remaining chunks are bitmaps of the newest packets
                // (where the sender's transmissions in flight are, so its loss detection is never starved);
                // the others cover the rest from a cursor that rotates across ack events.
                rest.clear();
                let slots = max - 1;
                let newest = slots / 2;
                let per = budget as u64 * 8;
                let new_start = high.saturating_sub(newest as u64 * per).max(next);
                let p0 = if (next..new_start).contains(&self.rotation) {
                    self.rotation
                } else {
                    next
                };
                let (mut pos, mut wrapped) = (p0, false);
                while rest.len() < slots - newest {
                    if pos >= new_start {
                        if wrapped || p0 == next {
                            break;
                        }
                        pos = next;
                        wrapped = true;
                    }
                    let lim = if wrapped { p0 } else { new_start };
                    if pos >= lim {
                        break;
                    }
                    let mut body = Vec::new();
                    let (span, bm) = self.encode_chunk(pos, lim, budget, &mut body);
                    rest.push((pos, span, bm, body));
                    pos += span;
                }
                self.rotation = pos;
                let mut pos = new_start;
                while pos < high {
                    let n = (high - pos).min(per);
                    let mut body = Vec::new();
                    self.got.extract_bytes(pos, n, &mut body);
                    rest.push((pos, n, true, body));
                    pos += n;
                }
            }
            chunks.extend(rest);
        } else {
            chunks.push((cum, 0, false, Vec::new()));
        }
        let count = chunks.len() as u16;
        for (i, (start, span, bm, body)) in chunks.iter().enumerate() {
            let body = match (span, bm) {
                (0, _) => AckBody::None,
                (_, true) => AckBody::Bitmap(body),
                (_, false) => AckBody::Runs(body),
            };
            let mut out =
                Vec::with_capacity(ACK_HEADER_LEN + body_len(&body) + wire::AEAD_OVERHEAD);
            let counter = self.next_counter();
            wire::encode_ack_framed(
                &mut out,
                self.params.transfer_id,
                &AckPacket {
                    summary,
                    chunk_index: i as u16,
                    chunk_count: count,
                    start: *start,
                    span: *span,
                    body,
                },
                counter,
            );
            self.push_out(out);
        }
        self.stats.acks += 1;
        self.stats.ack_datagrams += count as u64;
    }
}

fn body_len(b: &AckBody<'_>) -> usize {
    match b {
        AckBody::None => 0,
        AckBody::Bitmap(x) | AckBody::Runs(x) => x.len(),
    }
}

#[cfg(test)]
mod tests;
