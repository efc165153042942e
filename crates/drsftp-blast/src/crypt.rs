//! AEAD protection of blast datagrams under TLS (`PROT P`): AES-128-GCM keyed from the control connection's TLS
//! exporter (RFC 5705 / RFC 8446 §7.5), one key per direction, a never-repeating 64-bit counter as nonce, and a
//! replay window. The format is in [`crate::wire`]'s docs; this is pure computation (no I/O), like the rest.
//!
//! Key schedule: both ends call the TLS exporter of the control connection with [`EXPORTER_LABEL`] and
//! [`exporter_context`] (transfer id, size, packet size, which side sends) for [`KEY_MATERIAL_LEN`] bytes: the
//! first 16 key the data direction, the last 16 the ack direction. A new transfer has a new random id, so new
//! keys; a datagram reflected back at its sender is opened with the other direction's key and fails.
//!
//! Nonces: data datagrams carry the sender's 64-bit transmission number (every send, resends included, takes the
//! next), acks and completes the receiver's own datagram count; each key is used by exactly one endpoint, so a
//! nonce never repeats under a key.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};

use crate::error::Reject;
use crate::wire::{self, Message, TransferParams};

/// The exporter label both ends use (RFC 5705 labels for private use start with `EXPORTER`).
pub const EXPORTER_LABEL: &[u8] = b"EXPORTER-drsftp-blast-v1";
/// Exporter output bytes: data key then ack key.
pub const KEY_MATERIAL_LEN: usize = 32;
const KEY_LEN: usize = 16;
/// Authentic datagrams this far behind the newest counter are refused as replays (too old to tell).
const WINDOW_BITS: u64 = 1 << 14;

/// Which end of the control connection sends the file (part of the exporter context, so an upload and a
/// download with otherwise equal parameters never share keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataDirection {
    /// RETR/ERET: the server sends.
    ServerSends,
    /// STOR/APPE/ESTO: the client sends.
    ClientSends,
}

/// The exporter context of one transfer: `transfer_id u64 | total_bytes u64 | payload_size u32 | direction u8`
/// (big-endian; direction 0 = server sends, 1 = client sends).
pub fn exporter_context(params: &TransferParams, dir: DataDirection) -> [u8; 21] {
    let mut c = [0u8; 21];
    c[..8].copy_from_slice(&params.transfer_id.to_be_bytes());
    c[8..16].copy_from_slice(&params.total_bytes.to_be_bytes());
    c[16..20].copy_from_slice(&(params.payload_size as u32).to_be_bytes());
    c[20] = match dir {
        DataDirection::ServerSends => 0,
        DataDirection::ClientSends => 1,
    };
    c
}

/// Exporter output for one transfer (secret: its `Debug` shows nothing).
#[derive(Clone, PartialEq, Eq)]
pub struct KeyMaterial([u8; KEY_MATERIAL_LEN]);

impl KeyMaterial {
    pub fn new(bytes: [u8; KEY_MATERIAL_LEN]) -> Self {
        KeyMaterial(bytes)
    }
}

impl std::fmt::Debug for KeyMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyMaterial(..)")
    }
}

/// How the datagrams of a transfer are protected. Both ends must agree.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Protection {
    /// Version 1: CRC32C and the transfer id (cleartext, not authenticated).
    #[default]
    None,
    /// Version 2: AES-128-GCM with keys from the TLS exporter.
    Aead(KeyMaterial),
}

impl Protection {
    /// Extra bytes per datagram over version 1.
    pub fn overhead(&self) -> usize {
        match self {
            Protection::None => 0,
            Protection::Aead(_) => wire::AEAD_OVERHEAD,
        }
    }

    fn key(&self, dir: KeyUse) -> Option<LessSafeKey> {
        let Protection::Aead(km) = self else {
            return None;
        };
        let bytes = match dir {
            KeyUse::Data => &km.0[..KEY_LEN],
            KeyUse::Ack => &km.0[KEY_LEN..],
        };
        let key = UnboundKey::new(&AES_128_GCM, bytes).expect("16-byte AES-128 key");
        Some(LessSafeKey::new(key))
    }
}

