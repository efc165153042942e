//! Tests of the DRS driver in the parent module, on real loopback sockets where a kernel is involved.
use super::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;

#[test]
fn drs_stream_applies_buffers_and_traces_a_loopback_transfer() {
    let limits = sockopt::buf_limits().unwrap();
    let policy = BufferPolicy::Drs;
    let max = drs_max_buf(&limits, 16 << 20, false);
    let l = listen_with("127.0.0.1:0".parse().unwrap(), policy, &limits, max).unwrap();
    let addr = l.local_addr().unwrap();
    const N: u64 = 64 << 20;
    let writer = std::thread::spawn(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        let chunk = vec![3u8; 1 << 16];
        for _ in 0..N / chunk.len() as u64 {
            c.write_all(&chunk).unwrap();
        }
    });
    let (mut s, _) = l.accept().unwrap();
    let cfg = DrsConfig {
        initial_buf: 64 * 1024,
        max_buf: max,
        min_interval: Duration::from_millis(2),
        ..DrsConfig::default()
    };
    let ceiling =
        after_connect(&s, policy, &limits, max, cfg.initial_buf, DrsKnob::RecvBuf).unwrap();
    assert_eq!(ceiling, max.min(scale_limit(&s).unwrap()));
    assert_eq!(sockopt::recv_buf(&s).unwrap(), 2 * 64 * 1024);
    let t0 = Instant::now();
    let mut d = DrsStream::new(t0, policy, cfg, limits).with_knob(DrsKnob::RecvBuf);
    let mut buf = vec![0u8; 1 << 16];
    let mut got = 0u64;
    let mut probes = 0;
    while got < N {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        got += n as u64;
        for a in d.on_read(&s, Instant::now(), n as u64).unwrap() {
            assert!(matches!(a, DrsAction::SendSbufProbe { .. }));
            probes += 1;
        }
    }
    writer.join().unwrap();
    let rtt = d.estimator().rtt();
    eprintln!(
        "loopback DRS: {} trace rows, rtt {:?} ({:?}), applied {:?}, final SO_RCVBUF {}",
        d.trace().len(),
        rtt,
        d.estimator().rtt_source(),
        d.applied(),
        sockopt::recv_buf(&s).unwrap()
    );
    assert!(!d.trace().is_empty());
    assert_eq!(d.estimator().rtt_source(), drsftp_tune::RttSource::TcpInfo);
    assert!(rtt < Duration::from_millis(50), "loopback rtt {rtt:?}");
    // Every applied value is what the socket reports (halved), within the cap.
    if let Some(&last) = d.applied().last() {
        assert_eq!(
            sockopt::recv_buf(&s).unwrap() as u64,
            2 * last.min(limits.rmem_max as u64)
        );
    }
    assert!(probes >= 1, "announcement probe handed to the engine");
    let mut csv = vec![];
    write_trace_csv(&mut csv, d.trace()).unwrap();
    let text = String::from_utf8(csv).unwrap();
    assert!(text.starts_with("t_s,buffer_bytes,rtt_ms"));
    assert_eq!(text.lines().count(), d.trace().len() + 1);
}

#[test]
fn window_clamp_knob_moves_the_clamp_and_raises_the_buffer_behind_it() {
    let (l, limits, max) = drs_listener();
    let addr = l.local_addr().unwrap();
    const N: u64 = 32 << 20;
    let writer = std::thread::spawn(move || {
        let mut c = connect_with(addr, BufferPolicy::Kernel, &limits, 0, None).unwrap();
        let chunk = vec![1u8; 1 << 16];
        for _ in 0..N / chunk.len() as u64 {
            c.write_all(&chunk).unwrap();
        }
    });
    let (mut s, _) = l.accept().unwrap();
    let ceiling = after_connect(
        &s,
        BufferPolicy::Drs,
        &limits,
        max,
        64 * 1024,
        DrsKnob::WindowClamp,
    )
    .unwrap();
    assert!(ceiling > 64 * 1024);
    assert_eq!(
        sockopt::recv_buf(&s).unwrap(),
        2 * rcvbuf_for(64 * 1024),
        "SO_RCVBUF starts at twice DRS's window, not at the ceiling"
    );
    assert_eq!(sockopt::window_clamp(&s).unwrap(), 64 * 1024);
    let cfg = DrsConfig {
        initial_buf: 64 * 1024,
        max_buf: max,
        min_interval: Duration::from_millis(2),
        ..DrsConfig::default()
    };
    let mut d = DrsStream::new(Instant::now(), BufferPolicy::Drs, cfg, limits);
    let mut buf = vec![0u8; 1 << 16];
    let mut got = 0;
    while got < N {
        let n = s.read(&mut buf).unwrap() as u64;
        assert!(n > 0);
        got += n;
        d.on_read(&s, Instant::now(), n).unwrap();
    }
    writer.join().unwrap();
    // A last poll (as at every sampling interval) puts back a clamp the kernel lifted.
    d.poll(&s, Instant::now() + Duration::from_secs(1)).unwrap();
    eprintln!(
        "clamp knob: applied {:?}, re-clamped {}",
        d.applied(),
        d.reclamped()
    );
    // The clamp carries the DRS value; SO_RCVBUF followed the largest clamp (loopback's BDP is small, so DRS
    // may not have grown at all) and was never lowered.
    let top = d.applied().iter().copied().fold(64 * 1024, u64::max);
    assert_eq!(sockopt::recv_buf(&s).unwrap(), 2 * rcvbuf_for(top));
    assert_eq!(sockopt::window_clamp(&s).unwrap() as u64, d.buffer());
    if let Some(&last) = d.applied().last() {
        assert_eq!(d.buffer(), last);
    }
    // A larger clamp raises SO_RCVBUF to twice it; a smaller one leaves it.
    d.raise_recv_buf(s.as_fd(), 1 << 20).unwrap();
    assert_eq!(sockopt::recv_buf(&s).unwrap(), 2 * rcvbuf_for(1 << 20));
    d.raise_recv_buf(s.as_fd(), 256 << 10).unwrap();
    assert_eq!(sockopt::recv_buf(&s).unwrap(), 2 * rcvbuf_for(1 << 20));
}

