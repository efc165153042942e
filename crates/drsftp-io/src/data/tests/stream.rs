//! Stream mode: send -> receive over loopback, partial ranges, ranges past EOF, and the buffer policies.

use std::sync::Arc;

use drsftp_tune::BufferPolicy;

use super::*;
use crate::data::{recv_stream, send_stream};

async fn run(
    src: Vec<u8>,
    range: std::ops::Range<u64>,
    offset: u64,
    opts: DataOpts,
) -> (DataReport, DataReport, Arc<MemFile>) {
    let (mut tx, mut rx) = pairs(1, &opts).await;
    let src = MemFile::new(src);
    let dst = MemFile::empty();
    let (ptx, prx) = (Arc::new(Progress::new()), Arc::new(Progress::new()));
    let (s, r) = tokio::try_join!(
        send_stream(tx.pop().unwrap(), src, range, &opts, ptx.clone()),
        recv_stream(rx.pop().unwrap(), dst.clone(), offset, &opts, prx.clone()),
    )
    .unwrap();
    assert_eq!(ptx.bytes(), s.bytes);
    assert_eq!(prx.bytes(), r.bytes);
    assert_eq!(s.streams, 1);
    assert!(s.reusable.is_empty() && r.reusable.is_empty());
    (s, r, dst)
}

#[tokio::test(flavor = "multi_thread")]
async fn stream_8mib_roundtrip() {
    let data = random(8 << 20, 1);
    let (s, r, dst) = run(data.clone(), 0..u64::MAX, 0, DataOpts::default()).await;
    assert_eq!(s.bytes, 8 << 20);
    assert_eq!(r.bytes, 8 << 20);
    assert_eq!(r.ranges.ranges(), &[0..8 << 20]);
    let got = dst.bytes();
    assert_eq!(checksum(&got), checksum(&data));
    assert!(got == data);
    assert!(r.peak_buffer > 0, "kernel rcv_space observed");
}

#[tokio::test(flavor = "multi_thread")]
async fn stream_partial_range_lands_at_offset() {
    let data = random(3 << 20, 2);
    let (s, r, dst) = run(data.clone(), 1000..2_000_000, 5000, DataOpts::default()).await;
    assert_eq!(s.ranges.ranges(), &[1000..2_000_000]);
    assert_eq!(r.ranges.ranges(), &[5000..5000 + 1_999_000]);
    let got = dst.bytes();
    assert!(got[5000..] == data[1000..2_000_000]);
}

#[tokio::test(flavor = "multi_thread")]
async fn stream_range_past_eof_stops_at_eof() {
    let data = random(700_001, 3);
    let (s, r, dst) = run(data.clone(), 100..10 << 20, 0, DataOpts::default()).await;
    assert_eq!(s.bytes, 700_001 - 100);
    assert_eq!(r.bytes, s.bytes);
    assert!(dst.bytes() == data[100..]);
}

#[tokio::test(flavor = "multi_thread")]
async fn stream_empty_file() {
    let (s, r, dst) = run(vec![], 0..u64::MAX, 0, DataOpts::default()).await;
    assert_eq!((s.bytes, r.bytes), (0, 0));
    assert!(dst.bytes().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn stream_with_fixed_and_drs_buffers() {
    for policy in [BufferPolicy::Fixed(1 << 20), BufferPolicy::Drs] {
        let opts = DataOpts {
            buffer: policy,
            drs_max: 8 << 20,
            ..DataOpts::default()
        };
        let data = random(6 << 20, 4);
        let (_, r, dst) = run(data.clone(), 0..u64::MAX, 0, opts).await;
        assert!(dst.bytes() == data, "{policy:?}");
        assert!(r.peak_buffer > 0, "{policy:?}: buffer gauge");
        if policy == BufferPolicy::Fixed(1 << 20) {
            assert_eq!(r.peak_buffer, 1 << 20);
        }
    }
}
