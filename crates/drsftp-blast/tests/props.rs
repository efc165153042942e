//! Property tests on small transfers over drsftp-netem in virtual time: the FOBS circular resend order under
//! random loss patterns, and robustness against garbage, forged, truncated and replayed datagrams.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{fire_due_timeouts, random_bytes};
use drsftp_blast::wire::{self, AckBody, AckPacket, AckSummary, DataPacket};
use drsftp_blast::*;
use drsftp_netem::{LinkConfig, LossModel, Path, QueueLimit, Side};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Hooks into a small simulated transfer.
trait Observer {
    /// A datagram is about to leave the sender; `s` is the sender's state before it (acked map).
    fn on_send(&mut self, _s: &Sender, _info: &DatagramInfo) {}
    /// The sender processed a datagram from the receiver.
    fn on_ack(&mut self, _s: &Sender) {}
    /// Extra datagrams to inject at `now`: (to receiver?, bytes).
    fn inject(&mut self, _now: Instant, _seen_ack: Option<&[u8]>) -> Vec<(bool, Vec<u8>)> {
        Vec::new()
    }
}

struct Outcome {
    data_ok: bool,
    exactly_once: bool,
    done: bool,
    tx_rejects: u64,
    rx_rejects: u64,
}

fn simulate(
    bytes: usize,
    link: LinkConfig,
    scfg: SenderConfig,
    rcfg: ReceiverConfig,
    obs: &mut dyn Observer,
) -> Outcome {
    let t0 = Instant::now();
    let params = TransferParams::new(0x1234_5678, bytes as u64, 200).unwrap();
    let data = random_bytes(bytes, 9);
    let mut out = vec![0u8; bytes];
    let mut count = vec![0u32; params.total_packets() as usize];
    let mut tx = Sender::new(params, scfg, t0).unwrap();
    let mut rx = Receiver::new(params, rcfg, t0).unwrap();
    let mut path: Path<Vec<u8>> = Path::symmetric(link, t0);
    let mut batch = Batch::new();
    let mut now = t0;
    let end = t0 + Duration::from_secs(600);
    let mut last_ack: Option<Vec<u8>> = None;
    while now < end && !(tx.is_done() && rx.is_complete()) {
        for (to_rx, d) in obs.inject(now, last_ack.as_deref()) {
            if to_rx {
                if let Ok(RxEvent::Data { seq, offset, data }) = rx.handle_datagram(now, &d) {
                    out[offset as usize..][..data.len()].copy_from_slice(data);
                    count[seq as usize] += 1;
                }
            } else {
                let _ = tx.handle_input(now, &d);
                obs.on_ack(&tx);
            }
        }
        while let Some(d) = path.poll_deliver(now, Side::B) {
            if let Ok(RxEvent::Data { seq, offset, data }) = rx.handle_datagram(now, &d) {
                out[offset as usize..][..data.len()].copy_from_slice(data);
                count[seq as usize] += 1;
            }
        }
        while let Some(d) = path.poll_deliver(now, Side::A) {
            let _ = tx.handle_input(now, &d);
            obs.on_ack(&tx);
            last_ack = Some(d);
        }
        fire_due_timeouts(now, &mut tx, &mut rx);
        // One datagram at a time, so the observer sees the sender's state before each send.
        loop {
            batch.clear();
            if tx.poll_transmit(now, 1, &data[..], &mut batch).unwrap() == 0 {
                break;
            }
            obs.on_send(&tx, &batch.info()[0]);
            let d = batch.datagram(0).to_vec();
            path.send(now, Side::A, d.len() + 28, d);
        }
        while let Some(a) = rx.poll_transmit() {
            path.send(now, Side::B, a.len() + 28, a);
        }
        let mut next = end;
        for t in [path.poll_timeout(), tx.poll_timeout(), rx.poll_timeout()]
            .into_iter()
            .flatten()
        {
            next = next.min(t);
        }
        now = next.max(now + Duration::from_micros(1));
    }
    Outcome {
        data_ok: out == data,
        exactly_once: count.iter().all(|&c| c == 1),
        done: tx.is_done() && rx.is_complete(),
        tx_rejects: tx.stats().rejects.total(),
        rx_rejects: rx.stats().rejects.total(),
    }
}

fn lossy_link(p: f64, bursty: bool, seed: u64) -> LinkConfig {
    let loss = if bursty {
        LossModel::GilbertElliott {
            p_gb: 0.05,
            p_bg: 0.3,
            loss_good: p / 4.0,
            loss_bad: 0.8,
        }
    } else {
        LossModel::Bernoulli { p }
    };
    LinkConfig::new(Duration::from_millis(5), 20_000_000)
        .with_queue(QueueLimit::Unlimited)
        .with_loss(loss)
        .with_seed(seed)
}

