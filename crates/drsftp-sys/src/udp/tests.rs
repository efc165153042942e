//! Loopback tests of the UDP batching: GSO/sendmmsg delivery in order with and without GRO, mixed sizes, kernel
//! limits, buffer overflow drops, ppoll timing, kernel arrival timestamps, IPv6.

use super::*;
use std::net::UdpSocket;

fn pair() -> (UdpSocket, UdpSocket) {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    b.set_nonblocking(true).unwrap();
    crate::sockopt::set_recv_buf(&b, 4 << 20).unwrap();
    (a, b)
}

/// `n` datagrams of `size` bytes (the last `last` bytes), datagram i filled with byte i.
fn layout(n: usize, size: usize, last: usize) -> (Vec<u8>, Vec<usize>) {
    let mut buf = vec![];
    let mut lens = vec![];
    for i in 0..n {
        let l = if i + 1 == n { last } else { size };
        buf.extend(std::iter::repeat_n(i as u8, l));
        lens.push(l);
    }
    (buf, lens)
}

fn drain(b: &UdpSocket, batch: &mut RecvBatch, want: usize) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut got = vec![];
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while got.len() < want && std::time::Instant::now() < deadline {
        match batch.recv(b) {
            Ok(_) => got.extend(batch.datagrams().map(|(a, d)| (a.unwrap(), d.to_vec()))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                wait(b, true, false, Some(Duration::from_millis(50))).unwrap();
            }
            Err(e) => panic!("{e}"),
        }
    }
    got
}

#[test]
fn gso_and_mmsg_deliver_every_datagram_in_order() {
    for want_gso in [true, false] {
        for gro in [true, false] {
            let (a, b) = pair();
            if gro {
                enable_gro(&b);
            }
            enable_drop_counter(&b);
            let mut tx = BatchSender::new(&a, want_gso);
            // 100 equal datagrams and a short tail: GSO runs of ≤ 44 segments (65507 / 1472).
            let (buf, lens) = layout(101, 1472, 100);
            let dest = b.local_addr().unwrap();
            let sent = tx.send(&a, &dest, &buf, &lens).unwrap();
            assert_eq!(sent, 101);
            enable_timestamps(&b);
            let mut batch = RecvBatch::new(64, if gro { GRO_MAX_BYTES } else { 2048 });
            let got = drain(&b, &mut batch, 101);
            assert_eq!(got.len(), 101, "gso {want_gso} gro {gro}");
            for (i, (from, d)) in got.iter().enumerate() {
                assert_eq!(*from, a.local_addr().unwrap());
                assert_eq!(d.len(), lens[i]);
                assert!(d.iter().all(|&x| x == i as u8), "datagram {i}");
            }
            let s = tx.stats();
            eprintln!(
                "gso {want_gso} gro {gro}: {s:?}, off: {:?}",
                tx.gso_off_reason()
            );
            if tx.gso() {
                assert_eq!(s.gso_datagrams, 101, "{s:?}");
                assert!(s.gso_calls <= 4, "{s:?}");
            } else {
                assert_eq!(s.mmsg_datagrams, 101);
                assert!(s.mmsg_calls <= 2);
            }
            assert_eq!(batch.truncated(), 0);
        }
    }
}

#[test]
fn mixed_sizes_fall_back_to_mmsg_runs() {
    let (a, b) = pair();
    let mut tx = BatchSender::new(&a, true);
    let lens = [100usize, 200, 200, 200, 50, 300, 7];
    let mut buf = vec![];
    for (i, l) in lens.iter().enumerate() {
        buf.extend(std::iter::repeat_n(i as u8 + 1, *l));
    }
    let dest = b.local_addr().unwrap();
    assert_eq!(tx.send(&a, &dest, &buf, &lens).unwrap(), lens.len());
    let mut batch = RecvBatch::new(16, 2048);
    let got = drain(&b, &mut batch, lens.len());
    let sizes: Vec<usize> = got.iter().map(|(_, d)| d.len()).collect();
    assert_eq!(sizes, lens);
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, (_, d))| d.iter().all(|&x| x == i as u8 + 1)));
    assert!(
        tx.send(&a, &dest, &buf, &[buf.len() + 1]).is_err(),
        "lengths past the buffer"
    );
}

#[test]
fn run_lengths_respect_kernel_limits() {
    assert_eq!(gso_run(&[1472; 100]), 44);
    assert_eq!(gso_run(&[100; 100]), 64);
    assert_eq!(gso_run(&[100, 100, 50, 100]), 3);
    assert_eq!(gso_run(&[100, 200]), 1);
    assert_eq!(gso_run(&[9000; 10]), 7);
    assert_eq!(gso_run(&[0, 0]), 1);
}

