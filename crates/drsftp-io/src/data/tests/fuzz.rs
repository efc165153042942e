//! Fuzz-style: random byte streams and random mixes of valid and broken headers fed into `recv_mode_e` over
//! loopback sockets. It must return (an error or a report), never panic or hang.

use std::sync::Arc;
use std::time::Duration;

use drsftp_proto::mode_e::{desc, Header};
use proptest::prelude::*;
use tokio::io::AsyncWriteExt;

use super::*;
use crate::data::recv_mode_e;

#[derive(Debug, Clone)]
enum Op {
    Raw(Vec<u8>),
    Data {
        offset: u64,
        count: u64,
        payload: u64,
    },
    Eod,
    Eof(u64),
    Desc(u8, u64, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Op::Raw),
        (0u64..(1 << 21), 0u64..70_000, 0u64..70_000).prop_map(|(offset, count, payload)| {
            Op::Data {
                offset,
                count,
                payload,
            }
        }),
        Just(Op::Eod),
        (0u64..6).prop_map(Op::Eof),
        (any::<u8>(), any::<u64>(), any::<u64>()).prop_map(|(d, c, o)| Op::Desc(d, c, o)),
    ]
}

fn encode(ops: &[Op]) -> Vec<u8> {
    let mut v = vec![];
    for o in ops {
        match o {
            Op::Raw(b) => v.extend_from_slice(b),
            Op::Data {
                offset,
                count,
                payload,
            } => {
                v.extend_from_slice(&Header::data(*offset, *count).encode());
                v.resize(v.len() + *payload as usize, 0x5a);
            }
            Op::Eod => v.extend_from_slice(&Header::eod().encode()),
            Op::Eof(n) => v.extend_from_slice(
                &Header {
                    descriptor: desc::EOF | desc::EOD,
                    count: 0,
                    offset: *n,
                }
                .encode(),
            ),
            Op::Desc(d, c, o) => v.extend_from_slice(
                &Header {
                    descriptor: *d,
                    count: *c,
                    offset: *o,
                }
                .encode(),
            ),
        }
    }
    v
}

/// Feed each stream on its own connection, close them (or some), and drop the channel's sender.
fn run(streams: Vec<(Vec<u8>, bool)>, sbuf: bool) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let opts = DataOpts {
            max_block: 64 * 1024,
            max_end: 1 << 22,
            inband_sbuf: sbuf,
            ..DataOpts::default()
        };
        let (tx, rx) = pairs(streams.len(), &opts).await;
        let recv = tokio::spawn({
            let opts = opts.clone();
            async move {
                recv_mode_e(
                    queued(rx),
                    MemFile::empty(),
                    0,
                    &opts,
                    Arc::new(Progress::new()),
                )
                .await
            }
        });
        // Writers run on their own: a receiver that stopped reading a connection (EOD, error) must not block
        // the test. Every connection is dropped shortly after its bytes, so a receiver still waiting sees EOF.
        let writers: Vec<_> = tx
            .into_iter()
            .zip(streams)
            .map(|(mut s, (bytes, close))| {
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(Duration::from_secs(2), s.write_all(&bytes)).await;
                    if close {
                        let _ = s.shutdown().await;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                })
            })
            .collect();
        let res = tokio::time::timeout(Duration::from_secs(10), recv)
            .await
            .expect("receiver hung");
        let _ = res.expect("receiver panicked");
        for w in writers {
            w.abort();
        }
    });
}

/// 48 per property unless `PROPTEST_CASES` says otherwise (each case is a real loopback transfer).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn random_bytes_never_panic(streams in proptest::collection::vec(
        (proptest::collection::vec(any::<u8>(), 0..300), any::<bool>()), 1..4), sbuf in any::<bool>()) {
        run(streams, sbuf);
    }

    #[test]
    fn random_header_mixes_never_panic(streams in proptest::collection::vec(
        (proptest::collection::vec(op(), 0..12), any::<bool>()), 1..4), sbuf in any::<bool>()) {
        run(streams.into_iter().map(|(ops, c)| (encode(&ops), c)).collect(), sbuf);
    }
}
