//! Tests of the DRS estimator and sender in the parent module, on a virtual clock.
use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn drain(r: &mut DrsReceiver) -> Vec<DrsAction> {
    std::iter::from_fn(|| r.poll_action()).collect()
}

#[test]
fn first_action_is_a_probe_announcing_the_buffer() {
    let t0 = Instant::now();
    let mut r = DrsReceiver::new(t0, DrsConfig::default());
    assert_eq!(
        drain(&mut r),
        vec![DrsAction::SendSbufProbe {
            id: 1,
            size: 256 * 1024
        }]
    );
    r.handle_sbuf_echo(t0 + ms(80), 1);
    assert_eq!(r.rtt(), ms(80));
    assert_eq!(r.rtt_source(), RttSource::SbufEcho);
    // Wrong id is ignored.
    r.handle_sbuf_echo(t0 + ms(90), 7);
    assert_eq!(r.rtt(), ms(80));
}

#[test]
fn window_limited_flow_doubles_buffer_each_interval() {
    let t0 = Instant::now();
    let cfg = DrsConfig {
        probes: false,
        initial_rtt: ms(100),
        ..DrsConfig::default()
    };
    let mut r = DrsReceiver::new(t0, cfg);
    let mut t = t0;
    let mut sizes = vec![];
    for _ in 0..5 {
        // Sender fills exactly the advertised window each RTT.
        let w = r.buffer();
        for k in 0..10 {
            r.handle_bytes(t + ms(10 * k), w / 10);
        }
        t += ms(100);
        r.handle_timeout(t);
        sizes.push(r.buffer());
    }
    for w in sizes.windows(2) {
        assert!(w[1] >= 2 * w[0] * 9 / 10, "{sizes:?}");
    }
}

#[test]
fn ramp_uses_gain_two_then_the_steady_gain() {
    let t0 = Instant::now();
    let cfg = DrsConfig {
        probes: false,
        initial_rtt: ms(100),
        initial_buf: 64 << 10,
        gain: 2.0,
        steady_gain: 1.5,
        ..DrsConfig::default()
    };
    let mut r = DrsReceiver::new(t0, cfg);
    let mut t = t0;
    let path = 1u64 << 20; // the path carries 1 MiB per RTT
    let mut flight = 64u64 << 10;
    let mut log = vec![];
    for round in 0..30 {
        // Slow start: the sender doubles every RTT, up to what the window and the path allow.
        let sent = flight.min(r.buffer()).min(path);
        for k in 0..10 {
            r.handle_bytes(t + ms(10 * k), sent / 10);
        }
        t += ms(100);
        r.handle_timeout(t);
        log.push((round, sent, r.buffer(), r.ramping()));
        flight = sent * 2;
    }
    // While the flight doubles, the window is 2x the last sample: the sender is never held below its doubling.
    let ramp: Vec<_> = log.iter().filter(|e| e.3).collect();
    assert!(ramp.len() >= 4, "{log:?}");
    for e in &ramp[1..] {
        assert!(e.2 >= 2 * e.1 * 9 / 10, "{log:?}");
    }
    // Once the path is full the ramp is over and the window settles at 1.5x the BDP, not 2x.
    let (_, sent, buf, ramping) = *log.last().unwrap();
    assert!(!ramping && sent == path, "{log:?}");
    assert!(
        buf >= path * 3 / 2 * 9 / 10 && buf <= path * 3 / 2 * 11 / 10,
        "{log:?}"
    );
}

/// Slow start past a full pipe: 1 MiB per 100 ms base RTT and room to queue 3 MiB more. Once the flight
/// exceeds the pipe only the RTT grows (the queue fills). Returns (flight sent, window after the round,
/// ramping) per round.
fn slow_start_into_a_queue(bdp_min_rtt: bool) -> Vec<(u64, u64, bool)> {
    let t0 = Instant::now();
    let cfg = DrsConfig {
        probes: false,
        initial_rtt: ms(100),
        initial_buf: 64 << 10,
        bdp_min_rtt,
        ..DrsConfig::default()
    };
    let mut r = DrsReceiver::new(t0, cfg);
    let rate = (1u64 << 20) as f64 / 0.1; // bytes per second at the bottleneck
    let (mut t, mut flight, mut log) = (t0, 64u64 << 10, vec![]);
    for _ in 0..9 {
        let sent = flight.min(r.buffer()).min(4 << 20);
        let rtt = Duration::from_secs_f64((sent as f64 / rate).max(0.1));
        let info = TcpSample {
            rcv_rtt: rtt,
            ..TcpSample::default()
        };
        r.handle_tcp_info(t, &info);
        for k in 0..10 {
            r.handle_bytes(t + rtt * k / 10, sent / 10);
        }
        t += rtt;
        r.handle_timeout(t);
        log.push((sent, r.buffer(), r.ramping()));
        flight = sent * 2;
    }
    log
}