/// Checks the FOBS circular order on every transmission the policy chose (hedge copies excluded):
///
/// Let c(q) be the number of (non-hedge) transmissions of packet q so far. When packet p is transmitted with
/// c(p) = n before it, then
/// 1. if n ≥ 1 (a resend), every packet has been transmitted at least once or is acknowledged
///    (never resend while unsent packets remain);
/// 2. every other packet q the sender does not know to be acknowledged has c(q) ≥ n (p is sent for the (n+1)st
///    time only after all other missing packets were sent n times);
/// 3. no packet has c(q) > n + 1 (rounds are not skipped ahead);
/// 4. the transmission is labelled with resend round n.
#[derive(Default)]
struct OrderCheck {
    counts: Vec<u64>,
    acked: Vec<bool>,
    /// Multiset of c(q) over packets not known acked.
    unacked_counts: BTreeMap<u64, u64>,
    max_count: u64,
    resends: u64,
    violations: Vec<String>,
}

impl OrderCheck {
    fn new(n: usize) -> Self {
        OrderCheck {
            counts: vec![0; n],
            acked: vec![false; n],
            unacked_counts: BTreeMap::from([(0, n as u64)]),
            ..Default::default()
        }
    }
    fn dec(&mut self, c: u64) {
        let e = self.unacked_counts.get_mut(&c).unwrap();
        *e -= 1;
        if *e == 0 {
            self.unacked_counts.remove(&c);
        }
    }
}

impl Observer for OrderCheck {
    fn on_send(&mut self, _s: &Sender, info: &DatagramInfo) {
        if info.hedge {
            return;
        }
        let p = info.seq as usize;
        let n = self.counts[p];
        if self.violations.len() < 5 {
            if n >= 1 {
                self.resends += 1;
                if self.unacked_counts.contains_key(&0) {
                    self.violations
                        .push(format!("resend of {p} while an unsent packet remains"));
                }
            }
            let min_other = {
                self.dec(n);
                let m = self.unacked_counts.keys().next().copied();
                *self.unacked_counts.entry(n).or_default() += 1;
                m
            };
            if min_other.is_some_and(|m| m < n) {
                self.violations.push(format!(
                    "packet {p} sent for time {} while another has {:?}",
                    n + 1,
                    min_other
                ));
            }
            if self.max_count > n + 1 {
                self.violations.push(format!(
                    "packet {p} at {} while max is {}",
                    n + 1,
                    self.max_count
                ));
            }
            if info.round != n {
                self.violations.push(format!(
                    "packet {p} transmission {} labelled round {}",
                    n + 1,
                    info.round
                ));
            }
        }
        if !self.acked[p] {
            self.dec(n);
            *self.unacked_counts.entry(n + 1).or_default() += 1;
        }
        self.counts[p] = n + 1;
        self.max_count = self.max_count.max(n + 1);
    }

