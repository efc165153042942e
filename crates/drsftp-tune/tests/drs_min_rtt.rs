//! The DRS minimum RTT behind a standing queue, on a virtual clock: one window-limited stream (its sender's cwnd
//! never binds) over a bottleneck whose queue never overflows, so the receive window alone sets the flight and the
//! RTT is max(base RTT, flight / rate). Such a stream holds a queue of its own (RTT about `steady_gain` x the
//! minimum); re-reading the minimum there every `min_rtt_window` ratcheted the window up (issue 22, docs/drs.md).

use std::time::{Duration, Instant};

use drsftp_tune::{DrsConfig, DrsReceiver, TcpSample};

const RATE: f64 = 500e6 / 8.0;

struct Run {
    /// Per round: seconds since the start, receive buffer, delivered rate over the link rate, min RTT (ms).
    rounds: Vec<(f64, u64, f64, f64)>,
}

/// One round trip `dt` from `now`: the RTT reading first, then `flight` bytes in 10 reads with timers between.
fn round(r: &mut DrsReceiver, now: Instant, dt: Duration, flight: f64) {
    r.handle_tcp_info(
        now,
        &TcpSample {
            rcv_rtt: dt,
            ..TcpSample::default()
        },
    );
    for k in 1..=10u32 {
        let at = now + dt * k / 10;
        while let Some(to) = r.poll_timeout() {
            if to > at {
                break;
            }
            r.handle_timeout(to);
        }
        r.handle_bytes(at, (flight / 10.0) as u64);
    }
    while r.poll_action().is_some() {}
}

/// `secs` of rounds; the base RTT is `base(t)` seconds at `t` s.
fn run(cfg: DrsConfig, secs: f64, base: impl Fn(f64) -> f64) -> Run {
    let t0 = Instant::now();
    let mut r = DrsReceiver::new(t0, cfg);
    let mut now = t0;
    let mut rounds = vec![];
    loop {
        let t = now.duration_since(t0).as_secs_f64();
        if t >= secs {
            break;
        }
        let flight = r.buffer() as f64;
        let rtt = base(t).max(flight / RATE);
        let dt = Duration::from_secs_f64(rtt);
        round(&mut r, now, dt, flight);
        now += dt;
        let min = r.min_rtt().map_or(0.0, |m| m.as_secs_f64() * 1e3);
        rounds.push((t, r.buffer(), flight / rtt / RATE, min));
    }
    Run { rounds }
}

/// With the queue share, which the hold goes with.
fn cfg(hold_s: u64) -> DrsConfig {
    DrsConfig {
        probes: false,
        queue_share: 128 * 1024,
        min_rtt_hold: Duration::from_secs(hold_s),
        ..DrsConfig::default()
    }
}

fn peak(r: &Run, from: f64) -> u64 {
    r.rounds
        .iter()
        .filter(|x| x.0 >= from)
        .map(|x| x.1)
        .max()
        .unwrap()
}

#[test]
fn a_stream_behind_its_own_queue_keeps_the_minimum() {
    let bdp = RATE * 0.1;
    let held = run(cfg(60), 45.0, |_| 0.1);
    let old = run(cfg(0), 45.0, |_| 0.1);
    let (p_held, p_old) = (peak(&held, 0.0) as f64 / bdp, peak(&old, 0.0) as f64 / bdp);
    eprintln!("peak window over the BDP: held {p_held:.2}, re-read on expiry {p_old:.2}");
    // Held: the window stays at steady_gain x the BDP (its own queue, RTT 1.5x), for the whole 45 s.
    assert!(p_held <= 2.1, "held: {p_held}");
    assert!(
        held.rounds
            .iter()
            .filter(|x| x.0 >= 5.0)
            .all(|x| x.2 > 0.99),
        "the link stays full"
    );
    assert!(held.rounds.last().unwrap().3 < 101.0, "minimum kept");
    // Re-read behind the queue every 10 s: the window grew by the queue's ratio each time.
    assert!(p_old >= 3.0, "re-read: {p_old}");
}

