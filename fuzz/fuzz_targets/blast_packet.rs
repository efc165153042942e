//! Fuzz target: the UDP blast datagram decoder and both endpoints. Each datagram gets the common header and a
//! valid CRC32C most of the time (a forged datagram from an on-path attacker who knows the transfer id), so the
//! fuzzer reaches the per-kind validation and the endpoints' range checks, not just the CRC. Checks: no panic,
//! every rejection is counted, a receiver never hands out data outside the file.
#![no_main]

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use drsftp_blast::wire::{self, COMMON_LEN, MAGIC, VERSION};
use drsftp_blast::{Receiver, ReceiverConfig, RxEvent, Sender, SenderConfig, TransferParams};
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
}

#[derive(Arbitrary, Debug)]
struct Input {
    total: u32,
    payload: u16,
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
    let Ok(mut rx) = Receiver::new(params, ReceiverConfig::default(), now) else {
        return;
    };
    let Ok(mut tx) = Sender::new(params, SenderConfig::default(), now) else {
        return;
    };
    for d in input.dgrams.iter().take(256) {
        now += Duration::from_millis(u64::from(d.wait));
        let bytes = build(d);
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
