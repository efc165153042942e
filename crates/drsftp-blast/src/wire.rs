//! The blast wire format: transfer parameters (packet size from the path MTU), fixed-size numbered data packets,
//! selective-ack chunks (bitmap or run-length body), the final complete message, and their strict decoder.
//!
//! All integers are big-endian. Every datagram starts with the same 16-byte common header and is protected by a
//! CRC32C computed over the whole datagram except the CRC field itself:
//!
//! ```text
//! common   0 magic u16 = 0xB1A5 | 2 version u8 = 1 | 3 kind u8 | 4 crc32c u32 | 8 transfer_id u64
//! data    16 seq u64 | 24 tx u32 | 28 send_ts_us u32 | 32 payload_len u16 | 34 flags u8 | 35 reserved u8 | 36 payload
//! ack     16 generation u64 | 24 cum u64 | 32 distinct u64 | 40 rx_total u64 | 48 dups u64
//!         56 largest_tx u32 | 60 echo_ts_us u32 | 64 hold_us u32
//!         68 iv_tx u32 | 72 iv_pkts u32 | 76 iv_rx_us u32 | 80 iv_send_us u32
//!         84 chunk_index u16 | 86 chunk_count u16 | 88 encoding u8 | 89 flags u8 | 90 body_len u16
//!         92 chunk_start u64 | 100 chunk_span u64 | 108 body
//! complete 16 total_packets u64 | 24 rx_total u64 | 32 dups u64
//! ```
//!
//! * `seq` numbers the fixed-size packets of the file (packet `seq` holds bytes `seq × payload_size ..`); `tx`
//!   numbers transmissions (every send, including retransmissions, gets the next `tx`, wrapping at 2³²), so the
//!   receiver can tell the sender the newest transmission it has seen and the sender can detect loss and measure
//!   the delivery rate independently of which packet was carried.
//! * An ack describes the receiver's state: every packet below `cum` is held, and chunk `[start, start + span)`
//!   is given either as a bitmap (bit i = packet start + i held) or as alternating LEB128 run lengths starting
//!   with a run of missing packets. A large state is split into several chunks of one generation, each a
//!   self-contained datagram carrying the same summary (delivery-rate sample, echo timestamp for RTT).
//! * Decoding never panics, never allocates and validates every length against the datagram size.
//!
//! Under TLS (`PROT P`) every datagram is instead sealed with AES-128-GCM (version 2, `crate::crypt`):
//!
//! ```text
//! aead     0 magic u16 = 0xB1A5 | 2 version u8 = 2 | 3 kind u8 | 4 reserved u32 = 0 | 8 transfer_id u64
//!         16 counter u64 | 24 ciphertext of the version-1 bytes from offset 16 on | tag (16 bytes)
//! ```
//!
//! Bytes 0..24 are the associated data, the nonce is `0u32 ‖ counter`, the tag replaces the CRC (24 bytes more
//! per datagram than version 1). Keys come from the control connection's TLS exporter, one per direction (data,
//! acks), and the counter never repeats under one key: data packets use the 64-bit transmission number (a
//! resend is a new transmission), the receiver numbers its ack and complete datagrams.

use crate::error::{ConfigError, Reject};

pub const MAGIC: u16 = 0xB1A5;
pub const VERSION: u8 = 1;
/// Version of the AEAD-sealed format (module docs).
pub const VERSION_AEAD: u8 = 2;
/// AEAD header bytes before the ciphertext: the common header plus the 64-bit counter.
pub const AEAD_HEADER_LEN: usize = COMMON_LEN + 8;
/// AES-GCM tag bytes.
pub const AEAD_TAG_LEN: usize = 16;
/// Extra bytes of an AEAD datagram over the same message in version 1 (counter + tag; the CRC field stays, zero).
pub const AEAD_OVERHEAD: usize = 8 + AEAD_TAG_LEN;
/// IPv4 (20) + UDP (8) header bytes, counted in wire rates.
pub const IP_UDP_OVERHEAD: usize = 28;
pub const COMMON_LEN: usize = 16;
pub const DATA_HEADER_LEN: usize = 36;
pub const ACK_HEADER_LEN: usize = 108;
pub const COMPLETE_LEN: usize = 40;
/// Largest UDP payload over IPv4.
pub const MAX_DATAGRAM: usize = 65_507;
pub const MAX_PAYLOAD: usize = MAX_DATAGRAM - DATA_HEADER_LEN;
/// Largest transfer in packets (a 128 MiB bitmap); larger transfers need bigger packets.
pub const MAX_PACKETS: u64 = 1 << 30;