    fn on_ack(&mut self, s: &Sender) {
        for q in 0..self.acked.len() {
            if !self.acked[q] && s.acked().get(q as u64) {
                self.acked[q] = true;
                let c = self.counts[q];
                self.dec(c);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn circular_order_under_random_loss(
        packets in 20usize..400,
        p in 0.0f64..0.45,
        bursty in any::<bool>(),
        ack_every in prop::sample::select(vec![1u32, 3, 16, 64]),
        seed in any::<u64>(),
    ) {
        // The order is the property here; giving up when no ack comes through is tested on its own
        // (endpoints.rs), and at 45% loss each way a small transfer can lose every ack of its first rounds.
        let scfg = SenderConfig {
            tail_hedge: false,
            first_ack_timeout: Duration::from_secs(600),
            ..Default::default()
        };
        let rcfg = ReceiverConfig { ack_every, ..Default::default() };
        let mut check = OrderCheck::new(packets);
        let out = simulate(packets * 200 - 7, lossy_link(p, bursty, seed), scfg, rcfg, &mut check);
        prop_assert!(out.done, "transfer did not finish");
        prop_assert!(out.data_ok && out.exactly_once);
        prop_assert!(check.violations.is_empty(), "{:?}", check.violations);
    }
}

/// With tail hedging on, the extra copies are outside the order, and the order still holds for the rest.
#[test]
fn circular_order_with_tail_hedging() {
    for seed in 0..8u64 {
        let mut check = OrderCheck::new(300);
        let out = simulate(
            300 * 200,
            lossy_link(0.1 + seed as f64 * 0.03, seed % 2 == 1, seed),
            SenderConfig::default(),
            ReceiverConfig::default(),
            &mut check,
        );
        assert!(out.done && out.data_ok && out.exactly_once);
        assert!(check.violations.is_empty(), "{:?}", check.violations);
        assert!(check.resends > 0);
    }
}

/// Injects hostile datagrams to both sides during a transfer.
struct Attacker {
    rng: ChaCha8Rng,
    rate: f64,
    old_acks: Vec<Vec<u8>>,
    injected: u64,
    must_reject: u64,
}

impl Attacker {
    fn forged_data(&mut self, transfer_id: u64, seq: u64, len: usize) -> Vec<u8> {
        let payload = vec![0xEE; len];
        let mut out = Vec::new();
        wire::encode_data(
            &mut out,
            transfer_id,
            &DataPacket {
                seq,
                tx: self.rng.gen(),
                send_ts: self.rng.gen(),
                ack_now: false,
                payload: &payload,
            },
        );
        out
    }

    fn forged_ack(&mut self, transfer_id: u64, start: u64, span: u64) -> Vec<u8> {
        let body = vec![0xFFu8; span.div_ceil(8) as usize];
        let mut out = Vec::new();
        wire::encode_ack(
            &mut out,
            transfer_id,
            &AckPacket {
                summary: AckSummary {
                    generation: u64::MAX,
                    ..Default::default()
                },
                chunk_index: 0,
                chunk_count: 1,
                start,
                span,
                body: AckBody::Bitmap(&body),
            },
        );
        out
    }
}

const ID: u64 = 0x1234_5678;

impl Observer for Attacker {
    fn inject(&mut self, _now: Instant, seen_ack: Option<&[u8]>) -> Vec<(bool, Vec<u8>)> {
        if let Some(a) = seen_ack {
            if self.old_acks.last().is_none_or(|l| l != a) && self.old_acks.len() < 64 {
                self.old_acks.push(a.to_vec());
            }
        }
        if !self.rng.gen_bool(self.rate) {
            return vec![];
        }
        self.injected += 1;
        let to_rx = self.rng.gen_bool(0.5);
        let kind = self.rng.gen_range(0..8);
        let d = match kind {
            // Random bytes of random length.
            0 => {
                let n = self.rng.gen_range(0..1600);
                (0..n).map(|_| self.rng.gen()).collect()
            }
            // A valid data packet, then corrupted or truncated.
            1 | 2 => {
                let mut d = self.forged_data(ID, 3, 200);
                if kind == 1 {
                    let i = self.rng.gen_range(0..d.len());
                    d[i] ^= 1 << self.rng.gen_range(0..8);
                } else {
                    d.truncate(self.rng.gen_range(0..d.len()));
                }
                d
            }
            // Well-formed datagrams of another transfer.
            3 => {
                if to_rx {
                    self.forged_data(ID ^ 1, 0, 200)
                } else {
                    self.forged_ack(ID ^ 1, 0, 64)
                }
            }
            // Right transfer, impossible ranges or lengths.
            4 => {
                if to_rx {
                    self.forged_data(ID, 1 << 40, 200)
                } else {
                    self.forged_ack(ID, 1 << 40, 64)
                }
            }
            5 => {
                if to_rx {
                    self.forged_data(ID, 0, 199)
                } else {
                    let mut out = Vec::new();
                    wire::encode_complete(
                        &mut out,
                        ID,
                        &wire::CompletePacket {
                            total_packets: 7,
                            rx_total: 0,
                            dups: 0,
                        },
                    );
                    out
                }
            }
            // Replay of an old ack (stale generation) to the sender; a receiver gets it as a wrong kind.
            _ => match self.old_acks.first() {
                Some(a) if self.old_acks.len() > 2 => a.clone(),
                _ => vec![0; 3],
            },
        };
        let valid_replay = kind >= 6 && d.len() > 3 && !to_rx;
        if !valid_replay {
            self.must_reject += 1;
        }
        vec![(to_rx, d)]
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Hostile datagrams are rejected and counted on both sides, never panic, and never corrupt the transfer.
    #[test]
    fn garbage_is_rejected_and_counted(seed in any::<u64>(), rate in 0.05f64..0.5, p in 0.0f64..0.1) {
        let mut atk = Attacker {
            rng: ChaCha8Rng::seed_from_u64(seed),
            rate,
            old_acks: Vec::new(),
            injected: 0,
            must_reject: 0,
        };
        let out = simulate(
            150 * 200,
            lossy_link(p, false, seed),
            SenderConfig::default(),
            ReceiverConfig { ack_every: 8, ..Default::default() },
            &mut atk,
        );
        prop_assert!(out.done && out.data_ok && out.exactly_once);
        prop_assert!(atk.injected > 0);
        // Replayed acks are rejected as stale unless they happen to be of the current generation.
        prop_assert!(out.tx_rejects + out.rx_rejects >= atk.must_reject);
        prop_assert!(out.tx_rejects + out.rx_rejects <= atk.injected);
    }

    /// Arbitrary bytes straight into fresh endpoints: never a panic, always a counted rejection.
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
        let t0 = Instant::now();
        let params = TransferParams::new(ID, 100_000, 1000).unwrap();
        let mut rx = Receiver::new(params, ReceiverConfig::default(), t0).unwrap();
        let mut tx = Sender::new(params, SenderConfig::default(), t0).unwrap();
        prop_assert!(rx.handle_datagram(t0, &bytes).is_err());
        prop_assert!(tx.handle_input(t0, &bytes).is_err());
        prop_assert_eq!(rx.stats().rejects.total(), 1);
        prop_assert_eq!(tx.stats().rejects.total(), 1);
    }
}