/// Which direction's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUse {
    /// Data datagrams, sender → receiver.
    Data,
    /// Acks and completes, receiver → sender.
    Ack,
}

fn nonce(counter: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&counter.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

/// Seals a version-1 datagram's message as a version-2 datagram under `p`'s key for `dir` with `counter` (what an
/// honest peer holding the key sends; for tests and the fuzz target, which reach the endpoints' checks behind the
/// tag this way). `None` without AEAD or for input shorter than the common header.
pub fn seal_message(p: &Protection, dir: KeyUse, counter: u64, v1: &[u8]) -> Option<Vec<u8>> {
    let s = Sealer::new(p, dir)?;
    let body = v1.get(wire::COMMON_LEN..)?;
    let mut out = Vec::with_capacity(v1.len() + wire::AEAD_OVERHEAD);
    out.extend_from_slice(&v1[..4]);
    out[2] = wire::VERSION_AEAD;
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&v1[8..wire::COMMON_LEN]);
    out.extend_from_slice(&counter.to_be_bytes());
    out.extend_from_slice(body);
    out.resize(out.len() + wire::AEAD_TAG_LEN, 0);
    s.seal(&mut out);
    Some(out)
}

/// Seals version-2 datagrams of one direction.
pub(crate) struct Sealer {
    key: LessSafeKey,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

impl Sealer {
    pub(crate) fn new(p: &Protection, dir: KeyUse) -> Option<Self> {
        p.key(dir).map(|key| Sealer { key })
    }

    /// Seals a whole unsealed version-2 datagram in place (from `wire::encode_*_framed` with a counter): encrypts
    /// the bytes between header and tag, writes the tag into the last 16 bytes.
    pub(crate) fn seal(&self, dgram: &mut [u8]) {
        let n = dgram.len();
        debug_assert!(n >= wire::AEAD_HEADER_LEN + wire::AEAD_TAG_LEN);
        debug_assert_eq!(dgram[2], wire::VERSION_AEAD);
        let counter = wire::be_u64(dgram, wire::COMMON_LEN);
        let (head, rest) = dgram.split_at_mut(wire::AEAD_HEADER_LEN);
        let (body, tag) = rest.split_at_mut(n - wire::AEAD_HEADER_LEN - wire::AEAD_TAG_LEN);
        let t = self
            .key
            .seal_in_place_separate_tag(nonce(counter), Aad::from(&*head), body)
            .expect("AES-GCM seals any datagram-sized input");
        tag.copy_from_slice(t.as_ref());
    }
}

/// Which counters have been seen: the newest and a bitmap of the [`WINDOW_BITS`] before it.
#[derive(Debug)]
pub(crate) struct ReplayWindow {
    /// One past the newest counter seen.
    next: u64,
    bits: Vec<u64>,
}

impl ReplayWindow {
    fn new() -> Self {
        ReplayWindow {
            next: 0,
            bits: vec![0; (WINDOW_BITS / 64) as usize],
        }
    }

    fn slot(c: u64) -> (usize, u64) {
        let i = c % WINDOW_BITS;
        ((i / 64) as usize, 1 << (i % 64))
    }

    /// Whether `c` may still be new.
    fn check(&self, c: u64) -> Result<(), Reject> {
        if c >= self.next {
            return Ok(());
        }
        if self.next - c > WINDOW_BITS {
            return Err(Reject::Replayed);
        }
        let (w, b) = Self::slot(c);
        if self.bits[w] & b != 0 {
            return Err(Reject::Replayed);
        }
        Ok(())
    }

    /// Records `c` (after it was authenticated).
    fn mark(&mut self, c: u64) {
        if c >= self.next {
            // Forget the slots the window slides over.
            let gap = c - self.next;
            if gap >= WINDOW_BITS {
                self.bits.fill(0);
            } else {
                for k in self.next..=c {
                    let (w, b) = Self::slot(k);
                    self.bits[w] &= !b;
                }
            }
            self.next = c.saturating_add(1);
        }
        let (w, b) = Self::slot(c);
        self.bits[w] |= b;
    }
}

/// Opens version-2 datagrams of one direction into a scratch buffer (rebuilt in the version-1 layout so the
/// one strict parser in `wire` validates them), refusing forgeries and replays.
pub(crate) struct Opener {
    key: LessSafeKey,
    window: ReplayWindow,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener")
            .field("next", &self.window.next)
            .finish_non_exhaustive()
    }
}

