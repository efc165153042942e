//! Virtual-clock tests of the link model: exact timing, queue bound, loss statistics, determinism, profiles.

use std::time::{Duration, Instant};

use drsftp_netem::*;
use proptest::prelude::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Drain everything from `link`, jumping the virtual clock to each timeout; returns (packet, time) in order.
fn drain<T: Clone>(link: &mut Link<T>) -> Vec<(T, Instant)> {
    let mut out = Vec::new();
    while let Some(t) = link.poll_timeout() {
        while let Some(p) = link.poll_deliver(t) {
            out.push((p, t));
        }
    }
    out
}

#[test]
fn delivery_is_exactly_serialisation_plus_delay() {
    let t0 = Instant::now();
    // 1500 B at 12 Mbit/s = 1 ms per packet; 40 ms one way.
    let mut l: Link<u32> = Link::new(
        LinkConfig::new(ms(40), 12_000_000).with_queue(QueueLimit::Unlimited),
        t0,
    );
    for i in 0..10u32 {
        let v = l.handle_send(t0, 1500, i);
        assert_eq!(
            v,
            Verdict::Queued {
                deliver_at: t0 + ms(40) + ms(i as u64 + 1)
            }
        );
    }
    // After an idle period the serialiser starts at `now` again.
    let later = t0 + ms(500);
    assert_eq!(
        l.handle_send(later, 750, 99),
        Verdict::Queued {
            deliver_at: later + ms(40) + Duration::from_micros(500)
        }
    );
    let got = drain(&mut l);
    let ids: Vec<u32> = got.iter().map(|g| g.0).collect();
    assert_eq!(ids, vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 99]);
    assert_eq!(got[0].1, t0 + ms(41));
    assert_eq!(got[9].1, t0 + ms(50));
    assert!(l.poll_deliver(t0 + ms(10_000)).is_none());
    let s = l.stats();
    assert_eq!(
        (s.sent_pkts, s.delivered_pkts, s.delivered_bytes),
        (11, 11, 15_750)
    );
}

#[test]
fn long_run_rate_is_exact_with_fractional_nanoseconds() {
    let t0 = Instant::now();
    let rate = 28_500_000; // 1500 B -> 421052.63 ns, not an integer
    let mut l: Link<()> = Link::new(
        LinkConfig::new(ms(0), rate).with_queue(QueueLimit::Unlimited),
        t0,
    );
    let n = 100_000u64;
    let mut last = t0;
    for _ in 0..n {
        if let Verdict::Queued { deliver_at } = l.handle_send(t0, 1500, ()) {
            last = deliver_at;
        }
    }
    let ideal_ns = (n as u128 * 1500 * 8 * 1_000_000_000) / rate as u128;
    let got_ns = (last - t0).as_nanos();
    assert!(got_ns.abs_diff(ideal_ns) <= 1, "{got_ns} vs {ideal_ns}");
}

#[test]
fn drop_tail_queue_at_one_bdp() {
    let t0 = Instant::now();
    // 8 Mbit/s, 10 ms one way -> RTT 20 ms, BDP = 20_000 B.
    let cfg = LinkConfig::new(ms(10), 8_000_000).with_queue(QueueLimit::Bdp(1.0));
    assert_eq!(cfg.queue.bytes(cfg.rate_bps, cfg.delay), Some(65_536)); // floored at 64 KiB
    let cfg = cfg.with_queue(QueueLimit::Bytes(20_000));
    let mut l: Link<u32> = Link::new(cfg, t0);
    let verdicts: Vec<Verdict> = (0..20).map(|i| l.handle_send(t0, 1000, i)).collect();
    assert!(
        verdicts[..20]
            .iter()
            .take(20)
            .filter(|v| v.is_queued())
            .count()
            == 20
    );
    assert_eq!(l.handle_send(t0, 1000, 21), Verdict::DroppedQueue);
    // After 1 ms one packet (1000 B at 8 Mbit/s) has left the serialiser: room for exactly one more.
    assert!(l.handle_send(t0 + ms(1), 1000, 22).is_queued());
    assert_eq!(l.handle_send(t0 + ms(1), 1000, 23), Verdict::DroppedQueue);
    assert_eq!(l.stats().dropped_queue_pkts, 2);
    assert_eq!(l.stats().max_backlog_bytes, 20_000);
}

fn loss_fraction(loss: LossModel, n: usize, seed: u64) -> f64 {
    let t0 = Instant::now();
    let mut l: Link<()> = Link::new(LinkConfig::default().with_loss(loss).with_seed(seed), t0);
    for _ in 0..n {
        l.handle_send(t0, 100, ());
    }
    assert_eq!(l.stats().dropped_queue_pkts, 0);
    l.stats().dropped_loss_pkts as f64 / n as f64
}

