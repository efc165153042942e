//! Next-packet policies: the `NextPacket` trait the sender consults for every datagram, the read-only
//! `SendView` of the sender's state it sees, and the default FOBS circular policy (`Circular`).

use std::collections::HashMap;
use std::ops::Range;

use crate::bitmap::Bitmap;

/// What a policy may look at when choosing the next packet.
///
/// A packet is in one of four states: *unsent* (never transmitted; all packets at or above
/// [`sent_end`](Self::sent_end)), *in flight* (its latest transmission may still be acknowledged), *missing*
/// (transmitted, not acknowledged, and no longer in flight: an ack sent after it should have arrived reported it
/// absent, or its loss timer expired) and *acked*.
pub struct SendView<'a> {
    pub(crate) acked: &'a Bitmap,
    pub(crate) inflight: &'a HashMap<u64, crate::sender::InflightEntry>,
    pub(crate) sent_end: u64,
    pub(crate) missing: u64,
    pub(crate) window: Range<u64>,
    pub(crate) total: u64,
}

impl SendView<'_> {
    /// Packets in the transfer.
    pub fn total_packets(&self) -> u64 {
        self.total
    }
    /// The packets the sender may transmit now: `[cumulative ack, cumulative ack + window_packets)`.
    pub fn window(&self) -> Range<u64> {
        self.window.clone()
    }
    /// Every packet below this has been transmitted at least once (or was acknowledged before being sent).
    pub fn sent_end(&self) -> u64 {
        self.sent_end
    }
    /// The next never-sent packet, if it lies inside the window.
    pub fn next_unsent(&self) -> Option<u64> {
        (self.sent_end < self.window.end).then_some(self.sent_end)
    }
    pub fn is_acked(&self, seq: u64) -> bool {
        self.acked.get(seq)
    }
    pub fn is_in_flight(&self, seq: u64) -> bool {
        self.inflight.contains_key(&seq)
    }
    /// Packets in flight.
    pub fn in_flight_count(&self) -> u64 {
        self.inflight.len() as u64
    }
    /// Packets transmitted, not acknowledged and no longer in flight (known or presumed lost).
    pub fn missing_count(&self) -> u64 {
        self.missing
    }
    /// First unacknowledged packet in `[from, end)`.
    pub fn next_unacked(&self, from: u64, end: u64) -> Option<u64> {
        self.acked.next_zero(from).filter(|&s| s < end)
    }
}

/// The policy's choice: a packet and the resend round it belongs to (0 = first transmission).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    pub seq: u64,
    pub round: u64,
}

/// Chooses the next packet to transmit. Called once per datagram, only when the pacer and the in-flight limit
/// allow a send; the returned packet is transmitted at once. Returning `None` means "nothing worth sending now"
/// (the sender then idles until an ack or a loss timer changes the view). A policy must only return packets
/// inside `view.window()` that are not acknowledged.
pub trait NextPacket {
    fn next_packet(&mut self, view: &SendView<'_>) -> Option<Pick>;
}

/// The FOBS circular policy (seed 004 §4.2): the data is a circular buffer. Unsent packets go first, in order;
/// resends start only when no unsent packet remains in the window; then a cursor cycles through the window in
/// sequence order, and each full cycle is one resend round, so a packet is resent for the (n+1)st time only after
/// every other packet still unacknowledged was resent n times.
///
/// One refinement keeps FOBS's order but drops its waste: when the cursor reaches a packet whose latest
/// transmission is still in flight it *waits* there (returns `None`) instead of resending it blindly; everything
/// after it in cursor order was sent even later, so nothing is overtaken and no round is skipped. (FOBS's
/// "resend every unacknowledged packet" tail, which the paper measured as duplicates, becomes idle time the rate
/// controller and the sender's tail hedging use instead.)
///
/// With a window smaller than the rest of the transfer the window only slides as its holes are filled, so
/// FOBS's rule (resend only when nothing new is left) would stall the transfer about one round trip each time
/// the window fills. There, known-lost packets go first, still in circular order (the cursor looks past
/// packets in flight instead of waiting), and new packets fill the rest; rounds count cycles of the cursor, and
/// the strict round order above holds for the whole-transfer window (the default) only.
#[derive(Debug, Clone, Default)]
pub struct Circular {
    cursor: u64,
    round: u64,
}

impl Circular {
    pub fn new() -> Self {
        Self::default()
    }
    /// Current resend round (0 while first transmissions are going out).
    pub fn round(&self) -> u64 {
        self.round
    }
}

impl NextPacket for Circular {
    fn next_packet(&mut self, view: &SendView<'_>) -> Option<Pick> {
        let w = view.window();
        if w.end < view.total_packets() {
            // A window short of the transfer's end only slides as its holes are filled: resend what is known
            // lost first (circular order, looking past packets in flight), then new packets.
            if view.missing_count() > 0 {
                if let Some(p) = self.resend(view, true) {
                    return Some(p);
                }
            }
            return view.next_unsent().map(|seq| Pick { seq, round: 0 });
        }
        if let Some(seq) = view.next_unsent() {
            return Some(Pick { seq, round: 0 });
        }
        self.resend(view, false)
    }
}

impl Circular {
    fn resend(&mut self, view: &SendView<'_>, skip_in_flight: bool) -> Option<Pick> {
        let lo = view.window().start;
        let hi = view.sent_end().min(view.window().end);
        if self.round == 0 {
            self.round = 1;
            self.cursor = lo;
        }
        self.cursor = self.cursor.max(lo); // below the window everything is acknowledged
        let start = self.cursor;
        let mut wrapped = false;
        loop {
            match view.next_unacked(self.cursor, hi) {
                Some(seq) if wrapped && seq >= start => {
                    // Scanned a whole cycle: nothing to send.
                    self.cursor = start;
                    self.round -= 1;
                    return None;
                }
                Some(seq) if view.is_in_flight(seq) => {
                    if !skip_in_flight {
                        self.cursor = seq;
                        return None;
                    }
                    self.cursor = seq + 1;
                }
                Some(seq) => {
                    self.cursor = seq + 1;
                    return Some(Pick {
                        seq,
                        round: self.round,
                    });
                }
                None => {
                    if wrapped || view.next_unacked(lo, hi).is_none() {
                        if wrapped {
                            self.cursor = start;
                            self.round -= 1;
                        }
                        return None;
                    }
                    wrapped = true;
                    self.round += 1;
                    self.cursor = lo;
                }
            }
        }
    }
}
