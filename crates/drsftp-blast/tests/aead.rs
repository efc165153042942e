//! AEAD protection (`Protection::Aead`, `drsftp_blast::crypt`): round trips within the MTU, every tampered byte
//! and every truncation rejected and counted, wrong keys and reflected datagrams refused, nonces unique across
//! resends, replays counted and harmless, and lossy transfers on a virtual clock byte-identical.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{fire_due_timeouts, random_bytes};
use drsftp_blast::wire::{self, DataPacket};
use drsftp_blast::*;
use drsftp_netem::{LinkConfig, LossModel, Path, QueueLimit, Side};
use proptest::prelude::*;

const TID: u64 = 0x0123_4567_89ab_cdef;

fn keys(b: u8) -> Protection {
    let mut k = [0u8; 32];
    for (i, x) in k.iter_mut().enumerate() {
        *x = b.wrapping_mul(31).wrapping_add(i as u8);
    }
    Protection::Aead(KeyMaterial::new(k))
}

fn sender(p: TransferParams, prot: &Protection, now: Instant) -> Sender {
    let cfg = SenderConfig {
        protection: prot.clone(),
        ..SenderConfig::default()
    };
    Sender::new(p, cfg, now).unwrap()
}

fn receiver(p: TransferParams, prot: &Protection, now: Instant) -> Receiver {
    let cfg = ReceiverConfig {
        protection: prot.clone(),
        ..ReceiverConfig::default()
    };
    Receiver::new(p, cfg, now).unwrap()
}

/// One batch of data datagrams of a fresh AEAD sender.
fn data_datagrams(p: TransferParams, prot: &Protection, file: &[u8], n: usize) -> Vec<Vec<u8>> {
    let now = Instant::now();
    let mut tx = sender(p, prot, now);
    let mut b = Batch::new();
    tx.poll_transmit(now, n, file, &mut b).unwrap();
    b.iter().map(<[u8]>::to_vec).collect()
}

#[test]
fn round_trip_fits_the_mtu_and_hides_the_payload() {
    let now = Instant::now();
    let prot = keys(1);
    let marker = b"DRSFTP-MARKER-7f3a";
    let file: Vec<u8> = marker.iter().copied().cycle().take(200_000).collect();
    let p = TransferParams::for_mtu_with(TID, file.len() as u64, 1500, true).unwrap();
    assert_eq!(p.payload_size, 1436 - 24);
    let mut tx = sender(p, &prot, now);
    let mut rx = receiver(p, &prot, now);
    let mut out = vec![0u8; file.len()];
    let mut batch = Batch::new();
    let mut rounds = 0;
    while !(tx.is_done() && rx.is_complete()) && rounds < 10_000 {
        rounds += 1;
        let t = now + Duration::from_millis(rounds);
        batch.clear();
        tx.poll_transmit(t, 64, &file[..], &mut batch).unwrap();
        // GSO still works: equal-size datagrams, each within MTU − 28.
        if batch.len() > 1 {
            assert_eq!(batch.segment_size(), Some(1472));
        }
        for d in batch.iter() {
            assert!(d.len() <= 1472);
            assert_eq!(d[2], wire::VERSION_AEAD);
            assert!(!d.windows(marker.len()).any(|w| w == marker));
            if let Ok(RxEvent::Data { offset, data, .. }) = rx.handle_datagram(t, d) {
                out[offset as usize..][..data.len()].copy_from_slice(data);
            }
        }
        fire_due_timeouts(t, &mut tx, &mut rx);
        while let Some(a) = rx.poll_transmit() {
            assert!(a.len() <= 1472, "ack of {} bytes", a.len());
            assert_eq!(a[2], wire::VERSION_AEAD);
            tx.handle_input(t, &a).unwrap();
        }
    }
    assert!(tx.is_done() && rx.is_complete());
    assert_eq!(out, file);
    assert_eq!(tx.stats().rejects.total() + rx.stats().rejects.total(), 0);
}