#[test]
fn bernoulli_loss_within_three_sigma() {
    let n = 200_000;
    for &p in &[0.001, 0.01, 0.05] {
        let f = loss_fraction(LossModel::Bernoulli { p }, n, 42);
        let sigma = (p * (1.0 - p) / n as f64).sqrt();
        assert!(
            (f - p).abs() < 3.0 * sigma,
            "p={p} measured={f} sigma={sigma}"
        );
    }
}

#[test]
fn gilbert_elliott_mean_and_burstiness() {
    let ge = LossModel::GilbertElliott {
        p_gb: 0.005,
        p_bg: 0.2,
        loss_good: 0.0,
        loss_bad: 0.8,
    };
    let n = 400_000;
    let f = loss_fraction(ge, n, 3);
    let p = ge.mean_loss();
    // Correlated losses: allow a wider band than Bernoulli's 3 sigma (bursts of mean length 1/p_bg).
    let sigma = (p * (1.0 - p) / n as f64).sqrt() * (1.0 / 0.2f64).sqrt() * 2.0;
    assert!((f - p).abs() < 3.0 * sigma, "mean {p} measured {f}");
    // Burstiness: P(loss | previous lost) is far above the mean.
    let t0 = Instant::now();
    let mut l: Link<()> = Link::new(LinkConfig::default().with_loss(ge).with_seed(9), t0);
    let lost: Vec<bool> = (0..n)
        .map(|_| !l.handle_send(t0, 100, ()).is_queued())
        .collect();
    let pairs = lost.windows(2).filter(|w| w[0]).count();
    let both = lost.windows(2).filter(|w| w[0] && w[1]).count();
    assert!(
        both as f64 / pairs as f64 > 5.0 * p,
        "conditional {}",
        both as f64 / pairs as f64
    );
}

