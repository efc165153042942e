//! MODE E over loopback: parallel streams, ERET/ESTO offsets, empty files, socket reuse, and completion without
//! TCP EOF.

use std::sync::Arc;
use std::time::Duration;

use drsftp_proto::mode_e::{Header, HEADER_LEN};
use drsftp_tune::BufferPolicy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::data::{connect, recv_mode_e, send_mode_e, DataError};

#[tokio::test(flavor = "multi_thread")]
async fn four_streams_32mib_out_of_order() {
    let opts = DataOpts::default();
    let data = random(32 << 20, 10);
    let src = MemFile::new(data.clone());
    let dst = MemFile::empty();
    let (tx, rx) = pairs(4, &opts).await;
    let (s, r) = mode_e(
        tx,
        queued(rx),
        src,
        dst.clone(),
        vec![0..u64::MAX],
        0,
        0,
        &opts,
    )
    .await;
    assert_eq!((s.bytes, r.bytes), (32 << 20, 32 << 20));
    assert_eq!((s.streams, r.streams), (4, 4));
    assert_eq!(r.ranges.ranges(), &[0..32 << 20]);
    assert_eq!((s.reusable.len(), r.reusable.len()), (4, 4));
    let got = dst.bytes();
    assert_eq!(checksum(&got), checksum(&data));
    assert!(got == data);
    let w = dst.write_offsets();
    assert!(
        w.windows(2).any(|p| p[1] < p[0]),
        "blocks arrived in order: {w:?}"
    );
    assert!(r.peak_buffer > 0 && s.peak_buffer > 0);
    // The window meter reads the receiving sockets' advertised windows; a sender has none.
    assert!(r.peak_window > 0 && s.peak_window == 0, "{}", r.peak_window);
}

#[tokio::test(flavor = "multi_thread")]
async fn eret_wire_sub_and_esto_wire_add() {
    let opts = DataOpts {
        block_size: 100_000,
        ..DataOpts::default()
    };
    let data = random(5 << 20, 11);
    // ERET P 1000 3000000: wire offsets start at 0; ESTO A 7: they land at 7 + wire offset.
    let (tx, rx) = pairs(3, &opts).await;
    let dst = MemFile::empty();
    let (s, r) = mode_e(
        tx,
        queued(rx),
        MemFile::new(data.clone()),
        dst.clone(),
        vec![1000..3_001_000],
        1000,
        7,
        &opts,
    )
    .await;
    assert_eq!(
        s.ranges.ranges(),
        &[1000..3_001_000],
        "sender reports file offsets"
    );
    assert_eq!(r.ranges.ranges(), &[7..3_000_007]);
    let got = dst.bytes();
    assert_eq!(got.len(), 3_000_007);
    assert!(got[7..] == data[1000..3_001_000]);
    assert!(dst.write_offsets().iter().all(|&o| o >= 7));
}

#[tokio::test(flavor = "multi_thread")]
async fn restart_ranges_and_range_past_eof() {
    let opts = DataOpts {
        block_size: 64 * 1024,
        ..DataOpts::default()
    };
    let data = random(1_000_000, 12);
    let (tx, rx) = pairs(2, &opts).await;
    let dst = MemFile::new(vec![0xAA; 1_000_000]);
    // Overlapping input ranges are merged; the last one runs past EOF and stops there.
    let (s, r) = mode_e(
        tx,
        queued(rx),
        MemFile::new(data.clone()),
        dst.clone(),
        vec![900_000..5_000_000, 10..300_000, 200_000..400_000],
        0,
        0,
        &opts,
    )
    .await;
    let want = [10..400_000, 900_000..1_000_000];
    assert_eq!(s.ranges.ranges(), &want);
    assert_eq!(r.ranges.ranges(), &want);
    let got = dst.bytes();
    assert!(got[10..400_000] == data[10..400_000]);
    assert!(got[400_000..900_000].iter().all(|&b| b == 0xAA));
    assert!(got[900_000..] == data[900_000..]);
}

