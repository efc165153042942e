//! Blast flows sharing a bottleneck in virtual time: two blast flows converge to a fair share; one blast flow
//! leaves room for a loss-based TCP flow.

mod common;

use std::time::Duration;

use common::*;
use drsftp_netem::LinkConfig;

fn link(rtt_ms: u64, seed: u64) -> LinkConfig {
    LinkConfig::new(Duration::from_millis(rtt_ms / 2), 100_000_000).with_seed(seed)
}

/// Mean rate (bit/s) of a 100 ms-bucket timeline over buckets [a, b).
fn rate(tl: &[u64], a: usize, b: usize) -> f64 {
    let sum: u64 = (a..b).map(|i| tl.get(i).copied().unwrap_or(0)).sum();
    sum as f64 * 8.0 / ((b - a) as f64 * 0.1)
}

#[test]
fn two_blast_flows_share_fairly() {
    let a = FlowSpec::new(64 * MIB, 0xA);
    let mut b = FlowSpec::new(64 * MIB, 0xB);
    b.start = Duration::from_secs(1);
    let (r, _) = run(
        link(100, 1),
        link(100, 2),
        vec![a, b],
        None,
        Duration::from_secs(120),
    );
    for f in &r {
        assert!(f.data_ok && f.exactly_once && f.rx_done.is_some());
    }
    // Both active from 1 s until the first finishes; skip B's first 2 s (its start-up and the convergence).
    let first_end = (r[0].rx_done.unwrap()).min(r[1].rx_done.unwrap() + Duration::from_secs(1));
    let (from, to) = (30, (first_end.as_millis() / 100) as usize);
    let (ra, rb) = (
        rate(&r[0].timeline, from, to),
        rate(&r[1].timeline, from, to),
    );
    let share_b = rb / (ra + rb);
    eprintln!(
        "shared {:.1}-{:.1} s: A {:.1} Mbit/s, B {:.1} Mbit/s, B share {:.3}, total {:.1}; backoffs A d{} l{} s{} B d{} l{} s{}; dups A {} B {}",
        from as f64 / 10.0,
        to as f64 / 10.0,
        ra / 1e6,
        rb / 1e6,
        share_b,
        (ra + rb) / 1e6,
        r[0].rate.delay_backoffs,
        r[0].rate.loss_backoffs,
        r[0].rate.share_backoffs,
        r[1].rate.delay_backoffs,
        r[1].rate.loss_backoffs,
        r[1].rate.share_backoffs,
        r[0].receiver.duplicates,
        r[1].receiver.duplicates
    );
    for (i, f) in r.iter().enumerate() {
        let tl: Vec<String> = f
            .timeline
            .chunks(5)
            .map(|c| format!("{:.0}", c.iter().sum::<u64>() as f64 * 8.0 / 0.5 / 1e6))
            .collect();
        eprintln!("flow {i} Mbit/s per 0.5 s: {}", tl.join(" "));
    }
    assert!(to > from + 20, "too short an overlap");
    assert!((0.4..=0.6).contains(&share_b), "B share {share_b:.3}");
    assert!(
        ra + rb > 85e6,
        "bottleneck underused: {:.1} Mbit/s",
        (ra + rb) / 1e6
    );
}

#[test]
fn blast_leaves_room_for_tcp() {
    let mut a = FlowSpec::new(64 * MIB, 0xC);
    a.start = Duration::from_secs(0);
    let tcp_start = Duration::from_secs(1);
    let (r, tcp) = run(
        link(100, 3),
        link(100, 4),
        vec![a],
        Some(tcp_start),
        Duration::from_secs(120),
    );
    let tcp = tcp.unwrap();
    let f = &r[0];
    assert!(f.data_ok && f.exactly_once && f.rx_done.is_some());
    let to = (f.rx_done.unwrap().as_millis() / 100) as usize;
    let (from, to) = (30, to);
    let (rb, rt) = (rate(&f.timeline, from, to), rate(&tcp.timeline, from, to));
    eprintln!(
        "{:.1}-{:.1} s: blast {:.1} Mbit/s, TCP {:.1} Mbit/s (TCP share {:.3}); blast backoffs d{} l{}",
        from as f64 / 10.0,
        to as f64 / 10.0,
        rb / 1e6,
        rt / 1e6,
        rt / (rb + rt),
        f.rate.delay_backoffs,
        f.rate.loss_backoffs
    );
    let tl: Vec<String> = tcp
        .timeline
        .chunks(5)
        .map(|c| format!("{:.0}", c.iter().sum::<u64>() as f64 * 8.0 / 0.5 / 1e6))
        .collect();
    eprintln!("tcp Mbit/s per 0.5 s: {}", tl.join(" "));
    let tl: Vec<String> = f
        .timeline
        .chunks(5)
        .map(|c| format!("{:.0}", c.iter().sum::<u64>() as f64 * 8.0 / 0.5 / 1e6))
        .collect();
    eprintln!("blast Mbit/s per 0.5 s: {}", tl.join(" "));
    assert!(
        rt >= 0.4 * (rb + rt),
        "TCP got only {:.1}%",
        100.0 * rt / (rb + rt)
    );
}

/// More sharing scenarios (about 15 s in a debug build): `cargo test -p drsftp-blast --test netem_sharing --
/// --ignored --nocapture`.
#[test]
#[ignore]
fn sharing_variants() {
    use drsftp_netem::LossModel;
    for (stagger, loss, rtt) in [
        (0u64, 0.0, 100u64),
        (1, 0.01, 100),
        (3, 0.0, 100),
        (1, 0.0, 40),
        (1, 0.0, 200),
    ] {
        let a = FlowSpec::new(64 * MIB, 0xA1);
        let mut b = FlowSpec::new(64 * MIB, 0xB2);
        b.start = Duration::from_secs(stagger);
        let l = |s| {
            link(rtt, s).with_loss(if loss > 0.0 {
                LossModel::Bernoulli { p: loss }
            } else {
                LossModel::None
            })
        };
        let (r, _) = run(l(5), l(6), vec![a, b], None, Duration::from_secs(120));
        let first_end = r[0]
            .rx_done
            .unwrap()
            .min(r[1].rx_done.unwrap() + Duration::from_secs(stagger));
        let (from, to) = (
            (stagger * 10 + 20) as usize,
            (first_end.as_millis() / 100) as usize,
        );
        let (ra, rb) = (
            rate(&r[0].timeline, from, to),
            rate(&r[1].timeline, from, to),
        );
        let share_b = rb / (ra + rb);
        eprintln!(
            "B starts {stagger} s after A, loss {loss}, rtt {rtt} ms: {:.1}-{:.1} s A {:.1} B {:.1} Mbit/s, B share {share_b:.3}, total {:.1}",
            from as f64 / 10.0,
            to as f64 / 10.0,
            ra / 1e6,
            rb / 1e6,
            (ra + rb) / 1e6
        );
        assert!((0.4..=0.6).contains(&share_b));
    }
}
