//! `DataOpts::crc32c`: the per-block CRCs the engine records while moving data combine into the whole-file CRC32C
//! on both sides (out-of-order MODE E blocks, stream mode), and anything but an exact tiling of `0..end` (a gap, a
//! block sent twice, a range not starting at 0) gives `None` so the caller re-reads instead.

use std::sync::Arc;

use drsftp_proto::mode_e::Header;
use tokio::io::AsyncWriteExt;

use super::*;
use crate::data::{connect, recv_mode_e, recv_stream, send_stream};

fn on() -> DataOpts {
    DataOpts {
        crc32c: true,
        block_size: 64 << 10,
        ..DataOpts::default()
    }
}

fn block(descriptor: u8, offset: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = Header {
        descriptor,
        count: payload.len() as u64,
        offset,
    }
    .encode()
    .to_vec();
    v.extend_from_slice(payload);
    v
}

/// A hand-written sender: each connection carries the given (offset, len) blocks of `data` in that order, then
/// EOD; connection 0 ends with EOF|EOD announcing them all.
async fn feed(data: &[u8], conns_blocks: Vec<Vec<(usize, usize)>>) -> DataReport {
    let opts = on();
    let (addr, conns) = accepting(&opts).await;
    let dst = MemFile::empty();
    let n = conns_blocks.len() as u64;
    let recv = tokio::spawn({
        let dst = dst.clone();
        async move { recv_mode_e(conns, dst, 0, &on(), Arc::new(Progress::new())).await }
    });
    let mut keep = vec![];
    for (i, blocks) in conns_blocks.into_iter().enumerate() {
        let mut c = connect(addr, &opts).await.unwrap();
        for (off, len) in blocks {
            c.write_all(&block(0, off as u64, &data[off..off + len]))
                .await
                .unwrap();
        }
        let last = if i == 0 {
            Header::eof(n)
        } else {
            Header::eod()
        };
        c.write_all(&last.encode()).await.unwrap();
        keep.push(c);
    }
    let r = recv.await.unwrap().expect("receive");
    drop(keep);
    r
}

fn whole(data: &[u8]) -> Option<u32> {
    Some(crc32c::crc32c(data))
}

#[tokio::test(flavor = "multi_thread")]
async fn out_of_order_blocks_combine_to_the_whole_file_crc() {
    let data = random(1_000_000, 11);
    // Two connections, blocks of odd sizes in reverse and interleaved order.
    let c0 = vec![(700_000, 300_000), (0, 1), (250_001, 50_000)];
    let c1 = vec![(300_001, 399_999), (1, 250_000)];
    let r = feed(&data, vec![c0, c1]).await;
    assert_eq!(r.bytes, data.len() as u64);
    assert_eq!(r.crc32c, whole(&data));
}

#[tokio::test(flavor = "multi_thread")]
async fn gaps_overlaps_and_offsets_give_none() {
    let data = random(100_000, 12);
    // A gap at 50_000..50_100.
    let r = feed(&data, vec![vec![(0, 50_000), (50_100, 49_900)]]).await;
    assert_eq!(r.crc32c, None);
    // The same block twice: the file is right, but the CRC of the pieces is not the file's.
    let r = feed(&data, vec![vec![(0, 60_000)], vec![(50_000, 50_000)]]).await;
    assert_eq!(r.crc32c, None);
    // Not starting at 0 (a restart): the CRC covers 0..end only.
    let r = feed(&data, vec![vec![(10, 99_990)]]).await;
    assert_eq!(r.crc32c, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn engine_send_and_receive_both_report_the_crc() {
    let data = random(8 << 20, 13);
    let (tx, rx) = pairs(4, &on()).await;
    let src = MemFile::new(data.clone());
    let dst = MemFile::empty();
    let (s, r) = mode_e(
        tx,
        queued(rx),
        src,
        dst.clone(),
        vec![0..u64::MAX],
        0,
        0,
        &on(),
    )
    .await;
    assert!(dst.bytes() == data);
    assert_eq!(s.crc32c, whole(&data), "sender");
    assert_eq!(r.crc32c, whole(&data), "receiver");
    // Off by default.
    let (tx, rx) = pairs(2, &DataOpts::default()).await;
    let (s, r) = mode_e(
        tx,
        queued(rx),
        MemFile::new(data.clone()),
        MemFile::empty(),
        vec![0..u64::MAX],
        0,
        0,
        &DataOpts::default(),
    )
    .await;
    assert_eq!((s.crc32c, r.crc32c), (None, None));
    // A section (ERET-like range not from 0): no whole-file CRC.
    let (tx, rx) = pairs(2, &on()).await;
    let (s, _) = mode_e(
        tx,
        queued(rx),
        MemFile::new(data.clone()),
        MemFile::empty(),
        vec![100..5000],
        0,
        0,
        &on(),
    )
    .await;
    assert_eq!(s.crc32c, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn stream_mode_reports_the_crc() {
    let o = on();
    let data = random(3 << 20, 14);
    let (mut tx, mut rx) = pairs(1, &o).await;
    let dst = MemFile::empty();
    let (ptx, prx) = (Arc::new(Progress::new()), Arc::new(Progress::new()));
    let (s, r) = tokio::try_join!(
        send_stream(
            tx.pop().unwrap(),
            MemFile::new(data.clone()),
            0..u64::MAX,
            &o,
            ptx
        ),
        recv_stream(rx.pop().unwrap(), dst.clone(), 0, &o, prx),
    )
    .unwrap();
    assert_eq!(s.crc32c, whole(&data));
    assert_eq!(r.crc32c, whole(&data));
    let (_, r) = {
        let (mut tx, mut rx) = pairs(1, &o).await;
        let (ptx, prx) = (Arc::new(Progress::new()), Arc::new(Progress::new()));
        tokio::try_join!(
            send_stream(
                tx.pop().unwrap(),
                MemFile::new(vec![]),
                0..u64::MAX,
                &o,
                ptx
            ),
            recv_stream(rx.pop().unwrap(), MemFile::empty(), 0, &o, prx),
        )
        .unwrap()
    };
    assert_eq!(r.crc32c, Some(0), "empty file");
}
