//! The kernel-side cleartext path (`sendfile`, `splice`) between host files: it is the path taken (the
//! `Progress::kernel_copied` counter), it writes byte-identical files with the same CRC32C for odd sizes, ranges
//! and offsets, a file that ends early is an error rather than a short block, and a destination that refuses
//! spliced writes falls back to copying.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsFd;
use std::sync::Arc;

use super::*;
use crate::data::zerocopy::{send_file, Sent};
use crate::data::{recv_stream, send_stream, ZeroCopy};

fn host_file(data: &[u8]) -> (tempfile::TempDir, Arc<DiskFile>) {
    let dir = tempfile::tempdir().unwrap();
    let mut f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("f"))
        .unwrap();
    f.write_all(data).unwrap();
    (dir, Arc::new(DiskFile(f)))
}

fn read_all(f: &DiskFile) -> Vec<u8> {
    let mut v = vec![0u8; f.0.metadata().unwrap().len() as usize];
    f.0.read_exact_at(&mut v, 0).unwrap();
    v
}

/// Stream mode from `src[range]` into `dst` at `offset`, both ends with the kernel path `zero_copy`; returns
/// both reports and both kernel-copied counts.
async fn stream(
    src: Arc<DiskFile>,
    dst: Arc<dyn FileHandle>,
    range: std::ops::Range<u64>,
    offset: u64,
    zero_copy: ZeroCopy,
) -> (DataReport, DataReport, u64, u64) {
    let opts = DataOpts {
        crc32c: true,
        zero_copy,
        ..DataOpts::default()
    };
    let (mut tx, mut rx) = pairs(1, &opts).await;
    let (ptx, prx) = (Arc::new(Progress::new()), Arc::new(Progress::new()));
    let (s, r) = tokio::try_join!(
        send_stream(tx.pop().unwrap(), src, range, &opts, ptx.clone()),
        recv_stream(rx.pop().unwrap(), dst, offset, &opts, prx.clone()),
    )
    .unwrap();
    (s, r, ptx.kernel_copied(), prx.kernel_copied())
}

#[tokio::test(flavor = "multi_thread")]
async fn each_transfer_takes_the_path_its_options_ask_for() {
    // The choice rides in `DataOpts`, so tests running at once in this process cannot switch each other's path.
    let data = random(700_001, 30);
    let n = data.len() as u64;
    let send = ZeroCopy::parse("send");
    let recv = ZeroCopy::parse("RECV");
    for (zero_copy, want) in [
        (ZeroCopy::OFF, (0, 0)),
        (send, (n, 0)),
        (recv, (0, n)),
        (ZeroCopy::BOTH, (n, n)),
    ] {
        let (_d1, src) = host_file(&data);
        let (_d2, dst) = host_file(&[]);
        let (s, r, ks, kr) = stream(src, dst.clone(), 0..u64::MAX, 0, zero_copy).await;
        assert_eq!((s.bytes, r.bytes), (n, n), "{zero_copy:?}");
        assert_eq!((ks, kr), want, "{zero_copy:?}");
        assert!(read_all(&dst) == data, "{zero_copy:?}");
        assert_eq!(r.crc32c, Some(crc32c::crc32c(&data)), "{zero_copy:?}");
    }
}

