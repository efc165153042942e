//! Property tests: the DRS buffer stays within its bounds for any input sequence, responds monotonically to the
//! bytes delivered, and the sender's buffer stays within [min, max].

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

    #[test]
    fn more_bytes_never_gives_a_smaller_buffer(prefix in prop::collection::vec(ev(), 0..100),
                                               a in 0u32..50_000_000, extra in 0u32..50_000_000, dt in 1u16..3000) {
        let run = |last: u64| {
            let t0 = Instant::now();
            let mut r = DrsReceiver::new(t0, DrsConfig { probes: false, ..DrsConfig::default() });
            let mut t = t0;
            for e in &prefix { apply(&mut r, &mut t, e); }
            r.handle_bytes(t, last);
            t += Duration::from_millis(dt as u64);
            r.handle_timeout(t);
            t += Duration::from_secs(5);
            r.handle_timeout(t);
            r.buffer()
        };
        prop_assert!(run(a as u64) <= run(a as u64 + extra as u64));
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