impl Opener {
    pub(crate) fn new(p: &Protection, dir: KeyUse) -> Option<Self> {
        p.key(dir).map(|key| Opener {
            key,
            window: ReplayWindow::new(),
            scratch: Vec::with_capacity(2048),
        })
    }

    /// Authenticates, decrypts and parses one datagram of transfer `transfer_id`. The message borrows the
    /// opener's scratch buffer (a data packet's payload is [`payload`](Self::payload) until the next call).
    pub(crate) fn open(&mut self, buf: &[u8], transfer_id: u64) -> Result<Message<'_>, Reject> {
        if buf.len() < wire::COMMON_LEN {
            return Err(Reject::Truncated);
        }
        if wire::be_u16(buf, 0) != wire::MAGIC {
            return Err(Reject::BadMagic);
        }
        match buf[2] {
            wire::VERSION_AEAD => {}
            // Cleartext where protection was agreed: never accepted.
            wire::VERSION => return Err(Reject::AuthFailed),
            _ => return Err(Reject::BadVersion),
        }
        let kind = buf[3];
        wire::min_len(kind)?;
        if buf.len() < wire::AEAD_HEADER_LEN + wire::AEAD_TAG_LEN {
            return Err(Reject::Truncated);
        }
        if buf.len() > wire::MAX_DATAGRAM {
            return Err(Reject::BadLength);
        }
        // The id is associated data: checking it first only sorts stale traffic from forgeries in the counts.
        if wire::be_u64(buf, 8) != transfer_id {
            return Err(Reject::WrongTransfer);
        }
        let counter = wire::be_u64(buf, wire::COMMON_LEN);
        let (head, sealed) = buf.split_at(wire::AEAD_HEADER_LEN);
        self.scratch.clear();
        self.scratch.extend_from_slice(&head[..wire::COMMON_LEN]);
        self.scratch[2] = wire::VERSION;
        self.scratch.extend_from_slice(sealed);
        let plain = self
            .key
            .open_in_place(
                nonce(counter),
                Aad::from(head),
                &mut self.scratch[wire::COMMON_LEN..],
            )
            .map_err(|_| Reject::AuthFailed)?
            .len();
        self.scratch.truncate(wire::COMMON_LEN + plain);
        // The window is consulted only for authentic datagrams, so forgeries count as such and never move it.
        self.window.check(counter)?;
        self.window.mark(counter);
        if wire::be_u32(buf, 4) != 0 {
            return Err(Reject::Malformed);
        }
        wire::parse(&self.scratch, kind)
    }

    /// The payload of the data packet [`open`](Self::open) returned last.
    pub(crate) fn payload(&self) -> &[u8] {
        self.scratch.get(wire::DATA_HEADER_LEN..).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_window() {
        let mut w = ReplayWindow::new();
        for c in [0, 1, 5, 3] {
            assert_eq!(w.check(c), Ok(()));
            w.mark(c);
            assert_eq!(w.check(c), Err(Reject::Replayed));
        }
        assert_eq!(w.check(2), Ok(()));
        assert_eq!(w.check(4), Ok(()));
        w.mark(WINDOW_BITS + 10);
        // Slid past: too old to tell is refused; the slots reused for newer counters start clear.
        assert_eq!(w.check(2), Err(Reject::Replayed));
        assert_eq!(w.check(WINDOW_BITS + 9), Ok(()));
        assert_eq!(w.check(WINDOW_BITS + 11), Ok(()));
        w.mark(3 * WINDOW_BITS);
        assert_eq!(w.check(3 * WINDOW_BITS - 1), Ok(()));
        assert_eq!(w.check(3 * WINDOW_BITS), Err(Reject::Replayed));
    }

    #[test]
    fn key_material_is_not_printed() {
        let p = Protection::Aead(KeyMaterial::new([0x42; 32]));
        assert!(!format!("{p:?}").contains("42"));
    }
}