#[test]
fn every_tampered_byte_and_every_truncation_is_rejected_and_counted() {
    let now = Instant::now();
    let prot = keys(2);
    let file = random_bytes(5000, 1);
    let p = TransferParams::new(TID, file.len() as u64, 1000).unwrap();
    let d = data_datagrams(p, &prot, &file, 1).remove(0);
    let mut rx = receiver(p, &prot, now);
    let mut n = 0;
    for i in 0..d.len() {
        for flip in [0x01u8, 0x80] {
            let mut bad = d.clone();
            bad[i] ^= flip;
            assert!(
                rx.handle_datagram(now, &bad).is_err(),
                "byte {i} ^ {flip:#x}"
            );
            n += 1;
        }
    }
    for len in 0..d.len() {
        assert!(rx.handle_datagram(now, &d[..len]).is_err(), "prefix {len}");
        n += 1;
    }
    let mut longer = d.clone();
    longer.push(0);
    assert_eq!(rx.handle_datagram(now, &longer), Err(Reject::AuthFailed));
    n += 1;
    let r = rx.stats().rejects;
    assert_eq!(r.total(), n);
    // Everything past the header fields checked in clear (magic, version, kind, id) fails authentication.
    assert!(r.auth_failed >= 2 * (d.len() as u64 - 16), "{r:?}");
    assert_eq!(rx.stats().distinct, 0);
    // None of it poisoned the replay window: the genuine datagram is still accepted.
    assert!(matches!(
        rx.handle_datagram(now, &d),
        Ok(RxEvent::Data { seq: 0, .. })
    ));

    // The same for an ack at the sender.
    let mut tx = sender(p, &prot, now);
    let mut rx = receiver(p, &prot, now);
    let mut b = Batch::new();
    tx.poll_transmit(now, 1, &file[..], &mut b).unwrap();
    let _ = rx.handle_datagram(now, b.datagram(0));
    rx.handle_timeout(now + Duration::from_secs(2));
    let ack = rx.poll_transmit().unwrap();
    for i in 0..ack.len() {
        let mut bad = ack.clone();
        bad[i] ^= 0x04;
        assert!(tx.handle_input(now, &bad).is_err(), "ack byte {i}");
    }
    assert_eq!(tx.stats().rejects.total(), ack.len() as u64);
    assert_eq!(tx.stats().acked, 0);
    tx.handle_input(now, &ack).unwrap();
}

#[test]
fn forged_datagrams_with_the_known_transfer_id_are_refused() {
    // What cleartext blast cannot stop: anyone who saw the id forges a datagram with a valid CRC32C.
    let now = Instant::now();
    let p = TransferParams::new(TID, 3000, 1000).unwrap();
    let mut forged = vec![];
    let evil = DataPacket {
        seq: 0,
        tx: 0,
        send_ts: 0,
        ack_now: false,
        payload: &[0xEE; 1000],
    };
    wire::encode_data(&mut forged, TID, &evil);
    let mut clear = receiver(p, &Protection::None, now);
    assert!(matches!(
        clear.handle_datagram(now, &forged),
        Ok(RxEvent::Data { .. })
    ));
    // Under AEAD the cleartext form is refused, and so is an AEAD datagram under another key.
    let prot = keys(3);
    let mut rx = receiver(p, &prot, now);
    assert_eq!(rx.handle_datagram(now, &forged), Err(Reject::AuthFailed));
    let other = data_datagrams(p, &keys(4), &[0xEE; 3000], 1).remove(0);
    assert_eq!(rx.handle_datagram(now, &other), Err(Reject::AuthFailed));
    assert_eq!(rx.stats().rejects.auth_failed, 2);
    assert_eq!(rx.stats().distinct, 0);
    // An AEAD datagram at a cleartext endpoint is an unknown version.
    assert_eq!(clear.handle_datagram(now, &other), Err(Reject::BadVersion));
}

#[test]
fn reflected_datagrams_never_verify() {
    let now = Instant::now();
    let prot = keys(5);
    let file = random_bytes(3000, 2);
    let p = TransferParams::new(TID, file.len() as u64, 1000).unwrap();
    let mut tx = sender(p, &prot, now);
    let mut rx = receiver(p, &prot, now);
    let mut b = Batch::new();
    tx.poll_transmit(now, 2, &file[..], &mut b).unwrap();
    // Our own data reflected back at the sender: opened with the ack key, it fails.
    assert_eq!(tx.handle_input(now, b.datagram(0)), Err(Reject::AuthFailed));
    let _ = rx.handle_datagram(now, b.datagram(0));
    rx.handle_timeout(now + Duration::from_secs(2));
    let ack = rx.poll_transmit().unwrap();
    // The receiver's ack reflected back at it: same.
    assert_eq!(rx.handle_datagram(now, &ack), Err(Reject::AuthFailed));
    // Another direction's exporter context (an upload with the same parameters) yields other keys.
    let down = crypt::exporter_context(&p, DataDirection::ServerSends);
    let up = crypt::exporter_context(&p, DataDirection::ClientSends);
    assert_ne!(down, up);
    assert_eq!(&down[..8], &TID.to_be_bytes());
}

