//! The GridFTP extended block mode (MODE E, GFD.20) header codec: a 17-byte big-endian header of descriptor (1),
//! byte count (8) and offset (8), and the in-band SBUF descriptors of seed 003 (0x02 request, 0x01 echo).
//! Pure: no sockets. Validation is strict enough that a hostile header can never make a reader allocate or seek
//! past what the caller allows.

use std::fmt;

/// Size of a MODE E block header on the wire.
pub const HEADER_LEN: usize = 17;

/// Descriptor bits (GFD.20 table; 0x02/0x01 from seed 003).
pub mod desc {
    /// End of record (legacy, never sent by drsftp).
    pub const EOR: u8 = 0x80;
    /// End of file: the offset field carries the number of EODs the receiver must see.
    pub const EOF: u8 = 0x40;
    /// Suspected errors in the data block.
    pub const ERRORS: u8 = 0x20;
    /// The block is a restart marker.
    pub const RESTART: u8 = 0x10;
    /// End of data on this connection (it may be reused for the next transfer).
    pub const EOD: u8 = 0x08;
    /// The sender will close this connection after this block.
    pub const CLOSE: u8 = 0x04;
    /// In-band SBUF request (receiver → sender): count = receiver's buffer size, offset = probe id.
    pub const SBUF: u8 = 0x02;
    /// In-band SBUF echo (sender → receiver): count = size the sender applied, offset = probe id.
    pub const SBUF_ECHO: u8 = 0x01;
}

/// One MODE E block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// Descriptor bits, see [`desc`].
    pub descriptor: u8,
    /// Bytes of payload that follow (for EOF: unused, 0; for SBUF blocks: the buffer size, no payload follows).
    pub count: u64,
    /// File offset of the payload (for EOF: the expected EOD count; for SBUF blocks: the probe id).
    pub offset: u64,
}

/// Why a header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// The payload count is above what the receiver accepts in one block.
    #[error("MODE E block of {count} bytes exceeds the {max}-byte limit")]
    CountTooLarge {
        /// Announced count.
        count: u64,
        /// Receiver's limit.
        max: u64,
    },
    /// `offset + count` overflows or runs past the receiver's allowed end.
    #[error("MODE E block at offset {offset} (+{count}) is outside the transfer (limit {limit})")]
    OutOfRange {
        /// Announced offset.
        offset: u64,
        /// Announced count.
        count: u64,
        /// Receiver's allowed end.
        limit: u64,
    },
    /// An EOF header announcing zero or an absurd number of data connections.
    #[error("MODE E EOF announces {0} data connections")]
    BadEodCount(u64),
    /// Descriptor bits drsftp does not understand (restart/record blocks) or an SBUF block the peer did not
    /// negotiate.
    #[error("unsupported MODE E descriptor 0x{0:02x}")]
    Unsupported(u8),
}

/// What a receiver will accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest payload in one block.
    pub max_block: u64,
    /// Blocks must satisfy `offset + count <= max_end`.
    pub max_end: u64,
    /// Largest EOD count in an EOF header.
    pub max_eod_count: u64,
    /// Accept in-band SBUF request/echo blocks (only when negotiated).
    pub sbuf: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_block: 64 << 20,
            max_end: u64::MAX,
            max_eod_count: 4096,
            sbuf: false,
        }
    }
}

/// A validated header, classified for the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// `count` bytes of payload follow for `offset`. `eod`: last block on this connection; `eof`: with
    /// `eod_count` EODs expected in total (only on one connection).
    Data {
        /// File offset.
        offset: u64,
        /// Payload bytes that follow.
        count: u64,
        /// End of data on this connection.
        eod: bool,
        /// Total number of EODs expected, if this header carries EOF.
        eof: Option<u64>,
        /// The sender will close after this block.
        close: bool,
    },
    /// In-band SBUF request: the receiver's buffer size and probe id.
    SbufRequest {
        /// Receiver's buffer size.
        size: u64,
        /// Probe id.
        id: u64,
    },
    /// In-band SBUF echo.
    SbufEcho {
        /// Size the sender applied.
        size: u64,
        /// Probe id.
        id: u64,
    },
}