pub const KIND_DATA: u8 = 1;
pub const KIND_ACK: u8 = 2;
pub const KIND_COMPLETE: u8 = 3;

/// Data flag: the sender is about to go idle; acknowledge at once instead of waiting for the ack frequency.
pub const FLAG_ACK_NOW: u8 = 0x01;
const ACK_HAS_TX: u8 = 0x01;
const ACK_HAS_SAMPLE: u8 = 0x02;
const ENC_NONE: u8 = 0;
const ENC_BITMAP: u8 = 1;
const ENC_RUNS: u8 = 2;

/// Payload bytes per data packet for a path MTU: `mtu − 28 (IPv4+UDP) − 36 (blast header)`.
pub fn payload_size_for_mtu(mtu: usize) -> Result<usize, ConfigError> {
    let p = mtu
        .checked_sub(IP_UDP_OVERHEAD + DATA_HEADER_LEN)
        .filter(|&p| p >= 1)
        .ok_or(ConfigError::Mtu(mtu))?;
    Ok(p.min(MAX_PAYLOAD))
}

/// Payload bytes per data packet for a path MTU with AEAD protection: [`payload_size_for_mtu`] − 24.
pub fn payload_size_for_mtu_aead(mtu: usize) -> Result<usize, ConfigError> {
    let p = mtu
        .checked_sub(IP_UDP_OVERHEAD + DATA_HEADER_LEN + AEAD_OVERHEAD)
        .filter(|&p| p >= 1)
        .ok_or(ConfigError::Mtu(mtu))?;
    Ok(p.min(MAX_PAYLOAD - AEAD_OVERHEAD))
}

/// What both ends agree on before the first datagram (through the control channel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferParams {
    /// Random per transfer, so stale or foreign datagrams are rejected.
    pub transfer_id: u64,
    pub total_bytes: u64,
    /// Payload bytes of every packet but the last.
    pub payload_size: usize,
}

impl TransferParams {
    pub fn new(
        transfer_id: u64,
        total_bytes: u64,
        payload_size: usize,
    ) -> Result<Self, ConfigError> {
        if payload_size == 0 || payload_size > MAX_PAYLOAD {
            return Err(ConfigError::PayloadSize(payload_size));
        }
        let p = TransferParams {
            transfer_id,
            total_bytes,
            payload_size,
        };
        if p.total_packets() > MAX_PACKETS {
            return Err(ConfigError::TooManyPackets(p.total_packets()));
        }
        Ok(p)
    }

    /// Parameters with the payload size derived from the path MTU.
    pub fn for_mtu(transfer_id: u64, total_bytes: u64, mtu: usize) -> Result<Self, ConfigError> {
        Self::new(transfer_id, total_bytes, payload_size_for_mtu(mtu)?)
    }

    pub fn total_packets(&self) -> u64 {
        self.total_bytes.div_ceil(self.payload_size as u64)
    }

    /// Byte offset of packet `seq` in the file.
    pub fn offset(&self, seq: u64) -> u64 {
        seq * self.payload_size as u64
    }

    /// Payload length of packet `seq` (the last one may be short); 0 beyond the end.
    pub fn packet_len(&self, seq: u64) -> usize {
        let off = self.offset(seq.min(self.total_packets()));
        (self.total_bytes - off).min(self.payload_size as u64) as usize
    }

    /// Parameters with the payload size derived from the path MTU, leaving room for the AEAD counter and tag
    /// when `aead` (so sealed datagrams still fit the MTU).
    pub fn for_mtu_with(
        transfer_id: u64,
        total_bytes: u64,
        mtu: usize,
        aead: bool,
    ) -> Result<Self, ConfigError> {
        let p = if aead {
            payload_size_for_mtu_aead(mtu)?
        } else {
            payload_size_for_mtu(mtu)?
        };
        Self::new(transfer_id, total_bytes, p)
    }

    /// Bytes a full-size data packet occupies on the wire, IP and UDP headers included (version 1).
    pub fn wire_len(&self) -> usize {
        self.payload_size + DATA_HEADER_LEN + IP_UDP_OVERHEAD
    }
}

/// A decoded data packet; `payload` borrows the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataPacket<'a> {
    pub seq: u64,
    pub tx: u32,
    pub send_ts: u32,
    pub ack_now: bool,
    pub payload: &'a [u8],
}

