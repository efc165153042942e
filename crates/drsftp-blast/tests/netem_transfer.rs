//! Blast transfers over drsftp-netem in virtual time: exactly-once delivery, goodput and duplicates at 0 %, 1 %
//! and 5 % random loss; a windowed sender; resuming from a receiver checkpoint.
//!
//! Goodput is file bytes over the virtual time from the sender's start until the receiver holds every byte, as
//! a fraction of the link rate. Its ceiling on these paths is below 100 %: every 1500-byte datagram carries
//! 1436 payload bytes (95.7 %), a fraction p of the link time goes to resending lost packets, the sender learns
//! the path rate only one RTT after it starts (it paces at 10 Mbit/s until then), and the fate of the last
//! packets is known only one RTT after they left. On 64 MiB at 5 % loss and 200 ms that bound is about 86 %.

mod common;

use std::time::{Duration, Instant};

use common::*;
use drsftp_blast::*;
use drsftp_netem::{LinkConfig, LossModel};

fn link(rtt_ms: u64, loss: f64, seed: u64) -> LinkConfig {
    LinkConfig::new(Duration::from_millis(rtt_ms / 2), 100_000_000)
        .with_loss(if loss > 0.0 {
            LossModel::Bernoulli { p: loss }
        } else {
            LossModel::None
        })
        .with_seed(seed)
}

fn one(spec: FlowSpec, rtt_ms: u64, loss: f64) -> FlowResult {
    let (mut r, _) = run(
        link(rtt_ms, loss, 11),
        link(rtt_ms, loss, 99),
        vec![spec.clone()],
        None,
        Duration::from_secs(300),
    );
    let r = r.remove(0);
    eprintln!(
        "{} MiB, rtt {rtt_ms} ms, loss {:.0}%, window {}: done in {:.3} s, goodput {:.1}% of link, duplicates {:.2}% ({}), \
         datagrams {} (new {} resent {} hedge {}), max round {}, backoffs delay {} loss {} share {}, bw {:.1} Mbit/s, loss est {:.3}",
        spec.bytes / MIB,
        loss * 100.0,
        if spec.sender.window_packets == u64::MAX { "all".to_string() } else { spec.sender.window_packets.to_string() },
        r.rx_done.map_or(f64::NAN, |d| d.as_secs_f64()),
        r.rx_done.map_or(0.0, |_| r.goodput_bps() / 1e6),
        r.dup_fraction() * 100.0,
        r.receiver.duplicates,
        r.sender.datagrams,
        r.sender.new_packets,
        r.sender.resent,
        r.sender.hedge_copies,
        r.sender.max_round,
        r.rate.delay_backoffs,
        r.rate.loss_backoffs,
        r.rate.share_backoffs,
        r.final_bw / 1e6,
        r.loss_estimate,
    );
    assert!(r.rx_done.is_some() && r.tx_done.is_some(), "unfinished");
    assert!(r.data_ok, "data mismatch");
    assert!(
        r.exactly_once,
        "a packet was handed out other than exactly once"
    );
    r
}

#[test]
fn sixty_four_mib_at_0_1_5_percent_loss() {
    // (rtt, loss, goodput floor): the brief's 90 % at 1 %/100 ms holds on 64 MiB; its 85 % at 5 %/200 ms needs
    // a longer transfer (below), 64 MiB reaches about 84 %.
    for (rtt, loss, floor) in [(100, 0.0, 0.92), (100, 0.01, 0.90), (200, 0.05, 0.83)] {
        let r = one(FlowSpec::new(64 * MIB, 0xB1A5_0001), rtt, loss);
        let g = r.goodput_bps() / 100e6;
        assert!(
            g >= floor,
            "goodput {:.1}% < {:.0}%",
            g * 100.0,
            floor * 100.0
        );
        assert!(
            r.dup_fraction() <= 0.03,
            "duplicates {:.2}%",
            r.dup_fraction() * 100.0
        );
    }
}

#[test]
fn goodput_at_5_percent_loss_200_ms() {
    let r = one(FlowSpec::new(128 * MIB, 0xB1A5_0002), 200, 0.05);
    let g = r.goodput_bps() / 100e6;
    assert!(g >= 0.85, "goodput {:.1}%", g * 100.0);
    assert!(r.dup_fraction() <= 0.03);
}