#[test]
fn a_longer_path_is_taken_once_the_window_falls_under_it() {
    // At 20 s the path's RTT grows 1.6x, inside what the stream's own queue could explain (below
    // `min_rtt_hold_ratio`): held at 100 ms the window shrinks toward the share, and once it has halved the
    // reading is taken as the path's.
    let r = run(cfg(60), 45.0, |t| if t < 20.0 { 0.1 } else { 0.16 });
    let late: Vec<_> = r.rounds.iter().filter(|x| x.0 >= 32.0).collect();
    assert!(
        late.iter().all(|x| x.2 > 0.99 && x.3 >= 159.0),
        "re-read within 12 s of the change, the link full again: {:?}",
        &late[..3]
    );
    // Seconds below 0.9 of the link after the change: the time the window takes to halve (8 low samples, then
    // 0.9x per interval), once.
    eprintln!(
        "1.6x at 20 s: short of the link {:.1} s",
        short_from(&r, 20.0)
    );
    assert!(short_from(&r, 20.0) <= 8.0, "{}", short_from(&r, 20.0));
    // A change 3 s after the ramp set the minimum: the window halves before the minimum expires, and the expiry
    // (at ~10 s) takes the new RTT at once.
    let early = run(cfg(60), 45.0, |t| if t < 3.0 { 0.1 } else { 0.16 });
    eprintln!(
        "1.6x at 3 s: short of the link {:.1} s",
        short_from(&early, 3.0)
    );
    assert!(short_from(&early, 3.0) <= 10.0);
    assert!(early
        .rounds
        .iter()
        .filter(|x| x.0 >= 15.0)
        .all(|x| x.3 >= 159.0));
}

#[test]
fn a_much_longer_path_is_taken_on_expiry_as_before() {
    // 2x: more than a DRS queue explains (`min_rtt_hold_ratio`, 1.9), so the expiry re-reads it without a hold.
    let r = run(cfg(60), 45.0, |t| if t < 20.0 { 0.1 } else { 0.2 });
    let old = run(cfg(0), 45.0, |t| if t < 20.0 { 0.1 } else { 0.2 });
    eprintln!(
        "2x at 20 s: short of the link {:.1} s (hold off: {:.1} s)",
        short_from(&r, 20.0),
        short_from(&old, 20.0)
    );
    assert!(short_from(&r, 20.0) <= 10.0);
    assert!(r
        .rounds
        .iter()
        .filter(|x| x.0 >= 31.0)
        .all(|x| x.3 >= 199.0 && x.2 > 0.99));
}

/// Seconds from `from` s on that the stream moved less than 0.9 of the link.
fn short_from(r: &Run, from: f64) -> f64 {
    let w = r
        .rounds
        .windows(2)
        .filter(|w| w[0].0 >= from && w[0].2 < 0.9);
    w.map(|w| w[1].0 - w[0].0).sum()
}

#[test]
fn a_window_giving_way_to_a_competitor_keeps_the_minimum() {
    // The lab's two default copies (500 Mbit/s · 100 ms, cubic): a stream's slow start leaves its window at ~2.5 MB,
    // then over ~12 s it gives way to the other copy's streams (what it may send falls 2.0 -> 0.9 MB a round)
    // while the copies' shared queue holds the RTT at 1.7x. Counted from the ramp's overshoot that fall is a
    // halving, and the expiry re-read the minimum behind the queue (windows 1.35 -> 4.5 MB on the lab); it is not a
    // longer path, so the minimum is held.
    let t0 = Instant::now();
    let mut r = DrsReceiver::new(t0, cfg(60));
    let mut now = t0;
    let mut mins = vec![];
    loop {
        let t = now.duration_since(t0).as_secs_f64();
        if t >= 20.0 {
            break;
        }
        // Slow start to 2 MB a round in the first second, then the competitor's share grows.
        let demand = if t < 1.0 {
            256e3 * 2f64.powf(t / 0.1).min(8.0)
        } else {
            (2.0e6 - 1.1e6 * ((t - 1.0) / 12.0).min(1.0)).max(0.9e6)
        };
        let flight = (r.buffer() as f64).min(demand);
        let rtt = if t < 1.0 { 0.1 } else { 0.165 };
        let dt = Duration::from_secs_f64(rtt);
        round(&mut r, now, dt, flight);
        now += dt;
        mins.push((t, r.buffer(), r.min_rtt().unwrap()));
    }
    let peak = mins
        .iter()
        .filter(|x| x.0 > 1.0)
        .map(|x| x.1)
        .max()
        .unwrap();
    let end = mins.last().unwrap();
    eprintln!(
        "giving way: window {:.2} MB after the ramp, {:.2} MB at 20 s, min RTT {:?}",
        peak as f64 / 1e6,
        end.1 as f64 / 1e6,
        end.2
    );
    assert!(
        end.1 <= peak / 2,
        "the window did halve: {} of {peak}",
        end.1
    );
    assert!(
        mins.iter().all(|x| x.2 <= Duration::from_millis(101)),
        "minimum held: {:?}",
        mins.iter().find(|x| x.2 > Duration::from_millis(101))
    );
}