/// The receiver's delivery-rate sample between two acks: `tx` transmissions (including lost ones) and `pkts`
/// datagrams arrived over `rx_us` of receiver time, having left the sender over `send_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntervalSample {
    pub tx: u32,
    pub pkts: u32,
    pub rx_us: u32,
    pub send_us: u32,
}

/// The newest transmission the receiver has seen: its `tx`, the sender's timestamp it carried, and how long
/// the receiver held it before this ack (so RTT = now − echo_ts − hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoInfo {
    pub tx: u32,
    pub echo_ts: u32,
    pub hold_us: u32,
}

/// The per-ack summary repeated in every chunk of one generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AckSummary {
    /// Increases with every ack event; chunks of one event share it.
    pub generation: u64,
    /// Every packet below `cum` is held (the cumulative ack point).
    pub cum: u64,
    /// Distinct packets held.
    pub distinct: u64,
    /// Valid data datagrams received, duplicates included.
    pub rx_total: u64,
    /// Duplicates received.
    pub dups: u64,
    pub echo: Option<EchoInfo>,
    pub sample: Option<IntervalSample>,
}

/// The selective-ack body of one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckBody<'a> {
    /// Summary only (`span` 0).
    None,
    /// Bit i (LSB first) = packet `start + i` held; exactly `span.div_ceil(8)` bytes, padding zero.
    Bitmap(&'a [u8]),
    /// Alternating LEB128 run lengths summing to `span`, the first a (possibly empty) run of missing packets.
    Runs(&'a [u8]),
}

/// One ack datagram: summary plus the state of packets `[start, start + span)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckPacket<'a> {
    pub summary: AckSummary,
    pub chunk_index: u16,
    pub chunk_count: u16,
    pub start: u64,
    pub span: u64,
    pub body: AckBody<'a>,
}

/// The receiver holds every packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletePacket {
    pub total_packets: u64,
    pub rx_total: u64,
    pub dups: u64,
}

/// Any decoded datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    Data(DataPacket<'a>),
    Ack(AckPacket<'a>),
    Complete(CompletePacket),
}

pub(crate) fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
pub(crate) fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
pub(crate) fn be_u64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn crc_of(dgram: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&dgram[..4]), &dgram[8..])
}

/// Writes the common header: version 1 (CRC filled in by [`finish`]) without a counter, else version 2 with
/// `counter` (the AEAD form, sealed later by `crate::crypt`).
fn put_common(out: &mut Vec<u8>, kind: u8, transfer_id: u64, counter: Option<u64>) {
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.push(if counter.is_some() {
        VERSION_AEAD
    } else {
        VERSION
    });
    out.push(kind);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&transfer_id.to_be_bytes());
    if let Some(c) = counter {
        out.extend_from_slice(&c.to_be_bytes());
    }
}

fn seal(out: &mut [u8]) {
    let crc = crc_of(out);
    out[4..8].copy_from_slice(&crc.to_be_bytes());
}

/// Ends a datagram begun at `start`: the CRC for version 1, room for the tag for version 2 (still unsealed).
fn finish(out: &mut Vec<u8>, start: usize) {
    if out[start + 2] == VERSION_AEAD {
        out.resize(out.len() + AEAD_TAG_LEN, 0);
    } else {
        seal(&mut out[start..]);
    }
}

/// Append a data datagram to `out`. `fill` writes the `payload_len` payload bytes in place (so file data can be
/// read straight into the send buffer); on error `out` is restored.
pub fn encode_data_with<E>(
    out: &mut Vec<u8>,
    transfer_id: u64,
    pkt: &DataPacket<'_>,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
) -> Result<(), E> {
    encode_data_framed(out, transfer_id, pkt, payload_len, fill, None)
}

/// [`encode_data_with`] in version 1 (`counter` `None`) or as an unsealed version-2 datagram.
pub(crate) fn encode_data_framed<E>(
    out: &mut Vec<u8>,
    transfer_id: u64,
    pkt: &DataPacket<'_>,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    counter: Option<u64>,
) -> Result<(), E> {
    assert!(payload_len <= MAX_PAYLOAD, "payload too large");
    let start = out.len();
    put_common(out, KIND_DATA, transfer_id, counter);
    out.extend_from_slice(&pkt.seq.to_be_bytes());
    out.extend_from_slice(&pkt.tx.to_be_bytes());
    out.extend_from_slice(&pkt.send_ts.to_be_bytes());
    out.extend_from_slice(&(payload_len as u16).to_be_bytes());
    out.push(if pkt.ack_now { FLAG_ACK_NOW } else { 0 });
    out.push(0);
    let body = out.len();
    out.resize(body + payload_len, 0);
    if let Err(e) = fill(&mut out[body..]) {
        out.truncate(start);
        return Err(e);
    }
    finish(out, start);
    Ok(())
}