#[test]
fn replayed_acks_and_data_are_counted_and_harmless() {
    let now = Instant::now();
    let prot = keys(6);
    let file = random_bytes(20_000, 3);
    let p = TransferParams::new(TID, file.len() as u64, 1000).unwrap();
    let mut tx = sender(p, &prot, now);
    let mut rx = receiver(p, &prot, now);
    let mut b = Batch::new();
    tx.poll_transmit(now, 5, &file[..], &mut b).unwrap();
    for d in b.iter() {
        assert!(rx.handle_datagram(now, d).is_ok());
    }
    // A replayed data datagram is refused before it counts as a duplicate (which could trigger acks).
    assert_eq!(
        rx.handle_datagram(now, b.datagram(2)),
        Err(Reject::Replayed)
    );
    assert_eq!(rx.stats().duplicates, 0);
    assert_eq!(rx.stats().rejects.replayed, 1);
    rx.handle_timeout(now + Duration::from_secs(2));
    let ack = rx.poll_transmit().unwrap();
    let t = now + Duration::from_millis(30);
    tx.handle_input(t, &ack).unwrap();
    let before = *tx.stats();
    let acked = tx.acked().count_ones();
    assert_eq!(tx.handle_input(t, &ack), Err(Reject::Replayed));
    assert_eq!(tx.stats().rejects.replayed, 1);
    assert_eq!(tx.stats().ack_datagrams, before.ack_datagrams);
    assert_eq!(tx.acked().count_ones(), acked);
    assert_eq!(
        SenderStats {
            rejects: before.rejects,
            ..*tx.stats()
        },
        before
    );
}

struct Run {
    ok: bool,
    data_counters: Vec<u64>,
    ack_counters: Vec<u64>,
    resends: u64,
    rejects: u64,
}

/// A transfer of `bytes` over a lossy netem path in virtual time, recording every datagram's AEAD counter.
fn lossy_transfer(bytes: usize, loss: f64, seed: u64, prot: &Protection) -> Run {
    let t0 = Instant::now();
    let p = TransferParams::new(TID ^ seed, bytes as u64, 200).unwrap();
    let data = random_bytes(bytes, seed);
    let mut out = vec![0u8; bytes];
    let mut tx = sender(p, prot, t0);
    let mut rx = receiver(p, prot, t0);
    let link = LinkConfig::new(Duration::from_millis(5), 20_000_000)
        .with_queue(QueueLimit::Unlimited)
        .with_loss(LossModel::Bernoulli { p: loss })
        .with_seed(seed);
    let mut path: Path<Vec<u8>> = Path::symmetric(link, t0);
    let (mut data_counters, mut ack_counters) = (vec![], vec![]);
    let counter = |d: &[u8]| u64::from_be_bytes(d[16..24].try_into().unwrap());
    let mut batch = Batch::new();
    let mut now = t0;
    let end = t0 + Duration::from_secs(600);
    while now < end && !(tx.is_done() && rx.is_complete()) {
        while let Some(d) = path.poll_deliver(now, Side::B) {
            if let Ok(RxEvent::Data { offset, data, .. }) = rx.handle_datagram(now, &d) {
                out[offset as usize..][..data.len()].copy_from_slice(data);
            }
        }
        while let Some(d) = path.poll_deliver(now, Side::A) {
            let _ = tx.handle_input(now, &d);
        }
        fire_due_timeouts(now, &mut tx, &mut rx);
        batch.clear();
        tx.poll_transmit(now, 16, &data[..], &mut batch).unwrap();
        for (d, info) in batch.iter().zip(batch.info()) {
            assert_eq!(counter(d), info.tx);
            data_counters.push(counter(d));
            path.send(now, Side::A, d.len() + 28, d.to_vec());
        }
        while let Some(a) = rx.poll_transmit() {
            ack_counters.push(counter(&a));
            path.send(now, Side::B, a.len() + 28, a);
        }
        let mut next = end;
        for t in [path.poll_timeout(), tx.poll_timeout(), rx.poll_timeout()]
            .into_iter()
            .flatten()
        {
            next = next.min(t);
        }
        now = next.max(now + Duration::from_micros(1));
    }
    Run {
        ok: tx.is_done() && rx.is_complete() && out == data,
        data_counters,
        ack_counters,
        resends: tx.stats().resent + tx.stats().hedge_copies,
        rejects: tx.stats().rejects.total() + rx.stats().rejects.total(),
    }
}

fn all_distinct(v: &[u64]) -> bool {
    v.iter().collect::<HashSet<_>>().len() == v.len()
}

#[test]
fn nonces_never_repeat_across_resends() {
    let r = lossy_transfer(300_000, 0.05, 11, &keys(7));
    assert!(r.ok);
    assert!(
        r.resends > 50,
        "the loss should force resends: {}",
        r.resends
    );
    assert!(all_distinct(&r.data_counters));
    assert!(all_distinct(&r.ack_counters));
    assert_eq!(r.rejects, 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn lossy_transfers_with_aead_are_byte_identical(
        seed in any::<u64>(),
        loss in 0.0f64..0.2,
        kb in 1usize..200,
    ) {
        let r = lossy_transfer(kb * 1000 + (seed % 997) as usize, loss, seed, &keys(seed as u8));
        prop_assert!(r.ok);
        prop_assert!(all_distinct(&r.data_counters));
        prop_assert!(all_distinct(&r.ack_counters));
    }
}