impl Header {
    /// A data block header.
    pub fn data(offset: u64, count: u64) -> Self {
        Header {
            descriptor: 0,
            count,
            offset,
        }
    }

    /// The EOF|EOD header that tells the receiver to expect `eod_count` EODs in total.
    pub fn eof(eod_count: u64) -> Self {
        Header {
            descriptor: desc::EOF | desc::EOD,
            count: 0,
            offset: eod_count,
        }
    }

    /// A bare EOD header (this connection is done for this transfer).
    pub fn eod() -> Self {
        Header {
            descriptor: desc::EOD,
            count: 0,
            offset: 0,
        }
    }

    /// In-band SBUF request (receiver → sender).
    pub fn sbuf_request(size: u64, id: u64) -> Self {
        Header {
            descriptor: desc::SBUF,
            count: size,
            offset: id,
        }
    }

    /// In-band SBUF echo (sender → receiver).
    pub fn sbuf_echo(size: u64, id: u64) -> Self {
        Header {
            descriptor: desc::SBUF_ECHO,
            count: size,
            offset: id,
        }
    }

    /// Encode to the 17 wire bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.descriptor;
        b[1..9].copy_from_slice(&self.count.to_be_bytes());
        b[9..17].copy_from_slice(&self.offset.to_be_bytes());
        b
    }

    /// Decode 17 wire bytes (no validation; see [`Header::classify`]).
    pub fn decode(b: &[u8; HEADER_LEN]) -> Self {
        let mut c = [0u8; 8];
        let mut o = [0u8; 8];
        c.copy_from_slice(&b[1..9]);
        o.copy_from_slice(&b[9..17]);
        Header {
            descriptor: b[0],
            count: u64::from_be_bytes(c),
            offset: u64::from_be_bytes(o),
        }
    }

    /// Is `bit` set?
    pub fn has(&self, bit: u8) -> bool {
        self.descriptor & bit != 0
    }

    /// Validate against `limits` and classify for the receiver.
    pub fn classify(&self, limits: &Limits) -> Result<Block, HeaderError> {
        let d = self.descriptor;
        if d == desc::SBUF || d == desc::SBUF_ECHO {
            if !limits.sbuf {
                return Err(HeaderError::Unsupported(d));
            }
            return Ok(if d == desc::SBUF {
                Block::SbufRequest {
                    size: self.count,
                    id: self.offset,
                }
            } else {
                Block::SbufEcho {
                    size: self.count,
                    id: self.offset,
                }
            });
        }
        if d & (desc::EOR | desc::RESTART | desc::SBUF | desc::SBUF_ECHO) != 0 {
            return Err(HeaderError::Unsupported(d));
        }
        let close = d & desc::CLOSE != 0;
        if d & desc::EOF != 0 {
            let n = self.offset;
            if n == 0 || n > limits.max_eod_count {
                return Err(HeaderError::BadEodCount(n));
            }
            // An EOF header carries no payload; its offset field is the EOD count.
            if self.count != 0 {
                return Err(HeaderError::CountTooLarge {
                    count: self.count,
                    max: 0,
                });
            }
            return Ok(Block::Data {
                offset: 0,
                count: 0,
                eod: d & desc::EOD != 0,
                eof: Some(n),
                close,
            });
        }
        if self.count > limits.max_block {
            return Err(HeaderError::CountTooLarge {
                count: self.count,
                max: limits.max_block,
            });
        }
        match self.offset.checked_add(self.count) {
            Some(end) if end <= limits.max_end => {}
            _ => {
                return Err(HeaderError::OutOfRange {
                    offset: self.offset,
                    count: self.count,
                    limit: limits.max_end,
                })
            }
        }
        Ok(Block::Data {
            offset: self.offset,
            count: self.count,
            eod: d & desc::EOD != 0,
            eof: None,
            close,
        })
    }
}