/// Set the ACK_NOW flag on an encoded data datagram: re-sealing its CRC (version 1), or before it is sealed
/// (version 2: the sender seals its batch last).
pub(crate) fn set_ack_now(dgram: &mut [u8]) {
    if dgram.len() >= DATA_HEADER_LEN && dgram[3] == KIND_DATA {
        if dgram[2] == VERSION_AEAD {
            dgram[34 + AEAD_HEADER_LEN - COMMON_LEN] |= FLAG_ACK_NOW;
        } else {
            dgram[34] |= FLAG_ACK_NOW;
            seal(dgram);
        }
    }
}

/// Append a data datagram carrying `pkt.payload`.
pub fn encode_data(out: &mut Vec<u8>, transfer_id: u64, pkt: &DataPacket<'_>) {
    let p = pkt.payload;
    encode_data_with::<()>(out, transfer_id, pkt, p.len(), |b| {
        b.copy_from_slice(p);
        Ok(())
    })
    .expect("infallible");
}

/// Append one ack chunk datagram.
pub fn encode_ack(out: &mut Vec<u8>, transfer_id: u64, ack: &AckPacket<'_>) {
    encode_ack_framed(out, transfer_id, ack, None)
}

/// [`encode_ack`] in version 1 (`counter` `None`) or as an unsealed version-2 datagram.
pub(crate) fn encode_ack_framed(
    out: &mut Vec<u8>,
    transfer_id: u64,
    ack: &AckPacket<'_>,
    counter: Option<u64>,
) {
    let start = out.len();
    put_common(out, KIND_ACK, transfer_id, counter);
    let s = &ack.summary;
    for v in [s.generation, s.cum, s.distinct, s.rx_total, s.dups] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    let mut flags = 0;
    let e = s.echo.unwrap_or(EchoInfo {
        tx: 0,
        echo_ts: 0,
        hold_us: 0,
    });
    if s.echo.is_some() {
        flags |= ACK_HAS_TX;
    }
    let iv = s.sample.unwrap_or(IntervalSample {
        tx: 0,
        pkts: 0,
        rx_us: 0,
        send_us: 0,
    });
    if s.sample.is_some() {
        flags |= ACK_HAS_SAMPLE;
    }
    for v in [
        e.tx, e.echo_ts, e.hold_us, iv.tx, iv.pkts, iv.rx_us, iv.send_us,
    ] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out.extend_from_slice(&ack.chunk_index.to_be_bytes());
    out.extend_from_slice(&ack.chunk_count.to_be_bytes());
    let (enc, body): (u8, &[u8]) = match ack.body {
        AckBody::None => (ENC_NONE, &[]),
        AckBody::Bitmap(b) => (ENC_BITMAP, b),
        AckBody::Runs(b) => (ENC_RUNS, b),
    };
    assert!(
        body.len() <= MAX_DATAGRAM - ACK_HEADER_LEN,
        "ack body too large"
    );
    out.push(enc);
    out.push(flags);
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(&ack.start.to_be_bytes());
    out.extend_from_slice(&ack.span.to_be_bytes());
    out.extend_from_slice(body);
    finish(out, start);
}

/// Append a complete datagram.
pub fn encode_complete(out: &mut Vec<u8>, transfer_id: u64, c: &CompletePacket) {
    encode_complete_framed(out, transfer_id, c, None)
}

/// [`encode_complete`] in version 1 (`counter` `None`) or as an unsealed version-2 datagram.
pub(crate) fn encode_complete_framed(
    out: &mut Vec<u8>,
    transfer_id: u64,
    c: &CompletePacket,
    counter: Option<u64>,
) {
    let start = out.len();
    put_common(out, KIND_COMPLETE, transfer_id, counter);
    for v in [c.total_packets, c.rx_total, c.dups] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    finish(out, start);
}