#[test]
fn a_lifted_clamp_is_put_back_after_every_read_early_in_a_connection() {
    let (l, limits, max) = drs_listener();
    let addr = l.local_addr().unwrap();
    let writer = std::thread::spawn(move || {
        let mut c = connect_with(addr, BufferPolicy::Kernel, &limits, 0, None).unwrap();
        c.write_all(&vec![1u8; 2 << 20]).unwrap();
    });
    let (mut s, _) = l.accept().unwrap();
    after_connect(
        &s,
        BufferPolicy::Drs,
        &limits,
        max,
        128 << 10,
        DrsKnob::WindowClamp,
    )
    .unwrap();
    let cfg = DrsConfig {
        initial_buf: 128 << 10,
        max_buf: max,
        // No sampling interval ends during the test: only the early checks can act.
        min_interval: Duration::from_secs(3600),
        max_interval: Duration::from_secs(3600),
        initial_rtt: Duration::from_secs(3600),
        ..DrsConfig::default()
    };
    let t0 = Instant::now();
    let mut d = DrsStream::new(t0, BufferPolicy::Drs, cfg, limits);
    let mut buf = vec![0u8; 64 << 10];
    let first = s.read(&mut buf).unwrap() as u64;
    d.on_read(&s, t0, first).unwrap(); // the first poll samples (and re-clamps) once
    let mut got = first;
    let mut lifts = 0;
    while d.early() {
        // What Linux does when it revises its payload/truesize ratio (a full-sized segment after a short one).
        sockopt::set_window_clamp(&s, 1 << 20).unwrap();
        lifts += 1;
        let n = s.read(&mut buf).unwrap() as u64;
        assert!(n > 0);
        got += n;
        d.reclamp(&s).unwrap();
        assert_eq!(sockopt::window_clamp(&s).unwrap() as u64, d.buffer());
        d.on_read(&s, t0, n).unwrap();
    }
    assert!(got > 1 << 20, "early for the first MiB");
    assert!(d.reclamped() >= lifts, "{} of {lifts}", d.reclamped());
    // Past the early bytes a lifted clamp waits for the next sampling interval.
    sockopt::set_window_clamp(&s, 1 << 20).unwrap();
    let n = s.read(&mut buf).unwrap() as u64;
    d.on_read(&s, t0, n).unwrap();
    assert_eq!(sockopt::window_clamp(&s).unwrap(), 1 << 20);
    d.poll(&s, t0 + Duration::from_secs(7200)).unwrap();
    assert_eq!(sockopt::window_clamp(&s).unwrap() as u64, d.buffer());
    while s.read(&mut buf).unwrap() > 0 {}
    writer.join().unwrap();
}

#[test]
fn the_smallest_window_is_a_few_segments_on_loopback() {
    let (l, limits, _) = drs_listener();
    let addr = l.local_addr().unwrap();
    let c = connect_with(addr, BufferPolicy::Kernel, &limits, 0, None).unwrap();
    let (s, _) = l.accept().unwrap();
    let mss = tcp_info(&s).unwrap().snd_mss as u64;
    assert!(mss > 16 << 10, "loopback MSS {mss}");
    assert_eq!(min_buf_for(&s, 64 << 10), MIN_SEGMENTS * mss);
    assert_eq!(min_buf_for(&s, 64 * mss), 64 * mss);
    drop(c);
}

