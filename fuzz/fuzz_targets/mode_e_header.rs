//! Fuzz target: the MODE E 17-byte header decoder and validator. Checks: no panic; a header that classifies as a
//! data block lies within the limits; encode(decode(bytes)) gives the same bytes back.
#![no_main]

use drsftp_proto::mode_e::{Block, Header, Limits, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    for chunk in data.chunks_exact(HEADER_LEN) {
        let bytes: &[u8; HEADER_LEN] = chunk.try_into().unwrap();
        let h = Header::decode(bytes);
        assert_eq!(&h.encode(), bytes, "decode/encode round trip");
        if let Ok(Block::Data { offset, count, .. }) = h.classify(&limits) {
            assert!(count <= limits.max_block);
            assert!(offset
                .checked_add(count)
                .is_some_and(|end| end <= limits.max_end));
        }
    }
});
