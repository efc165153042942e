//! The MODE E receiver against hand-written hostile or broken senders: absurd headers, early close, EOD count
//! mismatches. Every case must end with an error (never a panic, a hang or a huge allocation).

use std::sync::Arc;
use std::time::Duration;

use drsftp_proto::mode_e::{desc, Header, HeaderError};
use tokio::io::AsyncWriteExt;

use super::*;
use crate::data::{connect, recv_mode_e, DataError};

/// Send `bytes` on one connection (then close it if `close`) and return what the receiver made of it.
async fn feed(conns_bytes: Vec<(Vec<u8>, bool)>, opts: DataOpts) -> Result<DataReport, DataError> {
    let (addr, conns) = accepting(&opts).await;
    let dst = MemFile::empty();
    let recv = tokio::spawn({
        let opts = opts.clone();
        async move { recv_mode_e(conns, dst, 0, &opts, Arc::new(Progress::new())).await }
    });
    let mut keep = vec![];
    for (bytes, close) in conns_bytes {
        let mut c = connect(addr, &opts).await.unwrap();
        // The receiver may already have refused and closed: write errors are fine.
        let _ = c.write_all(&bytes).await;
        if close {
            let _ = c.shutdown().await;
        } else {
            keep.push(c);
        }
    }
    let r = tokio::time::timeout(Duration::from_secs(20), recv)
        .await
        .expect("receiver hung")
        .expect("receiver panicked");
    drop(keep);
    r
}

fn limited() -> DataOpts {
    DataOpts {
        max_block: 1 << 20,
        max_end: 1 << 30,
        ..DataOpts::default()
    }
}

fn hdr(descriptor: u8, count: u64, offset: u64) -> Vec<u8> {
    Header {
        descriptor,
        count,
        offset,
    }
    .encode()
    .to_vec()
}