#[test]
fn the_ramp_is_sized_from_the_minimum_rtt() {
    let pipe = 1u64 << 20;
    let log = slow_start_into_a_queue(true);
    // While the flight is below the pipe the sender is never held below its doubling...
    let below: Vec<_> = log.iter().filter(|e| e.0 < pipe).collect();
    assert!(below.len() >= 3, "{log:?}");
    for e in &below {
        assert!(e.2 && e.1 >= 2 * e.0 * 9 / 10, "{log:?}");
    }
    // ...and once it fills the queue the window stays at 2x the base-RTT BDP: the queue is not counted as path.
    assert!(log.iter().all(|e| e.1 <= 2 * pipe * 11 / 10), "{log:?}");
    assert!(
        !log.last().unwrap().2,
        "the ramp ends once the pipe is full: {log:?}"
    );
    // Sized from the RTT it reads, the ramp doubled the flight into the queue: 2x the flight, 4x the pipe and more.
    let inflated = slow_start_into_a_queue(false);
    assert!(inflated.iter().any(|e| e.1 >= 4 * pipe), "{inflated:?}");
}

#[test]
fn a_window_limited_sender_still_grows_after_the_ramp() {
    let t0 = Instant::now();
    let cfg = DrsConfig {
        probes: false,
        initial_rtt: ms(100),
        steady_gain: 1.5,
        ..DrsConfig::default()
    };
    let mut r = DrsReceiver::new(t0, cfg);
    let mut t = t0;
    let mut feed = |r: &mut DrsReceiver, bytes: u64| {
        for k in 0..10 {
            r.handle_bytes(t + ms(10 * k), bytes / 10);
        }
        t += ms(100);
        r.handle_timeout(t);
    };
    // A flat 200 KB per RTT ends the ramp.
    for _ in 0..4 {
        feed(&mut r, 200_000);
    }
    assert!(!r.ramping());
    // Then the sender fills whatever window it gets (the path opened up): >= 1.5x per interval.
    let mut sizes = vec![r.buffer()];
    for _ in 0..4 {
        let w = r.buffer();
        feed(&mut r, w);
        sizes.push(r.buffer());
    }
    for w in sizes.windows(2) {
        assert!(w[1] as f64 >= w[0] as f64 * 1.5 * 0.9, "{sizes:?}");
    }
}

#[test]
fn shrinks_slowly_after_sustained_low_samples() {
    let t0 = Instant::now();
    let cfg = DrsConfig {
        probes: false,
        initial_buf: 8 << 20,
        initial_rtt: ms(50),
        ..DrsConfig::default()
    };
    let mut r = DrsReceiver::new(t0, cfg.clone());
    let mut t = t0;
    let mut bufs = vec![];
    for _ in 0..80 {
        r.handle_bytes(t, 100_000);
        t += ms(50);
        r.handle_timeout(t);
        bufs.push(r.buffer());
    }
    // No shrink before `shrink_after` samples, then at most `1 - shrink_factor` per step, converging to the
    // steady gain (the flat samples ended the ramp) x 100 KB. The hysteresis lets every such step through.
    assert!(cfg.hysteresis < 1.0 - cfg.shrink_factor);
    assert!(
        bufs[..cfg.shrink_after - 1].iter().all(|&b| b == 8 << 20),
        "{bufs:?}"
    );
    for w in bufs.windows(2) {
        assert!(
            w[1] as f64 >= w[0] as f64 * cfg.shrink_factor - 1.0,
            "{bufs:?}"
        );
    }
    // It stops inside the hysteresis band above the target: a smaller step is not worth a setsockopt.
    let (last, want) = (*bufs.last().unwrap() as f64, 100_000.0 * cfg.steady_gain);
    assert!(
        last >= want && last <= want / (1.0 - cfg.hysteresis),
        "{bufs:?}"
    );
}

