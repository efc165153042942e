//! Tests of the blast wire format: encode/decode round trips, rejects of malformed and foreign datagrams.

use super::*;

#[test]
fn mtu_and_params() {
    assert_eq!(payload_size_for_mtu(1500).unwrap(), 1436);
    assert!(payload_size_for_mtu(64).is_err());
    let p = TransferParams::new(7, 10_000, 1436).unwrap();
    assert_eq!(p.total_packets(), 7);
    assert_eq!(p.packet_len(6), 10_000 - 6 * 1436);
    assert_eq!(p.packet_len(0), 1436);
    assert_eq!(p.wire_len(), 1500);
    assert_eq!(TransferParams::new(7, 0, 1436).unwrap().total_packets(), 0);
    assert!(TransferParams::new(7, u64::MAX, 1).is_err());
}

#[test]
fn data_round_trip_and_rejects() {
    let mut out = vec![];
    let pkt = DataPacket {
        seq: 42,
        tx: 9,
        send_ts: 1234,
        ack_now: true,
        payload: b"hello",
    };
    encode_data(&mut out, 77, &pkt);
    assert_eq!(out.len(), DATA_HEADER_LEN + 5);
    assert_eq!(decode(&out, 77), Ok(Message::Data(pkt)));
    assert_eq!(decode(&out, 78), Err(Reject::WrongTransfer));
    assert_eq!(decode(&out[..20], 77), Err(Reject::Truncated));
    assert_eq!(decode(&out[..40], 77), Err(Reject::BadCrc));
    let mut bad = out.clone();
    bad[40] ^= 1;
    assert_eq!(decode(&bad, 77), Err(Reject::BadCrc));
    bad = out.clone();
    bad[0] = 0;
    assert_eq!(decode(&bad, 77), Err(Reject::BadMagic));
    bad = out.clone();
    bad[2] = 9;
    assert_eq!(decode(&bad, 77), Err(Reject::BadVersion));
    bad = out.clone();
    bad[3] = 9;
    assert_eq!(decode(&bad, 77), Err(Reject::UnknownKind));
    // A self-consistent datagram whose length field lies.
    bad = out.clone();
    bad[33] = 4;
    seal(&mut bad);
    assert_eq!(decode(&bad, 77), Err(Reject::BadLength));
    bad = out.clone();
    bad[34] = 0x80;
    seal(&mut bad);
    assert_eq!(decode(&bad, 77), Err(Reject::Malformed));
}

fn runs_body(runs: &[u64]) -> Vec<u8> {
    let mut b = vec![];
    for &r in runs {
        put_varint(&mut b, r);
    }
    b
}

#[test]
fn ack_round_trip_runs_and_bitmap() {
    let summary = AckSummary {
        generation: 3,
        cum: 10,
        distinct: 20,
        rx_total: 25,
        dups: 2,
        echo: Some(EchoInfo {
            tx: 99,
            echo_ts: 5,
            hold_us: 7,
        }),
        sample: Some(IntervalSample {
            tx: 64,
            pkts: 60,
            rx_us: 1000,
            send_us: 900,
        }),
    };
    let body = runs_body(&[1, 3, 2, 300]);
    let ack = AckPacket {
        summary,
        chunk_index: 0,
        chunk_count: 2,
        start: 10,
        span: 306,
        body: AckBody::Runs(&body),
    };
    let mut out = vec![];
    encode_ack(&mut out, 5, &ack);
    let Ok(Message::Ack(got)) = decode(&out, 5) else {
        panic!()
    };
    assert_eq!(got, ack);
    assert_eq!(
        got.held_runs().collect::<Vec<_>>(),
        vec![(11, 14), (16, 316)]
    );

    let bm = [0b1010_0110u8, 0b0000_0011];
    let ack2 = AckPacket {
        body: AckBody::Bitmap(&bm),
        span: 10,
        start: 100,
        chunk_index: 1,
        ..ack
    };
    out.clear();
    encode_ack(&mut out, 5, &ack2);
    let Ok(Message::Ack(got)) = decode(&out, 5) else {
        panic!()
    };
    assert_eq!(
        got.held_runs().collect::<Vec<_>>(),
        vec![(101, 103), (105, 106), (107, 110)]
    );
}

#[test]
fn ack_body_validation() {
    let mk = |span: u64, body: AckBody<'_>| {
        let mut out = vec![];
        encode_ack(
            &mut out,
            1,
            &AckPacket {
                summary: AckSummary::default(),
                chunk_index: 0,
                chunk_count: 1,
                start: 0,
                span,
                body,
            },
        );
        decode(&out, 1).map(|_| ())
    };
    assert_eq!(mk(5, AckBody::Runs(&runs_body(&[2, 3]))), Ok(()));
    assert_eq!(
        mk(6, AckBody::Runs(&runs_body(&[2, 3]))),
        Err(Reject::Malformed)
    );
    assert_eq!(
        mk(4, AckBody::Runs(&runs_body(&[2, 3]))),
        Err(Reject::Malformed)
    );
    assert_eq!(mk(5, AckBody::Runs(&runs_body(&[0, 5]))), Ok(()));
    assert_eq!(
        mk(5, AckBody::Runs(&runs_body(&[5, 0]))),
        Err(Reject::Malformed)
    );
    assert_eq!(
        mk(5, AckBody::Runs(&[0x82, 0x00, 3])),
        Err(Reject::Malformed)
    ); // overlong
    assert_eq!(mk(1, AckBody::Runs(&[0xff; 11])), Err(Reject::Malformed));
    assert_eq!(mk(9, AckBody::Bitmap(&[0xff, 0x01])), Ok(()));
    assert_eq!(
        mk(9, AckBody::Bitmap(&[0xff, 0x03])),
        Err(Reject::Malformed)
    );
    assert_eq!(mk(9, AckBody::Bitmap(&[0xff])), Err(Reject::Malformed));
    assert_eq!(mk(0, AckBody::None), Ok(()));
    assert_eq!(mk(1, AckBody::None), Err(Reject::Malformed));
}

#[test]
fn varints() {
    for v in [0u64, 1, 127, 128, 16_383, 16_384, u64::MAX] {
        let mut b = vec![];
        put_varint(&mut b, v);
        assert_eq!(b.len(), varint_len(v));
        let mut pos = 0;
        assert_eq!(get_varint(&b, &mut pos), Ok(v));
        assert_eq!(pos, b.len());
    }
}