#[tokio::test(flavor = "multi_thread")]
async fn absurd_headers_are_header_errors() {
    type Check = fn(&HeaderError) -> bool;
    let cases: Vec<(Vec<u8>, Check)> = vec![
        (hdr(0, 1 << 63, 0), |e| {
            matches!(e, HeaderError::CountTooLarge { .. })
        }),
        (hdr(0, 100, u64::MAX - 10), |e| {
            matches!(e, HeaderError::OutOfRange { .. })
        }),
        (hdr(0, 10, 1 << 30), |e| {
            matches!(e, HeaderError::OutOfRange { .. })
        }),
        (hdr(desc::EOF | desc::EOD, 0, 0), |e| {
            *e == HeaderError::BadEodCount(0)
        }),
        (hdr(desc::EOF, 0, 1 << 40), |e| {
            matches!(e, HeaderError::BadEodCount(_))
        }),
        (hdr(desc::RESTART, 4, 0), |e| {
            matches!(e, HeaderError::Unsupported(_))
        }),
        // In-band SBUF was not negotiated.
        (hdr(desc::SBUF, 1 << 20, 1), |e| {
            matches!(e, HeaderError::Unsupported(_))
        }),
    ];
    for (bytes, want) in cases {
        let h = Header::decode(bytes[..17].try_into().unwrap());
        // Kept open: the refusal must not depend on TCP EOF.
        match feed(vec![(bytes, false)], limited()).await {
            Err(DataError::Header(e)) => assert!(want(&e), "{h}: {e:?}"),
            other => panic!("{h}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn wire_add_overflow_is_refused() {
    let opts = DataOpts::default();
    let (addr, conns) = accepting(&opts).await;
    let dst = MemFile::empty();
    let recv = tokio::spawn(async move {
        recv_mode_e(
            conns,
            dst,
            u64::MAX - 5,
            &DataOpts::default(),
            Arc::new(Progress::new()),
        )
        .await
    });
    let mut c = connect(addr, &opts).await.unwrap();
    let mut b = hdr(0, 10, 0);
    b.extend_from_slice(&[0; 10]);
    c.write_all(&b).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), recv)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(r, Err(DataError::Header(HeaderError::OutOfRange { .. }))),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn close_before_eod_is_incomplete() {
    let mut block = hdr(0, 5, 0);
    block.extend_from_slice(b"hello");
    let cases = vec![
        // A whole block, then FIN without EOD.
        vec![(block.clone(), true)],
        // FIN in the middle of a payload.
        vec![(block[..20].to_vec(), true)],
        // FIN in the middle of a header.
        vec![(block[..9].to_vec(), true)],
        // EOF says 2, one connection ends properly, the other closes early.
        vec![
            (hdr(desc::EOF | desc::EOD, 0, 2), true),
            (block.clone(), true),
        ],
        // Nothing at all.
        vec![(vec![], true)],
    ];
    for c in cases {
        let r = feed(c.clone(), limited()).await;
        assert!(
            matches!(r, Err(DataError::Incomplete(_))),
            "{:?}: {r:?}",
            c.iter().map(|x| x.0.len()).collect::<Vec<_>>()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn channel_closed_without_eof_is_incomplete() {
    // Two EODs, no EOF, and no more connections can come.
    let opts = DataOpts::default();
    let (tx, rx) = pairs(2, &opts).await;
    for mut s in tx {
        s.write_all(&Header::eod().encode()).await.unwrap();
        std::mem::forget(s); // keep them open for the rest of the test process
    }
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        recv_mode_e(
            queued(rx),
            MemFile::empty(),
            0,
            &opts,
            Arc::new(Progress::new()),
        ),
    )
    .await
    .unwrap();
    assert!(matches!(r, Err(DataError::Incomplete(_))), "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn more_eods_than_announced_is_an_error() {
    let opts = DataOpts::default();
    let (addr, conns) = accepting(&opts).await;
    let recv = tokio::spawn(async move {
        recv_mode_e(
            conns,
            MemFile::empty(),
            0,
            &DataOpts::default(),
            Arc::new(Progress::new()),
        )
        .await
    });
    let mut a = connect(addr, &opts).await.unwrap();
    let mut b = connect(addr, &opts).await.unwrap();
    a.write_all(&Header::eod().encode()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    b.write_all(&Header::eof(1).encode()).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), recv)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(r, Err(DataError::Header(HeaderError::BadEodCount(1)))),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn conflicting_eof_counts_are_an_error() {
    let mut bytes = hdr(desc::EOF, 0, 3);
    bytes.extend_from_slice(&hdr(desc::EOF | desc::EOD, 0, 2));
    let r = feed(vec![(bytes, false)], limited()).await;
    assert!(
        matches!(r, Err(DataError::Header(HeaderError::BadEodCount(2)))),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn large_announced_block_is_read_in_bounded_chunks() {
    // A 48 MiB block (allowed by max_block) whose sender dies after 3 MiB: the receiver must not have tried to
    // allocate the whole block, and must report Incomplete.
    let opts = DataOpts {
        max_block: 64 << 20,
        ..DataOpts::default()
    };
    let mut bytes = hdr(0, 48 << 20, 0);
    bytes.extend_from_slice(&random(3 << 20, 5));
    let r = feed(vec![(bytes, true)], opts).await;
    assert!(matches!(r, Err(DataError::Incomplete(_))), "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn close_bit_drops_the_socket_from_reuse() {
    let mut bytes = hdr(0, 3, 0);
    bytes.extend_from_slice(b"abc");
    bytes.extend_from_slice(&hdr(desc::EOF | desc::EOD | desc::CLOSE, 0, 2));
    let r = feed(
        vec![(bytes, true), (hdr(desc::EOD, 0, 0), false)],
        limited(),
    )
    .await
    .unwrap();
    assert_eq!(r.bytes, 3);
    assert_eq!(r.reusable.len(), 1);
}
