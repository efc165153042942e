//! DRS over drsftp-netem: a packet-level Reno/NewReno sender and a receiver advertising the DRS buffer as its
//! window, on netem's seed-000 Los Alamos–New York profile (RTT 119-475 ms, 0.026-28.5 Mbit/s, 20 s steps, 1xBDP
//! drop-tail queue). Compares DRS (in-band SBUF probes for RTT) against fixed 16 MB and 64 KB windows. The sender
//! is a crude NewReno without SACK (1 s RTO floor, go-back-N), so absolute rates are low; the ratios are the point:
//! a right-sized window also tempers slow-start overshoot into the 1xBDP queue, which the 16 MB window does not.
//! The run covers the profile's whole 600 s period. The sender uses RFC 6582's "Impatient" RTO variant: with the
//! timer restarted on every partial ack, a window with hundreds of holes was repaired one segment per RTT for
//! minutes, and whether a run fell into that was a lottery (DRS 1.6 or 6.8 Mbit/s for a 10 % or 11 % hysteresis).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use drsftp_netem::{LinkConfig, Path, Profile, Side};
use drsftp_tune::{DrsAction, DrsConfig, DrsReceiver};

const MSS: u64 = 1448;

#[derive(Clone, Debug)]
enum Pkt {
    Data { seq: u64, len: u64 },
    Ack { cum: u64, wnd: u64 },
    Probe { id: u64 },
    Echo { id: u64 },
}

struct Outcome {
    bytes: u64,
    secs: f64,
    mean_wnd: f64,
    max_wnd: u64,
}