#[test]
fn the_variable_reads_as_documented() {
    for (v, want) in [
        ("1", ZeroCopy::BOTH),
        ("on", ZeroCopy::BOTH),
        ("True", ZeroCopy::BOTH),
        ("yes", ZeroCopy::BOTH),
        ("", ZeroCopy::OFF),
        ("0", ZeroCopy::OFF),
        ("off", ZeroCopy::OFF),
    ] {
        assert_eq!(ZeroCopy::parse(v), want, "{v:?}");
    }
    assert_eq!(
        ZeroCopy::parse("send"),
        ZeroCopy {
            send: true,
            recv: false
        }
    );
    assert_eq!(
        ZeroCopy::parse("recv"),
        ZeroCopy {
            send: false,
            recv: true
        }
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn odd_sizes_ranges_and_offsets_go_through_the_kernel_intact() {
    // Sizes around the page, the pipe and the 256 KiB chunk; ranges as REST/ERET ask for them.
    let cases: [(usize, std::ops::Range<u64>, u64); 6] = [
        (1, 0..u64::MAX, 0),
        (4095, 0..u64::MAX, 0),
        (262_145, 0..u64::MAX, 0),
        ((3 << 20) + 7, 0..u64::MAX, 0),
        ((3 << 20) + 7, 1_234_567..u64::MAX, 1_234_567), // a restart: REST 1234567
        (5_000_001, 777..3_000_333, 10),                 // a partial range landing elsewhere
    ];
    for (i, (size, range, offset)) in cases.into_iter().enumerate() {
        let data = random(size, 40 + i as u64);
        let (_d1, src) = host_file(&data);
        let (_d2, dst) = host_file(&[]);
        let (s, r, ks, kr) = stream(src, dst.clone(), range.clone(), offset, ZeroCopy::BOTH).await;
        let end = range.end.min(size as u64);
        let moved = &data[range.start as usize..end as usize];
        assert_eq!(s.bytes, moved.len() as u64, "case {i}");
        assert_eq!(r.bytes, s.bytes, "case {i}");
        assert_eq!(
            (ks, kr),
            (s.bytes, r.bytes),
            "case {i}: the kernel path moved it all"
        );
        let got = read_all(&dst);
        assert_eq!(got.len() as u64, offset + s.bytes, "case {i}");
        assert!(got[offset as usize..] == *moved, "case {i}: bytes differ");
        assert!(got[..offset as usize].iter().all(|&b| b == 0), "case {i}");
        if range.start == 0 && offset == 0 {
            // Whole files: both ends' CRC32C is the file's (sender: read for sending; receiver: read back).
            let want = Some(crc32c::crc32c(&data));
            assert_eq!((s.crc32c, r.crc32c), (want, want), "case {i}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_shorter_than_the_range_in_hand_is_an_error_not_a_short_block() {
    // What `send_file` sees when the file was truncated after the engine read (and CRC'd) the block.
    let data = random(100_000, 50);
    let (_d, src) = host_file(&data);
    let (mut tx, mut rx) = pairs(1, &DataOpts::default()).await;
    let (tx, mut rx) = (tx.pop().unwrap(), rx.pop().unwrap());
    let e = send_file(&tx, src.0.as_fd(), b"hd", 60_000, 80_000)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{e}");
    assert!(e.to_string().contains("ended at 100000"), "{e}");
    drop(tx);
    // The peer got the header and the 40 000 bytes that were there, and then EOF: never "80 000 sent".
    let mut got = vec![];
    tokio::io::AsyncReadExt::read_to_end(&mut rx, &mut got)
        .await
        .unwrap();
    assert_eq!(got.len(), 2 + 40_000);
    assert!(got[2..] == data[60_000..]);
    // A range inside the file goes whole.
    let (mut tx, mut rx) = pairs(1, &DataOpts::default()).await;
    let (tx, mut rx) = (tx.pop().unwrap(), rx.pop().unwrap());
    let sent = send_file(&tx, src.0.as_fd(), &[], 5, 99_995).await.unwrap();
    assert_eq!(sent, Sent::All);
    drop(tx);
    let mut got = vec![];
    tokio::io::AsyncReadExt::read_to_end(&mut rx, &mut got)
        .await
        .unwrap();
    assert!(got == data[5..]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_destination_refusing_spliced_writes_falls_back_to_copying() {
    // splice(2) refuses a file opened for appending (EINVAL): the receiver copies the pipe's bytes out and
    // carries on with the copying path.
    let data = random((2 << 20) + 3, 60);
    let (_d1, src) = host_file(&data);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("append");
    let f = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(&path)
        .unwrap();
    let dst = Arc::new(DiskFile(f));
    let (s, r, ks, kr) = stream(src, dst.clone(), 0..u64::MAX, 0, ZeroCopy::BOTH).await;
    assert_eq!((s.bytes, r.bytes), (data.len() as u64, data.len() as u64));
    assert_eq!(ks, s.bytes, "the sender still used sendfile");
    assert_eq!(kr, 0, "nothing was spliced into the append-only file");
    assert!(std::fs::read(&path).unwrap() == data);
    assert_eq!(r.crc32c, Some(crc32c::crc32c(&data)));
}