#[tokio::test(flavor = "multi_thread")]
async fn zero_length_file_sends_eof_and_eods() {
    let opts = DataOpts::default();
    let (tx, rx) = pairs(3, &opts).await;
    let dst = MemFile::empty();
    let (s, r) = mode_e(
        tx,
        queued(rx),
        MemFile::empty(),
        dst.clone(),
        vec![0..u64::MAX],
        0,
        0,
        &opts,
    )
    .await;
    assert_eq!((s.bytes, r.bytes, r.streams), (0, 0, 3));
    assert_eq!(r.reusable.len(), 3);
    assert!(dst.bytes().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn eof_header_wire_format_matches_globus() {
    // One stream, empty file: exactly EOF|EOD with the count in the offset field (globus-peer.md §5.3).
    let opts = DataOpts::default();
    let (tx, mut rx) = pairs(2, &opts).await;
    let p = Arc::new(Progress::new());
    let s = send_mode_e(tx, MemFile::empty(), vec![0..0], 0, &opts, p)
        .await
        .unwrap();
    assert_eq!(s.reusable.len(), 2);
    let mut b = [0u8; HEADER_LEN];
    rx[0].read_exact(&mut b).await.unwrap();
    assert_eq!(Header::decode(&b), Header::eof(2));
    rx[1].read_exact(&mut b).await.unwrap();
    assert_eq!(Header::decode(&b), Header::eod());
}

#[tokio::test(flavor = "multi_thread")]
async fn reusable_sockets_carry_a_second_transfer() {
    let opts = DataOpts {
        block_size: 128 * 1024,
        ..DataOpts::default()
    };
    let (tx, rx) = pairs(4, &opts).await;
    let a = random(3 << 20, 13);
    let (s, r) = mode_e_copy(tx, rx, &a, &opts).await;
    let b = random(5 << 20, 14);
    let dst_b = MemFile::empty();
    // The receiver gets its cached sockets pre-queued, as the drivers do; the channel stays open.
    let (ctx, crx) = mpsc::channel(8);
    for sock in r.reusable {
        ctx.send(sock).await.unwrap();
    }
    let (s2, r2) = mode_e(
        s.reusable,
        crx,
        MemFile::new(b.clone()),
        dst_b.clone(),
        vec![0..u64::MAX],
        0,
        0,
        &opts,
    )
    .await;
    assert!(dst_b.bytes() == b);
    assert_eq!((s2.reusable.len(), r2.reusable.len()), (4, 4));
    drop(ctx);
}

#[tokio::test(flavor = "multi_thread")]
async fn completes_on_eod_count_without_tcp_close() {
    // Hand-written sender on 2 connections that keeps both open (and the channel open) after EOF/EOD.
    let opts = DataOpts::default();
    let (addr, conns) = accepting(&opts).await;
    let mut c1 = connect(addr, &opts).await.unwrap();
    let mut c2 = connect(addr, &opts).await.unwrap();
    let dst = MemFile::empty();
    let recv = tokio::spawn({
        let dst = dst.clone();
        async move {
            recv_mode_e(
                conns,
                dst,
                0,
                &DataOpts::default(),
                Arc::new(Progress::new()),
            )
            .await
        }
    });
    let mut blk = Header::data(5, 3).encode().to_vec();
    blk.extend_from_slice(b"xyz");
    c2.write_all(&blk).await.unwrap();
    c2.write_all(&Header::eod().encode()).await.unwrap();
    let mut blk = Header::data(0, 5).encode().to_vec();
    blk.extend_from_slice(b"hello");
    blk.extend_from_slice(&Header::eof(2).encode());
    c1.write_all(&blk).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), recv)
        .await
        .expect("receiver waited for TCP EOF")
        .unwrap()
        .unwrap();
    assert_eq!(dst.bytes(), b"helloxyz");
    assert_eq!(r.reusable.len(), 2);
    // The senders' sockets are still open: each reusable end reads the next byte sent, no EOF.
    c1.write_all(b"!").await.unwrap();
    c2.write_all(b"!").await.unwrap();
    for mut s in r.reusable {
        let mut one = [0u8; 1];
        tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut one))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&one, b"!");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_queued_connections_come_back_reusable() {
    // 3 connections queued, the sender uses only 2 of them: the third is returned untouched.
    let opts = DataOpts::default();
    let (tx, rx) = pairs(3, &opts).await;
    let mut tx = tx;
    let spare_tx = tx.pop().unwrap();
    let data = random(1 << 20, 15);
    let (ctx, crx) = mpsc::channel(8);
    for s in rx {
        ctx.send(s).await.unwrap();
    }
    let (_, r) = mode_e(
        tx,
        crx,
        MemFile::new(data.clone()),
        MemFile::empty(),
        vec![0..u64::MAX],
        0,
        0,
        &opts,
    )
    .await;
    assert_eq!(r.streams, 3);
    assert_eq!(r.reusable.len(), 3);
    drop((ctx, spare_tx));
}