/// Append `v` as LEB128.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Encoded size of `v` as LEB128.
pub fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Strict LEB128: at most 10 bytes, no overflow, no redundant trailing zero groups.
fn get_varint(b: &[u8], pos: &mut usize) -> Result<u64, Reject> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let byte = *b.get(*pos).ok_or(Reject::Malformed)?;
        *pos += 1;
        let part = (byte & 0x7f) as u64;
        if i == 9 && byte > 1 {
            return Err(Reject::Malformed);
        }
        v |= part << (7 * i);
        if byte & 0x80 == 0 {
            if i > 0 && byte == 0 {
                return Err(Reject::Malformed);
            }
            return Ok(v);
        }
    }
    Err(Reject::Malformed)
}

fn validate_runs(body: &[u8], span: u64) -> Result<(), Reject> {
    let mut pos = 0;
    let mut sum: u64 = 0;
    let mut first = true;
    while pos < body.len() {
        let r = get_varint(body, &mut pos)?;
        if r == 0 && !first {
            return Err(Reject::Malformed);
        }
        first = false;
        sum = sum.checked_add(r).ok_or(Reject::Malformed)?;
        if sum > span {
            return Err(Reject::Malformed);
        }
    }
    if sum != span {
        return Err(Reject::Malformed);
    }
    Ok(())
}

impl AckPacket<'_> {
    /// The runs of *held* packets in this chunk, as `[a, b)` sequence ranges (validated at decode time).
    pub fn held_runs(&self) -> HeldRuns<'_> {
        HeldRuns {
            body: self.body,
            pos: 0,
            base: self.start,
            at: self.start,
            end: self.start + self.span,
            held: false,
        }
    }
}

/// Iterator over the held runs of an ack chunk (see [`AckPacket::held_runs`]).
pub struct HeldRuns<'a> {
    body: AckBody<'a>,
    /// Byte position (runs) or bit position (bitmap) in the body.
    pos: usize,
    base: u64,
    at: u64,
    end: u64,
    held: bool,
}

impl Iterator for HeldRuns<'_> {
    type Item = (u64, u64);
    fn next(&mut self) -> Option<(u64, u64)> {
        match self.body {
            AckBody::None => None,
            AckBody::Runs(b) => loop {
                if self.pos >= b.len() {
                    return None;
                }
                let r = get_varint(b, &mut self.pos).ok()?;
                let (a, e) = (self.at, self.at.saturating_add(r).min(self.end));
                self.at = e;
                let held = self.held;
                self.held = !held;
                if held && e > a {
                    return Some((a, e));
                }
            },
            AckBody::Bitmap(bytes) => {
                let nbits = (self.end - self.base) as usize;
                let bit = |i: usize| bytes[i / 8] >> (i % 8) & 1 == 1;
                let mut i = self.pos;
                while i < nbits && !bit(i) {
                    i += 1;
                }
                if i >= nbits {
                    self.pos = nbits;
                    return None;
                }
                let a = i;
                while i < nbits && bit(i) {
                    i += 1;
                }
                self.pos = i;
                Some((self.base + a as u64, self.base + i as u64))
            }
        }
    }
}

/// Decode and fully validate one datagram of transfer `transfer_id`. Range checks that need the transfer size
/// (sequence numbers, ack spans) are left to the endpoint.
pub fn decode(buf: &[u8], transfer_id: u64) -> Result<Message<'_>, Reject> {
    if buf.len() < COMMON_LEN {
        return Err(Reject::Truncated);
    }
    if be_u16(buf, 0) != MAGIC {
        return Err(Reject::BadMagic);
    }
    if buf[2] != VERSION {
        return Err(Reject::BadVersion);
    }
    let kind = buf[3];
    let min = min_len(kind)?;
    if buf.len() < min {
        return Err(Reject::Truncated);
    }
    if buf.len() > MAX_DATAGRAM {
        return Err(Reject::BadLength);
    }
    if be_u32(buf, 4) != crc_of(buf) {
        return Err(Reject::BadCrc);
    }
    if be_u64(buf, 8) != transfer_id {
        return Err(Reject::WrongTransfer);
    }
    parse(buf, kind)
}

/// The fixed length of a message kind (version-1 layout), or `UnknownKind`.
pub(crate) fn min_len(kind: u8) -> Result<usize, Reject> {
    match kind {
        KIND_DATA => Ok(DATA_HEADER_LEN),
        KIND_ACK => Ok(ACK_HEADER_LEN),
        KIND_COMPLETE => Ok(COMPLETE_LEN),
        _ => Err(Reject::UnknownKind),
    }
}