#[test]
fn many_parallel_streams_shrink_sooner_and_faster() {
    // The same 8 MB window over 100 KB per RTT, with 1 and with 16 streams in the transfer.
    let run = |streams: u64| {
        let t0 = Instant::now();
        let cfg = DrsConfig {
            probes: false,
            initial_buf: 8 << 20,
            initial_rtt: ms(50),
            ..DrsConfig::default()
        };
        let mut r = DrsReceiver::new(t0, cfg);
        r.set_transfer(streams, 0, None);
        let mut t = t0;
        (0..80)
            .map(|_| {
                r.handle_bytes(t, 100_000);
                t += ms(50);
                r.handle_timeout(t);
                r.buffer()
            })
            .collect::<Vec<_>>()
    };
    let (one, many) = (run(1), run(16));
    let c = DrsConfig::default();
    let first_shrink = |b: &[u64]| b.iter().position(|&x| x < 8 << 20).unwrap();
    assert!(c.parallel_from <= 16 && c.parallel_shrink_after < c.shrink_after);
    assert_eq!(first_shrink(&one), c.shrink_after - 1, "{one:?}");
    assert_eq!(first_shrink(&many), c.parallel_shrink_after - 1, "{many:?}");
    let i = first_shrink(&many);
    assert_eq!(
        many[i],
        ((8 << 20) as f64 * c.parallel_shrink_factor) as u64
    );
    // Both settle on the same target (steady gain x 100 KB), the parallel one ~3x sooner.
    let target = 100_000.0 * c.steady_gain / (1.0 - c.hysteresis);
    let settled = |b: &[u64]| b.iter().position(|&x| x as f64 <= target).unwrap();
    assert!(settled(&many) * 2 < settled(&one), "{one:?} {many:?}");
    assert!(*many.last().unwrap() as f64 >= 100_000.0 * c.steady_gain);
    // Below `parallel_from` streams nothing changes.
    assert_eq!(run(c.parallel_from - 1), one);
}

#[test]
fn many_streams_share_twice_the_transfers_bdp() {
    // A stream in slow start (its flight doubles every 40 ms interval) among `n` streams of a transfer that
    // peaked at 125 MB/s (1 Gbit/s) over a 40 ms path: at most 2 x 5 MB / n each.
    let run = |n: u64, rate: u64| {
        let t0 = Instant::now();
        let cfg = DrsConfig {
            probes: false,
            initial_buf: 64 << 10,
            ..DrsConfig::default()
        };
        let mut r = DrsReceiver::new(t0, cfg);
        r.set_transfer(n, rate, None);
        let info = TcpSample {
            rcv_rtt: ms(40),
            ..TcpSample::default()
        };
        let (mut t, mut flight) = (t0, 32_000u64);
        let mut top = 0;
        for _ in 0..12 {
            r.handle_tcp_info(t, &info);
            r.handle_bytes(t + ms(1), flight.min(r.buffer()));
            t += ms(40);
            flight *= 2;
            top = top.max(r.buffer());
        }
        r.handle_tcp_info(t, &info);
        (top, r.share_cap())
    };
    let c = DrsConfig::default();
    let (top, cap) = run(16, 125_000_000);
    let want = (c.share_gain * 125e6 * 0.040 / 16.0) as u64;
    assert_eq!(cap, Some(want));
    assert!(
        top <= want && top as f64 > want as f64 * 0.9,
        "{top} vs {want}"
    );
    // Without the transfer's rate, or with fewer streams than `parallel_from`, a stream sizes alone.
    let (alone, cap) = run(16, 0);
    assert_eq!(cap, None);
    assert!(alone > 4 * want, "{alone}");
    assert_eq!(run(c.parallel_from - 1, 125_000_000), (alone, None));
}

#[test]
fn the_share_uses_the_paths_minimum_rtt() {
    // A stream that joined a full path sees 33 ms (20 ms of path, 13 of queue); the transfer's first streams saw
    // 20 ms. Its share is sized on 20 ms; a higher "path" RTT than its own changes nothing.
    let c = DrsConfig::default();
    let t0 = Instant::now();
    let mut r = DrsReceiver::new(
        t0,
        DrsConfig {
            probes: false,
            ..DrsConfig::default()
        },
    );
    let info = TcpSample {
        rcv_rtt: ms(33),
        ..TcpSample::default()
    };
    r.handle_tcp_info(t0, &info);
    assert_eq!(r.min_rtt(), Some(ms(33)));
    let share = |rtt: f64| (c.share_gain * 108e6 * rtt / 64.0) as u64;
    r.set_transfer(64, 108_000_000, Some(ms(20)));
    assert_eq!(r.share_cap(), Some(share(0.020)));
    r.set_transfer(64, 108_000_000, Some(ms(50)));
    assert_eq!(r.share_cap(), Some(share(0.033)));
    r.set_transfer(64, 108_000_000, None);
    assert_eq!(r.share_cap(), Some(share(0.033)));
}