#[tokio::test(flavor = "multi_thread")]
async fn sender_failure_aborts_the_transfer() {
    let opts = DataOpts::default();
    let (tx, mut rx) = pairs(2, &opts).await;
    // The receiver of connection 1 goes away: the sender must fail, not hang.
    drop(rx.pop());
    let data = random(64 << 20, 16);
    let p = Arc::new(Progress::new());
    let fut = send_mode_e(tx, MemFile::new(data), vec![0..u64::MAX], 0, &opts, p);
    let r = tokio::time::timeout(Duration::from_secs(60), async {
        // Keep connection 0 drained so only connection 1 fails.
        let mut r0 = rx.pop().unwrap();
        let drain = async {
            let mut b = vec![0u8; 1 << 20];
            while r0.read(&mut b).await.map(|n| n > 0).unwrap_or(false) {}
        };
        tokio::select! { r = fut => r, _ = drain => panic!("drain ended first") }
    })
    .await
    .expect("sender hung");
    assert!(matches!(r, Err(DataError::Io(_))), "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn mode_e_with_fixed_and_drs_buffers() {
    for policy in [BufferPolicy::Fixed(2 << 20), BufferPolicy::Drs] {
        let opts = DataOpts {
            buffer: policy,
            drs_max: 8 << 20,
            ..DataOpts::default()
        };
        let data = random(16 << 20, 17);
        let (addr, conns) = accepting(&opts).await;
        let mut tx = vec![];
        for _ in 0..2 {
            tx.push(connect(addr, &opts).await.unwrap());
        }
        let dst = MemFile::empty();
        let (_, r) = mode_e(
            tx,
            conns,
            MemFile::new(data.clone()),
            dst.clone(),
            vec![0..u64::MAX],
            0,
            0,
            &opts,
        )
        .await;
        assert!(dst.bytes() == data, "{policy:?}");
        assert!(r.peak_buffer > 0, "{policy:?}");
        assert!(r.peak_window > 0, "{policy:?}: advertised windows read");
        if let BufferPolicy::Fixed(b) = policy {
            // Each stream counts its fixed buffer while it lives; the peak is 2 b when both lived at once, b when
            // one had already ended before the other's first block (seen on a loaded CI host).
            assert!(
                r.peak_buffer == 2 * b || r.peak_buffer == b,
                "two streams of {b}: peak {}",
                r.peak_buffer
            );
        }
    }
}

#[tokio::test]
async fn works_on_a_current_thread_runtime() {
    let opts = DataOpts::default();
    let data = random(2 << 20, 18);
    let (tx, rx) = pairs(2, &opts).await;
    let dst = MemFile::empty();
    mode_e(
        tx,
        queued(rx),
        MemFile::new(data.clone()),
        dst.clone(),
        vec![0..u64::MAX],
        0,
        0,
        &opts,
    )
    .await;
    assert!(dst.bytes() == data);
}

#[tokio::test(flavor = "multi_thread")]
async fn connect_refused_is_an_io_error() {
    let l = std::net::TcpListener::bind(lo()).unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let e = connect(addr, &DataOpts::default()).await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
}
