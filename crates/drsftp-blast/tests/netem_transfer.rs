//! 64 MiB blast transfers over drsftp-netem in virtual time: exactly-once delivery, goodput and duplicates at
//! 0 %, 1 % and 5 % random loss.

mod common;

use std::time::Duration;

use common::*;
use drsftp_netem::{LinkConfig, LossModel};

fn link(rtt_ms: u64, loss: f64, seed: u64) -> LinkConfig {
    LinkConfig::new(Duration::from_millis(rtt_ms / 2), 100_000_000)
        .with_loss(if loss > 0.0 { LossModel::Bernoulli { p: loss } } else { LossModel::None })
        .with_seed(seed)
}

fn one(rtt_ms: u64, loss: f64, bytes: usize) -> FlowResult {
    let fwd = link(rtt_ms, loss, 11);
    let mut rev = link(rtt_ms, loss, 12);
    rev.seed = 99;
    let (mut r, _) = run(fwd, rev, vec![FlowSpec::new(bytes, 0xB1A5_0001)], None, Duration::from_secs(120));
    let r = r.remove(0);
    eprintln!(
        "rtt {rtt_ms} ms loss {:.0}%: done {:?} goodput {:.1}% of link, dups {:.2}% ({}), sent {} new {} resent {} hedge {} rounds {} backoffs d{} l{} bw {:.1} Mbit/s loss est {:.3}",
        loss * 100.0,
        r.rx_done,
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
        r.final_bw / 1e6,
        r.loss_estimate,
    );
    r
}

#[test]
fn sixty_four_mib_at_0_1_5_percent_loss() {
    for (rtt, loss, min_goodput) in [(100, 0.0, 0.90), (100, 0.01, 0.90), (200, 0.05, 0.85)] {
        let r = one(rtt, loss, 64 * MIB);
        assert!(r.rx_done.is_some() && r.tx_done.is_some(), "unfinished");
        assert!(r.data_ok, "data mismatch");
        assert!(r.exactly_once, "a packet was delivered more or less than once");
        let g = r.goodput_bps() / 100e6;
        assert!(g >= min_goodput, "goodput {:.1}% < {:.0}%", g * 100.0, min_goodput * 100.0);
        assert!(r.dup_fraction() <= 0.03, "duplicates {:.2}%", r.dup_fraction() * 100.0);
    }
}

#[test]
#[ignore]
fn seed_sweep() {
    for seed in [1u64, 2, 3, 4, 5] {
        for (rtt, loss, mib) in [(100, 0.01, 64), (200, 0.05, 64), (200, 0.05, 256)] {
            let fwd = link(rtt, loss, seed * 7);
            let rev = link(rtt, loss, seed * 13 + 1);
            let (r, _) = run(fwd, rev, vec![FlowSpec::new(mib * MIB, seed)], None, Duration::from_secs(300));
            let r = &r[0];
            eprintln!("seed {seed} rtt {rtt} loss {loss} {mib} MiB: goodput {:.1}% dups {:.2}% backoffs d{} l{} s{}", r.goodput_bps() / 1e6, r.dup_fraction() * 100.0, r.rate.delay_backoffs, r.rate.loss_backoffs, r.rate.share_backoffs);
        }
    }
}