/// Parses an authenticated datagram in the version-1 layout (CRC and transfer id already checked, or a
/// decrypted AEAD datagram rebuilt in that layout).
pub(crate) fn parse(buf: &[u8], kind: u8) -> Result<Message<'_>, Reject> {
    if buf.len() < min_len(kind)? {
        return Err(Reject::Truncated);
    }
    match kind {
        KIND_DATA => {
            let len = be_u16(buf, 32) as usize;
            if len != buf.len() - DATA_HEADER_LEN {
                return Err(Reject::BadLength);
            }
            let flags = buf[34];
            if flags & !FLAG_ACK_NOW != 0 || buf[35] != 0 {
                return Err(Reject::Malformed);
            }
            Ok(Message::Data(DataPacket {
                seq: be_u64(buf, 16),
                tx: be_u32(buf, 24),
                send_ts: be_u32(buf, 28),
                ack_now: flags & FLAG_ACK_NOW != 0,
                payload: &buf[DATA_HEADER_LEN..],
            }))
        }
        KIND_ACK => decode_ack(buf).map(Message::Ack),
        _ => {
            if buf.len() != COMPLETE_LEN {
                return Err(Reject::BadLength);
            }
            Ok(Message::Complete(CompletePacket {
                total_packets: be_u64(buf, 16),
                rx_total: be_u64(buf, 24),
                dups: be_u64(buf, 32),
            }))
        }
    }
}

fn decode_ack(buf: &[u8]) -> Result<AckPacket<'_>, Reject> {
    let flags = buf[89];
    if flags & !(ACK_HAS_TX | ACK_HAS_SAMPLE) != 0 {
        return Err(Reject::Malformed);
    }
    let body_len = be_u16(buf, 90) as usize;
    if ACK_HEADER_LEN + body_len != buf.len() {
        return Err(if ACK_HEADER_LEN + body_len > buf.len() {
            Reject::Truncated
        } else {
            Reject::BadLength
        });
    }
    let body = &buf[ACK_HEADER_LEN..];
    let (chunk_index, chunk_count) = (be_u16(buf, 84), be_u16(buf, 86));
    if chunk_count == 0 || chunk_index >= chunk_count {
        return Err(Reject::Malformed);
    }
    let start = be_u64(buf, 92);
    let span = be_u64(buf, 100);
    if start.checked_add(span).is_none() {
        return Err(Reject::SeqOutOfRange);
    }
    let body = match buf[88] {
        ENC_NONE => {
            if span != 0 || !body.is_empty() {
                return Err(Reject::Malformed);
            }
            AckBody::None
        }
        ENC_BITMAP => {
            if span == 0 || body.len() as u64 != span.div_ceil(8) {
                return Err(Reject::Malformed);
            }
            if !span.is_multiple_of(8) && body[body.len() - 1] >> (span % 8) != 0 {
                return Err(Reject::Malformed);
            }
            AckBody::Bitmap(body)
        }
        ENC_RUNS => {
            if span == 0 {
                return Err(Reject::Malformed);
            }
            validate_runs(body, span)?;
            AckBody::Runs(body)
        }
        _ => return Err(Reject::Malformed),
    };
    let echo = (flags & ACK_HAS_TX != 0).then(|| EchoInfo {
        tx: be_u32(buf, 56),
        echo_ts: be_u32(buf, 60),
        hold_us: be_u32(buf, 64),
    });
    let sample = (flags & ACK_HAS_SAMPLE != 0).then(|| IntervalSample {
        tx: be_u32(buf, 68),
        pkts: be_u32(buf, 72),
        rx_us: be_u32(buf, 76),
        send_us: be_u32(buf, 80),
    });
    let summary = AckSummary {
        generation: be_u64(buf, 16),
        cum: be_u64(buf, 24),
        distinct: be_u64(buf, 32),
        rx_total: be_u64(buf, 40),
        dups: be_u64(buf, 48),
        echo,
        sample,
    };
    // (A resumed receiver may hold more packets than it received in this session: no rx_total ≥ distinct.)
    if summary.distinct < summary.cum || summary.dups > summary.rx_total {
        return Err(Reject::Malformed);
    }
    Ok(AckPacket {
        summary,
        chunk_index,
        chunk_count,
        start,
        span,
        body,
    })
}

#[cfg(test)]
mod tests;
