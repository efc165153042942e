//! DRS against the fluid TCP model on seed 000's time-varying path (RTT 119-475 ms, 0.026-28.5 Mbit/s every 20 s):
//! the receive buffer follows 2x the flight size, the sender is almost never receive-window-limited, throughput
//! matches an over-provisioned 16 MB buffer, and memory is a small fraction of it.

use std::time::{Duration, Instant};

use drsftp_tune::fluid::{round, FluidFlow};
use drsftp_tune::{DrsAction, DrsConfig, DrsReceiver, DrsSender, TcpSample};

/// (Mbit/s, RTT ms) per 20 s segment: the range and mean of seed 000 figures 1-2.
const PROFILE: [(f64, f64); 10] = [
    (17.2, 157.0),
    (28.5, 119.0),
    (5.0, 200.0),
    (0.026, 475.0),
    (20.0, 157.0),
    (28.5, 300.0),
    (10.0, 130.0),
    (25.0, 140.0),
    (2.0, 250.0),
    (17.2, 157.0),
];

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// RTT from TCP_INFO rcv_rtt.
    TcpInfo,
    /// RTT from in-band SBUF echoes, with 5 ms application overhead each way.
    InBand,
    /// A fixed buffer of this size.
    Fixed(u64),
}

#[derive(Debug, Default)]
struct Outcome {
    bytes: f64,
    seconds: f64,
    /// Time-weighted mean receive buffer.
    mean_buf: f64,
    max_buf: u64,
    /// Fraction of rounds (after the first 2 s of each segment) where rwnd < cwnd.
    rwnd_limited: f64,
    /// (segment, buffer at end, flight at end, base BDP)
    ends: Vec<(usize, u64, f64, f64)>,
    sbuf_replies: usize,
}

fn run(mode: Mode) -> Outcome {
    let t0 = Instant::now();
    let mut now = t0;
    let cfg = DrsConfig {
        probes: mode == Mode::InBand,
        max_buf: 64 << 20,
        ..DrsConfig::default()
    };
    let mut drs = DrsReceiver::new(now, cfg.clone());
    let mut sender = DrsSender::new(cfg.initial_buf, 64 << 10, 64 << 20);
    let initial = match mode {
        Mode::Fixed(b) => b,
        _ => drs.buffer(),
    };
    let mut flow = FluidFlow::new(initial);
    let mut out = Outcome::default();
    let (mut buf_time, mut limited, mut counted) = (0.0, 0usize, 0usize);
    let mut pending_echo: Vec<(Instant, u64)> = vec![];
    for (seg, &(mbit, rtt_ms)) in PROFILE.iter().enumerate() {
        let rate = mbit * 1e6 / 8.0;
        let base = rtt_ms / 1e3;
        let queue = (rate * base).max(64.0 * 1024.0);
        let seg_end = now + Duration::from_secs(20);
        let seg_start = now;
        while now < seg_end {
            let buf_now = flow.rwnd;
            let window_limited = flow.rwnd + 1.0 < flow.cwnd;
            let (d, r) = round(std::slice::from_mut(&mut flow), rate, base, queue);
            let dt = Duration::from_secs_f64(r.rtt);
            if now.duration_since(seg_start) > Duration::from_secs(2) {
                counted += 1;
                limited += window_limited as usize;
            }
            buf_time += buf_now * r.rtt;
            out.bytes += d[0];
            if let Mode::Fixed(_) = mode {
                now += dt;
                continue;
            }
            // Deliver the round's bytes in 8 chunks, run timers and echoes in time order.
            for k in 1..=8u32 {
                let t = now + dt * k / 8;
                pending_echo.sort();
                while let Some(&(te, id)) = pending_echo.first() {
                    if te > t {
                        break;
                    }
                    pending_echo.remove(0);
                    drs.handle_sbuf_echo(te, id);
                }
                while let Some(to) = drs.poll_timeout() {
                    if to > t {
                        break;
                    }
                    drs.handle_timeout(to);
                }
                drs.handle_bytes(t, (d[0] / 8.0) as u64);
                if mode == Mode::TcpInfo && k == 8 {
                    let s = TcpSample {
                        rcv_rtt: dt,
                        ..TcpSample::default()
                    };
                    drs.handle_tcp_info(t, &s);
                }
                while let Some(a) = drs.poll_action() {
                    match a {
                        DrsAction::SetRecvBuf(n) => {
                            flow.rwnd = n as f64;
                            out.max_buf = out.max_buf.max(n);
                        }
                        DrsAction::SendSbufProbe { id, size } => {
                            sender.handle_sbuf_request(t, id, size);
                            while let Some(sa) = sender.poll_action() {
                                if let DrsAction::SbufReply { id, .. } = sa {
                                    out.sbuf_replies += 1;
                                    pending_echo.push((t + dt + Duration::from_millis(10), id));
                                }
                            }
                        }
                        other => panic!("receiver emitted {other:?}"),
                    }
                }
            }
            now += dt;
        }
        out.ends
            .push((seg, flow.rwnd as u64, flow.window(), rate * base));
    }
    out.seconds = now.duration_since(t0).as_secs_f64();
    out.mean_buf = buf_time / out.seconds;
    out.max_buf = out.max_buf.max(initial);
    out.rwnd_limited = limited as f64 / counted as f64;
    out
}

