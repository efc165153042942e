//! Tests of the blast rate controller in the parent module, in virtual time.
use super::*;

const WIRE: usize = 1500;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Feed a fluid sample: 64 transmissions passed the bottleneck at `rate` bit/s, a fraction `loss` of them lost
/// after it; they left the sender at `send_rate`.
fn feed(
    c: &mut RateController,
    now: Instant,
    tx: &mut u64,
    rate: f64,
    loss: f64,
    rtt: Duration,
    send_rate: f64,
) {
    let n = 64u32;
    let rx_us = (n as f64 * WIRE as f64 * 8.0 / rate * 1e6) as u32;
    let send_us = (n as f64 * WIRE as f64 * 8.0 / send_rate * 1e6) as u32;
    *tx += n as u64;
    c.on_ack(
        now,
        &AckInput {
            rtt: Some(rtt),
            sample: Some(IntervalSample {
                tx: n,
                pkts: (n as f64 * (1.0 - loss)).round() as u32,
                rx_us,
                send_us,
            }),
            largest_tx: *tx,
            next_tx: *tx + (send_rate * rtt.as_secs_f64() / 12_000.0) as u64,
            inflight: (send_rate * rtt.as_secs_f64() / 12_000.0) as u64,
            app_limited: false,
        },
    );
}

#[test]
fn train_sample_exits_startup_at_capacity() {
    let t0 = Instant::now();
    let mut c = RateController::new(RateConfig::default(), WIRE);
    assert_eq!(c.pacing_rate_bps(), 10e6);
    // A back-to-back train arrives at 100 Mbit/s spacing.
    c.on_ack(
        t0 + ms(104),
        &AckInput {
            rtt: Some(ms(104)),
            sample: Some(IntervalSample {
                tx: 31,
                pkts: 31,
                rx_us: 3720,
                send_us: 0,
            }),
            largest_tx: 31,
            next_tx: 100,
            inflight: 60,
            app_limited: false,
        },
    );
    assert_eq!(c.phase(), Phase::ProbeBw); // through Drain: nothing to drain yet
    assert!((c.bw_bps() - 100e6).abs() < 1e6, "{}", c.bw_bps());
}

#[test]
fn random_loss_does_not_cut_rate_but_queueing_delay_does() {
    let t0 = Instant::now();
    let mut c = RateController::new(RateConfig::default(), WIRE);
    let mut tx = 0;
    let mut now = t0;
    // 100 Mbit/s bottleneck, 5 % random loss, no queue: 60 rounds.
    for _ in 0..60 * 14 {
        now += ms(7);
        let pace = c.pacing_rate_bps();
        let through = pace.min(100e6);
        feed(&mut c, now, &mut tx, through, 0.05, ms(100), pace);
    }
    assert_eq!(c.stats().delay_backoffs + c.stats().loss_backoffs, 0);
    assert!((c.loss_rate() - 0.05).abs() < 0.02, "{}", c.loss_rate());
    assert!(c.bw_bps() > 97e6 && c.bw_bps() < 110e6, "{}", c.bw_bps());
    // Now a standing queue: every RTT sample is 150 ms.
    let before = c.bw_bps();
    for _ in 0..10 * 14 {
        now += ms(7);
        let pace = c.pacing_rate_bps();
        feed(&mut c, now, &mut tx, pace.min(100e6), 0.05, ms(150), pace);
    }
    assert!(c.stats().delay_backoffs >= 3);
    assert!(c.bw_bps() < before * 0.75, "{} vs {before}", c.bw_bps());
    // The floor holds.
    assert!(c.pacing_rate_bps() >= 1e6);
}

#[test]
fn max_rate_caps() {
    let cfg = RateConfig {
        max_rate_bps: 5_000_000,
        ..Default::default()
    };
    let c = RateController::new(cfg, WIRE);
    assert_eq!(c.pacing_rate_bps(), 5e6);
}

#[test]
fn pacer_spacing_and_burst_credit() {
    let t0 = Instant::now();
    let mut p = Pacer::new(t0);
    assert!(p.ready(t0));
    // 1500 B at 12 Mbit/s = 1 ms per packet.
    p.on_send(t0, 1500, 12e6, 0);
    assert_eq!(p.next_at(), t0 + ms(1));
    assert!(!p.ready(t0));
    // After a long idle, credit is limited to the burst.
    let later = t0 + ms(100);
    for _ in 0..5 {
        assert!(p.ready(later));
        p.on_send(later, 1500, 12e6, 4 * 1500);
    }
    assert!(!p.ready(later));
}
