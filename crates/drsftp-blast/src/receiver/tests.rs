//! Unit tests of the sans-IO blast receiver: acks, duplicates, resume, transmission spans and one-way delay.
use super::*;
use crate::wire::{encode_data, DataPacket};

fn data(params: &TransferParams, seq: u64, tx: u32, ack_now: bool) -> Vec<u8> {
    let payload = vec![seq as u8; params.packet_len(seq)];
    let mut out = vec![];
    encode_data(
        &mut out,
        params.transfer_id,
        &DataPacket {
            seq,
            tx,
            send_ts: tx * 10,
            ack_now,
            payload: &payload,
        },
    );
    out
}

fn acks(r: &mut Receiver) -> Vec<AckSummary> {
    let mut v = vec![];
    while let Some(d) = r.poll_transmit() {
        if let Ok(Message::Ack(a)) = wire::decode(&d, r.params().transfer_id) {
            v.push(a.summary);
        }
    }
    v
}

#[test]
fn acks_every_n_and_on_request_and_delay() {
    let t0 = Instant::now();
    let p = TransferParams::new(9, 100 * 100, 100).unwrap();
    let cfg = ReceiverConfig {
        ack_every: 10,
        ..Default::default()
    };
    let mut r = Receiver::new(p, cfg, t0).unwrap();
    for i in 0..9u64 {
        let d = data(&p, i, i as u32, false);
        assert!(matches!(
            r.handle_datagram(t0, &d),
            Ok(RxEvent::Data { .. })
        ));
    }
    assert!(acks(&mut r).is_empty());
    assert_eq!(r.poll_timeout(), Some(t0 + Duration::from_millis(10)));
    let d = data(&p, 9, 9, false);
    r.handle_datagram(t0, &d).unwrap();
    let a = acks(&mut r);
    assert_eq!(a.len(), 1);
    assert_eq!((a[0].cum, a[0].distinct), (10, 10));
    let s = a[0].sample.unwrap();
    assert_eq!((s.tx, s.pkts), (9, 9));
    // Sender asks for an ack.
    let d = data(&p, 20, 10, true);
    r.handle_datagram(t0, &d).unwrap();
    assert_eq!(acks(&mut r).len(), 1);
    // Delayed ack.
    let d = data(&p, 30, 11, false);
    r.handle_datagram(t0, &d).unwrap();
    r.handle_timeout(t0 + Duration::from_millis(10));
    assert_eq!(acks(&mut r).len(), 1);
    assert_eq!(r.poll_timeout(), Some(t0 + Duration::from_millis(1500)));
}

#[test]
fn duplicates_and_completion() {
    let t0 = Instant::now();
    let p = TransferParams::new(9, 3 * 100 + 7, 100).unwrap();
    let mut r = Receiver::new(p, ReceiverConfig::default(), t0).unwrap();
    for i in 0..4u64 {
        r.handle_datagram(t0, &data(&p, i, i as u32, false))
            .unwrap();
    }
    assert!(r.is_complete());
    let d = r.poll_transmit().unwrap();
    assert!(matches!(wire::decode(&d, 9), Ok(Message::Complete(_))));
    assert_eq!(
        r.handle_datagram(t0, &data(&p, 2, 9, false)),
        Ok(RxEvent::Duplicate { seq: 2 })
    );
    assert!(r.poll_transmit().is_none()); // rate-limited
    r.handle_datagram(t0 + Duration::from_millis(20), &data(&p, 2, 10, false))
        .unwrap();
    assert!(r.poll_transmit().is_some());
    assert_eq!(r.stats().duplicates, 2);
    // Short last packet must have the exact length.
    let mut bad = data(&p, 3, 1, false);
    bad.truncate(bad.len() - 1);
    assert!(r.handle_datagram(t0, &bad).is_err());
}

