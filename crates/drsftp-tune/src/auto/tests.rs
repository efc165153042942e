//! Unit tests of the `-p auto` controller's configuration and probe rules.

use super::*;

/// The eager configuration of the integration tests ([`AutoConfig::eager`]: min_gain = min_marginal = -1, no back-off): every probe
/// is kept whatever the samples say, so the controller only ever adds streams up to `max_streams`.
#[test]
fn negative_min_marginal_never_reverts_a_probe() {
    let cfg = AutoConfig {
        headroom_growth: 4,
        ..AutoConfig::eager(4)
    };
    let t0 = Instant::now();
    let mut a = AutoStreams::new(t0, 1, cfg);
    // High, then collapsing throughput (a starved host, or the tail of a transfer): 100, 100, 10, 0, 0 MB/s.
    let mut actions = vec![];
    for (i, tp) in [100e6, 100e6, 10e6, 0.0, 0.0, 0.0].into_iter().enumerate() {
        a.handle_sample(t0 + Duration::from_millis(25 * (i as u64 + 1)), tp);
        actions.extend(std::iter::from_fn(|| a.poll_action()));
    }
    assert_eq!(actions, vec![StreamAction::Add(1); 3], "{a:?}");
    assert_eq!(a.streams(), 4);
    assert!(a.is_steady());
}

/// With the rule on, the same drop after a probe reverts it.
#[test]
fn positive_min_marginal_reverts_a_probe_that_lost_throughput() {
    let cfg = AutoConfig {
        min_gain: -1.0,
        samples: 1,
        settle: Duration::from_millis(20),
        ..AutoConfig::default()
    };
    let t0 = Instant::now();
    let mut a = AutoStreams::new(t0, 1, cfg);
    a.handle_sample(t0 + Duration::from_millis(25), 100e6);
    assert_eq!(a.poll_action(), Some(StreamAction::Add(1)));
    a.handle_sample(t0 + Duration::from_millis(50), 10e6);
    assert_eq!(a.poll_action(), Some(StreamAction::Retire(1)));
}

#[test]
fn settle_and_window_follow_the_rtt_within_caps() {
    let i = Duration::from_millis(250);
    let d = AutoConfig::default();
    // Loopback: unchanged but for the recorded RTT (the first settle keeps the 1 s floor).
    let rtt = Duration::from_micros(50);
    assert_eq!(
        d.clone().scaled_to_rtt(rtt, i),
        AutoConfig {
            path_rtt: Some(rtt),
            ..d.clone()
        }
    );
    // 100 ms: settle 2 s (1 s after a headroom step, 2 s before the first measurement, 1 s if it shows
    // random loss), window 1 s (4 samples).
    let c = d.clone().scaled_to_rtt(Duration::from_millis(100), i);
    assert_eq!(
        (
            c.settle,
            c.headroom_settle,
            c.first_settle,
            c.loss_settle,
            c.samples
        ),
        (
            Duration::from_secs(2),
            Duration::from_secs(1),
            Duration::from_secs(2),
            Duration::from_secs(1),
            4
        )
    );
    // 20 ms: 20 RTTs before the first measurement, without the 1 s floor of the others (10 if it shows
    // random loss).
    let c = d.clone().scaled_to_rtt(Duration::from_millis(20), i);
    assert_eq!(
        (c.settle, c.first_settle, c.loss_settle),
        (
            Duration::from_secs(1),
            Duration::from_millis(400),
            Duration::from_millis(200)
        )
    );
    // A bogus 10 s RTT: capped.
    let c = d.scaled_to_rtt(Duration::from_secs(10), i);
    assert_eq!(
        (c.settle, c.headroom_settle, c.samples),
        (Duration::from_secs(5), Duration::from_millis(2500), 40)
    );
}
