//! In-band SBUF (descriptors 0x02 request / 0x01 echo) on MODE E connections, each side against a hand-written
//! peer, and both engine sides together under DRS.

use std::sync::Arc;
use std::time::Duration;

use drsftp_proto::mode_e::{desc, Block, Header, Limits, HEADER_LEN};
use drsftp_tune::BufferPolicy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::data::{connect, recv_mode_e, send_mode_e};

fn inband(policy: BufferPolicy) -> DataOpts {
    DataOpts {
        buffer: policy,
        inband_sbuf: true,
        drs_max: 8 << 20,
        ..DataOpts::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sender_applies_request_and_echoes_between_blocks() {
    let opts = inband(BufferPolicy::Kernel);
    let (tx, mut rx) = pairs(1, &opts).await;
    let data = random(8 << 20, 30);
    let send = tokio::spawn({
        let (opts, data) = (opts.clone(), data.clone());
        async move {
            send_mode_e(
                tx,
                MemFile::new(data),
                vec![0..u64::MAX],
                0,
                &opts,
                Arc::new(Progress::new()),
            )
            .await
        }
    });
    let mut s = rx.pop().unwrap();
    s.write_all(&Header::sbuf_request(1 << 20, 42).encode())
        .await
        .unwrap();
    let limits = Limits {
        sbuf: true,
        ..Limits::default()
    };
    let mut got = vec![0u8; data.len()];
    let mut echo = None;
    let mut b = [0u8; HEADER_LEN];
    loop {
        s.read_exact(&mut b).await.unwrap();
        match Header::decode(&b).classify(&limits).unwrap() {
            Block::SbufEcho { size, id } => echo = Some((size, id)),
            Block::Data {
                offset, count, eof, ..
            } => {
                let o = offset as usize;
                s.read_exact(&mut got[o..o + count as usize]).await.unwrap();
                if eof.is_some() {
                    break;
                }
            }
            other => panic!("{other:?}"),
        }
    }
    let r = send.await.unwrap().unwrap();
    assert_eq!(r.bytes, data.len() as u64);
    assert!(got == data);
    let (size, id) = echo.expect("no SBUF echo");
    assert_eq!(id, 42);
    assert!(size >= 64 * 1024, "echoed size {size}");
}

#[tokio::test(flavor = "multi_thread")]
async fn receiver_sends_probe_and_takes_echo() {
    let opts = inband(BufferPolicy::Drs);
    let (addr, conns) = accepting(&opts).await;
    let dst = MemFile::empty();
    let recv = tokio::spawn({
        let (opts, dst) = (opts.clone(), dst.clone());
        async move { recv_mode_e(conns, dst, 0, &opts, Arc::new(Progress::new())).await }
    });
    let mut c = connect(addr, &opts).await.unwrap();
    let data = random(4 << 20, 31);
    let block = |i: usize| {
        let mut v = Header::data((i << 20) as u64, 1 << 20).encode().to_vec();
        v.extend_from_slice(&data[i << 20..(i + 1) << 20]);
        v
    };
    c.write_all(&block(0)).await.unwrap();
    // The receiver's DRS announces its buffer with a probe once data flows.
    let mut b = [0u8; HEADER_LEN];
    tokio::time::timeout(Duration::from_secs(10), c.read_exact(&mut b))
        .await
        .expect("no SBUF request")
        .unwrap();
    let h = Header::decode(&b);
    assert_eq!(h.descriptor, desc::SBUF, "{h}");
    assert!(h.count > 0);
    c.write_all(&Header::sbuf_echo(h.count, h.offset).encode())
        .await
        .unwrap();
    for i in 1..4 {
        c.write_all(&block(i)).await.unwrap();
    }
    c.write_all(&Header::eof(1).encode()).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), recv)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(r.bytes, 4 << 20);
    assert!(dst.bytes() == data);
    assert!(r.peak_buffer > 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn drs_inband_both_engine_sides() {
    let opts = inband(BufferPolicy::Drs);
    let (tx, rx) = pairs(2, &opts).await;
    let data = random(32 << 20, 32);
    let (s, r) = mode_e_copy(tx, rx, &data, &opts).await;
    assert_eq!((s.reusable.len(), r.reusable.len()), (2, 2));
    // A second transfer on the same sockets: no stray reverse bytes may confuse either side.
    let data2 = random(8 << 20, 33);
    let dst2 = MemFile::empty();
    mode_e(
        s.reusable,
        queued(r.reusable),
        MemFile::new(data2.clone()),
        dst2.clone(),
        vec![0..u64::MAX],
        0,
        0,
        &opts,
    )
    .await;
    assert!(dst2.bytes() == data2);
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_on_the_reverse_direction_fails_the_sender() {
    let opts = inband(BufferPolicy::Kernel);
    let (tx, mut rx) = pairs(2, &opts).await;
    let mut s = rx.pop().unwrap();
    // A data header travelling receiver -> sender. Nothing is read, so the sender cannot finish first.
    s.write_all(&Header::data(0, 0).encode()).await.unwrap();
    let r = tokio::time::timeout(
        Duration::from_secs(20),
        send_mode_e(
            tx,
            MemFile::new(random(32 << 20, 34)),
            vec![0..u64::MAX],
            0,
            &opts,
            Arc::new(Progress::new()),
        ),
    )
    .await
    .expect("sender hung");
    assert!(matches!(r, Err(crate::data::DataError::Header(_))), "{r:?}");
}