#[test]
fn same_seed_same_run_different_seed_different_run() {
    let run = |seed| {
        let t0 = Instant::now();
        let cfg = LinkConfig {
            jitter: ms(3),
            reorder: 0.01,
            duplicate: 0.01,
            ..LinkConfig::new(ms(20), 50_000_000)
                .with_loss(LossModel::Bernoulli { p: 0.02 })
                .with_seed(seed)
        };
        let mut l: Link<u32> = Link::new(cfg, t0);
        let mut out = Vec::new();
        for i in 0..5000u32 {
            let now = t0 + Duration::from_micros(i as u64 * 200);
            l.handle_send(now, 1500, i);
            while let Some(p) = l.poll_deliver(now) {
                out.push((p, now - t0));
            }
        }
        out.extend(drain(&mut l).into_iter().map(|(p, t)| (p, t - t0)));
        out
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn jitter_never_reorders_but_reorder_does() {
    let t0 = Instant::now();
    let mk = |reorder| LinkConfig {
        jitter: ms(5),
        reorder,
        ..LinkConfig::new(ms(30), 100_000_000).with_seed(5)
    };
    let mut l: Link<u32> = Link::new(mk(0.0), t0);
    let mut delays = Vec::new();
    for i in 0..2000u32 {
        let now = t0 + Duration::from_micros(i as u64 * 500);
        if let Verdict::Queued { deliver_at } = l.handle_send(now, 1000, i) {
            delays.push(deliver_at - now);
        }
    }
    let ids: Vec<u32> = drain(&mut l).into_iter().map(|x| x.0).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let (min, max) = (delays.iter().min().unwrap(), delays.iter().max().unwrap());
    assert!(
        *min < ms(28) && *max > ms(33),
        "jitter spread {min:?}..{max:?}"
    );
    let mut l: Link<u32> = Link::new(mk(0.05), t0);
    for i in 0..2000u32 {
        l.handle_send(t0 + Duration::from_micros(i as u64 * 100), 1000, i);
    }
    let ids: Vec<u32> = drain(&mut l).into_iter().map(|x| x.0).collect();
    assert_eq!(ids.len(), 2000);
    assert!(
        ids.windows(2).any(|w| w[0] > w[1]),
        "expected some reordering"
    );
}

#[test]
fn duplicates_are_delivered_twice() {
    let t0 = Instant::now();
    let cfg = LinkConfig {
        duplicate: 0.1,
        ..LinkConfig::new(ms(1), 0).with_seed(11)
    };
    let mut l: Link<u32> = Link::new(cfg, t0);
    for i in 0..10_000u32 {
        l.handle_send(t0, 100, i);
    }
    let got = drain(&mut l);
    let dups = l.stats().duplicated_pkts as usize;
    assert_eq!(got.len(), 10_000 + dups);
    assert!((800..1200).contains(&dups), "{dups}");
}

#[test]
fn profile_changes_rate_and_delay_over_time() {
    let t0 = Instant::now();
    let p = Profile::parse("0s rtt=100ms rate=8mbit\n10s rtt=400ms rate=1mbit loss=0%\n").unwrap();
    let mut l: Link<()> = Link::with_profile(
        LinkConfig::default().with_queue(QueueLimit::Unlimited),
        p,
        t0,
    );
    // 1000 B at 8 Mbit/s = 1 ms; delay 50 ms.
    assert_eq!(
        l.handle_send(t0, 1000, ()),
        Verdict::Queued {
            deliver_at: t0 + ms(51)
        }
    );
    let t1 = t0 + ms(10_000);
    // 1000 B at 1 Mbit/s = 8 ms; delay 200 ms.
    assert_eq!(
        l.handle_send(t1, 1000, ()),
        Verdict::Queued {
            deliver_at: t1 + ms(208)
        }
    );
    assert_eq!(l.config().rate_bps, 1_000_000);
}

#[test]
fn builtin_profile_drives_a_link_through_its_extremes() {
    let t0 = Instant::now();
    let mut l: Link<()> =
        Link::with_profile(LinkConfig::default(), Profile::los_alamos_new_york(), t0);
    let at = |s| t0 + Duration::from_secs(s);
    l.handle_timeout(at(105)); // step 5: 0.026 Mbit/s, 475 ms
    assert_eq!(l.config().rate_bps, 26_000);
    assert_eq!(l.config().delay * 2, ms(475));
    l.handle_timeout(at(600 + 1)); // repeats: back to step 0
    assert_eq!(l.config().rate_bps, 28_500_000);
}

#[test]
fn path_carries_both_directions() {
    let t0 = Instant::now();
    let mut p: Path<&'static str> = Path::symmetric(LinkConfig::new(ms(10), 0), t0);
    p.send(t0, Side::A, 10, "ping");
    p.send(t0 + ms(1), Side::B, 10, "pong");
    assert_eq!(p.poll_timeout(), Some(t0 + ms(10)));
    assert_eq!(p.poll_deliver(t0 + ms(10), Side::B), Some("ping"));
    assert_eq!(p.poll_deliver(t0 + ms(10), Side::A), None);
    assert_eq!(p.poll_deliver(t0 + ms(11), Side::A), Some("pong"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random arrivals: the backlog never exceeds the queue limit (except a lone oversize packet), every packet is
    /// accounted for, and FIFO delivery times are exactly serialisation + delay.
    #[test]
    fn queue_bound_and_conservation(
        limit in 3_000u64..60_000,
        rate in 1_000_000u64..200_000_000,
        delay_us in 0u64..50_000,
        sends in prop::collection::vec((0u64..2_000, 40usize..9_000), 1..400),
    ) {
        let t0 = Instant::now();
        let cfg = LinkConfig::new(Duration::from_micros(delay_us), rate).with_queue(QueueLimit::Bytes(limit));
        let mut l: Link<usize> = Link::new(cfg, t0);
        let mut now = t0;
        let mut busy = t0;
        let mut carry: u128 = 0;
        let mut biggest = 0u64;
        for (gap_us, len) in sends {
            biggest = biggest.max(len as u64);
            now += Duration::from_micros(gap_us);
            let before = l.stats().dropped_queue_pkts;
            match l.handle_send(now, len, len) {
                Verdict::Queued { deliver_at } => {
                    let start = if busy > now { busy } else { carry = 0; now };
                    let num = len as u128 * 8_000_000_000 + carry;
                    carry = num % rate as u128;
                    busy = start + Duration::from_nanos((num / rate as u128) as u64);
                    prop_assert_eq!(deliver_at, busy + Duration::from_micros(delay_us));
                }
                Verdict::DroppedQueue => prop_assert_eq!(l.stats().dropped_queue_pkts, before + 1),
                Verdict::DroppedLoss => prop_assert!(false, "no loss configured"),
            }
            // Only a lone packet larger than the limit may push the backlog past it.
            prop_assert!(l.backlog_bytes() <= limit.max(biggest));
        }
        let delivered = drain(&mut l);
        let s = *l.stats();
        prop_assert_eq!(s.sent_pkts, s.delivered_pkts + s.dropped_queue_pkts);
        prop_assert_eq!(s.sent_bytes, s.delivered_bytes + s.dropped_queue_bytes);
        prop_assert_eq!(delivered.len() as u64, s.delivered_pkts);
        prop_assert!(s.max_backlog_bytes <= limit.max(9_000));
    }

    /// Determinism for any seed and loss setting.
    #[test]
    fn deterministic_for_seed(seed in any::<u64>(), p in 0.0f64..0.5) {
        let go = || {
            let t0 = Instant::now();
            let mut l: Link<u16> = Link::new(
                LinkConfig { jitter: ms(1), ..LinkConfig::new(ms(5), 10_000_000).with_loss(LossModel::Bernoulli { p }).with_seed(seed) },
                t0,
            );
            (0..300u16).map(|i| match l.handle_send(t0 + Duration::from_micros(i as u64 * 700), 1200, i) {
                Verdict::Queued { deliver_at } => Some(deliver_at - t0),
                _ => None,
            }).collect::<Vec<_>>()
        };
        prop_assert_eq!(go(), go());
    }
}