fn run(fixed: Option<u64>, secs: u64) -> Outcome {
    let t0 = Instant::now();
    let cfg = LinkConfig::new(Duration::from_millis(60), 28_500_000);
    let mut path: Path<Pkt> = Path::with_profile(cfg, Profile::los_alamos_new_york(), t0);
    let mut drs = DrsReceiver::new(
        t0,
        DrsConfig {
            max_buf: 64 << 20,
            ..DrsConfig::default()
        },
    );
    let wnd_of = |d: &DrsReceiver| fixed.unwrap_or(d.buffer());
    // Sender (A).
    let (mut next, mut acked, mut cwnd, mut ssthresh) = (0u64, 0u64, 10 * MSS, u64::MAX);
    let mut rwnd = wnd_of(&drs);
    let (mut dup, mut recover, mut in_recovery, mut partial_seen) = (0u32, 0u64, false, false);
    let mut last_progress = t0;
    // Receiver (B).
    let (mut expected, mut ooo, mut fed) = (0u64, BTreeMap::<u64, u64>::new(), 0u64);
    let end = t0 + Duration::from_secs(secs);
    let mut now = t0;
    let (mut wnd_time, mut last_t, mut max_wnd) = (0.0f64, t0, 0u64);
    while now < end {
        // Sender: fill the window.
        while next < acked + cwnd.min(rwnd) {
            path.send(
                now,
                Side::A,
                (MSS + 52) as usize,
                Pkt::Data {
                    seq: next,
                    len: MSS,
                },
            );
            next += MSS;
        }
        // Receiver actions.
        while let Some(a) = drs.poll_action() {
            match a {
                DrsAction::SendSbufProbe { id, .. } => {
                    path.send(now, Side::B, 64, Pkt::Probe { id });
                }
                DrsAction::SetRecvBuf(_) => {}
                other => panic!("{other:?}"),
            }
        }
        // Retransmission timeout (1 s floor): go back to the first unacked byte.
        let rto = last_progress + Duration::from_secs(1).max(drs.rtt() * 3);
        let mut wake = path.poll_timeout().unwrap_or(end).min(rto).min(end);
        if let Some(t) = drs.poll_timeout() {
            wake = wake.min(t);
        }
        let wake = wake.max(now);
        let w = wnd_of(&drs);
        wnd_time += w as f64 * wake.duration_since(last_t).as_secs_f64();
        max_wnd = max_wnd.max(w);
        last_t = wake;
        now = wake;
        if now >= rto && next > acked {
            ssthresh = (cwnd / 2).max(2 * MSS);
            cwnd = MSS;
            next = acked;
            in_recovery = false;
            last_progress = now;
        }
        if drs.poll_timeout().is_some_and(|t| t <= now) {
            drs.handle_timeout(now);
        }
        while let Some(p) = path.poll_deliver(now, Side::B) {
            match p {
                Pkt::Data { seq, len } => {
                    if seq == expected {
                        expected += len;
                        while let Some(l) = ooo.remove(&expected) {
                            expected += l;
                        }
                    } else if seq > expected {
                        ooo.insert(seq, len);
                    }
                    path.send(
                        now,
                        Side::B,
                        52,
                        Pkt::Ack {
                            cum: expected,
                            wnd: wnd_of(&drs),
                        },
                    );
                }
                Pkt::Echo { id } => drs.handle_sbuf_echo(now, id),
                other => panic!("B got {other:?}"),
            }
        }
        while let Some(p) = path.poll_deliver(now, Side::A) {
            match p {
                Pkt::Ack { cum, wnd } => {
                    rwnd = wnd;
                    if cum > acked {
                        let newly = cum - acked;
                        acked = cum;
                        // NewReno's "Impatient" timer (RFC 6582 §4.2): in recovery only the first partial ack
                        // restarts the RTO, so a window with many holes ends in a timeout instead of one
                        // retransmission per RTT for minutes.
                        if !in_recovery || !partial_seen || acked >= recover {
                            last_progress = now;
                        }
                        partial_seen = in_recovery;
                        dup = 0;
                        if in_recovery {
                            if acked >= recover {
                                in_recovery = false;
                                cwnd = ssthresh;
                            } else {
                                // Partial ack: retransmit the next hole.
                                path.send(
                                    now,
                                    Side::A,
                                    (MSS + 52) as usize,
                                    Pkt::Data {
                                        seq: acked,
                                        len: MSS,
                                    },
                                );
                            }
                        } else if cwnd < ssthresh {
                            cwnd += newly;
                        } else {
                            cwnd += MSS * newly / cwnd.max(1);
                        }
                        if next < acked {
                            next = acked;
                        }
                    } else if next > acked {
                        dup += 1;
                        if dup == 3 && !in_recovery {
                            ssthresh = (cwnd / 2).max(2 * MSS);
                            cwnd = ssthresh;
                            recover = next;
                            in_recovery = true;
                            partial_seen = false;
                            path.send(
                                now,
                                Side::A,
                                (MSS + 52) as usize,
                                Pkt::Data {
                                    seq: acked,
                                    len: MSS,
                                },
                            );
                        }
                    }
                }
                Pkt::Probe { id } => {
                    path.send(now, Side::A, 64, Pkt::Echo { id });
                }
                other => panic!("A got {other:?}"),
            }
        }
        // Feed DRS with in-order progress (what the application reads).
        if expected > fed {
            drs.handle_bytes(now, expected - fed);
            fed = expected;
        }
    }
    Outcome {
        bytes: expected,
        secs: now.duration_since(t0).as_secs_f64(),
        mean_wnd: wnd_time / now.duration_since(t0).as_secs_f64(),
        max_wnd,
    }
}

#[test]
fn drs_on_netem_lanl_ny_profile() {
    const SECS: u64 = 600; // the profile's whole period: all 30 steps
    let drs = run(None, SECS);
    let big = run(Some(16 << 20), SECS);
    let stock = run(Some(64 << 10), SECS);
    let mbps = |o: &Outcome| o.bytes as f64 * 8.0 / o.secs / 1e6;
    eprintln!(
        "netem LANL-NY {SECS} s: DRS {:.2} Mbit/s (mean window {:.0} KB, max {} KB); 16 MB {:.2} Mbit/s; 64 KB {:.2} Mbit/s",
        mbps(&drs),
        drs.mean_wnd / 1024.0,
        drs.max_wnd / 1024,
        mbps(&big),
        mbps(&stock)
    );
    assert!(
        mbps(&drs) >= 0.95 * mbps(&big),
        "DRS {} vs 16 MB {}",
        mbps(&drs),
        mbps(&big)
    );
    assert!(drs.mean_wnd <= 0.25 * (16u64 << 20) as f64);
    assert!(mbps(&drs) >= 2.0 * mbps(&stock));
}