#[test]
fn windowed_sender_completes() {
    // 8 × BDP of 100 Mbit/s × 100 ms in 1500-byte packets.
    let mut spec = FlowSpec::new(32 * MIB, 0xB1A5_0003);
    spec.sender.window_packets = 8 * 834;
    let r = one(spec, 100, 0.01);
    assert!(r.goodput_bps() / 100e6 >= 0.85);
    assert!(r.dup_fraction() <= 0.03);
}

/// A receiver checkpoint (`bitmap`) taken mid-transfer resumes a new session that sends only what is missing.
#[test]
fn resume_from_receiver_checkpoint() {
    let t0 = Instant::now();
    let data = random_bytes(2 * MIB, 5);
    let params = TransferParams::for_mtu(77, data.len() as u64, 1500).unwrap();
    let mut out = vec![0u8; data.len()];
    let mut rx = Receiver::new(params, ReceiverConfig::default(), t0).unwrap();
    // Session 1 never feeds acks back (it only builds the receiver's checkpoint): lift the unacked budget.
    let cfg = SenderConfig {
        unacked_budget: u64::MAX,
        ..SenderConfig::default()
    };
    let mut tx = Sender::new(params, cfg, t0).unwrap();
    let mut batch = Batch::new();
    // Session 1: lossless, but the process dies after some datagrams; every fifth one was lost.
    let mut n = 0;
    let mut now = t0;
    while n < 900 {
        batch.clear();
        tx.poll_transmit(now, 16, &data[..], &mut batch).unwrap();
        for d in batch.iter() {
            n += 1;
            if n % 5 != 0 {
                if let Ok(RxEvent::Data { offset, data, .. }) = rx.handle_datagram(now, d) {
                    out[offset as usize..][..data.len()].copy_from_slice(data);
                }
            }
        }
        now += Duration::from_millis(1);
    }
    let checkpoint = rx.bitmap().to_bytes();
    let held = rx.bitmap().count_ones();
    assert!(held > 500 && held < params.total_packets());
    drop((rx, tx));

    // Session 2: both ends restart; the receiver resumes from the checkpoint and tells the sender at once.
    let t1 = now + Duration::from_secs(5);
    let bm = Bitmap::from_bytes(params.total_packets(), &checkpoint).unwrap();
    let mut rx = Receiver::resume(params, ReceiverConfig::default(), bm, t1).unwrap();
    let mut tx = Sender::new(params, SenderConfig::default(), t1).unwrap();
    let mut now = t1;
    for _ in 0..100_000 {
        while let Some(a) = rx.poll_transmit() {
            let _ = tx.handle_input(now, &a);
        }
        if tx.is_done() {
            break;
        }
        batch.clear();
        tx.poll_transmit(now, 16, &data[..], &mut batch).unwrap();
        for d in batch.iter() {
            match rx.handle_datagram(now, d) {
                Ok(RxEvent::Data { offset, data, .. }) => {
                    out[offset as usize..][..data.len()].copy_from_slice(data)
                }
                Ok(RxEvent::Duplicate { seq }) => panic!("packet {seq} was held already"),
                Err(e) => panic!("{e}"),
            }
        }
        now += Duration::from_millis(1);
        fire_due_timeouts(now, &mut tx, &mut rx);
    }
    assert!(rx.is_complete() && tx.is_done());
    assert_eq!(out, data);
    assert_eq!(tx.stats().new_packets, params.total_packets() - held);
    assert_eq!(rx.stats().duplicates, 0);
}

/// The paper's ack-frequency sweep (figures 1 and 2: 1/50 … 1/3000) on 1 % loss, 100 ms, with and without the
/// delayed-ack timer (FOBS had only its 1.5 s receive timeout):
/// `cargo test -p drsftp-blast --test netem_transfer -- --ignored --nocapture`.
#[test]
#[ignore]
fn ack_frequency_sweep() {
    for delay in [10u64, 1500] {
        for every in [50u32, 300, 900, 3000] {
            let mut spec = FlowSpec::new(64 * MIB, 0xB1A5_0004);
            spec.receiver.ack_every = every;
            spec.receiver.max_ack_delay = Duration::from_millis(delay);
            let r = one(spec, 100, 0.01);
            eprintln!(
                "ack every {every}, max delay {delay} ms: goodput {:.1}%, duplicates {}, acks {}",
                r.goodput_bps() / 1e6,
                r.receiver.duplicates,
                r.receiver.acks
            );
        }
    }
}