#[test]
fn transmissions_span_counts_the_datagrams_lost_on_the_way() {
    let t0 = Instant::now();
    let p = TransferParams::new(9, 100 * 100, 100).unwrap();
    let mut r = Receiver::new(p, ReceiverConfig::default(), t0).unwrap();
    assert_eq!(r.transmissions(), 0);
    // Transmissions 5..=14 of packets 0..10, with 7 and 11 lost and 9 arriving before 8; the numbers wrap.
    let base = u32::MAX - 6;
    for tx in [5u32, 6, 9, 8, 10, 12, 13, 14] {
        r.handle_datagram(
            t0,
            &data(&p, u64::from(tx - 5), base.wrapping_add(tx), false),
        )
        .unwrap();
    }
    assert_eq!(r.transmissions(), 10);
    assert_eq!(r.transmissions() - r.stats().datagrams, 2);
}

#[test]
fn one_way_delay_rises_with_a_queue_whatever_the_clock_base() {
    let t0 = Instant::now();
    let p = TransferParams::new(9, 100 * 100, 100).unwrap();
    let mut r = Receiver::new(p, ReceiverConfig::default(), t0).unwrap();
    assert_eq!(r.last_owd_us(), None);
    // `data` stamps tx × 10 µs: tx 1000 left at 10 ms on the sender's clock, 1100 at 11 ms.
    r.handle_datagram(t0 + Duration::from_millis(40), &data(&p, 0, 1000, false))
        .unwrap();
    let a = r.last_owd_us().unwrap();
    // Sent 1 ms later, arrived 6 ms later: 5 ms more delay on the way.
    r.handle_datagram(t0 + Duration::from_millis(46), &data(&p, 1, 1100, false))
        .unwrap();
    let b = r.last_owd_us().unwrap();
    assert_eq!(b - a, 5000);
    assert_eq!(a, 30_000, "40 ms on our clock less 10 ms on theirs");
}

#[test]
fn chunked_ack_covers_state() {
    let t0 = Instant::now();
    let n = 20_000u64;
    let p = TransferParams::new(1, n * 10, 10).unwrap();
    let cfg = ReceiverConfig {
        ack_every: 1_000_000,
        max_ack_chunks: 64,
        ..Default::default()
    };
    let mut r = Receiver::new(p, cfg, t0).unwrap();
    // Every third packet missing: runs are costly, bitmaps win.
    for i in (0..n).filter(|i| i % 3 != 0 || *i > 15_000) {
        r.handle_datagram(t0, &data(&p, i, i as u32, false))
            .unwrap();
    }
    r.handle_datagram(t0, &data(&p, 1, 1, true)).unwrap();
    let mut seen = Bitmap::new(n);
    let mut cum = 0;
    while let Some(d) = r.poll_transmit() {
        let Ok(Message::Ack(a)) = wire::decode(&d, 1) else {
            panic!()
        };
        assert!(d.len() <= 1472);
        cum = a.summary.cum;
        for (x, y) in a.held_runs() {
            seen.set_range(x, y);
        }
    }
    seen.set_range(0, cum);
    assert_eq!(&seen, r.bitmap());
}

#[test]
fn oversized_state_rotates_and_always_covers_the_newest() {
    let t0 = Instant::now();
    let n = 200_000u64;
    let p = TransferParams::new(1, n * 10, 10).unwrap();
    let cfg = ReceiverConfig {
        ack_every: 1_000_000,
        max_ack_chunks: 3,
        ..Default::default()
    };
    let mut r = Receiver::new(p, cfg, t0).unwrap();
    for i in (0..n).filter(|i| i % 3 != 0) {
        r.handle_datagram(t0, &data(&p, i, i as u32, false))
            .unwrap();
    }
    let mut seen = Bitmap::new(n);
    for round in 0..40 {
        r.handle_datagram(t0, &data(&p, 1, 1, true)).unwrap();
        let mut newest = false;
        let mut count = 0;
        while let Some(d) = r.poll_transmit() {
            let Ok(Message::Ack(a)) = wire::decode(&d, 1) else {
                panic!()
            };
            count += 1;
            newest |= a.start + a.span == n; // the last packet (n - 1) is held
            for (x, y) in a.held_runs() {
                seen.set_range(x, y);
            }
        }
        assert_eq!(count, 3);
        assert!(newest, "ack {round} misses the newest packets");
    }
    assert_eq!(&seen, r.bitmap());
}
