//! Resume from a receiver checkpoint on hand-driven, lossy exchanges: a sender resumed with the checkpoint never
//! transmits a packet it marks held; a fresh sender told by a resumed receiver's first ack never does either;
//! the file still ends byte-identical, and the byte-range form (`resume::byte_ranges` / `packets_within`, what
//! `REST` carries) gives both ends the same map.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use drsftp_blast::*;
use drsftp_testkit::data::pattern;

mod common;
use common::fire_due_timeouts;

/// A checkpoint with about a third of the packets held, in runs and singles.
fn checkpoint(p: &TransferParams) -> Bitmap {
    let mut bm = Bitmap::new(p.total_packets());
    for i in 0..p.total_packets() {
        if i % 7 < 2 || (100..300).contains(&i) {
            bm.set(i);
        }
    }
    bm
}

/// Runs `tx` against `rx` until both are done, dropping every 9th data datagram; `out` starts with the held
/// packets' bytes already in place. Returns every sequence number transmitted.
fn drive<P: NextPacket>(
    mut tx: Sender<P>,
    mut rx: Receiver,
    src: &[u8],
    out: &mut [u8],
    held: &Bitmap,
    t0: Instant,
) -> Vec<u64> {
    let mut sent = Vec::new();
    let mut batch = Batch::new();
    let mut now = t0;
    let mut n = 0u64;
    for _ in 0..200_000 {
        while let Some(a) = rx.poll_transmit() {
            let _ = tx.handle_input(now, &a);
        }
        if tx.is_done() && rx.is_complete() {
            break;
        }
        batch.clear();
        tx.poll_transmit(now, 32, src, &mut batch).unwrap();
        sent.extend(batch.info().iter().map(|i| i.seq));
        for d in batch.iter() {
            n += 1;
            if n.is_multiple_of(9) {
                continue;
            }
            match rx.handle_datagram(now, d) {
                Ok(RxEvent::Data { seq, offset, data }) => {
                    assert!(!held.get(seq), "held packet {seq} delivered again");
                    out[offset as usize..][..data.len()].copy_from_slice(data);
                }
                Ok(RxEvent::Duplicate { seq }) => {
                    assert!(!held.get(seq), "held packet {seq} arrived again")
                }
                Err(e) => panic!("{e}"),
            }
        }
        now += Duration::from_millis(1);
        fire_due_timeouts(now, &mut tx, &mut rx);
    }
    assert!(tx.is_done() && rx.is_complete(), "transfer did not finish");
    sent
}

fn prefilled(src: &[u8], p: &TransferParams, held: &Bitmap) -> Vec<u8> {
    let mut out = vec![0u8; src.len()];
    for r in resume::byte_ranges(p, held) {
        out[r.start as usize..r.end as usize]
            .copy_from_slice(&src[r.start as usize..r.end as usize]);
    }
    out
}

#[test]
fn resumed_sender_never_sends_held_packets() {
    let t0 = Instant::now();
    let src = pattern(3 << 20, 13);
    let p = TransferParams::for_mtu(9, src.len() as u64, 1500).unwrap();
    let held = checkpoint(&p);
    // The sender learns the map from byte ranges, as the server does from REST.
    let ranges = resume::byte_ranges(&p, &held);
    let acked = resume::packets_within(&p, ranges.iter().cloned());
    assert_eq!(acked, held);
    let tx = Sender::resume(p, SenderConfig::default(), Circular::new(), acked, t0).unwrap();
    assert_eq!(tx.stats().acked, held.count_ones());
    let rx = Receiver::resume(p, ReceiverConfig::default(), held.clone(), t0).unwrap();
    let mut out = prefilled(&src, &p, &held);
    let sent = drive(tx, rx, &src, &mut out, &held, t0);
    assert!(sent.iter().all(|&s| !held.get(s)), "a held packet was sent");
    let distinct: HashSet<u64> = sent.iter().copied().collect();
    assert_eq!(distinct.len() as u64, p.total_packets() - held.count_ones());
    assert_eq!(out, src);
}

#[test]
fn resumed_receiver_never_asks_for_held_packets() {
    let t0 = Instant::now();
    let src = pattern(1 << 20, 13);
    let p = TransferParams::for_mtu(10, src.len() as u64, 1500).unwrap();
    let held = checkpoint(&p);
    let mut rx = Receiver::resume(p, ReceiverConfig::default(), held.clone(), t0).unwrap();
    let mut tx = Sender::new(p, SenderConfig::default(), t0).unwrap();
    // The resumed receiver speaks first: its ack covers every held packet before anything is sent.
    let mut first = 0;
    while let Some(a) = rx.poll_transmit() {
        tx.handle_input(t0, &a).unwrap();
        first += 1;
    }
    assert!(first >= 1, "a resumed receiver acks at once");
    assert_eq!(tx.acked(), &held);
    let mut out = prefilled(&src, &p, &held);
    let sent = drive(tx, rx, &src, &mut out, &held, t0);
    assert!(sent.iter().all(|&s| !held.get(s)));
    assert_eq!(out, src);
}

#[test]
fn complete_checkpoint_finishes_at_once() {
    let t0 = Instant::now();
    let p = TransferParams::for_mtu(11, 100_000, 1500).unwrap();
    let mut full = Bitmap::new(p.total_packets());
    full.set_range(0, p.total_packets());
    let mut rx = Receiver::resume(p, ReceiverConfig::default(), full.clone(), t0).unwrap();
    let mut tx = Sender::resume(p, SenderConfig::default(), Circular::new(), full, t0).unwrap();
    assert!(rx.is_complete() && tx.is_done());
    assert_eq!(tx.poll_event(), Some(SenderEvent::Complete));
    assert!(rx.poll_transmit().is_some(), "the receiver says complete");
    let mut b = Batch::new();
    assert_eq!(
        tx.poll_transmit(t0, 64, &[0u8; 100_000][..], &mut b)
            .unwrap(),
        0
    );
}
