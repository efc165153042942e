//! drsftp-blast: the sans-IO core of the FOBS-style UDP blast transport (seed 004). Fixed-size numbered packets,
//! a selective-ack bitmap spanning the whole transfer, the circular retransmission order, and paced rate control
//! that ignores random loss but yields to queueing delay. No sockets, no threads, no clock reads: datagrams and
//! `now` come in through `handle_*`, datagrams, file writes and timeouts go out through `poll_*` and return values.
//!
//! ```text
//!  sender side                                              receiver side
//!  ───────────                                              ─────────────
//!  file ──DataSource::read_at──┐
//!  driver ──poll_transmit(now, max, &src, &mut Batch)──▶ Sender ──▶ Batch of data datagrams ──UDP (sendmmsg/GSO)──▶
//!  ack/complete datagrams ──handle_input(now, dgram)──▶ Sender
//!  driver ──handle_timeout(now) at poll_timeout()─────▶ Sender ──poll_event()──▶ Complete / Failed
//!
//!  data datagram ──handle_datagram(now, dgram)──▶ Receiver ──▶ RxEvent::Data { offset, data }: write_at(offset)
//!                                                          └─▶ RxEvent::Duplicate (counted, nothing to write)
//!  driver ──handle_timeout(now) at poll_timeout()──▶ Receiver ──poll_transmit()──▶ ack / complete datagrams ──UDP──▶
//! ```
//!
//! Contract, both sides: after every `handle_*` call drain `poll_transmit`, then sleep until `poll_timeout()` (or
//! until a datagram arrives) and call `handle_timeout(now)` when it expires; the sender also needs
//! `poll_transmit` on every wake-up, since its pacer releases datagrams over time. Nothing a peer sends can make
//! either side fail: bad datagrams are rejected with a [`Reject`] reason and counted.
//!
//! Both ends agree on [`TransferParams`] (random transfer id, size, packet size from the path MTU) over the
//! control channel first. The receiver holds only its bitmap (1 bit per packet); payloads are handed out with
//! their file offsets, exactly once each. [`Receiver::bitmap`] is also the resume checkpoint
//! ([`Receiver::resume`], [`Sender::resume`]; [`resume`] converts it to and from the byte ranges of `REST`).
//!
//! Modules: [`wire`] (datagram formats and strict decoding), [`crypt`] (AEAD under TLS), [`batch`], [`bitmap`], [`receiver`], [`sender`], [`phases`] (where a transfer's time went), [`policy`]
//! (the pluggable [`NextPacket`] order, default [`Circular`]), [`rate`] (the rate controller and pacer; the
//! algorithm and its rationale are in that module's docs).
//!
//! What the receiver acknowledges and when: every [`ReceiverConfig::ack_every`] new packets (the paper's ack
//! frequency), after [`ReceiverConfig::dup_ack_threshold`] duplicates, at most
//! [`ReceiverConfig::max_ack_delay`] after an unacknowledged arrival, at once when the sender flags that it is
//! going idle, and every [`ReceiverConfig::idle_ack_timeout`] while nothing arrives (the paper's 1.5 s). A
//! *complete* message ends the transfer; it is repeated if data keeps arriving.
//!
//! Integrity: with [`Protection::None`] the CRC32C catches corruption and the random 64-bit transfer id keeps stale
//! and foreign datagrams out, but neither is authentication: someone who sees the transfer id can forge data or
//! acks, and the end-to-end checksum on the control channel (CKSM) is what proves the file. With
//! [`Protection::Aead`] (under TLS, keys from the control connection's exporter, see [`crypt`]) every datagram is
//! encrypted and authenticated; forgeries and replays are rejected (`auth_failed`, `replayed`).
//!
//! ```
//! use std::time::Instant;
//! use drsftp_blast::*;
//!
//! let now = Instant::now();
//! let file = vec![7u8; 10_000];
//! let params = TransferParams::for_mtu(0x5eed, file.len() as u64, 1500).unwrap();
//! let mut tx = Sender::new(params, SenderConfig::default(), now).unwrap();
//! let mut rx = Receiver::new(params, ReceiverConfig::default(), now).unwrap();
//! let mut out = vec![0u8; file.len()];
//! let mut batch = Batch::new();
//! tx.poll_transmit(now, 64, &file[..], &mut batch).unwrap();
//! for d in batch.iter() {
//!     if let Ok(RxEvent::Data { offset, data, .. }) = rx.handle_datagram(now, d) {
//!         out[offset as usize..][..data.len()].copy_from_slice(data);
//!     }
//! }
//! while let Some(ack) = rx.poll_transmit() {
//!     tx.handle_input(now, &ack).unwrap();
//! }
//! assert!(rx.is_complete() && tx.is_done() && out == file);
//! assert_eq!(tx.poll_event(), Some(SenderEvent::Complete));
//! ```

#![forbid(unsafe_code)]

pub mod batch;
pub mod bitmap;
pub mod crypt;
pub mod error;
pub mod phases;
pub mod policy;
pub mod rate;
pub mod receiver;
pub mod resume;
pub mod sender;
pub mod wire;

pub use batch::{Batch, DataSource, DatagramInfo};
pub use bitmap::Bitmap;
pub use crypt::{DataDirection, KeyMaterial, Protection};
pub use error::{BitmapError, ConfigError, Reject, RejectCounts, SendError};
pub use phases::{PhaseReport, Phases};
pub use policy::{Circular, NextPacket, Pick, SendView};
pub use rate::{AckInput, Pacer, Phase, RateConfig, RateController, RateStats};
pub use receiver::{Receiver, ReceiverConfig, ReceiverStats, RxEvent};
pub use sender::{Sender, SenderConfig, SenderEvent, SenderStats};
pub use wire::{payload_size_for_mtu, TransferParams};
