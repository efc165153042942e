//! `-p auto` with its upward probes held by the driver (`AutoStreams::hold_growth`), on a virtual clock: an upload
//! watched by `--transport auto` keeps its starting streams until the transport rule's first verdict.

use std::time::{Duration, Instant};

use drsftp_tune::{AutoConfig, AutoStreams, PathSample, StreamAction};

/// The lab path of issue 22's CI finding: 100 Mbit/s, 50 ms, 1 % random loss. Each stream is loss-limited to
/// 2 Mbit/s until the streams fill the link; then the RTT shows a standing queue (70 ms against 50).
fn lossy_50ms(p: u32) -> (f64, u64) {
    let rate = (2e6 * p as f64).min(95e6) / 8.0;
    let rtt_us = if 2e6 * p as f64 >= 95e6 {
        70_000
    } else {
        51_000
    };
    (rate, rtt_us)
}

/// Feeds 250 ms periods for `secs` from 5 streams, with growth held until `release_ms` (never: `None`). Returns
/// the actions with their times (ms) and the streams at the end.
fn drive(secs: u64, release_ms: Option<u128>) -> (Vec<(StreamAction, u128)>, u32) {
    let cfg =
        AutoConfig::default().scaled_to_rtt(Duration::from_millis(50), Duration::from_millis(250));
    let t0 = Instant::now();
    let mut now = t0;
    let mut ctl = AutoStreams::new(now, 5, cfg);
    let mut seen = vec![];
    for _ in 0..secs * 4 {
        now += Duration::from_millis(250);
        let ms = (now - t0).as_millis();
        ctl.hold_growth(now, release_ms.is_none_or(|r| ms < r));
        let (rate, rtt_us) = lossy_50ms(ctl.streams());
        ctl.handle_path(
            now,
            PathSample {
                sent: 1_000_000,
                retrans: 10_000,
                rtt_us,
                min_rtt_us: 50_000,
                mss: 1448,
            },
        );
        ctl.handle_sample(now, rate);
        seen.extend(std::iter::from_fn(|| ctl.poll_action()).map(|a| (a, ms)));
    }
    (seen, ctl.streams())
}

#[test]
fn held_growth_keeps_the_starting_streams_and_the_release_probes_at_once() {
    // Unheld, the loss-limited steps grow 5 streams to 64 within ~2 s (then cut back to where they fill the
    // link): the standing queue that the transport rule then sees is the transfer's own.
    let (free, p) = drive(10, Some(0));
    assert_eq!(
        &free[..2],
        &[(StreamAction::Add(15), 1000), (StreamAction::Add(44), 2000)]
    );
    assert!((48..=64).contains(&p), "{free:?}");
    // Held for 3 s (the rule's first verdict at 50 ms: 2 s warm-up, ~3 s window): no stream is added before the
    // release; the measurement taken meanwhile starts the same step in the release's own period, with no fresh
    // measurement in between.
    let (held, p) = drive(10, Some(3000));
    assert_eq!(held.first().map(|a| a.1), Some(3000), "{held:?}");
    assert_eq!(
        held.first().map(|a| a.0),
        Some(StreamAction::Add(15)),
        "{held:?}"
    );
    assert!((48..=64).contains(&p), "{held:?}");
    // Never released: the starting streams for good, and nothing is retired either (random loss, no queue).
    let (never, p) = drive(40, None);
    assert!(never.is_empty(), "{never:?}");
    assert_eq!(p, 5);
}

#[test]
fn a_hold_does_not_stop_a_back_off() {
    // 4 streams holding 80 Mbit/s (20 each, no loss, no queue), steady; a competitor takes half from 40 s on:
    // the per-stream drop retires streams whether or not growth is held.
    let cfg =
        AutoConfig::default().scaled_to_rtt(Duration::from_millis(50), Duration::from_millis(250));
    let t0 = Instant::now();
    let mut now = t0;
    let mut ctl = AutoStreams::new(now, 4, cfg);
    let mut retired = false;
    for _ in 0..60 * 4 {
        now += Duration::from_millis(250);
        ctl.hold_growth(now, true);
        let share = if now - t0 >= Duration::from_secs(40) {
            0.5
        } else {
            1.0
        };
        ctl.handle_path(
            now,
            PathSample {
                sent: 1_000_000,
                retrans: 0,
                rtt_us: 70_000,
                min_rtt_us: 50_000,
                mss: 1448,
            },
        );
        ctl.handle_sample(now, 80e6 / 8.0 * share);
        while let Some(a) = ctl.poll_action() {
            assert!(matches!(a, StreamAction::Retire(_)), "{a:?}");
            retired = true;
        }
    }
    assert!(retired);
    assert!(ctl.streams() < 4);
}