#[test]
fn full_socket_buffer_reports_would_block_and_drops() {
    let (a, b) = pair();
    crate::sockopt::set_recv_buf(&b, 64 << 10).unwrap();
    a.set_nonblocking(true).unwrap();
    enable_drop_counter(&b);
    let mut tx = BatchSender::new(&a, false);
    let (buf, lens) = layout(1000, 1400, 1400);
    let dest = b.local_addr().unwrap();
    // Far more than the receiver's default buffer holds: some are dropped at its socket, which it reports.
    let mut sent = 0;
    for _ in 0..20 {
        match tx.send(&a, &dest, &buf, &lens) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(sent > 0);
    let mut batch = RecvBatch::new(32, 2048);
    let mut got = 0;
    loop {
        match batch.recv(&b) {
            Ok(_) => got += batch.datagrams().count(),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        got < sent,
        "got {got} of {sent}: the receive buffer should have overflowed"
    );
    // The count rides on the next datagram queued after the drops.
    a.send_to(b"last", dest).unwrap();
    let last = drain(&b, &mut batch, 1);
    assert_eq!(last.len(), 1);
    assert_eq!(batch.socket_drops() as usize, sent - got);
}

#[test]
fn wait_times_out_precisely_and_sees_data() {
    let (a, b) = pair();
    let t = std::time::Instant::now();
    let r = wait(&b, true, false, Some(Duration::from_micros(300))).unwrap();
    assert!(!r.readable);
    let el = t.elapsed();
    assert!(
        el >= Duration::from_micros(300) && el < Duration::from_millis(50),
        "{el:?}"
    );
    a.send_to(b"x", b.local_addr().unwrap()).unwrap();
    let r = wait(&b, true, false, Some(Duration::from_secs(5))).unwrap();
    assert!(r.readable);
    assert!(
        wait(&a, false, true, Some(Duration::ZERO))
            .unwrap()
            .writable
    );
    set_timer_slack(1_000).unwrap();
}

#[test]
fn ipv6_loopback_round_trip() {
    let Ok(a) = UdpSocket::bind("[::1]:0") else {
        eprintln!("SKIPPED ipv6_loopback_round_trip: no IPv6 loopback");
        return;
    };
    let b = UdpSocket::bind("[::1]:0").unwrap();
    b.set_nonblocking(true).unwrap();
    let mut tx = BatchSender::new(&a, true);
    let (buf, lens) = layout(3, 500, 20);
    assert_eq!(
        tx.send(&a, &b.local_addr().unwrap(), &buf, &lens).unwrap(),
        3
    );
    let mut batch = RecvBatch::new(8, GRO_MAX_BYTES);
    let got = drain(&b, &mut batch, 3);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].0, a.local_addr().unwrap());
}

#[test]
fn arrival_times_come_from_the_kernel() {
    // The stamps are CLOCK_REALTIME, which may be stepped while the test runs (it failed once on a loaded CI host
    // with the second stamp before the first): up to three attempts, each checked in full.
    let mut last = String::new();
    for _ in 0..3 {
        match arrival_attempt() {
            Ok(()) => return,
            Err(e) => last = e,
        }
    }
    panic!("kernel arrival stamps wrong in three attempts: {last}");
}

fn arrival_attempt() -> Result<(), String> {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    b.set_nonblocking(true).unwrap();
    assert!(enable_timestamps(&b) && enable_gro(&b) && enable_drop_counter(&b));
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    a.send_to(b"first", b.local_addr().unwrap()).unwrap();
    // Read late: the stamp still says when it arrived.
    std::thread::sleep(Duration::from_millis(30));
    a.send_to(b"second", b.local_addr().unwrap()).unwrap();
    let mut batch = RecvBatch::new(8, GRO_MAX_BYTES);
    wait(&b, true, false, Some(Duration::from_secs(2))).unwrap();
    batch.recv(&b).unwrap();
    let got: Vec<_> = batch
        .datagrams_timed()
        .map(|(_, t, d)| (t.unwrap(), d.to_vec()))
        .collect();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].1, b"first");
    let gap = got[1].0.checked_sub(got[0].0);
    if gap.is_none_or(|g| g < Duration::from_millis(25)) {
        return Err(format!("stamps {:?} then {:?}", got[0].0, got[1].0));
    }
    if got[0].0 < t0 || got[0].0 >= t0 + Duration::from_secs(1) {
        return Err(format!(
            "first stamp {:?}, clock before sending {t0:?}",
            got[0].0
        ));
    }
    Ok(())
}