#[test]
fn drs_matches_overprovisioned_throughput_with_far_less_memory() {
    let fixed = run(Mode::Fixed(16 << 20));
    let stock = run(Mode::Fixed(64 << 10));
    for mode in [Mode::TcpInfo, Mode::InBand] {
        let drs = run(mode);
        let tput = (drs.bytes / drs.seconds) / (fixed.bytes / fixed.seconds);
        let mem = drs.mean_buf / (16u64 << 20) as f64;
        let vs_stock = (drs.bytes / drs.seconds) / (stock.bytes / stock.seconds);
        eprintln!(
            "{}: throughput {:.3} of 16M, {:.2}x stock 64K, mean buffer {:.0} KB ({:.3} of 16M), peak {} KB, \
             rwnd-limited rounds {:.3}",
            if mode == Mode::InBand { "in-band" } else { "tcp_info" },
            tput,
            vs_stock,
            drs.mean_buf / 1024.0,
            mem,
            drs.max_buf / 1024,
            drs.rwnd_limited
        );
        assert!(tput >= 0.97, "throughput ratio {tput}");
        assert!(mem <= 0.25, "memory ratio {mem}");
        assert!(vs_stock > 2.0, "vs stock {vs_stock}");
        // The BDP comes from the minimum RTT over 10 s, so after each of the profile's RTT rises (119 -> 475 ms)
        // the window lags the new path for up to 10 s: ~9 % of rounds (it was 0-0.3 % with the smoothed RTT).
        // Throughput, the first assertion, is unchanged at 0.999; a lag past 0.12 would start to cost it.
        assert!(
            drs.rwnd_limited < 0.12,
            "receive-window-limited in {:.3} of rounds",
            drs.rwnd_limited
        );
        if mode == Mode::InBand {
            assert!(drs.sbuf_replies > 10, "in-band probes were exchanged");
        }
    }
}

#[test]
fn drs_buffer_tracks_twice_the_flight() {
    let drs = run(Mode::TcpInfo);
    for &(seg, buf, flight, bdp) in &drs.ends {
        eprintln!(
            "segment {seg}: bdp {:.0} KB flight {:.0} KB buffer {} KB",
            bdp / 1024.0,
            flight / 1024.0,
            buf / 1024
        );
        // Never below the flight the sender has, never more than ~4x the flight (2x, plus shrink hysteresis) —
        // except at the 64 KB floor.
        assert!(
            buf as f64 >= flight,
            "segment {seg}: buffer {buf} below flight {flight}"
        );
        assert!(
            buf as f64 <= (4.5 * flight).max(64.0 * 1024.0 * 1.01),
            "segment {seg}: buffer {buf} vs flight {flight}"
        );
    }
}
