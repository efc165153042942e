//! Fuzz target: the UDP blast datagram decoder and both endpoints. Each datagram gets the common header and a
//! valid CRC32C most of the time (a forged datagram from an on-path attacker who knows the transfer id), so the
//! fuzzer reaches the per-kind validation and the endpoints' range checks, not just the CRC. Checks: no panic,
//! every rejection is counted, a receiver never hands out data outside the file. With `aead` both endpoints use
//! AEAD protection (`drsftp_blast::crypt`) and the fixed-up datagrams are sealed under the right key (a peer that
//! holds it), or under the wrong direction's key, so the AEAD decoder and everything behind the tag is reached.
#![no_main]

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use drsftp_blast::crypt::{seal_message, KeyUse};
use drsftp_blast::wire::{self, COMMON_LEN, MAGIC, VERSION};
use drsftp_blast::{
    KeyMaterial, Protection, Receiver, ReceiverConfig, RxEvent, Sender, SenderConfig,
    TransferParams,
};
use libfuzzer_sys::fuzz_target;

const ID: u64 = 0x5eed;

#[derive(Arbitrary, Debug)]
struct Dgram {
    /// 0-1: raw bytes as given; 2-7: common header and CRC fixed up.
    seal: u8,
    kind: u8,
    body: Vec<u8>,
    /// Milliseconds to advance the clock before this datagram.
    wait: u8,
    /// Deliver to the receiver (true) or the sender (false).
    to_receiver: bool,
    /// AEAD runs: the counter to seal with, and whether to use the other direction's key.
    counter: u64,
    reflect: bool,
}

#[derive(Arbitrary, Debug)]
struct Input {
    total: u32,
    payload: u16,
    aead: bool,
    dgrams: Vec<Dgram>,
}

/// The datagram as the fuzzer chose it, or with the common header (magic, version, kind, transfer id) and the
/// CRC32C (over bytes 0..4 and 8..) set as an honest sender would.
fn build(d: &Dgram) -> Vec<u8> {
    if d.seal < 2 {
        return d.body.clone();
    }
    let mut out = Vec::with_capacity(COMMON_LEN + d.body.len());
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.push(VERSION);
    out.push(d.kind % 4);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&ID.to_be_bytes());
    out.extend_from_slice(&d.body);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..4]), &out[8..]);
    out[4..8].copy_from_slice(&crc.to_be_bytes());
    out
}

fuzz_target!(|input: Input| {
    let payload = usize::from(input.payload % 9000).max(16);
    let Ok(params) = TransferParams::new(ID, u64::from(input.total % (1 << 20)), payload) else {
        return;
    };
    let t0 = Instant::now();
    let mut now = t0;
    let protection = if input.aead {
        Protection::Aead(KeyMaterial::new([7; 32]))
    } else {
        Protection::None
    };
    let rcfg = ReceiverConfig {
        protection: protection.clone(),
        ..ReceiverConfig::default()
    };
    let Ok(mut rx) = Receiver::new(params, rcfg, now) else {
        return;
    };
    let scfg = SenderConfig {
        protection: protection.clone(),
        ..SenderConfig::default()
    };
    let Ok(mut tx) = Sender::new(params, scfg, now) else {
        return;
    };
    for d in input.dgrams.iter().take(256) {
        now += Duration::from_millis(u64::from(d.wait));
        let mut bytes = build(d);
        if input.aead && d.seal >= 2 {
            let dir = match (d.to_receiver, d.reflect) {
                (true, false) | (false, true) => KeyUse::Data,
                _ => KeyUse::Ack,
            };
            bytes = seal_message(&protection, dir, d.counter, &bytes).expect("AEAD key");
        }
        let _ = wire::decode(&bytes, ID);
        if d.to_receiver {
            if let Ok(RxEvent::Data { offset, data, .. }) = rx.handle_datagram(now, &bytes) {
                let end = offset + data.len() as u64;
                assert!(end <= params.total_bytes, "data past the end of the file");
            }
            while rx.poll_transmit().is_some() {}
        } else {
            let _ = tx.handle_input(now, &bytes);
        }
        if rx.poll_timeout().is_some_and(|t| t <= now) {
            rx.handle_timeout(now);
        }
        if tx.poll_timeout().is_some_and(|t| t <= now) {
            tx.handle_timeout(now);
        }
    }
});
