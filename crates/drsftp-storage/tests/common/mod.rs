//! Helpers the storage test suites share (race.rs keeps its own, tolerant reader: mid-race reads may fail).

use drsftp_storage::FileHandle;

/// The whole file behind `h`, read with positioned reads; panics on an error or a file shorter than its length.
pub fn read_all(h: &dyn FileHandle) -> Vec<u8> {
    let mut out = vec![0u8; h.len().unwrap() as usize];
    let mut pos = 0;
    while pos < out.len() {
        let n = h.read_at(&mut out[pos..], pos as u64).unwrap();
        assert!(n > 0, "short file");
        pos += n;
    }
    out
}
