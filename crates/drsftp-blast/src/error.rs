//! Error types: why an incoming datagram was rejected (`Reject`, counted in `RejectCounts`, never fatal), and the
//! configuration, checkpoint and data-source errors.

/// Why a datagram was dropped. Rejections are counted and otherwise ignored: a blast endpoint never fails because
/// of what arrives on its UDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Reject {
    /// Shorter than its fixed header, or the declared body length runs past the end.
    #[error("truncated datagram")]
    Truncated,
    /// Not a drsftp-blast datagram (magic mismatch).
    #[error("bad magic")]
    BadMagic,
    /// A protocol version we do not speak.
    #[error("unsupported version")]
    BadVersion,
    /// Unknown message kind.
    #[error("unknown message kind")]
    UnknownKind,
    /// CRC32C over header and payload does not match.
    #[error("bad crc")]
    BadCrc,
    /// Valid datagram of another (or a stale) transfer.
    #[error("wrong transfer id")]
    WrongTransfer,
    /// Packet sequence number, ack range or count outside the transfer.
    #[error("sequence out of range")]
    SeqOutOfRange,
    /// Payload length does not match the packet's position in the transfer, or a length field disagrees with
    /// the datagram size.
    #[error("bad length")]
    BadLength,
    /// Reserved bits set, or an ack body that does not decode to exactly its declared span.
    #[error("malformed")]
    Malformed,
    /// An ack whose generation is older than one already processed (reordered or replayed).
    #[error("stale ack generation")]
    StaleAck,
    /// A well-formed message the endpoint does not accept (data at a sender, ack at a receiver).
    #[error("unexpected message kind")]
    UnexpectedKind,
    /// AEAD protection (`PROT P`): the tag does not verify (forged, tampered, wrong key or direction), or a
    /// cleartext (version 1) datagram arrived at a protected endpoint.
    #[error("authentication failed")]
    AuthFailed,
    /// AEAD protection: an authentic datagram whose counter was seen already or is too old to tell (replayed).
    #[error("replayed datagram")]
    Replayed,
}

/// Counters of rejected datagrams, one per [`Reject`] reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RejectCounts {
    pub truncated: u64,
    pub bad_magic: u64,
    pub bad_version: u64,
    pub unknown_kind: u64,
    pub bad_crc: u64,
    pub wrong_transfer: u64,
    pub seq_out_of_range: u64,
    pub bad_length: u64,
    pub malformed: u64,
    pub stale_ack: u64,
    pub unexpected_kind: u64,
    pub auth_failed: u64,
    pub replayed: u64,
}

impl RejectCounts {
    /// Count one rejection.
    pub fn add(&mut self, r: Reject) {
        let c = match r {
            Reject::Truncated => &mut self.truncated,
            Reject::BadMagic => &mut self.bad_magic,
            Reject::BadVersion => &mut self.bad_version,
            Reject::UnknownKind => &mut self.unknown_kind,
            Reject::BadCrc => &mut self.bad_crc,
            Reject::WrongTransfer => &mut self.wrong_transfer,
            Reject::SeqOutOfRange => &mut self.seq_out_of_range,
            Reject::BadLength => &mut self.bad_length,
            Reject::Malformed => &mut self.malformed,
            Reject::StaleAck => &mut self.stale_ack,
            Reject::UnexpectedKind => &mut self.unexpected_kind,
            Reject::AuthFailed => &mut self.auth_failed,
            Reject::Replayed => &mut self.replayed,
        };
        *c += 1;
    }

    /// Total rejections.
    pub fn total(&self) -> u64 {
        self.truncated
            + self.bad_magic
            + self.bad_version
            + self.unknown_kind
            + self.bad_crc
            + self.wrong_transfer
            + self.seq_out_of_range
            + self.bad_length
            + self.malformed
            + self.stale_ack
            + self.unexpected_kind
            + self.auth_failed
            + self.replayed
    }
}

/// Invalid transfer parameters or endpoint configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("payload size {0} out of range (1..={max})", max = crate::wire::MAX_PAYLOAD)]
    PayloadSize(usize),
    #[error("path MTU {0} too small for a blast data packet")]
    Mtu(usize),
    #[error("transfer of {0} packets exceeds the supported maximum")]
    TooManyPackets(u64),
    #[error("invalid setting: {0}")]
    Invalid(&'static str),
    #[error("resume checkpoint: {0}")]
    Checkpoint(#[from] BitmapError),
}

/// A bitmap checkpoint that does not fit the transfer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BitmapError {
    #[error("checkpoint has {got} bytes, expected {expected}")]
    Length { expected: u64, got: u64 },
    #[error("checkpoint has bits set beyond the last packet")]
    Padding,
    #[error("checkpoint covers {got} packets, transfer has {expected}")]
    Packets { expected: u64, got: u64 },
}

/// Errors from [`Sender::poll_transmit`](crate::Sender::poll_transmit).
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The data source could not provide a packet's payload.
    #[error("reading payload at offset {offset}: {source}")]
    Source {
        offset: u64,
        #[source]
        source: std::io::Error,
    },
}
