//! Property tests: the DRS buffer stays within its bounds for any input sequence, responds monotonically to the
//! bytes delivered (within one shrink step with the queue share), and the sender's buffer stays within [min, max].

use std::time::{Duration, Instant};

use drsftp_tune::{DrsAction, DrsConfig, DrsReceiver, DrsSender, TcpSample};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Ev {
    Bytes(u32, u16),
    Rtt(u16),
    Echo(u8, u16),
    Tick(u16),
}

fn ev() -> impl Strategy<Value = Ev> {
    prop_oneof![
        (any::<u32>(), 0u16..2000).prop_map(|(n, dt)| Ev::Bytes(n, dt)),
        (1u16..5000).prop_map(Ev::Rtt),
        (0u8..8, 0u16..3000).prop_map(|(i, dt)| Ev::Echo(i, dt)),
        (0u16..5000).prop_map(Ev::Tick),
    ]
}

fn apply(r: &mut DrsReceiver, t: &mut Instant, e: &Ev) {
    match *e {
        Ev::Bytes(n, dt) => {
            *t += Duration::from_millis(dt as u64);
            r.handle_bytes(*t, n as u64);
        }
        Ev::Rtt(ms) => r.handle_tcp_info(
            *t,
            &TcpSample {
                rcv_rtt: Duration::from_millis(ms as u64),
                ..Default::default()
            },
        ),
        Ev::Echo(id, dt) => {
            *t += Duration::from_millis(dt as u64);
            r.handle_sbuf_echo(*t, id as u64);
        }
        Ev::Tick(dt) => {
            *t += Duration::from_millis(dt as u64);
            r.handle_timeout(*t);
        }
    }
}

/// The buffer after `prefix`, then `last` bytes, an interval closed `dt` ms later and one 5 s after that.
fn buffer_after(cfg: &DrsConfig, prefix: &[Ev], last: u64, dt: u16) -> u64 {
    let t0 = Instant::now();
    let mut r = DrsReceiver::new(t0, cfg.clone());
    let mut t = t0;
    for e in prefix {
        apply(&mut r, &mut t, e);
    }
    r.handle_bytes(t, last);
    t += Duration::from_millis(dt as u64);
    r.handle_timeout(t);
    t += Duration::from_secs(5);
    r.handle_timeout(t);
    r.buffer()
}

proptest! {
    #[test]
    fn buffer_always_within_bounds(min_kb in 4u64..1024, span in 1u64..4096, init_kb in 0u64..100_000,
                                   evs in prop::collection::vec(ev(), 0..300)) {
        let cfg = DrsConfig { min_buf: min_kb << 10, max_buf: (min_kb + span) << 10, initial_buf: init_kb << 10,
                              ..DrsConfig::default() };
        let t0 = Instant::now();
        let mut r = DrsReceiver::new(t0, cfg.clone());
        let mut t = t0;
        for e in &evs {
            apply(&mut r, &mut t, e);
            prop_assert!(r.buffer() >= cfg.min_buf && r.buffer() <= cfg.max_buf);
            while let Some(a) = r.poll_action() {
                match a {
                    DrsAction::SetRecvBuf(n) => prop_assert!(n >= cfg.min_buf && n <= cfg.max_buf),
                    DrsAction::SendSbufProbe { size, .. } => prop_assert!(size >= cfg.min_buf && size <= cfg.max_buf),
                    other => prop_assert!(false, "unexpected {:?}", other),
                }
            }
            if let Some(to) = r.poll_timeout() {
                prop_assert!(to >= t0);
            }
        }
    }

    /// Without the queue share: the buffer is a monotone function of the bytes delivered.
    #[test]
    fn more_bytes_never_gives_a_smaller_buffer(prefix in prop::collection::vec(ev(), 0..100),
                                               a in 0u32..50_000_000, extra in 0u32..50_000_000, dt in 1u16..3000) {
        let cfg = DrsConfig { probes: false, queue_share: 0, ..DrsConfig::default() };
        let (fewer, more) = (buffer_after(&cfg, &prefix, a as u64, dt), buffer_after(&cfg, &prefix, a as u64 + extra as u64, dt));
        prop_assert!(fewer <= more, "{} > {}", fewer, more);
    }

    /// With the queue share (the default) a stream that fills its window behind a standing queue follows its
    /// target down at once, where a stream that does not fill it keeps its window for `shrink_after` intervals: the
    /// extra bytes that make it window-limited can cost one shrink step (`shrink_factor`), and no more. Behind a
    /// standing queue (RTT >= 1.25x the minimum) a stream that does not fill 0.8 of its window asks the ordinary
    /// rule for at most 1.5 x 0.8 / 1.25 = 0.96 of it, so fewer bytes never grow the window there; when both runs
    /// fill it, more bytes give a larger or equal sample, so both bounds of the share's band (grow to the
    /// smaller of the last two samples' target, shrink toward the larger's: `grow_on_two`) are larger or equal
    /// and the window is too. After that step both runs follow the same rules from windows within the step of
    /// each other.
    #[test]
    fn more_bytes_cost_at_most_one_shrink_step(prefix in prop::collection::vec(ev(), 0..100),
                                                          a in 0u32..50_000_000, extra in 0u32..50_000_000,
                                                          dt in 1u16..3000) {
        let cfg = DrsConfig { probes: false, ..DrsConfig::default() };
        let (fewer, more) = (buffer_after(&cfg, &prefix, a as u64, dt), buffer_after(&cfg, &prefix, a as u64 + extra as u64, dt));
        let floor = fewer as f64 * cfg.shrink_factor;
        prop_assert!(more as f64 >= floor.min(cfg.max_buf as f64) - 1.0, "{} vs {}", more, fewer);
    }

    #[test]
    fn sender_buffer_bounded(reqs in prop::collection::vec((any::<u64>(), 0u64..1 << 30), 1..50),
                             min in 1u64..1 << 20, span in 0u64..1 << 28) {
        let max = min + span;
        let mut s = DrsSender::new(min, min, max);
        let t = Instant::now();
        for (i, &(size, cwnd)) in reqs.iter().enumerate() {
            s.handle_tcp_info(t, &TcpSample { cwnd_bytes: cwnd, ..Default::default() });
            s.handle_sbuf_request(t, i as u64, size);
            let mut replied = false;
            while let Some(a) = s.poll_action() {
                match a {
                    DrsAction::SetSendBuf(n) => prop_assert!(n >= min && n <= max),
                    DrsAction::SbufReply { id, size } => {
                        prop_assert_eq!(id, i as u64);
                        prop_assert!(size >= min && size <= max);
                        prop_assert!(size >= cwnd.min(max));
                        replied = true;
                    }
                    other => prop_assert!(false, "unexpected {:?}", other),
                }
            }
            prop_assert!(replied);
        }
    }
}