#[test]
fn drs_leaves_the_buffer_small_at_set_up_and_raises_it_after() {
    let limits = sockopt::buf_limits().unwrap();
    let drs_max: u64 = 64 << 20;
    let l = listen_with(
        "127.0.0.1:0".parse().unwrap(),
        BufferPolicy::Drs,
        &limits,
        drs_max,
    )
    .unwrap();
    let c = connect_with(
        l.local_addr().unwrap(),
        BufferPolicy::Drs,
        &limits,
        drs_max,
        None,
    )
    .unwrap();
    let (s, _) = l.accept().unwrap();
    for (side, sock) in [("accepted", &s), ("connected", &c)] {
        // At set-up: autotuning's buffer and initial window, nowhere near drs_max.
        let at_setup = sockopt::recv_buf(sock).unwrap() as u64;
        let info = tcp_info(sock).unwrap();
        eprintln!(
            "{side}: at set-up SO_RCVBUF {at_setup}, rcv_ssthresh {}, rcv_wnd {}, rcv_wscale {}",
            info.rcv_ssthresh, info.rcv_wnd, info.rcv_wscale
        );
        assert!(
            at_setup <= limits.tcp_rmem[1] as u64 * 2,
            "{side}: {at_setup}"
        );
        assert!(at_setup < drs_max / 16, "{side}: {at_setup}");
        assert!(
            (info.rcv_ssthresh as u64) < drs_max / 64,
            "{side}: {info:?}"
        );
        // The kernel chose the scale for max(tcp_rmem[2], rmem_max) although SO_RCVBUF was left alone.
        assert_eq!(
            65_535u64 << info.rcv_wscale,
            expected_ceiling(&limits, u64::MAX),
            "{side}"
        );
        // After set-up: the ceiling is min(drs_max, 65535 << wscale), or the rmem cap if FORCE was refused.
        let ceiling = after_connect(
            sock,
            BufferPolicy::Drs,
            &limits,
            drs_max,
            64 * 1024,
            DrsKnob::WindowClamp,
        )
        .unwrap();
        let scale_cap = drs_max.min(65_535u64 << info.rcv_wscale);
        assert_eq!(scale_cap, expected_ceiling(&limits, drs_max));
        let buf = sockopt::recv_buf(sock).unwrap() as u64 / 2;
        eprintln!("{side}: after_connect ceiling {ceiling}, SO_RCVBUF/2 {buf}");
        assert!(
            ceiling == scale_cap || (ceiling == limits.rmem_max as u64 && ceiling < scale_cap),
            "{side}: {ceiling} vs {scale_cap} / rmem_max {}",
            limits.rmem_max
        );
        assert_eq!(
            buf,
            rcvbuf_for(64 * 1024) as u64,
            "{side}: SO_RCVBUF starts at twice DRS's window"
        );
        assert_eq!(sockopt::window_clamp(sock).unwrap(), 64 * 1024, "{side}");
    }
    // Other policies are untouched.
    let before = sockopt::recv_buf(&s).unwrap();
    let r = after_connect(
        &s,
        BufferPolicy::Kernel,
        &limits,
        drs_max,
        1,
        DrsKnob::RecvBuf,
    );
    assert_eq!(r.unwrap(), 0);
    assert_eq!(sockopt::recv_buf(&s).unwrap(), before);
}

#[test]
fn sender_applies_sbuf_request_to_sndbuf() {
    let limits = sockopt::buf_limits().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let _s = l.accept().unwrap();
    let mut tx = DrsSendStream::new(128 * 1024, limits, 2 << 20);
    let reply = tx.on_sbuf_request(&c, Instant::now(), 9, 1 << 20).unwrap();
    assert_eq!(reply, 1 << 20);
    assert_eq!(sockopt::send_buf(&c).unwrap(), 2 << 20);
    let reply = tx
        .on_sbuf_request(&c, Instant::now(), 10, 64 << 20)
        .unwrap();
    assert_eq!(reply, 2 << 20, "capped at the sender's max");
    tx.observe(&c, Instant::now() + Duration::from_millis(1))
        .unwrap();
    assert!(tx.limits_report().is_some());
}

/// A loopback listener under `Drs` with the namespace's limits and an 8 MiB DRS ceiling.
fn drs_listener() -> (TcpListener, sockopt::BufLimits, u64) {
    let limits = sockopt::buf_limits().unwrap();
    let max = drs_max_buf(&limits, 8 << 20, false);
    let l = listen_with(
        "127.0.0.1:0".parse().unwrap(),
        BufferPolicy::Drs,
        &limits,
        max,
    )
    .unwrap();
    (l, limits, max)
}