#[test]
fn tcp_info_rtt_is_preferred_over_echo() {
    let t0 = Instant::now();
    let mut r = DrsReceiver::new(t0, DrsConfig::default());
    drain(&mut r);
    let s = TcpSample {
        rcv_rtt: ms(40),
        ..TcpSample::default()
    };
    r.handle_tcp_info(t0 + ms(5), &s);
    assert_eq!((r.rtt(), r.rtt_source()), (ms(40), RttSource::TcpInfo));
    r.handle_sbuf_echo(t0 + ms(150), 1); // app-level echo, 150 ms: ignored while TCP_INFO is fresh
    assert_eq!(r.rtt(), ms(40));
}

#[test]
fn min_rtt_bdp_ignores_standing_queue() {
    // 10 MB/s path, 100 ms base RTT; the sender's queue raises the RTT to 170 ms.
    let run = |min_rtt: bool| {
        let t0 = Instant::now();
        let cfg = DrsConfig {
            probes: false,
            bdp_min_rtt: min_rtt,
            initial_buf: 1 << 20,
            steady_gain: 2.0,
            ..DrsConfig::default()
        };
        let mut r = DrsReceiver::new(t0, cfg);
        let mut t = t0;
        r.handle_tcp_info(
            t,
            &TcpSample {
                rcv_rtt: ms(100),
                ..TcpSample::default()
            },
        );
        for _ in 0..20 {
            r.handle_tcp_info(
                t,
                &TcpSample {
                    rcv_rtt: ms(170),
                    ..TcpSample::default()
                },
            );
            for _ in 0..10 {
                t += ms(17);
                r.handle_bytes(t, 170_000);
            }
        }
        r.buffer()
    };
    let smoothed = run(false);
    let min = run(true);
    assert!(
        smoothed >= 2_900_000,
        "2 x 10 MB/s x ~150-170 ms: {smoothed}"
    );
    // An interval of one RTT (170 ms, as read) closes on the read that ends it, before counting it: 9 of the
    // 10 reads of 17 ms, so the sample is 0.9 of the rate.
    assert!(
        (1_750_000..=2_200_000).contains(&min),
        "2 x 10 MB/s x 100 ms: {min}"
    );
}

#[test]
fn sender_bounds_send_buffer() {
    let t0 = Instant::now();
    let mut s = DrsSender::new(128 * 1024, 64 * 1024, 4 << 20);
    s.handle_tcp_info(
        t0,
        &TcpSample {
            cwnd_bytes: 1 << 20,
            ..TcpSample::default()
        },
    );
    s.handle_sbuf_request(t0, 3, 512 * 1024); // below cwnd: floor at cwnd
    assert_eq!(s.poll_action(), Some(DrsAction::SetSendBuf(1 << 20)));
    assert_eq!(
        s.poll_action(),
        Some(DrsAction::SbufReply {
            id: 3,
            size: 1 << 20
        })
    );
    s.handle_sbuf_request(t0, 4, 64 << 20); // above the cap
    assert_eq!(s.poll_action(), Some(DrsAction::SetSendBuf(4 << 20)));
    assert_eq!(
        s.poll_action(),
        Some(DrsAction::SbufReply {
            id: 4,
            size: 4 << 20
        })
    );
    s.handle_sbuf_request(t0, 5, 64 << 20); // unchanged: reply only
    assert_eq!(
        s.poll_action(),
        Some(DrsAction::SbufReply {
            id: 5,
            size: 4 << 20
        })
    );
    assert_eq!(s.poll_action(), None);
}

#[test]
fn window_bounds_follow_seed_002() {
    // One RTT measured with a 10 ms timer: window between bytes/3 and bytes.
    let b = window_bounds(300_000, ms(110), ms(100), ms(10));
    assert_eq!(b.upper, Some(300_000));
    assert_eq!(b.lower, 100_000);
    // Shorter than an RTT: only a lower bound, the bytes themselves.
    let b = window_bounds(50_000, ms(40), ms(100), ms(0));
    assert_eq!(
        b,
        WindowBounds {
            lower: 50_000,
            upper: None
        }
    );
    // Ten RTTs: tight.
    let b = window_bounds(1_000_000, ms(1000), ms(100), ms(0));
    assert_eq!((b.lower, b.upper), (90_910, Some(100_000)));
}