impl fmt::Display for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "desc=0x{:02x} count={} offset={}",
            self.descriptor, self.count, self.offset
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn globus_eof_header_bytes() {
        // What Globus sends on the connection that carries EOF with 3 streams (globus-peer.md §5.3).
        let h = Header::eof(3);
        let b = h.encode();
        assert_eq!(b[0], 0x48);
        assert_eq!(&b[1..9], &[0; 8]);
        assert_eq!(&b[9..17], &[0, 0, 0, 0, 0, 0, 0, 3]);
        assert_eq!(
            h.classify(&Limits::default()).unwrap(),
            Block::Data {
                offset: 0,
                count: 0,
                eod: true,
                eof: Some(3),
                close: false
            }
        );
    }

    #[test]
    fn data_header_is_big_endian() {
        let h = Header::data(0x0102_0304_0506_0708, 0x40000);
        let b = h.encode();
        assert_eq!(b[0], 0);
        assert_eq!(&b[1..9], &[0, 0, 0, 0, 0, 4, 0, 0]);
        assert_eq!(&b[9..17], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(Header::decode(&b), h);
    }

    #[test]
    fn absurd_headers_are_refused() {
        let l = Limits {
            max_block: 1 << 20,
            max_end: 1 << 30,
            ..Limits::default()
        };
        assert!(matches!(
            Header::data(0, u64::MAX).classify(&l),
            Err(HeaderError::CountTooLarge { .. })
        ));
        assert!(matches!(
            Header::data(u64::MAX - 5, 100).classify(&l),
            Err(HeaderError::OutOfRange { .. })
        ));
        assert!(matches!(
            Header::data(1 << 30, 1).classify(&l),
            Err(HeaderError::OutOfRange { .. })
        ));
        assert_eq!(
            Header::eof(0).classify(&l),
            Err(HeaderError::BadEodCount(0))
        );
        assert_eq!(
            Header::eof(1 << 40).classify(&l),
            Err(HeaderError::BadEodCount(1 << 40))
        );
        assert_eq!(
            Header {
                descriptor: desc::RESTART,
                count: 10,
                offset: 0
            }
            .classify(&l),
            Err(HeaderError::Unsupported(desc::RESTART))
        );
    }

    #[test]
    fn sbuf_blocks_only_when_negotiated() {
        let h = Header::sbuf_request(1 << 20, 7);
        assert_eq!(
            h.classify(&Limits::default()),
            Err(HeaderError::Unsupported(desc::SBUF))
        );
        let l = Limits {
            sbuf: true,
            ..Limits::default()
        };
        assert_eq!(
            h.classify(&l),
            Ok(Block::SbufRequest {
                size: 1 << 20,
                id: 7
            })
        );
        assert_eq!(
            Header::sbuf_echo(5, 7).classify(&l),
            Ok(Block::SbufEcho { size: 5, id: 7 })
        );
    }

    proptest! {
        #[test]
        fn roundtrip(d in any::<u8>(), c in any::<u64>(), o in any::<u64>()) {
            let h = Header { descriptor: d, count: c, offset: o };
            prop_assert_eq!(Header::decode(&h.encode()), h);
        }

        #[test]
        fn classify_never_panics_and_respects_limits(
            d in any::<u8>(), c in any::<u64>(), o in any::<u64>(), end in 1u64..u64::MAX
        ) {
            let l = Limits { max_block: 1 << 24, max_end: end, max_eod_count: 64, sbuf: false };
            if let Ok(Block::Data { offset, count, eof: None, .. }) = (Header { descriptor: d, count: c, offset: o }).classify(&l) {
                prop_assert!(count <= 1 << 24);
                prop_assert!(offset + count <= end);
            }
        }
    }
}
